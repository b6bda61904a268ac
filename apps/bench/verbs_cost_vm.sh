#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# verbs_cost_vm.sh - user-space instructions per RPC of urpc on Soft-RoCE,
# client and server each in a process of its own under callgrind, in one
# boot of the tests/vm/rxe-vm.sh VM, beside eRPC's figures measured the same
# way (issue 34). See --help.
set -euo pipefail

prog=verbs_cost_vm
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build/vm-gcc
count=1000
warmup=100
idle=5000
windows=1,8
mtu=1500
out=""
timeout_s=900
do_build=1
do_run=1

usage() {
	cat <<'EOF_USAGE'
NAME
    verbs_cost_vm.sh - instructions per RPC of urpc on Soft-RoCE (client and
    server, windows 1 and 8, with and without the provider) and of one empty
    event-loop pass, beside eRPC's

SYNOPSIS
    apps/bench/verbs_cost_vm.sh [--count N] [--warmup N] [--idle-passes P]
                                [--windows LIST] [--mtu 1500|9000]
                                [--build DIR] [--no-build] [--no-run]
                                [--out DIR] [--timeout SEC]
    apps/bench/verbs_cost_vm.sh --help

DESCRIPTION
    Boots the VM of tests/vm/rxe-vm.sh once (server Rpc on rxe0, client Rpc
    on rxe1, the datagrams crossing the veth pair; session management over
    127.0.0.1) and, for each window W, runs urpc-verbs-cost's server and
    client there, each a process of its own under valgrind --tool=callgrind
    --separate-threads=yes --collect-atstart=no --toggle-collect='count_*'
    and --dump-after on its counted functions (valgrind from the host's root
    filesystem, which the guest chroots into). Each side runs:

      1. P empty passes of urpc_rpc_run_event_loop_once() before it has a
         session (count_idle(): callgrind part 1);
      2. N0 warm-up RPCs, then N counted ones (count_serve(): from the first
         counted request to the pass that answers the last; count_run():
         from the first counted request to its last continuation; part 2):
         32 B requests echoed, one client thread whose continuation sends
         the slot's next request, both busy-polling, heartbeats a minute
         apart, RTO 2 s;
      3. P empty passes with the session still open (count_idle(); part 3).

    Every counted function spins in the same loop, which counts its passes
    and those in which a request was handled (server) or a continuation ran
    (client); the other passes are empty. For each side

        e       = (I3 - S3) / P
        per RPC = (I2 - S2 - (passes - busy passes) x e) / N

    where I is the instructions of the main thread in a part (user space
    only: callgrind sees no kernel) and S those of the timer scans in it
    (urpc__evloop_scan_timers(), once a millisecond, with the TSC clock's
    anchor in it, and pass_rare() around it), so that neither the empty
    passes nor the scans, whose number follows the wall clock and so the
    host's load, count per RPC. "Without the provider" does the same
    with the instructions outside the rdma-core objects (libibverbs and the
    provider, librxe-rdmav*.so), from callgrind's per-object totals, parsed
    from its output files. The empty pass reported is the server's part 1:
    (I1 - S1 - A1) / P, A1 being the benchmark's own loop (its object's
    instructions); also with the scans, and without the provider; then
    its split by function.

    The eRPC column is fixed: eRPC (erpc-io/eRPC at de83dab3, infiniband
    transport on RoCE, apps/small_rpc_tput and apps/latency) measured in
    this VM by the same method (empty passes and timer scans taken out; issue
    34): window 1 client 926, server 717-722 (720 here), both 1643-1649
    (1646), window 8 both 1384-1393 (1388), without the provider 1089 at
    window 1 and 911-917 (914) at window 8, one empty pass 115. Ratios are
    urpc / eRPC.

    Instruction counts do not depend on the host's load, but how the
    passes fall does: the empty passes and scans are taken out (three runs
    at window 1 with 40 to 233 empty passes per RPC agreed within 0.6%), but
    at window 8 the number of passes with work, and so the requests per
    burst, follows the host's load (38 passes with work for 300 RPCs gave
    1272-1277 for both sides, 56-60 gave 1316). The passes are printed below
    the table: compare runs whose passes with work are alike. Under TCG callgrind is slow: 300 RPCs per window
    took about 3 minutes on the loaded 2-core host, the boot included; the
    default (1000) about twice that.

OPTIONS
    --count N          counted RPCs per window (default 1000)
    --warmup N         warm-up RPCs before them (default 100)
    --idle-passes P    empty passes counted before and after (default 5000)
    --windows LIST     comma-separated windows, 1 to 8 (default 1,8)
    --mtu 1500|9000    veth MTU (default 1500: RoCE MTU 1024)
    --build DIR        build folder with apps/bench/urpc-verbs-cost (default
                       build/vm-gcc; configured as gcc RelWithDebInfo when it
                       has none; never -march=native)
    --no-build         do not build, use what DIR has
    --no-run           boot nothing: the table again from the files in OUT
                       (with the same --count and --windows)
    --out DIR          callgrind files, logs and table.md (default DIR/verbs-cost-vm)
    --timeout SEC      bound on the VM run, boot included (default 900)
    -h, --help         show this help

OUTPUT
    A markdown table on stdout (also OUT/table.md): per RPC, user space,
    client, server and both at each window, with and without the provider,
    and the empty pass, each with eRPC's figure and the ratio; then the
    empty pass split by function (OUT/idle-split.txt, exclusive
    instructions per pass). Progress lines go to stderr.

EXIT STATUS
    0 when every figure was measured; 1 when a run failed (OUT has the
    logs); 2 for a usage or build error; 77 with a SKIPPED line when the
    VM cannot run here or valgrind is missing; 124 on timeout.
EOF_USAGE
}

say() { echo "$prog: $*" >&2; }
die() {
	echo "$prog: error: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help)
		usage
		exit 0
		;;
	--no-build)
		do_build=0
		shift
		;;
	--no-run)
		do_run=0
		do_build=0
		shift
		;;
	--count | --warmup | --idle-passes | --windows | --mtu | --build | --out | --timeout)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		case "$1" in
		--count) count=$2 ;;
		--warmup) warmup=$2 ;;
		--idle-passes) idle=$2 ;;
		--windows) windows=$2 ;;
		--mtu) mtu=$2 ;;
		--build) build=$2 ;;
		--out) out=$2 ;;
		--timeout) timeout_s=$2 ;;
		esac
		shift 2
		;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

[[ $count =~ ^[1-9][0-9]{0,6}$ ]] || die "--count wants 1 to 9999999, not '$count'"
[[ $warmup =~ ^[0-9]{1,7}$ ]] || die "--warmup wants 0 to 9999999, not '$warmup'"
[[ $idle =~ ^[1-9][0-9]{0,7}$ ]] || die "--idle-passes wants 1 to 99999999, not '$idle'"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds, not '$timeout_s'"
case $mtu in 1500 | 9000) ;; *) die "--mtu wants 1500 or 9000, not '$mtu'" ;; esac
for w in ${windows//,/ }; do
	[[ $w =~ ^[1-8]$ ]] || die "--windows: '$w' is not a window from 1 to 8"
done
[ -n "${windows//,/}" ] || die "--windows is empty"

cd "$root"
[ -n "$out" ] || out=$build/verbs-cost-vm
# shellcheck source=tests/vm/guest_paths.sh
. "$root/tests/vm/guest_paths.sh"
vm_guest_sees "$root" "$build"
vm_guest_writes "$root" "$out"
if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIPPED: valgrind is not installed on the host (apt-get install valgrind); the guest runs the host's"
	exit 77
fi
if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		say "configuring $build (gcc, RelWithDebInfo)"
		cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
	fi
	cmake --build "$build" --target urpc-verbs-cost >/dev/null || die "building urpc-verbs-cost failed"
fi
[ -f "$build/CMakeCache.txt" ] || die "$build is not a build folder"
grep -q 'march=native' "$build/CMakeCache.txt" && die "$build uses -march=native (see --help)"
bin=$build/apps/bench/urpc-verbs-cost
[ -x "$bin" ] || die "$bin is missing (build it, or drop --no-build)"
mkdir -p "$out"
[ "$do_run" = 0 ] || rm -f "$out"/*.cg* "$out"/*.log "$out"/*.rc "$out"/table.md "$out"/idle-split.txt

# The guest's part (POSIX sh): per window a server in the background and
# its client, each under callgrind with a dump after each counted function
# (parts .1: empty passes before the session, .2: the counted RPCs, .3:
# empty passes with the session open); both are stopped once both counted.
# shellcheck disable=SC2016 # expanded by the guest's sh
guest='
set -uf
out=$1 bin=$2 count=$3 warmup=$4 idle=$5 windows=$6
echo 256 >/proc/sys/vm/nr_hugepages 2>/dev/null
export URPC_TRANSPORT=verbs URPC_LOG=warn
# One --toggle-collect pattern: with two, callgrind 3.19 collected nothing.
cg="valgrind --tool=callgrind --fair-sched=yes --separate-threads=yes --collect-atstart=no --toggle-collect=count_*"
args="--count $count --warmup $warmup --idle-passes $idle --max-seconds 1800"
# Wait (at most 1800 s) until log $1 has line $2 or process $3 is gone.
await() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		kill -0 "$3" 2>/dev/null || return 1
		i=$((i + 1))
		[ $i -lt 7200 ] || return 1
		sleep 0.25
	done
}
port=31870
for w in $windows; do
	t0=$(date +%s)
	port=$((port + 1))
	$cg --dump-after=count_idle --dump-after=count_serve --callgrind-out-file=$out/srv-w$w.cg \
		"$bin" --serve --port $port --device rxe0 $args >"$out/srv-w$w.log" 2>&1 &
	spid=$!
	await "$out/srv-w$w.log" "serving on port" $spid
	$cg --dump-after=count_idle --dump-after=count_run --callgrind-out-file=$out/cli-w$w.cg \
		"$bin" --connect 127.0.0.1:$port --device rxe1 --window $w --linger $args \
		>"$out/cli-w$w.log" 2>&1 &
	cpid=$!
	await "$out/cli-w$w.log" count_idle_after $cpid
	await "$out/srv-w$w.log" count_idle_after $spid
	kill -TERM $cpid 2>/dev/null
	wait $cpid
	echo $? >"$out/cli-w$w.rc"
	kill -TERM $spid 2>/dev/null
	wait $spid
	echo $? >"$out/srv-w$w.rc"
	echo "verbs_cost_vm: window $w measured ($(( $(date +%s) - t0 )) s)" >&2
done
'
rc=0
if [ "$do_run" = 1 ]; then
	say "one VM boot (MTU $mtu): windows $windows, $idle empty passes, $warmup + $count RPCs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
	start=$(date +%s)
	set +e
	"$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --timeout "$timeout_s" -- \
		sh -c "$guest" sh "$out" "$bin" "$count" "$warmup" "$idle" "${windows//,/ }"
	rc=$?
	set -e
	case "$rc" in 77 | 124) exit "$rc" ;; esac
	say "VM run took $(($(date +%s) - start)) s"
fi

# The main thread's callgrind file of part $2 of run $1 (thread 1 with
# --separate-threads; part N is the Nth dump).
cgfile() {
	if [ -f "$1.$2-01" ]; then echo "$1.$2-01"; else echo "$1.$2"; fi
}
# "total provider timers app" instructions of a callgrind file: every cost line
# counts for the object (ob=) of the function (fn=) it belongs to, except
# the line after calls=, the callee's inclusive cost, which counts only
# when the callee (cfn=) is scan_timers: "timers" is that, plus the
# instructions of pass_rare itself (the 1 ms check around the scan); "app"
# is the benchmark's own object (its loop, handler, continuation). Names
# are compressed: "(n) name" defines n, "(n)" refers to it (ob=/cob= share
# a table, fn=/cfn= another).
objsplit() {
	awk '
	function name(s, tab,    id) {
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 1, RLENGTH)
			s = substr(s, RLENGTH + 1)
			sub(/^ /, "", s)
			if (s != "")
				tab[id] = s
			return tab[id]
		}
		return s
	}
	/^ob=/ { cur = name(substr($0, 4), obs); next }
	/^cob=/ { name(substr($0, 5), obs); next }
	/^fn=/ { fn = name(substr($0, 4), fns); next }
	/^cfn=/ { callee = name(substr($0, 5), fns); next }
	/^calls=/ { call = 1; next }
	/^[0-9+*-]/ {
		if (call) {
			call = 0
			if (callee ~ /scan_timers/ && NF >= 2)
				timers += $2
			next
		}
		if (NF >= 2) {
			tot += $2
			if (cur ~ /libibverbs|rdmav/)
				prov += $2
			if (fn ~ /^pass_rare/)
				timers += $2
			if (cur ~ /urpc-verbs-cost$/)
				app += $2
		}
		next
	}
	END { printf "%d %d %d %d\n", tot, prov, timers, app }' "$1"
}
# "passes busy" of FUNCTION's line in a log.
passes() {
	sed -n "s/^urpc-verbs-cost: $2 passes \([0-9]*\) busy \([0-9]*\) .*/\1 \2/p" "$1" | tail -n 1
}

fail=0
for w in ${windows//,/ }; do
	for s in srv cli; do
		if [ "$(cat "$out/$s-w$w.rc" 2>/dev/null)" != 0 ]; then
			say "$s-w$w failed (see $out/$s-w$w.log)"
			fail=1
		fi
	done
done

# Per RPC of one side of window $2 ($1: srv or cli, $3 its counted
# function): "all without-provider", the empty passes of the interval
# costed as the same side's empty passes with the session open (part 3),
# the timer scans taken out of both; "- -" when something is missing.
per_rpc() {
	local f1 f3 tot prov scan t3 p3 s3 p b ip
	f1=$(cgfile "$out/$1-w$2.cg" 2)
	f3=$(cgfile "$out/$1-w$2.cg" 3)
	read -r p b < <(passes "$out/$1-w$2.log" "$3") || true
	read -r ip _ < <(passes "$out/$1-w$2.log" count_idle_after) || true
	if [ ! -f "$f1" ] || [ ! -f "$f3" ] || [ -z "${p:-}" ] || [ -z "${ip:-}" ]; then
		echo "- -"
		return
	fi
	read -r tot prov scan _ < <(objsplit "$f1")
	read -r t3 p3 s3 _ < <(objsplit "$f3")
	awk -v t="$tot" -v q="$prov" -v s="$scan" -v p="$p" -v b="$b" -v t3="$t3" -v q3="$p3" \
		-v s3="$s3" -v ip="$ip" -v n="$count" 'BEGIN {
		e = (t3 - s3) / ip; en = (t3 - q3 - s3) / ip
		printf "%.0f %.0f\n", (t - s - (p - b) * e) / n, (t - q - s - (p - b) * en) / n
	}'
}
# The server's empty pass before any session (part 1 of window $1's run),
# the benchmark's own loop taken out: "pass with-scans without-provider".
empty_pass() {
	local f tot prov scan app p
	f=$(cgfile "$out/srv-w$1.cg" 1)
	read -r p _ < <(passes "$out/srv-w$1.log" count_idle) || true
	if [ ! -f "$f" ] || [ -z "${p:-}" ]; then
		echo "- - -"
		return
	fi
	read -r tot prov scan app < <(objsplit "$f")
	awk -v t="$tot" -v q="$prov" -v s="$scan" -v a="$app" -v p="$p" 'BEGIN {
		printf "%.1f %.1f %.1f\n", (t - a - s) / p, (t - a) / p, (t - a - s - q) / p
	}'
}

first=${windows%%,*}
{
	echo "| per RPC, user space (instructions) | eRPC | urpc | urpc/eRPC |"
	echo "|---|---:|---:|---:|"
	row() { # label erpc value
		if [ "$3" = - ]; then
			echo "| $1 | $2 | failed | - |"
		elif [ "$2" = - ]; then
			echo "| $1 | - | $3 | - |"
		else
			awk -v l="$1" -v r="$2" -v v="$3" 'BEGIN { printf "| %s | %s | %s | %.2f |\n", l, r, v, v / r }'
		fi
	}
	for w in ${windows//,/ }; do
		read -r ca cn < <(per_rpc cli "$w" count_run)
		read -r sa sn < <(per_rpc srv "$w" count_serve)
		ba=- bn=-
		[ "$ca" = - ] || [ "$sa" = - ] || { ba=$((ca + sa)); bn=$((cn + sn)); }
		[ "$ca" != - ] || fail=1
		[ "$sa" != - ] || fail=1
		ec=- es=- eb=- en=-
		case $w in
		1) ec=926 es=720 eb=1646 en=1089 ;;
		8) eb=1388 en=914 ;;
		esac
		row "window $w, client" "$ec" "$ca"
		row "window $w, server" "$es" "$sa"
		row "window $w, client + server" "$eb" "$ba"
		row "window $w, client + server, without the provider" "$en" "$bn"
		row "window $w, client, without the provider" - "$cn"
		row "window $w, server, without the provider" - "$sn"
	done
	read -r ea es en < <(empty_pass "$first")
	[ "$ea" != - ] || fail=1
	row "one empty event-loop pass (server, before its session)" 115 "$ea"
	row "... with the 1 ms timer scan at this run's pass rate" - "$es"
	row "... without the provider" - "$en"
	echo
	echo "Empty passes per counted RPC (subtracted at each side's own empty-pass cost), and the"
	echo "passes with work (fewer at window 8: more requests per burst, fewer instructions):"
	for w in ${windows//,/ }; do
		for s in cli srv; do
			fn=count_run
			[ "$s" = cli ] || fn=count_serve
			read -r p b < <(passes "$out/$s-w$w.log" "$fn") || true
			[ -n "${p:-}" ] || continue
			awk -v s="$s" -v w="$w" -v p="$p" -v b="$b" -v n="$count" 'BEGIN {
				printf "  window %s %s: %.1f (%d passes, %d with work)\n",
					w, s == "cli" ? "client" : "server", (p - b) / n, p, b
			}'
		done
	done
} >"$out/table.md"
cat "$out/table.md"

# Where the empty pass goes: exclusive instructions per pass, by function.
f=$(cgfile "$out/srv-w$first.cg" 1)
read -r p _ < <(passes "$out/srv-w$first.log" count_idle) || true
if [ -f "$f" ] && [ -n "${p:-}" ] && command -v callgrind_annotate >/dev/null 2>&1; then
	callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null |
		sed 's/ *( *[0-9.]*%) */ /' |
		awk -v p="$p" '$1 ~ /^[0-9,]+$/ && $2 ~ /:/ {
			v = $1; gsub(",", "", v)
			if (v / p >= 0.5) printf "  %7.1f  %s %s\n", v / p, $2, $3
		}' >"$out/idle-split.txt"
	echo
	echo "empty pass by function (exclusive instructions per pass, server before its session):"
	cat "$out/idle-split.txt"
fi
if [ "$fail" != 0 ] || [ "$rc" != 0 ]; then
	say "some runs failed (VM exit $rc); see $out"
	exit 1
fi
