/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the libFuzzer targets of tests/fuzz: the entry points'
 * prototypes, a reader that takes bytes off the front of an input, and the
 * check that turns a broken invariant into a crash libFuzzer reports.
 * Owns nothing; header-only; calls libc only.
 */
#ifndef URPC_TESTS_FUZZ_FUZZ_H
#define URPC_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libFuzzer calls these; declared here for -Wmissing-prototypes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * A broken invariant is a bug: print where and why, then abort() so that
 * libFuzzer saves the input as a crash. Fuzz targets only (never src/).
 */
#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant '%s' broken: ", __FILE__, __LINE__,      \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* The unread rest of an input. Reads past the end give zeros. */
struct fz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fz_u8(struct fz_in *in)
{
	uint8_t v = 0;

	if (in->n) {
		v = in->p[0];
		in->p++;
		in->n--;
	}
	return v;
}

static inline uint16_t fz_u16(struct fz_in *in)
{
	uint16_t lo = fz_u8(in);

	return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

static inline uint32_t fz_u32(struct fz_in *in)
{
	uint32_t lo = fz_u16(in);

	return lo | (uint32_t)fz_u16(in) << 16;
}

static inline uint64_t fz_u64(struct fz_in *in)
{
	uint64_t lo = fz_u32(in);

	return lo | (uint64_t)fz_u32(in) << 32;
}

/* Take up to @want bytes; *@got says how many there were. */
static inline const uint8_t *fz_bytes(struct fz_in *in, size_t want, size_t *got)
{
	const uint8_t *p = in->p;

	*got = want < in->n ? want : in->n;
	in->p += *got;
	in->n -= *got;
	return p;
}

/* Little-endian loads and stores in a buffer that the target patches. */
static inline void fz_put_le32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline void fz_put_le64(uint8_t *b, uint64_t v)
{
	fz_put_le32(b, (uint32_t)v);
	fz_put_le32(b + 4, (uint32_t)(v >> 32));
}

static inline uint32_t fz_get_le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t fz_get_le64(const uint8_t *b)
{
	return fz_get_le32(b) | (uint64_t)fz_get_le32(b + 4) << 32;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TESTS_FUZZ_FUZZ_H */
