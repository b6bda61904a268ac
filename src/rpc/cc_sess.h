/* SPDX-License-Identifier: MIT */
/*
 * Congestion control of an Rpc's sessions (cc_sess.c, docs/CC.md):
 * the options, each session's controller fed from the round-trip samples
 * (rtt.c) and retransmission timeouts (client.c), and the Rpc's pacer that
 * releases the wait queue of a rate-limited session (client.c's kick, run
 * by evloop.c). A free session (at the line rate) takes none of this.
 * Owner thread only.
 */
#ifndef URPC_RPC_CC_SESS_H
#define URPC_RPC_CC_SESS_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check @o's cc_* fields into rpc->ccp and set up the pacer: 0, -EINVAL (logged), -ENOMEM. */
int urpc__cc_rpc_init(struct urpc_rpc *rpc, const struct urpc_rpc_opts *o);
void urpc__cc_rpc_fini(struct urpc_rpc *rpc);
/* A new client session starts free, at the line rate. */
void urpc__cc_sess_init(struct urpc_rpc *rpc, struct urpc_session *s);
/* Take @s off the pacer (it is being freed or reset). */
void urpc__cc_sess_forget(struct urpc_rpc *rpc, struct urpc_session *s);
/*
 * Round-trip sample @rtt_ns of @s (rtt.c), from an answer that carried the
 * server's fair share @share_mbps (0: none). Cold.
 */
void urpc__cc_sess_sample(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t rtt_ns,
			  uint32_t share_mbps);
/*
 * The server's side of the fair share (cc.h's struct urpc_cc_share):
 * server session @s received a request of @bytes, to be answered with
 * header @h: its client is counted (once an epoch, heavy or light by its
 * bytes), and @h tells it the share (pkthdr.h's budget_us, which
 * urpc__pkthdr_patch() keeps). One test while CC is off.
 */
static inline void urpc__cc_srv_seen(struct urpc_rpc *rpc, struct urpc_session *s,
				     struct urpc_pkthdr *h, uint32_t bytes)
{
	if (unlikely(rpc->cc_wheel != NULL)) {
		(void)urpc__cc_share_seen(&rpc->cc_share, &s->srv.share, bytes, rpc->now);
		h->budget_us = htole32(rpc->cc_share.share_mbps);
	}
}
/* A header built whole (urpc__pkthdr_fill/from) gets the share again; returns @h. */
static inline struct urpc_pkthdr *urpc__cc_srv_echo(const struct urpc_rpc *rpc,
						    struct urpc_pkthdr *h)
{
	if (unlikely(rpc->cc_wheel != NULL))
		h->budget_us = htole32(rpc->cc_share.share_mbps);
	return h;
}
/* A request of @s timed out and is sent again. Cold. */
void urpc__cc_sess_timeout(struct urpc_rpc *rpc, struct urpc_session *s);
/*
 * May limited session @s send a request of @bytes now? If not, it waits on
 * the pacer, whose release kicks its wait queue again. Cold.
 */
bool urpc__cc_sess_may_send(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t bytes);
/*
 * The round trips of one-sided transfers into their sessions' controllers
 * and windows (client and server sessions; docs/CC.md). Cold.
 */
void urpc__cc_os_scan(struct urpc_rpc *rpc);
/* evloop.c, each pass with one-sided operations in flight: one test while CC is off. */
static inline void urpc__cc_os_tick(struct urpc_rpc *rpc)
{
	if (unlikely(rpc->cc_wheel != NULL) && rpc->now >= rpc->cc_os_next_ns)
		urpc__cc_os_scan(rpc);
}
/*
 * The idle sleep beside paced sessions (evloop.c): false when the first
 * is due within CC_IDLE_EARLY_NS (poll on); else true, *@wake_ns no later
 * than that much before it. Cold.
 */
bool urpc__cc_idle_until(const struct urpc_rpc *rpc, uint64_t *wake_ns);
/* Sessions whose pacing time came, each to @kick (evloop.c). */
void urpc__cc_poll(struct urpc_rpc *rpc, void (*kick)(struct urpc_rpc *, struct urpc_session *));

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_CC_SESS_H */
