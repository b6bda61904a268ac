/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's frames (xdp_frame.c): Ethernet + IPv4 + UDP headers
 * built from a per-peer template with full checksums, and the receive
 * parser that checks a frame before anything reads past a header. Pure
 * functions on bytes, no libxdp: always compiled, and fuzzed
 * (tests/fuzz/fuzz_xdp_frame.c). Calls nothing of ours.
 */
#ifndef URPC_TRANSPORT_XDP_FRAME_H
#define URPC_TRANSPORT_XDP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_XDP_HDR_LEN 42u /* Ethernet 14 + IPv4 20 + UDP 8 */

/* Why a received frame was dropped (X-macro: name, text). 0 is "accepted". */
#define URPC_XDP_DROPS(X)                                                                          \
	X(SHORT, "shorter than its headers")                                                       \
	X(NOT_IPV4, "not IPv4")                                                                    \
	X(BAD_IHL, "bad IP header length")                                                         \
	X(BAD_IP_LEN, "IP length disagrees with the frame")                                        \
	X(BAD_IP_CSUM, "bad IP header checksum")                                                   \
	X(FRAGMENT, "a fragment")                                                                  \
	X(NOT_UDP, "not UDP")                                                                      \
	X(NOT_OURS, "another address or port")                                                     \
	X(BAD_UDP_LEN, "UDP length disagrees with the IP length")                                  \
	X(BAD_UDP_CSUM, "bad UDP checksum")

enum urpc_xdp_drop {
	URPC_XDP_OK = 0,
#define URPC_XDP_DROP_ENUM(name, text) URPC_XDP_DROP_##name,
	URPC_XDP_DROPS(URPC_XDP_DROP_ENUM)
#undef URPC_XDP_DROP_ENUM
		URPC_XDP_DROP_MAX
};

const char *urpc__xdp_drop_str(enum urpc_xdp_drop d);

/* Bytes of a fixed payload prefix a template may carry (urpc__xdp_frame_tmpl_pre()). */
#define URPC_XDP_PRE_MAX 22u

/*
 * A peer's headers, built once at resolve time. Their checksum fields hold
 * the sums of the fields every frame to the peer shares, for
 * urpc__xdp_frame_finish() (change no field after urpc__xdp_frame_tmpl()).
 * @pre holds the same headers followed by the first @pre_len bytes every
 * frame of one kind carries (the udp transport's DATA header), its UDP
 * checksum seed covering them too, for urpc__xdp_frame_build().
 */
struct urpc_xdp_peer {
	uint8_t hdr[URPC_XDP_HDR_LEN];
	uint8_t pre[URPC_XDP_HDR_LEN + URPC_XDP_PRE_MAX];
	uint32_t pre_len;
};

/* An accepted datagram: its source and where its payload lies in the frame. */
struct urpc_xdp_dgram {
	uint32_t saddr; /* network order */
	uint16_t sport; /* network order */
	uint32_t off;	/* payload offset in the frame */
	uint32_t len;	/* payload length */
};

/*
 * Fill @p's template: Ethernet @src_mac -> @dst_mac, IPv4 @saddr -> @daddr
 * (TTL 64, DF), UDP @sport -> @dport (addresses and ports in network order).
 */
void urpc__xdp_frame_tmpl(struct urpc_xdp_peer *p, const uint8_t src_mac[6],
			  const uint8_t dst_mac[6], uint32_t saddr, uint32_t daddr, uint16_t sport,
			  uint16_t dport);

/*
 * After urpc__xdp_frame_tmpl(): the @len bytes at @pre (at most
 * URPC_XDP_PRE_MAX) start every frame urpc__xdp_frame_build() makes.
 */
void urpc__xdp_frame_tmpl_pre(struct urpc_xdp_peer *p, const void *pre, uint32_t len);

/*
 * Build a whole frame at @f (room for URPC_XDP_HDR_LEN + URPC_XDP_PRE_MAX
 * bytes at least, and for the frame): @p's headers and prefix, then the
 * @alen bytes at @a and the @blen at @b, copied and summed in one pass;
 * lengths, IP id @ip_id and both checksums as urpc__xdp_frame_finish()
 * sets them. Returns the frame length.
 */
uint32_t urpc__xdp_frame_build(uint8_t *f, const struct urpc_xdp_peer *p, const void *a,
			       uint32_t alen, const void *b, uint32_t blen, uint16_t ip_id);

/*
 * Finish the frame at @f: the template's headers were copied to its start
 * and @payload_len bytes of payload follow them. Sets the lengths, the IP
 * id @ip_id, the IP header checksum and the full UDP checksum (veth and
 * most NICs leave it to the sender in AF_XDP). Returns the frame length.
 */
uint32_t urpc__xdp_frame_finish(uint8_t *f, uint32_t payload_len, uint16_t ip_id);

/*
 * Check the @len bytes of frame @f: Ethernet II carrying IPv4 with a valid
 * header (IHL 5..15 inside the frame), not a fragment, UDP to
 * @daddr:@dport (network order; @daddr 0: any) whose length matches the
 * IP length; with @check_csum (false where the driver vouches for the
 * frames) the IP header checksum and the UDP one (when the sender set
 * one). Never reads past @len. 0 and *@out filled, or the reason.
 */
enum urpc_xdp_drop urpc__xdp_frame_parse(const uint8_t *f, uint32_t len, uint32_t daddr,
					 uint16_t dport, bool check_csum,
					 struct urpc_xdp_dgram *out);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_FRAME_H */
