/* SPDX-License-Identifier: MIT */
/*
 * A cryptographically secure generator for secrets (session tokens,
 * registration keys): ChaCha20 (RFC 8439) in counter mode under a 256-bit
 * key drawn from urpc__entropy() (getrandom() in production; the
 * simulator's seeded entropy under test), or expanded from a caller's seed
 * when one is given (tests that need repeatable tokens). Unlike rand.h's
 * xorshift64*, one output says nothing about the next. Not thread-safe:
 * one generator per owner.
 */
#ifndef URPC_UTIL_CSPRNG_H
#define URPC_UTIL_CSPRNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_csprng {
	uint32_t key[8];
	uint64_t block; /* the next block's number */
	uint32_t out[16];
	unsigned used; /* words of out[] already handed out */
};

/* Key @g from urpc__entropy() (@seed 0) or from @seed (repeatable, not secret). */
void urpc__csprng_init(struct urpc_csprng *g, uint64_t seed);

/* The next 64 bits. */
uint64_t urpc__csprng_next(struct urpc_csprng *g);

/* The ChaCha20 block function (RFC 8439, 2.3): exposed for its test vector. */
void urpc__chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
			  uint32_t out[16]);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_CSPRNG_H */
