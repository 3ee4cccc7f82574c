package podcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadProcs: a pod's processes are those of its own cgroup and of every cgroup below it
// (its containers'); a process of another PID namespace, shown as 0, fails the read.
func TestReadProcs(t *testing.T) {
	pod := t.TempDir()
	for dir, procs := range map[string]string{"": "", "ctr-a": "12\n13\n", "ctr-b": "14\n", "ctr-b/nested": "15\n"} {
		if err := os.MkdirAll(filepath.Join(pod, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pod, dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadProcs(pod)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{12, 13, 14, 15}) {
		t.Errorf("ReadProcs = %v, %v; want 12 13 14 15", got, err)
	}
	if err := os.WriteFile(filepath.Join(pod, "ctr-a", "cgroup.procs"), []byte("12\n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProcs(pod); !errors.Is(err, ErrProcsHidden) {
		t.Errorf("a process shown as 0: %v, want ErrProcsHidden", err)
	}
	if _, err := ReadProcs(filepath.Join(pod, "gone")); err == nil {
		t.Error("a pod cgroup that is not there has processes")
	}
}
