#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# rxe-vm.sh - run a command next to two Soft-RoCE (rdma_rxe) devices.
#
# Usage: tests/vm/rxe-vm.sh [OPTIONS] -- COMMAND [ARGS...]
#
# Boots Debian's stock kernel under QEMU (software emulation, no KVM needed),
# wires two rxe devices back to back over a veth pair inside the guest
# (rxe0 on veth0 = 10.0.0.1, rxe1 on veth1 = 10.0.0.2) and runs COMMAND there,
# chrooted into this machine's root filesystem (shared read-only), so programs
# built here run unchanged. The current directory is shared read-write and
# COMMAND starts in it.
#
# Options:
#   --mtu N         veth MTU: 1500 (RoCE MTU 1024, the default) or 9000 (4096)
#   --netem SPEC    tc netem applied to veth1's egress, e.g. 'loss 5%'
#   --timeout SEC   bound on the whole run, boot included (default 300)
#   --cache DIR     kernel and initramfs cache (default ~/.cache/urpc-rxe-vm)
#   --keep-log      print the guest console log even on success
#   -h, --help      show this help
#
# In the guest, COMMAND sees URPC_RXE_SERVER_IP, URPC_RXE_CLIENT_IP,
# URPC_RXE_GID_INDEX (the RoCE v2 IPv4 GID index, read from sysfs) and
# URPC_RXE_VM=1. Its output comes back on this script's stdout and stderr.
#
# Exit status: COMMAND's; 124 when the timeout expired; 77 (with a line
# "SKIPPED: reason" on stderr) when the VM cannot run on this machine.
set -euo pipefail

prog=rxe-vm
mtu=1500
netem=""
timeout_s=300
cache=${XDG_CACHE_HOME:-$HOME/.cache}/urpc-rxe-vm
keep_log=0
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n '4,29p' "$0" | sed 's/^# \{0,1\}//'; }
log() { echo "$prog: $*" >&2; }
skip() {
	echo "SKIPPED: $*" >&2
	exit 77
}
die() {
	log "error: $*"
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--mtu)
		[ $# -ge 2 ] || die "--mtu needs a value"
		mtu=$2
		shift 2
		;;
	--netem)
		[ $# -ge 2 ] || die "--netem needs a value"
		netem=$2
		shift 2
		;;
	--timeout)
		[ $# -ge 2 ] || die "--timeout needs a value"
		timeout_s=$2
		shift 2
		;;
	--cache)
		[ $# -ge 2 ] || die "--cache needs a value"
		cache=$2
		shift 2
		;;
	--keep-log)
		keep_log=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		break
		;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
[ $# -gt 0 ] || die "no COMMAND given (see --help)"
case "$mtu" in 1500 | 9000) ;; *) die "--mtu must be 1500 or 9000, got '$mtu'" ;; esac
case "$timeout_s" in '' | *[!0-9]*) die "--timeout must be a number of seconds" ;; esac
case "$netem" in *[\'\"\`\$\;\&\|]*) die "--netem: unexpected characters in '$netem'" ;; esac

# ---- host tools ------------------------------------------------------------
need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx cpio ||
	need_pkgs+=(busybox-static)
command -v depmod >/dev/null || need_pkgs+=(kmod)
command -v xz >/dev/null || need_pkgs+=(xz-utils)
command -v ibv_devices >/dev/null || need_pkgs+=(ibverbs-utils rdma-core)
[ -x /sbin/ip ] || [ -x /usr/sbin/ip ] || [ -x /bin/ip ] || need_pkgs+=(iproute2)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || skip "missing ${need_pkgs[*]}; install them (apt-get install ${need_pkgs[*]})"
	log "installing ${need_pkgs[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1; } ||
		skip "could not install ${need_pkgs[*]}"
fi

# ---- kernel ----------------------------------------------------------------
mkdir -p "$cache"
kver_file=$cache/kver
if [ ! -s "$kver_file" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n 1)
	[ -n "$kpkg" ] || skip "cannot find Debian's linux-image-amd64 package (apt-get update?)"
	echo "${kpkg#linux-image-}" >"$kver_file"
fi
kver=$(cat "$kver_file")
kdir=$cache/$kver
if [ ! -s "$kdir/vmlinux" ]; then
	log "fetching kernel $kver (once; cached in $kdir)"
	rm -rf "$kdir"
	mkdir -p "$kdir/dl"
	(cd "$kdir/dl" && apt-get download "linux-image-$kver" >/dev/null 2>&1) ||
		skip "cannot download linux-image-$kver"
	dpkg-deb -x "$kdir"/dl/linux-image-*.deb "$kdir/root" || skip "cannot unpack linux-image-$kver"
	rm -rf "$kdir/dl"
	# Boot the uncompressed ELF image (PVH): find the xz stream in vmlinuz.
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$kdir/root/boot/vmlinuz-$kver" | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || skip "no xz stream in vmlinuz-$kver"
	tail -c +$((off + 1)) "$kdir/root/boot/vmlinuz-$kver" | xz -dcq >"$kdir/vmlinux.tmp" 2>/dev/null || true
	head -c 4 "$kdir/vmlinux.tmp" | grep -q ELF || skip "could not extract vmlinux from vmlinuz-$kver"
	mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"
	depmod -b "$kdir/root" "$kver"
fi

# ---- initramfs -------------------------------------------------------------
initrd=$kdir/initrd.cpio.gz
if [ ! -s "$initrd" ] || [ "$here/rxe-vm-init.sh" -nt "$initrd" ]; then
	log "building the initramfs"
	ird=$(mktemp -d)
	mkdir -p "$ird"/{bin,sbin,proc,sys,dev,host,share,tmp,mods,etc}
	cp /bin/busybox "$ird/bin/busybox"
	for m in virtio_mmio 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm veth sch_netem; do
		modprobe -d "$kdir/root" -S "$kver" --show-depends "$m" 2>/dev/null |
			sed -n 's/^insmod \([^ ]*\).*/\1/p'
	done | awk '!seen[$0]++' >"$ird/mods/order"
	[ -s "$ird/mods/order" ] || skip "could not resolve the guest's kernel modules"
	while read -r ko; do
		cp "$ko" "$ird/mods/"
		basename "$ko" >>"$ird/mods/list"
	done <"$ird/mods/order"
	cp "$here/rxe-vm-init.sh" "$ird/init"
	chmod +x "$ird/init"
	(cd "$ird" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$initrd.tmp")
	mv "$initrd.tmp" "$initrd"
	rm -rf "$ird"
fi

# ---- run ---------------------------------------------------------------------
share=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
trap 'rm -rf "$share"' EXIT
{
	printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$share/cmd"
printf '%s\n' "$PWD" >"$share/cwd"
printf '%s\n' "$mtu" >"$share/mtu"
printf '%s\n' "$netem" >"$share/netem"

khz=$(awk '/cpu MHz/ {printf "%d", $4 * 1000; exit}' /proc/cpuinfo)
[ -n "$khz" ] && [ "$khz" -gt 0 ] || khz=2000000
ncpu=$(nproc)
[ "$ncpu" -gt 2 ] && ncpu=2

log "booting kernel $kver (mtu $mtu${netem:+, netem $netem}, timeout ${timeout_s}s)"
start=$(date +%s)
set +e
timeout --kill-after=5 "$timeout_s" qemu-system-x86_64 \
	-M microvm,x-option-roms=off,rtc=off,isa-serial=on \
	-accel tcg,thread=multi -cpu max -smp "$ncpu" -m 2048 \
	-nodefaults -no-user-config -nographic -no-reboot \
	-serial "file:$share/console" \
	-kernel "$kdir/vmlinux" -initrd "$initrd" \
	-append "console=ttyS0 quiet loglevel=3 panic=-1 pci=off tsc_early_khz=$khz tsc=reliable rdinit=/init" \
	-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
	-device virtio-9p-device,fsdev=hostroot,mount_tag=hostroot \
	-fsdev "local,id=share,path=$share,security_model=none,multidevs=remap" \
	-device virtio-9p-device,fsdev=share,mount_tag=share \
	-fsdev "local,id=cwd,path=$PWD,security_model=none,multidevs=remap" \
	-device virtio-9p-device,fsdev=cwd,mount_tag=cwd \
	</dev/null >"$share/qemu.log" 2>&1
qrc=$?
set -e
elapsed=$(($(date +%s) - start))

[ -f "$share/out" ] && cat "$share/out"
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
	log "timed out after ${timeout_s}s; guest console:"
	tail -n 40 "$share/console" >&2 2>/dev/null || true
	exit 124
fi
if [ ! -f "$share/status" ]; then
	log "the guest did not finish (qemu exit $qrc, ${elapsed}s); console and qemu output:"
	tail -n 40 "$share/console" >&2 2>/dev/null || true
	tail -n 20 "$share/qemu.log" >&2 2>/dev/null || true
	if grep -q "rxe-vm-guest: SKIP" "$share/console" 2>/dev/null; then
		skip "$(sed -n 's/.*rxe-vm-guest: SKIP //p' "$share/console" | head -n 1)"
	fi
	exit 1
fi
rc=$(cat "$share/status")
[ $keep_log = 1 ] && cat "$share/console" >&2
log "guest finished in ${elapsed}s, exit status $rc"
exit "$rc"
