/* SPDX-License-Identifier: MIT */
/*
 * A client session's round-trip estimate: what a new request's first
 * retransmission timeout is (rtt.c). Owner thread only.
 */
#ifndef URPC_RPC_RTT_H
#define URPC_RPC_RTT_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start client session @s's round-trip estimate at the Rpc's first RTO. */
void urpc__cli_rtt_init(const struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * One round-trip sample @r (ns) of client session @s, from an answer to a
 * request sent once; at most one per RTT_GAP_NS (rtt.c; the caller tests
 * s->cli.rtt.next_ns). Cold.
 */
void urpc__rtt_sample(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t r);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RTT_H */
