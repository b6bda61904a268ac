/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's outbox of control messages (see verbs_ctl.h): the
 * RC handshake's REQs and ACKs wait here, FIFO, until session management
 * pops them. Calls nothing above it.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_ctl.h"

#include <string.h>

int urpc__verbs_ctl_send(struct verbs_tp *v, struct verbs_conn *c, enum verbs_ctl_type type)
{
	struct verbs_outmsg *m;

	if (v->out_tail - v->out_head == VERBS_OUTBOX)
		return -EAGAIN; /* a REQ is resent by its timer, an ACK on the next REQ */
	m = &v->outbox[v->out_tail++ % VERBS_OUTBOX];
	m->conn = c;
	m->type = (uint8_t)type;
	v->base.ctl_pending = v->out_tail - v->out_head;
	return 0;
}

void urpc__verbs_ctl_purge(struct verbs_tp *v, struct verbs_conn *c)
{
	uint32_t i;

	for (i = v->out_head; i != v->out_tail; i++)
		if (v->outbox[i % VERBS_OUTBOX].conn == c)
			v->outbox[i % VERBS_OUTBOX].conn = NULL;
}

int urpc__verbs_ctl_pop(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf)
{
	struct verbs_tp *v = to_verbs(tp);

	while (v->out_head != v->out_tail) {
		struct verbs_outmsg m = v->outbox[v->out_head++ % VERBS_OUTBOX];
		struct urpc_tp_peer *h;
		struct verbs_ctl c;

		v->base.ctl_pending = v->out_tail - v->out_head;
		if (!m.conn || !m.conn->rc_qp)
			continue;
		for (h = v->peers; h && h->conn != m.conn; h = h->next)
			;
		if (!h)
			continue;
		memset(&c, 0, sizeof(c));
		c.ud_qpn = v->qp->qp_num;
		c.nonce = v->nonce;
		c.rc_qpn = m.conn->rc_qp->qp_num;
		c.rc_psn = m.conn->rc_psn;
		c.echo_qpn = m.type == VERBS_CTL_RC_ACK ? m.conn->rc_remote_qpn : 0;
		memcpy(c.gid, v->gid.raw, 16);
		buf[0] = m.type;
		memcpy(buf + 1, &c, sizeof(c));
		*peer = h;
		return 1 + (int)sizeof(c);
	}
	return 0;
}
