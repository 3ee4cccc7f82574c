package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// TestFakeNodeLifecycle plays a pod's life on a fake node against the fake clientset and
// checks each step leaves the API and the directories where a kubelet would, at the paths the
// exporter measures. The real API server's side is exercised by test/e2e's churn test.
func TestFakeNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	root := filepath.Join(t.TempDir(), "kubelet")
	n, err := NewFakeNode(ctx, cs, "fake-1", root)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "fake-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Status.Conditions) != 1 || node.Status.Conditions[0].Type != corev1.NodeReady || node.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("node conditions %+v, want Ready=True", node.Status.Conditions)
	}

	spec := n.Pod("ns", "p", "a", "b")
	spec.Spec.Volumes = append(spec.Spec.Volumes, corev1.Volume{Name: "unmounted", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.UID = "uid-1" // the fake clientset assigns none
	created, err := n.CreatePod(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.NodeName != "fake-1" {
		t.Errorf("created on node %q", created.Spec.NodeName)
	}
	if _, err := os.Stat(n.VolumeDir(created, "a")); !os.IsNotExist(err) {
		t.Errorf("volume directory before StartPod: %v, want none", err)
	}
	running, err := n.StartPod(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	if running.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s after StartPod", running.Status.Phase)
	}
	for _, v := range []string{"a", "b"} {
		dir := part.EmptyDirPath(root, "uid-1", v)
		if dir != n.VolumeDir(running, v) {
			t.Errorf("VolumeDir %s, exporter measures %s", n.VolumeDir(running, v), dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("volume %s directory: %v", v, err)
		}
	}
	if _, err := os.Stat(part.EmptyDirPath(root, "uid-1", "unmounted")); !os.IsNotExist(err) {
		t.Errorf("directory of a volume no container mounts: %v, want none", err)
	}

	if err := n.Fill(running, "a", 3, 5000); err != nil {
		t.Fatal(err)
	}
	if err := n.Fill(running, "a", 1, 10); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(n.VolumeDir(running, "a"))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if len(entries) != 4 || total != 3*5000+10 {
		t.Errorf("after two fills: %d files, %d bytes, want 4 files, 15010 bytes", len(entries), total)
	}
	if err := n.Fill(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "never-started"}}, "a", 1, 1); err == nil {
		t.Error("fill of a pod that has no directory: want an error")
	}

	// TearDown is the kubelet's unmount: directory gone, pod still in the API until FinishDeletion.
	if err := n.TearDown(running); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-1")); !os.IsNotExist(err) {
		t.Errorf("pod directory after TearDown: %v, want none", err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("pod after TearDown: %v, want still there", err)
	}
	if err := n.DeletePod(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-1")); !os.IsNotExist(err) {
		t.Errorf("pod directory after DeletePod: %v, want none", err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after DeletePod: %v, want NotFound", err)
	}
	if err := n.FinishDeletion(ctx, running); err != nil {
		t.Errorf("finishing the deletion of a pod already gone: %v", err)
	}
	if _, err := n.StartPod(ctx, n.Pod("ns", "never-created")); err == nil {
		t.Error("StartPod of a pod never created: want an error")
	}

	// Delete removes the node's pods, the Node and the root dir, and leaves other nodes' pods.
	left, err := n.RunPod(ctx, withUID(n.Pod("ns", "left", "a"), "uid-2"))
	if err != nil {
		t.Fatal(err)
	}
	other := withUID(n.Pod("ns", "other", "a"), "uid-3")
	other.Spec.NodeName = "elsewhere"
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, left.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node's pod after Delete: %v, want NotFound", err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("another node's pod after Delete: %v, want kept", err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "fake-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node after Delete: %v, want NotFound", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("root dir after Delete: %v, want removed", err)
	}
}

func withUID(p *corev1.Pod, uid types.UID) *corev1.Pod {
	p.UID = uid
	return p
}
