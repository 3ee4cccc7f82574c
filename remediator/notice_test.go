package remediator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// The exporter's ServiceAccount of the notice tests, and the tokens the fake TokenReview knows.
const (
	noticeSA          = "emptydir-guard/emptydir-exporter"
	tokenExporter     = "token-of-the-exporter-on-node-1"
	tokenOtherNode    = "token-of-the-exporter-on-node-2"
	tokenOtherSA      = "token-of-a-tenant-service-account"
	tokenAPIAudience  = "token-for-the-api-server"
	tokenNoAudiences  = "token-an-authenticator-says-nothing-of-audiences-for"
	tokenReviewFailed = "token-the-api-server-cannot-review-now"
)

// reviewFor is what the fake API server says of each token: the user, its node and the
// audiences it is valid for; a token it does not know is not authenticated.
var reviewFor = map[string]struct {
	user, node string
	audiences  []string
}{
	tokenExporter:    {"system:serviceaccount:emptydir-guard:emptydir-exporter", "node-1", []string{noticeapi.Audience}},
	tokenOtherNode:   {"system:serviceaccount:emptydir-guard:emptydir-exporter", "node-2", []string{noticeapi.Audience}},
	tokenOtherSA:     {"system:serviceaccount:tenant:default", "node-1", []string{noticeapi.Audience}},
	tokenAPIAudience: {"system:serviceaccount:emptydir-guard:emptydir-exporter", "node-1", []string{"https://kubernetes.default.svc"}},
	tokenNoAudiences: {"system:serviceaccount:emptydir-guard:emptydir-exporter", "node-1", nil},
}

// noticeEnv is an env whose fake API server answers TokenReviews as the API server does:
// authenticated only for a token valid for one of the audiences asked for, which it echoes.
func noticeEnv(t *testing.T, cfg Config, pods ...*corev1.Pod) *env {
	t.Helper()
	cfg.Notices.ServiceAccount = noticeSA
	e := newEnv(t, cfg, pods...)
	e.client.PrependReactor("create", "tokenreviews", tokenReviewReactor)
	return e
}

func tokenReviewReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
	if tr.Spec.Token == tokenReviewFailed {
		return true, nil, errors.New("the API server is away")
	}
	known, ok := reviewFor[tr.Spec.Token]
	if !ok {
		tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		return true, tr, nil
	}
	if known.audiences == nil { // an authenticator that does not check audiences
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: known.user}}
		return true, tr, nil
	}
	var valid []string
	for _, want := range tr.Spec.Audiences {
		for _, a := range known.audiences {
			if a == want {
				valid = append(valid, a)
			}
		}
	}
	if len(valid) == 0 {
		tr.Status = authnv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
		return true, tr, nil
	}
	tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: valid, User: authnv1.UserInfo{
		Username: known.user, Extra: map[string]authnv1.ExtraValue{nodeNameExtra: {known.node}}}}
	return true, tr, nil
}

// emptyDirNotice is the exporter's notice that the emptyDir "empty" of a pod on node-1 crossed its limit.
func emptyDirNotice(ns, pod, uid string) noticeapi.Notice {
	return noticeapi.Notice{Node: "node-1", Namespace: ns, Pod: pod, UID: uid, Check: noticeapi.CheckEmptyDir, Volume: "empty"}
}

// notify posts n to the notice endpoint with token ("" for none) and decodes the answer.
func (e *env) notify(token string, n noticeapi.Notice) (int, WebhookResponse) {
	e.t.Helper()
	body, err := json.Marshal(n)
	if err != nil {
		e.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, noticeapi.Path, bytesReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	var resp WebhookResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		e.t.Fatalf("answer is not JSON: %v: %s", err, rec.Body.String())
	}
	return rec.Code, resp
}

func (e *env) noticesCounted(result string) float64 {
	return testutil.ToFloat64(e.srv.metrics.notices.WithLabelValues(result))
}

// A notice from the exporter's ServiceAccount takes the steps of an alert: the live re-check
// of the part it names, policy, the ledger, the Eviction API, the Event and the metrics; a
// notice about a part the re-check finds under its limit evicts nothing.
func TestNoticeTakesTheStepsOfAnAlert(t *testing.T) {
	tests := []struct {
		name        string
		used        int64
		cfg         func(*Config)
		wantCode    int
		wantOutcome Outcome
		wantEvicted int
		wantEvent   string
	}{
		{name: "over its limit: evicted", used: 2 << 20, wantCode: http.StatusOK, wantOutcome: OutcomeEvicted, wantEvicted: 1, wantEvent: EventEvicted},
		{name: "the live re-check says under its limit: nothing done", used: 1 << 19, wantCode: http.StatusOK, wantOutcome: OutcomeSkipped},
		{name: "dry run: an Event, no eviction", used: 2 << 20, cfg: func(c *Config) { c.DryRun = true },
			wantCode: http.StatusOK, wantOutcome: OutcomeDryRun, wantEvent: EventOverLimit},
		{name: "a denied namespace: policy holds", used: 2 << 20, cfg: func(c *Config) { c.NamespaceDeny = []string{"default"} },
			wantCode: http.StatusOK, wantOutcome: OutcomeSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			e := noticeEnv(t, cfg, newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = tt.used
			code, resp := e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1))
			if code != tt.wantCode || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != tt.wantOutcome {
				t.Fatalf("answer %d %+v, want %d with outcome %s", code, resp, tt.wantCode, tt.wantOutcome)
			}
			evicted, _ := e.evictionKinds()
			if evicted != tt.wantEvicted {
				t.Errorf("%d evictions, want %d", evicted, tt.wantEvicted)
			}
			if tt.wantOutcome != OutcomeSkipped || tt.used < 1<<20 {
				// Re-checked live, for the volume the notice names.
				if len(e.measurer.asked) != 1 || e.measurer.asked[0] != (Subject{Check: CheckEmptyDir, Volume: "empty"}) {
					t.Errorf("live re-checks %+v, want one of volume empty", e.measurer.asked)
				}
			}
			evs := e.events()
			if tt.wantEvent != "" && (len(evs) != 1 || !strings.Contains(evs[0], " "+tt.wantEvent+" ")) {
				t.Errorf("events %q, want one %s", evs, tt.wantEvent)
			}
			if got := testutil.ToFloat64(e.srv.metrics.alerts.WithLabelValues(string(tt.wantOutcome))); got != 1 {
				t.Errorf("alerts_total{outcome=%q} = %v, want 1", tt.wantOutcome, got)
			}
			if got := e.noticesCounted(NoticeHandled); got != 1 {
				t.Errorf("notices_total{result=handled} = %v, want 1", got)
			}
		})
	}
}

// Only the exporter's ServiceAccount, with a token for the notice audience, from the node the
// notice names, is heard; everything else is refused and changes nothing.
func TestNoticeRefusesAllButTheExporter(t *testing.T) {
	other := emptyDirNotice("default", "web-0", uid1)
	tests := []struct {
		name       string
		token      string
		notice     noticeapi.Notice
		wantCode   int
		wantResult string
	}{
		{"no token", "", other, http.StatusUnauthorized, NoticeUnauthenticated},
		{"a token the API server does not know", "forged", other, http.StatusUnauthorized, NoticeUnauthenticated},
		{"the exporter's token for the API server's audience", tokenAPIAudience, other, http.StatusUnauthorized, NoticeUnauthenticated},
		{"an answer that names no audience", tokenNoAudiences, other, http.StatusUnauthorized, NoticeUnauthenticated},
		{"another ServiceAccount", tokenOtherSA, other, http.StatusForbidden, NoticeForbidden},
		{"another node's exporter", tokenOtherNode, other, http.StatusForbidden, NoticeForbidden},
		{"the review cannot be made", tokenReviewFailed, other, http.StatusServiceUnavailable, NoticeReviewFailed},
		{"a notice that names no part", tokenExporter, noticeapi.Notice{Node: "node-1", Namespace: "default", Pod: "web-0", UID: uid1}, http.StatusBadRequest, NoticeInvalid},
		{"a notice with a malformed UID", tokenExporter, noticeapi.Notice{Node: "node-1", Namespace: "default", Pod: "web-0", UID: "x", Check: CheckPod}, http.StatusBadRequest, NoticeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := noticeEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = 2 << 20
			code, _ := e.notify(tt.token, tt.notice)
			if code != tt.wantCode {
				t.Fatalf("answer %d, want %d", code, tt.wantCode)
			}
			if e.evictions() != 0 || e.measurer.calls != 0 || len(e.events()) != 0 {
				t.Errorf("refused, yet %d evictions, %d re-checks, Events", e.evictions(), e.measurer.calls)
			}
			if got := e.noticesCounted(tt.wantResult); got != 1 {
				t.Errorf("notices_total{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}

// A notice and an alert about the same pod, one after the other in either order or at once,
// evict it once: the ledger (and the lock per pod UID) answers the second.
func TestNoticeAndAlertEvictOnce(t *testing.T) {
	for _, order := range []string{"notice first", "alert first", "at once"} {
		t.Run(order, func(t *testing.T) {
			e := noticeEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = 2 << 20
			notice := func() { e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1)) }
			alert := func() { e.post(payloadJSON(t, firing("default", "web-0", uid1))) }
			switch order {
			case "notice first":
				notice()
				alert()
			case "alert first":
				alert()
				notice()
			default:
				var wg sync.WaitGroup
				wg.Go(notice)
				wg.Go(alert)
				wg.Wait()
			}
			if got := e.evictions(); got != 1 {
				t.Errorf("%d evictions, want 1", got)
			}
		})
	}
}

// Notices are bounded per namespace and per node: beyond a bucket, 429 and nothing done; the
// other namespaces' notices are still heard, and the bucket refills over the minute.
func TestNoticeRateLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Notices.PerNamespace, cfg.Notices.PerNode = 2, 3
	var pods []*corev1.Pod
	for _, p := range []struct{ ns, name string }{{"a", "p0"}, {"a", "p1"}, {"a", "p2"}, {"b", "p3"}, {"c", "p4"}} {
		pods = append(pods, newPod(p.ns, p.name, testUID(p.name)).build())
	}
	e := noticeEnv(t, cfg, pods...)
	for _, p := range pods {
		e.measurer.used[string(p.UID)] = 2 << 20
	}
	send := func(ns, name string) int {
		code, _ := e.notify(tokenExporter, emptyDirNotice(ns, name, testUID(name)))
		return code
	}
	for _, step := range []struct {
		ns, pod string
		want    int
	}{
		{"a", "p0", http.StatusOK}, {"a", "p1", http.StatusOK},
		{"a", "p2", http.StatusTooManyRequests}, // namespace a's bucket is empty
		{"b", "p3", http.StatusOK},
		{"c", "p4", http.StatusTooManyRequests}, // node-1's bucket is empty
	} {
		if got := send(step.ns, step.pod); got != step.want {
			t.Errorf("notice of %s/%s: %d, want %d", step.ns, step.pod, got, step.want)
		}
	}
	if e.measurer.calls != 3 {
		t.Errorf("%d live re-checks, want 3: a refused notice costs none", e.measurer.calls)
	}
	e.advance(time.Minute)
	if got := send("a", "p2"); got != http.StatusOK {
		t.Errorf("a minute later: %d, want 200", got)
	}
}

// A standby forwards a notice to the leader, which authenticates it again and acts on it.
func TestNoticeForwardedByStandby(t *testing.T) {
	cfg := testConfig()
	cfg.LeaderElection = true
	e := noticeEnv(t, cfg, newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 2 << 20
	leadNow(e.srv)
	leaderTS := httptest.NewServer(e.handler)
	defer leaderTS.Close()
	cfg.Notices.ServiceAccount = noticeSA
	standby, err := New(cfg, e.client, e.measurer, WithEventRecorder(e.recorder), WithClock(e.clock),
		WithLeaderForwarding(&staticResolver{url: leaderTS.URL}, leaderTS.Client()))
	if err != nil {
		t.Fatal(err)
	}
	asStandby(standby, "b", "a")
	e.handler = standby.Handler()
	code, resp := e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1))
	if code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != OutcomeEvicted {
		t.Fatalf("answer %d %+v, want the leader's eviction", code, resp)
	}
	if e.evictions() != 1 {
		t.Errorf("%d evictions, want 1", e.evictions())
	}
}

// A TokenReview's answer is kept: a burst of notices costs the API server one review.
func TestNoticeReviewsCached(t *testing.T) {
	e := noticeEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	for range 3 {
		e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1))
		e.notify("forged", emptyDirNotice("default", "web-0", uid1))
	}
	reviews := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "tokenreviews" {
			reviews++
		}
	}
	if reviews != 2 {
		t.Errorf("%d TokenReviews, want 2 (one per token)", reviews)
	}
}

// TestNoticeReviewsBounded: a caller posting made-up tokens gets 429 once reviewBurst of them
// were reviewed, and costs the API server no more reviews; a kept answer still serves.
func TestNoticeReviewsBounded(t *testing.T) {
	e := noticeEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	if e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1)); e.noticesCounted(NoticeHandled) != 1 {
		t.Fatalf("the exporter's notice not handled")
	}
	limited := 0
	for i := range 2 * reviewBurst {
		if code, _ := e.notify(fmt.Sprintf("made-up-%d", i), emptyDirNotice("default", "web-0", uid1)); code == http.StatusTooManyRequests {
			limited++
		}
	}
	reviews := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "tokenreviews" {
			reviews++
		}
	}
	// The clock stands still: the bucket refills none while the test runs.
	if reviews > reviewBurst || limited < reviewBurst {
		t.Errorf("%d TokenReviews, %d notices limited; want at most %d reviews, the rest limited", reviews, limited, reviewBurst)
	}
	if got := e.noticesCounted(NoticeRateLimited); got != float64(limited) {
		t.Errorf("notices_total{result=rate_limited} %v, want %d", got, limited)
	}
	if e.notify(tokenExporter, emptyDirNotice("default", "web-0", uid1)); e.noticesCounted(NoticeHandled) != 2 {
		t.Errorf("the exporter's second notice not handled: its token's answer is kept, no review needed")
	}
}
