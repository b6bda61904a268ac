/* SPDX-License-Identifier: MIT */
/*
 * Retransmission and deadlines of client requests (retx.c): the timer
 * scan's look at one busy client session; the send time of requests sent
 * outside the loop.
 */
#ifndef URPC_RPC_RETX_H
#define URPC_RPC_RETX_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Retransmissions and deadlines of client session @s. Timer scan only. */
void urpc__cli_timers(struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * The READ of a large response (operation @op, out of the table) finished:
 * read it again after a time-out without progress, else complete it.
 */
void urpc__cli_read_done(struct urpc_rpc *rpc, const struct urpc_os_op *op, int status);

/*
 * Give the requests in the TX batch that were sent outside the loop (no
 * send time yet) the pass's time, rpc->now: call just before the pass
 * flushes the batch. Cold: only such requests leave it there for a pass.
 */
void urpc__cli_stamp_batch(struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RETX_H */
