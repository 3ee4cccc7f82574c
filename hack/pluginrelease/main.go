// Command pluginrelease packages the kubectl-emptydir builds of `make plugin-release` for a
// release (internal/krew): a tar.gz per platform, SHA256SUMS and the krew manifest
// emptydir.yaml, then validates the manifest against the archives.
//
//	go run ./hack/pluginrelease --version v1.2.3 --builds bin/plugin --out bin/release/plugin \
//	  --platforms 'linux/amd64 darwin/arm64' --source-date-epoch 1700000000 --url-base https://...
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/krew"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "pluginrelease: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("pluginrelease", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, vX.Y.Z")
	builds := fs.String("builds", "", "directory with <os>_<arch>/kubectl-emptydir[.exe]")
	out := fs.String("out", "", "directory to write the archives, SHA256SUMS and emptydir.yaml to")
	platforms := fs.String("platforms", "", "space-separated os/arch")
	epoch := fs.String("source-date-epoch", "", "every timestamp in the archives (Unix seconds): the commit's time")
	urlBase := fs.String("url-base", "", "where the release's assets are downloaded from")
	license := fs.String("license", "LICENSE", "the LICENSE file put in each archive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *builds == "" || *out == "" || *platforms == "" || *urlBase == "" {
		return fmt.Errorf("--version, --builds, --out, --platforms and --url-base are required")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--source-date-epoch: %w", err)
	}
	mtime := time.Unix(secs, 0).UTC()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	list := strings.Fields(*platforms)
	sums := map[string]string{}
	var sumFile bytes.Buffer
	for _, p := range list {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q is not os/arch", p)
		}
		bin := krew.Binary(goos)
		name := krew.ArchiveName(*version, goos, goarch)
		f, err := os.Create(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		err = krew.WriteArchive(f, [][2]string{{bin, filepath.Join(*builds, goos+"_"+goarch, bin)}, {"LICENSE", *license}}, mtime)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if sums[p], err = krew.SumFile(filepath.Join(*out, name)); err != nil {
			return err
		}
		fmt.Fprintf(&sumFile, "%s  %s\n", sums[p], name)
	}
	if err := os.WriteFile(filepath.Join(*out, "SHA256SUMS"), sumFile.Bytes(), 0o644); err != nil {
		return err
	}
	manifest, err := krew.NewManifest(*version, *urlBase, list, sums).Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(*out, krew.PluginName+".yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	if err := krew.Validate(path, *out); err != nil {
		return fmt.Errorf("the manifest it wrote: %w", err)
	}
	fmt.Println(path)
	return nil
}
