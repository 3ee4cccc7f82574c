#!/usr/bin/env bash
# Builds CRI-O from the pinned github.com/cri-o/cri-o module in this directory, for the cluster
# tests that run the node on CRI-O (cluster.Options.Runtime): crio, pinns (C source in the
# module) and copyimg (CRI-O's own test tool, which loads the local test images into its
# containers/storage: CRI-O has no `ctr import`). Prints the output directory. conmon and runc come
# from Debian (`make deps`). The first build takes about 5 CPU minutes (measured with an empty Go
# build cache: 9.7 min niced beside other work on 2 cores); the Go build cache and the output
# directory make later runs instant.
set -euo pipefail
# A test tool, never shipped: built with the machine's own Go. seccomp needs cgo (libseccomp), as
# CRI-O builds it; no other build here uses cgo outside -race, so the product's toolchain would
# share no build-cache entries with it.
export GOTOOLCHAIN=local
unset CGO_ENABLED
here=$(cd "$(dirname "$0")" && pwd)
mod=github.com/cri-o/cri-o
version=$(awk -v m="$mod" '$1=="require" && $2==m {print $3}' "$here/go.mod")
out=${CRIO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/crio-$version}
# CRI-O's Makefile picks its tags from the machine (hack/*_tag.sh). Here, fixed: no ostree, the
# OpenPGP signature code in Go instead of gpgme, no btrfs or devicemapper graph drivers (their C
# headers are not installed, and the tests use overlay), seccomp from Debian's libseccomp-dev.
# No SELinux or AppArmor: the test node runs without both.
tags="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper seccomp"
# Current when built from this go.mod, go.sum and these tags: their content, not the files'
# time, which a fresh clone sets to now.
pins=$({ cat "$here/go.mod" "$here/go.sum"; echo "$tags"; } | sha256sum | cut -d' ' -f1)
current=true
for b in crio pinns copyimg; do
  if ! [ -x "$out/$b" ] || [ "$(cat "$out/$b.pins" 2>/dev/null)" != "$pins" ]; then current=false; fi
done
if ! $current; then
  missing=()
  command -v gcc >/dev/null || missing+=("gcc (apt-get install gcc libc6-dev)")
  pkg-config --exists libseccomp 2>/dev/null || missing+=("libseccomp (apt-get install pkg-config libseccomp-dev)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test/crio/build.sh: missing ${missing[*]}: run \`make deps\`" >&2
    exit 1
  fi
  echo "building CRI-O $version into $out (first time: several minutes)" >&2
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && go build -trimpath -tags "$tags" -ldflags "-s -w" -o "$tmp/" "$mod/cmd/crio" "$mod/test/copyimg")
  # pinns as its Makefile builds it (pinns/Makefile): static, from the module's C files.
  src=$(cd "$here" && go list -m -f '{{.Dir}}' "$mod")/pinns/src
  gcc -std=c99 -O3 -Wall -Werror -Wextra -static -o "$tmp/pinns" "$src"/*.c
  strip -s "$tmp/pinns"
  for b in crio pinns copyimg; do
    mv "$tmp/$b" "$out/$b"
    echo "$pins" >"$out/$b.pins"
  done
fi
echo "$out"
