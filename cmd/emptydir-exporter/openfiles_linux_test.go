package main

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/openfiles"
)

// TestMain lets the test binary serve as the open-files helper, as main does.
func TestMain(m *testing.M) {
	if code, helper := openFilesHelper(os.Args[1:]); helper {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestOpenFilesHelper: the source openFiles builds counts through the helper it starts, the
// command's own binary run with --open-files-helper.
func TestOpenFilesHelper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading another process's descriptors needs root")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `exec 3>"$1/gone"; rm "$1/gone"; head -c 65536 /dev/zero >&3; sync; echo ready; exec sleep 1000`, "sh", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("holder: %q", line)
	}
	cfg := defaultConfig()
	o := openFiles(&cfg, slog.New(slog.DiscardHandler))
	target, err := openfiles.TargetOf(filepath.Dir(dir)) // held through the node's own mount: root "/"
	if err != nil {
		t.Fatal(err)
	}
	target.Root = "/"
	u, err := o.Count(context.Background(), o.Proc, []int{cmd.Process.Pid}, target)
	if err != nil || u.Bytes != 65536 || u.Files != 1 {
		t.Errorf("count through the helper: %+v, %v; want 64KiB in 1 file", u, err)
	}
	if _, err := o.Procs(part.Pod{UID: "no-such-pod", QOSClass: "BestEffort"}); err == nil {
		t.Error("a pod without a cgroup has processes")
	}
}
