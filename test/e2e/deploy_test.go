package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"debug/elf"
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
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// deployImage is the project's image as the e2e tests build it: the statically linked
// binaries at the paths the Dockerfile puts them, on a distroless-like rootfs.
const deployImage = "localhost/emptydir-guard:test"

// TestDeployManifestsOnRealCluster applies the kustomize base (deploy/) to the real API
// server, runs its exporter and remediator pods from the project's image on the real kubelet
// under the manifests' ServiceAccounts, RBAC and security contexts, and follows one
// over-limit alert through them to an eviction.
//
// Patched, because this cluster needs it (nothing else): the image (local, pullPolicy
// Never), the kubelet root hostPath (the cluster's --root-dir), and the API server address
// in the pods' environment (no kube-proxy runs, so the `kubernetes` Service's ClusterIP does
// not route; in-cluster config then uses KUBERNETES_SERVICE_HOST/PORT = the node IP:6443).
func TestDeployManifestsOnRealCluster(t *testing.T) {
	static := t.TempDir()
	files := map[string]string{
		"/usr/local/bin/emptydir-exporter":   deployStaticBinary(t, "emptydir-exporter", static),
		"/usr/local/bin/emptydir-remediator": deployStaticBinary(t, "emptydir-remediator", static),
	}
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 10*time.Minute)
	defer cancel()
	if err := c.ImportImage(ctx, deployImage, files, []string{"/usr/local/bin/emptydir-exporter"}); err != nil {
		t.Fatal(err)
	}

	objs, err := deploy.BaseObjects()
	if err != nil {
		t.Fatal(err)
	}
	secretObjs, err := deploy.DecodeFile(deploy.WebhookSecretExample)
	if err != nil {
		t.Fatal(err)
	}
	secret := secretObjs[0].(*corev1.Secret)
	token := deployToken(t)
	secret.StringData["token"] = token // "replace the placeholder", as docs/deploy.md says
	objs = append(objs, secret)
	apiHost, apiPort := deployAPIHostPort(t, c)
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			deployLocalize(&w.Spec.Template.Spec, c, apiHost, apiPort)
		case *appsv1.Deployment:
			deployLocalize(&w.Spec.Template.Spec, c, apiHost, apiPort)
		}
	}

	// What kube-controller-manager would do for a new namespace: its default ServiceAccount
	// and the kube-root-ca.crt ConfigMap the projected token volumes mount.
	if err := c.EnsureNamespace(ctx, deploy.Namespace); err != nil {
		t.Fatal(err)
	}
	applied := deployApply(ctx, t, c, objs)
	ns := deploy.Namespace

	// A seed pod elsewhere, over its 1Mi limit, with its data in a folder only uid 1234 may
	// enter (0700): the exporter (uid 0, every capability dropped but DAC_READ_SEARCH) must
	// still measure all of it.
	seedNS := "dep-" + randSuffix()
	if err := c.EnsureNamespace(ctx, seedNS); err != nil {
		t.Fatal(err)
	}
	seed := runPod(ctx, t, c, c.SeedPod(seedNS, "empty-test1"))
	if _, stderr, err := c.ExecInPod(ctx, seedNS, seed.Name, "test2", "sh", "-c",
		"mkdir /test/private && dd if=/dev/zero of=/test/private/f bs=1K count=10000 2>/dev/null && "+
			"chmod 600 /test/private/f && chown -R 1234:1234 /test/private && chmod 700 /test/private"); err != nil {
		t.Fatalf("writing into the seed pod: %v (%s)", err, stderr)
	}
	seedDir := exporter.Dir(c.KubeletRootDir(), string(seed.UID), "empty")
	wantUsed := duBytes(t, seedDir)

	// No controller-manager runs here, so the DaemonSet and the Deployment create no pods by
	// themselves: create them from their pod templates (as the controllers would, with an
	// owner reference), bound to the node because no scheduler runs either.
	dsObj := applied["DaemonSet/emptydir-exporter"]
	ds, err := c.Client().AppsV1().DaemonSets(ns).Get(ctx, "emptydir-exporter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expPod := deployPodFromTemplate(ctx, t, c, ns, "emptydir-exporter-"+randSuffix(), ds.Spec.Template, dsObj)
	dep, err := c.Client().AppsV1().Deployments(ns).Get(ctx, "emptydir-remediator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var remPods []*corev1.Pod
	for i := int32(0); i < *dep.Spec.Replicas; i++ {
		remPods = append(remPods, deployPodFromTemplate(ctx, t, c, ns, fmt.Sprintf("emptydir-remediator-%s", randSuffix()), dep.Spec.Template, applied["Deployment/emptydir-remediator"]))
	}

	// --- exporter ---
	expPod = deployWaitReady(ctx, t, c, expPod)
	if expPod.Spec.ServiceAccountName != "emptydir-exporter" {
		t.Errorf("exporter pod runs as ServiceAccount %q", expPod.Spec.ServiceAccountName)
	}
	// Ready means /readyz answered 200: the pod informer listed and watched pods with the
	// ServiceAccount's token, so the manifest's ClusterRole is enough (RBAC is on).
	expSA := "system:serviceaccount:" + ns + ":emptydir-exporter"
	deployCheckAccess(ctx, t, c, expSA, map[authorizationv1.ResourceAttributes]bool{
		{Verb: "list", Resource: "pods"}:                                   true,
		{Verb: "watch", Resource: "pods"}:                                  true,
		{Verb: "get", Resource: "pods", Namespace: seedNS}:                 false,
		{Verb: "get", Resource: "secrets", Namespace: seedNS}:              false,
		{Verb: "create", Resource: "pods", Subresource: "eviction"}:        false,
		{Verb: "get", Resource: "nodes", Subresource: "proxy"}:             false,
		{Verb: "get", Resource: "nodes", Subresource: "stats"}:             false,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io"}: false,
	})
	expURL := "http://" + net.JoinHostPort(expPod.Status.PodIP, "9731")
	seedLabels := map[string]string{"namespace": seedNS, "pod": seed.Name, "uid": string(seed.UID), "volume": "empty", "node": c.NodeName()}
	eventually(t, 60*time.Second, time.Second, "the deployed exporter reports the seed pod's usage", func() (bool, string) {
		fams, err := scrape(ctx, c, expURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := sample(fams, "emptydir_used_bytes", seedLabels)
		unreadable, _ := sample(fams, "emptydir_unreadable_entries", seedLabels)
		limit, _ := sample(fams, "emptydir_limit_bytes", seedLabels)
		synced, _ := sample(fams, "emptydir_exporter_pod_informer_synced", nil)
		return ok && int64(used) == wantUsed && unreadable == 0 && limit == 1<<20 && synced == 1,
			fmt.Sprintf("used=%v (found %v, du %d) unreadable=%v limit=%v synced=%v", used, ok, wantUsed, unreadable, limit, synced)
	})
	fams, err := scrape(ctx, c, expURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if errs, _ := sample(fams, "emptydir_exporter_pod_watch_errors_total", nil); errs != 0 {
		t.Errorf("pod watch errors %v under the manifest's RBAC", errs)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := deployGet(ctx, t, c, expURL+path); code != http.StatusOK {
			t.Errorf("exporter %s: %d %s", path, code, body)
		}
	}

	// The control: the same pod without DAC_READ_SEARCH and without mount propagation
	// (other labels, so that the remediator's exporter discovery never picks it). It shows
	// that each of the two settings is what makes the numbers complete.
	control := ds.Spec.Template.DeepCopy()
	control.Labels = map[string]string{"app.kubernetes.io/name": "emptydir-exporter-control"}
	control.Spec.Containers[0].SecurityContext.Capabilities.Add = nil
	none := corev1.MountPropagationNone
	for i := range control.Spec.Containers[0].VolumeMounts {
		control.Spec.Containers[0].VolumeMounts[i].MountPropagation = &none
	}
	ctlPod := deployWaitReady(ctx, t, c, deployPodFromTemplate(ctx, t, c, ns, "emptydir-exporter-control-"+randSuffix(), *control, dsObj))
	ctlURL := "http://" + net.JoinHostPort(ctlPod.Status.PodIP, "9731")
	eventually(t, 60*time.Second, time.Second, "without DAC_READ_SEARCH the 0700 folder is unreadable", func() (bool, string) {
		fams, err := scrape(ctx, c, ctlURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := sample(fams, "emptydir_used_bytes", seedLabels)
		unreadable, _ := sample(fams, "emptydir_unreadable_entries", seedLabels)
		return ok && unreadable > 0 && int64(used) < wantUsed, fmt.Sprintf("used=%v (found %v, du %d) unreadable=%v", used, ok, wantUsed, unreadable)
	})

	// HostToContainer propagation: a medium: Memory volume of a pod started after the
	// exporters is a tmpfs the kubelet mounts later on the host. The manifest's exporter sees
	// its data; the control sees only the empty folder under it.
	mem := runPod(ctx, t, c, memoryPod(c, seedNS, "mem-after-exporter"))
	if _, stderr, err := c.ExecInPod(ctx, seedNS, mem.Name, "test2", "dd", "if=/dev/zero", "of=/mem/f", "bs=1K", "count=2000"); err != nil {
		t.Fatalf("dd into the memory volume: %v (%s)", err, stderr)
	}
	wantMem := duBytes(t, exporter.Dir(c.KubeletRootDir(), string(mem.UID), "mem"))
	memLabels := map[string]string{"namespace": seedNS, "pod": mem.Name, "uid": string(mem.UID), "volume": "mem", "medium": "memory"}
	eventually(t, 60*time.Second, time.Second, "the exporter sees a tmpfs mounted after it started", func() (bool, string) {
		fams, err := scrape(ctx, c, expURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := sample(fams, "emptydir_used_bytes", memLabels)
		capacity, _ := sample(fams, "emptydir_capacity_bytes", memLabels)
		ctl, err := scrape(ctx, c, ctlURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		ctlUsed, ctlOK := sample(ctl, "emptydir_used_bytes", memLabels)
		return ok && int64(used) == wantMem && wantMem >= 2048000 && capacity == 64<<20 && ctlOK && ctlUsed < 2048000,
			fmt.Sprintf("used=%v (found %v, du %d) capacity=%v; control without propagation used=%v (found %v)", used, ok, wantMem, capacity, ctlUsed, ctlOK)
	})
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, ctlPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	// --- remediator ---
	byName := map[string]*corev1.Pod{}
	for i, p := range remPods {
		remPods[i] = deployWaitReady(ctx, t, c, p)
		byName[remPods[i].Name] = remPods[i]
		if sa := remPods[i].Spec.ServiceAccountName; sa != "emptydir-remediator" {
			t.Errorf("remediator pod runs as ServiceAccount %q", sa)
		}
		if code, body := deployGet(ctx, t, c, deployRemURL(remPods[i])+"/healthz"); code != http.StatusOK {
			t.Errorf("remediator %s /healthz: %d %s", remPods[i].Name, code, body)
		}
	}
	remSA := "system:serviceaccount:" + ns + ":emptydir-remediator"
	deployCheckAccess(ctx, t, c, remSA, map[authorizationv1.ResourceAttributes]bool{
		{Verb: "get", Resource: "pods", Namespace: seedNS}:                                          true,
		{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: seedNS}:              true,
		{Verb: "create", Resource: "events", Namespace: seedNS}:                                     true,
		{Verb: "patch", Resource: "events", Group: "events.k8s.io", Namespace: seedNS}:              true,
		{Verb: "list", Resource: "pods", Namespace: ns}:                                             true,
		{Verb: "get", Resource: "leases", Group: "coordination.k8s.io", Namespace: ns}:              true,
		{Verb: "create", Resource: "leases", Group: "coordination.k8s.io", Namespace: ns}:           true,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Namespace: ns}:           true,
		{Verb: "get", Resource: "configmaps", Name: "emptydir-remediator-ledger", Namespace: ns}:    true,
		{Verb: "update", Resource: "configmaps", Name: "emptydir-remediator-ledger", Namespace: ns}: true,
		{Verb: "create", Resource: "configmaps", Namespace: ns}:                                     true,
		{Verb: "get", Resource: "configmaps", Name: "kube-root-ca.crt", Namespace: ns}:              false,
		{Verb: "update", Resource: "configmaps", Name: "kube-root-ca.crt", Namespace: ns}:           false,
		{Verb: "list", Resource: "pods", Namespace: seedNS}:                                         false,
		{Verb: "watch", Resource: "pods", Namespace: seedNS}:                                        false,
		{Verb: "delete", Resource: "pods", Namespace: seedNS}:                                       false,
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: seedNS}:                  false,
		{Verb: "get", Resource: "secrets", Namespace: ns}:                                           false,
		{Verb: "update", Resource: "leases", Group: "coordination.k8s.io", Namespace: "default"}:    false,
		{Verb: "get", Resource: "nodes", Subresource: "proxy"}:                                      false,
	})

	// The replicas elect a leader on the Lease (the Role's leases rights in its namespace).
	var leader, standby *corev1.Pod
	eventually(t, 60*time.Second, time.Second, "a remediator replica holds the Lease", func() (bool, string) {
		l, err := c.Client().CoordinationV1().Leases(ns).Get(ctx, "emptydir-remediator", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder"
		}
		leader = byName[*l.Spec.HolderIdentity]
		return leader != nil, "holder " + *l.Spec.HolderIdentity
	})
	for _, p := range remPods {
		if p != leader {
			standby = p
		}
	}
	for _, p := range remPods {
		_, body := deployGet(ctx, t, c, deployRemURL(p)+"/readyz")
		want := "standby"
		if p == leader {
			want = "leader"
		}
		if !strings.Contains(body, want) {
			t.Errorf("%s /readyz says %q, want %s", p.Name, body, want)
		}
	}

	payload := deployOverLimitPayload(c.NodeName(), seedNS, seed.Name, string(seed.UID), "empty")
	for _, p := range remPods {
		for _, tok := range []string{"", "wrong-" + token} {
			if code, _, body := deployPostAlert(ctx, t, c, deployRemURL(p)+"/webhook", tok, payload); code != http.StatusUnauthorized {
				t.Errorf("%s: webhook with token %q: %d %s, want 401", p.Name, tok, code, body)
			}
		}
	}
	if _, err := c.Client().CoreV1().Pods(seedNS).Get(ctx, seed.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the seed pod is gone after unauthenticated webhooks: %v", err)
	}
	if standby != nil {
		// Wherever the Service sends a delivery, the leader handles it: the standby forwards.
		checkStandbyForwards(ctx, t, c, leader, standby, token)
	}

	// The leader: exporter discovery (pods list in its namespace), the live measurement from
	// the exporter pod, the pod GET, the eviction and the Event, all under the manifests' RBAC.
	code, resp, body := deployPostAlert(ctx, t, c, deployRemURL(leader)+"/webhook", token, payload)
	if code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeEvicted {
		t.Fatalf("leader %s: webhook %d %s, want 200 and outcome evicted", leader.Name, code, body)
	}
	if a := resp.Alerts[0]; a.UsedBytes == nil || *a.UsedBytes != wantUsed || a.Source != "exporter" {
		t.Errorf("live re-check %s, want usedBytes %d (du) from the exporter", body, wantUsed)
	}
	eventually(t, 60*time.Second, time.Second, "the seed pod is evicted", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(seedNS).Get(ctx, seed.Name, metav1.GetOptions{})
		if err != nil {
			return true, ""
		}
		return p.UID != seed.UID || p.DeletionTimestamp != nil, "still running"
	})
	eventually(t, 30*time.Second, time.Second, "an EmptyDirEvicted event on the seed pod", func() (bool, string) {
		evs, err := c.Client().CoreV1().Events(seedNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(seed.UID)})
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
	// --- components/kubelet-source: the kubelet authorizes /stats/summary as nodes/stats ---
	// (after the SubjectAccessReviews above, which check that the base alone does not grant it)
	rbacObjs, err := deploy.DecodeFile("components/kubelet-source/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deployApply(ctx, t, c, rbacObjs)
	expiry := int64(600)
	tr, err := c.Client().CoreV1().ServiceAccounts(ns).CreateToken(ctx, "emptydir-exporter",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := c.HTTPClient(&tls.Config{RootCAs: c.CAPool()})
	kubeletGet := func(path string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.KubeletURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := kubelet.Do(req)
		if err != nil {
			t.Fatalf("GET kubelet %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, tail(string(b), 300)
	}
	// only_cpu_and_memory: the full summary fails on this cluster (localStorageCapacityIsolation
	// off, see LOCAL-CLUSTER.md); the authorization is the same.
	if code, body := kubeletGet("/stats/summary?only_cpu_and_memory=true"); code != http.StatusOK {
		t.Errorf("exporter token with components/kubelet-source: kubelet /stats/summary %d %s, want 200", code, body)
	}
	if code, body := kubeletGet("/pods"); code != http.StatusForbidden {
		t.Errorf("exporter token: kubelet /pods %d %s, want 403 (no nodes/proxy)", code, body)
	}
}

// deployStaticBinary is binary(t, name) when that is statically linked (`make build`), else the
// command built with CGO_ENABLED=0 into dir (once per test): the image has no libc.
func deployStaticBinary(t *testing.T, name, dir string) string {
	t.Helper()
	p := binary(t, name)
	if deployIsStatic(p) {
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

func deployIsStatic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

func deployToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func deployAPIHostPort(t *testing.T, c *cluster.Cluster) (string, string) {
	u, err := url.Parse(c.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// deployLocalize patches what this cluster needs: the local image, the kubelet root, and
// the API server address (see TestDeployManifestsOnRealCluster).
func deployLocalize(spec *corev1.PodSpec, c *cluster.Cluster, apiHost, apiPort string) {
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		ct.Image = deployImage
		ct.ImagePullPolicy = corev1.PullNever
		ct.Env = append(ct.Env,
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: apiHost},
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: apiPort})
	}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			if rest, ok := strings.CutPrefix(hp.Path, "/var/lib/kubelet"); ok {
				hp.Path = c.KubeletRootDir() + rest
			}
		}
	}
}

// deployApply server-side applies objs, as `kubectl apply --server-side -k deploy/` would,
// and returns them as the API server stored them, by Kind/name.
func deployApply(ctx context.Context, t *testing.T, c *cluster.Cluster, objs []runtime.Object) map[string]*unstructured.Unstructured {
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
	out := map[string]*unstructured.Unstructured{}
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
		got, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "emptydir-guard-e2e", Force: &force})
		if err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		out[gvk.Kind+"/"+u.GetName()] = got
	}
	return out
}

// deployPodFromTemplate does what the DaemonSet or Deployment controller would: a pod from the
// template, controlled by owner, here bound to the only node.
func deployPodFromTemplate(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string, tmpl corev1.PodTemplateSpec, owner *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace = name, ns
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes,
	}}
	pod.Spec.NodeName = c.NodeName()
	created, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s from the %s template: %v", ns, name, owner.GetKind(), err)
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
	deadline := time.Now().Add(2 * time.Minute)
	var last *corev1.Pod
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p, err := c.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil {
			last = p
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					return p
				}
			}
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				break
			}
		}
		time.Sleep(time.Second)
	}
	var b strings.Builder
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
			fmt.Fprintf(&b, "--- %s log ---\n%s\n", ct.Name, tail(string(logs), 3000))
		}
	}
	t.Fatalf("pod %s/%s not Ready within 2m\n%s", pod.Namespace, pod.Name, b.String())
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

func deployRemURL(p *corev1.Pod) string { return "http://" + net.JoinHostPort(p.Status.PodIP, "9732") }

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

func deployOverLimitPayload(node, ns, pod, uid, volume string) []byte {
	labels := map[string]string{"alertname": "EmptyDirOverLimit", "severity": "critical", "remediation": "evict",
		"node": node, "namespace": ns, "pod": pod, "uid": uid, "volume": volume}
	b, _ := json.Marshal(remediator.Payload{
		Version: "4", Status: remediator.StatusFiring, Receiver: "emptydir-remediator", GroupKey: "{}:{uid=\"" + uid + "\"}",
		GroupLabels: map[string]string{"uid": uid}, CommonLabels: labels,
		Alerts: []remediator.Alert{{Status: remediator.StatusFiring, Labels: labels, StartsAt: time.Now().Add(-time.Minute), Fingerprint: "deploy-" + uid[:8]}},
	})
	return b
}

func deployPostAlert(ctx context.Context, t *testing.T, c *cluster.Cluster, u, token string, body []byte) (int, remediator.WebhookResponse, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var wr remediator.WebhookResponse
	_ = json.Unmarshal(b, &wr)
	return resp.StatusCode, wr, string(b)
}
