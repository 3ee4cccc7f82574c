// Package kubeletv2 holds the kernel lane's test of the change signal and the calibration
// against pod cgroups a real kubelet made on cgroup v2: a standalone kubelet (static pods, no
// API server) on Debian's containerd and runc, inside the lane's v2-only VM booted with systemd
// (test/kernellane/lane.sh, docs/kernel-lane.md), with the cgroupfs and the systemd cgroup
// driver in turn. Outside that VM its test skips; inside it, it fails when systemd is not PID 1.
package kubeletv2
