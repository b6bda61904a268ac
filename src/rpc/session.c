/* SPDX-License-Identifier: MIT */
/*
 * Sessions (session.h): the public urpc_session_* calls, session-management
 * packets out and their timers (those that come in: session_in.c), and
 * the session state machine. Owns a
 * session's state (written by urpc__session_transition() alone), its SM
 * fields (sequence, retries, deadlines, liveness) and the smoothed SM
 * round trip.
 * May call: client.h (fail or start a client session's requests),
 * large.h (is a session still reading?), session_table.h, tx.h, the Nexus's SM socket and peer
 * entries (a connect cookie), the transport's resolve_peer/
 * set_peer_token/get_endpoint/ctl ops.
 */
#define URPC_LOG_MODULE "session"
#include "session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "../util/log.h"
#include "client.h"
#include "large.h"
#include "rtt.h"
#include "session_sm.h"
#include "session_table.h"
#include "states.h"
#include "tx.h"

/*
 * The derived one-sided timeout (opts.one_sided_timeout_ms 0): 16 RTOs of
 * the session-management round trip (RTO = srtt + 4 rttvar), within
 * [URPC_OS_TIMEOUT_MIN_NS, OS_TIMEOUT_MAX_NS]; the minimum before the
 * first sample. A READ waits on the peer's event loop as a heartbeat does,
 * so a loaded peer that answers heartbeats late gets more time.
 */
#define OS_TIMEOUT_MAX_NS 60000000000ull
#define OS_TIMEOUT_RTOS 16

void urpc__session_rtt_sample(struct urpc_rpc *rpc, uint64_t rtt_ns)
{
	uint64_t rto, t;

	urpc__rtt_smooth(&rpc->sm_srtt_ns, &rpc->sm_rttvar_ns, rtt_ns);
	if (rpc->o.one_sided_timeout_ms)
		return;
	rto = rpc->sm_srtt_ns + 4 * rpc->sm_rttvar_ns;
	t = rto > OS_TIMEOUT_MAX_NS / OS_TIMEOUT_RTOS ? OS_TIMEOUT_MAX_NS : rto * OS_TIMEOUT_RTOS;
	rpc->tp->one_sided_timeout_ns = URPC_MAX(t, URPC_OS_TIMEOUT_MIN_NS);
}

static void raise_event(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_sm_event ev,
			int status)
{
	if (!rpc->o.sm_handler)
		return;
	rpc->in_cb++;
	rpc->o.sm_handler(rpc, (int)s->local_num, ev, status, rpc->o.sm_arg);
	rpc->in_cb--;
}

/* Raise @ev on the next loop pass (the caller is an API call, not the loop). */
static void defer_event(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_sm_event ev,
			int status, bool free_after)
{
	s->cli.pending_ev = ev;
	s->cli.pending_status = status;
	s->cli.free_after_ev = free_after;
	urpc__sess_pend(rpc, s);
}

/*
 * Client session @s failed (CONNECT_FAILED or RESET): its requests have
 * failed and its event has been raised, so its number is free again (as in
 * eRPC, the application need not disconnect it). A disconnect called from
 * the event or a continuation found it in RESET and did nothing.
 */
static void client_failed_free(struct urpc_rpc *rpc, struct urpc_session *s, uint32_t num)
{
	if (urpc__rpc_session(rpc, (int)num) == s)
		urpc__sess_free(rpc, s);
}

/* Server session @s is over (RESET already): freed unless a handler still holds it. */
static void server_drop(struct urpc_rpc *rpc, struct urpc_session *s)
{
	/* A deferred handler still holds a handle into this session. */
	if (!s->srv.deferred)
		urpc__sess_free(rpc, s);
}

/* Session @s is established: its peer's generations from now on are its own. */
static void peer_mark(struct urpc_session *s)
{
	s->nx_fail_gen = urpc__nxp_fail_gen(s->nxp);
	s->nx_rpc_gen = urpc__nxp_rpc_gen(s->nxp, s->remote_rpc_id);
	s->nx_probe_gen = urpc__nxp_probe_gen(s->nxp);
}

/*
 * The peer attached or detached some Rpc since client session @s was
 * established: ask the server Rpc whether it still knows @s (its answer,
 * or the Nexus's for a missing Rpc, is -ECONNRESET when not), resending
 * until answered. A slow answer fails nothing.
 */
static void probe(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t g = urpc__nxp_probe_gen(s->nxp);

	if (g != s->nx_probe_gen) {
		s->nx_probe_gen = g;
		s->cli.probe_next_ns = rpc->now;
		urpc__map_set(rpc->sm_map, s->local_num);
	}
	if (s->cli.probe_next_ns && rpc->now >= s->cli.probe_next_ns) {
		/*
		 * Resent at the heartbeat interval, not the SM retry (up to
		 * 100 ms): one probe lost must not make a half-open session
		 * outlive the peer time-out (simulator seed 483 with the
		 * fabric: a forget, the probe lost, then the server crashed).
		 */
		s->cli.probe_next_ns =
			rpc->now + (rpc->ping_ns ? URPC_MIN(rpc->ping_ns, rpc->sm_retry_ns)
						 : rpc->sm_retry_ns);
		urpc__sm_out_session(rpc, s, URPC_SM_PKT_PING_REQ, 0);
	}
}

/*
 * Has the peer process of established session @s failed, or its Rpc gone? 0 if not,
 * else why: -EHOSTDOWN (no heartbeats), -ESTALE (restarted), -ECONNRESET (its Rpc went).
 */
static int peer_failed(const struct urpc_session *s)
{
	if (urpc__nxp_fail_gen(s->nxp) != s->nx_fail_gen)
		return urpc__nxp_fail_status(s->nxp);
	if (urpc__nxp_rpc_gen(s->nxp, s->remote_rpc_id) != s->nx_rpc_gen)
		return -ECONNRESET;
	return 0;
}

/* Both ways into CONNECTED: the peer and token are known, the datapath header can be built. */
/*
 * Refusals (ICMP port unreachable) of a connect's CONNECT_REQs before it
 * fails with -ECONNREFUSED: the first and two resends (about two SM
 * retries, 200 ms at most), so that a server process started together
 * with its client, whose socket is not bound yet, is still reached.
 */
#define URPC_CONNECT_REFUSALS 3u

/*
 * Client session @s, connecting: has the peer's host said, often enough
 * since the connect began, that nothing listens at its Nexus's address?
 */
static bool connect_refused(const struct urpc_session *s)
{
	return urpc__nxp_refused_gen(s->nxp) - s->cli.nx_refused_gen >= URPC_CONNECT_REFUSALS;
}

static void enter_connected(struct urpc_session *s)
{
	urpc__sess_set_state(s, URPC_SESS_CONNECTED);
	peer_mark(s);
	urpc__pkthdr_fill(&s->tx_hdr, s->role == URPC_ROLE_CLIENT ? URPC_PKT_REQ : URPC_PKT_RESP, 0,
			  0, 0, s->remote_num, 0, s->token);
	s->tx_hdr.src_session = htole32(s->role == URPC_ROLE_CLIENT ? s->local_num : 0);
}

void urpc__session_transition(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_session_ev ev,
			      int status)
{
	enum urpc_session_state from = s->state;
	uint32_t num = s->local_num;

	URPC_DBG(rpc->id, "session %u (%s) event %s status %d", s->local_num,
		 urpc__session_state_str(from), urpc__session_ev_str(ev), status);
	switch (ev) {
	case URPC_SEV_CONNECT_START:
		if (from != URPC_SESS_NEW || s->role != URPC_ROLE_CLIENT)
			return;
		urpc__sess_set_state(s, URPC_SESS_CONNECTING);
		urpc__map_set(rpc->sm_map, s->local_num);
		s->sm_seq = 1;
		s->cli.sm_deadline_ns = rpc->now + rpc->connect_timeout_ns;
		s->cli.sm_next_retry_ns = rpc->now + rpc->sm_retry_ns;
		s->cli.sm_tx_ns = rpc->now;
		urpc__sm_out_session(rpc, s, URPC_SM_PKT_CONNECT_REQ, 0);
		return;
	case URPC_SEV_ACCEPT:
		if (from != URPC_SESS_NEW || s->role != URPC_ROLE_SERVER)
			return;
		enter_connected(s);
		urpc__sm_out_session(rpc, s, URPC_SM_PKT_CONNECT_RESP, 0);
		return;
	case URPC_SEV_CONNECT_OK:
		if (from != URPC_SESS_CONNECTING)
			return;
		enter_connected(s);
		raise_event(rpc, s, URPC_SM_CONNECTED, 0);
		s = urpc__rpc_session(rpc, (int)s->local_num) == s ? s : NULL;
		if (s && s->state == URPC_SESS_CONNECTED)
			urpc__cli_kick(rpc, s);
		return;
	case URPC_SEV_CONNECT_FAILED:
		if (from != URPC_SESS_CONNECTING)
			return;
		urpc__sess_set_state(s, URPC_SESS_RESET);
		rpc->st.resets++;
		urpc__cli_fail_all(rpc, s, status);
		raise_event(rpc, s, URPC_SM_CONNECT_FAILED, status);
		client_failed_free(rpc, s, num);
		return;
	case URPC_SEV_DISCONNECT_REQ:
		if (from == URPC_SESS_CONNECTING || from == URPC_SESS_CONNECTED) {
			urpc__sess_set_state(s, URPC_SESS_DISCONNECTING);
			urpc__map_set(rpc->sm_map, s->local_num);
			s->sm_seq++;
			s->cli.sm_deadline_ns = rpc->now + rpc->connect_timeout_ns;
			s->cli.sm_next_retry_ns = rpc->now + rpc->sm_retry_ns;
			s->cli.fail_status = -ECONNRESET;
			urpc__sess_pend(rpc, s);
			/* Not while it READs the server's responses: the timers send it. */
			if (urpc__os_session_reading(rpc, s))
				s->cli.sm_next_retry_ns = rpc->now;
			else
				urpc__sm_out_session(rpc, s, URPC_SM_PKT_DISCONNECT_REQ, 0);
		}
		/* RESET: failed, and freed once its event returns. */
		return;
	case URPC_SEV_DISCONNECT_DONE:
		if (from != URPC_SESS_DISCONNECTING)
			return;
		urpc__sess_set_state(s, URPC_SESS_DISCONNECTED);
		/* Large requests held while the server might read them fail now. */
		s->cli.fail_status = -ECONNRESET;
		defer_event(rpc, s, URPC_SM_DISCONNECTED, 0, true);
		return;
	case URPC_SEV_PEER_CLOSED:
		if (s->role != URPC_ROLE_SERVER || from != URPC_SESS_CONNECTED)
			return;
		urpc__sess_set_state(s, URPC_SESS_RESET);
		server_drop(rpc, s);
		return;
	case URPC_SEV_PEER_FAILED:
		if (s->role == URPC_ROLE_SERVER) {
			/* Signed (nexus_auth.h): a client still there learns it now. */
			if (from == URPC_SESS_CONNECTED)
				urpc__sm_out_session(rpc, s, URPC_SM_PKT_RESET, -ECONNRESET);
			urpc__sess_set_state(s, URPC_SESS_RESET);
			rpc->st.resets++;
			server_drop(rpc, s);
			return;
		}
		if (from == URPC_SESS_CONNECTING) {
			/* The connect's one event is CONNECTED or CONNECT_FAILED. */
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, status);
			return;
		}
		if (from != URPC_SESS_CONNECTED)
			return;
		urpc__sess_set_state(s, URPC_SESS_RESET);
		rpc->st.resets++;
		URPC_INFO(rpc->id, "session %u to rpc %u reset: %s", s->local_num, s->remote_rpc_id,
			  urpc_strerror(status));
		/* Requests fail with -ECONNRESET; the event says why. */
		urpc__cli_fail_all(rpc, s, -ECONNRESET);
		raise_event(rpc, s, URPC_SM_RESET, status);
		client_failed_free(rpc, s, num);
		return;
	case URPC_SEV_RPC_DESTROY:
		if (s->role == URPC_ROLE_SERVER) {
			if (from == URPC_SESS_CONNECTED)
				urpc__sm_out_session(rpc, s, URPC_SM_PKT_RESET, -ECONNRESET);
			urpc__sess_set_state(s, URPC_SESS_RESET);
			return;
		}
		if (from == URPC_SESS_CONNECTED || from == URPC_SESS_CONNECTING)
			urpc__sm_out_session(rpc, s, URPC_SM_PKT_DISCONNECT_REQ, 0);
		urpc__sess_set_state(s, URPC_SESS_RESET);
		urpc__cli_fail_all(rpc, s, status);
		return;
	}
}

void urpc__session_run_pending(struct urpc_rpc *rpc)
{
	/* What is on the list now; work the callbacks add waits for the next pass. */
	uint32_t n = rpc->st.sessions;
	struct urpc_session *s;

	while (n-- && (s = urpc__sess_pend_pop(rpc))) {
		uint32_t num = s->local_num;
		int ev;

		if (s->cli.fail_status) {
			int st = s->cli.fail_status;

			s->cli.fail_status = 0;
			urpc__cli_fail_all(rpc, s, st);
			if (urpc__rpc_session(rpc, (int)num) != s)
				continue;
		}
		ev = s->cli.pending_ev;
		if (!ev)
			continue;
		s->cli.pending_ev = 0;
		raise_event(rpc, s, (enum urpc_sm_event)ev, s->cli.pending_status);
		if (urpc__rpc_session(rpc, (int)num) == s && s->cli.free_after_ev)
			urpc__sess_free(rpc, s);
	}
	rpc->have_pending = rpc->pend_head != 0;
}

/* ---- public calls ---- */

URPC_API int urpc_session_connect(struct urpc_rpc *rpc, const char *host_port,
				  uint8_t remote_rpc_id, int *session_out)
{
	struct sockaddr_in addr;
	struct urpc_session *s;
	int ret;

	if (!rpc || !host_port || !session_out)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	if (urpc__parse_host_port(host_port, &addr)) {
		URPC_ERR(rpc->id, "'%s' is not a host:port address", host_port);
		return -EINVAL;
	}
	/* Room for the window it proposes; the server's answer may shrink it. */
	ret = urpc__sess_alloc(rpc, URPC_ROLE_CLIENT, rpc->o.session_window, &s);
	if (ret) {
		URPC_WARN_RATELIMIT(rpc->id, "cannot connect (max_sessions %u): %s",
				    rpc->max_sessions, urpc__sess_limit_str(ret));
		return ret;
	}
	do /* first: the peer's session digest counts it (nexus_peer.h) */
		s->token = urpc__csprng_next(&rpc->secrets);
	while (!s->token);
	s->rx_token = s->token;
	s->nxp = urpc__nexus_peer_get(rpc->nx, &addr, rpc->ping_ns, rpc->peer_timeout_ns, s->token);
	if (!s->nxp) {
		urpc__sess_free(rpc, s);
		return -ENOMEM;
	}
	s->cli.nx_refused_gen = urpc__nxp_refused_gen(s->nxp);
	rpc->now = urpc__rpc_clock(rpc);
	urpc__cli_rtt_init(rpc, s);
	s->remote_rpc_id = remote_rpc_id;
	s->peer_nexus = addr;
	urpc__session_transition(rpc, s, URPC_SEV_CONNECT_START, 0);
	*session_out = (int)s->local_num;
	return 0;
}

URPC_API int urpc_session_disconnect(struct urpc_rpc *rpc, int session)
{
	struct urpc_session *s;

	if (!rpc)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	s = urpc__rpc_session(rpc, session);
	if (!s || s->role != URPC_ROLE_CLIENT || s->state == URPC_SESS_DISCONNECTING ||
	    s->state == URPC_SESS_DISCONNECTED)
		return -EINVAL;
	/* Failed: its event (running now) frees it; nothing to close. */
	if (s->state == URPC_SESS_RESET)
		return 0;
	rpc->now = urpc__rpc_clock(rpc);
	urpc__session_transition(rpc, s, URPC_SEV_DISCONNECT_REQ, 0);
	return 0;
}

URPC_API bool urpc_session_is_connected(struct urpc_rpc *rpc, int session)
{
	struct urpc_session *s;

	if (!rpc || !urpc__rpc_is_owner(rpc))
		return false;
	s = urpc__rpc_session(rpc, session);
	return s && s->state == URPC_SESS_CONNECTED;
}

/* ---- session-management packets (those that come in: session_in.c) ---- */

/*
 * The Nexus saw a peer fail or an Rpc of it go or come: fail the sessions
 * it took, and have client sessions whose peer attached or detached some
 * Rpc ask their server (probe). A walk over every session, once per
 * notice: the timer scan looks only at sessions with a timer armed.
 */
static void check_peers(struct urpc_rpc *rpc)
{
	uint32_t i;

	for (i = 0; i < rpc->hi_session; i++) {
		struct urpc_session *s = urpc__sess_at(rpc, i);

		if (s && s->state == URPC_SESS_CONNECTING && connect_refused(s)) {
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, -ECONNREFUSED);
			continue;
		}
		if (!s || s->state != URPC_SESS_CONNECTED)
			continue;
		if (peer_failed(s))
			urpc__session_transition(rpc, s, URPC_SEV_PEER_FAILED, peer_failed(s));
		else if (s->role == URPC_ROLE_CLIENT)
			probe(rpc, s);
	}
}

void urpc__session_notices(struct urpc_rpc *rpc)
{
	uint32_t n = urpc__nexus_notices(rpc->nx);

	if (n == rpc->nx_notices_seen)
		return;
	rpc->nx_notices_seen = n;
	check_peers(rpc);
}

void urpc__session_tp_ctl(struct urpc_rpc *rpc)
{
	struct urpc_tp_peer *peer;
	struct urpc_sm_pkt p;
	uint8_t buf[URPC_TP_EP_MAX];
	uint32_t i;
	int n;

	while ((n = rpc->tp->ops->ctl_pop(rpc->tp, &peer, buf)) > 0) {
		/* A session over that peer carries it (cold: the RC handshake). */
		for (i = 0; i < rpc->hi_session; i++) {
			struct urpc_session *s = urpc__sess_at(rpc, i);

			if (!s || s->peer != peer || s->state != URPC_SESS_CONNECTED)
				continue;
			urpc__sm_out_fill(rpc, s, &p,
					  s->role == URPC_ROLE_CLIENT ? URPC_SM_PKT_TP_CTL_C2S
								      : URPC_SM_PKT_TP_CTL_S2C,
					  0);
			p.ep_len = (uint16_t)n;
			memcpy(p.ep, buf, (size_t)n);
			urpc__sm_out_send(rpc, &s->peer_nexus, &p);
			break;
		}
	}
}

void urpc__session_timers(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint64_t now = rpc->now;
	char addr[INET_ADDRSTRLEN];

	/* Liveness is the Nexus's (nexus_peer.h): only its verdict is read here. */
	if (s->state == URPC_SESS_CONNECTED && unlikely(peer_failed(s))) {
		urpc__session_transition(rpc, s, URPC_SEV_PEER_FAILED, peer_failed(s));
		return;
	}
	if (s->role == URPC_ROLE_SERVER)
		return;
	switch (s->state) {
	case URPC_SESS_CONNECTING:
		if (connect_refused(s)) {
			/* ICMP port unreachable (the Nexus's error queue): nobody there. */
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED, -ECONNREFUSED);
		} else if (now >= s->cli.sm_deadline_ns) {
			/* A live Nexus without the Rpc says so; silence is a time-out. */
			if (s->cli.no_rpc_status)
				URPC_WARN_RATELIMIT(
					rpc->id,
					"session %u: the Nexus at %s:%u answered, but its rpc "
					"%u did not appear within connect_timeout_ms (%llu ms)",
					s->local_num,
					inet_ntop(AF_INET, &s->peer_nexus.sin_addr, addr,
						  sizeof(addr)),
					ntohs(s->peer_nexus.sin_port), s->remote_rpc_id,
					(unsigned long long)(rpc->connect_timeout_ns / 1000000));
			urpc__session_transition(rpc, s, URPC_SEV_CONNECT_FAILED,
						 s->cli.no_rpc_status ? s->cli.no_rpc_status
								      : -ETIMEDOUT);
		} else if (now >= s->cli.sm_next_retry_ns) {
			s->cli.sm_next_retry_ns = now + rpc->sm_retry_ns;
			s->cli.sm_tx_ns = 0;
			urpc__sm_out_session(rpc, s, URPC_SM_PKT_CONNECT_REQ, 0);
		}
		return;
	case URPC_SESS_CONNECTED:
		probe(rpc, s);
		return;
	case URPC_SESS_DISCONNECTING:
		if (unlikely(now >= s->cli.sm_next_retry_ns && urpc__os_session_reading(rpc, s))) {
			/*
			 * The server frees its large responses on the request:
			 * wait for our READs of them (bounded by the transport's
			 * deadlines), then start counting.
			 */
			s->cli.sm_deadline_ns = now + rpc->connect_timeout_ns;
		} else if (now >= s->cli.sm_deadline_ns) {
			urpc__session_transition(rpc, s, URPC_SEV_DISCONNECT_DONE, 0);
		} else if (now >= s->cli.sm_next_retry_ns) {
			s->cli.sm_next_retry_ns = now + rpc->sm_retry_ns;
			urpc__sm_out_session(rpc, s, URPC_SM_PKT_DISCONNECT_REQ, 0);
		}
		return;
	case URPC_SESS_NEW:
	case URPC_SESS_DISCONNECTED:
	case URPC_SESS_RESET:
		return;
	}
}

uint64_t urpc__session_next_timer(const struct urpc_rpc *rpc, const struct urpc_session *s)
{
	/* A peer's failure wakes a sleeping Rpc through its SM queue (NX_NOTICE). */
	if (s->role == URPC_ROLE_SERVER)
		return UINT64_MAX;
	switch (s->state) {
	case URPC_SESS_CONNECTING:
	case URPC_SESS_DISCONNECTING:
		return URPC_MIN(s->cli.sm_deadline_ns, s->cli.sm_next_retry_ns);
	case URPC_SESS_CONNECTED:
		return s->cli.probe_next_ns ? s->cli.probe_next_ns : UINT64_MAX;
	case URPC_SESS_NEW:
	case URPC_SESS_DISCONNECTED:
	case URPC_SESS_RESET:
		break;
	}
	return UINT64_MAX;
}
