#!/usr/bin/env bash
# Runs Go test binaries inside a VM that boots a pinned stock Debian kernel under QEMU
# (software emulation, no KVM), for tests that need kernel features the host may lack
# (XFS and ext4 project quotas: CONFIG_XFS_QUOTA, CONFIG_QFMT_V2). See docs/kernel-lane.md.
#
#   test/kernellane/lane.sh <package> [go test flags...]
#   test/kernellane/lane.sh '<package> <package>...' [go test flags...]   (one boot, in turn)
#
# Optional environment:
#   KERNEL_LANE_MODULE   the Go module the package is in, as a directory (default: the current one)
#   KERNEL_LANE_DISK     a raw disk image, attached as a virtio drive and mounted at /disk
#                        before the test runs, unmounted cleanly after it
#   KERNEL_LANE_DISK_MOUNT  its mount arguments (default "-t xfs -o prjquota")
#   KERNEL_LANE_ENV      VAR=value words exported to the test binary
#   KERNEL_LANE_MEMORY   the VM's memory (default 3G); KERNEL_LANE_TIMEOUT its seconds (default 900)
#   KERNEL_LANE_CGROUP2  1: a cgroup v2-only VM (cgroup_no_v1=all): cgroup2 mounted at /sys/fs/cgroup
#                        with nsdelegate, +memory +io enabled in the root's subtree_control, and
#                        KERNEL_LANE_CGROUP2=1 exported to the tests (they fail, not skip, without v2)
#   KERNEL_LANE_SCRATCH  a number of blank 1 GiB virtio disks for the tests to mkfs and mount (a
#                        filesystem on a real block device, not a loop file on the VM's tmpfs); their
#                        device names go to the tests in KERNEL_LANE_SCRATCH_DEVICES
#   KERNEL_LANE_PROGRAMS host executables (names on PATH or paths) copied into the VM with their
#                        shared libraries, each at its own resolved path (a real kubelet, containerd)
#   KERNEL_LANE_INIT     busybox (default): /init runs the tests as the VM's PID 1; systemd (with
#                        KERNEL_LANE_CGROUP2=1): the host's systemd boots as PID 1 (its own mounts,
#                        cgroup2 included, and its private socket /run/systemd/private, no D-Bus
#                        daemon) into a target of one unit that runs the tests on the console;
#                        systemctl is copied in, KERNEL_LANE_INIT=systemd exported to the tests
#
# The kernel is fetched by package name and version, unpacked (never installed as the
# host's kernel) and cached. The test binary is built static on the host and runs as the
# VM's only job; its output comes back on the serial console. The lane fails when the
# binary fails, when any test skips or none runs, or when the end marker never arrives (a
# panic, a hang).
set -euo pipefail

KERNEL_ABI=6.1.0-50-amd64
KERNEL_VERSION=6.1.176-1
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/kernel-$KERNEL_ABI"
GO="${GO:-go}"
pkg="${1:?usage: lane.sh <package> [go test flags]}"; shift
module="${KERNEL_LANE_MODULE:-.}"
disk="${KERNEL_LANE_DISK:-}"
disk_mount="${KERNEL_LANE_DISK_MOUNT:--t xfs -o prjquota}"
cgroup2="${KERNEL_LANE_CGROUP2:-}"
scratch="${KERNEL_LANE_SCRATCH:-0}"
init="${KERNEL_LANE_INIT:-busybox}"
case "$init" in
  busybox) ;;
  systemd) [ "$cgroup2" = 1 ] || { echo "lane.sh: KERNEL_LANE_INIT=systemd needs KERNEL_LANE_CGROUP2=1" >&2; exit 1; } ;;
  *) echo "lane.sh: KERNEL_LANE_INIT=$init is neither busybox nor systemd" >&2; exit 1 ;;
esac
[[ "$scratch" =~ ^[0-9]$ ]] || { echo "lane.sh: KERNEL_LANE_SCRATCH=$scratch is not a number of disks (0-9)" >&2; exit 1; }
if [ -n "$disk" ] && [ ! -f "$disk" ]; then echo "lane.sh: KERNEL_LANE_DISK=$disk is not a file" >&2; exit 1; fi
programs=()
for p in ${KERNEL_LANE_PROGRAMS:-}; do
  command -v "$p" >/dev/null || { echo "lane.sh: KERNEL_LANE_PROGRAMS: $p is no executable" >&2; exit 1; }
  programs+=("$p")
done
for kv in ${KERNEL_LANE_ENV:-}; do
  [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^\'\"]*$ ]] || { echo "lane.sh: KERNEL_LANE_ENV: $kv is not VAR=value" >&2; exit 1; }
done

# hack/install-deps.sh (make deps) installs what the lane runs.
missing=()
systemd_bin=/lib/systemd/systemd
init_tools=()
[ "$init" = systemd ] && init_tools=("$systemd_bin" systemctl)
for c in qemu-system-x86_64 /bin/busybox cpio depmod xz mkfs.xfs mke2fs losetup xfs_quota "${init_tools[@]}"; do
  command -v "$c" >/dev/null || missing+=("$c")
done
if ((${#missing[@]})); then
  echo "lane.sh: missing ${missing[*]}; make deps installs them" >&2; exit 1
fi

# The kernel, its modules with a modules.dep, and its uncompressed vmlinux: booted through
# its PVH entry, it skips the bzImage's XZ decompression (seconds under emulation). Prepared
# under a lock: lanes may start at once (make -j).
mkdir -p "$(dirname "$CACHE")"
exec 9>"$CACHE.lock"
flock 9
if [ ! -f "$CACHE/vmlinux" ]; then
  rm -rf "$CACHE" && mkdir -p "$CACHE/dl"
  (cd "$CACHE/dl" && apt-get download "linux-image-$KERNEL_ABI=$KERNEL_VERSION" >/dev/null 2>&1) || {
    echo "lane.sh: cannot download linux-image-$KERNEL_ABI=$KERNEL_VERSION from the Debian archive" >&2; exit 1; }
  dpkg-deb -x "$CACHE"/dl/*.deb "$CACHE/root"
  depmod -b "$CACHE/root" "$KERNEL_ABI"
  img="$CACHE/root/boot/vmlinuz-$KERNEL_ABI"
  off=$(LC_ALL=C grep -obUaP '\xfd\x37\x7a\x58\x5a\x00' "$img" | head -1 | cut -d: -f1)
  tail -c +$((off + 1)) "$img" | xz -dc 2>/dev/null > "$CACHE/vmlinux.tmp" || true
  [ -s "$CACHE/vmlinux.tmp" ] || { echo "lane.sh: no XZ payload in $img" >&2; exit 1; }
  mv "$CACHE/vmlinux.tmp" "$CACHE/vmlinux"
  rm -rf "$CACHE/dl"
fi
exec 9>&-

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
initrd="$work/initrd"
mkdir -p "$initrd"/{bin,sbin,dev,proc,sys,tmp,lib/modules,etc}
# Every system has them; a static (pure Go) kubelet reads /etc/passwd for its user namespace
# mappings and fails without the file.
echo 'root:x:0:0:root:/root:/bin/sh' >"$initrd/etc/passwd"
echo 'root:x:0:' >"$initrd/etc/group"
cp /bin/busybox "$initrd/bin/busybox"
for applet in sh mount umount mkdir cat echo grep sync poweroff sleep ifconfig chroot; do ln -s busybox "$initrd/bin/$applet"; done
cp -a "$CACHE/root/lib/modules/$KERNEL_ABI" "$initrd/lib/modules/"

# Host programs the tests call, with their shared libraries, at their own paths (busybox
# runs its applets before PATH: the tests call these by name, and busybox has none of them).
copy_with_libs() {
  local f
  for f in "$@"; do
    f=$(readlink -f "$(command -v "$f")")
    mkdir -p "$initrd$(dirname "$f")" && cp -n "$f" "$initrd$f"
    # A static binary (the kubelet, built as k0s ships it) has none: ldd and grep fail.
    { ldd "$f" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r lib; do
      mkdir -p "$initrd$(dirname "$lib")" && cp -nL "$lib" "$initrd$lib"
    done
  done
}
copy_with_libs mkfs.xfs mke2fs losetup du kmod xfs_quota
((${#programs[@]})) && copy_with_libs "${programs[@]}"
((${#init_tools[@]})) && copy_with_libs "${init_tools[@]}"
ln -s "$(readlink -f "$(command -v mke2fs)")" "$initrd/sbin/mkfs.ext4"
ln -sf "$(readlink -f "$(command -v kmod)")" "$initrd/sbin/modprobe"
[ -e /lib64 ] && [ ! -e "$initrd/lib64" ] && ln -s usr/lib64 "$initrd/lib64" 2>/dev/null || true

# One boot for several packages (a quoted list): each package's test binary runs in turn.
tests=""
i=0
for p in $pkg; do
  CGO_ENABLED=0 "$GO" test -C "$module" -c -o "$initrd/test$i.bin" "$p"
  tests+=" /test$i.bin"
  i=$((i + 1))
done

args=""
for a in "$@"; do args+=" '${a//\'/}'"; done
# overlay: containerd's snapshotter, for a real kubelet's pods (KERNEL_LANE_PROGRAMS).
modules="crc32c_generic loop xfs ext4 quota_v2 overlay"
mount_disk="" umount_disk="" exports="" cgroups="" append='console=ttyS0 quiet panic=-1'
if [ -n "$disk" ] || ((scratch)); then modules+=" virtio_pci virtio_blk"; fi
if [ -n "$disk" ]; then
  mount_disk="for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 1; done
mkdir -p /disk && mount $disk_mount /dev/vda /disk || { echo 'lane: mount $disk_mount /dev/vda /disk failed'; echo KERNEL-LANE-EXIT 97; poweroff -f; }"
  umount_disk="umount /disk || { echo 'lane: umount /disk failed'; code=98; }"
fi
for kv in ${KERNEL_LANE_ENV:-}; do exports+="export '$kv'"$'\n'; done
# Scratch disks come after KERNEL_LANE_DISK on the virtio bus: vda is that disk when given.
drive=()
[ -n "$disk" ] && drive=(-drive "file=$disk,if=virtio,format=raw,cache=unsafe")
devices="" letters=abcdefghijk first=0
[ -n "$disk" ] && first=1
for ((i = 0; i < scratch; i++)); do
  truncate -s 1G "$work/scratch$i.img"
  drive+=(-drive "file=$work/scratch$i.img,if=virtio,format=raw,cache=unsafe")
  devices+=" /dev/vd${letters:first+i:1}"
done
if ((scratch)); then
  exports+="export KERNEL_LANE_SCRATCH_DEVICES='${devices# }'"$'\n'
  # The disks appear asynchronously once virtio_blk is loaded.
  exports+="for d in ${devices# }; do for i in 1 2 3 4 5 6 7 8 9 10; do [ -b \$d ] && break; sleep 1; done; done"$'\n'
fi
if [ "$cgroup2" = 1 ]; then
  # v2 only: no v1 hierarchy can take a controller, as on a node booted with cgroup v2.
  append+=' cgroup_no_v1=all'
  cgroups="mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup && echo '+memory +io' > /sys/fs/cgroup/cgroup.subtree_control || { echo 'lane: cgroup2 mount or +memory +io failed'; echo KERNEL-LANE-EXIT 96; poweroff -f; }"
  exports+="export KERNEL_LANE_CGROUP2=1"$'\n'
fi
# The initramfs's root (rootfs) is no mount that pivot_root(2) can leave, and runc pivots into
# every container's root: with programs (a container runtime), /init first runs again on a
# recursive bind of / moved over it, from which containers can pivot.
rebind=""
if ((${#programs[@]})); then
  rebind='if [ -z "$LANE_REBOUND" ]; then
  mkdir -p /newroot && mount -o rbind / /newroot && cd /newroot && mount -o move . / && LANE_REBOUND=1 exec chroot . /init
  echo "lane: cannot bind the root over itself"; echo KERNEL-LANE-EXIT 95; poweroff -f
fi'
fi
# /lane-run runs the tests and powers the VM off; /init runs it as PID 1, or boots systemd,
# whose one unit runs it.
mounts='mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev'
start_run='exec /lane-run'
if [ "$init" = systemd ]; then
  # systemd mounts /proc, /sys, /dev, /run and cgroup2 itself.
  mounts=""
  start_run="exec $(readlink -f "$systemd_bin")"
  cgroups="grep -q '^cgroup2 /sys/fs/cgroup cgroup2 ' /proc/mounts && echo '+memory +io' > /sys/fs/cgroup/cgroup.subtree_control || { echo 'lane: systemd mounted no cgroup2 at /sys/fs/cgroup, or +memory +io failed'; echo KERNEL-LANE-EXIT 96; poweroff -f; }"
  exports+="export KERNEL_LANE_INIT=systemd"$'\n'
  units="$initrd/etc/systemd/system"
  mkdir -p "$units"
  # Memory and io accounting everywhere: systemd rewrites the subtree_control of the cgroups
  # it manages, and would otherwise take back controllers no unit of its own asks for.
  printf '[Manager]\nDefaultMemoryAccounting=yes\nDefaultIOAccounting=yes\nDefaultTasksAccounting=yes\n' >"$initrd/etc/systemd/system.conf"
  echo 6c616e65000000000000000000000001 >"$initrd/etc/machine-id"
  # No default dependencies: the initramfs has none of the host's units (sysinit.target, ...).
  printf '[Unit]\nDescription=The kernel lane\nRequires=lane.service\nDefaultDependencies=no\nAllowIsolate=yes\n' >"$units/lane.target"
  # A unit that cannot start powers the VM off: the missing end marker fails the lane at once.
  printf '[Unit]\nDescription=The kernel lane tests\nDefaultDependencies=no\nFailureAction=poweroff-immediate\n[Service]\nExecStart=/lane-run\nStandardInput=null\nStandardOutput=tty\nStandardError=tty\nTTYPath=/dev/console\n' >"$units/lane.service"
  ln -s lane.target "$units/default.target"
fi
cat > "$initrd/init" <<INIT
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
$rebind
$mounts
$start_run
echo "lane: cannot start the tests ($start_run)"; echo KERNEL-LANE-EXIT 94; poweroff -f
INIT
cat > "$initrd/lane-run" <<RUN
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs tmp /tmp
# Loopback only (tests serve their endpoints on 127.0.0.1); the VM has no other network.
ifconfig lo 127.0.0.1 up
# crc32c is only a soft dependency of the filesystems, and the kernel has no modprobe to call.
for m in $modules; do modprobe \$m || echo "modprobe \$m failed"; done
$cgroups
$mount_disk
$exports
read up _ < /proc/uptime; echo "lane: the test starts at uptime \$up s"
code=0
for t in$tests; do
  echo "lane: \$t"
  cd /tmp && TMPDIR=/tmp \$t -test.v$args || code=\$?
done
$umount_disk
echo "KERNEL-LANE-EXIT \$code"
sync; poweroff -f
RUN
chmod +x "$initrd/init" "$initrd/lane-run"
(cd "$initrd" && find . | cpio -o -H newc --quiet) > "$work/initrd.cpio"

log="$work/console.log"
timeout "${KERNEL_LANE_TIMEOUT:-900}" qemu-system-x86_64 -nographic -no-reboot -M q35 -cpu max -accel tcg -smp 1 \
  -m "${KERNEL_LANE_MEMORY:-3G}" "${drive[@]}" -kernel "$CACHE/vmlinux" -initrd "$work/initrd.cpio" \
  -append "$append" </dev/null | tr -d '\r' | tee "$log" || true

code=$(grep -ao 'KERNEL-LANE-EXIT [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
if [ -z "$code" ]; then echo "lane.sh: the VM never reported an exit code (panic, hang or timeout)" >&2; exit 1; fi
if grep -aq -- '--- SKIP' "$log"; then echo "lane.sh: a test skipped inside the kernel lane; skips are failures here:" >&2; grep -a -- '--- SKIP' -A2 "$log" >&2; exit 1; fi
if grep -aq 'no tests to run' "$log"; then echo "lane.sh: the pattern matched no test inside the kernel lane" >&2; exit 1; fi
exit "$code"
