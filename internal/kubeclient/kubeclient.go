// Package kubeclient loads the Kubernetes client configuration of both commands from their
// flags: in-cluster in a pod, a kubeconfig file outside one, and the client's rate limit.
package kubeclient

import (
	"errors"
	"fmt"

	"github.com/alecthomas/kingpin/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what the flags say about the API server client.
type Config struct {
	// Kubeconfig is a kubeconfig file; empty: the in-cluster configuration.
	Kubeconfig string
	// QPS and Burst rate-limit the client's requests to the API server.
	QPS   float32
	Burst int
}

// AddFlags registers --kubeconfig (env KUBECONFIG), --kube-api.qps and --kube-api.burst,
// defaulting to the values c holds.
func (c *Config) AddFlags(app *kingpin.Application) {
	app.Flag("kubeconfig", "Kubeconfig file; empty: the in-cluster configuration.").
		Envar("KUBECONFIG").Default(c.Kubeconfig).StringVar(&c.Kubeconfig)
	app.Flag("kube-api.qps", "Queries per second to the API server.").
		Default(fmt.Sprint(c.QPS)).Float32Var(&c.QPS)
	app.Flag("kube-api.burst", "Burst of queries to the API server.").
		Default(fmt.Sprint(c.Burst)).IntVar(&c.Burst)
}

// Validate checks the rate limit: client-go would treat 0 as its own default.
func (c Config) Validate() error {
	if c.QPS <= 0 || c.Burst <= 0 {
		return errors.New("--kube-api.qps and --kube-api.burst must be positive")
	}
	return nil
}

// REST loads the client configuration and applies the rate limit and the user agent.
func (c Config) REST(userAgent string) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if c.Kubeconfig == "" {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster config (give --kubeconfig outside a cluster): %w", err)
		}
	} else if rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	rc.UserAgent = userAgent
	rc.QPS, rc.Burst = c.QPS, c.Burst
	return rc, nil
}
