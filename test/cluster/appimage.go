package cluster

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// AppImageUser is the user of images built by ImportImage: distroless' "nonroot"
// (gcr.io/distroless/static-debian12:nonroot), which the project's Dockerfile uses.
const AppImageUser = "65532:65532"

// ImportImage builds a single-layer image named name (e.g. "localhost/emptydir-guard:test")
// that holds files (path in the image -> file on the host, copied with mode 0755) on a
// minimal distroless-like rootfs (/etc/passwd with root and nonroot, /tmp, no shell), user
// AppImageUser and the given entrypoint, and imports it into the node's runtime. Pods
// use it with imagePullPolicy: Never. Every file must be a statically linked executable,
// since the image has no libc.
func (c *Cluster) ImportImage(ctx context.Context, name string, files map[string]string, entrypoint []string) error {
	for _, host := range files {
		// `go build` links dynamically when cgo is on and net is imported.
		if err := CheckStatic(host); err != nil {
			return fmt.Errorf("%w; build it with CGO_ENABLED=0", err)
		}
	}
	archive, err := os.CreateTemp(c.workDir, "appimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(archive.Name())
	err = writeAppImageArchive(archive, name, files, entrypoint)
	if cerr := archive.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("build image %s: %w", name, err)
	}
	if c.runtime == RuntimeCRIO {
		return c.crioImport(ctx, archive.Name(), name)
	}
	if out, err := c.ctr(ctx, "images", "import", archive.Name()); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", name, err, out)
	}
	return nil
}

// writeAppImageArchive writes a docker-archive (the `docker save` format) of one image.
func writeAppImageArchive(w io.Writer, name string, files map[string]string, entrypoint []string) error {
	layer, err := os.CreateTemp("", "appimage-layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	h := sha256.New()
	if err := writeAppLayer(io.MultiWriter(layer, h), files); err != nil {
		return err
	}
	layerID := hex.EncodeToString(h.Sum(nil))
	layerSize, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Entrypoint": entrypoint,
			"User":       AppImageUser,
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
	})
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{
		{"Config": cfgName, "RepoTags": []string{name}, "Layers": []string{layerID + "/layer.tar"}},
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: layerID + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerID + "/layer.tar", Typeflag: tar.TypeReg, Mode: 0o644, Size: layerSize}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeAppLayer writes the rootfs: the directories every container runtime expects, passwd and
// group files with root and nonroot, and the files.
func writeAppLayer(w io.Writer, files map[string]string) error {
	mt := time.Unix(0, 0)
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	var dirList []string
	addDir := func(d string) {
		for ; d != "." && d != "/" && d != ""; d = path.Dir(d) {
			if !dirs[d] {
				dirs[d] = true
				dirList = append(dirList, d)
			}
		}
	}
	for _, d := range []string{"dev", "etc", "proc", "sys", "tmp", "home/nonroot", "var"} {
		addDir(d)
	}
	names := make([]string, 0, len(files))
	for p := range files {
		clean := strings.TrimPrefix(path.Clean("/"+p), "/")
		if clean == "" {
			return fmt.Errorf("bad image path %q", p)
		}
		names = append(names, p)
		addDir(path.Dir(clean))
	}
	sort.Strings(dirList) // parents sort before their children
	for _, d := range dirList {
		hdr := &tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt}
		switch d {
		case "tmp":
			hdr.Mode = 0o1777
		case "home/nonroot":
			hdr.Uid, hdr.Gid, hdr.Mode = 65532, 65532, 0o700
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	etc := []struct{ name, data string }{
		{"etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{"etc/group", "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
	}
	for _, f := range etc {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: mt}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f.data); err != nil {
			return err
		}
	}
	sort.Strings(names)
	for _, p := range names {
		if err := addFile(tw, strings.TrimPrefix(path.Clean("/"+p), "/"), files[p], mt); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, name, host string, mt time.Time) error {
	f, err := os.Open(filepath.Clean(host))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", host)
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: fi.Size(), ModTime: mt}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
