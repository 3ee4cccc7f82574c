package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// alertmanagerClient calls the three endpoints of Alertmanager's v2 API the tests use. It is
// written by hand: Alertmanager's generated client (api/v2/client) would bring the
// go-openapi runtime and OpenTelemetry into the product's go.mod for three JSON calls.
type alertmanagerClient struct {
	http *http.Client
	base string // http://host:port
}

// AMAlert is an alert as Alertmanager's /api/v2/alerts shows it.
type AMAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
	Receivers []struct {
		Name string `json:"name"`
	} `json:"receivers"`
}

// PostableAlert is an alert as Prometheus posts it to /api/v2/alerts.
type PostableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt,omitzero"`
}

// amStatus is the part of /api/v2/status that tells whether the HA cluster has formed.
type amStatus struct {
	Cluster struct {
		Status string `json:"status"`
		Peers  []any  `json:"peers"`
	} `json:"cluster"`
}

// alerts lists the alerts matching every matcher (e.g. `alertname="EmptyDirOverLimit"`).
func (a alertmanagerClient) alerts(ctx context.Context, matchers ...string) ([]AMAlert, error) {
	q := url.Values{}
	for _, f := range matchers {
		q.Add("filter", f)
	}
	u := a.base + "/api/v2/alerts"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var out []AMAlert
	if err := a.do(ctx, http.MethodGet, u, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (a alertmanagerClient) status(ctx context.Context) (amStatus, error) {
	var st amStatus
	err := a.do(ctx, http.MethodGet, a.base+"/api/v2/status", nil, &st)
	return st, err
}

func (a alertmanagerClient) post(ctx context.Context, alerts []PostableAlert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return err
	}
	return a.do(ctx, http.MethodPost, a.base+"/api/v2/alerts", body, nil)
}

// do sends body (JSON, when not nil) and decodes a 200 answer into out (when not nil).
func (a alertmanagerClient) do(ctx context.Context, method, u string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	return nil
}

// AlertmanagerAlerts returns Alertmanager's alerts, optionally filtered by matchers such as
// `alertname="EmptyDirOverLimit"`.
func (m *Stack) AlertmanagerAlerts(ctx context.Context, matchers ...string) ([]AMAlert, error) {
	return m.alertmanager.alerts(ctx, matchers...)
}
