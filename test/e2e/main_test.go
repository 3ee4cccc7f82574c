// Package e2e runs the project against a real single-node cluster (test/cluster). The tests
// run only with EMPTYDIR_GUARD_CLUSTER=1: a plain `go test ./...` must stay fast and must
// not need root, while `make test-cluster` must fail loudly when a part is missing.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"k8s.io/client-go/kubernetes"
)

const enableEnv = "EMPTYDIR_GUARD_CLUSTER"

var (
	clusterEnabled = os.Getenv(enableEnv) == "1"

	// rootCtx is cancelled on SIGINT/SIGTERM so a Start in progress aborts and cleans up.
	rootCtx, cancelRoot = context.WithCancel(context.Background())

	sharedMu      sync.Mutex
	sharedC       *cluster.Cluster
	sharedErr     error
	sharedStopped bool
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !clusterEnabled {
		fmt.Printf("e2e: %s is not 1: real-cluster tests are SKIPPED (run `make test-cluster` as root)\n", enableEnv)
	}
	// Without this a closed stdout pipe (`go test ... | head`) kills the binary with SIGPIPE
	// before it can stop the cluster; with it, writes just fail.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigc
		fmt.Fprintf(os.Stderr, "e2e: got %v, stopping the shared cluster\n", s)
		stopShared()
		os.Exit(130)
	}()
	// go test's -timeout panics the binary without running deferred code; stop the cluster
	// shortly before that so an overrun does not leave a cluster behind.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			time.AfterFunc(d-time.Minute, func() {
				fmt.Fprintln(os.Stderr, "e2e: test timeout is near, stopping the shared cluster")
				stopShared()
			})
		}
	}
	code := m.Run()
	stopShared()
	testbin.Cleanup()
	os.Exit(code)
}

func stopShared() {
	cancelRoot()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sharedStopped = true
	if sharedC != nil {
		if err := sharedC.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: cluster stop: %v\n", err)
		}
		sharedC = nil
	}
}

// requireCluster skips the test unless real-cluster tests are enabled.
func requireCluster(t testing.TB) {
	t.Helper()
	if !clusterEnabled {
		t.Skipf("real-cluster test: set %s=1 (as root, with K8S_BIN_DIR from `make k8s-binaries`) to run it", enableEnv)
	}
}

// fastClient is a client of c allowed qps requests/s (bursts of burst), for the tests that
// play kubelet for hundreds of pods: the cluster's own client is limited to 50 requests/s.
func fastClient(t testing.TB, c *cluster.Cluster, qps float32, burst int) *kubernetes.Clientset {
	t.Helper()
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = qps, burst
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// sharedCluster returns the one cluster all tests share (framework.SharedClusterOptions),
// starting it on first use. With the tests enabled a missing part
// fails the test instead of skipping it.
func sharedCluster(t testing.TB) *cluster.Cluster {
	t.Helper()
	requireCluster(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedStopped {
		t.Fatal("shared cluster already stopped (interrupted or timing out)")
	}
	if sharedC == nil && sharedErr == nil {
		logger := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
		ctx, cancel := context.WithTimeout(rootCtx, 5*time.Minute)
		sharedC, sharedErr = cluster.Start(ctx, framework.SharedClusterOptions(logger.Printf))
		cancel()
	}
	if sharedErr != nil {
		t.Fatalf("shared cluster: %v", sharedErr)
	}
	return sharedC
}

// ownCluster starts a cluster of the test's own (framework.StartCluster). TestMain stops only
// the shared cluster on SIGINT/SIGTERM; this one is stopped then too (Stop is idempotent and
// safe concurrently; what an exit cuts short, CleanupStale finishes).
func ownCluster(ctx context.Context, t testing.TB, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	c := framework.StartCluster(ctx, t, opts)
	go func() {
		<-ctx.Done()
		if rootCtx.Err() != nil {
			_ = c.Stop()
		}
	}()
	return c
}
