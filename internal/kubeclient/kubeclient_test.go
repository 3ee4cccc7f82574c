package kubeclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

func TestREST(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod: the in-cluster configuration fails
	t.Setenv("KUBECONFIG", "")
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}

	c := Config{QPS: 20, Burst: 40}
	app := kingpin.New("t", "")
	c.AddFlags(app)
	if _, err := app.Parse([]string{"--kubeconfig=" + file, "--kube-api.burst=50"}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.REST("agent/1")
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://10.0.0.1:6443" || rc.BearerToken != "t" || rc.QPS != 20 || rc.Burst != 50 || rc.UserAgent != "agent/1" {
		t.Errorf("REST config: host %q token %q qps %v burst %d agent %q", rc.Host, rc.BearerToken, rc.QPS, rc.Burst, rc.UserAgent)
	}

	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"outside a pod without a kubeconfig", Config{QPS: 1, Burst: 1}, "give --kubeconfig"},
		{"missing kubeconfig file", Config{Kubeconfig: filepath.Join(t.TempDir(), "missing"), QPS: 1, Burst: 1}, "--kubeconfig"},
	} {
		if _, err := tt.c.REST("a"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	if err := (Config{QPS: 0, Burst: 1}).Validate(); err == nil {
		t.Error("QPS 0 accepted")
	}
}
