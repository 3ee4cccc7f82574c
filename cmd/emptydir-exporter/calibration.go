package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/emptydir-guard/emptydir-guard/exporter/calibrate"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// calibrationConfig is who the exporter is, for the calibration of the node's layout on its
// own pod (package calibrate).
type calibrationConfig struct {
	// dir is where an emptyDir of the exporter's own pod is mounted (--calibration.dir).
	dir                        string
	podName, podNamespace, uid string
}

func addCalibrationFlags(app *kingpin.Application, c *calibrationConfig) {
	app.Flag("calibration.dir", "Where an emptyDir of the exporter's own pod is mounted: with --pod.*, the exporter checks its layout settings on it at start and every "+calibrate.Interval.String()+"; empty: no check.").
		StringVar(&c.dir)
	app.Flag("pod.name", "The exporter's own pod (set it from the downward API's metadata.name), for --calibration.dir.").
		Envar("POD_NAME").StringVar(&c.podName)
	app.Flag("pod.namespace", "The exporter's own pod's namespace (downward API metadata.namespace), for --calibration.dir.").
		Envar("POD_NAMESPACE").StringVar(&c.podNamespace)
	app.Flag("pod.uid", "The exporter's own pod's UID (downward API metadata.uid), for --calibration.dir.").
		Envar("POD_UID").StringVar(&c.uid)
}

// ownPodWait bounds how long the start waits for the kubelet to write the exporter's own
// container ID into its pod's status, which it does just after starting the container.
const ownPodWait = 30 * time.Second

// newCalibrator calibrates once, before the change signal and the open-files count open the
// cgroups: a --cgroup.root of auto takes the root found on the exporter's own pod ("/" where
// none is).
func newCalibrator(ctx context.Context, cfg *config, client kubernetes.Interface, logger *slog.Logger) *calibrate.Calibrator {
	check := func() calibrate.Result { return calibrate.SkipAll(calibrate.SkipSourceKubelet) }
	if cfg.source == sourceFilesystem {
		own, err := ownPod(ctx, client, cfg.calibration)
		switch {
		case err != nil && cfg.calibration.dir != "":
			logger.Warn("the exporter cannot check its settings of the node's layout on its own pod", "err", err)
		case err != nil:
			logger.Info("no --calibration.dir: the settings of the node's layout are not checked")
		}
		s := calibrate.Settings{KubeletRootDir: cfg.fs.KubeletRootDir}
		if cfg.exporter.MeasureEphemeralStorage {
			s.PodLogsDir, s.Layers = cfg.fs.PodLogsDir, cfg.fs.Layers
		}
		if cfg.useChangeSignal() || cfg.useOpenFiles() {
			cg := cfg.cgroup
			s.Cgroup = &cg
		}
		check = func() calibrate.Result { return calibrate.Check(own, s) }
	}
	if cfg.cgroup.Root == podcgroup.RootAuto {
		cfg.autoRoot = &rootFollower{logger: logger}
		checkOnly := check
		check = func() calibrate.Result {
			r := checkOnly()
			cfg.autoRoot.found(r.Layout.CgroupRoot)
			return r
		}
	}
	c := calibrate.New(cfg.exporter.NodeName, check, logger)
	c.Calibrate()
	if cfg.autoRoot != nil {
		cfg.cgroup.Root = cfg.autoRoot.current()
		if cfg.cgroup.Root == "" {
			cfg.cgroup.Root = "/"
			if cfg.useChangeSignal() || cfg.useOpenFiles() {
				logger.Warn("--cgroup.root=auto: the exporter's own pod cgroup was not found; taking the root / until calibration finds it")
			}
		}
	}
	return c
}

// retargeter is a locator of pod cgroups whose root can be moved (podcgroup.Locator).
type retargeter interface{ Retarget(root string) error }

// rootFollower keeps the pod cgroup locators of --cgroup.root=auto on the root calibration last
// found on the exporter's own pod: at start, and every calibration after it, so a kubelet
// reconfigured on a running node, or an own pod cgroup found only later, is followed without a
// restart. A calibration that finds none leaves the root as it is.
type rootFollower struct {
	logger  *slog.Logger
	mu      sync.Mutex
	root    string
	targets []retargeter
}

// found takes root, the root calibration found ("" for none).
func (f *rootFollower) found(root string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if root == "" || root == f.root {
		return
	}
	if f.root != "" {
		f.logger.Info("--cgroup.root=auto: the kubelet's cgroup root moved; following it", "from", f.root, "to", root)
	}
	f.root = root
	for _, t := range f.targets {
		if err := t.Retarget(root); err != nil {
			f.logger.Warn("--cgroup.root=auto: cannot look below the root found", "root", root, "err", err)
		}
	}
}

// current is the root last found, "" before one is.
func (f *rootFollower) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.root
}

// follow keeps t on the roots found from now on; nil f (a root given by flag) does nothing.
func (f *rootFollower) follow(t retargeter) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = append(f.targets, t)
}

// ownPod reads the exporter's own pod; nil without a --calibration.dir or an identity.
func ownPod(ctx context.Context, client kubernetes.Interface, c calibrationConfig) (*calibrate.Pod, error) {
	if c.dir == "" || c.podName == "" || c.podNamespace == "" || c.uid == "" {
		return nil, fmt.Errorf("--calibration.dir, --pod.name, --pod.namespace and --pod.uid are needed (%q, %q, %q, %q)", c.dir, c.podName, c.podNamespace, c.uid)
	}
	ctx, cancel := context.WithTimeout(ctx, ownPodWait)
	defer cancel()
	var last error
	for {
		// list and watch are all the exporter's RBAC grants on pods.
		pods, err := client.CoreV1().Pods(c.podNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", c.podName).String()})
		switch {
		case err != nil:
			last = fmt.Errorf("reading the exporter's own pod %s/%s: %w", c.podNamespace, c.podName, err)
		case len(pods.Items) != 1 || string(pods.Items[0].UID) != c.uid:
			return nil, fmt.Errorf("the exporter's own pod %s/%s (uid %s) is not on the API server", c.podNamespace, c.podName, c.uid)
		default:
			p, err := calibrate.OwnPod(&pods.Items[0], c.dir)
			if !errors.Is(err, calibrate.ErrStatusPending) {
				return p, err
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, last
		case <-time.After(2 * time.Second):
		}
	}
}
