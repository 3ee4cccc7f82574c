package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// deployImage is the project's image as the e2e tests build it: the statically linked
// binaries at the paths the Dockerfile puts them, on a distroless-like rootfs.
const deployImage = "localhost/emptydir-guard:test"

// The shared part of the install tests (the kustomize base in deploy_test.go, the Helm chart
// in helm_test.go): apply an install's objects to the real API server, run its exporter and
// remediator pods from the project's image under its ServiceAccounts and RBAC, and follow one
// over-limit alert through them to an eviction.

// install is one installation of emptyDir guard on the shared cluster.
type install struct {
	c          *cluster.Cluster
	ns         string // where it is installed
	exporter   string // the DaemonSet and its ServiceAccount
	remediator string // the Deployment and its ServiceAccount
	token      string // the webhook bearer token
}

// installObjects imports the project's image, creates the namespace and server-side applies
// objs, each DaemonSet and Deployment pod template passed through localize first.
func installObjects(ctx context.Context, t *testing.T, c *cluster.Cluster, in install, objs []runtime.Object, localize func(*corev1.PodSpec)) *install {
	t.Helper()
	importDeployImage(ctx, t, c)
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			localize(&w.Spec.Template.Spec)
		case *appsv1.Deployment:
			localize(&w.Spec.Template.Spec)
		}
	}
	// What kube-controller-manager would do for a new namespace: its default ServiceAccount
	// and the kube-root-ca.crt ConfigMap the projected token volumes mount.
	if err := c.EnsureNamespace(ctx, in.ns); err != nil {
		t.Fatal(err)
	}
	in.c = c
	deployApply(ctx, t, c, objs)
	return &in
}

// importDeployImage imports deployImage, the project's binaries as the Dockerfile lays them
// out, into the cluster's containerd.
func importDeployImage(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	static := t.TempDir()
	files := map[string]string{
		"/usr/local/bin/emptydir-exporter":   deployStaticBinary(t, "emptydir-exporter", static),
		"/usr/local/bin/emptydir-remediator": deployStaticBinary(t, "emptydir-remediator", static),
	}
	if err := c.ImportImage(ctx, deployImage, files, []string{"/usr/local/bin/emptydir-exporter"}); err != nil {
		t.Fatal(err)
	}
}

// seedPod is a pod over its 1Mi emptyDir limit, in a namespace of its own.
type seedPod struct {
	pod      *corev1.Pod
	used     int64 // du of its volume
	labels   map[string]string
	volumeOn string // the volume's directory on the node
}

// startSeed runs the seed pod with its data in a directory only uid 1234 may enter (0700): the
// exporter (uid 0, every capability dropped but DAC_READ_SEARCH) must still measure all of it.
func (in *install) startSeed(ctx context.Context, t *testing.T, prefix string) seedPod {
	t.Helper()
	c := in.c
	seedNS := prefix + "-" + framework.RandSuffix()
	if err := c.EnsureNamespace(ctx, seedNS); err != nil {
		t.Fatal(err)
	}
	seed := framework.RunPod(ctx, t, c, c.SeedPod(seedNS, "empty-test1"))
	if _, stderr, err := c.ExecInPod(ctx, seedNS, seed.Name, "test2", "sh", "-c",
		"mkdir /test/private && dd if=/dev/zero of=/test/private/f bs=1K count=10000 2>/dev/null && "+
			"chmod 600 /test/private/f && chown -R 1234:1234 /test/private && chmod 700 /test/private"); err != nil {
		t.Fatalf("writing into the seed pod: %v (%s)", err, stderr)
	}
	dir := part.EmptyDirPath(c.KubeletRootDir(), string(seed.UID), "empty")
	return seedPod{pod: seed, used: framework.DuBytes(t, dir), volumeOn: dir,
		labels: map[string]string{"namespace": seedNS, "pod": seed.Name, "uid": string(seed.UID), "volume": "empty", "node": c.NodeName()}}
}

// createPods does what the DaemonSet and Deployment controllers would (none runs here, nor a
// scheduler): one exporter pod and the Deployment's replicas from their templates, with owner
// references, bound to the only node.
func (in *install) createPods(ctx context.Context, t *testing.T) (exp *corev1.Pod, rems []*corev1.Pod) {
	t.Helper()
	c := in.c
	ds, err := c.Client().AppsV1().DaemonSets(in.ns).Get(ctx, in.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp = deployPodFromTemplate(ctx, t, c, in.ns, in.exporter+"-"+framework.RandSuffix(), ds.Spec.Template, daemonSetOwner(ds))
	dep, err := c.Client().AppsV1().Deployments(in.ns).Get(ctx, in.remediator, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < *dep.Spec.Replicas; i++ {
		rems = append(rems, deployPodFromTemplate(ctx, t, c, in.ns, in.remediator+"-"+framework.RandSuffix(), dep.Spec.Template,
			*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))))
	}
	return exp, rems
}

// checkExporter waits for the exporter pod, checks its rights on the real authorizer, and
// that it reports the seed pod's usage exactly as du. It returns the Ready pod.
func (in *install) checkExporter(ctx context.Context, t *testing.T, pod *corev1.Pod, seed seedPod) *corev1.Pod {
	t.Helper()
	c := in.c
	pod = deployWaitReady(ctx, t, c, pod)
	if pod.Spec.ServiceAccountName != in.exporter {
		t.Errorf("exporter pod runs as ServiceAccount %q, want %q", pod.Spec.ServiceAccountName, in.exporter)
	}
	// Ready means /readyz answered 200: the pod informer listed and watched pods with the
	// ServiceAccount's token, so the install's ClusterRole is enough (RBAC is on).
	seedNS := seed.pod.Namespace
	deployCheckAccess(ctx, t, c, "system:serviceaccount:"+in.ns+":"+in.exporter, map[authorizationv1.ResourceAttributes]bool{
		{Verb: "list", Resource: "pods"}:                                           true,
		{Verb: "watch", Resource: "pods"}:                                          true,
		{Verb: "get", Resource: "pods", Namespace: seedNS}:                         false,
		{Verb: "delete", Resource: "pods", Namespace: seedNS}:                      false,
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: seedNS}: false,
		{Verb: "get", Resource: "secrets", Namespace: seedNS}:                      false,
		{Verb: "list", Resource: "secrets", Namespace: in.ns}:                      false,
		{Verb: "create", Resource: "pods", Subresource: "eviction"}:                false,
		{Verb: "get", Resource: "nodes", Subresource: "proxy"}:                     false,
		{Verb: "get", Resource: "nodes", Subresource: "stats"}:                     false,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io"}:         false,
	})
	u := deployExporterURL(pod)
	framework.Eventually(t, 60*time.Second, time.Second, "the deployed exporter reports the seed pod's usage", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, u+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := framework.Sample(fams, "emptydir_used_bytes", seed.labels)
		unreadable, _ := framework.Sample(fams, "emptydir_unreadable_entries", seed.labels)
		limit, _ := framework.Sample(fams, "emptydir_limit_bytes", seed.labels)
		synced, _ := framework.Sample(fams, "emptydir_exporter_pod_informer_synced", nil)
		return ok && int64(used) == seed.used && unreadable == 0 && limit == 1<<20 && synced == 1,
			fmt.Sprintf("used=%v (found %v, du %d) unreadable=%v limit=%v synced=%v", used, ok, seed.used, unreadable, limit, synced)
	})
	fams, err := framework.Scrape(ctx, c, u+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if errs, _ := framework.Sample(fams, "emptydir_exporter_pod_watch_errors_total", nil); errs != 0 {
		t.Errorf("pod watch errors %v under the install's RBAC", errs)
	}
	// The change signal, on by default, reads the pods' cgroups under the install's mounts,
	// security context and Landlock rules. A pod of an earlier test may be torn down between the
	// informer's list and the read (not_found); a wrong cgroup root would leave none read.
	if args := pod.Spec.Containers[0].Args; slices.Contains(args, "--collection.change-signal") {
		read, _ := framework.Sample(fams, "emptydir_exporter_change_marks_total", map[string]string{"outcome": "read"})
		var failed []string
		for _, f := range fams["emptydir_exporter_change_marks_total"].GetMetric() {
			for _, l := range f.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() != "read" && l.GetValue() != "not_found" && f.GetCounter().GetValue() > 0 {
					failed = append(failed, fmt.Sprintf("%s=%v", l.GetValue(), f.GetCounter().GetValue()))
				}
			}
		}
		if read == 0 || len(failed) > 0 {
			t.Errorf("change marks read %v, failed %v (exporter args %q): the change signal does not read this node's cgroups", read, failed, args)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := deployGet(ctx, t, c, u+path); code != http.StatusOK {
			t.Errorf("exporter %s: %d %s", path, code, body)
		}
	}
	return pod
}

// evictSeed waits for the remediator pods, checks their rights on the real authorizer, their
// leader election and webhook authentication, and has the leader evict the seed pod after its
// live re-check through the exporter.
func (in *install) evictSeed(ctx context.Context, t *testing.T, pods []*corev1.Pod, seed seedPod) {
	t.Helper()
	c, ns, seedNS := in.c, in.ns, seed.pod.Namespace
	byName := map[string]*corev1.Pod{}
	for i, p := range pods {
		pods[i] = deployWaitReady(ctx, t, c, p)
		byName[pods[i].Name] = pods[i]
		if sa := pods[i].Spec.ServiceAccountName; sa != in.remediator {
			t.Errorf("remediator pod runs as ServiceAccount %q, want %q", sa, in.remediator)
		}
		if code, body := deployGet(ctx, t, c, deployRemURL(pods[i])+"/healthz"); code != http.StatusOK {
			t.Errorf("remediator %s /healthz: %d %s", pods[i].Name, code, body)
		}
	}
	ledger := in.remediator + "-ledger" // --ledger.configmap
	deployCheckAccess(ctx, t, c, "system:serviceaccount:"+ns+":"+in.remediator, map[authorizationv1.ResourceAttributes]bool{
		{Verb: "get", Resource: "pods", Namespace: seedNS}:                                       true,
		{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: seedNS}:           true,
		{Verb: "create", Resource: "events", Group: "events.k8s.io", Namespace: seedNS}:          true,
		{Verb: "patch", Resource: "events", Group: "events.k8s.io", Namespace: seedNS}:           true,
		{Verb: "list", Resource: "pods", Namespace: ns}:                                          true,
		{Verb: "create", Resource: "leases", Group: "coordination.k8s.io", Namespace: ns}:        true,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Namespace: ns}:        false, // only its own, below
		{Verb: "get", Resource: "configmaps", Name: ledger, Namespace: ns}:                       true,
		{Verb: "update", Resource: "configmaps", Name: ledger, Namespace: ns}:                    true,
		{Verb: "list", Resource: "configmaps", Name: ledger, Namespace: ns}:                      true, // the ledger's watch, by field selector
		{Verb: "watch", Resource: "configmaps", Name: ledger, Namespace: ns}:                     true,
		{Verb: "list", Resource: "configmaps", Namespace: ns}:                                    false,
		{Verb: "create", Resource: "configmaps", Namespace: ns}:                                  true,
		{Verb: "get", Resource: "configmaps", Name: "kube-root-ca.crt", Namespace: ns}:           false,
		{Verb: "update", Resource: "configmaps", Name: "kube-root-ca.crt", Namespace: ns}:        false,
		{Verb: "list", Resource: "pods", Namespace: seedNS}:                                      false,
		{Verb: "watch", Resource: "pods", Namespace: seedNS}:                                     false,
		{Verb: "delete", Resource: "pods", Namespace: seedNS}:                                    false,
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: seedNS}:               false,
		{Verb: "get", Resource: "secrets", Namespace: ns}:                                        false,
		{Verb: "get", Resource: "secrets", Namespace: seedNS}:                                    false,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Namespace: "default"}: false,
		{Verb: "get", Resource: "nodes", Subresource: "proxy"}:                                   false,

		// The Lease by name (the default --leader-elect.lease-name), and no other.
		{Verb: "get", Resource: "leases", Group: "coordination.k8s.io", Name: in.remediator, Namespace: ns}:    true,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Name: in.remediator, Namespace: ns}: true,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Name: "other", Namespace: ns}:       false,
	})

	// The replicas elect a leader on the Lease (the Role's leases rights in its namespace).
	lease := in.remediator
	dep, err := c.Client().AppsV1().Deployments(ns).Get(ctx, in.remediator, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--leader-elect.lease-name="); ok {
			lease = v
		}
	}
	var leader, standby *corev1.Pod
	framework.Eventually(t, 60*time.Second, time.Second, "a remediator replica holds the Lease", func() (bool, string) {
		l, err := c.Client().CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder"
		}
		leader = byName[*l.Spec.HolderIdentity]
		return leader != nil, "holder " + *l.Spec.HolderIdentity
	})
	for _, p := range pods {
		if p != leader {
			standby = p
		}
	}
	for _, p := range pods {
		_, body := deployGet(ctx, t, c, deployRemURL(p)+"/readyz")
		want := "standby"
		if p == leader {
			want = "leader"
		}
		if !strings.Contains(body, want) {
			t.Errorf("%s /readyz says %q, want %s", p.Name, body, want)
		}
	}

	s := seed.pod
	payload := framework.OverLimitPayload(c.NodeName(), seedNS, s.Name, string(s.UID), "empty")
	postAlert := func(p *corev1.Pod, token string) (int, remediator.WebhookResponse, string) {
		t.Helper()
		code, resp, body, err := framework.PostWebhook(ctx, c, deployRemAddr(p), token, payload)
		if err != nil {
			t.Fatalf("POST %s/webhook: %v", deployRemURL(p), err)
		}
		return code, resp, body
	}
	for _, p := range pods {
		for _, tok := range []string{"", "wrong-" + in.token} {
			if code, _, body := postAlert(p, tok); code != http.StatusUnauthorized {
				t.Errorf("%s: webhook with token %q: %d %s, want 401", p.Name, tok, code, body)
			}
		}
	}
	if _, err := c.Client().CoreV1().Pods(seedNS).Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the seed pod is gone after unauthenticated webhooks: %v", err)
	}
	if standby != nil {
		// Wherever the Service sends a delivery, the leader handles it: the standby forwards.
		checkStandbyForwards(ctx, t, c, leader, standby, in.token)
	}

	// The leader: exporter discovery (pods list in its namespace), the live measurement from
	// the exporter pod, the pod GET, the eviction and the Event, all under the install's RBAC.
	code, resp, body := postAlert(leader, in.token)
	if code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeEvicted {
		t.Fatalf("leader %s: webhook %d %s, want 200 and outcome evicted", leader.Name, code, body)
	}
	if a := resp.Alerts[0]; a.UsedBytes == nil || *a.UsedBytes != seed.used || a.Source != "exporter" {
		t.Errorf("live re-check %s, want usedBytes %d (du) from the exporter", body, seed.used)
	}
	framework.Eventually(t, 60*time.Second, time.Second, "the seed pod is evicted", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(seedNS).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return true, ""
		}
		return p.UID != s.UID || p.DeletionTimestamp != nil, "still running"
	})
	framework.Eventually(t, 30*time.Second, time.Second, "an EmptyDirEvicted event on the seed pod", func() (bool, string) {
		evs, err := c.Client().CoreV1().Events(seedNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(s.UID)})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == remediator.EventEvicted {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none %s", len(evs.Items), remediator.EventEvicted)
	})
}

func deployExporterURL(p *corev1.Pod) string {
	return "http://" + net.JoinHostPort(p.Status.PodIP, "9731")
}

// deployStaticBinary is testbin.Path(t, name) when that is statically linked (`make build`), else the
// command built with CGO_ENABLED=0 into dir (once per test): the image has no libc.
func deployStaticBinary(t *testing.T, name, dir string) string {
	t.Helper()
	p := testbin.Path(t, name)
	if cluster.CheckStatic(p) == nil {
		return p
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "../../cmd/...")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=0 go build ./cmd/...: %v\n%s", err, out)
		}
	}
	t.Logf("%s is dynamically linked; using a CGO_ENABLED=0 build", p)
	return filepath.Join(dir, name)
}

func deployToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// deployAPIEnv points in-cluster configuration at the API server: no kube-proxy runs here, so
// the `kubernetes` Service's ClusterIP does not route; KUBERNETES_SERVICE_HOST/PORT = the node
// IP:6443 does.
func deployAPIEnv(t *testing.T, c *cluster.Cluster) func(*corev1.PodSpec) {
	u, err := url.Parse(c.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	return func(spec *corev1.PodSpec) {
		for i := range spec.Containers {
			spec.Containers[i].Env = append(spec.Containers[i].Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()})
		}
	}
}

// deployApply server-side applies objs, as `kubectl apply --server-side -k deploy/` would, and
// deletes them when the test ends (Namespaces excepted: without a namespace controller one never
// finishes terminating), so that a later install of the same names, such as the README's Helm
// release named like the kustomize base, starts from a cluster without them.
func deployApply(ctx context.Context, t *testing.T, c *cluster.Cluster, objs []runtime.Object) {
	t.Helper()
	cfg := c.RESTConfig()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		delete(m, "status")
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		data, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "emptydir-guard-e2e", Force: &force}); err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		if gvk.Kind != "Namespace" {
			t.Cleanup(func() {
				if err := ri.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Logf("deleting %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
				}
			})
		}
	}
}

// daemonSetOwner is the controller reference the DaemonSet controller gives its pods.
func daemonSetOwner(ds *appsv1.DaemonSet) metav1.OwnerReference {
	return *metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
}

// deployPodFromTemplate does what the DaemonSet or Deployment controller would: a pod from the
// template, controlled by owner (metav1.NewControllerRef), here bound to the only node.
func deployPodFromTemplate(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string, tmpl corev1.PodTemplateSpec, owner metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace = name, ns
	pod.OwnerReferences = []metav1.OwnerReference{owner}
	pod.Spec.NodeName = c.NodeName()
	created, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s from the %s template: %v", ns, name, owner.Kind, err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client().CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return created
}

// deployWaitReady waits for the pod's Ready condition; on timeout it reports the pod's status,
// its events and the container log tail.
func deployWaitReady(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	var lastGetErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		lastGetErr = err
		if err == nil {
			last = p
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					return true, nil
				}
			}
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return false, fmt.Errorf("phase %s, which never becomes Ready", p.Status.Phase)
			}
		}
		return false, nil
	})
	if err == nil {
		return last
	}
	var b strings.Builder
	if lastGetErr != nil {
		fmt.Fprintf(&b, "last get: %v\n", lastGetErr)
	}
	if last != nil {
		st, _ := json.MarshalIndent(last.Status, "", "  ")
		fmt.Fprintf(&b, "status: %s\n", st)
	}
	if evs, err := c.Client().CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name}); err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "event: %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	for _, ct := range pod.Spec.Containers {
		if logs, err := c.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ct.Name}).DoRaw(ctx); err == nil {
			fmt.Fprintf(&b, "--- %s log ---\n%s\n", ct.Name, framework.Tail(string(logs), 3000))
		}
	}
	t.Fatalf("pod %s/%s not Ready within 2m: %v\n%s", pod.Namespace, pod.Name, err, b.String())
	return nil
}

// deployCheckAccess asks the API server's authorizer (SubjectAccessReview) what the ServiceAccount
// user may do, with the groups its token carries, so default bindings count too.
func deployCheckAccess(ctx context.Context, t *testing.T, c *cluster.Cluster, user string, want map[authorizationv1.ResourceAttributes]bool) {
	t.Helper()
	ns := strings.Split(user, ":")[2]
	for attrs, allowed := range want {
		a := attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &a,
		}}
		got, err := c.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if got.Status.Allowed != allowed {
			t.Errorf("%s: %s %s/%s in %q (group %q): allowed=%v, want %v (%s)", user, a.Verb, a.Resource, a.Subresource,
				a.Namespace, a.Group, got.Status.Allowed, allowed, got.Status.Reason)
		}
	}
}

// deployRemAddr is a remediator pod's address (its port http, 9732).
func deployRemAddr(p *corev1.Pod) string { return net.JoinHostPort(p.Status.PodIP, "9732") }

func deployRemURL(p *corev1.Pod) string { return "http://" + deployRemAddr(p) }

func deployGet(ctx context.Context, t *testing.T, c *cluster.Cluster, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
