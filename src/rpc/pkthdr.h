/* SPDX-License-Identifier: MIT */
/*
 * The datapath packet header: a fixed little-endian layout in front of every
 * request and response datagram. Naturally aligned fixed-width fields (no
 * bitfields, no packed attribute); offsets pinned by static_assert. Values
 * are stored with htole*() and read with le*toh(), no-ops on x86.
 */
#ifndef URPC_RPC_PKTHDR_H
#define URPC_RPC_PKTHDR_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../util/compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_PKT_MAGIC 0x7552 /* "uR" */
/*
 * 2: budget_us (issue 35) and src_session with NOSESS answers (issue 31); a
 * version-1 peer's packets are dropped as bad headers.
 */
#define URPC_PKT_VERSION 2

/* Wire-visible: explicit values. */
/*
 * A large message: the payload after the header is a struct
 * urpc_large_desc (rpc.h) naming where the receiver READs the message.
 */
#define URPC_PKT_F_LARGE 0x1u
/*
 * RESP, no payload: the server has read the whole large request named by
 * req_num (its handler answers later). From then on the client's buffer is
 * no longer read by the peer: a deadline may hand it back.
 */
#define URPC_PKT_F_ACK 0x2u

enum urpc_pkt_type {
	URPC_PKT_REQ = 1,
	URPC_PKT_RESP = 2,
	/*
	 * A server's answer to a request for a session it does not have
	 * (session_src.h): no payload; dest_session and src_session swapped,
	 * req_num and token echoed. Rate-limited, never larger than the request.
	 */
	URPC_PKT_NOSESS = 3,
};

struct urpc_pkthdr {
	uint16_t magic;
	uint8_t version;
	uint8_t pkt_type;
	uint8_t req_type;
	uint8_t flags;	 /* URPC_PKT_F_* */
	uint16_t status; /* RESP: 0, or a positive errno code */
	uint32_t msg_size;
	uint32_t dest_session; /* the receiver's session number */
	/*
	 * REQ: the sender's session number, for a NOSESS answer (session_src.h);
	 * else 0. (Once pkt_num, always 0: a message is one datagram, a large
	 * one a descriptor of its payload.)
	 */
	uint32_t src_session;
	/*
	 * REQ: the client's time left before its deadline when it sent this
	 * copy, in microseconds, rounded up (0: no deadline; at most
	 * UINT32_MAX, about 71 minutes). A handler reads it through
	 * urpc_req_deadline_ms(); a nested request may inherit it. RESP: the
	 * server's fair share for the session's client in Mb/s while its
	 * congestion control is on (docs/CC.md: its line rate over the
	 * clients it heard from lately; a client with congestion control caps
	 * its rate there), else 0 (no news: the client keeps what it had).
	 */
	uint32_t budget_us;
	uint64_t req_num;
	uint64_t token; /* the session's random token */
};

static_assert(sizeof(struct urpc_pkthdr) == 40, "wire header is 40 bytes");
static_assert(offsetof(struct urpc_pkthdr, status) == 6, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, msg_size) == 8, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, dest_session) == 12, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, src_session) == 16, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, budget_us) == 20, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, req_num) == 24, "wire layout");
static_assert(offsetof(struct urpc_pkthdr, token) == 32, "wire layout");

/*
 * The datagram of a large message: the header, then where the payload lies
 * at the sender (little-endian), for the receiver to READ it: exactly the
 * bytes of the sender's grant to this session's peer, and its key.
 */
struct urpc_large_desc {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};
static_assert(sizeof(struct urpc_large_desc) == 24, "large descriptor is 24 bytes on the wire");

struct urpc_large_pkt {
	struct urpc_pkthdr h;
	struct urpc_large_desc d;
};

/* Fill @h. Caller owns @h; it must stay unchanged until the transport is done. */
static inline void urpc__pkthdr_fill(struct urpc_pkthdr *h, enum urpc_pkt_type type,
				     uint8_t req_type, uint16_t status, uint32_t msg_size,
				     uint32_t dest_session, uint64_t req_num, uint64_t token)
{
	h->magic = htole16(URPC_PKT_MAGIC);
	h->version = URPC_PKT_VERSION;
	h->pkt_type = (uint8_t)type;
	h->req_type = req_type;
	h->flags = 0;
	h->status = htole16(status);
	h->msg_size = htole32(msg_size);
	h->dest_session = htole32(dest_session);
	h->src_session = 0;
	h->budget_us = 0;
	h->req_num = htole64(req_num);
	h->token = htole64(token);
}

/*
 * Fill @h from a session's template @tmpl (urpc__pkthdr_fill'ed once with
 * its type, destination and token; req_type, msg_size and req_num 0):
 * the cheap way to build a header on the datapath.
 */
static inline void urpc__pkthdr_from(struct urpc_pkthdr *h, const struct urpc_pkthdr *tmpl,
				     uint8_t req_type, uint32_t msg_size, uint64_t req_num)
{
	/*
	 * Three 16-byte moves, the last two overlapping: vector registers
	 * only, so that the fast paths around it keep their general ones.
	 */
	__builtin_memcpy(h, tmpl, 16);
	__builtin_memcpy((uint8_t *)h + 16, (const uint8_t *)tmpl + 16, 16);
	__builtin_memcpy((uint8_t *)h + 24, (const uint8_t *)tmpl + 24, 16);
	h->req_type = req_type;
	h->msg_size = htole32(msg_size);
	h->req_num = htole64(req_num);
}

/*
 * Patch @h for one plain message, where @h holds @tmpl's fixed fields
 * already (magic, version, type, destination, token: a server slot's
 * response buffer, whose header room only ever takes headers of its
 * session, see server.c): req_type, flags and status 0 and msg_size in
 * one store, then req_num. Cheaper than urpc__pkthdr_from(); debug builds
 * check the fixed fields against @tmpl (budget_us excepted: a response's
 * fair share, which the server writes after this).
 */
static inline void urpc__pkthdr_patch(struct urpc_pkthdr *h, const struct urpc_pkthdr *tmpl,
				      uint8_t req_type, uint32_t msg_size, uint64_t req_num)
{
	uint64_t w = htole64((uint64_t)req_type | (uint64_t)msg_size << 32); /* bytes 4 to 11 */

	assert(!memcmp(h, tmpl, 4) && !memcmp(&h->dest_session, &tmpl->dest_session, 8) &&
	       h->token == tmpl->token);
	(void)tmpl;
	memcpy((uint8_t *)h + 4, &w, sizeof(w));
	h->req_num = htole64(req_num);
}

/*
 * The header's first 32 bits (magic, version, packet type) as a number: a
 * valid packet of @type starts with exactly this word.
 */
#define URPC_PKT_WORD(type)                                                                        \
	((uint32_t)URPC_PKT_MAGIC | ((uint32_t)URPC_PKT_VERSION << 16) | ((uint32_t)(type) << 24))

/* Read the first word of a header of at least 4 bytes. */
static inline uint32_t urpc__pkthdr_word(const struct urpc_pkthdr *h)
{
	uint32_t w;

	memcpy(&w, h, sizeof(w));
	return le32toh(w);
}

/*
 * The header's flags and status (bytes 5 to 7) as one number: 0 for a plain
 * answer, one load and one mask.
 */
static inline uint32_t urpc__pkthdr_flags_status(const struct urpc_pkthdr *h)
{
	uint32_t w;

	static_assert(offsetof(struct urpc_pkthdr, flags) == 5, "flags and status after req_type");
	memcpy(&w, (const uint8_t *)h + 4, sizeof(w));
	return le32toh(w) & 0xffffff00u;
}

/*
 * Cheap first checks of a received datagram of @len bytes: long enough,
 * magic, version, a known type, and a message size equal to what the
 * datagram carries. True when the header may be read further.
 */
static inline bool urpc__pkthdr_ok(const struct urpc_pkthdr *h, uint32_t len)
{
	if (unlikely(len < sizeof(*h)))
		return false;
	if (unlikely(le16toh(h->magic) != URPC_PKT_MAGIC || h->version != URPC_PKT_VERSION))
		return false;
	if (unlikely(h->pkt_type - (unsigned)URPC_PKT_REQ >
		     URPC_PKT_NOSESS - (unsigned)URPC_PKT_REQ))
		return false;
	return le32toh(h->msg_size) == len - sizeof(*h);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_PKTHDR_H */
