package remediator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestNamespaceAllowed(t *testing.T) {
	tests := []struct {
		ns          string
		allow, deny []string
		want        bool
	}{
		{"default", nil, nil, true},
		{"default", []string{"default"}, nil, true},
		{"other", []string{"default"}, nil, false},
		{"kube-system", nil, []string{"kube-system"}, false},
		{"default", []string{"default"}, []string{"default"}, false}, // deny wins
		{"default", nil, []string{"kube-system"}, true},
	}
	for _, tt := range tests {
		if got := namespaceAllowed(tt.ns, tt.allow, tt.deny); got != tt.want {
			t.Errorf("namespaceAllowed(%q, %v, %v) = %v, want %v", tt.ns, tt.allow, tt.deny, got, tt.want)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	mustParse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	tests := []struct {
		sel    labels.Selector
		labels map[string]string
		want   bool
	}{
		{nil, nil, true},
		{nil, map[string]string{"a": "b"}, true},
		{mustParse("tier=batch"), map[string]string{"tier": "batch"}, true},
		{mustParse("tier=batch"), map[string]string{"tier": "web"}, false},
		{mustParse("tier=batch"), nil, false},
		{mustParse("!protected"), map[string]string{"protected": ""}, false},
		{mustParse("tier in (a,b),app"), map[string]string{"tier": "b", "app": "x"}, true},
	}
	for _, tt := range tests {
		if got := selectorMatches(tt.sel, tt.labels); got != tt.want {
			t.Errorf("selectorMatches(%v, %v) = %v, want %v", tt.sel, tt.labels, got, tt.want)
		}
	}
}

func TestOptedOut(t *testing.T) {
	const key = DefaultOptOutAnnotation
	tests := []struct {
		ann  map[string]string
		key  string
		want bool
	}{
		{nil, key, false},
		{map[string]string{key: "false"}, key, true},
		{map[string]string{key: " FALSE "}, key, true},
		{map[string]string{key: "true"}, key, false},
		{map[string]string{key: ""}, key, false},
		{map[string]string{key: "no"}, key, false},
		{map[string]string{"other": "false"}, key, false},
		{map[string]string{key: "false"}, "", false}, // opt-out disabled
	}
	for _, tt := range tests {
		if got := optedOut(tt.ann, tt.key); got != tt.want {
			t.Errorf("optedOut(%v, %q) = %v, want %v", tt.ann, tt.key, got, tt.want)
		}
	}
}

func TestPodKindProtections(t *testing.T) {
	tests := []struct {
		name                        string
		pod                         *corev1.Pod
		mirror, daemonset, critical bool
	}{
		{"plain pod", newPod("d", "p", "u").build(), false, false, false},
		{"mirror annotation", newPod("d", "p", "u").annotate(corev1.MirrorPodAnnotationKey, "hash").build(), true, false, false},
		// Whoever creates a pod writes its owner references; a real mirror pod always
		// carries the annotation as well.
		{"owned by node without the mirror annotation", newPod("d", "p", "u").ownedBy("v1", "Node").build(), false, false, false},
		{"mirror pod owned by its node", newPod("d", "p", "u").annotate(corev1.MirrorPodAnnotationKey, "hash").ownedBy("v1", "Node").build(), true, false, false},
		{"daemonset", newPod("d", "p", "u").ownedBy("apps/v1", "DaemonSet").build(), false, true, false},
		{"replicaset", newPod("d", "p", "u").ownedBy("apps/v1", "ReplicaSet").build(), false, false, false},
		{"node critical", newPod("d", "p", "u").priorityClass(SystemNodeCritical).build(), false, false, true},
		{"cluster critical", newPod("d", "p", "u").priorityClass(SystemClusterCritical).build(), false, false, true},
		{"critical priority value", newPod("d", "p", "u").priority(SystemCriticalPriority).build(), false, false, true},
		{"high user priority", newPod("d", "p", "u").priorityClass("high").priority(1000000000).build(), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isMirrorPod(tt.pod); got != tt.mirror {
				t.Errorf("isMirrorPod = %v", got)
			}
			if got := isDaemonSetPod(tt.pod); got != tt.daemonset {
				t.Errorf("isDaemonSetPod = %v", got)
			}
			if got := isCriticalPod(tt.pod); got != tt.critical {
				t.Errorf("isCriticalPod = %v", got)
			}
		})
	}
}

func TestInCooldown(t *testing.T) {
	tests := []struct {
		last     time.Time
		cooldown time.Duration
		want     bool
	}{
		{time.Time{}, time.Hour, false},
		{testNow.Add(-time.Minute), 10 * time.Minute, true},
		{testNow.Add(-10 * time.Minute), 10 * time.Minute, false},
		{testNow.Add(-time.Minute), 0, false},
	}
	for _, tt := range tests {
		if got := inCooldown(tt.last, testNow, tt.cooldown); got != tt.want {
			t.Errorf("inCooldown(%v, %v) = %v, want %v", tt.last, tt.cooldown, got, tt.want)
		}
	}
}

func TestOverLimit(t *testing.T) {
	tests := []struct {
		used, limit int64
		ratio       float64
		want        bool
	}{
		{10 * mib, mib, 1, true},
		{mib, mib, 1, false}, // like the kubelet: used > limit
		{mib + 1, mib, 1, true},
		{mib, mib, 0.9, true},
		{mib, mib, 1.5, false},
		{10 * mib, 0, 1, false}, // no limit
	}
	for _, tt := range tests {
		if got := overLimit(tt.used, tt.limit, tt.ratio); got != tt.want {
			t.Errorf("overLimit(%d, %d, %g) = %v, want %v", tt.used, tt.limit, tt.ratio, got, tt.want)
		}
	}
}

func TestEmptyDirLimit(t *testing.T) {
	withHostPath := newPod("d", "p", "u").build()
	withHostPath.Spec.Volumes = append(withHostPath.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}})
	tests := []struct {
		pod    *corev1.Pod
		volume string
		want   int64
		ok     bool
	}{
		{newPod("d", "p", "u").build(), "empty", mib, true},
		{newPod("d", "p", "u").limit("500M").build(), "empty", 500_000_000, true},
		{newPod("d", "p", "u").noLimit().build(), "empty", 0, false},
		{newPod("d", "p", "u").build(), "other", 0, false},
		{withHostPath, "host", 0, false},
	}
	for _, tt := range tests {
		got, ok, why := emptyDirLimit(tt.pod, tt.volume)
		if got != tt.want || ok != tt.ok || (!ok && why == "") {
			t.Errorf("emptyDirLimit(%q) = %d, %v, %q; want %d, %v", tt.volume, got, ok, why, tt.want, tt.ok)
		}
	}
}

func TestQuantity(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1023, "1023"}, {1024, "1Ki"}, {mib, "1Mi"}, {10244096, "10004Ki"},
		{3 << 30, "3Gi"}, {1536, "1536"},
	}
	for _, tt := range tests {
		if got := quantity(tt.n); got != tt.want {
			t.Errorf("quantity(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// policyDecline applies the policies in the order remediate does and returns the skip reason and
// an explanation of the first that declines the eviction, or "" when every policy allows it.
// last is the remediator's last eviction of this pod UID, when remembered.
func policyDecline(cfg Config, pod *corev1.Pod, last uidEntry, remembered bool, now time.Time) (string, string) {
	if reason, msg := podPolicyDecline(cfg, pod, labels.Set{corev1.LabelMetadataName: pod.Namespace}); reason != "" {
		return reason, msg
	}
	return cooldownDecline(cfg, pod, last, remembered, now)
}

// policyDecline applies the policies in the documented order: the first that declines names
// the reason.
func TestPolicyDeclineOrder(t *testing.T) {
	all := func(c *Config) {}
	tests := []struct {
		name       string
		cfg        func(*Config)
		pod        *corev1.Pod
		last       *uidEntry
		wantReason string
	}{
		{"everything allowed", all, newPod("default", "p", "u").build(), nil, ""},
		{"namespace before selector", func(c *Config) {
			c.NamespaceAllow = []string{"other"}
			c.PodSelector = labels.SelectorFromSet(labels.Set{"x": "y"})
		}, newPod("default", "p", "u").build(), nil, SkipNamespace},
		{"selector before opt-out", func(c *Config) { c.PodSelector = labels.SelectorFromSet(labels.Set{"x": "y"}) },
			newPod("default", "p", "u").annotate(DefaultOptOutAnnotation, "false").build(), nil, SkipSelector},
		{"opt-out before mirror", all, newPod("kube-system", "p", "u").annotate(DefaultOptOutAnnotation, "false").annotate(corev1.MirrorPodAnnotationKey, "h").build(), nil, SkipOptOut},
		{"opt-out not granted in the namespace", all, newPod("default", "p", "u").annotate(DefaultOptOutAnnotation, "false").annotate(corev1.MirrorPodAnnotationKey, "h").build(), nil, SkipMirrorPod},
		{"mirror allowed by flag", func(c *Config) { c.AllowMirrorPods = true }, newPod("default", "p", "u").annotate(corev1.MirrorPodAnnotationKey, "h").build(), nil, ""},
		{"daemonset before critical", all, newPod("kube-system", "p", "u").ownedBy("apps/v1", "DaemonSet").priorityClass(SystemNodeCritical).build(), nil, SkipDaemonSet},
		{"daemonset not protected in the namespace", all, newPod("default", "p", "u").ownedBy("apps/v1", "DaemonSet").priorityClass(SystemNodeCritical).build(), nil, SkipCritical},
		{"critical allowed by flag", func(c *Config) { c.AllowCriticalPods = true }, newPod("default", "p", "u").priorityClass(SystemNodeCritical).build(), nil, ""},
		{"cooldown", all, newPod("default", "p", "u").build(), &uidEntry{At: testNow.Add(-time.Minute), Outcome: OutcomeDryRun}, SkipCooldown},
		{"cooldown over", all, newPod("default", "p", "u").build(), &uidEntry{At: testNow.Add(-time.Hour), Outcome: OutcomeDryRun}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.cfg(&cfg)
			var last uidEntry
			if tt.last != nil {
				last = *tt.last
			}
			reason, msg := policyDecline(cfg, tt.pod, last, tt.last != nil, testNow)
			if reason != tt.wantReason || (reason != "" && msg == "") {
				t.Errorf("policyDecline = %q (%q), want %q", reason, msg, tt.wantReason)
			}
		})
	}
}

func TestStatusCode(t *testing.T) {
	tests := []struct {
		outcomes []Outcome
		want     int
	}{
		{nil, 200},
		{[]Outcome{OutcomeEvicted}, 200},
		{[]Outcome{OutcomeDryRun, OutcomeSkipped, OutcomeGone, OutcomeResolved}, 200},
		{[]Outcome{OutcomeEvicted, OutcomePDBBlocked}, 503},
		{[]Outcome{OutcomeError}, 503},
		{[]Outcome{OutcomeSkipped, OutcomeError, OutcomeEvicted}, 503},
	}
	for _, tt := range tests {
		if got := StatusCode(tt.outcomes); got != tt.want {
			t.Errorf("StatusCode(%v) = %d, want %d", tt.outcomes, got, tt.want)
		}
	}
	for _, o := range AllOutcomes {
		if got := StatusCode([]Outcome{o}); got >= 400 && got < 500 {
			t.Errorf("outcome %s maps to %d: Alertmanager would drop it", o, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"relative path", func(c *Config) { c.WebhookPath = "webhook" }, true},
		{"metrics path", func(c *Config) { c.WebhookPath = "/metrics" }, true},
		{"tiny body", func(c *Config) { c.MaxRequestBytes = 10 }, true},
		{"ratio 0", func(c *Config) { c.ThresholdRatio = 0 }, true},
		{"max age 0", func(c *Config) { c.MaxMeasurementAge = 0 }, true},
		{"bad namespace", func(c *Config) { c.NamespaceAllow = []string{"Bad_NS"} }, true},
		{"allowed and denied", func(c *Config) { c.NamespaceAllow = []string{"a"}; c.NamespaceDeny = []string{"a"} }, true},
		{"bad annotation", func(c *Config) { c.OptOutAnnotation = "not a key" }, true},
		{"negative cap", func(c *Config) { c.Caps.PerNode = -1 }, true},
		{"cap without window", func(c *Config) { c.Caps.Window = 0 }, true},
		{"no caps no window", func(c *Config) { c.Caps = Caps{} }, false},
		{"evict incomplete after an hour", func(c *Config) { c.EvictIncompleteAfter = time.Hour }, false},
		{"evict incomplete after a negative time", func(c *Config) { c.EvictIncompleteAfter = -time.Hour }, true},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.mod(&c)
		if err := c.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%s: Validate() = %v, wantErr %v", tt.name, err, tt.wantErr)
		}
	}
}
