/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the xdp transport's receive parser and frame builder
 * (src/transport/xdp_frame.c), what urpc__xdp_rx() runs on every frame an
 * AF_XDP socket hands over, before any byte of it reaches the udp
 * transport's checks.
 *
 * Input: byte 0 flags, then the frame. Flags:
 *   bit 0  verify the UDP checksum (a NIC that does not vouch for it)
 *   bit 1  take the destination address and port from the frame itself
 *          (so the parse gets past the "not ours" check), else fixed ones
 *   bit 2  repair the IP header checksum first (reaches the deeper checks)
 *   bit 3  repair the UDP checksum first
 * The frame is copied into a heap block of its exact size, so ASan reports
 * any read past its end. Invariants: an accepted frame's payload lies
 * inside the frame and its length is the UDP length less 8; a frame the
 * builder made from the input's bytes as payload is accepted, checksum
 * verified, with that payload and source unchanged.
 *
 * Owns: per input, two heap blocks. Calls: xdp_frame.h only.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../xdp_csum.h"
#include "fuzz.h"
#include "transport/xdp_frame.h"

/* Repair the IP header checksum and, with @udp, the UDP one, where the frame has room. */
static void repair(uint8_t *f, size_t len, bool udp)
{
	uint8_t *ip = f + 14;
	size_t ihl, ulen;

	if (len < 34)
		return;
	ihl = (size_t)(ip[0] & 0xf) * 4;
	if (ihl < 20 || 14 + ihl > len)
		return;
	xdp_csum_ip_fix(ip, ihl);
	if (!udp || 14 + ihl + 8 > len)
		return;
	ulen = (size_t)(ip[ihl + 4] << 8 | ip[ihl + 5]);
	if (ulen < 8 || 14 + ihl + ulen > len)
		return;
	xdp_csum_udp_fix(ip, ihl, ulen);
}

/*
 * The one-pass builder makes the frame @f that finish made of @payload:
 * its first bytes as the template's prefix, the rest cut in two pieces.
 */
static void build_same(struct urpc_xdp_peer *p, const uint8_t *f, const uint8_t *payload, size_t n)
{
	uint32_t pre = (uint32_t)(n % (URPC_XDP_PRE_MAX + 1)), cut;
	uint8_t *g;

	if (!n)
		return;
	cut = pre + (uint32_t)((n - pre) / 3);
	g = malloc(URPC_XDP_HDR_LEN + URPC_XDP_PRE_MAX + n + 1);
	FUZZ_CHECK(g, "out of memory");
	urpc__xdp_frame_tmpl_pre(p, payload, pre);
	FUZZ_CHECK(urpc__xdp_frame_build(g, p, payload + pre, cut - pre, payload + cut,
					 (uint32_t)n - cut, (uint16_t)n) == URPC_XDP_HDR_LEN + n,
		   "built frame length for %zu bytes", n);
	FUZZ_CHECK(!memcmp(f, g, URPC_XDP_HDR_LEN + n), "a built frame of %zu bytes differs", n);
	free(g);
}

static void round_trip(const uint8_t *payload, size_t n)
{
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 1}, b[6] = {2, 0, 0, 0, 0, 2};
	struct urpc_xdp_peer p;
	struct urpc_xdp_dgram d;
	uint32_t saddr = 0x0100000au, daddr = 0x0200000au, flen;
	uint16_t sport = 0x3412, dport = 0x7856;
	uint8_t *f;

	if (n > 4000)
		n = 4000;
	urpc__xdp_frame_tmpl(&p, a, b, saddr, daddr, sport, dport);
	f = malloc(URPC_XDP_HDR_LEN + n + 1);
	FUZZ_CHECK(f, "out of memory");
	memcpy(f, p.hdr, URPC_XDP_HDR_LEN);
	if (n)
		memcpy(f + URPC_XDP_HDR_LEN, payload, n);
	flen = urpc__xdp_frame_finish(f, (uint32_t)n, (uint16_t)n);
	FUZZ_CHECK(flen == URPC_XDP_HDR_LEN + n, "frame length %u for %zu bytes", flen, n);
	FUZZ_CHECK(urpc__xdp_frame_parse(f, flen, daddr, dport, true, &d) == URPC_XDP_OK,
		   "a built frame of %zu bytes is refused: %s", n,
		   urpc__xdp_drop_str(urpc__xdp_frame_parse(f, flen, daddr, dport, true, &d)));
	FUZZ_CHECK(d.len == n && d.off == URPC_XDP_HDR_LEN && d.saddr == saddr && d.sport == sport,
		   "round trip changed the datagram");
	FUZZ_CHECK(!n || !memcmp(f + d.off, payload, n), "payload changed");
	/* the library's checksums against the plain reference (tests/xdp_csum.h) */
	FUZZ_CHECK(xdp_csum_sum(f + 14, 20, 0) == 0xffff, "IP header checksum of %zu bytes", n);
	FUZZ_CHECK(xdp_csum_udp_sum(f + 14, f + 34, 8 + n) == 0xffff, "UDP checksum of %zu bytes",
		   n);
	build_same(&p, f, payload, n);
	free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct urpc_xdp_dgram d;
	enum urpc_xdp_drop why;
	uint32_t daddr = 0x0200000au;
	uint16_t dport = 0x7856;
	uint8_t flags, *f;
	size_t len;

	if (!size)
		return 0;
	flags = data[0];
	len = size - 1;
	f = malloc(len ? len : 1);
	FUZZ_CHECK(f, "out of memory");
	if (len)
		memcpy(f, data + 1, len);
	if (flags & 4)
		repair(f, len, flags & 8);
	if ((flags & 2) && len >= 38) {
		size_t ihl = (size_t)(f[14] & 0xf) * 4;

		memcpy(&daddr, f + 30, 4);
		if (14 + ihl + 4 <= len)
			memcpy(&dport, f + 14 + ihl + 2, 2);
	}
	why = urpc__xdp_frame_parse(f, (uint32_t)len, daddr, dport, flags & 1, &d);
	FUZZ_CHECK(why < URPC_XDP_DROP_MAX, "reason %d", (int)why);
	FUZZ_CHECK(urpc__xdp_drop_str(why)[0] != '?', "reason %d has no text", (int)why);
	if (why == URPC_XDP_OK) {
		FUZZ_CHECK(d.off >= URPC_XDP_HDR_LEN && d.off <= len && d.len <= len - d.off,
			   "payload [%u, +%u) outside a %zu-byte frame", d.off, d.len, len);
		FUZZ_CHECK(d.off == 14 + (size_t)(f[14] & 0xf) * 4 + 8, "payload offset %u", d.off);
	}
	free(f);
	round_trip(data + 1, len);
	return 0;
}
