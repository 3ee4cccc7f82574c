// Package fswalktest gives tests real filesystems to measure: a loop-mounted XFS or ext4 of
// their own, with or without project quota accounting, and project IDs set on directories as the
// kubelet sets them; a tmpfs of their own, as the kubelet mounts one per medium: Memory volume
// (Linux only, as root: RequireRoot). The kernel lane (docs/kernel-lane.md) runs the tests that
// need quotas.
package fswalktest
