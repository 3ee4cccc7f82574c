package exporter_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// TestUnlinkedOpenFilesOnDiskVolume: a pod's process deletes a file in its disk volume, which
// it reaches through a bind mount of the volume's directory as a container does, and keeps
// writing to it. No walk sees it; with --collection.open-files the volume's usage counts it,
// once however many descriptors and processes hold it, and nothing a process holds open
// outside the volume on the same filesystem; at the defaults the exporter says it does not
// count such files. The live measurement, which the remediator evicts on, counts it too.
func TestUnlinkedOpenFilesOnDiskVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind-mounting the volume as a container sees it needs root")
	}
	const mib = 1 << 20
	root, tmp := t.TempDir(), t.TempDir()
	pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-p", QOSClass: "BestEffort",
		Parts: []part.Part{{Name: "scratch", Medium: part.MediumDisk}}}
	scratch := part.EmptyDirPath(root, pod.UID, "scratch")
	mnt, elsewhere := filepath.Join(tmp, "mnt"), filepath.Join(root, "elsewhere")
	for _, dir := range []string{scratch, mnt, elsewhere} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(scratch, "named"), make([]byte, mib), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(scratch, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting the volume: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })

	// 5MiB held by fds 3 and 4 of two processes (the background sleep inherits them), 2MiB
	// deleted from another directory of the same filesystem and held by fd 5.
	held := startHolder(t, `exec 3>"$1/gone" 4<"$1/gone" 5>"$2/other"; rm "$1/gone" "$2/other"
head -c 5242880 /dev/zero >&3; head -c 2097152 /dev/zero >&5; sync
sleep 1000 & echo $!; echo ready; exec sleep 1000`, mnt, elsewhere)
	cgroup := filepath.Join(t.TempDir(), "kubepods", "besteffort", "poduid-p")
	if err := os.MkdirAll(filepath.Join(cgroup, "ctr"), 0o755); err != nil {
		t.Fatal(err)
	}
	for dir, pids := range map[string][]int{cgroup: nil, filepath.Join(cgroup, "ctr"): held.pids} {
		var b strings.Builder
		for _, pid := range pids {
			fmt.Fprintln(&b, pid)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	plain := source.DefaultFilesystem()
	plain.KubeletRootDir = root
	counting := plain
	counting.OpenFiles = &source.OpenFiles{Proc: "/proc", Procs: func(part.Pod) ([]int, error) {
		return podcgroup.ReadProcs(cgroup)
	}}
	atDefaults := newTestExporterWith(t, exporter.Config{Source: &plain, Pods: exportertest.NewPods(pod)})
	e := newTestExporterWith(t, exporter.Config{Source: &counting, Pods: exportertest.NewPods(pod)})
	atDefaults.Refresh(context.Background())
	e.Refresh(context.Background())

	walked := usedBytes(t, atDefaults, "scratch")
	if got := usedBytes(t, e, "scratch"); got != walked+5*mib {
		t.Errorf("emptydir_used_bytes %v, want the walk's %v plus the 5MiB held open in the volume, once (not the 2MiB held elsewhere)", got, walked)
	}
	want := `# HELP emptydir_unlinked_open_bytes Bytes of files deleted from the disk volume but held open, included in emptydir_used_bytes.
# TYPE emptydir_unlinked_open_bytes gauge
emptydir_unlinked_open_bytes{medium="disk",namespace="ns",node="node-1",pod="p",uid="uid-p",volume="scratch"} 5.24288e+06
`
	if err := testutil.GatherAndCompare(atTheDefaults(t, e), strings.NewReader(want), "emptydir_unlinked_open_bytes"); err != nil {
		t.Error(err)
	}
	assertOpenFilesVolumes(t, e, "counted")
	assertOpenFilesVolumes(t, atDefaults, "off")
	if n, err := testutil.GatherAndCount(atTheDefaults(t, atDefaults), "emptydir_unlinked_open_bytes"); err != nil || n != 0 {
		t.Errorf("%d emptydir_unlinked_open_bytes series (%v) at the defaults, want none", n, err)
	}

	// What the remediator re-checks before it evicts.
	live, err := counting.MeasurePartLive(context.Background(), pod, pod.Parts[0], nil)
	if err != nil || float64(live.UsedBytes) != walked+5*mib {
		t.Errorf("live measurement %d (%v), want %v", live.UsedBytes, err, walked+5*mib)
	}

	held.stop(t)
	e.Refresh(context.Background())
	if got := usedBytes(t, e, "scratch"); got != walked {
		t.Errorf("emptydir_used_bytes %v once the processes ended, want the walk's %v", got, walked)
	}
	if n, err := testutil.GatherAndCount(atTheDefaults(t, e), "emptydir_unlinked_open_bytes"); err != nil || n != 0 {
		t.Errorf("%d emptydir_unlinked_open_bytes series (%v) once the file is closed, want none", n, err)
	}
}

// TestUnlinkedOpenFilesUnreadable: processes the exporter cannot name (no hostPID) leave the
// usage a lower bound, which it says.
func TestUnlinkedOpenFilesUnreadable(t *testing.T) {
	root := t.TempDir()
	pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-p", QOSClass: "BestEffort",
		Parts: []part.Part{{Name: "scratch", Medium: part.MediumDisk}}}
	if err := os.MkdirAll(part.EmptyDirPath(root, pod.UID, "scratch"), 0o755); err != nil {
		t.Fatal(err)
	}
	cgroup := t.TempDir()
	if err := os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte("0\n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := source.DefaultFilesystem()
	src.KubeletRootDir = root
	src.OpenFiles = &source.OpenFiles{Proc: "/proc", Procs: func(part.Pod) ([]int, error) {
		return podcgroup.ReadProcs(cgroup)
	}}
	e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(pod)})
	e.Refresh(context.Background())
	assertOpenFilesVolumes(t, e, "unreadable")
}

// assertOpenFilesVolumes checks that e's one walked volume has outcome.
func assertOpenFilesVolumes(t *testing.T, e *exporter.Exporter, outcome string) {
	t.Helper()
	want := `# HELP emptydir_exporter_open_files_volumes Walked emptyDir volumes, by whether their pods' deleted but open files were counted.
# TYPE emptydir_exporter_open_files_volumes gauge
emptydir_exporter_open_files_volumes{node="node-1",outcome="` + outcome + `"} 1
`
	if err := testutil.GatherAndCompare(atTheDefaults(t, e), strings.NewReader(want), "emptydir_exporter_open_files_volumes"); err != nil {
		t.Errorf("outcome %s: %v", outcome, err)
	}
}

// holder is a shell and the process it started in the background, in a process group of their own.
type holder struct {
	cmd  *exec.Cmd
	pids []int
}

// startHolder runs script (sh -c, with args) in a process group of its own; it prints the
// background process's ID, then "ready". The group is killed on cleanup.
func startHolder(t *testing.T, script string, args ...string) *holder {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, pids: []int{cmd.Process.Pid}}
	t.Cleanup(func() { h.stop(t) })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("holder printed %q", sc.Text())
		}
		h.pids = append(h.pids, pid)
	}
	if len(h.pids) != 2 {
		t.Fatalf("holder did not get ready: %v", sc.Err())
	}
	return h
}

// stop kills the holder's process group and waits for the shell.
func (h *holder) stop(t *testing.T) {
	t.Helper()
	if h.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	_ = h.cmd.Wait()
	// The background sleep is the shell's child: reparented, it is reaped by init; wait
	// until it is gone, so that nothing holds the file.
	for _, pid := range h.pids[1:] {
		for syscall.Kill(pid, 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
