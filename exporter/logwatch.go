package exporter

import (
	"context"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/logwatch"
)

// logDirSource is a source that knows where a container's logs are (source.Filesystem).
type logDirSource interface {
	LogDir(p part.Pod, container string) string
}

// watchLogs hands Config.LogWatch the log directories of the running containers of pods with an
// ephemeral-storage limit, the only logs that can cross one.
func (e *Exporter) watchLogs(pods []part.Pod) {
	src, ok := e.cfg.Source.(logDirSource)
	if e.cfg.LogWatch == nil || !ok || e.walks == nil {
		return
	}
	dirs := map[string]logwatch.Pod{}
	for _, p := range pods {
		if p.Storage == nil {
			continue
		}
		for _, v := range p.Parts {
			if v.Kind == part.KindContainerLogs {
				dirs[src.LogDir(p, v.Container)] = logwatch.Pod{Namespace: p.Namespace, Name: p.Pod, UID: p.UID}
			}
		}
	}
	e.cfg.LogWatch.Watch(dirs)
}

// MeasureLogsNow measures the log parts of pod at once, its directories having been written to, as
// a live walk of them (walk.Engine.BeginLive: the next cycle publishes them), and tells
// Config.CrossedLimit of a limit they put the pod or a container over. A container's logs are
// written by its runtime, outside the pod's cgroup: no change mark hastens their walk.
func (e *Exporter) MeasureLogsNow(ctx context.Context, pod logwatch.Pod) {
	if e.walks == nil {
		return
	}
	p, ok, err := e.cfg.Pods.Get(pod.Namespace, pod.Name)
	if err != nil || !ok || p.UID != pod.UID || p.Storage == nil {
		return
	}
	logs := p
	logs.Parts = nil
	for _, v := range p.Parts {
		if v.Kind == part.KindContainerLogs {
			logs.Parts = append(logs.Parts, v)
		}
	}
	if len(logs.Parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.VolumeTimeout)
	defer cancel()
	for _, r := range e.measureLive(ctx, logs, fswalk.NewCPUMeter()) {
		e.walkEnded(r)
	}
}
