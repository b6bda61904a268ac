#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xdp-stage.sh - the xdp transport's stage of the test suite: its builds of
# the transport contract, end-to-end, loss, large-message and remote-memory
# suites, on veth interfaces in a network namespace of their own, in native
# and in generic XDP mode, plus xdp <-> udp across two namespaces. As root.
#
# Usage: tests/xdp-stage.sh [--build DIR]     (default build/ci-gcc, built already)
#
# Topology (torn down by a trap, addresses only inside the namespaces):
#   urpcx-<pid>:  bridge br0; veths xa, xb, xc (2 queues each), 10.77.0.1-3/24,
#                 their other ends xa-p, xb-p, xc-p on br0. The suites put the
#                 client on xa (URPC_TEST_DEVICE_A) and servers on xb, xc; the
#                 frames cross the bridge. The loss run puts netem loss 5% on
#                 the bridge ports (AF_XDP's copy-mode send skips the sending
#                 veth's qdisc, the bridge port's is on the way).
#   urpcy-<pid> / urpcz-<pid>: a veth pair ya (10.78.0.1) / yb (10.78.0.2),
#                 one end in each: an xdp server and a udp client (urpc-hello-*)
#                 and the reverse, in separate processes; then what a clean
#                 exit and a kill -9 leave attached (urpc-info --xdp,
#                 --xdp-cleanup); a second process's xdp endpoint on an
#                 interface another process uses is refused, naming the cause,
#                 unless each binds its own queues (URPC_XDP_QUEUES).
#
# Exit status: 0 when every run passed; 77 (reported SKIPPED) only where
# namespaces or BPF are unavailable (not root, no `ip`, no AF_XDP); 1 on a
# failure.
set -uo pipefail

build=build/ci-gcc
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	-h | --help) sed -n '4,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "xdp-stage: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
cd "$(dirname "$0")/.."
tests=$build/tests
skip() { echo "xdp-stage: SKIPPED: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces and XDP need CAP_NET_ADMIN, CAP_BPF)"
command -v ip >/dev/null || skip "no ip command (apt-get install iproute2)"
[ -x "$tests/test_contract_xdp" ] || { echo "xdp-stage: $tests/test_contract_xdp not built" >&2; exit 1; }
grep -q "URPC_HAVE_XDP:INTERNAL=1\|xdp transport 1" "$build/CMakeCache.txt" 2>/dev/null ||
	"$tests/test_contract_xdp" --list >/dev/null 2>&1 || true

ns=urpcx-$$
ns1=urpcy-$$
ns2=urpcz-$$
cleanup() {
	ip netns del "$ns" 2>/dev/null
	ip netns del "$ns1" 2>/dev/null
	ip netns del "$ns2" 2>/dev/null
}
# INT and TERM end the run (a trap that only cleaned up would let it go on)
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
in_ns() { ip netns exec "$ns" "$@"; }

ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
in_ns ip link set lo up
in_ns ip link add br0 type bridge || skip "no bridge support in this kernel"
in_ns ip link set br0 up
i=1
for d in xa xb xc; do
	in_ns ip link add $d numrxqueues 2 numtxqueues 2 type veth peer name $d-p numrxqueues 2 \
		numtxqueues 2 || skip "no veth support in this kernel"
	in_ns ip link set $d-p master br0
	in_ns ip addr add 10.77.0.$i/24 dev $d
	in_ns ip link set $d-p up
	in_ns ip link set $d up
	in_ns sysctl -qw net.ipv4.conf.$d.accept_local=1 net.ipv4.conf.$d.rp_filter=0
	i=$((i + 1))
done
in_ns sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.all.rp_filter=0

env_x=(URPC_TEST_DEVICE_A=xa URPC_TEST_DEVICE_B=xb URPC_TEST_DEVICE_C=xc URPC_TEST_HOST=10.77.0.1
	URPC_TEST_HOST_C=10.77.0.3)
fail=0
declare -a summary

run() { # name mode binary [env...]
	local name=$1 mode=$2 bin=$3 out rc
	shift 3
	out=$(timeout 300 ip netns exec "$ns" env "${env_x[@]}" URPC_XDP_MODE="$mode" "$@" \
		"$tests/$bin" --jobs 1 2>&1)
	rc=$?
	echo "$out" | grep -E "^\[(FAIL|SKIP|====)\]|Assertion|SKIPPED" | sed "s/^/  $name: /"
	if [ $rc -ne 0 ] || echo "$out" | grep -q "^\[FAIL\]"; then
		summary+=("FAIL  $name")
		fail=1
		echo "$out" | tail -40
	elif echo "$out" | grep -q "Tested: 0 "; then
		summary+=("FAIL  $name (ran nothing)")
		fail=1
	elif left=$(attached); [ -n "$left" ]; then
		# Every case destroys its endpoints, skipped ones included: none may
		# leave the program behind for the next run to find.
		summary+=("FAIL  $name (left an XDP program on$left)")
		fail=1
		for d in $left; do
			in_ns "$build/tools/urpc-info" --xdp-cleanup "$d" >/dev/null 2>&1
		done
	else
		summary+=("ok    $name")
	fi
}

# The interfaces of the namespace that still have an XDP program attached.
attached() {
	local d
	for d in xa xb xc; do
		in_ns ip link show dev $d | grep -q "prog/xdp" && printf ' %s' $d
	done
}

# AF_XDP and BPF themselves: one contract case says so when the kernel, the
# build or the container lacks them (the only reasons to skip).
probe=$(ip netns exec "$ns" env "${env_x[@]}" "$tests/test_contract_xdp" --jobs 1 \
	--verbose --filter 'contract_xdp/datagram_bursts*' 2>&1)
why=$(echo "$probe" | grep -o "this kernel has no AF_XDP.*\|this build has no xdp[^:]*\|loading the XDP program needs.*\|attaching to .* need.*" | head -1)
[ -z "$why" ] || skip "$why"
echo "$probe" | grep -q "Passing: 1" || { echo "$probe" | tail -20; echo "xdp-stage: the probe case failed" >&2; }

for mode in native generic; do
	run "contract-$mode" $mode test_contract_xdp
	run "xdp-frames-$mode" $mode test_xdp
	run "e2e-$mode" $mode test_e2e_xdp
done
run large-native native test_large_xdp
run rmem-batch-native native test_rmem_batch_xdp
run rmem-native native test_rmem_xdp

# Loss: 5% of the frames crossing the bridge dropped, both ways: netem on
# the bridge ports where the kernel has sch_netem, else a bridge-family
# nftables rule (numgen random mod 20). The loss test then asserts that the
# client retransmitted (at least 5% of the RPCs) and every RPC's handler and
# continuation ran exactly once; the large-message suite runs there too.
loss_how=""
if in_ns tc qdisc add dev xa-p root netem loss 5% 2>/dev/null &&
	in_ns tc qdisc add dev xb-p root netem loss 5% 2>/dev/null; then
	loss_how=netem
	echo "xdp-stage: loss by netem: loss 5% on the bridge ports xa-p, xb-p"
else
	in_ns tc qdisc del dev xa-p root 2>/dev/null
	if command -v nft >/dev/null && in_ns nft -f - <<'NFT'
table bridge urpc_loss {
	chain lossy {
		type filter hook forward priority 0; policy accept;
		ether type ip ip protocol udp numgen random mod 20 == 0 counter drop
	}
}
NFT
	then
		loss_how=nft
		echo "xdp-stage: loss by nftables (this kernel has no sch_netem): 1 in 20 IPv4 UDP frames forwarded by br0 dropped"
	fi
fi
if [ -n "$loss_how" ]; then
	run "loss-5pct-$loss_how" native test_loss_xdp URPC_TEST_EXPECT_LOSS=5
	run "loss-5pct-$loss_how-generic" generic test_loss_xdp URPC_TEST_EXPECT_LOSS=5
	run "large-loss-5pct-$loss_how" native test_large_xdp
	if [ "$loss_how" = netem ]; then
		in_ns tc qdisc del dev xa-p root
		in_ns tc qdisc del dev xb-p root
	else
		echo "xdp-stage: $(in_ns nft list table bridge urpc_loss | grep -o 'counter packets [0-9]*' |
			sed 's/counter packets/frames dropped by the loss rule:/')"
		in_ns nft delete table bridge urpc_loss
	fi
else
	echo "xdp-stage: no way to lose frames here (no sch_netem, no nft: apt-get install nftables)"
	summary+=("SKIP  loss (no sch_netem and no nft: scripts/deps.sh installs nftables)")
fi

# The benchmarks' raw AF_XDP floor (apps/bench/xdp_pingpong.c): its
# ping-pong and its windowed echo run and report, on a veth pair of their
# own as in xdp_bench.sh (across the bridge a forwarded frame may land on
# the queue its hash picks, where this baseline has no socket).
raw=$build/apps/bench/urpc-xdp-pingpong
if [ -x "$raw" ]; then
	in_ns ip link add ra numrxqueues 2 numtxqueues 2 type veth peer name rb numrxqueues 2 \
		numtxqueues 2
	in_ns ip link set ra up
	in_ns ip link set rb up
	out=$(in_ns timeout 60 "$raw" ra rb 0.3 32 2>&1; in_ns timeout 60 "$raw" ra rb --window 8 0.3 32 2>&1)
	in_ns ip link del ra
	if echo "$out" | grep -q "^xdp-pingpong size 32: [1-9][0-9]* round trips" &&
		echo "$out" | grep -q "^xdp-echo size 32 window 8: [1-9][0-9]* echoes"; then
		summary+=("ok    raw-af-xdp-baselines ($(echo "$out" | grep -o '[0-9]* per second') echoes at window 8)")
	else
		summary+=("FAIL  raw-af-xdp-baselines")
		fail=1
		echo "$out" | grep -v "^lib" | tail -10
	fi
fi

# xdp <-> udp across two namespaces, separate processes (urpc-hello-server/-client).
srv=$build/apps/hello/urpc-hello-server
cli=$build/apps/hello/urpc-hello-client
if [ -x "$srv" ] && [ -x "$cli" ]; then
	ip netns add "$ns1" && ip netns add "$ns2"
	ip link add ya netns "$ns1" numrxqueues 2 numtxqueues 2 type veth peer name yb netns "$ns2" \
		numrxqueues 2 numtxqueues 2
	ip -n "$ns1" addr add 10.78.0.1/24 dev ya
	ip -n "$ns2" addr add 10.78.0.2/24 dev yb
	for n in "$ns1" "$ns2"; do ip -n "$n" link set lo up; done
	ip -n "$ns1" link set ya up
	ip -n "$ns2" link set yb up
	for pair in "xdp udp" "udp xdp" "xdp xdp"; do
		set -- $pair
		name="cross-$1-server-$2-client"
		log=$(mktemp)
		ip netns exec "$ns2" env URPC_DEVICE=yb timeout 60 "$srv" -H 10.78.0.2 -p 31850 \
			-t "$1" -n 20 >"$log" 2>&1 &
		spid=$!
		ok=1
		# the server's Rpc exists once it says it listens (10 s at most)
		for k in $(seq 1 100); do
			grep -q listening "$log" && break
			sleep 0.1
		done
		for k in $(seq 1 20); do
			out=$(ip netns exec "$ns1" env URPC_DEVICE=ya "$cli" -s 10.78.0.2:31850 \
				-b 10.78.0.1 -t "$2" -T 5000 "n$k" 2>&1)
			echo "$out" | grep -q "Hello, n$k!" || { ok=0; echo "$out" | tail -5; break; }
		done
		wait "$spid" || ok=0
		if [ $ok -eq 1 ]; then
			summary+=("ok    $name (20 processes' RPCs)")
		else
			summary+=("FAIL  $name")
			fail=1
			tail -20 "$log"
		fi
		rm -f "$log"
	done
	# A clean exit leaves no program; a crash (kill -9) leaves it, and the clean-up detaches it.
	info=$build/tools/urpc-info
	if [ -x "$info" ]; then
		name="destroy-detaches-and-crash-cleanup"
		left=$(ip netns exec "$ns2" "$info" --xdp yb)
		log=$(mktemp)
		ip netns exec "$ns2" env URPC_DEVICE=yb "$srv" -H 10.78.0.2 -p 31851 -t xdp >"$log" 2>&1 &
		spid=$!
		for k in $(seq 1 100); do
			grep -q listening "$log" && break
			sleep 0.1
		done
		kill -9 "$spid"
		wait "$spid" 2>/dev/null
		crashed=$(ip netns exec "$ns2" "$info" --xdp yb)
		ip netns exec "$ns2" "$info" --xdp-cleanup yb >/dev/null
		after=$(ip netns exec "$ns2" "$info" --xdp yb)
		rm -f "$log"
		if echo "$left" | grep -q "no XDP program" && echo "$crashed" | grep -q "1 endpoint" &&
			echo "$after" | grep -q "no XDP program"; then
			summary+=("ok    $name")
		else
			summary+=("FAIL  $name")
			fail=1
			printf '%s\n' "after clean exits: $left" "after kill -9: $crashed" "after clean-up: $after"
		fi
	fi
	# Two processes on one interface: the kernel gives a queue one UMEM, which
	# urpc shares among one process's endpoints only; the second process's
	# endpoint is refused with an error naming the cause, the first serves on.
	name="second-process-on-one-interface-refused"
	log=$(mktemp)
	log2=$(mktemp)
	ip netns exec "$ns2" env URPC_DEVICE=yb timeout 60 "$srv" -H 10.78.0.2 -p 31852 -t xdp \
		-n 1 >"$log" 2>&1 &
	spid=$!
	for k in $(seq 1 100); do
		grep -q listening "$log" && break
		sleep 0.1
	done
	ip netns exec "$ns2" env URPC_DEVICE=yb timeout 30 "$srv" -H 10.78.0.2 -p 31853 -t xdp \
		-n 1 >"$log2" 2>&1
	rc2=$?
	out=$(ip netns exec "$ns1" env URPC_DEVICE=ya "$cli" -s 10.78.0.2:31852 -b 10.78.0.1 \
		-t xdp -T 5000 first 2>&1)
	wait "$spid"
	rc1=$?
	if [ $rc2 -ne 0 ] && [ $rc2 -ne 124 ] && grep -q "held by another process" "$log2" &&
		echo "$out" | grep -q "Hello, first!" && [ $rc1 -eq 0 ]; then
		summary+=("ok    $name")
		grep -o "queue .* held by another process.*" "$log2" | head -1 | sed 's/^/  second process: /'
	else
		summary+=("FAIL  $name")
		fail=1
		printf '%s\n' "second (rc $rc2):" "$(tail -5 "$log2")" "first (rc $rc1):" "$(tail -5 "$log")" "$out"
	fi
	rm -f "$log" "$log2"
	# Two processes on one interface, each on its own queue (URPC_XDP_QUEUES):
	# on veth a frame sent from queue Q arrives on the peer's queue Q, so
	# clients on the same queue reach a server by AF_XDP, clients on the
	# other queue through the servers' and their own kernel sockets.
	name="two-processes-on-their-own-queues"
	log=$(mktemp)
	log2=$(mktemp)
	ip netns exec "$ns2" env URPC_DEVICE=yb URPC_XDP_QUEUES=0 timeout 60 "$srv" -H 10.78.0.2 \
		-p 31854 -t xdp -n 4 >"$log" 2>&1 &
	spid=$!
	ip netns exec "$ns2" env URPC_DEVICE=yb URPC_XDP_QUEUES=1 timeout 60 "$srv" -H 10.78.0.2 \
		-p 31855 -t xdp -n 4 >"$log2" 2>&1 &
	spid2=$!
	for k in $(seq 1 100); do
		grep -q listening "$log" && grep -q listening "$log2" && break
		sleep 0.1
	done
	ok=1
	for k in 1 2; do
		for pq in "31854 0" "31855 1" "31854 1" "31855 0"; do
			set -- $pq
			out=$(ip netns exec "$ns1" env URPC_DEVICE=ya URPC_XDP_QUEUES=$2 "$cli" \
				-s 10.78.0.2:$1 -b 10.78.0.1 -t xdp -T 5000 "q$2p$1r$k" 2>&1)
			echo "$out" | grep -q "Hello, q$2p$1r$k!" ||
				{ ok=0; echo "port $1 from queue $2: $(echo "$out" | tail -3)"; }
		done
	done
	wait "$spid" || ok=0
	wait "$spid2" || ok=0
	if [ $ok -eq 1 ]; then
		summary+=("ok    $name (2 servers, 16 client processes)")
	else
		summary+=("FAIL  $name")
		fail=1
		printf '%s\n' "$(tail -5 "$log")" "$(tail -5 "$log2")"
	fi
	rm -f "$log" "$log2"
fi

echo
echo "xdp-stage summary:"
printf '  %s\n' "${summary[@]}"
exit $fail
