package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

// clearEnv keeps the environment of the test run out of the flags.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"NODE_NAME", "KUBECONFIG", "POD_NAME", "POD_NAMESPACE", "POD_UID"} {
		t.Setenv(k, "")
	}
}

// parse fills a config from args as the command does.
func parse(t *testing.T, args ...string) *config {
	t.Helper()
	cfg := defaultConfig()
	if _, err := newApp(&cfg).Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return &cfg
}

func TestParseDefaults(t *testing.T) {
	clearEnv(t)
	cfg := parse(t, "--node.name=node-1")

	checks := []struct {
		name      string
		got, want any
	}{
		{"--web.listen-address", (*cfg.web.WebListenAddresses)[0], ":9731"},
		{"--web.config.file", *cfg.web.WebConfigFile, ""},
		{"--web.telemetry-path", cfg.telemetryPath, "/metrics"},
		{"--node.name", cfg.exporter.NodeName, "node-1"},
		{"--kubeconfig", cfg.kube.Kubeconfig, ""},
		{"--kube-api.qps", cfg.kube.QPS, float32(5)},
		{"--kube-api.burst", cfg.kube.Burst, 10},
		{"--collection.source", cfg.source, sourceFilesystem},
		{"--collection.interval", cfg.exporter.Interval, 10 * time.Second},
		{"--collection.align-to-scrapes", cfg.exporter.AlignToScrapes, true},
		{"--kubelet.root-dir", cfg.fs.KubeletRootDir, "/var/lib/kubelet"},
		{"--fs.walk-concurrency", cfg.fs.WalkConcurrency, 4},
		{"--fs.project-quota", cfg.fs.ProjectQuotas, true},
		{"--collection.concurrency", cfg.exporter.VolumeConcurrency, 2},
		{"--collection.volume-timeout", cfg.exporter.VolumeTimeout, time.Minute},
		{"--collection.unlimited-interval", cfg.exporter.UnlimitedInterval, time.Minute},
		{"--collection.cpu-budget", cfg.exporter.CPUBudget, 0.05},
		{"--kubelet.url", cfg.kubeletURL, ""},
		{"--kubelet.via-apiserver", cfg.kubeletViaAPIServer, false},
		{"--kubelet.ca-file", cfg.kubeletCAFile, ""},
		{"--kubelet.token-file", cfg.kubeletTokenFile, "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{"--kubelet.insecure-skip-tls-verify", cfg.kubeletInsecure, false},
		{"--kubelet.timeout", cfg.kubeletTimeout, 10 * time.Second},
		{"--live.concurrency", cfg.exporter.LiveConcurrency, 4},
		{"--live.max-wait", cfg.exporter.LiveMaxWait, 10 * time.Second},
		{"--collection.change-signal", cfg.changeSignal, true},
		{"--collection.change-signal.skip-unchanged", cfg.exporter.SkipUnchanged, false},
		{"--collection.change-signal.runtime-classes", cfg.changeSignalRuntimeClasses, ""},
		{"--cgroup.mount", cfg.cgroup.Mount, "/sys/fs/cgroup"},
		{"--cgroup.root", cfg.cgroup.Root, "auto"},
		{"--cgroup.driver", string(cfg.cgroup.Driver), "auto"},
		{"--collection.open-files", cfg.openFiles, false},
		{"--crio.storage-root", cfg.fs.Layers.CRIOStorageRoot, ""},
		{"--docker.root", cfg.fs.Layers.DockerRoot, ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s defaults to %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("defaults with a node name must validate: %v", err)
	}
}

func TestParseNodeNameFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("NODE_NAME", "node-from-downward-api")

	if got := parse(t).exporter.NodeName; got != "node-from-downward-api" {
		t.Errorf("nodeName = %q, want the NODE_NAME env value", got)
	}
	if got := parse(t, "--node.name=explicit").exporter.NodeName; got != "explicit" {
		t.Errorf("nodeName = %q, want the flag to win over NODE_NAME", got)
	}
	if err := parse(t).validate(); err != nil {
		t.Errorf("NODE_NAME must satisfy the node name rule: %v", err)
	}
}

func TestValidate(t *testing.T) {
	kubelet := []string{"--node.name=node-1", "--collection.source=kubelet"}
	tests := []struct {
		name string
		args []string
		// want lists the flags the error must name; empty means valid.
		want []string
	}{
		{"good filesystem config", []string{"--node.name=node-1", "--kubelet.root-dir=/host/var/lib/kubelet",
			"--fs.walk-concurrency=64", "--collection.interval=1s", "--collection.concurrency=16",
			"--collection.volume-timeout=1s", "--collection.unlimited-interval=1s", "--collection.cpu-budget=1024"}, nil},
		{"no CPU budget", []string{"--node.name=node-1", "--collection.cpu-budget=0"}, nil},
		{"unlimited interval equal to the interval", []string{"--node.name=node-1", "--collection.interval=30s",
			"--collection.unlimited-interval=30s"}, nil},
		{"good kubelet config", append(kubelet, "--kubelet.url=https://10.0.0.5:10250",
			"--kubelet.ca-file=/etc/kubelet-ca.crt"), nil},
		{"good kubelet config, insecure", append(kubelet, "--kubelet.url=https://10.0.0.5:10250",
			"--kubelet.insecure-skip-tls-verify"), nil},
		{"good kubelet config via API server", append(kubelet, "--kubelet.via-apiserver"), nil},
		{"relative root dir ignored for source kubelet", append(kubelet, "--kubelet.via-apiserver",
			"--kubelet.root-dir=relative"), nil},
		{"source filesystem with the kubelet for unlocated layers", []string{"--node.name=n", "--kubelet.url=https://10.0.0.5:10250"}, nil},
		{"source filesystem: the kubelet's flags checked when it is named", []string{"--node.name=n", "--kubelet.url=ftp://x",
			"--kubelet.timeout=0s"}, []string{"--kubelet.url", "--kubelet.timeout"}},
		{"source filesystem: the kubelet's flags unchecked when it is not", []string{"--node.name=n", "--kubelet.timeout=0s"}, nil},
		{"namespaces", []string{"--node.name=n", "--namespaces=shop,web", "--namespaces-denylist=kube-system"}, nil},
		{"bad namespace", []string{"--node.name=n", "--namespaces=shop,Web_1"}, []string{"--namespaces", "Web_1"}},
		{"bad denied namespace", []string{"--node.name=n", "--namespaces-denylist=a,,b"}, []string{"--namespaces-denylist", `""`}},
		{"metric allowlist", []string{"--node.name=n", "--metric-allowlist=emptydir_used_bytes,emptydir_.*_limit_bytes"}, nil},
		{"metric denylist", []string{"--node.name=n", "--metric-denylist=go_.*,process_.*"}, nil},
		{"metric allowlist and denylist", []string{"--node.name=n", "--metric-allowlist=a", "--metric-denylist=b"},
			[]string{"--metric-allowlist", "mutually exclusive"}},
		{"metric denylist with a bad expression", []string{"--node.name=n", "--metric-denylist=go_(.*"}, []string{"--metric-denylist", "go_(.*"}},
		{"metric opt-in list", []string{"--node.name=n", "--metric-opt-in-list=emptydir_inodes_used,emptydir_.*_part_bytes"}, nil},
		{"metric opt-in list naming a family published by default", []string{"--node.name=n",
			"--metric-opt-in-list=emptydir_measurement_incomplete,emptydir_inodes_used"},
			[]string{"--metric-opt-in-list", `"emptydir_measurement_incomplete" matches none of the opt-in families`}},
		{"metric opt-in list naming no opt-in family", []string{"--node.name=n", "--metric-opt-in-list=emptydir_used_bytes"},
			[]string{"--metric-opt-in-list", `"emptydir_used_bytes" matches none of the opt-in families`}},

		{"change signal", []string{"--node.name=n", "--collection.change-signal", "--cgroup.mount=/host/sys/fs/cgroup",
			"--cgroup.root=/edg", "--cgroup.driver=systemd"}, nil},
		{"change signal skipping unchanged parts", []string{"--node.name=n", "--collection.change-signal.skip-unchanged"}, nil},
		{"change signal on by default: cgroup flags checked", []string{"--node.name=n", "--cgroup.driver=runc"},
			[]string{"--cgroup.driver", `"runc"`}},
		{"cgroup flags unchecked without the change signal", []string{"--node.name=n", "--no-collection.change-signal",
			"--cgroup.driver=runc", "--cgroup.mount=x"}, nil},
		{"skip-unchanged without the change signal", []string{"--node.name=n", "--no-collection.change-signal",
			"--collection.change-signal.skip-unchanged"}, []string{"--collection.change-signal.skip-unchanged", "needs --collection.change-signal"}},
		{"change signal: runc-like RuntimeClasses", []string{"--node.name=n", "--collection.change-signal.runtime-classes=runc,crun,nvidia.example.com"}, nil},
		{"change signal: a RuntimeClass name the API refuses", []string{"--node.name=n", "--collection.change-signal.runtime-classes=runc,Kata_QEMU"},
			[]string{"--collection.change-signal.runtime-classes", `"Kata_QEMU"`}},
		{"change signal: an empty RuntimeClass name", []string{"--node.name=n", "--collection.change-signal.runtime-classes=runc,"},
			[]string{"--collection.change-signal.runtime-classes", `""`}},
		{"RuntimeClasses without the change signal", []string{"--node.name=n", "--no-collection.change-signal",
			"--collection.change-signal.runtime-classes=runc"}, []string{"--collection.change-signal.runtime-classes", "needs --collection.change-signal"}},
		{"source kubelet: RuntimeClasses", append(kubelet, "--kubelet.via-apiserver", "--collection.change-signal.runtime-classes=runc"),
			[]string{"--collection.change-signal.runtime-classes", "--collection.source=filesystem"}},
		{"source kubelet: the change signal off unless given", append(kubelet, "--kubelet.via-apiserver", "--cgroup.driver=runc"), nil},
		{"source kubelet: skip-unchanged", append(kubelet, "--kubelet.via-apiserver", "--collection.change-signal.skip-unchanged"),
			[]string{"--collection.change-signal.skip-unchanged", "--collection.source=filesystem"}},

		{"change signal with source kubelet", append(kubelet, "--kubelet.via-apiserver", "--collection.change-signal"),
			[]string{"--collection.change-signal", "--collection.source=filesystem"}},
		{"change signal: unknown cgroup driver", []string{"--node.name=n", "--collection.change-signal", "--cgroup.driver=runc"},
			[]string{"--cgroup.driver", `"runc"`}},
		{"change signal: relative cgroup root", []string{"--node.name=n", "--collection.change-signal", "--cgroup.root=kubepods"},
			[]string{"--cgroup.root", `"kubepods"`}},
		{"change signal: cgroup root the kubelet refuses", []string{"--node.name=n", "--collection.change-signal", "--cgroup.root=/a_b"},
			[]string{"--cgroup.root", `"a_b"`}},
		{"change signal: relative cgroup mount", []string{"--node.name=n", "--collection.change-signal", "--cgroup.mount=sys/fs/cgroup"},
			[]string{"--cgroup.mount"}},
		{"open files", []string{"--node.name=n", "--collection.open-files"}, nil},
		{"open files without the change signal: cgroup flags checked", []string{"--node.name=n", "--no-collection.change-signal",
			"--collection.open-files", "--cgroup.driver=runc"}, []string{"--cgroup.driver", `"runc"`}},
		{"open files with source kubelet", append(kubelet, "--kubelet.via-apiserver", "--collection.open-files"),
			[]string{"--collection.open-files", "--collection.source=filesystem"}},
		{"missing node name", []string{}, []string{"--node.name"}},
		{"unknown source", []string{"--node.name=n", "--collection.source=cadvisor"}, []string{"--collection.source", "cadvisor"}},
		{"interval below 1s", []string{"--node.name=n", "--collection.interval=999ms"}, []string{"--collection.interval"}},
		{"walk concurrency 0", []string{"--node.name=n", "--fs.walk-concurrency=0"}, []string{"--fs.walk-concurrency"}},
		{"walk concurrency 65", []string{"--node.name=n", "--fs.walk-concurrency=65"}, []string{"--fs.walk-concurrency"}},
		{"collection concurrency 0", []string{"--node.name=n", "--collection.concurrency=0"}, []string{"--collection.concurrency"}},
		{"collection concurrency 17", []string{"--node.name=n", "--collection.concurrency=17"}, []string{"--collection.concurrency"}},
		{"volume timeout below 1s", []string{"--node.name=n", "--collection.volume-timeout=500ms"}, []string{"--collection.volume-timeout"}},
		{"relative root dir", []string{"--node.name=n", "--kubelet.root-dir=var/lib/kubelet"}, []string{"--kubelet.root-dir"}},
		{"relative native snapshotter root", []string{"--node.name=n", "--containerd.native-snapshotter-root=var/lib/containerd/io.containerd.snapshotter.v1.native"},
			[]string{"--containerd.native-snapshotter-root"}},
		{"relative CRI containers dir", []string{"--node.name=n", "--containerd.cri-containers-dir=var/lib/containerd/io.containerd.grpc.v1.cri/containers"},
			[]string{"--containerd.cri-containers-dir"}},
		{"CRI-O's storage root and Docker's root", []string{"--node.name=n", "--crio.storage-root=/var/lib/containers/storage",
			"--docker.root=/var/lib/docker"}, nil},
		{"relative CRI-O storage root", []string{"--node.name=n", "--crio.storage-root=var/lib/containers/storage"},
			[]string{"--crio.storage-root", `"var/lib/containers/storage"`}},
		{"relative Docker root", []string{"--node.name=n", "--docker.root=docker"}, []string{"--docker.root", `"docker"`}},
		{"runtime roots unchecked for source kubelet", append(kubelet, "--kubelet.via-apiserver", "--crio.storage-root=x", "--docker.root=y"), nil},
		{"unlimited interval below the interval", []string{"--node.name=n", "--collection.interval=2m"},
			[]string{"--collection.unlimited-interval=1m0s", "--collection.interval=2m0s"}},
		{"negative CPU budget", []string{"--node.name=n", "--collection.cpu-budget=-0.1"}, []string{"--collection.cpu-budget"}},
		{"CPU budget above the cores walks can use", []string{"--node.name=n", "--collection.cpu-budget=1025"}, []string{"--collection.cpu-budget"}},
		{"CPU budget NaN", []string{"--node.name=n", "--collection.cpu-budget=NaN"}, []string{"--collection.cpu-budget"}},
		{"budget flags ignored for source kubelet", append(kubelet, "--kubelet.via-apiserver",
			"--collection.cpu-budget=-1", "--collection.unlimited-interval=0s"), nil},
		{"live concurrency 0", []string{"--node.name=n", "--live.concurrency=0"}, []string{"--live.concurrency"}},
		{"live max wait 0", []string{"--node.name=n", "--live.max-wait=0s"}, []string{"--live.max-wait"}},
		{"API rate limit zero", []string{"--node.name=n", "--kube-api.burst=0"}, []string{"--kube-api.burst"}},
		{"live max wait as long as the live timeout", []string{"--node.name=n", "--live.max-wait=30s"}, []string{"--live.max-wait", "30s"}},
		{"telemetry path without slash", []string{"--node.name=n", "--web.telemetry-path=metrics"}, []string{"--web.telemetry-path"}},
		{"kubelet source without URL", kubelet, []string{"--kubelet.url", "--kubelet.via-apiserver"}},
		{"URL and via API server", append(kubelet, "--kubelet.url=https://10.0.0.5:10250", "--kubelet.via-apiserver"),
			[]string{"--kubelet.url", "--kubelet.via-apiserver"}},
		{"URL scheme not http(s)", append(kubelet, "--kubelet.url=tcp://10.0.0.5:10250"), []string{"--kubelet.url"}},
		{"URL without host", append(kubelet, "--kubelet.url=https://"), []string{"--kubelet.url"}},
		{"URL without scheme", append(kubelet, "--kubelet.url=10.0.0.5:10250"), []string{"--kubelet.url"}},
		{"plain http without token: a read-only kubelet port", append(kubelet, "--kubelet.url=http://10.0.0.5:10255",
			"--kubelet.token-file="), nil},
		{"plain http with the default token file", append(kubelet, "--kubelet.url=http://10.0.0.5:10255"),
			[]string{"--kubelet.url", "--kubelet.token-file", "clear text"}},
		{"plain http with a token file", append(kubelet, "--kubelet.url=HTTP://10.0.0.5:10255",
			"--kubelet.token-file=/tmp/token"), []string{"--kubelet.url", "--kubelet.token-file", "clear text"}},
		{"plain http with TLS settings", append(kubelet, "--kubelet.url=http://10.0.0.5:10255",
			"--kubelet.token-file=", "--kubelet.insecure-skip-tls-verify"), []string{"--kubelet.url", "only to https"}},
		{"insecure and CA file", append(kubelet, "--kubelet.url=https://10.0.0.5:10250",
			"--kubelet.insecure-skip-tls-verify", "--kubelet.ca-file=/etc/kubelet-ca.crt"),
			[]string{"--kubelet.ca-file", "--kubelet.insecure-skip-tls-verify"}},
		{"kubelet timeout 0", append(kubelet, "--kubelet.via-apiserver", "--kubelet.timeout=0s"), []string{"--kubelet.timeout"}},
		{"notices", []string{"--node.name=n", "--remediator.url=http://emptydir-remediator.emptydir-guard.svc:9732",
			"--remediator.token-file=/var/run/secrets/emptydir-remediator/token"}, nil},
		{"notices without a token", []string{"--node.name=n", "--remediator.url=http://emptydir-remediator:9732"}, []string{"--remediator.token-file"}},
		{"notices to no URL", []string{"--node.name=n", "--remediator.url=emptydir-remediator:9732", "--remediator.token-file=/t"}, []string{"--remediator.url"}},
		{"every error at once", []string{"--collection.interval=0s", "--fs.walk-concurrency=-1", "--kubelet.root-dir=."},
			[]string{"--node.name", "--collection.interval", "--fs.walk-concurrency", "--kubelet.root-dir"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			err := parse(t, tc.args...).validate()
			checkNames(t, "validate", err, tc.want)
		})
	}
}

// checkNames checks the result err of check: no error when want is empty, else an error
// naming each of want.
func checkNames(t *testing.T, check string, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("%s: %v, want no error", check, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s passed, want an error naming %v", check, want)
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

func TestCheckPaths(t *testing.T) {
	withPods := t.TempDir()
	if err := os.Mkdir(filepath.Join(withPods, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	podsIsFile := t.TempDir()
	if err := os.WriteFile(filepath.Join(podsIsFile, "pods"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	kubelet := []string{"--collection.source=kubelet", "--kubelet.url=https://10.0.0.5:10250"}

	tests := []struct {
		name string
		args []string
		want []string // flags the error must name; empty means no error
	}{
		{"root dir with pods directory", []string{"--kubelet.root-dir=" + withPods}, nil},
		{"missing root dir", []string{"--kubelet.root-dir=" + missing}, []string{"--kubelet.root-dir", missing}},
		{"root dir without pods directory", []string{"--kubelet.root-dir=" + t.TempDir()}, []string{"--kubelet.root-dir"}},
		{"pods is a file", []string{"--kubelet.root-dir=" + podsIsFile}, []string{"--kubelet.root-dir", "not a directory"}},
		{"missing kubeconfig", []string{"--kubelet.root-dir=" + withPods, "--kubeconfig=" + missing}, []string{"--kubeconfig"}},
		{"missing web config", []string{"--kubelet.root-dir=" + withPods, "--web.config.file=" + missing}, []string{"--web.config.file"}},
		{"kubelet token and no CA", append(kubelet, "--kubelet.token-file="+token), nil},
		{"missing kubelet CA file", append(kubelet, "--kubelet.token-file="+token, "--kubelet.ca-file="+missing), []string{"--kubelet.ca-file"}},
		{"missing kubelet token file", append(kubelet, "--kubelet.token-file="+missing), []string{"--kubelet.token-file"}},
		{"root dir not checked for source kubelet", append(kubelet, "--kubelet.token-file="+token, "--kubelet.root-dir="+missing), nil},
		// Not fatal: the emptyDir volumes are measured all the same, and every pod with an
		// ephemeral-storage limit counts a not_found error (startPaths warns at start).
		{"missing pod logs dir", []string{"--kubelet.root-dir=" + withPods, "--kubelet.pod-logs-dir=" + missing}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			cfg := parse(t, append([]string{"--node.name=n"}, tc.args...)...)
			if err := cfg.validate(); err != nil {
				t.Fatalf("the case must pass validate first: %v", err)
			}
			err := cfg.checkPaths()
			checkNames(t, "checkPaths", err, tc.want)
		})
	}
}

// shippedRules reads rules/emptydir-guard.rules.yml.
func shippedRules(t *testing.T) (file struct {
	Groups []struct {
		Rules []struct{ Alert, Record, Expr string }
	}
}) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "rules", "emptydir-guard.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRulesNeedNoOptInFamily: every shipped rule is computed from families published by
// default.
func TestRulesNeedNoOptInFamily(t *testing.T) {
	for _, g := range shippedRules(t).Groups {
		for _, r := range g.Rules {
			for _, name := range regexp.MustCompile(`emptydir_[a-z_]+`).FindAllString(r.Expr, -1) {
				if slices.Contains(exporter.OptInFamilies, name) {
					t.Errorf("rule %s%s reads the opt-in family %s", r.Alert, r.Record, name)
				}
			}
		}
	}
}

// TestTriggerFamiliesAreTheAlerts: the families the exporter warns about hiding are exactly
// those the shipped over-limit alerts are computed from.
func TestTriggerFamiliesAreTheAlerts(t *testing.T) {
	file := shippedRules(t)
	used := map[string]bool{}
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if strings.HasSuffix(r.Alert, "OverLimit") {
				alerts++
				for _, name := range regexp.MustCompile(`emptydir_[a-z_]+`).FindAllString(r.Expr, -1) {
					used[name] = true
				}
			}
		}
	}
	got := slices.Sorted(maps.Keys(used))
	want := slices.Sorted(slices.Values(exporter.TriggerFamilies))
	if alerts != 3 || !slices.Equal(got, want) {
		t.Errorf("%d over-limit alerts computed from %q; triggerFamilies %q", alerts, got, want)
	}
}
