package ocimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NonrootID is the uid and gid the image runs as (distroless's nonroot).
const NonrootID = 65532

// fileEntry is one entry of a layer: a directory when its name ends in "/".
type fileEntry struct {
	name     string // relative to the root, no leading "/"
	mode     int64  // permission bits, sticky bit included
	uid, gid int
	data     []byte
}

// layer is a gzipped tar layer with its digests.
type layer struct {
	gz     []byte
	digest v1.Hash // of gz
	diffID v1.Hash // of the uncompressed tar
}

// baseEntries are the base of every image: the users, the CA bundle, /tmp and nonroot's home.
// No shell, no package database, nothing else.
func baseEntries(caBundle []byte) []fileEntry {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonrootID, NonrootID)
	group := "root:x:0:\n" + fmt.Sprintf("nonroot:x:%d:\n", NonrootID)
	return []fileEntry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caBundle},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonrootID, gid: NonrootID},
		{name: "tmp/", mode: 0o1777},
	}
}

// binaryEntries puts the commands at /usr/local/bin; bins maps a command to its bytes.
func binaryEntries(bins map[string][]byte) []fileEntry {
	entries := []fileEntry{
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
	}
	for name, b := range bins {
		entries = append(entries, fileEntry{name: "usr/local/bin/" + name, mode: 0o755, data: b})
	}
	return entries
}

// newLayer writes entries as a tar, sorted by name, every entry owned by its uid/gid with no
// user or group name, every time the source date epoch, in the USTAR format (no PAX records:
// no access or change times), gzipped with neither a name nor a time in the gzip header. The
// same entries and time give the same bytes.
func newLayer(entries []fileEntry, mtime time.Time) (*layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b fileEntry) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(entries); i++ {
		if entries[i].name == entries[i-1].name {
			return nil, fmt.Errorf("layer entry %s twice", entries[i].name)
		}
	}
	var gzBuf bytes.Buffer
	gzHash, tarHash := sha256.New(), sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(&gzBuf, gzHash), gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, tarHash))
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &layer{
		gz:     gzBuf.Bytes(),
		digest: sha256Hash(gzHash.Sum(nil)),
		diffID: sha256Hash(tarHash.Sum(nil)),
	}, nil
}

func sha256Hash(sum []byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum)}
}

func sha256Of(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return sha256Hash(sum[:])
}
