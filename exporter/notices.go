package exporter

import (
	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// overLimitParts names every part of snap over its limit, as the trigger collector publishes
// its over-limit series (collectStorage's precedence included: a pod's limit only when none of
// its emptyDirs is over, a container's only when neither is): what Config.OverLimit is told.
func (e *Exporter) overLimitParts(snap snapshot) []noticeapi.Notice {
	node := e.cfg.NodeName
	var parts []noticeapi.Notice
	for _, r := range snap.volumes {
		if _, over := emptyDirOverLimit(r); over {
			parts = append(parts, noticeapi.Notice{Node: node, Namespace: r.Namespace, Pod: r.Pod, UID: r.UID,
				Check: noticeapi.CheckEmptyDir, Volume: r.Volume.Name})
		}
	}
	if len(snap.storage) == 0 {
		return parts
	}
	byPod := resultsByPod(snap.volumes)
	for _, p := range snap.storage {
		results := byPod[p.UID]
		if anyEmptyDirOverLimit(results) {
			continue
		}
		pod := noticeapi.Notice{Node: node, Namespace: p.Namespace, Pod: p.Pod, UID: p.UID}
		u := storageUsage(p, results, e.cfg.DedicatedImageFilesystem, false)
		if _, over := volume.OverLimit(u.UsedBytes, u.LimitBytes); over {
			pod.Check = noticeapi.CheckPod
			parts = append(parts, pod)
			continue
		}
		for _, c := range u.Containers {
			if _, over := volume.OverLimit(c.UsedBytes, c.LimitBytes); over {
				container := pod
				container.Check, container.Container = noticeapi.CheckContainer, c.Name
				parts = append(parts, container)
			}
		}
	}
	return parts
}
