package exporter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
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
			vol := part.Part{Name: "cache", Medium: part.MediumDisk}
			pods := []struct {
				pod        part.Pod
				project    uint32 // 0: none
				files      int
				wantMethod string
			}{
				{part.Pod{Pod: "userns", UserNamespace: true}, fswalktest.KubeletFirstProjectID, 300, part.MethodProjectQuota},
				{part.Pod{Pod: "host-users"}, fswalktest.KubeletFirstProjectID + 1, 200, part.MethodWalk},
				{part.Pod{Pod: "userns-no-quota", UserNamespace: true}, 0, 100, part.MethodWalk},
			}
			var list []part.Pod
			for i := range pods {
				p := &pods[i].pod
				p.Namespace, p.UID, p.Parts = "ns", "uid-"+p.Pod, []part.Part{vol}
				dir := part.EmptyDirPath(root, p.UID, vol.Name)
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

			src := source.DefaultFilesystem()
			src.KubeletRootDir = root
			e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(list...)})
			e.Refresh(context.Background())
			used, methods := gatherVolumes(t, e)
			for _, tc := range pods {
				walked, err := fswalk.MeasureDiskUsage(context.Background(), part.EmptyDirPath(root, tc.pod.UID, vol.Name), fswalk.Options{Concurrency: 1})
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

// TestProjectQuotaChargedByAHostUsersTenant (issue 30, item 9): on XFS and ext4 with project
// quotas, a tenant of a pod with hostUsers: true (uid 1000, no capabilities) sets the project
// ID the kubelet gave a hostUsers: false pod's volume (the first, guessable) on a directory of
// its own and writes 4 MiB there: the victim's quota counts them, 4× over its 1 MiB sizeLimit,
// while the victim holds 265 KiB. The exporter at its defaults publishes the victim's walk
// (no over-limit series, nothing for EmptyDirOverLimit to fire on) and the quota's excess, the
// tenant's directory's bytes; the live answer the remediator evicts on is the walk too.
func TestProjectQuotaChargedByAHostUsersTenant(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			root, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			limit := int64(1 << 20)
			victim := part.Pod{Namespace: "ns", Pod: "victim", UID: "0e1f6b7a-0000-4000-8000-00000000000a", UserNamespace: true,
				Parts: []part.Part{{Name: "cache", Medium: part.MediumDisk, LimitBytes: &limit}}}
			tenant := part.Pod{Namespace: "other", Pod: "host-users", UID: "0e1f6b7a-0000-4000-8000-00000000000b",
				Parts: []part.Part{{Name: "scratch", Medium: part.MediumDisk}}}
			victimDir, tenantDir := part.EmptyDirPath(root, victim.UID, "cache"), part.EmptyDirPath(root, tenant.UID, "scratch")
			for _, dir := range []string{victimDir, tenantDir} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, 0o777); err != nil { // as the kubelet makes emptyDir directories
					t.Fatal(err)
				}
			}
			fswalktest.AssignProject(t, victimDir, fswalktest.KubeletFirstProjectID)
			writeFiles(t, victimDir, 30) // 265 KiB
			charged := fswalktest.ChargeProject(t, tenantDir, fswalktest.KubeletFirstProjectID, 4<<20, 1000, 1000)
			fswalktest.SyncFS(t, root)
			walk := func(dir string) int64 {
				du, err := fswalk.MeasureDiskUsage(context.Background(), dir, fswalk.Options{Concurrency: 1})
				if err != nil {
					t.Fatal(err)
				}
				return du.UsedBytes
			}
			victimBytes, chargedBytes := walk(victimDir), walk(charged)
			if quota, err := fswalk.ReadProjectQuota(victimDir); err != nil || quota.UsedBytes != victimBytes+chargedBytes || quota.UsedBytes <= limit {
				t.Fatalf("the victim's quota: %+v, %v; want the victim's %d bytes and the tenant's %d, over the limit %d",
					quota, err, victimBytes, chargedBytes, limit)
			}

			src := source.DefaultFilesystem()
			src.KubeletRootDir = root
			e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(victim, tenant)})
			e.Refresh(context.Background())
			used, methods := gatherVolumes(t, e)
			if used["victim"] != float64(victimBytes) || methods["victim"] != part.MethodWalk {
				t.Errorf("the victim published at %v bytes by %q, want the walk's %d", used["victim"], methods["victim"], victimBytes)
			}
			families := gatherFamilies(t, e)
			if over := families["emptydir_over_limit_bytes"]; len(over) > 0 {
				t.Errorf("emptydir_over_limit_bytes published for %v: EmptyDirOverLimit would fire for the victim", over)
			}
			if excess := families["emptydir_project_quota_excess_bytes"]; excess["victim"] != float64(chargedBytes) {
				t.Errorf("emptydir_project_quota_excess_bytes %v, want the tenant's directory's %d bytes for the victim", excess, chargedBytes)
			}

			mux := http.NewServeMux()
			mux.Handle(liveapi.Pattern, e.LiveHandler())
			srv := httptest.NewServer(mux)
			defer srv.Close()
			answer := liveGet(t, srv.URL+"/live/namespaces/ns/pods/victim?uid="+victim.UID)
			if got := liveUsed(answer); got != victimBytes {
				t.Errorf("live answer: %d bytes, want the victim's walk, %d bytes, under its limit %d", got, victimBytes, limit)
			}
		})
	}
}

// TestHostTenantHelperProcess is not a test: fswalktest.ChargeProject runs it as the tenant.
func TestHostTenantHelperProcess(t *testing.T) { fswalktest.HostTenantHelperProcess(t) }

// writeFiles writes n files of 1 to 20 KiB into dir, in directories of 100.
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
