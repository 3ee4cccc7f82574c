// Package podcgroup reads, without walking, whether a pod's own processes may have grown its
// files: it finds the pod's cgroup where the kubelet made it and reads a Snapshot of the
// kernel's counters there. Equal snapshots of one pod, read at two moments, say that the
// pod's processes charged no new page to the page cache or a tmpfs in between (cgroup v1:
// total_pgpgin) and that no written page of theirs was still dirty or under writeback at
// either moment; with cgroup v2, that no write of theirs was written back in between either
// (io.stat). What the counters cannot see — space allocated without a write (fallocate),
// metadata (empty files, folders), a write into a page already charged, writes by processes
// outside the pod's cgroup — is listed, with the measurements of this package's tests, in
// docs/change-signal.md: the caller bounds it by walking every part at least that often.
//
// Where a pod's cgroup is comes only from what the API server and the kubelet's flags say
// (the pod's UID and QoS class, --cgroup-driver, --cgroup-root), never from a file a tenant
// can write; the layouts follow the kubelet's pkg/kubelet/cm (names.go). Find, for a pod the
// caller trusts (the exporter's own), reads the root and driver back from where the pod's
// cgroup is, by the same names.
//
// The system calls (statfs, stat) live in *_linux.go, with stubs that return an error
// wrapping errors.ErrUnsupported elsewhere.
package podcgroup
