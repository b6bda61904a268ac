/* SPDX-License-Identifier: MIT */
/*
 * The event loop's timers (evtimer.h), split from evloop.c, which calls
 * them: the scan, once a millisecond, over what has a timer (the busy
 * client sessions, busy_map; the sessions with an SM timer armed, sm_map;
 * which it clears as they go idle), and the idle sleep's wake time, read
 * from the same bitmaps and a busy client session's slots and wait queue.
 * Owns neither the clock nor the pass (evloop.c).
 * Also anchors the Rpc's TSC clock (util/tsc.h) at each scan.
 * May call: util/tsc.h, retx.h (a client session's request timers), client.h,
 * session.h (notices, SM timers), rop.h, quota.h, server.h, large.h,
 * cc_sess.h (the pacer's next release bounds the sleep).
 */
#define URPC_LOG_MODULE "rpc"
#include "evtimer.h"

#include "cc_sess.h"
#include "client.h"
#include "large.h"
#include "quota.h"
#include "retx.h"
#include "rop.h"
#include "server.h"
#include "session.h"

#define WAITQ_MASK (URPC_SESSION_WAITQ - 1)

/* Not inlined: apps/bench/verbs_cost_vm.sh takes its cost out by name. */
__attribute__((noinline)) void urpc__evloop_scan_timers(struct urpc_rpc *rpc)
{
	uint32_t w, nw = (rpc->hi_session + 63) / 64;

	/*
	 * The TSC clock's rate and its anchor on CLOCK_MONOTONIC (util/tsc.h),
	 * with the scan: once a millisecond, out of the pass's count.
	 */
	urpc__tsc_anchor(&rpc->tsc);

	/*
	 * Requests in flight (retransmission, deadlines): every scan, but only
	 * on the client sessions that have some (busy_map), so an Rpc with
	 * thousands of idle sessions does not walk them all each millisecond.
	 */
	for (w = 0; w < nw; w++) {
		uint64_t bits = rpc->busy_map[w];

		while (bits) {
			uint32_t num = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct urpc_session *s = urpc__sess_at(rpc, num);

			bits &= bits - 1;
			if (s && s->role == URPC_ROLE_CLIENT &&
			    (s->state == URPC_SESS_CONNECTED || s->state == URPC_SESS_CONNECTING))
				urpc__cli_timers(rpc, s);
			s = urpc__sess_at(rpc, num); /* callbacks may have freed it */
			if (!s || !urpc__cli_busy(s))
				rpc->busy_map[w] &= ~(1ull << (num & 63));
		}
	}
	/*
	 * Session management: a peer's failure, or an Rpc of it gone, as the
	 * Nexus has noticed (a walk over the sessions only when it has); then
	 * connect and disconnect retries and probes, only on the sessions with
	 * such a timer armed (sm_map), so idle sessions, however many, cost
	 * nothing here.
	 */
	urpc__session_notices(rpc);
	/* Users' one-sided batches: deadlines, the queue behind the window. */
	if (unlikely(rpc->rop != NULL))
		urpc__rop_timers(rpc);
	/*
	 * Large responses not read within their time, when the pool needs
	 * the room or no per-source share bounds them (quota.h).
	 */
	if (unlikely(rpc->grants_live != NULL) && urpc__quota_grants_due(rpc)) {
		struct urpc_sslot *sl;

		while ((sl = urpc__quota_grant_expired(rpc, 0)) != NULL)
			urpc__srv_large_retire(rpc, sl);
	}
	/* READs of large requests slower than the minimum rate while others wait (quota.h). */
	if (unlikely(rpc->os_wait_ns != 0))
		urpc__quota_os_scan(rpc);
	/* Large responses whose client has not let go of them yet. */
	if (unlikely(rpc->retiring != NULL))
		urpc__srv_large_retiring(rpc, false);
	if (unlikely(rpc->cli_retiring != NULL))
		urpc__cli_retiring(rpc, false);
	nw = (rpc->hi_session + 63) / 64;
	for (w = 0; w < nw; w++) {
		uint64_t bits = rpc->sm_map[w];

		while (bits) {
			uint32_t num = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct urpc_session *s = urpc__sess_at(rpc, num);

			bits &= bits - 1;
			if (s)
				urpc__session_timers(rpc, s);
			s = urpc__sess_at(rpc, num); /* callbacks may have freed it */
			if (!s || urpc__session_next_timer(rpc, s) == UINT64_MAX)
				rpc->sm_map[w] &= ~(1ull << (num & 63));
		}
	}
}

/*
 * The earliest time a timer of busy client session @s (retransmission or
 * deadline of a request in a slot or waiting) needs the timer scan; the
 * Rpc may sleep until then. Reads the client's slots and queue (client.c
 * owns them). Idle path only.
 */
static uint64_t cli_next_timer(const struct urpc_rpc *rpc, const struct urpc_session *s)
{
	uint64_t t = UINT64_MAX;
	uint32_t i;

	for (i = 0; i <= s->slot_mask; i++) {
		const struct urpc_cslot *sl = &s->cli.slots[i];

		if (sl->state == URPC_CLI_FREE)
			continue;
		if (sl->deadline_ns)
			t = URPC_MIN(t, sl->deadline_ns);
		if (sl->state == URPC_CLI_READING)
			continue; /* no retransmission while reading */
		if (!sl->tx_ns)
			return rpc->now; /* sent outside the loop: the next scan stamps it */
		t = URPC_MIN(t, sl->tx_ns + sl->rto_ns);
	}
	for (i = s->cli.wq_head; i != s->cli.wq_tail; i++) {
		const struct urpc_waiting_req *w = &s->cli.waitq[i & WAITQ_MASK];

		if (w->deadline_ns)
			t = URPC_MIN(t, w->deadline_ns);
	}
	return t;
}

/*
 * May the Rpc sleep, and until when? False while something needs polling
 * rather than a timer: a server slot whose handler has not answered yet (a
 * deferred response comes from this thread), an SM event to raise,
 * datagrams the transport has not taken, one-sided operations in flight.
 * Otherwise true, with *wake_ns (Rpc clock) the earliest session timer
 * (urpc__session_next_timer(), kept beside the timers it describes) or
 * request timer (cli_next_timer(): a request waiting for its answer
 * is waiting, not working; the answer wakes the sleep like any datagram);
 * never before the next timer scan, which is when a due timer is acted on,
 * but ahead of a paced session's release (urpc__cc_idle_until(): false near it).
 * With no session it is UINT64_MAX: only traffic or the caller's end wakes
 * the Rpc.
 * Cold path: runs only once the loop has been idle for idle_ns.
 */
bool urpc__evloop_idle_wake_time(const struct urpc_rpc *rpc, uint64_t *wake_ns)
{
	uint32_t w, nw = (rpc->hi_session + 63) / 64;
	/* Retiring large responses: looked at again by the next scan. */
	uint64_t t = rpc->retiring || rpc->cli_retiring ? rpc->next_scan_ns : UINT64_MAX;

	if (rpc->have_pending || rpc->ntx || rpc->smo_n || rpc->os_busy || rpc->srv_deferred)
		return false;
	/* Only sessions with a timer: busy clients and armed SM timers (the bitmaps). */
	for (w = 0; w < nw; w++) {
		uint64_t bits = rpc->busy_map[w] | rpc->sm_map[w];

		while (bits) {
			uint32_t num = w * 64 + (uint32_t)__builtin_ctzll(bits);
			const struct urpc_session *s = urpc__sess_at(rpc, num);

			bits &= bits - 1;
			if (!s)
				continue;
			if (s->role == URPC_ROLE_CLIENT && urpc__cli_busy(s))
				t = URPC_MIN(t, cli_next_timer(rpc, s));
			t = URPC_MIN(t, urpc__session_next_timer(rpc, s));
		}
	}
	*wake_ns = URPC_MAX(t, rpc->next_scan_ns);
	return urpc__cc_idle_until(rpc, wake_ns); /* paced sessions: up before the next is due */
}
