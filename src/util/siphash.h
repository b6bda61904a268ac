/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012): a keyed 64-bit MAC for short messages. The Nexus signs the packets
 * that can change what it believes of a peer with it (nexus_auth.h).
 * Owns nothing; calls nothing. Thread: any.
 */
#ifndef URPC_UTIL_SIPHASH_H
#define URPC_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * SipHash-2-4 of @len bytes at @data under the 128-bit key @k (k[0]: key
 * bytes 0-7 read little-endian, k[1]: bytes 8-15), as the paper defines it.
 */
uint64_t urpc__siphash24(const uint64_t k[2], const void *data, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_SIPHASH_H */
