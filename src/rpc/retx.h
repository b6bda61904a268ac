/* SPDX-License-Identifier: MIT */
/*
 * Retransmission and deadlines of client requests (retx.c): the timer
 * scan's look at one busy client session.
 */
#ifndef URPC_RPC_RETX_H
#define URPC_RPC_RETX_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Retransmissions and deadlines of client session @s. Timer scan only. */
void urpc__cli_timers(struct urpc_rpc *rpc, struct urpc_session *s);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RETX_H */
