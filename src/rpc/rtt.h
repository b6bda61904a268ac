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

/*
 * RFC 6298's smoothed round trip *srtt and variance *rttvar (ns) after
 * sample @r (gains 1/8 and 1/4; the first sample sets both). Shared by the
 * requests' estimate (rtt.c) and the SM packets' (session.c).
 */
static inline void urpc__rtt_smooth(uint64_t *srtt, uint64_t *rttvar, uint64_t r)
{
	uint64_t d;

	if (!*srtt) {
		*srtt = r;
		*rttvar = r / 2;
		return;
	}
	d = r > *srtt ? r - *srtt : *srtt - r;
	*rttvar = *rttvar - *rttvar / 4 + d / 4;
	*srtt = *srtt - *srtt / 8 + r / 8;
}

/* Start client session @s's round-trip estimate at the Rpc's first RTO. */
void urpc__cli_rtt_init(const struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * One round-trip sample @r (ns) of client session @s, from an answer to a
 * request sent once; at most one per RTT_GAP_NS (rtt.c; the caller tests
 * s->cli.rtt.next_ns). The answer carried the server's fair share
 * @share_mbps (pkthdr.h; 0: none), which goes to the controller. Cold.
 */
void urpc__rtt_sample(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t r,
		      uint32_t share_mbps);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RTT_H */
