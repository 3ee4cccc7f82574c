package exporter

import (
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/prometheus/client_golang/prometheus"
)

var volumeLabels = []string{"node", "namespace", "pod", "uid", "volume", "medium"}

// unexplainedThreshold is the least unexplained usage published (emptydir_unexplained_bytes):
// below it, a file written between the statfs and the walk, which the walk may miss, would flap.
const unexplainedThreshold = 1 << 20

var (
	usedBytesDesc = newDesc("emptydir_used_bytes",
		"Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.",
		volumeLabels, nil)
	limitBytesDesc = newDesc("emptydir_limit_bytes",
		"The emptyDir volume's sizeLimit in bytes; absent when the volume has none.",
		volumeLabels, nil)
	overLimitBytesDesc = newDesc("emptydir_over_limit_bytes",
		"Bytes by which the emptyDir volume's usage exceeds its sizeLimit; present only while it does.",
		volumeLabels, nil)
	capacityBytesDesc = newDesc("emptydir_capacity_bytes",
		"Size of the filesystem backing the volume (the tmpfs size for medium Memory).",
		volumeLabels, nil)
	availableBytesDesc = newDesc("emptydir_available_bytes",
		"Bytes available to unprivileged users on the filesystem backing the volume.",
		volumeLabels, nil)
	inodesUsedDesc = newDesc("emptydir_inodes_used",
		"Inodes the volume uses, hard-linked inodes once.",
		volumeLabels, nil)
	unreadableDesc = newDesc("emptydir_unreadable_entries",
		"Entries the last measurement could not read; above 0, emptydir_used_bytes is a lower bound.",
		volumeLabels, nil)
	incompleteDesc = newDesc("emptydir_measurement_incomplete",
		"1 while the volume's last measurement is a lower bound of its usage, by reason.",
		append(volumeLabels, "reason"), nil)
	incompleteSinceDesc = newDesc("emptydir_measurement_incomplete_since_timestamp_seconds",
		"Unix time in seconds when the volume's measurements became lower bounds; absent while complete.",
		volumeLabels, nil)
	quotaExcessDesc = newDesc("emptydir_project_quota_excess_bytes",
		"Bytes the volume's project quota counts beyond what its last checking walk found.",
		volumeLabels, nil)
	unexplainedDesc = newDesc("emptydir_unexplained_bytes",
		"Bytes of a memory volume's tmpfs that no name leads to: deleted files held open.",
		volumeLabels, nil)
	unlinkedOpenDesc = newDesc("emptydir_unlinked_open_bytes",
		"Bytes of files deleted from the disk volume but held open, included in emptydir_used_bytes.",
		volumeLabels, nil)
	measurementInfoDesc = newDesc("emptydir_measurement_info",
		"How the volume's values were measured (label method); always 1.",
		append(volumeLabels, "method"), nil)
	ageDesc = newDesc("emptydir_measurement_age_seconds",
		"Seconds between the measurement behind this volume's values and this scrape.",
		volumeLabels, nil)
	unchangedDesc = newDesc("emptydir_measurement_unchanged_timestamp_seconds",
		"Unix time in seconds of the last cycle whose change mark vouched this measurement current.",
		volumeLabels, nil)
	filesystemCapacityDesc = newDesc("emptydir_filesystem_capacity_bytes",
		"Size in bytes of the filesystem holding the node's disk-medium emptyDir volumes.",
		[]string{"node"}, nil)
	filesystemAvailableDesc = newDesc("emptydir_filesystem_available_bytes",
		"Bytes available to unprivileged users on the filesystem of the node's disk-medium emptyDir volumes.",
		[]string{"node"}, nil)

	durationDesc = newDesc("emptydir_exporter_collection_duration_seconds",
		"Wall time in seconds of the last collection cycle.", []string{"node", "source"}, nil)
	successDesc = newDesc("emptydir_exporter_collection_success",
		"1 when the last collection cycle measured every volume without a failure, else 0.", []string{"node", "source"}, nil)
	lastSuccessDesc = newDesc("emptydir_exporter_last_success_timestamp_seconds",
		"Unix time in seconds of the last fully successful collection cycle.", []string{"node", "source"}, nil)
	podsDesc = newDesc("emptydir_exporter_pods",
		"Pods on the node with at least one emptyDir volume in use.", []string{"node"}, nil)
	volumesDesc = newDesc("emptydir_exporter_volumes",
		"emptyDir volumes in use on the node.", []string{"node"}, nil)
	syncedDesc = newDesc("emptydir_exporter_pod_informer_synced",
		"1 when the pod informer has synced with the API server.", []string{"node"}, nil)
	oldestTriggerAgeDesc = newDesc("emptydir_exporter_oldest_trigger_measurement_age_seconds",
		"Seconds since the oldest measurement behind a trigger series started; absent with none.", []string{"node"}, nil)
	openFilesVolumesDesc = newDesc("emptydir_exporter_open_files_volumes",
		"Walked emptyDir volumes, by whether their pods' deleted but open files were counted.", []string{"node", "outcome"}, nil)
)

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{usedBytesDesc, limitBytesDesc, overLimitBytesDesc, capacityBytesDesc,
		availableBytesDesc, inodesUsedDesc, unreadableDesc, incompleteDesc, incompleteSinceDesc, quotaExcessDesc, unexplainedDesc, unlinkedOpenDesc, measurementInfoDesc, ageDesc,
		unchangedDesc, filesystemCapacityDesc, filesystemAvailableDesc, durationDesc, successDesc,
		lastSuccessDesc, podsDesc, volumesDesc, syncedDesc, oldestTriggerAgeDesc, openFilesVolumesDesc} {
		ch <- d
	}
	describeAlignment(ch)
	describeStorage(ch)
	ch <- workloadInfoDesc
	ch <- ownerInvalidDesc
	e.collections.Describe(ch)
	e.measureErrors.Describe(ch)
	e.uncheckedLinks.Describe(ch)
	e.watchErrors.Describe(ch)
	e.liveRequests.Describe(ch)
	e.liveRefusals.Describe(ch)
	e.liveCuts.Describe(ch)
	if e.walks != nil {
		e.walks.Describe(ch) // the engine's series (walk/metrics.go)
	}
}

// Collect implements prometheus.Collector from the latest snapshot; it never
// measures, so a scrape is cheap whatever the volumes hold.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) { e.collect(ch, selectAll) }

// collect sends the series of the collectors in sel (collectors.go).
func (e *Exporter) collect(ch chan<- prometheus.Metric, sel selection) {
	e.mu.RLock()
	snap := e.snap
	e.mu.RUnlock()
	now := e.now()
	node := e.cfg.NodeName
	source := e.cfg.Source.Name()

	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		if !e.hidden[d] {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
	}
	if sel&(selectTrigger|selectVolumes) != 0 {
		for _, r := range snap.volumes {
			if r.Part.Kind != part.KindEmptyDir {
				continue // published added up, per pod and container (collectStorage)
			}
			lv := []string{node, r.Namespace, r.Pod, r.UID, r.Part.Name, r.Part.Medium}
			m := r.Measurement
			// A volume with a limit is published at the trigger's pace: its over-limit series,
			// what EmptyDirOverLimit reads, and its usage and limit, which the alert's
			// description and the dashboards read beside it.
			// The age goes with the usage it dates: a value and its age from two scrapes of
			// different times cannot be paired.
			limited := r.Part.LimitBytes != nil
			if limited && sel&selectTrigger != 0 || !limited && sel&selectVolumes != 0 {
				gauge(usedBytesDesc, float64(m.UsedBytes), lv...)
				gauge(ageDesc, max(0, now.Sub(m.MeasuredAt).Seconds()), lv...)
			}
			if limited && sel&selectTrigger != 0 {
				gauge(limitBytesDesc, float64(*r.Part.LimitBytes), lv...)
				if over, ok := emptyDirOverLimit(r); ok {
					gauge(overLimitBytesDesc, float64(over), lv...)
				}
			}
			if sel&selectVolumes == 0 {
				continue
			}
			gauge(capacityBytesDesc, float64(m.CapacityBytes), lv...)
			gauge(availableBytesDesc, float64(m.AvailableBytes), lv...)
			gauge(inodesUsedDesc, float64(m.InodesUsed), lv...)
			gauge(unreadableDesc, float64(m.UnreadableEntries), lv...)
			if m.QuotaExcessBytes > 0 {
				gauge(quotaExcessDesc, float64(m.QuotaExcessBytes), lv...)
			}
			// Only while incomplete, as the over-limit series: a default family then costs the
			// few volumes a tenant keeps unmeasurable, not one series per volume.
			for _, why := range m.IncompleteReasons() {
				gauge(incompleteDesc, 1, append(lv, why)...)
			}
			if !r.IncompleteSince.IsZero() {
				gauge(incompleteSinceDesc, unixSeconds(r.IncompleteSince), lv...)
			}
			if m.UnexplainedBytes >= unexplainedThreshold {
				gauge(unexplainedDesc, float64(m.UnexplainedBytes), lv...)
			}
			if m.UnlinkedOpenBytes > 0 {
				gauge(unlinkedOpenDesc, float64(m.UnlinkedOpenBytes), lv...)
			}
			if m.Method != "" {
				gauge(measurementInfoDesc, 1, append(lv, m.Method)...)
			}
			if !r.UnchangedAt.IsZero() {
				gauge(unchangedDesc, unixSeconds(r.UnchangedAt), lv...)
			}
		}
	}
	if sel&selectVolumes != 0 {
		if fs, ok := snap.diskFilesystem(); ok {
			gauge(filesystemCapacityDesc, float64(fs.CapacityBytes), node)
			gauge(filesystemAvailableDesc, float64(fs.AvailableBytes), node)
		}
	}

	e.collectStorage(ch, snap, now, sel)
	e.collectWorkloads(ch, snap, sel)

	if sel&selectExporter == 0 {
		return
	}
	if snap.cycles > 0 {
		gauge(durationDesc, snap.duration.Seconds(), node, source)
		gauge(successDesc, boolFloat(snap.success), node, source)
	}
	if !snap.lastSuccess.IsZero() {
		gauge(lastSuccessDesc, float64(snap.lastSuccess.UnixNano())/1e9, node, source)
	}
	gauge(podsDesc, float64(snap.pods), node)
	gauge(volumesDesc, float64(snap.volumeCount), node)
	gauge(syncedDesc, boolFloat(e.cfg.Pods.HasSynced()), node)
	for _, o := range []string{part.OpenFilesCounted, part.OpenFilesOff, part.OpenFilesUnreadable} {
		if n := snap.openFilesVolumes(o); n > 0 {
			gauge(openFilesVolumesDesc, float64(n), node, o)
		}
	}
	if oldest, ok := snap.oldestTriggerMeasurement(); ok {
		gauge(oldestTriggerAgeDesc, max(0, now.Sub(oldest).Seconds()), node)
	}
	if e.walks != nil {
		e.walks.Collect(ch)
	}

	e.collectAlignment(ch)
	e.collections.Collect(ch)
	e.measureErrors.Collect(ch)
	e.uncheckedLinks.Collect(ch)
	e.watchErrors.Collect(ch)
	e.liveRequests.Collect(ch)
	e.liveRefusals.Collect(ch)
	e.liveCuts.Collect(ch)
}

// openFilesVolumes counts the emptyDirs whose measurement has outcome in Measurement.OpenFiles.
func (s snapshot) openFilesVolumes(outcome string) int {
	n := 0
	for _, r := range s.volumes {
		if r.Part.Kind == part.KindEmptyDir && r.Measurement.OpenFiles == outcome {
			n++
		}
	}
	return n
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
