/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC handshake: control messages that session
 * management delivered (ctl_push), connecting a connection's QP to the
 * peer's, and the handshake's timers (REQ resends, the deadline). See
 * verbs_int.h for the states and messages. A RENEW (the peer cancelled
 * an operation) is a REQ that renews a READY pair: what was posted on it
 * is requeued (urpc__verbs_rc_renew()), not failed, and once the new pair
 * is READY the old QP's memory windows are bound to it (verbs_mw.h).
 * verbs.c calls in here through verbs_hs.h; this file calls verbs_rc.h,
 * verbs_qp.h, verbs_mw.h and verbs_ctl.h below it.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_hs.h"

#include <errno.h>
#include <string.h>

#include "../util/log.h"
#include "verbs_ctl.h"
#include "verbs_mw.h"
#include "verbs_qp.h"
#include "verbs_rc.h"

/* INIT -> RTR -> RTS against the peer's QP @rqpn starting at @rpsn. */
static int qp_connect(struct verbs_tp *v, struct verbs_conn *p, uint32_t rqpn, uint32_t rpsn)
{
	enum ibv_mtu peer_mtu = verbs_mtu_enum(p->mtu);
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = URPC_MIN(v->port.mtu_enum, peer_mtu);
	a.dest_qp_num = rqpn;
	a.rq_psn = rpsn & 0xffffff;
	a.max_dest_rd_atomic = (uint8_t)v->rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr = p->ah_attr;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -errno ? -errno : -EIO;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 16; /* 4.096 us << 16 = 268 ms per try */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = p->rc_psn;
	a.max_rd_atomic = (uint8_t)v->rd_atomic;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -errno ? -errno : -EIO;
	p->rc_remote_qpn = rqpn;
	return 0;
}

static struct verbs_conn *peer_of_ctl(struct verbs_tp *v, const struct verbs_ctl *c)
{
	struct verbs_conn *p;

	for (p = v->conns; p; p = p->next)
		if (p->qpn == c->ud_qpn && p->nonce == c->nonce && !memcmp(p->gid, c->gid, 16))
			return p;
	return NULL;
}

/* Connect @p's QP (PENDING, or fresh for a REQ) to the sender's and go READY. */
static void accept_peer(struct verbs_tp *v, struct verbs_conn *p, const struct verbs_ctl *c)
{
	int ret;

	if (p->rc_state == VERBS_RC_NONE) {
		ret = urpc__verbs_qp_create(v, p);
		if (ret) {
			/* The requester times out; what a renewal requeued here fails. */
			if (p->wait_head != VERBS_NIL)
				urpc__verbs_rc_fail(v, p, ret, "creating an RC QP failed");
			else
				URPC_ERR(v->base.id, "cannot create an RC QP for peer QPN %u: %s",
					 p->qpn, strerror(-ret));
			return;
		}
	}
	ret = qp_connect(v, p, c->rc_qpn, c->rc_psn);
	if (ret) {
		URPC_ERR(v->base.id, "RC QP %u: cannot connect to QPN %u: %s", p->rc_qp->qp_num,
			 c->rc_qpn, strerror(-ret));
		if (p->rc_state == VERBS_RC_NONE && p->wait_head == VERBS_NIL) {
			ibv_destroy_qp(p->rc_qp);
			p->rc_qp = NULL;
			return;
		}
		urpc__verbs_rc_fail(v, p, ret, "QP state change failed");
		return;
	}
	if (p->rc_state == VERBS_RC_PENDING) {
		v->npending--;
		verbs_rx_pick(v);
	}
	p->rc_state = VERBS_RC_READY;
	p->renew = false;
	/* Windows of the renewed QP: bound again before our ACK lets the peer post. */
	if (p->old_qp)
		urpc__verbs_mw_rebind(v, p);
	URPC_DBG(v->base.id, "RC QP %u connected to peer QPN %u (RC QPN %u)", p->rc_qp->qp_num,
		 p->qpn, c->rc_qpn);
	urpc__verbs_rc_kick(v, p);
}

static void ctl_rx(struct verbs_tp *v, struct verbs_conn *via, uint32_t type, const uint8_t *buf,
		   uint32_t len)
{
	struct verbs_conn *p;
	struct verbs_ctl c;
	bool req, renew;

	if (len < sizeof(c) ||
	    (type != VERBS_CTL_RC_REQ && type != VERBS_CTL_RC_ACK && type != VERBS_CTL_RC_RENEW)) {
		v->base.stats.rx_drop_bad++;
		return;
	}
	memcpy(&c, buf, sizeof(c));
	renew = type == VERBS_CTL_RC_RENEW;
	req = type != VERBS_CTL_RC_ACK; /* a RENEW is a REQ that asks to requeue */
	p = peer_of_ctl(v, &c);
	/* It must name the endpoint of the session that carried it. */
	if (!p || p != via || !c.rc_qpn || c.rc_qpn > 0xffffff) {
		/* Not resolved here (yet): the requester resends, then times out. */
		v->base.stats.rx_drop_bad++;
		return;
	}
	switch (p->rc_state) {
	case VERBS_RC_NONE:
		if (req)
			accept_peer(v, p, &c);
		/* an ACK for a connection torn down since: ignored */
		break;
	case VERBS_RC_PENDING:
		/* A REQ: both sides asked at once. An ACK must answer our QP. */
		if (req || c.echo_qpn == p->rc_qp->qp_num)
			accept_peer(v, p, &c);
		break;
	case VERBS_RC_READY:
		if (c.rc_qpn == p->rc_remote_qpn)
			break; /* a duplicate; a REQ is answered below (our ACK was lost) */
		if (renew) {
			/*
			 * The peer cancelled an operation and renews the pair: what
			 * we posted on the old one goes again on the new one.
			 */
			urpc__verbs_rc_renew(v, p);
			accept_peer(v, p, &c);
		} else if (req) {
			/* The peer made a new QP (it released and resolved us again). */
			urpc__verbs_rc_teardown(v, p, -ECONNRESET);
			accept_peer(v, p, &c);
		} else if (c.echo_qpn == p->rc_qp->qp_num) {
			/*
			 * The peer connected a new QP to ours while ours went to a
			 * stale one: start over.
			 */
			urpc__verbs_rc_teardown(v, p, -ECONNRESET);
			urpc__verbs_rc_start(v, p);
		}
		break;
	case VERBS_RC_FAILED:
		/*
		 * A tombstone until the peer is released, or until the peer
		 * asks with a new QP (it recovers from a refused request).
		 */
		if (!req || c.rc_qpn == p->rc_remote_qpn)
			return;
		urpc__verbs_rc_teardown(v, p, -ECONNRESET);
		accept_peer(v, p, &c);
		break;
	}
	if (req && p->rc_state == VERBS_RC_READY)
		urpc__verbs_ctl_send(v, p, VERBS_CTL_RC_ACK);
}

void urpc__verbs_hs_timers(struct verbs_tp *v, uint64_t now)
{
	struct verbs_conn *p;

	for (p = v->conns; p && v->npending; p = p->next) {
		if (p->rc_state != VERBS_RC_PENDING)
			continue;
		if (now >= p->hs_deadline_ns) {
			urpc__verbs_rc_stall(v, p, "no answer to the connection request");
			continue;
		}
		if (now < p->hs_next_ns)
			continue;
		urpc__verbs_ctl_send(v, p, p->renew ? VERBS_CTL_RC_RENEW : VERBS_CTL_RC_REQ);
		p->hs_rto_ns = URPC_MIN(p->hs_rto_ns * 2, VERBS_HS_RTO_MAX_NS);
		p->hs_next_ns = now + p->hs_rto_ns;
	}
}

void urpc__verbs_hs_ctl_push(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			     size_t len)
{
	struct verbs_tp *v = to_verbs(tp);

	if (!peer || len < 1 || len > URPC_TP_EP_MAX) {
		v->base.stats.rx_drop_bad++;
		return;
	}
	ctl_rx(v, peer->conn, buf[0], buf + 1, (uint32_t)len - 1);
}
