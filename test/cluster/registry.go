package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// RegistryPort is where StartRegistry's registry listens, on the loopback of the cluster's network
// namespace (private to the cluster, so a fixed port cannot collide).
const RegistryPort = 5000

// registryBinary is Debian's docker-registry package: the CNCF Distribution registry.
const registryBinary = "docker-registry"

func (c *Cluster) registryHostsDir() string { return filepath.Join(c.workDir, "containerd", "certs.d") }

// StartRegistry runs a real OCI registry (Debian's docker-registry, CNCF Distribution) inside the
// cluster's network namespace on 127.0.0.1:RegistryPort, with its storage in the work dir, and
// tells the node's containerd to pull from it over plain HTTP (a hosts.toml, as a node admin
// configures a mirror). It returns the registry's host:port. Stop ends it with the cluster. Later
// calls return the running registry: tests of a shared cluster push to one registry, each under
// repositories of its own.
func (c *Cluster) StartRegistry(ctx context.Context) (string, error) {
	c.registryMu.Lock()
	defer c.registryMu.Unlock()
	if c.registryHost != "" {
		return c.registryHost, nil
	}
	if _, err := exec.LookPath(registryBinary); err != nil {
		return "", fmt.Errorf("%s not on PATH: install Debian's docker-registry package (`make deps`)", registryBinary)
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(RegistryPort))
	dir := filepath.Join(c.workDir, "registry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`, filepath.Join(dir, "data"), host)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return "", err
	}
	hostsDir := filepath.Join(c.registryHostsDir(), host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		return "", err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return "", err
	}
	p, err := c.startExtra("registry", c.Command(context.Background(), registryBinary, "serve", cfgPath))
	if err != nil {
		return "", err
	}
	client := c.HTTPClient(nil)
	err = c.poll(ctx, "the registry on "+host, p, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: poll again
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return "", err
	}
	c.registryHost = host
	return host, nil
}
