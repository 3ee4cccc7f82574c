// Command demo is `make demo` (hack/demo.sh): the seed scenario of docs/demo.md on a real
// single-node cluster (test/cluster) with a real Prometheus and Alertmanager, the exporter and
// the remediator (test/framework's stack), printed as a timeline while it happens. With KEEP=1
// it then keeps everything running until Ctrl-C and prints how to reach it.
//
// Everything runs inside a network namespace that the harness creates, and is removed again on
// success, failure and Ctrl-C.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// timeout bounds a run without KEEP=1, cluster start included.
const timeout = 15 * time.Minute

func main() {
	os.Exit(run())
}

func run() int {
	// Without this a closed stdout pipe (`make demo | head`) kills the program with SIGPIPE
	// before it can stop the cluster; with it, writes just fail.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// Signals stay caught until the end, so that the teardown runs to its end: a Ctrl-C reaches
	// the whole process group, and a second signal (from timeout(1), say) must not cut it short.
	keep := os.Getenv("KEEP") == "1"
	if !keep {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	defer testbin.Cleanup()
	r := &runner{}
	r.run(func() { demo(ctx, r, keep) })
	if r.Failed() {
		return 1
	}
	return 0
}

func demo(ctx context.Context, r *runner, keep bool) {
	logger := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	c := framework.StartCluster(ctx, r, framework.SharedClusterOptions(logger.Printf))
	say := func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }
	const ns = "demo"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		r.Fatal(err)
	}
	say("cluster %s is up (kube-apiserver, etcd, containerd, kubelet with localStorageCapacityIsolation=false: the kubelet enforces no sizeLimit)", c.NodeName())
	s := framework.StartStack(ctx, r, c, framework.StackOptions{})
	say("running in the cluster's network namespace %s:", c.NetnsPath())
	say("  emptydir-exporter    http://%s   (filesystem source, every %s)", framework.StackExporterAddr, framework.ExporterInterval)
	say("  emptydir-remediator  http://%s   (bearer token on /webhook, live re-check at the exporter)", framework.StackRemediatorAddr)
	say("  Prometheus           %s  (scrape/eval 5s, rules/emptydir-guard.rules.yml)", s.Mon.PrometheusURL())
	say("  Alertmanager         %s  (deploy/alertmanager/alertmanager.yml, group_wait 1s) -> webhook via a recorder at %s", s.Mon.AlertmanagerURL(), framework.StackRecorderAddr)
	am := framework.WatchAlertmanager(ctx, s.Mon)
	defer am.Stop()

	seed := framework.RunPod(ctx, r, c, c.SeedPod(ns, "empty-test1"))
	tr := framework.TrackPod(ctx, c, seed)
	defer tr.Stop()
	uid := string(seed.UID)
	say("pod %s/%s (uid %s) runs with emptyDir \"empty\" {sizeLimit: 1Mi}", ns, seed.Name, uid)
	say("writing 10 MB into it: kubectl exec %s -- dd if=/dev/zero of=/test/test.file bs=1K count=10000", seed.Name)
	w, err := framework.WriteSeed(ctx, c, seed, tr, 10000)
	if err != nil {
		r.Fatal(err)
	}
	say("t=0: dd done; du -s -B1 of the volume: %d bytes (limit 1048576)", w.Du)
	at := func(x time.Time) string { return fmt.Sprintf("t=%+6.1fs", x.Sub(w.T0).Seconds()) }

	type step struct {
		name  string
		check func() (time.Time, string, bool)
		done  bool
		at    time.Time
	}
	steps := []*step{
		{name: "metric seen", check: func() (time.Time, string, bool) {
			res, err := s.Mon.Query(ctx, fmt.Sprintf(`emptydir_used_bytes{uid=%q}[5m]`, uid))
			if err != nil {
				return time.Time{}, "", false
			}
			p, ok := framework.FirstOver(res, framework.SeedLimit)
			return p.Time, fmt.Sprintf("Prometheus scraped emptydir_used_bytes=%.0f (> emptydir_limit_bytes 1048576)", p.Value), ok
		}},
		{name: "alert fired", check: func() (time.Time, string, bool) {
			alerts, err := s.Mon.PrometheusAlerts(ctx)
			if err != nil {
				return time.Time{}, "", false
			}
			for _, a := range alerts {
				if a.Labels["alertname"] == "EmptyDirOverLimit" && string(a.Labels["uid"]) == uid && a.State == "firing" {
					return a.ActiveAt, "EmptyDirOverLimit firing: " + string(a.Annotations["summary"]), true
				}
			}
			return time.Time{}, "", false
		}},
		{name: "in Alertmanager", check: func() (time.Time, string, bool) {
			x := am.At(uid)
			return x, "Alertmanager holds the alert (route remediation=\"evict\" -> receiver emptydir-remediator)", !x.IsZero()
		}},
		{name: "webhook received", check: func() (time.Time, string, bool) {
			hs := s.Recorder.ForUID(uid)
			if len(hs) == 0 {
				return time.Time{}, "", false
			}
			auth := "without a token"
			if hs[0].Authorization == "Bearer "+s.Token {
				auth = "with the bearer token"
			}
			return hs[0].Received, "Alertmanager posted the webhook " + auth, true
		}},
		{name: "re-check", check: func() (time.Time, string, bool) {
			x, ok := framework.LogLineTime(c.LogPath(s.ExporterLog), `msg="live measurement"`, "uid="+uid)
			return x, "the remediator re-measured the volume live at the exporter (/live/namespaces/" + ns + "/pods/" + seed.Name + ")", ok
		}},
		{name: "eviction", check: func() (time.Time, string, bool) {
			x := tr.Evicted()
			return x, "the pod is evicted through the Eviction API (policy/v1)", !x.IsZero()
		}},
		{name: "remediator answer", check: func() (time.Time, string, bool) {
			for _, h := range s.Recorder.ForUID(uid) {
				if r, ok := framework.OutcomeFor(h, uid); ok {
					return h.Answered, fmt.Sprintf("remediator answered %d: outcome %s: %s", h.Code, r.Outcome, r.Message), true
				}
			}
			return time.Time{}, "", false
		}},
		{name: "event", check: func() (time.Time, string, bool) {
			list, err := c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return time.Time{}, "", false
			}
			for _, e := range list.Items {
				if string(e.InvolvedObject.UID) == uid && e.Reason == remediator.EventEvicted {
					when, res := framework.EventTime(e), ""
					if e.EventTime.IsZero() {
						// core/v1 timestamps are cut to the second: show when it was seen instead.
						when, res = time.Now(), " (seen by polling; Event timestamps have 1 s resolution)"
					}
					return when, fmt.Sprintf("Event %s %s: %s%s", e.Type, e.Reason, e.Message, res), true
				}
			}
			return time.Time{}, "", false
		}},
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		left = nil
		for _, st := range steps {
			if st.done {
				continue
			}
			if x, detail, ok := st.check(); ok {
				st.done, st.at = true, x
				say("%s  %-17s %s", at(x), st.name, detail)
			} else {
				left = append(left, st.name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		r.Fatalf("the scenario did not complete within 3 minutes (%v; still waiting for: %s; see the logs in %s/logs)", err, strings.Join(left, ", "), c.WorkDir())
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	var recap []string
	for _, st := range steps {
		recap = append(recap, fmt.Sprintf("%s %.1fs", st.name, st.at.Sub(w.T0).Seconds()))
	}
	say("in order: %s", strings.Join(recap, " -> "))
	fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
	if err == nil {
		n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"})
		say("emptydir_remediator_evictions_total{result=\"evicted\"} = %.0f", n)
	}
	say("for comparison: the kubelet at its defaults (localStorageCapacityIsolation on, volumeStatsAggPeriod 1m) took 48-50 s for the same pod in TestSeedScenario (docs/e2e.md); on this node it never acts")

	if !keep {
		say("done; tearing everything down (KEEP=1 keeps it running)")
		return
	}
	play := framework.RunPod(ctx, r, c, c.SeedPod(ns, "empty-test2"))
	nsenter := "nsenter --net=" + c.NetnsPath()
	kubectl := fmt.Sprintf("%s kubectl --kubeconfig %s", nsenter, c.KubeconfigPath())
	say("KEEP=1: everything keeps running until Ctrl-C. Prometheus and Alertmanager listen inside the network namespace:")
	say("  %s curl -s 'http://%s/api/v1/query?query=emptydir_used_bytes'", nsenter, framework.StackPrometheusAddr)
	say("  %s curl -s 'http://%s/api/v1/alerts'", nsenter, framework.StackPrometheusAddr)
	say("  %s curl -s 'http://%s/api/v2/alerts'", nsenter, framework.StackAlertmanagerAddr)
	say("  %s curl -s 'http://%s/metrics' | grep ^emptydir_remediator_", nsenter, framework.StackRemediatorAddr)
	say("  %s get pods,events -n %s", kubectl, ns)
	say("try it again with a fresh pod:")
	say("  %s exec -n %s %s -- dd if=/dev/zero of=/test/test.file bs=1K count=10000", kubectl, ns, play.Name)
	say("logs: %s/logs/", c.WorkDir())
	<-ctx.Done() // Ctrl-C: the cleanups stop these processes and the cluster
}
