// Command ocirelease publishes the image layout `make image` writes to a registry (push) and
// checks a published image is a release (check): `make push-image` and `make verify-release`
// run it, in the release workflow as in the real-cluster test.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/emptydir-guard/emptydir-guard/tools/ocimage"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ocimage.RunRelease(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
