package exporter

import (
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
)

func limit(b int64) *int64 { return &b }

// t0 is the moment the tests of package exporter start at.
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// volumes builds one pod per volume name; a name in limits gets that sizeLimit.
func volumes(limits map[string]int64, names ...string) []volume.PodVolumes {
	var out []volume.PodVolumes
	for _, n := range names {
		v := volume.Volume{Name: n, Medium: volume.MediumDisk}
		if l, ok := limits[n]; ok {
			v.LimitBytes = limit(l)
		}
		out = append(out, volume.PodVolumes{Namespace: "ns", Pod: "pod-" + n, UID: "uid-" + n, Volumes: []volume.Volume{v}})
	}
	return out
}
