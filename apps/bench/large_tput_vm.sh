#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# large_tput_vm.sh - urpc-large-tput on Soft-RoCE next to perftest's
# ib_read_bw and ib_write_bw, all measured in one boot of the
# tests/vm/rxe-vm.sh VM. See --help.
set -euo pipefail

prog=large_tput_vm
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build/vm-gcc
do_build=1
mtu=9000
sizes=64K,256K,1M,4M,16M
urpc_secs=5
perf_mib=96
window=4
out=""
perf_depth=""
timeout_s=420

usage() {
	cat <<'EOF_USAGE'
NAME
    large_tput_vm.sh - large-message bandwidth of urpc on Soft-RoCE, next to perftest

SYNOPSIS
    apps/bench/large_tput_vm.sh [--mtu 9000|1500] [--sizes LIST] [--duration SEC]
                                [--perftest-mib MIB] [--perftest-depth N]
                                [--window W] [--build DIR] [--no-build]
                                [--out DIR] [--timeout SEC]
                                [-- URPC-LARGE-TPUT-OPTIONS...]
    apps/bench/large_tput_vm.sh --help

DESCRIPTION
    Boots the VM of tests/vm/rxe-vm.sh once (two Soft-RoCE devices wired back
    to back: rxe0 on 10.0.0.1, the server; rxe1 on 10.0.0.2, the client)
    and in that one boot measures, for each size:

      - perftest ib_read_bw: the client (rxe1) READs SIZE bytes from the
        server's (rxe0) memory, as many operations outstanding as urpc's
        window (see --perftest-depth);
      - perftest ib_write_bw: the client WRITEs SIZE bytes to the server;
      - urpc-large-tput --transport verbs, client Rpc on rxe1 and server Rpc
        on rxe0: SIZE-byte requests the server READs from the client's
        buffer (the protocol's large-message path), W outstanding.

    It prints a markdown table: size | urpc MB/s | ib_read_bw MB/s |
    urpc/read | ib_write_bw MB/s | read/write | urpc/write. read/write is
    the cost of one RDMA READ against one WRITE of SIZE bytes on the same
    emulated wire; urpc/write is what urpc's READ path (operations above
    1 MiB cut into chunks, see docs/ENGINE.md) gets next to the sender
    WRITEing the message into a buffer the receiver advertised.

    Units: every column is MB/s with MB = 10^6 bytes. perftest prints its
    "BW average[MB/sec]" in MiB/s (its format factor is 0x100000 unless
    --report_gbits is given: perftest_parameters.c, print_report_bw); this
    script multiplies it by 1.048576.

    For each size in turn, the two perftest runs and urpc-large-tput follow
    each other, so the figures of one row are taken close together (the
    host's load drifts over a run). perftest runs in iteration mode with
    -n = max(5, MIB MiB / SIZE) iterations (about MIB MiB per run, timed by
    perftest from the first post to the last completion) and -F; each server
    is started in the background and the client retries while the server is
    not listening yet (processes start slowly under TCG).
    urpc-large-tput runs DURATION seconds per size, one process per size.
    Every run is bounded (perftest 60 s, urpc-large-tput 120 s): a hung
    transfer costs its row ("failed"), not the boot.

    Under TCG everything is emulated: absolute figures swing 10-20% between
    boots on an idle host, far more when anything else runs on it. Only the
    ratios within one boot mean anything, and only on an otherwise idle
    host. The whole run took about 90 s on the idle 2-core machine, 150 s with
    another VM running beside it.

OPTIONS
    --mtu 9000|1500   veth MTU (RoCE active MTU 4096 or 1024; default 9000)
    --sizes LIST      comma-separated sizes with K or M suffixes (KiB, MiB),
                      as urpc-large-tput takes them (default 64K,256K,1M,4M,16M)
    --duration SEC    urpc-large-tput seconds per size (default 5; 16 MiB at 60 MB/s is about 20 messages)
    --perftest-mib N  MiB each perftest run moves (default 96)
    --perftest-depth N
                      operations perftest keeps outstanding: -t N for both
                      tools and -o N (outstanding READs) for ib_read_bw.
                      Default: urpc's window, a like-for-like pair. 0:
                      perftest's own depths (-t 128, and as many READs as
                      the device allows), which on rxe made ib_read_bw swing
                      from 16 to 62 MB/s at 64 KiB between boots
    --window W        urpc-large-tput requests outstanding (default 4)
    --build DIR       build folder holding apps/bench/urpc-large-tput (default
                      build/vm-gcc, relative to the repository root; configured
                      as gcc RelWithDebInfo when it has no CMakeCache.txt).
                      Never -march=native: the emulated CPU lacks AVX-512.
    --no-build        use the binary already in DIR
    --out DIR         where the logs, the CSV and the table go (default
                      DIR/large-tput-vm-MTU)
    --timeout SEC     bound on the VM run, boot included (default 420)
    -- OPTIONS...     passed on to urpc-large-tput (e.g. --direction resp,
                      --threads 1)
    -h, --help        show this help

FILES (SIZE in bytes)
    OUT/perftest-TOOL-SIZE.client, .server   perftest's output
    OUT/urpc-SIZE.csv, OUT/urpc-SIZE.out     urpc-large-tput's CSV and output
    OUT/urpc.md                              urpc-large-tput's rows, one table
                                             (with the guest's memcpy bound)
    OUT/table.md                             the comparison table

EXIT STATUS
    0 when every measurement produced a figure; 1 when one failed (its cell
    reads "failed"; the logs say why); 77, with a SKIPPED line, when the VM
    cannot run here (rxe-vm.sh's 77); 124 on timeout; 2 for a usage or
    build error.
EOF_USAGE
}

say() { echo "$prog: $*" >&2; }
die() {
	echo "$prog: error: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--mtu | --sizes | --duration | --perftest-mib | --perftest-depth | --window | --build | --out | --timeout)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		case "$1" in
		--mtu) mtu=$2 ;;
		--sizes) sizes=$2 ;;
		--duration) urpc_secs=$2 ;;
		--perftest-mib) perf_mib=$2 ;;
		--perftest-depth) perf_depth=$2 ;;
		--window) window=$2 ;;
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
urpc_extra=("$@")

case "$mtu" in 1500 | 9000) ;; *) die "--mtu must be 1500 or 9000, got '$mtu'" ;; esac
case "$perf_mib" in '' | *[!0-9]* | 0) die "--perftest-mib must be a positive integer, got '$perf_mib'" ;; esac
case "$timeout_s" in '' | *[!0-9]* | 0) die "--timeout must be a number of seconds, got '$timeout_s'" ;; esac
case "$perf_depth" in '' | [0-9] | [1-9][0-9] | 1[0-9][0-9]) ;; *) die "--perftest-depth must be an integer from 0 to 199, got '$perf_depth'" ;; esac
case "$window" in [1-9] | [1-9][0-9]) ;; *) die "--window must be an integer from 1 to 64, got '$window'" ;; esac
[ -n "$perf_depth" ] || perf_depth=$window
[ "$perf_depth" != 0 ] || perf_depth=""

# Sizes in bytes, for perftest; urpc-large-tput checks the list itself.
size_bytes=()
IFS=, read -r -a size_list <<<"$sizes"
[ ${#size_list[@]} -gt 0 ] || die "--sizes is empty"
for s in "${size_list[@]}"; do
	case "$s" in
	*[0-9]) mul=1 n=$s ;;
	*[0-9][Kk] | *[0-9][Kk]iB) mul=1024 n=${s%%[Kk]*} ;;
	*[0-9][Mm] | *[0-9][Mm]iB) mul=1048576 n=${s%%[Mm]*} ;;
	*) die "--sizes: '$s' is not a size (bytes, or with a K or M suffix)" ;;
	esac
	case "$n" in '' | *[!0-9]*) die "--sizes: '$s' is not a size (bytes, or with a K or M suffix)" ;; esac
	size_bytes+=($((10#$n * mul)))
done

# rxe-vm.sh shares the current directory read-write with the guest: run from
# the repository root, with absolute paths under it.
cd "$root"
case "$build" in /*) ;; *) build=$root/$build ;; esac
[ -n "$out" ] || out=$build/large-tput-vm-$mtu
case "$out" in /*) ;; *) out=$root/$out ;; esac
case "$out/" in "$root"/*) ;; *) die "--out must lie inside $root (the guest writes it through the share)" ;; esac
bin=$build/apps/bench/urpc-large-tput

# ---- build ---------------------------------------------------------------------
if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		say "configuring $build (gcc, RelWithDebInfo)"
		cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc \
			-DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
	fi
	say "building urpc-large-tput in $build"
	cmake --build "$build" --target urpc-large-tput >/dev/null ||
		die "build failed (run: cmake --build $build --target urpc-large-tput)"
fi
if [ -f "$build/CMakeCache.txt" ] && grep -q 'march=native' "$build/CMakeCache.txt"; then
	die "$build uses -march=native: the emulated CPU lacks AVX-512; build for a baseline"
fi
[ -x "$bin" ] || die "no $bin (build it, or drop --no-build)"
# Catch bad urpc-large-tput options here, not after the boot.
"$bin" --transport udp --sizes "$sizes" --window "$window" --duration "$urpc_secs" \
	"${urpc_extra[@]}" --help >/dev/null 2>&1 ||
	die "urpc-large-tput rejects these options (run it with them to see why)"
# shellcheck source=tests/vm/guest_paths.sh
. "$root/tests/vm/guest_paths.sh"
vm_guest_sees "$root" "$build"
vm_guest_writes "$root" "$out"
mkdir -p "$out"
rm -f "$out"/perftest-* "$out"/urpc-* "$out"/urpc.md "$out"/table.md

# ---- the guest's part ------------------------------------------------------------
# POSIX sh (the chroot's /bin/sh). Arguments: OUT PERF_MIB DEPTH (or "")
# "SIZE:BYTES ..." then the urpc-large-tput command line without --sizes and
# --csv. For each size, the two perftest runs and urpc-large-tput follow each
# other, so the three figures of a row are taken close together in time (the
# host's load drifts). Each perftest pair gets its own TCP port, so a server
# never meets the previous run's socket. Every run is bounded: a hung
# Soft-RoCE transfer costs a row, not the boot.
# shellcheck disable=SC2016 # expanded by the guest's sh
guest='
set -u
out=$1 mib=$2 depth=$3 sizes=$4
shift 4
echo 256 >/proc/sys/vm/nr_hugepages || echo "large_tput_vm: could not reserve hugepages" >&2
gid=$URPC_RXE_GID_INDEX
port=18600
for pair in $sizes; do
	name=${pair%%:*} s=${pair#*:}
	n=$((mib * 1048576 / s))
	[ "$n" -ge 5 ] || n=5
	for t in ib_read_bw ib_write_bw; do
		popts=
		[ -z "$depth" ] || popts="-t $depth"
		[ -z "$depth" ] || [ "$t" != ib_read_bw ] || popts="$popts -o $depth"
		port=$((port + 1))
		log=$out/perftest-$t-$s
		# $popts unquoted: a word list
		timeout 90 $t -d rxe0 -x "$gid" -s "$s" -n "$n" -p "$port" -F $popts >"$log.server" 2>&1 &
		spid=$!
		try=0
		while :; do
			sleep 1
			try=$((try + 1))
			if timeout 60 $t -d rxe1 -x "$gid" -s "$s" -n "$n" -p "$port" -F $popts \
				"$URPC_RXE_SERVER_IP" >"$log.client" 2>&1; then
				echo "large_tput_vm: $t -s $s -n $n done" >&2
				break
			fi
			if [ "$try" -ge 10 ] || ! grep -q "Couldn.t connect" "$log.client"; then
				echo "large_tput_vm: $t -s $s -n $n failed (see $log.client)" >&2
				break
			fi
		done
		kill "$spid" 2>/dev/null
		wait "$spid"
	done
	if timeout 120 "$@" --sizes "$name" --csv "$out/urpc-$s.csv" >"$out/urpc-$s.out"; then
		echo "large_tput_vm: urpc-large-tput --sizes $name done" >&2
	else
		echo "large_tput_vm: urpc-large-tput --sizes $name failed (exit $?)" >&2
	fi
done
'

pairs=()
for i in "${!size_bytes[@]}"; do
	pairs+=("${size_list[$i]}:${size_bytes[$i]}")
done
say "one VM boot (MTU $mtu): for each of $sizes, perftest ib_read_bw, ib_write_bw, then urpc-large-tput"
start=$SECONDS
set +e
"$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --timeout "$timeout_s" -- \
	sh -c "$guest" sh "$out" "$perf_mib" "$perf_depth" "${pairs[*]}" \
	"$bin" --transport verbs --device rxe1 --server-device rxe0 \
	--window "$window" --duration "$urpc_secs" "${urpc_extra[@]}"
rc=$?
set -e
say "VM run: exit $rc in $((SECONDS - start)) s (logs in $out)"
case "$rc" in 77 | 124) exit "$rc" ;; esac

# ---- the tables ----------------------------------------------------------------
# urpc-large-tput's own rows (with the memcpy bound of the guest), one table.
first=1
for b in "${size_bytes[@]}"; do
	f=$out/urpc-$b.out
	[ -f "$f" ] || continue
	if [ "$first" = 1 ]; then
		sed -n '1,4p' "$f"
		first=0
	fi
	grep '^| [0-9]' "$f" || true
done >"$out/urpc.md"
cat "$out/urpc.md"
echo

# perftest's result line: bytes, iterations, BW peak, BW average (MiB/s), msg rate.
perftest_mb() {
	local f=$1 size=$2
	[ -f "$f" ] || return 0
	awk -v s="$size" '$1 == s && NF >= 5 { printf "%.1f", $4 * 1.048576; exit }' "$f"
}
urpc_mb() {
	local f=$out/urpc-$1.csv
	[ -f "$f" ] || return 0
	awk -F, -v s="$1" '$3 == s { printf "%.1f", $9; exit }' "$f"
}
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2f", a / b; else printf "-" }'
}

depth_txt=${perf_depth:-"perftest's default"}
failed=0
{
	echo "Soft-RoCE (rdma_rxe) in a TCG VM, veth MTU $mtu, one boot; MB = 10^6 bytes."
	echo "urpc-large-tput --transport verbs (client rxe1, server rxe0), window $window," \
		"${urpc_secs} s per size${urpc_extra[*]:+, ${urpc_extra[*]}};" \
		"perftest: about $perf_mib MiB per run, $depth_txt operations outstanding."
	echo
	echo "| size | urpc MB/s | ib_read_bw MB/s | urpc/read | ib_write_bw MB/s | read/write | urpc/write |"
	echo "|---:|---:|---:|---:|---:|---:|---:|"
	for i in "${!size_bytes[@]}"; do
		b=${size_bytes[$i]}
		u=$(urpc_mb "$b")
		r=$(perftest_mb "$out/perftest-ib_read_bw-$b.client" "$b")
		w=$(perftest_mb "$out/perftest-ib_write_bw-$b.client" "$b")
		[ -n "$u" ] && [ -n "$r" ] && [ -n "$w" ] || failed=1
		echo "| ${size_list[$i]} | ${u:-failed} | ${r:-failed} | $(ratio "$u" "$r") |" \
			"${w:-failed} | $(ratio "$r" "$w") | $(ratio "$u" "$w") |"
	done
} >"$out/table.md"
cat "$out/table.md"
if [ "$failed" = 1 ] || [ "$rc" -ne 0 ]; then
	say "some measurements failed (VM exit $rc); see the logs in $out"
	exit 1
fi
