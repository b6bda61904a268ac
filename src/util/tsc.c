/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock (tsc.h): whether this process may use the TSC, and its
 * anchors and rate. Calls urpc__now_ns() (seam.h), getenv() and, once per
 * process, reads the kernel's clock source from sysfs; nothing above util/.
 */
#define URPC_LOG_MODULE "util"
#include "tsc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seam.h"

/* The first rate is taken over at least this span; then over ever longer ones. */
#define TSC_CAL_MIN_NS 1000000ull
/*
 * The anchor is kept this many ticks before the pair it was taken from
 * (its value moved back to match), so that a counter read a little behind
 * the pair (on a CPU a few ticks behind) is still past it: the read needs
 * no test for that (tsc.h).
 */
#define TSC_BACK_TICKS (1ull << 24)

#if defined(__x86_64__)
/*
 * The kernel reads CLOCK_MONOTONIC from the TSC: it found it invariant and
 * synchronized across CPUs (it switches to another clock source when a
 * check fails), so a thread that moves to another CPU reads on.
 */
static bool kernel_uses_tsc(void)
{
	char buf[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strcmp(buf, "tsc\n") == 0 || strcmp(buf, "tsc") == 0;
}
#endif

bool urpc__tsc_usable(void)
{
	/* 0: not decided yet; 1: usable; 2: not. Threads that race decide alike. */
	static int decided;
	int v = __atomic_load_n(&decided, __ATOMIC_RELAXED);

	if (urpc__seams_simulated())
		return false;
	if (!v) {
		const char *env = getenv("URPC_TSC");
		bool ok = false;

#if defined(__x86_64__)
		ok = !(env && strcmp(env, "0") == 0) && kernel_uses_tsc();
#else
		(void)env;
#endif
		v = ok ? 1 : 2;
		__atomic_store_n(&decided, v, __ATOMIC_RELAXED);
	}
	return v == 1;
}

/*
 * A pair read close together: the counter halfway through the clock read,
 * the closest of three tries (a thread preempted inside one would skew
 * the rate).
 */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	int i;

	*tsc = 0;
	*ns = 0;
	for (i = 0; i < 3; i++) {
		uint64_t t0 = urpc__tsc_ticks(), m = urpc__now_ns(), t1 = urpc__tsc_ticks();

		if (t1 - t0 < best) {
			best = t1 - t0;
			*tsc = t0 + (t1 - t0) / 2;
			*ns = m;
		}
	}
}

void urpc__tsc_init(struct urpc_tsc *c, bool allow)
{
	memset(c, 0, sizeof(*c));
	c->usable = allow && urpc__tsc_usable();
	if (c->usable)
		pair(&c->cal_tsc, &c->cal_ns);
}

void urpc__tsc_anchor(struct urpc_tsc *c)
{
	uint64_t t, ns, mult, now;
	double rate;

	if (!c->usable)
		return;
	pair(&t, &ns);
	if (ns - c->cal_ns < TSC_CAL_MIN_NS || t <= c->cal_tsc)
		return; /* too short a span for a rate yet (or a counter that went back) */
	/* ns per tick times 2^32, from the whole span (a double: 53 bits are plenty). */
	rate = (double)(ns - c->cal_ns) * 4294967296.0 / (double)(t - c->cal_tsc);
	if (!(rate >= 1.0 && rate < 18446744073709549568.0))
		return; /* not a clock's rate: keep the last one */
	mult = (uint64_t)rate;
	/*
	 * The clock at t, never backwards: where it ran ahead of
	 * CLOCK_MONOTONIC (a rate a little fast), it goes on from where it
	 * is. Before the first rate the caller read CLOCK_MONOTONIC itself,
	 * which is behind ns.
	 */
	now = c->mult ? urpc__tsc_at(c, t) : ns;
	now = URPC_MAX(now, ns);
	c->base_tsc = t - TSC_BACK_TICKS;
	c->base_ns = now - (uint64_t)(((unsigned __int128)TSC_BACK_TICKS * mult) >> 32);
	c->mult = mult;
}
