package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// WebhookRecorder is a transparent reverse proxy between Alertmanager and the remediator,
// listening inside the namespace: it timestamps each notification and keeps its
// Authorization header, payload, status and answer, so the test can show that Alertmanager
// sent the token and what the remediator answered, and when.
type WebhookRecorder struct {
	srv *http.Server
	mu  sync.Mutex
	got []RecordedWebhook
}

// RecordedWebhook is one notification through the WebhookRecorder and the answer to it.
type RecordedWebhook struct {
	Received, Answered time.Time
	Authorization      string
	Payload            remediator.Payload
	Code               int
	Response           remediator.WebhookResponse
}

// NewWebhookRecorder listens on listen inside c's namespace and forwards to target.
func NewWebhookRecorder(c *cluster.Cluster, listen, target string) (*WebhookRecorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := c.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("recorder listen: %w", err)
	}
	r := &WebhookRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = c.HTTPClient(nil).Transport
	type ctxKey struct{}
	proxy.ModifyResponse = func(resp *http.Response) error {
		rec, _ := resp.Request.Context().Value(ctxKey{}).(*RecordedWebhook)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rec != nil {
			rec.Answered, rec.Code = time.Now(), resp.StatusCode
			_ = json.Unmarshal(body, &rec.Response)
			r.mu.Lock()
			r.got = append(r.got, *rec)
			r.mu.Unlock()
		}
		return err
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &RecordedWebhook{Received: time.Now(), Authorization: req.Header.Get("Authorization")}
		body, _ := io.ReadAll(req.Body)
		_ = json.Unmarshal(body, &rec.Payload)
		req.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), ctxKey{}, rec)))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// Close stops the recorder.
func (r *WebhookRecorder) Close() { _ = r.srv.Close() }

// ForUID returns the recorded notifications that carry an alert for that pod UID.
func (r *WebhookRecorder) ForUID(uid string) []RecordedWebhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RecordedWebhook
	for _, w := range r.got {
		for _, a := range w.Payload.Alerts {
			if a.Labels["uid"] == uid {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// All returns every recorded delivery.
func (r *WebhookRecorder) All() []RecordedWebhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// OutcomeFor returns the remediator's answer for that UID in a recorded notification.
func OutcomeFor(w RecordedWebhook, uid string) (remediator.AlertResult, bool) {
	for _, a := range w.Response.Alerts {
		if a.Target.UID == uid {
			return a, true
		}
	}
	return remediator.AlertResult{}, false
}

// OverLimitPayload is the payload Alertmanager would send for EmptyDirOverLimit of one volume.
func OverLimitPayload(node, ns, pod, uid, volume string) []byte {
	labels := map[string]string{"alertname": "EmptyDirOverLimit", "namespace": ns, "pod": pod, "uid": uid,
		"volume": volume, "node": node, "severity": "critical", "remediation": "evict"}
	p := remediator.Payload{Version: "4", Status: remediator.StatusFiring, Receiver: "emptydir-remediator",
		GroupKey:    fmt.Sprintf(`{}/{remediation="evict"}:{namespace=%q, pod=%q, uid=%q, volume=%q}`, ns, pod, uid, volume),
		GroupLabels: map[string]string{"namespace": ns, "pod": pod, "uid": uid, "volume": volume}, CommonLabels: labels,
		Alerts: []remediator.Alert{{Status: remediator.StatusFiring, Labels: labels, StartsAt: time.Now().Add(-time.Minute),
			Fingerprint: "e2e" + strings.ReplaceAll(uid, "-", "")[:13]}}}
	b, _ := json.Marshal(p)
	return b
}

// PostWebhook posts a payload straight to a remediator (not through Alertmanager).
func PostWebhook(ctx context.Context, c *cluster.Cluster, addr, token string, body []byte) (int, remediator.WebhookResponse, string, error) {
	r, err := PostWebhookWith(ctx, c.HTTPClient(nil), addr, token, body)
	return r.Code, r.Response, r.Raw, err
}

// WebhookReply is a remediator's answer to one delivery.
type WebhookReply struct {
	Code     int
	Response remediator.WebhookResponse // decoded from Raw when it is JSON
	Raw      string
	Header   http.Header
}

// PostWebhookWith is PostWebhook over client: one client keeps its connection alive across
// deliveries, as Alertmanager does.
func PostWebhookWith(ctx context.Context, client *http.Client, addr, token string, body []byte) (WebhookReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/webhook", bytes.NewReader(body))
	if err != nil {
		return WebhookReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return WebhookReply{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := WebhookReply{Code: resp.StatusCode, Raw: string(raw), Header: resp.Header}
	_ = json.Unmarshal(raw, &r.Response)
	return r, nil
}

// AlertWebhook posts one firing EmptyDirOverLimit alert for pod/uid/volume straight to a
// remediator and returns the status and decoded answer, failing the test if it cannot post.
func AlertWebhook(ctx context.Context, t TB, c *cluster.Cluster, addr, token string, pod *corev1.Pod, uid, volume string) (int, remediator.WebhookResponse) {
	t.Helper()
	code, wr, raw, err := PostWebhook(ctx, c, addr, token, OverLimitPayload(c.NodeName(), pod.Namespace, pod.Name, uid, volume))
	if err != nil {
		t.Fatalf("POST webhook to %s: %v", addr, err)
	}
	t.Logf("webhook %s/%s uid %s → %d %s", pod.Namespace, pod.Name, uid, code, raw)
	return code, wr
}
