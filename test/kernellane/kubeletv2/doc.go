// Package kubeletv2 holds the kernel lane's test of the change signal and the calibration
// against pod cgroups a real kubelet made on cgroup v2: a standalone kubelet (static pods, no
// API server) on Debian's containerd and runc, inside the lane's v2-only VM
// (test/kernellane/lane.sh, docs/kernel-lane.md). Outside that VM its test skips.
package kubeletv2
