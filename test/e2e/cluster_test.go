package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/test/framework"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClusterSeedPod replays the seed scenario (docs/design.md) on the shared cluster: with
// LocalStorageCapacityIsolation=false the kubelet does not enforce sizeLimit, so 10 MB in a
// 1Mi emptyDir stays, and only the filesystem shows it.
func TestClusterSeedPod(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 5*time.Minute)
	defer cancel()

	ns := framework.Namespace(ctx, t, c, "smoke")
	pod := c.SeedPod(ns, "empty-test1")
	created, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create seed pod: %v", err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client().CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	running, err := c.WaitForPodPhase(wctx, ns, pod.Name, corev1.PodRunning)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s/%s Running, uid %s", ns, pod.Name, running.UID)

	_, stderr, err := c.ExecInPod(ctx, ns, pod.Name, "test2", "dd", "if=/dev/zero", "of=/test/test.file", "bs=1K", "count=10000")
	if err != nil {
		t.Fatalf("dd: %v", err)
	}
	if !strings.Contains(stderr, "10000+0 records out") {
		t.Errorf("dd stderr = %q, want 10000 records out", stderr)
	}

	vol := filepath.Join(c.KubeletRootDir(), "pods", string(created.UID), "volumes", "kubernetes.io~empty-dir", "empty")
	if fi, err := os.Stat(vol); err != nil || !fi.IsDir() {
		t.Fatalf("volume directory %s: %v", vol, err)
	}
	used := framework.DuBytes(t, vol)
	if used < 10240000 {
		t.Errorf("du -s -B1 %s = %d, want >= 10240000", vol, used)
	}
	t.Logf("volume %s uses %d bytes (limit 1Mi)", vol, used)

	// The eviction manager runs every 10 s and volume stats refresh every 5 s here; with
	// isolation off nothing may happen.
	time.Sleep(15 * time.Second)
	after, err := c.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.Phase != corev1.PodRunning || after.UID != created.UID {
		t.Errorf("after 15 s pod phase=%s reason=%q uid=%s, want Running with uid %s",
			after.Status.Phase, after.Status.Reason, after.UID, created.UID)
	}
}

// TestClusterKubeletAPI checks both paths the exporter may use to reach the kubelet from the
// test process: directly (bearer token, webhook authn/authz, serving cert signed by the test
// CA) and through the API server's node proxy. With LocalStorageCapacityIsolation=false only
// the cpu-and-memory summary works, which is itself worth pinning.
func TestClusterKubeletAPI(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, time.Minute)
	defer cancel()

	hc := c.HTTPClient(&tls.Config{RootCAs: c.CAPool()})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.KubeletURL()+"/stats/summary?only_cpu_and_memory=true", nil)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken())
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("kubelet direct: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.NodeName()) {
		t.Fatalf("kubelet direct /stats/summary: %d %.300s", resp.StatusCode, body)
	}

	raw, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", c.NodeName(), "proxy", "stats", "summary").
		Param("only_cpu_and_memory", "true").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), c.NodeName()) {
		t.Fatalf("node proxy /stats/summary: %v %.300s", err, raw)
	}

	out, err := c.Kubectl(ctx, "get", "node", c.NodeName(), "-o", "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != c.NodeIP() {
		t.Errorf("node InternalIP = %q, want %q", got, c.NodeIP())
	}
}
