/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's release notices. A reader done with a grant sends
 * its owner a SEND with the grant's index and generation as immediate, on
 * the RC QP the reads went on, so it arrives behind any resend of them
 * (verbs_mw.c waits for it before revoking). This file owns posting one,
 * holding them while verbs_mw.c blocks (verbs_int.h says why), receiving
 * one and the receives it takes. It calls only libibverbs and the log;
 * verbs_rc.c, verbs_qp.c and verbs_mw.c call it through verbs_notice.h.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_notice.h"

#include <endian.h>

#include "../util/log.h"

void urpc__verbs_notice_recv_post(struct ibv_qp *qp)
{
	struct ibv_recv_wr wr = {.wr_id = VERBS_WR_RECV}, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		URPC_ERR_RATELIMIT(0, "RC QP %u: a receive could not be posted", qp->qp_num);
}

static void post_one(struct verbs_tp *v, struct verbs_conn *c, uint32_t notice)
{
	struct ibv_send_wr wr = {.wr_id = VERBS_WR_NOTICE, .opcode = IBV_WR_SEND_WITH_IMM}, *bad;

	wr.imm_data = htobe32(notice);
	if (ibv_post_send(c->rc_qp, &wr, &bad))
		URPC_ERR_RATELIMIT(v->base.id, "RC QP %u: a release notice could not be posted",
				   c->rc_qp->qp_num);
}

void urpc__verbs_notice_send(struct verbs_tp *v, struct verbs_conn *c, uint32_t notice)
{
	if (!v->hold_notices)
		post_one(v, c, notice);
	else if (v->nheld < VERBS_HELD) /* else its owner revokes after VERBS_RELEASE_NS */
		v->held[v->nheld++] = (struct verbs_held){c->rc_qp->qp_num, notice};
}

void urpc__verbs_notice_post_held(struct verbs_tp *v)
{
	struct verbs_conn *c;
	uint32_t i;

	for (i = 0; i < v->nheld; i++)
		for (c = v->conns; c; c = c->next)
			if (c->rc_state == VERBS_RC_READY &&
			    c->rc_qp->qp_num == v->held[i].qp_num) {
				post_one(v, c, v->held[i].notice);
				break;
			}
	v->nheld = 0;
}

void urpc__verbs_notice_got(struct verbs_tp *v, const struct ibv_wc *wc)
{
	uint32_t imm = be32toh(wc->imm_data), idx = imm >> 8;
	struct verbs_grant *e = idx < v->grants_cap ? &v->grants[idx] : NULL;
	struct verbs_conn *c;

	if (e && e->kind != VERBS_GRANT_FREE && (e->gen & 0xff) == (imm & 0xff) && e->conn->rc_qp &&
	    e->conn->rc_qp->qp_num == wc->qp_num)
		e->released = true;
	for (c = v->conns; c; c = c->next)
		if (c->rc_qp && c->rc_qp->qp_num == wc->qp_num) {
			urpc__verbs_notice_recv_post(c->rc_qp);
			break;
		}
}
