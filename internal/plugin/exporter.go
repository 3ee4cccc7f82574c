package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/podstatus"
)

// ExporterSelector selects the exporter pods of a release: the chart's selector label, which
// the kustomize base (rendered from the chart) carries too.
const ExporterSelector = "app.kubernetes.io/name=emptydir-exporter"

// exporterPortName is the exporter container's port of /metrics and /live in the chart.
const exporterPortName = "metrics"

// Exporter is one exporter pod, reached through the API server's pod proxy.
type Exporter struct {
	Namespace, Pod, Node string
	Port                 int
}

// FindExporters lists the release's ready exporter pods in namespace, by node. It needs `list
// pods` in that namespace.
func FindExporters(ctx context.Context, client kubernetes.Interface, namespace string) (map[string]Exporter, error) {
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: ExporterSelector})
	if err != nil {
		return nil, fmt.Errorf("listing the exporter pods in namespace %q (--guard-namespace; needs list pods there): %w", namespace, err)
	}
	out := map[string]Exporter{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !podstatus.Ready(p) {
			continue
		}
		out[p.Spec.NodeName] = Exporter{Namespace: p.Namespace, Pod: p.Name, Node: p.Spec.NodeName, Port: exporterPort(p)}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ready exporter pod (selector %s) in namespace %q: is emptyDir guard installed there? (--guard-namespace)", ExporterSelector, namespace)
	}
	return out, nil
}

func exporterPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == exporterPortName {
				return int(cp.ContainerPort)
			}
		}
	}
	return liveapi.DefaultPort
}

// Proxy reaches a pod's HTTP port through the API server: GET
// /api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{path}, which needs `get pods/proxy` on
// that pod.
type Proxy interface {
	Get(ctx context.Context, e Exporter, path string, query url.Values, accept string) (status int, contentType string, body []byte, err error)
}

// RESTProxy is the Proxy of a core/v1 REST client (clientset.CoreV1().RESTClient()). It sends
// the request itself, with the client's credentials and transport, rather than through
// rest.Request.Do: that turns an exporter's own answer (a 404, 429 or 503 of the live endpoint,
// with its JSON reason) into a generic API error and retries a 429.
type RESTProxy struct{ Client rest.Interface }

// maxBody bounds what is read of an answer: a node's exposition of a few thousand pods is a
// few MiB.
const maxBody = 64 << 20

// Get implements Proxy.
func (p RESTProxy) Get(ctx context.Context, e Exporter, path string, query url.Values, accept string) (int, string, []byte, error) {
	rc, ok := p.Client.(*rest.RESTClient)
	if !ok || rc.Client == nil {
		return 0, "", nil, errors.New("no HTTP client for the API server")
	}
	u := p.Client.Get().Namespace(e.Namespace).Resource("pods").SubResource("proxy").
		Name(e.Pod + ":" + strconv.Itoa(e.Port)).Suffix(path).URL()
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := rc.Client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, "", nil, err
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}

// scrapeCollectors are the exporter's collectors top reads (docs/metrics.md, "Collectors"):
// not the Go runtime's and the process's series.
var scrapeCollectors = []string{"trigger", "volumes", "ephemeral_storage", "exporter"}

// scrape reads e's /metrics through p.
func scrape(ctx context.Context, p Proxy, e Exporter) ([]sample, error) {
	status, ct, body, err := p.Get(ctx, e, "metrics", url.Values{"collect[]": scrapeCollectors}, string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if err != nil {
		return nil, fmt.Errorf("exporter %s/%s on node %s: %w", e.Namespace, e.Pod, e.Node, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("exporter %s/%s on node %s: /metrics answered %d: %s", e.Namespace, e.Pod, e.Node, status, firstLine(body))
	}
	samples, err := parseExposition(body, ct)
	if err != nil {
		return nil, fmt.Errorf("exporter %s/%s on node %s: %w", e.Namespace, e.Pod, e.Node, err)
	}
	return samples, nil
}

// parseExposition reads the families top needs from an exposition of contentType.
func parseExposition(body []byte, contentType string) ([]sample, error) {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.ResponseFormat(h))
	var out []sample
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading /metrics: %w", err)
		}
		if !wanted(mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := make(map[string]string, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, sample{name: mf.GetName(), labels: l, value: m.GetGauge().GetValue()})
		}
	}
}

func wanted(name string) bool {
	for _, f := range topFamilies {
		if f == name {
			return true
		}
	}
	return false
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// LiveError is an answer of the live endpoint other than 200.
type LiveError struct {
	Status int
	// Reason is the exporter's error body.
	Reason string
}

func (e *LiveError) Error() string {
	switch e.Status {
	case http.StatusTooManyRequests:
		return "the exporter is busy measuring for other callers (429: " + e.Reason + "); try again in a few seconds"
	case http.StatusNotFound:
		return "the exporter does not know the pod (404: " + e.Reason + "): it was recreated or moved, or its node's exporter has not seen it yet"
	}
	return fmt.Sprintf("the exporter answered %d: %s", e.Status, e.Reason)
}

// Live asks e for a live measurement of the pod instance namespace/pod uid (liveapi.Pattern),
// every emptyDir volume and, for a pod with an ephemeral-storage limit, every part.
func Live(ctx context.Context, p Proxy, e Exporter, namespace, pod, uid string) (*liveapi.Response, error) {
	u, err := liveapi.URL("http://x", namespace, pod, uid, "")
	if err != nil {
		return nil, err
	}
	status, _, body, err := p.Get(ctx, e, strings.TrimPrefix(u.Path, "/"), u.Query(), "application/json")
	if err != nil {
		return nil, fmt.Errorf("live measurement from exporter %s/%s on node %s: %w", e.Namespace, e.Pod, e.Node, err)
	}
	if status != http.StatusOK {
		var eb liveapi.Error
		reason := firstLine(body)
		if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
			reason = eb.Error
		}
		return nil, &LiveError{Status: status, Reason: reason}
	}
	var r liveapi.Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("live measurement from exporter %s/%s: %w", e.Namespace, e.Pod, err)
	}
	return &r, nil
}
