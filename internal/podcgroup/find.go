package podcgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RootAuto, as Config.Root, asks the caller to find the kubelet's --cgroup-root with Find on a
// pod it knows (the exporter's own) before opening a Locator: Open refuses it.
const RootAuto = "auto"

// Search bounds: a kubelet's pod cgroup sits a few levels below the hierarchy's root (kind:
// four, /kubelet.slice/…/kubelet-kubepods-burstable-pod<uid>.slice); a node has a few thousand
// cgroups.
const (
	findMaxDepth       = 8
	findMaxDirectories = 100_000
)

// Found is a pod's cgroup as Find found it, with the layout that put it there.
type Found struct {
	Pod
	// Root is the kubelet's --cgroup-root in its cgroupfs form ("/", "/kubelet").
	Root string
}

// NewLocatorAt is Open for a hierarchy already known: version v mounted at base (the memory
// controller's directory for v1). For callers that detected it themselves, and fake trees in tests.
func NewLocatorAt(cfg Config, v Version, base string) (*Locator, error) {
	return newLocator(cfg, v, base)
}

// Find searches the hierarchy, breadth first and bounded, for the cgroup of pod uid of QoS class
// qos in either layout and whatever the root, and tells the driver and --cgroup-root that put it
// there. Only names the kubelet gives decide (the pod's directory, its parents up to the root):
// a directory whose path no root and driver would make, or one below another pod's cgroup, is
// passed over.
func (l *Locator) Find(uid, qos string) (Found, error) {
	if _, err := podCgroupName(nil, qos, uid); err != nil {
		return Found{}, fail(ReasonInvalid, err)
	}
	cgroupfsName := "pod" + uid
	systemdSuffix := "-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	var found []Found
	level, seen := []string{""}, 0
	for depth := 0; depth < findMaxDepth && len(level) > 0; depth++ {
		var next []string
		for _, rel := range level {
			entries, err := os.ReadDir(filepath.Join(l.base, rel))
			if err != nil {
				if rel == "" {
					return Found{}, fail(ReasonUnreadable, err)
				}
				continue // a cgroup removed meanwhile, or one this process may not read
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				if seen++; seen > findMaxDirectories {
					return Found{}, fail(ReasonNotFound, fmt.Errorf("no cgroup of pod %s among the first %d directories below %s: %w", uid, findMaxDirectories, l.base, fs.ErrNotExist))
				}
				child := filepath.Join(rel, e.Name())
				var f Found
				var ok bool
				switch name := e.Name(); {
				case name == cgroupfsName:
					f, ok = l.derive(DriverCgroupfs, strings.Split(filepath.ToSlash(child), "/"), uid, qos)
				case strings.HasSuffix(name, systemdSuffix):
					f, ok = l.derive(DriverSystemd, systemdComponents(name), uid, qos)
				default:
					next = append(next, child)
					continue
				}
				// The path must be the one the derived root and driver make, every parent included.
				if ok && f.Dir == filepath.Join(l.base, child) {
					found = append(found, f)
				}
			}
		}
		level = next
	}
	switch len(found) {
	case 0:
		return Found{}, fail(ReasonNotFound, fmt.Errorf("no cgroup of pod %s (%s) within %d levels of %s: %w", uid, qos, findMaxDepth, l.base, fs.ErrNotExist))
	case 1:
		return found[0], nil
	default:
		return Found{}, fail(ReasonAmbiguous, fmt.Errorf("pod %s has cgroups at %s and %s", uid, found[0].Dir, found[1].Dir))
	}
}

// derive reads the root from the components of a pod cgroup's name (for the systemd driver,
// of its slice's name), as the kubelet makes them: root…, kubepods, the QoS class (not for
// Guaranteed), pod<uid>; false when they are not that.
func (l *Locator) derive(d Driver, parts []string, uid, qos string) (Found, bool) {
	tail := podParts(qos, uid)
	if len(parts) < len(tail) {
		return Found{}, false
	}
	for i, p := range tail {
		if parts[len(parts)-len(tail)+i] != p {
			return Found{}, false
		}
	}
	rootParts := parts[:len(parts)-len(tail)]
	// A root holding kubepods is a cgroup below some pod's: made by a privileged tenant, never
	// by the kubelet.
	if slices.Contains(rootParts, "kubepods") {
		return Found{}, false
	}
	root := "/" + strings.Join(rootParts, "/")
	if _, err := parseRoot(root); err != nil {
		return Found{}, false
	}
	f := Found{Root: root, Pod: Pod{Driver: d, Version: l.version}}
	name, _ := podCgroupName(f.rootParts(), qos, uid)
	f.Dir = filepath.Join(l.base, filepath.FromSlash(layoutPath(d, name)))
	return f, true
}

// podParts are the last components of a pod cgroup's name, below the root.
func podParts(qos, uid string) []string {
	name, _ := podCgroupName(nil, qos, uid)
	return name
}

func (f Found) rootParts() []string {
	parts, _ := parseRoot(f.Root)
	return parts
}

// systemdComponents undoes CgroupName.ToSystemd for a pod's slice name: the components joined
// by "-", each with "-" written as "_".
func systemdComponents(slice string) []string {
	parts := strings.Split(strings.TrimSuffix(slice, ".slice"), "-")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "_", "-")
	}
	return parts
}

// IsNotFound reports whether err says a pod has no cgroup where it was looked for.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == ReasonNotFound
}
