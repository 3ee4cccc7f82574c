package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests cover what can be checked without root; Start itself is exercised by test/e2e.

func TestBuildImageArchive(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err != nil {
		t.Skipf("%s missing (install busybox-static)", busyboxPath)
	}
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := buildImageArchive(path); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, mustRead(t, path))
	manifest := archiveManifest(t, files)
	tags := map[string]map[string]any{}
	for _, m := range manifest {
		cfgBytes, ok := files[m.Config]
		if !ok {
			t.Fatalf("config %s missing", m.Config)
		}
		sum := sha256.Sum256(cfgBytes)
		if want := hex.EncodeToString(sum[:]) + ".json"; m.Config != want {
			t.Errorf("config named %s, want its sha256 %s", m.Config, want)
		}
		var cfg map[string]any
		if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
			t.Fatal(err)
		}
		layer := files[m.Layers[0]]
		lsum := sha256.Sum256(layer)
		diffIDs := cfg["rootfs"].(map[string]any)["diff_ids"].([]any)
		if diffIDs[0] != "sha256:"+hex.EncodeToString(lsum[:]) {
			t.Errorf("%v: diff_id %v does not match layer", m.RepoTags, diffIDs[0])
		}
		rootfs := readTar(t, layer)
		for _, f := range []string{"bin/busybox", "bin/sh", "bin/dd", "bin/sleep", "bin/tail", "bin/du", "bin/echo"} {
			if _, ok := rootfs[f]; !ok {
				t.Errorf("%v: rootfs lacks %s", m.RepoTags, f)
			}
		}
		for _, tag := range m.RepoTags {
			tags[tag] = cfg["config"].(map[string]any)
		}
	}
	if _, ok := tags[BusyboxImage]; !ok {
		t.Errorf("no %s in %v", BusyboxImage, manifest)
	}
	pause, ok := tags[SandboxImage]
	if !ok {
		t.Fatalf("no %s in %v", SandboxImage, manifest)
	}
	if ep, _ := json.Marshal(pause["Entrypoint"]); string(ep) != `["/bin/sleep","2147483647"]` {
		t.Errorf("sandbox entrypoint = %s, want a sleep that never exits", ep)
	}
	if sig := pause["StopSignal"]; sig != "SIGKILL" {
		t.Errorf("sandbox stop signal = %v, want SIGKILL: its sleep ignores SIGTERM", sig)
	}
	if vol, ok := tags[BusyboxVolumeImage]; !ok {
		t.Errorf("no %s in %v", BusyboxVolumeImage, manifest)
	} else if vs, _ := json.Marshal(vol["Volumes"]); string(vs) != `{"/scratch":{}}` {
		t.Errorf("%s volumes = %s, want VOLUME %s", BusyboxVolumeImage, vs, BusyboxVolumePath)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:             "/tmp/a",
		`/tmp/with\040sp`:    "/tmp/with sp",
		`/tmp/tab\011x\134y`: "/tmp/tab\tx\\y",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPreflightNamesTheFix(t *testing.T) {
	err := preflight(Options{BinDir: t.TempDir()})
	if err == nil {
		t.Fatal("preflight with an empty bin dir passed")
	}
	for _, want := range []string{"kube-apiserver missing", "kubelet missing", "make k8s-binaries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("preflight error lacks %q:\n%v", want, err)
		}
	}
	if err := preflight(Options{}); err == nil || !strings.Contains(err.Error(), "K8S_BIN_DIR") {
		t.Errorf("preflight(\"\") = %v, want a hint at K8S_BIN_DIR", err)
	}
	// A CRI-O node names its own parts: the directory test/crio/build.sh prints.
	for dir, want := range map[string]string{"": "CRIO_DIR", t.TempDir(): "crio missing in"} {
		err := preflight(Options{Runtime: RuntimeCRIO, CRIODir: dir})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "test/crio/build.sh") {
			t.Errorf("preflight(CRI-O, %q) = %v, want %q and the build script", dir, err, want)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// archiveImage is one image of a docker-archive's manifest.json, as containerd imports it.
type archiveImage struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// archiveManifest decodes the manifest.json among files, an archive's contents (readTar).
func archiveManifest(t *testing.T, files map[string][]byte) []archiveImage {
	t.Helper()
	var manifest []archiveImage
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return manifest
}

func readTar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}
