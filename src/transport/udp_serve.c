/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's service of its peers' one-sided requests (RD_REQ,
 * WR_DATA; udp_int.h's wire format): checked against the grant table
 * (sw_mr.c) on every chunk, answered through udp_os.c's batch of
 * one-sided datagrams. Split from udp_os.c (its length). udp_io.c's
 * receive path calls in here through udp_os.h; this file calls udp_os.h's
 * queue, sw_mr.h and the CUDA driver's copies (grants on device memory).
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp_os.h"

#include <errno.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"

/*
 * Is @src, with @token, one of our peers (a session's registered address
 * and its token)? Only for requests whose key names no grant of theirs:
 * linear in the peers, never on the path of a granted request.
 */
static bool udp_known_peer(const struct udp_tp *u, const struct sockaddr_in *src, uint64_t token)
{
	const struct urpc_tp_peer *p;

	for (p = u->peers; p; p = p->next)
		if (p->sa.sin_addr.s_addr == src->sin_addr.s_addr &&
		    p->sa.sin_port == src->sin_port && p->token == token)
			return true;
	return false;
}

/*
 * Serve a granted chunk of device memory at @at (@clen bytes; a WRITE's
 * bytes at @data) with the driver's copies; a copy that fails is answered
 * with a NAK (EIO) and copies nothing more. Cold: device grants only.
 */
static URPC_COLD void udp_serve_device(struct udp_tp *u, const struct udp_hdr *h, uint32_t chunk,
				       bool rd, uint64_t at, const uint8_t *data, uint64_t clen,
				       const struct sockaddr_in *src)
{
	void *dev = (void *)(uintptr_t)at;
	uint8_t *slot;
	int ret;

	u->base.stats.os_served++;
	if (!rd) {
		ret = urpc__cuda_copy_to_device(dev, data, (size_t)clen);
		if (!ret) {
			urpc__udp_ctl_queue(u, src, UDP_T_WR_ACK, h->op_id, chunk, 0, NULL, NULL,
					    0);
			return;
		}
	} else {
		/* The slot of the batch entry that the reply takes: flush a full batch first. */
		if (u->nctl == UDP_CTL_BATCH)
			urpc__udp_os_flush(u);
		slot = u->dev_stage + (size_t)u->nctl * UDP_MAX_DGRAM;
		ret = urpc__cuda_copy_to_host(slot, dev, (size_t)clen);
		if (!ret) {
			urpc__udp_ctl_queue(u, src, UDP_T_RD_DATA, h->op_id, chunk, 0, NULL, slot,
					    (size_t)clen);
			return;
		}
	}
	URPC_WARN_RATELIMIT(u->base.id, "a one-sided copy of device memory failed: %s",
			    urpc_strerror(ret));
	urpc__udp_ctl_queue(u, src, UDP_T_NAK, h->op_id, chunk, EIO, NULL, NULL, 0);
}

/*
 * Answer a granted RD_REQ (@h, @e, from @src): chunk h->chunk and the
 * h->status - 1 after it (a group, issue 32; status 0 asks for one), those
 * inside the operation, to @src (the grant's peer). Device memory (@dev)
 * through the driver's copies.
 */
static void udp_serve_read(struct udp_tp *u, const struct udp_hdr *h, const struct udp_ext *e,
			   const struct sockaddr_in *src, bool dev)
{
	/* chunk indices stay 32-bit (the header's): a group ends at the last */
	uint64_t c, end = URPC_MIN((uint64_t)h->chunk + URPC_MAX(h->status, 1u), 1ull << 32);

	for (c = h->chunk; c < end; c++) {
		uint64_t off = c * e->chunk_size;
		uint64_t clen;

		if (off >= e->len)
			break;
		clen = URPC_MIN((uint64_t)e->chunk_size, e->len - off);
		if (unlikely(dev)) {
			udp_serve_device(u, h, (uint32_t)c, true, e->raddr + off, NULL, clen, src);
			continue;
		}
		u->base.stats.os_served++;
		urpc__udp_ctl_queue(u, src, UDP_T_RD_DATA, h->op_id, (uint32_t)c, 0, NULL,
				    (const void *)(uintptr_t)(e->raddr + off), (size_t)clen);
	}
}

/*
 * Serve a peer's RD_REQ or WR_DATA (@len bytes at @buf, from @src). Returns
 * NULL, or why the datagram is malformed.
 */
const char *urpc__udp_os_serve(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			       const struct sockaddr_in *src)
{
	const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;
	struct udp_ext e;
	uint64_t off, clen;
	bool rd = h->type == UDP_T_RD_REQ;
	unsigned need = rd ? URPC_TP_ACCESS_REMOTE_READ : URPC_TP_ACCESS_REMOTE_WRITE;

	if (unlikely(len < sizeof(*h) + sizeof(e)))
		return "short one-sided request";
	memcpy(&e, buf + sizeof(*h), sizeof(e));
	off = (uint64_t)h->chunk * e.chunk_size;
	if (unlikely(!e.chunk_size || e.chunk_size > UDP_MAX_DGRAM - sizeof(*h) || off >= e.len ||
		     e.raddr + e.len < e.raddr))
		return "bad one-sided range";
	if (unlikely(h->status > (rd ? UDP_OS_WINDOW : 0u)))
		return "bad one-sided chunk count";
	clen = URPC_MIN((uint64_t)e.chunk_size, e.len - off);
	if (unlikely(len != sizeof(*h) + sizeof(e) + (rd ? 0 : clen)))
		return "one-sided length mismatch";
	/*
	 * The source and token decide whether anything is said at all: from
	 * here on @src is the grant's peer's own address (the session's, set
	 * at connect), so no reply goes anywhere else.
	 */
	switch (urpc__sw_grant_check(&u->mrs, e.key, e.token, udp_peer_id(src), need, e.raddr,
				     e.len)) {
	case URPC_SW_SERVE:
		break;
	case URPC_SW_SERVE_DEVICE:
		if (rd) {
			udp_serve_read(u, h, &e, src, true);
			return NULL;
		}
		udp_serve_device(u, h, h->chunk, false, e.raddr + off, buf + sizeof(*h) + sizeof(e),
				 clen, src);
		return NULL;
	case URPC_SW_UNKNOWN:
		if (!udp_known_peer(u, src, e.token)) {
			u->base.stats.os_dropped++;
			URPC_WARN_RATELIMIT(
				u->base.id,
				"dropped a one-sided request that names no grant of its sender");
			return NULL;
		}
		/* a peer of ours with its token, and a key not its: refused */
		URPC_FALLTHROUGH;
	case URPC_SW_REFUSE:
	default:
		u->base.stats.os_served++;
		u->base.stats.os_rejected++;
		urpc__udp_ctl_queue(u, src, UDP_T_NAK, h->op_id, h->chunk, EACCES, NULL, NULL, 0);
		return NULL;
	}
	if (rd) {
		udp_serve_read(u, h, &e, src, false);
		return NULL;
	}
	u->base.stats.os_served++;
	memcpy((void *)(uintptr_t)(e.raddr + off), buf + sizeof(*h) + sizeof(e), (size_t)clen);
	urpc__udp_ctl_queue(u, src, UDP_T_WR_ACK, h->op_id, h->chunk, 0, NULL, NULL, 0);
	return NULL;
}
