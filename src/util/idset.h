/* SPDX-License-Identifier: MIT */
/*
 * A set of small whole numbers 0 .. max-1 (session numbers): take the
 * lowest free one, give one back, and ask for one past the highest taken,
 * each in O(log64 max) word operations (at most 4 levels for 2^24). A bit
 * per number, with two summaries above it: which words are full (the
 * lowest free number is found by walking down through non-full words) and
 * which are not empty (the highest taken one, through non-empty words).
 * The arrays are zeroed by calloc, so a large set costs resident memory
 * only for the numbers it has used. Not thread-safe: one owner.
 */
#ifndef URPC_UTIL_IDSET_H
#define URPC_UTIL_IDSET_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_IDSET_LEVELS 4 /* 2^24 numbers: the bits and three summaries, the top one word */

struct urpc_idset {
	uint32_t max;
	uint32_t count; /* numbers taken */
	unsigned levels;
	uint32_t words[URPC_IDSET_LEVELS];     /* words of each level */
	uint64_t *bits;			       /* level 0: bit set = taken */
	uint64_t *full[URPC_IDSET_LEVELS];     /* levels 1..: bit set = child word full */
	uint64_t *nonempty[URPC_IDSET_LEVELS]; /* levels 1..: bit set = child word not 0 */
};

/* An empty set of numbers below @max (1 .. 2^24). 0, -EINVAL or -ENOMEM. */
int urpc__idset_init(struct urpc_idset *s, uint32_t max);

/* Free what init allocated; @s may be zeroed or half initialized. */
void urpc__idset_fini(struct urpc_idset *s);

/* Take the lowest free number; -1 when all @max are taken. */
int64_t urpc__idset_take(struct urpc_idset *s);

/* Give back @id, which must be taken. */
void urpc__idset_put(struct urpc_idset *s, uint32_t id);

/* Is @id taken? */
bool urpc__idset_has(const struct urpc_idset *s, uint32_t id);

/* One past the highest number taken; 0 when none is. */
uint32_t urpc__idset_end(const struct urpc_idset *s);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_IDSET_H */
