#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Instructions the authenticated control plane adds per heartbeat (sender
# and receiver together), with callgrind: urpc-nx-auth-cost's run_signed
# minus its run_plain, over N heartbeats each (see nx_auth_cost.c).
# Usage: nx_auth_cost.sh BINARY [N]   (default N 100000)
set -eu
bin=$1
n=${2:-100000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {
	valgrind --tool=callgrind --collect-atstart=no --toggle-collect="run_$1" \
		--callgrind-out-file="$out/$1" "$bin" "$1" "$n" >/dev/null 2>&1
	sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out/$1" | head -1
}
s=$(count signed)
p=$(count plain)
echo "heartbeats: $n; instructions signed $s, plain $p"
echo "per heartbeat: signed $((s / n)), plain $((p / n)), the MAC adds $(((s - p) / n)) (sign + check)"
