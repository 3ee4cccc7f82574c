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
