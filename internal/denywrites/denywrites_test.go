package denywrites_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/denywrites"
)

const childEnv = "DENYWRITES_CHILD_DIR"

// The restriction is for good and for the whole process, so it runs in a child: the test
// binary again, which applies it and then tries to write, read and remove in a directory it
// owns. Run as root too: Landlock binds root as anyone.
func TestApplyDeniesWritesKeepsReads(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		child(dir)
		return
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyDeniesWritesKeepsReads$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	report := string(out)
	if err != nil && !strings.Contains(report, "RESULT") {
		t.Fatalf("child: %v\n%s", err, report)
	}
	if strings.Contains(report, "RESULT unsupported") {
		t.Skipf("this kernel has no Landlock: %s", report)
	}
	for _, want := range []string{"RESULT read ok", "RESULT create denied", "RESULT write denied", "RESULT remove denied", "RESULT mkdir denied"} {
		if !strings.Contains(report, want) {
			t.Errorf("child did not report %q:\n%s", want, report)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the child created a file: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "existing")); err != nil || string(b) != "data" {
		t.Errorf("the existing file changed: %q, %v", b, err)
	}
}

func child(dir string) {
	say := func(s string) { os.Stdout.WriteString("RESULT " + s + "\n") }
	if err := denywrites.Apply(); err != nil {
		say("unsupported: " + err.Error())
		return
	}
	verdict := func(what string, err error) {
		switch {
		case err == nil:
			say(what + " allowed")
		case errors.Is(err, fs.ErrPermission):
			say(what + " denied")
		default:
			say(what + " failed otherwise: " + err.Error())
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "existing")); err == nil && string(b) == "data" {
		say("read ok")
	}
	verdict("create", os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o644))
	f, err := os.OpenFile(filepath.Join(dir, "existing"), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = f.WriteString("more")
		f.Close()
	}
	verdict("write", err)
	verdict("remove", os.Remove(filepath.Join(dir, "existing")))
	verdict("mkdir", os.Mkdir(filepath.Join(dir, "sub"), 0o755))
}
