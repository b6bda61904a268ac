/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's emulated one-sided protocol and registrations
 * (udp_os.c; the service of peers' requests in udp_serve.c; the batch of
 * one-sided datagrams in udp_ctl.c), for udp.c and udp_io.c. Calls only
 * sw_mr.h below it.
 */
#ifndef URPC_TRANSPORT_UDP_OS_H
#define URPC_TRANSPORT_UDP_OS_H

#include "udp_ctl.h"
#include "udp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registration and one-sided ops (transport.h). */
int urpc__udp_os_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			 struct urpc_tp_mr *mr);
void urpc__udp_os_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr);
int urpc__udp_os_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			   const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			   uint64_t wr_id);
int urpc__udp_os_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			    const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			    uint64_t wr_id);
int urpc__udp_os_cancel(struct urpc_tp *tp, uint64_t wr_id, int status);
int urpc__udp_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns);
void urpc__udp_os_set_peer_token(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token);
/*
 * The one-sided window to @peer in bytes (transport.h): chunks of all own
 * operations to it in flight, 1 to UDP_OS_WINDOW; 0: UDP_OS_WINDOW.
 */
void urpc__udp_os_set_peer_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes);
/* The newest round trip of a chunk to @peer not yet taken, its bytes in *@bytes; 0: none. */
uint64_t urpc__udp_os_peer_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes);
int urpc__udp_os_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
		       const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g);
void urpc__udp_os_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g);

/*
 * Operations still using @peer complete with -ECONNRESET (their later
 * replies are stale); the grants for it are revoked.
 */
void urpc__udp_os_release_peer(struct udp_tp *u, struct urpc_tp_peer *peer);

/*
 * Serve a peer's RD_REQ or WR_DATA (@len bytes at @buf, from @src): the
 * reply is queued, to @src only once it is known as the grant's peer.
 * Returns NULL, or why the datagram is malformed.
 */
const char *urpc__udp_os_serve(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			       const struct sockaddr_in *src);

/*
 * Handle a reply (RD_DATA, WR_ACK, NAK) to one of our operations. Returns
 * NULL (stale replies included: they are harmless), or why it is malformed.
 */
const char *urpc__udp_os_reply(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			       const struct sockaddr_in *src, uint64_t now);

/* The batch of outgoing one-sided datagrams: udp_ctl.h. */

/*
 * Run the operations' timers (resends, time-outs), send what they queued
 * and hand out up to @n completions. The caller drained the socket first.
 */
int urpc__udp_os_poll(struct udp_tp *u, struct urpc_tp_comp *comps, unsigned n);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_OS_H */
