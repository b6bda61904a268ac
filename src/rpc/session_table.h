/* SPDX-License-Identifier: MIT */
/*
 * The session table: numbers, allocation and freeing of sessions. A session
 * is freed here and nowhere else; what it held (one-sided operations, its
 * peer, its buffers) goes back first.
 */
#ifndef URPC_RPC_SESSION_TABLE_H
#define URPC_RPC_SESSION_TABLE_H

#include "engine.h"
#include "states.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a session of @role: the common part and the half of its role. */
size_t urpc__sess_size(enum urpc_session_role role);

/* A new session with the lowest free number, or NULL. Not the datapath. */
struct urpc_session *urpc__sess_alloc(struct urpc_rpc *rpc, enum urpc_session_role role);

/* Free @s and its number; the peer is released after the batch forgets it. */
void urpc__sess_free(struct urpc_rpc *rpc, struct urpc_session *s);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_TABLE_H */
