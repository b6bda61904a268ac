#!/usr/bin/env bash
# Build urpc's libFuzzer targets and fuzz each one for a fixed time.
# Owns its build directory and a scratch directory; calls cmake, ninja (via
# cmake), clang and the fuzz targets. See --help.
set -euo pipefail

usage() {
	cat <<'EOF'
NAME
    tests/fuzz/run.sh - build and run urpc's libFuzzer targets

SYNOPSIS
    tests/fuzz/run.sh [--time SECONDS] [--build DIR] [--jobs N] [--work DIR]
                      [TARGET...]

DESCRIPTION
    Configures a clang build directory with -DURPC_FUZZ=ON (Debug, so
    assertions stay on; the engine is compiled again there with coverage
    instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer), builds
    the fuzz targets, and runs each TARGET for SECONDS seconds, starting from
    a copy of its seed corpus (tests/fuzz/corpus/TARGET; the repository is
    never written). Without TARGET, all of them:

      sm        session-management packet decoder and encoder (src/nexus/sm.c)
      datapath  receive path of a connected client and server Rpc, and the
                SM packets their Nexus routes (src/rpc/client.c, server.c, session.c)
      udp_os    the udp transport's emulated one-sided READ/WRITE, served and
                requested (src/transport/udp_io.c, udp_os.c)
      kv_req    the KV demo's request parser (apps/kv/kv_parse.h)

    For each target it prints the executions, executions per second, and
    libFuzzer's final coverage figures: cov (code edges reached) and ft
    (features: edges with hit counts, comparisons). A target fails when
    libFuzzer reports a crash, a sanitizer error, a leak (LeakSanitizer is
    on), a broken invariant of the target, a timeout (one input running
    longer than 25 s) or running out of memory; the script then prints the
    end of the report and the path of the reproducer, which stays in the
    work directory. Replay it with:

        BUILD/tests/fuzz/fuzz_TARGET REPRODUCER

OPTIONS
    --time SECONDS
        Fuzz each target this long (default 30). 0 runs each target once
        over its seed corpus and stops: a quick regression check.

    --build DIR
        The build directory (default build/fuzz). It is configured when it
        has no build.ninja yet; an existing one is reused as it is.

    --jobs N
        Compile with N parallel jobs, and fuzz up to N targets at the same
        time (default 1: one target after the other).

    --work DIR
        Where the corpora, logs and reproducers go (default: a new
        directory under ${TMPDIR:-/tmp}, removed when every target passed).
        Each target gets DIR/TARGET/{corpus,log} and its reproducers in
        DIR/TARGET/.

    -h, --help
        Show this help.

ENVIRONMENT
    FUZZ_ARGS   extra libFuzzer flags for every target (for example
                "-max_len=512" or "-dict=FILE").
    FUZZ_VERBOSE=1 makes fuzz_datapath print what each input did.

EXIT STATUS
    0 when every target ran its time without a failure; 1 when one failed;
    2 on bad usage; 3 when configuring or building failed.

EXAMPLES
    tests/fuzz/run.sh --time 20 --jobs 2     # what scripts/test.sh runs
    nice -n 10 tests/fuzz/run.sh --time 600 datapath
    tests/fuzz/run.sh --time 0               # replay the seed corpora
EOF
}

all_targets=(sm datapath udp_os kv_req xdp_frame)
secs=30
build=build/fuzz
jobs=1
work=""
targets=()

die_usage() {
	echo "run.sh: $*" >&2
	echo "Try 'tests/fuzz/run.sh --help' for more information." >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--time)
		[ $# -ge 2 ] || die_usage "--time needs SECONDS"
		secs="$2"
		shift 2
		;;
	--build)
		[ $# -ge 2 ] || die_usage "--build needs DIR"
		build="$2"
		shift 2
		;;
	--jobs)
		[ $# -ge 2 ] || die_usage "--jobs needs N"
		jobs="$2"
		shift 2
		;;
	--work)
		[ $# -ge 2 ] || die_usage "--work needs DIR"
		work="$2"
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*) die_usage "unknown option '$1'" ;;
	*)
		targets+=("$1")
		shift
		;;
	esac
done
[[ "$secs" =~ ^[0-9]+$ ]] || die_usage "--time must be a whole number of seconds, got '$secs'"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die_usage "--jobs must be a positive number, got '$jobs'"
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
	[[ " ${all_targets[*]} " == *" $t "* ]] ||
		die_usage "unknown target '$t' (one of: ${all_targets[*]})"
done

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
command -v clang >/dev/null || { echo "run.sh: clang not found (scripts/deps.sh installs it)" >&2; exit 3; }

# ---- build ----------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
	cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
		-DCMAKE_BUILD_TYPE=Debug -DURPC_WERROR=ON -DURPC_FUZZ=ON \
		-DURPC_BUILD_TESTS=OFF -DURPC_BUILD_APPS=OFF >/dev/null ||
		{ echo "run.sh: configuring $build failed" >&2; exit 3; }
fi
bins=()
for t in "${targets[@]}"; do bins+=("fuzz_$t"); done
cmake --build "$build" -j "$jobs" --target "${bins[@]}" >/dev/null ||
	{ echo "run.sh: building the fuzz targets in $build failed (run cmake --build $build --target fuzz)" >&2; exit 3; }

# ---- run ------------------------------------------------------------------
created_work=0
if [ -z "$work" ]; then
	work="$(mktemp -d "${TMPDIR:-/tmp}/urpc-fuzz.XXXXXX")"
	created_work=1
fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"

bindir="$(cd "$build" && pwd)/tests/fuzz"

# Fuzz one target; its libFuzzer output goes to $work/$t/log, its status to rc.
fuzz_one() {
	local t="$1" dir="$work/$1" rc=0
	local limit=(-max_total_time="$secs")
	[ "$secs" -eq 0 ] && limit=(-runs=0)
	rm -rf "$dir"
	mkdir -p "$dir/corpus"
	cp -R "$root/tests/fuzz/corpus/$t/." "$dir/corpus/"
	# shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
	(cd "$dir" && "$bindir/fuzz_$t" "${limit[@]}" -timeout=25 -print_final_stats=1 \
		-artifact_prefix="$dir/" ${FUZZ_ARGS:-} corpus >log 2>&1) || rc=$?
	echo "$rc" >"$dir/rc"
}

running=0
for t in "${targets[@]}"; do
	fuzz_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait || true

# ---- report ---------------------------------------------------------------
failed=0
printf '%-10s %12s %10s %7s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
	dir="$work/$t"
	rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
	# libFuzzer's last status line ("#N DONE cov: C ft: F ...", or the last before a crash)
	last=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$dir/log" | tail -1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$dir/log" | tail -1)
	result=ok
	if [ "$rc" -ne 0 ] || [ -n "$repro" ]; then
		result=FAILED
		failed=1
	fi
	printf '%-10s %12s %10s %7s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
		"${ft:-?}" "$result"
done

if [ "$failed" -ne 0 ]; then
	for t in "${targets[@]}"; do
		dir="$work/$t"
		rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
		repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$dir/log" | tail -1)
		[ "$rc" -ne 0 ] || [ -n "$repro" ] || continue
		printf '\n==== %s failed (exit status %s); the end of %s:\n' "$t" "$rc" "$dir/log"
		grep -v -E '^#[0-9]+[[:space:]]' "$dir/log" | tail -40
		if [ -n "$repro" ]; then
			printf '\nreproducer: %s\nreplay:     %s %s\n' "$repro" "$bindir/fuzz_$t" "$repro"
		fi
	done
	echo
	echo "run.sh: a target failed; corpora, logs and reproducers are in $work" >&2
	exit 1
fi
[ "$created_work" -eq 1 ] && rm -rf "$work"
exit 0
