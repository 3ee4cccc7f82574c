package podcgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// ErrProcsHidden says a cgroup holds processes this process cannot name: it is not in the
// node's PID namespace (hostPID), so cgroup.procs shows them as 0.
var ErrProcsHidden = errors.New("cgroup.procs lists processes of another PID namespace as 0 (the exporter needs hostPID)")

// maxProcs bounds the process IDs read from one pod's cgroups: a pod with more (its pids limit
// allowing) has the rest left out, which the caller reports as a lower bound.
const maxProcs = 4096

// ErrTooManyProcs says a pod's cgroups hold more than maxProcs processes.
var ErrTooManyProcs = fmt.Errorf("more than %d processes in the pod's cgroups", maxProcs)

// Procs is every process in the pod's cgroup and the cgroups below it (its containers'),
// as their IDs in this process's PID namespace. A process that moves or ends meanwhile may be
// missed or listed: the caller reads each one's /proc directory and skips those gone.
func (p Pod) Procs() ([]int, error) { return ReadProcs(p.Dir) }

// ReadProcs reads cgroup.procs in dir and in every cgroup directory below it.
func ReadProcs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // a container's cgroup removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) && path != dir {
			return nil
		}
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			pid, err := strconv.Atoi(sc.Text())
			if err != nil || pid < 0 {
				return fmt.Errorf("%s: %q is no process ID", filepath.Join(path, "cgroup.procs"), sc.Text())
			}
			if pid == 0 {
				return ErrProcsHidden
			}
			if len(pids) == maxProcs {
				return ErrTooManyProcs
			}
			pids = append(pids, pid)
		}
		return nil
	})
	return pids, err
}
