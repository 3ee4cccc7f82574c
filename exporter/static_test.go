package exporter_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// A static pod as the API server shows it: the mirror pod, with its own UID and the
// kubelet's config hash in an annotation.
const (
	mirrorUID  = "9b2f4e61-3c5d-4a7e-8f01-23456789abcd"
	configHash = "6c3a0ff2b15a4cd8e7b6f9b1f7a0c2d4"
)

// TestStaticPodMeasuredUnderConfigHash runs the pod informer, the filesystem source and the
// exporter over a fake kubelet root dir that holds a static pod's volume where the kubelet
// keeps it: under the config hash. The series and the live answer carry the API UID, which
// the remediator evicts by.
func TestStaticPodMeasuredUnderConfigHash(t *testing.T) {
	root := t.TempDir()
	dir := part.EmptyDirPath(root, configHash, "data")
	writeBytes(t, filepath.Join(dir, "wal.bin"), 128<<10)
	client := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-node-1", UID: mirrorUID,
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: configHash, corev1.MirrorPodAnnotationKey + "-other": "x"},
			// As the kubelet creates a mirror pod: its Node as the controller.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "node-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "etcd",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	})
	pods, err := exporter.NewPodWatcher(client, "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); pods.Shutdown() }()
	if err := pods.Start(ctx); err != nil {
		t.Fatal(err)
	}
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: pods,
		Source: &source.Filesystem{KubeletRootDir: root, WalkConcurrency: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	want := exportertest.DuBytes(t, dir)

	exp.Refresh(ctx)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exp)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var used []*dto.Metric
	success := -1.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "emptydir_used_bytes":
			used = mf.GetMetric()
		case "emptydir_exporter_collection_success":
			success = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if success != 1 {
		t.Errorf("emptydir_exporter_collection_success %v, want 1: the static pod's volume was not found", success)
	}
	if len(used) != 1 {
		t.Fatalf("%d emptydir_used_bytes series, want 1 for the static pod", len(used))
	}
	labels := map[string]string{}
	for _, lp := range used[0].GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	if labels["uid"] != mirrorUID || labels["pod"] != "etcd-node-1" || labels["volume"] != "data" {
		t.Errorf("series labels %v, want pod etcd-node-1, volume data and the API UID %s", labels, mirrorUID)
	}
	if got := used[0].GetGauge().GetValue(); got != float64(want) {
		t.Errorf("emptydir_used_bytes %v, du -s -B1 of the directory under the config hash says %d", got, want)
	}

	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := &liveFixture{root: root, exp: exp, srv: srv}
	r := f.getOK(t, "/live/namespaces/kube-system/pods/etcd-node-1?uid="+mirrorUID)
	if r.UID != mirrorUID || len(r.Volumes) != 1 || *r.Volumes[0].UsedBytes != want {
		t.Errorf("live answer %+v, want uid %s and usedBytes %d", r, mirrorUID, want)
	}
	if code, body := f.get(t, "/live/namespaces/kube-system/pods/etcd-node-1?uid="+configHash); code != http.StatusBadRequest {
		t.Errorf("live request by config hash: %d %s, want 400: only the API UID names the pod", code, body)
	}
}
