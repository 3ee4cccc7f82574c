package remediator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// maxSummaryBytes bounds what is read from a kubelet Summary API answer.
const maxSummaryBytes = 64 << 20

// KubeletMeasurer reads volume usage from the kubelet Summary API through the API server's
// node proxy (GET {apiServer}/api/v1/nodes/{node}/proxy/stats/summary). The kubelet refreshes
// volume stats only every --volume-stats-agg-period (1m by default), so with the default
// maximum age most answers are rejected as stale; see docs/remediator.md.
type KubeletMeasurer struct {
	client    *http.Client
	apiServer string
	maxAge    time.Duration
	now       func() time.Time
}

// NewKubeletMeasurer returns a measurer that asks the API server at apiServer (its base URL,
// e.g. from rest.Config.Host) through client, which must carry the credentials (see
// rest.HTTPClientFor), and rejects measurements older than maxAge.
func NewKubeletMeasurer(client *http.Client, apiServer string, maxAge time.Duration) *KubeletMeasurer {
	if client == nil {
		client = http.DefaultClient
	}
	return &KubeletMeasurer{client: client, apiServer: strings.TrimSuffix(apiServer, "/"), maxAge: maxAge, now: time.Now}
}

// Measure reads the Summary API of the pod's node and returns the volume's usedBytes.
func (m *KubeletMeasurer) Measure(ctx context.Context, pod *corev1.Pod, volume string) (Measurement, error) {
	node := pod.Spec.NodeName
	if node == "" {
		return Measurement{}, measureErr(MeasureNotFound, "pod %s/%s is not scheduled to a node", pod.Namespace, pod.Name)
	}
	u, err := url.Parse(m.apiServer)
	if err != nil {
		return Measurement{}, measureErr(MeasureUnreachable, "API server URL %q: %w", m.apiServer, err)
	}
	u = u.JoinPath("api", "v1", "nodes", node, "proxy", "stats", "summary")
	status, body, err := getJSON(ctx, m.client, u, maxSummaryBytes)
	if err != nil {
		return Measurement{}, err
	}
	switch {
	case status == http.StatusOK:
	case status == http.StatusNotFound:
		return Measurement{}, measureErr(MeasureNotFound, "summary of node %q: %d: %s", node, status, errorMessage(body))
	case status >= 500:
		return Measurement{}, measureErr(MeasureUnavailable, "summary of node %q: %d: %s", node, status, errorMessage(body))
	default:
		return Measurement{}, measureErr(MeasureBadResponse, "summary of node %q: %d: %s", node, status, errorMessage(body))
	}
	var summary statsv1alpha1.Summary
	if err := json.Unmarshal(body, &summary); err != nil {
		return Measurement{}, measureErr(MeasureBadResponse, "decoding summary of node %q: %w", node, err)
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
		for _, vs := range ps.VolumeStats {
			if vs.Name != volume {
				continue
			}
			if vs.UsedBytes == nil {
				return Measurement{}, measureErr(MeasureBadResponse, "summary of node %q has no usedBytes for volume %q", node, volume)
			}
			at := vs.Time.Time
			if err := checkFresh(at, m.now(), m.maxAge); err != nil {
				return Measurement{}, err
			}
			return Measurement{Source: SourceKubelet, Node: node, Volume: volume, UsedBytes: int64(*vs.UsedBytes), MeasuredAt: at}, nil
		}
		return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no stats for volume %q of pod %s/%s (yet)", node, volume, pod.Namespace, pod.Name)
	}
	return Measurement{}, measureErr(MeasureNotFound, "summary of node %q has no pod %s/%s", node, pod.Namespace, pod.Name)
}
