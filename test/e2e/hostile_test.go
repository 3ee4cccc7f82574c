package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// hostileCase is one request of TestHostileInput and what must come of it.
type hostileCase struct {
	name, to string
	send     func() hostileAnswer
	code     int    // the status to answer; 0: the connection is closed without an answer
	reason   string // in the answer's body
	// counter is a series of the target's /metrics that must count the case; a nil labels
	// map with delta 0 means the family must not move at all (the request never reached the
	// handler).
	counter counterWant
	log     []string // substrings of one new line of the target's log; nil: none expected
	// handled: the case reaches alert handling (and possibly a live measurement); for every other
	// case the remediator handles no alert and the exporter measures nothing.
	handled bool
	evicts  int // Eviction requests the API server must count for it
}

type counterWant struct {
	name   string
	labels map[string]string
	delta  float64
}

type hostileAnswer struct {
	code int
	body string
	err  error
}

// hostileRow is one line of the generated table.
type hostileRow struct {
	c         hostileCase
	got       hostileAnswer
	evictions int
}

const (
	hostileLimit     = 64 << 10
	hostileOverBytes = 128 << 10
	hostileMaxBody   = 64 << 10 // the remediator's --web.max-request-size
	remediatorTo     = "remediator /webhook"
	exporterTo       = "exporter /live"
)

// TestHostileInput sends hostile requests to the real remediator and exporter binaries on
// the real API server. Every pod the requests name is over its volume's limit on a FakeNode
// the exporter measures, so any hostile request the remediator wrongly accepted would evict.
// For each case it asserts the status, the reason in the body, the target's counter and log
// line, and that the API server's own count of Eviction requests did not move; the
// legitimate delivery at the end must evict the very pod the hostile requests named, exactly
// once, and its replays nothing. The table goes to docs/reliability.md section "hostile".
func TestHostileInput(t *testing.T) {
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 3*time.Minute)
	defer cancel()

	suffix := framework.RandSuffix()
	ns, denied, outside := "hostile-"+suffix, "hostile-denied-"+suffix, "hostile-outside-"+suffix
	for _, n := range []string{ns, denied, outside} {
		if err := c.EnsureNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	node := hostileFakeNode(ctx, t, c, "hostile-"+suffix)
	elsewhere := hostileFakeNode(ctx, t, c, "hostile-other-"+suffix)
	victim := hostileOverLimitPod(ctx, t, node, ns, "victim")
	deniedPod := hostileOverLimitPod(ctx, t, node, denied, "victim")
	outsidePod := hostileOverLimitPod(ctx, t, node, outside, "victim")
	remote := hostileOverLimitPod(ctx, t, elsewhere, ns, "remote")

	const exporterAddr, remAddr = "127.0.0.1:19910", "127.0.0.1:19911"
	const token = "e2e-hostile-webhook-token-0123456789a" // the remediator wants >= 32 bytes
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expLog, remLog := "exporter-"+node.Name(), "remediator-"+node.Name()
	framework.StartInNetns(t, c, expLog, exporterBin, "--node.name="+node.Name(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+node.RootDir(), "--collection.source=filesystem", "--collection.interval=30s", "--web.listen-address="+exporterAddr)
	framework.StartInNetns(t, c, remLog, remediatorBin, "--kubeconfig="+c.KubeconfigPath(), "--exporter.url=http://"+exporterAddr,
		"--web.bearer-token-file="+tokenFile, "--web.listen-address="+remAddr, fmt.Sprintf("--web.max-request-size=%dKiB", hostileMaxBody>>10),
		"--policy.namespace-allow="+ns, "--policy.namespace-deny="+denied)
	for _, addr := range []string{exporterAddr, remAddr} {
		framework.Eventually(t, 60*time.Second, 200*time.Millisecond, addr+" ready", func() (bool, string) {
			s := readyState(c, addr)
			return strings.HasPrefix(s, "200"), s
		})
	}

	uid := string(victim.UID)
	valid := framework.OverLimitPayload(node.Name(), ns, victim.Name, uid, "data")
	webhook := func(tok string, body []byte) func() hostileAnswer {
		return func() hostileAnswer {
			code, _, raw, err := framework.PostWebhook(ctx, c, remAddr, tok, body)
			return hostileAnswer{code, raw, err}
		}
	}
	alterValid := func(f func(p *remediator.Payload, labels map[string]string)) []byte {
		var p remediator.Payload
		if err := json.Unmarshal(valid, &p); err != nil {
			t.Fatal(err)
		}
		f(&p, p.Alerts[0].Labels)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	setLabel := func(k, v string) []byte {
		return alterValid(func(_ *remediator.Payload, l map[string]string) { l[k] = v })
	}
	live := func(pathAndQuery string, header http.Header) func() hostileAnswer {
		return func() hostileAnswer { return hostileGet(ctx, c, exporterAddr, pathAndQuery, header) }
	}
	livePath := "/live/namespaces/" + ns + "/pods/"
	q := "?uid=" + uid + "&volume=data"

	rejected := func(code int) counterWant {
		return counterWant{"emptydir_remediator_webhook_requests_total", map[string]string{"code": fmt.Sprint(code)}, 1}
	}
	payloadRejected := func(code int) []string {
		return []string{`msg="webhook payload rejected"`, fmt.Sprintf("code=%d", code)}
	}
	liveCode := func(code int) counterWant {
		return counterWant{"emptydir_exporter_live_requests_total", map[string]string{"code": fmt.Sprint(code)}, 1}
	}
	liveUntouched := counterWant{"emptydir_exporter_live_requests_total", nil, 0}
	unauthenticated := []string{`msg="webhook request rejected"`, "reason=unauthenticated"}

	// The slow requests take the servers' read timeouts (30 s, 5 s): they run first, together,
	// and alone, so that the counters they move are theirs.
	groups := [][]hostileCase{
		{
			{name: "slow body (half a valid payload, then one byte a second)", to: remediatorTo, send: func() hostileAnswer {
				return hostileSlowRequest(ctx, c, remAddr, fmt.Sprintf("POST /webhook HTTP/1.1\r\nHost: remediator\r\n"+
					"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
					token, len(valid), valid[:len(valid)/2]))
			}, code: http.StatusBadRequest, reason: "i/o timeout", counter: rejected(http.StatusBadRequest), log: payloadRejected(http.StatusBadRequest)},
			{name: "slow request headers (one byte a second)", to: exporterTo, send: func() hostileAnswer {
				return hostileSlowRequest(ctx, c, exporterAddr, "GET "+livePath+victim.Name+q+" HTTP/1.1\r\nHost: exporter\r\nX-Slow: ")
			}, code: 0, counter: liveUntouched},
		},
		{{name: "no credentials", to: remediatorTo, send: webhook("", valid), code: http.StatusUnauthorized,
			reason: "missing or wrong bearer token", counter: rejected(http.StatusUnauthorized), log: unauthenticated}},
		{{name: "wrong credentials", to: remediatorTo, send: webhook("not-"+token, valid), code: http.StatusUnauthorized,
			reason: "missing or wrong bearer token", counter: rejected(http.StatusUnauthorized), log: unauthenticated}},
		{{name: "malformed JSON (a payload cut in half)", to: remediatorTo, send: webhook(token, valid[:len(valid)/2]),
			code: http.StatusBadRequest, reason: "invalid JSON", counter: rejected(http.StatusBadRequest), log: payloadRejected(http.StatusBadRequest)}},
		{{name: "two payloads in one body", to: remediatorTo, send: webhook(token, append(append([]byte{}, valid...), valid...)),
			code: http.StatusBadRequest, reason: "data after the payload object", counter: rejected(http.StatusBadRequest), log: payloadRejected(http.StatusBadRequest)}},
		{{name: `payload version "3"`, to: remediatorTo, send: webhook(token, alterValid(func(p *remediator.Payload, _ map[string]string) { p.Version = "3" })),
			code: http.StatusBadRequest, reason: "unsupported payload version", counter: rejected(http.StatusBadRequest), log: payloadRejected(http.StatusBadRequest)}},
		{{name: "uid label missing", to: remediatorTo, send: webhook(token, alterValid(func(_ *remediator.Payload, l map[string]string) { delete(l, "uid") })),
			code: http.StatusUnprocessableEntity, reason: "lacks label(s) uid", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "pod and volume labels empty or blank", to: remediatorTo, send: webhook(token, alterValid(func(_ *remediator.Payload, l map[string]string) { l["pod"], l["volume"] = "", " " })),
			code: http.StatusUnprocessableEntity, reason: "lacks label(s) pod, volume", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "namespace label not a name (`ns/../kube-system`)", to: remediatorTo, send: webhook(token, setLabel("namespace", ns+"/../kube-system")),
			code: http.StatusUnprocessableEntity, reason: "label namespace=", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "pod label a path (`../victim`)", to: remediatorTo, send: webhook(token, setLabel("pod", "../"+victim.Name)),
			code: http.StatusUnprocessableEntity, reason: "label pod=", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "volume label a path (`data/../../etc`)", to: remediatorTo, send: webhook(token, setLabel("volume", "data/../../etc")),
			code: http.StatusUnprocessableEntity, reason: "label volume=", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "uid not a UID (the pod's UID in upper case)", to: remediatorTo, send: webhook(token, setLabel("uid", strings.ToUpper(uid))),
			code: http.StatusUnprocessableEntity, reason: "is not a valid UID", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "uid a path (`../../etc/passwd`)", to: remediatorTo, send: webhook(token, setLabel("uid", "../../etc/passwd")),
			code: http.StatusUnprocessableEntity, reason: "is not a valid UID", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: "a valid alert next to a malformed one", to: remediatorTo, send: webhook(token, alterValid(func(p *remediator.Payload, _ map[string]string) {
			bad := p.Alerts[0]
			bad.Labels = map[string]string{"namespace": ns, "pod": victim.Name, "uid": "x", "volume": "data"}
			p.Alerts = append(p.Alerts, bad)
		})), code: http.StatusUnprocessableEntity, reason: "malformed alerts, nothing was done", counter: rejected(http.StatusUnprocessableEntity), log: payloadRejected(http.StatusUnprocessableEntity)}},
		{{name: fmt.Sprintf("body over the size limit (a valid alert padded past %d KiB)", hostileMaxBody>>10), to: remediatorTo,
			send: webhook(token, alterValid(func(p *remediator.Payload, _ map[string]string) {
				p.Alerts[0].Annotations = map[string]string{"description": strings.Repeat("x", hostileMaxBody)}
			})), code: http.StatusRequestEntityTooLarge, reason: fmt.Sprintf("request body larger than %d bytes", hostileMaxBody),
			counter: rejected(http.StatusRequestEntityTooLarge), log: payloadRejected(http.StatusRequestEntityTooLarge)}},
		{{name: "the pod's name with another pod's uid", to: remediatorTo,
			send: webhook(token, framework.OverLimitPayload(node.Name(), ns, victim.Name, string(remote.UID), "data")),
			code: http.StatusOK, reason: `"reason": "recreated"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "recreated"}, 1},
			log: []string{`msg="alert handled"`, "outcome=skipped", "reason=recreated", "uid=" + string(remote.UID)}, handled: true}},
		{{name: "alert for a namespace in --policy.namespace-deny", to: remediatorTo,
			send: webhook(token, framework.OverLimitPayload(node.Name(), denied, deniedPod.Name, string(deniedPod.UID), "data")),
			code: http.StatusOK, reason: `"reason": "namespace"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "namespace"}, 1},
			log: []string{`msg="alert handled"`, "outcome=skipped", "reason=namespace", "namespace=" + denied}, handled: true}},
		{{name: "alert for a namespace outside --policy.namespace-allow", to: remediatorTo,
			send: webhook(token, framework.OverLimitPayload(node.Name(), outside, outsidePod.Name, string(outsidePod.UID), "data")),
			code: http.StatusOK, reason: `"reason": "namespace"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "namespace"}, 1},
			log: []string{`msg="alert handled"`, "outcome=skipped", "reason=namespace", "namespace=" + outside}, handled: true}},
		{{name: "pod on another node", to: exporterTo, send: live(livePath+remote.Name+"?uid="+string(remote.UID)+"&volume=data", nil),
			code: http.StatusNotFound, reason: "is not on node", counter: liveCode(http.StatusNotFound)}},
		{{name: "the pod's name with another pod's uid", to: exporterTo, send: live(livePath+victim.Name+"?uid="+string(remote.UID)+"&volume=data", nil),
			code: http.StatusNotFound, reason: "it was recreated", counter: liveCode(http.StatusNotFound)}},
		{{name: "pod name with encoded `../` (`..%2F..%2Fetc%2Fpasswd`)", to: exporterTo, send: live(livePath+"..%2F..%2Fetc%2Fpasswd"+q, nil),
			code: http.StatusBadRequest, reason: "not a valid pod name", counter: liveCode(http.StatusBadRequest)}},
		{{name: "namespace `%2E%2E`", to: exporterTo, send: live("/live/namespaces/%2E%2E/pods/"+victim.Name+q, nil),
			code: http.StatusBadRequest, reason: "not a valid namespace name", counter: liveCode(http.StatusBadRequest)}},
		{{name: "dot segments in the path (`pods/../../../etc/passwd`)", to: exporterTo, send: live(livePath+"../../../etc/passwd"+q, nil),
			code: http.StatusTemporaryRedirect, reason: `href="/live/etc/passwd`, counter: liveUntouched}},
		{{name: "volume a path (`../../../etc`)", to: exporterTo, send: live(livePath+victim.Name+"?uid="+uid+"&volume=..%2F..%2F..%2Fetc", nil),
			code: http.StatusBadRequest, reason: "not a valid volume name", counter: liveCode(http.StatusBadRequest)}},
		{{name: "uid not a UID (upper case)", to: exporterTo, send: live(livePath+victim.Name+"?uid="+strings.ToUpper(uid)+"&volume=data", nil),
			code: http.StatusBadRequest, reason: "not a pod UID", counter: liveCode(http.StatusBadRequest)}},
		{{name: "uid given twice (the pod's and another)", to: exporterTo, send: live(livePath+victim.Name+q+"&uid="+string(remote.UID), nil),
			code: http.StatusBadRequest, reason: "uid is given 2 times", counter: liveCode(http.StatusBadRequest)}},
		{{name: "request headers over 64 KiB", to: exporterTo, send: live(livePath+victim.Name+q, http.Header{"X-Pad": {strings.Repeat("x", 70<<10)}}),
			code: http.StatusRequestHeaderFieldsTooLarge, reason: "Request Header Fields Too Large", counter: liveUntouched}},
	}
	legit := [][]hostileCase{
		{{name: "legitimate delivery (the same pod, the same payload as above)", to: remediatorTo, send: webhook(token, valid),
			code: http.StatusOK, reason: `"outcome": "evicted"`, counter: counterWant{"emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}, 1},
			log: []string{`msg="alert handled"`, "outcome=evicted", "uid=" + uid}, handled: true, evicts: 1}},
		{{name: "replay after the eviction", to: remediatorTo, send: webhook(token, valid),
			code: http.StatusOK, reason: `"reason": "duplicate"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "duplicate"}, 1},
			log: []string{`msg="alert handled"`, "outcome=skipped", "reason=duplicate", "uid=" + uid}, handled: true}},
		{
			{name: "two concurrent replays (an HA pair), first", to: remediatorTo, send: webhook(token, valid),
				code: http.StatusOK, reason: `"reason": "duplicate"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "duplicate"}, 1},
				log: []string{`msg="alert handled"`, "outcome=skipped", "reason=duplicate"}, handled: true},
			{name: "two concurrent replays (an HA pair), second", to: remediatorTo, send: webhook(token, valid),
				code: http.StatusOK, reason: `"reason": "duplicate"`, counter: counterWant{"emptydir_remediator_skips_total", map[string]string{"reason": "duplicate"}, 1},
				log: []string{`msg="alert handled"`, "outcome=skipped", "reason=duplicate"}, handled: true},
		},
	}

	env := hostileEnv{ctx: ctx, c: c, remURL: "http://" + remAddr + "/metrics", expURL: "http://" + exporterAddr + "/metrics",
		logs: map[string]string{remediatorTo: c.LogPath(remLog), exporterTo: c.LogPath(expLog)}}
	before := apiServerRequests(ctx, t, c)
	var rows []hostileRow
	for _, g := range groups {
		rows = append(rows, env.run(t, g)...)
	}
	// Not one hostile request evicted, and every pod they named is still there to be evicted.
	for _, p := range []*corev1.Pod{victim, deniedPod, outsidePod, remote} {
		hostileRequireUntouched(ctx, t, c, p)
	}
	for _, g := range legit {
		rows = append(rows, env.run(t, g)...)
	}
	if got := evictionRequests(before, apiServerRequests(ctx, t, c)); got != 1 {
		t.Errorf("the API server counted %d Eviction requests over the whole test, want exactly 1 (the legitimate delivery)", got)
	}
	for _, p := range []*corev1.Pod{deniedPod, outsidePod, remote} {
		hostileRequireUntouched(ctx, t, c, p)
	}
	if p, err := c.Client().CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || p.UID != victim.UID || p.DeletionTimestamp == nil {
		t.Errorf("the legitimate delivery's pod: %v, want it terminating (evicted)", err)
	}
	if t.Failed() {
		return
	}
	framework.RecordDoc(t, "docs/reliability.md", "hostile", "TestHostileInput", hostileTable(rows))
}

// hostileEnv is what a group of cases is checked against.
type hostileEnv struct {
	ctx            context.Context
	c              *cluster.Cluster
	remURL, expURL string
	logs           map[string]string // target → log file
}

// run sends a group's cases at the same time and checks each, with the counters and the
// API server's Eviction count read around the whole group.
func (e hostileEnv) run(t *testing.T, group []hostileCase) []hostileRow {
	t.Helper()
	remBefore, expBefore := e.scrape(t, e.remURL), e.scrape(t, e.expURL)
	logOffsets := map[string]int64{}
	for to, path := range e.logs {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		logOffsets[to] = fi.Size()
	}
	apiBefore := apiServerRequests(e.ctx, t, e.c)

	answers := make([]hostileAnswer, len(group))
	var wg sync.WaitGroup
	for i, hc := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = hc.send()
		}()
	}
	wg.Wait()

	evictions := evictionRequests(apiBefore, apiServerRequests(e.ctx, t, e.c))
	after := map[string]map[string]*dto.MetricFamily{remediatorTo: e.scrape(t, e.remURL), exporterTo: e.scrape(t, e.expURL)}
	before := map[string]map[string]*dto.MetricFamily{remediatorTo: remBefore, exporterTo: expBefore}
	newLog := map[string][]string{}
	for to, path := range e.logs {
		newLog[to] = logLinesFrom(t, path, logOffsets[to])
	}

	wantEvictions, handled := 0, false
	wantDelta := map[string]float64{} // target and series → the sum of the group's deltas
	for _, hc := range group {
		wantEvictions += hc.evicts
		handled = handled || hc.handled
		wantDelta[hc.to+" "+counterKey(hc.counter)] += hc.counter.delta
	}
	rows := make([]hostileRow, 0, len(group))
	for i, hc := range group {
		got := answers[i]
		t.Logf("%s → %s: %d %s (err %v)", hc.name, hc.to, got.code, framework.Tail(strings.TrimSpace(got.body), 300), got.err)
		switch {
		case hc.code == 0 && (got.err != nil || got.code != 0):
			t.Errorf("%s: got %d %q, err %v; want the connection closed without an answer", hc.name, got.code, got.body, got.err)
		case hc.code != 0 && got.err != nil:
			t.Errorf("%s: %v", hc.name, got.err)
		case got.code != hc.code:
			t.Errorf("%s: status %d %s, want %d", hc.name, got.code, got.body, hc.code)
		case !strings.Contains(got.body, hc.reason):
			t.Errorf("%s: answer %s does not say %q", hc.name, got.body, hc.reason)
		}
		if d := counterSum(after[hc.to], hc.counter) - counterSum(before[hc.to], hc.counter); d != wantDelta[hc.to+" "+counterKey(hc.counter)] {
			t.Errorf("%s: %s moved by %g, want %g", hc.name, counterKey(hc.counter), d, wantDelta[hc.to+" "+counterKey(hc.counter)])
		}
		if hc.log != nil && !anyLineHasAll(newLog[hc.to], hc.log) {
			t.Errorf("%s: no new line of the %s log has all of %q; new lines:\n%s", hc.name, hc.to, hc.log, strings.Join(newLog[hc.to], "\n"))
		}
		rows = append(rows, hostileRow{c: hc, got: got, evictions: evictions})
	}
	if evictions != wantEvictions {
		t.Errorf("%s: the API server counted %d Eviction requests, want %d", group[0].name, evictions, wantEvictions)
	}
	if !handled {
		// Rejected before any alert was handled: no alert counted, nothing measured.
		alerts := counterWant{name: "emptydir_remediator_alerts_total"}
		if d := counterSum(after[remediatorTo], alerts) - counterSum(remBefore, alerts); d != 0 {
			t.Errorf("%s: the remediator handled %g alerts, want none", group[0].name, d)
		}
		ok := liveCodeSeries(http.StatusOK)
		if d := counterSum(after[exporterTo], ok) - counterSum(expBefore, ok); d != 0 {
			t.Errorf("%s: the exporter measured %g times, want never", group[0].name, d)
		}
	}
	return rows
}

func liveCodeSeries(code int) counterWant {
	return counterWant{name: "emptydir_exporter_live_requests_total", labels: map[string]string{"code": fmt.Sprint(code)}}
}

func (e hostileEnv) scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := framework.Scrape(e.ctx, e.c, url)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func counterKey(w counterWant) string {
	labels := make([]string, 0, len(w.labels))
	for k, v := range w.labels {
		labels = append(labels, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(labels)
	return w.name + "{" + strings.Join(labels, ",") + "}"
}

// counterSum adds up the series of family w.name whose labels include w.labels (all of them
// for nil labels); 0 for a family not exposed.
func counterSum(fams map[string]*dto.MetricFamily, w counterWant) float64 {
	var sum float64
next:
	for _, m := range fams[w.name].GetMetric() {
		for k, v := range w.labels {
			if labelValue(m, k) != v {
				continue next
			}
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// evictionRequests is how many Eviction requests the API server counted between two reads.
func evictionRequests(before, after map[apiRequest]float64) int {
	n := 0.0
	for k, v := range after {
		if k.resource == "pods" && k.subresource == "eviction" {
			n += v - before[k]
		}
	}
	return int(n)
}

func logLinesFrom(t *testing.T, path string, offset int64) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func anyLineHasAll(lines, subs []string) bool {
next:
	for _, l := range lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return true
	}
	return false
}

func hostileFakeNode(ctx context.Context, t *testing.T, c *cluster.Cluster, name string) *cluster.FakeNode {
	t.Helper()
	node, err := c.NewFakeNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := node.Delete(dctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return node
}

// hostileOverLimitPod runs a pod on node whose volume "data" holds twice its sizeLimit.
func hostileOverLimitPod(ctx context.Context, t *testing.T, node *cluster.FakeNode, ns, name string) *corev1.Pod {
	t.Helper()
	p := node.Pod(ns, name, "data")
	p.Spec.Volumes[0].EmptyDir.SizeLimit = resource.NewQuantity(hostileLimit, resource.BinarySI)
	running, err := node.RunPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Fill(running, "data", 1, hostileOverBytes); err != nil {
		t.Fatal(err)
	}
	return running
}

func hostileRequireUntouched(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod) {
	t.Helper()
	got, err := c.Client().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("pod %s/%s: %v", p.Namespace, p.Name, err)
	case got.UID != p.UID || got.DeletionTimestamp != nil:
		t.Errorf("pod %s/%s (uid %s) was touched: uid %s, deletionTimestamp %v", p.Namespace, p.Name, p.UID, got.UID, got.DeletionTimestamp)
	}
}

// hostileGet sends GET pathAndQuery exactly as written (no client-side cleaning or
// escaping) and does not follow redirects.
func hostileGet(ctx context.Context, c *cluster.Cluster, addr, pathAndQuery string, header http.Header) hostileAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return hostileAnswer{err: err}
	}
	path, query, _ := strings.Cut(pathAndQuery, "?")
	req.URL.Opaque, req.URL.RawQuery = "//"+addr+path, query
	for k, v := range header {
		req.Header[k] = v
	}
	hc := c.HTTPClient(nil)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return hostileAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return hostileAnswer{code: resp.StatusCode, body: string(b), err: err}
}

// hostileSlowRequest writes start, then one more byte each second (the rest of a request that
// never completes), until the server answers or hangs up; the answer, or code 0 when the
// server closed the connection without one.
func hostileSlowRequest(ctx context.Context, c *cluster.Cluster, addr, start string) hostileAnswer {
	conn, err := c.DialContext(ctx, "tcp", addr)
	if err != nil {
		return hostileAnswer{err: err}
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, start); err != nil {
		return hostileAnswer{err: err}
	}
	trickle, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// Until the answer is read or the server hung up (the write fails).
		_ = wait.PollUntilContextCancel(trickle, time.Second, false, func(context.Context) (bool, error) {
			_, err := conn.Write([]byte("x"))
			return err != nil, nil
		})
	}()
	_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	// A reset is a close too: the server hung up with the client's bytes still unread.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return hostileAnswer{}
	}
	if err != nil {
		return hostileAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return hostileAnswer{code: resp.StatusCode, body: string(b), err: err}
}

// hostileTable renders the rows as the Markdown table of docs/reliability.md.
func hostileTable(rows []hostileRow) string {
	var b strings.Builder
	b.WriteString("| case | sent to | status, reason in the answer | Eviction requests (API server) |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	wrong, legit := 0, 0
	for _, r := range rows {
		status := fmt.Sprintf("%d %s", r.got.code, http.StatusText(r.got.code))
		if r.got.code == 0 {
			status = "connection closed at the read timeout, no answer"
		}
		if r.c.reason != "" {
			status += ", `" + strings.ReplaceAll(r.c.reason, "`", "'") + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", r.c.name, r.c.to, status, r.evictions)
		if r.c.evicts > 0 {
			legit += r.evictions
		} else {
			wrong += r.evictions
		}
	}
	fmt.Fprintf(&b, "\n%d cases tried (%d hostile); evictions expected 1, observed %d; wrong evictions = %d.\n",
		len(rows), len(rows)-1, legit, wrong)
	return b.String()
}
