package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
)

// PrometheusQuerier is the part of the Prometheus HTTP API top uses (promv1.API has it).
type PrometheusQuerier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error)
}

// NewPrometheus is a client of the Prometheus HTTP API at url.
func NewPrometheus(url string) (PrometheusQuerier, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, UsageError(fmt.Errorf("--prometheus-url: %w", err))
	}
	return promv1.NewAPI(c), nil
}

// topQueries are the instant queries of top for scope: the rows' families, and the nodes'
// oldest measurement behind a limit (which has no namespace label).
func topQueries(scope Scope) []string {
	var families []string
	for _, f := range topFamilies {
		if f != mNodeOldestTriggerAge {
			families = append(families, f)
		}
	}
	m := []string{fmt.Sprintf("__name__=~%q", strings.Join(families, "|"))}
	node := ""
	if scope.Node != "" {
		node = fmt.Sprintf("node=%q", scope.Node)
		m = append(m, node)
	}
	if !scope.AllNamespaces {
		m = append(m, fmt.Sprintf("namespace=%q", scope.Namespace))
	}
	if scope.Pod != "" {
		m = append(m, fmt.Sprintf("pod=%q", scope.Pod))
	}
	return []string{"{" + strings.Join(m, ",") + "}", mNodeOldestTriggerAge + "{" + node + "}"}
}

// fromPrometheus reads the exporters' series from Prometheus. It needs only HTTP access to
// Prometheus, and the API server only for -l (the pods' labels are not in these series).
func (o *TopOptions) fromPrometheus(ctx context.Context, scope Scope) ([]Usage, error) {
	q := o.Prometheus
	if q == nil {
		var err error
		if q, err = NewPrometheus(o.PrometheusURL); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	var samples []sample
	for _, query := range topQueries(scope) {
		v, warnings, _, err := q.Query(ctx, query, now)
		if err != nil {
			return nil, fmt.Errorf("querying Prometheus (%s): %w", query, err)
		}
		for _, w := range warnings {
			o.Warnf("Prometheus: %s", w)
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return nil, fmt.Errorf("querying Prometheus (%s): a %s, not a vector", query, v.Type())
		}
		for _, s := range vec {
			l := make(map[string]string, len(s.Metric))
			for k, v := range s.Metric {
				l[string(k)] = string(v)
			}
			samples = append(samples, sample{name: l["__name__"], labels: l, value: float64(s.Value), staleness: max(0, now.Sub(s.Timestamp.Time()))})
		}
	}
	rows := buildUsages(samples)
	if scope.Selector == "" {
		return rows, nil
	}
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	pods, err := VisiblePods(ctx, client, scope, nil)
	if err != nil {
		return nil, fmt.Errorf("-l needs the pods' labels from the API server: %w", err)
	}
	var out []Usage
	for _, u := range rows {
		if _, ok := pods[types.UID(u.UID)]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}
