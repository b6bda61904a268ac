/* SPDX-License-Identifier: MIT */
/*
 * Session-management packets out: filled from a session (or from the
 * request they answer), collected in the Rpc's outbox and sent through the
 * Nexus's SM socket in one batch: at the end of the event-loop pass, when
 * the outbox is full, or when the Rpc is destroyed.
 */
#ifndef URPC_RPC_SESSION_SM_H
#define URPC_RPC_SESSION_SM_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Send @p to the Nexus at @to: into the outbox (sent by the next flush). A
 * failure is logged (rate-limited) when it is sent.
 */
void urpc__sm_out_send(struct urpc_rpc *rpc, const struct sockaddr_in *to, struct urpc_sm_pkt *p);

/*
 * Send what the outbox holds (one sendmmsg) and empty it. The event loop
 * calls it at the end of every pass that queued something; an Rpc's
 * destroy before it goes. Cold unless there is session management.
 */
void urpc__sm_out_flush(struct urpc_rpc *rpc);

/* An SM packet of @type about session @s, from its side of the session. */
void urpc__sm_out_fill(struct urpc_rpc *rpc, const struct urpc_session *s, struct urpc_sm_pkt *p,
		       enum urpc_sm_pkt_type type, int status);

/* Fill and send an SM packet of @type about @s to its peer's Nexus. */
void urpc__sm_out_session(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_sm_pkt_type type,
			  int status);

/* Answer an SM request @req that matched no session (or was refused). */
void urpc__sm_out_reply(struct urpc_rpc *rpc, const struct urpc_sm_pkt *req,
			enum urpc_sm_pkt_type type, int status);

/* Refuse CONNECT_REQ @req, opening no session: the client's connect fails with @err. */
void urpc__sm_out_refuse(struct urpc_rpc *rpc, const struct urpc_sm_pkt *req, int err);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_SM_H */
