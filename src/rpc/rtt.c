/* SPDX-License-Identifier: MIT */
/*
 * A client session's round-trip estimate (struct urpc_rtt in engine.h): its
 * start at the Rpc's first RTO and the samples client.c takes from
 * answers. Calls nothing; reads the Rpc's clock (rpc->now) and limits.
 */
#include "rtt.h"

#include "cc_sess.h"

/*
 * Round-trip sampling (struct urpc_rtt): at most one sample per session in
 * RTT_GAP_NS, which costs a compare per response; with congestion control
 * off, also at most one per smoothed round trip (RFC 6298 asks for one per
 * round trip: more add little to the RTO; on Soft-RoCE under callgrind,
 * where a round trip lasts milliseconds, each sample cost about 50
 * instructions of every RPC at window 1). The largest sample is
 * remembered for one to two RTT_WIN_NS windows.
 */
#define RTT_GAP_NS 100000ull	/* 100 us */
#define RTT_WIN_NS 500000000ull /* 500 ms */

void urpc__cli_rtt_init(const struct urpc_rpc *rpc, struct urpc_session *s)
{
	s->cli.rtt = (struct urpc_rtt){.rto_ns = rpc->rto_ns};
}

/*
 * One round-trip sample @r of session @s: RFC 6298's smoothed RTT and
 * variance (gains 1/8 and 1/4), and the windowed maximum. The first RTO of
 * a request is the larger of srtt + 4 * rttvar and twice the windowed
 * maximum, at least the Rpc's rto (its floor: a fast path never retransmits
 * sooner than configured) and at most rto_max. The maximum is what keeps a
 * peer that is only slow now and then (descheduled on a busy host) from
 * being flooded: the variance alone forgets a rare slow answer within a
 * few fast ones.
 */
URPC_COLD void urpc__rtt_sample(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t r,
				uint32_t share_mbps)
{
	struct urpc_rtt *t = &s->cli.rtt;
	uint64_t m, rto;

	urpc__rtt_smooth(&t->srtt_ns, &t->rttvar_ns, r);
	if (rpc->now >= t->win_end_ns) {
		t->win_max_ns[1] = t->win_max_ns[0];
		t->win_max_ns[0] = 0;
		t->win_end_ns = rpc->now + RTT_WIN_NS;
	}
	t->win_max_ns[0] = URPC_MAX(t->win_max_ns[0], r);
	m = URPC_MAX(t->win_max_ns[0], t->win_max_ns[1]);
	rto = URPC_MAX(t->srtt_ns + 4 * t->rttvar_ns, 2 * m);
	t->rto_ns = URPC_MIN(URPC_MAX(rto, rpc->rto_ns), rpc->rto_max_ns);
	t->next_ns = rpc->now + (rpc->cc_wheel ? RTT_GAP_NS : URPC_MAX(RTT_GAP_NS, t->srtt_ns));
	urpc__cc_sess_sample(rpc, s, r, share_mbps); /* may sample every answer: after next_ns */
}
