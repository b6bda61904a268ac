/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datagram path: tx_burst, tx_flush, rx_burst,
 * rx_release over the UD QP, its receive ring and send slots (made by
 * verbs_ud_init.c). See verbs_int.h; verbs.c calls in here through
 * verbs_ud.h, and this file calls nothing above it.
 *
 * Sends: one ibv_post_send() per burst, a chain of WRs; a WR is inlined
 * when the datagram fits max_inline, sent from the caller's memory when it
 * carries lkeys, else copied into the send slot of its send-queue position
 * (that slot is free: the WR sq_depth positions earlier has completed, or
 * there would be no room). One WR in every sq_depth / 2 is signaled, and
 * the last of a burst that sends from the caller's memory; its wr_id is
 * the number of WRs posted up to it, so one completion retires everything
 * before it.
 *
 * Receives: each ring slot has its own WR and SGE, set at create, wr_id
 * their byte offset in v->rslot; the datagram lies VERBS_GRH bytes into
 * the slot. Slots come back
 * through rx_release(), in any order: each one's WR is linked behind the
 * last, and the chain is posted once it holds repost_batch. urpc sends no
 * immediate data: such a receive is dropped.
 *
 * The datapath allocates nothing, takes no lock and makes no syscall
 * beyond the provider's own (rxe's post calls write to its device file;
 * mlx5's ring a doorbell).
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_ud.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"

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

/* The checks of tx_burst() for entries it will not send: none is sent when one is bad. */
static int tx_check(const struct verbs_tp *v, const struct urpc_tp_tx *pkts, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (pkts[i].hdr_len + (uint64_t)pkts[i].data_len > v->base.mtu)
			return -EMSGSIZE;
		if (!pkts[i].peer)
			return -EINVAL;
	}
	return 0;
}

/*
 * After a post of swr[0..k) of which the first @posted went: sq_last_signal
 * is the last of those signaled, and every WR is put back as tx_many()'s
 * common walk expects it (one SGE, inlined, unsignaled).
 */
static void swr_settle(struct verbs_tp *v, unsigned k, unsigned posted)
{
	unsigned i;

	for (i = 0; i < k; i++) {
		if (i < posted && (v->swr[i].send_flags & IBV_SEND_SIGNALED))
			v->sq_last_signal = v->swr[i].wr_id;
		v->swr[i].send_flags = IBV_SEND_INLINE;
		v->swr[i].num_sge = 1;
	}
}

/*
 * Fill @wr for @t, the queue's position @pos, in full: a datagram in two
 * pieces, too long to inline, or sent without inlining. Checks before it
 * writes. *from_mem: the send reads the caller's memory (tx_flush() must
 * see it complete).
 */
static int wr_fill(struct verbs_tp *v, struct ibv_send_wr *wr, const struct urpc_tp_tx *t,
		   uint64_t pos, bool *from_mem)
{
	struct ibv_sge *sge = wr->sg_list;
	uint64_t total = t->hdr_len + (uint64_t)t->data_len;

	if (unlikely(total > v->base.mtu))
		return -EMSGSIZE;
	if (unlikely(!t->peer))
		return -EINVAL;
	wr->wr.ud.ah = t->peer->ah;
	wr->wr.ud.remote_qpn = t->peer->qpn;
	if (total <= v->base.max_inline) {
		wr->send_flags = IBV_SEND_INLINE;
		sge[0] = (struct ibv_sge){(uintptr_t)t->hdr, t->hdr_len, t->hdr_lkey};
		sge[1] = (struct ibv_sge){(uintptr_t)t->data, t->data_len, t->data_lkey};
		wr->num_sge = t->data_len ? 2 : 1;
	} else if (t->hdr_lkey && (!t->data_len || t->data_lkey)) {
		*from_mem = true;
		wr->send_flags = 0;
		sge[0] = (struct ibv_sge){(uintptr_t)t->hdr, t->hdr_len, t->hdr_lkey};
		sge[1] = (struct ibv_sge){(uintptr_t)t->data, t->data_len, t->data_lkey};
		wr->num_sge = t->data_len ? 2 : 1;
	} else {
		/* Unregistered and too large to inline: the position's own slot. */
		uint8_t *slot = send_slot(v, pos);

		wr->send_flags = 0;
		memcpy(slot, t->hdr, t->hdr_len);
		if (t->data_len)
			memcpy(slot + t->hdr_len, t->data, t->data_len);
		sge[0] = (struct ibv_sge){(uintptr_t)slot, (uint32_t)total, v->ring_mr->lkey};
		wr->num_sge = 1;
	}
	return 0;
}

/*
 * tx_many()'s walk from entry @i (not a common one) to @k, each WR in
 * full. Returns the bytes of those datagrams, or -errno with every WR put
 * back (none is sent). *from_mem as wr_fill().
 */
static __attribute__((noinline)) int64_t
walk_rest(struct verbs_tp *v, const struct urpc_tp_tx *pkts, unsigned i, unsigned k, bool *from_mem)
{
	int64_t bytes = 0;
	int ret;

	for (; i < k; i++) {
		ret = wr_fill(v, &v->swr[i], &pkts[i], v->sq_posted + i, from_mem);
		if (unlikely(ret)) {
			swr_settle(v, i, 0);
			return ret;
		}
		bytes += pkts[i].hdr_len + (int64_t)pkts[i].data_len;
	}
	return bytes;
}

/* tx_many() with less room than @n entries: reap, then check what will not go. */
static URPC_COLD int tx_room(struct verbs_tp *v, const struct urpc_tp_tx *pkts, unsigned n)
{
	unsigned k;
	int ret;

	reap_send(v);
	k = URPC_MIN(n, sq_room(v));
	if (k < n) {
		ret = tx_check(v, pkts + k, n - k);
		if (ret)
			return ret;
	}
	return (int)k;
}

/*
 * tx_many()'s failed post of swr[0..k): what was not taken is dropped (the
 * caller's retransmission recovers) and not counted.
 */
static URPC_COLD int tx_failed(struct verbs_tp *v, unsigned k, int ret, struct ibv_send_wr *bad)
{
	unsigned posted = bad ? (unsigned)(bad - v->swr) : 0, i;

	URPC_ERR_RATELIMIT(v->base.id, "ibv_post_send of %u datagrams failed at %u: %s", k, posted,
			   strerror(ret));
	for (i = posted; i < k; i++) {
		const struct ibv_sge *sge = v->swr[i].sg_list;

		v->base.stats.tx_bytes -=
			sge[0].length + (v->swr[i].num_sge > 1 ? sge[1].length : 0);
	}
	v->sq_posted += posted;
	v->base.stats.tx_pkts += posted;
	swr_settle(v, k, posted);
	return (int)posted;
}

/*
 * tx_burst() of what tx_one() does not take: a chain of WRs. The common
 * entry (one piece that fits inline, the engine's every small datagram)
 * writes four fields of its WR, the rest being as swr_settle() leaves
 * them; the first other one hands the rest of the walk to walk_rest().
 * Signaling is decided for the burst, after the walk: one WR in every
 * sig_every. Only @v, @k and whether to settle live across the post: the
 * rest is stored before it (callgrind, verbs_cost_vm.sh: the walk went
 * from 40 to 20 instructions a WR, the rest of a burst from about 105 to
 * 80).
 */
static __attribute__((noinline)) int tx_many(struct verbs_tp *v, const struct urpc_tp_tx *pkts,
					     unsigned n)
{
	uint64_t bytes = 0, first = v->sq_posted, sig_at, last_sig;
	const struct urpc_tp_tx *t = pkts, *end;
	struct ibv_send_wr *wr = v->swr, *bad = NULL;
	uint32_t lim = v->inline_max;
	bool from_mem = false, settle = false;
	unsigned k = n;
	int ret;

	if (unlikely(sq_room(v) < n)) {
		ret = tx_room(v, pkts, n);
		if (ret <= 0)
			return ret;
		k = (unsigned)ret;
	}
	for (end = pkts + k; t != end; t++, wr++) {
		struct ibv_sge *sge = wr->sg_list;

		if (unlikely(t->data_len || t->hdr_len > lim || !t->peer)) {
			int64_t rest = walk_rest(v, pkts, (unsigned)(t - pkts), k, &from_mem);

			if (rest < 0)
				return (int)rest;
			bytes += (uint64_t)rest;
			settle = true;
			break;
		}
		wr->wr.ud.ah = t->peer->ah;
		wr->wr.ud.remote_qpn = t->peer->qpn;
		sge->addr = (uintptr_t)t->hdr;
		sge->length = t->hdr_len;
		bytes += t->hdr_len;
	}
	/*
	 * Signaled: each WR whose position + 1 reaches sig_at, sig_at moving
	 * on by sig_every from each, so completions retire the queue before
	 * it fills; wr_id is the position + 1 (reap_send()). swr_settle()
	 * sets sq_last_signal from them once they are posted.
	 */
	last_sig = v->sq_last_signal;
	sig_at = last_sig + v->sig_every;
	while (first + k >= sig_at) {
		uint64_t p = sig_at - 1 > first ? sig_at - 1 : first;

		wr = &v->swr[p - first];
		wr->send_flags |= IBV_SEND_SIGNALED;
		wr->wr_id = p + 1;
		sig_at = p + 1 + v->sig_every;
		settle = true;
	}
	/*
	 * The last WR of a burst that sends from memory the caller will reuse
	 * after tx_flush() is signaled too; a burst of inlined datagrams alone
	 * needs no completion (the NIC has read them when the post returns).
	 */
	wr = &v->swr[k - 1];
	if (unlikely(from_mem) && !(wr->send_flags & IBV_SEND_SIGNALED)) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		wr->wr_id = first + k;
	}
	v->base.stats.tx_bytes += bytes;
	wr->next = NULL; /* the chain ends at the burst's last WR, then is whole again */
	ret = ibv_post_send(v->qp, v->swr, &bad);
	v->swr[k - 1].next = k < v->base.sq_depth ? &v->swr[k] : NULL;
	if (unlikely(ret))
		return tx_failed(v, k, ret, bad);
	v->sq_posted += k;
	v->base.stats.tx_pkts += k;
	if (unlikely(settle))
		swr_settle(v, k, k);
	return (int)k;
}

/* tx_one()'s failed post: the datagram is dropped; the caller's retransmission recovers. */
static URPC_COLD int tx_one_failed(struct verbs_tp *v, int ret)
{
	URPC_ERR_RATELIMIT(v->base.id, "ibv_post_send of a datagram failed: %s", strerror(ret));
	return 0;
}

/*
 * A burst of one datagram, in one piece, that fits inline, with room in
 * the queue and no completion due (every burst at window 1): its own WR,
 * set up at create, and no chain to cut (callgrind, verbs_cost_vm.sh:
 * 115 instructions a send in the general path); anything else goes to
 * tx_many(). Only @v lives across the post: what follows it reads back
 * from @v, so the frame is one register (verbs_cost_vm.sh, window 1:
 * urpc__verbs_ud_tx_burst with it inlined was 56 instructions a send,
 * 47 with tx_one() its own, tail-called).
 */
static __attribute__((noinline)) int tx_one(struct verbs_tp *v, const struct urpc_tp_tx *t)
{
	struct ibv_send_wr *bad;
	int ret;

	if (unlikely(t->data_len || t->hdr_len > v->inline_max || !t->peer || !sq_room(v) ||
		     v->sq_posted + 1 >= v->sq_last_signal + v->sig_every))
		return tx_many(v, t, 1);
	v->wr1.wr.ud.ah = t->peer->ah;
	v->wr1.wr.ud.remote_qpn = t->peer->qpn;
	v->sge1.addr = (uintptr_t)t->hdr;
	v->sge1.length = t->hdr_len;
	ret = ibv_post_send(v->qp, &v->wr1, &bad);
	if (unlikely(ret))
		return tx_one_failed(v, ret);
	v->sq_posted++;
	v->base.stats.tx_pkts++;
	v->base.stats.tx_bytes += v->sge1.length;
	return 1;
}

/*
 * A burst of one datagram takes tx_one(), the rest tx_many(): both tail
 * calls, so that this needs no frame.
 */
int urpc__verbs_ud_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);

	if (n == 1)
		return tx_one(v, pkts);
	return tx_many(v, pkts, n);
}

void urpc__verbs_ud_tx_flush(struct urpc_tp *tp)
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

/*
 * Post the receives linked from rq_stub.next to rq_tail: one chain, one
 * call. What the provider did not take stays linked for the next try.
 */
static void repost(struct verbs_tp *v)
{
	struct ibv_recv_wr *bad = NULL, *w;
	int ret;

	if (!v->nrepost)
		return;
	v->rq_tail->next = NULL;
	ret = ibv_post_recv(v->qp, v->rq_stub.next, &bad);
	if (likely(!ret)) {
		v->rq_tail = &v->rq_stub;
		v->nrepost = 0;
		return;
	}
	/* Keep what was not taken; the next release tries again. */
	URPC_ERR_RATELIMIT(v->base.id, "ibv_post_recv failed: %s", strerror(ret));
	if (!bad)
		return;
	v->rq_stub.next = bad;
	v->nrepost = 0;
	for (w = bad; w; w = w->next)
		v->nrepost++;
}

static_assert((uint64_t)VERBS_MAX_DEPTH * sizeof(struct verbs_rslot) <= UINT32_MAX,
	      "a receive slot's byte offset fits ring_idx");

/* The WR of the receive slot at byte offset @off of v->rslot (its wr_id). */
static inline struct ibv_recv_wr *rslot_wr(const struct verbs_tp *v, uint32_t off)
{
	return (struct ibv_recv_wr *)(void *)((uint8_t *)v->rslot + off);
}

/*
 * The @k completions at v->rx_wc into entries from @out; returns how many
 * carried a datagram. A completion without one (an error, a flush, a
 * datagram shorter than the GRH, whose length then wraps below 0, or one
 * with immediate data, which urpc never sends) gives its slot back.
 * Loads and stores only, so that its callers need no frame.
 */
static inline URPC_ALWAYS_INLINE unsigned rx_fill(struct verbs_tp *v, struct urpc_tp_rx *out, int k)
{
	const struct ibv_wc *c = v->rx_wc, *end = c + k;
	struct urpc_tp_rx *o = out;

	for (; c != end; c++) {
		uint32_t off = (uint32_t)c->wr_id;
		uint32_t len = c->byte_len - VERBS_GRH;
		const struct verbs_rslot *r = (const void *)((const uint8_t *)v->rslot + off);

		if (unlikely(c->status != IBV_WC_SUCCESS || len > v->base.mtu ||
			     (c->wc_flags & IBV_WC_WITH_IMM))) {
			if (c->status != IBV_WC_WR_FLUSH_ERR)
				v->base.stats.rx_drop_bad++;
			/* back to the NIC with the next repost() */
			v->rq_tail->next = rslot_wr(v, off);
			v->rq_tail = rslot_wr(v, off);
			v->nrepost++;
			continue;
		}
		o->buf = (const uint8_t *)(uintptr_t)r->sge.addr + VERBS_GRH;
		o->len = len;
		o->ring_idx = off;
		v->base.stats.rx_bytes += len;
		o++;
	}
	v->base.stats.rx_pkts += (uint64_t)(o - out);
	return (unsigned)(o - out);
}

/* rx_take()'s end when dropped completions filled a batch to repost. */
static URPC_COLD int rx_repost(struct verbs_tp *v, unsigned got)
{
	repost(v);
	return (int)got;
}

/* rx_take()'s end when its poll came back full: poll again while there is room. */
static __attribute__((noinline)) int rx_more(struct verbs_tp *v, unsigned got)
{
	unsigned n = v->rx_n;
	int k;

	while (got < n) {
		k = ibv_poll_cq(v->recv_cq, (int)URPC_MIN(n - got, VERBS_POLL_BATCH), v->rx_wc);
		if (k <= 0) {
			if (unlikely(k < 0))
				URPC_ERR_RATELIMIT(v->base.id, "polling the receive CQ failed");
			break;
		}
		got += rx_fill(v, v->rx_out + got, k);
		if (k < (int)VERBS_POLL_BATCH)
			break;
	}
	if (unlikely(v->nrepost >= v->repost_batch))
		repost(v);
	return (int)got;
}

/*
 * The completions of a poll that found some (@k of them in v->rx_wc) into
 * v->rx_out (v->rx_n entries at most); a full poll goes on in rx_more().
 * Only tail calls: no frame (callgrind, verbs_cost_vm.sh: at window 1 it
 * went from 65 to 47 instructions a datagram, 27 to 21 a completion in a
 * burst).
 */
static __attribute__((noinline)) int rx_take(struct verbs_tp *v, int k)
{
	unsigned got = rx_fill(v, v->rx_out, k);

	if (unlikely(k == (int)VERBS_POLL_BATCH))
		return rx_more(v, got);
	/* Only dropped completions come back here; the rest through rx_release(). */
	if (unlikely(v->nrepost >= v->repost_batch))
		return rx_repost(v, got);
	return (int)got;
}

/*
 * One poll; the common empty one returns at once, saving one register
 * (callgrind, verbs_cost_vm.sh: the idle pass's receive, verbs.c's check
 * included, went from 59 to 24 instructions).
 */
int urpc__verbs_ud_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	int k;

	v->rx_out = pkts;
	v->rx_n = n;
	k = ibv_poll_cq(v->recv_cq, (int)URPC_MIN(n, VERBS_POLL_BATCH), v->rx_wc);
	if (likely(k == 0))
		return 0;
	if (unlikely(k < 0)) {
		URPC_ERR_RATELIMIT(v->base.id, "polling the receive CQ failed");
		return 0;
	}
	return rx_take(v, k);
}

/*
 * Each entry's WR is linked behind the last (callgrind, verbs_cost_vm.sh,
 * with repost(): 31 instructions a datagram at window 1 before, 24 now).
 */
void urpc__verbs_ud_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	struct ibv_recv_wr *tail = v->rq_tail, *w;
	uint8_t *base = (uint8_t *)v->rslot; /* a local: the stores to the WRs may alias */
	unsigned i;

	for (i = 0; i < n; i++) {
		w = (struct ibv_recv_wr *)(void *)(base + pkts[i].ring_idx);
		tail->next = w;
		tail = w;
	}
	v->rq_tail = tail;
	v->nrepost += n;
	if (v->nrepost >= v->repost_batch)
		repost(v);
}
