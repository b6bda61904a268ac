/* SPDX-License-Identifier: MIT */
/*
 * Retransmission and deadlines of client requests (retx.h): the timer
 * scan's walk over a busy client session's slots (go-back-N over each
 * slot's one packet, the RTO doubled up to rto_max, Karn's rule for the
 * session's estimate) and its wait queue (requests past their deadline
 * leave it in order). Owns nothing: the slots and the queue are client.c's,
 * and a request completes through it.
 * May call: client.h (resend, complete), cc_sess.h (a time-out is a
 * congestion signal), the Rpc's clock (rpc->now).
 */
#define URPC_LOG_MODULE "client"
#include "retx.h"

#include <errno.h>

#include "cc_sess.h"
#include "client.h"

#define WAITQ_MASK (URPC_SESSION_WAITQ - 1)

/*
 * Requests still waiting for a slot expire too, wherever they sit in the
 * queue. The queue is compacted (order kept) before any continuation runs,
 * so continuations that enqueue again find it consistent. Timer scan only.
 */
static void expire_waiting(struct urpc_rpc *rpc, struct urpc_session *s)
{
	struct urpc_waiting_req done[URPC_SESSION_WAITQ];
	uint32_t i, keep = s->cli.wq_head, n = 0;

	for (i = s->cli.wq_head; i != s->cli.wq_tail; i++) {
		const struct urpc_waiting_req *w = &s->cli.waitq[i & WAITQ_MASK];

		if (w->deadline_ns && rpc->now >= w->deadline_ns)
			done[n++] = *w;
		else if (keep++ != i)
			s->cli.waitq[(keep - 1) & WAITQ_MASK] = *w;
	}
	s->cli.wq_tail = keep;
	/* Every one of them runs: they are out of the queue already. */
	for (i = 0; i < n; i++)
		urpc__run_cont(rpc, done[i].cont, done[i].tag, -ETIMEDOUT, done[i].resp);
}

void urpc__cli_timers(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t num = s->local_num;
	unsigned i;

	for (i = 0; i <= s->slot_mask; i++) {
		struct urpc_cslot *sl = &s->cli.slots[i];

		if (sl->state == URPC_CLI_FREE)
			continue;
		if (unlikely(sl->state == URPC_CLI_READING)) {
			/* No retransmission; a deadline waits for the READ to finish. */
			if (sl->deadline_ns && rpc->now >= sl->deadline_ns && !sl->late_status)
				sl->late_status = -ETIMEDOUT;
			continue;
		}
		if (sl->deadline_ns && rpc->now >= sl->deadline_ns) {
			if (unlikely(sl->large_req && sl->state == URPC_CLI_SENT)) {
				/*
				 * The server may be reading the request buffer
				 * right now: it goes back to the application
				 * once the server says it has read it (ack or
				 * response) or the session fails. Keep resending
				 * to get that answer.
				 */
				if (!sl->late_status)
					sl->late_status = -ETIMEDOUT;
				goto resend;
			}
			urpc__cli_complete(rpc, s, sl, -ETIMEDOUT);
			if (rpc->sessions[num] != s || s->state != URPC_SESS_CONNECTED)
				return;
			continue;
		}
	resend:
		if (unlikely(!sl->tx_ns)) {
			sl->tx_ns = rpc->now;
			continue;
		}
		if (rpc->now - sl->tx_ns >= sl->rto_ns) {
			sl->retries++;
			/* A large request's allowance may exceed the cap: keep it. */
			sl->rto_ns =
				URPC_MAX(sl->rto_ns, URPC_MIN(sl->rto_ns * 2, rpc->rto_max_ns));
			/*
			 * Karn: no sample comes from this request now, so the
			 * back-off carries over to the session's next requests
			 * until an answer to one sent once is sampled.
			 */
			if (!sl->large_req && sl->rto_ns > s->cli.rtt.rto_ns) {
				s->cli.rtt.rto_ns = sl->rto_ns;
				s->cli.rtt.next_ns = 0;
			}
			rpc->st.retransmits++;
			urpc__cc_sess_timeout(rpc, s);
			urpc__cli_resend(rpc, s, sl);
		}
	}
	if (s->cli.wq_head != s->cli.wq_tail)
		expire_waiting(rpc, s);
}
