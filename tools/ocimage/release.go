package ocimage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// Pushed names what Push published.
type Pushed struct {
	Tag   name.Tag    // the index's tag: the layout's org.opencontainers.image.ref.name
	Index name.Digest // the image index, by digest (what a signature names)
	SBOMs []name.Digest
}

// Push publishes an image layout written by Build to repo: the image index under the tag the
// layout gives it (the version), then every SBOM referrer by digest. A registry without the
// Referrers API gets the OCI 1.1 referrers tag (sha256-<digest>) that clients fall back to.
// Nothing is pushed unless the layout holds exactly one tagged image index.
func Push(ctx context.Context, dir string, repo name.Repository, opts ...remote.Option) (*Pushed, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the image layout %s: %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading the image layout %s: %w", dir, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the image layout %s: %w", dir, err)
	}
	var index *v1.Descriptor
	var sboms []v1.Descriptor
	for i, d := range im.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex && d.Annotations[AnnotationRefName] != "":
			if index != nil {
				return nil, fmt.Errorf("the image layout %s tags two image indexes (%s and %s): push one", dir, index.Digest, d.Digest)
			}
			index = &im.Manifests[i]
		case d.ArtifactType == SBOMArtifactType:
			sboms = append(sboms, d)
		default:
			return nil, fmt.Errorf("the image layout %s holds %s %s, neither the tagged image index nor an SBOM: not written by ocimage", dir, d.MediaType, d.Digest)
		}
	}
	if index == nil {
		return nil, fmt.Errorf("the image layout %s holds no tagged image index", dir)
	}
	refName := index.Annotations[AnnotationRefName]
	if _, err := name.NewTag(repo.String()+":"+refName, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("the layout's tag: %w", err)
	}
	tag := repo.Tag(refName) // from repo: keeps its registry's scheme (--plain-http)
	idx, err := top.ImageIndex(index.Digest)
	if err != nil {
		return nil, err
	}
	opts = append(slices.Clone(opts), remote.WithContext(ctx), remote.WithReferrersTagFallback(true))
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return nil, fmt.Errorf("pushing the image index to %s: %w", tag, err)
	}
	out := &Pushed{Tag: tag, Index: repo.Digest(index.Digest.String())}
	for _, d := range sboms {
		img, err := top.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		ref := repo.Digest(d.Digest.String())
		if err := remote.Write(ref, img, opts...); err != nil {
			return nil, fmt.Errorf("pushing the SBOM %s: %w", ref, err)
		}
		out.SBOMs = append(out.SBOMs, ref)
	}
	return out, nil
}

// Check reads a published image as a node and a user would, and fails unless it is a release:
// an OCI image index with an image for every platform in want (its config saying the same
// os/architecture, every blob present), each with an SPDX SBOM referrer. It returns the index's
// digest. Every problem found is reported, not just the first.
func Check(ctx context.Context, ref name.Reference, want []Platform, opts ...remote.Option) (name.Digest, error) {
	opts = append(slices.Clone(opts), remote.WithContext(ctx))
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%s: %w", ref, err)
	}
	digest := ref.Context().Digest(desc.Digest.String())
	if desc.MediaType != types.OCIImageIndex && desc.MediaType != types.DockerManifestList {
		return digest, fmt.Errorf("%s is a %s, not an image index: nodes of other architectures could not run it", ref, desc.MediaType)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return digest, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return digest, err
	}
	var errs []error
	for _, p := range want {
		i := slices.IndexFunc(im.Manifests, func(d v1.Descriptor) bool {
			return d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Arch
		})
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s has no image for %s (it has %s)", ref, p, platformsOf(im)))
			continue
		}
		if err := checkPlatformImage(ref, idx, im.Manifests[i], p, opts); err != nil {
			errs = append(errs, err)
		}
	}
	return digest, errors.Join(errs...)
}

func checkPlatformImage(ref name.Reference, idx v1.ImageIndex, d v1.Descriptor, p Platform, opts []remote.Option) error {
	img, err := idx.Image(d.Digest)
	if err != nil {
		return fmt.Errorf("%s: the %s image %s: %w", ref, p, d.Digest, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("%s: the %s image's config: %w", ref, p, err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch {
		return fmt.Errorf("%s: the image listed for %s is built for %s/%s", ref, p, cfg.OS, cfg.Architecture)
	}
	// Fast: every blob is there with its size and digest as listed, without reading the layers.
	if err := validate.Image(img, validate.Fast); err != nil {
		return fmt.Errorf("%s: the %s image does not validate: %w", ref, p, err)
	}
	refs, err := remote.Referrers(ref.Context().Digest(d.Digest.String()), append(slices.Clone(opts), remote.WithFilter("artifactType", SBOMArtifactType))...)
	if err != nil {
		return fmt.Errorf("%s: the %s image's referrers: %w", ref, p, err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(rm.Manifests, func(r v1.Descriptor) bool { return r.ArtifactType == SBOMArtifactType }) {
		return fmt.Errorf("%s: the %s image %s has no SBOM (%s referrer)", ref, p, d.Digest, SBOMArtifactType)
	}
	return nil
}

func platformsOf(im *v1.IndexManifest) string {
	var ps []string
	for _, d := range im.Manifests {
		if d.Platform != nil {
			ps = append(ps, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}
