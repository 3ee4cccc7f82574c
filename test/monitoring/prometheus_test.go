package monitoring

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// fakePrometheus answers /api/v1/query with body and records the query it was asked.
func fakePrometheus(t *testing.T, status int, body string) (*Stack, *string) {
	t.Helper()
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		asked = r.URL.Path + " " + r.Form.Get("query")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.Config{Address: srv.URL, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return &Stack{prometheus: promv1.NewAPI(c)}, &asked
}

func TestQueryResults(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	for _, tc := range []struct {
		name, body string
		want       []Sample
	}{{
		name: "vector",
		body: `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"__name__":"up","job":"emptydir-exporter"},"value":[1700000000.5,"1"]}]}}`,
		want: []Sample{{Metric: map[string]string{"__name__": "up", "job": "emptydir-exporter"}, Value: 1, Time: at(1700000000500)}},
	}, {
		name: "matrix: raw samples, the last one as Value",
		body: `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"uid":"u1"},"values":[[1700000000,"1048576"],[1700000005.25,"2097152"]]}]}}`,
		want: []Sample{{Metric: map[string]string{"uid": "u1"}, Value: 2097152, Time: at(1700000005250),
			Values: []Point{{Time: at(1700000000000), Value: 1048576}, {Time: at(1700000005250), Value: 2097152}}}},
	}, {
		name: "scalar",
		body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}`,
		want: []Sample{{Metric: map[string]string{}, Value: 42, Time: at(1700000000000)}},
	}, {
		name: "empty vector",
		body: `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		want: []Sample{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, asked := fakePrometheus(t, http.StatusOK, tc.body)
			got, err := m.Query(context.Background(), `up == 1`)
			if err != nil {
				t.Fatal(err)
			}
			if *asked != "/api/v1/query up == 1" {
				t.Errorf("asked %q, want the query endpoint with the expression", *asked)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestQueryError(t *testing.T) {
	m, _ := fakePrometheus(t, http.StatusBadRequest,
		`{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`)
	_, err := m.Query(context.Background(), `up ==`)
	if err == nil || !strings.Contains(err.Error(), `"up =="`) || !strings.Contains(err.Error(), "parse error at char 3") {
		t.Errorf("error %v, want one naming the query and Prometheus' message", err)
	}
}
