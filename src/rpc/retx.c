/* SPDX-License-Identifier: MIT */
/*
 * Retransmission and deadlines of client requests (retx.h): the timer
 * scan's walk over a busy client session's slots (go-back-N over each
 * slot's one packet, the RTO doubled up to rto_max, Karn's rule for the
 * session's estimate) and its wait queue (requests past their deadline
 * leave it in order); the READ of a large response that timed out
 * without progress, read again while the session lives, and the end of
 * such a READ; the send time of requests sent outside the loop (the pass
 * that flushes them, else the scan's, which gives no sample).
 * Owns nothing: the slots and the queue are client.c's,
 * and a request completes through it.
 * May call: client.h (resend, complete), cc_sess.h (a time-out is a
 * congestion signal), large.h (the operation table), msgbuf.h (GPU
 * staging), the transport's post_read, the Rpc's clock (rpc->now).
 */
#define URPC_LOG_MODULE "client"
#include "retx.h"

#include <errno.h>

#include "cc_sess.h"
#include "client.h"
#include "large.h"
#include "msgbuf.h"

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
			sl->tx_ns = rpc->now; /* the RTO's start; no round-trip sample */
			sl->tx_unknown = true;
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

/*
 * A request sent outside the loop waits in the TX batch without a send
 * time (the clock is not read there: tx_ns 0); the pass that flushes the
 * batch calls this first, and such a request's send time is the pass's.
 * Found by its header: the session named in src_session, the slot of its
 * request number, the slot's own packet (a large request's descriptor
 * names no session: it is stamped by the timer scan, without a sample).
 */
URPC_COLD void urpc__cli_stamp_batch(struct urpc_rpc *rpc)
{
	unsigned i;

	for (i = 0; i < rpc->ntx; i++) {
		const struct urpc_pkthdr *h = rpc->tx[i].hdr;
		uint32_t num = le32toh(h->src_session);
		struct urpc_session *s;
		struct urpc_cslot *sl;

		if (h->pkt_type != URPC_PKT_REQ || num >= rpc->hi_session)
			continue;
		s = rpc->sessions[num];
		if (!s || s->role != URPC_ROLE_CLIENT)
			continue;
		sl = &s->cli.slots[le64toh(h->req_num) & s->slot_mask];
		if (!sl->tx_ns && sl->state != URPC_CLI_FREE && urpc__cli_req_pkt(sl) == h)
			sl->tx_ns = rpc->now;
	}
}

/*
 * The READ of @done (taken from os[]) into client slot @sl timed out
 * without progress: the server stored the response and keeps its grant
 * for the one-sided time-out plus its bytes at the minimum rate (quota.c),
 * and its Nexus answers for its liveness, so while the session is
 * CONNECTED read it again in a new entry, as the server does with a large
 * request's READ (server.c): a server starved for a while (a loaded host)
 * delays the request, it does not fail it. Not when the transport failed
 * it well before its time-out could pass (it refused it at once: posting
 * again would spin). True when posted.
 */
static URPC_COLD bool read_again(struct urpc_rpc *rpc, struct urpc_session *s,
				 struct urpc_cslot *sl, const struct urpc_os_op *done)
{
	const void *mr = urpc__mb_mr(sl->resp);
	uint16_t i;

	if (s->state != URPC_SESS_CONNECTED || sl->state != URPC_CLI_READING ||
	    sl->cur_req_num != done->req_num || !mr || !done->rkey ||
	    urpc__os_failed_at_once(rpc, done))
		return false;
	i = urpc__os_get(rpc);
	if (i == URPC_OS_NIL)
		return false;
	if (rpc->tp->ops->post_read(rpc->tp, s->peer, urpc__mb_dma(sl->resp), mr, done->raddr,
				    done->rkey, done->len, i)) {
		urpc__os_put(rpc, i);
		return false;
	}
	rpc->os[i] = *done;
	rpc->os[i].busy = true;
	rpc->os[i].orphan = false;
	rpc->os[i].post_ns = rpc->now;
	sl->os_idx = i;
	rpc->st.os_reposted++;
	return true;
}

/* The READ of a large response finished: complete the request. */
void urpc__cli_read_done(struct urpc_rpc *rpc, const struct urpc_os_op *op, int status)
{
	struct urpc_session *s = rpc->sessions[op->sess_num];
	struct urpc_cslot *sl = &s->cli.slots[op->slot];

	if (unlikely(status == -ETIMEDOUT) && read_again(rpc, s, sl, op))
		return; /* the peer lives: a slow owner delays only this request */
	if (!status)
		status = sl->late_status;
	if (!status)
		status = urpc__mb_stage_in(sl->resp, op->len); /* staging into GPU memory */
	if (!status)
		sl->resp->data_size = op->len;
	rpc->st.resps_rx++;
	urpc__cli_complete(rpc, s, sl, status);
}
