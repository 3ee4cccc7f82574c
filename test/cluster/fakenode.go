package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// FakeNode is a Node object in the API with no kubelet behind it: the test plays the
// kubelet's part for the pods bound to it, creating and removing their emptyDir directories
// below RootDir exactly where a kubelet with --root-dir=RootDir keeps them. An exporter
// started with --node.name=Name() --kubelet.root-dir=RootDir() --collection.source=filesystem
// measures these directories as it would a real node's, so hundreds of pods can come and go
// without containers (no CPU, no images, no container runtime).
type FakeNode struct {
	client kubernetes.Interface
	name   string
	root   string
}

// NewFakeNode creates the Node name, marked Ready (nothing else would: no kubelet posts
// its status and no node lifecycle controller runs), and the kubelet root dir rootDir.
// client may be faster than the cluster's own (Cluster.RESTConfig with a higher QPS) for
// tests that create many pods.
func NewFakeNode(ctx context.Context, client kubernetes.Interface, name, rootDir string) (*FakeNode, error) {
	if err := os.MkdirAll(filepath.Join(rootDir, "pods"), 0o755); err != nil {
		return nil, fmt.Errorf("fake node %s: %w", name, err)
	}
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("fake node %s: create Node: %w", name, err)
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeNodeReady",
		Message: "no kubelet: the test plays its part", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("fake node %s: set Ready: %w", name, err)
	}
	return &FakeNode{client: client, name: name, root: rootDir}, nil
}

// NewFakeNode creates a fake node named name with its root dir in the cluster's work dir;
// Stop removes the directory, Delete the node and its pods.
func (c *Cluster) NewFakeNode(ctx context.Context, name string) (*FakeNode, error) {
	return NewFakeNode(ctx, c.client, name, filepath.Join(c.workDir, "fakenodes", name))
}

// Name is the node's name, for the exporter's --node-name.
func (n *FakeNode) Name() string { return n.name }

// RootDir is the kubelet root dir, for the exporter's --kubelet.root-dir.
func (n *FakeNode) RootDir() string { return n.root }

// Pod returns a pod bound to the node with one container that mounts one emptyDir
// volume per name in volumes, without sizeLimit. It is only built, not created. Its
// default termination grace period makes a user's delete graceful, as on a real node:
// the pod stays, terminating, until FinishDeletion.
func (n *FakeNode) Pod(namespace, name string, volumes ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:   n.name,
			Containers: []corev1.Container{{Name: "app", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	for _, v := range volumes {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/" + v})
	}
	return p
}

// RunPod does what creating a pod and its kubelet do: CreatePod, then StartPod.
func (n *FakeNode) RunPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	created, err := n.CreatePod(ctx, pod)
	if err != nil {
		return nil, err
	}
	return n.StartPod(ctx, created)
}

// CreatePod creates pod in the API, bound to this node; it stays Pending, with no volume
// directories, until StartPod: the moment between is the kubelet still setting the pod up.
func (n *FakeNode) CreatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Spec.NodeName = n.name
	created, err := n.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("fake node %s: create pod %s/%s: %w", n.name, pod.Namespace, pod.Name, err)
	}
	return created, nil
}

// StartPod plays the kubelet setting up a created pod: it creates a directory for each
// emptyDir volume its containers mount and reports the pod Running.
func (n *FakeNode) StartPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	if pod.UID == "" || pod.Spec.NodeName != n.name {
		return nil, fmt.Errorf("fake node %s: pod %s/%s is not a created pod of this node", n.name, pod.Namespace, pod.Name)
	}
	for _, v := range mountedEmptyDirs(pod) {
		if err := os.MkdirAll(n.VolumeDir(pod, v), 0o750); err != nil {
			return nil, fmt.Errorf("fake node %s: set up volume %s of %s/%s: %w", n.name, v, pod.Namespace, pod.Name, err)
		}
	}
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	running, err := n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("fake node %s: report pod %s/%s Running: %w", n.name, pod.Namespace, pod.Name, err)
	}
	return running, nil
}

// VolumeDir is where the kubelet keeps emptyDir volume of pod on this node.
func (n *FakeNode) VolumeDir(pod *corev1.Pod, volume string) string {
	return filepath.Join(n.podDir(pod.UID), "volumes", "kubernetes.io~empty-dir", volume)
}

func (n *FakeNode) podDir(uid types.UID) string {
	return filepath.Join(n.root, "pods", string(uid))
}

// Fill writes files new files of size bytes each (non-zero data, so that every block is
// allocated) into a volume of a started pod, as a container would.
func (n *FakeNode) Fill(pod *corev1.Pod, volume string, files int, size int64) error {
	dir := n.VolumeDir(pod, volume)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("fake node %s: fill %s: %w", n.name, volume, err)
	}
	data := []byte(strings.Repeat("x", int(size)))
	for i := range files {
		path := filepath.Join(dir, fmt.Sprintf("file-%d", len(entries)+i))
		if err := os.WriteFile(path, data, 0o640); err != nil {
			return fmt.Errorf("fake node %s: fill %s: %w", n.name, volume, err)
		}
	}
	return nil
}

// DeletePod deletes pod as a user and its kubelet do: a graceful delete (the API server
// only marks the pod terminating), then FinishDeletion.
func (n *FakeNode) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	err := n.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !isUIDConflict(err) {
		return fmt.Errorf("fake node %s: delete pod %s/%s: %w", n.name, pod.Namespace, pod.Name, err)
	}
	return n.FinishDeletion(ctx, pod)
}

// TearDown plays the kubelet tearing down a terminating pod's volumes: it removes the
// pod's directory. Until FinishDeletion the pod is still in the API, terminating, with no
// directories: the moment a real kubelet spends between unmounting and its final delete.
func (n *FakeNode) TearDown(pod *corev1.Pod) error {
	if pod.UID == "" {
		return fmt.Errorf("fake node %s: pod %s/%s has no UID", n.name, pod.Namespace, pod.Name)
	}
	if err := os.RemoveAll(n.podDir(pod.UID)); err != nil {
		return fmt.Errorf("fake node %s: tear down pod %s/%s: %w", n.name, pod.Namespace, pod.Name, err)
	}
	return nil
}

// FinishDeletion plays the kubelet ending a pod: TearDown, then a delete with grace
// period 0, for this UID only, so that a pod recreated under the same name is left
// alone. A pod already gone is no error.
func (n *FakeNode) FinishDeletion(ctx context.Context, pod *corev1.Pod) error {
	if err := n.TearDown(pod); err != nil {
		return err
	}
	zero := int64(0)
	err := n.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !isUIDConflict(err) {
		return fmt.Errorf("fake node %s: final delete of pod %s/%s: %w", n.name, pod.Namespace, pod.Name, err)
	}
	return nil
}

// isUIDConflict reports a delete whose UID precondition failed: the name belongs to a
// newer pod, so the old one is gone.
func isUIDConflict(err error) bool {
	return apierrors.IsConflict(err) && strings.Contains(err.Error(), "Precondition failed: UID")
}

// Delete removes every pod bound to the node (grace period 0), the Node and the root dir.
func (n *FakeNode) Delete(ctx context.Context) error {
	var errs []error
	pods, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("list pods: %w", err))
	} else {
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != n.name {
				continue // a client that ignores the field selector
			}
			if err := n.FinishDeletion(ctx, &pods.Items[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := n.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete Node: %w", err))
	}
	if err := os.RemoveAll(n.root); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fake node %s: %w", n.name, err)
	}
	return nil
}

// mountedEmptyDirs lists the emptyDir volumes some container of pod mounts: the kubelet
// sets up only those.
func mountedEmptyDirs(pod *corev1.Pod) []string {
	mounted := map[string]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = true
			}
		}
	}
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && mounted[v.Name] {
			out = append(out, v.Name)
		}
	}
	return out
}
