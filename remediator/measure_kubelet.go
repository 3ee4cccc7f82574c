package remediator

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/emptydir-guard/emptydir-guard/internal/kubeletsummary"
)

// KubeletMeasurer reads volume usage from the kubelet Summary API through the API server's
// node proxy (GET /api/v1/nodes/{node}/proxy/stats/summary). The kubelet refreshes volume
// stats only every --volume-stats-agg-period (1m by default), so with the default maximum
// age most of its measurements are too old to act on; see docs/remediator.md.
type KubeletMeasurer struct {
	client kubernetes.Interface
}

// NewKubeletMeasurer returns a measurer that asks the API server through client; the
// client's timeout bounds one measurement.
func NewKubeletMeasurer(client kubernetes.Interface) *KubeletMeasurer {
	return &KubeletMeasurer{client: client}
}

// Measure reads the Summary API of the pod's node and returns the subject's usedBytes with
// the kubelet's stats time: a volume's, the pod's ephemeral storage (what the kubelet's own
// check compares), or a container's logs plus its writable layer unless the Summary shows
// the image filesystem apart from the node's.
func (m *KubeletMeasurer) Measure(ctx context.Context, pod *corev1.Pod, subject Subject) (Measurement, error) {
	volume := subject.Volume
	node := pod.Spec.NodeName
	if node == "" {
		return Measurement{}, measureErr(MeasureNotFound, "pod %s/%s is not scheduled to a node", pod.Namespace, pod.Name)
	}
	summary, err := kubeletsummary.ThroughProxy(ctx, m.client.CoreV1().RESTClient(), node)
	if err != nil {
		return Measurement{}, &MeasurementError{Reason: summaryErrorReason(err), Err: err}
	}
	if summary.Node.NodeName != node {
		return Measurement{}, measureErr(MeasureWrongNode, "summary asked of node %q is of node %q", node, summary.Node.NodeName)
	}
	for _, ps := range summary.Pods {
		if ps.PodRef.Namespace != pod.Namespace || ps.PodRef.Name != pod.Name {
			continue
		}
		if ps.PodRef.UID != string(pod.UID) {
			return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has pod %s/%s with uid %q, not %q", node, pod.Namespace, pod.Name, ps.PodRef.UID, pod.UID)
		}
		switch subject.Check {
		case CheckPod:
			es := ps.EphemeralStorage
			if es == nil || es.UsedBytes == nil {
				return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no ephemeral-storage usage of pod %s/%s (yet)", node, pod.Namespace, pod.Name)
			}
			return Measurement{Source: SourceKubelet, Node: node, Subject: subject, UsedBytes: int64(*es.UsedBytes), MeasuredAt: es.Time.Time}, nil
		case CheckContainer:
			return containerSummary(summary, ps, subject)
		}
		for _, vs := range ps.VolumeStats {
			if vs.Name != volume {
				continue
			}
			if vs.UsedBytes == nil {
				return Measurement{}, measureErr(MeasureBadResponse, "summary of node %q has no usedBytes for volume %q", node, volume)
			}
			return Measurement{Source: SourceKubelet, Node: node, Subject: subject, UsedBytes: int64(*vs.UsedBytes), MeasuredAt: vs.Time.Time}, nil
		}
		return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no stats for volume %q of pod %s/%s (yet)", node, volume, pod.Namespace, pod.Name)
	}
	return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no pod %s/%s", node, pod.Namespace, pod.Name)
}

// containerSummary is a container's usage as the kubelet's container check adds it up, from
// its own Summary: the logs, plus the writable layer unless the node's image filesystem is
// dedicated. The Summary does not say so; an image filesystem whose capacity, free space and
// inodes all equal the node filesystem's is taken for the same one, anything else for a
// dedicated one, which counts less: a missed eviction, never a wrong one.
func containerSummary(summary *statsapi.Summary, ps statsapi.PodStats, subject Subject) (Measurement, error) {
	node := summary.Node.NodeName
	for _, cs := range ps.Containers {
		if cs.Name != subject.Container {
			continue
		}
		if cs.Logs == nil || cs.Logs.UsedBytes == nil {
			return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no log usage of container %q (yet)", node, cs.Name)
		}
		used, at := int64(*cs.Logs.UsedBytes), cs.Logs.Time.Time
		if !kubeletsummary.DedicatedImageFs(summary) {
			if cs.Rootfs == nil || cs.Rootfs.UsedBytes == nil {
				return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no writable-layer usage of container %q (yet)", node, cs.Name)
			}
			used += int64(*cs.Rootfs.UsedBytes)
			if cs.Rootfs.Time.Before(&cs.Logs.Time) {
				at = cs.Rootfs.Time.Time
			}
		}
		return Measurement{Source: SourceKubelet, Node: node, Subject: subject, UsedBytes: used, MeasuredAt: at}, nil
	}
	return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no running container %q of pod %s/%s", node, subject.Container, ps.PodRef.Namespace, ps.PodRef.Name)
}

// summaryErrorReason classifies a failed Summary read: the API server's (or kubelet's)
// status when one answered, else the API server was not reached.
func summaryErrorReason(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, kubeletsummary.ErrMalformed):
		return MeasureBadResponse
	case !errors.As(err, &status):
		return MeasureUnreachable
	}
	switch code := status.Status().Code; {
	case code == http.StatusNotFound:
		return MeasureNotFound
	case code >= 500:
		return MeasureUnavailable
	default:
		return MeasureBadResponse
	}
}
