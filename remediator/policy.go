package remediator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Policy decisions. Each is a pure function of its inputs; podPolicyDecline (before the live
// measurement) and then cooldownDecline apply them in documentation order, and the first one
// that declines names the skip reason.

// DefaultOptOutAnnotation is the pod annotation that, set to "false", keeps the remediator
// away from a pod.
const DefaultOptOutAnnotation = "emptydir-guard.io/evict"

// Priority classes and the priority value from which Kubernetes treats a pod as system-critical.
const (
	SystemNodeCritical           = "system-node-critical"
	SystemClusterCritical        = "system-cluster-critical"
	SystemCriticalPriority int32 = 2000000000
)

// namespaceAllowed reports whether ns may be remediated: a namespace on the deny list never
// is; with an empty allow list every other namespace is; otherwise only the listed ones are.
func namespaceAllowed(ns string, allow, deny []string) bool {
	if slices.Contains(deny, ns) {
		return false
	}
	return len(allow) == 0 || slices.Contains(allow, ns)
}

// selectorMatches reports whether the pod labels match the configured selector; a nil
// selector matches everything.
func selectorMatches(sel labels.Selector, podLabels map[string]string) bool {
	if sel == nil {
		return true
	}
	return sel.Matches(labels.Set(podLabels))
}

// optedOut reports whether the pod opted out of remediation with annotation key set to
// "false" (any case, surrounding spaces ignored). Any other value, or none, does not opt out.
func optedOut(annotations map[string]string, key string) bool {
	if key == "" {
		return false
	}
	v, ok := annotations[key]
	return ok && strings.EqualFold(strings.TrimSpace(v), "false")
}

// isMirrorPod reports whether the pod is the API server's mirror of a static pod: deleting
// or evicting it does not stop the static pod, which the kubelet restarts from its manifest.
// Only the mirror annotation counts: the kubelet never runs a pod created with it (and the
// API server refuses to add it later), so a tenant gains nothing by forging it. A Node as
// the pod's owner proves nothing: anyone who creates the pod writes its owner references.
func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// isDaemonSetPod reports whether a DaemonSet controls the pod: evicting it only makes the
// DaemonSet controller recreate it on the same node.
func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// isCriticalPod reports whether the pod runs at system-critical priority.
func isCriticalPod(pod *corev1.Pod) bool {
	switch pod.Spec.PriorityClassName {
	case SystemNodeCritical, SystemClusterCritical:
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// inCooldown reports whether an action on the same pod UID at last is still within the
// cooldown at now. A zero last means no earlier action.
func inCooldown(last, now time.Time, cooldown time.Duration) bool {
	if last.IsZero() || cooldown <= 0 {
		return false
	}
	return now.Sub(last) < cooldown
}

// overLimit reports whether used exceeds limit scaled by ratio (used > limit*ratio, as the
// kubelet compares used > limit). A limit of 0 or less means no limit: never over.
func overLimit(used, limit int64, ratio float64) bool {
	if limit <= 0 {
		return false
	}
	return float64(used) > float64(limit)*ratio
}

// subjectLimit returns the limit the subject is held to in the pod's current spec, in bytes,
// as the kubelet's checks compute it. ok is false when there is none to enforce.
func subjectLimit(pod *corev1.Pod, subject Subject) (limit int64, ok bool, why string) {
	switch subject.Check {
	case CheckPod:
		// The kubelet's own helper (podEphemeralStorageLimitEviction).
		q, found := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceEphemeralStorage]
		if !found || q.Sign() <= 0 {
			return 0, false, "no container of the pod has an ephemeral-storage limit"
		}
		return q.Value(), true, ""
	case CheckContainer:
		return containerLimit(pod, subject.Container)
	default:
		return emptyDirLimit(pod, subject.Volume)
	}
}

// emptyDirLimit returns the sizeLimit of the pod's emptyDir volume name in bytes. ok is false
// when the pod has no such emptyDir volume, it has no sizeLimit, or it is a memory volume: its
// tmpfs size is the limit, which the kernel enforces, and a resize in place (KEP-6030) leaves
// the spec's sizeLimit ahead of it until the kubelet applies it.
func emptyDirLimit(pod *corev1.Pod, name string) (limit int64, ok bool, why string) {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.EmptyDir == nil {
			return 0, false, fmt.Sprintf("volume %q is not an emptyDir", name)
		}
		if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
			return 0, false, fmt.Sprintf("emptyDir %q has no sizeLimit", name)
		}
		if v.EmptyDir.Medium == corev1.StorageMediumMemory {
			return 0, false, fmt.Sprintf("emptyDir %q is medium Memory: the kernel holds it to its tmpfs size, which is the limit in force", name)
		}
		return v.EmptyDir.SizeLimit.Value(), true, ""
	}
	return 0, false, fmt.Sprintf("pod has no volume %q", name)
}

// containerLimit returns the limits.ephemeral-storage of the named container, among those the
// kubelet checks: regular and restartable init containers (containerEphemeralStorageLimitEviction).
func containerLimit(pod *corev1.Pod, name string) (limit int64, ok bool, why string) {
	var found *corev1.Container
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			found = &pod.Spec.Containers[i]
		}
	}
	for i, c := range pod.Spec.InitContainers {
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			found = &pod.Spec.InitContainers[i]
		}
	}
	if found == nil {
		return 0, false, fmt.Sprintf("pod has no container %q whose limit the kubelet checks", name)
	}
	q := found.Resources.Limits.StorageEphemeral()
	if q == nil || q.Sign() <= 0 {
		return 0, false, fmt.Sprintf("container %q has no ephemeral-storage limit", name)
	}
	return q.Value(), true, ""
}

// kubeletMessage is the kubelet's own eviction message for the subject over limit
// (pkg/kubelet/eviction/helpers.go, v1.37), so that an eviction reads the same whoever made it.
func kubeletMessage(subject Subject, limit int64) string {
	q := quantity(limit)
	switch subject.Check {
	case CheckPod:
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s.", q)
	case CheckContainer:
		return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q.", subject.Container, q)
	default:
		return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", subject.Volume, q)
	}
}

// incompleteDecline decides an alert saying that its subject has been measurable only as a
// lower bound (RemediationEvictIncomplete) before anything is asked of the API server or the
// exporter: with the policy off it is skipped at no cost. The alert only routes: whether its
// subject has been one for long enough is the exporter's to say (incompleteLongEnough), never
// the alert's startsAt, which anyone who can publish series or rules can forge.
func incompleteDecline(cfg Config) (string, string) {
	if cfg.EvictIncompleteAfter <= 0 {
		return SkipIncompletePolicyOff, "measurable only as a lower bound, but --policy.evict-incomplete-after is off: only what is proven over its limit is evicted"
	}
	return "", ""
}

// incompleteLongEnough reports whether m, a live lower bound at or under the limit, stands in for
// a complete measurement over it: the policy is on and the exporter says the subject has been
// measurable only as a lower bound, without a break, for EvictIncompleteAfter up to m (both
// times of the exporter's clock). Otherwise why says what is missing.
func incompleteLongEnough(cfg Config, m Measurement) (bool, string) {
	switch {
	case cfg.EvictIncompleteAfter <= 0:
		return false, "--policy.evict-incomplete-after is off"
	case m.IncompleteSince.IsZero():
		return false, "the exporter does not say since when it has been a lower bound (an exporter before incompleteSince)"
	case m.MeasuredAt.Sub(m.IncompleteSince) < cfg.EvictIncompleteAfter:
		return false, fmt.Sprintf("the exporter has measured it only as a lower bound since %s, less than --policy.evict-incomplete-after=%s before this measurement",
			m.IncompleteSince.UTC().Format(time.RFC3339), cfg.EvictIncompleteAfter)
	}
	return true, ""
}

// incompleteMessage says why a subject under its limit as far as it could be measured is evicted.
func incompleteMessage(subject Subject, lasted, after time.Duration) string {
	return fmt.Sprintf("Usage of %s could be measured only as a lower bound for %s (--policy.evict-incomplete-after=%s).",
		subject, lasted.Round(time.Second), after)
}

// quantity spells n bytes as the kubelet spells sizes in its eviction messages and as a
// sizeLimit is written: 1Mi, 10004Ki, 1536.
func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// granted reports whether the namespace with labels nsLabels is one where sel grants an
// exemption; a nil selector grants none.
func granted(sel labels.Selector, nsLabels labels.Set) bool {
	return sel != nil && sel.Matches(nsLabels)
}

// claimsExemption reports whether the pod claims an exemption that only the namespace's
// labels can grant: then podPolicyDecline needs them.
func claimsExemption(cfg Config, pod *corev1.Pod) bool {
	return (cfg.OptOutNamespaceSelector != nil && optedOut(pod.Annotations, cfg.OptOutAnnotation)) ||
		(cfg.DaemonSetNamespaceSelector != nil && !cfg.AllowDaemonSetPods && isDaemonSetPod(pod))
}

// namesOnly reports whether every requirement of sel is on the namespace's name label, which
// the API server sets: then the name alone decides, without reading the namespace.
func namesOnly(sel labels.Selector) bool {
	if sel == nil {
		return true
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return true // selects nothing
	}
	for _, r := range reqs {
		if r.Key() != corev1.LabelMetadataName {
			return false
		}
	}
	return true
}

// podPolicyDecline applies the policies that need only the pod (all but the cooldown), so
// that they decide before anything is measured. nsLabels are the labels of the pod's
// namespace (at least its name label), which decide where the pod's own exemptions hold.
func podPolicyDecline(cfg Config, pod *corev1.Pod, nsLabels labels.Set) (string, string) {
	switch {
	case !namespaceAllowed(pod.Namespace, cfg.NamespaceAllow, cfg.NamespaceDeny):
		return SkipNamespace, fmt.Sprintf("namespace %q is not allowed", pod.Namespace)
	case !selectorMatches(cfg.PodSelector, pod.Labels):
		return SkipSelector, fmt.Sprintf("pod labels do not match selector %q", cfg.PodSelector)
	case optedOut(pod.Annotations, cfg.OptOutAnnotation) && granted(cfg.OptOutNamespaceSelector, nsLabels):
		return SkipOptOut, fmt.Sprintf("pod opted out with annotation %s=%q", cfg.OptOutAnnotation, pod.Annotations[cfg.OptOutAnnotation])
	case !cfg.AllowMirrorPods && isMirrorPod(pod):
		return SkipMirrorPod, "static (mirror) pods are not evicted"
	case !cfg.AllowDaemonSetPods && isDaemonSetPod(pod) && granted(cfg.DaemonSetNamespaceSelector, nsLabels):
		return SkipDaemonSet, "DaemonSet pods are not evicted"
	case !cfg.AllowCriticalPods && isCriticalPod(pod):
		return SkipCritical, "system-critical pods are not evicted"
	}
	return "", ""
}

// cooldownDecline declines while the last action on the pod's UID is within the cooldown.
func cooldownDecline(cfg Config, pod *corev1.Pod, last uidEntry, remembered bool, now time.Time) (string, string) {
	// An unconfirmed attempt starts no cooldown: its retry must be able to finish the job.
	if remembered && last.Outcome != outcomeUnconfirmed && inCooldown(last.At, now, cfg.Cooldown) {
		return SkipCooldown, fmt.Sprintf("uid %s was handled (%s) at %s, within the %s cooldown", pod.UID, last.Outcome, last.At.UTC().Format(time.RFC3339), cfg.Cooldown)
	}
	return "", ""
}
