/* SPDX-License-Identifier: MIT */
/*
 * The session table: numbers, allocation and freeing of sessions, the index
 * of server sessions by their CONNECT_REQ, and the list of client sessions
 * with work for the next pass. Each is O(1) per session (the numbers:
 * O(log64 max_sessions), util/idset.h). A session is freed here and nowhere
 * else; what it held (one-sided operations, its peer, its buffers) goes
 * back first.
 */
#ifndef URPC_RPC_SESSION_TABLE_H
#define URPC_RPC_SESSION_TABLE_H

#include "engine.h"
#include "states.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a session of @role with @window slots: the common part and the half of its role. */
size_t urpc__sess_size(enum urpc_session_role role, unsigned window);

/* Set up the Rpc's tables for max_sessions (create); 0 or -ENOMEM. */
int urpc__sess_table_init(struct urpc_rpc *rpc);

/* Free the tables (destroy, after every session). */
void urpc__sess_table_fini(struct urpc_rpc *rpc);

/*
 * A new session with the lowest free number and @window slots (a power of
 * two up to URPC_SESSION_WINDOW_MAX) in *@out. 0; -ENOSPC, all
 * max_sessions numbers in use; -ENOMEM. Not the datapath.
 */
int urpc__sess_alloc(struct urpc_rpc *rpc, enum urpc_session_role role, unsigned window,
		     struct urpc_session **out);

/*
 * What a failed urpc__sess_alloc() means for a log line, with how to raise
 * the limit it hit (-ENOSPC, -ENOMEM).
 */
const char *urpc__sess_limit_str(int err);

/* Free @s and its number; the peer is released after the batch forgets it. */
void urpc__sess_free(struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * Server session @s has its CONNECT_REQ's fields (remote_rpc_id,
 * remote_num, token, peer_nexus): index it. Never fails (a table that
 * cannot grow keeps longer chains).
 */
void urpc__sess_index(struct urpc_rpc *rpc, struct urpc_session *s);

/* The server session a CONNECT_REQ @p opened before, or NULL. */
struct urpc_session *urpc__sess_find_server(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p);

/* Put client session @s on the list of the next pass's work (once). */
void urpc__sess_pend(struct urpc_rpc *rpc, struct urpc_session *s);

/* Take the first client session off that list; NULL when it is empty. */
struct urpc_session *urpc__sess_pend_pop(struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_TABLE_H */
