#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Instructions per RPC (client and server together) of urpc-cpu-cost,
# measured with callgrind.
#
# Only the instructions executed inside the benchmark's run() function are
# counted (callgrind --collect-atstart=no --toggle-collect=run): the RPCs
# themselves, both Rpcs' event loops, the loop transport and the minimal
# echo handler, but not setup, connect (which waits on wall-clock time and
# so varies between runs) or teardown. The program runs for two counts; the
# figure is total / count, and the two should agree. Then the split of the
# larger run by source file: client, server, transport, the rest of the
# engine, the benchmark's own code, libc.
#
# Usage: cpu_cost_callgrind.sh [BINARY]
#   BINARY  urpc-cpu-cost (default: next to this script, else in build/)
# Environment: N1 (default 20000), N2 (default 120000), WINDOW (default 8),
#              COPY (1: responses copied into buffers, urpc-cpu-cost --copy;
#              default 0: read in place), CC_TARGET_US (congestion control
#              on with this target, urpc-cpu-cost --cc-target-us; default
#              off), CPU_COST_ARGS (more arguments for urpc-cpu-cost, e.g.
#              "--transport xdp --device IF --server-device IF": see
#              xdp_cpu_cost.sh), VALGRIND (default valgrind).
set -eu

N1=${N1:-20000}
N2=${N2:-120000}
WINDOW=${WINDOW:-8}
COPY=${COPY:-0}
VALGRIND=${VALGRIND:-valgrind}
here=$(cd "$(dirname "$0")" && pwd)

usage() {
	sed -n '4,22p' "$0" | sed 's/^# \{0,1\}//'
}
if [ $# -gt 1 ]; then
	usage >&2
	exit 2
fi
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
	usage
	exit 0
fi

bin=${1:-}
if [ -z "$bin" ]; then
	for c in "$here/urpc-cpu-cost" "$here/../../build/apps/bench/urpc-cpu-cost"; do
		if [ -x "$c" ]; then
			bin=$c
			break
		fi
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "cpu_cost_callgrind.sh: urpc-cpu-cost not found; build it or pass its path" >&2
	exit 2
fi
if ! command -v "$VALGRIND" >/dev/null 2>&1; then
	echo "cpu_cost_callgrind.sh: $VALGRIND not found (apt-get install valgrind)" >&2
	exit 2
fi
if [ "$N2" -le "$N1" ]; then
	echo "cpu_cost_callgrind.sh: N2 ($N2) must be larger than N1 ($N1)" >&2
	exit 2
fi

copy_arg=
how="responses read in place"
if [ "$COPY" = 1 ]; then
	copy_arg=--copy
	how="responses copied"
fi
if [ -n "${CPU_COST_ARGS:-}" ]; then
	copy_arg="$copy_arg $CPU_COST_ARGS"
	how="$how, $CPU_COST_ARGS"
fi
if [ -n "${CC_TARGET_US:-}" ]; then
	copy_arg="$copy_arg --cc-target-us $CC_TARGET_US"
	how="$how, congestion control with a $CC_TARGET_US us target"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Instructions (Ir) collected inside run() for one count. Valgrind runs one
# thread at a time; without --fair-sched the benchmark thread, which polls
# while it waits to connect, can keep the Nexus's session thread from ever
# running, and the connect times out (seen on a 2-core Debian 12 VM).
measure() {
	out="$tmp/callgrind.$1.out"
	if ! "$VALGRIND" --tool=callgrind --fair-sched=yes --collect-atstart=no --toggle-collect=run \
		--callgrind-out-file="$out" "$bin" --count "$1" --window "$WINDOW" $copy_arg \
		>"$tmp/log.$1" 2>&1; then
		echo "cpu_cost_callgrind.sh: run with --count $1 failed:" >&2
		cat "$tmp/log.$1" >&2
		exit 1
	fi
	grep -q "retransmitted 0;" "$tmp/log.$1" ||
		echo "cpu_cost_callgrind.sh: warning: retransmissions in the run of $1 RPCs" >&2
	total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out" | head -n 1)
	[ -n "$total" ] || total=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out" | head -n 1)
	if [ -z "$total" ] || [ "$total" -eq 0 ]; then
		echo "cpu_cost_callgrind.sh: no instructions collected in run() ($out)" >&2
		exit 1
	fi
	echo "$total"
}

i1=$(measure "$N1")
i2=$(measure "$N2")
echo "urpc-cpu-cost under callgrind, window $WINDOW, $how:"
echo "  $N1 RPCs: $i1 instructions"
echo "  $N2 RPCs: $i2 instructions"
awk -v i1="$i1" -v i2="$i2" -v n1="$N1" -v n2="$N2" 'BEGIN {
	printf "  instructions per RPC (client + server): %.0f at %d RPCs, %.0f at %d RPCs\n", i1 / n1, n1, i2 / n2, n2
}'

# Where they go, per RPC, at the larger count: callgrind_annotate's
# exclusive cost per source line, grouped by the file the code comes from
# (inlined code counts where it was written, not where it was inlined).
if command -v callgrind_annotate >/dev/null 2>&1; then
	echo "  split per RPC (exclusive instructions, by source file):"
	callgrind_annotate --inclusive=no --threshold=100 "$tmp/callgrind.$N2.out" 2>/dev/null |
		sed 's/ *( *[0-9.]*%) */ /' |
		awk -v n="$N2" '
		$1 ~ /^[0-9,]+$/ && $2 ~ /:/ {
			v = $1; gsub(",", "", v); f = $2; sub(/:.*/, "", f)
			if (f ~ /src\/rpc\/client/) g = "client (client.c)"
			else if (f ~ /src\/rpc\/server/) g = "server (server.c)"
			else if (f ~ /src\/transport\//) g = "transport"
			else if (f ~ /apps\//) g = "benchmark (issue, handler, continuation)"
			else if (f ~ /include\/urpc\//) g = "inline API calls (urpc.h, in the benchmark)"
			else if (f ~ /src\//) g = "engine (loop pass, TX batch, headers, states)"
			else g = "libc (memcpy, clock_gettime)"
			sum[g] += v
		}
		END { for (g in sum) printf "    %-48s %6.1f\n", g, sum[g] / n }' | sort
fi
