package remediator

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// amPayload is a payload as Alertmanager 0.28 sends it.
const amPayload = `{
  "receiver": "emptydir-remediator",
  "status": "firing",
  "alerts": [
    {
      "status": "firing",
      "labels": {"alertname": "EmptyDirOverLimit", "namespace": "default", "pod": "empty-test1",
                 "uid": "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", "volume": "empty", "node": "node-1",
                 "severity": "critical", "remediation": "evict"},
      "annotations": {"summary": "emptyDir empty of default/empty-test1 is over its limit"},
      "startsAt": "2026-12-02T16:58:30.123Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://prometheus:9090/graph?g0.expr=...",
      "fingerprint": "c4a1d9a5f0e6b2d3"
    },
    {
      "status": "resolved",
      "labels": {"alertname": "EmptyDirOverLimit"},
      "annotations": {},
      "startsAt": "2026-12-02T16:00:00Z",
      "endsAt": "2026-12-02T16:30:00Z",
      "generatorURL": "",
      "fingerprint": "0000000000000001"
    }
  ],
  "groupLabels": {"alertname": "EmptyDirOverLimit"},
  "commonLabels": {"alertname": "EmptyDirOverLimit"},
  "commonAnnotations": {},
  "externalURL": "http://alertmanager:9093",
  "version": "4",
  "groupKey": "{}:{alertname=\"EmptyDirOverLimit\"}",
  "truncatedAlerts": 0
}`

func TestDecodePayload(t *testing.T) {
	withAlert := func(alert string) string {
		return `{"version":"4","status":"firing","alerts":[` + alert + `]}`
	}
	tests := []struct {
		name     string
		body     string
		max      int64
		wantCode int // 0: no error
		wantErr  string
		check    func(*testing.T, *Payload)
	}{
		{name: "alertmanager payload", body: amPayload, check: func(t *testing.T, p *Payload) {
			if len(p.Alerts) != 2 || p.Receiver != "emptydir-remediator" || p.GroupKey == "" || p.ExternalURL == "" {
				t.Errorf("payload fields: %+v", p)
			}
			want := Target{Namespace: "default", Pod: "empty-test1", UID: "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", Check: CheckEmptyDir, Volume: "empty"}
			if got := p.Alerts[0].Target(); got != want {
				t.Errorf("target %+v, want %+v", got, want)
			}
			if p.Alerts[0].StartsAt.IsZero() || p.Alerts[0].Fingerprint != "c4a1d9a5f0e6b2d3" {
				t.Errorf("alert fields: %+v", p.Alerts[0])
			}
		}},
		{name: "no alerts", body: `{"version":"4","alerts":[]}`},
		{name: "truncated alerts", body: `{"version":"4","truncatedAlerts":3,"alerts":[]}`, check: func(t *testing.T, p *Payload) {
			if p.TruncatedAlerts != 3 {
				t.Errorf("truncatedAlerts %d", p.TruncatedAlerts)
			}
		}},
		{name: "unknown fields ignored", body: `{"version":"4","future":{"x":1},"alerts":[]}`},
		{name: "empty body", body: ``, wantCode: 400, wantErr: "invalid JSON"},
		{name: "not an object", body: `[]`, wantCode: 400, wantErr: "invalid JSON"},
		{name: "truncated JSON", body: amPayload[:100], wantCode: 400, wantErr: "invalid JSON"},
		{name: "trailing data", body: `{"version":"4"} {"version":"4"}`, wantCode: 400, wantErr: "after the payload"},
		{name: "version missing", body: `{"alerts":[]}`, wantCode: 400, wantErr: "unsupported payload version"},
		{name: "version 3", body: `{"version":"3","alerts":[]}`, wantCode: 400, wantErr: `"3"`},
		// Alertmanager >= 0.32 renders a webhook `payload` template instead of the body: the
		// error names the cause.
		{name: "a payload template's body", body: `{"text":"[FIRING:1] EmptyDirOverLimit default/p"}`, wantCode: 400, wantErr: "payload` template must not be set"},
		{name: "version as number", body: `{"version":4}`, wantCode: 400, wantErr: "invalid JSON"},
		{name: "bad time", body: withAlert(`{"status":"firing","startsAt":"yesterday"}`), wantCode: 400, wantErr: "invalid JSON"},
		{name: "too large", body: amPayload, max: 100, wantCode: 413, wantErr: "larger than 100 bytes"},
		{name: "exactly the limit", body: `{"version":"4"}`, max: int64(len(`{"version":"4"}`))},
		{name: "missing volume", body: withAlert(`{"status":"firing","labels":{"namespace":"a","pod":"b","uid":"c"}}`), wantCode: 422, wantErr: "volume"},
		{name: "missing all", body: withAlert(`{"status":"firing","labels":{}}`), wantCode: 422, wantErr: "namespace, pod, uid, volume"},
		{name: "blank uid", body: withAlert(`{"status":"firing","labels":{"namespace":"a","pod":"b","uid":"  ","volume":"v"}}`), wantCode: 422, wantErr: "uid"},
		{name: "bad namespace", body: withAlert(`{"status":"firing","labels":{"namespace":"../etc","pod":"b","uid":"c","volume":"v"}}`), wantCode: 422, wantErr: "namespace"},
		{name: "bad uid", body: withAlert(`{"status":"firing","labels":{"namespace":"a","pod":"b","uid":"c/../d","volume":"v"}}`), wantCode: 422, wantErr: "uid"},
		{name: "unknown status", body: withAlert(`{"status":"pending","labels":{"namespace":"a","pod":"b","uid":"c","volume":"v"}}`), wantCode: 422, wantErr: "pending"},
		// The chart's routing copy (OnNamespace): namespace is the remediator's, pod_namespace the pod's.
		{name: "routing copy names the pod's namespace in pod_namespace", body: withAlert(`{"status":"firing","labels":{"namespace":"emptydir-guard","pod_namespace":"tenant-a","pod":"p","uid":"5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d","check":"pod"}}`),
			check: func(t *testing.T, p *Payload) {
				want := Target{Namespace: "tenant-a", Pod: "p", UID: "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", Check: CheckPod}
				if got := p.Alerts[0].Target(); got != want {
					t.Errorf("target %+v, want %+v", got, want)
				}
			}},
		{name: "blank pod_namespace", body: withAlert(`{"status":"firing","labels":{"namespace":"emptydir-guard","pod_namespace":"","pod":"b","uid":"c","volume":"v"}}`), wantCode: 422, wantErr: "lacks label(s) pod_namespace"},
		{name: "bad pod_namespace", body: withAlert(`{"status":"firing","labels":{"namespace":"emptydir-guard","pod_namespace":"../etc","pod":"b","uid":"5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d","volume":"v"}}`), wantCode: 422, wantErr: "label pod_namespace="},
		{name: "resolved without labels", body: withAlert(`{"status":"resolved","labels":{}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxBytes := tt.max
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			p, err := DecodePayload(strings.NewReader(tt.body), maxBytes)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if tt.check != nil {
					tt.check(t, p)
				}
				return
			}
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PayloadError", err)
			}
			if pe.Code != tt.wantCode || !strings.Contains(pe.Error(), tt.wantErr) {
				t.Errorf("error %d %q, want %d containing %q", pe.Code, pe.Error(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

func TestDecodePayloadMaxBytesReader(t *testing.T) {
	rec := httptestRecorder()
	body := http.MaxBytesReader(rec, ioNopCloser(strings.NewReader(amPayload)), 64)
	_, err := DecodePayload(body, 1<<20)
	var pe *PayloadError
	if !errors.As(err, &pe) || pe.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("err = %v, want 413", err)
	}
}

// FuzzDecodePayload: the decoder never panics, errors carry a 4xx code, and an accepted
// payload satisfies what the handler relies on and survives a round trip.
func FuzzDecodePayload(f *testing.F) {
	f.Add([]byte(amPayload))
	f.Add([]byte(`{"version":"4","alerts":[]}`))
	f.Add([]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"namespace":"a","pod":"b","uid":"c","volume":"v"}}]}`))
	f.Add([]byte(`{"version":"4","alerts":[{"status":"resolved"}]}`))
	f.Add([]byte(`{"version":"3"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		const maxBytes = 64 << 10
		p, err := DecodePayload(bytes.NewReader(body), maxBytes)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PayloadError", err)
			}
			if pe.Code < 400 || pe.Code > 499 || pe.Message == "" {
				t.Fatalf("error code %d message %q", pe.Code, pe.Message)
			}
			if p != nil {
				t.Fatal("payload returned with an error")
			}
			return
		}
		if p.Version != PayloadVersion || len(body) > maxBytes {
			t.Fatalf("accepted version %q, %d bytes", p.Version, len(body))
		}
		for i, a := range p.Alerts {
			if a.Status != StatusFiring && a.Status != StatusResolved {
				t.Fatalf("alert %d accepted with status %q", i, a.Status)
			}
			if a.Status == StatusFiring {
				tg := a.Target()
				if tg.Namespace == "" || tg.Pod == "" || strings.TrimSpace(tg.UID) == "" || tg.Volume == "" {
					t.Fatalf("alert %d accepted without its labels: %+v", i, tg)
				}
			}
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("re-encoding an accepted payload: %v", err)
		}
		if _, err := DecodePayload(bytes.NewReader(again), 1<<30); err != nil {
			t.Fatalf("round trip rejected: %v", err)
		}
	})
}
