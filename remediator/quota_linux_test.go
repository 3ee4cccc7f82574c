package remediator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// TestProjectQuotaChargeEvictsNobody (issue 30, item 9), end to end on XFS and ext4 with
// project quotas: a tenant of a pod with hostUsers: true (uid 1000, no capabilities) sets the
// project ID the kubelet gave the volume of a hostUsers: false pod (the first one, guessable)
// on a directory of its own and writes 4 MiB there, 4× the victim's 1Mi sizeLimit, which its
// quota now counts. The over-limit alert for the victim, re-checked through the real
// exporter's live endpoint over that kubelet root, is skipped as not over the limit (the
// victim holds 256 KiB), and nothing is evicted. Runs in the kernel lane (make
// test-kernel-lane); skipped where the kernel cannot mount with prjquota.
func TestProjectQuotaChargeEvictsNobody(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			root, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			victim := contractPod() // default/web-0, volume "empty" of 1Mi
			victim.UserNamespace = true
			tenant := part.Pod{Namespace: "other", Pod: "host-users", UID: uid2,
				Parts: []part.Part{{Name: "scratch", Medium: part.MediumDisk}}}
			victimDir, tenantDir := part.EmptyDirPath(root, victim.UID, "empty"), part.EmptyDirPath(root, tenant.UID, "scratch")
			for _, dir := range []string{victimDir, tenantDir} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, 0o777); err != nil { // as the kubelet makes emptyDir directories
					t.Fatal(err)
				}
			}
			fswalktest.AssignProject(t, victimDir, fswalktest.KubeletFirstProjectID)
			if err := os.WriteFile(filepath.Join(victimDir, "data"), make([]byte, 256<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			fswalktest.ChargeProject(t, tenantDir, fswalktest.KubeletFirstProjectID, 4<<20, 1000, 1000)
			fswalktest.SyncFS(t, root)

			src := source.DefaultFilesystem()
			src.KubeletRootDir = root
			cfg := exporter.DefaultConfig()
			cfg.NodeName, cfg.Source, cfg.Pods = "node-1", &src, exportertest.NewPods(victim, tenant)
			exp, err := exporter.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle(liveapi.Pattern, exp.LiveHandler())
			ts := httptest.NewServer(mux)
			defer ts.Close()

			pod := newPod("default", "web-0", uid1).build()
			hostUsers := false
			pod.Spec.HostUsers = &hostUsers
			e := newEnvMeasuring(t, testConfig(), NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL)), pod)
			e.mu.Lock()
			e.now = time.Now() // the real exporter's walk is judged fresh by the real clock
			e.mu.Unlock()
			code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
			if code != http.StatusOK || len(resp.Alerts) != 1 {
				t.Fatalf("code %d, %+v; want 200 and one alert", code, resp)
			}
			if got := resp.Alerts[0]; got.Outcome != OutcomeSkipped || got.Reason != SkipNotOverLimit {
				t.Errorf("outcome/reason = %s/%q (%s), want %s/%q", got.Outcome, got.Reason, got.Message, OutcomeSkipped, SkipNotOverLimit)
			}
			if n := e.evictions(); n != 0 {
				t.Errorf("%d evictions of the victim, want none", n)
			}
		})
	}
}

// TestHostTenantHelperProcess is not a test: fswalktest.ChargeProject runs it as the tenant.
func TestHostTenantHelperProcess(t *testing.T) { fswalktest.HostTenantHelperProcess(t) }
