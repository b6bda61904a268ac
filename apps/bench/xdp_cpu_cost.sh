#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xdp_cpu_cost.sh - instructions per RPC (client + server, user space) on
# the xdp transport beside udp's and the loop's, by cpu_cost_callgrind.sh's
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
[ -x "$bin" ] || { echo "xdp_cpu_cost: build $build first (urpc-cpu-cost)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "xdp_cpu_cost: apt-get install valgrind" >&2; exit 1; }
export N1=${N1:-20000} N2=${N2:-60000} WINDOW=${WINDOW:-8}

ns=urpcx-$$
trap 'ip netns del "$ns" 2>/dev/null' EXIT INT TERM
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
