package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// remediator is a notice endpoint on loopback that answers each request with the next of its
// codes (the last one ever after) and records what it got.
type remediator struct {
	mu    sync.Mutex
	codes []int
	got   []noticeapi.Notice
	auth  []string
	srv   *httptest.Server
}

func newRemediator(t *testing.T, codes ...int) *remediator {
	r := &remediator{codes: codes}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != noticeapi.Path || req.Method != http.MethodPost {
			t.Errorf("%s %s, want POST %s", req.Method, req.URL.Path, noticeapi.Path)
		}
		var n noticeapi.Notice
		if err := json.NewDecoder(req.Body).Decode(&n); err != nil {
			t.Errorf("notice body: %v", err)
		}
		r.mu.Lock()
		code := r.codes[min(len(r.got), len(r.codes)-1)]
		r.got = append(r.got, n)
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *remediator) requests() []noticeapi.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]noticeapi.Notice(nil), r.got...)
}

// started is a Notifier of r with the token file token (its path returned), running until the
// test ends.
func started(t *testing.T, r *remediator, change func(*Config)) (*Notifier, string) {
	t.Helper()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.URL, cfg.TokenFile, cfg.Node, cfg.Backoff = r.srv.URL, token, "node-1", time.Millisecond
	if change != nil {
		change(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, token
}

// settle waits until the notifier has counted want outcomes in all.
func settle(t *testing.T, n *Notifier, want float64) {
	t.Helper()
	for stop := time.Now().Add(5 * time.Second); time.Now().Before(stop); time.Sleep(time.Millisecond) {
		if testutil.ToFloat64(n.sent)+failedTotal(n) == want {
			return
		}
	}
	t.Fatalf("sent %v, failed %v: want %v outcomes", testutil.ToFloat64(n.sent), failedTotal(n), want)
}

func failedTotal(n *Notifier) float64 {
	total := 0.0
	for _, r := range []string{FailedQueueFull, FailedRefused, FailedRetries} {
		total += testutil.ToFloat64(n.failed.WithLabelValues(r))
	}
	return total
}

func part(pod string) noticeapi.Notice {
	return noticeapi.Notice{Node: "node-1", Namespace: "ns", Pod: pod, UID: "uid-" + pod, Check: noticeapi.CheckEmptyDir, Volume: "data"}
}

// A part is noticed once per crossing: not again while it stays over, again once it went
// under and over again.
func TestNoticeOncePerCrossing(t *testing.T) {
	r := newRemediator(t, http.StatusOK)
	n, token := started(t, r, nil)
	a, b := part("a"), part("b")
	for _, step := range []struct {
		over  []noticeapi.Notice
		total float64
	}{
		{[]noticeapi.Notice{a}, 1},
		{[]noticeapi.Notice{a}, 1},    // still over: nothing
		{[]noticeapi.Notice{a, b}, 2}, // b crossed
		{nil, 2},                      // both under
		{[]noticeapi.Notice{a}, 3},    // a crossed again
	} {
		n.Observe(step.over)
		settle(t, n, step.total)
	}
	if got := r.requests(); len(got) != 3 || got[0] != a || got[1] != b || got[2] != a {
		t.Errorf("notices %+v, want a, b, a", got)
	}
	if err := os.WriteFile(token, []byte("token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Observe([]noticeapi.Notice{b})
	settle(t, n, 4)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.auth[0] != "Bearer token-1" || r.auth[3] != "Bearer token-2" {
		t.Errorf("Authorization %q: want the token file's, read again as it rotates", r.auth)
	}
	if testutil.ToFloat64(n.sent) != 4 {
		t.Errorf("notices_sent_total %v, want 4", testutil.ToFloat64(n.sent))
	}
}

// A part a walk finds over its limit is noticed at once (Crossed), and not again by the cycle's
// end: neither by the Observe whose snapshot predates the walk, nor by the next, which sees it
// over; once under, a new crossing is noticed again.
func TestCrossedNoticedOnce(t *testing.T) {
	r := newRemediator(t, http.StatusOK)
	n, _ := started(t, r, nil)
	a, b := part("a"), part("b")
	for _, step := range []struct {
		what    string
		crossed []noticeapi.Notice // told by walks before the Observe
		over    []noticeapi.Notice // the cycle's end
		total   float64
	}{
		{"a walk finds a over; its cycle's snapshot predates the walk", []noticeapi.Notice{a}, nil, 1},
		{"the next cycle sees it over", nil, []noticeapi.Notice{a}, 1},
		{"a walk finds a over again while it stays over", []noticeapi.Notice{a}, []noticeapi.Notice{a}, 1},
		{"a is under", nil, nil, 1},
		{"a crosses again, and b at the cycle's end", []noticeapi.Notice{a}, []noticeapi.Notice{a, b}, 3},
	} {
		for _, p := range step.crossed {
			n.Crossed(p)
		}
		n.Observe(step.over)
		settle(t, n, step.total)
		if got := len(r.requests()); float64(got) != step.total {
			t.Fatalf("%s: %d notices, want %v", step.what, got, step.total)
		}
	}
	// The last two leave together, on two senders: their order is not kept.
	got := r.requests()
	if last := []noticeapi.Notice{got[1], got[2]}; got[0] != a || !slices.Contains(last, a) || !slices.Contains(last, b) {
		t.Errorf("notices %+v, want a, then a and b", got)
	}
}

// A notice is tried again after an answer of 5xx or none, up to its attempts; a 4xx answer
// (refused, rate-limited) is final.
func TestNoticeRetries(t *testing.T) {
	tests := []struct {
		name         string
		codes        []int
		wantRequests int
		wantSent     float64
		wantFailed   string
	}{
		{"503 twice, then taken", []int{503, 503, 200}, 3, 1, ""},
		{"503 on every attempt", []int{503}, 4, 0, FailedRetries},
		{"refused", []int{401}, 1, 0, FailedRefused},
		{"rate-limited", []int{429}, 1, 0, FailedRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRemediator(t, tt.codes...)
			n, _ := started(t, r, nil)
			n.Observe([]noticeapi.Notice{part("a")})
			settle(t, n, 1)
			if got := len(r.requests()); got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
			if got := testutil.ToFloat64(n.sent); got != tt.wantSent {
				t.Errorf("sent %v, want %v", got, tt.wantSent)
			}
			if tt.wantFailed != "" {
				if got := testutil.ToFloat64(n.failed.WithLabelValues(tt.wantFailed)); got != 1 {
					t.Errorf("failed{reason=%q} %v, want 1", tt.wantFailed, got)
				}
			}
		})
	}
}

// A remediator that is slow or away never holds up a cycle: beyond the queue, notices are
// dropped and counted, and Observe returns at once.
func TestNoticeQueueFullDrops(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	r := &remediator{srv: srv}
	n, _ := started(t, r, func(c *Config) { c.QueueSize = 1 })
	var over []noticeapi.Notice
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		over = append(over, part(p))
	}
	done := make(chan struct{})
	go func() { n.Observe(over); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Observe blocked on a full queue")
	}
	// Two workers hold one each, the queue one: at least two of five dropped.
	if got := testutil.ToFloat64(n.failed.WithLabelValues(FailedQueueFull)); got < 2 {
		t.Errorf("failed{reason=queue_full} %v, want at least 2", got)
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no token file": {URL: "http://remediator:9732", QueueSize: 1, Attempts: 1, Backoff: time.Second},
		"not a URL":     {URL: "remediator:9732", TokenFile: "t", QueueSize: 1, Attempts: 1, Backoff: time.Second},
		"no queue":      {URL: "http://remediator:9732", TokenFile: "t", Attempts: 1, Backoff: time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
