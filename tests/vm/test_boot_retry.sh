#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_boot_retry.sh - the VM harness boots a guest that stopped before its
# /init again, at most three boots in all (tests/vm/rxe-vm.sh). A broken
# boot is made with URPC_RXE_VM_BREAK_BOOTS (no initramfs program: the
# kernel stops and QEMU exits 0, as after a guest reset).
#   1. one broken boot: the second boot runs the command; exit 0, the
#      failed boot reported.
#   2. three broken boots: SKIPPED (77), saying the VM did not boot in three.
# Exits 77 (a CTest skip) where the VM cannot run at all here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vm=$here/rxe-vm.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail() {
	echo "FAIL: $*"
	sed 's/^/  | /' "$out"
	exit 1
}

# The harness itself must run here, or there is nothing to test.
"$vm" --timeout 300 -- true >"$out" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
	grep '^SKIPPED' "$out"
	exit 77
fi
[ $rc -eq 0 ] || fail "a plain boot exited $rc"

URPC_RXE_VM_BREAK_BOOTS=1 "$vm" --timeout 300 -- sh -c 'echo ran-in-guest' >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "one broken boot: exit $rc, expected 0 from the second boot"
grep -q '^ran-in-guest$' "$out" || fail "one broken boot: the command's output is missing"
grep -q 'stopped before its /init mounted the share (QEMU exit 0 after [0-9]*s; boot 1 of 3)' "$out" ||
	fail "one broken boot: the failed boot was not reported"
[ "$(grep -c 'booting kernel' "$out")" -eq 2 ] || fail "one broken boot: expected exactly 2 boots"
echo "ok: one broken boot, the command ran in the second"

URPC_RXE_VM_BREAK_BOOTS=3 "$vm" --timeout 300 -- sh -c 'echo ran-in-guest' >"$out" 2>&1
rc=$?
[ $rc -eq 77 ] || fail "three broken boots: exit $rc, expected 77"
grep -q 'ran-in-guest' "$out" && fail "three broken boots: the command ran"
grep -q '^SKIPPED: the VM did not boot (QEMU exit 0 after [0-9]*s, 3 boots)' "$out" ||
	fail "three broken boots: no SKIPPED line naming the 3 boots"
[ "$(grep -c 'booting kernel' "$out")" -eq 3 ] || fail "three broken boots: expected exactly 3 boots"
echo "ok: three broken boots, SKIPPED after the third"
