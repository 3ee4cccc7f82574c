package openfiles

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/internal/denywrites"
)

// TestMain serves as the helper (HelperArg) or as a Landlock-restricted exporter
// (landlockedEnv) when the tests start their own binary so.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], HelperArg) {
		if err := ServeHelper(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(pidNSEnv) != "" {
		fmt.Println(InInitialPIDNamespace())
		os.Exit(0)
	}
	if arg := os.Getenv(landlockedEnv); arg != "" {
		os.Exit(landlocked(arg))
	}
	os.Exit(m.Run())
}

const (
	landlockedEnv = "OPENFILES_TEST_LANDLOCKED"
	pidNSEnv      = "OPENFILES_TEST_PIDNS"
)

// landlocked starts a helper, restricts itself with Landlock as the exporter does, then counts
// the unlinked open files of pid on dev both itself and through the helper.
func landlocked(arg string) int {
	pidS, devS, _ := strings.Cut(arg, ":")
	pid, _ := strconv.Atoi(pidS)
	dev, _ := strconv.ParseUint(devS, 10, 64)
	h, err := StartHelper()
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	defer h.Close()
	if err := denywrites.Apply(); err != nil {
		fmt.Println("landlock:", err)
		return 1
	}
	t := Target{Dev: dev, Root: "/"}
	_, err = Count("/proc", []int{pid}, t)
	fmt.Println("in process denied:", errors.Is(err, ErrDenied))
	u, err := h.Count(context.Background(), "/proc", []int{pid}, t)
	fmt.Println("helper:", u.Bytes, u.Files, err)
	return 0
}

// TestHelperOutsideLandlock: the exporter restricted by Landlock cannot read another process's
// descriptors itself; the helper it started before can.
func TestHelperOutsideLandlock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading another user's descriptors needs root; the exporter runs as uid 0")
	}
	dir := t.TempDir()
	pid, stop := hold(t, `exec 3>"$1/gone"; rm "$1/gone"; head -c 1048576 /dev/zero >&3; sync; echo ready; exec sleep 1000`, dir)
	defer stop()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d", landlockedEnv, pid, st.Dev))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "landlock:") {
		t.Skipf("no Landlock here: %s", out)
	}
	want := "in process denied: true\nhelper: 1048576 1 <nil>\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestTargetOfBindMount: a directory's Target is its path from its filesystem's root, whichever
// mount it is reached through; a process's descriptor counts only through a mount whose root
// is the directory or below it.
func TestTargetOfBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind-mounting needs root")
	}
	base := t.TempDir()
	vol, mnt := filepath.Join(base, "vol"), filepath.Join(base, "mnt")
	for _, d := range []string{filepath.Join(vol, "sub"), mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(vol, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) }()
	direct, err := TargetOf(vol)
	if err != nil {
		t.Fatal(err)
	}
	through, err := TargetOf(filepath.Join(mnt, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if through.Dev != direct.Dev || through.Root != direct.Root+"/sub" || !strings.HasSuffix(direct.Root, "/vol") {
		t.Errorf("TargetOf(%s) %+v, TargetOf(%s/sub) %+v", vol, direct, mnt, through)
	}

	// Held through the bind mount of sub (below the directory) and through the node's own mount
	// of the directory (whose root is above it): only the first counts.
	sub := filepath.Join(base, "submnt")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(filepath.Join(vol, "sub"), sub, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(sub, unix.MNT_DETACH) }()
	pid, stop := hold(t, `exec 3>"$1/a" 4>"$2/b"; rm "$1/a" "$2/b"; head -c 65536 /dev/zero >&3; head -c 131072 /dev/zero >&4; sync; echo ready; exec sleep 1000`, sub, vol)
	defer stop()
	gone := exec.Command("true") // a process that ended: skipped
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	u, err := Count("/proc", []int{gone.Process.Pid, pid}, direct)
	if err != nil || u.Bytes != 65536 || u.Files != 1 {
		t.Errorf("Count = %+v, %v; want the 64KiB held through the bind mount of sub", u, err)
	}
}

func TestParseMountinfo(t *testing.T) {
	b := []byte("36 35 98:0 /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/a\\040b /data rw,noatime master:1 - ext4 /dev/root rw\n" +
		"37 36 0:52 / /proc rw - proc proc rw\n")
	got, err := parseMountinfo(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []mount{{id: 36, dev: unix.Mkdev(98, 0), root: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/a b", point: "/data"},
		{id: 37, dev: unix.Mkdev(0, 52), root: "/", point: "/proc"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseMountinfo = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		p, dir string
		want   bool
	}{{"/a/b", "/a/b", true}, {"/a/b/c", "/a/b", true}, {"/a/bc", "/a/b", false}, {"/a", "/a/b", false}, {"/x", "/", true}} {
		if got := within(c.p, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v", c.p, c.dir, got)
		}
	}
}

// hold runs script (sh -c, args) in a process group of its own until it prints "ready"; stop
// kills the group.
func hold(t *testing.T, script string, args ...string) (int, func()) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		stop()
		t.Fatalf("holder: %q", line)
	}
	return cmd.Process.Pid, stop
}

// TestInInitialPIDNamespace: this test runs in the node's PID namespace; a child in a new one
// does not.
func TestInInitialPIDNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a new PID namespace needs root")
	}
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || self != fmt.Sprintf("pid:[%d]", initialPIDNamespaceIno) {
		t.Skipf("the tests run in PID namespace %q (%v), not the initial one", self, err)
	}
	if !InInitialPIDNamespace() {
		t.Error("not in the initial PID namespace")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), pidNSEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.Output()
	if err != nil || string(out) != "false\n" {
		t.Errorf("a child in a new PID namespace says %q (%v), want false", out, err)
	}
}

// TestHelperContext: a request whose context has ended is not sent and leaves the helper
// answering (a walk cut short by its deadline must not stop it); a closed helper answers no
// more.
func TestHelperContext(t *testing.T) {
	h, err := StartHelper()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Count(ctx, "/proc", []int{os.Getpid()}, Target{Root: "/"}); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v", err)
	}
	if _, err := h.Count(context.Background(), "/proc", []int{os.Getpid()}, Target{Root: "/"}); err != nil {
		t.Errorf("after an ended context the helper answers no more: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Count(context.Background(), "/proc", []int{os.Getpid()}, Target{Root: "/"}); err == nil {
		t.Error("a closed helper answers")
	}
}

// TestCountBoundsDescriptors: a count stops once its processes hold more than maxDescriptors.
func TestCountBoundsDescriptors(t *testing.T) {
	defer func(n int) { maxDescriptors = n }(maxDescriptors)
	maxDescriptors = 2 // this process holds stdin, stdout, stderr at least
	if _, err := Count("/proc", []int{os.Getpid()}, Target{Root: "/"}); !errors.Is(err, ErrTooManyDescriptors) {
		t.Errorf("Count over the bound: %v, want ErrTooManyDescriptors", err)
	}
	maxDescriptors = MaxDescriptors
	if _, err := Count("/proc", []int{os.Getpid()}, Target{Root: "/"}); err != nil {
		t.Errorf("Count within the bound: %v", err)
	}
}
