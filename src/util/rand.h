/* SPDX-License-Identifier: MIT */
/*
 * A small seeded pseudo-random generator (splitmix64 seeding a xorshift64*).
 * Deterministic for a seed: the loop transport's fault switches and the tests
 * rely on that. Not for secrets.
 */
#ifndef URPC_UTIL_RAND_H
#define URPC_UTIL_RAND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_rand {
	uint64_t s;
};

/* Seed @r; any seed, 0 included, gives a usable state. */
static inline void urpc__rand_seed(struct urpc_rand *r, uint64_t seed)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	r->s = z ? z : 0x2545f4914f6cdd1dull;
}

static inline uint64_t urpc__rand_next(struct urpc_rand *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* A double uniformly in [0, 1). */
static inline double urpc__rand_unit(struct urpc_rand *r)
{
	return (double)(urpc__rand_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* An integer uniformly in [0, bound); @bound > 0. */
static inline uint64_t urpc__rand_below(struct urpc_rand *r, uint64_t bound)
{
	return urpc__rand_next(r) % bound;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_RAND_H */
