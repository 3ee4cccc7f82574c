package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const calibrationDir = "/run/emptydir-exporter/calibration"

func exporterPod(uid string, started bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guard", Name: "exporter-x1", UID: types.UID("uid-" + uid)},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "calibration", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "exporter", VolumeMounts: []corev1.VolumeMount{
				{Name: "calibration", MountPath: calibrationDir, ReadOnly: true}}}},
		},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable},
	}
	if started {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "exporter", ContainerID: "containerd://abc"}}
	}
	return p
}

// TestOwnPodFromAPIServer: the exporter finds its own pod by name and checks its UID (a pod of
// that name recreated is another pod); it waits for the kubelet to write its container's ID.
func TestOwnPodFromAPIServer(t *testing.T) {
	me := calibrationConfig{dir: calibrationDir, podName: "exporter-x1", podNamespace: "guard", uid: "uid-1"}
	client := fake.NewClientset(exporterPod("1", true))
	p, err := ownPod(context.Background(), client, me)
	if err != nil || p.ContainerID != "containerd://abc" || p.UID != "uid-1" || p.Volume != "calibration" {
		t.Fatalf("ownPod = %+v, %v; want the pod's container ID, UID and emptyDir", p, err)
	}

	if p, err := ownPod(context.Background(), fake.NewClientset(exporterPod("2", true)), me); err == nil {
		t.Errorf("another UID: ownPod = %+v, want an error", p)
	}
	noDir := me
	noDir.dir = ""
	if p, err := ownPod(context.Background(), client, noDir); err == nil {
		t.Errorf("no --calibration.dir: ownPod = %+v, want an error", p)
	}

	// The first read before the kubelet wrote the status, the second after.
	pending := fake.NewClientset()
	lists := 0
	pending.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return true, &corev1.PodList{Items: []corev1.Pod{*exporterPod("1", lists > 1)}}, nil
	})
	if p, err := ownPod(context.Background(), pending, me); err != nil || p.ContainerID != "containerd://abc" || lists != 2 {
		t.Errorf("status written after the first read: ownPod = %+v, %v after %d reads; want the container ID after 2", p, err, lists)
	}
}

// retargets records the roots a locator was moved to.
type retargets []string

func (r *retargets) Retarget(root string) error { *r = append(*r, root); return nil }

// TestRootFollower: with --cgroup.root=auto the locators follow each root calibration finds,
// once per change, and keep theirs when a calibration finds none; a root given by flag (no
// follower) moves nothing.
func TestRootFollower(t *testing.T) {
	var buf bytes.Buffer
	f := &rootFollower{logger: slog.New(slog.NewTextHandler(&buf, nil))}
	f.found("/") // the first calibration, before the locators are opened
	var signal, openFiles retargets
	f.follow(&signal)
	f.follow(&openFiles)
	for _, root := range []string{"", "/", "/kubelet", "/kubelet", "", "/"} {
		f.found(root)
	}
	want := []string{"/kubelet", "/"}
	if !slices.Equal(signal, want) || !slices.Equal(openFiles, want) || f.current() != "/" {
		t.Errorf("retargeted to %q and %q, at %s; want %q each, at /", signal, openFiles, f.current(), want)
	}
	if got := strings.Count(buf.String(), "cgroup root moved"); got != 2 {
		t.Errorf("%d moves logged, want 2:\n%s", got, buf.String())
	}
	var fixed *rootFollower
	fixed.follow(&signal) // a root given by flag: nothing to follow, no panic
}
