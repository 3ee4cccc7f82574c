package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

var (
	podLabels       = []string{"node", "namespace", "pod", "uid"}
	containerLabels = []string{"node", "namespace", "pod", "uid", "container"}
)

var (
	podUsedDesc = newDesc("emptydir_pod_ephemeral_storage_used_bytes",
		"Bytes of ephemeral storage the pod uses, as the kubelet counts them against its limit.",
		podLabels, nil)
	podLimitDesc = newDesc("emptydir_pod_ephemeral_storage_limit_bytes",
		"The pod's ephemeral-storage limit in bytes, its containers' limits added up; absent without one.",
		podLabels, nil)
	podOverLimitDesc = newDesc("emptydir_pod_ephemeral_storage_over_limit_bytes",
		"Bytes by which the pod's ephemeral-storage usage exceeds its limit; present only while it does.",
		podLabels, nil)
	podPartDesc = newDesc("emptydir_pod_ephemeral_storage_part_bytes",
		"What makes up emptydir_pod_ephemeral_storage_used_bytes in bytes, by part.",
		append(podLabels, "part"), nil)
	podIncompleteDesc = newDesc("emptydir_pod_ephemeral_storage_measurement_incomplete",
		"1 while the pod's ephemeral-storage usage is a lower bound, by reason.",
		append(podLabels, "reason"), nil)
	podIncompleteSinceDesc = newDesc("emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds",
		"Unix time in seconds the pod's usage became a lower bound; absent while complete.",
		podLabels, nil)
	podAgeDesc = newDesc("emptydir_pod_ephemeral_storage_measurement_age_seconds",
		"Seconds between the oldest measurement behind emptydir_pod_ephemeral_storage_used_bytes and this scrape.",
		podLabels, nil)
	containerUsedDesc = newDesc("emptydir_container_ephemeral_storage_used_bytes",
		"Bytes of ephemeral storage the container uses, as the kubelet counts them against its limit.",
		containerLabels, nil)
	containerLimitDesc = newDesc("emptydir_container_ephemeral_storage_limit_bytes",
		"The container's limits.ephemeral-storage in bytes; absent when it has none.",
		containerLabels, nil)
	containerOverLimitDesc = newDesc("emptydir_container_ephemeral_storage_over_limit_bytes",
		"Bytes by which the container's ephemeral-storage usage exceeds its limit; present only while it does.",
		containerLabels, nil)
	containerPartDesc = newDesc("emptydir_container_ephemeral_storage_part_bytes",
		"The container's writable layer and logs in bytes, by part.",
		append(containerLabels, "part"), nil)
	layerUnlocatedDesc = newDesc("emptydir_container_writable_layer_unlocated",
		"1 when the container's writable layer could not be located, by reason and runtime_class.",
		append(containerLabels, "reason", "runtime_class"), nil)
	dedicatedImageFSDesc = newDesc("emptydir_exporter_image_filesystem_dedicated",
		"1 when writable layers are on a filesystem other than the kubelet's root dir.",
		[]string{"node"}, nil)
)

func describeStorage(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{podUsedDesc, podLimitDesc, podOverLimitDesc, podPartDesc, podIncompleteDesc, podIncompleteSinceDesc, podAgeDesc,
		containerUsedDesc, containerLimitDesc, containerOverLimitDesc, containerPartDesc, layerUnlocatedDesc, dedicatedImageFSDesc} {
		ch <- d
	}
}

// collectStorage publishes the ephemeral-storage usage of the pods of snap that have an
// ephemeral-storage limit, added up from their parts' latest measurements.
func (e *Exporter) collectStorage(ch chan<- prometheus.Metric, snap snapshot, now time.Time, sel selection) {
	node := e.cfg.NodeName
	storage := sel&selectEphemeralStorage != 0
	if storage && e.cfg.MeasureEphemeralStorage && !e.hidden[dedicatedImageFSDesc] {
		ch <- prometheus.MustNewConstMetric(dedicatedImageFSDesc, prometheus.GaugeValue, boolFloat(e.cfg.DedicatedImageFilesystem), node)
	}
	if len(snap.storage) == 0 || sel&(selectTrigger|selectEphemeralStorage) == 0 {
		return
	}
	byPod := resultsByPod(snap.volumes)
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		if !e.hidden[d] {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
	}
	// Where there is a limit (a pod without one is not measured), the over-limit series the
	// alerts read and the usage and limit beside it are trigger series; the rest
	// ephemeral_storage. An over-limit series is left out while a check the kubelet makes
	// before it holds (precedence): the alerts then need no PromQL over series a tenant
	// could publish to decide which limit a pod is evicted for.
	usage := func(usedDesc, limitDesc, overDesc *prometheus.Desc, used int64, limit *int64, precededBy bool, lv []string) {
		if limit != nil && sel&selectTrigger != 0 {
			gauge(usedDesc, float64(used), lv...)
			gauge(limitDesc, float64(*limit), lv...)
			if over, ok := part.OverLimit(used, limit); ok && !precededBy {
				gauge(overDesc, float64(over), lv...)
			}
		} else if limit == nil && storage {
			gauge(usedDesc, float64(used), lv...)
		}
	}
	for _, p := range snap.storage {
		results := byPod[p.UID]
		u := storageUsage(p, results, e.cfg.DedicatedImageFilesystem, false)
		lv := []string{node, p.Namespace, p.Pod, p.UID}
		volumeOver := anyEmptyDirOverLimit(results)
		_, podOver := part.OverLimit(u.UsedBytes, u.LimitBytes)
		usage(podUsedDesc, podLimitDesc, podOverLimitDesc, u.UsedBytes, u.LimitBytes, volumeOver, lv)
		// The age dates the usage series: at the trigger's pace where one of them is a trigger's.
		if limited := hasLimit(u); !u.MeasuredAt.IsZero() && ((limited && sel&selectTrigger != 0) || (!limited && storage)) {
			gauge(podAgeDesc, max(0, now.Sub(u.MeasuredAt).Seconds()), lv...)
		}
		if storage {
			for _, label := range []string{part.LabelEmptyDir, part.LabelWritableLayer, part.LabelLogs, part.LabelOther} {
				gauge(podPartDesc, float64(u.Parts[label]), append(lv, label)...)
			}
			for _, why := range u.IncompleteReasons {
				gauge(podIncompleteDesc, 1, append(lv, why)...)
			}
			if since, ok := snap.podIncompleteSince[p.UID]; ok {
				gauge(podIncompleteSinceDesc, unixSeconds(since), lv...)
			}
		}
		for _, c := range u.Containers {
			clv := append(append([]string(nil), lv...), c.Name)
			usage(containerUsedDesc, containerLimitDesc, containerOverLimitDesc, c.UsedBytes, c.LimitBytes, volumeOver || podOver, clv)
			if !storage {
				continue
			}
			gauge(containerPartDesc, float64(c.WritableLayerBytes), append(clv, part.LabelWritableLayer)...)
			gauge(containerPartDesc, float64(c.LogsBytes), append(clv, part.LabelLogs)...)
			if c.Unlocated != "" {
				gauge(layerUnlocatedDesc, 1, append(clv, c.Unlocated, p.Storage.RuntimeClass)...)
			}
		}
	}
}

// emptyDirOverLimit returns by how much r, an emptyDir, exceeds its sizeLimit, as
// emptydir_over_limit_bytes publishes it: never for a memory volume, whose tmpfs size is the
// limit in force.
func emptyDirOverLimit(r part.Result) (int64, bool) {
	if r.Part.Kind != part.KindEmptyDir || r.Part.Medium == part.MediumMemory {
		return 0, false
	}
	return part.OverLimit(r.Measurement.UsedBytes, r.Part.LimitBytes)
}

// anyEmptyDirOverLimit reports whether an emptyDir among a pod's results is over its sizeLimit:
// the kubelet's first local-storage check, before the pod's and the containers' limits.
func anyEmptyDirOverLimit(results map[string]part.Result) bool {
	for _, r := range results {
		if _, over := emptyDirOverLimit(r); over {
			return true
		}
	}
	return false
}

// resultsByPod indexes volumes by pod UID, then volume (part) name.
func resultsByPod(volumes []part.Result) map[string]map[string]part.Result {
	byPod := map[string]map[string]part.Result{}
	for _, r := range volumes {
		if byPod[r.UID] == nil {
			byPod[r.UID] = map[string]part.Result{}
		}
		byPod[r.UID][r.Part.Name] = r
	}
	return byPod
}

// unixSeconds is t as a timestamp series spells it.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// hasLimit reports whether the pod or one of its containers has an ephemeral-storage limit:
// whether any of its usage series is a trigger series.
func hasLimit(u StorageUsage) bool {
	if u.LimitBytes != nil {
		return true
	}
	for _, c := range u.Containers {
		if c.LimitBytes != nil {
			return true
		}
	}
	return false
}
