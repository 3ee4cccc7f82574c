#!/usr/bin/env bash
# make demo: the seed scenario of docs/design.md on a real single-node cluster, with a real
# Prometheus and Alertmanager, the exporter and the remediator, printed as a timeline.
# `make demo` runs deps, k8s-binaries and build first. KEEP=1 keeps everything running until
# Ctrl-C and prints how to reach it. See docs/demo.md.
#
# The demo is the program test/cmd/demo (it reuses the real-cluster harness, test/cluster, and
# the e2e tests' framework, test/framework): the cluster, Prometheus, Alertmanager, exporter and
# remediator all run inside a network namespace that the harness creates and removes again, on
# success, failure and Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "demo: run as root (it creates a network namespace, mounts and cgroups): sudo make demo" >&2
  exit 1
fi
for b in /usr/bin/prometheus /usr/bin/prometheus-alertmanager etcd containerd runc nsenter du; do
  command -v "$b" >/dev/null || { echo "demo: $b missing: run hack/install-deps.sh (make deps)" >&2; exit 1; }
done

K8S_BIN_DIR=${K8S_BIN_DIR:-$(./test/k8sbin/build.sh kube-apiserver kubelet)}
EMPTYDIR_GUARD_BIN_DIR=${EMPTYDIR_GUARD_BIN_DIR:-$PWD/bin}
if [ ! -x "$EMPTYDIR_GUARD_BIN_DIR/emptydir-exporter" ] || [ ! -x "$EMPTYDIR_GUARD_BIN_DIR/emptydir-remediator" ]; then
  echo "demo: building the project's binaries into $EMPTYDIR_GUARD_BIN_DIR" >&2
  go build -o "$EMPTYDIR_GUARD_BIN_DIR/" ./cmd/...
fi
export K8S_BIN_DIR EMPTYDIR_GUARD_BIN_DIR
export KEEP=${KEEP:-0}
demo_bin=$(mktemp -d)
trap 'rm -rf "$demo_bin"' EXIT
go build -o "$demo_bin/demo" ./test/cmd/demo

# The program stops the cluster on SIGINT/SIGTERM and after 15 minutes (Ctrl-C reaches it
# directly: same process group). In KEEP mode Ctrl-C is the normal end, whatever it then
# reports.
interrupted=0
trap 'interrupted=1' INT TERM
set +e
"$demo_bin/demo"
rc=$?
set -e
if [ "$KEEP" = 1 ] && [ "$interrupted" = 1 ]; then
  echo "demo: stopped"
  exit 0
fi
exit "$rc"
