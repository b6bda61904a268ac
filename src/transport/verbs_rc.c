/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC side: the life cycle of a connection's RC QP
 * (start, fail, tear down, renew) and the one-sided operations that ride
 * it (post_read, post_write, reaping their completions). See verbs_int.h
 * for the states. verbs_hs.c (the handshake), verbs_rc_poll.c,
 * verbs_rc_end.c (cancel, and what goes away) and verbs.c call in here
 * through verbs_rc.h; this file calls only verbs_ctl.h (the outbox of
 * control messages), verbs_qp.h (creating and destroying QPs),
 * verbs_notice.h (release notices) and verbs_rc_win.h (the window's books,
 * and posting a chain of chunks within it).
 *
 * An operation above rc_chunk bytes (1 MiB) is cut into chunks of that
 * size; at most rc_chunks (16) of them are at the NIC at once, and each
 * completion lets it take up to that many again (READs also share the
 * QP's rd_atomic slots with the other operations on it). The chunk is the
 * grain of progress: on Soft-RoCE under host load (TCG, MTU 1024) 64 MiB
 * moved at 3.4 MB/s, about 0.3 s a chunk. Smaller READs cost more there:
 * 256 KiB ones made Soft-RoCE's requester retry (issues 11 and 16).
 * Its deadline follows progress: it fails (with its connection, -ETIMEDOUT)
 * only when neither its own chunks nor the operations ahead of it on the
 * connection completed anything for one_sided_timeout (plus the allowance
 * of one chunk), so a long transfer on a slow or loaded link lives while it
 * moves, and a stalled peer still fails it. That failure is no tombstone
 * (urpc__verbs_rc_stall()): the next operation connects a new pair.
 * A renewal (a cancel, or the peer's RENEW) flushes the QP with
 * p->requeue set: the flushed operations go back to the FIFO from their
 * first chunk not done (RC completes a QP's work requests in order, so
 * the chunks done are a prefix) and are posted again on the new pair.
 * The session's controller windows and times the chunks (verbs_rc_win.h).
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_rc.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "verbs_ctl.h"
#include "verbs_notice.h"
#include "verbs_qp.h"
#include "verbs_rc_win.h"

static void op_done(struct verbs_tp *v, uint16_t idx, int status);
static void op_post(struct verbs_tp *v, uint16_t idx);

/*
 * Append the operations @head to @tail (linked by next, @tail's next
 * VERBS_NIL) to the tail of @p's wait FIFO.
 */
static void wait_push(struct verbs_tp *v, struct verbs_conn *p, uint16_t head, uint16_t tail)
{
	if (p->wait_tail == VERBS_NIL)
		p->wait_head = head;
	else
		v->ops[p->wait_tail].next = head;
	p->wait_tail = tail;
}

/*
 * Posted op @op leaves its QP (retired, requeued, given up): the READ
 * slots of its chunks still out, and its place in the posted counts.
 */
static void op_unpost(struct verbs_tp *v, struct verbs_op *op)
{
	struct verbs_conn *p = op->conn;

	if (op->kind == URPC_TP_OP_READ) {
		p->rd_out -= URPC_MIN(p->rd_out, (uint32_t)op->inflight);
		p->rd_ops -= p->rd_ops != 0;
		p->rd_notice -= op->notice && p->rd_notice;
	}
	urpc__verbs_win_unpost(p, op, (uint16_t)(op - v->ops));
	p->rc_posted--;
	op->peer->posted--;
	v->nposted--;
}

/* ---- tearing a connection's RC side down ------------------------------------- */

void urpc__verbs_rc_drain(struct verbs_tp *v, struct verbs_conn *p)
{
	uint64_t end = urpc__now_ns() + VERBS_DRAIN_NS;
	uint32_t i;

	while (p->rc_posted && urpc__now_ns() < end)
		urpc__verbs_rc_reap(v);
	if (!p->rc_posted)
		return;
	/* The NIC never flushed them: give up on their completions. */
	URPC_ERR(v->base.id, "RC QP %u: %u operations never completed after a flush",
		 p->rc_qp->qp_num, p->rc_posted);
	for (i = 0; i < VERBS_OS_OPS; i++)
		if (v->ops[i].state == VERBS_OP_POSTED && v->ops[i].conn == p) {
			op_unpost(v, &v->ops[i]);
			op_done(v, (uint16_t)i, -EIO);
		}
	p->rc_posted = 0; /* the books agree again, whatever went wrong */
	p->rd_out = 0;
	p->os_out = 0;
	p->rd_ops = p->rd_notice = 0;
}

/* Fail what waits on @p's FIFO with @err. */
static void wait_fail_all(struct verbs_tp *v, struct verbs_conn *p, int err)
{
	uint16_t i;

	while ((i = p->wait_head) != VERBS_NIL) {
		p->wait_head = v->ops[i].next;
		op_done(v, i, err);
	}
	p->wait_tail = VERBS_NIL;
}

void urpc__verbs_rc_teardown(struct verbs_tp *v, struct verbs_conn *p, int err)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (p->rc_state == VERBS_RC_PENDING) {
		v->npending--;
		verbs_rx_pick(v);
	}
	if (!p->rc_err)
		p->rc_err = err;
	wait_fail_all(v, p, p->rc_err);
	if (p->rc_qp && p->rc_posted) {
		ibv_modify_qp(p->rc_qp, &a, IBV_QP_STATE);
		urpc__verbs_rc_drain(v, p);
	}
	urpc__verbs_qp_destroy(v, p, false);
}

void urpc__verbs_rc_renew(struct verbs_tp *v, struct verbs_conn *p)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	uint16_t head = p->wait_head, tail = p->wait_tail;

	if (p->rc_state == VERBS_RC_PENDING) {
		v->npending--;
		verbs_rx_pick(v);
	}
	/* Not READY while it drains: nothing is posted on it, no notice is sent. */
	p->rc_state = VERBS_RC_NONE;
	p->wait_head = p->wait_tail = VERBS_NIL;
	if (p->rc_qp && p->rc_posted) {
		p->requeue = true;
		ibv_modify_qp(p->rc_qp, &a, IBV_QP_STATE);
		urpc__verbs_rc_drain(v, p);
		p->requeue = false;
	}
	urpc__verbs_qp_destroy(v, p, true);
	/* What was flushed goes first, then what already waited. */
	if (head != VERBS_NIL)
		wait_push(v, p, head, tail);
}

/* ---- the RC life cycle ------------------------------------------------------ */

int urpc__verbs_rc_start(struct verbs_tp *v, struct verbs_conn *p)
{
	uint64_t now = urpc__now_ns();
	int ret;

	ret = urpc__verbs_qp_create(v, p);
	if (ret) {
		URPC_ERR(v->base.id, "cannot create an RC QP for peer QPN %u: %s", p->qpn,
			 strerror(-ret));
		p->rc_state = VERBS_RC_FAILED;
		p->rc_err = ret;
		wait_fail_all(v, p, ret); /* what a renewal requeued */
		return ret;
	}
	p->rc_state = VERBS_RC_PENDING;
	v->npending++;
	verbs_rx_pick(v);
	p->hs_deadline_ns = now + v->base.one_sided_timeout_ns;
	p->hs_rto_ns = VERBS_HS_RTO_NS;
	p->hs_next_ns = now + p->hs_rto_ns;
	/* A REQ the send queue refuses now is resent by the timer. */
	urpc__verbs_ctl_send(v, p, p->renew ? VERBS_CTL_RC_RENEW : VERBS_CTL_RC_REQ);
	return 0;
}

/* rc_fail(); @renew: the next operation connects a new pair rather than failing at once. */
static void fail(struct verbs_tp *v, struct verbs_conn *p, int err, const char *why, bool renew)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (p->rc_state == VERBS_RC_FAILED)
		return;
	if (renew)
		URPC_WARN_RATELIMIT(v->base.id,
				    "RC connection to peer QPN %u failed while %s (%s); the next "
				    "one-sided operation connects anew",
				    p->qpn, verbs_rc_state_str(p->rc_state),
				    why ? why : urpc_strerror(err));
	else /* rate-limited too: a peer's refused requests fail the owner's QP as well */
		URPC_ERR_RATELIMIT(
			v->base.id,
			"RC connection to peer QPN %u failed while %s (%s); its one-sided "
			"operations fail with '%s' until the session is reset",
			p->qpn, verbs_rc_state_str(p->rc_state), why ? why : urpc_strerror(err),
			urpc_strerror(err));
	if (p->rc_state == VERBS_RC_PENDING) {
		v->npending--;
		verbs_rx_pick(v);
	}
	p->rc_state = VERBS_RC_FAILED;
	p->rc_err = err;
	p->rc_stalled = renew && err == -ETIMEDOUT;
	wait_fail_all(v, p, err);
	/* Posted operations come back flushed and report @err. */
	if (p->rc_qp && p->rc_posted)
		ibv_modify_qp(p->rc_qp, &a, IBV_QP_STATE);
}

void urpc__verbs_rc_fail(struct verbs_tp *v, struct verbs_conn *p, int err, const char *why)
{
	/* A peer that refused a request (-EACCES) lives: the next operation reconnects. */
	fail(v, p, err, why, err == -EACCES);
}

void urpc__verbs_rc_stall(struct verbs_tp *v, struct verbs_conn *p, const char *why)
{
	fail(v, p, -ETIMEDOUT, why, true);
}

/*
 * May op @i go to @p's QP now (its depth, and a READ slot for a READ)?
 *
 * Behind a READ that ends with a release notice, at most one more READ
 * operation: the notice is posted when that READ is done, after whatever
 * the send queue holds by then, and its owner keeps the request (and its
 * continuation) until it comes. With every READ of a window posted at
 * once, the notice of the first waited for all the others to be read,
 * the window emptied before the client could refill it, and 4 MiB
 * requests with the server in its own thread moved at 0.85x of the build
 * before exact grants on Soft-RoCE (1.00x without the wait). One READ
 * queued behind keeps the link busy across the gap.
 */
static bool may_post(const struct verbs_tp *v, const struct verbs_conn *p, uint16_t i)
{
	if (p->rc_posted >= VERBS_RC_DEPTH || !urpc__verbs_win_open(p))
		return false;
	if (v->ops[i].kind != URPC_TP_OP_READ)
		return true;
	return p->rd_out < v->rd_atomic &&
	       (!p->rd_notice || p->rd_ops < VERBS_RD_BEHIND_NOTICE + 1);
}

void urpc__verbs_rc_kick(struct verbs_tp *v, struct verbs_conn *p)
{
	uint16_t i;

	while (unlikely(p->nrenew_held) && p->rc_state == VERBS_RC_READY)
		urpc__verbs_notice_send(v, p, p->renew_held[--p->nrenew_held]);
	while (p->rc_state == VERBS_RC_READY && (i = p->wait_head) != VERBS_NIL &&
	       may_post(v, p, i)) {
		p->wait_head = v->ops[i].next;
		if (p->wait_head == VERBS_NIL)
			p->wait_tail = VERBS_NIL;
		op_post(v, i);
	}
}

/* ---- one-sided operations ------------------------------------------------------ */

static void op_done(struct verbs_tp *v, uint16_t idx, int status)
{
	struct verbs_op *op = &v->ops[idx];

	op->state = VERBS_OP_DONE;
	op->status = status;
	op->next = VERBS_NIL;
	if (v->done_tail == VERBS_NIL)
		v->done_head = idx;
	else
		v->ops[v->done_tail].next = idx;
	v->done_tail = idx;
}

void urpc__verbs_rc_op_done(struct verbs_tp *v, uint16_t idx, int status)
{
	op_done(v, idx, status);
}

/*
 * Posted op @idx was flushed by a renewal: back to the tail of its FIFO,
 * from its first chunk not done (those are a prefix: RC completes in order).
 */
static void op_requeue(struct verbs_tp *v, uint16_t idx)
{
	struct verbs_op *op = &v->ops[idx];
	uint64_t sent = ((uint64_t)op->off + op->chunk - 1) / op->chunk;

	op_unpost(v, op);
	op->off = (uint32_t)((sent - op->inflight) * op->chunk);
	op->inflight = 0;
	v->base.stats.os_requeued++;
	op->state = VERBS_OP_WAITING;
	op->next = VERBS_NIL;
	wait_push(v, op->conn, idx, idx);
}

void urpc__verbs_rc_init(struct verbs_tp *v)
{
	uint32_t i;

	for (i = 0; i < VERBS_OS_OPS; i++)
		v->ops[i].next = (uint16_t)(i + 1 < VERBS_OS_OPS ? i + 1 : VERBS_NIL);
	v->free_head = 0;
	v->done_head = v->done_tail = VERBS_NIL;
}

/* Retire posted op @idx (its last chunk is back) with @status. */
static void op_retire(struct verbs_tp *v, uint16_t idx, int status)
{
	struct verbs_op *op = &v->ops[idx];
	struct verbs_conn *c = op->conn;

	/* Chunks not back (cut short by an error) come back flushed: ignored. */
	op_unpost(v, op);
	/*
	 * Done with a grant: tell its owner on this QP, behind any resend of
	 * the operation's requests, so it revokes only once none is left.
	 * While verbs_mw.c blocks, notices are held (see verbs_int.h); one
	 * that ends in a renewal's drain goes on the new QP (rc_kick()): the
	 * old one is gone on both sides by then, so nothing of it can follow.
	 */
	if (!status && op->notice && c->rc_state == VERBS_RC_READY)
		urpc__verbs_notice_send(v, c, op->notice);
	else if (!status && op->notice && c->requeue && c->nrenew_held < VERBS_RENEW_HELD)
		c->renew_held[c->nrenew_held++] = op->notice;
	op_done(v, idx, status);
}

/* Post op @idx on its peer's (READY) RC QP; on failure it completes with the error. */
static void op_post(struct verbs_tp *v, uint16_t idx)
{
	struct verbs_op *op = &v->ops[idx];
	struct verbs_conn *p = op->conn;
	int ret;

	/*
	 * Chunks of rc_chunk bytes, v->rc_chunks of them at the NIC at once.
	 * 1 MiB, not 256 KiB: in 256 KiB READs Soft-RoCE's requester retried
	 * (go-back-N) about 25 times a second, a 1 MiB READ lost 13% against
	 * one READ (issue 16) and 4 MiB responses 30-45% (issue 11).
	 */
	op->chunk = v->rc_chunk && op->len > v->rc_chunk ? v->rc_chunk : op->len;
	op->inflight = 0; /* op->off: 0, or where a renewal left it */
	ret = urpc__verbs_win_post_chunks(v, idx, v->rc_chunks);
	if (unlikely(ret) && !op->inflight) { /* nothing went out */
		op_done(v, idx, -ret);
		return;
	}
	op->state = VERBS_OP_POSTED;
	if (op->kind == URPC_TP_OP_READ) {
		p->rd_ops++;
		p->rd_notice += op->notice != 0;
	}
	op->status = -ret; /* a chain cut short fails once what went out is back */
	op->qp_num = p->rc_qp->qp_num;
	op->progress_ns = urpc__now_ns();
	if (!p->rc_posted)
		p->progress_ns = op->progress_ns; /* idle until now: progress starts here */
	p->rc_posted++;
	op->peer->posted++;
	v->nposted++;
	/* Some chunks went out, not all: they come back flushed (or done). */
	if (unlikely(ret))
		urpc__verbs_rc_fail(v, p, -ret, "posting a chained work request failed");
}

static int post_op(struct verbs_tp *v, enum urpc_tp_op kind, struct urpc_tp_peer *h, void *local,
		   const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
		   uint64_t wr_id)
{
	uintptr_t lo = (uintptr_t)local, base;
	struct verbs_conn *p;
	struct verbs_op *op;
	uint16_t idx;

	if (unlikely(!h || !mr || !mr->handle || !len || len > v->max_msg))
		return -EINVAL;
	base = (uintptr_t)mr->addr;
	if (unlikely(lo < base || lo - base > mr->len || len > mr->len - (lo - base)))
		return -EINVAL;
	idx = v->free_head;
	if (unlikely(idx == VERBS_NIL))
		return -EAGAIN;
	op = &v->ops[idx];
	v->free_head = op->next;
	v->nops++;
	p = h->conn;
	op->wr_id = wr_id;
	op->kind = kind;
	op->peer = h;
	op->conn = p;
	op->local = local;
	op->mr_handle = mr->handle;
	op->lkey = mr->lkey;
	op->rkey = (uint32_t)rkey; /* an MR's or a memory window's: 32 bits */
	op->notice = (uint32_t)(rkey >> 32);
	op->raddr = raddr;
	op->len = (uint32_t)len;
	op->off = 0;
	op->status = 0;
	op->next = VERBS_NIL;
	op->state = VERBS_OP_WAITING;

	switch (p->rc_state) {
	case VERBS_RC_FAILED:
		if (p->rc_err != -EACCES && !p->rc_stalled) {
			op_done(v, idx, p->rc_err); /* a tombstone until the session is reset */
			return 0;
		}
		/*
		 * A request the peer refused (a key revoked, a range not granted)
		 * put both QPs in the error state, or the pair stalled: nothing
		 * says the peer is gone (the Nexus judges that): connect a new
		 * pair and go on.
		 */
		urpc__verbs_rc_teardown(v, p, p->rc_err);
		URPC_FALLTHROUGH;
	case VERBS_RC_NONE:
		if (urpc__verbs_rc_start(v, p)) {
			op_done(v, idx, p->rc_err);
			return 0;
		}
		break;
	case VERBS_RC_READY:
		if (p->wait_head == VERBS_NIL && may_post(v, p, idx)) {
			op_post(v, idx);
			return 0;
		}
		break;
	case VERBS_RC_PENDING:
		break;
	}
	wait_push(v, p, idx, idx); /* op->next is VERBS_NIL */
	return 0;
}

int urpc__verbs_rc_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			     const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			     uint64_t wr_id)
{
	return post_op(to_verbs(tp), URPC_TP_OP_READ, peer, local, mr, raddr, rkey, len, wr_id);
}

int urpc__verbs_rc_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			      const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey,
			      size_t len, uint64_t wr_id)
{
	/* The NIC only reads @local for a WRITE. */
	return post_op(to_verbs(tp), URPC_TP_OP_WRITE, peer, (void *)(uintptr_t)local, mr, raddr,
		       rkey, len, wr_id);
}

/*
 * A chunk of posted op @idx came back successfully at @now: send the next
 * one while the connection is READY, and retire the operation once its
 * last chunk is back (with the error of a chain cut short, or of a
 * connection that failed before all of it went out).
 */
static void chunk_done(struct verbs_tp *v, uint16_t idx, uint64_t now)
{
	struct verbs_op *op = &v->ops[idx];
	struct verbs_conn *p = op->conn;
	int ret;

	urpc__verbs_win_done(p, op, idx, now);
	op->inflight--;
	v->base.stats.os_progress++;
	if (op->kind == URPC_TP_OP_READ)
		p->rd_out--;
	op->progress_ns = now;
	/* A window's room goes to the operation waiting, if it can go, while @op has chunks out. */
	if (op->off < op->len && !op->status && p->rc_state == VERBS_RC_READY &&
	    !(p->os_window && op->inflight && p->wait_head != VERBS_NIL &&
	      may_post(v, p, p->wait_head))) {
		/*
		 * Back to its full share of chunks, not one for one: READ slots
		 * other operations let go of (rd_atomic) are taken up here, or
		 * an operation posted into the last free slot would keep one
		 * chunk at the NIC to the end.
		 */
		ret = urpc__verbs_win_post_chunks(v, idx, v->rc_chunks - op->inflight);
		if (unlikely(ret)) {
			op->status = -ret;
			urpc__verbs_rc_fail(v, p, -ret, "posting the next chunk failed");
		}
	}
	if (op->inflight)
		return;
	if (op->off < op->len && !op->status) {
		if (p->requeue) { /* the rest goes on the renewed pair */
			op_requeue(v, idx);
			return;
		}
		op->status = p->rc_err ? p->rc_err : -ECONNRESET;
	}
	op_retire(v, idx, op->status);
}

/*
 * A release notice or a notice receive completed with error @wc: its QP
 * is in the error state and flushes what follows, which would otherwise
 * report -ECONNRESET with no cause given.
 */
static URPC_COLD void qp_failed(struct verbs_tp *v, const struct ibv_wc *wc)
{
	struct verbs_conn *c;
	char why[96];

	for (c = v->conns; c; c = c->next)
		if (c->rc_qp && c->rc_qp->qp_num == wc->qp_num && c->rc_state == VERBS_RC_READY) {
			snprintf(why, sizeof(why), "a release notice's %s: %s",
				 wc->wr_id == VERBS_WR_RECV ? "receive" : "send",
				 ibv_wc_status_str(wc->status));
			urpc__verbs_rc_fail(v, c, verbs_wc_errno(wc->status), why);
			return;
		}
}

int urpc__verbs_rc_reap(struct verbs_tp *v)
{
	struct ibv_wc wc[VERBS_POLL_BATCH];
	uint64_t now;
	int k, i;

	k = ibv_poll_cq(v->rc_cq, VERBS_POLL_BATCH, wc);
	if (unlikely(k < 0)) {
		URPC_ERR_RATELIMIT(v->base.id, "polling the RC CQ failed");
		return 0;
	}
	now = k > 0 && v->nposted ? urpc__now_ns() : 0;
	for (i = 0; i < k; i++) {
		uint64_t idx = wc[i].wr_id;
		struct verbs_conn *p;
		struct verbs_op *op;
		int st;

		if (idx >= VERBS_OS_OPS) {
			if (idx & VERBS_WR_LOCAL) { /* verbs_mw.c waits for it */
				v->local_done = idx;
				v->local_status = wc[i].status;
			} else if (idx == VERBS_WR_RECV && wc[i].status == IBV_WC_SUCCESS) {
				urpc__verbs_notice_got(v, &wc[i]);
			} else if (wc[i].status != IBV_WC_SUCCESS &&
				   wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				/* A notice or a receive failed its QP: say why, once. */
				qp_failed(v, &wc[i]);
			}
			continue;
		}
		op = &v->ops[idx];
		if (op->state != VERBS_OP_POSTED || op->qp_num != wc[i].qp_num)
			continue; /* of a QP torn down without waiting for it */
		p = op->conn;
		p->progress_ns = now;
		if (likely(wc[i].status == IBV_WC_SUCCESS)) {
			chunk_done(v, (uint16_t)idx, now);
		} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR && !op->status && p->requeue) {
			op_requeue(v, (uint16_t)idx); /* flushed by a renewal */
		} else {
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				/*
				 * Flushed behind the first error: report that, not the
				 * flush; a cancelled op reports the cancel's status.
				 */
				st = op->status ? op->status : p->rc_err ? p->rc_err : -ECONNRESET;
			} else if (p->requeue) { /* its own cause; the rest is requeued */
				st = verbs_wc_errno(wc[i].status);
			} else {
				char why[128];

				st = verbs_wc_errno(wc[i].status);
				snprintf(why, sizeof(why),
					 "RDMA %s of %u bytes: %s, vendor error 0x%x",
					 urpc__tp_op_str(op->kind), op->len,
					 ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
				urpc__verbs_rc_fail(v, p, st, why);
			}
			/* Its other chunks come back flushed from the same QP: ignored. */
			op_retire(v, (uint16_t)idx, st);
		}
		if (p->wait_head != VERBS_NIL)
			urpc__verbs_rc_kick(v, p);
	}
	return k;
}
