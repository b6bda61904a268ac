/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's operations and connections ending early
 * (verbs_rc_end.c), for verbs.c. Calls verbs_rc.h and verbs_ctl.h.
 */
#ifndef URPC_TRANSPORT_VERBS_RC_END_H
#define URPC_TRANSPORT_VERBS_RC_END_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The cancel op (transport.h). A waiting operation completes with @status
 * at once; a posted one renews its connection's RC pair (see
 * verbs_rc_end.c) and has completed with @status when this returns (-EIO
 * if the NIC never flushed it); one already done keeps its own status.
 * 0, or -ENOENT (no such operation).
 */
int urpc__verbs_rc_cancel(struct urpc_tp *tp, uint64_t wr_id, int status);

/*
 * Handle @h is being released: its waiting operations fail with
 * -ECONNRESET; its posted ones are waited for when the connection has
 * other handles (bounded; past the bound the connection fails and they
 * are flushed), else left to urpc__verbs_rc_conn_fini().
 */
void urpc__verbs_rc_peer_quiesce(struct verbs_tp *v, struct urpc_tp_peer *h);

/*
 * Connection @c loses its last handle: its RC side is torn down (posted
 * operations flushed and reaped, waiting ones fail with -ECONNRESET) and
 * its queued control messages are dropped.
 */
void urpc__verbs_rc_conn_fini(struct verbs_tp *v, struct verbs_conn *c);

/*
 * The memory registered as @mr_handle (a struct ibv_mr) is about to be
 * deregistered: operations using it fail, waiting ones with -EIO at once,
 * posted ones by failing their connection (a tombstone with -EIO) and
 * reaping them; the NIC no longer touches it when this returns.
 */
void urpc__verbs_rc_mr_quiesce(struct verbs_tp *v, const void *mr_handle);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_RC_END_H */
