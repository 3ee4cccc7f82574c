package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// optOutAnnotation is the remediator's default opt-out annotation (remediator.DefaultOptOutAnnotation;
// not imported, to keep the remediator out of the plugin's binary).
const optOutAnnotation = "emptydir-guard.io/evict"

// Explanation is what `explain -o json|yaml` prints: one live measurement of a pod, limit by
// limit, and what happens at which point.
type Explanation struct {
	metav1.TypeMeta `json:",inline"`
	Namespace       string `json:"namespace"`
	Pod             string `json:"pod"`
	UID             string `json:"uid"`
	Node            string `json:"node"`
	// Source is how the exporter measured: filesystem (it walked the directories) or kubelet.
	Source     string    `json:"source"`
	MeasuredAt time.Time `json:"measuredAt"`
	// Limits are the pod's limits, each with what counts toward it: its emptyDir volumes'
	// sizeLimits, the pod's ephemeral-storage limit, each container's.
	Limits []Limit `json:"limits"`
	// Disruption is what PodDisruptionBudgets say about evicting the pod now.
	Disruption Disruption `json:"disruption"`
	// OptedOut says the pod carries the remediator's opt-out annotation set to "false".
	OptedOut bool `json:"optedOut,omitempty"`
}

// DeepCopyObject copies x enough to print it.
func (x *Explanation) DeepCopyObject() runtime.Object {
	c := *x
	c.Limits = slices.Clone(x.Limits)
	return &c
}

// Refs is the pod, for -o name.
func (x *Explanation) Refs() []Ref { return []Ref{{Kind: "Pod", Name: x.Pod}} }

// Limit is one limit of a pod and what counts toward it.
type Limit struct {
	// Kind is KindEmptyDir, KindPod or KindContainer, Name the volume's or container's.
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	Medium string `json:"medium,omitempty"`
	// UsedBytes is the live measurement; LowerBound says it may be more.
	UsedBytes  int64  `json:"usedBytes"`
	LowerBound bool   `json:"lowerBound,omitempty"`
	LimitBytes *int64 `json:"limitBytes,omitempty"`
	// Parts split UsedBytes, in the words of docs/metrics.md: emptydir, writable_layer,
	// logs, other (pod); writable_layer, logs (container).
	Parts []Part `json:"parts,omitempty"`
	// Enforcement says, in words, what happens when UsedBytes passes LimitBytes.
	Enforcement string `json:"enforcement"`
}

// Part is one part of a usage.
type Part struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Counts is false for a part measured but not counted toward this limit (a container's
	// writable layer on a dedicated image filesystem).
	Counts bool   `json:"counts"`
	What   string `json:"what"`
}

// Disruption is the PodDisruptionBudgets' say over an eviction of the pod.
type Disruption struct {
	// Checked is false when the user may not list PodDisruptionBudgets in the namespace.
	Checked bool     `json:"checked"`
	Budgets []string `json:"budgets,omitempty"`
	// EvictionAllowed says whether an eviction through the Eviction API would be allowed now
	// (every budget has a disruption left); unset when unchecked.
	EvictionAllowed *bool `json:"evictionAllowed,omitempty"`
}

// ExplainOptions are explain's settings beside the shared ones.
type ExplainOptions struct {
	*Options
	Pod string

	// Client and Proxy replace the ones the kubeconfig makes (tests).
	Client kubernetes.Interface
	Proxy  Proxy
}

// Run measures the pod live and prints the explanation.
func (o *ExplainOptions) Run(ctx context.Context) error {
	f, err := o.Format()
	if err != nil {
		return err
	}
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	client := o.Client
	if client == nil {
		if client, err = o.Clientset(); err != nil {
			return err
		}
	}
	proxy := o.Proxy
	if proxy == nil {
		proxy = RESTProxy{Client: client.CoreV1().RESTClient()}
	}
	pod, err := client.CoreV1().Pods(ns).Get(ctx, o.Pod, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %q not found in namespace %q", o.Pod, ns)
		}
		return err
	}
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("pod %s/%s is not scheduled to a node yet: only a running pod's storage can be measured", ns, pod.Name)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s/%s is %s: only a running pod's storage can be measured", ns, pod.Name, pod.Status.Phase)
	}
	exporters, err := FindExporters(ctx, client, o.GuardNamespace)
	if err != nil {
		return err
	}
	e, ok := exporters[pod.Spec.NodeName]
	if !ok {
		return fmt.Errorf("no ready exporter on node %s, where pod %s/%s runs", pod.Spec.NodeName, ns, pod.Name)
	}
	live, err := Live(ctx, proxy, e, ns, pod.Name, string(pod.UID))
	if err != nil {
		return err
	}
	x := explain(pod, live)
	x.Disruption = disruption(ctx, client, pod)
	if f == FormatObject {
		return o.Print(f, nil, x)
	}
	return x.Write(o.Out)
}

// explain joins the pod's spec (its limits) and a live measurement of it.
func explain(pod *corev1.Pod, live *liveapi.Response) *Explanation {
	x := &Explanation{TypeMeta: TypeMeta("Explanation"), Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID), Node: live.Node,
		Source: live.Source, MeasuredAt: live.MeasuredAt, Limits: []Limit{}, OptedOut: pod.Annotations[optOutAnnotation] == "false"}
	if es := live.EphemeralStorage; es != nil {
		p := Limit{Kind: KindPod, UsedBytes: es.UsedBytes, LowerBound: es.LowerBound, LimitBytes: es.LimitBytes}
		for _, name := range []string{"emptydir", "writable_layer", "logs", "other"} {
			p.Parts = append(p.Parts, Part{Name: name, Bytes: es.Parts[name], Counts: true, What: partWhat[name]})
		}
		p.Enforcement = podEnforcement(p)
		x.Limits = append(x.Limits, p)
		for _, c := range es.Containers {
			l := Limit{Kind: KindContainer, Name: c.Name, UsedBytes: c.UsedBytes, LowerBound: c.LowerBound, LimitBytes: c.LimitBytes}
			wl := Part{Name: "writable_layer", Bytes: c.WritableLayerBytes, Counts: !es.DedicatedImageFilesystem, What: partWhat["writable_layer"]}
			if es.DedicatedImageFilesystem {
				wl.What += "; on this node the image filesystem is a separate one, so it counts toward the pod's limit only, not the container's"
			}
			switch r := c.WritableLayerUnlocated; {
			case r == "image_volume_not_mounted" || r == "image_volume_missing" || r == "no_bundle_config":
				// The exporter's image VOLUME reasons (source.LayerImageVolume*): the layer was walked.
				wl.What += "; its image VOLUME directories not located (" + r + "): not counted, so the usage is a lower bound"
			case r != "":
				wl.What += "; not located (" + r + "): counted as 0, so the usage is a lower bound"
			}
			l.Parts = []Part{wl, {Name: "logs", Bytes: c.LogsBytes, Counts: true, What: partWhat["logs"]}}
			l.Enforcement = containerEnforcement(l)
			x.Limits = append(x.Limits, l)
		}
	}
	for _, v := range live.Volumes {
		l := Limit{Kind: KindEmptyDir, Name: v.Name, Medium: v.Medium, LimitBytes: v.LimitBytes,
			LowerBound: v.LowerBound || v.UnreadableEntries > 0 || v.ChangedDirectories > 0 || v.CutShort}
		if v.UsedBytes != nil {
			l.UsedBytes = *v.UsedBytes
		}
		l.Enforcement = volumeEnforcement(l)
		x.Limits = append(x.Limits, l)
	}
	return x
}

var partWhat = map[string]string{
	"emptydir":       "files in the pod's disk emptyDir volumes (memory-backed ones count toward memory instead)",
	"writable_layer": "files the containers wrote outside any volume (/tmp, /var, anything in the image's own filesystem, and the image's VOLUME directories), held in their writable layers",
	"logs":           "the containers' stdout and stderr as the kubelet keeps them (kubectl logs), rotated files included",
	"other":          "the pod's configMap and gitRepo volumes, its /etc/hosts and the other files of its log directory",
}

const guardEvicts = "emptyDir guard's %s alert fires at the next scrape (seconds) and its remediator, after measuring again live, evicts the pod through the Eviction API, which honours PodDisruptionBudgets (unless the remediator runs in dry-run or its policy leaves this pod alone)."

func volumeEnforcement(l Limit) string {
	switch {
	case l.Medium == "memory":
		return "Memory-backed (tmpfs): what it holds counts toward the containers' memory, not ephemeral storage. Writes past the tmpfs size (the sizeLimit, or the pod's memory limit) fail with 'No space left on device'; neither the kubelet nor emptyDir guard evicts for it."
	case l.Medium == "hugepages":
		return "Huge pages: bounded by the pod's hugepages limit; no eviction for it."
	case l.LimitBytes == nil:
		return "No sizeLimit: the volume can grow until the node's disk is full, and counts toward the pod's ephemeral-storage limit if it has one. Give it a sizeLimit (kubectl emptydir recommend suggests one)."
	}
	return fmt.Sprintf("Above %s (strictly more), the kubelet evicts the pod (on nodes with localStorageCapacityIsolation, the default), from volume stats it refreshes only every minute or two, without honouring PodDisruptionBudgets. ", FormatBytes(*l.LimitBytes)) +
		fmt.Sprintf(guardEvicts, "EmptyDirOverLimit") + nearNote(l, "EmptyDirNearLimit")
}

func podEnforcement(l Limit) string {
	if l.LimitBytes == nil {
		return "No container has an ephemeral-storage limit: the pod has none, and nothing evicts it for its disk use until the node runs short of disk (node-pressure eviction, which picks the biggest users first)."
	}
	return fmt.Sprintf("The pod's limit is its containers' ephemeral-storage limits added up. Above %s, the kubelet evicts the pod, without honouring PodDisruptionBudgets. ", FormatBytes(*l.LimitBytes)) +
		fmt.Sprintf(guardEvicts, "PodEphemeralStorageOverLimit") + nearNote(l, "PodEphemeralStorageNearLimit")
}

func containerEnforcement(l Limit) string {
	if l.LimitBytes == nil {
		return "No ephemeral-storage limit of its own: it counts toward the pod's limit only."
	}
	return fmt.Sprintf("Above %s (its logs and writable layer), the kubelet evicts the whole pod, without honouring PodDisruptionBudgets. ", FormatBytes(*l.LimitBytes)) +
		fmt.Sprintf(guardEvicts, "ContainerEphemeralStorageOverLimit") + nearNote(l, "ContainerEphemeralStorageNearLimit")
}

// nearNote says when the warning before the limit comes, or that it is passed.
func nearNote(l Limit, alert string) string {
	used, limit := l.UsedBytes, *l.LimitBytes
	switch {
	case used > limit:
		return fmt.Sprintf(" It is OVER its limit now by %s: expect the eviction.", FormatBytes(used-limit))
	case float64(used) > 0.9*float64(limit):
		return fmt.Sprintf(" Above 90%% now: %s fires after 5 minutes there; %s left.", alert, FormatBytes(limit-used))
	}
	return fmt.Sprintf(" Above 90%% (%s), %s warns after 5 minutes; %s left now.", FormatBytes(limit*9/10), alert, FormatBytes(limit-used))
}

// disruption reads the PodDisruptionBudgets that select pod, with the user's credentials.
func disruption(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) Disruption {
	list, err := client.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Disruption{}
	}
	d := Disruption{Checked: true}
	allowed := true
	for i := range list.Items {
		b := &list.Items[i]
		if !selects(b, pod) {
			continue
		}
		d.Budgets = append(d.Budgets, b.Name)
		if b.Status.DisruptionsAllowed < 1 {
			allowed = false
		}
	}
	slices.Sort(d.Budgets)
	d.EvictionAllowed = &allowed
	return d
}

func selects(b *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	if b.Spec.Selector == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil || s.Empty() {
		// The Eviction API treats an empty selector as matching every pod of the namespace.
		return err == nil
	}
	return s.Matches(labels.Set(pod.Labels))
}

// Write prints the explanation for a person.
func (x *Explanation) Write(w io.Writer) error {
	var b strings.Builder
	// Every name here comes from the cluster or the exporter: printed Printable.
	printf := func(format string, args ...any) { b.WriteString(Sprintf(format, args...)) }
	printf("Pod %s/%s on node %s, measured live at %s (source %s).\n", x.Namespace, x.Pod, x.Node,
		x.MeasuredAt.Local().Format("15:04:05"), x.Source)
	if len(x.Limits) == 0 {
		b.WriteString("\nThe pod has no emptyDir volume and no ephemeral-storage limit: nothing of it is measured.\n")
	}
	for _, l := range x.Limits {
		b.WriteString("\n")
		title := l.Kind
		if l.Name != "" {
			title += " " + Printable(l.Name)
		}
		if l.Medium != "" && l.Medium != "disk" {
			title += " (medium " + Printable(l.Medium) + ")"
		}
		used := FormatBytes(l.UsedBytes)
		if l.LowerBound {
			used = "at least " + used
		}
		switch {
		case l.LimitBytes == nil:
			printf("%s: %s used, no limit\n", title, used)
		case *l.LimitBytes > 0:
			printf("%s: %s used of %s (%s)\n", title, used, FormatBytes(*l.LimitBytes),
				FormatPercent(100*float64(l.UsedBytes)/float64(*l.LimitBytes)))
		default:
			printf("%s: %s used, limit 0\n", title, used)
		}
		for _, p := range l.Parts {
			mark := ""
			if !p.Counts {
				mark = " (not counted)"
			}
			printf("  %-15s %8s%s  %s\n", p.Name, FormatBytes(p.Bytes), mark, p.What)
		}
		printf("  %s\n", l.Enforcement)
	}
	b.WriteString("\n")
	switch {
	case !x.Disruption.Checked:
		b.WriteString("PodDisruptionBudgets: not checked (you may not list them in this namespace).\n")
	case len(x.Disruption.Budgets) == 0:
		b.WriteString("PodDisruptionBudgets: none selects this pod; an eviction by emptyDir guard goes through at once.\n")
	case *x.Disruption.EvictionAllowed:
		printf("PodDisruptionBudgets: %s, allowing a disruption now: an eviction by emptyDir guard goes through.\n", strings.Join(x.Disruption.Budgets, ", "))
	default:
		printf("PodDisruptionBudgets: %s, allowing no disruption now: emptyDir guard's eviction waits (and retries) until one is allowed; the kubelet's does not wait.\n", strings.Join(x.Disruption.Budgets, ", "))
	}
	if x.OptedOut {
		printf("The pod is annotated %s=false: where the operator allows opting out in this namespace, emptyDir guard leaves it alone (the kubelet does not).\n", optOutAnnotation)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
