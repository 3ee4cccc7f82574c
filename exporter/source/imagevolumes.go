package source

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// Reasons a running container's image VOLUME directories could not be located, as the reason label
// of emptydir_container_writable_layer_unlocated spells them: its writable layer is walked, the
// directories are not, and its usage is a lower bound.
const (
	// LayerImageVolumeNotMounted: the container's bundle names image VOLUME directories, and the
	// exporter has no --containerd.cri-containers-dir to walk them in.
	LayerImageVolumeNotMounted = "image_volume_not_mounted"
	// LayerImageVolumeMissing: an image VOLUME directory the bundle names is not below
	// --containerd.cri-containers-dir (another containerd root, or the directory not mounted).
	LayerImageVolumeMissing = "image_volume_missing"
	// LayerNoBundleConfig: the container's OCI bundle config.json could not be read, so
	// whether it has image VOLUME directories is not known.
	LayerNoBundleConfig = "no_bundle_config"
)

// imageVolumeSource is the bind source containerd's CRI plugin gives an image VOLUME that no
// Kubernetes mount covers (volumeMounts in internal/cri/server/container_create.go):
// <root>/io.containerd.grpc.v1.cri/containers/<container id>/volumes/<random id>. Group 1 is
// the container's ID, group 2 the volume's.
var imageVolumeSource = regexp.MustCompile(`/io\.containerd\.grpc\.v1\.cri/containers/([0-9a-f]{64})/volumes/([0-9a-f]{64})$`)

// maxBundleConfig bounds the read of a bundle's config.json: containerd writes a few tens of
// KiB; more is not a spec the CRI plugin wrote.
const maxBundleConfig = 4 << 20

// ImageVolumes locates the directories holding the image VOLUMEs of the container with runtime ID
// id ("containerd://…"): the bind mounts of its OCI bundle (<task-dir>/<namespace>/<id>/
// config.json, which containerd writes and the container cannot change) whose source is one
// of its own CRI volume directories. Each is walked as <CRIContainersDir>/<id>/volumes/<volume id>:
// the ID is the container's own from the pod's status and the volume's a hex name checked
// above, so nothing a tenant writes chooses the directory. None when the image has no VOLUME, or
// a Kubernetes mount covers each; a *LayerError with an image volume reason when they cannot
// be walked.
func (l *LayerLocator) ImageVolumes(id string) ([]string, error) {
	runtime, cid, _ := part.RuntimeID(id)
	// CRI-O's image_volumes=mkdir (its default) makes them directories of the container's root
	// filesystem, in its writable layer; Docker makes them anonymous volumes, which Docker's
	// own figure for the layer leaves out too. Neither is a directory to add.
	if runtime == "cri-o" || runtime == "docker" {
		return nil, nil
	}
	if runtime != "containerd" || !containerIDPattern.MatchString(cid) {
		return nil, &LayerError{Reason: LayerOtherRuntime, Err: fmt.Errorf("container ID %q is not containerd's", id)}
	}
	ns := l.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	config := filepath.Join(l.TaskDir, ns, cid, "config.json")
	ids, err := bundleImageVolumes(config, cid)
	if err != nil {
		return nil, &LayerError{Reason: LayerNoBundleConfig, Err: err}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if l.CRIContainersDir == "" {
		return nil, &LayerError{Reason: LayerImageVolumeNotMounted, Err: fmt.Errorf("%s names %d image VOLUME directory(s), and no --containerd.cri-containers-dir is set", config, len(ids))}
	}
	dirs := make([]string, 0, len(ids))
	for _, vid := range ids {
		dir := filepath.Join(l.CRIContainersDir, cid, "volumes", vid)
		fi, err := os.Lstat(dir)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is no directory", dir)
		}
		if err != nil {
			return nil, &LayerError{Reason: LayerImageVolumeMissing, Err: err}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// ociMounts is what ImageVolumes reads of an OCI runtime spec.
type ociMounts struct {
	Mounts []struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options"`
	} `json:"mounts"`
}

// bundleImageVolumes reads the IDs of container cid's image VOLUME directories from its bundle's
// config.json, each once.
func bundleImageVolumes(config, cid string) ([]string, error) {
	// A directory of containerd's task dir, named by the container's checked ID; never a request's.
	b, err := readCapped(config, maxBundleConfig)
	if err != nil {
		return nil, err
	}
	var spec ociMounts
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", config, err)
	}
	var ids []string
	seen := map[string]bool{}
	for _, m := range spec.Mounts {
		g := imageVolumeSource.FindStringSubmatch(filepath.Clean(m.Source))
		if g == nil || g[1] != cid || !isBind(m.Type, m.Options) || seen[g[2]] {
			continue
		}
		seen[g[2]] = true
		ids = append(ids, g[2])
	}
	return ids, nil
}

// isBind reports whether an OCI mount is a bind mount: type bind, or (older runtimes) a bind
// or rbind option.
func isBind(typ string, options []string) bool {
	if typ == "bind" {
		return true
	}
	for _, o := range options {
		if o == "bind" || o == "rbind" {
			return true
		}
	}
	return false
}
