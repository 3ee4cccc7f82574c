package plugin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// serveLive answers the live endpoint for pod uid with r, as the exporter does, and 404 for
// any other.
func serveLive(t *testing.T, uid string, r liveapi.Response) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(liveapi.Pattern, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if req.URL.Query().Get(liveapi.QueryUID) != uid || req.PathValue(liveapi.PathPod) != r.Pod {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(liveapi.Error{Error: "unknown pod"})
			return
		}
		_ = json.NewEncoder(w).Encode(r)
	})
	return mux
}

func TestExplain(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	at := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	live := liveapi.Response{Node: "node-a", Namespace: "shop", Pod: "db", UID: "u-db", Source: "filesystem", MeasuredAt: at,
		Volumes: []liveapi.Volume{
			{Name: "cache", Medium: "disk", UsedBytes: i64(3 << 20), LimitBytes: i64(4 << 20), MeasuredAt: at, CompletedAt: at},
			{Name: "shm", Medium: "memory", UsedBytes: i64(1 << 20), LimitBytes: i64(64 << 20), MeasuredAt: at, CompletedAt: at},
		},
		EphemeralStorage: &liveapi.PodStorage{UsedBytes: 11 << 20, LimitBytes: i64(10 << 20),
			Parts:      map[string]int64{"emptydir": 3 << 20, "writable_layer": 8<<20 - 8192, "logs": 4096, "other": 4096},
			MeasuredAt: at, CompletedAt: at,
			Containers: []liveapi.ContainerStorage{{Name: "app", UsedBytes: 8<<20 - 4096, LimitBytes: i64(10 << 20), WritableLayerBytes: 8<<20 - 8192, LogsBytes: 4096}}},
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-pdb"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}}
	objects := []runtime.Object{
		testPod("shop", "db", "u-db", "node-a", withEmptyDir("cache", "4Mi"), withEphemeralLimit("10Mi"), func(p *corev1.Pod) {
			p.Annotations = map[string]string{"emptydir-guard.io/evict": "false"}
		}),
		testPod("shop", "pending", "u-p", ""), pdb, exporterPod("exp-a", "node-a"),
	}
	run := func(t *testing.T, pod, output string) (string, string, error) {
		c := newFakeCluster(t, objects...)
		c.exporters["exp-a"] = serveLive(t, "u-db", live)
		o, out, errOut := testOptions("shop")
		o.Output = output
		if err := o.Validate(nil); err != nil {
			t.Fatal(err)
		}
		e := &ExplainOptions{Options: o, Pod: pod, Client: c.client, Proxy: c.proxy}
		err := e.Run(context.Background())
		return out.String(), errOut.String(), err
	}

	t.Run("text", func(t *testing.T) {
		out, _, err := run(t, "db", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Pod shop/db on node node-a, measured live at",
			"pod: 11Mi used of 10Mi (110%)",
			"  emptydir             3Mi  files in the pod's disk emptyDir volumes",
			"  writable_layer     8.0Mi  files the containers wrote outside any volume",
			"  logs                 4Ki  the containers' stdout and stderr",
			"It is OVER its limit now by 1Mi: expect the eviction.",
			"container app: 8.0Mi used of 10Mi (79%)",
			"emptyDir cache: 3Mi used of 4Mi (75%)",
			"Above 90% (3.6Mi), EmptyDirNearLimit warns after 5 minutes; 1Mi left now.",
			"emptyDir shm (medium memory): 1Mi used of 64Mi (1%)",
			"neither the kubelet nor emptyDir guard evicts for it",
			"PodDisruptionBudgets: db-pdb, allowing no disruption now",
			"annotated emptydir-guard.io/evict=false",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		out, _, err := run(t, "db", "json")
		if err != nil {
			t.Fatal(err)
		}
		var x Explanation
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatal(err)
		}
		if len(x.Limits) != 4 || x.Limits[0].Kind != KindPod || x.Limits[0].UsedBytes != 11<<20 || len(x.Limits[0].Parts) != 4 ||
			x.Limits[1].Kind != KindContainer || x.Limits[2].Name != "cache" || !x.OptedOut ||
			!x.Disruption.Checked || *x.Disruption.EvictionAllowed || x.UID != "u-db" {
			t.Errorf("got %s", out)
		}
	})
	for _, tc := range []struct{ pod, err string }{
		{"nope", `pod "nope" not found in namespace "shop"`},
		{"pending", "pod shop/pending is not scheduled to a node yet: only a running pod's storage can be measured"},
	} {
		t.Run(tc.pod, func(t *testing.T) {
			if _, _, err := run(t, tc.pod, ""); err == nil || err.Error() != tc.err {
				t.Errorf("got %v, want %s", err, tc.err)
			}
		})
	}
}

// TestLiveErrors: the live endpoint's own answers reach the user with their reason.
func TestLiveErrors(t *testing.T) {
	c := newFakeCluster(t, exporterPod("exp-a", "node-a"))
	c.exporters["exp-a"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"caller has 5 requests running or waiting"}` + "\n"))
	})
	_, err := Live(context.Background(), c.proxy, Exporter{Namespace: "guard", Pod: "exp-a", Node: "node-a", Port: 9731}, "shop", "db", "u-db")
	var le *LiveError
	if !errorsAs(err, &le) || le.Status != http.StatusTooManyRequests || !strings.Contains(err.Error(), "caller has 5 requests running or waiting") {
		t.Errorf("got %v", err)
	}
	if want := "exp-a/live/namespaces/shop/pods/db"; len(c.proxied) != 1 || c.proxied[0] != want {
		t.Errorf("proxied %q, want %q", c.proxied, want)
	}
}

// TestExplainWriteHostile: explain's text carries names from the cluster and the exporter's
// answer (its node, a container, a reason): each is quoted when it holds a control
// character, so that none reaches the terminal.
func TestExplainWriteHostile(t *testing.T) {
	lim := int64(10 << 20)
	x := &Explanation{Namespace: "shop", Pod: "db", Node: "node-a\x1b[2J", Source: "filesystem\r",
		Limits: []Limit{{Kind: KindContainer, Name: "app\nfake line", UsedBytes: 1 << 20, LimitBytes: &lim,
			Parts: []Part{{Name: "writable_layer", Counts: true, What: "not located (\x1b]0;owned\a)"}}, Enforcement: "evicted\x07"}},
		Disruption: Disruption{Checked: true, Budgets: []string{"pdb\x1b[31m"}, EvictionAllowed: new(bool)}}
	var b strings.Builder
	if err := x.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsFunc(out, func(r rune) bool { return r < ' ' && r != '\n' }) {
		t.Errorf("a control character reaches the terminal:\n%q", out)
	}
	for _, want := range []string{`Pod shop/db on node "node-a\x1b[2J"`, `(source "filesystem\r")`, `container "app\nfake line": 1Mi used of 10Mi`,
		`"not located (\x1b]0;owned\a)"`, `"evicted\a"`, `PodDisruptionBudgets: "pdb\x1b[31m", allowing no disruption`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%q", want, out)
		}
	}
}
