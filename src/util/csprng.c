/* SPDX-License-Identifier: MIT */
/*
 * ChaCha20 as a generator (csprng.h). Owns nothing beyond the caller's
 * struct. Calls urpc__entropy() (seam.c) when keyed without a seed.
 */
#include "csprng.h"

#include <string.h>

#include "rand.h"
#include "seam.h"

static inline uint32_t rotl(uint32_t v, unsigned n)
{
	return (v << n) | (v >> (32 - n));
}

#define QR(a, b, c, d)                                                                             \
	do {                                                                                       \
		a += b;                                                                            \
		d = rotl(d ^ a, 16);                                                               \
		c += d;                                                                            \
		b = rotl(b ^ c, 12);                                                               \
		a += b;                                                                            \
		d = rotl(d ^ a, 8);                                                                \
		c += d;                                                                            \
		b = rotl(b ^ c, 7);                                                                \
	} while (0)

void urpc__chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
			  uint32_t out[16])
{
	/* "expand 32-byte k" */
	uint32_t in[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
	unsigned i;

	memcpy(in + 4, key, 8 * sizeof(uint32_t));
	in[12] = counter;
	memcpy(in + 13, nonce, 3 * sizeof(uint32_t));
	memcpy(out, in, sizeof(in));
	for (i = 0; i < 10; i++) {
		/* a column round, then a diagonal round */
		QR(out[0], out[4], out[8], out[12]);
		QR(out[1], out[5], out[9], out[13]);
		QR(out[2], out[6], out[10], out[14]);
		QR(out[3], out[7], out[11], out[15]);
		QR(out[0], out[5], out[10], out[15]);
		QR(out[1], out[6], out[11], out[12]);
		QR(out[2], out[7], out[8], out[13]);
		QR(out[3], out[4], out[9], out[14]);
	}
	for (i = 0; i < 16; i++)
		out[i] += in[i];
}

void urpc__csprng_init(struct urpc_csprng *g, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	if (seed) {
		struct urpc_rand r;
		unsigned i;

		urpc__rand_seed(&r, seed);
		for (i = 0; i < 8; i += 2) {
			uint64_t v = urpc__rand_next(&r);

			g->key[i] = (uint32_t)v;
			g->key[i + 1] = (uint32_t)(v >> 32);
		}
	} else {
		urpc__entropy(g->key, sizeof(g->key));
	}
	g->used = 16; /* no block yet */
}

uint64_t urpc__csprng_next(struct urpc_csprng *g)
{
	uint64_t v;

	if (g->used + 2 > 16) {
		/* The 96-bit nonce carries the high half of the 64-bit block number. */
		const uint32_t nonce[3] = {(uint32_t)(g->block >> 32), 0, 0};

		urpc__chacha20_block(g->key, (uint32_t)g->block, nonce, g->out);
		g->block++;
		g->used = 0;
	}
	v = g->out[g->used] | (uint64_t)g->out[g->used + 1] << 32;
	g->used += 2;
	return v;
}
