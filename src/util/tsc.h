/* SPDX-License-Identifier: MIT */
/*
 * An Rpc's clock from the CPU's time-stamp counter (tsc.c): nanoseconds
 * on CLOCK_MONOTONIC's scale for a few instructions (rdtsc, a multiply),
 * where clock_gettime() costs a call into the vDSO (21 instructions a
 * pass in the verbs guest, callgrind).
 *
 * Used only where the kernel's clock source is the TSC: the kernel reads
 * CLOCK_MONOTONIC from it, having found it at one rate in every power
 * state and synchronized across CPUs; never while a simulation owns the
 * clock seam (seam.h), never off x86-64; URPC_TSC=0 in the environment
 * turns it off.
 * Otherwise, and until it is calibrated, urpc__tsc_read() is not used
 * (mult is 0) and the caller reads urpc__now_ns().
 *
 * Calibration needs no wait: urpc__tsc_anchor(), called by its owner's
 * timer scan (once a millisecond), takes a (TSC, CLOCK_MONOTONIC) pair;
 * the rate is the ratio of the spans since the first pair, once that is
 * a millisecond long, and gets finer as the span grows. Each anchor also
 * brings the clock back to CLOCK_MONOTONIC where it fell behind it, and
 * never moves it backwards: the values read are monotonic, and differ
 * from CLOCK_MONOTONIC by the rate's error over one scan interval (or
 * one idle sleep, at most a second), plus a lead of at most microseconds
 * kept from the first, coarse rates.
 *
 * Owner thread only (no atomics). May include: util/ only; calls
 * clock_gettime (through seam.h), getenv, and reads one sysfs file once
 * per process.
 */
#ifndef URPC_UTIL_TSC_H
#define URPC_UTIL_TSC_H

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_tsc {
	uint64_t mult;		    /* ns per tick, times 2^32; 0: not in use (yet) */
	uint64_t base_tsc, base_ns; /* the last anchor: the clock's value there */
	uint64_t cal_tsc, cal_ns;   /* the first pair: the rate spans from it */
	bool usable;		    /* the TSC may be used here (see above) */
};

#if defined(__x86_64__)
static inline uint64_t urpc__tsc_ticks(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#else
static inline uint64_t urpc__tsc_ticks(void)
{
	return 0; /* never used: urpc__tsc_usable() is false */
}
#endif

/* The clock at counter value @t (not before the anchor's base_tsc). */
static inline uint64_t urpc__tsc_at(const struct urpc_tsc *c, uint64_t t)
{
	return c->base_ns + (uint64_t)(((unsigned __int128)(t - c->base_tsc) * c->mult) >> 32);
}

/*
 * The clock now, in nanoseconds. Only with c->mult != 0. The anchor lies
 * 2^24 ticks before the pair it came from (tsc.c): a counter read on a CPU
 * a little behind is still past it, without a test here.
 */
static inline uint64_t urpc__tsc_read(const struct urpc_tsc *c)
{
	return urpc__tsc_at(c, urpc__tsc_ticks());
}

/*
 * May this process use the TSC as a clock (see above)? Decided once per
 * process; false while a simulation owns the clock seam.
 */
bool urpc__tsc_usable(void);

/* Start @c: unused (mult 0) until anchors calibrate it; never with @allow false. */
void urpc__tsc_init(struct urpc_tsc *c, bool allow);

/*
 * Take a (TSC, CLOCK_MONOTONIC) pair: the rate from the first pair (once a
 * millisecond apart), and the clock brought forward to CLOCK_MONOTONIC
 * where it is behind. Cold: the owner's timer scan.
 */
void urpc__tsc_anchor(struct urpc_tsc *c);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_TSC_H */
