package source

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/kubeletsummary"
)

// Kubelet reads volume usage from the kubelet Summary API. It needs no
// hostPath, but the kubelet refreshes volume stats only every
// --volume-stats-agg-period (1m by default, up to 2m with jitter): MeasuredAt is
// the time the kubelet stamped, so consumers can see how old the numbers are.
type Kubelet struct {
	fetch func(ctx context.Context) (*statsapi.Summary, error)

	// The last Summary, for ContainerRootfs: one request serves a cycle's layers.
	mu      sync.Mutex
	last    *statsapi.Summary
	fetched time.Time
}

// summaryReuse is how long ContainerRootfs reuses a Summary: the kubelet's container stats are
// refreshed every 10 s (containerd), so a newer request would mostly read the same numbers.
const summaryReuse = 5 * time.Second

// ContainerRootfs is the writable-layer usage the kubelet's Summary API gives for container
// of the pod with (kubelet) UID podUID, with the time the kubelet stamped on it; ok is false
// when the Summary has no such figure.
func (s *Kubelet) ContainerRootfs(ctx context.Context, podUID, container string) (used int64, at time.Time, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil || time.Since(s.fetched) > summaryReuse {
		sum, err := s.fetch(ctx)
		if err != nil {
			return 0, time.Time{}, false, err
		}
		s.last, s.fetched = sum, time.Now()
	}
	for _, p := range s.last.Pods {
		if p.PodRef.UID != podUID {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == container && c.Rootfs != nil && c.Rootfs.UsedBytes != nil {
				return int64(*c.Rootfs.UsedBytes), c.Rootfs.Time.Time, true, nil
			}
		}
	}
	return 0, time.Time{}, false, nil
}

// NewKubeletDirect reads /stats/summary from the kubelet at baseURL (for
// example https://10.0.0.5:10250) with client.
func NewKubeletDirect(baseURL string, client *http.Client) *Kubelet {
	return &Kubelet{fetch: func(ctx context.Context) (*statsapi.Summary, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/stats/summary", nil)
		if err != nil {
			return nil, &part.MeasureError{Reason: part.ReasonKubeletError, Err: err}
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, &part.MeasureError{Reason: part.ReasonKubeletUnreachable, Err: err}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, err := io.ReadAll(io.LimitReader(resp.Body, 256))
			if err != nil {
				return nil, &part.MeasureError{Reason: part.ReasonKubeletUnreachable, Err: fmt.Errorf("reading summary: %w", err)}
			}
			return nil, &part.MeasureError{Reason: part.ReasonKubeletError,
				Err: fmt.Errorf("kubelet answered %s: %s", resp.Status, truncate(body, 200))}
		}
		sum, err := kubeletsummary.Decode(resp.Body)
		if err != nil {
			reason := part.ReasonKubeletUnreachable
			if errors.Is(err, kubeletsummary.ErrMalformed) {
				reason = part.ReasonKubeletError
			}
			return nil, &part.MeasureError{Reason: reason, Err: err}
		}
		return sum, nil
	}}
}

// NewKubeletProxy reads the Summary API of node through the API server's
// node proxy (RBAC: nodes/proxy get).
func NewKubeletProxy(client kubernetes.Interface, node string) *Kubelet {
	return &Kubelet{fetch: func(ctx context.Context) (*statsapi.Summary, error) {
		sum, err := kubeletsummary.ThroughProxy(ctx, client.CoreV1().RESTClient(), node)
		if err != nil {
			// The error carries the API server's Status message (e.g. why the kubelet is
			// unreachable), not a generic one.
			reason := part.ReasonKubeletError
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
				reason = part.ReasonKubeletUnreachable
			}
			return nil, &part.MeasureError{Reason: reason, Err: err}
		}
		return sum, nil
	}}
}

// NewKubeletHTTPClient builds the client for NewKubeletDirect with client-go's transport. The
// token file is re-read as it rotates (projected service account tokens do, hourly).
func NewKubeletHTTPClient(caFile, tokenFile string, insecureSkipVerify bool, timeout time.Duration) (*http.Client, error) {
	cfg := &rest.Config{
		TLSClientConfig: rest.TLSClientConfig{Insecure: insecureSkipVerify}, // off unless --kubelet.insecure-skip-tls-verify (test clusters)
		BearerTokenFile: tokenFile,
		Timeout:         timeout,
		// The kubelet is on the node's network: never through HTTPS_PROXY.
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil },
	}
	if caFile != "" {
		// Read here, not as rest's CAFile, for errors that name the kubelet CA file.
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading kubelet CA file: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kubelet CA file %s holds no PEM certificate", caFile)
		}
		cfg.CAData = pem
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	return client, nil
}

// Name implements Source.
func (s *Kubelet) Name() string { return "kubelet" }

// Measure implements Source with one Summary request for all pods: each emptyDir from its
// volume stats and, for pods whose ephemeral storage is measured, each part from the figure
// the kubelet adds up itself (kubeletPart).
func (s *Kubelet) Measure(ctx context.Context, pods []part.Pod) []part.Result {
	stats, fetchErr := s.summary(ctx)
	var out []part.Result
	for _, p := range pods {
		ps, found := stats[p.KubeletUID()]
		for _, v := range p.Parts {
			r := part.Result{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Part: v}
			switch {
			case fetchErr != nil:
				r.Err = fetchErr
			case !found:
				r.Err = &part.MeasureError{Reason: part.ReasonNotFound,
					Err: fmt.Errorf("kubelet summary has no stats for pod %s/%s yet", p.Namespace, p.Pod)}
			default:
				r.Measurement, r.Err = kubeletPart(ps, p, v)
			}
			out = append(out, r)
		}
	}
	return out
}

// kubeletPart is what the Summary says of v, a part of pod p: a volume's stats (emptyDir,
// configMap, gitRepo), a container's rootfs or logs, and for the pod's own files what its
// ephemeral-storage total holds beyond everything else it adds up (calcEphemeralStorage:
// etc-hosts and the pod's log files).
func kubeletPart(ps statsapi.PodStats, p part.Pod, v part.Part) (part.Measurement, error) {
	fromFs := func(what string, fs *statsapi.FsStats) (part.Measurement, error) {
		if fs == nil {
			return part.Measurement{}, &part.MeasureError{Reason: part.ReasonNotFound,
				Err: fmt.Errorf("kubelet summary has no stats for %s of pod %s/%s yet", what, p.Namespace, p.Pod)}
		}
		if fs.UsedBytes == nil { // never to be read as 0 bytes
			return part.Measurement{}, &part.MeasureError{Reason: part.ReasonKubeletError,
				Err: fmt.Errorf("kubelet summary gives no usedBytes for %s of pod %s/%s", what, p.Namespace, p.Pod)}
		}
		return part.Measurement{UsedBytes: int64(*fs.UsedBytes), CapacityBytes: int64(deref(fs.CapacityBytes)),
			AvailableBytes: int64(deref(fs.AvailableBytes)), InodesUsed: int64(deref(fs.InodesUsed)),
			MeasuredAt: fs.Time.Time, CompletedAt: fs.Time.Time, Method: part.MethodKubelet}, nil
	}
	volumeStats := func(name string) *statsapi.FsStats {
		for _, vs := range ps.VolumeStats {
			if vs.Name == name {
				return &vs.FsStats
			}
		}
		return nil
	}
	container := func(name string) *statsapi.ContainerStats {
		for i := range ps.Containers {
			if ps.Containers[i].Name == name {
				return &ps.Containers[i]
			}
		}
		return nil
	}
	_, name, _ := strings.Cut(v.Name, "/")
	switch v.Kind {
	case part.KindEmptyDir:
		return fromFs(fmt.Sprintf("volume %q", v.Name), volumeStats(v.Name))
	case part.KindConfigMap, part.KindGitRepo:
		return fromFs(fmt.Sprintf("volume %q", name), volumeStats(name))
	case part.KindWritableLayer, part.KindContainerLogs:
		c := container(v.Container)
		if c == nil {
			return part.Measurement{}, &part.MeasureError{Reason: part.ReasonNotFound,
				Err: fmt.Errorf("kubelet summary has no container %q of pod %s/%s (yet)", v.Container, p.Namespace, p.Pod)}
		}
		if v.Kind == part.KindWritableLayer {
			return fromFs(v.Describe(), c.Rootfs)
		}
		return fromFs(v.Describe(), c.Logs)
	default: // KindPodFiles
		m, err := fromFs("the ephemeral storage", ps.EphemeralStorage)
		if err != nil {
			return m, err
		}
		rest := m.UsedBytes
		for _, c := range ps.Containers {
			if c.Rootfs != nil {
				rest -= int64(deref(c.Rootfs.UsedBytes))
				if c.Logs != nil {
					rest -= int64(deref(c.Logs.UsedBytes))
				}
			}
		}
		for _, pv := range p.Parts {
			counted := pv.Kind == part.KindConfigMap || pv.Kind == part.KindGitRepo || (pv.Kind == part.KindEmptyDir && pv.Medium == part.MediumDisk)
			_, vname, _ := strings.Cut(pv.Name, "/")
			if pv.Kind == part.KindEmptyDir {
				vname = pv.Name
			}
			if fs := volumeStats(vname); counted && fs != nil {
				rest -= int64(deref(fs.UsedBytes))
			}
		}
		m.UsedBytes, m.InodesUsed = max(rest, 0), 0
		return m, nil
	}
}

// summary fetches and indexes the Summary by pod UID.
func (s *Kubelet) summary(ctx context.Context) (map[string]statsapi.PodStats, error) {
	sum, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	idx := make(map[string]statsapi.PodStats, len(sum.Pods))
	for _, p := range sum.Pods {
		idx[p.PodRef.UID] = p
	}
	return idx, nil
}

// DedicatedImageFilesystem judges from one Summary whether the node's image filesystem is
// dedicated (kubeletsummary.DedicatedImageFs), for an exporter with no hostPath to compare.
func (s *Kubelet) DedicatedImageFilesystem(ctx context.Context) (bool, error) {
	sum, err := s.fetch(ctx)
	if err != nil {
		return false, err
	}
	return kubeletsummary.DedicatedImageFs(sum), nil
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
