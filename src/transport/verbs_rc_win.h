/* SPDX-License-Identifier: MIT */
/*
 * The one-sided window of a verbs connection (issue 32): the session's
 * controller (rpc/cc_sess.c) bounds the bytes of RDMA chunks at the NIC
 * through set_peer_window and is fed their round trips through
 * peer_os_rtt, as udp's and loop's one-sided transfers are. The helpers
 * below keep the books for verbs_rc.c's posts and completions; the two
 * ops and the posting of chunk chains are in verbs_rc_win.c. Calls
 * nothing outside verbs_int.h.
 *
 * While a window is set, an operation's chunks go only while the bytes
 * out stay within it, one chunk of each posted operation always (an
 * operation with nothing out would never complete), and a waiting
 * operation starts only while there is room; the room a completion frees
 * goes to the operations waiting before the one that completed takes it
 * back, so a small transfer is not held behind a large one. Without a
 * window nothing changes: rc_chunks per operation, as before. Several
 * handles of one endpoint share a connection (one QP), hence one window:
 * the last session to set it.
 *
 * Timing: when none is timed, the next chunk posted is; its completion
 * (RC completes a QP's work in order) gives the round trip, with the
 * bytes that were out when it went (its own included): they were ahead
 * of it on the QP, and the caller takes their time on the line out.
 */
#ifndef URPC_TRANSPORT_VERBS_RC_WIN_H
#define URPC_TRANSPORT_VERBS_RC_WIN_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* May an operation start on @p? (room in its window, or none set) */
static inline bool urpc__verbs_win_open(const struct verbs_conn *p)
{
	return !p->os_window || p->os_out < p->os_window;
}

/* May a further chunk of @len bytes of @op go, @n of them handed out in this chain already? */
static inline bool urpc__verbs_win_room(const struct verbs_conn *p, const struct verbs_op *op,
					unsigned n, uint32_t len)
{
	return !p->os_window || (!op->inflight && !n) || p->os_out + len <= p->os_window;
}

/* Chunk number @seq (from 1) of op @idx, @len bytes, went to the NIC. */
static inline void urpc__verbs_win_post(struct verbs_conn *p, struct verbs_op *op, uint16_t idx,
					uint32_t len, uint32_t seq)
{
	op->out += len;
	p->os_out += len;
	if (!p->os_timed_op) {
		p->os_timed_op = (uint16_t)(idx + 1);
		p->os_timed_seq = seq;
		p->os_timed_ns = urpc__now_ns();
		p->os_timed_bytes = p->os_out;
	}
}

/* A chunk of @len bytes that win_post() counted never went (a chain cut short). */
static inline void urpc__verbs_win_undo(struct verbs_conn *p, struct verbs_op *op, uint16_t idx,
					uint32_t len)
{
	op->out -= URPC_MIN(op->out, len);
	p->os_out -= URPC_MIN(p->os_out, (uint64_t)len);
	if (p->os_timed_op == idx + 1)
		p->os_timed_op = 0;
}

/*
 * The oldest chunk of op @idx at the NIC (RC completes in order) came
 * back at @now; call before op->inflight counts it off.
 */
static inline void urpc__verbs_win_done(struct verbs_conn *p, struct verbs_op *op, uint16_t idx,
					uint64_t now)
{
	uint64_t sent = ((uint64_t)op->off + op->chunk - 1) / op->chunk;
	uint64_t k = sent - op->inflight; /* its number, from 0 */
	uint32_t len = (uint32_t)URPC_MIN((uint64_t)op->chunk, op->len - k * op->chunk);

	op->out -= URPC_MIN(op->out, len);
	p->os_out -= URPC_MIN(p->os_out, (uint64_t)len);
	if (p->os_timed_op == idx + 1 && p->os_timed_seq == k + 1) {
		p->os_rtt_ns = now > p->os_timed_ns ? now - p->os_timed_ns : 1;
		p->os_rtt_bytes = p->os_timed_bytes;
		p->os_timed_op = 0;
	}
}

/* Op @idx leaves @p's QP (retired, requeued, given up): its bytes out no longer are. */
static inline void urpc__verbs_win_unpost(struct verbs_conn *p, struct verbs_op *op, uint16_t idx)
{
	p->os_out -= URPC_MIN(p->os_out, (uint64_t)op->out);
	op->out = 0;
	if (p->os_timed_op == idx + 1)
		p->os_timed_op = 0;
}

/* The ops table's set_peer_window and peer_os_rtt (transport.h). Cold. */
void urpc__verbs_rc_set_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes);
uint64_t urpc__verbs_rc_os_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes);

/*
 * Hand up to @max more chunks of op @idx (posted, or being posted, on its
 * READY connection) to the QP as one signaled chain, within the window:
 * 0, or the positive errno of ibv_post_send() (a prefix may have gone).
 */
int urpc__verbs_win_post_chunks(struct verbs_tp *v, uint16_t idx, unsigned max);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_RC_WIN_H */
