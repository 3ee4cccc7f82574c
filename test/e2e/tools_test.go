package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// startInNetns starts one of the project's commands inside the cluster's network
// namespace; the cluster's Stop (and the test's cleanup) kills it.
func startInNetns(t testing.TB, c *cluster.Cluster, logName, bin string, args ...string) {
	t.Helper()
	cmd := c.Command(context.Background(), bin, args...)
	if err := c.StartProcess(logName, cmd); err != nil {
		t.Fatalf("starting %s: %v", logName, err)
	}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			if b, err := os.ReadFile(c.LogPath(logName)); err == nil {
				t.Logf("--- %s log (tail) ---\n%s", logName, tail(string(b), 4000))
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// scrape fetches and parses a /metrics page from inside the namespace.
func scrape(ctx context.Context, c *cluster.Cluster, url string) (map[string]*dto.MetricFamily, error) {
	return scrapeWith(ctx, c.HTTPClient(nil), url)
}

// scrapeWith fetches and parses a /metrics page with hc.
func scrapeWith(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sample returns the value of the series of family name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// eventually polls cond every interval until it returns true or timeout passes.
func eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		time.Sleep(interval)
	}
}

// duBytes is the oracle: GNU du -s -B1 of a folder (duOf, failing the test on error), once
// the data written there has been allocated: until writeback a fragmented file may still gain
// an extent block, which the exporter's later walks count.
func duBytes(t testing.TB, dir string) int64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Syncfs(fd)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("syncfs %s: %v", dir, err)
	}
	n, err := duOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
