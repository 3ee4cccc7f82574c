package kubeletsummary_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/internal/kubeletsummary"
)

func TestThroughProxy(t *testing.T) {
	tests := []struct {
		name          string
		code          int
		body          func(w io.Writer)
		wantNode      string
		wantStatus    int32 // an apierrors.APIStatus with this code
		wantMalformed bool
	}{
		{name: "summary", code: 200, wantNode: "node-1",
			body: func(w io.Writer) { _, _ = io.WriteString(w, `{"node": {"nodeName": "node-1"}, "pods": []}`) }},
		{name: "kubelet unreachable through the proxy", code: 503, wantStatus: 503,
			body: func(w io.Writer) {
				_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"error trying to reach service","reason":"ServiceUnavailable","code":503}`)
			}},
		{name: "kubelet error as plain text", code: 500, wantStatus: 500,
			body: func(w io.Writer) { _, _ = io.WriteString(w, "failed to get rootFs stats") }},
		{name: "malformed", code: 200, wantMalformed: true,
			body: func(w io.Writer) { _, _ = io.WriteString(w, `{"node": {"nodeName": `) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				w.WriteHeader(tt.code)
				tt.body(w)
			}))
			defer srv.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}

			sum, err := kubeletsummary.ThroughProxy(t.Context(), client.CoreV1().RESTClient(), "node-1")

			if path != "/api/v1/nodes/node-1/proxy/stats/summary" {
				t.Errorf("requested %q", path)
			}
			var status apierrors.APIStatus
			switch {
			case tt.wantNode != "":
				if err != nil || sum.Node.NodeName != tt.wantNode {
					t.Fatalf("got %+v, %v; want the summary of %s", sum, err, tt.wantNode)
				}
			case tt.wantMalformed:
				if !errors.Is(err, kubeletsummary.ErrMalformed) {
					t.Fatalf("error %v, want ErrMalformed", err)
				}
			case !errors.As(err, &status) || status.Status().Code != tt.wantStatus:
				t.Fatalf("error %v, want an API status %d", err, tt.wantStatus)
			}
		})
	}
}

// endless reads as an endless JSON string: a kubelet (or impostor) that never stops.
type endless struct{}

var endlessBlock = bytes.Repeat([]byte("n"), 64<<10)

func (endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], endlessBlock)
	}
	return n, nil
}

// An answer is read up to MaxBytes and no further: beyond, it is malformed.
func TestDecodeStopsAtMaxBytes(t *testing.T) {
	_, err := kubeletsummary.Decode(io.MultiReader(strings.NewReader(`{"node": {"nodeName": "`), endless{}))
	if !errors.Is(err, kubeletsummary.ErrMalformed) {
		t.Fatalf("error %v, want ErrMalformed", err)
	}
}
