/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock (util/tsc.h): off where it must be, and once calibrated,
 * monotonic and on CLOCK_MONOTONIC's scale. The cases that need a usable
 * TSC skip where this machine has none (or URPC_TSC=0 is set).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/seam.h"
#include "util/tsc.h"

/* Anchor as the timer scan does (about once a millisecond) until calibrated; false if never. */
static bool calibrate(struct urpc_tsc *c)
{
	uint64_t end = urpc__now_ns() + 5000000000ull, next = 0;

	while (!c->mult && urpc__now_ns() < end) {
		if (urpc__now_ns() >= next) {
			urpc__tsc_anchor(c);
			next = urpc__now_ns() + 1000000;
		}
	}
	return c->mult != 0;
}

Test(tsc, off_when_not_allowed)
{
	struct urpc_tsc c;
	uint64_t end = urpc__now_ns() + 20000000;

	urpc__tsc_init(&c, false);
	cr_assert(!c.usable);
	while (urpc__now_ns() < end)
		urpc__tsc_anchor(&c);
	cr_assert_eq(c.mult, 0, "a clock not allowed was calibrated");
}

static uint64_t fake_clock(void *arg)
{
	return ++*(uint64_t *)arg;
}

/* A simulation's clock seam keeps it off: the simulator's virtual time stays the Rpc's. */
Test(tsc, off_under_a_simulated_clock)
{
	uint64_t t = 1000;
	struct urpc_seams s = {.clock = fake_clock, .clock_arg = &t};
	struct urpc_tsc c;

	urpc__seams_set(&s);
	cr_assert(!urpc__tsc_usable());
	urpc__tsc_init(&c, true);
	urpc__seams_set(NULL);
	cr_assert(!c.usable);
}

Test(tsc, tracks_clock_monotonic)
{
	struct urpc_tsc c;
	uint64_t prev = 0, end;
	unsigned reads = 0, anchors = 0;

	urpc__tsc_init(&c, true);
	if (!c.usable)
		cr_skip_test(
			"no invariant TSC here (or URPC_TSC=0): the Rpc reads CLOCK_MONOTONIC");
	cr_assert(calibrate(&c), "no rate within 5 s of anchors a millisecond apart");
	/*
	 * 200 ms of reads, anchored every millisecond as the scan does: never
	 * backwards, and within the bracket of two CLOCK_MONOTONIC reads
	 * around each, give or take 50 us plus the bracket itself (a thread
	 * preempted between the reads widens it).
	 */
	end = urpc__now_ns() + 200000000;
	for (;;) {
		uint64_t a = urpc__now_ns(), r = urpc__tsc_read(&c), b = urpc__now_ns();
		uint64_t slack = 50000 + (b - a);

		cr_assert_geq(r, prev, "the clock went back: %llu after %llu",
			      (unsigned long long)r, (unsigned long long)prev);
		cr_assert(r + slack >= a && r <= b + slack,
			  "read %llu outside [%llu, %llu] by more than %llu ns",
			  (unsigned long long)r, (unsigned long long)a, (unsigned long long)b,
			  (unsigned long long)slack);
		prev = r;
		reads++;
		if (b >= end)
			break;
		if (reads % 64 == 0) {
			urpc__tsc_anchor(&c);
			anchors++;
		}
	}
	cr_assert_gt(anchors, 10);
}

/* Anchors never move it backwards, even taken back to back. */
Test(tsc, anchors_never_go_back)
{
	struct urpc_tsc c;
	uint64_t prev = 0;
	int i;

	urpc__tsc_init(&c, true);
	if (!c.usable)
		cr_skip_test("no invariant TSC here (or URPC_TSC=0)");
	cr_assert(calibrate(&c));
	for (i = 0; i < 100000; i++) {
		uint64_t r;

		if (i % 7 == 0)
			urpc__tsc_anchor(&c);
		r = urpc__tsc_read(&c);
		cr_assert_geq(r, prev);
		prev = r;
	}
}
