package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The kubelet's eviction messages (pkg/kubelet/eviction/helpers.go, v1.37) for this test's
// 10Mi limits and its volume "data".
const (
	lsciLimit          = "10Mi"
	lsciEmptyDirMsg    = `Usage of EmptyDir volume "data" exceeds the limit "10Mi".`
	lsciPodMsg         = `Pod ephemeral local storage usage exceeds the total limit of containers 10Mi.`
	lsciOverMiB        = 11
	lsciUnderMiB       = 9
	lsciSettle         = 30 * time.Second
	lsciEvictDeadline  = 3 * time.Minute
	lsciMeasureTimeout = 2 * time.Minute
)

// lsciPod is one pod of the kubelet's LocalStorageCapacityIsolationEviction node-e2e test
// (test/e2e_node/eviction_test.go, v1.37), its sizes scaled from 100Mi to 10Mi.
type lsciPod struct {
	name string
	// volume is the pod's volume "data", mounted at /data, written when set; nil: the
	// container writes its writable layer (/fill).
	volume *corev1.VolumeSource
	// limit is the writing container's limits.ephemeral-storage; "" none.
	limit string
	// sidecar: the writing container is a restartable init container beside a plain one.
	sidecar bool
	// imageVolume: the writing container runs cluster.BusyboxVolumeImage and writes its image
	// VOLUME (/scratch), which containerd binds from a directory of its own.
	imageVolume bool
	mib         int
	// want is the kubelet's message for the eviction expected; "" when the pod must stay.
	want string
}

func lsciPods() []lsciPod {
	limit := resource.MustParse(lsciLimit)
	return []lsciPod{
		{name: "emptydir-disk-sizelimit", volume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}, mib: lsciOverMiB, want: lsciEmptyDirMsg},
		// The pod's limit is its one container's: the kubelet's pod check holds first, and
		// its message is the pod's.
		{name: "container-disk-limit", limit: lsciLimit, mib: lsciOverMiB, want: lsciPodMsg},
		{name: "container-emptydir-disk-limit", volume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, limit: lsciLimit, mib: lsciOverMiB, want: lsciPodMsg},
		// The tmpfs is 10Mi: the write fails at it, and the volume is never over.
		{name: "emptydir-memory-sizelimit", volume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}, mib: lsciOverMiB},
		{name: "emptydir-disk-below-sizelimit", volume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}, mib: lsciUnderMiB},
		{name: "container-disk-below-sizelimit", limit: lsciLimit, mib: lsciUnderMiB},
		{name: "sidecar-container-disk-limit", limit: lsciLimit, sidecar: true, mib: lsciOverMiB, want: lsciPodMsg},
		{name: "sidecar-container-disk-below-sizelimit", limit: lsciLimit, sidecar: true, mib: lsciUnderMiB},
	}
}

// build is the pod on c's node: busybox sleeping, the writing container named "writer".
func (p lsciPod) build(c *cluster.Cluster, ns string) *corev1.Pod {
	writer := corev1.Container{Name: "writer", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sh", "-c", "echo started && exec sleep 2147483647"}}
	if p.imageVolume {
		writer.Image = cluster.BusyboxVolumeImage
	}
	if p.limit != "" {
		writer.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(p.limit)}
		// A kubelet with localStorageCapacityIsolation: false reports no ephemeral-storage
		// capacity and refuses a pod that requests any (OutOfephemeral-storage); the request
		// defaults to the limit, so it is set to 0: the limit alone is what is enforced.
		writer.Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{NodeName: c.NodeName(), TerminationGracePeriodSeconds: ptr.To(int64(0))}}
	if p.volume != nil {
		writer.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: *p.volume}}
	}
	if p.sidecar {
		writer.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		pod.Spec.InitContainers = []corev1.Container{writer}
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "exec sleep 2147483647"}}}
	} else {
		pod.Spec.Containers = []corev1.Container{writer}
	}
	return pod
}

// write fills the pod's volume or writable layer with p.mib MiB, synced, and returns when
// the write ended. A memory volume's write fails at its tmpfs size, as meant.
func (p lsciPod) write(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod) (time.Time, error) {
	file := "/fill"
	switch {
	case p.volume != nil:
		file = "/data/fill"
	case p.imageVolume:
		file = cluster.BusyboxVolumePath + "/fill"
	}
	_, stderr, err := c.ExecInPod(ctx, pod.Namespace, pod.Name, "writer", "dd", "if=/dev/zero", "of="+file, "bs=1M", fmt.Sprint("count=", p.mib), "conv=fsync")
	end := time.Now()
	if err != nil && p.volume != nil && p.volume.EmptyDir.Medium == corev1.StorageMediumMemory && strings.Contains(stderr, "No space left") {
		return end, nil
	}
	if err != nil {
		return end, fmt.Errorf("dd in %s: %w (%s)", pod.Name, err, stderr)
	}
	return end, nil
}

// TestLocalStorageCapacityIsolationEviction is the kubelet's own test of its three
// local-storage checks (LocalStorageCapacityIsolationEviction in test/e2e_node/eviction_test.go,
// v1.37, its sizes scaled down) on a kubelet with localStorageCapacityIsolation: false, which
// enforces none of them: emptyDir guard alone must evict exactly the pods the kubelet would,
// through the Eviction API, each with the kubelet's own message, and nothing else.
func TestLocalStorageCapacityIsolationEviction(t *testing.T) {
	requireCluster(t)
	lsciEviction(t, sharedCluster(t))
}

// lsciEviction is TestLocalStorageCapacityIsolationEviction on c, a cluster of
// framework.SharedClusterOptions on either runtime (TestCRIONode runs it on CRI-O).
func lsciEviction(t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(rootCtx, 10*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "lsci")
	s := framework.StartStack(ctx, t, c, framework.StackOptions{})

	specs := lsciPods()
	pods := make([]*corev1.Pod, len(specs))
	trackers := make([]*framework.PodTracker, len(specs))
	for i, p := range specs {
		pods[i] = framework.RunPod(ctx, t, c, p.build(c, ns))
		trackers[i] = framework.TrackPod(ctx, c, pods[i])
		defer trackers[i].Stop()
	}
	ended := make([]time.Time, len(specs))
	for i, p := range specs {
		var err error
		if ended[i], err = p.write(ctx, c, pods[i]); err != nil {
			t.Fatal(err)
		}
	}

	// The pods the kubelet would evict are evicted, by the Eviction API (terminating or, with
	// no grace period, gone at once; never Failed, the mark of the kubelet's own kill, which
	// this kubelet never does), with the kubelet's words in the Event.
	var rows []string
	for i, p := range specs {
		if p.want == "" {
			continue
		}
		framework.Eventually(t, lsciEvictDeadline, 250*time.Millisecond, p.name+" evicted", func() (bool, string) {
			return !trackers[i].Evicted().IsZero(), "still running"
		})
		if evictedByKubelet(trackers[i]) {
			_, _, _, reason, msg := trackers[i].Snapshot()
			t.Errorf("%s: %s: %s: the kubelet evicted it, want an eviction through the API", p.name, reason, msg)
		}
		requireEventSays(ctx, t, c, pods[i], remediator.EventEvicted, p.want)
		rows = append(rows, fmt.Sprintf("%-40s %6.1f s", p.name, trackers[i].Evicted().Sub(ended[i]).Seconds()))
	}
	t.Logf("write end → eviction (emptyDir guard, kubelet isolation off):\n%s", strings.Join(rows, "\n"))

	// The others were measured at what they hold, and stay: the chain had every chance.
	for _, p := range specs {
		if p.want != "" {
			continue
		}
		expr := fmt.Sprintf(`max(emptydir_pod_ephemeral_storage_used_bytes{namespace=%q,pod=%q}) or max(emptydir_used_bytes{namespace=%q,pod=%q})`, ns, p.name, ns, p.name)
		framework.Eventually(t, lsciMeasureTimeout, time.Second, p.name+" measured with what it wrote", func() (bool, string) {
			res, err := s.Mon.Query(ctx, expr)
			if err != nil || len(res) == 0 {
				return false, fmt.Sprint(len(res), " series ", err)
			}
			return res[0].Value >= float64((p.mib-1)<<20), fmt.Sprintf("%.0f bytes", res[0].Value)
		})
	}
	time.Sleep(lsciSettle)
	for i, p := range specs {
		if p.want == "" {
			requireNotEvicted(ctx, t, c, pods[i], trackers[i])
		}
	}
	fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, p := range specs {
		if p.want != "" {
			want++
		}
	}
	if n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); int(n) != want {
		t.Errorf("evictions_total{result=evicted} = %v, want %d: one per pod over a limit, no other", n, want)
	}
}

// TestImageVolumeEviction: a container whose image declares `VOLUME /scratch` (no Kubernetes
// mount covering it) writes into a directory containerd binds from its CRI state
// (<root>/io.containerd.grpc.v1.cri/containers/<id>/volumes/<random>), which the kubelet counts
// nowhere. On the kubelet of TestLocalStorageCapacityIsolationEviction (its checks off), the
// exporter counts that directory in the container's writable layer, and so in its and its pod's
// usage, complete (not unlocated): the pod over its container's limit is evicted through the API
// with the kubelet's message, as for a writable layer, and the one below stays.
func TestImageVolumeEviction(t *testing.T) {
	requireCluster(t)
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "imgvol")
	s := framework.StartStack(ctx, t, c, framework.StackOptions{})

	specs := []lsciPod{
		{name: "image-volume-disk-limit", imageVolume: true, limit: lsciLimit, mib: lsciOverMiB, want: lsciPodMsg},
		{name: "image-volume-below-limit", imageVolume: true, limit: lsciLimit, mib: lsciUnderMiB},
	}
	pods := make([]*corev1.Pod, len(specs))
	trackers := make([]*framework.PodTracker, len(specs))
	for i, p := range specs {
		pods[i] = framework.RunPod(ctx, t, c, p.build(c, ns))
		trackers[i] = framework.TrackPod(ctx, c, pods[i])
		defer trackers[i].Stop()
	}
	for i, p := range specs {
		if _, err := p.write(ctx, c, pods[i]); err != nil {
			t.Fatal(err)
		}
		// The bytes are in containerd's directory for the VOLUME, not in the overlay.
		if got := imageVolumeFiles(ctx, t, c, pods[i]); len(got) != 1 {
			t.Fatalf("%s: fill files in %s/<id>/volumes: %v, want one: the write must land in the image VOLUME's directory", p.name, c.CRIContainersDir(), got)
		}
	}

	// Each container's usage holds what it wrote in /scratch, as its writable layer, complete.
	for _, p := range specs {
		sel := fmt.Sprintf(`namespace=%q,pod=%q,container="writer"`, ns, p.name)
		exprs := map[string]string{
			"container usage": fmt.Sprintf(`max(max_over_time(emptydir_container_ephemeral_storage_used_bytes{%s}[5m]))`, sel),
			"writable layer":  fmt.Sprintf(`max(max_over_time(emptydir_container_ephemeral_storage_part_bytes{%s,part="writable_layer"}[5m]))`, sel),
			"pod usage":       fmt.Sprintf(`max(max_over_time(emptydir_pod_ephemeral_storage_used_bytes{namespace=%q,pod=%q}[5m]))`, ns, p.name),
		}
		for what, expr := range exprs {
			framework.Eventually(t, lsciMeasureTimeout, time.Second, p.name+": "+what+" holds what it wrote in "+cluster.BusyboxVolumePath, func() (bool, string) {
				res, err := s.Mon.Query(ctx, expr)
				if err != nil || len(res) == 0 {
					return false, fmt.Sprint(len(res), " series ", err)
				}
				return res[0].Value >= float64(p.mib<<20), fmt.Sprintf("%.0f bytes", res[0].Value)
			})
		}
		unlocated := fmt.Sprintf(`max_over_time(emptydir_container_writable_layer_unlocated{%s}[5m])`, sel)
		if res, err := s.Mon.Query(ctx, unlocated); err != nil || len(res) != 0 {
			t.Errorf("%s: %s = %v, %v; want no series: the layer and its VOLUME directory located", p.name, unlocated, res, err)
		}
	}

	i := 0 // the pod over its limit
	framework.Eventually(t, lsciEvictDeadline, 250*time.Millisecond, specs[i].name+" evicted", func() (bool, string) {
		return !trackers[i].Evicted().IsZero(), "still running"
	})
	if evictedByKubelet(trackers[i]) {
		_, _, _, reason, msg := trackers[i].Snapshot()
		t.Errorf("%s: %s: %s: the kubelet evicted it, want an eviction through the API", specs[i].name, reason, msg)
	}
	requireEventSays(ctx, t, c, pods[i], remediator.EventEvicted, specs[i].want)
	time.Sleep(lsciSettle)
	requireNotEvicted(ctx, t, c, pods[1], trackers[1])
}

// checkImageVolumeCounted runs a pod of cluster.BusyboxVolumeImage with a container limit that
// writes 5 MiB into its VOLUME and checks that the exporter at exporterURL (the chart's, in a
// pod: its hostPaths, its capability, its Landlock rule) counts them in the container's usage,
// its layer located: the bundle and the CRI directory read as the chart mounts them.
func checkImageVolumeCounted(ctx context.Context, t *testing.T, c *cluster.Cluster, exporterURL string) {
	t.Helper()
	ns := framework.Namespace(ctx, t, c, "imgvol-pod")
	spec := lsciPod{name: "image-volume", imageVolume: true, limit: lsciLimit, mib: 5}
	pod := framework.RunPod(ctx, t, c, spec.build(c, ns))
	if _, err := spec.write(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{"namespace": ns, "pod": spec.name, "container": "writer"}
	framework.Eventually(t, time.Minute, time.Second, "the chart's exporter counts the image VOLUME directory in the writable layer", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, exporterURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		if _, unlocated := framework.Sample(fams, "emptydir_container_writable_layer_unlocated", sel); unlocated {
			return false, "the layer is reported unlocated"
		}
		// The chart's default families: the part series are opt-in, the container's usage is
		// not, and the layer's VOLUME directory is all that can bring it to 5 MiB.
		v, ok := framework.Sample(fams, "emptydir_container_ephemeral_storage_used_bytes", sel)
		return ok && v >= float64(spec.mib<<20), fmt.Sprintf("container usage %v (found %v)", v, ok)
	})
}

// imageVolumeFiles lists the "fill" files in the image VOLUME directories containerd made for p's
// container "writer", read from the node.
func imageVolumeFiles(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod) []string {
	t.Helper()
	got, err := c.Client().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, cs := range got.Status.ContainerStatuses {
		if cs.Name == "writer" {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("%s: no container ID for writer in %+v", p.Name, got.Status.ContainerStatuses)
	}
	files, err := filepath.Glob(filepath.Join(c.CRIContainersDir(), id, "volumes", "*", "fill"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// requireEventSays waits for an Event of reason on p whose message holds want.
func requireEventSays(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, reason, want string) {
	t.Helper()
	framework.Eventually(t, time.Minute, time.Second, fmt.Sprintf("%s Event on %s saying %q", reason, p.Name, want), func() (bool, string) {
		var msgs []string
		for _, e := range framework.PodEvents(ctx, t, c, p, reason) {
			if strings.Contains(e.Message, want) {
				return true, ""
			}
			msgs = append(msgs, e.Message)
		}
		sort.Strings(msgs)
		return false, fmt.Sprintf("events %q", msgs)
	})
}

// lsciSamples is how many pods of each kind race in TestLocalStorageEvictionTimes.
const lsciSamples = 5

// TestLocalStorageEvictionTimes times the three evictions of TestLocalStorageCapacityIsolationEviction
// on a kubelet that enforces them too (localStorageCapacityIsolation: true, its default
// volumeStatsAggPeriod): per kind, lsciSamples pods where both race (who evicts first, and
// when), and as many the remediator is kept away from (its namespace denied), which the
// kubelet evicts on its own. The median time from the end of the write to each eviction goes
// to docs/performance.md (RECORD=1).
func TestLocalStorageEvictionTimes(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 12*time.Minute)
	defer cancel()
	// The caps (5 per node and namespace in 10m by default) are policy, not latency: lifted so
	// that every pod is evicted as fast as the chain allows.
	e := startTwoEnforcers(ctx, t, "lsci-race-", "lsci-kubelet-",
		"--eviction.max-global=0", "--eviction.max-per-node=0", "--eviction.max-per-namespace=0")
	c := e.c
	type sample struct {
		spec      lsciPod
		kubelet   bool // in the namespace the remediator leaves alone
		pod       *corev1.Pod
		tr        *framework.PodTracker
		writeEnds time.Time
	}
	var samples []*sample
	for _, p := range lsciPods() {
		if p.want == "" || p.sidecar {
			continue
		}
		for i := range lsciSamples {
			for _, kubelet := range []bool{false, true} {
				ns := map[bool]string{false: e.ours, true: e.kubeletOnly}[kubelet]
				spec := p
				pod := p.build(c, ns)
				pod.Name = fmt.Sprintf("%s-%d", p.name, i)
				s := &sample{spec: spec, kubelet: kubelet, pod: framework.RunPod(ctx, t, c, pod)}
				s.tr = framework.TrackPod(ctx, c, s.pod)
				defer s.tr.Stop()
				samples = append(samples, s)
			}
		}
	}
	for _, s := range samples {
		var err error
		if s.writeEnds, err = s.spec.write(ctx, c, s.pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range samples {
		framework.Eventually(t, 4*time.Minute, 250*time.Millisecond, s.pod.Namespace+"/"+s.pod.Name+" evicted", func() (bool, string) {
			return !s.tr.Evicted().IsZero(), "still running"
		})
	}

	// Ours is an Eviction API call (terminating, or gone at once), the kubelet's a local kill
	// (Failed, reason Evicted, its message, which is the same as ours).
	type tally struct {
		ours, kubelet, raceOurs, raceKubelet []float64
	}
	byKind := map[string]*tally{}
	var kinds []string
	for _, s := range samples {
		k := byKind[s.spec.name]
		if k == nil {
			k = &tally{}
			byKind[s.spec.name] = k
			kinds = append(kinds, s.spec.name)
		}
		_, _, _, reason, msg := s.tr.Snapshot()
		byKubelet := evictedByKubelet(s.tr)
		took := s.tr.Evicted().Sub(s.writeEnds).Seconds()
		switch {
		case s.kubelet && !byKubelet:
			t.Errorf("%s/%s, which the remediator may not touch, was not evicted by the kubelet", s.pod.Namespace, s.pod.Name)
		case s.kubelet:
			if reason != "Evicted" || !strings.Contains(msg, s.spec.want) {
				t.Errorf("%s/%s: kubelet eviction %q %q, want its message %q", s.pod.Namespace, s.pod.Name, reason, msg, s.spec.want)
			}
			k.kubelet = append(k.kubelet, took)
		case byKubelet:
			k.raceKubelet = append(k.raceKubelet, took)
		default:
			requireEventSays(ctx, t, c, s.pod, remediator.EventEvicted, s.spec.want)
			k.ours = append(k.ours, took)
			k.raceOurs = append(k.raceOurs, took)
		}
	}
	// Not a timing: a chain that works on this kubelet evicts some of each kind first (it needs
	// about 7 s, the kubelet 10 s at the very least); none at all is a broken chain.
	for _, kind := range kinds {
		if len(byKind[kind].raceOurs) == 0 {
			t.Errorf("%s: the kubelet evicted all %d racing pods first; emptyDir guard none", kind, len(byKind[kind].raceKubelet))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Kubelet with `localStorageCapacityIsolation: true` and its default `volumeStatsAggPeriod` (1m); 10Mi limits, 11 MiB written; %d pods of each kind racing, %d the kubelet evicts alone. Seconds from the end of the write to the eviction, median (min–max).\n\n", lsciSamples, lsciSamples)
	b.WriteString("| pod (kubelet's node-e2e name) | emptyDir guard | kubelet alone | first, when both enforce |\n| --- | --- | --- | --- |\n")
	for _, kind := range kinds {
		k := byKind[kind]
		fmt.Fprintf(&b, "| `%s` | %s | %s | emptyDir guard %d, kubelet %d of %d |\n", kind, spread(k.ours), spread(k.kubelet),
			len(k.raceOurs), len(k.raceKubelet), len(k.raceOurs)+len(k.raceKubelet))
	}
	framework.RecordDoc(t, "docs/performance.md", "ephemeral-race", "TestLocalStorageEvictionTimes", b.String())
}

// evictedByKubelet reports whether the kubelet's eviction manager killed the pod before any
// deletion: phase Failed with reason Evicted, seen no later than a deletionTimestamp. A pod
// deleted through the API may be seen Failed too (its killed containers), but never with
// that reason, which only the eviction manager sets.
func evictedByKubelet(tr *framework.PodTracker) bool {
	terminating, failed, _, reason, _ := tr.Snapshot()
	return reason == "Evicted" && !failed.IsZero() && (terminating.IsZero() || !terminating.Before(failed))
}

// spread is "median (min–max)" of xs in seconds, "-" without any.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.1f s (%.1f–%.1f)", med, s[0], s[len(s)-1])
}
