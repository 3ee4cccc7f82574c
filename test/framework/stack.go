package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// Addresses inside the cluster's namespace used by the scenario (other e2e tests use 1973x/1974x).
const (
	StackExporterAddr        = "127.0.0.1:19801"
	StackRemediatorAddr      = "127.0.0.1:19802"
	StackDryRunAddr          = "127.0.0.1:19803"
	StackRecorderAddr        = "127.0.0.1:19804"
	StackKubeletExporterAddr = "127.0.0.1:19805"
	StackPrometheusAddr      = "127.0.0.1:19890"
	StackAlertmanagerAddr    = "127.0.0.1:19893"

	// DryRunOnlyLabel keeps the main remediator (--policy.pod-selector) away from the pod that only
	// the dry-run remediator is asked about.
	DryRunOnlyLabel = "e2e.emptydir-guard.io/dry-run-only"
)

// ExporterInterval is the exporter's collection interval in the scenario: the scrape
// interval, so that a measurement waits at most one scrape for Prometheus (a cycle of the
// exporter costs milliseconds on a node). deploy/exporter.yaml says 10s;
// EMPTYDIR_GUARD_EXPORTER_INTERVAL=10s measures with that.
var ExporterInterval = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EMPTYDIR_GUARD_EXPORTER_INTERVAL")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}()

// Stack is the monitoring and remediation chain of the scenario, all inside the cluster's
// namespace: exporter → Prometheus (project rules) → Alertmanager (project route) →
// recording proxy → remediator → live re-check at the exporter → Eviction API.
type Stack struct {
	Mon       *monitoring.Stack
	Token     string // the remediator's webhook bearer token
	TokenFile string
	Recorder  *WebhookRecorder
	// Log names of the processes, for Cluster.LogPath.
	ExporterLog, RemediatorLog, DryRunLog string
}

// StackOptions chooses the optional parts of a Stack.
type StackOptions struct {
	// ExporterArgs are appended to the exporter's flags (e.g. --collection.open-files).
	ExporterArgs []string
	// RemediatorArgs are appended to the main remediator's flags.
	RemediatorArgs []string
	// DryRun also starts a --eviction.dry-run remediator on StackDryRunAddr (scraped as well).
	DryRun bool
	// Notify has the exporter notify the remediator directly (--remediator.url), as the chart
	// installs it by default: with a token of its own ServiceAccount for the remediator's
	// audience, which the remediator accepts alone (--notice.service-account).
	Notify bool
	// BrokenKubeletExporter also starts a second exporter with --collection.source=kubelet; on a cluster
	// with localStorageCapacityIsolation=false its Summary API fails, so the measurement
	// error metrics and their dashboard panel have data.
	BrokenKubeletExporter bool
}

// StartStack starts the Stack on c, each part inside c's network namespace, and waits until
// Prometheus has every target up; the test's cleanup stops it.
func StartStack(ctx context.Context, t TB, c *cluster.Cluster, o StackOptions) *Stack {
	t.Helper()
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	// The token: 36 bytes, the remediator refuses fewer than 32.
	s := &Stack{Token: "e2e-webhook-token-" + RandSuffix() + RandSuffix() + RandSuffix(), ExporterLog: "scn-exporter", RemediatorLog: "scn-remediator", DryRunLog: "scn-remediator-dry-run"}
	s.TokenFile = filepath.Join(c.WorkDir(), "scn-webhook-token")
	if err := os.WriteFile(s.TokenFile, []byte(s.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every opt-in family too: the stage breakdowns read each measurement's age, and the
	// dashboards are checked here with every panel filled (the operator-path test checks
	// them at the chart's defaults).
	exporterArgs := append(c.ExporterPathArgs(),
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--metric-opt-in-list=.*",
		"--collection.interval="+ExporterInterval.String(), "--web.listen-address="+StackExporterAddr)
	var noticeArgs []string
	if o.Notify {
		tokenFile, sa := noticeToken(ctx, t, c)
		exporterArgs = append(exporterArgs, "--remediator.url=http://"+StackRemediatorAddr, "--remediator.token-file="+tokenFile)
		noticeArgs = []string{"--notice.service-account=" + sa}
	}
	StartInNetns(t, c, s.ExporterLog, exporterBin, append(exporterArgs, o.ExporterArgs...)...)
	exporterTargets := []string{StackExporterAddr}
	if o.BrokenKubeletExporter {
		StartInNetns(t, c, "scn-exporter-kubelet", exporterBin,
			"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--collection.source=kubelet",
			"--kubelet.via-apiserver", "--collection.interval="+ExporterInterval.String(),
			"--web.listen-address="+StackKubeletExporterAddr)
		exporterTargets = append(exporterTargets, StackKubeletExporterAddr)
	}
	common := []string{"--kubeconfig=" + c.KubeconfigPath(), "--web.bearer-token-file=" + s.TokenFile,
		"--exporter.url=http://" + StackExporterAddr, "--log.level=debug"}
	StartInNetns(t, c, s.RemediatorLog, remediatorBin, append(append(append(slices.Clone(common), "--web.listen-address="+StackRemediatorAddr), noticeArgs...), o.RemediatorArgs...)...)
	remediatorTargets := []string{StackRemediatorAddr}
	if o.DryRun {
		StartInNetns(t, c, s.DryRunLog, remediatorBin, append(common, "--web.listen-address="+StackDryRunAddr, "--eviction.dry-run")...)
		remediatorTargets = append(remediatorTargets, StackDryRunAddr)
	}

	var err error
	s.Recorder, err = NewWebhookRecorder(c, StackRecorderAddr, "http://"+StackRemediatorAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Recorder.Close)

	s.Mon, err = monitoring.Start(ctx, c, monitoring.Options{
		RulesFiles:         []string{RepoPath("rules/emptydir-guard.rules.yml")},
		AlertmanagerConfig: RepoPath("deploy/alertmanager/alertmanager.yml"),
		ExporterTargets:    exporterTargets,
		RemediatorTargets:  remediatorTargets,
		WebhookURL:         "http://" + StackRecorderAddr + "/webhook",
		WebhookToken:       s.Token,
		PrometheusAddr:     StackPrometheusAddr,
		AlertmanagerAddr:   StackAlertmanagerAddr,
		ScrapeInterval:     5 * time.Second,
		GroupWait:          time.Second,
		GroupInterval:      5 * time.Second,
		RepeatInterval:     10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Mon.Stop()
		if t.Failed() {
			for _, n := range []string{"prometheus", "alertmanager"} {
				if b, err := os.ReadFile(c.LogPath(n)); err == nil {
					t.Logf("--- %s log (Tail) ---\n%s", n, Tail(string(b), 3000))
				}
			}
		}
	})
	// Every target up before the scenario starts, so the timings do not include start-up:
	// each exporter twice (its trigger series and the rest, PrometheusConfig's two jobs).
	want := 2*len(exporterTargets) + len(remediatorTargets)
	Eventually(t, 60*time.Second, time.Second, "all Scrape targets up", func() (bool, string) {
		res, err := s.Mon.Query(ctx, `up == 1`)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == want, fmt.Sprintf("%d of %d targets up", len(res), want)
	})
	return s
}

// noticeToken creates the exporter's ServiceAccount, as the chart names it, and writes a token of
// it for the remediator's audience where the kubelet would project it: the same TokenRequest,
// made by the test instead of the kubelet, as the exporter runs outside a pod. It returns the
// file and the ServiceAccount as --notice.service-account takes it.
func noticeToken(ctx context.Context, t TB, c *cluster.Cluster) (file, serviceAccount string) {
	t.Helper()
	const ns, name = "scn-notices", "emptydir-exporter"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := c.Client().CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	expiration := int64((6 * time.Hour).Seconds())
	tr, err := c.Client().CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{noticeapi.Audience}, ExpirationSeconds: &expiration}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/%s for the remediator: %v", ns, name, err)
	}
	file = filepath.Join(c.WorkDir(), "scn-notice-token")
	if err := os.WriteFile(file, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, ns + "/" + name
}
