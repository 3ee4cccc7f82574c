package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CRI-O keeps its containers in containers/storage with the overlay driver: the container →
// layer map in <root>/overlay-containers/containers.json and, for the containers it creates
// volatile (all of them, since it passes Volatile to CreateContainer), volatile-containers.json
// beside it; the layers' records in <root>/overlay-layers/layers.json and volatile-layers.json;
// each layer's files in <root>/overlay/<layer>/diff. Its mounts are private to its own mount
// namespace and may name the upperdir relative to <root>/overlay (when the options exceed a
// page), so unlike containerd's nothing is read from the mount table.
const (
	crioContainersDir = "overlay-containers"
	crioLayersDir     = "overlay-layers"
	crioDriverDir     = "overlay"
	// dockerDriverDir is where Docker's overlay2 storage driver keeps its layers.
	dockerDriverDir = "overlay2"
)

// maxLayerMetadata bounds the read of one of the runtime's JSON files: a container's record is
// about a KiB, an image layer's a few hundred bytes; 16 MiB is tens of thousands of them.
const maxLayerMetadata = 16 << 20

// maxMountID bounds the read of Docker's mount-id file: 64 hex digits.
const maxMountID = 4 << 10

// crioStore is one reading of CRI-O's metadata: which layer each container writes to, and
// which layers have a record.
type crioStore struct {
	read       time.Time
	containers map[string]string // container ID → layer ID
	layers     map[string]bool
}

// storageRecord is what the locator reads of a record of containers.json or layers.json.
type storageRecord struct {
	ID    string `json:"id"`
	Layer string `json:"layer"` // a container's layer; empty in layers.json
}

// crioLayer locates the writable layer of CRI-O's container cid: the layer its containers/storage
// record names, if that layer has a record of its own, at <root>/overlay/<layer>/diff. That
// directory is what CRI-O's own figure measures (the overlay driver's ReadWriteDiskUsage), the
// upper directory of the container's overlay whether its mount names it relatively or not.
func (l *LayerLocator) crioLayer(cid string) (string, error) {
	layer, err := l.crioLookup(cid)
	if err != nil {
		return "", err
	}
	return layerDir(filepath.Join(l.CRIOStorageRoot, crioDriverDir), layer, "diff")
}

// crioLookup gives the layer of container cid from a reading of CRI-O's metadata at most
// mountTableTTL old, read again when it does not know cid (a container started since).
func (l *LayerLocator) crioLookup(cid string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fresh := false; ; fresh = true {
		if l.crio.containers == nil || time.Since(l.crio.read) > mountTableTTL || fresh {
			s, err := readCRIOStore(l.CRIOStorageRoot)
			if err != nil {
				l.crio = crioStore{}
				return "", err
			}
			l.crio, fresh = s, true
		}
		layer, found := l.crio.containers[cid]
		switch {
		case !found && !fresh:
			continue
		case !found:
			return "", &LayerError{Reason: LayerNoLayerRecord, Err: fmt.Errorf("no container %s in CRI-O's %s", cid, filepath.Join(l.CRIOStorageRoot, crioContainersDir))}
		case !containerIDPattern.MatchString(layer):
			return "", &LayerError{Reason: LayerBadMetadata, Err: fmt.Errorf("CRI-O's record of container %s names layer %q, of no form containers/storage makes", cid, layer)}
		case !l.crio.layers[layer]:
			return "", &LayerError{Reason: LayerNoLayerRecord, Err: fmt.Errorf("layer %s of container %s has no record in %s", layer, cid, filepath.Join(l.CRIOStorageRoot, crioLayersDir))}
		}
		return layer, nil
	}
}

// readCRIOStore reads the container and layer records below root; a file missing is no record
// (volatile-containers.json appears with the first volatile container).
func readCRIOStore(root string) (crioStore, error) {
	s := crioStore{read: time.Now(), containers: map[string]string{}, layers: map[string]bool{}}
	for _, name := range []string{"containers.json", "volatile-containers.json"} {
		records, err := readStorageRecords(filepath.Join(root, crioContainersDir, name))
		if err != nil {
			return crioStore{}, err
		}
		for _, r := range records {
			s.containers[r.ID] = r.Layer
		}
	}
	for _, name := range []string{"layers.json", "volatile-layers.json"} {
		records, err := readStorageRecords(filepath.Join(root, crioLayersDir, name))
		if err != nil {
			return crioStore{}, err
		}
		for _, r := range records {
			s.layers[r.ID] = true
		}
	}
	return s, nil
}

// readStorageRecords reads one of containers/storage's JSON files (an array of records), none
// when it does not exist.
func readStorageRecords(path string) ([]storageRecord, error) {
	b, err := readCapped(path, maxLayerMetadata)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &LayerError{Reason: LayerBadMetadata, Err: err}
	}
	var records []storageRecord
	if err := json.Unmarshal(b, &records); err != nil {
		return nil, &LayerError{Reason: LayerBadMetadata, Err: fmt.Errorf("parsing %s: %w", path, err)}
	}
	return records, nil
}

// dockerLayer locates the writable layer of Docker's container cid (cri-dockerd) with the
// overlay2 storage driver: <root>/image/overlay2/layerdb/mounts/<cid>/mount-id names its
// directory <root>/overlay2/<mount id>/diff, the directory whose size Docker reports as the
// container's SizeRw, which cri-dockerd gives the kubelet.
func (l *LayerLocator) dockerLayer(cid string) (string, error) {
	path := filepath.Join(l.DockerRoot, "image", "overlay2", "layerdb", "mounts", cid, "mount-id")
	b, err := readCapped(path, maxMountID)
	if errors.Is(err, fs.ErrNotExist) {
		return "", &LayerError{Reason: LayerNoLayerRecord, Err: err}
	}
	if err != nil {
		return "", &LayerError{Reason: LayerBadMetadata, Err: err}
	}
	// Docker writes the ID bare, and trims what surrounds it when it reads it.
	mountID := strings.TrimSpace(string(b))
	if !containerIDPattern.MatchString(mountID) {
		return "", &LayerError{Reason: LayerBadMetadata, Err: fmt.Errorf("%s names layer %q, of no form Docker makes", path, mountID)}
	}
	return layerDir(filepath.Join(l.DockerRoot, dockerDriverDir), mountID, "diff")
}

// layerDir is <driverDir>/<id>/<sub> when both it and <driverDir>/<id> are directories right
// there, no symbolic link: id is checked already, and only the node's root writes these
// directories, but a link would take the walk anywhere.
func layerDir(driverDir, id, sub string) (string, error) {
	dir := filepath.Join(driverDir, id)
	for _, d := range []string{dir, filepath.Join(dir, sub)} {
		fi, err := os.Lstat(d)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is no directory (%s)", d, fi.Mode().Type())
		}
		if err != nil {
			return "", &LayerError{Reason: LayerNoLayerDir, Err: err}
		}
	}
	return filepath.Join(dir, sub), nil
}

// readCapped reads the file at path, an error when it holds more than limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	// A file of the runtime's metadata, named by a checked ID; never a request's.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the runtime's metadata: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", path, limit)
	}
	return b, nil
}
