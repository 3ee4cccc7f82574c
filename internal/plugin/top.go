package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Sources of `top`.
const (
	SourceExporters  = "exporters"
	SourcePrometheus = "prometheus"
)

// UsageList is what `top -o json|yaml` prints.
type UsageList struct {
	metav1.TypeMeta `json:",inline"`
	// Source is where the numbers come from: exporters (live, through the API server) or
	// prometheus.
	Source string  `json:"source"`
	Items  []Usage `json:"items"`
}

// DeepCopyObject copies l enough to print it.
func (l *UsageList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

// Refs are the pods of the rows, for -o name.
func (l *UsageList) Refs() []Ref {
	refs := make([]Ref, len(l.Items))
	for i, u := range l.Items {
		refs[i] = Ref{Kind: "Pod", Name: u.Pod}
	}
	return refs
}

// TopOptions are `top`'s settings beside the shared ones.
type TopOptions struct {
	*Options
	// Pod, when set, narrows to that pod of the namespace, as kubectl top pod POD does.
	Pod           string
	AllNamespaces bool
	Selector      string
	Node          string
	// SortBy is one of SortKeys.
	SortBy string
	// Concurrency bounds the exporters scraped at once.
	Concurrency int

	// Client, Proxy and Prometheus replace the ones the kubeconfig and --prometheus-url
	// make (tests).
	Client     kubernetes.Interface
	Proxy      Proxy
	Prometheus PrometheusQuerier
}

// NewTopOptions returns top's defaults.
func NewTopOptions(o *Options) *TopOptions {
	return &TopOptions{Options: o, SortBy: SortPercent, Concurrency: 8}
}

// ErrPartial says some rows could not be read (an exporter unreachable): what could be read
// was printed, and the command exits 1.
var ErrPartial = errors.New("some measurements could not be read (see the warnings above)")

// validate checks the flags together, as kubectl top pod does.
func (o *TopOptions) validate() error {
	switch {
	case o.Concurrency < 1:
		return UsageError(errors.New("--concurrency must be at least 1"))
	case !slices.Contains(SortKeys, o.SortBy):
		return UsageError(fmt.Errorf("--sort-by accepts only %s", strings.Join(SortKeys, ", ")))
	case o.Pod != "" && o.Selector != "":
		return UsageError(errors.New("only one of POD or -l can be given"))
	case o.Pod != "" && o.AllNamespaces:
		return UsageError(errors.New("a pod cannot be retrieved by name across all namespaces: give -n, not -A"))
	}
	return nil
}

// Run measures and prints.
func (o *TopOptions) Run(ctx context.Context) error {
	if err := o.validate(); err != nil {
		return err
	}
	f, err := o.Format("wide")
	if err != nil {
		return err
	}
	scope := Scope{AllNamespaces: o.AllNamespaces, Selector: o.Selector, Node: o.Node, Pod: o.Pod}
	if !o.AllNamespaces {
		ns, err := o.Namespace()
		if err != nil {
			return err
		}
		scope.Namespace = ns
	}
	list := UsageList{TypeMeta: TypeMeta("UsageList")}
	var partial bool
	if o.PrometheusURL != "" || o.Prometheus != nil {
		list.Source = SourcePrometheus
		list.Items, err = o.fromPrometheus(ctx, scope)
	} else {
		list.Source = SourceExporters
		list.Items, partial, err = o.fromExporters(ctx, scope)
	}
	if err != nil {
		return err
	}
	if list.Items == nil {
		list.Items = []Usage{}
	}
	SortUsages(list.Items, o.SortBy)
	if len(list.Items) == 0 && (f == FormatTable || f == FormatWide) {
		if partial {
			return ErrPartial
		}
		where := "namespace " + scope.Namespace
		switch {
		case o.AllNamespaces:
			where = "any namespace"
		case o.Pod != "":
			where = "pod " + scope.Namespace + "/" + o.Pod
		}
		fmt.Fprint(o.ErrOut, Sprintf("No emptyDir volumes or ephemeral-storage limits found in %s.\n", where))
	} else if err := o.Print(f, topTable(list.Items, o.AllNamespaces), &list); err != nil {
		return err
	}
	if partial {
		return ErrPartial
	}
	return nil
}

func (o *TopOptions) client() (kubernetes.Interface, error) {
	if o.Client != nil {
		return o.Client, nil
	}
	c, err := o.Clientset()
	if err != nil {
		return nil, err
	}
	o.Client = c
	return c, nil
}

// fromExporters reads every exporter on the nodes of the user's pods, through the API
// server's pod proxy, and keeps the rows of the user's pods.
func (o *TopOptions) fromExporters(ctx context.Context, scope Scope) ([]Usage, bool, error) {
	client, err := o.client()
	if err != nil {
		return nil, false, err
	}
	proxy := o.Proxy
	if proxy == nil {
		proxy = RESTProxy{Client: client.CoreV1().RESTClient()}
	}
	exporters, err := FindExporters(ctx, client, o.GuardNamespace)
	if err != nil {
		return nil, false, err
	}
	s := &scraper{proxy: proxy, exporters: exporters, concurrency: o.Concurrency, errOut: o.ErrOut, results: map[string][]sample{}}
	// A user who may not list pods cluster-wide: the namespaces to try are the ones the
	// exporters report, which needs every exporter's (or --node's) answer first.
	candidates := func(ctx context.Context) ([]string, error) {
		nodes := slices.Sorted(maps.Keys(exporters))
		if scope.Node != "" {
			nodes = []string{scope.Node}
		}
		s.scrape(ctx, nodes)
		return s.namespaces(), nil
	}
	pods, err := VisiblePods(ctx, client, scope, candidates)
	if err != nil {
		return nil, false, err
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && relevant(p) {
			nodes[p.Spec.NodeName] = true
		}
	}
	var missing []string
	var want []string
	for n := range nodes {
		if _, ok := exporters[n]; !ok {
			missing = append(missing, n)
			continue
		}
		want = append(want, n)
	}
	sort.Strings(missing)
	for _, n := range missing {
		o.Warnf("no ready exporter on node %s: its pods are not shown", n)
	}
	s.scrape(ctx, want)
	var samples []sample
	for _, n := range want {
		samples = append(samples, s.results[n]...)
	}
	var out []Usage
	for _, u := range buildUsages(samples) {
		p, ok := pods[types.UID(u.UID)]
		if !ok || p.Namespace != u.Namespace || p.Name != u.Pod {
			continue
		}
		out = append(out, u)
	}
	return out, len(missing) > 0 || s.failed(want), nil
}

// relevant says whether p can have a row: an emptyDir volume or an ephemeral-storage limit.
func relevant(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

// scraper reads exporters' /metrics at most concurrency at once, each node once.
type scraper struct {
	proxy       Proxy
	exporters   map[string]Exporter
	concurrency int
	errOut      interface{ Write([]byte) (int, error) }

	mu      sync.Mutex
	results map[string][]sample
	errs    map[string]error
}

func (s *scraper) scrape(ctx context.Context, nodes []string) {
	var todo []string
	s.mu.Lock()
	for _, n := range nodes {
		if _, done := s.results[n]; done {
			continue
		}
		if _, failed := s.errs[n]; failed {
			continue
		}
		if _, ok := s.exporters[n]; ok {
			todo = append(todo, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(todo)
	prog := NewProgress(s.errOut, "reading exporters", len(todo))
	sem := make(chan struct{}, s.concurrency)
	var wg sync.WaitGroup
	for _, n := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done(); prog.Step() }()
			samples, err := scrape(ctx, s.proxy, s.exporters[n])
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				if s.errs == nil {
					s.errs = map[string]error{}
				}
				s.errs[n] = err
				return
			}
			s.results[n] = samples
		}()
	}
	wg.Wait()
	prog.Finish()
	for _, n := range todo {
		if err := s.errs[n]; err != nil {
			fmt.Fprint(s.errOut, Sprintf("Warning: %v\n", err))
		}
	}
}

func (s *scraper) failed(nodes []string) bool {
	for _, n := range nodes {
		if s.errs[n] != nil {
			return true
		}
	}
	return false
}

func (s *scraper) namespaces() []string {
	seen := map[string]bool{}
	for _, ss := range s.results {
		for _, x := range ss {
			if ns := x.labels["namespace"]; ns != "" {
				seen[ns] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// topTable is the table of top: NAMESPACE only with -A, as kubectl prints it.
func topTable(items []Usage, allNamespaces bool) *Table {
	t := &Table{Columns: []Column{{Name: "NAMESPACE"}, {Name: "POD"}, {Name: "TARGET"}, {Name: "USED"}, {Name: "LIMIT"},
		{Name: "USE%"}, {Name: "AGE"}, {Name: "NODE"}, {Name: "MEDIUM", Wide: true}, {Name: "UID", Wide: true}}}
	if !allNamespaces {
		t.Columns = t.Columns[1:]
	}
	for _, u := range items {
		used := FormatBytes(u.UsedBytes)
		if u.LowerBound {
			// An incomplete measurement counts less than is there (docs/metrics.md).
			used = ">=" + used
		}
		limit, pct, age, medium := "<none>", "<none>", "<unknown>", u.Medium
		if u.LimitBytes != nil {
			limit = FormatBytes(*u.LimitBytes)
		}
		if u.Percent != nil {
			pct = FormatPercent(*u.Percent)
		}
		if u.MeasurementAgeSeconds != nil {
			age = FormatAge(*u.MeasurementAgeSeconds)
			if u.MeasurementAgeIsBound {
				age = "<=" + age
			}
		}
		if medium == "" {
			medium = "<none>"
		}
		cells := []string{u.Namespace, u.Pod, u.Target(), used, limit, pct, age, u.Node, medium, u.UID}
		if !allNamespaces {
			cells = cells[1:]
		}
		t.Add(cells...)
	}
	return t
}
