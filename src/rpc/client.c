/* SPDX-License-Identifier: MIT */
/*
 * The client's side of the datapath (client.h). Owns client slots, the wait
 * queue, the free mask (the session's credits) and the busy bitmap; a
 * request's continuation runs from complete() (retx.c's time-outs too),
 * urpc__cli_fail_all() or an orphaned operation, exactly once. A request
 * with a deadline carries the time it has left (pkthdr.h, budget_us).
 * May call: large.h (descriptors, grants, operations, orphans), msgbuf.h
 * (GPU staging), rtt.h (round-trip samples), cc_sess.h (the pacer of a
 * rate-limited session), tx.h, the transport's post_read and tx_flush.
 * Nothing here allocates, locks, or makes a syscall beyond the transport's.
 */
#define URPC_LOG_MODULE "client"
#include "client.h"

#include <errno.h>
#include <string.h>

#include "cc_sess.h"
#include "large.h"
#include "msgbuf.h"
#include "rtt.h"
#include "states.h"
#include "tx.h"

#define WAITQ_MASK (URPC_SESSION_WAITQ - 1)

/*
 * A request with a deadline tells the server the time it has left (µs,
 * rounded up; 1 once passed: 0 means none), in each copy it sends.
 */
static URPC_COLD void stamp_budget(struct urpc_rpc *rpc, struct urpc_cslot *sl)
{
	struct urpc_pkthdr *h = (struct urpc_pkthdr *)(uintptr_t)urpc__cli_req_pkt(sl);
	uint64_t left = sl->deadline_ns > rpc->now ? (sl->deadline_ns - rpc->now + 999) / 1000 : 1;

	h->budget_us = htole32((uint32_t)URPC_MIN(left, (uint64_t)UINT32_MAX));
}

/* Transmit (or retransmit) the request in client slot @i of @s. */
static inline void send_req(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl)
{
	struct urpc_msgbuf *req = sl->req;

	if (unlikely(sl->deadline_ns))
		stamp_budget(rpc, sl);
	if (unlikely(sl->large_req))
		urpc__tx_push(rpc, s->peer, &sl->lpkt.h, sizeof(sl->lpkt.d), 0);
	else
		urpc__tx_push(rpc, s->peer, urpc__mb_hdr(req), (uint32_t)req->data_size,
			      req->priv_lkey);
	sl->tx_ns = rpc->tx_stamp; /* 0 (outside the loop): stamped by the next scan */
}

/*
 * Take free slot @i of @s for a request (@large: it travels as a
 * descriptor) and mark it sent; returns its request number.
 */
static inline URPC_ALWAYS_INLINE uint64_t slot_take(struct urpc_rpc *rpc, struct urpc_session *s,
						    unsigned i, bool large, struct urpc_msgbuf *req,
						    struct urpc_msgbuf *resp, urpc_cont_fn cont,
						    void *tag, uint64_t deadline_ns)
{
	struct urpc_cslot *sl = &s->cli.slots[i];
	/* The stride is the largest window: a constant, and a multiple of every window. */
	uint64_t req_num = sl->cur_req_num + URPC_SESSION_WINDOW_MAX;

	/* The arguments first: registers free early keep the fast path's frame small. */
	sl->req = req;
	sl->resp = resp;
	sl->cont = cont;
	sl->tag = tag;
	urpc__cli_set(rpc, sl, URPC_CLI_SENT);
	sl->cur_req_num = req_num;
	sl->deadline_ns = deadline_ns;
	sl->retries = 0;
	sl->rto_ns = s->cli.rtt.rto_ns;
	sl->late_status = 0;
	sl->large_req = large;
	sl->tx_unknown = false;
	/*
	 * A session with a request in a slot has its busy bit already: the
	 * timer scan clears it only once the session is idle (urpc__cli_busy).
	 */
	if (s->cli.free_mask == s->cli.all_free)
		urpc__cli_mark_busy(rpc, s);
	s->cli.free_mask &= ~(1ull << i);
	rpc->st.reqs_sent++;
	return req_num;
}

/* Build the header of small request @req (number @req_num) in front of its payload. */
static inline struct urpc_pkthdr *small_hdr(const struct urpc_session *s, uint8_t req_type,
					    const struct urpc_msgbuf *req, uint64_t req_num)
{
	struct urpc_pkthdr *h = urpc__mb_hdr(req);

	urpc__pkthdr_from(h, &s->tx_hdr, req_type, (uint32_t)req->data_size, req_num);
	return h;
}

/* Put a request into free slot @i and send it (@large: as a descriptor, checked by the caller). */
static inline URPC_ALWAYS_INLINE void start_req(struct urpc_rpc *rpc, struct urpc_session *s,
						unsigned i, bool large, uint8_t req_type,
						struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
						urpc_cont_fn cont, void *tag, uint64_t deadline_ns)
{
	struct urpc_cslot *sl = &s->cli.slots[i];
	uint64_t req_num = slot_take(rpc, s, i, large, req, resp, cont, tag, deadline_ns);

	if (likely(!large)) {
		small_hdr(s, req_type, req, req_num);
	} else {
		/*
		 * The server may READ exactly these bytes until it has: a
		 * failed grant (no memory) leaves key 0, which it cannot read
		 * (its READ fails and it answers the error).
		 */
		urpc__grant_read(rpc, s, req, &sl->grant);
		urpc__large_pkt_fill(&sl->lpkt, URPC_PKT_REQ, req_type, &sl->grant, s->remote_num,
				     req_num, s->token);
		/* Answered once read, after the session's other unread ones. */
		sl->rto_ns += urpc__cli_large_allowance(s);
	}
	send_req(rpc, s, sl);
}

/* Does request @req travel as a descriptor the server READs? */
static inline bool req_is_large(const struct urpc_rpc *rpc, const struct urpc_msgbuf *req)
{
	return req->data_size > rpc->max_msg || urpc__mb_is_view(req);
}

void urpc__cli_kick(struct urpc_rpc *rpc, struct urpc_session *s)
{
	while (s->cli.wq_head != s->cli.wq_tail && s->cli.free_mask) {
		struct urpc_waiting_req *w = &s->cli.waitq[s->cli.wq_head & WAITQ_MASK];

		if (unlikely(s->cli.cc_limited) &&
		    !urpc__cc_sess_may_send(rpc, s, w->req->data_size + sizeof(struct urpc_pkthdr)))
			break; /* the pacer kicks it again (cc_sess.c) */
		s->cli.wq_head++;
		start_req(rpc, s, (unsigned)__builtin_ctzll(s->cli.free_mask),
			  req_is_large(rpc, w->req), w->req_type, w->req, w->resp, w->cont, w->tag,
			  w->deadline_ns);
	}
}

void urpc__cli_resend(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl)
{
	send_req(rpc, s, sl);
}

/*
 * urpc_req_enqueue() (urpc.h) in full: every check with its error,
 * deadlines, large requests, the wait queue. urpc_priv_req_enqueue() takes
 * the common case itself and comes here for everything else. @deadline:
 * the Rpc clock's, 0 for none; U64_MAX: @timeout_ms's from now.
 */
int urpc__cli_enqueue(struct urpc_rpc *rpc, int session, unsigned type_flags,
		      struct urpc_msgbuf *req, struct urpc_msgbuf *resp, urpc_cont_fn cont,
		      void *tag, uint32_t timeout_ms, uint64_t deadline)
{
	uint8_t req_type = (uint8_t)type_flags;
	struct urpc_session *s;
	bool large;

	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	/* A view request's continuation gets the Rpc's view; the view is never a buffer to lend. */
	if (type_flags & URPC_PRIV_RESP_VIEW)
		resp = &rpc->resp_view;
	else if (resp == &rpc->resp_view)
		return -EINVAL;
	s = urpc__rpc_session(rpc, session);
	if (unlikely(!s || s->role != URPC_ROLE_CLIENT || !req || !req->buf ||
		     req == &rpc->resp_view || !resp || (!resp->buf && resp != &rpc->resp_view) ||
		     !cont))
		return -EINVAL;
	large = req_is_large(rpc, req);
	if (unlikely(large)) {
		/* A large request: the server READs it from this registered buffer. */
		if (req->data_size > URPC_MAX_MSG_SIZE)
			return -EMSGSIZE;
		if (!urpc__mb_peer_readable(req) || !req->data_size)
			return -EINVAL;
		if (urpc__mb_stage_out(req))
			return -EIO; /* staging out of GPU memory failed */
	}
	/*
	 * Inside the loop, now is this pass's time. Outside it, now may be stale by the idle
	 * time: a deadline then reads the clock, and the next timer scan stamps the send time.
	 */
	if (unlikely(timeout_ms || deadline)) {
		if (!rpc->in_loop)
			rpc->now = urpc__rpc_clock(rpc);
		if (timeout_ms)
			deadline = URPC_MIN(deadline ? deadline : UINT64_MAX,
					    rpc->now + (uint64_t)timeout_ms * 1000000);
	}
	/* One test for the common case: connected, a free slot (its credit), no one ahead, unpaced. */
	if (likely(s->state == URPC_SESS_CONNECTED && s->cli.free_mask &&
		   s->cli.wq_head == s->cli.wq_tail && !s->cli.cc_limited)) {
		/* Lent from here on: urpc_msgbuf_free() looks in this session's slots and queue. */
		req->priv_sess = (uint32_t)session;
		resp->priv_sess = (uint32_t)session;
		start_req(rpc, s, (unsigned)__builtin_ctzll(s->cli.free_mask), large, req_type, req,
			  resp, cont, tag, deadline);
		return 0;
	}
	if (unlikely(s->state != URPC_SESS_CONNECTED && s->state != URPC_SESS_CONNECTING))
		return -ECONNRESET;
	if (unlikely(s->cli.wq_tail - s->cli.wq_head == URPC_SESSION_WAITQ))
		return -EAGAIN; /* the queue is full: a continuation makes room */
	req->priv_sess = (uint32_t)session;
	resp->priv_sess = (uint32_t)session;
	urpc__cli_mark_busy(rpc, s);
	s->cli.waitq[s->cli.wq_tail & WAITQ_MASK] = (struct urpc_waiting_req){
		.req = req,
		.resp = resp,
		.cont = cont,
		.tag = tag,
		.deadline_ns = deadline,
		.req_type = req_type,
	};
	if (s->cli.wq_tail++ == s->cli.wq_head && s->cli.cc_limited) /* never CONNECTING */
		urpc__cli_kick(rpc, s); /* paced: now, or when the pacer says */
	return 0;
}

URPC_API int urpc_priv_req_enqueue_full(struct urpc_rpc *rpc, int session, unsigned type_flags,
					struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
					urpc_cont_fn cont, void *tag, uint32_t timeout_ms)
{
	return urpc__cli_enqueue(rpc, session, type_flags, req, resp, cont, tag, timeout_ms, 0);
}

/*
 * urpc_req_enqueue() (urpc.h) without a deadline, @req, @resp and @cont not
 * NULL, or with @view urpc_req_enqueue_view() (@resp unused: the Rpc's view);
 * @session_type: the session number, the request type in bits 32-39.
 */
static inline URPC_ALWAYS_INLINE int enqueue(struct urpc_rpc *rpc, struct urpc_msgbuf *req,
					     struct urpc_msgbuf *resp, urpc_cont_fn cont, void *tag,
					     uint64_t session_type, bool view)
{
	uint32_t session = (uint32_t)session_type;
	uint8_t req_type = (uint8_t)(session_type >> 32);
	struct urpc_session *s;
	struct urpc_cslot *sl;
	uint64_t req_num;
	unsigned i;

	/*
	 * The common case (rx_word is a response's word only for a CONNECTED client); anything
	 * else, every bad argument included, goes the full path, which says why.
	 */
	if (unlikely(!rpc || !urpc__rpc_is_owner(rpc) || session >= rpc->hi_session || !req->buf ||
		     (!view && !resp->buf) || req_is_large(rpc, req) || rpc->ntx == URPC_TX_BATCH))
		goto full;
	if (view)
		resp = &rpc->resp_view;
	s = rpc->sessions[session];
	if (unlikely(s->rx_word != URPC_PKT_WORD(URPC_PKT_RESP) || !s->cli.free_mask ||
		     s->cli.wq_head != s->cli.wq_tail || s->cli.cc_limited))
		goto full;
	i = (unsigned)__builtin_ctzll(s->cli.free_mask);
	sl = &s->cli.slots[i];
	/* A slot that is not FREE is a bug the full path's transition counts. */
	if (unlikely(sl->state != URPC_CLI_FREE))
		goto full;
	/* Lent from here on: urpc_msgbuf_free() looks in this session's slots and queue. */
	req->priv_sess = (uint32_t)session;
	if (!view)
		resp->priv_sess = (uint32_t)session;
	sl->tx_ns = rpc->tx_stamp; /* 0 (outside the loop): stamped by the next scan */
	req_num = slot_take(rpc, s, i, false, req, resp, cont, tag, 0);
	urpc__tx_put(rpc, s->peer, small_hdr(s, req_type, req, req_num), (uint32_t)req->data_size,
		     req->priv_lkey);
	return 0;

full:
	return urpc_priv_req_enqueue_full(rpc, (int)session,
					  req_type | (view ? URPC_PRIV_RESP_VIEW : 0u), req, resp,
					  cont, tag, 0);
}

URPC_API int urpc_priv_req_enqueue(struct urpc_rpc *rpc, struct urpc_msgbuf *req,
				   struct urpc_msgbuf *resp, urpc_cont_fn cont, void *tag,
				   uint64_t session_type)
{
	return enqueue(rpc, req, resp, cont, tag, session_type, false);
}

URPC_API int urpc_priv_req_enqueue_view(struct urpc_rpc *rpc, struct urpc_msgbuf *req,
					urpc_cont_fn cont, void *tag, uint64_t session_type)
{
	return enqueue(rpc, req, NULL, cont, tag, session_type, true);
}

/* The end of complete(): slot @sl (index @i) goes FREE, and with @call the continuation runs. */
static inline URPC_ALWAYS_INLINE void complete_end(struct urpc_rpc *rpc, struct urpc_session *s,
						   struct urpc_cslot *sl, enum urpc_cli_state from,
						   unsigned i, urpc_cont_fn cont, void *tag,
						   int status, struct urpc_msgbuf *resp, bool call)
{
	/* A FREE slot's req and resp are stale: nothing reads them (urpc__mb_is_lent()). */
	urpc__cli_step(rpc, sl, from, URPC_CLI_FREE);
	s->cli.free_mask |= 1ull << i;
	if (s->cli.wq_head != s->cli.wq_tail && s->state == URPC_SESS_CONNECTED)
		urpc__cli_kick(rpc, s);
	if (likely(call)) /* inside a pass (every caller): in_loop bars the loop and destroy */
		cont(rpc, tag, status, resp);
}

/*
 * complete() of a resent or failed request, or of a large one with a
 * grant: out of line, so that the plain completion tests nothing more.
 */
static URPC_COLD void complete_slow(struct urpc_rpc *rpc, struct urpc_session *s,
				    struct urpc_cslot *sl, int status)
{
	urpc_cont_fn cont = sl->cont;
	struct urpc_msgbuf *resp = sl->resp;
	void *tag = sl->tag;
	unsigned i = sl->idx;
	bool later;

	if (sl->retries || status) {
		/*
		 * A copy of the request may still wait in the TX batch (a
		 * retransmission, or a first send under back-pressure when
		 * the deadline passed) or at the NIC: the buffer goes back
		 * to the application now.
		 */
		urpc__tx_forget(rpc, urpc__cli_req_pkt(sl), NULL);
		rpc->tp->ops->tx_flush(rpc->tp);
	}
	if (status) { /* a view request's continuation gets no bytes */
		rpc->resp_view.buf = NULL;
		rpc->resp_view.data_size = 0;
	}
	/* The server no longer reads the request: revoked, or kept until it let go (large.h). */
	later = sl->grant.key && urpc__cli_large_retire(rpc, s, sl, status);
	complete_end(rpc, s, sl, sl->state, i, cont, tag, status, resp, !later);
}

/*
 * Complete the request in slot @sl, which is in state @from, with @status:
 * the slot goes FREE and the continuation runs, exactly once.
 */
static inline URPC_ALWAYS_INLINE void complete(struct urpc_rpc *rpc, struct urpc_session *s,
					       struct urpc_cslot *sl, int status,
					       enum urpc_cli_state from)
{
	/* One test for a resent or failed request and a large one's grant. */
	if (unlikely(((uint64_t)sl->retries | (uint32_t)status | sl->grant.key) != 0)) {
		complete_slow(rpc, s, sl, status);
		return;
	}
	complete_end(rpc, s, sl, from, sl->idx, sl->cont, sl->tag, status, sl->resp, true);
}

void urpc__cli_complete(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl,
			int status)
{
	complete(rpc, s, sl, status, sl->state);
}

void urpc__cli_fail_all(struct urpc_rpc *rpc, struct urpc_session *s, int status)
{
	uint32_t num = s->local_num;
	unsigned i;

	if (s->role != URPC_ROLE_CLIENT)
		return;
	/* The buffers go back to the application: no copy may be sent later. */
	for (i = 0; i <= s->slot_mask; i++)
		if (s->cli.slots[i].state != URPC_CLI_FREE)
			urpc__tx_forget(rpc, urpc__cli_req_pkt(&s->cli.slots[i]), NULL);
	rpc->tp->ops->tx_flush(rpc->tp);
	for (i = 0; i <= s->slot_mask; i++) {
		struct urpc_cslot *sl = &s->cli.slots[i];
		struct urpc_msgbuf *resp = sl->resp;
		urpc_cont_fn cont = sl->cont;

		if (sl->state == URPC_CLI_FREE)
			continue;
		if (unlikely(sl->state == URPC_CLI_READING)) {
			/*
			 * The transport may still write into @resp: the operation
			 * runs the continuation once it has completed.
			 */
			urpc__os_orphan_client(rpc, sl, status);
			s->cli.free_mask |= 1ull << i;
			continue;
		}
		if (unlikely(sl->large_req && sl->state == URPC_CLI_SENT &&
			     s->state == URPC_SESS_DISCONNECTING)) {
			/*
			 * The server may be READing the request buffer right
			 * now and run its handler on what it read: the buffer
			 * goes back once the server has taken the disconnect
			 * (its READ is then an orphan whose bytes nobody uses)
			 * or the disconnect gave up (DISCONNECT_DONE fails it).
			 */
			continue;
		}
		urpc__grant_revoke(rpc, &sl->grant);
		urpc__cli_set(rpc, sl, URPC_CLI_FREE);
		sl->req = NULL;
		sl->resp = NULL;
		s->cli.free_mask |= 1ull << i;
		urpc__run_cont(rpc, cont, sl->tag, status, resp);
		if (rpc->sessions[num] != s)
			return;
	}
	while (s->cli.wq_head != s->cli.wq_tail) {
		struct urpc_waiting_req w = s->cli.waitq[s->cli.wq_head & WAITQ_MASK];

		s->cli.wq_head++;
		urpc__run_cont(rpc, w.cont, w.tag, status, w.resp);
		if (rpc->sessions[num] != s)
			return;
	}
}

/*
 * A large response's descriptor arrived in client slot @sl: start reading
 * it into the slot's response buffer. Returns false when the READ is under
 * way or the descriptor was dropped (the retransmitted request brings it
 * again), true with *@st set when the request completes now with an error.
 */
static bool client_read_resp(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl,
			     const uint8_t *data, uint32_t len, int *st)
{
	struct urpc_large_desc d;
	const void *mr;
	uint16_t i;
	int ret;

	if (unlikely(!urpc__large_desc_parse(rpc, data, len, &d)))
		return false;
	urpc__cli_grant_read_done(rpc, &sl->grant); /* answered: the server has read the request */
	if (le64toh(d.len) > sl->resp->max_data_size || le64toh(d.len) > URPC_MAX_MSG_SIZE) {
		*st = -EMSGSIZE;
		return true;
	}
	mr = urpc__mb_mr(sl->resp);
	if (unlikely(!mr)) {
		*st = -EINVAL;
		return true;
	}
	i = urpc__os_get(rpc);
	if (unlikely(i == URPC_OS_NIL))
		return false;
	ret = rpc->tp->ops->post_read(rpc->tp, s->peer, urpc__mb_dma(sl->resp), mr, le64toh(d.addr),
				      le64toh(d.key), (size_t)le64toh(d.len), i);
	if (unlikely(ret)) {
		urpc__os_put(rpc, i);
		if (ret == -EAGAIN)
			return false;
		*st = ret;
		return true;
	}
	rpc->os[i].kind = URPC_OS_CLI_RESP;
	rpc->os[i].sess_num = s->local_num;
	rpc->os[i].slot = sl->idx;
	rpc->os[i].req_num = sl->cur_req_num;
	rpc->os[i].len = (size_t)le64toh(d.len);
	rpc->os[i].raddr = le64toh(d.addr);
	rpc->os[i].rkey = le64toh(d.key);
	rpc->os[i].post_ns = rpc->now;
	urpc__cli_set(rpc, sl, URPC_CLI_READING);
	sl->os_idx = i;
	return false;
}

/*
 * The server has read the large request in client slot @sl: its buffer is
 * the application's again as far as the peer goes. A deadline that passed
 * meanwhile completes the request now.
 */
static URPC_COLD void client_ack(struct urpc_rpc *rpc, struct urpc_session *s,
				 struct urpc_cslot *sl, uint32_t len)
{
	if (unlikely(len || !sl->large_req)) {
		rpc->st.drop_bad_hdr++;
		return;
	}
	if (sl->state == URPC_CLI_ACKED) {
		rpc->st.dup_resps++;
		return;
	}
	urpc__cli_grant_read_done(rpc, &sl->grant); /* read: no more access */
	urpc__cli_set(rpc, sl, URPC_CLI_ACKED);
	rpc->st.acks_rx++;
	if (sl->late_status)
		complete(rpc, s, sl, sl->late_status, sl->state);
}

/*
 * The end of client_rx for a request answered with @st (0 or -errno), its
 * slot in state @from: a round-trip sample now and then, the count, the
 * completion.
 */
static inline URPC_ALWAYS_INLINE void client_rx_done(struct urpc_rpc *rpc, struct urpc_session *s,
						     struct urpc_cslot *sl, int st,
						     enum urpc_cli_state from,
						     const struct urpc_pkthdr *h)
{
	/*
	 * Karn: a retransmitted request's answer may be to either copy. tx_ns 0
	 * or tx_unknown: its send time is not known. The sample takes the
	 * server's fair share along (pkthdr.h).
	 */
	if (unlikely(rpc->now >= s->cli.rtt.next_ns) && !sl->retries && sl->tx_ns &&
	    !sl->tx_unknown)
		urpc__rtt_sample(rpc, s, rpc->now - sl->tx_ns, le32toh(h->budget_us));
	rpc->st.resps_rx++;
	complete(rpc, s, sl, st, from);
}

/*
 * What client_rx does with anything but a plain answer to a SENT or ACKED
 * slot: a duplicate of an answer taken (the slot is FREE), an error
 * status, a descriptor, an acknowledgement, a slot reading or past its
 * deadline (or in a state out of range: a bug, which the step
 * to FREE counts, the request completing with -EPROTO). Out of line, with
 * its own completion, so that the plain answer's path merges with none.
 */
static URPC_COLD void client_rx_slow(struct urpc_rpc *rpc, struct urpc_session *s,
				     struct urpc_cslot *sl, const struct urpc_pkthdr *h,
				     const uint8_t *data, uint32_t len)
{
	uint16_t status = le16toh(h->status);
	int st;

	/* Answered already, or a resent descriptor while we read. */
	if (sl->state == URPC_CLI_FREE || sl->state == URPC_CLI_READING) {
		rpc->st.dup_resps++;
		return;
	}
	if (h->flags & URPC_PKT_F_ACK) {
		client_ack(rpc, s, sl, len);
		return;
	}
	if (sl->late_status) /* the deadline passed while the server read the request */
		st = sl->late_status;
	else if (status)
		st = -(int)status;
	else if (!(h->flags & URPC_PKT_F_LARGE))
		st = -EPROTO; /* unknown flags */
	else if (!client_read_resp(rpc, s, sl, data, len, &st))
		return; /* the READ is under way */
	client_rx_done(rpc, s, sl, st, sl->state, h);
}

void urpc__cli_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		  const uint8_t *data, uint32_t len)
{
	uint64_t req_num = le64toh(h->req_num);
	struct urpc_cslot *sl = &s->cli.slots[req_num & s->slot_mask];
	struct urpc_msgbuf *resp = sl->resp; /* a local: the copy into it may write anywhere */
	enum urpc_cli_state from = sl->state;
	int st;

	URPC_KEEP(sl);
	if (unlikely(req_num != sl->cur_req_num)) {
		rpc->st.drop_stale++;
		return;
	}
	/*
	 * One test for all but a plain answer to a SENT or ACKED slot (a FREE
	 * one's duplicate included): it settles the step to FREE.
	 */
	if (unlikely((urpc__pkthdr_flags_status(h) | (uint32_t)sl->late_status) != 0 ||
		     (unsigned)from - URPC_CLI_SENT > URPC_CLI_ACKED - URPC_CLI_SENT)) {
		client_rx_slow(rpc, s, sl, h, data, len);
		return;
	}
	if (unlikely(resp == &rpc->resp_view)) {
		/* urpc_req_enqueue_view(): the continuation reads the bytes in place. */
		resp->buf = (uint8_t *)(uintptr_t)data;
		resp->data_size = len;
		st = 0;
	} else if (unlikely(len > resp->max_data_size)) {
		st = -EMSGSIZE;
	} else {
		st = urpc__mb_copy_in(resp, data, len);
		resp->data_size = len;
	}
	client_rx_done(rpc, s, sl, st, from, h);
}
