package exporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProjectQuotaOff: with ProjectQuotas unset the volume is walked whatever it is under.
func TestProjectQuotaOff(t *testing.T) {
	root := t.TempDir()
	pod, vol := PodVolumes{Namespace: "ns", Pod: "p", UID: "uid-1"}, Volume{Name: "vol", Medium: MediumDisk}
	if err := os.MkdirAll(Dir(root, pod.UID, vol.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := (&FilesystemSource{KubeletRootDir: root, WalkConcurrency: 1}).MeasureVolume(context.Background(), pod, vol, nil)
	if err != nil || m.Method != MethodWalk {
		t.Errorf("MeasureVolume: method %q, err %v; want %q", m.Method, err, MethodWalk)
	}
}

// TestWalkCutShortIsALowerBound: a walk that hits its deadline gives what it counted as a
// lower bound, not an error and no number (issue 18, item 4): a volume slower to walk than
// the deadline is still known to hold at least that much.
func TestWalkCutShortIsALowerBound(t *testing.T) {
	root := t.TempDir()
	pod, vol := PodVolumes{Namespace: "ns", Pod: "p", UID: "uid-1"}, Volume{Name: "vol", Medium: MediumDisk}
	dir := Dir(root, pod.UID, vol.Name)
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Ended before the walk begins: it counts the volume's own folder and nothing below.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	m, err := (&FilesystemSource{KubeletRootDir: root, WalkConcurrency: 1}).MeasureVolume(ctx, pod, vol, nil)
	if err != nil {
		t.Fatalf("MeasureVolume: %v; want what the walk counted, as a lower bound", err)
	}
	if !m.CutShort || !m.LowerBound() || m.UsedBytes <= 0 || m.UsedBytes >= 1<<20 || m.CompletedAt.IsZero() {
		t.Errorf("got %+v, want the volume folder's own blocks, CutShort, a lower bound", m)
	}
}
