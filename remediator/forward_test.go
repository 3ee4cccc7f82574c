package remediator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// staticResolver resolves every identity to one URL and counts the calls.
type staticResolver struct {
	url   string
	calls atomic.Int32
}

func (r *staticResolver) LeaderURL(context.Context, string) (string, error) {
	r.calls.Add(1)
	if r.url == "" {
		return "", errors.New("no such leader")
	}
	return r.url, nil
}

// asStandby makes s a standby that knows leader leads.
func asStandby(s *Server, self, leader string) {
	s.identity.Store(&self)
	s.leaderID.Store(&leader)
	s.setLeader(false)
}

// post sends body with keep-alive through client and reports whether the connection was
// reused from an earlier request.
func postTraced(t *testing.T, client *http.Client, url string, body []byte, header ...string) (*http.Response, []byte, bool) {
	t.Helper()
	var reused bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytesReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, reused
}

// A standby that cannot forward answers 503 and closes the connection: Alertmanager's retry
// must open a new connection (which the Service may route to the leader) instead of reusing
// the kept-alive one to the same standby. The old 503 kept the connection alive.
func TestStandby503ClosesTheConnection(t *testing.T) {
	cfg := testConfig()
	cfg.LeaderElection = true
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
	asStandby(e.srv, "b", "a")
	ts := httptest.NewServer(e.handler)
	defer ts.Close()
	client := ts.Client()
	for i := range 3 {
		resp, _, reused := postTraced(t, client, ts.URL+"/webhook", payloadJSON(t, firing("default", "web-0", uid1)))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("delivery %d: %d, want 503", i, resp.StatusCode)
		}
		if !resp.Close {
			t.Errorf("delivery %d: the standby's 503 keeps the connection alive", i)
		}
		if reused {
			t.Errorf("delivery %d reused the connection to the standby", i)
		}
	}
	if e.evictions() != 0 {
		t.Error("standby evicted")
	}
}

// A standby hands the delivery to the leader, with the credentials, and returns the leader's
// answer; the leader's eviction is the only one.
func TestStandbyForwardsToTheLeader(t *testing.T) {
	cfg := testConfig()
	cfg.LeaderElection = true
	cfg.BearerToken = "s3cret"
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	leader := e.srv
	self := "a"
	leader.identity.Store(&self)
	leader.leaderID.Store(&self)
	leadNow(leader)
	leaderTS := httptest.NewServer(leader.Handler())
	defer leaderTS.Close()

	resolver := &staticResolver{url: leaderTS.URL}
	standby, err := New(cfg, e.client, e.measurer, WithEventRecorder(e.recorder), WithClock(e.clock),
		WithLeaderForwarding(resolver, leaderTS.Client()))
	if err != nil {
		t.Fatal(err)
	}
	asStandby(standby, "b", "a")
	standbyTS := httptest.NewServer(standby.Handler())
	defer standbyTS.Close()

	body := payloadJSON(t, firing("default", "web-0", uid1))
	if resp, _, _ := postTraced(t, standbyTS.Client(), standbyTS.URL+"/webhook", body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated delivery: %d, want 401 from the standby itself", resp.StatusCode)
	}
	if resolver.calls.Load() != 0 {
		t.Error("an unauthenticated delivery was forwarded")
	}
	resp, raw, _ := postTraced(t, standbyTS.Client(), standbyTS.URL+"/webhook", body, "Authorization", "Bearer s3cret")
	var wr WebhookResponse
	if err := json.Unmarshal(raw, &wr); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if resp.StatusCode != http.StatusOK || len(wr.Alerts) != 1 || wr.Alerts[0].Outcome != OutcomeEvicted {
		t.Fatalf("forwarded delivery: %d %s, want 200 evicted", resp.StatusCode, raw)
	}
	if got := resp.Header.Get(HeaderHandledBy); got != "a" {
		t.Errorf("%s = %q, want the leader a", HeaderHandledBy, got)
	}
	if got := resp.Header.Get(HeaderForwardedBy); got != "b" {
		t.Errorf("%s = %q, want the standby b", HeaderForwardedBy, got)
	}
	if n := e.evictions(); n != 1 {
		t.Errorf("%d evictions, want 1", n)
	}

	// A delivery that was forwarded already is not forwarded again (no loops while the
	// leadership moves), and an unreachable leader means 503 with the connection closed.
	for name, c := range map[string]struct {
		header []string
		url    string
	}{
		"already forwarded":   {header: []string{HeaderForwardedBy, "c"}, url: leaderTS.URL},
		"leader unreachable":  {url: "http://127.0.0.1:1"},
		"leader unresolvable": {url: ""},
	} {
		resolver.url = c.url
		standby.forward.forget()
		resp, raw, _ := postTraced(t, standbyTS.Client(), standbyTS.URL+"/webhook", body, append(c.header, "Authorization", "Bearer s3cret")...)
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || resp.Header.Get(HeaderHandledBy) != "" {
			t.Errorf("%s: %d close=%v handled-by=%q %s, want 503 and Connection: close", name, resp.StatusCode, resp.Close, resp.Header.Get(HeaderHandledBy), raw)
		}
	}
	if n := e.evictions(); n != 1 {
		t.Errorf("%d evictions after the refused deliveries, want 1", n)
	}
	// The unauthenticated delivery is not counted: the standby answered it 401 itself.
	for result, want := range map[string]float64{StandbyForwarded: 1, StandbyRefused: 3} {
		if got := testutil.ToFloat64(standby.metrics.standby.WithLabelValues(result)); got != want {
			t.Errorf("standby_requests_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

func TestPodLeaderResolver(t *testing.T) {
	pod := func(name, ip, port string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "emptydir-guard", Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "remediator",
				Ports: []corev1.ContainerPort{{Name: port, ContainerPort: 9732}}}}},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	client := fake.NewClientset(pod("rem-a", "10.0.0.7", "http"), pod("rem-b", "", "http"), pod("rem-c", "10.0.0.8", "metrics"),
		pod("rem-v6", "fd00::7", "http"))
	r := PodLeaderResolver{Client: client, Namespace: "emptydir-guard", PortName: "http"}
	for _, tc := range []struct{ identity, want, wantErr string }{
		{"rem-a", "http://10.0.0.7:9732", ""},
		{"rem-v6", "http://[fd00::7]:9732", ""},
		{"rem-b", "", "no IP"},
		{"rem-c", "", `no container port named "http"`},
		{"rem-gone", "", "not found"},
	} {
		got, err := r.LeaderURL(t.Context(), tc.identity)
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %q, %v; want %q, error containing %q", tc.identity, got, err, tc.want, tc.wantErr)
		}
	}
}
