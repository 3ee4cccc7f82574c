package source

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// TestProjectQuotaOff: with ProjectQuotas unset the volume is walked whatever it is under.
func TestProjectQuotaOff(t *testing.T) {
	root := t.TempDir()
	pod, vol := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1"}, part.Part{Name: "vol", Medium: part.MediumDisk}
	if err := os.MkdirAll(part.EmptyDirPath(root, pod.UID, vol.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := (&Filesystem{KubeletRootDir: root, WalkConcurrency: 1}).MeasurePart(context.Background(), pod, vol, nil)
	if err != nil || m.Method != part.MethodWalk {
		t.Errorf("MeasurePart: method %q, err %v; want %q", m.Method, err, part.MethodWalk)
	}
}

// TestProjectQuotaOnlyInUserNamespaces: a volume's project quota is read only for a pod with
// hostUsers: false. Elsewhere the pod's root may set the volume's project ID itself (chattr
// -p N +P needs no capability in the initial user namespace) and so choose what the quota
// answers; such a volume is walked, whatever its quota says (issue 18, item 9).
func TestProjectQuotaOnlyInUserNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name          string
		userNamespace bool
		wantMethod    string
		wantUsed      int64
	}{
		{"hostUsers: false", true, part.MethodProjectQuota, 0}, // the quota's answer, trusted
		{"host users", false, part.MethodWalk, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1", UserNamespace: tc.userNamespace}
			vol := part.Part{Name: "vol", Medium: part.MediumDisk}
			dir := part.EmptyDirPath(root, pod.UID, vol.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			// The quota the tenant chose: an empty project.
			src := &Filesystem{KubeletRootDir: root, WalkConcurrency: 1, ProjectQuotas: true,
				ReadQuota: func(string) (fswalk.DiskUsage, error) { return fswalk.DiskUsage{}, nil }}
			m, err := src.MeasurePart(context.Background(), pod, vol, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Method != tc.wantMethod || m.UsedBytes < tc.wantUsed || (tc.wantUsed == 0 && m.UsedBytes != 0) {
				t.Errorf("method %q, used %d; want %q and %d (at least)", m.Method, m.UsedBytes, tc.wantMethod, tc.wantUsed)
			}
		})
	}
}

// TestProjectQuotaCheckedByAWalk: a project quota counts every file with the volume's project
// ID, which any process of the initial user namespace can give its own files (issue 30, item
// 9): its answer is an upper bound. It is published alone only while it is over no limit the
// volume counts toward, and never answers a live measurement; otherwise the walk answers, and
// what the quota counts beyond it is QuotaExcessBytes.
func TestProjectQuotaCheckedByAWalk(t *testing.T) {
	root := t.TempDir()
	pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1", UserNamespace: true}
	dir := part.EmptyDirPath(root, pod.UID, "vol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	walked, err := fswalk.MeasureDiskUsage(context.Background(), dir, fswalk.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	const charged = 4 << 20 // another tenant's files with the volume's project ID
	mib := func(n int64) *int64 { n <<= 20; return &n }
	for _, tc := range []struct {
		name           string
		hostUsers      bool
		live           bool
		sizeLimit, pod *int64
		excess         int64 // what the quota counts beyond the walk
		wantMethod     string
		wantExcess     int64
	}{
		{name: "no limit: the quota", excess: charged, wantMethod: part.MethodProjectQuota},
		{name: "under its sizeLimit: the quota", sizeLimit: mib(64), excess: charged, wantMethod: part.MethodProjectQuota},
		{name: "over its sizeLimit: walked", sizeLimit: mib(2), excess: charged, wantMethod: part.MethodWalk, wantExcess: charged},
		{name: "over the pod's limit: walked", pod: mib(2), excess: charged, wantMethod: part.MethodWalk, wantExcess: charged},
		{name: "live, under its sizeLimit: walked", live: true, sizeLimit: mib(64), excess: charged, wantMethod: part.MethodWalk, wantExcess: charged},
		{name: "live, quota and walk agree: no excess", live: true, sizeLimit: mib(64), wantMethod: part.MethodWalk},
		{name: "host users: walked, the quota not read", hostUsers: true, sizeLimit: mib(2), excess: charged, wantMethod: part.MethodWalk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod
			p.UserNamespace = !tc.hostUsers
			v := part.Part{Name: "vol", Medium: part.MediumDisk, LimitBytes: tc.sizeLimit, BudgetBytes: tc.pod}
			src := &Filesystem{KubeletRootDir: root, WalkConcurrency: 1, ProjectQuotas: true,
				ReadQuota: func(string) (fswalk.DiskUsage, error) {
					return fswalk.DiskUsage{UsedBytes: walked.UsedBytes + tc.excess, Inodes: walked.Inodes + 3}, nil
				}}
			measure := src.MeasurePart
			if tc.live {
				measure = src.MeasurePartLive
			}
			m, err := measure(context.Background(), p, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantUsed := walked.UsedBytes
			if tc.wantMethod == part.MethodProjectQuota {
				wantUsed += tc.excess
			}
			if m.Method != tc.wantMethod || m.UsedBytes != wantUsed || m.QuotaExcessBytes != tc.wantExcess {
				t.Errorf("method %q, used %d, quota excess %d; want %q, %d, %d",
					m.Method, m.UsedBytes, m.QuotaExcessBytes, tc.wantMethod, wantUsed, tc.wantExcess)
			}
		})
	}
}

// TestWalkCutShortIsALowerBound: a walk that hits its deadline gives what it counted as a
// lower bound, not an error and no number (issue 18, item 4): a volume slower to walk than
// the deadline is still known to hold at least that much.
func TestWalkCutShortIsALowerBound(t *testing.T) {
	root := t.TempDir()
	pod, vol := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1"}, part.Part{Name: "vol", Medium: part.MediumDisk}
	dir := part.EmptyDirPath(root, pod.UID, vol.Name)
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Ended before the walk begins: it counts the volume's own directory and nothing below.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	m, err := (&Filesystem{KubeletRootDir: root, WalkConcurrency: 1}).MeasurePart(ctx, pod, vol, nil)
	if err != nil {
		t.Fatalf("MeasurePart: %v; want what the walk counted, as a lower bound", err)
	}
	if !m.CutShort || !m.LowerBound() || m.UsedBytes <= 0 || m.UsedBytes >= 1<<20 || m.CompletedAt.IsZero() {
		t.Errorf("got %+v, want the volume directory's own blocks, CutShort, a lower bound", m)
	}
}
