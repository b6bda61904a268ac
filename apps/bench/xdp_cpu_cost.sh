#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xdp_cpu_cost.sh - instructions per RPC (client + server, user space) on
# the xdp transport beside udp's and the loop's, and per round trip of the
# raw AF_XDP ping-pong (urpc-xdp-pingpong --count, both ends in one
# thread, counted inside its rounds()), by cpu_cost_callgrind.sh's
# method: urpc-cpu-cost runs both Rpcs in one thread under callgrind at two
# counts, and only the instructions inside its run() are counted (the
# RPCs, not set-up, connect or teardown). Callgrind counts user space only:
# the kernel's work behind a send kick or a kernel socket is not in the
# figure (the system calls per RPC are, in xdp_bench.sh's table). As root.
#
# Usage: apps/bench/xdp_cpu_cost.sh [--build DIR]   (default build/dev)
# Environment: N1, N2, WINDOW as for cpu_cost_callgrind.sh (defaults 20000,
# 60000, 8).
#
# Topology (torn down by a trap): namespace urpcx-<pid> with a veth pair
# ca (10.79.0.1, the client's and the Nexus's) <-> cb (10.79.0.2, the
# server's), 2 queues each. xdp: every datagram is an AF_XDP frame across
# the pair. udp: the Rpcs on the same addresses (the kernel carries them
# over loopback).
set -euo pipefail

build=build/dev
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	-h | --help) sed -n '4,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "xdp_cpu_cost: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "xdp_cpu_cost: needs root (namespaces, XDP)" >&2; exit 1; }
bin=$build/apps/bench/urpc-cpu-cost
raw=$build/apps/bench/urpc-xdp-pingpong
[ -x "$bin" ] && [ -x "$raw" ] ||
	{ echo "xdp_cpu_cost: build $build first (urpc-cpu-cost, urpc-xdp-pingpong)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "xdp_cpu_cost: apt-get install valgrind" >&2; exit 1; }
export N1=${N1:-20000} N2=${N2:-60000} WINDOW=${WINDOW:-8}

ns=urpcx-$$
tmp=$(mktemp -d)
trap 'ip netns del "$ns" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up
in_ns ip link add ca numrxqueues 2 numtxqueues 2 type veth peer name cb numrxqueues 2 numtxqueues 2
in_ns ip addr add 10.79.0.1/24 dev ca
in_ns ip addr add 10.79.0.2/24 dev cb
in_ns ip link set ca up
in_ns ip link set cb up

for tp in xdp udp loop; do
	args="--transport $tp"
	[ "$tp" = xdp ] && args="$args --device ca --server-device cb"
	echo "== $tp"
	in_ns env URPC_BENCH_HOST=10.79.0.1 CPU_COST_ARGS="$args" \
		apps/bench/cpu_cost_callgrind.sh "$bin"
done

# The raw AF_XDP floor: instructions inside rounds() at two counts.
raw_ir() {
	in_ns valgrind --tool=callgrind --fair-sched=yes --collect-atstart=no \
		"--toggle-collect=rounds*" --callgrind-out-file="$tmp/raw.$1" "$raw" ca cb --count "$1" \
		>"$tmp/raw.$1.log" 2>&1 || { cat "$tmp/raw.$1.log" >&2; exit 1; }
	sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$tmp/raw.$1" | head -n 1
}
echo "== raw AF_XDP ping-pong (urpc-xdp-pingpong --count, 32 B, window 1)"
r1=$(raw_ir "$N1")
r2=$(raw_ir "$N2")
echo "  $(grep -o 'kicks per round trip.*' "$tmp/raw.$N2.log")"
awk -v i1="$r1" -v i2="$r2" -v n1="$N1" -v n2="$N2" 'BEGIN {
	printf "  instructions per round trip (client + server): %.0f at %d, %.0f at %d\n", i1 / n1, n1, i2 / n2, n2
}'
