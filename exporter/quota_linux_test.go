package exporter_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// TestExporterReadsTheKubeletsProjectQuotas: a kubelet root on XFS and on ext4 mounted with
// prjquota, its volumes under project quotas as the kubelet assigns them. The exporter at its
// defaults publishes the volume of a pod with hostUsers: false from its quota, and walks the
// volume of a host-users pod (whose tenant may have set that project ID itself) and a volume
// the kubelet put under no quota; every one at what the walk counts. Runs in the kernel lane
// (make test-kernel-lane); skipped where the kernel cannot mount with prjquota.
func TestExporterReadsTheKubeletsProjectQuotas(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			root, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			vol := exporter.Volume{Name: "cache", Medium: exporter.MediumDisk}
			pods := []struct {
				pod        exporter.PodVolumes
				project    uint32 // 0: none
				files      int
				wantMethod string
			}{
				{exporter.PodVolumes{Pod: "userns", UserNamespace: true}, fswalktest.KubeletFirstProjectID, 300, exporter.MethodProjectQuota},
				{exporter.PodVolumes{Pod: "host-users"}, fswalktest.KubeletFirstProjectID + 1, 200, exporter.MethodWalk},
				{exporter.PodVolumes{Pod: "userns-no-quota", UserNamespace: true}, 0, 100, exporter.MethodWalk},
			}
			var list []exporter.PodVolumes
			for i := range pods {
				p := &pods[i].pod
				p.Namespace, p.UID, p.Volumes = "ns", "uid-"+p.Pod, []exporter.Volume{vol}
				dir := exporter.Dir(root, p.UID, vol.Name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if pods[i].project != 0 {
					fswalktest.AssignProject(t, dir, pods[i].project)
				}
				writeFiles(t, dir, pods[i].files)
				list = append(list, *p)
			}
			fswalktest.SyncFS(t, root)

			src := exporter.DefaultFilesystemSource()
			src.KubeletRootDir = root
			e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(list...)})
			e.Refresh(context.Background())
			used, methods := gatherVolumes(t, e)
			for _, tc := range pods {
				walked, err := fswalk.MeasureDiskUsage(context.Background(), exporter.Dir(root, tc.pod.UID, vol.Name), fswalk.Options{Concurrency: 1})
				if err != nil {
					t.Fatal(err)
				}
				if methods[tc.pod.Pod] != tc.wantMethod || used[tc.pod.Pod] != float64(walked.UsedBytes) {
					t.Errorf("pod %s: published %v bytes by %q, want the walk's %d by %q",
						tc.pod.Pod, used[tc.pod.Pod], methods[tc.pod.Pod], walked.UsedBytes, tc.wantMethod)
				}
			}
		})
	}
}

// writeFiles writes n files of 1 to 20 KiB into dir, in folders of 100.
func writeFiles(t *testing.T, dir string, n int) {
	t.Helper()
	for f := range n {
		sub := filepath.Join(dir, "d"+string(rune('a'+f/100)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+f%26))+string(rune('a'+f/26%26))), make([]byte, 1024*(1+f%20)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gatherVolumes is the exporter's emptydir_used_bytes and emptydir_measurement_info method by pod.
func gatherVolumes(t *testing.T, e *exporter.Exporter) (used map[string]float64, methods map[string]string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	used, methods = map[string]float64{}, map[string]string{}
	labels := func(m *dto.Metric) map[string]string {
		out := map[string]string{}
		for _, l := range m.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labels(m)
			switch mf.GetName() {
			case "emptydir_used_bytes":
				used[l["pod"]] = m.GetGauge().GetValue()
			case "emptydir_measurement_info":
				methods[l["pod"]] = l["method"]
			}
		}
	}
	return used, methods
}
