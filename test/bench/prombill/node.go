package prombill

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// The shape of every simulated node: a full node (the kubelet's default max-pods), each pod
// with three disk emptyDirs (one with a sizeLimit) and one container with its own
// ephemeral-storage limit, so that the pod and container ephemeral-storage series appear.
const (
	podsPerNode       = 110
	namespaceCount    = 12
	sizeLimitBytes    = 1 << 30
	containerLimitGiB = 2
	containerName     = "app"
)

// emptyDirNames are each pod's emptyDir volumes; the first has the sizeLimit.
var emptyDirNames = []string{"cache", "scratch", "tmp"}

// workloads name the pods, as Deployments' pods are named.
var workloads = []string{"checkout-api", "search-indexer", "image-resizer", "payments-worker", "session-cache",
	"report-builder", "ingest-gateway", "ml-feature-store", "notification-fanout", "pdf-renderer", "ledger-sync"}

// hashOf is a stable 64-bit hash of parts, for names and values that look random but repeat.
func hashOf(parts ...any) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprint(h, p, "\x00")
	}
	return h.Sum64()
}

// podUID is a UUID-shaped UID of one incarnation (generation) of a pod.
func podUID(node string, pod, generation int) string {
	a, b := hashOf(node, pod, generation, "uid"), hashOf(node, pod, generation, "uid2")
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>52, b&0xffffffffffff)
}

// podVolumes is pod i of node as exporter.PodWatcher lists it with the ephemeral-storage
// parts on (exporter.withStorage): its emptyDirs, its container's writable layer and logs,
// and the pod's own files. generation counts its restarts: each has a new UID and container.
func podVolumes(node string, i, generation int) part.Pod {
	h := hashOf(node, i)
	pv := part.Pod{
		Namespace: fmt.Sprintf("team-%02d", i%namespaceCount),
		Pod:       fmt.Sprintf("%s-%010x-%05x", workloads[i%len(workloads)], h>>24&0xffffffffff, h&0xfffff),
		UID:       podUID(node, i, generation),
	}
	limit := int64(containerLimitGiB << 30) // the pod's limit is its one container's
	sizeLimit := int64(sizeLimitBytes)
	for k, name := range emptyDirNames {
		v := part.Part{Name: name, Medium: part.MediumDisk, BudgetBytes: &limit}
		if k == 0 {
			v.LimitBytes = &sizeLimit
		}
		pv.Parts = append(pv.Parts, v)
	}
	containerID := fmt.Sprintf("containerd://%016x%016x%016x%016x", hashOf(pv.UID, 1), hashOf(pv.UID, 2), hashOf(pv.UID, 3), hashOf(pv.UID, 4))
	pv.Parts = append(pv.Parts,
		part.Part{Name: "container/" + containerName + "/writable-layer", Medium: part.MediumDisk, Kind: part.KindWritableLayer,
			Container: containerName, ContainerID: containerID, BudgetBytes: &limit},
		part.Part{Name: "container/" + containerName + "/logs", Medium: part.MediumDisk, Kind: part.KindContainerLogs,
			Container: containerName, BudgetBytes: &limit},
		part.Part{Name: "pod/files", Medium: part.MediumDisk, Kind: part.KindPodFiles, BudgetBytes: &limit})
	pv.Storage = &part.PodStorage{LimitBytes: &limit,
		Containers: []part.Container{{Name: containerName, ID: containerID, LimitBytes: &limit}}}
	return pv
}

// measureDrifting is the nodes' MeasureFunc: each part holds a stable base and grows by a
// few KiB a second (wrapping every hour), so that every cycle's samples differ, as on a busy
// node, while staying far below the limits (no alert fires).
func measureDrifting(_ context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
	now := time.Now()
	h := hashOf(p.UID, v.Name)
	used := int64(h%(64<<20)) + int64(h%16+1)<<10*(now.Unix()%3600)
	method := part.MethodWalk
	if v.Kind == part.KindContainerLogs || v.Kind == part.KindPodFiles {
		method = part.MethodFiles
	}
	const capacity = 200 << 30
	return part.Measurement{UsedBytes: used, CapacityBytes: capacity, AvailableBytes: capacity - 80<<30 - used,
		InodesUsed: used>>15 + 1, MeasuredAt: now, CompletedAt: now, Method: method}, nil
}

// simNode is one simulated node: a real exporter with its collection cycles running, its
// registry as the command builds it, served on its own loopback listener.
type simNode struct {
	name    string
	addr    string
	handler http.Handler
	pods    *exportertest.Pods
	source  *exportertest.Source

	mu          sync.Mutex
	generations []int // restarts of each pod
	restarts    int
}

// restartPod replaces pod i by its next incarnation: same name, new UID and container.
func (n *simNode) restartPod(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.generations[i]++
	n.restarts++
	n.pods.Set(n.podList()...)
}

func (n *simNode) podList() []part.Pod {
	out := make([]part.Pod, len(n.generations))
	for i, g := range n.generations {
		out[i] = podVolumes(n.name, i, g)
	}
	return out
}

// fleet is the running simulated nodes of one profile.
type fleet struct {
	nodes  []*simNode
	cancel context.CancelFunc
	wg     sync.WaitGroup
	srvs   []*http.Server
	once   sync.Once
}

// sourceDrainEvery is how often a node forgets the requests its fake source recorded
// (exportertest.Source keeps every one for its tests' Take).
const sourceDrainEvery = 10 * time.Second

// startFleet starts n nodes of profile p. Call stop, also after an error.
func startFleet(n int, p profile) (*fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{cancel: cancel}
	for i := range n {
		node, err := f.startNode(ctx, fmt.Sprintf("node-%03d", i), p)
		if err != nil {
			return f, fmt.Errorf("node %d: %w", i, err)
		}
		f.nodes = append(f.nodes, node)
	}
	return f, nil
}

func (f *fleet) startNode(ctx context.Context, name string, p profile) (*simNode, error) {
	node := &simNode{name: name, generations: make([]int, podsPerNode), source: exportertest.NewSource(measureDrifting)}
	node.pods = exportertest.NewPods(node.podList()...)
	cfg := p.exporterConfig()
	cfg.NodeName, cfg.Source, cfg.Pods = name, node.source.Measurer(), node.pods
	exp, err := exporter.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	// The collectors cmd/emptydir-exporter serves beside the exporter's, by collector name.
	others := map[string][]prometheus.Collector{
		exporter.CollectorExporter: {versioncollector.NewCollector("emptydir_exporter")},
		"go":                       {collectors.NewGoCollector()},
		"process":                  {collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
	}
	if node.handler, err = p.handler(exp, others); err != nil {
		return nil, fmt.Errorf("the metrics handler: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	node.addr = ln.Addr().String()
	srv := &http.Server{Handler: node.handler, ReadHeaderTimeout: 10 * time.Second}
	f.srvs = append(f.srvs, srv)
	f.wg.Add(3)
	go func() { defer f.wg.Done(); exp.Run(ctx) }()
	go func() {
		defer f.wg.Done()
		// A node whose server fails is a target down, which the window's reading refuses.
		_ = srv.Serve(ln)
	}()
	go func() {
		defer f.wg.Done()
		tick := time.NewTicker(sourceDrainEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				node.source.Take()
			}
		}
	}()
	return node, nil
}

// targets are the first n nodes' listeners.
func (f *fleet) targets(n int) []target {
	var out []target
	for _, node := range f.nodes[:min(n, len(f.nodes))] {
		out = append(out, target{addr: node.addr, node: node.name})
	}
	return out
}

// stop ends the nodes' cycles and servers and waits for them; it may be called again.
func (f *fleet) stop() {
	f.once.Do(func() {
		f.cancel()
		for _, s := range f.srvs {
			_ = s.Close()
		}
		f.wg.Wait()
	})
}
