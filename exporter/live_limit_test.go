package exporter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

type liveCall struct {
	code       int
	retryAfter string
	err        string
}

// limitFixture serves the live endpoint of an exporter with two global slots, whose source
// measures only when the test lets it (gate), and calls it as any remote address.
type limitFixture struct {
	gate *exportertest.Gate
	exp  *exporter.Exporter
	mux  *http.ServeMux
}

func newLimitFixture(t *testing.T, maxWait time.Duration) *limitFixture {
	t.Helper()
	gate := exportertest.NewGate()
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		return part.Measurement{UsedBytes: 4096, MeasuredAt: time.Now()}, nil
	}).Before(gate.Hold)
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, LiveConcurrency: 2,
		LiveMaxWait: maxWait, Pods: exportertest.NewPods(livePods()...)}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	f := &limitFixture{gate: gate, exp: exp, mux: mux}
	t.Cleanup(f.finishAll) // also on failure: no measurement stays held
	return f
}

// call requests a live measurement of empty-test1 from remote (ip:port) and returns the
// answer on the channel.
func (f *limitFixture) call(remote string) <-chan liveCall {
	out := make(chan liveCall, 1)
	go func() {
		r := httptest.NewRequest(http.MethodGet, "/live/namespaces/default/pods/empty-test1?uid="+liveUID+"&volume=empty", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		f.mux.ServeHTTP(w, r)
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		out <- liveCall{w.Code, w.Header().Get("Retry-After"), e.Error}
	}()
	return out
}

// finishAll lets every held and later measurement finish.
func (f *limitFixture) finishAll() { f.gate.Open() }

func TestLiveHandlerBoundsEachCaller(t *testing.T) {
	f := newLimitFixture(t, 100*time.Millisecond)

	// A pod holds one measurement...
	first := f.call("10.0.0.66:40001")
	<-f.gate.Started()
	// ...and asks again from another port of the same IP: refused once its wait is over,
	// without taking the second slot.
	again := <-f.call("10.0.0.66:40002")
	if again.code != http.StatusTooManyRequests || again.retryAfter != "1" {
		t.Errorf("second concurrent request of one caller: %d Retry-After %q (%s), want 429 with Retry-After 1",
			again.code, again.retryAfter, again.err)
	}
	if !strings.Contains(again.err, "10.0.0.66") || !strings.Contains(again.err, "one at a time") {
		t.Errorf("429 reason %q does not name the caller and the rule", again.err)
	}
	// The remediator still gets the other slot.
	remediator := f.call("10.0.0.7:50000")
	if pod := <-f.gate.Started(); pod != "empty-test1" {
		t.Fatalf("started %q", pod)
	}
	f.finishAll()
	for name, c := range map[string]<-chan liveCall{"first": first, "remediator": remediator} {
		if got := <-c; got.code != http.StatusOK {
			t.Errorf("%s request: %d %s, want 200", name, got.code, got.err)
		}
	}

	want := `
# HELP emptydir_exporter_live_requests_total Live measurement requests, by HTTP status code.
# TYPE emptydir_exporter_live_requests_total counter
emptydir_exporter_live_requests_total{code="200",node="node-1"} 2
emptydir_exporter_live_requests_total{code="400",node="node-1"} 0
emptydir_exporter_live_requests_total{code="404",node="node-1"} 0
emptydir_exporter_live_requests_total{code="429",node="node-1"} 1
emptydir_exporter_live_requests_total{code="503",node="node-1"} 0
`
	if err := testutil.CollectAndCompare(f.exp, strings.NewReader(want), "emptydir_exporter_live_requests_total"); err != nil {
		t.Error(err)
	}
}

// TestLiveHandlerQueuesACallersRequests: a caller's second request waits for its first
// (within the wait bound) instead of being refused, as concurrent webhook deliveries of
// the remediator do.
func TestLiveHandlerQueuesACallersRequests(t *testing.T) {
	f := newLimitFixture(t, time.Minute)
	first := f.call("10.0.0.7:50000")
	<-f.gate.Started()
	second := f.call("10.0.0.7:50001")

	f.finishAll()

	for name, c := range map[string]<-chan liveCall{"first": first, "second": second} {
		if got := <-c; got.code != http.StatusOK {
			t.Errorf("%s request: %d %s, want 200", name, got.code, got.err)
		}
	}
}

// TestLiveHandlerKeepsTheGlobalBound: with both slots held by two callers, a third waits
// and is refused with 503 and Retry-After once its wait is over.
func TestLiveHandlerKeepsTheGlobalBound(t *testing.T) {
	f := newLimitFixture(t, 100*time.Millisecond)
	a, b := f.call("10.0.0.1:1"), f.call("10.0.0.2:1")
	<-f.gate.Started()
	<-f.gate.Started()

	third := <-f.call("10.0.0.3:1")

	if third.code != http.StatusServiceUnavailable || third.retryAfter != "1" || !strings.Contains(third.err, "too many live measurements") {
		t.Errorf("third caller: %d Retry-After %q (%s), want 503, Retry-After 1, too many live measurements",
			third.code, third.retryAfter, third.err)
	}
	f.finishAll()
	for _, c := range []<-chan liveCall{a, b} {
		if got := <-c; got.code != http.StatusOK {
			t.Errorf("held request: %d %s, want 200", got.code, got.err)
		}
	}
}

// TestLiveHangUpLeavesTheMeasurementRunning: a caller that asks for a live measurement and
// hangs up does not cancel it. A live walk takes the place of the volume's periodic walk, so
// a pod asking for itself and hanging up every 50 ms used to leave its volume never measured
// (issue 18, item 8). The measurement goes on to its end, keeps the caller's turn until then
// (no new walk per request), and counts as done.
func TestLiveHangUpLeavesTheMeasurementRunning(t *testing.T) {
	f := newLimitFixture(t, 100*time.Millisecond)
	ctx, hangUp := context.WithCancel(context.Background())
	answered := make(chan int, 1)
	go func() {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/live/namespaces/default/pods/empty-test1?uid="+liveUID+"&volume=empty", nil)
		r.RemoteAddr = "10.0.0.66:40001"
		w := httptest.NewRecorder()
		f.mux.ServeHTTP(w, r)
		answered <- w.Code
	}()
	<-f.gate.Started()
	hangUp()
	if code := <-answered; code != http.StatusServiceUnavailable {
		t.Errorf("hung-up request answered %d, want 503 (nobody reads it)", code)
	}

	// Its measurement still holds the caller's turn.
	if again := <-f.call("10.0.0.66:40002"); again.code != http.StatusTooManyRequests {
		t.Errorf("the same caller while its hung-up measurement runs: %d %s, want 429", again.code, again.err)
	}
	f.finishAll()
	if got := <-f.call("10.0.0.66:40003"); got.code != http.StatusOK {
		t.Errorf("the same caller once the measurement ended: %d %s, want 200", got.code, got.err)
	}
	if err := f.gate.Err(); err != nil {
		t.Errorf("the hung-up request's measurement ended with context error %v, want it run to its end", err)
	}
}

// budgetFixture serves the live endpoint of an exporter whose every walk of a volume costs
// 3 CPU-s, over pods in namespaces tenant-0 .. tenant-<n-1>, one pod "big" each, and asks it
// as any caller at a test clock.
type budgetFixture struct {
	clk *exportertest.Clock
	exp *exporter.Exporter
	mux *http.ServeMux
}

func newBudgetFixture(t *testing.T, tenants int) *budgetFixture {
	t.Helper()
	clk := exportertest.NewClock(time.Now())
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		return part.Measurement{UsedBytes: 2 << 20, MeasuredAt: time.Now()}, nil
	}).Cost(3 * time.Second).Measurer()
	pods := make([]part.Pod, 0, tenants)
	for i := range tenants {
		pods = append(pods, exportertest.PodWith(fmt.Sprintf("tenant-%d", i), "big", tenantUID(i), exportertest.VolLimit("data", part.MediumDisk, 1<<20)))
	}
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Now: clk.Now,
		Pods: exportertest.NewPods(pods...)}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	return &budgetFixture{clk: clk, exp: exp, mux: mux}
}

// tenantUID is the UID of the pod of tenant-i.
func tenantUID(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", i) }

// call asks, as remote, for the live measurement of tenant-i's pod.
func (f *budgetFixture) call(remote string, i int) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/live/namespaces/tenant-%d/pods/big?uid=%s&volume=data", i, tenantUID(i)), nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	return w
}

// TestLiveCPUBudgetPerTenant: a caller's live walks of one namespace's pods draw on a CPU
// budget of their own (10 CPU-s at once, then 10 % of a core): a pod asking for its own
// volumes back to back held a whole core (issue 18, item 7). The remediator is one caller for
// every tenant, so a budget per caller let one tenant's costly over-limit pod, re-checked on
// every Alertmanager retry, spend it for all: the next tenant's re-check got 429 (issue 30,
// item 4). A walk starts only while the budget holds what the pod's last walk cost (issue 37,
// item 7): past it the caller gets 429 with the time the budget takes to hold that much, for
// that namespace only; another caller's budget for the same namespace is not touched.
func TestLiveCPUBudgetPerTenant(t *testing.T) {
	const remediator, other = "10.0.0.7:1", "10.0.0.66:1"
	f := newBudgetFixture(t, 2)
	// 10 CPU-s at once: three 3 CPU-s walks of tenant-0's pod leave 1 CPU-s, less than a walk.
	for i := range 3 {
		if w := f.call(remediator, 0); w.Code != http.StatusOK {
			t.Fatalf("walk %d within the budget: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := f.call(remediator, 0)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" ||
		!strings.Contains(w.Body.String(), "CPU budget") || !strings.Contains(w.Body.String(), "tenant-0") {
		t.Errorf("a walk of tenant-0 past the budget: %d Retry-After %q %s; want 429, Retry-After 20 (2 CPU-s more at 10 %%), the reason naming the namespace",
			w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := f.call(remediator, 1); w.Code != http.StatusOK {
		t.Errorf("the same caller's re-check of tenant-1 after tenant-0 spent its budget: %d %s, want 200 (budgets are per namespace)", w.Code, w.Body)
	}
	if w := f.call(other, 0); w.Code != http.StatusOK {
		t.Errorf("another caller asking for tenant-0: %d %s, want 200 (budgets are per caller too)", w.Code, w.Body)
	}
	f.clk.Add(18 * time.Second)
	if w := f.call(remediator, 0); w.Code != http.StatusTooManyRequests {
		t.Errorf("tenant-0 before the budget holds a walk again: %d %s, want 429", w.Code, w.Body)
	}
	f.clk.Add(3 * time.Second) // 3.1 CPU-s
	if w := f.call(remediator, 0); w.Code != http.StatusOK {
		t.Errorf("tenant-0 once the budget holds a walk: %d %s, want 200", w.Code, w.Body)
	}
}

// TestLiveCPUBudgetPerCallerTotal: budgets per namespace must not let one caller spend N
// times as much by asking for the pods of N namespaces: all its walks together draw on a
// caller budget (30 CPU-s at once, then 30 % of a core).
func TestLiveCPUBudgetPerCallerTotal(t *testing.T) {
	const caller = "10.0.0.66:1"
	f := newBudgetFixture(t, 12)
	// Ten 3 CPU-s walks, each of another namespace (whose own budget stays in credit), spend
	// the caller's 30 CPU-s.
	for i := range 10 {
		if w := f.call(caller, i); w.Code != http.StatusOK {
			t.Fatalf("walk %d within the caller's budget: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := f.call(caller, 10)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "all namespaces") {
		t.Errorf("an 11th namespace past the caller's budget: %d %s; want 429 naming the caller's budget", w.Code, w.Body)
	}
	if w := f.call("10.0.0.7:1", 10); w.Code != http.StatusOK {
		t.Errorf("another caller: %d %s, want 200", w.Code, w.Body)
	}
	f.clk.Add(4 * time.Second) // 1.2 CPU-s back at 30 %
	if w := f.call(caller, 11); w.Code != http.StatusOK {
		t.Errorf("the caller once its budget holds credit again: %d %s, want 200", w.Code, w.Body)
	}
	want := `
# HELP emptydir_exporter_live_cpu_budget_refusals_total Live measurement requests refused (429) because a live CPU budget was spent, by scope.
# TYPE emptydir_exporter_live_cpu_budget_refusals_total counter
emptydir_exporter_live_cpu_budget_refusals_total{node="node-1",scope="caller"} 1
emptydir_exporter_live_cpu_budget_refusals_total{node="node-1",scope="namespace"} 0
`
	if err := testutil.CollectAndCompare(f.exp, strings.NewReader(want), "emptydir_exporter_live_cpu_budget_refusals_total"); err != nil {
		t.Error(err)
	}
}

// TestLiveCostlyWalkLeavesOtherNamespacesTheirBudget: one costly live walk must not drain the
// remediator's budget for every namespace (issue 37, item 7). A walk was admitted on any
// credit and charged after: tenant-0's pod, 60 CPU-s to walk (LiveTimeout × a walk
// concurrency of 2), took the remediator's budget in all from +30 to −30 CPU-s, and tenant-1's
// re-checks, each 10 s beside tenant-0's for 10 minutes, were refused 55 times out of 60. Now
// the walk is cut once it has exhausted tenant-0's budget (a lower bound, 200), and the next
// one waits until that budget holds what it cost: tenant-1 is re-checked every time.
func TestLiveCostlyWalkLeavesOtherNamespacesTheirBudget(t *testing.T) {
	const remediator = "10.0.0.7:1"
	clk := exportertest.NewClock(time.Now())
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		return part.Measurement{UsedBytes: 2 << 20, MeasuredAt: clk.Now(), CompletedAt: clk.Now()}, nil
	}).Costs(func(p part.Pod, _ part.Part) time.Duration {
		if p.Namespace == "tenant-0" {
			return 2 * exporter.LiveTimeout
		}
		return time.Second
	}).Measurer()
	pods := exportertest.NewPods(
		exportertest.PodWith("tenant-0", "big", tenantUID(0), exportertest.VolLimit("data", part.MediumDisk, 1<<20)),
		exportertest.PodWith("tenant-1", "big", tenantUID(1), exportertest.VolLimit("data", part.MediumDisk, 1<<20)))
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Now: clk.Now, Pods: pods}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	f := &budgetFixture{clk: clk, exp: exp, mux: mux}

	costlyOK, costlyCut, otherRefused := 0, 0, 0
	for round := range 60 {
		if w := f.call(remediator, 0); w.Code == http.StatusOK {
			costlyOK++
			var r liveapi.Response
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || len(r.Volumes) != 1 {
				t.Fatalf("round %d, tenant-0: %s", round, w.Body)
			}
			if r.Volumes[0].CutShort && r.Volumes[0].LowerBound {
				costlyCut++
			}
		} else if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "namespace tenant-0") {
			t.Errorf("round %d, tenant-0: %d %s; want 200 or 429 for tenant-0's own budget", round, w.Code, w.Body)
		}
		if w := f.call(remediator, 1); w.Code != http.StatusOK {
			otherRefused++
			if otherRefused == 1 {
				t.Logf("round %d, tenant-1: %d %s", round, w.Code, w.Body)
			}
		}
		clk.Add(10 * time.Second)
	}
	t.Logf("tenant-0 walked %d times, %d cut; tenant-1 refused %d", costlyOK, costlyCut, otherRefused)
	if otherRefused > 0 {
		t.Errorf("tenant-1's re-checks refused %d times out of 60 beside tenant-0's costly pod; want none", otherRefused)
	}
	// tenant-0 is walked as often as its own budget holds a walk, every 100 s or so, each one
	// cut at what the budget held: a lower bound, never a debt.
	if costlyOK < 5 || costlyCut != costlyOK {
		t.Errorf("tenant-0 walked %d times, %d of them cut; want about every 100 s, each cut", costlyOK, costlyCut)
	}
	want := fmt.Sprintf(`
# HELP emptydir_exporter_live_cpu_budget_refusals_total Live measurement requests refused (429) because a live CPU budget was spent, by scope.
# TYPE emptydir_exporter_live_cpu_budget_refusals_total counter
emptydir_exporter_live_cpu_budget_refusals_total{node="node-1",scope="caller"} 0
emptydir_exporter_live_cpu_budget_refusals_total{node="node-1",scope="namespace"} %d
# HELP emptydir_exporter_live_walks_cut_total Live walks cut short by the caller's live CPU budget, by scope.
# TYPE emptydir_exporter_live_walks_cut_total counter
emptydir_exporter_live_walks_cut_total{node="node-1",scope="caller"} 0
emptydir_exporter_live_walks_cut_total{node="node-1",scope="namespace"} %d
`, 60-costlyOK, costlyCut)
	if err := testutil.CollectAndCompare(f.exp, strings.NewReader(want),
		"emptydir_exporter_live_cpu_budget_refusals_total", "emptydir_exporter_live_walks_cut_total"); err != nil {
		t.Error(err)
	}
}

// TestLiveWalkWaitsForItsEstimate: a live walk whose parts' last walks cost more than its
// budget holds is refused (429, Retry-After the time to earn the rest) rather than started and
// cut at once: once the budget holds its cost it runs to its end, a complete answer.
func TestLiveWalkWaitsForItsEstimate(t *testing.T) {
	const remediator = "10.0.0.7:1"
	clk := exportertest.NewClock(time.Now())
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		return part.Measurement{UsedBytes: 2 << 20, MeasuredAt: clk.Now(), CompletedAt: clk.Now()}, nil
	}).Cost(8 * time.Second).Measurer()
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Now: clk.Now,
		Pods: exportertest.NewPods(exportertest.PodWith("tenant-0", "big", tenantUID(0), exportertest.VolLimit("data", part.MediumDisk, 1<<20)))}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	f := &budgetFixture{clk: clk, exp: exp, mux: mux}
	complete := func(step string, w *httptest.ResponseRecorder) {
		t.Helper()
		var r liveapi.Response
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &r) != nil || len(r.Volumes) != 1 || r.Volumes[0].LowerBound {
			t.Errorf("%s: %d %s; want 200, a complete answer", step, w.Code, w.Body)
		}
	}
	complete("the first walk, 8 of the budget's 10 CPU-s", f.call(remediator, 0))
	clk.Add(30 * time.Second) // 5 CPU-s: less than the walk's 8
	w := f.call(remediator, 0)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "30" || !strings.Contains(w.Body.String(), "8s this pod's last walks cost") {
		t.Errorf("a walk of 8 CPU-s on 5: %d Retry-After %q %s; want 429, Retry-After 30 (3 CPU-s more at 10 %%), naming the cost",
			w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	clk.Add(31 * time.Second) // 8.1 CPU-s
	complete("once the budget holds the walk's cost", f.call(remediator, 0))
}
