package remediator

import (
	"context"
	"encoding/json"
	"io"
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

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/podstatus"
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
		if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podstatus.Ready(&p) {
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

// ExporterMeasurer takes live measurements from the exporter's live endpoint
// (liveapi.Pattern, see docs/metrics.md).
type ExporterMeasurer struct {
	client  *http.Client
	locator ExporterLocator
}

// NewExporterMeasurer returns a measurer that asks the exporter found by locator through
// client; the client's timeout bounds one measurement.
func NewExporterMeasurer(client *http.Client, locator ExporterLocator) *ExporterMeasurer {
	if client == nil {
		client = http.DefaultClient
	}
	return &ExporterMeasurer{client: client, locator: locator}
}

// completedAt is when the volume's value was complete: its completedAt, else (exporters
// before it was added) the walk's start, measuredAt, which is stricter.
func completedAt(lr *liveapi.Response, v liveapi.Volume) time.Time {
	for _, t := range []time.Time{v.CompletedAt, v.MeasuredAt, lr.MeasuredAt} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// Measure asks the exporter on the pod's node for a live measurement of the subject: one
// volume, or (for the pod's or a container's ephemeral storage) every part of the pod.
func (m *ExporterMeasurer) Measure(ctx context.Context, pod *corev1.Pod, subject Subject) (Measurement, error) {
	if pod.Spec.NodeName == "" {
		return Measurement{}, measureErr(MeasureNotFound, "pod %s/%s is not scheduled to a node", pod.Namespace, pod.Name)
	}
	base, err := m.locator.Locate(ctx, pod.Spec.NodeName)
	if err != nil {
		return Measurement{}, err
	}
	u, err := liveapi.URL(base, pod.Namespace, pod.Name, string(pod.UID), subject.Volume)
	if err != nil {
		return Measurement{}, &MeasurementError{Reason: MeasureUnreachable, Err: err}
	}
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
	var lr liveapi.Response
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
	if subject.Check == CheckPod || subject.Check == CheckContainer {
		return storageMeasurement(&lr, subject)
	}
	volume := subject.Volume
	for _, v := range lr.Volumes {
		if v.Name != volume {
			continue
		}
		if v.UsedBytes == nil {
			return Measurement{}, measureErr(MeasureBadResponse, "exporter answer for volume %q has no usedBytes", volume)
		}
		if v.UnreadableEntries < 0 || v.ChangedDirectories < 0 {
			return Measurement{}, measureErr(MeasureBadResponse, "exporter answer for volume %q has unreadableEntries %d, changedDirectories %d", volume, v.UnreadableEntries, v.ChangedDirectories)
		}
		m := Measurement{Source: SourceExporter, Node: lr.Node, Subject: subject, UsedBytes: *v.UsedBytes,
			UnreadableEntries: v.UnreadableEntries, ChangedDirectories: v.ChangedDirectories, CutShort: v.CutShort,
			Incomplete: v.LowerBound, MeasuredAt: completedAt(&lr, v)}
		m.IncompleteSince = incompleteSince(m, v.IncompleteSince)
		return m, nil
	}
	return Measurement{}, measureErr(MeasureNotFound, "exporter answer has no volume %q", volume)
}

// incompleteSince is the since of an answer's lower bound m, as the exporter said it: kept
// for a lower bound only (a complete answer has nothing to say), and only when it is not
// after the measurement it is about, which would be no run of lower bounds at all.
func incompleteSince(m Measurement, since time.Time) time.Time {
	if !m.LowerBound() || since.IsZero() || since.After(m.MeasuredAt) {
		return time.Time{}
	}
	return since
}

// storageMeasurement is the pod's or a container's ephemeral storage of an answer.
func storageMeasurement(lr *liveapi.Response, subject Subject) (Measurement, error) {
	es := lr.EphemeralStorage
	if es == nil {
		return Measurement{}, measureErr(MeasureNotFound, "exporter on node %q measures no ephemeral storage of pod %s/%s: it has no ephemeral-storage limit there, or the exporter runs without --collection.ephemeral-storage", lr.Node, lr.Namespace, lr.Pod)
	}
	at := es.CompletedAt
	if at.IsZero() {
		at = es.MeasuredAt
	}
	if es.UsedBytes < 0 {
		return Measurement{}, measureErr(MeasureBadResponse, "exporter answer has ephemeral-storage usedBytes %d", es.UsedBytes)
	}
	if subject.Check == CheckPod {
		m := Measurement{Source: SourceExporter, Node: lr.Node, Subject: subject, UsedBytes: es.UsedBytes,
			Incomplete: es.LowerBound, MeasuredAt: at}
		m.IncompleteSince = incompleteSince(m, es.IncompleteSince)
		return m, nil
	}
	for _, c := range es.Containers {
		if c.Name != subject.Container {
			continue
		}
		if c.UsedBytes < 0 {
			return Measurement{}, measureErr(MeasureBadResponse, "exporter answer has usedBytes %d for container %q", c.UsedBytes, c.Name)
		}
		m := Measurement{Source: SourceExporter, Node: lr.Node, Subject: subject, UsedBytes: c.UsedBytes,
			Unlocated: c.WritableLayerUnlocated, Incomplete: c.LowerBound, MeasuredAt: at}
		m.IncompleteSince = incompleteSince(m, c.IncompleteSince)
		return m, nil
	}
	return Measurement{}, measureErr(MeasureNotFound, "exporter answer has no running container %q", subject.Container)
}

// getJSON GETs u through client and returns the status and at most limit bytes of the
// body. Failing to build, send or read the request is MeasureUnreachable.
func getJSON(ctx context.Context, client *http.Client, u *url.URL, limit int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, measureErr(MeasureUnreachable, "building request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, measureErr(MeasureUnreachable, "GET %s: %w", u.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return 0, nil, measureErr(MeasureUnreachable, "reading answer of %s: %w", u.Redacted(), err)
	}
	return resp.StatusCode, body, nil
}

// errorMessage extracts the liveapi.Error of an error answer, or a prefix of the raw body.
func errorMessage(body []byte) string {
	var e liveapi.Error
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
