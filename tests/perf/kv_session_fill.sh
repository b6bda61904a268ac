#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The session-table fill of issue 31, against urpc-kv-server on udp: one
# address (127.0.0.2) opens as many sessions as the server lets it (16
# client threads x 16 sessions per server thread, under load at depth 1),
# then one process more; a legitimate client at 127.0.0.1 runs a 5 s YCSB-B
# load before and while the attacker holds its sessions. Prints the
# server's resident memory at each step, whether the extra connect was
# refused, and each load's throughput, p99 and errors. Not run by CI.
#
# Usage: tests/perf/kv_session_fill.sh [BUILD_DIR]   (default build/dev)
set -u
B=${1:-build/dev}
S=$B/apps/kv/urpc-kv-server
C=$B/apps/kv/urpc-kv-client
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
$S -p 0 -j 2 >"$T/server.log" 2>&1 &
SP=$!
for _ in $(seq 100); do grep -q listening "$T/server.log" && break; sleep 0.1; done
PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$T/server.log" | sed 's/.*://')
[ -n "$PORT" ] || { echo "the server did not start"; kill $SP; exit 1; }
rss() { echo "$1: server $(grep VmRSS /proc/$SP/status)"; }
summary() { grep -E '^result|latency|errors' "$1" | sed 's/^/    /'; }
rss start
$C -s 127.0.0.1:$PORT --load -D 5 -w B >"$T/legit0.log" 2>&1
echo "legitimate client alone (exit $?):"; summary "$T/legit0.log"
rss "after it"
$C -s 127.0.0.1:$PORT -b 127.0.0.2 --load -j 16 -S 16 -q 1 -D 40 -w C --no-preload \
	>"$T/attacker.log" 2>&1 &
A=$!
sleep 4
$C -s 127.0.0.1:$PORT -b 127.0.0.2 --load -j 1 -S 1 -q 1 -D 3 -w C --no-preload \
	>"$T/extra.log" 2>&1
echo "one more process from 127.0.0.2: exit $? ($(grep -o 'No space left on device' "$T/extra.log" | head -1))"
echo "server log: $(grep -c 'refusing a session from 127.0.0.2' "$T/server.log") refusal line(s)"
rss "attacker holding 256 sessions per server thread"
$C -s 127.0.0.1:$PORT --load -D 5 -w B >"$T/legit1.log" 2>&1
echo "legitimate client while the attacker holds its sessions (exit $?):"; summary "$T/legit1.log"
kill $A 2>/dev/null; wait $A 2>/dev/null
kill $SP; wait $SP 2>/dev/null
