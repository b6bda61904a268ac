/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datagrams, set up and torn down: the UD QP, the
 * ring of receive and send slots and its registration, the send WRs and
 * the receive slots' own WRs as verbs_ud.c's datapath expects them, and
 * every receive posted (verbs_ud.h). verbs.c calls in here; this file calls
 * nothing above it.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_ud.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"

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
	struct ibv_recv_wr *bad = NULL;
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
	v->rslot = calloc(cfg->rq_depth, sizeof(*v->rslot));
	if (!v->swr || !v->ssge || !v->rslot)
		return -ENOMEM;
	v->repost_batch = URPC_MAX(1u, URPC_MIN(VERBS_RECV_BATCH, cfg->rq_depth / 4));
	v->sig_every = URPC_MAX(1u, cfg->sq_depth / 2);
	v->inline_max = URPC_MIN(v->base.max_inline, v->base.mtu);
	/*
	 * What every send WR of a burst has in common: tx_burst() fills in the
	 * rest. Between bursts each is one inlined SGE, unsignaled (verbs_ud.c's
	 * tx_many()).
	 */
	for (i = 0; i < cfg->sq_depth; i++) {
		v->swr[i].next = i + 1 < cfg->sq_depth ? &v->swr[i + 1] : NULL;
		v->swr[i].sg_list = &v->ssge[2 * i];
		v->swr[i].opcode = IBV_WR_SEND;
		v->swr[i].wr.ud.remote_qkey = VERBS_QKEY;
		v->swr[i].send_flags = IBV_SEND_INLINE;
		v->swr[i].num_sge = 1;
	}

	v->wr1.sg_list = &v->sge1;
	v->wr1.num_sge = 1;
	v->wr1.opcode = IBV_WR_SEND;
	v->wr1.send_flags = IBV_SEND_INLINE;
	v->wr1.wr.ud.remote_qkey = VERBS_QKEY;

	/*
	 * One WR per receive slot, for good, wr_id its byte offset in
	 * v->rslot (verbs_ud.c); every slot posted, as one chain: the ring
	 * never runs dry unless held.
	 */
	for (i = 0; i < cfg->rq_depth; i++) {
		struct verbs_rslot *r = &v->rslot[i];

		r->sge.addr = (uintptr_t)v->ring.addr + (uint64_t)v->slot_size * i;
		r->sge.length = v->slot_size;
		r->sge.lkey = v->ring_mr->lkey;
		r->wr.wr_id = (uint64_t)i * sizeof(*r);
		r->wr.sg_list = &r->sge;
		r->wr.num_sge = 1;
		r->wr.next = i + 1 < cfg->rq_depth ? &v->rslot[i + 1].wr : NULL;
	}
	v->rq_tail = &v->rq_stub;
	ret = ibv_post_recv(v->qp, &v->rslot[0].wr, &bad);
	if (ret) {
		URPC_ERR(cfg->id, "%s: cannot post the receive ring: %s", v->port.dev,
			 strerror(ret));
		return -EIO;
	}
	return 0;
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
	free(v->rslot);
}
