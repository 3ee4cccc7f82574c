package monitoring

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAlertmanagerClient(t *testing.T) {
	var filters []string
	var posted []PostableAlert
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v2/alerts":
			filters = r.URL.Query()["filter"]
			_, _ = io.WriteString(w, `[{"labels":{"alertname":"EmptyDirOverLimit","uid":"u1"},"status":{"state":"active"},
				"receivers":[{"name":"emptydir-remediator"}]}]`)
		case r.Method == http.MethodGet && r.URL.Path == "/api/v2/status":
			_, _ = io.WriteString(w, `{"cluster":{"status":"ready","peers":[{"name":"a"},{"name":"b"}]}}`)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v2/alerts" && r.Header.Get("Content-Type") == "application/json":
			if err := json.NewDecoder(r.Body).Decode(&posted); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
		default:
			http.Error(w, "no such endpoint", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	am := alertmanagerClient{http: srv.Client(), base: srv.URL}
	ctx := context.Background()

	alerts, err := am.alerts(ctx, `alertname="EmptyDirOverLimit"`, `uid="u1"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`alertname="EmptyDirOverLimit"`, `uid="u1"`}; !reflect.DeepEqual(filters, want) {
		t.Errorf("filters %q, want %q", filters, want)
	}
	if len(alerts) != 1 || alerts[0].Labels["uid"] != "u1" || alerts[0].Status.State != "active" ||
		len(alerts[0].Receivers) != 1 || alerts[0].Receivers[0].Name != "emptydir-remediator" {
		t.Errorf("alerts %+v", alerts)
	}

	st, err := am.status(ctx)
	if err != nil || st.Cluster.Status != "ready" || len(st.Cluster.Peers) != 2 {
		t.Errorf("status %+v, %v; want ready with 2 peers", st, err)
	}

	send := []PostableAlert{{Labels: map[string]string{"alertname": "EmptyDirOverLimit"}, StartsAt: time.Unix(1700000000, 0).UTC()}}
	if err := am.post(ctx, send); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(posted, send) {
		t.Errorf("posted %+v, want %+v", posted, send)
	}

	bad := alertmanagerClient{http: srv.Client(), base: srv.URL + "/nowhere"}
	if _, err := bad.alerts(ctx); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such endpoint") {
		t.Errorf("error %v, want the status and the body", err)
	}
}
