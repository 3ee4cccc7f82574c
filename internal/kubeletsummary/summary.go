// Package kubeletsummary reads the kubelet Summary API (/stats/summary), the one way
// the exporter and the remediator get the kubelet's own volume numbers.
package kubeletsummary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// MaxBytes bounds how much of a Summary answer is read: a busy node's summary is a
// few MiB at most.
const MaxBytes = 64 << 20

// ErrMalformed marks an answer that is not a Summary: the kubelet (or what answered in
// its place) said something unusable, as opposed to not being reachable.
var ErrMalformed = errors.New("malformed summary")

// Decode reads at most MaxBytes of r and decodes them as a Summary. Errors reading r
// are returned wrapped as they are; an answer that is larger or does not decode wraps
// ErrMalformed.
func Decode(r io.Reader) (*statsapi.Summary, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading summary: %w", err)
	}
	if len(body) > MaxBytes {
		return nil, fmt.Errorf("decoding summary: %w: larger than %d bytes", ErrMalformed, MaxBytes)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(body, &sum); err != nil {
		return nil, fmt.Errorf("decoding summary: %w: %w", ErrMalformed, err)
	}
	return &sum, nil
}

// ThroughProxy reads the Summary of node through the API server's node proxy
// (GET /api/v1/nodes/{node}/proxy/stats/summary; RBAC: nodes/proxy get) with client, the
// core/v1 REST client of a clientset. An answer other than 2xx is the API server's
// Status as client-go returns it (apierrors.APIStatus, with the kubelet's message when it
// answered); failing to reach the API server is the transport's error.
func ThroughProxy(ctx context.Context, client rest.Interface, node string) (*statsapi.Summary, error) {
	body, err := client.Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("stats", "summary").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("summary of node %q via API server: %w", node, err)
	}
	defer func() { _ = body.Close() }()
	sum, err := Decode(body)
	if err != nil {
		return nil, fmt.Errorf("summary of node %q via API server: %w", node, err)
	}
	return sum, nil
}

// DedicatedImageFs judges from a Summary whether the runtime's image filesystem (where writable
// layers live) is apart from the node's, which the Summary does not say: an image filesystem
// whose capacity, free space and inodes all equal the node filesystem's is taken for the same
// one, anything else (or a Summary without both) for a dedicated one. A dedicated one leaves
// writable layers out of their containers' usage: counting less, a missed eviction, never a
// wrong one.
func DedicatedImageFs(s *statsapi.Summary) bool {
	if s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || s.Node.Fs == nil {
		return true
	}
	a, b := s.Node.Runtime.ImageFs, s.Node.Fs
	same := func(x, y *uint64) bool { return x != nil && y != nil && *x == *y }
	return !same(a.CapacityBytes, b.CapacityBytes) || !same(a.AvailableBytes, b.AvailableBytes) || !same(a.Inodes, b.Inodes)
}
