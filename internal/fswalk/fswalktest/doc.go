// Package fswalktest gives tests real filesystems to measure: a loop-mounted XFS or ext4 of
// their own, with or without project quota accounting, and project IDs set on folders as the
// kubelet sets them (Linux only). The kernel lane (docs/kernel-lane.md) runs the tests that
// need quotas.
package fswalktest
