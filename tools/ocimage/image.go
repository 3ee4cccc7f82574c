package ocimage

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// What the image says about itself: the Dockerfile's labels (but base.name: there is no base
// image), plus created and licenses.
const (
	imageTitle       = "emptydir-guard"
	imageDescription = "Prometheus exporter of emptyDir usage and sizeLimit, and an Alertmanager-driven remediator that evicts pods over their limit through the Eviction API"
	sourceURL        = "https://github.com/emptydir-guard/emptydir-guard"
	documentationURL = sourceURL + "/blob/main/docs/deploy.md"
	license          = "Apache-2.0"
	// MainModule is the Go module of both commands.
	MainModule = "github.com/emptydir-guard/emptydir-guard"
)

// Ports the commands listen on: the exporter's metrics and the remediator's webhook.
var exposedPorts = []string{"9731/tcp", "9732/tcp"}

// Media and artifact types of what the layout holds.
const (
	// SBOMArtifactType is the artifactType of the SBOM referrers and the media type of their
	// one layer, the SPDX JSON document.
	SBOMArtifactType = "application/spdx+json"
	// emptyMediaType is OCI 1.1's empty descriptor: the config of an artifact manifest.
	emptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"
)

// OCI annotation keys.
const (
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
	annotationTitle    = "org.opencontainers.image.title"
)

// Result names what Build wrote.
type Result struct {
	Out string
	// Index is the multi-arch image index: the one descriptor of the layout's index.json tagged
	// with the version (org.opencontainers.image.ref.name).
	Index v1.Descriptor
	// Images are the platform images' manifests, in the index's order.
	Images []v1.Descriptor
	// SBOMs are the SBOM referrers, one per image, in the same order.
	SBOMs []v1.Descriptor
}

// blob is a content-addressed file of the layout.
type blob struct {
	desc v1.Descriptor
	data []byte
}

// platformImage is one platform's image and its SBOM referrer, built in memory.
type platformImage struct {
	manifest v1.Descriptor // with its platform
	sbom     v1.Descriptor
	blobs    []blob
}

// Build writes the OCI image layout that o describes (run CheckInputs first): into a temporary
// directory beside o.Out, checked with go-containerregistry's validate, then renamed to o.Out,
// so that a failed build leaves o.Out as it was.
func Build(o Options) (*Result, error) {
	created := time.Unix(o.SourceDateEpoch, 0).UTC()
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("--ca-bundle: %w", err)
	}
	base, err := newLayer(baseEntries(ca), created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}

	// One goroutine per platform: gzip is most of the time.
	imgs := make([]*platformImage, len(o.Binaries))
	errs := make([]error, len(o.Binaries))
	var wg sync.WaitGroup
	for i, pb := range o.Binaries {
		wg.Go(func() {
			imgs[i], errs[i] = buildPlatform(o, pb, base, ca, created)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", pb.Platform, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	annotations := map[string]string{
		AnnotationCreated:  created.Format(time.RFC3339),
		AnnotationVersion:  o.Version,
		AnnotationRevision: o.Revision,
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Annotations:   annotations,
	}
	var blobs []blob
	res := &Result{Out: o.Out}
	for _, img := range imgs {
		index.Manifests = append(index.Manifests, img.manifest)
		blobs = append(blobs, img.blobs...)
		res.Images = append(res.Images, img.manifest)
		res.SBOMs = append(res.SBOMs, img.sbom)
	}
	indexBlob, err := jsonBlob(index, types.OCIImageIndex)
	if err != nil {
		return nil, err
	}
	blobs = append(blobs, indexBlob)
	res.Index = indexBlob.desc

	// The layout's own index.json: the image index, tagged with the version, and the SBOM
	// referrers, which tools that read a layout's referrers (oras discover, oras cp -r) find
	// there by their subject.
	top := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	tagged := indexBlob.desc
	tagged.Annotations = map[string]string{AnnotationRefName: o.Version}
	top.Manifests = append(top.Manifests, tagged)
	top.Manifests = append(top.Manifests, res.SBOMs...)
	topJSON, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeLayout(o.Out, blobs, append(topJSON, '\n'), indexBlob.desc.Digest); err != nil {
		return nil, err
	}
	return res, nil
}

// buildPlatform builds one platform's image, from the shared base layer and the platform's
// commands, and its SBOM referrer.
func buildPlatform(o Options, pb PlatformBinaries, base *layer, ca []byte, created time.Time) (*platformImage, error) {
	bins := map[string][]byte{}
	var infos []binaryInfo
	for _, c := range Commands {
		path := filepath.Join(pb.Dir, c)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		bi, err := buildinfo.Read(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: reading its Go build info: %w", path, err)
		}
		bins[c] = b
		infos = append(infos, binaryInfo{path: "/usr/local/bin/" + c, data: b, info: bi})
	}
	binLayer, err := newLayer(binaryEntries(bins), created)
	if err != nil {
		return nil, fmt.Errorf("binaries layer: %w", err)
	}

	ts := created.Format(time.RFC3339)
	ports := map[string]struct{}{}
	for _, p := range exposedPorts {
		ports[p] = struct{}{}
	}
	cfg := v1.ConfigFile{
		Architecture: pb.Platform.Arch,
		OS:           pb.Platform.OS,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         strconv.Itoa(NonrootID) + ":" + strconv.Itoa(NonrootID),
			Entrypoint:   []string{"/usr/local/bin/" + Commands[0]},
			Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			WorkingDir:   "/home/nonroot",
			ExposedPorts: ports,
			Labels: map[string]string{
				"org.opencontainers.image.title":         imageTitle,
				"org.opencontainers.image.description":   imageDescription,
				"org.opencontainers.image.source":        sourceURL,
				"org.opencontainers.image.url":           sourceURL,
				"org.opencontainers.image.documentation": documentationURL,
				"org.opencontainers.image.licenses":      license,
				AnnotationVersion:                        o.Version,
				AnnotationRevision:                       o.Revision,
				AnnotationCreated:                        ts,
			},
		},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{base.diffID, binLayer.diffID}},
		History: []v1.History{
			{Created: v1.Time{Time: created}, CreatedBy: "ocimage: /etc/passwd, /etc/group, /etc/ssl/certs/ca-certificates.crt, /tmp, /home/nonroot"},
			{Created: v1.Time{Time: created}, CreatedBy: "ocimage: /usr/local/bin/" + Commands[0] + ", /usr/local/bin/" + Commands[1]},
		},
	}
	cfgBlob, err := jsonBlob(cfg, types.OCIConfigJSON)
	if err != nil {
		return nil, err
	}
	layerDesc := func(l *layer) v1.Descriptor {
		return v1.Descriptor{MediaType: types.OCILayer, Size: int64(len(l.gz)), Digest: l.digest}
	}
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        cfgBlob.desc,
		Layers:        []v1.Descriptor{layerDesc(base), layerDesc(binLayer)},
		Annotations: map[string]string{
			AnnotationCreated:  ts,
			AnnotationVersion:  o.Version,
			AnnotationRevision: o.Revision,
		},
	}
	manifestBlob, err := jsonBlob(manifest, types.OCIManifestSchema1)
	if err != nil {
		return nil, err
	}

	sbom, err := spdxDocument(sbomInput{
		version:  o.Version,
		platform: pb.Platform,
		manifest: manifestBlob.desc.Digest,
		created:  created,
		binaries: infos,
		caBundle: ca,
	})
	if err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	sbomBlob := blob{desc: v1.Descriptor{
		MediaType:   SBOMArtifactType,
		Size:        int64(len(sbom)),
		Digest:      sha256Of(sbom),
		Annotations: map[string]string{annotationTitle: fmt.Sprintf("%s-%s-%s-%s.spdx.json", imageTitle, o.Version, pb.Platform.OS, pb.Platform.Arch)},
	}, data: sbom}
	emptyBlob := blob{desc: v1.Descriptor{MediaType: emptyMediaType, Size: 2, Digest: sha256Of([]byte("{}")), Data: []byte("{}")}, data: []byte("{}")}
	subject := manifestBlob.desc // without the platform: a subject names the manifest only
	referrer := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMArtifactType,
		Config:        emptyBlob.desc,
		Layers:        []v1.Descriptor{sbomBlob.desc},
		Subject:       &subject,
		Annotations:   map[string]string{AnnotationCreated: ts},
	}
	referrerBlob, err := jsonBlob(referrer, types.OCIManifestSchema1)
	if err != nil {
		return nil, err
	}
	referrerDesc := referrerBlob.desc
	referrerDesc.ArtifactType = SBOMArtifactType

	imageDesc := manifestBlob.desc
	imageDesc.Platform = &v1.Platform{OS: pb.Platform.OS, Architecture: pb.Platform.Arch}
	emptyBlob.desc.Data = nil
	return &platformImage{
		manifest: imageDesc,
		sbom:     referrerDesc,
		blobs: []blob{
			{desc: layerDesc(base), data: base.gz},
			{desc: layerDesc(binLayer), data: binLayer.gz},
			cfgBlob, manifestBlob, sbomBlob, emptyBlob, referrerBlob,
		},
	}, nil
}

// jsonBlob marshals v, compactly, into a blob of media type mt.
func jsonBlob(v any, mt types.MediaType) (blob, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	return blob{desc: v1.Descriptor{MediaType: mt, Size: int64(len(b)), Digest: sha256Of(b)}, data: b}, nil
}

// layoutFile is the oci-layout file of the image layout specification.
const layoutFile = `{"imageLayoutVersion": "1.0.0"}` + "\n"

// writeLayout writes the layout into a temporary directory beside out, validates the image
// index (digests, sizes, diff IDs, configs, platforms) with go-containerregistry's reader, and
// replaces out with it.
func writeLayout(out string, blobs []blob, indexJSON []byte, imageIndex v1.Hash) (err error) {
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	p := layout.Path(tmp)
	written := map[v1.Hash]bool{}
	for _, b := range blobs {
		if written[b.desc.Digest] {
			continue
		}
		written[b.desc.Digest] = true
		if err := p.WriteBlob(b.desc.Digest, io.NopCloser(bytes.NewReader(b.data))); err != nil {
			return fmt.Errorf("writing blob %s: %w", b.desc.Digest, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "oci-layout"), []byte(layoutFile), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "index.json"), indexJSON, 0o644); err != nil {
		return err
	}

	lp, err := layout.FromPath(tmp)
	if err != nil {
		return fmt.Errorf("reading back the layout: %w", err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return fmt.Errorf("reading back the layout: %w", err)
	}
	idx, err := top.ImageIndex(imageIndex)
	if err != nil {
		return fmt.Errorf("reading back the image index: %w", err)
	}
	if err := validate.Index(idx); err != nil {
		return fmt.Errorf("the image index does not validate: %w", err)
	}

	if err := checkOut(out); err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
