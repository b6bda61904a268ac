#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# busy_host.sh - does urpc keep working when the host has more busy threads
# than cores? See --help.
set -euo pipefail

prog=busy_host
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=""
hogs=2
duration=3
pairs=3
tput_pairs=5
idle_us=20
hog_cpus=""
windows=1,8,32
do_tput=1
do_kv=1

usage() {
	cat <<'EOF_USAGE'
NAME
    busy_host.sh - urpc on a host with more busy threads than cores

SYNOPSIS
    apps/bench/busy_host.sh [--bin DIR] [--hogs N] [--duration SEC]
                            [--pairs P] [--tput-pairs T] [--windows LIST]
                            [--idle-us US] [--hog-cpus LIST] [--no-tput] [--no-kv]
    apps/bench/busy_host.sh --help

DESCRIPTION
    Two measurements of issue 15's third item, on udp over 127.0.0.1:

    1. Retransmissions beside CPU hogs. Starts N processes that only spin
       (default 2), then runs urpc-small-tput at each window with its raw
       UDP echo baseline under the same load, T times each, alternately
       (urpc-small-tput --pairs). The loopback loses nothing, so every
       retransmission is a timeout that fired while the peer thread merely
       waited for a core. Prints retransmissions per 1,000 RPCs (target:
       below 1) and the median of the T urpc / raw echo ratios with their
       interquartile range and range (target: at least 0.8). urpc runs as
       an application that waits (urpc-small-tput --idle-us, the library's
       default idle_block_us); the raw echo busy-polls.

    2. The key-value demo oversubscribed. Runs urpc-kv-server and a
       3-second verified YCSB-A load of urpc-kv-client with 1 server + 1
       client thread, then with 2 + 2 (four busy threads on a 2-core
       machine), alternately P times, and prints the median ops/s and p99
       of each and the median ratio with its range (target: 2+2 at least
       0.7x the ops/s of 1+1, p99 at most 1 ms).

    Figures on a machine shared with other work mean little: the load
    average is printed before and after.

OPTIONS
    --bin DIR        the build's apps directory (default: build/release/apps,
                     built with scripts/demo.sh; else build/apps)
    --hogs N         CPU-bound processes beside the throughput runs (default 2)
    --duration SEC   seconds per throughput measurement (default 3)
    --pairs P        1+1 / 2+2 KV pairs (default 3)
    --tput-pairs T   urpc / raw echo pairs per window (default 5)
    --windows LIST   urpc-small-tput windows (default 1,8,32)
    --idle-us US     urpc-small-tput --idle-us (default 20, the library's
                     idle_block_us; 0: both urpc sides busy-poll)
    --hog-cpus LIST  pin hog i to the i-th CPU of LIST (taskset), e.g. 0,1
                     (one per core) or 0,0 (both on one core); default: the
                     kernel places them. Where the four busy threads land
                     decides much of the figure (docs/ENGINE.md).
    --no-tput, --no-kv  skip one of the two parts
    -h, --help       this text

EXIT STATUS
    0 when every run completed (whether targets were met or not is in the
    output); 1 when a run failed; 2 on bad usage.
EOF_USAGE
}

while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin="$2"; shift 2 ;;
	--hogs) hogs="$2"; shift 2 ;;
	--duration) duration="$2"; shift 2 ;;
	--pairs) pairs="$2"; shift 2 ;;
	--tput-pairs) tput_pairs="$2"; shift 2 ;;
	--windows) windows="$2"; shift 2 ;;
	--idle-us) idle_us="$2"; shift 2 ;;
	--hog-cpus) hog_cpus="$2"; shift 2 ;;
	--no-tput) do_tput=0; shift ;;
	--no-kv) do_kv=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$prog: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
for v in "$hogs" "$duration" "$pairs" "$tput_pairs" "$idle_us"; do
	case "$v" in
	'' | *[!0-9]*) echo "$prog: --hogs, --duration, --pairs, --tput-pairs and --idle-us take whole numbers" >&2; exit 2 ;;
	esac
done
if [ "$pairs" -lt 1 ] || [ "$tput_pairs" -lt 1 ] || [ "$duration" -lt 1 ]; then
	echo "$prog: --pairs, --tput-pairs and --duration must be at least 1" >&2
	exit 2
fi
hog_cpu=()
if [ -n "$hog_cpus" ]; then
	IFS=, read -r -a hog_cpu <<<"$hog_cpus"
	for c in "${hog_cpu[@]}"; do
		case "$c" in
		'' | *[!0-9]*) echo "$prog: --hog-cpus takes a comma-separated list of CPU numbers" >&2; exit 2 ;;
		esac
		if [ "$c" -ge "$(nproc)" ]; then
			echo "$prog: --hog-cpus: CPU $c is not among this machine's $(nproc)" >&2
			exit 2
		fi
	done
	command -v taskset >/dev/null || { echo "$prog: --hog-cpus needs taskset (util-linux)" >&2; exit 2; }
fi
if [ -z "$bin" ]; then
	for c in "$root/build/release/apps" "$root/build/apps"; do
		[ -x "$c/bench/urpc-small-tput" ] && bin=$c && break
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin/bench/urpc-small-tput" ] || [ ! -x "$bin/kv/urpc-kv-server" ]; then
	echo "$prog: no build found; run scripts/demo.sh or pass --bin DIR" >&2
	exit 2
fi

tmp=$(mktemp -d)
hog_pids=()
srv=""
cleanup() {
	for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$srv" ] && kill "$srv" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

# Column @2 of CSV file @1's data rows, by header name.
col() {
	awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
		c { print $c }' "$1"
}

if [ "$do_tput" = 1 ]; then
	echo "== urpc-small-tput --idle-us $idle_us beside $hogs CPU hogs${hog_cpus:+ on CPUs $hog_cpus}, ${duration} s per run, $tput_pairs pairs per window"
	for i in $(seq 0 $((hogs - 1))); do
		if [ ${#hog_cpu[@]} -gt 0 ]; then
			taskset -c "${hog_cpu[$((i % ${#hog_cpu[@]}))]}" sh -c 'while :; do :; done' &
		else
			sh -c 'while :; do :; done' &
		fi
		hog_pids+=($!)
	done
	if ! "$bin/bench/urpc-small-tput" --transport udp --windows "$windows" \
		--duration "$duration" --pairs "$tput_pairs" --idle-us "$idle_us" --csv "$tmp/tput.csv" >"$tmp/tput.log" 2>&1; then
		cat "$tmp/tput.log" >&2
		echo "$prog: urpc-small-tput failed" >&2
		exit 1
	fi
	for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	hog_pids=()
	paste -d, <(col "$tmp/tput.csv" window) <(col "$tmp/tput.csv" rpcs) \
		<(col "$tmp/tput.csv" retransmits) <(col "$tmp/tput.csv" urpc_rate) \
		<(col "$tmp/tput.csv" base_rate) <(col "$tmp/tput.csv" ratio) \
		<(col "$tmp/tput.csv" ratio_q1) <(col "$tmp/tput.csv" ratio_q3) \
		<(col "$tmp/tput.csv" ratio_min) <(col "$tmp/tput.csv" ratio_max) |
		awk -F, 'BEGIN {
			print "| window | RPCs | retransmissions | per 1,000 RPCs (< 1) | urpc RPCs/s | raw echo /s | urpc/raw, median (>= 0.8) | IQR | range |"
			print "|---:|---:|---:|---:|---:|---:|---:|---|---|"
		}
		{ printf "| %s | %s | %s | %.2f | %.0f | %.0f | %.2f | %.2f-%.2f | %.2f-%.2f |\n", $1, $2, $3,
			$2 ? 1000 * $3 / $2 : 0, $4, $5, $6, $7, $8, $9, $10 }'
fi

# One verified KV load run with @1 server and @2 client threads: "ops/s p99_us".
kv_run() {
	local port=$((30000 + RANDOM % 20000)) out
	"$bin/kv/urpc-kv-server" --port "$port" --threads "$1" >"$tmp/kvs.log" 2>&1 &
	srv=$!
	for _ in $(seq 50); do
		"$bin/kv/urpc-kv-client" --server "127.0.0.1:$port" --timeout 200 stats \
			>/dev/null 2>&1 && break
		sleep 0.1
	done
	if ! out=$("$bin/kv/urpc-kv-client" --server "127.0.0.1:$port" --verify --workload A \
		--threads "$2" --keys 10000 --value-size 256 --duration 3 2>&1); then
		echo "$out" >&2
		kill "$srv" 2>/dev/null || true
		srv=""
		return 1
	fi
	kill -TERM "$srv"
	wait "$srv" 2>/dev/null || true
	srv=""
	if ! grep -q " 0 mismatches" <<<"$out"; then
		echo "$out" >&2
		echo "$prog: the KV load run found mismatches" >&2
		return 1
	fi
	# "result: N ops in S s: R ops/s" and "  latency (us): p50 A  p99 B ..."
	echo "$(sed -n 's/^result: .*: \([0-9]*\) ops\/s.*/\1/p' <<<"$out" | tail -n 1)" \
		"$(sed -n 's/^ *latency (us):.* p99 \([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1)"
}

if [ "$do_kv" = 1 ]; then
	echo "== urpc-kv, 1+1 and 2+2 threads alternately, $pairs pairs"
	: >"$tmp/kv.txt"
	for i in $(seq "$pairs"); do
		a=$(kv_run 1 1) || exit 1
		b=$(kv_run 2 2) || exit 1
		echo "pair $i: 1+1 $a, 2+2 $b (ops/s p99_us)"
		echo "$a $b" >>"$tmp/kv.txt"
	done
	awk '
	function med(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ n++; o1[n] = $1; p1[n] = $2; o2[n] = $3; p2[n] = $4; r[n] = $1 ? $3 / $1 : 0
	  lo = (n == 1 || r[n] < lo) ? r[n] : lo; hi = (n == 1 || r[n] > hi) ? r[n] : hi }
	END {
		print "| threads | median ops/s | median p99 us |"
		print "|---|---:|---:|"
		printf "| 1 server + 1 client | %.0f | %.1f |\n", med(o1, n), med(p1, n)
		printf "| 2 server + 2 client | %.0f | %.1f |\n", med(o2, n), med(p2, n)
		printf "2+2 / 1+1 ops/s: median %.2f (range %.2f-%.2f over %d pairs; target >= 0.7, p99 <= 1000 us)\n",
			med(r, n), lo, hi, n
	}' "$tmp/kv.txt"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
