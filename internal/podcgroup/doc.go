// Package podcgroup reads, without walking, whether a pod's own processes may have grown its
// files: it finds the pod's cgroup where the kubelet made it and reads a Snapshot of the
// kernel's counters there (cgroup v1 memory.stat, v2 also io.stat). Equal snapshots say the
// pod's processes wrote nothing in between; what the counters cannot see, and the
// measurements, are in docs/change-signal.md. The cgroup is found only from what the API server
// and the kubelet's flags say (UID, QoS class, --cgroup-driver, --cgroup-root), as the kubelet's
// pkg/kubelet/cm names it, never from a file a tenant can write; Find reads the root and driver
// back from a trusted pod (the exporter's own). The system calls live in *_linux.go.
package podcgroup
