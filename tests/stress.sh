#!/usr/bin/env bash
# NAME
#     tests/stress.sh - run the CTest suite many times on a loaded machine and
#     report every test that failed even once
#
# SYNOPSIS
#     tests/stress.sh [--runs N] [--hogs K] [--jobs J] [--build DIR] [--asan]
#                     [--exclude REGEX] [--results DIR] [--no-build] [--keep-logs]
#     tests/stress.sh --whole [--runs N] [--hogs K] [--jobs J] [--results DIR]
#
# DESCRIPTION
#     Starts K CPU-bound processes (busy shell loops) that compete with the
#     tests for the cores, then runs `ctest -j J --output-on-failure` on a build
#     N times in a row, and stops the competing processes when it ends, however
#     it ends (normal exit, Ctrl-C, SIGTERM; a hog also stops by itself within a
#     fraction of a second if this script is SIGKILLed). A test that passes
#     alone but fails under load is waiting on time instead of on a condition,
#     or has found a race in the engine: either way it is a bug.
#
#     After each run one progress line is printed:
#         run 3/20: 1 failed (test_e2e_udp); failures so far: 1 in 1 run; 241 s
#     At the end, every test that failed at least once is listed with the runs
#     it failed in and the saved log of each. The log of a failing run is the
#     output of ctest --output-on-failure (run-K.log) together with CTest's
#     full record of every test of that run (run-K.LastTest.log); logs of
#     clean runs are deleted unless --keep-logs is given. The same report goes
#     to summary.txt in the results directory.
#
#     The build is configured if DIR has no CMakeCache.txt, then brought up to
#     date with `cmake --build` before the first run (so the runs test the
#     working tree as it is), unless --no-build is given.
#
# OPTIONS
#     --runs N        number of CTest runs (default 20)
#     --hogs K        number of CPU-bound competing processes (default 2; 0 runs
#                     the suite on an otherwise idle machine)
#     --jobs J        tests run in parallel, ctest -j (default 2)
#     --build DIR     build directory (default build/stress: gcc, RelWithDebInfo,
#                     -DURPC_WERROR=ON, Ninja; with --asan, build/stress-asan:
#                     clang, Debug, -DURPC_SANITIZE=address,undefined)
#     --whole         each run is the whole of scripts/test.sh (gcc, ASan+UBSan
#                     and TSan suites, the fuzzers, the Soft-RoCE stage in its
#                     VM), which builds for itself: --build, --asan, --exclude
#                     and --no-build do not apply. A failed run is named by
#                     the stage it failed in and the tests ctest listed.
#                     About 17 min a run on 2 idle cores; more beside hogs.
#     --asan          use the clang ASan+UBSan build; ASAN_OPTIONS and
#                     UBSAN_OPTIONS are set as scripts/test.sh sets them
#     --exclude REGEX tests not to run (ctest -E REGEX). Default: none. The verbs
#                     builds skip by themselves without an RDMA port, and
#                     test_hugepage skips the cases that need root.
#     --results DIR   where the logs and summary.txt go (default
#                     build/stress-YYYYmmdd-HHMMSS, or build/stress-asan-... with
#                     --asan)
#     --no-build      use the build as it is (it must exist)
#     --keep-logs     keep the logs of clean runs too
#     -h, --help      print this text
#
# EXIT STATUS
#     0  every run was clean
#     1  at least one test failed at least once (or ctest itself failed)
#     2  bad arguments
#     3  the build could not be configured or built
#     130, 143  interrupted by SIGINT, SIGTERM
#
# EXAMPLES
#     tests/stress.sh                          20 runs, 2 hogs, gcc build
#     tests/stress.sh --runs 5 --asan          5 runs of the ASan+UBSan build
#     tests/stress.sh --whole --runs 5         5 runs of scripts/test.sh, 2 hogs
#     tests/stress.sh --runs 50 --hogs 4 --exclude 'sim_seeds|test_install'
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

die_usage() {
	echo "stress.sh: $*; see --help" >&2
	exit 2
}

need_count() { # option value minimum
	if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ]; then
		die_usage "$1 needs a whole number >= $3, not '$2'"
	fi
}

runs=20 hogs=2 jobs=2 build='' asan=0 exclude='' results='' do_build=1 keep_logs=0 whole=0
while [ $# -gt 0 ]; do
	case "$1" in
	--runs | --hogs | --jobs | --build | --exclude | --results)
		[ $# -ge 2 ] || die_usage "$1 needs a value"
		case "$1" in
		--runs) need_count "$1" "$2" 1; runs=$2 ;;
		--hogs) need_count "$1" "$2" 0; hogs=$2 ;;
		--jobs) need_count "$1" "$2" 1; jobs=$2 ;;
		--build) build=$2 ;;
		--exclude) exclude=$2 ;;
		--results) results=$2 ;;
		esac
		shift 2
		;;
	--asan) asan=1; shift ;;
	--whole) whole=1; shift ;;
	--no-build) do_build=0; shift ;;
	--keep-logs) keep_logs=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die_usage "unknown argument '$1'" ;;
	esac
done

stamp=$(date +%Y%m%d-%H%M%S)
if [ "$whole" = 1 ]; then
	[ "$asan" = 0 ] && [ -z "$build" ] && [ -z "$exclude" ] && [ "$do_build" = 1 ] ||
		die_usage "--whole runs scripts/test.sh as it is: no --asan, --build, --exclude or --no-build"
	: "${results:=build/stress-whole-$stamp}"
	build=build/ci-gcc # where scripts/test.sh's gcc stage builds (for its LastTest.log)
	do_build=0
elif [ "$asan" = 1 ]; then
	: "${build:=build/stress-asan}"
	: "${results:=build/stress-asan-$stamp}"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	# shellcheck disable=SC2054 # the commas belong to the sanitizer list
	config=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
		-DURPC_WERROR=ON -DURPC_SANITIZE=address,undefined)
else
	: "${build:=build/stress}"
	: "${results:=build/stress-$stamp}"
	config=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
		-DURPC_WERROR=ON)
fi

# ---- build ------------------------------------------------------------------------

if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		echo "stress.sh: configuring $build"
		cmake -S . -B "$build" -G Ninja "${config[@]}" >/dev/null || exit 3
	fi
	echo "stress.sh: building $build"
	cmake --build "$build" -j "$(nproc)" >"$build/stress-build.log" 2>&1 || {
		tail -n 40 "$build/stress-build.log" >&2
		echo "stress.sh: the build failed (full log: $build/stress-build.log)" >&2
		exit 3
	}
elif [ "$whole" = 0 ] && [ ! -f "$build/CTestTestfile.cmake" ]; then
	echo "stress.sh: $build holds no configured build (drop --no-build)" >&2
	exit 3
fi
mkdir -p "$results"

# ---- the competing processes, and cleaning up after them and ctest -----------------

hog_pids=()
ctest_pid=

cleanup() {
	local pid
	for pid in "${hog_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	# ctest runs in a process group of its own (setsid below): end it and its tests.
	if [ -n "$ctest_pid" ]; then
		kill -TERM -- "-$ctest_pid" 2>/dev/null || true
	fi
	for pid in "${hog_pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	hog_pids=()
}
trap cleanup EXIT
trap 'echo "stress.sh: interrupted" >&2; exit 130' INT
trap 'echo "stress.sh: terminated" >&2; exit 143' TERM

# A busy loop that checks every ~100k iterations that this script still
# lives, so a SIGKILLed script leaves no hog spinning behind it.
# shellcheck disable=SC2016 # $1 and $i belong to the hog's shell
hog_loop='while kill -0 "$1" 2>/dev/null; do i=0; while [ $i -lt 100000 ]; do i=$((i + 1)); done; done'
for ((h = 0; h < hogs; h++)); do
	sh -c "$hog_loop" stress-hog "$$" &
	hog_pids+=($!)
done

# ---- the runs -----------------------------------------------------------------------

ctest_args=(--test-dir "$build" -j "$jobs" --output-on-failure)
[ -n "$exclude" ] && ctest_args+=(-E "$exclude")

header() {
	echo "stress.sh: $(date '+%F %T'), commit $(git describe --always --dirty 2>/dev/null || echo 'none (not a git checkout)')"
	if [ "$whole" = 1 ]; then
		echo "  scripts/test.sh -j $jobs (every stage), $runs runs, $hogs hogs on $(nproc) cores"
	else
		echo "  build $build, $runs runs, ctest -j $jobs, $hogs hogs on $(nproc) cores"
	fi
	echo "  exclude: ${exclude:-(nothing)}; results in $results"
	echo "  load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
header | tee "$results/summary.txt"

declare -A fail_runs=() # test name -> " k1 k2 ..."
declare -A fail_logs=() # test name -> "log1 log2 ..."
declare -a fail_order=()
failed_runs=0 failures=0
start_all=$SECONDS

for ((k = 1; k <= runs; k++)); do
	log="$results/run-$k.log"
	t0=$SECONDS
	rc=0
	if [ "$whole" = 1 ]; then
		setsid -w scripts/test.sh -j "$jobs" >"$log" 2>&1 &
	else
		setsid -w ctest "${ctest_args[@]}" >"$log" 2>&1 &
	fi
	ctest_pid=$!
	wait "$ctest_pid" || rc=$?
	ctest_pid=
	secs=$((SECONDS - t0))

	# ctest lists the failures as "\t 27 - test_e2e_udp (Failed)" after this line.
	mapfile -t failed < <(sed -n '/^The following tests FAILED:/,$p' "$log" |
		sed -n 's/^[[:space:]]*[0-9]\{1,\} - \(.*\) (\([^)]*\))$/\1 (\2)/p')
	if [ "$whole" = 1 ] && [ "$rc" -ne 0 ]; then
		# The stage it stopped in: the last "==== NAME ====" line test.sh printed.
		stage=$(sed -n 's/^==== \(.*\) ====$/\1/p' "$log" | tail -n 1)
		failed=("${failed[@]/#/${stage:-?}: }")
		[ ${#failed[@]} -gt 0 ] || failed=("stage '${stage:-before the first}' (exit status $rc)")
	elif [ "$rc" -ne 0 ] && [ ${#failed[@]} -eq 0 ]; then
		failed=("ctest itself (exit status $rc)")
	fi

	if [ ${#failed[@]} -eq 0 ]; then
		[ "$keep_logs" = 1 ] || rm -f "$log"
		what="clean"
	else
		cp "$build/Testing/Temporary/LastTest.log" "$results/run-$k.LastTest.log" 2>/dev/null || true
		failed_runs=$((failed_runs + 1))
		names=()
		for entry in "${failed[@]}"; do
			name=${entry% (*}
			names+=("$entry")
			failures=$((failures + 1))
			if [ -z "${fail_runs[$name]+x}" ]; then
				fail_order+=("$name")
				fail_runs[$name]=""
				fail_logs[$name]=""
			fi
			fail_runs[$name]+=" $k"
			fail_logs[$name]+=" $log"
		done
		what="${#failed[@]} failed ($(printf '%s, ' "${names[@]}" | sed 's/, $//'))"
	fi
	line="run $k/$runs: $what; failures so far: $failures in $failed_runs run$([ "$failed_runs" = 1 ] || echo s); ${secs} s"
	echo "$line" | tee -a "$results/summary.txt"
done

# ---- the report ---------------------------------------------------------------------

{
	total=$((SECONDS - start_all))
	echo
	echo "stress.sh: $runs runs in ${total} s ($((total / 60)) min $((total % 60)) s), $failed_runs with failures, $failures test failures in all"
	echo "  load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ ${#fail_order[@]} -eq 0 ]; then
		echo "  every run was clean"
	else
		echo "  tests that failed at least once (runs; logs):"
		for name in "${fail_order[@]}"; do
			n=$(wc -w <<<"${fail_runs[$name]}")
			echo "  $name: $n of $runs runs:${fail_runs[$name]}"
			for f in ${fail_logs[$name]}; do
				echo "      $f"
			done
		done
	fi
} | tee -a "$results/summary.txt"

[ "$failed_runs" -eq 0 ]
