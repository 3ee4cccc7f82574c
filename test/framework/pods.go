package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// RunPod creates pod and waits (2 minutes at most) until it runs; the test's cleanup deletes it.
func RunPod(ctx context.Context, t TB, c *cluster.Cluster, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if _, err := c.Client().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client().CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	running, err := c.WaitForPodPhase(wctx, pod.Namespace, pod.Name, corev1.PodRunning)
	if err != nil {
		t.Fatal(err)
	}
	return running
}

// RandSuffix is 6 random hex digits, for names that must not collide between runs.
func RandSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PodEvents lists the Events of reason on pod p, oldest first.
func PodEvents(ctx context.Context, t TB, c *cluster.Cluster, p *corev1.Pod, reason string) []corev1.Event {
	t.Helper()
	list, err := c.Client().CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == string(p.UID) && e.Reason == reason {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return EventTime(out[i]).Before(EventTime(out[j])) })
	return out
}

// EventTime is when an Event happened: EventTime if set (events.k8s.io), else FirstTimestamp.
func EventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// PodState tells whether the pod instance uid still runs, and if not, what became of it.
func PodState(ctx context.Context, c *cluster.Cluster, ns, name, uid string) (running bool, desc string) {
	p, err := c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "gone"
	}
	if err != nil {
		return false, err.Error()
	}
	if string(p.UID) != uid {
		return false, "replaced by uid " + string(p.UID)
	}
	if p.DeletionTimestamp != nil {
		return false, "terminating"
	}
	return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
}

// Namespace creates a namespace named prefix-<random> on c and returns its name.
func Namespace(ctx context.Context, t TB, c *cluster.Cluster, prefix string) string {
	t.Helper()
	ns := prefix + "-" + RandSuffix()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}
