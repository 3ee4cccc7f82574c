package remediator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// The fleet of TestFleetStorm: one DaemonSet in a tenant namespace (the DaemonSet protection
// covers kube-system only by default), its pods and the exporter pods as the chart installs
// them (cmd/emptydir-remediator's defaults for --exporter.selector and the ledger ConfigMap).
const (
	stormNamespace        = "logging"
	stormDaemonSet        = "log-shipper"
	stormGuardNamespace   = "emptydir-guard"
	stormExporterSelector = "app.kubernetes.io/name=emptydir-exporter"
	stormLedgerConfigMap  = Component + "-ledger"
	stormToken            = "storm-webhook-token"
	// stormMeasureTimeout is the command's --measurement.timeout default (the client timeout
	// of the exporter measurer).
	stormMeasureTimeout = 35 * time.Second
)

// stormFleet is N nodes, each running one pod of the DaemonSet (its emptyDir over its
// sizeLimit) and one exporter pod whose pod IP is the node's own.
type stormFleet struct {
	nodes     []string
	pods      []*corev1.Pod // the DaemonSet's, pods[i] on nodes[i]
	exporters []*corev1.Pod // exporters[i] on nodes[i]
	byUID     map[string]*corev1.Pod
	nodeOfIP  map[string]string // exporter pod IP → its node
}

func newStormFleet(t *testing.T, n int) *stormFleet {
	t.Helper()
	f := &stormFleet{byUID: map[string]*corev1.Pod{}, nodeOfIP: map[string]string{}}
	for i := range n {
		node := fmt.Sprintf("node-%04d", i)
		name := fmt.Sprintf("%s-%05d", stormDaemonSet, i)
		pod := newPod(stormNamespace, name, testUID(name)).node(node).ownedBy("apps/v1", "DaemonSet").build()
		pod.OwnerReferences[0].Name = stormDaemonSet
		if f.byUID[string(pod.UID)] != nil {
			t.Fatalf("uid %s of %s collides", pod.UID, name)
		}
		ip := fmt.Sprintf("10.%d.%d.%d", 64+i/65536, i/256%256, i%256)
		f.nodes = append(f.nodes, node)
		f.pods = append(f.pods, pod)
		f.exporters = append(f.exporters, exporterPod(node, ip))
		f.byUID[string(pod.UID)] = pod
		f.nodeOfIP[ip] = node
	}
	return f
}

// exporterPod is the ready exporter pod on node, as PodLocator looks for it.
func exporterPod(node, ip string) *corev1.Pod {
	name := "emptydir-exporter-" + node
	p := newPod(stormGuardNamespace, name, testUID(name)).node(node).build()
	p.Labels = map[string]string{"app.kubernetes.io/name": "emptydir-exporter"}
	p.Spec.Volumes = nil
	p.Status.PodIP = ip
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

// objects returns copies of every pod, for a new fake clientset.
func (f *stormFleet) objects() []runtime.Object {
	objs := make([]runtime.Object, 0, 2*len(f.pods))
	for _, p := range slices.Concat(f.pods, f.exporters) {
		objs = append(objs, p.DeepCopy())
	}
	return objs
}

// listByNode answers PodLocator's LIST of the exporter pods on one node as the API server
// does, by its spec.nodeName field selector, which the fake tracker ignores: each live
// measurement would otherwise copy every exporter pod of the fleet.
func (f *stormFleet) listByNode(a k8stesting.Action) (bool, runtime.Object, error) {
	l := a.(k8stesting.ListAction).GetListRestrictions()
	node, ok := l.Fields.RequiresExactMatch("spec.nodeName")
	if !ok || a.GetNamespace() != stormGuardNamespace {
		return false, nil, nil
	}
	list := &corev1.PodList{}
	for _, p := range f.exporters {
		if p.Spec.NodeName == node && l.Labels.Matches(labels.Set(p.Labels)) {
			list.Items = append(list.Items, *p.DeepCopy())
		}
	}
	return true, list, nil
}

// stormExporter answers the live API (internal/liveapi) as the exporter of the node whose pod
// IP the request was sent to (its Host): a pod of that node, by namespace, name and uid, is
// at twice its sizeLimit, measured just now. Any other pod is unknown to it (404).
type stormExporter struct {
	fleet *stormFleet
	walks atomic.Int64
}

func (x *stormExporter) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(liveapi.Pattern, x.live)
	return mux
}

func (x *stormExporter) live(w http.ResponseWriter, r *http.Request) {
	x.walks.Add(1)
	host, _, _ := net.SplitHostPort(r.Host)
	node := x.fleet.nodeOfIP[host]
	pod := x.fleet.byUID[r.URL.Query().Get(liveapi.QueryUID)]
	w.Header().Set("Content-Type", "application/json")
	if node == "" || pod == nil || pod.Spec.NodeName != node || pod.Namespace != r.PathValue(liveapi.PathNamespace) ||
		pod.Name != r.PathValue(liveapi.PathPod) || r.URL.Query().Get(liveapi.QueryVolume) != "empty" {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(liveapi.Error{Error: "no such pod volume on node " + node})
		return
	}
	limit := pod.Spec.Volumes[0].EmptyDir.SizeLimit.Value()
	used := 2 * limit
	now := time.Now()
	_ = json.NewEncoder(w).Encode(liveapi.Response{
		Node: node, Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID), Source: "filesystem", MeasuredAt: now,
		Volumes: []liveapi.Volume{{Name: "empty", UsedBytes: &used, LimitBytes: &limit, MeasuredAt: now, CompletedAt: now}},
	})
}

// podIPTransport dials addr, the loopback exporter, whatever pod IP a request names: the
// request keeps its Host, so the exporter knows which node's exporter was asked.
func podIPTransport(addr string) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return tr
}

// shippedRoute is what deploy/alertmanager/alertmanager.yml says of the remediator's route
// and webhook.
type shippedRoute struct {
	groupBy []string
	timeout time.Duration
}

func readShippedRoute(t *testing.T) shippedRoute {
	t.Helper()
	b, err := os.ReadFile("../deploy/alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Route struct {
			Routes []struct {
				Receiver string   `json:"receiver"`
				GroupBy  []string `json:"group_by"`
			} `json:"routes"`
		} `json:"route"`
		Receivers []struct {
			Name           string `json:"name"`
			WebhookConfigs []struct {
				Timeout string `json:"timeout"`
			} `json:"webhook_configs"`
		} `json:"receivers"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var r shippedRoute
	for _, rt := range cfg.Route.Routes {
		if rt.Receiver == Component && r.groupBy == nil {
			r.groupBy = rt.GroupBy
		}
	}
	for _, rc := range cfg.Receivers {
		if rc.Name == Component && len(rc.WebhookConfigs) > 0 {
			d, err := model.ParseDuration(rc.WebhookConfigs[0].Timeout)
			if err != nil {
				t.Fatalf("webhook timeout: %v", err)
			}
			r.timeout = time.Duration(d)
		}
	}
	if r.groupBy == nil || r.timeout == 0 {
		t.Fatalf("no route with group_by and webhook timeout to %s in alertmanager.yml: %+v", Component, r)
	}
	return r
}

// notification is the webhook body Alertmanager sends for the group of pod's
// EmptyDirOverLimit alert (the rule's labels: prometheusrule.yaml), one alert per group.
func (r shippedRoute) notification(t *testing.T, pod *corev1.Pod, startsAt time.Time) []byte {
	t.Helper()
	labels := model.LabelSet{
		"alertname": "EmptyDirOverLimit", "remediation": "evict", "severity": "critical",
		LabelNamespace: model.LabelValue(pod.Namespace), LabelPod: model.LabelValue(pod.Name),
		LabelUID: model.LabelValue(pod.UID), LabelVolume: "empty", "node": model.LabelValue(pod.Spec.NodeName),
	}
	group := model.LabelSet{}
	for _, l := range r.groupBy {
		if v, ok := labels[model.LabelName(l)]; ok {
			group[model.LabelName(l)] = v
		}
	}
	plain := func(ls model.LabelSet) map[string]string {
		m := make(map[string]string, len(ls))
		for k, v := range ls {
			m[string(k)] = string(v)
		}
		return m
	}
	ann := map[string]string{"summary": fmt.Sprintf("emptyDir volume %s/%s/empty is over its sizeLimit.", pod.Namespace, pod.Name)}
	b, err := json.Marshal(Payload{
		Version: PayloadVersion, GroupKey: `{}/{remediation="evict"}:` + group.String(), Status: StatusFiring,
		Receiver: Component, GroupLabels: plain(group), CommonLabels: plain(labels), CommonAnnotations: ann,
		ExternalURL: "http://alertmanager.example:9093",
		Alerts: []Alert{{Status: StatusFiring, Labels: plain(labels), Annotations: ann, StartsAt: startsAt,
			GeneratorURL: "http://prometheus.example:9090/graph", Fingerprint: labels.Fingerprint().String()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stormAnswer is one delivery of one pod's notification as its Alertmanager saw it.
type stormAnswer struct {
	pod     *corev1.Pod
	code    int
	latency time.Duration
	resp    WebhookResponse
	err     error
}

// deliver posts every pod's notification copies times (HA Alertmanagers), the copies of one
// pod next to each other, with at most parallel requests in flight, each with the webhook's
// timeout.
func (r shippedRoute) deliver(t *testing.T, url string, pods []*corev1.Pod, copies, parallel int) []stormAnswer {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = parallel
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: r.timeout}
	startsAt := time.Now().Add(-time.Minute)
	answers := make([]stormAnswer, len(pods)*copies)
	bodies := make([][]byte, len(pods))
	for i, p := range pods {
		bodies[i] = r.notification(t, p, startsAt)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				answers[i] = post(hc, url, pods[i/copies], bodies[i/copies])
			}
		})
	}
	for i := range answers {
		next <- i
	}
	close(next)
	wg.Wait()
	return answers
}

func post(hc *http.Client, url string, pod *corev1.Pod, body []byte) stormAnswer {
	a := stormAnswer{pod: pod}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Alertmanager/0.28.1")
	req.Header.Set("Authorization", "Bearer "+stormToken)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		a.err, a.latency = err, time.Since(start)
		return a
	}
	defer func() { _ = resp.Body.Close() }()
	a.code = resp.StatusCode
	a.err = json.NewDecoder(resp.Body).Decode(&a.resp)
	a.latency = time.Since(start)
	return a
}

// requestKey names a recorded request "verb resource[/subresource]".
func requestKey(a k8stesting.Action) string {
	k := a.GetVerb() + " " + a.GetResource().Resource
	if a.GetSubresource() != "" {
		k += "/" + a.GetSubresource()
	}
	return k
}

// settledActions waits until the Event recorder (which posts from goroutines of its own) has
// made no request for a while and returns every request recorded.
func settledActions(t *testing.T, client *fake.Clientset) []k8stesting.Action {
	t.Helper()
	const quiet = 500 * time.Millisecond
	deadline := time.Now().Add(15 * time.Second)
	n := -1
	for {
		actions := client.Actions()
		if len(actions) == n {
			return actions
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still coming after 15s: %d", len(actions))
		}
		n = len(actions)
		time.Sleep(quiet)
	}
}

// storedLedger returns the ledger ConfigMap's ledger.json, read from the tracker (no request).
func storedLedger(t *testing.T, client *fake.Clientset) (ledgerState, int) {
	t.Helper()
	obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), stormGuardNamespace, stormLedgerConfigMap)
	if err != nil {
		t.Fatalf("ledger ConfigMap: %v", err)
	}
	raw := obj.(*corev1.ConfigMap).Data[ledgerDataKey]
	var st ledgerState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	return st, len(raw)
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
