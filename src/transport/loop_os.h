/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's one-sided operations, registrations and the last
 * reference of an endpoint (loop_os.c), for loop.c and loop_dgram.c.
 * Calls only sw_mr.h.
 */
#ifndef URPC_TRANSPORT_LOOP_OS_H
#define URPC_TRANSPORT_LOOP_OS_H

#include "loop_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Drop a reference (pairs with ep_get()); the last one frees @ep and what
 * it owns, with the references of the requests still queued at it (those
 * that requesters queued after destroy() looked, and failed themselves).
 * Thread: any.
 */
void urpc__loop_ep_put(struct loop_ep *ep);

/*
 * Serve the one-sided requests queued at @ep, in order: take the operation
 * (its tag from queued to serving), check key, access and bounds before any
 * byte moves, copy, and queue the completion at the requester. While a
 * simulated network is installed, requests wait while it says the two are
 * partitioned. Thread: @ep's owner.
 */
void urpc__loop_os_serve(struct loop_ep *ep);

/*
 * @ep is dying (dead already set): fail the requests queued at it with
 * -ECONNRESET and drop their references. Thread: @ep's owner.
 */
void urpc__loop_os_fail_incoming(struct loop_ep *ep);

/* Own operations on @peer complete with -ECONNRESET now. Thread: @ep's owner. */
void urpc__loop_os_cancel_peer(struct loop_ep *ep, const struct urpc_tp_peer *peer);

/*
 * Own operation @wr_id completes with @status now unless its target finished
 * it (transport.h, cancel()); waits for a copy under way. Thread: @tp's owner.
 */
int urpc__loop_os_cancel(struct urpc_tp *tp, uint64_t wr_id, int status);

/* Grants (transport.h; the table is sw_mr.c's). Thread: @tp's owner. */
void urpc__loop_os_set_peer_token(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token);
int urpc__loop_os_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
			const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g);
void urpc__loop_os_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g);
bool urpc__loop_os_revoke_ready(struct urpc_tp *tp, struct urpc_tp_grant *g);

/* The registration and one-sided ops (transport.h). Thread: @tp's owner. */
int urpc__loop_os_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			  struct urpc_tp_mr *mr);
void urpc__loop_os_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr);
int urpc__loop_os_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			    const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			    uint64_t wr_id);
int urpc__loop_os_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			     const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			     uint64_t wr_id);
int urpc__loop_os_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n);

/* The one-sided window of own operations to @peer in bytes, and their round trips (transport.h). */
void urpc__loop_os_set_peer_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes);
uint64_t urpc__loop_os_peer_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_LOOP_OS_H */
