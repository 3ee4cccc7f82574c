package remediator

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// maxLiveResponseBytes bounds what is read from a live endpoint.
const maxLiveResponseBytes = 4 << 20

// ExporterLocator finds the base URL (scheme://host:port) of the exporter serving a node.
type ExporterLocator interface {
	Locate(ctx context.Context, node string) (string, error)
}

// StaticLocator always answers the same exporter URL: for single-node clusters and tests.
type StaticLocator string

// Locate returns the static URL.
func (s StaticLocator) Locate(context.Context, string) (string, error) {
	return strings.TrimSuffix(string(s), "/"), nil
}

// PodLocator finds the exporter of a node through the API server: the running, ready pod in
// Namespace matching Selector with spec.nodeName = node, addressed by its pod IP and Port.
type PodLocator struct {
	Client    kubernetes.Interface
	Namespace string
	Selector  string // label selector of the exporter pods
	Scheme    string // http or https
	Port      int
}

// Locate lists the exporter pods on node and returns the URL of a ready one.
func (l PodLocator) Locate(ctx context.Context, node string) (string, error) {
	list, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: l.Selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return "", measureErr(MeasureUnreachable, "listing exporter pods in namespace %q on node %q: %w", l.Namespace, node, err)
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podReady(&p) {
			continue
		}
		scheme := l.Scheme
		if scheme == "" {
			scheme = "http"
		}
		return scheme + "://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(l.Port)), nil
	}
	return "", measureErr(MeasureNoExporter, "no ready exporter pod (namespace %q, selector %q) on node %q", l.Namespace, l.Selector, node)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ExporterMeasurer takes live measurements from the exporter's live endpoint
// (GET /live/namespaces/{namespace}/pods/{pod}?uid=...&volume=..., see docs/metrics.md).
type ExporterMeasurer struct {
	client  *http.Client
	locator ExporterLocator
	maxAge  time.Duration
	now     func() time.Time
}

// NewExporterMeasurer returns a measurer that asks the exporter found by locator through
// client and rejects measurements older than maxAge.
func NewExporterMeasurer(client *http.Client, locator ExporterLocator, maxAge time.Duration) *ExporterMeasurer {
	if client == nil {
		client = http.DefaultClient
	}
	return &ExporterMeasurer{client: client, locator: locator, maxAge: maxAge, now: time.Now}
}

// liveResponse is the live endpoint's answer. measuredAt is when the walk started,
// completedAt when it ended (absent from exporters before it was added).
type liveResponse struct {
	Node        string       `json:"node"`
	Namespace   string       `json:"namespace"`
	Pod         string       `json:"pod"`
	UID         string       `json:"uid"`
	Source      string       `json:"source"`
	MeasuredAt  time.Time    `json:"measuredAt"`
	CompletedAt time.Time    `json:"completedAt"`
	Volumes     []liveVolume `json:"volumes"`
}

type liveVolume struct {
	Name              string    `json:"name"`
	Medium            string    `json:"medium"`
	UsedBytes         *int64    `json:"usedBytes"`
	LimitBytes        *int64    `json:"limitBytes,omitempty"`
	UnreadableEntries int64     `json:"unreadableEntries"`
	MeasuredAt        time.Time `json:"measuredAt"`
	CompletedAt       time.Time `json:"completedAt"`
}

// completedAt is when the volume's value was complete: the first of the volume's and the
// answer's completedAt, else (older exporters) measuredAt, the walk's start — stricter.
func (lr *liveResponse) completedAt(v liveVolume) time.Time {
	for _, t := range []time.Time{v.CompletedAt, lr.CompletedAt, v.MeasuredAt, lr.MeasuredAt} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// Measure asks the exporter on the pod's node for a live measurement of volume.
func (m *ExporterMeasurer) Measure(ctx context.Context, pod *corev1.Pod, volume string) (Measurement, error) {
	if pod.Spec.NodeName == "" {
		return Measurement{}, measureErr(MeasureNotFound, "pod %s/%s is not scheduled to a node", pod.Namespace, pod.Name)
	}
	base, err := m.locator.Locate(ctx, pod.Spec.NodeName)
	if err != nil {
		return Measurement{}, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return Measurement{}, measureErr(MeasureUnreachable, "exporter URL %q: %w", base, err)
	}
	u = u.JoinPath("live", "namespaces", pod.Namespace, "pods", pod.Name)
	u.RawQuery = url.Values{"uid": {string(pod.UID)}, "volume": {volume}}.Encode()

	status, body, err := getJSON(ctx, m.client, u, maxLiveResponseBytes)
	if err != nil {
		return Measurement{}, err
	}
	if status != http.StatusOK {
		msg := errorMessage(body)
		switch {
		case status == http.StatusNotFound:
			return Measurement{}, measureErr(MeasureNotFound, "exporter on node %q: %s", pod.Spec.NodeName, msg)
		case status >= 500, status == http.StatusTooManyRequests:
			// 429: the exporter bounds live walks per caller and in all; it is busy, not wrong.
			return Measurement{}, measureErr(MeasureUnavailable, "exporter on node %q answered %d: %s", pod.Spec.NodeName, status, msg)
		default:
			return Measurement{}, measureErr(MeasureBadResponse, "exporter on node %q answered %d: %s", pod.Spec.NodeName, status, msg)
		}
	}
	var lr liveResponse
	if err := json.Unmarshal(body, &lr); err != nil {
		return Measurement{}, measureErr(MeasureBadResponse, "decoding answer of exporter on node %q: %w", pod.Spec.NodeName, err)
	}
	if lr.UID != string(pod.UID) || lr.Namespace != pod.Namespace || lr.Pod != pod.Name {
		return Measurement{}, measureErr(MeasureBadResponse, "exporter answered for %s/%s uid %q, asked for %s/%s uid %q", lr.Namespace, lr.Pod, lr.UID, pod.Namespace, pod.Name, pod.UID)
	}
	if lr.Node != pod.Spec.NodeName {
		// Discovery or a static URL led to another node's exporter: its numbers are not
		// about this pod's volume.
		return Measurement{}, measureErr(MeasureWrongNode, "exporter answered from node %q, the pod runs on node %q", lr.Node, pod.Spec.NodeName)
	}
	for _, v := range lr.Volumes {
		if v.Name != volume {
			continue
		}
		if v.UsedBytes == nil {
			return Measurement{}, measureErr(MeasureBadResponse, "exporter answer for volume %q has no usedBytes", volume)
		}
		if v.UnreadableEntries < 0 {
			return Measurement{}, measureErr(MeasureBadResponse, "exporter answer for volume %q has unreadableEntries %d", volume, v.UnreadableEntries)
		}
		at := lr.completedAt(v)
		if err := checkFresh(at, m.now(), m.maxAge); err != nil {
			return Measurement{}, err
		}
		return Measurement{Source: SourceExporter, Node: lr.Node, Volume: volume, UsedBytes: *v.UsedBytes,
			UnreadableEntries: v.UnreadableEntries, MeasuredAt: at}, nil
	}
	return Measurement{}, measureErr(MeasureNotFound, "exporter answer has no volume %q", volume)
}

// errorMessage extracts {"error": "..."} from an error answer, or a prefix of the raw body.
func errorMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
