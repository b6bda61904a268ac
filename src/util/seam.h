/* SPDX-License-Identifier: MIT */
/*
 * The seams: what the engine observes from outside the process that is not
 * a transport or a socket, namely the clock and entropy. Production reads
 * CLOCK_MONOTONIC and getrandom(); the deterministic simulator (tests/sim)
 * installs its own virtual clock and seeded source, so that one seed
 * replays a whole run. Owns two process-wide function pointers; calls libc
 * only.
 *
 * Install before any engine object exists and restore (NULL) after the last
 * one is gone: the pointers are not meant to change under running threads.
 */
#ifndef URPC_UTIL_SEAM_H
#define URPC_UTIL_SEAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A clock in nanoseconds; must never go backwards. */
typedef uint64_t (*urpc_seam_clock_fn)(void *arg);
/* Fill @buf with @len bytes of entropy. */
typedef void (*urpc_seam_entropy_fn)(void *arg, void *buf, size_t len);

struct urpc_seams {
	urpc_seam_clock_fn clock; /* NULL: CLOCK_MONOTONIC */
	void *clock_arg;
	urpc_seam_entropy_fn entropy; /* NULL: getrandom() */
	void *entropy_arg;
};

/* Install @s (copied), or the production defaults with NULL. Thread: see above. */
void urpc__seams_set(const struct urpc_seams *s);

/* True while a simulation owns the seams. Thread: any. */
int urpc__seams_simulated(void);

/* Monotonic nanoseconds: CLOCK_MONOTONIC, or the installed clock. Thread: any. */
uint64_t urpc__now_ns(void);

/*
 * @len bytes for seeds, generations and keys: getrandom(), falling back to
 * the clock mixed with the address space where that fails; or the installed
 * source. Thread: any. Not for the datapath.
 */
void urpc__entropy(void *buf, size_t len);

/* Eight bytes of urpc__entropy(). */
uint64_t urpc__entropy64(void);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_SEAM_H */
