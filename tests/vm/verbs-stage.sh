#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# verbs-stage.sh - the Soft-RoCE stage of the test suite: the verbs builds of
# the transport contract suite, the verbs transport's own tests, the engine's
# end-to-end suite and the loss case, at two MTUs, each run in its own boot
# of the rxe-vm.sh VM. See --help.
set -euo pipefail

prog=verbs-stage
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build/vm-gcc
do_build=1
only=""
logs=""

usage() {
	cat <<'EOF_USAGE'
NAME
    verbs-stage.sh - run the verbs test suites on Soft-RoCE in a QEMU VM

SYNOPSIS
    tests/vm/verbs-stage.sh [--build DIR] [--no-build] [--only RUN[,RUN...]]
                            [--logs DIR]
    tests/vm/verbs-stage.sh --help

DESCRIPTION
    Builds the verbs test binaries in DIR (configuring a gcc RelWithDebInfo
    build there when DIR has none), then boots the VM of tests/vm/rxe-vm.sh
    once per run below. In the guest the client side of every test uses rxe1
    (10.0.0.2) and the server side rxe0 (10.0.0.1), so the datapath crosses
    the veth pair (URPC_TEST_DEVICE_A=rxe1, URPC_TEST_DEVICE_B=rxe0), and the
    Criterion binaries run with --jobs 1, with 256 2 MiB hugepages reserved
    in the guest.

        RUN            MTU   NETEM     BINARY                 RoCE MTU
        contract-1500  1500  -         test_contract_verbs    1024
        verbs-1500     1500  -         test_verbs             1024
        e2e-1500       1500  -         test_e2e_verbs         1024
        loss-1500      1500  loss 5%   test_loss_verbs        1024
        large-1500     1500  -         test_large_verbs       1024
        gpu-1500       1500  -         test_gpu_verbs         1024
        kv-1500        1500  -         test_kv_verbs          1024
        rmem-1500      1500  -         test_rmem_verbs        1024
        rmem-batch-1500 1500 -         test_rmem_batch_verbs  1024
        contract-9000  9000  -         test_contract_verbs    4096
        verbs-9000     9000  -         test_verbs             4096
        e2e-9000       9000  -         test_e2e_verbs         4096
        loss-9000      9000  loss 5%   test_loss_verbs        4096
        large-9000     9000  -         test_large_verbs       4096

    The loss runs apply netem to both veths (each direction of the wire),
    run 20000 RPCs and set URPC_TEST_EXPECT_LOSS=5: besides every RPC
    completing once with its handler run once, the client must have
    retransmitted at least 5% of them, proof that its datagrams crossed the
    lossy wire.

    Progress lines go to stdout as the runs go: each test's verdict, the
    assertion messages and the harness's lines; the full output of each run
    is kept in the log folder. A summary table ends the output.

OPTIONS
    --build DIR   build folder (default build/vm-gcc, relative to the
                  repository root). Never configure it with -march=native:
                  the emulated CPU has no AVX-512. A sanitizer build works
                  too: ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS are
                  passed to the guest, and a sanitizer report fails the run.
                  DIR must be one the guest sees at the same path: inside
                  the repository, or elsewhere on this machine's disk, but
                  not under /tmp, /run, /dev, /proc or /sys, which the guest
                  mounts afresh (the stage refuses such a DIR at once).
    --no-build    use the binaries already in DIR, as they are
    --only LIST   run only these runs (comma-separated names from the table)
    --logs DIR    where each run's full output goes (default DIR/verbs-stage)
    -h, --help    show this help

ENVIRONMENT
    URPC_VM_OPTIONAL=1   when the VM cannot run on this machine (rxe-vm.sh
                         exit 77: no QEMU, no kernel download, no boot),
                         report SKIPPED and exit 0. Unset, that is a failure:
                         in CI the VM must run.

EXIT STATUS
    0 when every run passed (or the VM was skipped with URPC_VM_OPTIONAL=1);
    1 when a run failed, timed out, printed a sanitizer report or ran
    nothing (every case skipped), or the VM could not run; 2 for a usage or
    build error.
EOF_USAGE
}

say() { echo "$prog: $*"; }
die() {
	echo "$prog: error: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--build)
		[ $# -ge 2 ] || die "--build needs a folder"
		build=$2
		shift 2
		;;
	--no-build)
		do_build=0
		shift
		;;
	--only)
		[ $# -ge 2 ] || die "--only needs a list of runs"
		only=$2
		shift 2
		;;
	--logs)
		[ $# -ge 2 ] || die "--logs needs a folder"
		logs=$2
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

# rxe-vm.sh shares the current directory read-write with the guest and
# starts the command there: run from the repository root, binaries by
# absolute path.
cd "$root"
case "$build" in /*) ;; *) build=$root/$build ;; esac
[ -n "$logs" ] || logs=$build/verbs-stage
case "$logs" in /*) ;; *) logs=$root/$logs ;; esac
# A folder the guest mounts afresh would be missing there (guest_paths.sh).
# shellcheck source=tests/vm/guest_paths.sh
. "$root/tests/vm/guest_paths.sh"
vm_guest_sees "$root" "$build"
vm_guest_writes "$root" "$logs"

# The runs: name, veth MTU, netem spec ("_" for a space; "-": none), binary,
# extra guest environment (comma-separated; "-": none), rxe-vm.sh timeout
# (boot included).
#
# Every suite runs at both MTUs: 1500 (RoCE MTU 1024: messages up to 984
# bytes) and 9000 (RoCE MTU 4096: up to 4056 bytes). The whole stage, 8
# boots, took 88-104 s on the idle 2-core machine (each run 8-17 s, ~4 s of it
# the boot) and 3-6 min with other builds beside it (tests/vm/README.md), so
# nothing is left out; the timeouts leave room for a much slower host.
# The loss runs use 20000 RPCs (some 2000 retransmissions at 5% each way).
loss_env=URPC_TEST_EXPECT_LOSS=5,URPC_TEST_LOSS_RPCS=20000
runs=(
	"contract-1500 1500 - test_contract_verbs - 300"
	"verbs-1500 1500 - test_verbs - 600"
	"e2e-1500 1500 - test_e2e_verbs - 600"
	"loss-1500 1500 loss_5% test_loss_verbs $loss_env 300"
	"large-1500 1500 - test_large_verbs - 600"
	"gpu-1500 1500 - test_gpu_verbs - 300"
	"kv-1500 1500 - test_kv_verbs - 300"
	"rmem-1500 1500 - test_rmem_verbs - 300"
	"rmem-batch-1500 1500 - test_rmem_batch_verbs - 300"
	"contract-9000 9000 - test_contract_verbs - 300"
	"verbs-9000 9000 - test_verbs - 600"
	"e2e-9000 9000 - test_e2e_verbs - 600"
	"loss-9000 9000 loss_5% test_loss_verbs $loss_env 300"
	"large-9000 9000 - test_large_verbs - 600"
)

if [ -n "$only" ]; then
	sel=()
	for r in "${runs[@]}"; do
		case ",$only," in *",${r%% *},"*) sel+=("$r") ;; esac
	done
	[ ${#sel[@]} -gt 0 ] || die "--only '$only' names no run (see --help)"
	runs=("${sel[@]}")
fi

# ---- build -------------------------------------------------------------------
bins=()
for r in "${runs[@]}"; do
	read -r _ _ _ bin _ _ <<<"$r"
	case " ${bins[*]} " in *" $bin "*) ;; *) bins+=("$bin") ;; esac
done
if [ "$do_build" = 1 ]; then
	if [ ! -f "$build/CMakeCache.txt" ]; then
		say "configuring $build (gcc, RelWithDebInfo)"
		cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc \
			-DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
	fi
	say "building ${bins[*]} in $build"
	cmake --build "$build" --target "${bins[@]}" >/dev/null ||
		die "build failed (run: cmake --build $build --target ${bins[*]})"
fi
if [ -f "$build/CMakeCache.txt" ] && grep -q 'march=native' "$build/CMakeCache.txt"; then
	die "$build uses -march=native: the emulated CPU lacks AVX-512; build for a baseline"
fi
for bin in "${bins[@]}"; do
	[ -x "$build/tests/$bin" ] || die "no $build/tests/$bin (build it, or drop --no-build)"
done
mkdir -p "$logs"

# ---- runs --------------------------------------------------------------------
# 2 MiB pages reserved in the guest (2 GiB of memory), so that buffers and
# their registrations take the hugepage path they take in production; each
# test process frees its own before the next starts (--jobs 1).
hugepages=256

# Guest output lines worth showing live: verdicts, assertion and log lines of
# the tests, Criterion's synthesis, the harness's own lines.
show='^\[(PASS|FAIL|SKIP|----|====)\]|^rxe-vm:|^SKIPPED:|^urpc ERR|Timed out|Sanitizer|runtime error:'
stage_start=$SECONDS
rows=()
failed=0
vm_skipped=""
i=0
for r in "${runs[@]}"; do
	i=$((i + 1))
	read -r name mtu netem bin env_extra tmo <<<"$r"
	netem=${netem//_/ }
	log=$logs/$name.log
	if [ -n "$vm_skipped" ]; then
		rows+=("$name $mtu ${netem// /_} - - - 0 SKIPPED")
		continue
	fi
	say "[$i/${#runs[@]}] $name: $bin, veth MTU $mtu, netem ${netem} (log: $log)"
	vm_args=(--mtu "$mtu" --timeout "$tmo")
	[ "$netem" = "-" ] || vm_args+=(--netem "$netem")
	genv=(URPC_TEST_DEVICE_A=rxe1 URPC_TEST_DEVICE_B=rxe0)
	# A sanitizer build's settings reach the guest (its environment is its own).
	for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
		[ -z "${!v:-}" ] || genv+=("$v=${!v}")
	done
	if [ "$env_extra" != "-" ]; then
		IFS=, read -r -a extra <<<"$env_extra"
		genv+=("${extra[@]}")
	fi
	start=$SECONDS
	set +e
	# shellcheck disable=SC2016 # $1 and $@ belong to the guest's sh
	"$here/rxe-vm.sh" "${vm_args[@]}" -- sh -c \
		'echo "$1" >/proc/sys/vm/nr_hugepages || echo "could not reserve hugepages" >&2
		shift; exec "$@"' sh "$hugepages" \
		env "${genv[@]}" "$build/tests/$bin" --jobs 1 --verbose --color=never 2>&1 |
		tee "$log" | grep --line-buffered -E "$show" | sed -u 's/^/    /'
	rc=${PIPESTATUS[0]}
	set -e
	secs=$((SECONDS - start))

	npass=$(grep -c '^\[PASS\]' "$log" || true)
	nfail=$(grep -c '^\[FAIL\]' "$log" || true)
	nskip=$(grep -c '^\[SKIP\]' "$log" || true)
	# As CTest's FAIL_REGULAR_EXPRESSION: a LeakSanitizer report alone
	# leaves Criterion's exit status 0.
	san=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log" || true)
	if [ "$rc" -eq 77 ]; then
		vm_skipped=$(sed -n 's/^SKIPPED: //p' "$log" | head -n 1)
		vm_skipped=${vm_skipped:-rxe-vm.sh exit 77}
		result=SKIPPED
		npass=- nfail=- nskip=-
	elif [ "$rc" -eq 124 ]; then
		result=TIMEOUT
	elif [ "$rc" -ne 0 ]; then
		result="FAIL(exit_$rc)"
	elif [ "$san" -gt 0 ]; then
		result="FAIL(sanitizer)"
	elif [ "$npass" -eq 0 ]; then
		result="FAIL(nothing_ran)"
	else
		result=PASS
	fi
	case "$result" in PASS | SKIPPED) ;; *) failed=$((failed + 1)) ;; esac
	say "[$i/${#runs[@]}] $name: $result in ${secs}s ($npass passed, $nfail failed, $nskip skipped)"
	if [ "$result" = "FAIL(nothing_ran)" ]; then
		say "    every case skipped in the VM (reasons above): nothing was tested"
	fi
	rows+=("$name $mtu ${netem// /_} $npass $nfail $nskip $secs $result")
done

# ---- summary -------------------------------------------------------------------
echo
say "summary (logs in $logs)"
printf '  %-14s %-5s %-9s %6s %6s %7s %7s  %s\n' run mtu netem passed failed skipped seconds result
for row in "${rows[@]}"; do
	read -r name mtu netem npass nfail nskip secs result <<<"$row"
	printf '  %-14s %-5s %-9s %6s %6s %7s %7s  %s\n' "$name" "$mtu" "${netem//_/ }" \
		"$npass" "$nfail" "$nskip" "$secs" "${result//_/ }"
done
say "stage wall time $((SECONDS - stage_start)) s"

if [ -n "$vm_skipped" ]; then
	echo "SKIPPED: the VM cannot run here: $vm_skipped"
	if [ "${URPC_VM_OPTIONAL:-0}" = 1 ]; then
		say "URPC_VM_OPTIONAL=1: the Soft-RoCE stage is skipped, not failed"
		exit 0
	fi
	say "the Soft-RoCE stage must run (set URPC_VM_OPTIONAL=1 where it may be skipped)"
	exit 1
fi
if [ "$failed" -gt 0 ]; then
	say "$failed of ${#rows[@]} runs FAILED"
	exit 1
fi
say "all ${#rows[@]} runs passed"
