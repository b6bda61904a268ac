#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# rxe-vm.sh - run a command next to two Soft-RoCE (rdma_rxe) devices.
#
# Usage: tests/vm/rxe-vm.sh [OPTIONS] -- COMMAND [ARGS...]; see --help (usage()
# below) for the options, the guest's environment and the exit statuses.
# The guest side is rxe-vm-init.sh (the initramfs's /init).
set -euo pipefail

prog=rxe-vm
mtu=1500
netem=""
timeout_s=300
cache=${XDG_CACHE_HOME:-$HOME/.cache}/urpc-rxe-vm
kernel=6.12
keep_log=0
here=$(cd "$(dirname "$0")" && pwd)

usage() {
	cat <<'EOF_USAGE'
NAME
    rxe-vm.sh - run a command next to two Soft-RoCE (rdma_rxe) devices

SYNOPSIS
    tests/vm/rxe-vm.sh [--mtu 1500|9000] [--netem SPEC] [--timeout SEC]
                       [--kernel 6.12|stock] [--cache DIR] [--keep-log]
                       -- COMMAND [ARGS...]
    tests/vm/rxe-vm.sh --help

DESCRIPTION
    Boots a Debian 12 kernel under QEMU with software emulation (TCG; no
    KVM, no RDMA NIC needed), wires two rxe devices back to back over a veth
    pair inside the guest and runs COMMAND there:

        rxe0 on veth0, 10.0.0.1 (server)  <-- veth -->  rxe1 on veth1, 10.0.0.2 (client)

    Policy routing makes traffic between the two addresses cross the veth
    pair instead of the loopback shortcut (which rxe drops).

    COMMAND runs chrooted into this machine's root filesystem, shared
    read-only over virtio-9p, so programs built and installed here
    (ibv_devices, perftest, the project's test binaries) run unchanged. The
    current directory is shared read-write at the same path and COMMAND
    starts in it (in / when the current directory is / itself). COMMAND and
    its ARGS are passed as a word list, without a shell: use sh -c '...' for
    pipes, background jobs and variables of the guest.

    Its stdout and stderr stream back to this script's stdout and stderr.
    Progress lines ("rxe-vm: ...") go to stderr.

    Binaries run in the guest must not use instructions its emulated CPU
    lacks (it has AVX2, no AVX-512): build them for a baseline such as
    -march=x86-64-v2, never -march=native.

OPTIONS
    --mtu 1500|9000
        MTU of the veth pair (default 1500). The RoCE active MTU follows it:
        1024 with 1500, 4096 with 9000.
    --netem SPEC
        Apply "tc qdisc add dev vethN root netem SPEC" to the egress of both
        veth0 and veth1 (each direction of the wire), e.g. 'loss 5%' or
        'delay 1ms'. Clients must bind to 10.0.0.2 for their packets to
        cross the veth (and netem) rather than the loopback.
    --timeout SEC
        Bound on the whole run, package installation, kernel download and
        boot included (default 300). On expiry QEMU is killed and the
        script exits 124.
    --kernel 6.12|stock
        The guest's kernel (default 6.12): Debian 12's linux-image-6.12-amd64
        (from bookworm-security), or "stock", its default linux-image-amd64
        (6.1). The 6.1 kernel's rxe completes some RDMA READs of 1 MiB with
        bytes missing (tests/vm/README.md, "Known problem"); 6.12's does not.
    --cache DIR
        Where the kernel package contents, the extracted vmlinux and the
        initramfs are kept (default ${XDG_CACHE_HOME:-$HOME/.cache}/urpc-rxe-vm).
        Concurrent runs share it safely (flock).
    --keep-log
        Print the tail of the guest's console log even on success.
    -h, --help
        Show this help.

ENVIRONMENT (in the guest)
    URPC_RXE_SERVER_IP   10.0.0.1 (rxe0, veth0)
    URPC_RXE_CLIENT_IP   10.0.0.2 (rxe1, veth1)
    URPC_RXE_GID_INDEX   GID index of the IPv4 RoCE v2 GIDs, the same on both
                         devices, read from sysfs at boot (never hard-coded)
    URPC_RXE_VM          1

ENVIRONMENT (on this machine)
    URPC_RXE_VM_BREAK_BOOTS=N
        For the harness's own test (tests/vm/test_boot_retry.sh): the first
        N boots get a kernel command line whose initramfs program does not
        exist, so the guest stops before /init as a guest reset would.

EXIT STATUS
    COMMAND's exit status; 124 when the timeout expired; 77, with a line
    "SKIPPED: reason" on stderr, when the VM cannot run here (QEMU missing
    and not installable, kernel not downloadable, the guest did not boot
    in three tries or could not set up the devices); 2 for a usage error;
    1 when the guest died while COMMAND ran. A guest that stops before its
    /init has mounted the share ran nothing of COMMAND: it is booted again,
    at most three boots in all, each failed one reported with its console.

REQUIREMENTS
    Debian packages qemu-system-x86, busybox-static, kmod, xz-utils,
    iproute2, ibverbs-utils, rdma-core, ibverbs-providers and perftest,
    installed with apt-get when missing and running as root; and the
    kernel package (linux-image-6.12.NN+deb12-amd64, or 6.1.0-NN-amd64 with
    --kernel stock), fetched once with apt-get download (never installed on
    this machine); zstd to unpack a 6.12 kernel.

EXAMPLES
    tests/vm/rxe-vm.sh -- ibv_devices
    tests/vm/rxe-vm.sh --mtu 9000 -- ibv_devinfo -d rxe0
    tests/vm/rxe-vm.sh -- sh -c 'ibv_rc_pingpong -d rxe0 -g $URPC_RXE_GID_INDEX &
        sleep 3; ibv_rc_pingpong -d rxe1 -g $URPC_RXE_GID_INDEX 10.0.0.1'
    tests/vm/rxe-vm.sh --netem 'loss 5%' -- build/tests/some_verbs_test
EOF_USAGE
}
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
	--kernel)
		[ $# -ge 2 ] || die "--kernel needs a value (6.12 or stock)"
		case $2 in
		6.12 | stock) kernel=$2 ;;
		*) die "--kernel must be 6.12 or stock, not '$2'" ;;
		esac
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
	-*) die "unknown option '$1' (see --help)" ;;
	*) break ;; # COMMAND without the "--"
	esac
done
[ $# -gt 0 ] || die "no COMMAND given (see --help)"
case "$mtu" in 1500 | 9000) ;; *) die "--mtu must be 1500 or 9000, got '$mtu'" ;; esac
case "$timeout_s" in '' | *[!0-9]* | 0) die "--timeout must be a number of seconds" ;; esac
case "${URPC_RXE_VM_BREAK_BOOTS:-0}" in *[!0-9]*) die "URPC_RXE_VM_BREAK_BOOTS must be a number" ;; esac
case "$netem" in *[\'\"\`\$\;\&\|]*) die "--netem: unexpected characters in '$netem'" ;; esac

# depmod, modprobe, rdma and tc live in sbin, which a user's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin

# Everything below, downloads included, runs within the deadline.
deadline=$((SECONDS + timeout_s))
left() {
	local l=$((deadline - SECONDS))
	[ $l -gt 0 ] || timed_out "before the VM started"
	echo $l
}
timed_out() {
	log "timed out after ${timeout_s}s ($*)"
	exit 124
}
# Runs "$@" within the time left; 124 from timeout means the deadline passed.
bounded() {
	local l
	l=$(left) || exit 124
	timeout --kill-after=5 "$l" "$@"
}

# ---- host tools ------------------------------------------------------------
need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
# The initramfs needs the static busybox (Debian's busybox package is dynamic).
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
	need_pkgs+=(busybox-static)
command -v depmod >/dev/null || need_pkgs+=(kmod)
command -v xz >/dev/null || need_pkgs+=(xz-utils)
command -v zstd >/dev/null || need_pkgs+=(zstd)
command -v ibv_devices >/dev/null || need_pkgs+=(ibverbs-utils)
command -v rdma >/dev/null && command -v tc >/dev/null || need_pkgs+=(iproute2)
compgen -G '/usr/lib/*/libibverbs/librxe-rdmav*.so' >/dev/null || need_pkgs+=(rdma-core ibverbs-providers)
command -v ib_send_lat >/dev/null || need_pkgs+=(perftest)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || skip "missing packages; as root: apt-get install ${need_pkgs[*]}"
	log "installing ${need_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	bounded apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1 ||
		{ bounded apt-get update -qq >/dev/null 2>&1 &&
			bounded apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1; } ||
		{
			[ $SECONDS -lt $deadline ] || timed_out "installing packages"
			skip "could not install ${need_pkgs[*]} with apt-get"
		}
fi

# ---- kernel ----------------------------------------------------------------
# The cache is shared by concurrent runs: one prepares it, the others wait.
mkdir -p "$cache" || skip "cannot create the cache folder $cache"
exec 9>"$cache/.lock"
bounded flock 9 || timed_out "waiting for the cache lock"

# The kernel ABI the chosen meta-package points at (6.12.NN+deb12-amd64 or
# 6.1.0-NN-amd64), resolved once per choice.
case $kernel in
6.12) meta=linux-image-6.12-amd64 ;;
*) meta=linux-image-amd64 ;;
esac
resolve_kver() {
	apt-cache depends "$meta" 2>/dev/null |
		sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n 1 || true
}
fetch_kernel() { # into $kdir/dl
	rm -rf "$kdir" && mkdir -p "$kdir/dl" &&
		(cd "$kdir/dl" && bounded apt-get download "linux-image-$kver" >/dev/null 2>&1)
}
kver=""
[ -s "$cache/kver-$kernel" ] && read -r kver <"$cache/kver-$kernel"
if [ -z "$kver" ]; then
	kver=$(resolve_kver)
	if [ -z "$kver" ] && [ "$(id -u)" -eq 0 ]; then
		bounded apt-get update -qq >/dev/null 2>&1 || true
		kver=$(resolve_kver)
	fi
	[ -n "$kver" ] || skip "cannot find Debian's $meta package (apt-get update?)"
	[ ! -s "$cache/$kver/vmlinux" ] || echo "$kver" >"$cache/kver-$kernel"
fi
if [ ! -s "$cache/$kver/vmlinux" ]; then
	kdir=$cache/$kver
	log "fetching kernel $kver (once; cached in $kdir)"
	if ! fetch_kernel; then
		# Stale package lists or a kernel the mirror dropped: refresh, retry.
		[ "$(id -u)" -ne 0 ] || bounded apt-get update -qq >/dev/null 2>&1 || true
		tried=$kver
		kver=$(resolve_kver)
		kdir=$cache/$kver
		if [ -z "$kver" ] || ! fetch_kernel; then
			[ $SECONDS -lt $deadline ] || timed_out "downloading the kernel"
			skip "cannot download linux-image-${kver:-$tried} (apt-get download)"
		fi
	fi
	dpkg-deb -x "$kdir"/dl/linux-image-*.deb "$kdir/root" || skip "cannot unpack linux-image-$kver"
	rm -rf "$kdir/dl"
	depmod -b "$kdir/root" "$kver" || skip "depmod failed for $kver"
	# Boot the uncompressed ELF image directly (PVH entry, no decompression
	# in the guest): vmlinuz carries it after the stub as an xz stream (6.1)
	# or a zstd frame (6.12).
	vmlinuz=$kdir/root/boot/vmlinuz-$kver
	unpacked=0
	for fmt in '\xfd7zXZ\x00:xz' '\x28\xb5\x2f\xfd:zstd'; do
		off=$(LC_ALL=C grep -obUaP "${fmt%:*}" "$vmlinuz" | head -n 1 | cut -d: -f1) || true
		[ -n "$off" ] || continue
		tail -c +$((off + 1)) "$vmlinuz" | "${fmt#*:}" -dcq >"$kdir/vmlinux.tmp" 2>/dev/null || true
		if [ "$(head -c 4 "$kdir/vmlinux.tmp")" = $'\x7fELF' ]; then
			unpacked=1
			break
		fi
	done
	[ $unpacked -eq 1 ] || skip "could not extract vmlinux from vmlinuz-$kver (no xz or zstd image)"
	mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"
	echo "$kver" >"$cache/kver-$kernel"
fi
kdir=$cache/$kver

# ---- initramfs -------------------------------------------------------------
# busybox-static, the guest's /init and the modules (with their dependencies
# as modprobe resolves them, in load order); rebuilt when any input changes.
mods="virtio_mmio virtio_console 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm veth sch_netem"
key=$({ cat "$here/rxe-vm-init.sh"; echo "$mods"; } | cat - /bin/busybox | md5sum | cut -c1-12)
initrd=$kdir/initrd-$key.cpio.gz
if [ ! -s "$initrd" ]; then
	log "building the initramfs"
	ird=$(mktemp -d)
	mkdir -p "$ird"/{bin,sbin,proc,sys,dev,host,share,tmp,mods,etc}
	cp /bin/busybox "$ird/bin/busybox"
	for m in $mods; do
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
	rm -rf "$ird"
	mv "$initrd.tmp" "$initrd"
fi
# Another checkout's run may be using an initramfs of its own (another
# /init): only those unused for a day are removed, and this run's is marked
# used (before, a run removed every other one, and a concurrent run of an
# older checkout lost its initramfs between the lock and QEMU's start).
touch "$initrd"
find "$kdir" -maxdepth 1 -name 'initrd-*.cpio.gz' -mmin +1440 -delete 2>/dev/null || true
exec 9>&- # the cache is ready: release the lock

# ---- run ---------------------------------------------------------------------
# The share (read-write in the guest at /share) carries the command and the
# settings in, the markers and the exit status out.
share=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX") || skip "cannot create a temporary folder"
qpid=""
pids=()
# shellcheck disable=SC2317 # invoked by the traps
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
	rm -rf "$share"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

# POSIX sh quoting (the guest runs the host's /bin/sh, which may be dash).
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	printf 'cd %s 2>/dev/null || cd /\n' "$(shq "$PWD")"
	printf 'exec'
	for a in "$@"; do printf ' %s' "$(shq "$a")"; done
	printf '\n'
} >"$share/cmd"
printf '%s\n' "$PWD" >"$share/cwd"
printf '%s\n' "$mtu" >"$share/mtu"
printf '%s\n' "$netem" >"$share/netem"

# The guest's clock calibration can hang under host load (microvm has no
# fallback timer): hand it the host's TSC frequency.
# (dmesg may be restricted to root: then /proc/cpuinfo's figure.)
kmsg=$(dmesg 2>/dev/null) || kmsg=""
mhz=$(sed -n 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' <<<"$kmsg" | tail -n 1)
[ -n "$mhz" ] || mhz=$(sed -n 's/.*tsc: Detected \([0-9.]*\) MHz processor.*/\1/p' <<<"$kmsg" | tail -n 1)
[ -n "$mhz" ] || mhz=$(awk '/^cpu MHz/ {print $4; exit}' /proc/cpuinfo)
khz=$(awk -v m="${mhz:-0}" 'BEGIN {printf "%d", m * 1000}')
[ "$khz" -gt 0 ] || khz=2000000
ncpu=$(nproc)
[ "$ncpu" -gt 2 ] && ncpu=2

console_tail() {
	log "guest console (last lines):"
	tail -n 30 "$share/console" 2>/dev/null | sed 's/^/  /' >&2
	[ -s "$share/qemu.log" ] && tail -n 10 "$share/qemu.log" | sed 's/^/  qemu: /' >&2
	true
}

# One boot: COMMAND's stdout and stderr go virtio-serial ports -> FIFOs ->
# ours, live. Sets qrc (QEMU's exit status) and elapsed (seconds).
boot() {
	rm -f "$share/console" "$share/qemu.log" "$share/out.fifo" "$share/err.fifo"
	mkfifo "$share/out.fifo" "$share/err.fifo"
	cat "$share/out.fifo" &
	pids+=($!)
	cat "$share/err.fifo" >&2 &
	pids+=($!)

	rdinit=/init
	[ "$attempt" -le "${URPC_RXE_VM_BREAK_BOOTS:-0}" ] && rdinit=/no-such-init
	rest=$(left) || exit 124
	log "booting kernel $kver (mtu $mtu${netem:+, netem $netem}, ${ncpu} vCPUs, ${rest}s left)"
	start=$SECONDS
	# Software emulation only: /dev/kvm on these machines is not hardware KVM.
	timeout --kill-after=5 "$rest" qemu-system-x86_64 \
		-M microvm,x-option-roms=off,rtc=on,isa-serial=on \
		-accel tcg,thread=multi -cpu max -smp "$ncpu" -m 2048 \
		-nodefaults -no-user-config -nographic -no-reboot \
		-serial "file:$share/console" \
		-kernel "$kdir/vmlinux" -initrd "$initrd" \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 pci=off tsc_early_khz=$khz tsc=reliable rdinit=$rdinit" \
		-device virtio-serial-device \
		-chardev "file,id=out,path=$share/out.fifo" -device virtserialport,chardev=out,name=out \
		-chardev "file,id=err,path=$share/err.fifo" -device virtserialport,chardev=err,name=err \
		-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
		-device virtio-9p-device,fsdev=hostroot,mount_tag=hostroot \
		-fsdev "local,id=share,path=$share,security_model=none,multidevs=remap" \
		-device virtio-9p-device,fsdev=share,mount_tag=share \
		-fsdev "local,id=cwd,path=$PWD,security_model=none,multidevs=remap" \
		-device virtio-9p-device,fsdev=cwd,mount_tag=cwd \
		</dev/null >"$share/qemu.log" 2>&1 &
	qpid=$!
	qrc=0
	wait "$qpid" || qrc=$?
	qpid=""
	elapsed=$((SECONDS - start))
	# Were the FIFOs never opened (QEMU failed early), open them once
	# ourselves so that the readers see an end of file; then let them drain.
	for f in "$share/out.fifo" "$share/err.fifo"; do
		exec 8<>"$f"
		exec 8>&-
	done
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
}

# A guest that stops before its /init has mounted the share (the "ok"
# marker) ran nothing of COMMAND: it is booted again, $boots boots in all at
# most, and each such boot is reported with its console. Seen once in CI at 6e12386,
# the eighth boot of the Soft-RoCE stage: QEMU exit 0 after 3 s, an empty
# console (then /init's first line came after its modules had loaded), the
# cause unknown; 110 boots here, idle and beside two hogs, did not repeat it.
boots=3
attempt=1
while :; do
	boot
	[ -f "$share/status" ] || [ -d "$share/ok" ] && break
	[ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ] && break
	[ "$attempt" -lt "$boots" ] || break
	log "the guest stopped before its /init mounted the share (QEMU exit $qrc after ${elapsed}s; boot $attempt of $boots)"
	console_tail
	attempt=$((attempt + 1))
done

# Fallback when the guest found no serial ports: output left in the share.
[ -f "$share/out" ] && cat "$share/out"
[ -f "$share/err" ] && cat "$share/err" >&2

if [ -f "$share/status" ]; then
	read -r rc <"$share/status"
	log "guest finished in ${elapsed}s, exit status $rc"
	[ "$keep_log" = 1 ] && console_tail
	exit "$rc"
fi
if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
	if [ -d "$share/started" ]; then
		log "timed out after ${timeout_s}s while COMMAND ran; QEMU killed"
	else
		log "timed out after ${timeout_s}s while the guest booted; QEMU killed"
		console_tail
	fi
	exit 124
fi
console_tail
if [ -d "$share/started" ]; then
	log "the guest stopped while COMMAND ran (QEMU exit $qrc after ${elapsed}s)"
	exit 1
fi
if [ -s "$share/skip" ]; then
	skip "guest setup failed: $(head -n 1 "$share/skip")"
fi
skip "the VM did not boot (QEMU exit $qrc after ${elapsed}s, $attempt boots)"
