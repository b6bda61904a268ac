/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC QPs as objects: creating a connection's QP in
 * INIT with its notice receives, and destroying it, or keeping it through
 * a renewal while memory windows are bound to it (verbs_int.h). verbs_rc.c
 * and verbs_hs.c call in here through verbs_qp.h; this file calls only
 * verbs_notice.h (the receives).
 */
#include "verbs_qp.h"

#include <string.h>

#include "verbs_notice.h"

int urpc__verbs_qp_create(struct verbs_tp *v, struct verbs_conn *p)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = v->rc_cq;
	ia.recv_cq = v->rc_cq;
	ia.qp_type = IBV_QPT_RC;
	/* Operations' chunks, their notices, and one bind or invalidation (verbs_mw.c). */
	ia.cap.max_send_wr = VERBS_RC_DEPTH * (v->rc_chunks + 1) + 1;
	ia.cap.max_recv_wr = VERBS_RC_RECV;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	p->rc_qp = ibv_create_qp(v->pd, &ia);
	if (!p->rc_qp)
		return -errno ? -errno : -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = v->port.num;
	a.qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		int ret = -errno ? -errno : -EIO;

		ibv_destroy_qp(p->rc_qp);
		p->rc_qp = NULL;
		return ret;
	}
	p->rc_psn = verbs_random32() & 0xffffff;
	for (unsigned k = 0; k < VERBS_RC_RECV; k++)
		urpc__verbs_notice_recv_post(p->rc_qp);
	return 0;
}

void urpc__verbs_qp_destroy(struct verbs_tp *v, struct verbs_conn *p, bool keep)
{
	bool kept = false;
	uint32_t g;

	for (g = 0; g < v->grants_cap; g++) {
		struct verbs_grant *e = &v->grants[g];

		if (e->conn != p || (e->kind != VERBS_GRANT_MW && e->kind != VERBS_GRANT_REBIND))
			continue;
		if (keep && e->kind == VERBS_GRANT_REBIND)
			continue; /* still bound to old_qp: this QP never got a window */
		if (keep && !p->old_qp) {
			e->kind = VERBS_GRANT_REBIND;
			kept = true;
			continue;
		}
		ibv_dealloc_mw(e->mw);
		e->kind = VERBS_GRANT_DEAD;
		e->mw = NULL;
	}
	if (kept)
		p->old_qp = p->rc_qp;
	else if (p->rc_qp)
		ibv_destroy_qp(p->rc_qp);
	if (!keep && p->old_qp) {
		ibv_destroy_qp(p->old_qp);
		p->old_qp = NULL;
	}
	if (!keep)
		p->nrenew_held = 0;
	p->rc_qp = NULL;
	p->rc_state = VERBS_RC_NONE;
	p->rc_err = 0;
	p->rc_stalled = false;
	p->rc_remote_qpn = 0;
	p->rd_out = 0;
	p->rd_ops = p->rd_notice = 0;
	p->os_out = 0;
	p->os_timed_op = 0;
	p->renew = false;
}
