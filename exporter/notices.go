package exporter

import (
	"slices"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// overLimitParts names every part of snap over its limit, as the trigger collector publishes
// its over-limit series: what Config.OverLimit is told.
func (e *Exporter) overLimitParts(snap snapshot) []noticeapi.Notice {
	byPod := resultsByPod(snap.volumes)
	storage := make(map[string]part.Pod, len(snap.storage))
	for _, p := range snap.storage {
		storage[p.UID] = p
	}
	var parts []noticeapi.Notice
	seen := map[string]bool{}
	for _, r := range snap.volumes { // the snapshot's order: by pod, then volume
		if seen[r.UID] {
			continue
		}
		seen[r.UID] = true
		p, limited := storage[r.UID]
		parts = append(parts, e.podOverLimit(r.Namespace, r.Pod, r.UID, byPod[r.UID], p, limited)...)
	}
	for _, p := range snap.storage { // a pod with a limit and no result yet
		if !seen[p.UID] {
			parts = append(parts, e.podOverLimit(p.Namespace, p.Pod, p.UID, nil, p, true)...)
		}
	}
	return parts
}

// podOverLimit names the parts of one pod over their limits from its parts' results, with the
// trigger collector's precedence (collectStorage): its emptyDirs over their sizeLimits; else,
// where it has an ephemeral-storage limit (limited: p is its storage), the pod over its limit;
// else each container over its own.
func (e *Exporter) podOverLimit(namespace, pod, uid string, results map[string]part.Result, p part.Pod, limited bool) []noticeapi.Notice {
	base := noticeapi.Notice{Node: e.cfg.NodeName, Namespace: namespace, Pod: pod, UID: uid}
	var parts []noticeapi.Notice
	for _, r := range results {
		if _, over := emptyDirOverLimit(r); over {
			n := base
			n.Check, n.Volume = noticeapi.CheckEmptyDir, r.Part.Name
			parts = append(parts, n)
		}
	}
	if len(parts) > 0 || !limited {
		slices.SortFunc(parts, func(a, b noticeapi.Notice) int { return strings.Compare(a.Volume, b.Volume) })
		return parts
	}
	u := storageUsage(p, results, e.cfg.DedicatedImageFilesystem, false)
	if _, over := part.OverLimit(u.UsedBytes, u.LimitBytes); over {
		n := base
		n.Check = noticeapi.CheckPod
		return []noticeapi.Notice{n}
	}
	for _, c := range u.Containers {
		if _, over := part.OverLimit(c.UsedBytes, c.LimitBytes); over {
			n := base
			n.Check, n.Container = noticeapi.CheckContainer, c.Name
			parts = append(parts, n)
		}
	}
	return parts
}

// noticeEarly tells Config.CrossedLimit of the parts over their limits that walk r's result
// puts over, as soon as the walk ends: judged from the latest results of the pod's parts, as
// the cycle's end would judge them, but up to an interval sooner.
func (e *Exporter) noticeEarly(r part.Result) {
	if e.cfg.CrossedLimit == nil || r.Err != nil || (r.Part.LimitBytes == nil && r.Part.BudgetBytes == nil) {
		return // only a part with a limit, or counting toward one, can cross it
	}
	p, ok, err := e.cfg.Pods.Get(r.Namespace, r.Pod)
	if err != nil || !ok || p.UID != r.UID {
		return // gone, or recreated: the cycle's end judges what is there
	}
	results := make(map[string]part.Result, len(p.Parts))
	complete := true
	for _, v := range p.Parts {
		latest, ok := e.walks.Latest(part.Key{UID: p.UID, Name: v.Name})
		if !ok || latest.Err != nil {
			complete = complete && v.Medium != part.MediumDisk && v.Kind == part.KindEmptyDir
			continue
		}
		latest.Part = v // the limits as the pod has them now
		results[v.Name] = latest
	}
	// The pod's and its containers' limits yield to its emptyDirs': judged only once every part
	// that counts has a measurement, lest a layer walked before an emptyDir over its sizeLimit
	// name the container.
	for _, n := range e.podOverLimit(p.Namespace, p.Pod, p.UID, results, p, p.Storage != nil && complete) {
		e.cfg.CrossedLimit(n)
	}
}
