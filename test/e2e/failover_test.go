package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// replica is one remediator process of a leader-elected pair.
type replica struct {
	name, addr string
	cmd        *exec.Cmd
}

// startReplicas starts two remediator processes competing for the Lease lease in ns, sharing
// the ledger ConfigMap lease+"-ledger", and waits until one leads and the other knows it.
func startReplicas(t *testing.T, c *cluster.Cluster, bin, ns, lease string, ports [2]int, args ...string) (leader, standby *replica) {
	t.Helper()
	timing := []string{"--leader-elect.lease-duration=4s", "--leader-elect.renew-deadline=3s", "--leader-elect.retry-period=500ms"}
	leader, reps := startReplicaSet(t, c, bin, ns, lease, ports[:], append(timing, args...)...)
	for _, r := range reps {
		if r != leader {
			standby = r
		}
	}
	return leader, standby
}

// startReplicaSet starts one remediator process per port, named lease+"-a", "-b", …,
// competing for the Lease lease in ns and sharing the ledger ConfigMap lease+"-ledger", and
// waits until one leads; it returns the leader and all replicas.
func startReplicaSet(t *testing.T, c *cluster.Cluster, bin, ns, lease string, ports []int, args ...string) (leader *replica, reps []*replica) {
	t.Helper()
	for i, port := range ports {
		id := fmt.Sprintf("%s-%c", lease, 'a'+i)
		r := &replica{name: id, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		all := append([]string{"--web.listen-address=" + r.addr, "--leader-elect.enabled", "--leader-elect.lease-namespace=" + ns,
			"--leader-elect.lease-name=" + lease, "--leader-elect.identity=" + id, "--ledger.configmap=" + lease + "-ledger"}, args...)
		r.cmd = c.Command(context.Background(), bin, all...)
		if err := c.StartProcess(id, r.cmd); err != nil {
			t.Fatalf("starting %s: %v", id, err)
		}
		t.Cleanup(func() {
			_ = r.cmd.Process.Kill()
			if t.Failed() {
				if b, err := os.ReadFile(c.LogPath(id)); err == nil {
					t.Logf("--- %s log (framework.Tail) ---\n%s", id, framework.Tail(string(b), 3000))
				}
			}
		})
		reps = append(reps, r)
	}
	return waitLeader(t, c, reps...), reps
}

// waitLeader waits until exactly one of reps says it leads and returns it.
func waitLeader(t *testing.T, c *cluster.Cluster, reps ...*replica) *replica {
	t.Helper()
	var leader *replica
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, "one replica leads", func() (bool, string) {
		leader = nil
		var states []string
		for _, r := range reps {
			state := readyState(c, r.addr)
			states = append(states, r.name+": "+state)
			if strings.Contains(state, "leader") {
				if leader != nil {
					return false, "two leaders: " + strings.Join(states, ", ")
				}
				leader = r
			}
		}
		return leader != nil, strings.Join(states, ", ")
	})
	return leader
}

func readyState(c *cluster.Cluster, addr string) string {
	resp, err := c.HTTPClient(nil).Get("http://" + addr + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// stop signals the process and waits until it no longer answers.
func (r *replica) stop(t *testing.T, c *cluster.Cluster, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s: %v", r.name, err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, r.name+" stops", func() (bool, string) {
		resp, err := c.HTTPClient(nil).Get("http://" + r.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil, "still answers"
	})
}

// ledgerEntries returns the outcomes per pod UID stored in the ledger ConfigMap.
func ledgerEntries(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string) map[string]string {
	t.Helper()
	cm, err := c.Client().CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ledger ConfigMap: %v", err)
	}
	var st struct {
		Entries []struct{ UID, Outcome string } `json:"entries"`
	}
	if err := json.Unmarshal([]byte(cm.Data["ledger.json"]), &st); err != nil {
		t.Fatalf("ledger ConfigMap %s: %v", cm.Data["ledger.json"], err)
	}
	out := map[string]string{}
	for _, e := range st.Entries {
		out[e.UID] = e.Outcome
	}
	return out
}

// TestRemediatorFailover: the caps and the cooldown hold across a leader change on the real
// API server, because the ledger lives in a ConfigMap: the leader evicts up to the cap and
// dies (SIGKILL, no Lease release), the standby takes over and refuses the next eviction
// (cap_global); a dry-run leader handles a pod and hands over gracefully (SIGTERM), the new
// leader refuses it (cooldown). With the old in-memory ledger the new leader evicted.
func TestRemediatorFailover(t *testing.T) {
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 4*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "failover")
	const token = "e2e-failover-webhook-token-0123456789" // the remediator wants >= 32 bytes
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const exporterAddr = "127.0.0.1:19761"
	framework.StartInNetns(t, c, "exporter-"+ns, exporterBin, "--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--collection.interval=5s", "--web.listen-address="+exporterAddr)
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, "exporter ready", func() (bool, string) {
		return strings.HasPrefix(readyState(c, exporterAddr), "200"), readyState(c, exporterAddr)
	})
	common := []string{"--kubeconfig=" + c.KubeconfigPath(), "--exporter.url=http://" + exporterAddr,
		"--web.bearer-token-file=" + tokenFile, "--policy.namespace-allow=" + ns, "--log.level=debug"}

	var pods []*corev1.Pod
	for i := range 4 {
		p := framework.RunPod(ctx, t, c, c.SeedPod(ns, fmt.Sprintf("over-%d", i)))
		framework.Fill(ctx, t, c, p, 2000)
		pods = append(pods, p)
	}
	deliver := func(r *replica, p *corev1.Pod) remediator.AlertResult {
		t.Helper()
		code, wr := framework.AlertWebhook(ctx, t, c, r.addr, token, p, string(p.UID), "empty")
		if len(wr.Alerts) != 1 {
			t.Fatalf("%s: %d, %+v", r.name, code, wr)
		}
		return wr.Alerts[0]
	}

	t.Run("caps hold after the leader crashes", func(t *testing.T) {
		leader, standby := startReplicas(t, c, remediatorBin, ns, "caps", [2]int{19762, 19763},
			append(common, "--eviction.max-global=2", "--eviction.cap-window=10m")...)
		for _, p := range pods[:2] {
			if res := deliver(leader, p); res.Outcome != remediator.OutcomeEvicted {
				t.Fatalf("leader %s, pod %s: %s/%s %q, want evicted", leader.name, p.Name, res.Outcome, res.Reason, res.Message)
			}
		}
		leader.stop(t, c, syscall.SIGKILL)
		if got := waitLeader(t, c, standby); got != standby {
			t.Fatalf("the standby did not take over")
		}
		res := deliver(standby, pods[2])
		if res.Outcome != remediator.OutcomeSkipped || res.Reason != remediator.SkipCapGlobal {
			t.Errorf("new leader %s, pod %s: %s/%s %q, want skipped/cap_global", standby.name, pods[2].Name, res.Outcome, res.Reason, res.Message)
		}
		if ok, desc := framework.PodState(ctx, c, ns, pods[2].Name, string(pods[2].UID)); !ok {
			t.Errorf("%s over the cap: %s, want running", pods[2].Name, desc)
		}
		got := ledgerEntries(ctx, t, c, ns, "caps-ledger")
		for _, p := range pods[:2] {
			if got[string(p.UID)] != string(remediator.OutcomeEvicted) {
				t.Errorf("ledger %v: %s not recorded as evicted", got, p.Name)
			}
		}
	})

	t.Run("cooldown holds after a graceful handover", func(t *testing.T) {
		leader, standby := startReplicas(t, c, remediatorBin, ns, "cooldown", [2]int{19764, 19765},
			append(common, "--eviction.dry-run", "--eviction.cooldown=10m")...)
		p := pods[3]
		if res := deliver(leader, p); res.Outcome != remediator.OutcomeDryRun {
			t.Fatalf("leader %s: %s/%s %q, want dry_run", leader.name, res.Outcome, res.Reason, res.Message)
		}
		leader.stop(t, c, syscall.SIGTERM)
		if got := waitLeader(t, c, standby); got != standby {
			t.Fatalf("the standby did not take over")
		}
		res := deliver(standby, p)
		if res.Outcome != remediator.OutcomeSkipped || res.Reason != remediator.SkipCooldown {
			t.Errorf("new leader %s: %s/%s %q, want skipped/cooldown", standby.name, res.Outcome, res.Reason, res.Message)
		}
		// The graceful stop released the Lease: the standby did not wait out its duration.
		l, err := c.Client().CoordinationV1().Leases(ns).Get(ctx, "cooldown", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != standby.name || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions < 1 {
			t.Errorf("Lease %+v, want held by %s after a transition", l.Spec, standby.name)
		}
	})
}

// checkStandbyForwards sends deliveries over one kept-alive connection to the standby pod
// and to the leader pod (as a Service may pick either) and checks that the leader handled
// every one; it logs the latency the standby's hop adds. The payload names a pod that does
// not exist, so each delivery is a full, harmless round (pod GET, outcome gone).
func checkStandbyForwards(ctx context.Context, t *testing.T, c *cluster.Cluster, leader, standby *corev1.Pod, token string) {
	t.Helper()
	const n = 20
	body := framework.OverLimitPayload(c.NodeName(), "default", "no-such-pod", "00000000-0000-0000-0000-000000000000", "empty")
	client := c.HTTPClient(nil)
	durations := map[string][]time.Duration{}
	for i := range 2 * n {
		target := leader
		if i%2 == 1 {
			target = standby
		}
		start := time.Now()
		r, err := framework.PostWebhookWith(ctx, client, deployRemAddr(target), token, body)
		if err != nil {
			t.Fatalf("delivery %d to %s: %v", i, target.Name, err)
		}
		durations[target.Name] = append(durations[target.Name], time.Since(start))
		if r.Code != http.StatusOK || r.Header.Get(remediator.HeaderHandledBy) != leader.Name {
			t.Errorf("delivery %d to %s: %d handled by %q: %s; want 200 handled by the leader %s", i, target.Name,
				r.Code, r.Header.Get(remediator.HeaderHandledBy), r.Raw, leader.Name)
		}
	}
	med := func(ds []time.Duration) (time.Duration, time.Duration) {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2], s[len(s)-1]
	}
	lm, lx := med(durations[leader.Name])
	sm, sx := med(durations[standby.Name])
	t.Logf("%d deliveries each: to the leader median %s max %s; through the standby median %s max %s; added median %s",
		n, lm, lx, sm, sx, sm-lm)
}
