package exporter_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// TestUnlinkedOpenFilesOnOwnTmpfs: a file deleted but held open (`exec 3>f; rm f; cat
// /dev/zero >&3`) is reached by no name, so no walk counts it. On a memory volume, a tmpfs of
// its own, the filesystem's usage counts it all the same: the exporter publishes the part of
// that usage its walk does not explain, for as long as the file is held, and nothing once it is
// closed. On a disk volume, a directory of the node's filesystem, nothing can be attributed.
func TestUnlinkedOpenFilesOnOwnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	const mib = 1 << 20
	root := t.TempDir()
	pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-p", Parts: []part.Part{
		{Name: "shm", Medium: part.MediumMemory}, {Name: "scratch", Medium: part.MediumDisk}}}
	shm, scratch := part.EmptyDirPath(root, pod.UID, "shm"), part.EmptyDirPath(root, pod.UID, "scratch")
	for _, dir := range []string{shm, scratch} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(shm, unix.MNT_DETACH) })
	held := map[string]*os.File{}
	for _, dir := range []string{shm, scratch} {
		if err := os.WriteFile(filepath.Join(dir, "named"), make([]byte, mib), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "gone"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		if err := os.Remove(f.Name()); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, 3*mib)); err != nil {
			t.Fatal(err)
		}
		held[dir] = f
	}

	src := source.DefaultFilesystem()
	src.KubeletRootDir = root
	e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(pod)})
	e.Refresh(context.Background())
	const help = `# HELP emptydir_unexplained_bytes Bytes of a memory volume's tmpfs that no name leads to: deleted files held open.
# TYPE emptydir_unexplained_bytes gauge
`
	want := help + `emptydir_unexplained_bytes{medium="memory",namespace="ns",node="node-1",pod="p",uid="uid-p",volume="shm"} 3.145728e+06
`
	if err := testutil.GatherAndCompare(atTheDefaults(t, e), strings.NewReader(want), "emptydir_unexplained_bytes"); err != nil {
		t.Errorf("a 3MiB file deleted but held open: %v", err)
	}
	// The tmpfs's usage counts the held file (the kernel holds it to the tmpfs's size too).
	if got := usedBytes(t, e, "shm"); got != 4*mib {
		t.Errorf("memory volume: emptydir_used_bytes %v, want the 4MiB the tmpfs holds", got)
	}

	for _, f := range held {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e.Refresh(context.Background())
	if n, err := testutil.GatherAndCount(atTheDefaults(t, e), "emptydir_unexplained_bytes"); err != nil || n != 0 {
		t.Errorf("%d unexplained series (%v) once the file is closed, want none", n, err)
	}
}

// usedBytes is the published emptydir_used_bytes of volume.
func usedBytes(t *testing.T, e *exporter.Exporter, volume string) float64 {
	t.Helper()
	mfs, err := atTheDefaults(t, e).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "emptydir_used_bytes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "volume" && l.GetValue() == volume {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no emptydir_used_bytes for volume %s", volume)
	return 0
}
