/* SPDX-License-Identifier: MIT */
/*
 * Session-management packets in (session_in.c): what the Nexus's SM
 * queue brings an Rpc, routed to the session it names and, through
 * urpc__session_transition(), to the state machine.
 */
#ifndef URPC_RPC_SESSION_IN_H
#define URPC_RPC_SESSION_IN_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Act on SM packet @p from the Rpc's SM queue. Owner thread; not the datapath. */
void urpc__session_handle_sm(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_IN_H */
