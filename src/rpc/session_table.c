/* SPDX-License-Identifier: MIT */
/*
 * The session table (session_table.h). Owns rpc->sessions, rpc->hi_session
 * and the memory of every session.
 * May call: large.h (orphan a session's operations), tx.h, the pool, the
 * transport's release_peer and tx_flush, the Nexus (a session's heartbeat
 * reference).
 */
#define URPC_LOG_MODULE "session"
#include "session_table.h"

#include <stddef.h>
#include <stdlib.h>

#include "large.h"
#include "tx.h"

size_t urpc__sess_size(enum urpc_session_role role)
{
	return offsetof(struct urpc_session, cli) + (role == URPC_ROLE_CLIENT
							     ? sizeof(struct urpc_cli_half)
							     : sizeof(struct urpc_srv_half));
}

struct urpc_session *urpc__sess_alloc(struct urpc_rpc *rpc, enum urpc_session_role role)
{
	struct urpc_session *s;
	uint32_t i, num;

	for (num = 0; num < rpc->max_sessions; num++)
		if (!rpc->sessions[num])
			break;
	if (num == rpc->max_sessions)
		return NULL;
	s = calloc(1, urpc__sess_size(role));
	if (!s)
		return NULL;
	s->role = role;
	s->local_num = num;
	s->rx_word = URPC_PKT_WORD(role == URPC_ROLE_CLIENT ? URPC_PKT_RESP : URPC_PKT_REQ);
	if (role == URPC_ROLE_CLIENT) {
		s->cli.credits = URPC_SESSION_SLOTS;
		s->cli.free_mask = (1u << URPC_SESSION_SLOTS) - 1;
		for (i = 0; i < URPC_SESSION_SLOTS; i++) {
			s->cli.slots[i].cur_req_num = i;
			s->cli.slots[i].idx = i;
		}
	} else {
		for (i = 0; i < URPC_SESSION_SLOTS; i++) {
			s->srv.slots[i].cur_req_num = i;
			s->srv.slots[i].idx = i;
		}
	}
	rpc->sessions[num] = s;
	if (num >= rpc->hi_session)
		rpc->hi_session = num + 1;
	rpc->st.sessions++;
	return s;
}

void urpc__sess_free(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t i;

	/* Before the peer goes: the transport then completes what used it. */
	urpc__os_session_gone(rpc, s);
	if (s->peer) {
		/*
		 * Datagrams to this peer (stored responses among them) may still
		 * sit in the TX batch: send them, and forget what the transport
		 * did not take, before the peer and the buffers go.
		 */
		urpc__tx_flush(rpc);
		urpc__tx_forget(rpc, NULL, s->peer);
		rpc->tp->ops->tx_flush(rpc->tp);
		rpc->tp->ops->release_peer(rpc->tp, s->peer);
	}
	for (i = 0; s->role == URPC_ROLE_SERVER && i < URPC_SESSION_SLOTS; i++) {
		if (s->srv.slots[i].resp_mb.buf)
			(void)urpc__pool_free(rpc->pool, &s->srv.slots[i].resp_mb);
	}
	if (s->nxp)
		urpc__nexus_peer_put(rpc->nx, s->nxp);
	rpc->sessions[s->local_num] = NULL;
	while (rpc->hi_session && !rpc->sessions[rpc->hi_session - 1])
		rpc->hi_session--;
	rpc->st.sessions--;
	free(s);
}
