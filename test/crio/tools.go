//go:build tools

// Package crio only pins CRI-O; build.sh builds its daemon, its image copier and pinns.
package crio

import (
	_ "github.com/cri-o/cri-o/cmd/crio"
	_ "github.com/cri-o/cri-o/test/copyimg"
)
