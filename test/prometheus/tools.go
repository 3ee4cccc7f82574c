//go:build tools

// Package prometheus only pins the Prometheus that the install tests run from the Prometheus
// Operator's configuration; test/promoperator/build.sh builds its command. It is a module
// of its own because Prometheus and the operator pin different client-go versions.
package prometheus

import _ "github.com/prometheus/prometheus/cmd/prometheus"
