package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

const (
	// BusyboxImage is the only userland image test pods need; it is imported from a local
	// archive, so pods must use imagePullPolicy: Never (there is no registry).
	BusyboxImage = "localhost/busybox:test"
	// SandboxImage replaces the pause image: a busybox whose entrypoint never exits, since an
	// exiting sandbox makes every pod loop on SandboxChanged.
	SandboxImage = "localhost/pause:test"
	// BusyboxVolumeImage is BusyboxImage with `VOLUME /scratch`: containerd binds a directory of
	// its own (<root>/io.containerd.grpc.v1.cri/containers/<id>/volumes/<random>) there when no
	// Kubernetes mount covers it.
	BusyboxVolumeImage = "localhost/busybox-volume:test"
	// BusyboxVolumePath is BusyboxVolumeImage's VOLUME.
	BusyboxVolumePath = "/scratch"

	busyboxPath = "/bin/busybox"
)

// buildImageArchive writes a docker-archive (the `docker save` format, which
// `ctr images import` understands) holding BusyboxImage, SandboxImage and BusyboxVolumeImage.
// All share one layer: a rootfs with Debian's static busybox and a symlink per applet.
func buildImageArchive(path string) error {
	layer, err := busyboxLayer()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(layer)
	layerID := hex.EncodeToString(sum[:])
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	mkConfig := func(entrypoint, cmd []string, stopSignal string, volumes ...string) ([]byte, string, error) {
		config := map[string]any{"Env": env, "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": "/"}
		if stopSignal != "" {
			config["StopSignal"] = stopSignal
		}
		if len(volumes) > 0 {
			vs := map[string]any{}
			for _, v := range volumes {
				vs[v] = map[string]any{}
			}
			config["Volumes"] = vs
		}
		cfg := map[string]any{
			"architecture": "amd64",
			"os":           "linux",
			"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
			"config":       config,
			"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, "", err
		}
		s := sha256.Sum256(b)
		return b, hex.EncodeToString(s[:]), nil
	}
	bbCfg, bbID, err := mkConfig(nil, []string{"sh"}, "")
	if err != nil {
		return err
	}
	// busybox sleep as PID 1 ignores SIGTERM, where the real pause exits: CRI-O stops a sandbox
	// with its image's stop signal (containerd kills it), and with SIGTERM each pod's teardown
	// would wait out CRI-O's timeout, the kubelet's other pods stalled meanwhile.
	pauseCfg, pauseID, err := mkConfig([]string{"/bin/sleep", "2147483647"}, nil, "SIGKILL")
	if err != nil {
		return err
	}
	volCfg, volID, err := mkConfig(nil, []string{"sh"}, "", BusyboxVolumePath)
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{
		{"Config": bbID + ".json", "RepoTags": []string{BusyboxImage}, "Layers": []string{layerID + "/layer.tar"}},
		{"Config": pauseID + ".json", "RepoTags": []string{SandboxImage}, "Layers": []string{layerID + "/layer.tar"}},
		{"Config": volID + ".json", "RepoTags": []string{BusyboxVolumeImage}, "Layers": []string{layerID + "/layer.tar"}},
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		data []byte
	}{
		{layerID + "/layer.tar", layer},
		{bbID + ".json", bbCfg},
		{pauseID + ".json", pauseCfg},
		{volID + ".json", volCfg},
		{"manifest.json", manifest},
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerID + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return err
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// WriteImageArchive writes the archive of BusyboxImage, SandboxImage and BusyboxVolumeImage to
// path, for a containerd the test starts itself (the kernel lane's kubelet).
func WriteImageArchive(path string) error { return buildImageArchive(path) }

func busyboxLayer() ([]byte, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(0, 0)
	for _, d := range []string{"bin/", "dev/", "etc/", "proc/", "sys/", "tmp/", "root/", "var/", "usr/", "usr/bin/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode, ModTime: mt}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mt}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mt}); err != nil {
			return nil, err
		}
	}
	etc := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for _, name := range []string{"etc/passwd", "etc/group"} {
		data := etc[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mt}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
