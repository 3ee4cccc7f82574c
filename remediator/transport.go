package remediator

import (
	"net/http"
	"strings"
)

// WithoutEvictionRetries wraps a client-go transport so that a 429 answer to an
// eviction reaches the remediator at once. client-go retries any 429 that carries
// Retry-After up to ten times, sleeping in between; for an eviction blocked by a
// PodDisruptionBudget that turns a prompt "blocked, retry later" into a webhook that
// hangs until its deadline and reports a timeout instead of pdb_blocked.
// Alertmanager already retries, so the remediator must not.
// Use it as rest.Config.WrapTransport (or with (*rest.Config).Wrap).
func WithoutEvictionRetries(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests &&
			req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction") {
			resp.Header.Del("Retry-After")
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
