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

/*
 * The send path's sums (csum_copy(), frame_close()) stay in native byte
 * order, unfolded, from the payload's words to the checksum field: a
 * ones' complement sum of native words is the network-order sum with its
 * bytes swapped, and a field in network order read as a native word is
 * already swapped the same way (RFC 1071), so the seeds, lengths and
 * final checksum need no swap of their own and the sum is folded once.
 */

/* A 16-bit value as a native word holding its network-order bytes. */
static inline uint16_t net16(uint16_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap16(v);
#else
	return v;
#endif
}

/* @s + @v with the end-around carry: a 64-bit ones' complement sum. */
static inline uint64_t add64(uint64_t s, uint64_t v)
{
	s += v;
	return s + (s < v);
}

/* A native 64-bit sum folded to 16 bits (the same sum, in the same byte order). */
static inline uint16_t fold64(uint64_t s)
{
	uint32_t lo = (uint32_t)s, hi = (uint32_t)(s >> 32);

	lo += hi;
	lo += lo < hi;
	/* the upper half of lo + lo rotated is the halves' sum with its carry added back */
	lo += lo >> 16 | lo << 16;
	return (uint16_t)(lo >> 16);
}

#if defined(__x86_64__)
/*
 * Copy @n8 8-byte words (@n8 even, at least 2) from @src to @dst and
 * return their native sum: one add-with-carry chain, two words a turn, the
 * index counting up to 0 with inc, which leaves the carry flag alone (four
 * instructions per word; the portable loop below takes about ten).
 */
static inline uint64_t csum_copy_words(uint8_t *dst, const uint8_t *src, size_t n8)
{
	const uint8_t *se = src + n8 * 8;
	uint8_t *de = dst + n8 * 8;
	long i = -(long)n8;
	uint64_t s, t, v;

	__asm__("xorl %k[s], %k[s]\n\t" /* also clears the carry flag */
		"1:\n\t"
		"movq (%[se],%[i],8), %[t]\n\t"
		"movq 8(%[se],%[i],8), %[v]\n\t"
		"movq %[t], (%[de],%[i],8)\n\t"
		"movq %[v], 8(%[de],%[i],8)\n\t"
		"adcq %[t], %[s]\n\t"
		"adcq %[v], %[s]\n\t"
		"incq %[i]\n\t"
		"incq %[i]\n\t"
		"jnz 1b\n\t"
		"adcq $0, %[s]"
		: [s] "=&r"(s), [t] "=&r"(t), [v] "=&r"(v), [i] "+r"(i)
		: [se] "r"(se), [de] "r"(de)
		: "memory", "cc");
	return s;
}
#else
static inline uint64_t csum_copy_words(uint8_t *dst, const uint8_t *src, size_t n8)
{
	uint64_t s = 0, a;

	for (; n8; n8--, src += 8, dst += 8) {
		memcpy(&a, src, 8);
		memcpy(dst, &a, 8);
		s = add64(s, a);
	}
	return s;
}
#endif

/*
 * Copy @len bytes from @src to @dst and return their native sum, unfolded
 * (see net16()): one pass, each word loaded once for both.
 */
static inline uint64_t csum_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
	uint64_t s = 0, a;
	uint32_t w;
	uint16_t h;

	if (len & 8) {
		memcpy(&a, src, 8);
		memcpy(dst, &a, 8);
		s = a;
		src += 8;
		dst += 8;
	}
	if (len >= 16) {
		size_t n8 = (len >> 3) & ~(size_t)1;

		s = add64(s, csum_copy_words(dst, src, n8));
		src += n8 * 8;
		dst += n8 * 8;
	}
	if (len & 4) {
		memcpy(&w, src, 4);
		memcpy(dst, &w, 4);
		s = add64(s, w);
		src += 4;
		dst += 4;
	}
	if (len & 2) {
		memcpy(&h, src, 2);
		memcpy(dst, &h, 2);
		s = add64(s, h);
		src += 2;
		dst += 2;
	}
	if (len & 1) {
		uint8_t last[2] = {src[0], 0}; /* the first byte of a word */

		dst[0] = src[0];
		memcpy(&h, last, 2);
		s = add64(s, h);
	}
	return s;
}

/* The native sum of @len bytes at @p, unfolded (csum_copy() without the copy). */
static uint64_t csum_native(const uint8_t *p, size_t len)
{
	uint64_t s = 0, a;
	uint32_t w;
	uint16_t h;

	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&a, p, 8);
		s = add64(s, a);
	}
	if (len & 4) {
		memcpy(&w, p, 4);
		s = add64(s, w);
		p += 4;
	}
	if (len & 2) {
		memcpy(&h, p, 2);
		s = add64(s, h);
		p += 2;
	}
	if (len & 1) {
		uint8_t last[2] = {p[0], 0};

		memcpy(&h, last, 2);
		s = add64(s, h);
	}
	return s;
}

/*
 * The ones' complement sum of @len bytes as big-endian 16-bit words, added
 * to @sum (unfolded): their native sum (a ones' complement sum is the same
 * in either byte order up to a swap of its two bytes, RFC 1071), folded,
 * then in big-endian order on a little-endian host. The receive path's
 * checks and the templates use it; the send path keeps csum_native()'s.
 */
static uint64_t csum_add(uint64_t sum, const uint8_t *p, size_t len)
{
	return sum + csum_fin(csum_native(p, len));
}

/* A native sum @s of bytes at offset @off of a run summed from an even offset. */
static inline uint64_t csum_at(uint64_t s, uint32_t off)
{
	/* a byte swap of every word: a rotation by 8 bits, modulo 2^64 - 1 as modulo 2^16 - 1 */
	return off & 1 ? (s << 8 | s >> 56) : s;
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
 * headers hold a template's seeds: @sum is the native sum (see net16())
 * of the UDP payload's @udp_len - UDP_LEN bytes.
 */
static inline uint32_t frame_close(uint8_t *f, uint32_t udp_len, uint64_t sum, uint16_t ip_id)
{
	uint8_t *ip = f + ETH_LEN, *udp = ip + IP_LEN;
	uint16_t seed, tot = net16((uint16_t)(IP_LEN + udp_len)), id = net16(ip_id),
		       ulen = net16((uint16_t)udp_len), c;
	uint32_t t;

	/* the template's partial sums (urpc__xdp_frame_tmpl()) plus what varies */
	memcpy(&seed, ip + 10, 2);
	t = (uint32_t)seed + tot + id;
	t = (t & 0xffff) + (t >> 16);
	t = (t & 0xffff) + (t >> 16);
	c = (uint16_t)~t;
	memcpy(ip + 2, &tot, 2);
	memcpy(ip + 4, &id, 2);
	memcpy(ip + 10, &c, 2);
	/* the pseudo header's length and the UDP header's, then the payload */
	memcpy(&seed, udp + 6, 2);
	c = (uint16_t)~fold64(add64(sum, (uint64_t)seed + 2u * ulen));
	if (!c)
		c = 0xffff; /* 0 means "no checksum" in IPv4; the same in either byte order */
	memcpy(udp + 4, &ulen, 2);
	memcpy(udp + 6, &c, 2);
	return ETH_LEN + IP_LEN + udp_len;
}

uint32_t urpc__xdp_frame_finish(uint8_t *f, uint32_t payload_len, uint16_t ip_id)
{
	const uint8_t *payload = f + ETH_LEN + IP_LEN + UDP_LEN;

	return frame_close(f, UDP_LEN + payload_len, csum_native(payload, payload_len), ip_id);
}

uint32_t urpc__xdp_frame_build(uint8_t *f, const struct urpc_xdp_peer *p, const void *a,
			       uint32_t alen, const void *b, uint32_t blen, uint16_t ip_id)
{
	uint8_t *dst = f + URPC_XDP_HDR_LEN + p->pre_len;
	uint64_t sum;

	/* the whole template, a constant size: a few moves, no call */
	memcpy(f, p->pre, sizeof(p->pre));
	/* a piece at an odd offset of the payload sums with its bytes swapped (RFC 1071) */
	sum = csum_at(csum_copy(dst, a, alen), p->pre_len);
	if (blen)
		sum = add64(sum, csum_at(csum_copy(dst + alen, b, blen), p->pre_len + alen));
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
