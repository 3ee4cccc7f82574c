package ocimage

import (
	"crypto/sha1" //nolint:gosec // SPDX 2.3 requires a SHA1 checksum for every file; SHA256 is given too
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The SPDX 2.3 JSON document (https://spdx.github.io/spdx-spec/v2.3/), only the fields written.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string            `json:"name"`
	SPDXID                string            `json:"SPDXID"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	Comment               string            `json:"comment,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
}

type spdxFile struct {
	FileName         string         `json:"fileName"`
	SPDXID           string         `json:"SPDXID"`
	FileTypes        []string       `json:"fileTypes"`
	Checksums        []spdxChecksum `json:"checksums"`
	LicenseConcluded string         `json:"licenseConcluded"`
	CopyrightText    string         `json:"copyrightText"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// binaryInfo is one command of an image: its path in the image, its bytes and its build info.
type binaryInfo struct {
	path string
	data []byte
	info *debug.BuildInfo
}

// sbomInput is what one platform image's SBOM is made from.
type sbomInput struct {
	version  string
	platform Platform
	manifest v1.Hash // the image manifest's digest: the document's namespace and the image's checksum
	created  time.Time
	binaries []binaryInfo
	caBundle []byte
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxDocument describes one platform image from its commands' Go build info: the image, the
// main module at the release version, every dependency module with its version and go.sum hash,
// the Go standard library, and the files the image holds besides directories and the user
// database (the commands and the CA bundle). Deterministic: no random identifiers (the
// namespace is derived from the image's digest), sorted lists, created = the source date epoch.
func spdxDocument(in sbomInput) ([]byte, error) {
	plat := in.platform.OS + "-" + in.platform.Arch
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("%s-%s-%s", imageTitle, in.version, plat),
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s/%s-%s", sourceURL, in.version, in.manifest.Algorithm, in.manifest.Hex),
		CreationInfo: spdxCreationInfo{
			Created:  in.created.Format(time.RFC3339),
			Creators: []string{"Organization: emptyDir guard", "Tool: emptydir-guard-ocimage"},
		},
	}
	const imageID = "SPDXRef-Image"
	doc.Packages = append(doc.Packages, spdxPackage{
		Name:             imageTitle,
		SPDXID:           imageID,
		VersionInfo:      in.version,
		DownloadLocation: noAssertion,
		Checksums:        []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: in.manifest.Hex}},
		LicenseConcluded: noAssertion,
		LicenseDeclared:  license,
		CopyrightText:    noAssertion,
		Comment:          fmt.Sprintf("The OCI image for %s; its checksum is the image manifest's digest.", in.platform),
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  fmt.Sprintf("pkg:oci/%s@%s%%3A%s?arch=%s&tag=%s", imageTitle, in.manifest.Algorithm, in.manifest.Hex, in.platform.Arch, in.version),
		}},
		PrimaryPackagePurpose: "CONTAINER",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})

	// The modules of every command, each once: the main modules at the release version (the
	// build info says "(devel)" for a build from a work tree), the others at the version and
	// with the go.sum hash the build used (a replacement's where replaced).
	type module struct {
		path, version, sum string
		main               bool
	}
	modules := map[string]module{}
	goVersions := map[string]bool{}
	for _, b := range in.binaries {
		modules[b.info.Main.Path] = module{path: b.info.Main.Path, version: in.version, main: true}
		for _, d := range b.info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			if prev, ok := modules[d.Path]; ok && prev.main {
				continue
			}
			modules[d.Path] = module{path: d.Path, version: m.Version, sum: m.Sum}
		}
		goVersions[b.info.GoVersion] = true
	}
	ids := map[string]bool{imageID: true}
	newID := func(prefix, name string) string {
		id := prefix + strings.Trim(spdxIDUnsafe.ReplaceAllString(name, "-"), "-")
		for i := 2; ids[id]; i++ {
			id = fmt.Sprintf("%s%s-%d", prefix, strings.Trim(spdxIDUnsafe.ReplaceAllString(name, "-"), "-"), i)
		}
		ids[id] = true
		return id
	}
	var mainIDs, depIDs []string
	for _, path := range slices.Sorted(maps.Keys(modules)) {
		m := modules[path]
		p := spdxPackage{
			Name:             m.path,
			SPDXID:           newID("SPDXRef-Package-go-module-", m.path),
			VersionInfo:      m.version,
			DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion,
			LicenseDeclared:  noAssertion,
			CopyrightText:    noAssertion,
			ExternalRefs: []spdxExternalRef{{
				ReferenceCategory: "PACKAGE-MANAGER",
				ReferenceType:     "purl",
				ReferenceLocator:  goPURL(m.path, m.version),
			}},
			PrimaryPackagePurpose: "LIBRARY",
		}
		if m.main {
			p.DownloadLocation = sourceURL
			p.LicenseDeclared = license
			p.PrimaryPackagePurpose = "APPLICATION"
			mainIDs = append(mainIDs, p.SPDXID)
		} else {
			depIDs = append(depIDs, p.SPDXID)
		}
		sum, err := h1Checksum(m.sum)
		if err != nil {
			return nil, fmt.Errorf("module %s@%s: %w", m.path, m.version, err)
		}
		if sum != "" {
			p.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}}
			p.Comment = "The SHA256 checksum is the go.sum hash " + m.sum + " (the dirhash of the module's files), in hex."
		}
		doc.Packages = append(doc.Packages, p)
	}
	for _, gv := range slices.Sorted(maps.Keys(goVersions)) {
		v, _, _ := strings.Cut(gv, " ") // "go1.27.3 X:experiment" → go1.27.3
		p := spdxPackage{
			Name:             "stdlib",
			SPDXID:           newID("SPDXRef-Package-go-stdlib-", v),
			VersionInfo:      v,
			DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion,
			LicenseDeclared:  "BSD-3-Clause",
			CopyrightText:    noAssertion,
			Comment:          "The Go standard library and runtime the commands were built with (" + gv + ").",
			ExternalRefs: []spdxExternalRef{{
				ReferenceCategory: "PACKAGE-MANAGER",
				ReferenceType:     "purl",
				ReferenceLocator:  "pkg:golang/stdlib@" + strings.TrimPrefix(v, "go"),
			}},
			PrimaryPackagePurpose: "LIBRARY",
		}
		depIDs = append(depIDs, p.SPDXID)
		doc.Packages = append(doc.Packages, p)
	}
	for _, id := range mainIDs {
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", id})
		for _, dep := range depIDs {
			doc.Relationships = append(doc.Relationships, spdxRelationship{id, "DEPENDS_ON", dep})
		}
	}

	// The files: the commands (generated from the main module) and the CA bundle.
	files := []spdxFile{{
		FileName:         "/etc/ssl/certs/ca-certificates.crt",
		FileTypes:        []string{"TEXT"},
		Checksums:        fileChecksums(in.caBundle),
		LicenseConcluded: noAssertion,
		CopyrightText:    noAssertion,
		Comment:          "The CA certificates of the build machine's Debian ca-certificates package.",
	}}
	mainOf := map[string]string{}
	for _, b := range in.binaries {
		settings := []string{}
		for _, s := range b.info.Settings {
			settings = append(settings, s.Key+"="+s.Value)
		}
		files = append(files, spdxFile{
			FileName:         b.path,
			FileTypes:        []string{"BINARY"},
			Checksums:        fileChecksums(b.data),
			LicenseConcluded: noAssertion,
			CopyrightText:    noAssertion,
			Comment:          fmt.Sprintf("Go command %s built with %s (%s).", b.info.Path, b.info.GoVersion, strings.Join(settings, " ")),
		})
		mainOf[b.path] = b.info.Main.Path
	}
	slices.SortFunc(files, func(a, b spdxFile) int { return strings.Compare(a.FileName, b.FileName) })
	for i := range files {
		files[i].SPDXID = newID("SPDXRef-File-", files[i].FileName)
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", files[i].SPDXID})
		if mainPath, ok := mainOf[files[i].FileName]; ok {
			for _, p := range doc.Packages {
				if p.Name == mainPath && p.PrimaryPackagePurpose == "APPLICATION" {
					doc.Relationships = append(doc.Relationships, spdxRelationship{files[i].SPDXID, "GENERATED_FROM", p.SPDXID})
				}
			}
		}
	}
	doc.Files = files

	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// h1Checksum turns a go.sum hash "h1:<base64 SHA-256>" into the hex SHA-256 an SPDX checksum
// holds; "" for none.
func h1Checksum(sum string) (string, error) {
	if sum == "" {
		return "", nil
	}
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", fmt.Errorf("go.sum hash %q is not an h1 hash", sum)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("go.sum hash %q: not a base64 SHA-256", sum)
	}
	return hex.EncodeToString(raw), nil
}

// goPURL is the package URL of a Go module (purl type golang); "+" in a version is encoded.
func goPURL(path, version string) string {
	if version == "" {
		return "pkg:golang/" + path
	}
	return "pkg:golang/" + path + "@" + strings.ReplaceAll(version, "+", "%2B")
}

func fileChecksums(b []byte) []spdxChecksum {
	s1 := sha1.Sum(b) //nolint:gosec // SPDX 2.3 requires SHA1 for files
	s256 := sha256.Sum256(b)
	return []spdxChecksum{
		{Algorithm: "SHA1", ChecksumValue: hex.EncodeToString(s1[:])},
		{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(s256[:])},
	}
}
