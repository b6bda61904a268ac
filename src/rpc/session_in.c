/* SPDX-License-Identifier: MIT */
/*
 * Session-management packets in (session_in.h): a CONNECT_REQ accepted as
 * a server session (transport, source limit, the window agreed) or
 * refused; the answers to a client's connect (its window, the server's
 * endpoint), cookies, disconnects, pings, resets and the transport's
 * control bytes. Owns no state of its own: every change of a session's
 * state goes through urpc__session_transition().
 * May call: session.h (the state machine, the SM round trip, notices),
 * session_sm.h (answers), session_src.h (who may open a server session),
 * session_table.h (allocation, the CONNECT_REQ index), the Nexus's peer
 * entries (cookies, liveness), the transport's resolve_peer,
 * set_peer_token and ctl_push.
 */
#define URPC_LOG_MODULE "session"
#include "session_in.h"

#include <errno.h>
#include <string.h>

#include "../util/log.h"
#include "session.h"
#include "session_sm.h"
#include "session_src.h"
#include "session_table.h"

/* The window a CONNECT_REQ or CONNECT_RESP names (decoded: 0 or a power of two). */
static unsigned sm_window(const struct urpc_sm_pkt *p)
{
	return p->window ? p->window : URPC_SESSION_WINDOW_DEFAULT;
}

static void on_connect_req(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p)
{
	struct urpc_session *s;
	int ret;

	s = urpc__sess_find_server(rpc, p);
	if (s) {
		/* A retried CONNECT_REQ: answer again, no second session. */
		if (s->state == URPC_SESS_CONNECTED)
			urpc__sm_out_session(rpc, s, URPC_SM_PKT_CONNECT_RESP, 0);
		return;
	}
	if (p->transport != (uint8_t)urpc__tp_wire_kind(rpc->tp)) {
		URPC_WARN_RATELIMIT(rpc->id, "refusing a %s client: this Rpc uses %s",
				    urpc_transport_str((enum urpc_transport_kind)p->transport),
				    urpc_transport_str(urpc__tp_wire_kind(rpc->tp)));
		urpc__sm_out_refuse(rpc, p, -EPROTO);
		return;
	}
	ret = urpc__src_admit(rpc, p);
	if (ret) {
		urpc__sm_out_refuse(rpc, p, ret);
		return;
	}
	/* The client's proposal (0: a peer before windows, 8), bounded by ours. */
	ret = urpc__sess_alloc(rpc, URPC_ROLE_SERVER, URPC_MIN(sm_window(p), rpc->o.session_window),
			       &s);
	if (ret) {
		URPC_WARN_RATELIMIT(rpc->id, "refusing a session (max_sessions %u): %s",
				    rpc->max_sessions, urpc__sess_limit_str(ret));
		urpc__sm_out_refuse(rpc, p, ret);
		return;
	}
	s->remote_rpc_id = p->client_rpc_id;
	s->remote_num = p->client_sess;
	s->token = p->token;
	s->sm_seq = p->seq;
	s->peer_nexus = p->from;
	urpc__src_take(rpc, s, p->from.sin_addr.s_addr);
	s->nxp = urpc__nexus_peer_get(rpc->nx, &p->from, rpc->ping_ns, rpc->peer_timeout_ns,
				      s->token);
	ret = s->nxp ? rpc->tp->ops->resolve_peer(rpc->tp, p->ep, p->ep_len, &s->peer) : -ENOMEM;
	if (!ret) { /* one-sided requests on this session carry its token */
		rpc->tp->ops->set_peer_token(rpc->tp, s->peer, s->token);
		urpc__src_bind(rpc, s, p);
	}
	if (ret) {
		URPC_WARN_RATELIMIT(rpc->id, "refusing a session: %s%s", urpc_strerror(ret),
				    ret == -ENOMEM ? " (no memory for its peer)" : "");
		urpc__sess_free(rpc, s);
		urpc__sm_out_refuse(rpc, p, ret);
		return;
	}
	urpc__sess_index(rpc, s);
	urpc__session_transition(rpc, s, URPC_SEV_ACCEPT, 0);
}

/* The session a packet names on this side, if its token matches. */
static struct urpc_session *sm_lookup(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p,
				      enum urpc_session_role role)
{
	uint32_t num = role == URPC_ROLE_CLIENT ? p->client_sess : p->server_sess;
	struct urpc_session *s = urpc__rpc_session(rpc, (int)num);

	if (!s || s->role != role || s->token != p->token)
		return NULL;
	return s;
}

/*
 * The server's Nexus wants a cookie echoed before it passes our CONNECT_REQ
 * on (sm_cookie.h): keep it for every session to that Nexus, and resend at
 * once, unless an earlier copy of this cookie already made us resend.
 */
static void on_cookie(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p)
{
	struct urpc_session *s = sm_lookup(rpc, p, URPC_ROLE_CLIENT);

	if (!s || s->state != URPC_SESS_CONNECTING || !p->cookie || p->seq != s->sm_seq)
		return;
	urpc__nxp_set_cookie(s->nxp, p->cookie);
	if (p->cookie == s->cli.cookie)
		return;
	s->cli.cookie = p->cookie;
	if (s->cli.sm_tx_ns) /* Karn, as for CONNECT_RESP: this answers the first send */
		urpc__session_rtt_sample(rpc, rpc->now - s->cli.sm_tx_ns);
	s->cli.sm_tx_ns = rpc->now;
	s->cli.sm_next_retry_ns = rpc->now + rpc->sm_retry_ns;
	urpc__sm_out_session(rpc, s, URPC_SM_PKT_CONNECT_REQ, 0);
}

void urpc__session_handle_sm(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p)
{
	struct urpc_session *s;
	int ret;

	switch (p->type) {
	case URPC_SM_PKT_CONNECT_REQ:
		on_connect_req(rpc, p);
		return;
	case URPC_SM_PKT_CONNECT_RESP:
		s = sm_lookup(rpc, p, URPC_ROLE_CLIENT);
		if (!s || s->state != URPC_SESS_CONNECTING)
			return;
		if (p->status && !p->rpc_inc) {
			/*
			 * The Nexus answered for its Rpc: that id is not
			 * attached (yet; a server starts its Nexus before its
			 * threads). Keep trying until the connect time-out.
			 */
			s->cli.no_rpc_status = p->status;
			return;
		}
		if (p->status) {
			if (urpc__src_refusal_str(p->status))
				URPC_WARN_RATELIMIT(rpc->id, "rpc %u refused session %u: %s",
						    s->remote_rpc_id, s->local_num,
						    urpc__src_refusal_str(p->status));
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, p->status);
			return;
		}
		ret = rpc->tp->ops->resolve_peer(rpc->tp, p->ep, p->ep_len, &s->peer);
		if (ret) {
			URPC_ERR(rpc->id, "cannot reach the server's %s endpoint: %s",
				 urpc_transport_str(rpc->tp->kind), urpc_strerror(ret));
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, ret);
			return;
		}
		if (sm_window(p) > urpc__sess_window(s)) {
			URPC_ERR(rpc->id,
				 "rpc %u answered session %u with a window of %u, above "
				 "the %u asked for",
				 s->remote_rpc_id, s->local_num, sm_window(p),
				 urpc__sess_window(s));
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, -EPROTO);
			return;
		}
		urpc__cli_set_window(s, sm_window(p));
		rpc->tp->ops->set_peer_token(rpc->tp, s->peer, s->token);
		s->remote_num = p->server_sess;
		if (s->cli.sm_tx_ns) /* Karn: only a connect that was not resent times the path */
			urpc__session_rtt_sample(rpc, rpc->now - s->cli.sm_tx_ns);
		urpc__session_transition(rpc, s, URPC_SEV_CONNECT_OK, 0);
		return;
	case URPC_SM_PKT_CONNECT_COOKIE:
		on_cookie(rpc, p);
		return;
	case URPC_SM_PKT_DISCONNECT_REQ:
		s = sm_lookup(rpc, p, URPC_ROLE_SERVER);
		if (s)
			urpc__session_transition(rpc, s, URPC_SEV_PEER_CLOSED, 0);
		urpc__sm_out_reply(rpc, p, URPC_SM_PKT_DISCONNECT_RESP, 0);
		return;
	case URPC_SM_PKT_DISCONNECT_RESP:
		s = sm_lookup(rpc, p, URPC_ROLE_CLIENT);
		if (s)
			urpc__session_transition(rpc, s, URPC_SEV_DISCONNECT_DONE, 0);
		return;
	case URPC_SM_PKT_PING_REQ:
		/* Sessions no longer ping (the Nexus does); an old peer's ping is answered. */
		s = sm_lookup(rpc, p, URPC_ROLE_SERVER);
		urpc__sm_out_reply(rpc, p, URPC_SM_PKT_PING_RESP,
				   s && s->state == URPC_SESS_CONNECTED ? 0 : -ECONNRESET);
		return;
	case URPC_SM_PKT_PING_RESP:
		s = sm_lookup(rpc, p, URPC_ROLE_CLIENT);
		if (!s || s->state != URPC_SESS_CONNECTED)
			return;
		s->cli.probe_next_ns = 0;
		if (p->status) /* its server Rpc does not know it; a new process: -ESTALE */
			urpc__session_transition(rpc, s, URPC_SEV_PEER_FAILED,
						 p->peer_restarted ? -ESTALE : -ECONNRESET);
		return;
	case URPC_SM_PKT_NX_NOTICE:
		urpc__session_notices(rpc);
		return;
	case URPC_SM_PKT_NX_PING:
	case URPC_SM_PKT_NX_PONG:
		return; /* the Nexus's own; never routed to an Rpc */
	case URPC_SM_PKT_RESET:
		s = sm_lookup(rpc, p, URPC_ROLE_CLIENT);
		if (s)
			urpc__session_transition(rpc, s, URPC_SEV_PEER_FAILED, -ECONNRESET);
		return;
	case URPC_SM_PKT_TP_CTL_C2S:
	case URPC_SM_PKT_TP_CTL_S2C:
		s = sm_lookup(rpc, p,
			      p->type == URPC_SM_PKT_TP_CTL_C2S ? URPC_ROLE_SERVER
								: URPC_ROLE_CLIENT);
		if (s && s->peer && (rpc->tp->caps & URPC_TP_CAP_CTL))
			rpc->tp->ops->ctl_push(rpc->tp, s->peer, p->ep, p->ep_len);
		return;
	}
}
