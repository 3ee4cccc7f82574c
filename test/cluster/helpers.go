package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// EnsureNamespace creates a namespace with what kube-controller-manager would add (which
// this cluster does not run): the default ServiceAccount, without which the ServiceAccount
// admission plugin rejects pods, and the kube-root-ca.crt ConfigMap that projected
// service-account volumes mount. Idempotent.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	cs := c.client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/default: %w", name, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data:       map[string]string{"ca.crt": string(c.pki.caPEM)},
	}
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create configmap %s/kube-root-ca.crt: %w", name, err)
	}
	return nil
}

// WaitNodeReady waits for the node's Ready condition; on timeout the error carries the
// kubelet's log tail, because the reason is almost always there.
func (c *Cluster) WaitNodeReady(ctx context.Context) error {
	var last string
	err := c.poll(ctx, "node "+c.nodeName+" Ready", c.kubelet, func() (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.nodeName, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				last = err.Error()
			}
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// WaitForPodPhase waits until the pod reaches phase. It fails early when the pod reaches a
// different terminal phase, since it can never leave it.
func (c *Cluster) WaitForPodPhase(ctx context.Context, namespace, name string, phase corev1.PodPhase) (*corev1.Pod, error) {
	var pod *corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if pod.Status.Phase == phase {
				return true, nil
			}
			last = describePod(pod)
			if (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) && phase != pod.Status.Phase {
				return false, fmt.Errorf("pod %s/%s reached terminal phase %s, want %s: %s", namespace, name, pod.Status.Phase, phase, last)
			}
		} else {
			last = err.Error()
		}
		if c.kubelet != nil && c.kubelet.exited() {
			return false, fmt.Errorf("waiting for pod %s/%s: %w", namespace, name, c.kubelet.diedError())
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return pod, fmt.Errorf("waiting for pod %s/%s phase %s: %w (last: %s)", namespace, name, phase, err, last)
	}
	return pod, err
}

func describePod(p *corev1.Pod) string {
	parts := []string{fmt.Sprintf("phase=%s reason=%q message=%q", p.Status.Phase, p.Status.Reason, p.Status.Message)}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated %s (exit %d): %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// ExecInPod runs a command in a container through the API server and kubelet (kubectl exec),
// the same path a user would take.
func (c *Cluster) ExecInPod(ctx context.Context, namespace, pod, container string, cmd ...string) (stdout, stderr string, err error) {
	args := []string{"--kubeconfig=" + c.kubeconfig, "exec", "-n", namespace, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	args = append(args, "--")
	args = append(args, cmd...)
	x := c.Command(ctx, "kubectl", args...)
	var o, e bytes.Buffer
	x.Stdout, x.Stderr = &o, &e
	if err := x.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("exec %v in %s/%s: %w: %s", cmd, namespace, pod, err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), nil
}

// SeedPod returns the pod of the seed scenario (docs/design.md): a busybox container that writes
// nothing by itself and mounts emptyDir "empty" (sizeLimit 1Mi) at /test. It is bound to the
// node directly because no scheduler runs.
func (c *Cluster) SeedPod(namespace, name string) *corev1.Pod {
	limit := resource.MustParse("1Mi")
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      c.nodeName,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "test2",
				Image:           BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", `echo "The app is running!" && exec sleep 2147483647`},
				VolumeMounts:    []corev1.VolumeMount{{Name: "empty", MountPath: "/test"}},
			}},
			Volumes: []corev1.Volume{{
				Name:         "empty",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}},
			}},
		},
	}
}
