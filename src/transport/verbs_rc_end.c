/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's one-sided operations and connections that end
 * early: cancel (a user's deadline), a peer handle released, a connection
 * losing its last handle, memory deregistered under posted operations.
 * verbs.c calls in here through verbs_rc_end.h; this file calls
 * verbs_rc.h, and verbs_ctl.h (dropping a connection's queued messages).
 *
 * A posted work request cannot be taken back alone: cancel moves the
 * connection's QP to the error state and renews the pair
 * (urpc__verbs_rc_renew()). The cancelled operation reports the cancel's
 * status once its work requests are back, before cancel() returns, so the
 * NIC no longer touches its memory; every other operation flushed with it
 * is posted again on the new pair, and the peer requeues what it had
 * posted on the old one when our RENEW comes. A renewal costs a
 * handshake (a round trip over session management) and, where grants are
 * memory windows, binding them again to the new QP (same keys; verbs_mw.c).
 */
#include "verbs_rc_end.h"

#include "verbs_ctl.h"
#include "verbs_rc.h"

/* ---- handles, connections and memory going away ------------------------------ */

/*
 * Fail with @status the operations waiting on @c's FIFO that were posted
 * on handle @h, or use the memory @mr_handle, or are op @only (whichever
 * is not NULL or VERBS_NIL).
 */
static void wait_fail(struct verbs_tp *v, struct verbs_conn *c, const struct urpc_tp_peer *h,
		      const void *mr_handle, uint16_t only, int status)
{
	uint16_t *link = &c->wait_head, prev = VERBS_NIL;

	while (*link != VERBS_NIL) {
		uint16_t k = *link;

		if ((h && v->ops[k].peer == h) || (mr_handle && v->ops[k].mr_handle == mr_handle) ||
		    k == only) {
			*link = v->ops[k].next;
			urpc__verbs_rc_op_done(v, k, status);
		} else {
			prev = k;
			link = &v->ops[k].next;
		}
	}
	c->wait_tail = prev;
}

/* ---- cancel ------------------------------------------------------------------ */

int urpc__verbs_rc_cancel(struct urpc_tp *tp, uint64_t wr_id, int status)
{
	struct verbs_tp *v = to_verbs(tp);
	struct verbs_conn *p;
	struct verbs_op *op;
	uint32_t i;

	for (i = 0; i < VERBS_OS_OPS; i++)
		if (v->ops[i].state != VERBS_OP_FREE && v->ops[i].wr_id == wr_id)
			break;
	if (i == VERBS_OS_OPS)
		return -ENOENT;
	op = &v->ops[i];
	p = op->conn;
	switch (op->state) {
	case VERBS_OP_DONE:
		return 0; /* it finished first: its own status */
	case VERBS_OP_WAITING:
		wait_fail(v, p, NULL, NULL, (uint16_t)i, status);
		return 0;
	case VERBS_OP_POSTED:
		break;
	case VERBS_OP_FREE:
		return -ENOENT;
	}
	op->status = status; /* what its flushed work requests report */
	if (p->rc_state != VERBS_RC_READY) {
		/* FAILED: its QP is in the error state already; wait for the flush. */
		urpc__verbs_rc_drain(v, p);
		return 0;
	}
	urpc__verbs_rc_renew(v, p);
	/* At once, even with nothing to requeue: the peer's own work waits on it. */
	p->renew = true;
	urpc__verbs_rc_start(v, p);
	return 0;
}

void urpc__verbs_rc_peer_quiesce(struct verbs_tp *v, struct urpc_tp_peer *h)
{
	struct verbs_conn *c = h->conn;
	uint64_t end;

	wait_fail(v, c, h, NULL, VERBS_NIL, -ECONNRESET);
	if (h->posted && c->refs > 1) {
		end = urpc__now_ns() + VERBS_DRAIN_NS;
		while (h->posted && urpc__now_ns() < end)
			urpc__verbs_rc_reap(v);
		if (h->posted) {
			urpc__verbs_rc_fail(v, c, -ETIMEDOUT,
					    "operations of a released peer did not complete");
			urpc__verbs_rc_drain(v, c);
		}
	}
}

void urpc__verbs_rc_conn_fini(struct verbs_tp *v, struct verbs_conn *c)
{
	urpc__verbs_rc_teardown(v, c, -ECONNRESET);
	urpc__verbs_ctl_purge(v, c);
}

void urpc__verbs_rc_mr_quiesce(struct verbs_tp *v, const void *mr_handle)
{
	struct verbs_conn *p;
	uint32_t i;

	for (p = v->conns; p; p = p->next)
		wait_fail(v, p, NULL, mr_handle, VERBS_NIL, -EIO);
	for (i = 0; i < VERBS_OS_OPS; i++) {
		struct verbs_op *op = &v->ops[i];

		if (op->state != VERBS_OP_POSTED || op->mr_handle != mr_handle)
			continue;
		urpc__verbs_rc_fail(v, op->conn, -EIO, "its memory was deregistered");
		urpc__verbs_rc_drain(v, op->conn);
	}
}
