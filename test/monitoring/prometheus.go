package monitoring

import (
	"context"
	"fmt"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Sample is one series of an instant or range query result, in the types tests compare.
type Sample struct {
	Metric map[string]string
	// Value is the instant value (vector and scalar results), or the last point of a matrix
	// result; Values are the points of a matrix result.
	Value  float64
	Time   time.Time
	Values []Point
}

// Point is one sample of a range result.
type Point struct {
	Time  time.Time
	Value float64
}

// Query runs an instant query now. Scalar results come back as one sample without labels;
// a range selector (`metric[5m]`) gives its raw samples as Values.
func (m *Stack) Query(ctx context.Context, expr string) ([]Sample, error) {
	v, _, _, err := m.prometheus.Query(ctx, expr, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	return samples(v)
}

// QueryRange runs a range query.
func (m *Stack) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Sample, error) {
	v, _, _, err := m.prometheus.QueryRange(ctx, expr, promv1.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, fmt.Errorf("query_range %q: %w", expr, err)
	}
	return samples(v)
}

// PrometheusAlerts returns the pending and firing alerts of Prometheus' rules.
func (m *Stack) PrometheusAlerts(ctx context.Context) ([]promv1.Alert, error) {
	res, err := m.prometheus.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("prometheus alerts: %w", err)
	}
	return res.Alerts, nil
}

// Rules returns Prometheus' rule groups with each rule's health and last error.
func (m *Stack) Rules(ctx context.Context) ([]promv1.RuleGroup, error) {
	res, err := m.prometheus.Rules(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus rules: %w", err)
	}
	return res.Groups, nil
}

// samples converts a query result to Samples.
func samples(v model.Value) ([]Sample, error) {
	switch v := v.(type) {
	case model.Vector:
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			out = append(out, Sample{Metric: labels(s.Metric), Value: float64(s.Value), Time: s.Timestamp.Time()})
		}
		return out, nil
	case model.Matrix:
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			smp := Sample{Metric: labels(s.Metric)}
			for _, p := range s.Values {
				smp.Values = append(smp.Values, Point{Time: p.Timestamp.Time(), Value: float64(p.Value)})
			}
			if n := len(smp.Values); n > 0 {
				smp.Value, smp.Time = smp.Values[n-1].Value, smp.Values[n-1].Time
			}
			out = append(out, smp)
		}
		return out, nil
	case *model.Scalar:
		return []Sample{{Metric: map[string]string{}, Value: float64(v.Value), Time: v.Timestamp.Time()}}, nil
	default:
		return nil, fmt.Errorf("unsupported result type %T", v)
	}
}

func labels(m model.Metric) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = string(v)
	}
	return out
}

// Config returns the configuration Prometheus has loaded, as YAML.
func (m *Stack) Config(ctx context.Context) (string, error) {
	res, err := m.prometheus.Config(ctx)
	if err != nil {
		return "", fmt.Errorf("prometheus config: %w", err)
	}
	return res.YAML, nil
}
