package source_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// Pods of testdata/summary.json.
const (
	summaryEmptyTestUID = "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d" // default/empty-test1
	summaryCacheUID     = "0d9c3b52-6e0f-4a1e-9a57-2f7c1e4b8a10" // shop/cache-0
	summaryPromUID      = "a3f6c1d8-42b7-4c55-8e0b-7d1e9c2f6b34" // monitoring/prometheus-0
)

// rootFsError is what a kubelet with localStorageCapacityIsolation=false answers on
// /stats/summary (pkg/kubelet/server/stats handleError).
const rootFsError = "Internal Error: failed to get rootFs stats: failed to get rootfs info: unable to find data in memory cache\n"

func readSummary(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kubeletRequest is what the fake kubelet saw of one request.
type kubeletRequest struct {
	method, path, authorization string
}

// fakeKubelet is an HTTPS server standing in for a kubelet's port 10250.
type fakeKubelet struct {
	srv    *httptest.Server
	caFile string

	mu       sync.Mutex
	requests []kubeletRequest
}

func newFakeKubelet(t *testing.T, h http.HandlerFunc) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{}
	k.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.requests = append(k.requests, kubeletRequest{r.Method, r.URL.Path, r.Header.Get("Authorization")})
		k.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(k.srv.Close)
	k.caFile = filepath.Join(t.TempDir(), "kubelet-ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	if err := os.WriteFile(k.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *fakeKubelet) seen() []kubeletRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]kubeletRequest(nil), k.requests...)
}

// serveBody answers every request with code and body.
func serveBody(code int, contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write(body)
	}
}

func writeTokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func httpClient(t *testing.T, caFile, tokenFile string, insecure bool) *http.Client {
	t.Helper()
	c, err := source.NewKubeletHTTPClient(caFile, tokenFile, insecure, 5*time.Second)
	if err != nil {
		t.Fatalf("NewKubeletHTTPClient: %v", err)
	}
	return c
}

// summaryPods are emptyDir volumes that testdata/summary.json has stats for.
func summaryPods() []part.Pod {
	return []part.Pod{
		exportertest.PodWith("default", "empty-test1", summaryEmptyTestUID, exportertest.VolLimit("empty", part.MediumDisk, 1<<20)),
		exportertest.PodWith("shop", "cache-0", summaryCacheUID, exportertest.Vol("scratch", part.MediumMemory)),
		exportertest.PodWith("monitoring", "prometheus-0", summaryPromUID, exportertest.Vol("config-out", part.MediumDisk)),
	}
}

func reasonOfErr(err error) string {
	var me *part.MeasureError
	if errors.As(err, &me) {
		return me.Reason
	}
	return ""
}

type wantVolume struct {
	uid, volume string
	m           part.Measurement
}

func at(h, m, s int) time.Time { return time.Date(2026, 12, 2, h, m, s, 0, time.UTC) }

// wantSummaryNumbers are the numbers testdata/summary.json holds for summaryPods.
var wantSummaryNumbers = []wantVolume{
	{summaryEmptyTestUID, "empty", part.Measurement{UsedBytes: 4096, CapacityBytes: 270014464000,
		AvailableBytes: 199512342528, InodesUsed: 2, MeasuredAt: at(16, 59, 12), CompletedAt: at(16, 59, 12), Method: part.MethodKubelet}},
	{summaryCacheUID, "scratch", part.Measurement{UsedBytes: 12582912, CapacityBytes: 67108864,
		AvailableBytes: 54525952, InodesUsed: 26, MeasuredAt: at(16, 58, 50), CompletedAt: at(16, 58, 50), Method: part.MethodKubelet}},
	{summaryPromUID, "config-out", part.Measurement{UsedBytes: 8192, CapacityBytes: 270014464000,
		AvailableBytes: 199512342528, InodesUsed: 3, MeasuredAt: at(16, 59, 1), CompletedAt: at(16, 59, 1), Method: part.MethodKubelet}},
}

// assertAllFailed checks that every volume of summaryPods failed for reason, with an error
// mentioning each of wantInErr, and carries no numbers.
func assertAllFailed(t *testing.T, got []part.Result, reason string, wantInErr ...string) {
	t.Helper()
	if len(got) != len(summaryPods()) {
		t.Fatalf("got %d results, want one per volume (%d)", len(got), len(summaryPods()))
	}
	for _, r := range got {
		if r.Err == nil {
			t.Errorf("%s: no error, measurement %+v", r.Part.Name, r.Measurement)
			continue
		}
		if got := reasonOfErr(r.Err); got != reason {
			t.Errorf("%s: reason %q, want %q (err %v)", r.Part.Name, got, reason, r.Err)
		}
		for _, s := range wantInErr {
			if !strings.Contains(r.Err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", r.Part.Name, r.Err, s)
			}
		}
		if r.Measurement != (part.Measurement{}) {
			t.Errorf("%s: failed volume carries numbers %+v", r.Part.Name, r.Measurement)
		}
	}
}

func assertMeasured(t *testing.T, got []part.Result, want []wantVolume) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		if r.UID != w.uid || r.Part.Name != w.volume {
			t.Errorf("result %d is %s/%s, want %s/%s", i, r.UID, r.Part.Name, w.uid, w.volume)
			continue
		}
		if r.Err != nil {
			t.Errorf("%s: unexpected error %v", w.volume, r.Err)
			continue
		}
		g := r.Measurement
		if !g.MeasuredAt.Equal(w.m.MeasuredAt) {
			t.Errorf("%s: MeasuredAt = %s, want the volume's time %s", w.volume, g.MeasuredAt, w.m.MeasuredAt)
		}
		if !g.CompletedAt.Equal(g.MeasuredAt) {
			t.Errorf("%s: CompletedAt = %s, want MeasuredAt %s: the kubelet's stats are one moment", w.volume, g.CompletedAt, g.MeasuredAt)
		}
		g.MeasuredAt, g.CompletedAt = w.m.MeasuredAt, w.m.CompletedAt
		if g != w.m {
			t.Errorf("%s: measurement = %+v, want %+v", w.volume, g, w.m)
		}
	}
}

func TestKubeletDirectSourceReadsSummary(t *testing.T) {
	k := newFakeKubelet(t, serveBody(http.StatusOK, "application/json", readSummary(t, "summary.json")))
	token := writeTokenFile(t, "s3cr3t-sa-token\n")
	src := source.NewKubeletDirect(k.srv.URL, httpClient(t, k.caFile, token, false))
	if src.Name() != "kubelet" {
		t.Errorf("Name() = %q, want kubelet (the source label)", src.Name())
	}

	got := src.Measure(context.Background(), summaryPods())

	assertMeasured(t, got, wantSummaryNumbers)
	if got[0].Part.LimitBytes == nil || *got[0].Part.LimitBytes != 1<<20 {
		t.Errorf("the volume spec (sizeLimit) must pass through, got %+v", got[0].Part)
	}
	reqs := k.seen()
	if len(reqs) != 1 {
		t.Fatalf("kubelet got %d requests, want one Summary request for all pods", len(reqs))
	}
	want := kubeletRequest{http.MethodGet, "/stats/summary", "Bearer s3cr3t-sa-token"}
	if reqs[0] != want {
		t.Errorf("kubelet saw %+v, want %+v", reqs[0], want)
	}
}

func TestKubeletDirectSourceFailures(t *testing.T) {
	malformed := readSummary(t, "summary.json")
	malformed = malformed[:len(malformed)/2]

	tests := []struct {
		name      string
		handler   http.HandlerFunc
		noCA      bool // use system roots, which do not trust the test server
		insecure  bool
		down      bool // the kubelet is not listening
		wantOK    bool
		wantInErr []string
		reason    string
	}{
		{name: "trusted by CA file", handler: serveBody(200, "application/json", readSummary(t, "summary.json")), wantOK: true},
		{name: "insecure skip verify", handler: serveBody(200, "application/json", readSummary(t, "summary.json")),
			noCA: true, insecure: true, wantOK: true},
		{name: "certificate not trusted", handler: serveBody(200, "application/json", readSummary(t, "summary.json")),
			noCA: true, reason: part.ReasonKubeletUnreachable, wantInErr: []string{"certificate"}},
		{name: "kubelet down", handler: serveBody(200, "application/json", nil),
			down: true, reason: part.ReasonKubeletUnreachable},
		{name: "localStorageCapacityIsolation off", handler: serveBody(500, "text/plain; charset=utf-8", []byte(rootFsError)),
			reason: part.ReasonKubeletError, wantInErr: []string{"500 Internal Server Error", "failed to get rootFs stats"}},
		{name: "forbidden", handler: serveBody(403, "text/plain; charset=utf-8",
			[]byte("Forbidden (user=system:serviceaccount:emptydir-guard:emptydir-exporter, verb=get, resource=nodes, subresource=(stats|metrics|proxy))")),
			reason: part.ReasonKubeletError, wantInErr: []string{"403 Forbidden", "subresource"}},
		{name: "malformed JSON", handler: serveBody(200, "application/json", malformed),
			reason: part.ReasonKubeletError, wantInErr: []string{"decoding summary"}},
		{name: "HTML instead of JSON", handler: serveBody(200, "text/html", []byte("<html><body>login</body></html>")),
			reason: part.ReasonKubeletError, wantInErr: []string{"decoding summary"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKubelet(t, tc.handler)
			caFile := k.caFile
			if tc.noCA {
				caFile = ""
			}
			src := source.NewKubeletDirect(k.srv.URL, httpClient(t, caFile, writeTokenFile(t, "tok"), tc.insecure))
			if tc.down {
				k.srv.Close()
			}

			got := src.Measure(context.Background(), summaryPods())

			if tc.wantOK {
				assertMeasured(t, got, wantSummaryNumbers)
				return
			}
			assertAllFailed(t, got, tc.reason, tc.wantInErr...)
		})
	}
}

func TestKubeletSourceVolumesMissingFromSummary(t *testing.T) {
	k := newFakeKubelet(t, serveBody(200, "application/json", readSummary(t, "summary.json")))
	src := source.NewKubeletDirect(k.srv.URL, httpClient(t, k.caFile, "", false))
	pods := []part.Pod{
		// "fresh" was just set up: the kubelet has no stats for it until its next pass.
		exportertest.PodWith("default", "empty-test1", summaryEmptyTestUID, exportertest.Vol("empty", part.MediumDisk), exportertest.Vol("fresh", part.MediumDisk)),
		// A pod the kubelet does not report at all (started after its last pass).
		exportertest.PodWith("default", "new-pod", "11111111-2222-3333-4444-555555555555", exportertest.Vol("work", part.MediumDisk)),
		exportertest.PodWith("shop", "cache-0", summaryCacheUID, exportertest.Vol("scratch", part.MediumMemory)),
		// The same name as a reported pod but another UID: stats are per pod instance.
		exportertest.PodWith("monitoring", "prometheus-0", "ffffffff-0000-0000-0000-000000000000", exportertest.Vol("config-out", part.MediumDisk)),
	}

	got := src.Measure(context.Background(), pods)

	want := []struct {
		volume, reason string
		used           int64
	}{
		{"empty", "", 4096},
		{"fresh", part.ReasonNotFound, 0},
		{"work", part.ReasonNotFound, 0},
		{"scratch", "", 12582912},
		{"config-out", part.ReasonNotFound, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.Part.Name != w.volume {
			t.Errorf("result %d is %q, want %q", i, r.Part.Name, w.volume)
		}
		if reason := reasonOfErr(r.Err); reason != w.reason {
			t.Errorf("%s: reason %q, want %q (err %v)", w.volume, reason, w.reason, r.Err)
		}
		if r.Measurement.UsedBytes != w.used {
			t.Errorf("%s: used %d, want %d", w.volume, r.Measurement.UsedBytes, w.used)
		}
	}
}

func TestKubeletSourceVolumeWithoutUsedBytes(t *testing.T) {
	k := newFakeKubelet(t, serveBody(200, "application/json", readSummary(t, "summary-no-usedbytes.json")))
	src := source.NewKubeletDirect(k.srv.URL, httpClient(t, k.caFile, "", false))

	got := src.Measure(context.Background(), []part.Pod{
		exportertest.PodWith("default", "empty-test1", summaryEmptyTestUID, exportertest.Vol("empty", part.MediumDisk)),
	})

	if len(got) != 1 || reasonOfErr(got[0].Err) != part.ReasonKubeletError {
		t.Fatalf("got %+v, want one kubelet_error: a volume without usedBytes must not read as 0 bytes", got)
	}
	if !strings.Contains(got[0].Err.Error(), "usedBytes") {
		t.Errorf("error %q does not say what is missing", got[0].Err)
	}
}

func TestNewKubeletHTTPClientFileErrors(t *testing.T) {
	k := newFakeKubelet(t, serveBody(200, "application/json", nil))
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("this is not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := writeTokenFile(t, "tok")

	tests := []struct {
		name, caFile, tokenFile string
		wantErr                 string // empty: no error
	}{
		{"CA and token", k.caFile, token, ""},
		{"system roots, no token", "", "", ""},
		{"missing CA file", filepath.Join(dir, "absent.crt"), token, "CA file"},
		{"CA file without PEM", notPEM, token, "no PEM"},
		{"missing token file", k.caFile, filepath.Join(dir, "absent-token"), "token file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := source.NewKubeletHTTPClient(tc.caFile, tc.tokenFile, false, time.Second)
			if tc.wantErr == "" {
				if err != nil || c == nil {
					t.Fatalf("got (%v, %v), want a client", c, err)
				}
				if c.Timeout != time.Second {
					t.Errorf("client timeout %s, want 1s", c.Timeout)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

// fakeAPIServer serves the node proxy path of the Summary API.
func fakeAPIServer(t *testing.T, code int, contentType string, body []byte) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

func proxySource(t *testing.T, host string) *source.Kubelet {
	t.Helper()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return source.NewKubeletProxy(client, "node-1")
}

func TestKubeletProxySourceReadsSummary(t *testing.T) {
	srv, paths := fakeAPIServer(t, http.StatusOK, "application/json", readSummary(t, "summary.json"))

	got := proxySource(t, srv.URL).Measure(context.Background(), summaryPods())

	assertMeasured(t, got, wantSummaryNumbers)
	want := []string{"GET /api/v1/nodes/node-1/proxy/stats/summary"}
	if p := paths(); len(p) != 1 || p[0] != want[0] {
		t.Errorf("API server saw %q, want %q", p, want)
	}
}

func TestKubeletProxySourceErrors(t *testing.T) {
	// What the API server's node proxy answers when the kubelet does not listen.
	unavailable := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"error trying to reach service: dial tcp 10.0.0.5:10250: connect: connection refused",` +
		`"reason":"ServiceUnavailable","code":503}`)
	tests := []struct {
		name        string
		code        int
		contentType string
		body        []byte
		wantInErr   string
		wantReason  string
	}{
		{"node proxy cannot reach the kubelet", http.StatusServiceUnavailable, "application/json", unavailable, "connection refused", part.ReasonKubeletError},
		{"kubelet answers 500 through the proxy", http.StatusInternalServerError, "text/plain; charset=utf-8", []byte(rootFsError), "failed to get rootFs stats", part.ReasonKubeletError},
		{"malformed JSON", http.StatusOK, "application/json", []byte(`{"node":{"nodeName":"node-1"},"pods":[{`), "decoding summary", part.ReasonKubeletError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeAPIServer(t, tc.code, tc.contentType, tc.body)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			got := proxySource(t, srv.URL).Measure(ctx, summaryPods())

			assertAllFailed(t, got, tc.wantReason, tc.wantInErr)
		})
	}
}

func TestKubeletProxySourceAPIServerDown(t *testing.T) {
	srv, _ := fakeAPIServer(t, http.StatusOK, "application/json", nil)
	src := proxySource(t, srv.URL)
	srv.Close()

	got := src.Measure(context.Background(), summaryPods()[:1])

	if len(got) != 1 || got[0].Err == nil {
		t.Fatalf("got %+v, want an error for the volume", got)
	}
	if reason := reasonOfErr(got[0].Err); reason != part.ReasonKubeletUnreachable {
		t.Errorf("reason %q, want %q (err %v)", reason, part.ReasonKubeletUnreachable, got[0].Err)
	}
}

// TestKubeletSourceStaticPod: the Summary API reports a static pod under the UID the kubelet
// knows it by, its config hash; the result carries the mirror pod's API UID.
func TestKubeletSourceStaticPod(t *testing.T) {
	k := newFakeKubelet(t, serveBody(200, "application/json", readSummary(t, "summary.json")))
	src := source.NewKubeletDirect(k.srv.URL, httpClient(t, k.caFile, "", false))
	static := exportertest.PodWith("shop", "cache-0", "9b2f4e61-3c5d-4a7e-8f01-23456789abcd", exportertest.Vol("scratch", part.MediumMemory))
	static.ConfigHash = summaryCacheUID // as testdata/summary.json's pod reference has it

	got := src.Measure(context.Background(), []part.Pod{static})

	if len(got) != 1 || got[0].Err != nil || got[0].Measurement.UsedBytes != 12582912 {
		t.Fatalf("got %+v, want the summary's 12582912 bytes for the static pod", got)
	}
	if got[0].UID != static.UID {
		t.Errorf("result UID %q, want the API UID %q (the uid label)", got[0].UID, static.UID)
	}
}

// With source kubelet, every part of a pod's ephemeral storage comes from the Summary: its
// containers' rootfs and logs, its volumes, and for its own files what the kubelet's total
// holds beyond them; added up, they are the kubelet's own total.
func TestKubeletSourceEphemeralStorageParts(t *testing.T) {
	k := newFakeKubelet(t, serveBody(http.StatusOK, "application/json", readSummary(t, "summary.json")))
	src := source.NewKubeletDirect(k.srv.URL, httpClient(t, k.caFile, "", false))
	limit := int64(10 << 20)
	pod := part.Pod{Namespace: "default", Pod: "empty-test1", UID: "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", Parts: []part.Part{
		{Name: "empty", Medium: part.MediumDisk, BudgetBytes: &limit},
		{Name: "container/writer/writable-layer", Kind: part.KindWritableLayer, Container: "writer", BudgetBytes: &limit},
		{Name: "container/writer/logs", Kind: part.KindContainerLogs, Container: "writer", BudgetBytes: &limit},
		{Name: "container/gone/logs", Kind: part.KindContainerLogs, Container: "gone", BudgetBytes: &limit},
		{Name: "pod/files", Kind: part.KindPodFiles, BudgetBytes: &limit},
	}}
	got := src.Measure(context.Background(), []part.Pod{pod})
	stamped := time.Date(2026, 12, 2, 16, 59, 44, 0, time.UTC)
	want := map[string]int64{"empty": 4096, "container/writer/writable-layer": 24576, "container/writer/logs": 12288, "pod/files": 0}
	var sum int64
	for _, r := range got {
		w, ok := want[r.Part.Name]
		switch {
		case !ok:
			var me *part.MeasureError
			if !errors.As(r.Err, &me) || me.Reason != part.ReasonNotFound {
				t.Errorf("%s: %v, want not_found (the Summary has no such container)", r.Part.Name, r.Err)
			}
		case r.Err != nil:
			t.Errorf("%s: %v", r.Part.Name, r.Err)
		case r.Measurement.UsedBytes != w || r.Measurement.Method != part.MethodKubelet:
			t.Errorf("%s: %d bytes (%s), want %d from the kubelet", r.Part.Name, r.Measurement.UsedBytes, r.Measurement.Method, w)
		default:
			sum += r.Measurement.UsedBytes
		}
		if r.Part.Kind == part.KindWritableLayer && !r.Measurement.MeasuredAt.Equal(stamped) {
			t.Errorf("writable layer stamped %s, want the kubelet's %s", r.Measurement.MeasuredAt, stamped)
		}
	}
	if sum != 40960 {
		t.Errorf("parts add up to %d, want the kubelet's ephemeral-storage total 40960", sum)
	}
}
