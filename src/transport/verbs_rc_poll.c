/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's poll_completions: reap the RC completion queue,
 * fail connections whose operations stopped making progress, and hand the
 * engine what completed; and os_idle: how long an operation went without
 * progress, as that deadline counts it. Called by verbs.c through
 * verbs_rc_poll.h; calls only verbs_rc.h (reap, stall).
 */
#include "verbs_rc_poll.h"

#include "verbs_rc.h"

/*
 * Fail the connections of posted operations that made no progress for
 * one_sided_timeout plus the allowance of one chunk in flight, counted
 * from the later of the operation's own progress and its connection's
 * (so operations queued behind others are not failed for waiting).
 */
static void scan_deadlines(struct verbs_tp *v, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < VERBS_OS_OPS; i++) {
		struct verbs_op *op = &v->ops[i];
		uint64_t allow;

		if (op->state != VERBS_OP_POSTED)
			continue;
		allow = v->base.one_sided_timeout_ns +
			((uint64_t)op->chunk >> 20) * VERBS_OP_NS_PER_MIB;
		if (now >= URPC_MAX(op->progress_ns, op->conn->progress_ns) + allow)
			urpc__verbs_rc_stall(
				v, op->conn,
				"a one-sided operation made no progress within its time-out");
	}
}

int urpc__verbs_rc_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns)
{
	struct verbs_tp *v = to_verbs(tp);
	uint64_t now = urpc__now_ns(), last;
	uint32_t i;

	for (i = 0; i < VERBS_OS_OPS; i++) {
		const struct verbs_op *op = &v->ops[i];

		if (op->state == VERBS_OP_FREE || op->wr_id != wr_id)
			continue;
		/* WAITING: behind others or a handshake, which are bounded; DONE: ended. */
		*idle_ns = 0;
		if (op->state == VERBS_OP_POSTED) {
			last = URPC_MAX(op->progress_ns, op->conn->progress_ns);
			*idle_ns = now > last ? now - last : 0;
		}
		return 0;
	}
	return -ENOENT;
}

int urpc__verbs_rc_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	unsigned cnt = 0;

	/* Grants live: peers' release notices come in, their receives go back. */
	if (v->nposted || v->base.stats.grants_live)
		urpc__verbs_rc_reap(v);
	if (!v->nops)
		return 0;
	if (unlikely(v->nposted)) {
		uint64_t now = urpc__now_ns();

		if (now >= v->next_scan_ns) {
			v->next_scan_ns = now + 1000000;
			scan_deadlines(v, now);
		}
	}
	while (cnt < n && v->done_head != VERBS_NIL) {
		uint16_t idx = v->done_head;
		struct verbs_op *op = &v->ops[idx];

		v->done_head = op->next;
		if (v->done_head == VERBS_NIL)
			v->done_tail = VERBS_NIL;
		comps[cnt].wr_id = op->wr_id;
		comps[cnt].op = op->kind;
		comps[cnt].status = op->status;
		cnt++;
		op->state = VERBS_OP_FREE;
		op->peer = NULL;
		op->next = v->free_head;
		v->free_head = idx;
		v->nops--;
	}
	return (int)cnt;
}
