// Package recommend computes the limits docs/recommendations.md describes: for each
// workload, a sizeLimit for each disk emptyDir and an ephemeral-storage request and limit for
// each container (and its pod), from the usage Prometheus holds. Usage series are joined to
// emptydir_pod_workload_info by uid, so a workload's pods pool; every Step the largest usage of
// any of its pods makes one point (recorded by the rules, StepName, or a subquery); the limit
// is Round(peak × (1 + Headroom)), the request Round(Quantile of the points), and fewer than
// MinHistory / Step points give no suggestion (docs/recommendations.md, "The method").
package recommend

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Step is the resolution of the pooled series: the interval of the recording rules' group
// and of the fallback subquery. Every raw sample falls in exactly one step.
const Step = 5 * time.Minute

// Config is how suggestions are computed; DefaultConfig holds the defaults the recording
// rules use, the flags of kubectl emptydir recommend bind to it.
type Config struct {
	// Window is how far back the usage is read.
	Window time.Duration
	// Quantile (0 to 1) of the pooled usage over Window that sets the request.
	Quantile float64
	// Headroom is the share added to the peak for the limit and the sizeLimit (0.3: +30 %).
	Headroom float64
	// MinHistory is the least history (points × Step) that backs a suggestion.
	MinHistory time.Duration
	// Step is the resolution of the pooled points; zero is Step, the only one the recording
	// rules record. A finer one (the exporter's series only) suits a short window.
	Step time.Duration
}

// step is c.Step, or Step when unset.
func (c Config) step() time.Duration {
	if c.Step == 0 {
		return Step
	}
	return c.Step
}

// DefaultConfig is what the recording rules compute (rules/emptydir-guard.rules.yml, group
// emptydir-guard.recommendations): a change here is a change there (TestRulesUseDefaults).
func DefaultConfig() Config {
	return Config{Window: 7 * 24 * time.Hour, Quantile: 0.95, Headroom: 0.3, MinHistory: 24 * time.Hour, Step: Step}
}

// Validate reports a Config no suggestion can come from.
func (c Config) Validate() error {
	step := c.step()
	switch {
	case step < time.Second || step%time.Second != 0 || step > Step:
		return fmt.Errorf("step %s is not a whole number of seconds from 1s to %s", step, Step)
	case c.Window < step:
		return fmt.Errorf("window %s is shorter than one step (%s)", c.Window, step)
	case c.Window%step != 0:
		return fmt.Errorf("window %s is not a whole number of steps (%s)", c.Window, step)
	case math.IsNaN(c.Quantile) || c.Quantile < 0 || c.Quantile > 1:
		return fmt.Errorf("quantile %v is not between 0 and 1", c.Quantile)
	case math.IsNaN(c.Headroom) || c.Headroom < 0:
		return fmt.Errorf("headroom %v is negative", c.Headroom)
	case c.MinHistory > c.Window:
		return fmt.Errorf("the least history %s is longer than the window %s", c.MinHistory, c.Window)
	}
	return nil
}

// Kind of target a suggestion is for.
type Kind string

const (
	// KindVolume is a disk emptyDir of the pod template, by volume name: a sizeLimit.
	KindVolume Kind = "volume"
	// KindContainer is a container, by name: an ephemeral-storage request and limit.
	KindContainer Kind = "container"
	// KindPod is the pod as a whole: what the kubelet compares with the sum of its
	// containers' limits (their logs and writable layers, and its disk emptyDirs).
	KindPod Kind = "pod"
)

// Target is what a suggestion is for.
type Target struct {
	Namespace    string `json:"namespace"`
	WorkloadKind string `json:"workloadKind"`
	Workload     string `json:"workload"`
	Kind         Kind   `json:"kind"`
	// Name is the volume's or the container's; empty for KindPod.
	Name string `json:"name,omitempty"`
}

// Usage is what the pooled points over the window say.
type Usage struct {
	// Points is how many steps had a measurement; History is Points × Step.
	Points  int           `json:"points"`
	History time.Duration `json:"-"`
	// HistorySeconds is History for JSON and YAML.
	HistorySeconds float64 `json:"historySeconds"`
	// Peak is the largest usage seen, Quantile the Config's quantile of the points, in bytes.
	Peak     float64 `json:"peakBytes"`
	Quantile float64 `json:"quantileBytes"`
}

// Suggestion is one target's suggested values.
type Suggestion struct {
	Target
	Usage
	// Pods is how many pods of the workload were measured over the window (0: not asked).
	Pods int `json:"pods,omitempty"`
	// Current is the largest limit in force among the workload's pods now (sizeLimit, the
	// container's or the pod's limit); nil when none has one.
	Current *float64 `json:"currentLimitBytes,omitempty"`
	// Request and Limit are the suggested values in bytes; 0 without a suggestion. A volume
	// gets a Limit only (its sizeLimit).
	Request float64 `json:"requestBytes,omitempty"`
	Limit   float64 `json:"limitBytes,omitempty"`
	// Insufficient says why there is no suggestion (too little history); empty with one.
	Insufficient string `json:"insufficient,omitempty"`
	// Spiky is set when the peak is more than twice the quantile: the limit covers a spike
	// that the request does not.
	Spiky bool `json:"spiky,omitempty"`
	// RaisedForPod is set on the container whose Limit CoverPod raised so that its pod's
	// containers' limits add up to the pod's own suggestion.
	RaisedForPod bool `json:"raisedForPod,omitempty"`
}

// Summarize computes Usage from the pooled points of one target (any order), one per Step.
func Summarize(values []float64, quantile float64) Usage {
	return SummarizeEvery(values, quantile, Step)
}

// SummarizeEvery is Summarize of points one per step.
func SummarizeEvery(values []float64, quantile float64, step time.Duration) Usage {
	u := Usage{Points: len(values), History: time.Duration(len(values)) * step}
	u.HistorySeconds = u.History.Seconds()
	if len(values) == 0 {
		return u
	}
	u.Peak = slices.Max(values)
	u.Quantile = Quantile(quantile, values)
	return u
}

// Suggest turns a target's usage into its suggestion under c.
func Suggest(t Target, u Usage, c Config) Suggestion {
	s := Suggestion{Target: t, Usage: u}
	if u.History < c.MinHistory {
		s.Insufficient = fmt.Sprintf("only %s of history, %s needed", hours(u.History), hours(c.MinHistory))
		return s
	}
	s.Limit = Round(u.Peak * (1 + c.Headroom))
	if t.Kind != KindVolume {
		s.Request = Round(u.Quantile)
	}
	s.Spiky = u.Peak > 2*u.Quantile
	return s
}

// hours writes d as people read a history, in whole hours down: 3h, 1d2h, 7d (23h55m is
// 23h: never more history than there is).
func hours(d time.Duration) string {
	h := int(d / time.Hour)
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case h < 24:
		return fmt.Sprintf("%dh", h)
	case h%24 == 0:
		return fmt.Sprintf("%dd", h/24)
	}
	return fmt.Sprintf("%dd%dh", h/24, h%24)
}

// Hours is how a history reads in the CLI's table (3h, 1d2h, 7d).
func Hours(d time.Duration) string { return hours(d) }

// Quantile is Prometheus' quantile_over_time of values (promql's quantile, v2 and v3): the
// values sorted, linear interpolation between the two nearest ranks of q·(n−1); NaN for no
// values, −Inf below 0 and +Inf above 1, as there.
func Quantile(q float64, values []float64) float64 {
	if len(values) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(+1)
	}
	v := slices.Clone(values)
	slices.Sort(v)
	n := float64(len(v))
	rank := q * (n - 1)
	lower := math.Max(0, math.Floor(rank))
	upper := math.Min(n-1, lower+1)
	weight := rank - math.Floor(rank)
	return v[int(lower)]*(1-weight) + v[int(upper)]*weight
}

// CoverPod raises container limits where the pod's own suggestion exceeds their sum: the
// kubelet evicts a pod whose usage (its containers' logs and writable layers, and its disk
// emptyDirs) exceeds the sum of its containers' limits, so limits sized on the containers'
// own usage alone would evict a pod whose emptyDirs hold data. The shortfall goes to the
// container with the largest limit, rounded up again; Raised marks it. ss is changed in place.
func CoverPod(ss []Suggestion) {
	type key struct{ ns, kind, name string }
	pods := map[key]int{}
	for i, s := range ss {
		if s.Kind == KindPod && s.Limit > 0 {
			pods[key{s.Namespace, s.WorkloadKind, s.Workload}] = i
		}
	}
	for k, pi := range pods {
		sum, largest, largestLimit := 0.0, -1, 0.0
		for i, s := range ss {
			if s.Kind != KindContainer || (key{s.Namespace, s.WorkloadKind, s.Workload}) != k {
				continue
			}
			if s.Limit == 0 {
				largest = -1 // a container without a suggestion: its share is unknown
				break
			}
			sum += s.Limit
			if largest < 0 || s.Limit > largestLimit {
				largest, largestLimit = i, s.Limit
			}
		}
		if largest < 0 || sum >= ss[pi].Limit {
			continue
		}
		ss[largest].Limit = Round(ss[largest].Limit + ss[pi].Limit - sum)
		ss[largest].RaisedForPod = true
	}
}
