package fswalktest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireRootEnv, set to 1 by make test (which runs as root), turns a test that needs root into
// a failure when it does not run as root, instead of a skip: plain go test skips it, saying why.
const RequireRootEnv = "EMPTYDIR_GUARD_REQUIRE_ROOT"

// RequireRoot skips t, naming what needs root, unless the test runs as root; under make test
// (RequireRootEnv=1) it fails instead.
func RequireRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireRootEnv) == "1" {
		t.Fatalf("%s needs root, and %s=1 (make test) says this run has it", what, RequireRootEnv)
	}
	t.Skipf("%s needs root", what)
}

// MountTmpfs mounts a tmpfs of its own with options (as "size=1m") at the directory dir, as the
// kubelet mounts a medium: Memory emptyDir, unmounted when the test ends, also when it fails.
func MountTmpfs(t testing.TB, dir, options string) {
	t.Helper()
	RequireRoot(t, "mounting a tmpfs")
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, options); err != nil {
		t.Fatalf("mount -t tmpfs -o %q tmpfs %s: %v", options, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
}
