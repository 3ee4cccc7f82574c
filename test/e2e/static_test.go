package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// TestExporterStaticPodOnRealKubelet runs a static pod from the kubelet's staticPodPath (own
// cluster: the shared one has none) and checks that the exporter measures its volume where
// the kubelet keeps it — under the config hash — and publishes it, live too, under the
// mirror pod's API UID.
func TestExporterStaticPodOnRealKubelet(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	requireCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 4*time.Minute)
	defer cancel()
	manifests := t.TempDir()
	c := ownCluster(ctx, t, cluster.Options{
		VolumeStatsAggPeriod: 5 * time.Second,
		KubeletConfig:        map[string]any{"staticPodPath": manifests, "fileCheckFrequency": "1s"},
		Logf:                 t.Logf,
	})

	static := c.SeedPod("default", "static-seed")
	static.Spec.NodeName = ""
	static.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	b, err := yaml.Marshal(static)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "static-seed.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mirrorName := "static-seed-" + c.NodeName() // the kubelet appends its node name
	var mirror *corev1.Pod
	framework.Eventually(t, 2*time.Minute, time.Second, "mirror pod running", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		mirror = p
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	hash := mirror.Annotations[corev1.MirrorPodAnnotationKey]
	if hash == "" || hash == string(mirror.UID) {
		t.Fatalf("mirror pod %s: annotation %s=%q, UID %s: want a config hash that is not the UID",
			mirrorName, corev1.MirrorPodAnnotationKey, hash, mirror.UID)
	}
	if _, stderr, err := c.ExecInPod(ctx, "default", mirrorName, "test2", "dd", "if=/dev/zero", "of=/test/f", "bs=1K", "count=300"); err != nil {
		t.Fatalf("dd: %v (%s)", err, stderr)
	}
	dir := part.EmptyDirPath(c.KubeletRootDir(), hash, "empty")
	want := framework.DuBytes(t, dir)

	const addr = "127.0.0.1:19741"
	framework.StartInNetns(t, c, "exporter-static", bin,
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--collection.interval=2s",
		"--web.listen-address="+addr)
	labels := map[string]string{"namespace": "default", "pod": mirrorName, "uid": string(mirror.UID), "volume": "empty"}
	framework.Eventually(t, 60*time.Second, time.Second, "static pod's volume published", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, "http://"+addr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		used, ok := framework.Sample(fams, "emptydir_used_bytes", labels)
		success, _ := framework.Sample(fams, "emptydir_exporter_collection_success", nil)
		return ok && int64(used) == want && success == 1,
			fmt.Sprintf("used=%v (found %v, du of the hash directory %d), collection_success=%v", used, ok, want, success)
	})

	live := getLive(ctx, t, c, fmt.Sprintf("http://%s/live/namespaces/default/pods/%s?uid=%s&volume=empty", addr, mirrorName, mirror.UID), http.StatusOK)
	var lr liveapi.Response
	if err := json.Unmarshal(live, &lr); err != nil {
		t.Fatalf("live body %s: %v", live, err)
	}
	if lr.UID != string(mirror.UID) || len(lr.Volumes) != 1 || *lr.Volumes[0].UsedBytes != framework.DuBytes(t, dir) {
		t.Errorf("live answer %s, want uid %s and du's %d bytes", live, mirror.UID, want)
	}
}
