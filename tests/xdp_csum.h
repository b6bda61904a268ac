/* SPDX-License-Identifier: MIT */
/*
 * A reference for the xdp transport's checksums, for its tests
 * (unit/transport/test_xdp_frame.c, fuzz/fuzz_xdp_frame.c): RFC 1071's
 * ones' complement sum written the plainest way, a byte pair at a time,
 * independent of the library's (src/transport/xdp_frame.c, which sums
 * native words), so each checks the other. Frames: Ethernet (14 bytes),
 * IPv4 with @ihl header bytes, UDP.
 */
#ifndef URPC_TESTS_XDP_CSUM_H
#define URPC_TESTS_XDP_CSUM_H

#include <stddef.h>
#include <stdint.h>

/* The ones' complement sum of @n bytes (big-endian 16-bit words) added to @s, folded. */
static inline uint16_t xdp_csum_sum(const uint8_t *p, size_t n, uint32_t s)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* The sum a UDP checksum covers: pseudo header of the IPv4 header @ip, then @ulen bytes at @udp. */
static inline uint16_t xdp_csum_udp_sum(const uint8_t *ip, const uint8_t *udp, size_t ulen)
{
	return xdp_csum_sum(udp, ulen,
			    (uint32_t)xdp_csum_sum(ip + 12, 8, 0) + 17u + (uint32_t)ulen);
}

/* Write the IPv4 header checksum of the @ihl-byte header at @ip. */
static inline void xdp_csum_ip_fix(uint8_t *ip, size_t ihl)
{
	uint16_t c;

	ip[10] = ip[11] = 0;
	c = (uint16_t)~xdp_csum_sum(ip, ihl, 0);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
}

/* Write the UDP checksum of the @ulen-byte datagram after the @ihl-byte header at @ip. */
static inline void xdp_csum_udp_fix(uint8_t *ip, size_t ihl, size_t ulen)
{
	uint8_t *udp = ip + ihl;
	uint16_t c;

	udp[6] = udp[7] = 0;
	c = (uint16_t)~xdp_csum_udp_sum(ip, udp, ulen);
	udp[6] = (uint8_t)(c >> 8);
	udp[7] = (uint8_t)c;
}

#endif /* URPC_TESTS_XDP_CSUM_H */
