package exportertest

import "github.com/emptydir-guard/emptydir-guard/exporter/volume"

// PodWith is a pod with vols.
func PodWith(namespace, name, uid string, vols ...volume.Volume) volume.PodVolumes {
	return volume.PodVolumes{Namespace: namespace, Pod: name, UID: uid, Volumes: vols}
}

// Vol is an emptyDir volume without a sizeLimit.
func Vol(name, medium string) volume.Volume { return volume.Volume{Name: name, Medium: medium} }

// VolLimit is an emptyDir volume with a sizeLimit.
func VolLimit(name, medium string, limit int64) volume.Volume {
	v := Vol(name, medium)
	v.LimitBytes = &limit
	return v
}

// PodPerVolume builds one pod per volume name (namespace "ns", pod "pod-<name>", uid
// "uid-<name>"), each a disk emptyDir; a name in limits gets that sizeLimit.
func PodPerVolume(limits map[string]int64, names ...string) []volume.PodVolumes {
	var out []volume.PodVolumes
	for _, n := range names {
		v := Vol(n, volume.MediumDisk)
		if l, ok := limits[n]; ok {
			v = VolLimit(n, volume.MediumDisk, l)
		}
		out = append(out, PodWith("ns", "pod-"+n, "uid-"+n, v))
	}
	return out
}
