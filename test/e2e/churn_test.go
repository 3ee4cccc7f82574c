package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/duoracle"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// Churn: 1,000 pods come and go in waves on a node without a kubelet (cluster.FakeNode),
// while the exporter binary watches the real API server and walks the directories the test
// plays the kubelet for.
const (
	churnWaves          = 10
	churnPerWave        = 100 // pods created per wave, recreated names included: 1,000 in all
	churnKeep           = 50  // live pods left after a wave's deletions
	churnRecreate       = 20  // names deleted in a wave and created again, with a new UID, in the same wave
	churnWorkers        = 16  // API calls in flight
	churnInterval       = time.Second
	churnGoroutineSlack = 5 // goroutines the exporter may have above its baseline once every pod is gone
)

// churnFigures is what the exporter showed at the end of one wave.
type churnFigures struct {
	wave, created, deleted, recreated, live, volumes, series, stale int
	rss, heap, goroutines                                           float64
}

// TestPodChurn creates and deletes 1,000 pods in ten waves on a fake node. Each wave
// deletes pods as the kubelet would (terminating, volumes torn down, then gone), creates
// new ones (Pending without directories, then set up) and recreates some deleted names with new
// UIDs, and holds the kubelet's in-between states until the exporter has run two cycles in
// them. After each wave /metrics must carry exactly the live pods' volumes, each at du's
// bytes, no series of a deleted UID, a successful cycle and no measurement error. At the
// end, with every pod gone, no volume series is left and the goroutines are back to their
// baseline. Memory is reported, not asserted.
func TestPodChurn(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 5*time.Minute)
	defer cancel()

	// The cluster's client is limited to 50 requests/s; 1,000 pods take four calls each.
	cs := fastClient(t, c, 400, 400)
	ns := framework.Namespace(ctx, t, c, "churn")
	node, err := cluster.NewFakeNode(ctx, cs, "fake-"+ns, filepath.Join(t.TempDir(), "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Delete(context.Background()); err != nil {
			t.Errorf("removing the fake node: %v", err)
		}
	})

	ex, base := startChurnExporter(ctx, t, c, bin, "127.0.0.1:19771", node.Name(), node.RootDir())
	baseGoroutines, _ := framework.Sample(base, "go_goroutines", nil)

	live := map[string]*corev1.Pod{} // by name
	var figures []churnFigures
	seq := 0
	for wave := range churnWaves {
		// 1. Deletions: the user's delete marks the pod terminating; the kubelet tears its
		// volumes down and deletes it for good only later.
		var doomed []*corev1.Pod
		for _, name := range sortedNames(live) {
			if len(live)-len(doomed) <= churnKeep {
				break
			}
			doomed = append(doomed, live[name])
		}
		parallel(t, doomed, func(p *corev1.Pod) error {
			if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			return node.TearDown(p)
		})
		for _, p := range doomed {
			delete(live, p.Name)
		}

		// 2. New pods: created (Pending, not set up yet). Recreated names must wait for the
		// old pod's final delete.
		recreate := doomed[:min(churnRecreate, len(doomed))]
		var fresh []*corev1.Pod
		for range churnPerWave - len(recreate) {
			fresh = append(fresh, churnPod(node, ns, fmt.Sprintf("p-%04d", seq), seq))
			seq++
		}
		created := make([]*corev1.Pod, len(fresh))
		parallelIndexed(t, len(fresh), func(i int) (err error) {
			created[i], err = node.CreatePod(ctx, fresh[i])
			return err
		})

		// 3. The kubelet's in-between states, held for two cycles: terminating pods whose
		// directories are gone, created pods whose directories are not there yet. Neither is a
		// failure to measure.
		ex.waitCycles(ctx, t, 2)
		fams, err := ex.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg := ex.healthProblems(fams); msg != "" {
			t.Errorf("wave %d, with %d pods terminating and %d not set up yet: %s", wave, len(doomed), len(created), msg)
		}
		// The exporter saw the in-between states: terminating and Pending pods are listed.
		if n, _ := framework.Sample(fams, "emptydir_exporter_pods", nil); int(n) != len(live)+len(doomed)+len(created) {
			t.Errorf("wave %d: emptydir_exporter_pods %v while settling, want %d running + %d terminating + %d pending",
				wave, n, len(live), len(doomed), len(created))
		}
		for _, p := range doomed { // their data is gone: old numbers would be stale
			if _, found := framework.Sample(fams, "emptydir_used_bytes", map[string]string{"uid": string(p.UID)}); found {
				t.Errorf("wave %d: series of %s (uid %s) published after its volumes were torn down", wave, p.Name, p.UID)
			}
		}

		// 4. The kubelet finishes: deleted pods go, created ones start; recreated names come
		// back with new UIDs.
		parallel(t, doomed, func(p *corev1.Pod) error { return node.FinishDeletion(ctx, p) })
		for i, p := range recreate {
			again := churnPod(node, ns, p.Name, seq+i)
			r, err := node.CreatePod(ctx, again)
			if err != nil {
				t.Fatal(err)
			}
			if r.UID == p.UID {
				t.Fatalf("recreated %s kept UID %s", p.Name, p.UID)
			}
			created = append(created, r)
		}
		seq += len(recreate)
		started := make([]*corev1.Pod, len(created))
		parallelIndexed(t, len(created), func(i int) (err error) {
			if started[i], err = node.StartPod(ctx, created[i]); err != nil {
				return err
			}
			return fillChurnPod(node, started[i])
		})
		for _, p := range started {
			live[p.Name] = p
		}

		// 5. After the wave: exactly the live volumes, at du's bytes; nothing of a deleted UID.
		want := expectedSeries(t, live, node.VolumeDir)
		var last map[string]*dto.MetricFamily
		var diff seriesDiff
		framework.Eventually(t, 60*time.Second, churnInterval/2, fmt.Sprintf("wave %d: exactly the live pods' series at du's bytes", wave), func() (bool, string) {
			fams, err := ex.get(ctx)
			if err != nil {
				return false, err.Error()
			}
			last, diff = fams, diffSeries(fams, "", want)
			return diff.ok(), diff.String()
		})
		for _, p := range doomed {
			if _, found := framework.Sample(last, "emptydir_used_bytes", map[string]string{"uid": string(p.UID)}); found {
				t.Errorf("wave %d: series left for deleted pod %s (uid %s)", wave, p.Name, p.UID)
			}
		}
		if msg := ex.healthProblems(last); msg != "" {
			t.Errorf("wave %d, settled: %s", wave, msg)
		}
		pods, _ := framework.Sample(last, "emptydir_exporter_pods", nil)
		vols, _ := framework.Sample(last, "emptydir_exporter_volumes", nil)
		if int(pods) != len(live) || int(vols) != len(want) {
			t.Errorf("wave %d: emptydir_exporter_pods=%v volumes=%v, want %d and %d", wave, pods, vols, len(live), len(want))
		}
		f := churnFigures{wave: wave + 1, created: len(created), deleted: len(doomed), recreated: len(recreate),
			live: len(live), volumes: len(want), series: diff.series, stale: diff.stale}
		f.rss, _ = framework.Sample(last, "process_resident_memory_bytes", nil)
		f.heap, _ = framework.Sample(last, "go_memstats_heap_inuse_bytes", nil)
		f.goroutines, _ = framework.Sample(last, "go_goroutines", nil)
		figures = append(figures, f)
		t.Logf("wave %d: +%d (%d recreated) -%d, live %d pods/%d volumes, RSS %.1f MiB, heap in use %.1f MiB, %v goroutines",
			f.wave, f.created, f.recreated, f.deleted, f.live, f.volumes, f.rss/(1<<20), f.heap/(1<<20), f.goroutines)
		if t.Failed() {
			return
		}
	}

	// Every pod gone: no volume series, goroutines back to where they were with none.
	parallel(t, podList(live), func(p *corev1.Pod) error { return node.DeletePod(ctx, p) })
	var end map[string]*dto.MetricFamily
	framework.Eventually(t, 60*time.Second, churnInterval/2, "no series once every pod is gone", func() (bool, string) {
		fams, err := ex.get(ctx)
		if err != nil {
			return false, err.Error()
		}
		end = fams
		n := len(fams["emptydir_used_bytes"].GetMetric())
		return n == 0, fmt.Sprintf("%d used series left", n)
	})
	ex.waitCycles(ctx, t, 2)
	if end, err = ex.get(ctx); err != nil {
		t.Fatal(err)
	}
	endGoroutines, _ := framework.Sample(end, "go_goroutines", nil)
	if endGoroutines > baseGoroutines+churnGoroutineSlack {
		t.Errorf("exporter goroutines %v with no pods after churn, %v before: something kept running", endGoroutines, baseGoroutines)
	}
	if msg := ex.healthProblems(end); msg != "" {
		t.Errorf("after churn: %s", msg)
	}
	if t.Failed() {
		return
	}
	writeChurnSection(t, figures, base, end)
}

// TestPodChurnRealKubelet is the small counterpart with the real kubelet and containers:
// four pods created, deleted (gracefully, as the kubelet tears them down) and created again
// under the same names, twice. Whatever moment the exporter's cycles meet the kubelet in,
// each round ends with exactly the live pods' series at du's bytes, and no cycle failed
// and no error was counted on the way.
func TestPodChurnRealKubelet(t *testing.T) {
	bin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 3*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "churnk")
	ex, _ := startChurnExporter(ctx, t, c, bin, "127.0.0.1:19772", c.NodeName(), c.KubeletRootDir())
	volumeDir := func(p *corev1.Pod, v string) string { return part.EmptyDirPath(c.KubeletRootDir(), string(p.UID), v) }
	settled := func(what string, live map[string]*corev1.Pod) {
		t.Helper()
		want := expectedSeries(t, live, volumeDir)
		framework.Eventually(t, 60*time.Second, churnInterval/2, what, func() (bool, string) {
			fams, err := ex.get(ctx)
			if err != nil {
				return false, err.Error()
			}
			d := diffSeries(fams, ns, want)
			return d.ok(), d.String()
		})
		fams, err := ex.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg := ex.healthProblems(fams); msg != "" {
			t.Errorf("%s: %s", what, msg)
		}
	}
	const pods, rounds = 4, 2
	var uids []string
	for round := range rounds {
		live := map[string]*corev1.Pod{}
		var mu sync.Mutex
		parallelIndexed(t, pods, func(i int) error {
			p := c.SeedPod(ns, fmt.Sprintf("k-%d", i))
			grace := int64(1) // busybox sleep ignores SIGTERM: the kubelet kills it after this
			p.Spec.TerminationGracePeriodSeconds = &grace
			if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
			running, err := c.WaitForPodPhase(ctx, ns, p.Name, corev1.PodRunning)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			live[p.Name] = running
			uids = append(uids, string(running.UID))
			return nil
		})
		settled(fmt.Sprintf("round %d: the running pods' series", round), live)
		parallel(t, podList(live), func(p *corev1.Pod) error {
			if err := c.Client().CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				_, err := c.Client().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				return fmt.Errorf("pod %s not gone: %w", p.Name, err)
			}
			return nil
		})
		settled(fmt.Sprintf("round %d: no series once the kubelet deleted them", round), nil)
	}
	distinct := map[string]bool{}
	for _, u := range uids {
		distinct[u] = true
	}
	if len(distinct) != pods*rounds {
		t.Errorf("%d distinct pod UIDs over %d rounds of %d pods: names were not recreated with new UIDs", len(distinct), rounds, pods)
	}
}

func podList(live map[string]*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(live))
	for _, name := range sortedNames(live) {
		out = append(out, live[name])
	}
	return out
}

func churnPod(node *cluster.FakeNode, ns, name string, i int) *corev1.Pod {
	vols := []string{"data"}
	if i%3 == 0 {
		vols = append(vols, "cache")
	}
	p := node.Pod(ns, name, vols...)
	p.Labels = map[string]string{"app": "churn"}
	return p
}

// churnSizes are the file sizes the pods write, below and above a block and an extent.
var churnSizes = []int64{1, 4096, 10_000, 65_536, 300_000}

// fillChurnPod writes into each volume 0–3 files of one size, by the pod's UID, so that
// a recreated name holds different data than its predecessor.
func fillChurnPod(node *cluster.FakeNode, p *corev1.Pod) error {
	h := 0
	for _, b := range []byte(p.UID) {
		h = h*31 + int(b)
	}
	h &= math.MaxInt32
	for i, v := range p.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		if err := node.Fill(p, v.Name, (h+i)%4, churnSizes[(h/4+i)%len(churnSizes)]); err != nil {
			return err
		}
	}
	return nil
}

type seriesKey struct{ uid, volume string }

// expectedSeries is du's count of every emptyDir volume of the live pods, whose directories
// volumeDir tells.
func expectedSeries(t *testing.T, live map[string]*corev1.Pod, volumeDir func(*corev1.Pod, string) string) map[seriesKey]int64 {
	t.Helper()
	keys := map[string]seriesKey{}
	var dirs []string
	for _, p := range live {
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir == nil {
				continue
			}
			dir := volumeDir(p, v.Name)
			keys[dir] = seriesKey{string(p.UID), v.Name}
			dirs = append(dirs, dir)
		}
	}
	want := map[seriesKey]int64{}
	if len(dirs) == 0 {
		return want
	}
	sizes, err := duoracle.Bytes(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	for dir, b := range sizes {
		want[keys[dir]] = b
	}
	if len(want) != len(dirs) {
		t.Fatalf("du reported %d of %d volumes", len(want), len(dirs))
	}
	return want
}

// seriesDiff compares the published used-bytes series with du's.
type seriesDiff struct {
	series, volumes, missing, stale, wrong int
	example                                string
}

func (d seriesDiff) ok() bool { return d.missing+d.stale+d.wrong == 0 }

func (d seriesDiff) String() string {
	return fmt.Sprintf("%d series for %d volumes: %d missing, %d stale, %d wrong (e.g. %s)",
		d.series, d.volumes, d.missing, d.stale, d.wrong, d.example)
}

// diffSeries compares the used-bytes series of namespace ns ("" for all) with want, du's
// bytes of every live volume.
func diffSeries(fams map[string]*dto.MetricFamily, ns string, want map[seriesKey]int64) seriesDiff {
	got := map[seriesKey]int64{}
	for _, m := range fams["emptydir_used_bytes"].GetMetric() {
		if ns != "" && labelValue(m, "namespace") != ns {
			continue
		}
		k := seriesKey{labelValue(m, "uid"), labelValue(m, "volume")}
		got[k] = int64(m.GetGauge().GetValue())
	}
	d := seriesDiff{series: len(got), volumes: len(want)}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			d.missing++
			d.example = fmt.Sprintf("missing %v", k)
		case g != w:
			d.wrong++
			d.example = fmt.Sprintf("%v: %d bytes, du %d", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d.stale++
			d.example = fmt.Sprintf("stale %v", k)
		}
	}
	return d
}

// startChurnExporter starts the exporter binary in the cluster's network namespace for
// node, walking rootDir every churnInterval, waits for a successful cycle, and returns its
// scraper with the failures counted so far as baseline, and the baseline's metrics.
func startChurnExporter(ctx context.Context, t *testing.T, c *cluster.Cluster, bin, addr, node, rootDir string) (*churnScraper, map[string]*dto.MetricFamily) {
	t.Helper()
	framework.StartInNetns(t, c, "exporter-churn-"+node, bin,
		"--node.name="+node, "--kubeconfig="+c.KubeconfigPath(), "--collection.source=filesystem",
		"--kubelet.root-dir="+rootDir, "--collection.interval="+churnInterval.String(),
		// Every volume every cycle, within the default CPU budget (it charges the walks only,
		// not the 4 scrapes a second): this test follows series through churn, and fills a
		// volume after its pod starts, which the slow cadence would keep at its pre-fill walk
		// for a minute (TestUnlimitedVolumesAtSlowCadence).
		"--collection.unlimited-interval="+churnInterval.String(),
		"--web.listen-address="+addr)
	ex := &churnScraper{url: "http://" + addr + "/metrics", node: node,
		// No kept-alive connections: each would hold a goroutine in the exporter.
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: c.DialContext, DisableKeepAlives: true}}}
	framework.Eventually(t, 60*time.Second, 250*time.Millisecond, "exporter synced and collecting", func() (bool, string) {
		fams, err := ex.get(ctx)
		if err != nil {
			return false, err.Error()
		}
		ok, _ := framework.Sample(fams, "emptydir_exporter_collection_success", nil)
		return ok == 1, "collection_success not 1 yet"
	})
	ex.waitCycles(ctx, t, 2)
	base, err := ex.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ex.failedBefore, ex.errorsBefore = ex.failures(base) // a cycle before the informer synced fails by design
	return ex, base
}

// churnScraper reads the exporter's /metrics.
type churnScraper struct {
	hc   *http.Client
	url  string
	node string
	// failedBefore and errorsBefore are the failed cycles and measurement errors
	// counted before the churn began.
	failedBefore, errorsBefore float64
}

func (s *churnScraper) get(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	return framework.ScrapeWith(ctx, s.hc, s.url)
}

// waitCycles waits until n more collection cycles have ended.
func (s *churnScraper) waitCycles(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	cycles := func() float64 {
		fams, err := s.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, m := range fams["emptydir_exporter_collections_total"].GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	from := cycles()
	framework.Eventually(t, 30*time.Second, churnInterval/4, fmt.Sprintf("%d collection cycles", n), func() (bool, string) {
		now := cycles()
		return now >= from+float64(n), fmt.Sprintf("%v cycles since", now-from)
	})
}

// failures sums the failed collection cycles and the measurement errors counted so far.
func (s *churnScraper) failures(fams map[string]*dto.MetricFamily) (failedCycles, measurementErrors float64) {
	failedCycles, _ = framework.Sample(fams, "emptydir_exporter_collections_total", map[string]string{"result": "error"})
	for _, m := range fams["emptydir_exporter_measurement_errors_total"].GetMetric() {
		measurementErrors += m.GetCounter().GetValue()
	}
	return failedCycles, measurementErrors
}

// healthProblems says what is wrong with the exporter's own metrics: a failed last
// cycle, or failed cycles or measurement errors since the churn began.
func (s *churnScraper) healthProblems(fams map[string]*dto.MetricFamily) string {
	var p []string
	if ok, _ := framework.Sample(fams, "emptydir_exporter_collection_success", map[string]string{"node": s.node, "source": "filesystem"}); ok != 1 {
		p = append(p, "collection_success 0")
	}
	failed, errs := s.failures(fams)
	if failed != s.failedBefore {
		p = append(p, fmt.Sprintf("%v failed cycles", failed-s.failedBefore))
	}
	if errs != s.errorsBefore {
		var reasons []string
		for _, m := range fams["emptydir_exporter_measurement_errors_total"].GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				reasons = append(reasons, fmt.Sprintf("%s=%v", labelValue(m, "reason"), v))
			}
		}
		p = append(p, fmt.Sprintf("%v measurement errors (%s)", errs-s.errorsBefore, strings.Join(reasons, ", ")))
	}
	return strings.Join(p, "; ")
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func sortedNames(live map[string]*corev1.Pod) []string {
	names := make([]string, 0, len(live))
	for n := range live {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parallel runs f for every pod, churnWorkers at once, failing the test on the first error.
func parallel(t *testing.T, pods []*corev1.Pod, f func(*corev1.Pod) error) {
	t.Helper()
	parallelIndexed(t, len(pods), func(i int) error { return f(pods[i]) })
}

func parallelIndexed(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range min(churnWorkers, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func writeChurnSection(t *testing.T, figures []churnFigures, base, end map[string]*dto.MetricFamily) {
	t.Helper()
	mib := func(v float64) string { return fmt.Sprintf("%.1f", v/(1<<20)) }
	var b strings.Builder
	total, recreated := 0, 0
	for _, f := range figures {
		total += f.created
		recreated += f.recreated
	}
	warm, last := figures[0], figures[len(figures)-1]
	if len(figures) > 1 {
		warm = figures[1] // the first wave with deletions, as full as the last
	}
	fmt.Fprintf(&b, "%s pods created (%d of them recreated names with new UIDs) and deleted in %d waves on a fake node, exporter interval %s, %d live pods at most.\n\n",
		thousands(total), recreated, len(figures), churnInterval, churnKeep+churnPerWave)
	b.WriteString("| wave | created | recreated | deleted | live pods | live volumes | used series | stale series | RSS MiB | heap in use MiB | goroutines |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %.0f |\n",
			f.wave, f.created, f.recreated, f.deleted, f.live, f.volumes, f.series, f.stale, mib(f.rss), mib(f.heap), f.goroutines)
	}
	rssBase, _ := framework.Sample(base, "process_resident_memory_bytes", nil)
	rssEnd, _ := framework.Sample(end, "process_resident_memory_bytes", nil)
	gBase, _ := framework.Sample(base, "go_goroutines", nil)
	gEnd, _ := framework.Sample(end, "go_goroutines", nil)
	var peakRSS, peakHeap float64
	for _, f := range figures {
		peakRSS, peakHeap = max(peakRSS, f.rss), max(peakHeap, f.heap)
	}
	fmt.Fprintf(&b, "\nAfter warm-up (wave %d) vs after the last wave, same live set: RSS %s → %s MiB (×%.2f), heap in use %s → %s MiB (×%.2f); "+
		"highest at a wave's end: RSS %s MiB, heap %s MiB (heap in use includes garbage not yet collected). "+
		"No pods, before vs after all waves: RSS %s → %s MiB, goroutines %.0f → %.0f. Measurement errors 0, failed cycles 0.\n",
		warm.wave, mib(warm.rss), mib(last.rss), last.rss/warm.rss, mib(warm.heap), mib(last.heap), last.heap/warm.heap,
		mib(peakRSS), mib(peakHeap), mib(rssBase), mib(rssEnd), gBase, gEnd)
	framework.RecordDoc(t, "docs/reliability.md", "churn", "TestPodChurn", b.String())
}

// thousands writes n with a comma every three digits, as the docs do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
