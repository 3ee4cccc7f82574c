package source

import (
	"context"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/openfiles"
)

// OpenFiles counts toward a walked emptyDir the files its pod's processes deleted but hold
// open (--collection.open-files), which no walk sees: internal/openfiles attributes each to
// the volume by the mount it was opened through.
type OpenFiles struct {
	// Proc is the procfs of the node's PID namespace (the DaemonSet's hostPID).
	Proc string
	// Procs lists the pod's processes, as IDs in Proc's PID namespace (its cgroups').
	Procs func(p part.Pod) ([]int, error)
	// Count counts in place of openfiles.Count when set: an openfiles.Helper's, outside the
	// exporter's Landlock domain.
	Count func(ctx context.Context, proc string, pids []int, t openfiles.Target) (openfiles.Usage, error)
	// OnError, when set, hears why a pod's open files could not be read.
	OnError func(p part.Pod, v part.Part, err error)
}

// openFilesTimeout bounds one volume's count: a descriptor on a hung filesystem would block its
// stat, which then stops the helper for good (openfiles.Helper.Count).
const openFilesTimeout = 10 * time.Second

// openFiles is what the processes of p hold open in files deleted from dir, v's directory, and
// whether it could be read (Measurement.OpenFiles).
func (s *Filesystem) openFiles(ctx context.Context, p part.Pod, v part.Part, dir string) (openfiles.Usage, string) {
	if s.OpenFiles == nil {
		return openfiles.Usage{}, part.OpenFilesOff
	}
	// Its own deadline, not the walk's: a walk cut short by its deadline still gets its count.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openFilesTimeout)
	defer cancel()
	u, err := s.OpenFiles.count(ctx, p, dir)
	if err != nil {
		if s.OpenFiles.OnError != nil {
			s.OpenFiles.OnError(p, v, err)
		}
		return openfiles.Usage{}, part.OpenFilesUnreadable
	}
	return u, part.OpenFilesCounted
}

func (o *OpenFiles) count(ctx context.Context, p part.Pod, dir string) (openfiles.Usage, error) {
	t, err := openfiles.TargetOf(dir)
	if err != nil {
		return openfiles.Usage{}, err
	}
	pids, err := o.Procs(p)
	if err != nil {
		return openfiles.Usage{}, err
	}
	if o.Count != nil {
		return o.Count(ctx, o.Proc, pids, t)
	}
	return openfiles.Count(o.Proc, pids, t)
}
