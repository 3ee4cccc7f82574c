package main

import (
	"testing"
)

// run(args) is the whole command: bad flags exit 2 before anything starts (the spellings from
// before the flags were named area.name among them: nothing was released with them); good ones
// get past validation and fail (1) only for want of a cluster.
func TestRunExitCodes(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster: the in-cluster configuration fails
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("KUBECONFIG", "")
	static := "--exporter.url=http://127.0.0.1:9731"
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown flag", []string{"--no-such-flag"}, 2},
		{"bad value", []string{static, "--eviction.cooldown=soon"}, 2},
		{"flags that contradict each other", []string{static, "--measurement.timeout=1m"}, 2},
		{"good flags, no cluster", []string{static, "--eviction.dry-run", "--policy.namespace-deny=kube-system"}, 1},
		{"spellings from before the area.name names", []string{static, "--dry-run", "--namespace-deny=kube-system"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(append([]string{"--web.listen-address=127.0.0.1:0", "--log.level=error"}, tt.args...)); got != tt.want {
				t.Errorf("run(%q) = %d, want %d", tt.args, got, tt.want)
			}
		})
	}
}
