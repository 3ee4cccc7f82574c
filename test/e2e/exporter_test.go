package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/crypto/bcrypt"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// memoryPod mounts a medium: Memory emptyDir with sizeLimit 64Mi at /mem.
func memoryPod(c *cluster.Cluster, ns, name string) *corev1.Pod {
	p := c.SeedPod(ns, name)
	limit := resource.MustParse("64Mi")
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "mem", MountPath: "/mem"})
	return p
}

// TestExporterFilesystemSourceOnRealKubelet runs the exporter binary against a real
// API server and kubelet (localStorageCapacityIsolation off, so the kubelet's own
// Summary API is broken and enforces nothing) and checks its numbers against du.
func TestExporterFilesystemSourceOnRealKubelet(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 6*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "exp")

	const addr = "127.0.0.1:19731"
	framework.StartInNetns(t, c, "exporter-fs-"+ns, bin,
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--collection.interval=2s",
		"--metric-opt-in-list=emptydir_capacity_bytes,emptydir_inodes_used,emptydir_measurement_age_seconds",
		"--web.listen-address="+addr, "--log.level=debug")
	metricsURL := "http://" + addr + "/metrics"

	seed := framework.RunPod(ctx, t, c, c.SeedPod(ns, "empty-test1"))
	mem := framework.RunPod(ctx, t, c, memoryPod(c, ns, "mem-test"))
	if _, stderr, err := c.ExecInPod(ctx, ns, seed.Name, "test2", "dd", "if=/dev/zero", "of=/test/test.file", "bs=1K", "count=10000"); err != nil {
		t.Fatalf("dd: %v (%s)", err, stderr)
	}
	if _, stderr, err := c.ExecInPod(ctx, ns, mem.Name, "test2", "dd", "if=/dev/zero", "of=/mem/f", "bs=1K", "count=2000"); err != nil {
		t.Fatalf("dd into memory volume: %v (%s)", err, stderr)
	}
	seedDir := part.EmptyDirPath(c.KubeletRootDir(), string(seed.UID), "empty")
	memDir := part.EmptyDirPath(c.KubeletRootDir(), string(mem.UID), "mem")
	wantSeed, wantMem := framework.DuBytes(t, seedDir), framework.DuBytes(t, memDir)
	if wantSeed < 10240000 {
		t.Fatalf("du says %d bytes after writing 10240000", wantSeed)
	}

	seedLabels := map[string]string{"namespace": ns, "pod": seed.Name, "uid": string(seed.UID), "volume": "empty",
		"medium": "disk", "node": c.NodeName()}
	memLabels := map[string]string{"namespace": ns, "pod": mem.Name, "uid": string(mem.UID), "volume": "mem", "medium": "memory"}
	framework.Eventually(t, 60*time.Second, time.Second, "exporter reports du's numbers", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, metricsURL)
		if err != nil {
			return false, err.Error()
		}
		used, ok1 := framework.Sample(fams, "emptydir_used_bytes", seedLabels)
		memUsed, ok2 := framework.Sample(fams, "emptydir_used_bytes", memLabels)
		return ok1 && ok2 && int64(used) == wantSeed && int64(memUsed) == wantMem,
			fmt.Sprintf("seed used=%v (found %v, du %d), mem used=%v (found %v, du %d)", used, ok1, wantSeed, memUsed, ok2, wantMem)
	})

	fams, err := framework.Scrape(ctx, c, metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"emptydir_limit_bytes", seedLabels, 1 << 20},
		{"emptydir_limit_bytes", memLabels, 64 << 20},
		{"emptydir_capacity_bytes", memLabels, 64 << 20}, // the tmpfs is sized by sizeLimit
		{"emptydir_inodes_used", seedLabels, 2},          // the directory and test.file
		{"emptydir_unreadable_entries", seedLabels, 0},
		{"emptydir_exporter_collection_success", map[string]string{"source": "filesystem"}, 1},
		{"emptydir_exporter_pod_informer_synced", nil, 1},
	}
	for _, ck := range checks {
		got, ok := framework.Sample(fams, ck.name, ck.labels)
		if !ok || got != ck.want {
			t.Errorf("%s%v = %v (found %v), want %v", ck.name, ck.labels, got, ok, ck.want)
		}
	}
	if age, ok := framework.Sample(fams, "emptydir_measurement_age_seconds", seedLabels); !ok || age > 10 {
		t.Errorf("measurement age %v (found %v), want at most a few seconds with a 2s interval", age, ok)
	}
	if n := len(fams["emptydir_used_bytes"].GetMetric()); n < 2 {
		t.Errorf("%d used series, want one per volume of the two pods", n)
	}

	// The live endpoint measures now: write more and read it back at once.
	if _, stderr, err := c.ExecInPod(ctx, ns, seed.Name, "test2", "dd", "if=/dev/zero", "of=/test/more", "bs=1K", "count=3000"); err != nil {
		t.Fatalf("dd more: %v (%s)", err, stderr)
	}
	live := getLive(ctx, t, c, fmt.Sprintf("http://%s/live/namespaces/%s/pods/%s?uid=%s&volume=empty", addr, ns, seed.Name, seed.UID), http.StatusOK)
	var lr liveapi.Response
	if err := json.Unmarshal(live, &lr); err != nil {
		t.Fatalf("live body %s: %v", live, err)
	}
	if want := framework.DuBytes(t, seedDir); len(lr.Volumes) != 1 || *lr.Volumes[0].UsedBytes != want ||
		lr.Volumes[0].LimitBytes == nil || *lr.Volumes[0].LimitBytes != 1<<20 {
		t.Errorf("live answer %s, want usedBytes %d (du) and limitBytes 1048576", live, want)
	}
	if time.Since(lr.MeasuredAt) > 30*time.Second {
		t.Errorf("live measuredAt %s is not from the request", lr.MeasuredAt)
	}
	getLive(ctx, t, c, fmt.Sprintf("http://%s/live/namespaces/%s/pods/%s?uid=00000000-0000-0000-0000-000000000000", addr, ns, seed.Name), http.StatusNotFound)
	getLive(ctx, t, c, fmt.Sprintf("http://%s/live/namespaces/%s/pods/%s?uid=not-a-uid", addr, ns, seed.Name), http.StatusBadRequest)

	// A deleted pod's series vanish.
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, mem.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, time.Second, "deleted pod's series vanish", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, metricsURL)
		if err != nil {
			return false, err.Error()
		}
		_, found := framework.Sample(fams, "emptydir_used_bytes", memLabels)
		return !found, "still published"
	})
}

// TestExporterKubeletSourceWithoutIsolation: with localStorageCapacityIsolation off
// the kubelet's Summary API fails; the exporter must say so in its error metrics,
// not crash and not publish numbers.
func TestExporterKubeletSourceWithoutIsolation(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 4*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "expk")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(c.AdminToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	const direct, proxied = "127.0.0.1:19741", "127.0.0.1:19742"
	framework.StartInNetns(t, c, "exporter-kubelet-"+ns, bin,
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--collection.source=kubelet",
		"--kubelet.url="+c.KubeletURL(), "--kubelet.ca-file="+c.CAFile(), "--kubelet.token-file="+tokenFile,
		"--collection.interval=2s", "--web.listen-address="+direct)
	framework.StartInNetns(t, c, "exporter-proxy-"+ns, bin,
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--collection.source=kubelet",
		"--kubelet.via-apiserver", "--collection.interval=2s", "--web.listen-address="+proxied)

	seed := framework.RunPod(ctx, t, c, c.SeedPod(ns, "empty-test1"))
	for _, addr := range []string{direct, proxied} {
		framework.Eventually(t, 60*time.Second, time.Second, addr+" reports the kubelet error", func() (bool, string) {
			fams, err := framework.Scrape(ctx, c, "http://"+addr+"/metrics")
			if err != nil {
				return false, err.Error()
			}
			errs, _ := framework.Sample(fams, "emptydir_exporter_measurement_errors_total", map[string]string{"source": "kubelet", "reason": "kubelet_error"})
			ok, _ := framework.Sample(fams, "emptydir_exporter_collection_success", map[string]string{"source": "kubelet"})
			_, published := framework.Sample(fams, "emptydir_used_bytes", map[string]string{"uid": string(seed.UID)})
			return errs > 0 && ok == 0 && !published,
				fmt.Sprintf("kubelet_error=%v success=%v published=%v", errs, ok, published)
		})
	}
}

func getLive(ctx context.Context, t *testing.T, c *cluster.Cluster, url string, wantCode int) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s: %s %s, want %d", url, resp.Status, body, wantCode)
	}
	return body
}

// TestExporterWebConfigProtectsEndpoints starts the exporter with an
// exporter-toolkit web config holding basic auth: metrics and the live endpoint
// answer 401 without the password.
func TestExporterWebConfigProtectsEndpoints(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 3*time.Minute)
	defer cancel()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const addr = "127.0.0.1:19761"
	framework.StartInNetns(t, c, "exporter-auth", bin, "--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--web.listen-address="+addr, "--web.config.file="+webConfig)

	get := func(path, user, pass string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.HTTPClient(nil).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, "exporter serving", func() (bool, string) {
		code, err := get("/metrics", "prometheus", "s3cret")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, err)
	})
	for _, tc := range []struct {
		path, user, pass string
		want             int
	}{
		{"/metrics", "", "", http.StatusUnauthorized},
		{"/metrics", "prometheus", "wrong", http.StatusUnauthorized},
		{"/live/namespaces/default/pods/x?uid=00000000-0000-0000-0000-000000000000", "", "", http.StatusUnauthorized},
		{"/live/namespaces/default/pods/x?uid=00000000-0000-0000-0000-000000000000", "prometheus", "s3cret", http.StatusNotFound},
	} {
		if code, err := get(tc.path, tc.user, tc.pass); err != nil || code != tc.want {
			t.Errorf("GET %s as %q: %d %v, want %d", tc.path, tc.user, code, err, tc.want)
		}
	}
}
