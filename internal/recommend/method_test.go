package recommend

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

const mi = 1 << 20

// TestRound: the ladder as the docs print it, each step at most ×1.25, every value a whole
// MiB, and a value on the ladder is its own rounding.
func TestRound(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "16Mi"}, {1, "16Mi"}, {16 * mi, "16Mi"}, {16*mi + 1, "20Mi"},
		{200 * mi, "224Mi"}, {256 * mi, "256Mi"}, {257 * mi, "320Mi"}, {321 * mi, "384Mi"},
		{500 * mi, "512Mi"}, {513 * mi, "640Mi"}, {700 * mi, "768Mi"}, {800 * mi, "896Mi"},
		{900 * mi, "1Gi"}, {1025 * mi, "1280Mi"}, {1.3 * 1024 * mi, "1536Mi"}, {1.6 * 1024 * mi, "1792Mi"},
		{2.1 * 1024 * mi, "2560Mi"}, {3.2 * 1024 * mi, "3584Mi"}, {4.5 * 1024 * mi, "5Gi"}, {9 * 1024 * mi, "10Gi"},
		{100 * 1024 * mi, "112Gi"}, {1100 * 1024 * mi, "1280Gi"},
	} {
		if got := Format(Round(tc.in)); got != tc.want {
			t.Errorf("Round(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	prev := Round(0)
	for x := float64(MinBytes); x < 1<<44; x = Round(x) + 1 {
		r := Round(x)
		if r < x || r > prev*1.25 || math.Mod(r, mi) != 0 || Round(r) != r {
			t.Fatalf("Round(%v) = %v after %v: below it, a step above ×1.25, not whole MiB or not stable", x, r, prev)
		}
		prev = r
	}
}

// TestQuantile against values quantile_over_time gives (promql's own test cases).
func TestQuantile(t *testing.T) {
	v := []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for q, want := range map[float64]float64{0: 0, 0.5: 50, 0.95: 95, 1: 100, 0.33: 33} {
		if got := Quantile(q, v); math.Abs(got-want) > 1e-9 {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := Quantile(0.9, []float64{3, 1, 2}); math.Abs(got-2.8) > 1e-9 {
		t.Errorf("unsorted: %v, want 2.8", got)
	}
	if !math.IsNaN(Quantile(0.5, nil)) || !math.IsInf(Quantile(-1, v), -1) || !math.IsInf(Quantile(2, v), 1) {
		t.Error("edge cases differ from quantile_over_time")
	}
}

// points is n points of value v.
func points(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

var volume = Target{Namespace: "shop", WorkloadKind: "Deployment", Workload: "cart", Kind: KindVolume, Name: "cache"}

// TestTooLittleHistory: below MinHistory there is no suggestion, and it says how much there is.
func TestTooLittleHistory(t *testing.T) {
	c := DefaultConfig()
	short := Suggest(volume, Summarize(points(287, 100*mi), c.Quantile), c) // 23h55m
	if short.Limit != 0 || short.Request != 0 || !strings.Contains(short.Insufficient, "only 23h of history, 1d needed") {
		t.Errorf("287 points: %+v", short)
	}
	enough := Suggest(volume, Summarize(points(288, 100*mi), c.Quantile), c)
	if enough.Insufficient != "" || Format(enough.Limit) != "160Mi" || enough.Request != 0 {
		t.Errorf("288 points: %+v (100Mi+30%% is 130Mi, on the ladder 160Mi; a volume has no request)", enough)
	}
	if got := Suggest(volume, Summarize(nil, c.Quantile), c); !strings.Contains(got.Insufficient, "only 0m of history") {
		t.Errorf("no points: %q", got.Insufficient)
	}
}

// TestSpike: one spike sets the limit (a lower one would have evicted at it), not the request.
func TestSpike(t *testing.T) {
	c := DefaultConfig()
	v := points(2016, 100*mi)
	v[1000] = 3000 * mi
	ct := volume
	ct.Kind, ct.Name = KindContainer, "app"
	s := Suggest(ct, Summarize(v, c.Quantile), c)
	if Format(s.Request) != "112Mi" || Format(s.Limit) != "4Gi" || !s.Spiky {
		t.Errorf("spike: request %s limit %s spiky %v, want 112Mi, 4Gi (3000Mi+30%% = 3900Mi), true", Format(s.Request), Format(s.Limit), s.Spiky)
	}
	s = Suggest(ct, Summarize(points(2016, 100*mi), c.Quantile), c)
	if s.Spiky {
		t.Error("a flat usage is spiky")
	}
}

// TestRestarts: the pooled points of a workload whose pods restart (usage back to 0 and
// growing again) and are recreated (a gap, then a new pod) are summarized over what was
// measured: the gap is no history, and the sawtooth's top is the peak.
func TestRestarts(t *testing.T) {
	c := DefaultConfig()
	var v []float64
	for day := range 3 { // a pod per day, growing to 500Mi before its restart
		for i := range 200 {
			v = append(v, float64(i+1)*2.5*mi+float64(day))
		}
	}
	u := Summarize(v, c.Quantile)
	if u.Points != 600 || u.History != 50*time.Hour || u.Peak != 500*mi+2 {
		t.Errorf("usage %+v", u)
	}
	s := Suggest(volume, u, c)
	if Format(s.Limit) != "768Mi" {
		t.Errorf("limit %s, want 768Mi (500Mi+30%% = 650Mi)", Format(s.Limit))
	}
}

// TestCoverPod: container limits sized on the containers' own usage are raised to cover what
// the pod uses beside them (its emptyDirs), on the container with the largest limit.
func TestCoverPod(t *testing.T) {
	w := Target{Namespace: "shop", WorkloadKind: "Deployment", Workload: "cart"}
	c := func(name string, limit float64) Suggestion {
		t := w
		t.Kind, t.Name = KindContainer, name
		return Suggestion{Target: t, Limit: limit}
	}
	pod := w
	pod.Kind = KindPod
	ss := []Suggestion{c("app", 256*mi), c("sidecar", 64*mi), {Target: pod, Limit: 2048 * mi}}
	CoverPod(ss)
	if Format(ss[0].Limit) != "2Gi" || !ss[0].RaisedForPod || ss[1].Limit != 64*mi || ss[1].RaisedForPod {
		t.Errorf("after CoverPod: %s raised %v, %s raised %v; want 2Gi (1984Mi rounded up) raised, 64Mi", Format(ss[0].Limit), ss[0].RaisedForPod, Format(ss[1].Limit), ss[1].RaisedForPod)
	}
	covered := []Suggestion{c("app", 2048*mi), {Target: pod, Limit: 2048 * mi}}
	CoverPod(covered)
	if covered[0].RaisedForPod {
		t.Error("raised a limit that covers the pod")
	}
	unknown := []Suggestion{c("app", 256*mi), c("new", 0), {Target: pod, Limit: 2048 * mi}}
	CoverPod(unknown)
	if unknown[0].RaisedForPod {
		t.Error("raised a limit while a container of the pod has no suggestion")
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Window = time.Minute },
		func(c *Config) { c.Window = 7*time.Hour + time.Minute },
		func(c *Config) { c.Quantile = 1.5 },
		func(c *Config) { c.Headroom = -0.1 },
		func(c *Config) { c.MinHistory = 8 * 24 * time.Hour },
		func(c *Config) { c.Step = 10 * time.Minute },
		func(c *Config) { c.Step = 1500 * time.Millisecond },
		func(c *Config) { c.Step, c.Window = 7*time.Second, time.Hour },
	} {
		c := DefaultConfig()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("%+v validates", c)
		}
	}
}

// TestStep: a finer step than the rules' is valid for a window of whole steps, counts history
// by its own points, and reads the exporter's series only (the rules record 5m points).
func TestStep(t *testing.T) {
	c := Config{Window: 30 * time.Minute, Quantile: 0.95, Headroom: 0.3, MinHistory: 5 * time.Minute, Step: 30 * time.Second}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if u := SummarizeEvery(points(10, mi), c.Quantile, c.Step); u.History != 5*time.Minute {
		t.Errorf("10 points every 30s: history %s, want 5m", u.History)
	}
	var asked []string
	q := querierFunc(func(query string) { asked = append(asked, query) })
	if _, err := Recommend(context.Background(), q, Query{Config: c, Source: SourceAuto}); err != nil {
		t.Fatal(err)
	}
	for _, a := range asked {
		if strings.Contains(a, ":max5m") {
			t.Errorf("step 30s read the recorded 5m series: %s", a)
		}
	}
	if !slices.ContainsFunc(asked, func(a string) bool { return strings.Contains(a, "[30s]") && strings.HasSuffix(a, "[30m:30s]") }) {
		t.Errorf("no subquery at a 30s step among %q", asked)
	}
	if _, err := Recommend(context.Background(), q, Query{Config: c, Source: SourceRecorded}); err == nil {
		t.Error("step 30s from the recorded series: no error")
	}
}

// querierFunc answers every query with nothing, telling f what was asked.
type querierFunc func(query string)

func (f querierFunc) Query(_ context.Context, query string, _ time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error) {
	f(query)
	if strings.HasSuffix(query, "]") {
		return model.Matrix{}, nil, nil, nil
	}
	return model.Vector{}, nil, nil, nil
}

func TestHours(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", 3 * time.Hour: "3h", 26 * time.Hour: "1d2h", 7*24*time.Hour + 5*time.Minute: "7d"} {
		if got := Hours(d); got != want {
			t.Errorf("Hours(%s) = %s, want %s", d, got, want)
		}
	}
}
