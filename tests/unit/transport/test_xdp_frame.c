/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's frames (src/transport/xdp_frame.c), without a NIC:
 * a built frame parses back with full, correct checksums, and each kind of
 * bad frame the issue names (short, bad checksum, bad IHL, fragment, UDP
 * length that disagrees) is refused with its own reason, never read past
 * its end (the buffers are exact-size heap blocks, checked by ASan).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "transport/xdp_frame.h"
#include "xdp_csum.h"

static const uint8_t MAC_A[6] = {2, 0, 0, 0, 0, 0xa}, MAC_B[6] = {2, 0, 0, 0, 0, 0xb};
#define SADDR 0x0100000au /* 10.0.0.1, network order */
#define DADDR 0x0200000au
#define SPORT 0x3412
#define DPORT 0x7856

/* A frame of @n payload bytes (0, 1, 2, ...) from A to B, in an exact-size block. */
static uint8_t *frame(uint32_t n, uint32_t *len)
{
	struct urpc_xdp_peer p;
	uint8_t *f = malloc(URPC_XDP_HDR_LEN + n);
	uint32_t i;

	cr_assert_not_null(f);
	urpc__xdp_frame_tmpl(&p, MAC_A, MAC_B, SADDR, DADDR, SPORT, DPORT);
	memcpy(f, p.hdr, URPC_XDP_HDR_LEN);
	for (i = 0; i < n; i++)
		f[URPC_XDP_HDR_LEN + i] = (uint8_t)i;
	*len = urpc__xdp_frame_finish(f, n, 7);
	return f;
}

static enum urpc_xdp_drop parse(const uint8_t *f, uint32_t len, bool csum)
{
	struct urpc_xdp_dgram d;

	return urpc__xdp_frame_parse(f, len, DADDR, DPORT, csum, &d);
}

Test(xdp_frame, a_built_frame_parses_back_with_full_checksums)
{
	uint32_t n, len;

	for (n = 0; n <= 1500; n += n < 40 ? 1 : 97) {
		struct urpc_xdp_dgram d;
		uint8_t *f = frame(n, &len);

		cr_assert_eq(len, URPC_XDP_HDR_LEN + n);
		cr_assert_eq(
			urpc__xdp_frame_parse(f, len, DADDR, DPORT, true, &d), URPC_XDP_OK,
			"%u bytes: %s", n,
			urpc__xdp_drop_str(urpc__xdp_frame_parse(f, len, DADDR, DPORT, true, &d)));
		cr_assert_eq(d.off, URPC_XDP_HDR_LEN);
		cr_assert_eq(d.len, n);
		cr_assert_eq(d.saddr, SADDR);
		cr_assert_eq(d.sport, SPORT);
		/* full checksums, as a kernel receiver checks them: IP header and UDP */
		cr_assert_eq(xdp_csum_sum(f + 14, 20, 0), 0xffff, "IP header checksum");
		cr_assert_eq(xdp_csum_udp_sum(f + 14, f + 34, 8 + n), 0xffff,
			     "UDP checksum over %u bytes", n);
		cr_assert_neq(f[40] | f[41], 0, "a zero UDP checksum means none");
		free(f);
	}
}

Test(xdp_frame, every_truncation_is_refused_without_reading_past_the_end)
{
	uint32_t len, cut;
	uint8_t *f = frame(64, &len);

	for (cut = 0; cut < len; cut++) {
		uint8_t *g = malloc(cut ? cut : 1);

		memcpy(g, f, cut);
		cr_assert_neq(parse(g, cut, true), URPC_XDP_OK, "a frame cut to %u bytes", cut);
		free(g);
	}
	cr_assert_eq(parse(f, 10, true), URPC_XDP_DROP_SHORT);
	cr_assert_eq(parse(f, len - 1, true), URPC_XDP_DROP_BAD_IP_LEN);
	free(f);
}

Test(xdp_frame, each_bad_field_has_its_reason)
{
	uint32_t len;
	uint8_t *f = frame(32, &len);
	uint8_t save;

	/* a flipped payload bit: bad UDP checksum, unless the driver vouches */
	f[URPC_XDP_HDR_LEN + 3] ^= 0x10;
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_BAD_UDP_CSUM);
	cr_assert_eq(parse(f, len, false), URPC_XDP_OK);
	f[URPC_XDP_HDR_LEN + 3] ^= 0x10;
	/* the IP header: checksum, IHL below 5 and beyond the frame */
	f[14 + 8] ^= 1; /* TTL */
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_BAD_IP_CSUM);
	cr_assert_eq(parse(f, len, false), URPC_XDP_OK, "the driver vouches for the IP header too");
	f[14 + 8] ^= 1;
	save = f[14];
	f[14] = 0x44;
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_BAD_IHL);
	f[14] = 0x4f;
	cr_assert_eq(parse(f, 60, true), URPC_XDP_DROP_BAD_IHL);
	f[14] = 0x65;
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_NOT_IPV4);
	f[14] = save;
	f[12] = 0x86; /* IPv6's ethertype */
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_NOT_IPV4);
	f[12] = 0x08;
	cr_assert_eq(parse(f, len, true), URPC_XDP_OK);
	free(f);
}

/* Set the IP header's 16-bit field at @off and redo its checksum. */
static void ip_set(uint8_t *f, unsigned off, uint16_t v)
{
	f[14 + off] = (uint8_t)(v >> 8);
	f[14 + off + 1] = (uint8_t)v;
	xdp_csum_ip_fix(f + 14, 20);
}

Test(xdp_frame, fragments_length_mismatches_and_strangers_are_refused)
{
	uint32_t len;
	uint8_t *f = frame(32, &len);
	struct urpc_xdp_dgram d;

	ip_set(f, 6, 0x2000); /* more fragments */
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_FRAGMENT);
	ip_set(f, 6, 0x0010); /* an offset */
	cr_assert_eq(parse(f, len, true), URPC_XDP_DROP_FRAGMENT);
	ip_set(f, 6, 0x4000); /* DF only: fine */
	cr_assert_eq(parse(f, len, true), URPC_XDP_OK);
	/* an IP length shorter than the frame (padding) is fine, the UDP length then disagrees */
	ip_set(f, 2, (uint16_t)(20 + 8 + 31));
	cr_assert_eq(parse(f, len, false), URPC_XDP_DROP_BAD_UDP_LEN);
	ip_set(f, 2, (uint16_t)(len - 14 + 1));
	cr_assert_eq(parse(f, len, false), URPC_XDP_DROP_BAD_IP_LEN);
	ip_set(f, 2, (uint16_t)(len - 14));
	f[14 + 9] = 6; /* TCP */
	ip_set(f, 2, (uint16_t)(len - 14));
	cr_assert_eq(parse(f, len, false), URPC_XDP_DROP_NOT_UDP);
	f[14 + 9] = 17;
	ip_set(f, 2, (uint16_t)(len - 14));
	cr_assert_eq(urpc__xdp_frame_parse(f, len, DADDR, DPORT + 1, true, &d),
		     URPC_XDP_DROP_NOT_OURS);
	cr_assert_eq(urpc__xdp_frame_parse(f, len, SADDR, DPORT, true, &d), URPC_XDP_DROP_NOT_OURS);
	cr_assert_eq(urpc__xdp_frame_parse(f, len, 0, DPORT, true, &d), URPC_XDP_OK, "any address");
	free(f);
}

Test(xdp_frame, every_reason_has_a_text)
{
	int r;

	for (r = 0; r < URPC_XDP_DROP_MAX; r++)
		cr_assert_neq(urpc__xdp_drop_str((enum urpc_xdp_drop)r)[0], '?', "reason %d", r);
}

Test(xdp_frame, checksums_hold_for_any_addresses_ports_and_ids)
{
	uint32_t seed = 12345, i, n, len;

	/* the template's partial sums plus each frame's lengths and id, against the reference */
	for (i = 0; i < 2000; i++) {
		struct urpc_xdp_peer p;
		uint8_t f[URPC_XDP_HDR_LEN + 64];
		uint32_t sa, da;
		uint16_t sp, dp;

		seed = seed * 1103515245u + 12345u;
		sa = seed;
		seed = seed * 1103515245u + 12345u;
		da = seed;
		sp = (uint16_t)(seed >> 16);
		dp = (uint16_t)seed ^ 0x5a5a;
		n = i % 64;
		urpc__xdp_frame_tmpl(&p, MAC_A, MAC_B, sa, da, sp, dp);
		memcpy(f, p.hdr, URPC_XDP_HDR_LEN);
		memset(f + URPC_XDP_HDR_LEN, (int)(i * 37), n);
		len = urpc__xdp_frame_finish(f, n, (uint16_t)(i * 7919));
		cr_assert_eq(len, URPC_XDP_HDR_LEN + n);
		cr_assert_eq(xdp_csum_sum(f + 14, 20, 0), 0xffff, "IP header checksum, frame %u",
			     i);
		cr_assert_eq(xdp_csum_udp_sum(f + 14, f + 34, 8 + n), 0xffff,
			     "UDP checksum, frame %u", i);
	}
}

/*
 * urpc__xdp_frame_build() (template with a prefix, two pieces copied and
 * summed in one pass) makes the very bytes that the template, a copy and
 * urpc__xdp_frame_finish() make, for every prefix length, odd and even
 * piece lengths and piece contents; and its checksums hold by the reference.
 */
Test(xdp_frame, a_frame_built_in_one_pass_equals_a_finished_one)
{
	uint32_t seed = 777, i, pre_len, alen, blen, n, len_a, len_b;

	for (i = 0; i < 3000; i++) {
		struct urpc_xdp_peer p;
		uint8_t pre[URPC_XDP_PRE_MAX], a[200], b[200];
		uint8_t fa[URPC_XDP_HDR_LEN + URPC_XDP_PRE_MAX + 400];
		uint8_t fb[URPC_XDP_HDR_LEN + URPC_XDP_PRE_MAX + 400];
		uint32_t k;

		seed = seed * 1103515245u + 12345u;
		pre_len = (seed >> 8) % (URPC_XDP_PRE_MAX + 1);
		alen = (seed >> 13) % 200;
		blen = i % 3 ? (seed >> 21) % 200 : 0;
		for (k = 0; k < sizeof(pre); k++)
			pre[k] = (uint8_t)(seed >> (k % 24)) ^ (uint8_t)k;
		for (k = 0; k < sizeof(a); k++) {
			a[k] = (uint8_t)(k * 31 + i);
			b[k] = (uint8_t)(k * 17 + i * 3);
		}
		urpc__xdp_frame_tmpl(&p, MAC_A, MAC_B, seed, ~seed, (uint16_t)i, (uint16_t)(i * 3));
		urpc__xdp_frame_tmpl_pre(&p, pre, pre_len);
		/* the reference route: headers, prefix and pieces copied, then finished */
		n = pre_len + alen + blen;
		memcpy(fa, p.hdr, URPC_XDP_HDR_LEN);
		memcpy(fa + URPC_XDP_HDR_LEN, pre, pre_len);
		memcpy(fa + URPC_XDP_HDR_LEN + pre_len, a, alen);
		memcpy(fa + URPC_XDP_HDR_LEN + pre_len + alen, b, blen);
		len_a = urpc__xdp_frame_finish(fa, n, (uint16_t)(i * 7));
		memset(fb, 0xee, sizeof(fb));
		len_b = urpc__xdp_frame_build(fb, &p, a, alen, blen ? b : NULL, blen,
					      (uint16_t)(i * 7));
		cr_assert_eq(len_b, len_a, "frame %u", i);
		cr_assert_eq(memcmp(fa, fb, len_a), 0,
			     "frame %u (prefix %u, pieces %u + %u) differs", i, pre_len, alen,
			     blen);
		cr_assert_eq(xdp_csum_sum(fb + 14, 20, 0), 0xffff, "IP header checksum, frame %u",
			     i);
		cr_assert_eq(xdp_csum_udp_sum(fb + 14, fb + 34, 8 + n), 0xffff,
			     "UDP checksum, frame %u", i);
	}
}
