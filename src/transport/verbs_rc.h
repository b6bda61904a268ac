/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC connections and one-sided operations
 * (verbs_rc.c), for verbs_hs.c, verbs_mw.c, verbs_rc_poll.c,
 * verbs_rc_end.c and verbs.c. Calls verbs_ctl.h, verbs_qp.h and
 * verbs_notice.h.
 */
#ifndef URPC_TRANSPORT_VERBS_RC_H
#define URPC_TRANSPORT_VERBS_RC_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set up the table of one-sided operations (all free). */
void urpc__verbs_rc_init(struct verbs_tp *v);

/*
 * Start the RC side of @c (state NONE): QP, REQ (RENEW if c->renew). 0, or
 * -errno and @c FAILED (what waits on its FIFO fails with it).
 */
int urpc__verbs_rc_start(struct verbs_tp *v, struct verbs_conn *c);

/*
 * Move @c to FAILED with @err (if not failed yet; logged once, with @why
 * or else @err): waiting operations fail with @err, posted ones are
 * flushed and report it.
 */
void urpc__verbs_rc_fail(struct verbs_tp *v, struct verbs_conn *c, int err, const char *why);

/*
 * Fail @c with -ETIMEDOUT because a deadline passed: its posted operations
 * made no progress for the one-sided time-out, or its handshake had no
 * answer (@why says which). Unlike other failures, a time-out is no
 * tombstone: whether the peer still lives is the Nexus's call (heartbeats,
 * which reset the session of a dead one), not the NIC's; a stall (a loaded
 * host, an emulated NIC, a link that flapped) ends what was posted or
 * waited, and the next operation connects a new pair.
 */
void urpc__verbs_rc_stall(struct verbs_tp *v, struct verbs_conn *c, const char *why);

/*
 * Tear @c's RC side down to NONE: posted operations are flushed and reaped
 * (their status the recorded cause, else @err), waiting ones fail with
 * @err, the QP is destroyed.
 */
void urpc__verbs_rc_teardown(struct verbs_tp *v, struct verbs_conn *c, int err);

/*
 * Renew @c's RC side (READY or PENDING) for a new pair: its QP goes to the
 * error state, posted operations are flushed back to the FIFO ahead of
 * the waiting ones (from their first chunk not done; one whose status is
 * set, a cancelled one, retires with it), the QP is destroyed: state NONE
 * with the FIFO kept. The caller connects anew (urpc__verbs_rc_start()
 * with c->renew, or accepting the peer's RENEW).
 */
void urpc__verbs_rc_renew(struct verbs_tp *v, struct verbs_conn *c);

/*
 * Reap until @c's posted operations are back (its QP is in the error
 * state), bounded by VERBS_DRAIN_NS; past it they complete with -EIO.
 */
void urpc__verbs_rc_drain(struct verbs_tp *v, struct verbs_conn *c);

/* Op @idx (unlinked from any FIFO) joins the done FIFO with @status. */
void urpc__verbs_rc_op_done(struct verbs_tp *v, uint16_t idx, int status);

/* Post what waits on @c's FIFO while its READY QP has room. */
void urpc__verbs_rc_kick(struct verbs_tp *v, struct verbs_conn *c);

/* The one-sided ops (transport.h). poll_completions() runs no handshake timer. */
int urpc__verbs_rc_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			     const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			     uint64_t wr_id);
int urpc__verbs_rc_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			      const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey,
			      size_t len, uint64_t wr_id);
/*
 * Reap RC completions: operations' chunks (the next ones go, finished
 * operations join the done FIFO) and binds or invalidations
 * (v->local_done). Returns how many were seen.
 */
int urpc__verbs_rc_reap(struct verbs_tp *v);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_RC_H */
