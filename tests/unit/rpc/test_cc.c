/* SPDX-License-Identifier: MIT */
/*
 * The congestion controllers and the pacer's wheel (src/rpc/cc.h), alone,
 * under a virtual clock: a free session is never limited, garbage samples
 * keep the rate within its bounds, a congested session backs off at most
 * once per round trip by at most max_md and comes back, the pacer holds a
 * limited session to its rate, and the wheel releases each entry once, on
 * time, never early.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rpc/cc.h"
#include "util/rand.h"

#define LINE 100000000000ull /* 100 Gb/s */
#define TARGET 25000u	     /* 25 us */

static struct urpc_cc_params params(uint8_t algo)
{
	struct urpc_cc_params p;

	urpc__cc_params_default(&p, LINE, TARGET);
	p.algo = algo;
	return p;
}

/*
 * 10 s of virtual time, a sample every 2 us of a path that is idle but
 * jittery: base 4 us, up to the target on top. Swift never moves off the
 * line rate and the pacer never holds a packet; Timely, reading the same
 * samples as a gradient, does throttle (the reason Swift is the default).
 */
Test(cc, free_session_never_limited)
{
	struct urpc_cc_params sw = params(URPC_CC_ALGO_SWIFT), tl = params(URPC_CC_ALGO_TIMELY);
	struct urpc_cc a, b;
	struct urpc_rand r;
	uint64_t t, lowest_timely = LINE;

	urpc__rand_seed(&r, 32);
	urpc__cc_init(&a, &sw);
	urpc__cc_init(&b, &tl);
	for (t = 1000000000ull; t < 11000000000ull; t += 2000) {
		uint64_t rtt = 4000 + urpc__rand_below(&r, TARGET - 4000 + 1);

		urpc__cc_sample(&a, &sw, rtt, false, 4096, t);
		cr_assert_eq(a.rate_bps, LINE, "Swift left the line rate at %llu ns (sample %llu)",
			     (unsigned long long)t, (unsigned long long)rtt);
		cr_assert_eq(urpc__cc_tx(&a, 4096, t), 0, "a free session was paced");
		urpc__cc_sample(&b, &tl, rtt, false, 4096, t);
		if (b.rate_bps < lowest_timely)
			lowest_timely = b.rate_bps;
	}
	cr_assert_eq(a.decreases, 0);
	cr_assert_lt(lowest_timely, LINE, "Timely was expected to react to the jitter");
}

/* Garbage: zero, huge and wrapped samples, and every sample marked. */
Test(cc, garbage_samples_stay_in_bounds)
{
	struct urpc_cc_params p = params(URPC_CC_ALGO_SWIFT);
	uint64_t bad[] = {0, 1, UINT64_MAX, UINT64_MAX / 2, (uint64_t)-5000, 1ull << 40};
	struct urpc_cc cc;
	uint64_t t = 1000000000ull;
	unsigned i, k;

	urpc__cc_init(&cc, &p);
	for (k = 0; k < 200000; k++) {
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			urpc__cc_sample(&cc, &p, bad[i], k & 1, k & 2 ? 0 : UINT32_MAX, t);
			cr_assert_geq(cc.rate_bps, p.min_bps);
			cr_assert_leq(cc.rate_bps, p.line_bps);
			t += 1000;
		}
	}
	/* Nothing but huge samples for 5 s (50 of the longest round trips): the floor, not below. */
	for (k = 0; k < 5000; k++, t += 1000000)
		urpc__cc_sample(&cc, &p, UINT64_MAX, true, 4096, t);
	cr_assert_eq(cc.rate_bps, p.min_bps, "sustained garbage ends at the floor, not below");
	cr_assert_neq(urpc__cc_tx(&cc, 4096, t), UINT64_MAX);
	/* Good samples again: back to the line within a bounded time. */
	for (k = 0; k < 2000000 && cc.limited; k++, t += 2000)
		urpc__cc_sample(&cc, &p, 5000, false, 4096, t);
	cr_assert(!cc.limited, "still limited after %u good samples", k);
}

/* Above the target: one decrease per round trip, never by more than max_md. */
Test(cc, decrease_bounded_once_per_rtt)
{
	struct urpc_cc_params p = params(URPC_CC_ALGO_SWIFT);
	struct urpc_cc cc;
	uint64_t t = 1000000000ull, before;
	unsigned k;

	urpc__cc_init(&cc, &p);
	urpc__cc_sample(&cc, &p, 50000, false, 4096, t);
	cr_assert_eq(cc.decreases, 1);
	cr_assert_geq(cc.rate_bps, LINE / 2);
	cr_assert_lt(cc.rate_bps, LINE);
	before = cc.rate_bps;
	for (k = 0; k < 10; k++)
		urpc__cc_sample(&cc, &p, 10000000, false, 4096, t + 1000 * k);
	cr_assert_eq(cc.rate_bps, before, "a second decrease within one round trip");
	urpc__cc_sample(&cc, &p, 10000000, false, 4096, t + 10000000);
	cr_assert_eq(cc.decreases, 2);
	cr_assert_geq(cc.rate_bps, before / 2, "more than max_md in one step");
}

/* A limited session sends at its rate: bytes over 10 ms within 1% of rate x time. */
Test(cc, pacer_holds_rate)
{
	struct urpc_cc_params p = params(URPC_CC_ALGO_SWIFT);
	struct urpc_cc cc;
	uint64_t t0 = 1000000000ull, t = t0, sent = 0, rate;

	urpc__cc_init(&cc, &p);
	urpc__cc_sample(&cc, &p, 100000, false, 4096, t);
	cr_assert(cc.limited);
	rate = cc.rate_bps;
	while (t < t0 + 10000000) {
		uint64_t at = urpc__cc_tx(&cc, 4096, t);

		if (at) {
			cr_assert_gt(at, t);
			t = at;
			continue;
		}
		sent += 4096;
	}
	cr_assert_lt(sent * 8 * 100, rate / 100 * 101, "sent %llu bytes at %llu b/s",
		     (unsigned long long)sent, (unsigned long long)rate);
	cr_assert_gt(sent * 8 * 100, rate / 100 * 99, "sent %llu bytes at %llu b/s",
		     (unsigned long long)sent, (unsigned long long)rate);
}

struct rel {
	struct urpc_wheel_ent e;
	uint64_t due, got;
};

static uint64_t now_g;

static void released(struct urpc_wheel_ent *e, void *arg)
{
	struct rel *r = (struct rel *)e;

	cr_assert_eq(r->got, 0, "released twice");
	r->got = now_g;
	(*(unsigned *)arg)++;
}

/* 20,000 entries up to 3 horizons ahead: each released once, never early, within a slot late. */
Test(cc, wheel_releases_each_once_on_time)
{
	static struct urpc_wheel w;
	static struct rel rs[20000];
	struct urpc_rand r;
	unsigned i, n = 0;
	const unsigned shift = 10;
	uint64_t horizon = (uint64_t)URPC_WHEEL_SLOTS << shift;

	urpc__rand_seed(&r, 7);
	now_g = 5000000000ull;
	urpc__wheel_init(&w, now_g, shift);
	for (i = 0; i < 20000; i++) {
		rs[i].due = now_g + urpc__rand_below(&r, 3 * horizon);
		urpc__wheel_add(&w, &rs[i].e, rs[i].due);
	}
	while (n < 20000 && now_g < 5000000000ull + 4 * horizon) {
		now_g += 1 + urpc__rand_below(&r, 3000);
		urpc__wheel_poll(&w, now_g, released, &n);
	}
	cr_assert_eq(n, 20000);
	cr_assert_eq(w.n, 0);
	for (i = 0; i < 20000; i++) {
		cr_assert_geq(rs[i].got, rs[i].due, "entry %u early", i);
		cr_assert_leq(rs[i].got, rs[i].due + 3000 + (1u << shift), "entry %u late", i);
	}
}

/* The idle sleep's look ahead: the first held entry's slot, never after its time, within the look. */
Test(cc, wheel_next_is_the_first_held_slot)
{
	static struct urpc_wheel w;
	struct rel a, b;
	const unsigned shift = 10;
	uint64_t t0 = 7000000000ull, at;

	urpc__wheel_init(&w, t0, shift);
	cr_assert_eq(urpc__wheel_next_ns(&w, 512), UINT64_MAX);
	urpc__wheel_add(&w, &a.e, t0 + 300000);
	urpc__wheel_add(&w, &b.e, t0 + 90000);
	at = urpc__wheel_next_ns(&w, 512);
	cr_assert(at <= t0 + 90000 && at + (1u << shift) > t0 + 90000, "next %llu, want ~%llu",
		  (unsigned long long)at, (unsigned long long)(t0 + 90000));
	/* a shorter look ends before either: its end */
	at = urpc__wheel_next_ns(&w, 16);
	cr_assert_eq(at, ((t0 >> shift) + 16) << shift);
	urpc__wheel_del(&w, &b.e);
	at = urpc__wheel_next_ns(&w, 512);
	cr_assert(at <= t0 + 300000 && at + (1u << shift) > t0 + 300000);
	urpc__wheel_del(&w, &a.e);
	cr_assert_eq(urpc__wheel_next_ns(&w, 512), UINT64_MAX);
}

/* Each out-of-range parameter is refused and named. */
Test(cc, params_checked)
{
	struct urpc_cc_params p;
	const char *what;

	p = params(URPC_CC_ALGO_SWIFT);
	cr_assert_eq(urpc__cc_params_check(&p, &what), 0);
	p.algo = 9;
	cr_assert_eq(urpc__cc_params_check(&p, &what), -EINVAL);
	cr_assert_str_eq(what, "cc_algo");
	p = params(URPC_CC_ALGO_SWIFT);
	p.target_ns = 10;
	cr_assert_eq(urpc__cc_params_check(&p, &what), -EINVAL);
	cr_assert_str_eq(what, "cc_target_ns");
	p = params(URPC_CC_ALGO_SWIFT);
	p.max_md_milli = 1000;
	cr_assert_eq(urpc__cc_params_check(&p, &what), -EINVAL);
	cr_assert_str_eq(what, "cc_max_md");
	p = params(URPC_CC_ALGO_SWIFT);
	p.min_bps = p.line_bps + 1;
	cr_assert_eq(urpc__cc_params_check(&p, &what), -EINVAL);
	cr_assert_str_eq(what, "cc_min_bps");
}
