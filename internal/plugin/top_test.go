package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// nodeA and nodeB are what the exporters of node-a and node-b publish, as the exporter writes
// its text exposition (docs/metrics.md): node-a has shop's web and db and the pod of another
// tenant, secret/vault; node-b has shop's batch.
const nodeA = `# HELP emptydir_used_bytes Bytes the emptyDir volume uses.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="shop",node="node-a",pod="web",uid="u-web",volume="cache"} 921600
emptydir_used_bytes{medium="disk",namespace="secret",node="node-a",pod="vault",uid="u-vault",volume="keys"} 2.097152e+06
# HELP emptydir_limit_bytes The emptyDir volume's sizeLimit.
# TYPE emptydir_limit_bytes gauge
emptydir_limit_bytes{medium="disk",namespace="shop",node="node-a",pod="web",uid="u-web",volume="cache"} 1.048576e+06
emptydir_limit_bytes{medium="disk",namespace="secret",node="node-a",pod="vault",uid="u-vault",volume="keys"} 2.097152e+06
# HELP emptydir_measurement_age_seconds Seconds since the measurement began.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="shop",node="node-a",pod="web",uid="u-web",volume="cache"} 3.5
# HELP emptydir_pod_ephemeral_storage_used_bytes The pod's ephemeral-storage usage.
# TYPE emptydir_pod_ephemeral_storage_used_bytes gauge
emptydir_pod_ephemeral_storage_used_bytes{namespace="shop",node="node-a",pod="db",uid="u-db"} 9.961472e+06
# HELP emptydir_pod_ephemeral_storage_limit_bytes The pod's ephemeral-storage limit.
# TYPE emptydir_pod_ephemeral_storage_limit_bytes gauge
emptydir_pod_ephemeral_storage_limit_bytes{namespace="shop",node="node-a",pod="db",uid="u-db"} 1.048576e+07
# HELP emptydir_container_ephemeral_storage_used_bytes The container's ephemeral-storage usage.
# TYPE emptydir_container_ephemeral_storage_used_bytes gauge
emptydir_container_ephemeral_storage_used_bytes{container="app",namespace="shop",node="node-a",pod="db",uid="u-db"} 9.957376e+06
# HELP emptydir_container_ephemeral_storage_limit_bytes The container's ephemeral-storage limit.
# TYPE emptydir_container_ephemeral_storage_limit_bytes gauge
emptydir_container_ephemeral_storage_limit_bytes{container="app",namespace="shop",node="node-a",pod="db",uid="u-db"} 1.048576e+07
# HELP emptydir_exporter_oldest_trigger_measurement_age_seconds Seconds since the oldest measurement behind a trigger series began.
# TYPE emptydir_exporter_oldest_trigger_measurement_age_seconds gauge
emptydir_exporter_oldest_trigger_measurement_age_seconds{node="node-a"} 7.25
# HELP emptydir_exporter_pods Pods on the node that have at least one emptyDir volume.
# TYPE emptydir_exporter_pods gauge
emptydir_exporter_pods{node="node-a"} 2
`

const nodeB = `# HELP emptydir_used_bytes Bytes the emptyDir volume uses.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="shop",node="node-b",pod="batch",uid="u-batch",volume="scratch"} 5.24288e+06
# HELP emptydir_measurement_incomplete 1 while the volume's usage is a lower bound.
# TYPE emptydir_measurement_incomplete gauge
emptydir_measurement_incomplete{medium="disk",namespace="shop",node="node-b",pod="batch",reason="unreadable",uid="u-batch",volume="scratch"} 1
`

func shopObjects() []runtime.Object {
	return []runtime.Object{
		testPod("shop", "web", "u-web", "node-a", withEmptyDir("cache", "1Mi")),
		testPod("shop", "db", "u-db", "node-a", withEphemeralLimit("10Mi")),
		testPod("shop", "batch", "u-batch", "node-b", withEmptyDir("scratch", "")),
		testPod("shop", "plain", "u-plain", "node-c"), // nothing to measure: node-c is never asked
		testPod("secret", "vault", "u-vault", "node-a", withEmptyDir("keys", "2Mi")),
		exporterPod("exp-a", "node-a"), exporterPod("exp-b", "node-b"), exporterPod("exp-c", "node-c"),
	}
}

// onlyNamespace makes the fake API server refuse pod lists outside ns, as RBAC refuses a user
// with a RoleBinding in ns alone (the exporter namespace guard stays readable, as the
// plugin's Role grants).
func onlyNamespace(c *fakeCluster, ns string) {
	c.client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == ns || a.GetNamespace() == "guard" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
	})
}

func TestTopExporters(t *testing.T) {
	for _, tc := range []struct {
		name     string
		top      func(*TopOptions)
		restrict string // the only namespace the user may list pods in
		output   string
		want     string
		wantErr  error
		stderr   string
		proxied  []string // exporter pods asked, in any order
	}{
		{
			name: "namespace",
			want: `POD     TARGET             USED    LIMIT    USE%     AGE         NODE
db      pod                9.5Mi   10Mi     95%      <=7s        node-a
db      container/app      9.5Mi   10Mi     94%      <=7s        node-a
web     emptyDir/cache     900Ki   1Mi      87%      3s          node-a
batch   emptyDir/scratch   >=5Mi   <none>   <none>   <unknown>   node-b
`,
			proxied: []string{"exp-a", "exp-b"},
		},
		{
			name: "all namespaces",
			top:  func(t *TopOptions) { t.AllNamespaces = true },
			want: `NAMESPACE   POD     TARGET             USED    LIMIT    USE%     AGE         NODE
secret      vault   emptyDir/keys      2Mi     2Mi      100%     <=7s        node-a
shop        db      pod                9.5Mi   10Mi     95%      <=7s        node-a
shop        db      container/app      9.5Mi   10Mi     94%      <=7s        node-a
shop        web     emptyDir/cache     900Ki   1Mi      87%      3s          node-a
shop        batch   emptyDir/scratch   >=5Mi   <none>   <none>   <unknown>   node-b
`,
			proxied: []string{"exp-a", "exp-b"},
		},
		{
			name:     "all namespaces, the user may list pods in shop only",
			top:      func(t *TopOptions) { t.AllNamespaces = true },
			restrict: "shop",
			want: `NAMESPACE   POD     TARGET             USED    LIMIT    USE%     AGE         NODE
shop        db      pod                9.5Mi   10Mi     95%      <=7s        node-a
shop        db      container/app      9.5Mi   10Mi     94%      <=7s        node-a
shop        web     emptyDir/cache     900Ki   1Mi      87%      3s          node-a
shop        batch   emptyDir/scratch   >=5Mi   <none>   <none>   <unknown>   node-b
`,
			proxied: []string{"exp-a", "exp-b", "exp-c"},
		},
		{
			name:    "a pod",
			top:     func(t *TopOptions) { t.Pod = "db" },
			want:    "POD   TARGET          USED    LIMIT   USE%   AGE    NODE\ndb    pod             9.5Mi   10Mi    95%    <=7s   node-a\ndb    container/app   9.5Mi   10Mi    94%    <=7s   node-a\n",
			proxied: []string{"exp-a"},
		},
		{
			name: "sort by used",
			top:  func(t *TopOptions) { t.AllNamespaces, t.SortBy = true, SortUsed },
			want: `NAMESPACE   POD     TARGET             USED    LIMIT    USE%     AGE         NODE
shop        db      pod                9.5Mi   10Mi     95%      <=7s        node-a
shop        db      container/app      9.5Mi   10Mi     94%      <=7s        node-a
shop        batch   emptyDir/scratch   >=5Mi   <none>   <none>   <unknown>   node-b
secret      vault   emptyDir/keys      2Mi     2Mi      100%     <=7s        node-a
shop        web     emptyDir/cache     900Ki   1Mi      87%      3s          node-a
`,
			proxied: []string{"exp-a", "exp-b"},
		},
		{
			name: "sort by limit",
			top:  func(t *TopOptions) { t.AllNamespaces, t.SortBy = true, SortLimit },
			want: `NAMESPACE   POD     TARGET             USED    LIMIT    USE%     AGE         NODE
shop        db      pod                9.5Mi   10Mi     95%      <=7s        node-a
shop        db      container/app      9.5Mi   10Mi     94%      <=7s        node-a
secret      vault   emptyDir/keys      2Mi     2Mi      100%     <=7s        node-a
shop        web     emptyDir/cache     900Ki   1Mi      87%      3s          node-a
shop        batch   emptyDir/scratch   >=5Mi   <none>   <none>   <unknown>   node-b
`,
			proxied: []string{"exp-a", "exp-b"},
		},
		{
			name:    "node and selector",
			top:     func(t *TopOptions) { t.Node, t.Selector = "node-a", "app=web" },
			output:  "wide",
			want:    "POD   TARGET           USED    LIMIT   USE%   AGE   NODE     MEDIUM   UID\nweb   emptyDir/cache   900Ki   1Mi     87%    3s    node-a   disk     u-web\n",
			proxied: []string{"exp-a"},
		},
		{
			name:    "an exporter down",
			top:     func(t *TopOptions) { t.Node = "node-b" },
			want:    "",
			wantErr: ErrPartial,
			stderr:  "Warning: exporter guard/exp-b on node node-b: /metrics answered 503",
			proxied: []string{"exp-b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, shopObjects()...)
			c.exporters["exp-a"] = serveExposition(nodeA)
			if tc.name != "an exporter down" {
				c.exporters["exp-b"] = serveExposition(nodeB)
			}
			if tc.restrict != "" {
				onlyNamespace(c, tc.restrict)
			}
			o, out, errOut := testOptions("shop")
			o.Output = tc.output
			if err := o.Validate(nil); err != nil {
				t.Fatal(err)
			}
			top := NewTopOptions(o)
			top.Client, top.Proxy = c.client, c.proxy
			if tc.top != nil {
				tc.top(top)
			}
			err := top.Run(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run: %v, want %v", err, tc.wantErr)
			}
			if out.String() != tc.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.want)
			}
			if !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q in it", errOut.String(), tc.stderr)
			}
			if tc.restrict != "" && strings.Contains(out.String()+errOut.String(), "secret") {
				t.Errorf("a namespace the user may not list leaked: %s%s", out.String(), errOut.String())
			}
			asked := map[string]bool{}
			for _, p := range c.proxied {
				if strings.HasSuffix(p, "/metrics") {
					asked[strings.TrimSuffix(p, "/metrics")] = true
				}
			}
			if len(asked) != len(tc.proxied) {
				t.Errorf("exporters asked %v, want %v", c.proxied, tc.proxied)
			}
			for _, p := range tc.proxied {
				if !asked[p] {
					t.Errorf("exporter %s not asked (asked %v)", p, c.proxied)
				}
			}
		})
	}
}

func TestTopJSON(t *testing.T) {
	c := newFakeCluster(t, shopObjects()...)
	c.exporters["exp-a"], c.exporters["exp-b"] = serveExposition(nodeA), serveExposition(nodeB)
	o, out, _ := testOptions("shop")
	o.Output = "json"
	top := NewTopOptions(o)
	top.Client, top.Proxy = c.client, c.proxy
	if err := top.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got UsageList
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "UsageList" || got.Source != SourceExporters || len(got.Items) != 4 {
		t.Fatalf("got %+v", got)
	}
	if got.Items[0].Kind != KindPod || got.Items[1].Kind != KindContainer {
		t.Errorf("order: %+v", got.Items)
	}
	web := got.Items[2]
	if web.Target() != "emptyDir/cache" || web.UsedBytes != 921600 || *web.LimitBytes != 1048576 || *web.MeasurementAgeSeconds != 3.5 ||
		web.MeasurementAgeIsBound || web.Node != "node-a" || web.UID != "u-web" || web.Medium != "disk" {
		t.Errorf("web's row: %+v", web)
	}
	if p := *web.Percent; p < 87.89 || p > 87.891 {
		t.Errorf("web's percent %v, want 87.89", p)
	}
	if b := got.Items[3]; !b.LowerBound || b.LimitBytes != nil || b.Percent != nil || b.MeasurementAgeSeconds != nil {
		t.Errorf("batch's row: %+v", b)
	}
}

// TestTopRefuses: the flags kubectl top pod refuses together, and a pod that is not there.
func TestTopRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		top   func(*TopOptions)
		err   string
		usage bool
	}{
		{"sort key", func(t *TopOptions) { t.SortBy = "memory" }, "--sort-by accepts only percent, used, limit", true},
		{"pod and selector", func(t *TopOptions) { t.Pod, t.Selector = "db", "app=db" }, "only one of POD or -l", true},
		{"pod in all namespaces", func(t *TopOptions) { t.Pod, t.AllNamespaces = "db", true }, "across all namespaces", true},
		{"output", func(t *TopOptions) { t.Output = "patch" }, `output format "patch"`, true},
		{"no such pod", func(t *TopOptions) { t.Pod = "nope" }, `pod "nope" not found in namespace "shop"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, shopObjects()...)
			o, out, _ := testOptions("shop")
			top := NewTopOptions(o)
			top.Client, top.Proxy = c.client, c.proxy
			tc.top(top)
			err := top.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.err) || IsUsageError(err) != tc.usage {
				t.Errorf("Run: %v; want %q (a usage error: %v)", err, tc.err, tc.usage)
			}
			if out.Len() != 0 || len(c.proxied) != 0 {
				t.Errorf("printed %q, asked exporters %v; want nothing", out.String(), c.proxied)
			}
		})
	}
}

// TestVisiblePodsCandidates: a user who may not list pods cluster-wide gets the namespaces the
// exporters report that they may list, and no error for the others.
func TestVisiblePodsCandidates(t *testing.T) {
	c := newFakeCluster(t, shopObjects()...)
	onlyNamespace(c, "shop")
	pods, err := VisiblePods(context.Background(), c.client, Scope{AllNamespaces: true},
		func(context.Context) ([]string, error) { return []string{"secret", "shop"}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 4 {
		t.Errorf("got %d pods, want shop's 4", len(pods))
	}
	for _, p := range pods {
		if p.Namespace != "shop" {
			t.Errorf("pod %s/%s listed", p.Namespace, p.Name)
		}
	}
}
