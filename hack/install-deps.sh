#!/usr/bin/env bash
# Installs, on a fresh Debian machine, every outside part that the tests and the demo
# run for real: etcd, containerd, runc, CNI plugins, Prometheus, Alertmanager, busybox.
# Idempotent: installs only what is missing.
set -euo pipefail
pkgs=(etcd-server containerd runc containernetworking-plugins prometheus
      prometheus-alertmanager busybox-static iproute2 util-linux procps xfsprogs)
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
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian packages may start nothing here (no systemd), but make sure no stray
# daemon from a package install holds the ports our tests use.
for d in etcd prometheus prometheus-alertmanager; do pkill -x "$d" 2>/dev/null || true; done
command -v kubectl >/dev/null || echo "install-deps: kubectl not found; the cluster harness does not need it" >&2
