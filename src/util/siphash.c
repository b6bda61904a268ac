/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (siphash.h): two compression rounds per 8-byte word, four
 * finalization rounds. Written from the paper's description; checked
 * against its 64 published vectors (tests/unit/util/test_siphash.c).
 * Owns nothing; calls nothing. Thread: any.
 */
#include "siphash.h"

#include <string.h>

#define ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

struct sip_state {
	uint64_t v0, v1, v2, v3;
};

/* One SipRound: the ARX network of the paper's figure 2.1. */
static inline void sip_round(struct sip_state *s)
{
	s->v0 += s->v1;
	s->v1 = ROTL64(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = ROTL64(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = ROTL64(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = ROTL64(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = ROTL64(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = ROTL64(s->v2, 32);
}

/* Absorb word @m with c = 2 rounds. */
static inline void sip_absorb(struct sip_state *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	sip_round(s);
	s->v0 ^= m;
}

/* @n (<= 8) bytes at @b as a little-endian integer, on any host and alignment. */
static inline uint64_t load_le(const uint8_t *b, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

/* A whole word: one load where the host is little-endian (memcpy: any alignment). */
static inline uint64_t load_le64(const uint8_t *b)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
#else
	return load_le(b, 8);
#endif
}

uint64_t urpc__siphash24(const uint64_t k[2], const void *data, size_t len)
{
	const uint8_t *b = data;
	/* The initial state: the key xored with "somepseudorandomlygeneratedbytes". */
	struct sip_state s = {
		.v0 = k[0] ^ 0x736f6d6570736575ull,
		.v1 = k[1] ^ 0x646f72616e646f6dull,
		.v2 = k[0] ^ 0x6c7967656e657261ull,
		.v3 = k[1] ^ 0x7465646279746573ull,
	};
	size_t whole = len & ~(size_t)7, i;

	for (i = 0; i < whole; i += 8)
		sip_absorb(&s, load_le64(b + i));
	/* The last word: the remaining bytes, and the length mod 256 in the top byte. */
	sip_absorb(&s, load_le(b + whole, len - whole) | (uint64_t)(len & 0xff) << 56);
	s.v2 ^= 0xff;
	for (i = 0; i < 4; i++)
		sip_round(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
