/* SPDX-License-Identifier: MIT */
/*
 * Session-management packets out (session_sm.h). Owns the Rpc's SM outbox
 * (rpc->smo, rpc->smo_n).
 * May call: the Nexus's SM sends (nexus_io.h), the transport's
 * get_endpoint, the peer Nexus's cookie (nexus_peer.h).
 */
#define URPC_LOG_MODULE "session"
#include "session_sm.h"

#include <string.h>

#include "../nexus/nexus_peer.h"
#include "../util/log.h"

static_assert(URPC_SM_OUT_BATCH <= UINT16_MAX, "rpc->smo_n is 16 bits");

void urpc__sm_out_flush(struct urpc_rpc *rpc)
{
	unsigned n = rpc->smo_n;

	rpc->smo_n = 0;
	if (n)
		rpc->st.sm_pkts_tx += urpc__nexus_sm_send_batch(rpc->nx, rpc->smo, n, rpc->id);
}

void urpc__sm_out_send(struct urpc_rpc *rpc, const struct sockaddr_in *to, struct urpc_sm_pkt *p)
{
	if (rpc->smo_n == URPC_SM_OUT_BATCH)
		urpc__sm_out_flush(rpc);
	urpc__nexus_sm_pack(rpc->nx, to, p, &rpc->smo[rpc->smo_n++]);
}

/* An SM packet about session @s, from its side of the session. */
void urpc__sm_out_fill(struct urpc_rpc *rpc, const struct urpc_session *s, struct urpc_sm_pkt *p,
		       enum urpc_sm_pkt_type type, int status)
{
	memset(p, 0, offsetof(struct urpc_sm_pkt, ep));
	p->type = type;
	p->status = status;
	p->transport = (uint8_t)urpc__tp_wire_kind(rpc->tp);
	p->token = s->token;
	p->seq = s->sm_seq;
	p->max_msg = rpc->max_msg;
	if (s->role == URPC_ROLE_CLIENT) {
		p->client_rpc_id = rpc->id;
		p->server_rpc_id = s->remote_rpc_id;
		p->client_sess = s->local_num;
		p->server_sess = s->remote_num;
	} else {
		p->client_rpc_id = s->remote_rpc_id;
		p->server_rpc_id = rpc->id;
		p->client_sess = s->remote_num;
		p->server_sess = s->local_num;
	}
	if (type == URPC_SM_PKT_CONNECT_REQ || type == URPC_SM_PKT_CONNECT_RESP) {
		p->ep_len = (uint16_t)rpc->tp->ops->get_endpoint(rpc->tp, p->ep);
		/* The client's proposal; the server's answer, the one agreed. */
		p->window = (uint8_t)urpc__sess_window(s);
	}
	if (type == URPC_SM_PKT_CONNECT_REQ && s->nxp)
		p->cookie = urpc__nxp_cookie(s->nxp);
}

void urpc__sm_out_session(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_sm_pkt_type type,
			  int status)
{
	struct urpc_sm_pkt p;

	urpc__sm_out_fill(rpc, s, &p, type, status);
	urpc__sm_out_send(rpc, &s->peer_nexus, &p);
}

/* Answer an SM request @req that matched no session (or was refused). */
void urpc__sm_out_reply(struct urpc_rpc *rpc, const struct urpc_sm_pkt *req,
			enum urpc_sm_pkt_type type, int status)
{
	struct urpc_sm_pkt p;

	memcpy(&p, req, offsetof(struct urpc_sm_pkt, ep));
	p.type = type;
	p.status = status;
	p.transport = (uint8_t)urpc__tp_wire_kind(rpc->tp);
	p.ep_len = 0;
	p.cookie = 0;
	urpc__sm_out_send(rpc, &req->from, &p);
}

void urpc__sm_out_refuse(struct urpc_rpc *rpc, const struct urpc_sm_pkt *req, int err)
{
	rpc->st.connects_refused++;
	urpc__sm_out_reply(rpc, req, URPC_SM_PKT_CONNECT_RESP, err);
}
