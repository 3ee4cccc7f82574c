package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The pods of TestOpenFilesOnRealCluster: a disk emptyDir "data" with this sizeLimit, and a
// file of heldUnderMiB (under it) or heldOverMiB (over it) deleted but held open in it.
const (
	heldLimit    = "4Mi"
	heldUnderMiB = 3
	heldOverMiB  = 6
	// heldSlack is how far above its size a held file's allocated blocks, and a walk of a
	// volume that holds nothing but its directory, may be.
	heldSlack = 256 << 10
	// controlExporterAddr is the exporter without --collection.open-files.
	controlExporterAddr = "127.0.0.1:19751"
	heldEvictDeadline   = 90 * time.Second
)

// TestOpenFilesOnRealCluster proves --collection.open-files on the real kubelet, containerd and
// runc (cgroupfs driver, this host's cgroup version, the host's PID namespace): in pods whose
// shell opens /scratch/f in a disk emptyDir (sizeLimit 4Mi), deletes it and writes N MiB
// through the descriptor it keeps, the exporter of the seed scenario's chain run with the flag
// finds the pod's processes in its cgroups, attributes the file to the volume by the mount
// root of the container's bind mount and publishes emptydir_used_bytes ≥ N MiB with
// emptydir_unlinked_open_bytes ≈ N MiB and outcome="counted", where an exporter without the
// flag (the control) walks an empty directory, ~0, with outcome="off". The kubelet (its isolation
// off) never sees the file either; the pod held over its sizeLimit only by the deleted file is
// evicted by emptyDir guard through the Eviction API, with the kubelet's message, and the one
// under it stays.
func TestOpenFilesOnRealCluster(t *testing.T) {
	exporterBin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 4*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "openfiles")
	s := framework.StartStack(ctx, t, c, framework.StackOptions{ExporterArgs: []string{"--collection.open-files"}})
	controlLog := "openfiles-control-exporter"
	framework.StartInNetns(t, c, controlLog, exporterBin, append(c.ExporterPathArgs(),
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--metric-opt-in-list=.*",
		"--collection.interval=2s", "--web.listen-address="+controlExporterAddr)...)
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, controlExporterAddr+" ready", func() (bool, string) {
		st := readyState(c, controlExporterAddr)
		return strings.HasPrefix(st, "200"), st
	})

	under := framework.RunPod(ctx, t, c, heldPod(c, ns, "held-under", heldUnderMiB))
	underTr := framework.TrackPod(ctx, c, under)
	defer underTr.Stop()
	over := framework.RunPod(ctx, t, c, heldPod(c, ns, "held-over", heldOverMiB))
	overTr := framework.TrackPod(ctx, c, over)
	defer overTr.Stop()
	started := time.Now()

	scrape := func(addr string) map[string]*dto.MetricFamily {
		t.Helper()
		fams, err := framework.Scrape(ctx, c, "http://"+addr+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	vol := func(p *corev1.Pod) map[string]string {
		return map[string]string{"namespace": ns, "pod": p.Name, "volume": "data"}
	}
	mib := float64(1 << 20)

	// The pod under its limit: both exporters' figures, once each has measured it.
	// The pod over it too, before the guard evicts it (a Prometheus scrape and an alert later).
	var used, open, counted, ctlUsed, off, overUsed, overOpen float64
	framework.Eventually(t, 60*time.Second, 250*time.Millisecond, "both exporters measured "+under.Name+", the one with the flag "+over.Name, func() (bool, string) {
		fams, ctl := scrape(framework.StackExporterAddr), scrape(controlExporterAddr)
		var ok1, ok2 bool
		used, ok1 = framework.Sample(fams, "emptydir_used_bytes", vol(under))
		open, _ = framework.Sample(fams, "emptydir_unlinked_open_bytes", vol(under))
		counted, _ = framework.Sample(fams, "emptydir_exporter_open_files_volumes", map[string]string{"outcome": "counted"})
		ctlUsed, ok2 = framework.Sample(ctl, "emptydir_used_bytes", vol(under))
		off, _ = framework.Sample(ctl, "emptydir_exporter_open_files_volumes", map[string]string{"outcome": "off"})
		if o, ok := framework.Sample(fams, "emptydir_unlinked_open_bytes", vol(over)); ok && overOpen == 0 {
			overOpen = o
			overUsed, _ = framework.Sample(fams, "emptydir_used_bytes", vol(over))
		}
		return ok1 && ok2 && open > 0 && overOpen > 0, fmt.Sprintf("with the flag: used %.0f, unlinked open %.0f, %s's %.0f; control: used %.0f (measured %v)", used, open, over.Name, overOpen, ctlUsed, ok2)
	})
	t.Logf("%s (%d MiB held open, limit %s): with --collection.open-files used %.0f B, unlinked open %.0f B", over.Name, heldOverMiB, heldLimit, overUsed, overOpen)
	if want := heldOverMiB * mib; overOpen < want || overOpen > want+heldSlack || overUsed < overOpen || overUsed > overOpen+heldSlack {
		t.Errorf("%s: emptydir_unlinked_open_bytes %.0f, emptydir_used_bytes %.0f, want both %.0f (+ at most %d)", over.Name, overOpen, overUsed, want, heldSlack)
	}
	t.Logf("%s (%d MiB held open, limit %s), %.1f s after the pods ran: with --collection.open-files used %.0f B, unlinked open %.0f B, volumes counted %.0f; without: used %.0f B, volumes off %.0f",
		under.Name, heldUnderMiB, heldLimit, time.Since(started).Seconds(), used, open, counted, ctlUsed, off)
	if want := heldUnderMiB * mib; open < want || open > want+heldSlack {
		t.Errorf("emptydir_unlinked_open_bytes of %s = %.0f, want %.0f (+ at most %d): the held file's blocks", under.Name, open, want, heldSlack)
	}
	if used < open || used > open+heldSlack {
		t.Errorf("emptydir_used_bytes of %s = %.0f, want the held file's %.0f and the (empty) walk's few blocks", under.Name, used, open)
	}
	if counted < 1 {
		t.Errorf(`emptydir_exporter_open_files_volumes{outcome="counted"} = %v, want > 0`, counted)
	}
	if ctlUsed > heldSlack {
		t.Errorf("the control exporter (no --collection.open-files) has emptydir_used_bytes of %s = %.0f, want ~0: a walk cannot see a deleted file", under.Name, ctlUsed)
	}
	if off < 1 {
		t.Errorf(`the control exporter's emptydir_exporter_open_files_volumes{outcome="off"} = %v, want > 0`, off)
	}
	if _, ok := framework.Sample(scrape(controlExporterAddr), "emptydir_unlinked_open_bytes", vol(under)); ok {
		t.Errorf("the control exporter publishes emptydir_unlinked_open_bytes for %s", under.Name)
	}
	// Other tests' pods on the shared node may be unreadable while they end: logged, not failed.
	fams := scrape(framework.StackExporterAddr)
	unreadable, _ := framework.Sample(fams, "emptydir_exporter_open_files_volumes", map[string]string{"outcome": "unreadable"})
	t.Logf(`with --collection.open-files: emptydir_exporter_open_files_volumes{outcome="unreadable"} = %v`, unreadable)
	if n, _ := framework.Sample(fams, "emptydir_exporter_open_files_volumes", map[string]string{"outcome": "off"}); n != 0 {
		t.Errorf(`with --collection.open-files, emptydir_exporter_open_files_volumes{outcome="off"} = %v, want 0`, n)
	}

	// The pod over its limit only by the deleted file: evicted by the guard, not the kubelet.
	framework.Eventually(t, heldEvictDeadline, 250*time.Millisecond, over.Name+" evicted", func() (bool, string) {
		return !overTr.Evicted().IsZero(), "still running"
	})
	t.Logf("%s (%d MiB held open, limit %s) evicted %.1f s after the pods ran", over.Name, heldOverMiB, heldLimit, overTr.Evicted().Sub(started).Seconds())
	if evictedByKubelet(overTr) {
		_, _, _, reason, msg := overTr.Snapshot()
		t.Errorf("%s: %s: %s: the kubelet evicted it, want an eviction through the API", over.Name, reason, msg)
	}
	requireEventSays(ctx, t, c, over, remediator.EventEvicted, fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", "data", heldLimit))
	// What Prometheus alerted on: the trigger series, over the limit by the held file alone.
	expr := fmt.Sprintf(`max(max_over_time(emptydir_over_limit_bytes{namespace=%q,pod=%q,volume="data"}[5m]))`, ns, over.Name)
	res, err := s.Mon.Query(ctx, expr)
	limit := resource.MustParse(heldLimit)
	switch want := float64(heldOverMiB<<20 - limit.Value()); {
	case err != nil:
		t.Errorf("%s: %v", expr, err)
	case len(res) != 1 || res[0].Value < want || res[0].Value > want+heldSlack:
		t.Errorf("%s = %v, want %.0f (+ at most %d): the held file over the limit", expr, res, want, heldSlack)
	}
	requireNotEvicted(ctx, t, c, under, underTr)
	if b, err := os.ReadFile(c.LogPath(s.ExporterLog)); err != nil {
		t.Error(err)
	} else {
		if !strings.Contains(string(b), "counting the files pods deleted but hold open") {
			t.Errorf("the exporter did not log that it counts open files (its helper and the cgroups opened)")
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "open files could not be read") && strings.Contains(line, "namespace="+ns) {
				t.Errorf("the exporter could not read the open files of a pod of the test: %s", line)
			}
		}
	}
}

// heldPod is a pod on c's node whose shell opens /scratch/f in its disk emptyDir "data"
// (sizeLimit heldLimit), deletes it, writes mib MiB through the descriptor it keeps, and
// sleeps in a child, holding it.
func heldPod(c *cluster.Cluster, ns, name string, mib int) *corev1.Pod {
	p := c.SeedPod(ns, name)
	limit := resource.MustParse(heldLimit)
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	p.Spec.Containers[0].Name = "holder"
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/scratch"}}
	p.Spec.Containers[0].Command = []string{"sh", "-c", fmt.Sprintf(
		`exec 3>/scratch/f && rm /scratch/f && head -c %d /dev/zero >&3 && echo held && sleep 2147483647`, mib<<20)}
	return p
}
