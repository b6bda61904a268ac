/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's frames (xdp_frame.h): header templates, checksums
 * and the receive parser. Byte order is done by hand (big-endian fields
 * read and written byte by byte), so no header of the host's network stack
 * is needed and the parser never does an unaligned load. Calls nothing of
 * ours.
 */
#include "xdp_frame.h"

#include <string.h>

#define ETH_LEN 14u
#define IP_LEN 20u
#define UDP_LEN 8u
#define ETHERTYPE_IPV4 0x0800u
#define PROTO_UDP 17u

const char *urpc__xdp_drop_str(enum urpc_xdp_drop d)
{
	switch (d) {
	case URPC_XDP_OK:
		return "accepted";
#define URPC_XDP_DROP_CASE(name, text)                                                             \
	case URPC_XDP_DROP_##name:                                                                 \
		return text;
		URPC_XDP_DROPS(URPC_XDP_DROP_CASE)
#undef URPC_XDP_DROP_CASE
	case URPC_XDP_DROP_MAX:
		break;
	}
	return "?";
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * The ones' complement sum of @len bytes as big-endian 16-bit words, added
 * to @sum (unfolded). The bytes are summed as native 32-bit words (a ones'
 * complement sum is the same in either byte order up to a swap of its two
 * bytes, RFC 1071), folded, then swapped to big-endian order on a
 * little-endian host: about one instruction per 4 bytes instead of four
 * per byte (per RPC, 846 instructions of callgrind's count were here).
 */
/* The end of a native-word sum @s: folded to 16 bits, in big-endian word order. */
static inline uint64_t csum_fin(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	s = (uint16_t)(s << 8 | s >> 8);
#endif
	return s;
}

static uint64_t csum_add(uint64_t sum, const uint8_t *p, size_t len)
{
	uint64_t s = 0;
	uint32_t w;
	uint16_t h;

	while (len >= 16) {
		uint64_t a, b;

		/* 64-bit words, the carry added back (add, adc) */
		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		s += a;
		s += s < a;
		s += b;
		s += s < b;
		p += 16;
		len -= 16;
	}
	s = (s & 0xffffffffu) + (s >> 32); /* room for the 32-bit words below */
	while (len >= 4) {
		memcpy(&w, p, 4);
		s += w;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		memcpy(&h, p, 2);
		s += h;
		p += 2;
		len -= 2;
	}
	if (len) {
		uint8_t last[2] = {p[0], 0}; /* the high byte of a big-endian word */

		memcpy(&h, last, 2);
		s += h;
	}
	return sum + csum_fin(s);
}

/*
 * Copy @len bytes from @src to @dst and return their sum as csum_add(0)
 * would: one pass, each 8-byte word loaded once for both (a frame's
 * payload was copied by memcpy() and then read again by csum_add()).
 */
static inline uint64_t csum_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
	uint64_t s = 0, a, b;
	uint32_t w;
	uint16_t h;

	while (len >= 16) {
		/* 64-bit words, the carry added back (add, adc), as csum_add() */
		memcpy(&a, src, 8);
		memcpy(&b, src + 8, 8);
		memcpy(dst, &a, 8);
		memcpy(dst + 8, &b, 8);
		s += a;
		s += s < a;
		s += b;
		s += s < b;
		src += 16;
		dst += 16;
		len -= 16;
	}
	if (len >= 8) {
		memcpy(&a, src, 8);
		memcpy(dst, &a, 8);
		s += a;
		s += s < a;
		src += 8;
		dst += 8;
		len -= 8;
	}
	s = (s & 0xffffffffu) + (s >> 32);
	if (len >= 4) {
		memcpy(&w, src, 4);
		memcpy(dst, &w, 4);
		s += w;
		src += 4;
		dst += 4;
		len -= 4;
	}
	if (len >= 2) {
		memcpy(&h, src, 2);
		memcpy(dst, &h, 2);
		s += h;
		src += 2;
		dst += 2;
		len -= 2;
	}
	if (len) {
		uint8_t last[2] = {src[0], 0};

		dst[0] = src[0];
		memcpy(&h, last, 2);
		s += h;
	}
	return csum_fin(s);
}

/* The folded sum @s of bytes at offset @off of a run summed from an even offset. */
static inline uint64_t csum_odd(uint64_t s, uint32_t off)
{
	return off & 1 ? (uint16_t)(s << 8 | s >> 8) : s;
}

static inline uint16_t csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/*
 * Whether the @ihl-byte IPv4 header at @ip sums to 0xffff (its checksum
 * holds). The usual 20 bytes in five native loads, folded in line: a sum
 * of 0xffff reads the same in either byte order.
 */
static inline bool ip_csum_ok(const uint8_t *ip, uint32_t ihl)
{
	uint32_t w[5];
	uint64_t s;

	if (ihl != IP_LEN)
		return csum_fold(csum_add(0, ip, ihl)) == 0xffff;
	memcpy(w, ip, sizeof(w));
	s = (uint64_t)w[0] + w[1] + w[2] + w[3] + w[4];
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

/* The UDP checksum's sum: pseudo header, then the UDP header and payload at @udp. */
static uint16_t udp_sum(const uint8_t *ip, const uint8_t *udp, uint32_t udp_len)
{
	uint64_t sum = csum_add(0, ip + 12, 8); /* source and destination */

	sum += PROTO_UDP + udp_len;
	sum = csum_add(sum, udp, udp_len);
	return csum_fold(sum);
}

void urpc__xdp_frame_tmpl(struct urpc_xdp_peer *p, const uint8_t src_mac[6],
			  const uint8_t dst_mac[6], uint32_t saddr, uint32_t daddr, uint16_t sport,
			  uint16_t dport)
{
	uint8_t *h = p->hdr, *ip = h + ETH_LEN, *udp = ip + IP_LEN;

	memset(h, 0, sizeof(p->hdr));
	memcpy(h, dst_mac, 6);
	memcpy(h + 6, src_mac, 6);
	put16(h + 12, ETHERTYPE_IPV4);
	ip[0] = 0x45;	       /* version 4, IHL 5 */
	put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;	       /* TTL */
	ip[9] = PROTO_UDP;
	memcpy(ip + 12, &saddr, 4);
	memcpy(ip + 16, &daddr, 4);
	memcpy(udp, &sport, 2);
	memcpy(udp + 2, &dport, 2);
	/*
	 * The checksum fields carry the sums of what every frame to this peer
	 * shares (urpc__xdp_frame_finish() adds the rest): the IP header
	 * without its length and id; the UDP pseudo header's addresses and
	 * protocol and the two ports.
	 */
	put16(ip + 10, csum_fold(csum_add(0, ip, IP_LEN)));
	put16(udp + 6, csum_fold(csum_add(csum_add(0, ip + 12, 8) + PROTO_UDP, udp, 4)));
	/* no prefix until urpc__xdp_frame_tmpl_pre() */
	urpc__xdp_frame_tmpl_pre(p, NULL, 0);
}

void urpc__xdp_frame_tmpl_pre(struct urpc_xdp_peer *p, const void *pre, uint32_t len)
{
	uint8_t *udp = p->pre + ETH_LEN + IP_LEN;

	memcpy(p->pre, p->hdr, URPC_XDP_HDR_LEN);
	if (len)
		memcpy(p->pre + URPC_XDP_HDR_LEN, pre, len);
	memset(p->pre + URPC_XDP_HDR_LEN + len, 0, sizeof(p->pre) - URPC_XDP_HDR_LEN - len);
	p->pre_len = len;
	/* the prefix starts the payload (an even offset): its sum joins the seed */
	put16(udp + 6, csum_fold(get16(udp + 6) + csum_add(0, pre, len)));
}

/*
 * The lengths, the IP id and both checksums of the frame at @f whose
 * headers hold a template's seeds: @udp_sum is the sum of the UDP
 * payload's @udp_len - UDP_LEN bytes.
 */
static inline uint32_t frame_close(uint8_t *f, uint32_t udp_len, uint64_t udp_sum, uint16_t ip_id)
{
	uint8_t *ip = f + ETH_LEN, *udp = ip + IP_LEN;
	uint64_t sum;
	uint16_t c;

	/* the template's partial sums (urpc__xdp_frame_tmpl()) plus what varies */
	sum = (uint64_t)get16(ip + 10) + IP_LEN + udp_len + ip_id;
	put16(ip + 2, (uint16_t)(IP_LEN + udp_len));
	put16(ip + 4, ip_id);
	put16(ip + 10, (uint16_t)~csum_fold(sum));
	/* the pseudo header's length and the UDP header's, then the payload */
	sum = (uint64_t)get16(udp + 6) + 2 * udp_len + udp_sum;
	put16(udp + 4, (uint16_t)udp_len);
	c = (uint16_t)~csum_fold(sum);
	put16(udp + 6, c ? c : 0xffff); /* 0 means "no checksum" in IPv4 */
	return ETH_LEN + IP_LEN + udp_len;
}

uint32_t urpc__xdp_frame_finish(uint8_t *f, uint32_t payload_len, uint16_t ip_id)
{
	const uint8_t *payload = f + ETH_LEN + IP_LEN + UDP_LEN;

	return frame_close(f, UDP_LEN + payload_len, csum_add(0, payload, payload_len), ip_id);
}

uint32_t urpc__xdp_frame_build(uint8_t *f, const struct urpc_xdp_peer *p, const void *a,
			       uint32_t alen, const void *b, uint32_t blen, uint16_t ip_id)
{
	uint8_t *dst = f + URPC_XDP_HDR_LEN + p->pre_len;
	uint64_t sum;

	/* the whole template, a constant size: a few moves, no call */
	memcpy(f, p->pre, sizeof(p->pre));
	/* a piece at an odd offset of the payload sums with its bytes swapped (RFC 1071) */
	sum = csum_odd(csum_copy(dst, a, alen), p->pre_len);
	if (blen)
		sum += csum_odd(csum_copy(dst + alen, b, blen), p->pre_len + alen);
	return frame_close(f, UDP_LEN + p->pre_len + alen + blen, sum, ip_id);
}

/*
 * The usual frame, accepted in a few wide loads: Ethernet II, IPv4 without
 * options (IHL 5), at least the 42 bytes of headers, not a fragment, UDP
 * to @daddr:@dport, the lengths in agreement, the IP header and UDP
 * checksums right when asked. It checks everything the full parse
 * does for such a frame, so it accepts only what that accepts; anything
 * else (false) goes to the full parse, which names the reason.
 */
static inline bool parse_fast(const uint8_t *f, uint32_t len, uint32_t daddr, uint16_t dport,
			      bool check_csum, struct urpc_xdp_dgram *out)
{
	const uint8_t *ip = f + ETH_LEN, *udp = ip + IP_LEN;
	uint32_t ip_len, udp_len;
	uint16_t port;

	if (len < URPC_XDP_HDR_LEN || get16(f + 12) != ETHERTYPE_IPV4 || ip[0] != 0x45)
		return false;
	ip_len = get16(ip + 2);
	udp_len = get16(udp + 4);
	memcpy(&port, udp + 2, 2);
	if (ip_len < IP_LEN + UDP_LEN || ETH_LEN + ip_len > len || udp_len != ip_len - IP_LEN ||
	    (get16(ip + 6) & 0x3fff) || ip[9] != PROTO_UDP || port != dport ||
	    (daddr && memcmp(ip + 16, &daddr, 4)))
		return false;
	if (check_csum &&
	    (!ip_csum_ok(ip, IP_LEN) || (get16(udp + 6) && udp_sum(ip, udp, udp_len) != 0xffff)))
		return false;
	memcpy(&out->saddr, ip + 12, 4);
	memcpy(&out->sport, udp, 2);
	out->off = URPC_XDP_HDR_LEN;
	out->len = udp_len - UDP_LEN;
	return true;
}

enum urpc_xdp_drop urpc__xdp_frame_parse(const uint8_t *f, uint32_t len, uint32_t daddr,
					 uint16_t dport, bool check_csum,
					 struct urpc_xdp_dgram *out)
{
	const uint8_t *ip, *udp;
	uint32_t ihl, ip_len, udp_len;

	if (parse_fast(f, len, daddr, dport, check_csum, out))
		return URPC_XDP_OK;

	if (len < ETH_LEN + IP_LEN)
		return URPC_XDP_DROP_SHORT;
	if (get16(f + 12) != ETHERTYPE_IPV4)
		return URPC_XDP_DROP_NOT_IPV4;
	ip = f + ETH_LEN;
	if ((ip[0] >> 4) != 4)
		return URPC_XDP_DROP_NOT_IPV4;
	ihl = (uint32_t)(ip[0] & 0xf) * 4;
	if (ihl < IP_LEN || ETH_LEN + ihl > len)
		return URPC_XDP_DROP_BAD_IHL;
	ip_len = get16(ip + 2);
	/* a frame may carry padding after the datagram (60-byte minimum), never less */
	if (ip_len < ihl || ETH_LEN + ip_len > len)
		return URPC_XDP_DROP_BAD_IP_LEN;
	if (check_csum && !ip_csum_ok(ip, ihl))
		return URPC_XDP_DROP_BAD_IP_CSUM;
	if (get16(ip + 6) & 0x3fff)
		return URPC_XDP_DROP_FRAGMENT;
	if (ip[9] != PROTO_UDP)
		return URPC_XDP_DROP_NOT_UDP;
	if (ip_len < ihl + UDP_LEN)
		return URPC_XDP_DROP_SHORT;
	udp = ip + ihl;
	if ((daddr && memcmp(ip + 16, &daddr, 4)) || memcmp(udp + 2, &dport, 2))
		return URPC_XDP_DROP_NOT_OURS;
	udp_len = get16(udp + 4);
	if (udp_len != ip_len - ihl)
		return URPC_XDP_DROP_BAD_UDP_LEN;
	if (check_csum && get16(udp + 6) && udp_sum(ip, udp, udp_len) != 0xffff)
		return URPC_XDP_DROP_BAD_UDP_CSUM;
	memcpy(&out->saddr, ip + 12, 4);
	memcpy(&out->sport, udp, 2);
	out->off = ETH_LEN + ihl + UDP_LEN;
	out->len = udp_len - UDP_LEN;
	return URPC_XDP_OK;
}
