package fswalktest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// hostTenantEnv carries the project ID to charge and the bytes to write to the test binary
// that ChargeProject runs again as the tenant.
const hostTenantEnv = "FSWALKTEST_HOST_TENANT_CHARGE"

// ChargedDirectory is the directory the tenant of ChargeProject makes in its own volume.
const ChargedDirectory = "charged"

// ChargeProject plays a tenant of a pod with hostUsers: true (any process of the node): the
// test binary runs again as uid and gid in the initial user namespace, with no capabilities
// unless uid is 0, and is given only an open descriptor of dir, its own volume (its container
// sees nothing above). There it makes ChargedDirectory (its own), sets project ID id and the
// inherit flag on it, and writes size bytes into it; it returns that directory's path. Every test
// binary that calls it has a TestHostTenantHelperProcess calling HostTenantHelperProcess.
func ChargeProject(t testing.TB, dir string, id uint32, size int, uid, gid uint32) string {
	t.Helper()
	volume, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer volume.Close()
	// /proc/self/exe reaches the binary whatever directories above it the tenant may not search.
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestHostTenantHelperProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", hostTenantEnv, id, size))
	cmd.ExtraFiles = []*os.File{volume} // fd 3
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "charged" {
		t.Fatalf("the tenant (uid %d) charging project %d: %v: %s%s", uid, id, err, out, stderr.Bytes())
	}
	return filepath.Join(dir, ChargedDirectory)
}

// HostTenantHelperProcess is the tenant's side of ChargeProject; outside it, t is skipped.
func HostTenantHelperProcess(t *testing.T) {
	var id uint32
	var size int
	if _, err := fmt.Sscan(os.Getenv(hostTenantEnv), &id, &size); err != nil {
		t.Skip("run by fswalktest.ChargeProject only")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := unix.Fchdir(3); err != nil {
		fail(fmt.Errorf("fchdir to the volume: %w", err))
	}
	if err := os.Mkdir(ChargedDirectory, 0o755); err != nil {
		fail(err)
	}
	if err := SetProject(ChargedDirectory, id, true); err != nil {
		fail(err)
	}
	for i := 0; size > 0; i++ {
		n := min(size, 1<<20)
		if err := os.WriteFile(filepath.Join(ChargedDirectory, "f"+strconv.Itoa(i)), bytes.Repeat([]byte{'z'}, n), 0o644); err != nil {
			fail(err)
		}
		size -= n
	}
	fmt.Println("charged")
	os.Exit(0)
}
