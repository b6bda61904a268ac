/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datagrams: the UD QP, its receive ring and send
 * slots, and tx_burst, tx_flush, rx_burst, rx_release. See verbs_int.h; verbs.c
 * calls in here through verbs_ud.h, and this file calls nothing above it.
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
 * A burst of one datagram, in one piece, that fits inline, with room in
 * the queue and no completion due (every burst at window 1): its own WR,
 * set up at create, and no chain to cut (callgrind, verbs_cost_vm.sh:
 * 115 instructions a send in the general path). -EAGAIN: not such a
 * burst; the general path takes it.
 */
static inline int tx_one(struct verbs_tp *v, const struct urpc_tp_tx *t)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t total = t->hdr_len;
	uint64_t pos = v->sq_posted;
	int ret;

	if (unlikely(t->data_len || total > v->base.max_inline || total > v->base.mtu || !t->peer ||
		     !sq_room(v) || pos + 1 >= v->sq_last_signal + v->base.sq_depth / 2))
		return -EAGAIN;
	v->wr1.wr.ud.ah = t->peer->ah;
	v->wr1.wr.ud.remote_qpn = t->peer->qpn;
	v->sge1.addr = (uintptr_t)t->hdr;
	v->sge1.length = total;
	ret = ibv_post_send(v->qp, &v->wr1, &bad);
	if (unlikely(ret)) {
		URPC_ERR_RATELIMIT(v->base.id, "ibv_post_send of a datagram failed: %s",
				   strerror(ret));
		return 0; /* dropped: the caller's retransmission recovers */
	}
	v->sq_posted = pos + 1;
	v->base.stats.tx_pkts++;
	v->base.stats.tx_bytes += total;
	return 1;
}

/* tx_burst() of what tx_one() does not take: a chain of WRs. */
static __attribute__((noinline)) int tx_many(struct verbs_tp *v, const struct urpc_tp_tx *pkts,
					     unsigned n)
{
	uint64_t bytes = 0, pos, sig_at, last_sig;
	struct ibv_send_wr *last, *after;
	unsigned i, k, posted;
	bool sig = false;
	int ret;

	if (sq_room(v) < n)
		reap_send(v);
	k = URPC_MIN(n, sq_room(v));
	if (unlikely(k < n)) {
		ret = tx_check(v, pkts + k, n - k);
		if (ret)
			return ret;
	}
	/* Signaled: one WR in every sq_depth / 2, so completions retire the queue before it fills. */
	pos = v->sq_posted;
	last_sig = v->sq_last_signal; /* stored once the burst is checked */
	sig_at = last_sig + v->base.sq_depth / 2;
	for (i = 0; i < k; i++, pos++) {
		const struct urpc_tp_tx *t = &pkts[i];
		struct ibv_send_wr *wr = &v->swr[i];
		struct ibv_sge *sge = wr->sg_list; /* sg_list, opcode, qkey, next: set at create */
		uint32_t total = t->hdr_len + t->data_len;

		if (unlikely(total > v->base.mtu))
			return -EMSGSIZE;
		if (unlikely(!t->peer))
			return -EINVAL;
		wr->wr_id = 0;
		wr->wr.ud.ah = t->peer->ah;
		wr->wr.ud.remote_qpn = t->peer->qpn;
		if (total <= v->base.max_inline) {
			wr->send_flags = IBV_SEND_INLINE;
			sge[0] = (struct ibv_sge){(uintptr_t)t->hdr, t->hdr_len, t->hdr_lkey};
			sge[1] = (struct ibv_sge){(uintptr_t)t->data, t->data_len, t->data_lkey};
			wr->num_sge = t->data_len ? 2 : 1;
		} else if (t->hdr_lkey && (!t->data_len || t->data_lkey)) {
			/* Sent from the caller's memory: tx_flush() must see it complete. */
			sig = true;
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
			sge[0] = (struct ibv_sge){(uintptr_t)slot, total, v->ring_mr->lkey};
			wr->num_sge = 1;
		}
		if (unlikely(pos + 1 >= sig_at)) {
			wr->send_flags |= IBV_SEND_SIGNALED;
			wr->wr_id = pos + 1;
			last_sig = pos + 1;
			sig_at = pos + 1 + v->base.sq_depth / 2;
		}
		bytes += total;
	}
	if (!k)
		return 0;
	/*
	 * The last WR of a burst that sends from memory the caller will reuse
	 * after tx_flush() is signaled too; a burst of inlined datagrams alone
	 * needs no completion (the NIC has read them when the post returns).
	 */
	last = &v->swr[k - 1];
	if (unlikely(sig) && !(last->send_flags & IBV_SEND_SIGNALED)) {
		last->send_flags |= IBV_SEND_SIGNALED;
		last->wr_id = pos;
		last_sig = pos;
	}
	v->sq_last_signal = last_sig;
	after = last->next; /* the chain ends at the burst's last WR, then is whole again */
	last->next = NULL;
	posted = post_chain(v, k);
	last->next = after;
	v->base.stats.tx_pkts += posted;
	v->base.stats.tx_bytes += posted == k ? bytes : 0;
	return (int)posted;
}

/*
 * A burst of one datagram takes tx_one() without tx_many()'s frame
 * (verbs_cost_vm.sh, window 1: 12 instructions a send less).
 */
int urpc__verbs_ud_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);

	if (n == 1) {
		int ret = tx_one(v, pkts);

		if (likely(ret >= 0))
			return ret;
	}
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

/* Post the receives waiting in v->repost. */
static void repost(struct verbs_tp *v)
{
	while (v->nrepost) {
		uint32_t m = URPC_MIN(v->nrepost, VERBS_RECV_BATCH), i;
		struct ibv_recv_wr *bad = NULL;
		int ret;

		/* sg_list, num_sge, next, the SGE's length and lkey: set at create. */
		for (i = 0; i < m; i++) {
			uint32_t idx = v->repost[v->nrepost - m + i];

			v->rsge[i].addr = (uintptr_t)v->ring.addr + (uint64_t)v->slot_size * idx;
			v->rwr[i].wr_id = idx;
		}
		v->rwr[m - 1].next = NULL;
		ret = ibv_post_recv(v->qp, v->rwr, &bad);
		v->rwr[m - 1].next = m < VERBS_RECV_BATCH ? &v->rwr[m] : NULL;
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

/*
 * The completions of a poll that found some (@k of them in v->rx_wc), and
 * the polls after it, into v->rx_out (v->rx_n entries at most).
 */
static __attribute__((noinline)) int rx_take(struct verbs_tp *v, int k)
{
	struct urpc_tp_rx *pkts = v->rx_out;
	struct ibv_wc *wc = v->rx_wc;
	unsigned n = v->rx_n, got = 0;
	int i;

	for (;;) {
		int want;

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
		want = (int)URPC_MIN(n - got, VERBS_POLL_BATCH);
		if (k < (int)VERBS_POLL_BATCH || !want)
			break;
		k = ibv_poll_cq(v->recv_cq, want, wc);
		if (k <= 0) {
			if (unlikely(k < 0))
				URPC_ERR_RATELIMIT(v->base.id, "polling the receive CQ failed");
			break;
		}
	}
	v->base.stats.rx_pkts += got;
	/* Only dropped completions come back here; the rest through rx_release(). */
	if (unlikely(v->nrepost >= v->repost_batch))
		repost(v);
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

void urpc__verbs_ud_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);
	unsigned i;

	for (i = 0; i < n; i++)
		repost_later(v, pkts[i].ring_idx);
	if (v->nrepost >= v->repost_batch)
		repost(v);
}

/* ---- set-up ----------------------------------------------------------------- */

static int create_ud_qp(struct verbs_tp *v, const struct urpc_tp_cfg *cfg)
{
	static const uint32_t inline_tries[] = {VERBS_WANT_INLINE, 64, 0};
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	unsigned i;

	for (i = 0; i < URPC_ARRAY_SIZE(inline_tries) && !v->qp; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = v->send_cq;
		ia.recv_cq = v->recv_cq;
		ia.qp_type = IBV_QPT_UD;
		ia.sq_sig_all = 0;
		ia.cap.max_send_wr = cfg->sq_depth;
		ia.cap.max_recv_wr = cfg->rq_depth;
		ia.cap.max_send_sge = 2;
		ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = inline_tries[i];
		v->qp = ibv_create_qp(v->pd, &ia);
	}
	if (!v->qp) {
		URPC_ERR(cfg->id, "%s: cannot create the UD QP: %s", v->port.dev, strerror(errno));
		return -errno ? -errno : -ENOMEM;
	}
	v->base.max_inline = ia.cap.max_inline_data;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = v->port.num;
	a.qkey = VERBS_QKEY;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = verbs_random32() & 0xffffff;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto fail;
	return 0;
fail:
	URPC_ERR(cfg->id, "%s: UD QP state change failed: %s", v->port.dev, strerror(errno));
	return -errno ? -errno : -EIO;
}

int urpc__verbs_ud_create(struct verbs_tp *v, const struct urpc_tp_cfg *cfg)
{
	size_t ring_len;
	uint32_t i;
	int ret;

	ret = create_ud_qp(v, cfg);
	if (ret)
		return ret;

	/* The ring: rq_depth receive slots, then sq_depth send slots. */
	v->slot_size = URPC_ALIGN_UP(VERBS_GRH + v->base.mtu, (uint32_t)URPC_CACHELINE);
	ring_len = (size_t)v->slot_size * (cfg->rq_depth + cfg->sq_depth);
	ret = urpc__hp_alloc(ring_len, cfg->hp_flags, &v->ring);
	if (ret)
		return ret;
	v->send_slots = (uint8_t *)v->ring.addr + (size_t)v->slot_size * cfg->rq_depth;
	v->ring_mr = ibv_reg_mr(v->pd, v->ring.addr, ring_len, IBV_ACCESS_LOCAL_WRITE);
	if (!v->ring_mr) {
		ret = -errno ? -errno : -ENOMEM;
		URPC_ERR(cfg->id, "%s: cannot register the receive ring (%zu bytes): %s",
			 v->port.dev, ring_len, strerror(-ret));
		return ret;
	}
	v->swr = calloc(cfg->sq_depth, sizeof(*v->swr));
	v->ssge = calloc((size_t)cfg->sq_depth * 2, sizeof(*v->ssge));
	v->repost = calloc(cfg->rq_depth, sizeof(*v->repost));
	if (!v->swr || !v->ssge || !v->repost)
		return -ENOMEM;
	v->repost_batch = URPC_MAX(1u, URPC_MIN(VERBS_RECV_BATCH, cfg->rq_depth / 4));
	/* What every send WR of a burst has in common: tx_burst() fills in the rest. */
	for (i = 0; i < cfg->sq_depth; i++) {
		v->swr[i].next = i + 1 < cfg->sq_depth ? &v->swr[i + 1] : NULL;
		v->swr[i].sg_list = &v->ssge[2 * i];
		v->swr[i].opcode = IBV_WR_SEND;
		v->swr[i].wr.ud.remote_qkey = VERBS_QKEY;
	}

	v->wr1.sg_list = &v->sge1;
	v->wr1.num_sge = 1;
	v->wr1.opcode = IBV_WR_SEND;
	v->wr1.send_flags = IBV_SEND_INLINE;
	v->wr1.wr.ud.remote_qkey = VERBS_QKEY;

	for (i = 0; i < VERBS_RECV_BATCH; i++) {
		v->rsge[i].length = v->slot_size;
		v->rsge[i].lkey = v->ring_mr->lkey;
		v->rwr[i].sg_list = &v->rsge[i];
		v->rwr[i].num_sge = 1;
		v->rwr[i].next = i + 1 < VERBS_RECV_BATCH ? &v->rwr[i + 1] : NULL;
	}
	/* Every receive slot posted: the ring never runs dry unless held. */
	for (i = 0; i < cfg->rq_depth; i++)
		v->repost[v->nrepost++] = i;
	repost(v);
	return v->nrepost ? -EIO : 0;
}

void urpc__verbs_ud_free(struct verbs_tp *v)
{
	if (v->qp)
		ibv_destroy_qp(v->qp);
	if (v->ring_mr)
		ibv_dereg_mr(v->ring_mr);
	urpc__hp_free(&v->ring);
	free(v->swr);
	free(v->ssge);
	free(v->repost);
}
