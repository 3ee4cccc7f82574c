package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
	"github.com/emptydir-guard/emptydir-guard/internal/recommend"
)

// recommendOptions are recommend's settings beside the shared ones; the method's defaults
// are recommend.DefaultConfig's, which the recording rules use too.
type recommendOptions struct {
	*plugin.Options
	recommend.Config
	AllNamespaces bool
	Selector      string
	Source        string
	// Requests false leaves the requests out of -o patch (nodes with
	// localStorageCapacityIsolation: false refuse pods that request ephemeral storage).
	Requests bool

	// Prometheus and Client replace the ones the flags make (tests).
	Prometheus recommend.Querier
	Client     kubernetes.Interface
}

// durationValue is a flag of Prometheus durations (7d, 1w, 36h).
type durationValue struct{ d *time.Duration }

// String writes whole days as days (7d, as the docs and the rules' names say), else as
// Prometheus does.
func (v durationValue) String() string {
	if d := *v.d; d > 0 && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return model.Duration(*v.d).String()
}
func (v durationValue) Type() string { return "duration" }
func (v durationValue) Set(s string) error {
	d, err := model.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = time.Duration(d)
	return nil
}

func newRecommendCmd(o *plugin.Options) *cobra.Command {
	return recommendCmd(&recommendOptions{Options: o, Config: recommend.DefaultConfig(), Source: string(recommend.SourceAuto), Requests: true})
}

// recommendCmd is the command of r, whose fields hold the defaults its flags show.
func recommendCmd(r *recommendOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recommend",
		Short: "sizeLimits and ephemeral-storage requests and limits from each workload's measured usage",
		Long: `Suggests, per workload, a sizeLimit for each disk emptyDir and an ephemeral-storage request
and limit for each container from the usage Prometheus holds over --window (the limit: the peak +
--headroom; the request: the --quantile). The method: docs/recommendations.md.`,
		Example: `  # One kubectl patch command per workload of namespace shop, to review and run
  kubectl emptydir recommend -n shop -o patch --prometheus-url http://localhost:9090 > patches.sh`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&r.AllNamespaces, "all-namespaces", "A", r.AllNamespaces, "Every namespace.")
	f.StringVarP(&r.Selector, "selector", "l", r.Selector, "Label selector of the workloads (=, ==, !=, in, notin).")
	f.Var(durationValue{&r.Window}, "window", "How far back to read the usage (a whole number of --step).")
	f.Var(durationValue{&r.MinHistory}, "min-history", "The least history that backs a suggestion.")
	f.Var(durationValue{&r.Step}, "step", "Resolution of the usage points, 1s to 5m: below 5m, computed from the exporter's series (the recorded ones are 5m), for a short --window.")
	f.Float64Var(&r.Quantile, "quantile", r.Quantile, "Quantile of the usage that sets the request (0 to 1).")
	f.Float64Var(&r.Headroom, "headroom", r.Headroom, "Share added to the peak for limits and sizeLimits (0.3: +30 %).")
	f.StringVar(&r.Source, "source", r.Source, "auto (the recorded series, else the exporter's), recorded or raw (the exporter's: a window longer than the rules have recorded).")
	f.BoolVar(&r.Requests, "requests", r.Requests, "Set requests in -o patch (false for nodes with localStorageCapacityIsolation: false).")
	r.AddPrometheusFlag(f)
	r.AddOutputFlags(cmd, true, "wide", "patch")
	return cmd
}

// Run queries Prometheus and prints the suggestions.
func (r *recommendOptions) Run(ctx context.Context) error {
	if r.PrometheusURL == "" && r.Prometheus == nil {
		return plugin.UsageError(errors.New("recommend reads the usage history from Prometheus: give --prometheus-url (kubectl port-forward to yours)"))
	}
	if err := r.Config.Validate(); err != nil {
		return plugin.UsageError(err)
	}
	format, err := r.Format("wide", "patch")
	if err != nil {
		return err
	}
	q := recommend.Query{Config: r.Config, Source: recommend.Source(r.Source)}
	if !r.AllNamespaces {
		if q.Namespace, err = r.Namespace(); err != nil {
			return err
		}
	}
	prom := r.Prometheus
	if prom == nil {
		if prom, err = plugin.NewPrometheus(r.PrometheusURL); err != nil {
			return err
		}
	}
	prog := plugin.NewProgress(r.ErrOut, "querying Prometheus", 0)
	q.Progress = prog.Doing
	ss, err := recommend.Recommend(ctx, prom, q)
	prog.Finish()
	if err != nil {
		return fmt.Errorf("querying Prometheus: %w", err)
	}
	if r.Selector != "" {
		if ss, err = r.selected(ctx, q.Namespace, ss); err != nil {
			return err
		}
	}
	if len(ss) == 0 {
		r.Warnf("no usage of any workload over the last %s in %s (is emptydir_pod_workload_info scraped? it needs emptyDir guard's exporter from this version on)", model.Duration(r.Window), scopeName(q.Namespace))
	}
	switch format {
	case plugin.FormatCustom:
		return r.printPatches(ctx, ss)
	case plugin.FormatObject:
		if ss == nil {
			ss = []recommend.Suggestion{}
		}
		return r.Print(format, nil, &recommendationList{TypeMeta: plugin.TypeMeta("RecommendationList"), Items: ss})
	}
	return r.Print(format, r.table(ss), nil)
}

// recommendationList is what recommend -o json|yaml prints.
type recommendationList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []recommend.Suggestion `json:"items"`
}

// DeepCopyObject copies l enough to print it.
func (l *recommendationList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

// Refs are the workloads, for -o name.
func (l *recommendationList) Refs() []plugin.Ref {
	refs := make([]plugin.Ref, len(l.Items))
	for i, s := range l.Items {
		refs[i] = plugin.Ref{Group: plugin.GroupOf(s.WorkloadKind), Kind: s.WorkloadKind, Name: s.Workload}
	}
	return refs
}

func scopeName(ns string) string {
	if ns == "" {
		return "any namespace"
	}
	return "namespace " + ns
}

// table is one row per target: what is in force, what is suggested, and what backs it.
func (r *recommendOptions) table(ss []recommend.Suggestion) *plugin.Table {
	q := "P" + strings.TrimPrefix(strconv.FormatFloat(r.Quantile*100, 'f', -1, 64), "0")
	t := &plugin.Table{Columns: []plugin.Column{{Name: "NAMESPACE"}, {Name: "WORKLOAD"}, {Name: "TARGET"}, {Name: "CURRENT"},
		{Name: "REQUEST"}, {Name: "LIMIT"}, {Name: "PEAK"}, {Name: q}, {Name: "HISTORY"}, {Name: "PODS", Wide: true}, {Name: "NOTE"}}}
	if !r.AllNamespaces {
		t.Columns = t.Columns[1:]
	}
	for _, s := range ss {
		target := string(s.Kind)
		if s.Name != "" {
			target += "/" + s.Name
		}
		current, request, limit := "<none>", "-", "-"
		if s.Current != nil {
			current = recommend.Format(*s.Current)
		}
		var note []string
		if s.Insufficient != "" {
			note = append(note, s.Insufficient)
		} else {
			limit = recommend.Format(s.Limit)
			if s.Kind != recommend.KindVolume {
				request = recommend.Format(s.Request)
			}
		}
		if s.Spiky {
			note = append(note, "spiky: the limit covers a peak above twice the "+q)
		}
		if s.RaisedForPod {
			note = append(note, "raised to cover the pod's emptyDirs")
		}
		if s.Kind == recommend.KindPod && s.Insufficient == "" {
			note = append(note, "the pod's total: its containers' limits must add up to "+limit)
		}
		cells := []string{s.Namespace, strings.ToLower(s.WorkloadKind) + "/" + s.Workload, target, current, request, limit,
			recommend.Format(s.Peak), recommend.Format(s.Quantile), recommend.Hours(s.History), strconv.Itoa(s.Pods), strings.Join(note, "; ")}
		if !r.AllNamespaces {
			cells = cells[1:]
		}
		t.Add(cells...)
	}
	return t
}

func (r *recommendOptions) client() (kubernetes.Interface, error) {
	if r.Client != nil {
		return r.Client, nil
	}
	return r.Clientset()
}

// selected keeps the suggestions of the workloads -l selects.
func (r *recommendOptions) selected(ctx context.Context, ns string, ss []recommend.Suggestion) ([]recommend.Suggestion, error) {
	client, err := r.client()
	if err != nil {
		return nil, err
	}
	opts := metav1.ListOptions{LabelSelector: r.Selector}
	keep := map[recommend.Workload]bool{}
	add := func(kind string, objs []metav1.Object) {
		for _, o := range objs {
			keep[recommend.Workload{Namespace: o.GetNamespace(), Kind: kind, Name: o.GetName()}] = true
		}
	}
	kinds := map[string]func() ([]metav1.Object, error){
		"Deployment": func() ([]metav1.Object, error) {
			l, err := client.AppsV1().Deployments(ns).List(ctx, opts)
			return objects(l, err)
		},
		"StatefulSet": func() ([]metav1.Object, error) {
			l, err := client.AppsV1().StatefulSets(ns).List(ctx, opts)
			return objects(l, err)
		},
		"DaemonSet": func() ([]metav1.Object, error) {
			l, err := client.AppsV1().DaemonSets(ns).List(ctx, opts)
			return objects(l, err)
		},
		"ReplicaSet": func() ([]metav1.Object, error) {
			l, err := client.AppsV1().ReplicaSets(ns).List(ctx, opts)
			return objects(l, err)
		},
		"Job": func() ([]metav1.Object, error) {
			l, err := client.BatchV1().Jobs(ns).List(ctx, opts)
			return objects(l, err)
		},
		"Pod": func() ([]metav1.Object, error) {
			l, err := client.CoreV1().Pods(ns).List(ctx, opts)
			return objects(l, err)
		},
	}
	wanted := map[string]bool{}
	for _, s := range ss {
		wanted[s.WorkloadKind] = true
	}
	for kind := range wanted {
		list, ok := kinds[kind]
		if !ok {
			continue // another controller's kind: its labels are not listed here
		}
		objs, err := list()
		if err != nil {
			return nil, fmt.Errorf("-l reads the workloads' labels from the API server: %w", err)
		}
		add(kind, objs)
	}
	var out []recommend.Suggestion
	for _, s := range ss {
		if keep[recommend.WorkloadOf(s)] {
			out = append(out, s)
		}
	}
	return out, nil
}

// objects is the items of a typed list as metav1.Objects.
func objects(l runtime.Object, err error) ([]metav1.Object, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(items))
	for _, it := range items {
		o, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// printPatches writes one kubectl patch command per workload with a suggestion, each after a
// comment of what backs it; what cannot be patched is a comment saying why. The output is run
// as a shell script, and the names in it are Prometheus labels others may have written: the
// comments' values are plugin.Printable (no line break ends a comment early), a workload whose
// namespace, kind or name is no valid Kubernetes name is only a comment, and every word of a
// command is quoted (recommend.PatchCommand).
func (r *recommendOptions) printPatches(ctx context.Context, ss []recommend.Suggestion) error {
	var order []recommend.Workload
	by := map[recommend.Workload][]recommend.Suggestion{}
	for _, s := range ss {
		w := recommend.WorkloadOf(s)
		if by[w] == nil {
			order = append(order, w)
		}
		by[w] = append(by[w], s)
	}
	comment := func(format string, args ...any) { fmt.Fprint(r.Out, plugin.Sprintf("#"+format+"\n", args...)) }
	var client kubernetes.Interface
	for _, w := range order {
		group := by[w]
		if what, value := w.Invalid(); what != "" {
			comment(" skipped: a workload whose %s %s is no valid Kubernetes name", what, strconv.Quote(value))
			continue
		}
		comment(" %s %s/%s: %s of history, %d pods", w.Kind, w.Namespace, w.Name, recommend.Hours(maxHistory(group)), group[0].Pods)
		for _, s := range group {
			if s.Insufficient != "" && s.Kind != recommend.KindPod {
				comment("   %s %s left out: %s", s.Kind, s.Name, s.Insufficient)
			}
		}
		if _, why := recommend.Patchable(w.Kind); why != "" {
			comment("   not patched: %s", why)
			continue
		}
		if client == nil {
			var err error
			if client, err = r.client(); err != nil {
				return err
			}
		}
		tmpl, resource, err := podTemplate(ctx, client, w)
		if err != nil {
			comment("   not patched: %v", err)
			continue
		}
		patch, skipped, err := recommend.Patch(w.Kind, tmpl, group, r.Requests)
		if err != nil {
			return err
		}
		for _, s := range skipped {
			comment("   %s", s)
		}
		if patch == nil {
			comment("   nothing to patch")
			continue
		}
		line, err := recommend.PatchCommand(w, resource, patch)
		if err != nil {
			return err
		}
		fmt.Fprintln(r.Out, line)
	}
	return nil
}

func maxHistory(ss []recommend.Suggestion) time.Duration {
	var h time.Duration
	for _, s := range ss {
		h = max(h, s.History)
	}
	return h
}

// podTemplate reads the pod template of w, and the resource kubectl patch names it by.
func podTemplate(ctx context.Context, client kubernetes.Interface, w recommend.Workload) (*corev1.PodSpec, string, error) {
	get := metav1.GetOptions{}
	switch w.Kind {
	case "Deployment":
		d, err := client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, get)
		if err != nil {
			return nil, "", err
		}
		return &d.Spec.Template.Spec, "deployment", nil
	case "StatefulSet":
		d, err := client.AppsV1().StatefulSets(w.Namespace).Get(ctx, w.Name, get)
		if err != nil {
			return nil, "", err
		}
		return &d.Spec.Template.Spec, "statefulset", nil
	case "DaemonSet":
		d, err := client.AppsV1().DaemonSets(w.Namespace).Get(ctx, w.Name, get)
		if err != nil {
			return nil, "", err
		}
		return &d.Spec.Template.Spec, "daemonset", nil
	case "ReplicaSet":
		d, err := client.AppsV1().ReplicaSets(w.Namespace).Get(ctx, w.Name, get)
		if err != nil {
			return nil, "", err
		}
		return &d.Spec.Template.Spec, "replicaset", nil
	}
	return nil, "", fmt.Errorf("a %s has no pod template kubectl patch changes", w.Kind)
}
