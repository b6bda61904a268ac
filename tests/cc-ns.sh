#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cc-ns.sh - congestion control on a real kernel path (issue 32, docs/CC.md).
#
# Usage: tests/cc-ns.sh KV_SERVER KV_CLIENT [SECONDS]
#
# Two network namespaces joined by a veth pair; the clients' end sends
# through tc's token bucket (CC_NS_RATE, default 100mbit, a 64 KB queue):
# the port in front of the server. urpc-kv-server (udp, one thread) runs in
# one namespace; in the other, 10 urpc-kv-client processes run YCSB A
# (GET/PUT, CC_NS_VALUE-byte values, default 1024, 8 in flight each: a
# 10-way incast through the bucket) and one more client GETs 32 B values
# one at a time (the victim). The run is made twice, without and with
# congestion control on the clients (URPC_CC=swift:CC_NS_TARGET_US, default
# 2000, :CC_NS_LINE_MBPS, default 1000), SECONDS each (default 3), and
# the server with it too (URPC_CC=swift:CC_NS_TARGET_US:the bucket's rate
# in Mbit/s, or CC_NS_SERVER_CC): its fair share of the port goes back in
# every answer. CC_NS_DEFAULTS=1 adds a run with Swift at its defaults on
# both sides (URPC_CC=swift: what CC on by default would be), and
# prints per run: the bucket's drops, the incast clients' operations and
# retransmissions, the victim's p50/p99. It fails when a run does not
# complete; it reports the comparison without judging it (on a loaded
# 2-core host the figures move a lot between runs; docs/CC.md has them).
#
# CC_NS_KEEP=DIR keeps every process's output there.
#
# CC_NS_SERVER=xdp runs the server on the AF_XDP transport on its veth
# (the clients stay on udp, which speaks its wire format): the same check
# with the server's datapath bypassing the kernel's UDP stack. The bucket
# stays on the clients' side, where the incast queues.
#
# Needs root (namespaces, veth, tc); anywhere they cannot be made it says
# why and exits 77 (CTest: skipped). Namespaces urpccc-*-PID, addresses
# 10.77.0.0/24, all removed by a trap.
set -uo pipefail

prog=cc-ns.sh
srv_bin=${1:-}
cli_bin=${2:-}
secs=${3:-3}
target_us=${CC_NS_TARGET_US:-2000}
rate=${CC_NS_RATE:-100mbit}
value=${CC_NS_VALUE:-1024}
srv_tp=${CC_NS_SERVER:-udp}
rate_mbps=$(echo "$rate" | sed -n 's/^\([0-9]*\)mbit$/\1/p')
srv_cc=${CC_NS_SERVER_CC:-swift:$target_us:${rate_mbps:-1000}}
case $srv_tp in
udp | xdp) ;;
*)
	echo "$prog: CC_NS_SERVER must be udp or xdp, got '$srv_tp'" >&2
	exit 2
	;;
esac
skip() {
	echo "$prog: SKIP: $*"
	exit 77
}
[ -x "$srv_bin" ] && [ -x "$cli_bin" ] || {
	echo "usage: $prog KV_SERVER KV_CLIENT [SECONDS]" >&2
	exit 2
}
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces and tc"
command -v ip >/dev/null || skip "no ip(8)"
command -v tc >/dev/null || skip "no tc(8)"

ns_s=urpccc-s-$$
ns_c=urpccc-c-$$
veth_s=urpcccs$$
veth_c=urpcccc$$
tmp=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	ip netns del "$ns_s" 2>/dev/null
	ip netns del "$ns_c" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$ns_s" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "$ns_c" || skip "cannot create a second network namespace"
ip link add "${veth_s:0:15}" netns "$ns_s" type veth peer name "${veth_c:0:15}" netns "$ns_c" \
	2>"$tmp/err" || skip "cannot create a veth pair: $(cat "$tmp/err")"
ip -n "$ns_s" addr add 10.77.0.1/24 dev "${veth_s:0:15}"
ip -n "$ns_c" addr add 10.77.0.2/24 dev "${veth_c:0:15}"
ip -n "$ns_s" link set lo up
ip -n "$ns_c" link set lo up
ip -n "$ns_s" link set "${veth_s:0:15}" up
ip -n "$ns_c" link set "${veth_c:0:15}" up
# The bottleneck: the clients' way to the server, 1 Gbit/s, a 100 KB queue.
ip netns exec "$ns_c" tc qdisc add dev "${veth_c:0:15}" root tbf rate "$rate" burst 16kb \
	limit 64kb 2>"$tmp/err" || skip "tc cannot add a token bucket: $(cat "$tmp/err")"

peer=(--peer-timeout 20000)
srv_env=(URPC_TRANSPORT="$srv_tp")
if [ "$srv_tp" = xdp ]; then
	# The UMEM counts against the memlock limit (docs/XDP.md).
	ulimit -l unlimited 2>/dev/null || true
	srv_env+=(URPC_DEVICE="${veth_s:0:15}")
fi
# One run: $1 names it, $2 is the server's URPC_CC, the rest the clients' environment.
run() {
	local name=$1 scc=$2 port i drops0 drops1 ops=0 retx=0 p50 p99
	shift 2
	pids=()
	ip netns exec "$ns_s" env "${srv_env[@]}" URPC_CC="$scc" "$srv_bin" --host 10.77.0.1 --port 0 --threads 1 \
		--transport "$srv_tp" --memory 512 "${peer[@]}" >"$tmp/srv.$name" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\),.*/\1/p' "$tmp/srv.$name")
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || {
		cat "$tmp/srv.$name" >&2
		echo "$prog: FAIL: the server did not start" >&2
		exit 1
	}
	grep -q "transport $srv_tp" "$tmp/srv.$name" || {
		cat "$tmp/srv.$name" >&2
		echo "$prog: FAIL: the server does not say it runs on $srv_tp" >&2
		exit 1
	}
	drops0=$(ip netns exec "$ns_c" tc -s qdisc show dev "${veth_c:0:15}" |
		sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -n 1)
	for i in $(seq 10); do
		env "$@" ip netns exec "$ns_c" "$cli_bin" --server "10.77.0.1:$port" --bind 10.77.0.2 \
			--transport udp "${peer[@]}" --load --workload A --keys 64 --value-size "$value" \
			--depth 8 --duration "$secs" --seed "$i" --engine-stats \
			>"$tmp/cli.$name.$i" 2>&1 &
		pids+=($!)
	done
	env "$@" ip netns exec "$ns_c" "$cli_bin" --server "10.77.0.1:$port" --bind 10.77.0.2 \
		--transport udp "${peer[@]}" --load --workload C --keys 16 --value-size 32 --depth 1 \
		--duration "$secs" --seed 99 >"$tmp/victim.$name" 2>&1 &
	pids+=($!)
	for i in $(seq 2 12); do
		wait "${pids[$((i - 1))]}" || {
			cat "$tmp"/cli."$name".* "$tmp/victim.$name" >&2
			echo "$prog: FAIL: a client of the $name run failed" >&2
			exit 1
		}
	done
	kill "${pids[0]}" 2>/dev/null
	wait "${pids[0]}" 2>/dev/null
	pids=()
	drops1=$(ip netns exec "$ns_c" tc -s qdisc show dev "${veth_c:0:15}" |
		sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -n 1)
	for i in $(seq 10); do
		ops=$((ops + $(sed -n 's/^result: *\([0-9]*\) ops.*/\1/p' "$tmp/cli.$name.$i" | head -n 1)))
		retx=$((retx + $(sed -n 's/.* \([0-9]*\) retransmitted.*/\1/p' "$tmp/cli.$name.$i" |
			awk '{s += $1} END {print s + 0}')))
	done
	p50=$(sed -n 's/.*latency (us): p50 \([0-9.]*\) .*/\1/p' "$tmp/victim.$name" | head -n 1)
	p99=$(sed -n 's/.*latency (us): .* p99 \([0-9.]*\) .*/\1/p' "$tmp/victim.$name" | head -n 1)
	[ -n "${CC_NS_KEEP:-}" ] && cp "$tmp"/*."$name"* "$CC_NS_KEEP"/
	printf 'cc %-12s drops %7d  incast ops %7d  retransmissions %6d  victim p50 %8s us  p99 %8s us\n' \
		"$name" $((drops1 - drops0)) "$ops" "$retx" "${p50:-?}" "${p99:-?}"
}

echo "$prog: 10 clients x $value B GET/PUT + a 32 B GET victim, through $rate, ${secs} s each;" \
	"server on $srv_tp"
run off off URPC_CC=off
run "swift:$target_us" "$srv_cc" "URPC_CC=swift:$target_us:${CC_NS_LINE_MBPS:-1000}"
[ "${CC_NS_DEFAULTS:-0}" = 1 ] && run swift-default swift URPC_CC=swift
exit 0
