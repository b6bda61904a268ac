/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datapath: UD datagrams (tx_burst, rx_burst,
 * rx_release, tx_flush) and RC one-sided operations (post_read, post_write,
 * poll_completions). See verbs.h.
 *
 * Sends: one ibv_post_send() per burst, a chain of WRs; a WR is inlined
 * when the datagram fits max_inline, sent from the caller's memory when it
 * carries lkeys, else copied into the send slot of its send-queue position
 * (that slot is free: the WR sq_depth positions earlier has completed, or
 * there would be no room). Only the last WR of a burst is signaled (and one
 * in every sq_depth / 2 of a long one); its wr_id is the number of WRs
 * posted up to it, so one completion retires everything before it.
 *
 * Receives: wr_id is the ring slot; the datagram lies VERBS_GRH bytes into
 * it. Slots come back through rx_release() and are reposted in chains of
 * repost_batch. urpc sends no immediate data: such a receive is dropped.
 *
 * Nothing here allocates, locks, or makes a syscall beyond the provider's
 * own (rxe's post calls write to its device file; mlx5's ring a doorbell).
 */
#define URPC_LOG_MODULE "verbs"
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../util/log.h"
#include "verbs.h"

/* ---- UD sends ---------------------------------------------------------------- */

/* Retire completed sends. */
static void reap_send(struct verbs_tp *v)
{
	struct ibv_wc wc[VERBS_POLL_BATCH];
	int k, i;

	k = ibv_poll_cq(v->send_cq, VERBS_POLL_BATCH, wc);
	for (i = 0; i < k; i++) {
		if (unlikely(wc[i].status != IBV_WC_SUCCESS))
			URPC_ERR_RATELIMIT(v->base.id, "UD send failed: %s (vendor error 0x%x)",
					   ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
		if (wc[i].wr_id > v->sq_done)
			v->sq_done = wc[i].wr_id;
	}
	if (unlikely(k < 0))
		URPC_ERR_RATELIMIT(v->base.id, "polling the send CQ failed");
}

static inline uint32_t sq_room(struct verbs_tp *v)
{
	return v->base.sq_depth - (uint32_t)(v->sq_posted - v->sq_done);
}

static inline uint8_t *send_slot(struct verbs_tp *v, uint64_t pos)
{
	return v->send_slots + (size_t)v->slot_size * (pos & (v->base.sq_depth - 1));
}

/*
 * Post the chain v->swr[0..k); WRs not taken are dropped (the caller's
 * retransmission recovers). Returns how many were posted.
 */
static unsigned post_chain(struct verbs_tp *v, unsigned k)
{
	struct ibv_send_wr *bad = NULL;
	unsigned posted = k;
	int ret;

	ret = ibv_post_send(v->qp, v->swr, &bad);
	if (unlikely(ret)) {
		posted = bad ? (unsigned)(bad - v->swr) : 0;
		URPC_ERR_RATELIMIT(v->base.id, "ibv_post_send of %u datagrams failed at %u: %s", k,
				   posted, strerror(ret));
	}
	v->sq_posted += posted;
	return posted;
}

int urpc__verbs_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	uint32_t half = v->base.sq_depth / 2;
	unsigned i, k, posted;
	uint64_t bytes = 0;

	for (i = 0; i < n; i++) {
		if (unlikely(pkts[i].hdr_len + (uint64_t)pkts[i].data_len > v->base.mtu))
			return -EMSGSIZE;
		if (unlikely(!pkts[i].peer))
			return -EINVAL;
	}
	if (sq_room(v) < n)
		reap_send(v);
	k = URPC_MIN(n, sq_room(v));
	if (!k)
		return 0;

	for (i = 0; i < k; i++) {
		const struct urpc_tp_tx *t = &pkts[i];
		struct ibv_send_wr *wr = &v->swr[i];
		struct ibv_sge *sge = &v->ssge[2 * i];
		uint32_t total = t->hdr_len + t->data_len;
		uint64_t pos = v->sq_posted + i;

		wr->wr_id = 0;
		wr->next = i + 1 < k ? wr + 1 : NULL;
		wr->sg_list = sge;
		wr->opcode = IBV_WR_SEND;
		wr->send_flags = 0;
		wr->wr.ud.ah = t->peer->ah;
		wr->wr.ud.remote_qpn = t->peer->qpn;
		wr->wr.ud.remote_qkey = VERBS_QKEY;
		if (total <= v->base.max_inline ||
		    (t->hdr_lkey && (!t->data_len || t->data_lkey))) {
			if (total <= v->base.max_inline)
				wr->send_flags = IBV_SEND_INLINE;
			sge[0] = (struct ibv_sge){(uintptr_t)t->hdr, t->hdr_len, t->hdr_lkey};
			sge[1] = (struct ibv_sge){(uintptr_t)t->data, t->data_len, t->data_lkey};
			wr->num_sge = t->data_len ? 2 : 1;
		} else {
			/* Unregistered and too large to inline: the position's own slot. */
			uint8_t *slot = send_slot(v, pos);

			memcpy(slot, t->hdr, t->hdr_len);
			if (t->data_len)
				memcpy(slot + t->hdr_len, t->data, t->data_len);
			sge[0] = (struct ibv_sge){(uintptr_t)slot, total, v->ring_mr->lkey};
			wr->num_sge = 1;
		}
		if (i + 1 == k || pos + 1 - v->sq_last_signal >= half) {
			wr->send_flags |= IBV_SEND_SIGNALED;
			wr->wr_id = pos + 1;
			v->sq_last_signal = pos + 1;
		}
		bytes += total;
	}
	posted = post_chain(v, k);
	v->base.stats.tx_pkts += posted;
	v->base.stats.tx_bytes += posted == k ? bytes : 0;
	return (int)posted;
}

void urpc__verbs_tx_flush(struct urpc_tp *tp)
{
	struct verbs_tp *v = to_verbs(tp);
	uint64_t end = 0;

	while (v->sq_done < v->sq_last_signal) {
		reap_send(v);
		if (!end)
			end = urpc__now_ns() + VERBS_DRAIN_NS;
		else if (urpc__now_ns() > end) {
			URPC_ERR(v->base.id, "UD sends did not complete within %llu ms",
				 (unsigned long long)(VERBS_DRAIN_NS / 1000000));
			v->sq_done = v->sq_last_signal;
			return;
		}
	}
}

/* ---- UD receives ------------------------------------------------------------- */

void urpc__verbs_repost(struct verbs_tp *v)
{
	while (v->nrepost) {
		uint32_t m = URPC_MIN(v->nrepost, VERBS_RECV_BATCH), i;
		struct ibv_recv_wr *bad = NULL;
		int ret;

		for (i = 0; i < m; i++) {
			uint32_t idx = v->repost[v->nrepost - m + i];

			v->rsge[i].addr = (uintptr_t)v->ring.addr + (uint64_t)v->slot_size * idx;
			v->rsge[i].length = v->slot_size;
			v->rsge[i].lkey = v->ring_mr->lkey;
			v->rwr[i].wr_id = idx;
			v->rwr[i].sg_list = &v->rsge[i];
			v->rwr[i].num_sge = 1;
			v->rwr[i].next = i + 1 < m ? &v->rwr[i + 1] : NULL;
		}
		ret = ibv_post_recv(v->qp, v->rwr, &bad);
		if (unlikely(ret)) {
			/* Keep what was not taken; the next release tries again. */
			uint32_t taken = bad ? (uint32_t)(bad - v->rwr) : 0;

			URPC_ERR_RATELIMIT(v->base.id, "ibv_post_recv failed: %s", strerror(ret));
			memmove(v->repost + v->nrepost - m, v->repost + v->nrepost - m + taken,
				(m - taken) * sizeof(*v->repost));
			v->nrepost -= taken;
			return;
		}
		v->nrepost -= m;
	}
}

static inline void repost_later(struct verbs_tp *v, uint32_t idx)
{
	v->repost[v->nrepost++] = idx;
}

int urpc__verbs_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	struct ibv_wc wc[VERBS_POLL_BATCH];
	unsigned got = 0;
	int k, i;

	if (unlikely(v->npending))
		urpc__verbs_hs_timers(v, urpc__now_ns());
	while (got < n) {
		int want = (int)URPC_MIN(n - got, VERBS_POLL_BATCH);

		k = ibv_poll_cq(v->recv_cq, want, wc);
		if (k <= 0) {
			if (unlikely(k < 0))
				URPC_ERR_RATELIMIT(v->base.id, "polling the receive CQ failed");
			break;
		}
		for (i = 0; i < k; i++) {
			uint32_t idx = (uint32_t)wc[i].wr_id;
			uint8_t *buf = (uint8_t *)v->ring.addr + (size_t)v->slot_size * idx;

			if (unlikely(wc[i].status != IBV_WC_SUCCESS ||
				     wc[i].byte_len < VERBS_GRH)) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					v->base.stats.rx_drop_bad++;
				repost_later(v, idx);
				continue;
			}
			if (unlikely(wc[i].wc_flags & IBV_WC_WITH_IMM)) {
				/* urpc sends none: not for us */
				v->base.stats.rx_drop_bad++;
				repost_later(v, idx);
				continue;
			}
			pkts[got].buf = buf + VERBS_GRH;
			pkts[got].len = wc[i].byte_len - VERBS_GRH;
			pkts[got].ring_idx = idx;
			v->base.stats.rx_bytes += pkts[got].len;
			got++;
		}
		if (k < want)
			break;
	}
	v->base.stats.rx_pkts += got;
	if (unlikely(v->nrepost >= v->repost_batch))
		urpc__verbs_repost(v);
	return (int)got;
}

void urpc__verbs_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	unsigned i;

	for (i = 0; i < n; i++)
		repost_later(v, pkts[i].ring_idx);
	if (v->nrepost >= v->repost_batch)
		urpc__verbs_repost(v);
}

/* ---- RC one-sided operations ---------------------------------------------------- */

void urpc__verbs_op_done(struct verbs_tp *v, uint16_t idx, int status)
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

/*
 * The chunk an operation of @len bytes is cut into: at least
 * v->rc_chunk, and few enough that it fits v->rc_chunks work requests.
 */
static inline uint32_t op_chunk(const struct verbs_tp *v, uint32_t len)
{
	uint32_t c;

	if (!v->rc_chunk)
		return len;
	c = (len + v->rc_chunks - 1) / v->rc_chunks;
	return URPC_MAX(c, v->rc_chunk);
}

void urpc__verbs_op_post(struct verbs_tp *v, uint16_t idx)
{
	struct verbs_op *op = &v->ops[idx];
	struct verbs_conn *p = op->conn;
	struct ibv_send_wr wr[VERBS_RC_CHUNKS], *bad = NULL;
	struct ibv_sge sge[VERBS_RC_CHUNKS];
	uint32_t chunk = op_chunk(v, op->len), off = 0;
	unsigned n = 0;
	int ret;

	/*
	 * One work request per chunk, posted as one chain, each signaled: a
	 * chunk's completion is progress on the connection (what the deadline
	 * scan counts from), and the last one's completes the operation. A
	 * failing chunk fails it; the chunks behind it are flushed.
	 */
	memset(wr, 0, sizeof(wr));
	do {
		uint32_t len = URPC_MIN(chunk, op->len - off);

		sge[n] = (struct ibv_sge){(uintptr_t)op->local + off, len, op->lkey};
		wr[n].wr_id = idx;
		wr[n].sg_list = &sge[n];
		wr[n].num_sge = 1;
		wr[n].opcode = op->kind == URPC_TP_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr[n].wr.rdma.remote_addr = op->raddr + off;
		wr[n].wr.rdma.rkey = op->rkey;
		wr[n].send_flags = IBV_SEND_SIGNALED;
		wr[n].next = &wr[n + 1];
		off += len;
		n++;
	} while (off < op->len);
	wr[n - 1].next = NULL;
	ret = ibv_post_send(p->rc_qp, wr, &bad);
	if (unlikely(ret)) {
		URPC_ERR_RATELIMIT(v->base.id, "RDMA %s of %u bytes could not be posted: %s",
				   urpc__tp_op_str(op->kind), op->len, strerror(ret));
		if (!bad || bad == wr) { /* nothing went out */
			urpc__verbs_op_done(v, idx, -ret);
			return;
		}
	}
	op->state = VERBS_OP_POSTED;
	op->chunks_left = (uint16_t)(ret ? bad - wr : n);
	op->status = -ret; /* a chain cut short fails once what went out is back */
	op->qp_num = p->rc_qp->qp_num;
	op->posted_ns = urpc__now_ns();
	op->allow_ns = v->base.one_sided_timeout_ns + ((uint64_t)chunk >> 20) * VERBS_OP_NS_PER_MIB;
	if (!p->rc_posted)
		p->progress_ns = op->posted_ns; /* idle until now: progress starts here */
	p->rc_posted++;
	op->peer->posted++;
	v->nposted++;
	/* Some chunks went out, not all: they come back flushed (or done). */
	if (unlikely(ret))
		urpc__verbs_rc_fail(v, p, -ret, "posting a chained work request failed");
}

static int post_op(struct verbs_tp *v, enum urpc_tp_op kind, struct urpc_tp_peer *h, void *local,
		   const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
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
	op->rkey = rkey;
	op->raddr = raddr;
	op->len = (uint32_t)len;
	op->next = VERBS_NIL;
	op->state = VERBS_OP_WAITING;

	switch (p->rc_state) {
	case VERBS_RC_FAILED:
		urpc__verbs_op_done(v, idx, p->rc_err);
		return 0;
	case VERBS_RC_NONE:
		if (urpc__verbs_rc_start(v, p)) {
			urpc__verbs_op_done(v, idx, p->rc_err);
			return 0;
		}
		break;
	case VERBS_RC_READY:
		if (p->wait_head == VERBS_NIL && p->rc_posted < VERBS_RC_DEPTH) {
			urpc__verbs_op_post(v, idx);
			return 0;
		}
		break;
	case VERBS_RC_PENDING:
		break;
	}
	if (p->wait_tail == VERBS_NIL)
		p->wait_head = idx;
	else
		v->ops[p->wait_tail].next = idx;
	p->wait_tail = idx;
	return 0;
}

int urpc__verbs_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			  const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			  uint64_t wr_id)
{
	return post_op(to_verbs(tp), URPC_TP_OP_READ, peer, local, mr, raddr, rkey, len, wr_id);
}

int urpc__verbs_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			   const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			   uint64_t wr_id)
{
	/* The NIC only reads @local for a WRITE. */
	return post_op(to_verbs(tp), URPC_TP_OP_WRITE, peer, (void *)(uintptr_t)local, mr, raddr,
		       rkey, len, wr_id);
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

		if (idx >= VERBS_OS_OPS)
			continue;
		op = &v->ops[idx];
		if (op->state != VERBS_OP_POSTED || op->qp_num != wc[i].qp_num)
			continue; /* of a QP torn down without waiting for it */
		p = op->conn;
		p->progress_ns = now;
		if (likely(wc[i].status == IBV_WC_SUCCESS) && --op->chunks_left)
			continue; /* more chunks of it to come */
		p->rc_posted--;
		op->peer->posted--;
		v->nposted--;
		if (likely(wc[i].status == IBV_WC_SUCCESS)) {
			st = op->status;
		} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
			/* Flushed behind the first error: report that, not the flush. */
			st = p->rc_err ? p->rc_err : -ECONNRESET;
		} else {
			char why[128];

			st = urpc__verbs_wc_errno(wc[i].status);
			snprintf(why, sizeof(why), "RDMA %s of %u bytes: %s, vendor error 0x%x",
				 urpc__tp_op_str(op->kind), op->len,
				 ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
			urpc__verbs_rc_fail(v, p, st, why);
		}
		urpc__verbs_op_done(v, (uint16_t)idx, st);
		if (p->wait_head != VERBS_NIL)
			urpc__verbs_rc_kick(v, p);
	}
	return k;
}

/* Fail the connections of posted operations past their deadline. */
static void scan_deadlines(struct verbs_tp *v, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < VERBS_OS_OPS; i++) {
		struct verbs_op *op = &v->ops[i];

		if (op->state == VERBS_OP_POSTED &&
		    now >= URPC_MAX(op->posted_ns, op->conn->progress_ns) + op->allow_ns)
			urpc__verbs_rc_fail(v, op->conn, -ETIMEDOUT,
					    "a one-sided operation ran past its deadline");
	}
}

int urpc__verbs_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	unsigned cnt = 0;

	if (!v->nops)
		return 0;
	if (v->nposted)
		urpc__verbs_rc_reap(v);
	if (unlikely(v->npending || v->nposted)) {
		uint64_t now = urpc__now_ns();

		if (v->npending)
			urpc__verbs_hs_timers(v, now);
		if (v->nposted && now >= v->next_scan_ns) {
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
