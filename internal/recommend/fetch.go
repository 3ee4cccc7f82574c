package recommend

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Source says where the pooled points come from.
type Source string

const (
	// SourceAuto reads the recorded step series where the rules record them, and computes
	// the points from the exporter's series (a subquery) for a kind without any.
	SourceAuto Source = "auto"
	// SourceRecorded reads the recorded step series only.
	SourceRecorded Source = "recorded"
	// SourceRaw computes the points from the exporter's series always: a window longer than
	// the rules have recorded, or rules not installed.
	SourceRaw Source = "raw"
)

// Querier is the part of the Prometheus HTTP API Recommend uses (promv1.API has it).
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error)
}

// Query is one run of Recommend.
type Query struct {
	Config
	Filter
	Source Source
	// At is the end of the window; zero: now.
	At time.Time
	// Progress, when set, is told each query before it is sent.
	Progress func(what string)
}

// Recommend reads the usage of the workloads q selects from Prometheus and suggests their
// limits; sorted by namespace, workload, then volumes, containers and the pod.
func Recommend(ctx context.Context, api Querier, q Query) ([]Suggestion, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	at := q.At
	if at.IsZero() {
		at = time.Now()
	}
	window := model.Duration(q.Window).String()
	progress := func(what string) {
		if q.Progress != nil {
			q.Progress(what)
		}
	}
	var out []Suggestion
	pods := map[Target]int{}
	progress("pods per workload")
	v, err := instant(ctx, api, podsExpr(q.Filter, window), at)
	if err != nil {
		return nil, err
	}
	for _, s := range v {
		pods[target(s.Metric, KindPod, "")] = int(s.Value)
	}
	for _, k := range []Kind{KindVolume, KindContainer, KindPod} {
		progress(string(k) + " usage")
		points, err := stepPoints(ctx, api, k, q, window, at)
		if err != nil {
			return nil, err
		}
		progress(string(k) + " limits")
		current := map[Target]float64{}
		cv, err := instant(ctx, api, currentExpr(k, q.Filter), at)
		if err != nil {
			return nil, err
		}
		for _, s := range cv {
			current[target(s.Metric, k, kinds[k].label)] = float64(s.Value)
		}
		for t, values := range points {
			s := Suggest(t, SummarizeEvery(values, q.Quantile, q.step()), q.Config)
			s.Pods = pods[Target{Namespace: t.Namespace, WorkloadKind: t.WorkloadKind, Workload: t.Workload, Kind: KindPod}]
			if c, ok := current[t]; ok {
				s.Current = &c
			}
			out = append(out, s)
		}
	}
	CoverPod(out)
	order := map[Kind]int{KindVolume: 0, KindContainer: 1, KindPod: 2}
	slices.SortFunc(out, func(a, b Suggestion) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Workload, b.Workload),
			cmp.Compare(a.WorkloadKind, b.WorkloadKind), cmp.Compare(order[a.Kind], order[b.Kind]), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// stepPoints are the pooled points of every target of kind k over the window ending at at.
func stepPoints(ctx context.Context, api Querier, k Kind, q Query, window string, at time.Time) (map[Target][]float64, error) {
	step := model.Duration(q.step()).String()
	exprs := map[Source]string{
		SourceRecorded: selector(kinds[k].step, q.matchers(true)...) + "[" + window + "]",
		// Subquery steps are aligned to multiples of the step since the epoch, as the rules'
		// evaluations are not: the same method, its points at other instants.
		SourceRaw: "(" + stepExpr(k, q.Filter, step) + ")[" + window + ":" + step + "]",
	}
	try := []Source{SourceRecorded, SourceRaw}
	if q.step() != Step {
		// The rules record 5-minute points only.
		if q.Source == SourceRecorded {
			return nil, fmt.Errorf("the recorded series have a step of %s, not %s: use the source raw", model.Duration(Step), step)
		}
		try = []Source{SourceRaw}
	}
	switch q.Source {
	case SourceRecorded, SourceRaw:
		try = []Source{q.Source}
	case SourceAuto, "":
	default:
		return nil, fmt.Errorf("unknown source %q (auto, recorded or raw)", q.Source)
	}
	for _, src := range try {
		res, _, _, err := api.Query(ctx, exprs[src], at)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", exprs[src], err)
		}
		m, ok := res.(model.Matrix)
		if !ok {
			return nil, fmt.Errorf("query %s: a %s, not a matrix", exprs[src], res.Type())
		}
		if len(m) == 0 {
			continue
		}
		points := map[Target][]float64{}
		for _, s := range m {
			t := target(s.Metric, k, kinds[k].label)
			for _, p := range s.Values {
				points[t] = append(points[t], float64(p.Value))
			}
		}
		return points, nil
	}
	return nil, nil
}

// instant runs expr at at and returns its vector.
func instant(ctx context.Context, api Querier, expr string, at time.Time) (model.Vector, error) {
	res, _, _, err := api.Query(ctx, expr, at)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	v, ok := res.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: a %s, not a vector", expr, res.Type())
	}
	return v, nil
}

// target names the series m of kind k.
func target(m model.Metric, k Kind, label string) Target {
	t := Target{Namespace: string(m["namespace"]), WorkloadKind: string(m["workload_kind"]),
		Workload: string(m["workload"]), Kind: k}
	if label != "" {
		t.Name = string(m[model.LabelName(label)])
	}
	return t
}
