#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xdp_bench.sh - urpc on the xdp transport against urpc on udp, on veth
# interfaces in a network namespace of its own, interleaved (xdp, udp, xdp,
# udp, ...), N pairs, with the median and spread of the per-pair ratios and
# each side's system calls per RPC. As root.
#
# Usage: apps/bench/xdp_bench.sh [--build DIR] [--pairs N] [--duration SEC]
#                                [--out DIR]
#   --build DIR     a build with apps (default build/dev)
#   --pairs N       pairs of measurements (default 5)
#   --duration SEC  seconds per measurement (default 2)
#   --out DIR       where the CSV files go (default a fresh temporary folder)
#
# Topology (torn down by a trap): namespace urpcb-<pid> with a veth pair
# xa (10.79.0.1) <-> xb (10.79.0.2), 2 queues each. xdp: client Rpc on xa,
# server Rpc on xb: every datagram is an AF_XDP frame across the pair (copy
# mode: veth has no zero-copy). udp: the Rpcs on the same addresses; the
# kernel routes between local addresses over loopback, so udp's figure is
# its loopback one (its best case on this host), not a veth crossing. (The
# benchmarks run both Rpcs in one process, hence one namespace.)
#
# Measured: urpc-latency, 32-byte RPCs, window 1, p50 (both sides busy-
# poll); urpc-small-tput, 32-byte RPCs at windows 8 and 32, RPCs per second;
# urpc-xdp-pingpong (xdp_pingpong.c), the raw AF_XDP floor on the same pair:
# its ping-pong for the round trip, its echo with 8 and 32 frames in flight
# for the rates. Ratios are xdp / udp (and xdp / raw) of each pair. Goals of
# issue 33: p50 <= 0.8x udp and <= 1.15x raw, rate >= 1.5x udp and >= 0.9x
# the raw echo at windows 8 and 32.
set -euo pipefail

build=build/dev
pairs=5
dur=2
out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--pairs) pairs=$2; shift 2 ;;
	--duration) dur=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '4,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "xdp_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "xdp_bench: needs root (namespaces, XDP)" >&2; exit 1; }
lat=$build/apps/bench/urpc-latency
tput=$build/apps/bench/urpc-small-tput
raw=$build/apps/bench/urpc-xdp-pingpong
[ -x "$lat" ] && [ -x "$tput" ] && [ -x "$raw" ] ||
	{ echo "xdp_bench: build $build first (with the xdp transport)" >&2; exit 1; }
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"

ns=urpcb-$$
trap 'ip netns del "$ns" 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up
in_ns ip link add xa numrxqueues 2 numtxqueues 2 type veth peer name xb numrxqueues 2 numtxqueues 2
in_ns ip addr add 10.79.0.1/24 dev xa
in_ns ip addr add 10.79.0.2/24 dev xb
in_ns ip link set xa up
in_ns ip link set xb up

run() { # what transport csv
	local what=$1 tp=$2 csv=$3 dev=()
	[ "$tp" = xdp ] && dev=(--device xa --server-device xb)
	if [ "$what" = lat ]; then
		in_ns env URPC_BENCH_HOST=10.79.0.1 "$lat" --transport "$tp" "${dev[@]}" --sizes 32 \
			--duration "$dur" --pairs 1 --no-baseline --csv "$csv" >/dev/null 2>&1
	else
		in_ns env URPC_BENCH_HOST=10.79.0.1 "$tput" --transport "$tp" "${dev[@]}" --size 32 \
			--windows 8,32 --duration "$dur" --pairs 1 --no-baseline --csv "$csv" \
			>/dev/null 2>&1
	fi
}

echo "xdp_bench: $pairs pairs of ${dur} s measurements, CSV files in $out" >&2
for p in $(seq 1 "$pairs"); do
	for tp in xdp udp; do
		echo "xdp_bench: pair $p: $tp" >&2
		run lat $tp "$out/lat-$tp-$p.csv"
		run tput $tp "$out/tput-$tp-$p.csv"
	done
	echo "xdp_bench: pair $p: raw AF_XDP ping-pong" >&2
	in_ns "$raw" xa xb "$dur" 32 2>/dev/null | sed -n 's/.* p50 \([0-9.]*\) us.*/\1/p' \
		>"$out/raw-$p.txt"
	for w in 8 32; do
		echo "xdp_bench: pair $p: raw AF_XDP echo, window $w" >&2
		# "R C S": echoes per second, kicks per echo of the client and the server
		in_ns "$raw" xa xb --window "$w" "$dur" 32 2>/dev/null |
			sed -n 's/.*, \([0-9]*\) per second, kicks per echo client \([0-9.]*\) server \([0-9.]*\).*/\1 \2 \3/p' \
				>"$out/echo-$w-$p.txt"
		[ -s "$out/echo-$w-$p.txt" ] || { echo "xdp_bench: the raw echo printed no rate" >&2; exit 1; }
	done
done

# median and range of the numbers on stdin
stats() { sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
	printf "%.3g (%.3g-%.3g)", m, v[1], v[NR]}'; }
col() { # file row-filter column
	awk -F, -v c="$3" -v f="$2" 'NR > 1 && (f == "" || $3 == f) {print $c}' "$1"
}

echo "| measure | xdp median (min-max) | udp median (min-max) | xdp/udp per pair: median (min-max) | goal |"
echo "|---|---|---|---|---|"
x=$(for p in $(seq 1 "$pairs"); do col "$out/lat-xdp-$p.csv" "" 4; done | stats)
u=$(for p in $(seq 1 "$pairs"); do col "$out/lat-udp-$p.csv" "" 4; done | stats)
r=$(for p in $(seq 1 "$pairs"); do
	echo "$(col "$out/lat-xdp-$p.csv" "" 4) $(col "$out/lat-udp-$p.csv" "" 4)" | awk '{print $1/$2}'
done | stats)
echo "| p50 round trip, 32 B, us | $x | $u | $r | <= 0.8 |"
b=$(cat "$out"/raw-*.txt | stats)
r=$(for p in $(seq 1 "$pairs"); do
	echo "$(col "$out/lat-xdp-$p.csv" "" 4) $(cat "$out/raw-$p.txt")" | awk '{print $1/$2}'
done | stats)
echo "| p50 round trip, 32 B, us: xdp vs raw AF_XDP ping-pong | $x | raw $b | $r (xdp/raw) | <= 1.15 |"
for w in 8 32; do
	x=$(for p in $(seq 1 "$pairs"); do col "$out/tput-xdp-$p.csv" $w 7; done | stats)
	u=$(for p in $(seq 1 "$pairs"); do col "$out/tput-udp-$p.csv" $w 7; done | stats)
	r=$(for p in $(seq 1 "$pairs"); do
		echo "$(col "$out/tput-xdp-$p.csv" $w 7) $(col "$out/tput-udp-$p.csv" $w 7)" |
			awk '{print $1/$2}'
	done | stats)
	echo "| RPC rate, window $w, RPC/s | $x | $u | $r | >= 1.5 |"
	b=$(for p in $(seq 1 "$pairs"); do cut -d' ' -f1 "$out/echo-$w-$p.txt"; done | stats)
	r=$(for p in $(seq 1 "$pairs"); do
		echo "$(col "$out/tput-xdp-$p.csv" $w 7) $(cut -d' ' -f1 "$out/echo-$w-$p.txt")" |
			awk '{print $1/$2}'
	done | stats)
	echo "| RPC rate, window $w, RPC/s: xdp vs raw AF_XDP echo | $x | raw $b | $r (xdp/raw) | >= 0.9 |"
done
echo
echo "System calls per RPC (medians over the pairs), client tx/rx/empty, server tx/rx/empty:"
echo
echo "| measure | xdp client | xdp server | udp client | udp server |"
echo "|---|---|---|---|---|"
sys() { # kind file-prefix filter
	local c=() k
	for k in 15 16 17 19 20 21; do
		c+=("$(for p in $(seq 1 "$pairs"); do col "$2-$1-$p.csv" "$3" $k; done |
			sort -g | awk '{v[NR]=$1} END {printf "%.2f", v[int((NR+1)/2)]}')")
	done
	echo "${c[0]}/${c[1]}/${c[2]} | ${c[3]}/${c[4]}/${c[5]}"
}
echo "| latency, window 1 | $(sys xdp "$out/lat" "") | $(sys udp "$out/lat" "") |"
for w in 8 32; do
	echo "| rate, window $w | $(sys xdp "$out/tput" $w) | $(sys udp "$out/tput" $w) |"
done
echo
echo "The raw AF_XDP echo's kicks per echo (medians over the pairs; it receives with no system call):"
echo
echo "| window | client | server |"
echo "|---|---|---|"
for w in 8 32; do
	kc=$(for p in $(seq 1 "$pairs"); do cut -d' ' -f2 "$out/echo-$w-$p.txt"; done | stats)
	ks=$(for p in $(seq 1 "$pairs"); do cut -d' ' -f3 "$out/echo-$w-$p.txt"; done | stats)
	echo "| $w | $kc | $ks |"
done
