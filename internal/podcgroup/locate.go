package podcgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Config says where the node's cgroups are and how the kubelet names them.
type Config struct {
	// Mount is the host's cgroup mount as this process sees it (the DaemonSet mounts the
	// host's /sys/fs/cgroup read-only): a cgroup2 filesystem (v2), or a directory holding the
	// v1 hierarchies (memory/ is the one read).
	Mount string
	// Root is the kubelet's --cgroup-root, in the cgroupfs form whatever the driver.
	Root string
	// Driver is the kubelet's --cgroup-driver, or DriverAuto.
	Driver Driver
}

// DefaultConfig is the kubelet's defaults, with the driver probed.
func DefaultConfig() Config {
	return Config{Mount: "/sys/fs/cgroup", Root: "/", Driver: DriverAuto}
}

// Version is the cgroup version of the hierarchy the counters are read from.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

// Locator finds pods' cgroups on one node.
type Locator struct {
	version Version
	// base is the hierarchy the pods' directories are below: Mount for v2, Mount/memory for v1.
	base string
	// root is the kubelet's cgroup root, parsed; replaced by Retarget.
	root    atomic.Pointer[[]string]
	drivers []Driver
}

// Open detects the cgroup version of cfg.Mount by its filesystem's magic number (statfs)
// and checks cfg; it reads nothing of any pod.
func Open(cfg Config) (*Locator, error) {
	v, base, err := detectHierarchy(cfg.Mount)
	if err != nil {
		return nil, err
	}
	return newLocator(cfg, v, base)
}

// Validate checks Root and Driver without touching the system.
func (c Config) Validate() error {
	if _, err := parseRoot(c.Root); err != nil {
		return err
	}
	switch c.Driver {
	case DriverCgroupfs, DriverSystemd, DriverAuto, "":
		return nil
	default:
		return fmt.Errorf("cgroup driver %q is none of cgroupfs, systemd, auto", c.Driver)
	}
}

func newLocator(cfg Config, v Version, base string) (*Locator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root, _ := parseRoot(cfg.Root)
	l := &Locator{version: v, base: base}
	l.root.Store(&root)
	if cfg.Driver == DriverCgroupfs || cfg.Driver == DriverSystemd {
		l.drivers = []Driver{cfg.Driver}
	} else {
		l.drivers = []Driver{DriverCgroupfs, DriverSystemd}
	}
	return l, nil
}

// Retarget makes the Locator look for pods below another cgroup root (Config.Root's form, not
// RootAuto): with --cgroup.root=auto the exporter follows the root calibration finds, which a
// kubelet reconfigured on the node moves. Locations in use are unaffected; bad input changes
// nothing.
func (l *Locator) Retarget(root string) error {
	parts, err := parseRoot(root)
	if err != nil {
		return err
	}
	l.root.Store(&parts)
	return nil
}

// Root is the cgroup root the Locator looks below, in Config.Root's form.
func (l *Locator) Root() string { return "/" + strings.Join(*l.root.Load(), "/") }

// Version is the cgroup version the Locator reads.
func (l *Locator) Version() Version { return l.version }

// Pod is a pod's cgroup, found.
type Pod struct {
	// Dir is the pod's cgroup directory in the hierarchy read (v1: memory's).
	Dir     string
	Driver  Driver
	Version Version
}

// Locate finds the cgroup of the pod with the given UID (the kubelet's: a static pod's is its
// config hash, not its mirror pod's UID) and QoS class (status.qosClass). An error is an
// *Error: ReasonInvalid, ReasonNotFound, ReasonAmbiguous or ReasonUnreadable.
func (l *Locator) Locate(uid, qos string) (Pod, error) {
	name, err := podCgroupName(*l.root.Load(), qos, uid)
	if err != nil {
		return Pod{}, fail(ReasonInvalid, err)
	}
	var found []Pod
	var tried []string
	for _, d := range l.drivers {
		dir := filepath.Join(l.base, filepath.FromSlash(layoutPath(d, name)))
		tried = append(tried, dir)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return Pod{}, fail(ReasonUnreadable, err)
		case !fi.IsDir():
			return Pod{}, fail(ReasonUnreadable, fmt.Errorf("%s is no directory", dir))
		}
		found = append(found, Pod{Dir: dir, Driver: d, Version: l.version})
	}
	switch len(found) {
	case 0:
		return Pod{}, fail(ReasonNotFound, fmt.Errorf("no cgroup of pod %s at %v: %w", uid, tried, fs.ErrNotExist))
	case 1:
		return found[0], nil
	default:
		return Pod{}, fail(ReasonAmbiguous, fmt.Errorf("pod %s has a cgroup in both layouts: %v", uid, tried))
	}
}

// Mark locates the pod and reads its Snapshot: what the exporter's change signal calls once
// per pod and cycle (two or three stats and two small reads).
func (l *Locator) Mark(uid, qos string) (Snapshot, error) {
	p, err := l.Locate(uid, qos)
	if err != nil {
		return Snapshot{}, err
	}
	return p.Read()
}
