package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAppImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	entry := []string{"/usr/local/bin/tool"}
	if err := writeAppImageArchive(&buf, "localhost/app:test", map[string]string{"/usr/local/bin/tool": bin, "opt/other": bin}, entry); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, buf.Bytes())
	manifest := archiveManifest(t, files)
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != "localhost/app:test" || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest %+v", manifest)
	}
	var cfg struct {
		Config struct {
			Entrypoint []string
			User       string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != entry[0] || cfg.Config.User != AppImageUser {
		t.Errorf("config %+v", cfg.Config)
	}
	layer := files[manifest[0].Layers[0]]
	sum := sha256.Sum256(layer)
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("diff_ids %v, layer sha256 %x", cfg.RootFS.DiffIDs, sum)
	}
	tr := tar.NewReader(bytes.NewReader(layer))
	entries := map[string]*tar.Header{}
	var order []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		entries[h.Name] = h
		order = append(order, h.Name)
	}
	for _, want := range []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/tool", "opt/other", "etc/passwd", "tmp/", "home/nonroot/"} {
		if entries[want] == nil {
			t.Errorf("layer lacks %s; has %v", want, order)
		}
	}
	if h := entries["usr/local/bin/tool"]; h != nil && (h.Mode != 0o755 || h.Size != int64(len("not really a binary"))) {
		t.Errorf("tool entry mode %o size %d", h.Mode, h.Size)
	}
	seen := map[string]bool{}
	for _, n := range order {
		if parent := filepath.Dir(strings.TrimSuffix(n, "/")); parent != "." && !seen[parent+"/"] {
			t.Errorf("%s comes before its directory %s/", n, parent)
		}
		seen[n] = true
	}
}

func TestCheckStatic(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err == nil {
		if err := CheckStatic(busyboxPath); err != nil {
			t.Errorf("static busybox: %v", err)
		}
	}
	if _, err := os.Stat("/bin/ls"); err == nil {
		if err := CheckStatic("/bin/ls"); !errors.Is(err, ErrDynamicallyLinked) {
			t.Errorf("dynamic /bin/ls: %v, want a dynamically linked error", err)
		}
	}
	if err := CheckStatic(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
}
