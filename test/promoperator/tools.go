//go:build tools

// Package promoperator only pins the Prometheus Operator; build.sh builds its command.
package promoperator

import _ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
