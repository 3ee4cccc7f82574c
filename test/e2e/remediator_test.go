package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// remWebhook posts one firing EmptyDirOverLimit alert for pod/uid/volume to a
// remediator and returns the status and decoded answer.
func remWebhook(ctx context.Context, t *testing.T, c *cluster.Cluster, addr, token string, pod *corev1.Pod, uid, volume string) (int, remediator.WebhookResponse) {
	t.Helper()
	code, wr, raw, err := postWebhook(ctx, c, addr, token, overLimitPayload(c.NodeName(), pod.Namespace, pod.Name, uid, volume))
	if err != nil {
		t.Fatalf("POST webhook to %s: %v", addr, err)
	}
	t.Logf("webhook %s/%s uid %s → %d %s", pod.Namespace, pod.Name, uid, code, raw)
	return code, wr
}

// podState tells whether the pod instance uid still runs.
func podState(ctx context.Context, c *cluster.Cluster, ns, name, uid string) (running bool, desc string) {
	p, err := c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "gone"
	}
	if err != nil {
		return false, err.Error()
	}
	if string(p.UID) != uid {
		return false, "replaced by uid " + string(p.UID)
	}
	if p.DeletionTimestamp != nil {
		return false, "terminating"
	}
	return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
}

func fill(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod, kib int) {
	t.Helper()
	if _, stderr, err := c.ExecInPod(ctx, pod.Namespace, pod.Name, "test2", "dd", "if=/dev/zero", "of=/test/fill",
		"bs=1K", fmt.Sprintf("count=%d", kib)); err != nil {
		t.Fatalf("dd in %s: %v (%s)", pod.Name, err, stderr)
	}
}

// TestRemediatorOnRealAPIServer drives the remediator binary with webhooks against
// the real API server and kubelet, with the exporter binary's live endpoint as the
// re-check: what must be evicted is, through the Eviction API; what must not be
// (a PDB forbids it, a recreated pod, under the limit, dry-run) is not.
func TestRemediatorOnRealAPIServer(t *testing.T) {
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()
	ns := "rem-" + randSuffix()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const token = "e2e-webhook-token"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const exporterAddr, liveAddr, dryAddr = "127.0.0.1:19751", "127.0.0.1:19752", "127.0.0.1:19753"
	startInNetns(t, c, "exporter-"+ns, exporterBin, "--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--collection.interval=5s", "--web.listen-address="+exporterAddr)
	remArgs := []string{"--kubeconfig=" + c.KubeconfigPath(), "--exporter.url=http://" + exporterAddr,
		"--web.bearer-token-file=" + tokenFile, "--policy.namespace-allow=" + ns, "--log.level=debug"}
	startInNetns(t, c, "remediator-"+ns, remediatorBin, append(remArgs, "--web.listen-address="+liveAddr)...)
	startInNetns(t, c, "remediator-dry-"+ns, remediatorBin, append(remArgs, "--web.listen-address="+dryAddr, "--eviction.dry-run")...)
	for _, addr := range []string{exporterAddr + "/readyz", liveAddr + "/readyz", dryAddr + "/readyz"} {
		eventually(t, 60*time.Second, 500*time.Millisecond, addr+" ready", func() (bool, string) {
			resp, err := c.HTTPClient(nil).Get("http://" + addr)
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
	}
	live, dry := liveAddr, dryAddr

	over := runPod(ctx, t, c, c.SeedPod(ns, "over"))
	guarded := c.SeedPod(ns, "guarded")
	guarded.Labels = map[string]string{"app": "guarded"}
	guarded = runPod(ctx, t, c, guarded)
	under := runPod(ctx, t, c, c.SeedPod(ns, "under"))
	recreated := runPod(ctx, t, c, c.SeedPod(ns, "recreated"))
	for _, p := range []*corev1.Pod{over, guarded, recreated} {
		fill(ctx, t, c, p, 10000)
	}
	fill(ctx, t, c, under, 100)

	// No kube-controller-manager runs, so the budget's status never allows a
	// disruption: the API server answers the eviction with 429, as it does for a
	// budget that forbids it.
	one := intstr.FromInt32(1)
	if _, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("unauthenticated webhook is rejected", func(t *testing.T) {
		if code, _ := remWebhook(ctx, t, c, live, "", over, string(over.UID), "empty"); code != http.StatusUnauthorized {
			t.Errorf("no token: %d, want 401", code)
		}
		if code, _ := remWebhook(ctx, t, c, live, "wrong", over, string(over.UID), "empty"); code != http.StatusUnauthorized {
			t.Errorf("wrong token: %d, want 401", code)
		}
		if ok, desc := podState(ctx, c, ns, over.Name, string(over.UID)); !ok {
			t.Errorf("pod after rejected webhooks: %s", desc)
		}
	})

	t.Run("dry-run evicts nothing", func(t *testing.T) {
		code, wr := remWebhook(ctx, t, c, dry, token, over, string(over.UID), "empty")
		if code != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != remediator.OutcomeDryRun {
			t.Fatalf("dry run: %d %+v, want 200 dry_run", code, wr)
		}
		if got := wr.Alerts[0].UsedBytes; got == nil || *got < 10240000 {
			t.Errorf("dry run re-check used %v bytes, want the live ~10 MB", got)
		}
		time.Sleep(2 * time.Second)
		if ok, desc := podState(ctx, c, ns, over.Name, string(over.UID)); !ok {
			t.Errorf("pod after dry run: %s", desc)
		}
	})

	t.Run("under the limit is not evicted", func(t *testing.T) {
		code, wr := remWebhook(ctx, t, c, live, token, under, string(under.UID), "empty")
		if code != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != remediator.OutcomeSkipped ||
			wr.Alerts[0].Reason != remediator.SkipNotOverLimit {
			t.Fatalf("under limit: %d %+v, want 200 skipped/not_over_limit", code, wr)
		}
		if ok, desc := podState(ctx, c, ns, under.Name, string(under.UID)); !ok {
			t.Errorf("pod under its limit: %s", desc)
		}
	})

	t.Run("PodDisruptionBudget blocks the eviction", func(t *testing.T) {
		code, wr := remWebhook(ctx, t, c, live, token, guarded, string(guarded.UID), "empty")
		if code < 500 || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != remediator.OutcomePDBBlocked {
			t.Fatalf("PDB-covered pod: %d %+v, want 5xx pdb_blocked so Alertmanager retries", code, wr)
		}
		if ok, desc := podState(ctx, c, ns, guarded.Name, string(guarded.UID)); !ok {
			t.Errorf("PDB-covered pod: %s", desc)
		}
	})

	t.Run("stale alert for a recreated pod evicts nothing", func(t *testing.T) {
		zero := int64(0)
		if err := c.Client().CoreV1().Pods(ns).Delete(ctx, recreated.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, 500*time.Millisecond, "old pod gone", func() (bool, string) {
			_, err := c.Client().CoreV1().Pods(ns).Get(ctx, recreated.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		fresh := runPod(ctx, t, c, c.SeedPod(ns, recreated.Name))
		fill(ctx, t, c, fresh, 10000) // the new pod is over its limit too: only the UID differs
		code, wr := remWebhook(ctx, t, c, live, token, fresh, string(recreated.UID), "empty")
		if code != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != remediator.OutcomeSkipped ||
			wr.Alerts[0].Reason != remediator.SkipRecreated {
			t.Fatalf("stale alert: %d %+v, want 200 skipped/recreated", code, wr)
		}
		if ok, desc := podState(ctx, c, ns, fresh.Name, string(fresh.UID)); !ok {
			t.Errorf("recreated pod: %s", desc)
		}
	})

	t.Run("over the limit is evicted once, with an Event", func(t *testing.T) {
		code, wr := remWebhook(ctx, t, c, live, token, over, string(over.UID), "empty")
		if code != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != remediator.OutcomeEvicted {
			t.Fatalf("over limit: %d %+v, want 200 evicted", code, wr)
		}
		eventually(t, 60*time.Second, 500*time.Millisecond, "evicted pod leaves", func() (bool, string) {
			ok, desc := podState(ctx, c, ns, over.Name, string(over.UID))
			return !ok, desc
		})
		// A repeat of the same alert (Alertmanager's repeat_interval, an HA peer)
		// must not evict again.
		code, wr = remWebhook(ctx, t, c, live, token, over, string(over.UID), "empty")
		if code != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome == remediator.OutcomeEvicted {
			t.Errorf("repeated alert: %d %+v, want 200 and no second eviction", code, wr)
		}
		eventually(t, 30*time.Second, 500*time.Millisecond, "eviction Event on the pod", func() (bool, string) {
			evs, err := c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.uid=" + string(over.UID)})
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.Reason == remediator.EventEvicted && bytes.Contains([]byte(e.Message), []byte(`"empty"`)) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events, none %s naming the volume", len(evs.Items), remediator.EventEvicted)
		})
		fams, err := scrape(ctx, c, "http://"+liveAddr+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for result, want := range map[string]float64{"evicted": 1, "pdb_blocked": 1} {
			if got, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": result}); got != want {
				t.Errorf("evictions_total{result=%q} = %v, want %v", result, got, want)
			}
		}
		dryFams, err := scrape(ctx, c, "http://"+dryAddr+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := sample(dryFams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); got != 0 {
			t.Errorf("dry-run remediator counted %v evictions", got)
		}
	})

	for _, p := range []*corev1.Pod{guarded, under} {
		if ok, desc := podState(ctx, c, ns, p.Name, string(p.UID)); !ok {
			t.Errorf("%s must survive the whole test: %s", p.Name, desc)
		}
	}
}
