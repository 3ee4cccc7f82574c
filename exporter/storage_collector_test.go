package exporter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// storageFixture is a pod with a container limit whose parts the table has measured: 3 MiB in
// a disk emptyDir without a sizeLimit, 11 MiB in the main container's writable layer, 1 MiB of
// its logs, a sidecar whose layer could not be located (the pod runs under RuntimeClass
// kata-fc).
func storageFixture(dedicated bool) *exporter.Exporter {
	return storageFixtureWith(exporter.Config{DedicatedImageFilesystem: dedicated})
}

// storageFixtureWith is storageFixture with cfg's DedicatedImageFilesystem and Publishes.
func storageFixtureWith(cfg exporter.Config) *exporter.Exporter {
	const uid = "uid-job"
	mib := int64(1 << 20)
	pods := exportertest.NewPods(part.Pod{Namespace: "batch", Pod: "job-1", UID: uid,
		Parts: []part.Part{
			{Name: "scratch", Medium: part.MediumDisk, BudgetBytes: limit(20 << 20)},
			{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", BudgetBytes: limit(10 << 20)},
			{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main", BudgetBytes: limit(10 << 20)},
			{Name: "container/side/writable-layer", Kind: part.KindWritableLayer, Container: "side", BudgetBytes: limit(20 << 20)},
			{Name: "container/side/logs", Kind: part.KindContainerLogs, Container: "side", BudgetBytes: limit(20 << 20)},
			{Name: "pod/files", Kind: part.KindPodFiles, BudgetBytes: limit(20 << 20)},
		},
		Storage: &part.PodStorage{LimitBytes: limit(20 << 20), RuntimeClass: "kata-fc", Containers: []part.Container{
			{Name: "main", ID: "containerd://a", LimitBytes: limit(10 << 20)}, {Name: "side", ID: "containerd://b"}}},
	})
	at := t0.Add(-2 * time.Second)
	table := exportertest.NewTable()
	set := func(name string, used int64, method string) {
		table.Set(uid, name, part.Measurement{UsedBytes: used, MeasuredAt: at, CompletedAt: at, Method: method})
	}
	set("scratch", 3*mib, part.MethodWalk)
	set("container/main/writable-layer", 11*mib, part.MethodWalk)
	set("container/main/logs", mib, part.MethodFiles)
	table.Set(uid, "container/side/writable-layer", part.Measurement{Unlocated: source.LayerNoRootfsMount, Method: part.MethodNone, MeasuredAt: t0, CompletedAt: t0})
	set("container/side/logs", 8192, part.MethodFiles)
	set("pod/files", 4096, part.MethodFiles)
	now := t0
	src := exportertest.NewSource(table.Measure).Measurer()
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: func() time.Time { return now },
		MeasureEphemeralStorage: true, DedicatedImageFilesystem: cfg.DedicatedImageFilesystem, Publishes: cfg.Publishes}))
	if err != nil {
		panic(err)
	}
	e.Refresh(context.Background())
	return e
}

func TestCollectEphemeralStorage(t *testing.T) {
	e := storageFixture(false)
	want := `
# HELP emptydir_pod_ephemeral_storage_used_bytes Bytes of ephemeral storage the pod uses, as the kubelet counts them against its limit.
# TYPE emptydir_pod_ephemeral_storage_used_bytes gauge
emptydir_pod_ephemeral_storage_used_bytes{namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 1.5740928e+07
# HELP emptydir_pod_ephemeral_storage_limit_bytes The pod's ephemeral-storage limit in bytes, its containers' limits added up; absent without one.
# TYPE emptydir_pod_ephemeral_storage_limit_bytes gauge
emptydir_pod_ephemeral_storage_limit_bytes{namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 2.097152e+07
# HELP emptydir_pod_ephemeral_storage_part_bytes What makes up emptydir_pod_ephemeral_storage_used_bytes in bytes, by part.
# TYPE emptydir_pod_ephemeral_storage_part_bytes gauge
emptydir_pod_ephemeral_storage_part_bytes{namespace="batch",node="node-1",part="emptydir",pod="job-1",uid="uid-job"} 3.145728e+06
emptydir_pod_ephemeral_storage_part_bytes{namespace="batch",node="node-1",part="logs",pod="job-1",uid="uid-job"} 1.056768e+06
emptydir_pod_ephemeral_storage_part_bytes{namespace="batch",node="node-1",part="other",pod="job-1",uid="uid-job"} 4096
emptydir_pod_ephemeral_storage_part_bytes{namespace="batch",node="node-1",part="writable_layer",pod="job-1",uid="uid-job"} 1.1534336e+07
# HELP emptydir_pod_ephemeral_storage_measurement_incomplete 1 while the pod's ephemeral-storage usage is a lower bound, by reason.
# TYPE emptydir_pod_ephemeral_storage_measurement_incomplete gauge
emptydir_pod_ephemeral_storage_measurement_incomplete{namespace="batch",node="node-1",pod="job-1",reason="unlocated",uid="uid-job"} 1
# HELP emptydir_pod_ephemeral_storage_measurement_age_seconds Seconds between the oldest measurement behind emptydir_pod_ephemeral_storage_used_bytes and this scrape.
# TYPE emptydir_pod_ephemeral_storage_measurement_age_seconds gauge
emptydir_pod_ephemeral_storage_measurement_age_seconds{namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 2
# HELP emptydir_container_ephemeral_storage_used_bytes Bytes of ephemeral storage the container uses, as the kubelet counts them against its limit.
# TYPE emptydir_container_ephemeral_storage_used_bytes gauge
emptydir_container_ephemeral_storage_used_bytes{container="main",namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 1.2582912e+07
emptydir_container_ephemeral_storage_used_bytes{container="side",namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 8192
# HELP emptydir_container_ephemeral_storage_limit_bytes The container's limits.ephemeral-storage in bytes; absent when it has none.
# TYPE emptydir_container_ephemeral_storage_limit_bytes gauge
emptydir_container_ephemeral_storage_limit_bytes{container="main",namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 1.048576e+07
# HELP emptydir_container_ephemeral_storage_part_bytes The container's writable layer and logs in bytes, by part.
# TYPE emptydir_container_ephemeral_storage_part_bytes gauge
emptydir_container_ephemeral_storage_part_bytes{container="main",namespace="batch",node="node-1",part="logs",pod="job-1",uid="uid-job"} 1.048576e+06
emptydir_container_ephemeral_storage_part_bytes{container="main",namespace="batch",node="node-1",part="writable_layer",pod="job-1",uid="uid-job"} 1.1534336e+07
emptydir_container_ephemeral_storage_part_bytes{container="side",namespace="batch",node="node-1",part="logs",pod="job-1",uid="uid-job"} 8192
emptydir_container_ephemeral_storage_part_bytes{container="side",namespace="batch",node="node-1",part="writable_layer",pod="job-1",uid="uid-job"} 0
# HELP emptydir_container_writable_layer_unlocated 1 when the container's writable layer could not be located, by reason and runtime_class.
# TYPE emptydir_container_writable_layer_unlocated gauge
emptydir_container_writable_layer_unlocated{container="side",namespace="batch",node="node-1",pod="job-1",reason="no_rootfs_mount",runtime_class="kata-fc",uid="uid-job"} 1
# HELP emptydir_exporter_image_filesystem_dedicated 1 when writable layers are on a filesystem other than the kubelet's root dir.
# TYPE emptydir_exporter_image_filesystem_dedicated gauge
emptydir_exporter_image_filesystem_dedicated{node="node-1"} 0
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="batch",node="node-1",pod="job-1",uid="uid-job",volume="scratch"} 3.145728e+06
# HELP emptydir_exporter_volumes emptyDir volumes in use on the node.
# TYPE emptydir_exporter_volumes gauge
emptydir_exporter_volumes{node="node-1"} 1
`
	names := []string{"emptydir_pod_ephemeral_storage_used_bytes", "emptydir_pod_ephemeral_storage_limit_bytes",
		"emptydir_pod_ephemeral_storage_part_bytes", "emptydir_pod_ephemeral_storage_measurement_incomplete",
		"emptydir_pod_ephemeral_storage_measurement_age_seconds", "emptydir_container_ephemeral_storage_used_bytes",
		"emptydir_container_ephemeral_storage_limit_bytes", "emptydir_container_ephemeral_storage_part_bytes",
		"emptydir_container_writable_layer_unlocated", "emptydir_exporter_image_filesystem_dedicated",
		// The parts are no emptyDir volumes: only the emptyDir has series of its own.
		"emptydir_used_bytes", "emptydir_exporter_volumes"}
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// On a node whose image filesystem is dedicated, a container's writable layer counts toward
// its pod's limit only.
func TestCollectEphemeralStorageDedicatedImageFilesystem(t *testing.T) {
	e := storageFixture(true)
	want := `
# HELP emptydir_container_ephemeral_storage_used_bytes Bytes of ephemeral storage the container uses, as the kubelet counts them against its limit.
# TYPE emptydir_container_ephemeral_storage_used_bytes gauge
emptydir_container_ephemeral_storage_used_bytes{container="main",namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 1.048576e+06
emptydir_container_ephemeral_storage_used_bytes{container="side",namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 8192
# HELP emptydir_pod_ephemeral_storage_used_bytes Bytes of ephemeral storage the pod uses, as the kubelet counts them against its limit.
# TYPE emptydir_pod_ephemeral_storage_used_bytes gauge
emptydir_pod_ephemeral_storage_used_bytes{namespace="batch",node="node-1",pod="job-1",uid="uid-job"} 1.5740928e+07
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_container_ephemeral_storage_used_bytes", "emptydir_pod_ephemeral_storage_used_bytes"); err != nil {
		t.Error(err)
	}
}
