package exportertest

import "github.com/emptydir-guard/emptydir-guard/exporter/part"

// PodWith is a pod with vols.
func PodWith(namespace, name, uid string, vols ...part.Part) part.Pod {
	return part.Pod{Namespace: namespace, Pod: name, UID: uid, Parts: vols}
}

// Vol is an emptyDir volume without a sizeLimit.
func Vol(name, medium string) part.Part { return part.Part{Name: name, Medium: medium} }

// VolLimit is an emptyDir volume with a sizeLimit.
func VolLimit(name, medium string, limit int64) part.Part {
	v := Vol(name, medium)
	v.LimitBytes = &limit
	return v
}

// PodPerVolume builds one pod per volume name (namespace "ns", pod "pod-<name>", uid
// "uid-<name>"), each a disk emptyDir; a name in limits gets that sizeLimit.
func PodPerVolume(limits map[string]int64, names ...string) []part.Pod {
	var out []part.Pod
	for _, n := range names {
		v := Vol(n, part.MediumDisk)
		if l, ok := limits[n]; ok {
			v = VolLimit(n, part.MediumDisk, l)
		}
		out = append(out, PodWith("ns", "pod-"+n, "uid-"+n, v))
	}
	return out
}
