package exporter

import (
	"context"
	"os"
	"testing"
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
