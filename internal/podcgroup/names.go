package podcgroup

import (
	"fmt"
	"path"
	"strings"
)

// Driver is the kubelet's --cgroup-driver: how it turns a cgroup's name into a directory.
type Driver string

const (
	DriverCgroupfs Driver = "cgroupfs"
	DriverSystemd  Driver = "systemd"
	// DriverAuto looks for the pod in both layouts, and takes the one that has it.
	DriverAuto Driver = "auto"
)

// QoS classes as the API server sets status.qosClass.
const (
	QOSGuaranteed = "Guaranteed"
	QOSBurstable  = "Burstable"
	QOSBestEffort = "BestEffort"
)

// podCgroupName is the kubelet's internal name of a pod's cgroup (pkg/kubelet/cm, v1.37):
// --cgroup-root's components (ParseCgroupfsToCgroupName), "kubepods"
// (defaultNodeAllocatableCgroupName, added by NewContainerManager with --cgroups-per-qos),
// the QoS class in lower case for Burstable and BestEffort only (qosContainerManagerImpl.Start:
// Guaranteed pods sit directly under kubepods), and "pod"+UID (GetPodCgroupNameSuffix,
// podContainerManagerImpl.GetPodContainerName).
func podCgroupName(root []string, qos, uid string) ([]string, error) {
	if !validUID(uid) {
		return nil, fmt.Errorf("pod UID %q cannot name a cgroup", uid)
	}
	name := append(append([]string{}, root...), "kubepods")
	switch qos {
	case QOSGuaranteed:
	case QOSBurstable, QOSBestEffort:
		name = append(name, strings.ToLower(qos))
	default:
		return nil, fmt.Errorf("QoS class %q of pod %s is none of the kubelet's", qos, uid)
	}
	return append(name, "pod"+uid), nil
}

// validUID accepts what the API server (a UUID) and the kubelet (a static pod's hex hash) use
// as UIDs, so that nothing can climb out of the QoS cgroup.
func validUID(uid string) bool {
	if uid == "" || len(uid) > 128 {
		return false
	}
	for _, c := range uid {
		ok := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// parseRoot splits --cgroup-root, given in the cgroupfs form whatever the driver
// (ParseCgroupfsToCgroupName; NewContainerManager validates it so), into components.
func parseRoot(root string) ([]string, error) {
	if root == "" || root[0] != '/' {
		return nil, fmt.Errorf("cgroup root %q is not an absolute cgroupfs path", root)
	}
	if root == "/" {
		return nil, nil
	}
	parts := strings.Split(strings.TrimPrefix(root, "/"), "/")
	for _, p := range parts {
		// The kubelet refuses "_" in a component (NewCgroupName): the systemd form maps "-" to it.
		if p == "" || p == "." || p == ".." || strings.Contains(p, "_") {
			return nil, fmt.Errorf("cgroup root %q has a component the kubelet refuses: %q", root, p)
		}
	}
	return parts, nil
}

// layoutPath is where driver d puts the cgroup named name, below a hierarchy's mount.
func layoutPath(d Driver, name []string) string {
	if d == DriverSystemd {
		return systemdPath(name)
	}
	// CgroupName.ToCgroupfs.
	return "/" + path.Join(name...)
}

// systemdPath is CgroupName.ToSystemd: each component with "-" as "_", joined by "-" into one
// slice name, expanded as systemd nests slices (ExpandSlice of opencontainers/cgroups):
// {kubepods, burstable, pod1-2} is
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
func systemdPath(name []string) string {
	var b strings.Builder
	prefix := ""
	for _, c := range name {
		c = strings.ReplaceAll(c, "-", "_")
		b.WriteString("/" + prefix + c + ".slice")
		prefix += c + "-"
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}
