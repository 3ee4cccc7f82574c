#!/usr/bin/env bash
# Installs, on a fresh Debian machine, every outside part that the tests and the demo
# run for real: etcd, containerd, runc, CNI plugins, Prometheus, Alertmanager, busybox, QEMU
# with the tools that build the kernel lane's initramfs (test/kernellane) and the systemd it boots
# as the kubelet's init, and the CA bundle
# (ca-certificates) that `make image` puts into the image, the OCI registry (docker-registry,
# CNCF Distribution) the release test publishes to and the node pulls from, and jq, with which
# hack/test-names.sh lists the tests a run ran; for the CRI-O node (test/crio), conmon and what
# its build needs (a C compiler, libc's static archive, libseccomp).
# Idempotent: installs only what is missing.
set -euo pipefail
pkgs=(etcd-server containerd runc containernetworking-plugins prometheus
      prometheus-alertmanager busybox-static iproute2 util-linux procps xfsprogs e2fsprogs
      qemu-system-x86 cpio kmod xz-utils systemd ca-certificates docker-registry jq
      conmon gcc libc6-dev pkg-config libseccomp-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing Debian packages ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The packages' own daemons (etcd, Prometheus, Alertmanager, the registry) must not run: they would
  # hold the ports the tests use (etcd's 2379). Debian's maintainer scripts ask
  # policy-rc.d before starting a service; one refusing (101) is in place for the
  # install only, unless the machine has its own (containers usually refuse already).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packages' own services hold the ports the tests use (etcd's 2379), also on a machine
# where they were installed by hand before and started then: stop and disable those
# services, and only those (other daemons on the machine are not ours), saying so.
if [ "$(id -u)" = 0 ]; then
  for unit in etcd prometheus prometheus-alertmanager docker-registry; do
    if [ -d /run/systemd/system ]; then
      systemctl is-active --quiet "$unit" 2>/dev/null || continue
      echo "install-deps: stopping and disabling the $unit service of the Debian package: the tests run their own" >&2
      systemctl disable --now "$unit" >/dev/null 2>&1 || true
    elif service "$unit" status >/dev/null 2>&1; then
      echo "install-deps: stopping and disabling the $unit service of the Debian package: the tests run their own" >&2
      service "$unit" stop >/dev/null 2>&1 || true
      update-rc.d "$unit" disable >/dev/null 2>&1 || true
    fi
  done
fi
command -v kubectl >/dev/null || echo "install-deps: kubectl not found; the cluster harness does not need it" >&2
