#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# grant_cost_vm.sh - what exact grants cost large messages on Soft-RoCE:
# urpc-large-tput with each way the verbs transport can make grants (and,
# optionally, a baseline binary), interleaved in rounds in one boot of the
# tests/vm/rxe-vm.sh VM. See --help.
set -euo pipefail

prog=grant_cost_vm
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build/vm-gcc
baseline=""
modes=default,mr
sizes=64K,1M,4M
dirs=req,resp
rounds=3
secs=2
window=4
threads=2
mtu=9000
out=""
timeout_s=590

usage() {
	cat <<'EOF_USAGE'
NAME
    grant_cost_vm.sh - large-message bandwidth on Soft-RoCE for each way of
    making grants, next to a baseline, interleaved

SYNOPSIS
    apps/bench/grant_cost_vm.sh [--baseline BIN] [--modes LIST] [--sizes LIST]
                                [--directions LIST] [--rounds N] [--duration SEC]
                                [--window W] [--threads 1|2] [--mtu 9000|1500]
                                [--build DIR]
                                [--out DIR] [--timeout SEC]
    apps/bench/grant_cost_vm.sh --help

DESCRIPTION
    Boots the VM of tests/vm/rxe-vm.sh once (client Rpc on rxe1, server Rpc
    on rxe0) and runs urpc-large-tput --transport verbs for every direction
    and every mode, round after round, so each figure has its neighbours
    taken within seconds of it; even rounds run the modes in reverse order,
    so a drift over the boot favours none of them. The modes are the values of
    URPC_VERBS_GRANTS (see docs/ENGINE.md):

      default  what the device gets by itself: type-2 memory windows bound
               to the peer's RC QP (on Soft-RoCE over an MR of exactly the
               granted bytes, since rxe checks windows against their MR's
               bounds), an MR per grant where the device has no windows;
      mr       an MR registered for exactly the bytes of each grant;
      mw-mr    windows over an MR per grant on any device;
      mw       windows over the registration itself (not exact on
               Soft-RoCE: for measuring the window alone);
      base     the --baseline binary (for instance urpc-large-tput built
               from the commit before exact grants), without the variable.

    For each direction, size and mode it prints the median MB/s over the
    rounds and the median of the per-round ratios to the first mode of
    --modes, with their range. Beside each run's output (DIR-MODE-ROUND.out
    in --out) it keeps Soft-RoCE's hardware counters read before and after
    the run (.cnt0, .cnt1: "path value" lines): their difference shows the
    requester's retries (completer_retry_err), duplicates and RNR NAKs.
    Under TCG only ratios within one boot mean anything, and only when the
    host is otherwise idle: note the load average with the figures.

OPTIONS
    --baseline BIN     an urpc-large-tput binary to run as mode "base"
                       (it joins the modes first, and ratios are to it)
    --modes LIST       comma-separated modes (default default,mr)
    --sizes LIST       sizes as urpc-large-tput takes them (default 64K,1M,4M)
    --directions LIST  req, resp or both (default req,resp)
    --rounds N         rounds (default 3)
    --duration SEC     seconds per size and run (default 2)
    --window W         requests outstanding (default 4)
    --threads 1|2      urpc-large-tput's --threads (default 2: the server Rpc
                       in a thread of its own; 1: both Rpcs in one thread,
                       which leaves the guest's other vCPU to Soft-RoCE)
    --mtu 9000|1500    veth MTU (default 9000: RoCE MTU 4096)
    --build DIR        build folder with apps/bench/urpc-large-tput (default
                       build/vm-gcc; configured as gcc RelWithDebInfo when
                       it has none; never -march=native)
    --out DIR          CSV files and the table (default DIR/grant-cost-vm)
    --timeout SEC      bound on the VM run, boot included (default 590)
    -h, --help         show this help

EXIT STATUS
    0 when every run produced its figures; 1 when one failed (the table
    shows what came, the logs in OUT say why); 77 when the VM cannot run
    here; 124 on timeout; 2 for a usage or build error.
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
	--baseline | --modes | --sizes | --directions | --rounds | --duration | --window | --threads | --mtu | --build | --out | --timeout)
		[ $# -ge 2 ] || die "$1 needs a value (see --help)"
		case "$1" in
		--baseline) baseline=$2 ;;
		--modes) modes=$2 ;;
		--sizes) sizes=$2 ;;
		--directions) dirs=$2 ;;
		--rounds) rounds=$2 ;;
		--duration) secs=$2 ;;
		--window) window=$2 ;;
		--threads) threads=$2 ;;
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

[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive integer, not '$rounds'"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds, not '$timeout_s'"
for m in ${modes//,/ }; do
	case $m in default | mr | mw-mr | mw) ;; *) die "unknown mode '$m' (default, mr, mw-mr, mw)" ;; esac
done
for d in ${dirs//,/ }; do
	case $d in req | resp) ;; *) die "unknown direction '$d' (req, resp)" ;; esac
done
case $threads in 1 | 2) ;; *) die "--threads wants 1 or 2, not '$threads'" ;; esac
cd "$root"
if [ -n "$baseline" ]; then
	[ -x "$baseline" ] || die "--baseline $baseline is not an executable"
	modes="base,$modes"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
	say "configuring $build (gcc, RelWithDebInfo)"
	cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DURPC_WERROR=ON >/dev/null || die "cmake configure failed"
fi
grep -q 'march=native' "$build/CMakeCache.txt" && die "$build uses -march=native (see --help)"
cmake --build "$build" --target urpc-large-tput >/dev/null || die "building urpc-large-tput failed"
bin=$build/apps/bench/urpc-large-tput
"$bin" --sizes "$sizes" --window "$window" --duration "$secs" --help >/dev/null 2>&1 ||
	die "urpc-large-tput rejects --sizes $sizes --window $window --duration $secs"
[ -n "$out" ] || out=$build/grant-cost-vm
# shellcheck source=tests/vm/guest_paths.sh
. "$root/tests/vm/guest_paths.sh"
vm_guest_sees "$root" "$build"
vm_guest_writes "$root" "$out"
mkdir -p "$out"
rm -f "$out"/*.csv "$out"/*.out "$out"/table.md

# The guest's part (POSIX sh): rounds of every direction and mode.
# shellcheck disable=SC2016 # expanded by the guest's sh
guest='
set -u
out=$1 rounds=$2 modes=$3 dirs=$4 bin=$5 base=$6
shift 6
echo 256 >/proc/sys/vm/nr_hugepages 2>/dev/null
rev=""
for m in $modes; do rev="$m $rev"; done
r=1
while [ "$r" -le "$rounds" ]; do
	# Odd rounds in the order given, even rounds reversed: a drift over
	# the boot (host load, the guest warming up) favours no mode.
	order=$modes
	[ $((r % 2)) = 1 ] || order=$rev
	for d in $dirs; do
		for m in $order; do
			b=$bin
			[ "$m" != base ] || b=$base
			if [ "$m" = base ] || [ "$m" = default ]; then
				unset URPC_VERBS_GRANTS
			else
				export URPC_VERBS_GRANTS=$m
			fi
			f=$out/$d-$m-$r
			for c in /sys/class/infiniband/*/ports/1/hw_counters/*; do echo "$c $(cat "$c")"; done >"$f.cnt0" 2>/dev/null
			if URPC_LOG=warn timeout 120 "$b" "$@" --direction "$d" --csv "$f.csv" >"$f.out" 2>&1; then
				echo "grant_cost_vm: round $r $d $m done" >&2
			else
				echo "grant_cost_vm: round $r $d $m failed (see $f.out)" >&2
			fi
			for c in /sys/class/infiniband/*/ports/1/hw_counters/*; do echo "$c $(cat "$c")"; done >"$f.cnt1" 2>/dev/null
		done
	done
	r=$((r + 1))
done
'
say "one VM boot (MTU $mtu): $rounds rounds of ${dirs} x ${modes}, sizes $sizes, ${secs} s each (load: $(cut -d' ' -f1-3 /proc/loadavg))"
set +e
"$root/tests/vm/rxe-vm.sh" --mtu "$mtu" --timeout "$timeout_s" -- \
	sh -c "$guest" sh "$out" "$rounds" "${modes//,/ }" "${dirs//,/ }" "$bin" "${baseline:-none}" \
	--transport verbs --device rxe1 --server-device rxe0 --window "$window" \
	--threads "$threads" --duration "$secs" --sizes "$sizes"
rc=$?
set -e
case "$rc" in 77 | 124) exit "$rc" ;; esac

# The table: medians over rounds, and per-round ratios to the first mode.
# Each CSV row: transport,direction,size,...,mb_per_s (9th field).
set +e
for f in "$out"/*.csv; do
	[ -f "$f" ] || continue
	b=$(basename "$f" .csv) # DIR-MODE-ROUND
	awk -F, -v key="$b" 'NR > 1 { print key, $3, $9 }' "$f"
done | awk -v modes="$modes" -v dirs="$dirs" -v rounds="$rounds" '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function lo(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function hi(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
{
	# $1 is DIR-MODE-ROUND; a mode may hold a dash (mw-mr).
	d = $1; sub(/-.*/, "", d)
	r = $1; sub(/.*-/, "", r)
	m = $1; sub(/^[^-]*-/, "", m); sub(/-[^-]*$/, "", m)
	mb[d, $2, m, r] = $3
	if (!($2 in seen)) { seen[$2] = 1; sizes[++ns] = $2 + 0 }
}
END {
	nm = split(modes, M, ","); nd = split(dirs, D, ",")
	for (i = 2; i <= ns; i++)
		for (j = i; j > 1 && sizes[j - 1] > sizes[j]; j--) { t = sizes[j]; sizes[j] = sizes[j - 1]; sizes[j - 1] = t }
	printf "| direction | size |"
	for (k = 1; k <= nm; k++) printf " %s MB/s |", M[k]
	for (k = 2; k <= nm; k++) printf " %s/%s (range) |", M[k], M[1]
	printf "\n|---|---:|"
	for (k = 1; k < 2 * nm; k++) printf "---:|"
	printf "\n"
	missing = 0
	for (x = 1; x <= nd; x++) for (y = 1; y <= ns; y++) {
		s = sizes[y]
		name = s >= 1048576 ? sprintf("%d MiB", s / 1048576) : sprintf("%d KiB", s / 1024)
		printf "| %s | %s |", D[x], name
		for (k = 1; k <= nm; k++) {
			n = 0; delete v
			for (r = 1; r <= rounds; r++) if ((D[x], s, M[k], r) in mb) v[++n] = mb[D[x], s, M[k], r]
			missing += rounds - n
			if (n) printf " %.1f |", median(v, n); else printf " failed |"
		}
		for (k = 2; k <= nm; k++) {
			n = 0; delete q
			for (r = 1; r <= rounds; r++)
				if ((D[x], s, M[k], r) in mb && (D[x], s, M[1], r) in mb && mb[D[x], s, M[1], r] > 0)
					q[++n] = mb[D[x], s, M[k], r] / mb[D[x], s, M[1], r]
			if (n) printf " %.2f (%.2f-%.2f) |", median(q, n), lo(q, n), hi(q, n); else printf " - |"
		}
		printf "\n"
	}
	exit missing ? 1 : 0
}' >"$out/table.md"
status=$?
set -e
cat "$out/table.md"
[ "$status" = 0 ] && [ "$rc" = 0 ] || {
	say "some runs failed (VM exit $rc); see $out"
	exit 1
}
