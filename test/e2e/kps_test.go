package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The install most users take, as the README gives it: beside a kube-prometheus-stack release
// at its defaults. kube-prometheus-stack itself is a stand-in chart (testdata/): the objects of
// its release that decide what its Prometheus and Alertmanager pick up, from the same values keys
// with the same defaults, served from a chart repository named as its own instructions name it
// (prometheus-community), so that the README's commands, Helm ones included, run as written.

const (
	// kpsRelease and kpsNamespace are where the test installs the stand-in, as kube-prometheus-stack's
	// instructions install it; a namespace not named monitoring, so that nothing of the guard's
	// install may assume that name.
	kpsRelease   = "kube-prometheus-stack"
	kpsNamespace = "kube-prometheus-stack"
	// readmeInstallMarker precedes the README's fenced block of the install beside it.
	readmeInstallMarker = "<!-- TestOperatorInstallEvicts (test/e2e/operator_test.go) runs the next block as written. -->"
)

// helmTool runs the pinned Helm (test/helm's tool) with its state (repositories, cache) in
// one directory of the test, inside the cluster's network namespace.
type helmTool struct {
	c   *cluster.Cluster
	bin string
	env []string
}

func newHelmTool(t *testing.T, c *cluster.Cluster) *helmTool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "helm")
	build := exec.Command("go", "build", "-o", bin, "helm.sh/helm/v4/cmd/helm")
	build.Dir = "../helm"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building Helm: %v\n%s", err, out)
	}
	env := append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	return &helmTool{c: c, bin: bin, env: append(env, helmHomeEnv(t.TempDir())...)}
}

// run runs helm with args in the cluster's network namespace (where the API server is).
func (h *helmTool) run(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := h.c.Command(ctx, h.bin, args...)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installKubePrometheusStack serves the stand-in chart from a repository inside the cluster's
// namespace, adds it as prometheus-community and installs the release kube-prometheus-stack
// into monitoring at its defaults; only the versions of Prometheus and Alertmanager are the
// ones this test runs.
func installKubePrometheusStack(ctx context.Context, t *testing.T, h *helmTool, promVersion string) {
	t.Helper()
	repo := t.TempDir()
	pkg := exec.Command(h.bin, "package", "testdata/kube-prometheus-stack", "-d", repo)
	pkg.Env = h.env
	if out, err := pkg.CombinedOutput(); err != nil {
		t.Fatalf("helm package of the stand-in: %v\n%s", err, out)
	}
	l, err := h.c.Listen("tcp", net.JoinHostPort(h.c.NodeIP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(repo))}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	repoURL := "http://" + l.Addr().String()
	index := exec.Command(h.bin, "repo", "index", repo, "--url", repoURL)
	index.Env = h.env
	if out, err := index.CombinedOutput(); err != nil {
		t.Fatalf("helm repo index: %v\n%s", err, out)
	}
	if err := h.c.EnsureNamespace(ctx, kpsNamespace); err != nil {
		t.Fatal(err)
	}
	h.run(ctx, t, "repo", "add", "prometheus-community", repoURL)
	h.run(ctx, t, "install", kpsRelease, "prometheus-community/kube-prometheus-stack", "--namespace", kpsNamespace,
		"--set", "prometheus.prometheusSpec.version="+promVersion, "--set", "alertmanager.alertmanagerSpec.version=v0.25.0")
	t.Cleanup(func() {
		cmd := h.c.Command(context.Background(), h.bin, "uninstall", kpsRelease, "--namespace", kpsNamespace)
		cmd.Env = h.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("helm uninstall %s: %v\n%s", kpsRelease, err, out)
		}
	})
}

// readmeInstallScript is the README's shell block after readmeInstallMarker, as written.
func readmeInstallScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(framework.RepoPath("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), readmeInstallMarker)
	if !ok {
		t.Fatalf("README.md has no %q", readmeInstallMarker)
	}
	m := regexp.MustCompile("(?s)^\\s*```sh\n(.*?)\n```").FindStringSubmatch(after)
	if m == nil {
		t.Fatal("README.md: no ```sh block right after the install marker")
	}
	return m[1]
}

// runReadmeInstall runs the README's install block with sh -e from the checkout, Helm on its PATH
// and REGISTRY set to a real registry in the cluster's network namespace, which the node's
// containerd pulls the pushed image from. The one addition is the values this cluster needs (its
// kubelet root, pod logs and containerd directories, the API server's address: no kube-proxy here)
// and extraValues, given to the block's `helm install` of emptyDir guard as one more --values
// file by a wrapper named helm; they touch nothing that decides what the stack picks up or which
// image runs. Returns the install as the pod-creating helpers need it (no controllers run here:
// the test makes the pods from the templates) and the reference (by digest) of the image index
// the block pushed.
func runReadmeInstall(ctx context.Context, t *testing.T, c *cluster.Cluster, h *helmTool, extraValues string) (*install, string) {
	t.Helper()
	script := readmeInstallScript(t)
	m := regexp.MustCompile(`helm install (\S+) \S+.*?--namespace (\S+)`).FindStringSubmatch(strings.ReplaceAll(script, "\\\n", " "))
	if m == nil {
		t.Fatalf("README.md's install block has no `helm install <release> <chart> ... --namespace <ns>`:\n%s", script)
	}
	release, ns := m[1], m[2]
	reg, err := c.StartRegistry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A repository of its own: other tests of this cluster push the same tags. The pushed
	// index's reference lands in releaseDir (make push-image writes image.ref there).
	registry, releaseDir := reg+"/readme", t.TempDir()
	// What kube-controller-manager would do for the namespace Helm creates: its default
	// ServiceAccount and kube-root-ca.crt, which the pods' token volumes mount.
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}

	u, err := url.Parse(c.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`
  extraEnv:
    - {name: KUBERNETES_SERVICE_HOST, value: %q}
    - {name: KUBERNETES_SERVICE_PORT, value: %q}`, u.Hostname(), u.Port())
	dir := t.TempDir()
	values := filepath.Join(dir, "cluster-values.yaml")
	if err := os.WriteFile(values, []byte(nodeValues(c, env, env)+extraValues), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf(`#!/bin/sh
# helm, with this cluster's values added to the install of %s.
if [ "$1" = install ] && [ "$2" = %s ]; then exec %s "$@" --values %s; fi
exec %s "$@"
`, release, release, h.bin, values, h.bin)
	if err := os.WriteFile(filepath.Join(dir, "helm"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// make, one at a time with the other tests' in this checkout (makeLock): they write bin/.
	realMake, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("the README's install block runs make: %v", err)
	}
	makeWrapper := fmt.Sprintf("#!/bin/sh\nexec flock %s %s \"$@\"\n", makeLock(), realMake)
	if err := os.WriteFile(filepath.Join(dir, "make"), []byte(makeWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// kubectl: the cluster's own version, built beside its API server (make test-cluster).
	k8sBin := os.Getenv("K8S_BIN_DIR")
	if _, err := os.Stat(filepath.Join(k8sBin, "kubectl")); err != nil {
		t.Fatalf("the README's install block runs kubectl: none in K8S_BIN_DIR %q (test/k8sbin/build.sh kubectl; make test-cluster builds it): %v", k8sBin, err)
	}
	cmd := c.Command(ctx, "sh", "-ec", script)
	cmd.Dir = framework.RepoPath(".")
	cmd.Env = append(readmeMakeEnv(t, h.env), "PATH="+dir+":"+k8sBin+":"+os.Getenv("PATH"),
		"REGISTRY="+registry, "REGISTRY_PLAIN_HTTP=1", "RELEASE_DIR="+releaseDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's install block: %v\n%s\n--- output:\n%s", err, script, out)
	}
	t.Logf("the README's install block:\n%s\n--- output:\n%s", script, framework.Tail(string(out), 2000))
	t.Cleanup(func() {
		cmd := c.Command(context.Background(), h.bin, "uninstall", release, "--namespace", ns)
		cmd.Env = h.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("helm uninstall %s: %v\n%s", release, err, out)
		}
	})

	// The objects' names are the chart's, for this release.
	in := &install{c: c, ns: ns}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	dss, err := c.Client().AppsV1().DaemonSets(ns).List(ctx, sel)
	if err != nil || len(dss.Items) != 1 {
		t.Fatalf("the README's install made %v DaemonSets of release %s (%v), want the exporter's", len(dss.Items), release, err)
	}
	deps, err := c.Client().AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil || len(deps.Items) != 1 {
		t.Fatalf("the README's install made %v Deployments of release %s (%v), want the remediator's", len(deps.Items), release, err)
	}
	in.exporter, in.remediator = dss.Items[0].Name, deps.Items[0].Name
	sec, err := c.Client().CoreV1().Secrets(ns).Get(ctx, in.remediator+"-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's webhook token Secret: %v", err)
	}
	in.token = string(sec.Data["token"])
	// As the block ran it: outside make test's own make, whose MAKEFLAGS print directories.
	versionCmd := exec.Command("make", "-s", "-C", framework.RepoPath("."), "version")
	versionCmd.Env = readmeMakeEnv(t, os.Environ())
	version, err := versionCmd.Output()
	if err != nil {
		t.Fatalf("make version: %v", err)
	}
	image := registry + "/emptydir-guard:" + strings.TrimSpace(string(version))
	for _, ct := range dss.Items[0].Spec.Template.Spec.Containers {
		if ct.Image != image {
			t.Errorf("the README's install runs the exporter's container %s from %s, want the image the block pushed, %s", ct.Name, ct.Image, image)
		}
	}
	ref, err := os.ReadFile(filepath.Join(releaseDir, "image.ref"))
	if err != nil {
		t.Fatalf("the README's make push-image left no image reference: %v", err)
	}
	return in, strings.TrimSpace(string(ref))
}

// makeLock is the file the tests' make runs in this checkout lock (flock): the shards run at
// once, and make push-image rewrites bin/.
func makeLock() string { return framework.RepoPath("bin/.e2e-make.lock") }

// readmeMakeEnv is env for the make inside the README's block: without the outer make's
// jobserver and variables, the Go caches the machine's (every module is there: make build,
// make release-tools), no module proxy (the namespace has no route to one), and credentials in
// a directory of the test's (the test's registry takes none).
func readmeMakeEnv(t *testing.T, env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VERSION", "CHART_VERSION", "REGISTRY", "IMAGE_REPO", "RELEASE_DIR", "GOPROXY", "GOFLAGS", "DOCKER_CONFIG":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GOPROXY=off", "GOFLAGS=-mod=readonly", "DOCKER_CONFIG="+t.TempDir())
}
