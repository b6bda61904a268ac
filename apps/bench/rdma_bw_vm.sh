#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# rdma_bw_vm.sh - urpc-rdma-bw --transport verbs on Soft-RoCE, next to
# perftest's ib_read_bw and ib_write_bw, all in one boot of the
# tests/vm/rxe-vm.sh VM. See --help.
set -euo pipefail

prog=rdma_bw_vm
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build/vm-gcc
do_build=1
mtu=9000
out=""
timeout_s=900
defaults=(--sizes 8,4K,64K,1M,16M --window 4 --pairs 3 --duration 1 --threads 1)

usage() {
	cat <<'EOF_USAGE'
NAME
    rdma_bw_vm.sh - one-sided READ/WRITE bandwidth of urpc on Soft-RoCE, next to perftest

SYNOPSIS
    apps/bench/rdma_bw_vm.sh [--mtu 9000|1500] [--build DIR] [--no-build]
                             [--out DIR] [--timeout SEC]
                             [-- URPC-RDMA-BW-OPTIONS...]
    apps/bench/rdma_bw_vm.sh --help

DESCRIPTION
    Boots the VM of tests/vm/rxe-vm.sh once (two Soft-RoCE devices wired back
    to back: rxe0 on 10.0.0.1, the server; rxe1 on 10.0.0.2, the client),
    reserves 256 2 MiB hugepages in the guest and runs in it

        urpc-rdma-bw --transport verbs --device rxe1 --server-device rxe0
                     --csv OUT/rdma-bw.csv OPTIONS...

    where OPTIONS are the ones given after --, or by default

        --sizes 8,4K,64K,1M,16M --window 4 --pairs 3 --duration 1 --threads 1

    (--threads 1: both Rpcs busy-polled from one thread, as perftest's client
    polls one CQ, which leaves the guest's other vCPU to Soft-RoCE's kernel
    work; on verbs the owner of the region needs no polling for the peer's
    operations.)

    urpc-rdma-bw measures urpc_rdma_read and urpc_rdma_write (client Rpc on
    rxe1, the region exposed by the server Rpc on rxe0), then runs perftest's
    ib_read_bw or ib_write_bw between the same two devices with the same
    window (-t W, and -o W for READ), in turn, PAIRS times per size and
    operation: the urpc figure and perftest's are taken seconds apart in
    the same boot, and the table gives the median of the per-pair ratios
    with their spread (urpc-rdma-bw --help has the method).

    Under TCG everything is emulated: absolute figures swing between boots
    and collapse when anything else runs on the host. Only the ratios
    within one boot mean anything, and only on an otherwise quiet host:
    the load average is printed before and after the run.

OPTIONS
    --mtu 9000|1500   veth MTU (RoCE active MTU 4096 or 1024; default 9000)
    --build DIR       build folder holding apps/bench/urpc-rdma-bw (default
                      build/vm-gcc, relative to the repository root; configured
                      as gcc RelWithDebInfo when it has no CMakeCache.txt).
                      Never -march=native: the emulated CPU lacks AVX-512.
    --no-build        use the binary already in DIR
    --out DIR         where the output, the CSV and the table go (default
                      DIR/rdma-bw-vm-MTU; it must lie inside the repository,
                      which the guest writes through its share)
    --timeout SEC     bound on the VM run, boot included (default 900)
    -- OPTIONS...     urpc-rdma-bw's options, instead of the defaults above
    -h, --help        show this help

FILES
    OUT/table.md       urpc-rdma-bw's stdout: the run's line and the table
    OUT/rdma-bw.csv    its CSV rows
    OUT/rdma-bw.err    its stderr: progress per pair, perftest runs

EXIT STATUS
    0 when urpc-rdma-bw completed (exit 0 in the guest); 1 when it failed
    (see OUT/rdma-bw.err); 77, with a SKIPPED line, when the VM cannot run
    here (rxe-vm.sh's 77); 124 on timeout; 2 for a usage or build error.

EXAMPLE
    apps/bench/rdma_bw_vm.sh
    apps/bench/rdma_bw_vm.sh --mtu 1500 -- --sizes 64K,1M --ops write --pairs 5
EOF_USAGE
}

say() { echo "$prog: $*" >&2; }
die() {
	echo "$prog: error: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--mtu | --build | --out | --timeout)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		case "$1" in
		--mtu) mtu=$2 ;;
		--build) build=$2 ;;
		--out) out=$2 ;;
		--timeout) timeout_s=$2 ;;
		esac
		shift 2
		;;
	--no-build)
		do_build=0
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
[ $# -eq 0 ] || defaults=("$@")

case "$mtu" in 1500 | 9000) ;; *) die "--mtu must be 1500 or 9000, got '$mtu'" ;; esac
case "$timeout_s" in '' | *[!0-9]* | 0) die "--timeout must be a number of seconds, got '$timeout_s'" ;; esac

# rxe-vm.sh shares the current directory read-write with the guest: run from
# the repository root, with absolute paths under it.
cd "$root"
case "$build" in /*) ;; *) build=$root/$build ;; esac
[ -n "$out" ] || out=$build/rdma-bw-vm-$mtu
case "$out" in /*) ;; *) out=$root/$out ;; esac
case "$out/" in "$root"/*) ;; *) die "--out must lie inside $root (the guest writes it through the share)" ;; esac
bin=$build/apps/bench/urpc-rdma-bw

if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		say "configuring $build (gcc, RelWithDebInfo)"
		cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc \
			-DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
	fi
	say "building urpc-rdma-bw in $build"
	cmake --build "$build" --target urpc-rdma-bw >/dev/null ||
		die "build failed (run: cmake --build $build --target urpc-rdma-bw)"
fi
if [ -f "$build/CMakeCache.txt" ] && grep -q 'march=native' "$build/CMakeCache.txt"; then
	die "$build uses -march=native: the emulated CPU lacks AVX-512; build for a baseline"
fi
[ -x "$bin" ] || die "no $bin (build it, or drop --no-build)"
# Catch bad options here, not after the boot.
"$bin" --transport verbs "${defaults[@]}" --help >/dev/null 2>&1 ||
	die "urpc-rdma-bw rejects these options (run it with them to see why)"
# shellcheck source=tests/vm/guest_paths.sh
. "$root/tests/vm/guest_paths.sh"
vm_guest_sees "$root" "$build"
vm_guest_writes "$root" "$out"
mkdir -p "$out"
rm -f "$out/table.md" "$out/rdma-bw.csv" "$out/rdma-bw.err"

# The guest's part (POSIX sh, the chroot's /bin/sh): OUT, then the command.
# shellcheck disable=SC2016 # expanded by the guest's sh
guest='
out=$1
shift
echo 256 >/proc/sys/vm/nr_hugepages || echo "rdma_bw_vm: could not reserve hugepages" >&2
"$@" --csv "$out/rdma-bw.csv" >"$out/table.md" 2>"$out/rdma-bw.err"
'

say "host load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
say "one VM boot (MTU $mtu): urpc-rdma-bw --transport verbs ${defaults[*]}"
start=$SECONDS
set +e
"$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --timeout "$timeout_s" -- \
	sh -c "$guest" sh "$out" "$bin" --transport verbs --device rxe1 --server-device rxe0 \
	"${defaults[@]}"
rc=$?
set -e
say "VM run: exit $rc in $((SECONDS - start)) s (output in $out)"
say "host load after: $(cut -d' ' -f1-3 /proc/loadavg)"
case "$rc" in 77 | 124) exit "$rc" ;; esac
[ -f "$out/table.md" ] && cat "$out/table.md"
if [ "$rc" -ne 0 ]; then
	say "urpc-rdma-bw failed in the guest (exit $rc); the end of $out/rdma-bw.err:"
	tail -n 5 "$out/rdma-bw.err" >&2 2>/dev/null || true
	exit 1
fi
