#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run_suite.sh - the small-message benchmark suite on one transport, with a
# markdown results table and the targets of issue 6. See --help.
set -euo pipefail

prog=run_suite
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
transport=udp
build=build/h-suite
do_build=1
out=""
duration=""
sizes=""
windows=1,8,32
batch=""
pairs=""
sessions=1,1000,20000
ping_ms=100
mtu=1500
timeout_s=300
kernel=6.12
results=""
cpu_cost=1
plot=0

usage() {
	cat <<'EOF_USAGE'
NAME
    run_suite.sh - run the urpc small-message benchmarks and write a results table

SYNOPSIS
    apps/bench/run_suite.sh [--transport udp|loop|verbs] [--duration SEC]
                            [--pairs N] [--sizes LIST] [--windows LIST] [--batch B]
                            [--sessions LIST] [--ping-ms MS] [--no-cpu-cost]
                            [--plot] [--build DIR] [--no-build] [--out DIR]
                            [--mtu 1500|9000] [--timeout SEC] [--results FILE]
    apps/bench/run_suite.sh --help

DESCRIPTION
    Runs, on the chosen transport, each program of apps/bench with its
    baseline measured in the same run, keeps their tables, CSVs and logs,
    and writes OUT/results.md: the machine, the exact commands, the tables,
    and where each target of issue 6 stands (met or not, with the figure):

      udp    urpc-latency (raw UDP ping-pong), urpc-small-tput (raw UDP echo
             at the same window), urpc-sessions (up to 20,000 sessions on one
             server Rpc), and cpu_cost_callgrind.sh (instructions per RPC).
             Targets: p50 <= 1.15x the ping-pong; rate >= 0.9x the echo at
             each window; 20,000 sessions all active at >= 0.8x the rate of
             1,000, <= 4 KiB per server session (and 100,000 connected in
             <= 5 s when --sessions has 100000); <= 500 instructions/RPC.
      loop   the same programs without baselines (loop has no raw
             counterpart), sessions and instructions per RPC.
      verbs  boots the Soft-RoCE VM of tests/vm/rxe-vm.sh once (client on
             rxe1, server on rxe0) and runs urpc-latency (next to perftest
             ib_send_lat -c UD and -c RC; perftest prints half the round
             trip, so the table doubles it) and urpc-small-tput (next to
             ib_send_bw -c UD's message rate). Target: p50 round trip <=
             1.3x twice ib_send_lat -c UD's typical, in the same boot. Under
             TCG everything is emulated: only ratios within one boot mean
             anything. About 75 s on the 2-core development machine.

    Busy-polling benchmarks need the machine to themselves: with other
    processes competing for the cores, urpc and its baseline both suffer,
    but not equally. So urpc-latency and urpc-small-tput measure urpc and
    its baseline N times in turn (--pairs), and each target row gives the
    median of the per-pair ratios with their interquartile range and
    their range (min-max); the tables also give the system calls per RPC
    of each side, urpc's and the baseline's. The results name the load
    average at the start and at the end.

OPTIONS
    --transport udp|loop|verbs   what to measure (default udp)
    --duration SEC     seconds per measurement (default 2; verbs 1)
    --pairs N          urpc-latency and urpc-small-tput: measurements of urpc
                       and of the baseline, in turn (default 5; verbs 1)
    --sizes LIST       urpc-latency sizes (default 32,256,1024; verbs 32,512)
    --windows LIST     urpc-small-tput windows (default 1,8,32)
    --batch B          urpc-small-tput batch (default: the window)
    --sessions LIST    urpc-sessions counts (default 1,1000,20000; not on verbs)
    --ping-ms MS       urpc-sessions heartbeat interval (default 100, the
                       library's: heartbeats are per peer process)
    --no-cpu-cost      skip cpu_cost_callgrind.sh (needs valgrind)
    --plot             also draw every CSV with plot.sh (gnuplot)
    --build DIR        build folder (default build/h-suite, relative to the
                       repository root; configured as gcc RelWithDebInfo when
                       it has no CMakeCache.txt). For verbs never
                       -march=native: the emulated CPU lacks AVX-512.
    --no-build         use the binaries already in DIR
    --out DIR          where results go (default DIR/suite-TRANSPORT)
    --mtu 1500|9000    verbs: veth MTU of the VM (default 1500: RoCE MTU 1024)
    --timeout SEC      verbs: bound on the VM run, boot included (default 300)
    --kernel 6.12|stock  verbs: the guest's kernel (rxe-vm.sh --kernel; default
                       6.12). Round trips on rxe take about 2.5x longer on
                       6.12 than on 6.1 ("stock") in the same machine, for
                       perftest as for urpc: compare like with like.
    --results FILE     also put the results into FILE (docs/RESULTS.md, which
                       README.md links): the section of this transport (verbs
                       on the stock kernel has its own), between its two
                       marker lines, is replaced; the other sections stay.
                       FILE is created when missing.
    -h, --help         show this help

FILES
    OUT/results.md                  the results (also printed)
    OUT/NAME.md, NAME.csv, NAME.log each program's table, CSV and stderr
    OUT/latency-cdf.csv             latency distributions (udp, loop)
    OUT/cpu_cost.log                cpu_cost_callgrind.sh's output

EXIT STATUS
    0 when every program ran and printed its figures (whether or not the
    targets are met: results.md says); 1 when one failed; 2 on bad usage or
    a failed build; 77 with a SKIPPED line when the VM cannot run (verbs);
    124 when the VM timed out.

EXAMPLES
    apps/bench/run_suite.sh                        # udp, about a minute
    apps/bench/run_suite.sh --transport verbs      # Soft-RoCE in the VM
    apps/bench/run_suite.sh --transport loop --sessions 20000 --plot
    apps/bench/run_suite.sh --results docs/RESULTS.md   # refresh udp's table
EOF_USAGE
}

say() { echo "$prog: $*" >&2; }
die() {
	echo "$prog: error: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--transport | --duration | --pairs | --sizes | --windows | --batch | --sessions | \
		--ping-ms | --build | --out | --mtu | --timeout | --kernel | --results)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		case "$1" in
		--transport) transport=$2 ;;
		--duration) duration=$2 ;;
		--pairs) pairs=$2 ;;
		--sizes) sizes=$2 ;;
		--windows) windows=$2 ;;
		--batch) batch=$2 ;;
		--sessions) sessions=$2 ;;
		--ping-ms) ping_ms=$2 ;;
		--build) build=$2 ;;
		--out) out=$2 ;;
		--mtu) mtu=$2 ;;
		--timeout) timeout_s=$2 ;;
		--kernel) kernel=$2 ;;
		--results) results=$2 ;;
		esac
		shift 2
		;;
	--no-build)
		do_build=0
		shift
		;;
	--no-cpu-cost)
		cpu_cost=0
		shift
		;;
	--plot)
		plot=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

case "$transport" in udp | loop | verbs) ;; *) die "--transport must be udp, loop or verbs, got '$transport'" ;; esac
case "$mtu" in 1500 | 9000) ;; *) die "--mtu must be 1500 or 9000, got '$mtu'" ;; esac
case "$timeout_s" in '' | *[!0-9]* | 0) die "--timeout must be a number of seconds, got '$timeout_s'" ;; esac
case "$kernel" in 6.12 | stock) ;; *) die "--kernel must be 6.12 or stock, got '$kernel'" ;; esac
label=$transport
[ "$transport" = verbs ] && [ "$kernel" = stock ] && label="verbs, guest kernel 6.1"
if [ "$transport" = verbs ]; then
	: "${duration:=1}" "${sizes:=32,512}" "${pairs:=1}"
else
	: "${duration:=2}" "${sizes:=32,256,1024}" "${pairs:=5}"
fi

cd "$root"
if [ -n "$results" ]; then
	case "$results" in /*) ;; *) results=$root/$results ;; esac
	[ -d "$(dirname "$results")" ] || die "--results: no folder $(dirname "$results")"
fi
case "$build" in /*) ;; *) build=$root/$build ;; esac
[ -n "$out" ] || out=$build/suite-$transport
case "$out" in /*) ;; *) out=$root/$out ;; esac
if [ "$transport" = verbs ]; then
	case "$out/" in "$root"/*) ;; *) die "--out must lie inside $root (the guest writes it through the share)" ;; esac
fi
bin=$build/apps/bench

# ---- build ---------------------------------------------------------------------
if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		say "configuring $build (gcc, RelWithDebInfo)"
		cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc \
			-DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
	fi
	say "building the benchmarks in $build"
	cmake --build "$build" --target urpc-latency urpc-small-tput urpc-sessions urpc-cpu-cost \
		>/dev/null || die "build failed (run: cmake --build $build)"
fi
for b in urpc-latency urpc-small-tput urpc-sessions; do
	[ -x "$bin/$b" ] || die "no $bin/$b (build it, or drop --no-build)"
done
if [ "$transport" = verbs ] && [ -f "$build/CMakeCache.txt" ] &&
	grep -q 'march=native' "$build/CMakeCache.txt"; then
	die "$build uses -march=native: the emulated CPU lacks AVX-512; build for a baseline"
fi
# Catch bad options before the long runs.
"$bin/urpc-latency" --sizes "$sizes" --duration "$duration" --pairs "$pairs" --help \
	>/dev/null 2>&1 ||
	die "urpc-latency rejects --sizes '$sizes', --duration '$duration' or --pairs '$pairs'"
"$bin/urpc-small-tput" --windows "$windows" ${batch:+--batch "$batch"} --pairs "$pairs" --help \
	>/dev/null 2>&1 ||
	die "urpc-small-tput rejects --windows '$windows', --batch '$batch' or --pairs '$pairs'"
"$bin/urpc-sessions" --sessions "$sessions" --ping-ms "$ping_ms" --help >/dev/null 2>&1 ||
	die "urpc-sessions rejects --sessions '$sessions' or --ping-ms '$ping_ms'"

mkdir -p "$out"
rm -f "$out"/*.md "$out"/*.csv "$out"/*.log "$out"/*.png "$out"/cmd.*

lat_cmd=("$bin/urpc-latency" --transport "$transport" --sizes "$sizes" --duration "$duration"
	--pairs "$pairs" --csv "$out/latency.csv")
tput_cmd=("$bin/urpc-small-tput" --transport "$transport" --windows "$windows"
	${batch:+--batch "$batch"} --duration "$duration" --pairs "$pairs"
	--csv "$out/small_tput.csv")
sess_cmd=("$bin/urpc-sessions" --transport "$transport" --sessions "$sessions"
	--duration "$duration" --ping-ms "$ping_ms" --csv "$out/sessions.csv")
if [ "$transport" = verbs ]; then
	lat_cmd+=(--device rxe1 --server-device rxe0)
	tput_cmd+=(--device rxe1 --server-device rxe0)
else
	lat_cmd+=(--cdf "$out/latency-cdf.csv")
fi

# Commands as the results show them: relative to the repository root.
show() {
	local a s=""
	for a in "$@"; do
		a=${a#"$root"/}
		case "$a" in *[!A-Za-z0-9_./,:=-]*) a="'$a'" ;; esac
		s+="${s:+ }$a"
	done
	echo "$s"
}

start=$SECONDS
load=$(cut -d' ' -f1-3 /proc/loadavg)
failed=0
vm_rc=0

# One program: its table to OUT/NAME.md, its progress to OUT/NAME.log.
run_one() {
	local name=$1
	shift
	show "$@" >"$out/cmd.$name"
	say "$name: $(cat "$out/cmd.$name")"
	if ! "$@" >"$out/$name.md" 2>"$out/$name.log"; then
		say "$name failed; the end of its log:"
		tail -n 5 "$out/$name.log" >&2
		failed=1
	fi
	cat "$out/$name.md"
	echo
}

if [ "$transport" = verbs ]; then
	show "$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --kernel "$kernel" --timeout "$timeout_s" >"$out/cmd.vm"
	show "${lat_cmd[@]}" >"$out/cmd.latency"
	show "${tput_cmd[@]}" >"$out/cmd.small_tput"
	# POSIX sh in the guest: OUT, then the two command lines separated by "--".
	# shellcheck disable=SC2016 # expanded by the guest's sh
	guest='
out=$1
shift
echo 256 >/proc/sys/vm/nr_hugepages 2>/dev/null || echo "run_suite: no hugepages" >&2
lat=""
while [ "$1" != "--" ]; do lat="$lat $1"; shift; done
shift
$lat >"$out/latency.md" 2>"$out/latency.log" || echo "run_suite: urpc-latency failed" >&2
"$@" >"$out/small_tput.md" 2>"$out/small_tput.log" || echo "run_suite: urpc-small-tput failed" >&2
'
	say "one VM boot (veth MTU $mtu): urpc-latency and urpc-small-tput on verbs, with perftest"
	set +e
	"$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --kernel "$kernel" --timeout "$timeout_s" -- \
		sh -c "$guest" sh "$out" "${lat_cmd[@]}" -- "${tput_cmd[@]}"
	vm_rc=$?
	set -e
	say "VM run: exit $vm_rc after $((SECONDS - start)) s"
	case "$vm_rc" in 77 | 124) exit "$vm_rc" ;; esac
	for n in latency small_tput; do
		if [ -s "$out/$n.md" ] && grep -q '^| [0-9]' "$out/$n.md"; then
			cat "$out/$n.md"
			echo
		else
			say "$n printed no figures; the end of its log:"
			tail -n 5 "$out/$n.log" >&2 2>/dev/null || true
			failed=1
		fi
	done
else
	run_one latency "${lat_cmd[@]}"
	run_one small_tput "${tput_cmd[@]}"
	run_one sessions "${sess_cmd[@]}"
	if [ "$cpu_cost" = 1 ]; then
		cc=("$here/cpu_cost_callgrind.sh" "$bin/urpc-cpu-cost")
		show "${cc[@]}" >"$out/cmd.cpu_cost"
		say "cpu_cost: $(cat "$out/cmd.cpu_cost")"
		if ! "${cc[@]}" >"$out/cpu_cost.log" 2>&1; then
			say "cpu_cost_callgrind.sh failed (see $out/cpu_cost.log)"
			failed=1
		fi
		cat "$out/cpu_cost.log"
		echo
	fi
fi

# ---- targets ---------------------------------------------------------------------
# One row per target: the figure and met / not met, from the CSVs.
targets() {
	local f
	if [ "$transport" = udp ] && [ -f "$out/latency.csv" ]; then
		awk -F, 'NR > 1 && $7 == "raw UDP ping-pong" {
			printf "| udp p50 round trip <= 1.15x raw UDP ping-pong (%s B) | %.2f us vs %.2f us: median %.2fx (IQR %.2f-%.2f, min-max %.2f-%.2f over %s pairs) | %s |\n",
				$2, $4, $8, $11, $31, $32, $13, $14, $12, ($11 <= 1.15 ? "met" : "not met") }' "$out/latency.csv"
	fi
	if [ "$transport" = udp ] && [ -f "$out/small_tput.csv" ]; then
		awk -F, 'NR > 1 && $9 == "raw UDP echo" {
			printf "| udp RPC rate >= 0.9x raw UDP echo (window %s, batch %s) | %.0f vs %.0f /s: median %.2fx (IQR %.2f-%.2f, min-max %.2f-%.2f over %s pairs) | %s |\n",
				$3, $4, $7, $10, $11, $31, $32, $13, $14, $12, ($11 >= 0.9 ? "met" : "not met") }' "$out/small_tput.csv"
	fi
	if [ "$transport" = verbs ] && [ -f "$out/latency.csv" ]; then
		awk -F, 'NR > 1 && $7 == "2x ib_send_lat UD" {
			printf "| verbs p50 round trip <= 1.3x twice ib_send_lat -c UD typical (%s B) | %.1f us vs %.1f us: %.2fx | %s |\n",
				$2, $4, $8, $11, ($11 <= 1.3 ? "met" : "not met") }' "$out/latency.csv"
	fi
	if [ "$transport" != verbs ] && [ -f "$out/sessions.csv" ]; then
		# CSV: $2 sessions, $3 connect_s, $6 B/session after RPCs, $8 rate,
		# $9 active, $17 + $18 CPU us per RPC (server + clients).
		awk -F, -v tr="$transport" 'NR > 1 { n = $2; rate[n] = $8; cpu[n] = $17 + $18
			bps[n] = $6; conn[n] = $3; all[n] = ($9 == $2); last = n }
		END {
			if ((1000 in rate) && (20000 in rate) && rate[1000] > 0) {
				r = rate[20000] / rate[1000]
				c = cpu[20000] > 0 ? cpu[1000] / cpu[20000] : 0
				printf "| 20,000 sessions all active: rate >= 0.8x 1,000 sessions (%s) | %.2fx the rate (%.0f against %.0f RPCs/s), %.2fx the CPU per RPC; %s | %s |\n",
					tr, r, rate[20000], rate[1000], c,
					(all[20000] ? "all active" : "not all active"),
					(r >= 0.8 && all[20000] ? "met" : "not met")
			} else
				printf "| 20,000 sessions all active: rate >= 0.8x 1,000 sessions | counts 1000 and 20000 not both run | not measured |\n"
			printf "| <= 4 KiB per server session after RPCs (%s) | %.0f B with %s sessions | %s |\n",
				tr, bps[last], last, (bps[last] <= 4096 ? "met" : "not met")
			if (100000 in conn)
				printf "| 100,000 sessions connect in <= 5 s (%s) | %.2f s | %s |\n",
					tr, conn[100000], (conn[100000] <= 5 ? "met" : "not met")
		}' "$out/sessions.csv"
	fi
	f=$out/cpu_cost.log
	if [ -f "$f" ]; then
		awk '/instructions per RPC/ { n = $(NF - 3) }
		END {
			if (n != "")
				printf "| cpu_cost <= 500 instructions per RPC (callgrind, window 8) | %s | %s |\n", n, (n + 0 <= 500 ? "met" : "not met")
		}' "$f"
	fi
}

{
	echo "## urpc small-message suite: $label"
	echo
	echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, Linux $(uname -r); load average at the start: $load, at the end: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')."
	if [ "$transport" = verbs ]; then
		echo "Soft-RoCE (rdma_rxe) in a TCG-emulated VM (tests/vm/rxe-vm.sh, guest kernel $kernel, veth MTU $mtu), client on rxe1, server on rxe0, one boot."
	fi
	echo
	echo "Commands:"
	echo
	echo '```sh'
	for n in vm latency small_tput sessions cpu_cost; do
		[ -f "$out/cmd.$n" ] && cat "$out/cmd.$n"
	done
	echo '```'
	for n in latency small_tput sessions; do
		[ -s "$out/$n.md" ] || continue
		echo
		cat "$out/$n.md"
	done
	if [ -f "$out/cpu_cost.log" ]; then
		echo
		echo '```'
		cat "$out/cpu_cost.log"
		echo '```'
	fi
	echo
	echo "| target | figure | status |"
	echo "|---|---|---|"
	targets
} >"$out/results.md"

if [ "$plot" = 1 ]; then
	for f in "$out"/*.csv; do
		if [ -s "$f" ] && ! "$here/plot.sh" "$f"; then say "could not plot $f"; fi
	done
fi

# ---- docs/RESULTS.md ---------------------------------------------------------------
# This transport's section, between its markers, is replaced by the new results
# (verbs on the stock guest kernel has a section of its own).
if [ -n "$results" ]; then
	begin="<!-- run_suite.sh $label: begin -->"
	end="<!-- run_suite.sh $label: end -->"
	if [ ! -f "$results" ]; then
		cat >"$results" <<'EOF_RESULTS'
# urpc: current results

Written by `apps/bench/run_suite.sh --transport T --results docs/RESULTS.md`,
one section per transport, each replaced whole by the next run on that
transport: the date, commit, host and load are those of the run. Older
figures live in git history (`git log -p docs/RESULTS.md`). How to read
and rerun them: README.md, "Measuring".
EOF_RESULTS
	fi
	section=$(mktemp)
	{
		echo "$begin"
		sed '1s/^## urpc small-message suite: /## /' "$out/results.md"
		echo "$end"
	} >"$section"
	if grep -qxF "$begin" "$results" && grep -qxF "$end" "$results"; then
		awk -v b="$begin" -v e="$end" -v f="$section" '
			$0 == b { while ((getline l < f) > 0) print l; skip = 1; next }
			$0 == e { skip = 0; next }
			!skip' "$results" >"$results.tmp"
	else
		{ cat "$results"; echo; cat "$section"; } >"$results.tmp"
	fi
	mv "$results.tmp" "$results"
	rm -f "$section"
	say "updated the $label section of $results"
fi

say "results in $out/results.md ($((SECONDS - start)) s)"
echo
cat "$out/results.md"
if [ "$failed" = 1 ] || [ "$vm_rc" -ne 0 ]; then
	say "some measurements failed (see the logs in $out)"
	exit 1
fi
