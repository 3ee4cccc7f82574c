package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// TestReleaseFromRegistry publishes a release as the release workflow does and installs it as a
// user does, through a real OCI registry (Debian's docker-registry, in the cluster's network
// namespace): the Makefile's own release targets push the image index (make image) with its
// SBOMs and the packaged chart, sign both with cosign (a key this test generates) and verify
// what a user would pull; then `helm install oci://…` installs the chart from the registry and
// the kubelet pulls the image from it through containerd (nothing is imported), at the tag the
// chart defaults to (v<appVersion>), and the seed pod is evicted through that install.
//
// The release checks must fail on a broken release, so the test breaks one each way: an unsigned
// image and chart, a signature by another key, a tag that was never pushed, an index without the
// node's architecture; each must fail verification, and the last two must also fail the
// kubelet's pull and Helm's install.
func TestReleaseFromRegistry(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 12*time.Minute)
	defer cancel()
	rel := newReleaser(t, c)
	reg, err := c.StartRegistry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rel.registry = reg

	// What the release workflow runs on a tag, here against this registry and with a key: the
	// login first (this registry takes any credentials; the tools must store them where the
	// others read them), then the release.
	rel.stdin = "test-password\n"
	rel.make(ctx, t, map[string]string{"REGISTRY_USER": "tester"}, "registry-login")
	rel.stdin = ""
	if b, err := os.ReadFile(filepath.Join(rel.dockerConfig, "config.json")); err != nil || !strings.Contains(string(b), reg) {
		t.Errorf("make registry-login stored no credentials for %s in the Docker config (%v): %s", reg, err, b)
	}
	out := rel.make(ctx, t, nil, "release")
	imageRef := rel.readRef(t, "image.ref")
	chartRef := rel.readRef(t, "chart.ref")
	t.Logf("released %s and %s:\n%s", imageRef, chartRef, lastLines(out, 8))
	if want := reg + "/emptydir-guard@sha256:"; !strings.HasPrefix(imageRef, want) {
		t.Fatalf("make push-image pushed %q, want %s…", imageRef, want)
	}
	if want := reg + "/charts/emptydir-guard@sha256:"; !strings.HasPrefix(chartRef, want) {
		t.Fatalf("make push-chart pushed %q, want %s…", chartRef, want)
	}

	t.Run("unsigned", func(t *testing.T) {
		// The same image and chart in a repository nobody signed in: cosign must refuse both.
		vars := map[string]string{"REGISTRY": reg + "/unsigned", "RELEASE_DIR": t.TempDir()}
		rel.make(ctx, t, vars, "push-image", "push-chart")
		out, err := rel.tryMake(ctx, vars, "-k", "verify-image", "verify-chart")
		requireFailure(t, "verify-image and verify-chart of an unsigned image and chart", out, err,
			"verify-image] Error", "verify-chart] Error", "no signatures found")
	})
	t.Run("other key", func(t *testing.T) {
		other := rel.generateKey(t, "other")
		out, err := rel.tryMake(ctx, map[string]string{"COSIGN_VERIFY_FLAGS": "--key " + other + ".pub --insecure-ignore-tlog=true"}, "-k", "verify-image", "verify-chart")
		requireFailure(t, "verifying the release against a key that did not sign it", out, err,
			"verify-image] Error", "verify-chart] Error")
	})
	t.Run("wrong tag", func(t *testing.T) {
		out, err := rel.tryMake(ctx, map[string]string{"VERSION": "v9.9.9-never-pushed", "CHART_VERSION": "9.9.9-never-pushed"}, "-k", "verify-image", "verify-chart")
		requireFailure(t, "verifying a version that was never pushed", out, err, "verify-image] Error", "verify-chart] Error", "MANIFEST_UNKNOWN")
		out, err = rel.helm(ctx, "install", "never", "oci://"+reg+"/charts/emptydir-guard", "--version", "9.9.9", "--plain-http",
			"--namespace", metav1.NamespaceDefault, "--dry-run=client")
		requireFailure(t, "helm install of a chart version that was never pushed", out, err, "not found")
	})
	t.Run("missing architecture", func(t *testing.T) {
		// An index without linux/amd64 (the node's), pushed by the same targets.
		vars := map[string]string{
			"IMAGE_REPO": reg + "/arm64-only/emptydir-guard", "IMAGE_PLATFORMS": "linux/arm64",
			"IMAGE_DIR": filepath.Join(t.TempDir(), "image"), "RELEASE_DIR": t.TempDir(),
		}
		rel.make(ctx, t, vars, "push-image")
		vars["IMAGE_PLATFORMS"] = "linux/amd64 linux/arm64"
		out, err := rel.tryMake(ctx, vars, "verify-image")
		requireFailure(t, "verify-image of an index without linux/amd64", out, err, "no image for linux/amd64")
	})

	// The install a user makes: the chart from the registry at the released version, its image
	// repository pointed at the registry, the tag left to the chart (v<appVersion>).
	ns := "oci-" + framework.RandSuffix()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	in := rel.helmInstall(ctx, t, "released", ns, chartRef)
	seed := in.startSeed(ctx, t, "oci")
	exp, rems := in.createPods(ctx, t)
	exp = in.checkExporter(ctx, t, exp, seed)
	requirePulled(ctx, t, c, append([]*corev1.Pod{exp}, rems...), imageRef)
	in.evictSeed(ctx, t, rems, seed)

	// The kubelet refuses what verification refused: a tag that was never pushed, and an index
	// without the node's architecture.
	for _, bad := range []struct{ image, want string }{
		{reg + "/emptydir-guard:v9.9.9-never-pushed", "not found"},
		{reg + "/arm64-only/emptydir-guard:" + rel.version, "no match for platform"},
	} {
		requirePullFails(ctx, t, c, ns, bad.image, bad.want)
	}
}

// releaser runs the Makefile's release targets, the release workflow's, inside the cluster's
// network namespace where the registry is, with a cosign key it generated.
type releaser struct {
	c            *cluster.Cluster
	root         string // the repository
	tools        string // bin/tools: helm, cosign, ocirelease (make release-tools)
	env          []string
	key          string // the cosign key pair's path prefix (.key, .pub)
	releaseDir   string
	registry     string
	version      string // make version
	chart        string // make chart-version
	stdin        string // make's standard input
	dockerConfig string // where ocirelease and cosign read credentials
}

func newReleaser(t *testing.T, c *cluster.Cluster) *releaser {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &releaser{c: c, root: root, tools: filepath.Join(root, "bin", "tools"), releaseDir: t.TempDir()}
	for _, tool := range []string{"helm", "cosign", "ocirelease"} {
		if _, err := os.Stat(filepath.Join(r.tools, tool)); err != nil {
			t.Fatalf("%v: build the release tools with `make release-tools` (make test-cluster does)", err)
		}
	}
	home := t.TempDir()
	r.dockerConfig = filepath.Join(home, "docker")
	// The nested make must not join the outer one's jobserver or inherit its variables; the
	// tools keep their state (credentials, caches) in the test's directories. The Go caches are
	// the machine's: every module is there already (make release-tools, make image), and the
	// namespace has no route to a module proxy.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VERSION", "CHART_VERSION":
			continue
		}
		r.env = append(r.env, kv)
	}
	r.env = append(r.env, "GOPROXY=off", "GOFLAGS=-mod=readonly",
		"DOCKER_CONFIG="+r.dockerConfig,
		// cosign looks for Sigstore's public trust root (TUF) even when it verifies with a key; a
		// mirror without a cached root makes it give up before any lookup.
		"TUF_ROOT="+filepath.Join(home, "sigstore"), "TUF_MIRROR=file://"+filepath.Join(home, "no-tuf-mirror"),
		"KUBECONFIG="+c.KubeconfigPath(), "COSIGN_PASSWORD="+deployToken(t))
	r.env = append(r.env, helmHomeEnv(filepath.Join(home, "helm"))...)
	r.key = r.generateKey(t, "release")
	r.version = strings.TrimSpace(r.run(t, exec.Command("make", "-s", "-C", root, "version")))
	r.chart = strings.TrimSpace(r.run(t, exec.Command("make", "-s", "-C", root, "chart-version")))
	return r
}

// generateKey makes a cosign key pair under the test's directory (encrypted with COSIGN_PASSWORD)
// and returns its path prefix.
func (r *releaser) generateKey(t *testing.T, name string) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), name)
	r.run(t, exec.Command(filepath.Join(r.tools, "cosign"), "generate-key-pair", "--output-key-prefix", prefix))
	return prefix
}

func (r *releaser) run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// tryMake runs make with args (targets and flags) and the release variables for this registry
// and key, overridden by vars, inside the cluster's network namespace.
func (r *releaser) tryMake(ctx context.Context, vars map[string]string, args ...string) (string, error) {
	all := map[string]string{
		"REGISTRY":            r.registry,
		"REGISTRY_PLAIN_HTTP": "1",
		"RELEASE_DIR":         r.releaseDir,
		"VERSION":             r.version,
		"CHART_VERSION":       r.chart,
		// A key and no transparency log: nothing here reaches Rekor.
		"COSIGN_SIGN_FLAGS":   "--yes --key " + r.key + ".key --tlog-upload=false",
		"COSIGN_VERIFY_FLAGS": "--key " + r.key + ".pub --insecure-ignore-tlog=true",
	}
	for k, v := range vars {
		all[k] = v
	}
	margs := append([]string{"-s", "-C", r.root}, args...)
	for k, v := range all {
		margs = append(margs, k+"="+v)
	}
	cmd := r.c.Command(ctx, "flock", append([]string{makeLock(), "make"}, margs...)...)
	cmd.Env = r.env
	cmd.Stdin = strings.NewReader(r.stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *releaser) make(ctx context.Context, t *testing.T, vars map[string]string, targets ...string) string {
	t.Helper()
	out, err := r.tryMake(ctx, vars, targets...)
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(targets, " "), err, out)
	}
	return out
}

func (r *releaser) readRef(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.releaseDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// helm runs the pinned Helm inside the cluster's network namespace.
func (r *releaser) helm(ctx context.Context, args ...string) (string, error) {
	cmd := r.c.Command(ctx, filepath.Join(r.tools, "helm"), args...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmInstall installs the released chart from the registry into ns, with its image from the
// registry at the chart's default tag, and returns the install as the pod-creating helpers
// (createPods & co.) need it: no controllers run here, so the test makes the DaemonSet's and the
// Deployment's pods from the templates Helm stored.
func (r *releaser) helmInstall(ctx context.Context, t *testing.T, release, ns, chartRef string) *install {
	t.Helper()
	c := r.c
	u, err := url.Parse(c.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	// No kube-proxy here: in-cluster clients reach the API server at the node's address.
	env := fmt.Sprintf(`
  extraEnv:
    - {name: KUBERNETES_SERVICE_HOST, value: %q}
    - {name: KUBERNETES_SERVICE_PORT, value: %q}`, u.Hostname(), u.Port())
	values := "image:\n  repository: " + r.registry + "/emptydir-guard\nnetworkPolicy:\n  monitoringNamespaces: [monitoring]\n" + nodeValues(c, env, env)
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := r.helm(ctx, "install", release, "oci://"+r.registry+"/charts/emptydir-guard", "--version", r.chart,
		"--plain-http", "--namespace", ns, "--values", vf)
	if err != nil {
		t.Fatalf("helm install from the registry: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := r.helm(context.Background(), "uninstall", release, "--namespace", ns); err != nil {
			t.Logf("helm uninstall: %v\n%s", err, out)
		}
	})
	// Helm pulled the chart by tag: it must be the one signed and verified, by digest.
	if want := strings.TrimPrefix(chartRef, r.registry+"/charts/emptydir-guard@"); !strings.Contains(out, want) {
		t.Errorf("helm install pulled a chart other than the signed %s:\n%s", chartRef, out)
	}
	in := &install{c: c, ns: ns, exporter: release + "-emptydir-exporter", remediator: release + "-emptydir-remediator"}
	sec, err := c.Client().CoreV1().Secrets(ns).Get(ctx, in.remediator+"-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's webhook token Secret: %v", err)
	}
	in.token = string(sec.Data["token"])
	// createPods makes the pods from the DaemonSet and Deployment Helm created.
	ds, err := c.Client().AppsV1().DaemonSets(ns).Get(ctx, in.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != r.registry+"/emptydir-guard:"+r.version {
		t.Errorf("the released chart's default image is %s, want %s/emptydir-guard:%s (v<appVersion>)", img, r.registry, r.version)
	}
	return in
}

// requirePulled checks that pods run the index the release pushed and signed, and that the
// kubelet pulled it from the registry (no copy was on the node before).
func requirePulled(ctx context.Context, t *testing.T, c *cluster.Cluster, pods []*corev1.Pod, indexRef string) {
	t.Helper()
	var pulls []string
	for _, p := range pods {
		// ImageID is set once the kubelet has created the container; under a cold make test's
		// load the remediators may still be starting, so wait for them as evictSeed does.
		p = deployWaitReady(ctx, t, c, p)
		for _, s := range p.Status.ContainerStatuses {
			if s.ImageID != indexRef {
				t.Errorf("pod %s container %s runs image %s (%s), want the released index %s", p.Name, s.Name, s.Image, s.ImageID, indexRef)
			}
		}
		for _, e := range framework.PodEvents(ctx, t, c, p, "Pulled") {
			pulls = append(pulls, p.Name+": "+e.Message)
		}
	}
	if !slices.ContainsFunc(pulls, func(m string) bool { return strings.Contains(m, "Successfully pulled") }) {
		t.Errorf("the kubelet pulled no image for the install's pods (Pulled events: %q)", pulls)
	}
}

// requirePullFails runs a pod of image on the node and waits for the kubelet to fail pulling
// it with a message containing want.
func requirePullFails(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, image, want string) {
	t.Helper()
	name := "pull-" + framework.RandSuffix()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:      c.NodeName(),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullAlways}},
		},
	}
	if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client().CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	framework.Eventually(t, 90*time.Second, time.Second, "the kubelet fails to pull "+image, func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil || s.State.Terminated != nil {
				t.Fatalf("pod of %s started (%+v): the pull should have failed", image, s.State)
			}
			if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, want) {
				return true, ""
			} else if w != nil {
				return false, w.Reason + ": " + w.Message
			}
		}
		return false, "no container status yet"
	})
}

// requireFailure fails the test unless err is set and out contains every one of wants.
func requireFailure(t *testing.T, what, out string, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded:\n%s", what, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s failed (%v) without %q in its output:\n%s", what, err, w, out)
		}
	}
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
