package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/internal/kubeletsummary"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The tenant escape of issue 30, item 12: a tree deeper than PATH_MAX. The kubelet's walk
// (fs.DiskUsage, filepath.Walk by full paths) fails on it with ENAMETOOLONG, and its
// volume-stats calculator then leaves the volume out of the pod's stats; its eviction manager
// checks sizeLimit against those stats only, so it never sees the volume over its limit.
// emptyDir guard's walk opens each directory relative to its parent and counts all of it.

// evictionMonitoringPeriod is how often the kubelet's eviction manager reads the stats
// (pkg/kubelet/kubelet.go, v1.37: 10 s).
const evictionMonitoringPeriod = 10 * time.Second

// deepPod is the seed pod with a second emptyDir, "witness", without a limit and never
// written: the kubelet measures a pod's volumes in one run, so the witness's stats time in
// the Summary says when the kubelet last measured the pod, also when "empty" is missing.
func deepPod(c *cluster.Cluster, ns string) *corev1.Pod {
	p := c.SeedPod(ns, "deep")
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "witness",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "witness", MountPath: "/witness"})
	return p
}

// volumeSeen is the kubelet's first measurement of a pod's volume that began after a write.
type volumeSeen struct {
	at   time.Time // the stats' time (1 s resolution)
	used uint64
}

// summaryWatch polls the kubelet's Summary (through the API server's node proxy, as the
// exporter's kubelet source reads it) every second and keeps, per pod UID and volume, the
// first measurement that began after the pod's write (set with after).
type summaryWatch struct {
	mu      sync.Mutex
	after   map[string]time.Time             // uid → measurements from this time on count
	first   map[string]map[string]volumeSeen // uid → volume → first measurement after
	polls   int
	lastErr error
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchSummary(ctx context.Context, c *cluster.Cluster) *summaryWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &summaryWatch{after: map[string]time.Time{}, first: map[string]map[string]volumeSeen{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			sum, err := kubeletsummary.ThroughProxy(ctx, c.Client().CoreV1().RESTClient(), c.NodeName())
			w.mu.Lock()
			defer w.mu.Unlock()
			w.polls++
			if err != nil {
				w.lastErr = err
				return false, nil
			}
			for _, p := range sum.Pods {
				after, ok := w.after[p.PodRef.UID]
				if !ok {
					continue
				}
				for _, v := range p.VolumeStats {
					if v.Time.Time.Before(after) {
						continue
					}
					if w.first[p.PodRef.UID] == nil {
						w.first[p.PodRef.UID] = map[string]volumeSeen{}
					}
					if _, seen := w.first[p.PodRef.UID][v.Name]; !seen {
						var used uint64
						if v.UsedBytes != nil {
							used = *v.UsedBytes
						}
						w.first[p.PodRef.UID][v.Name] = volumeSeen{at: v.Time.Time, used: used}
					}
				}
			}
			return false, nil
		})
	}()
	return w
}

// wrote makes measurements of w's pod count from the second after its write on (the
// Summary's times have 1 s resolution: a measurement stamped in T0's second may have begun
// before the write ended).
func (s *summaryWatch) wrote(w framework.SeedWrite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.after[string(w.Pod.UID)] = w.T0.Truncate(time.Second).Add(time.Second)
}

// seen returns the kubelet's first measurement of uid's volume after the write, if any.
func (s *summaryWatch) seen(uid, volume string) (volumeSeen, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.first[uid][volume]
	return v, ok
}

func (s *summaryWatch) state() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d polls, last error %v, first measurements after the writes %v", s.polls, s.lastErr, s.first)
}

func (s *summaryWatch) Stop() { s.cancel(); <-s.done }

// requireKubeletBlind asserts that the kubelet never evicted the deep pod of the kubelet-only
// namespace (written at the same moment as kubW, that namespace's ordinary over-limit pod,
// which the kubelet did evict at kubEvicted) and that its Summary dropped the volume.
//
// The window is measured, not assumed: the kubelet took lag = kubEvicted - (its first
// measurement of the ordinary pod over the limit) to act on its stats. The deep pod must still
// run one such lag after the kubelet's first measurement of it after the write (its witness
// volume's stats time), plus an eviction-manager period, and not before the ordinary pod was
// evicted. Returns the row of the printed table.
func requireKubeletBlind(ctx context.Context, t *testing.T, c *cluster.Cluster, sw *summaryWatch, kubW, deepW framework.SeedWrite, kubEvicted time.Time) timing {
	t.Helper()
	deep := deepW.Pod
	row := timing{cluster: "isolation=true", pod: deep.Namespace + "/" + deep.Name, enforcer: "nobody: the kubelet never (path > PATH_MAX)"}
	norm, ok := sw.seen(string(kubW.Pod.UID), "empty")
	if !ok || norm.used <= framework.SeedLimit {
		t.Errorf("the kubelet evicted %s/%s but its Summary never showed the volume over its limit: %s", kubW.Pod.Namespace, kubW.Pod.Name, sw.state())
		return row
	}
	lag := kubEvicted.Sub(norm.at)
	var witness volumeSeen
	framework.Eventually(t, evictionDeadline, time.Second, "the kubelet measures the deep pod after its write (its witness volume)", func() (bool, string) {
		witness, ok = sw.seen(string(deep.UID), "witness")
		return ok, sw.state()
	})
	end := witness.at.Add(lag + evictionMonitoringPeriod)
	if end.Before(kubEvicted.Add(evictionMonitoringPeriod)) {
		end = kubEvicted.Add(evictionMonitoringPeriod)
	}
	t.Logf("kubelet: measured the ordinary pod over its limit at +%.1fs, evicted it at +%.1fs (lag %.1fs); measured the deep pod at +%.1fs; holding until +%.1fs",
		norm.at.Sub(kubW.T0).Seconds(), kubEvicted.Sub(kubW.T0).Seconds(), lag.Seconds(), witness.at.Sub(deepW.T0).Seconds(), end.Sub(deepW.T0).Seconds())
	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if v, ok := sw.seen(string(deep.UID), "empty"); ok {
		t.Errorf("the kubelet's Summary measured the deep pod's volume after the write (%d bytes at %s): its walk did not fail past PATH_MAX", v.used, v.at)
	}
	if !deepW.Tracker.Evicted().IsZero() {
		_, failed, _, reason, msg := deepW.Tracker.Snapshot()
		t.Errorf("the deep pod was evicted (failed %v, %s: %s): the kubelet does enforce sizeLimit past PATH_MAX", failed, reason, msg)
	}
	requireNotEvicted(ctx, t, c, deep, deepW.Tracker)
	row.note = fmt.Sprintf("du %d bytes in a 1Mi volume; the kubelet measured the pod at +%.1fs without the volume, still Running at +%.1fs (it evicted the ordinary pod at +%.1fs)",
		deepW.Du, witness.at.Sub(deepW.T0).Seconds(), time.Since(deepW.T0).Seconds(), kubEvicted.Sub(kubW.T0).Seconds())
	return row
}
