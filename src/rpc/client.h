/* SPDX-License-Identifier: MIT */
/*
 * The client's side of the datapath: enqueueing requests, the wait queue,
 * responses (small, or READ when large) and the one place a request
 * completes (retransmission and deadlines: retx.h).
 */
#ifndef URPC_RPC_CLIENT_H
#define URPC_RPC_CLIENT_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A response datagram (header checked) for client session @s. */
void urpc__cli_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		  const uint8_t *data, uint32_t len);

/*
 * urpc_req_enqueue() in full (client.c), with @deadline (the Rpc clock's;
 * 0: none) besides @timeout_ms (0: none): the earlier of the two holds.
 */
int urpc__cli_enqueue(struct urpc_rpc *rpc, int session, unsigned type_flags,
		      struct urpc_msgbuf *req, struct urpc_msgbuf *resp, urpc_cont_fn cont,
		      void *tag, uint32_t timeout_ms, uint64_t deadline);

/* (Re)transmit the request in client slot @sl of @s, with the time it has left. */
void urpc__cli_resend(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl);

/* Complete the request in client slot @sl with @status: its continuation runs, once. */
void urpc__cli_complete(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl,
			int status);

/* Fail every request of a client session (slots and queue) with @status. */
void urpc__cli_fail_all(struct urpc_rpc *rpc, struct urpc_session *s, int status);

/* Move waiting requests into free slots and transmit them. */
void urpc__cli_kick(struct urpc_rpc *rpc, struct urpc_session *s);

/* The datagram header a slot's request leaves from (its descriptor for a large one). */
static inline const void *urpc__cli_req_pkt(const struct urpc_cslot *sl)
{
	return sl->large_req ? (const void *)&sl->lpkt.h : (const void *)urpc__mb_hdr(sl->req);
}

/* Mark client session @s as having requests (the timer scan looks at it). */
static inline void urpc__cli_mark_busy(struct urpc_rpc *rpc, const struct urpc_session *s)
{
	rpc->busy_map[s->local_num >> 6] |= 1ull << (s->local_num & 63);
}

/*
 * Does client session @s have a request in a slot or waiting for one? Its
 * timers then need polling: the Rpc does not sleep.
 */
static inline bool urpc__cli_busy(const struct urpc_session *s)
{
	return s->cli.free_mask != s->cli.all_free || s->cli.wq_head != s->cli.wq_tail;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_CLIENT_H */
