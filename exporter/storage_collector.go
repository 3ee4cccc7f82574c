package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
)

var (
	podLabels       = []string{"node", "namespace", "pod", "uid"}
	containerLabels = []string{"node", "namespace", "pod", "uid", "container"}
)

var (
	podUsedDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_used_bytes",
		"The pod's ephemeral-storage usage as the kubelet compares it with the pod's limit: its running containers' writable layers and logs (ephemeral containers included), its disk-medium emptyDir, configMap and gitRepo volumes, etc-hosts and its own log files. For pods with an ephemeral-storage limit.",
		podLabels, nil)
	podLimitDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_limit_bytes",
		"The pod's ephemeral-storage limit as the kubelet computes it (its containers' limits.ephemeral-storage added up, restartable init containers included); absent when no container has one.",
		podLabels, nil)
	podOverLimitDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_over_limit_bytes",
		"Bytes by which the pod's ephemeral-storage usage exceeds its limit; published only while it does and no emptyDir of the pod is over its sizeLimit.",
		podLabels, nil)
	podPartDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_part_bytes",
		"What makes up emptydir_pod_ephemeral_storage_used_bytes, by part: emptydir, writable_layer, logs or other (configMap and gitRepo volumes, etc-hosts, the pod's own log files).",
		append(podLabels, "part"), nil)
	podIncompleteDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_measurement_incomplete",
		"1 while the pod's ephemeral-storage usage is a lower bound, by reason: unmeasured (a part has no measurement yet), unlocated (a writable layer not located), or a part's walk unreadable, changed_during_walk or cut_short; absent while it is complete.",
		append(podLabels, "reason"), nil)
	podIncompleteSinceDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds",
		"Unix time at which the pod's ephemeral-storage usage became a lower bound, for as long as it has been one since; absent while it is complete.",
		podLabels, nil)
	podAgeDesc = prometheus.NewDesc("emptydir_pod_ephemeral_storage_measurement_age_seconds",
		"Seconds between the oldest measurement behind emptydir_pod_ephemeral_storage_used_bytes and this scrape.",
		podLabels, nil)
	containerUsedDesc = prometheus.NewDesc("emptydir_container_ephemeral_storage_used_bytes",
		"The container's ephemeral-storage usage as the kubelet compares it with its limit: its logs, plus its writable layer unless the node has a dedicated image filesystem (emptydir_exporter_image_filesystem_dedicated). For running containers of pods with an ephemeral-storage limit.",
		containerLabels, nil)
	containerLimitDesc = prometheus.NewDesc("emptydir_container_ephemeral_storage_limit_bytes",
		"The container's limits.ephemeral-storage, for the containers the kubelet checks (regular and restartable init containers); absent when it has none.",
		containerLabels, nil)
	containerOverLimitDesc = prometheus.NewDesc("emptydir_container_ephemeral_storage_over_limit_bytes",
		"Bytes by which the container's ephemeral-storage usage exceeds its limits.ephemeral-storage; published only while it does and neither the pod nor an emptyDir of it is over its limit.",
		containerLabels, nil)
	containerPartDesc = prometheus.NewDesc("emptydir_container_ephemeral_storage_part_bytes",
		"The container's writable layer and logs, by part (writable_layer, logs), the writable layer whether it counts toward the container's limit or not.",
		append(containerLabels, "part"), nil)
	layerUnlocatedDesc = prometheus.NewDesc("emptydir_container_writable_layer_unlocated",
		"1 when the container's writable layer could not be located, by reason (other_runtime, no_rootfs_mount, not_overlay, outside_snapshotter, no_layer_record, bad_layer_metadata, no_layer_dir; or image_volume_not_mounted, image_volume_missing, no_bundle_config: the layer without its image VOLUME folders) and the pod's RuntimeClass (runtime_class, \"\" for the node's default runtime): its usage then counts as 0 (or the kubelet's figure, with the kubelet fallback; or the layer alone) and the pod's and container's usage are lower bounds. For running containers of pods with an ephemeral-storage limit.",
		append(containerLabels, "reason", "runtime_class"), nil)
	dedicatedImageFSDesc = prometheus.NewDesc("emptydir_exporter_image_filesystem_dedicated",
		"1 when the container runtime's writable layers are on another filesystem than the kubelet's root dir: they then count toward their pod's limit only, not their container's, as in the kubelet; else 0. Absent when containers are not measured.",
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
	if storage && e.cfg.MeasureEphemeralStorage {
		ch <- prometheus.MustNewConstMetric(dedicatedImageFSDesc, prometheus.GaugeValue, boolFloat(e.cfg.DedicatedImageFilesystem), node)
	}
	if len(snap.storage) == 0 || sel&(selectTrigger|selectEphemeralStorage) == 0 {
		return
	}
	byPod := resultsByPod(snap.volumes)
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
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
			if over, ok := volume.OverLimit(used, limit); ok && !precededBy {
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
		_, podOver := volume.OverLimit(u.UsedBytes, u.LimitBytes)
		usage(podUsedDesc, podLimitDesc, podOverLimitDesc, u.UsedBytes, u.LimitBytes, volumeOver, lv)
		if storage {
			for _, part := range []string{volume.PartEmptyDir, volume.PartWritableLayer, volume.PartLogs, volume.PartOther} {
				gauge(podPartDesc, float64(u.Parts[part]), append(lv, part)...)
			}
			for _, why := range u.IncompleteReasons {
				gauge(podIncompleteDesc, 1, append(lv, why)...)
			}
			if since, ok := snap.podIncompleteSince[p.UID]; ok {
				gauge(podIncompleteSinceDesc, unixSeconds(since), lv...)
			}
			if !u.MeasuredAt.IsZero() {
				gauge(podAgeDesc, max(0, now.Sub(u.MeasuredAt).Seconds()), lv...)
			}
		}
		for _, c := range u.Containers {
			clv := append(append([]string(nil), lv...), c.Name)
			usage(containerUsedDesc, containerLimitDesc, containerOverLimitDesc, c.UsedBytes, c.LimitBytes, volumeOver || podOver, clv)
			if !storage {
				continue
			}
			gauge(containerPartDesc, float64(c.WritableLayerBytes), append(clv, volume.PartWritableLayer)...)
			gauge(containerPartDesc, float64(c.LogsBytes), append(clv, volume.PartLogs)...)
			if c.Unlocated != "" {
				gauge(layerUnlocatedDesc, 1, append(clv, c.Unlocated, p.Storage.RuntimeClass)...)
			}
		}
	}
}

// emptyDirOverLimit returns by how much r, an emptyDir, exceeds its sizeLimit, as
// emptydir_over_limit_bytes publishes it: never for a memory volume, whose tmpfs size is the
// limit in force.
func emptyDirOverLimit(r volume.VolumeResult) (int64, bool) {
	if r.Volume.Kind != volume.KindEmptyDir || r.Volume.Medium == volume.MediumMemory {
		return 0, false
	}
	return volume.OverLimit(r.Measurement.UsedBytes, r.Volume.LimitBytes)
}

// anyEmptyDirOverLimit reports whether an emptyDir among a pod's results is over its sizeLimit:
// the kubelet's first local-storage check, before the pod's and the containers' limits.
func anyEmptyDirOverLimit(results map[string]volume.VolumeResult) bool {
	for _, r := range results {
		if _, over := emptyDirOverLimit(r); over {
			return true
		}
	}
	return false
}

// resultsByPod indexes volumes by pod UID, then volume (part) name.
func resultsByPod(volumes []volume.VolumeResult) map[string]map[string]volume.VolumeResult {
	byPod := map[string]map[string]volume.VolumeResult{}
	for _, r := range volumes {
		if byPod[r.UID] == nil {
			byPod[r.UID] = map[string]volume.VolumeResult{}
		}
		byPod[r.UID][r.Volume.Name] = r
	}
	return byPod
}

// unixSeconds is t as a timestamp series spells it.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
