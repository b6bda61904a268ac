/* SPDX-License-Identifier: MIT */
/*
 * The number set (idset.h). Owns its bit arrays. Calls only libc.
 */
#include "idset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ALL ~(uint64_t)0

int urpc__idset_init(struct urpc_idset *s, uint32_t max)
{
	uint32_t n;
	unsigned l;

	memset(s, 0, sizeof(*s));
	if (!max || max > (1u << 24))
		return -EINVAL;
	s->max = max;
	n = (max + 63) / 64;
	s->words[0] = n;
	s->levels = 1;
	while (n > 1) {
		n = (n + 63) / 64;
		s->words[s->levels++] = n;
	}
	s->bits = calloc(s->words[0], sizeof(uint64_t));
	if (!s->bits)
		goto out_nomem;
	for (l = 1; l < s->levels; l++) {
		s->full[l] = calloc(s->words[l], sizeof(uint64_t));
		s->nonempty[l] = calloc(s->words[l], sizeof(uint64_t));
		if (!s->full[l] || !s->nonempty[l])
			goto out_nomem;
	}
	return 0;

out_nomem:
	urpc__idset_fini(s);
	return -ENOMEM;
}

void urpc__idset_fini(struct urpc_idset *s)
{
	unsigned l;

	free(s->bits);
	for (l = 1; l < URPC_IDSET_LEVELS; l++) {
		free(s->full[l]);
		free(s->nonempty[l]);
	}
	memset(s, 0, sizeof(*s));
}

/* The word of level @l (0: the bits). */
static inline uint64_t *word_of(const struct urpc_idset *s, uint64_t *const *sum, unsigned l,
				uint32_t w)
{
	return l ? &sum[l][w] : &s->bits[w];
}

int64_t urpc__idset_take(struct urpc_idset *s)
{
	uint64_t before, *p;
	uint32_t w = 0, id;
	unsigned l;

	/* Down from the top through words that are not full: the lowest free. */
	for (l = s->levels; l-- > 0;) {
		uint64_t x;

		if (w >= s->words[l])
			return -1; /* past the last word: every number is taken */
		x = ~*word_of(s, s->full, l, w);
		if (!x)
			return -1;
		w = w * 64 + (uint32_t)__builtin_ctzll(x);
	}
	id = w;
	if (id >= s->max)
		return -1;
	/* Up: the word may have become full, or stopped being empty. */
	w = id / 64;
	p = &s->bits[w];
	before = *p;
	*p |= (uint64_t)1 << (id % 64);
	for (l = 1; l < s->levels && *p == ALL; l++) {
		p = &s->full[l][w / 64];
		*p |= (uint64_t)1 << (w % 64);
		w /= 64;
	}
	w = id / 64;
	for (l = 1; l < s->levels && !before; l++) {
		p = &s->nonempty[l][w / 64];
		before = *p;
		*p |= (uint64_t)1 << (w % 64);
		w /= 64;
	}
	s->count++;
	return id;
}

void urpc__idset_put(struct urpc_idset *s, uint32_t id)
{
	uint32_t w = id / 64;
	uint64_t *p = &s->bits[w];
	bool was_full = *p == ALL;
	unsigned l;

	*p &= ~((uint64_t)1 << (id % 64));
	for (l = 1; l < s->levels && was_full; l++) {
		p = &s->full[l][w / 64];
		was_full = *p == ALL;
		*p &= ~((uint64_t)1 << (w % 64));
		w /= 64;
	}
	w = id / 64;
	p = &s->bits[w];
	for (l = 1; l < s->levels && !*p; l++) {
		p = &s->nonempty[l][w / 64];
		*p &= ~((uint64_t)1 << (w % 64));
		w /= 64;
	}
	s->count--;
}

bool urpc__idset_has(const struct urpc_idset *s, uint32_t id)
{
	return id < s->max && (s->bits[id / 64] >> (id % 64)) & 1;
}

uint32_t urpc__idset_end(const struct urpc_idset *s)
{
	uint32_t w = 0;
	unsigned l;

	if (!s->count)
		return 0;
	/* Down from the top through words that are not empty: the highest taken. */
	for (l = s->levels; l-- > 0;)
		w = w * 64 + 63u - (uint32_t)__builtin_clzll(*word_of(s, s->nonempty, l, w));
	return w + 1;
}
