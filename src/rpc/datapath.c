/* SPDX-License-Identifier: MIT */
/*
 * The small-message datapath: requests out, handlers in, responses back,
 * retransmission and duplicate suppression (see docs/ENGINE.md). Nothing
 * here allocates, locks, or makes a syscall beyond the transport's.
 */
#define URPC_LOG_MODULE "datapath"
#include <errno.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "rpc.h"

#define SLOT_MASK (URPC_SESSION_SLOTS - 1)
#define WAITQ_MASK (URPC_SESSION_WAITQ - 1)

/*
 * The header sits right in front of the data, inside the buffer's headroom,
 * so header and payload leave as one contiguous datagram (one copy on loop,
 * one iovec on udp, one SGE on verbs). buf is 64-byte aligned and the header
 * 40 bytes long, so the header stays 8-byte aligned.
 */
static_assert(sizeof(struct urpc_pkthdr) % 8 == 0, "header alignment");

static inline struct urpc_pkthdr *hdr_of(const struct urpc_msgbuf *mb)
{
	return (struct urpc_pkthdr *)(void *)(mb->buf - sizeof(struct urpc_pkthdr));
}

/* Transmit (or retransmit) the request in client slot @i of @s. */
static inline void send_req(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl)
{
	struct urpc_msgbuf *req = sl->req;

	if (unlikely(sl->large_req))
		urpc__rpc_tx_push(rpc, s->peer, &sl->lpkt.h, sizeof(sl->lpkt.d), 0);
	else
		urpc__rpc_tx_push(rpc, s->peer, hdr_of(req), (uint32_t)req->data_size,
				  req->priv_lkey);
	sl->tx_ns = rpc->in_loop ? rpc->now : 0; /* 0: stamped by the next scan */
}

/* The datagram header a slot's request or stored response leaves from. */
static inline const void *req_pkt_of(struct urpc_sslot *sl)
{
	return sl->large_req ? (const void *)&sl->lpkt.h : (const void *)hdr_of(sl->req);
}

/* Describe @mb (registered, @len bytes) for the peer to READ, in @sl's lpkt. */
static URPC_COLD void large_pkt_fill(struct urpc_sslot *sl, enum urpc_pkt_type type,
				     uint8_t req_type, const struct urpc_msgbuf *mb, uint32_t dest,
				     uint64_t req_num, uint64_t token)
{
	urpc__pkthdr_fill(&sl->lpkt.h, type, req_type, 0, sizeof(sl->lpkt.d), dest, req_num, token);
	sl->lpkt.h.flags = URPC_PKT_F_LARGE;
	sl->lpkt.d.addr = htole64((uint64_t)(uintptr_t)urpc__mb_dma(mb));
	sl->lpkt.d.len = htole64(mb->data_size);
	sl->lpkt.d.rkey = htole32(mb->priv_rkey);
	sl->lpkt.d.reserved = 0;
}

/* The descriptor of a large message, or false (dropped and counted). */
static bool desc_parse(struct urpc_rpc *rpc, const uint8_t *data, uint32_t len,
		       struct urpc_large_desc *d)
{
	if (unlikely(len != sizeof(*d))) {
		rpc->st.drop_bad_hdr++;
		return false;
	}
	memcpy(d, data, sizeof(*d));
	return true;
}

/* ---- one-sided operations of large messages ---- */

static inline uint16_t os_get(struct urpc_rpc *rpc)
{
	uint16_t i = rpc->os_free;

	if (unlikely(i == URPC_OS_NIL))
		return i;
	rpc->os_free = rpc->os[i].next_free;
	rpc->os[i].busy = true;
	rpc->os[i].orphan = false;
	rpc->os_busy++;
	return i;
}

static inline void os_put(struct urpc_rpc *rpc, uint16_t i)
{
	rpc->os[i].busy = false;
	rpc->os[i].next_free = rpc->os_free;
	rpc->os_free = i;
	rpc->os_busy--;
}

/* Put a request into free slot @i and send it. */
static inline void start_req(struct urpc_rpc *rpc, struct urpc_session *s, unsigned i,
			     uint8_t req_type, struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
			     urpc_cont_fn cont, void *tag, uint64_t deadline_ns)
{
	struct urpc_sslot *sl = &s->slots[i];

	urpc__dp_mark_busy(rpc, s);
	s->free_mask &= ~(1u << i);
	s->credits--;
	sl->busy = true;
	sl->cur_req_num += URPC_SESSION_SLOTS;
	sl->req = req;
	sl->resp = resp;
	sl->cont = cont;
	sl->tag = tag;
	sl->deadline_ns = deadline_ns;
	sl->retries = 0;
	sl->rto_ns = rpc->rto_ns;
	sl->late_status = 0;
	sl->req_acked = false;
	sl->large_req = req->data_size > rpc->max_msg || urpc__mb_is_view(req);
	if (unlikely(sl->large_req)) {
		large_pkt_fill(sl, URPC_PKT_REQ, req_type, req, s->remote_num, sl->cur_req_num,
			       s->token);
		/*
		 * The server answers once it has read the payload: allow for
		 * that (3 ms per 64 KiB, ~20 MB/s at worst) before resending.
		 */
		sl->rto_ns += (req->data_size >> 16) * 3000000ull;
	} else
		urpc__pkthdr_fill(hdr_of(req), URPC_PKT_REQ, req_type, 0, (uint32_t)req->data_size,
				  s->remote_num, sl->cur_req_num, s->token);
	send_req(rpc, s, sl);
	rpc->st.reqs_sent++;
}

void urpc__dp_kick(struct urpc_rpc *rpc, struct urpc_session *s)
{
	while (s->wq_head != s->wq_tail && s->free_mask && s->credits) {
		struct urpc_waiting_req *w = &s->waitq[s->wq_head & WAITQ_MASK];

		s->wq_head++;
		start_req(rpc, s, (unsigned)__builtin_ctz(s->free_mask), w->req_type, w->req,
			  w->resp, w->cont, w->tag, w->deadline_ns);
	}
}

URPC_API int urpc_req_enqueue(struct urpc_rpc *rpc, int session, uint8_t req_type,
			      struct urpc_msgbuf *req, struct urpc_msgbuf *resp, urpc_cont_fn cont,
			      void *tag, uint32_t timeout_ms)
{
	struct urpc_session *s;
	uint64_t deadline = 0;

	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	s = urpc__rpc_session(rpc, session);
	if (unlikely(!s || s->role != URPC_ROLE_CLIENT || !req || !req->buf || !resp ||
		     !resp->buf || !cont))
		return -EINVAL;
	if (unlikely(req->data_size > rpc->max_msg || urpc__mb_is_view(req))) {
		/* A large request: the server READs it from this registered buffer. */
		if (req->data_size > URPC_MAX_MSG_SIZE)
			return -EMSGSIZE;
		if (!urpc__mb_peer_readable(req) || !req->data_size)
			return -EINVAL;
		if (urpc__mb_gpu(req) && urpc__mb_gpu(req)->host &&
		    urpc__cuda_copy_to_host(urpc__mb_gpu(req)->host, req->buf, req->data_size))
			return -EIO; /* staging out of GPU memory failed */
	}
	if (unlikely(s->state != URPC_SESS_CONNECTED && s->state != URPC_SESS_CONNECTING))
		return -ECONNRESET;
	/* Lent from here on: urpc_msgbuf_free() looks in this session's slots and queue. */
	req->priv_sess = (uint32_t)session;
	resp->priv_sess = (uint32_t)session;
	/*
	 * Inside the loop, now is this pass's time. Outside it, now may be
	 * stale by the application's idle time: a deadline then reads the
	 * clock, and the send time is stamped by the next timer scan.
	 */
	if (timeout_ms) {
		if (!rpc->in_loop)
			rpc->now = rpc->clock(rpc->clock_arg);
		deadline = rpc->now + (uint64_t)timeout_ms * 1000000;
	}

	if (likely(s->state == URPC_SESS_CONNECTED && s->free_mask && s->credits &&
		   s->wq_head == s->wq_tail)) {
		start_req(rpc, s, (unsigned)__builtin_ctz(s->free_mask), req_type, req, resp, cont,
			  tag, deadline);
		return 0;
	}
	if (unlikely(s->wq_tail - s->wq_head == URPC_SESSION_WAITQ))
		return -ENOMEM; /* the queue is full: a continuation makes room */
	urpc__dp_mark_busy(rpc, s);
	s->waitq[s->wq_tail & WAITQ_MASK] = (struct urpc_waiting_req){
		.req = req,
		.resp = resp,
		.cont = cont,
		.tag = tag,
		.deadline_ns = deadline,
		.req_type = req_type,
	};
	s->wq_tail++;
	return 0;
}

static inline void run_cont(struct urpc_rpc *rpc, urpc_cont_fn cont, void *tag, int status,
			    struct urpc_msgbuf *resp)
{
	rpc->in_cb++;
	cont(rpc, tag, status, resp);
	rpc->in_cb--;
}

/* Count (@sign 1) or uncount (-1) the application's buffers an orphan holds. */
static void os_lend(struct urpc_rpc *rpc, const struct urpc_os_op *op, int sign)
{
	const struct urpc_msgbuf *b[2] = {op->req, op->resp != op->req ? op->resp : NULL};
	unsigned k;

	for (k = 0; k < 2; k++) {
		if (!b[k])
			continue;
		if (urpc__mb_is_view(b[k]))
			rpc->os_lent_views += (uint32_t)sign;
		else
			rpc->os_lent += (uint32_t)sign;
	}
}

/*
 * Client slot @sl reads a large response: hand its continuation to the
 * operation, to run with @status once the transport is done with the
 * buffers; the slot is free from now on. Cold path.
 */
static void orphan_client_op(struct urpc_rpc *rpc, struct urpc_sslot *sl, int status)
{
	struct urpc_os_op *op = &rpc->os[sl->os_idx];

	op->orphan = true;
	op->cont = sl->cont;
	op->tag = sl->tag;
	op->req = sl->req;
	op->resp = sl->resp;
	op->status = status;
	os_lend(rpc, op, 1);
	sl->reading = false;
	sl->busy = false;
	sl->req = NULL;
	sl->resp = NULL;
}

/*
 * Free client slot @sl and run its continuation. Waiting requests move into
 * the slot first, so the continuation's own new requests queue behind them.
 * @s may be freed by the continuation: callers must not touch it after.
 */
static void complete(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
		     int status)
{
	urpc_cont_fn cont = sl->cont;
	struct urpc_msgbuf *resp = sl->resp;
	void *tag = sl->tag;
	unsigned i = sl->idx;

	if (unlikely(sl->retries || status)) {
		/*
		 * A copy of the request may still wait in the TX batch (a
		 * retransmission, or a first send under back-pressure when the
		 * deadline passed) or at the NIC: the buffer goes back to the
		 * application now.
		 */
		urpc__rpc_tx_forget(rpc, req_pkt_of(sl), NULL);
		rpc->tp->ops->tx_flush(rpc->tp);
	}
	sl->busy = false;
	sl->req = NULL;
	sl->resp = NULL;
	s->free_mask |= 1u << i;
	s->credits++;
	if (s->wq_head != s->wq_tail && s->state == URPC_SESS_CONNECTED)
		urpc__dp_kick(rpc, s);
	run_cont(rpc, cont, tag, status, resp);
}

void urpc__dp_fail_all(struct urpc_rpc *rpc, struct urpc_session *s, int status)
{
	uint32_t num = s->local_num;
	unsigned i;

	if (s->role != URPC_ROLE_CLIENT)
		return;
	/* The buffers go back to the application: no copy may be sent later. */
	for (i = 0; i < URPC_SESSION_SLOTS; i++)
		if (s->slots[i].busy)
			urpc__rpc_tx_forget(rpc, req_pkt_of(&s->slots[i]), NULL);
	rpc->tp->ops->tx_flush(rpc->tp);
	for (i = 0; i < URPC_SESSION_SLOTS; i++) {
		struct urpc_sslot *sl = &s->slots[i];
		struct urpc_msgbuf *resp = sl->resp;
		urpc_cont_fn cont = sl->cont;

		if (!sl->busy)
			continue;
		if (unlikely(sl->reading)) {
			/*
			 * The transport may still write into @resp: the operation
			 * runs the continuation once it has completed.
			 */
			orphan_client_op(rpc, sl, status);
			s->free_mask |= 1u << i;
			s->credits++;
			continue;
		}
		if (unlikely(sl->large_req && !sl->req_acked &&
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
		sl->busy = false;
		sl->req = NULL;
		sl->resp = NULL;
		s->free_mask |= 1u << i;
		s->credits++;
		run_cont(rpc, cont, sl->tag, status, resp);
		if (rpc->sessions[num] != s)
			return;
	}
	while (s->wq_head != s->wq_tail) {
		struct urpc_waiting_req w = s->waitq[s->wq_head & WAITQ_MASK];

		s->wq_head++;
		run_cont(rpc, w.cont, w.tag, status, w.resp);
		if (rpc->sessions[num] != s)
			return;
	}
}

/*
 * Requests still waiting for a slot expire too, wherever they sit in the
 * queue. The queue is compacted (order kept) before any continuation runs,
 * so continuations that enqueue again find it consistent. Timer scan only.
 */
static void expire_waiting(struct urpc_rpc *rpc, struct urpc_session *s)
{
	struct urpc_waiting_req done[URPC_SESSION_WAITQ];
	uint32_t i, keep = s->wq_head, n = 0;

	for (i = s->wq_head; i != s->wq_tail; i++) {
		const struct urpc_waiting_req *w = &s->waitq[i & WAITQ_MASK];

		if (w->deadline_ns && rpc->now >= w->deadline_ns)
			done[n++] = *w;
		else if (keep++ != i)
			s->waitq[(keep - 1) & WAITQ_MASK] = *w;
	}
	s->wq_tail = keep;
	/* Every one of them runs: they are out of the queue already. */
	for (i = 0; i < n; i++)
		run_cont(rpc, done[i].cont, done[i].tag, -ETIMEDOUT, done[i].resp);
}

void urpc__dp_timers(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t num = s->local_num;
	unsigned i;

	for (i = 0; i < URPC_SESSION_SLOTS; i++) {
		struct urpc_sslot *sl = &s->slots[i];

		if (!sl->busy)
			continue;
		if (unlikely(sl->reading)) {
			/* No retransmission; a deadline waits for the READ to finish. */
			if (sl->deadline_ns && rpc->now >= sl->deadline_ns && !sl->late_status)
				sl->late_status = -ETIMEDOUT;
			continue;
		}
		if (sl->deadline_ns && rpc->now >= sl->deadline_ns) {
			if (unlikely(sl->large_req && !sl->req_acked)) {
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
			complete(rpc, s, sl, -ETIMEDOUT);
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
			sl->rto_ns = URPC_MIN(sl->rto_ns * 2, rpc->rto_max_ns);
			rpc->st.retransmits++;
			send_req(rpc, s, sl);
		}
	}
	if (s->wq_head != s->wq_tail)
		expire_waiting(rpc, s);
}

/* ---- receive ---- */

static void server_send_resp(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl)
{
	if (unlikely(sl->large_resp.buf))
		urpc__rpc_tx_push(rpc, s->peer, &sl->lpkt.h, sizeof(sl->lpkt.d), 0);
	else
		urpc__rpc_tx_push(rpc, s->peer, hdr_of(&sl->resp_mb),
				  (uint32_t)sl->resp_mb.data_size, sl->resp_mb.priv_lkey);
	sl->resp_epoch = rpc->tx_epoch;
}

/*
 * Tell the client that the large request in server slot @sl has been read
 * (its handler answers later). A copy may still be queued: it is the same
 * bytes, so it is built only once per request.
 */
static URPC_COLD void server_send_ack(struct urpc_rpc *rpc, struct urpc_session *s,
				      struct urpc_sslot *sl)
{
	if (!(sl->resent & URPC_RESENT_ACK)) {
		urpc__pkthdr_fill(&sl->ack_h, URPC_PKT_RESP, sl->h.req_type, 0, 0, s->remote_num,
				  sl->cur_req_num, s->token);
		sl->ack_h.flags = URPC_PKT_F_ACK;
		sl->resent |= URPC_RESENT_ACK;
	}
	urpc__rpc_tx_push(rpc, s->peer, &sl->ack_h, 0, 0);
	rpc->st.acks_sent++;
}

/* Answer the request in server slot @sl with error @err (a positive errno). */
static void server_error_resp(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			      uint8_t req_type, int err)
{
	urpc__pkthdr_fill(hdr_of(&sl->resp_mb), URPC_PKT_RESP, req_type, (uint16_t)err, 0,
			  s->remote_num, sl->cur_req_num, s->token);
	sl->resp_mb.data_size = 0;
	sl->srv_state = URPC_SRV_RESPONDED;
	server_send_resp(rpc, s, sl);
}

/*
 * Server slot @sl is about to take a new request: its stored response must
 * not be rewritten while a copy of it may still be read for sending, and a
 * large one is freed: the client has read it (it sends a new request on a
 * slot only after its previous one completed).
 */
static void server_retire_resp(struct urpc_rpc *rpc, struct urpc_sslot *sl)
{
	urpc__rpc_tx_forget(rpc, hdr_of(&sl->resp_mb), NULL);
	urpc__rpc_tx_forget(rpc, &sl->lpkt.h, NULL);
	if (sl->resent & URPC_RESENT_ACK)
		urpc__rpc_tx_forget(rpc, &sl->ack_h, NULL);
	if (sl->resent)
		rpc->tp->ops->tx_flush(rpc->tp);
	sl->resent = 0;
	if (sl->large_resp.buf)
		urpc__rpc_buf_release(rpc, &sl->large_resp);
}

/* Run the handler of the request in server slot @sl over @data. */
static void server_run_handler(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			       const struct urpc_handler *hd, uint8_t req_type, const uint8_t *data,
			       size_t len)
{
	sl->srv_state = URPC_SRV_IN_HANDLER;
	sl->resp_mb.data_size = 0;
	sl->h.rpc = rpc;
	sl->h.sess = s;
	sl->h.data = data;
	sl->h.len = len;
	sl->h.req_type = req_type;
	s->deferred++;
	rpc->st.reqs_handled++;
	rpc->in_cb++;
	hd->fn(&sl->h, hd->arg);
	rpc->in_cb--;
	/* The request bytes live in the RX ring or a read buffer: gone after this. */
	sl->h.data = NULL;
	sl->h.len = 0;
}

/*
 * A large request's descriptor: READ the payload into a buffer of ours; the
 * handler runs when it has arrived. False: dropped without taking the slot
 * (no operation or buffer free now; the client's retransmission brings it
 * again).
 */
static bool server_read_req(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			    const struct urpc_pkthdr *h, const uint8_t *data, uint32_t len)
{
	uint64_t prev = sl->cur_req_num, total;
	struct urpc_large_desc d;
	struct urpc_os_op *op;
	uint16_t i;
	int ret;

	if (unlikely(!desc_parse(rpc, data, len, &d)))
		return false;
	total = le64toh(d.len);
	sl->cur_req_num = le64toh(h->req_num);
	if (unlikely(!total || total > URPC_MAX_MSG_SIZE)) {
		server_error_resp(rpc, s, sl, h->req_type, EMSGSIZE);
		return true;
	}
	i = os_get(rpc);
	if (unlikely(i == URPC_OS_NIL))
		goto out_drop;
	op = &rpc->os[i];
	ret = urpc__pool_alloc(rpc->pool, (size_t)total, &op->buf);
	if (unlikely(ret)) {
		os_put(rpc, i);
		URPC_WARN_RATELIMIT(rpc->id, "no buffer for a %llu-byte request: %s",
				    (unsigned long long)total, urpc_strerror(ret));
		server_error_resp(rpc, s, sl, h->req_type, ENOMEM);
		return true;
	}
	ret = rpc->tp->ops->post_read(rpc->tp, s->peer, op->buf.buf,
				      urpc__pool_reg_handle(&op->buf), le64toh(d.addr),
				      le32toh(d.rkey), (size_t)total, i);
	if (unlikely(ret)) {
		urpc__pool_free(rpc->pool, &op->buf);
		os_put(rpc, i);
		if (ret == -EAGAIN)
			goto out_drop;
		server_error_resp(rpc, s, sl, h->req_type, -ret);
		return true;
	}
	op->kind = URPC_OS_SRV_REQ;
	op->sess_num = s->local_num;
	op->slot = sl->idx;
	op->req_num = sl->cur_req_num;
	op->len = (size_t)total;
	op->req_type = h->req_type;
	rpc->internal_bufs++;
	sl->srv_state = URPC_SRV_READING;
	return true;

out_drop:
	sl->cur_req_num = prev; /* not taken: its retransmission is new again */
	return false;
}

static void server_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		      const uint8_t *data, uint32_t len)
{
	uint64_t req_num = le64toh(h->req_num);
	struct urpc_sslot *sl = &s->slots[req_num & SLOT_MASK];
	const struct urpc_handler *hd;

	s->last_heard_ns = rpc->now;
	if (unlikely(req_num <= sl->cur_req_num)) {
		if (req_num == sl->cur_req_num && sl->srv_state != URPC_SRV_IDLE) {
			rpc->st.dup_reqs++;
			if (sl->srv_state == URPC_SRV_RESPONDED) {
				server_send_resp(rpc, s, sl);
				sl->resent |= URPC_RESENT_RESP;
			} else if (sl->srv_state == URPC_SRV_IN_HANDLER &&
				   (sl->resent & URPC_RESENT_ACK)) {
				server_send_ack(rpc, s, sl); /* the first one was lost */
			}
		} else {
			rpc->st.drop_stale++;
		}
		return;
	}
	if (unlikely(sl->srv_state == URPC_SRV_IN_HANDLER || sl->srv_state == URPC_SRV_READING)) {
		/*
		 * The client gave up on the slot's previous request (deadline)
		 * while its handler has not answered yet. The handle the
		 * application holds must keep naming that request: drop this
		 * one; the client retransmits it, and it runs once the old
		 * response is enqueued.
		 */
		rpc->st.drop_stale++;
		return;
	}
	if (unlikely(sl->resp_epoch == rpc->tx_epoch || sl->resent || sl->large_resp.buf))
		server_retire_resp(rpc, sl);

	hd = &rpc->handlers[h->req_type];
	if (unlikely(!hd->fn)) {
		rpc->st.unknown_req_type++;
		sl->cur_req_num = req_num;
		server_error_resp(rpc, s, sl, h->req_type, ENOENT);
		return;
	}
	if (unlikely(h->flags & URPC_PKT_F_LARGE)) {
		server_read_req(rpc, s, sl, h, data, len);
		return;
	}
	sl->cur_req_num = req_num;
	server_run_handler(rpc, s, sl, hd, h->req_type, data, len);
}

/*
 * A large response's descriptor arrived in client slot @sl: start reading
 * it into the slot's response buffer. Returns false when the READ is under
 * way or the descriptor was dropped (the retransmitted request brings it
 * again), true with *@st set when the request completes now with an error.
 */
static bool client_read_resp(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			     const uint8_t *data, uint32_t len, int *st)
{
	struct urpc_large_desc d;
	const void *mr;
	uint16_t i;
	int ret;

	if (unlikely(!desc_parse(rpc, data, len, &d)))
		return false;
	if (le64toh(d.len) > sl->resp->max_data_size || le64toh(d.len) > URPC_MAX_MSG_SIZE) {
		*st = -EMSGSIZE;
		return true;
	}
	mr = urpc__mb_mr(sl->resp);
	if (unlikely(!mr)) {
		*st = -EINVAL;
		return true;
	}
	i = os_get(rpc);
	if (unlikely(i == URPC_OS_NIL))
		return false;
	ret = rpc->tp->ops->post_read(rpc->tp, s->peer, urpc__mb_dma(sl->resp), mr, le64toh(d.addr),
				      le32toh(d.rkey), (size_t)le64toh(d.len), i);
	if (unlikely(ret)) {
		os_put(rpc, i);
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
	sl->reading = true;
	sl->os_idx = i;
	return false;
}

/*
 * The server has read the large request in client slot @sl: its buffer is
 * the application's again as far as the peer goes. A deadline that passed
 * meanwhile completes the request now.
 */
static URPC_COLD void client_ack(struct urpc_rpc *rpc, struct urpc_session *s,
				 struct urpc_sslot *sl, uint32_t len)
{
	if (unlikely(len || !sl->large_req)) {
		rpc->st.drop_bad_hdr++;
		return;
	}
	if (sl->req_acked) {
		rpc->st.dup_resps++;
		return;
	}
	sl->req_acked = true;
	rpc->st.acks_rx++;
	if (sl->late_status)
		complete(rpc, s, sl, sl->late_status);
}

/*
 * What client_rx does with anything but a plain answer: an error status, a
 * descriptor, an acknowledgement, a slot reading or past its deadline.
 * False: the datagram is consumed and the request goes on; true: complete
 * it with *@st.
 */
static URPC_COLD bool client_rx_slow(struct urpc_rpc *rpc, struct urpc_session *s,
				     struct urpc_sslot *sl, const struct urpc_pkthdr *h,
				     const uint8_t *data, uint32_t len, int *st)
{
	uint16_t status = le16toh(h->status);

	if (sl->reading) {
		rpc->st.dup_resps++; /* a resent descriptor while we read */
		return false;
	}
	if (h->flags & URPC_PKT_F_ACK) {
		client_ack(rpc, s, sl, len);
		return false;
	}
	if (sl->late_status) /* the deadline passed while the server read the request */
		*st = sl->late_status;
	else if (status)
		*st = -(int)status;
	else if (h->flags & URPC_PKT_F_LARGE)
		return client_read_resp(rpc, s, sl, data, len, st);
	else
		*st = -EPROTO; /* unknown flags */
	return true;
}

static void client_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		      const uint8_t *data, uint32_t len)
{
	uint64_t req_num = le64toh(h->req_num);
	struct urpc_sslot *sl = &s->slots[req_num & SLOT_MASK];
	int st = 0;

	s->last_heard_ns = rpc->now;
	if (unlikely(req_num != sl->cur_req_num || !sl->busy)) {
		if (req_num == sl->cur_req_num)
			rpc->st.dup_resps++;
		else
			rpc->st.drop_stale++;
		return;
	}
	/* One test for everything but a plain answer. */
	if (unlikely((h->status | h->flags | sl->reading | sl->late_status) != 0)) {
		if (!client_rx_slow(rpc, s, sl, h, data, len, &st))
			return;
	} else if (unlikely(len > sl->resp->max_data_size)) {
		st = -EMSGSIZE;
	} else if (unlikely(urpc__mb_gpu(sl->resp))) {
		st = urpc__cuda_copy_to_device(sl->resp->buf, data, len) ? -EIO : 0;
		sl->resp->data_size = len;
	} else {
		memcpy(sl->resp->buf, data, len);
		sl->resp->data_size = len;
	}
	rpc->st.resps_rx++;
	complete(rpc, s, sl, st);
}

/*
 * Count a datagram that failed the fast check of urpc__dp_rx, in the order
 * of docs/ENGINE.md: a bad header first, else a bad session (unknown,
 * wrong role, not connected, or wrong token).
 */
static void rx_drop(struct urpc_rpc *rpc, const struct urpc_pkthdr *h, uint32_t len)
{
	if (!urpc__pkthdr_ok(h, len))
		rpc->st.drop_bad_hdr++;
	else
		rpc->st.drop_bad_session++;
}

void urpc__dp_rx(struct urpc_rpc *rpc, const uint8_t *buf, uint32_t len)
{
	const struct urpc_pkthdr *h = (const struct urpc_pkthdr *)(const void *)buf;
	struct urpc_session *s;
	uint32_t num;

	if (unlikely(len < sizeof(*h))) {
		rpc->st.drop_bad_hdr++;
		return;
	}
	/*
	 * One pass over every check: the first word holds magic, version and
	 * packet type, and the session's rx_word also encodes its role. The
	 * slow path (rx_drop) sorts a failure into its counter.
	 */
	num = le32toh(h->dest_session);
	s = likely(num < rpc->hi_session) ? rpc->sessions[num] : NULL;
	if (unlikely(!s || urpc__pkthdr_word(h) != s->rx_word ||
		     le32toh(h->msg_size) != len - sizeof(*h) || s->token != le64toh(h->token) ||
		     s->state != URPC_SESS_CONNECTED)) {
		rx_drop(rpc, h, len);
		return;
	}
	if (s->role == URPC_ROLE_SERVER)
		server_rx(rpc, s, h, buf + sizeof(*h), len - (uint32_t)sizeof(*h));
	else
		client_rx(rpc, s, h, buf + sizeof(*h), len - (uint32_t)sizeof(*h));
}

/* ---- the handler's side ---- */

URPC_API const uint8_t *urpc_req_data(const struct urpc_req_handle *h, size_t *len)
{
	if (unlikely(!h)) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = h->len;
	return h->data;
}

URPC_API int urpc_req_copy_data(const struct urpc_req_handle *h, void *dst, size_t len)
{
	if (unlikely(!h))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(h->rpc)))
		return -EPERM;
	if (!dst || !h->data)
		return -EINVAL;
	if (len < h->len)
		return -EMSGSIZE;
	if (urpc__cuda_is_loaded() && urpc__cuda_is_device_ptr(dst))
		return urpc__cuda_copy_to_device(dst, h->data, h->len) ? -EIO : (int)h->len;
	memcpy(dst, h->data, h->len);
	return (int)h->len;
}

URPC_API uint8_t urpc_req_type(const struct urpc_req_handle *h)
{
	return h ? h->req_type : 0;
}

URPC_API struct urpc_rpc *urpc_req_rpc(const struct urpc_req_handle *h)
{
	return h ? h->rpc : NULL;
}

URPC_API struct urpc_msgbuf *urpc_req_resp_msgbuf(struct urpc_req_handle *h)
{
	if (unlikely(!h))
		return NULL;
	return &container_of(h, struct urpc_sslot, h)->resp_mb;
}

/*
 * The handler of server slot @sl has answered: false when the answer may be
 * sent; true when the session was reset meanwhile, the answer is dropped and
 * the session freed with its last deferred answer.
 */
static inline bool resp_dropped(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl)
{
	s->deferred--;
	if (likely(s->state == URPC_SESS_CONNECTED))
		return false;
	sl->srv_state = URPC_SRV_IDLE;
	if (sl->large_resp.buf)
		urpc__rpc_buf_release(rpc, &sl->large_resp);
	if (!s->deferred)
		urpc__session_free(rpc, s);
	return true;
}

/*
 * The answer in @resp (GPU memory, taken by the library) could not be
 * copied out of the GPU (@err): send no bytes the GPU did not hold. @resp is
 * given back and the client's request answered with EIO instead.
 */
static URPC_COLD void resp_copy_failed(struct urpc_rpc *rpc, struct urpc_session *s,
				       struct urpc_sslot *sl, struct urpc_msgbuf *resp, int err)
{
	URPC_WARN_RATELIMIT(rpc->id, "copying a %zu-byte response out of GPU memory failed: %s",
			    resp->data_size, urpc_strerror(err));
	urpc__rpc_buf_release(rpc, resp);
	if (!resp_dropped(rpc, s, sl))
		server_error_resp(rpc, s, sl, sl->h.req_type, EIO);
}

/*
 * The response the handler gave for server slot @sl cannot be sent (@err:
 * -EMSGSIZE, too long for its buffer or the limit; -EINVAL, not a buffer
 * the library can send from): answer the request with the error instead
 * (EMSGSIZE, or EIO), so that the client is not left waiting and the slot
 * takes requests again. Returns @err for the handler. Cold.
 */
static URPC_COLD int resp_refused(struct urpc_rpc *rpc, struct urpc_session *s,
				  struct urpc_sslot *sl, int err)
{
	URPC_WARN_RATELIMIT(rpc->id,
			    "a type %u handler's response cannot be sent (%s): the client gets %s",
			    sl->h.req_type, urpc_strerror(err),
			    urpc_strerror(err == -EMSGSIZE ? -EMSGSIZE : -EIO));
	if (!resp_dropped(rpc, s, sl))
		server_error_resp(rpc, s, sl, sl->h.req_type, err == -EMSGSIZE ? EMSGSIZE : EIO);
	return err;
}

/*
 * The application's own buffer or view @resp answers the request in server
 * slot @sl: the library takes it, copied into the slot's buffer when it fits
 * a datagram, else kept as the large stored response. Returns 0 (send it),
 * 1 (taken, but answered with EIO already: a GPU copy failed), or -EINVAL
 * (not a buffer of this Rpc's, or lent to a request) or -EMSGSIZE (longer
 * than its capacity or the limit), not taken. Cold: out of the way of the
 * slot's own buffer.
 */
static URPC_COLD int resp_take(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			       struct urpc_msgbuf *resp)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(resp);
	int ret = 0;

	if (!resp->buf || !urpc__mb_peer_readable(resp) || urpc__rpc_mb_is_lent(rpc, resp) ||
	    (!urpc__mb_is_view(resp) && !urpc__pool_is_out(rpc->pool, resp)))
		return -EINVAL;
	if (resp->data_size > resp->max_data_size || resp->data_size > URPC_MAX_MSG_SIZE)
		return -EMSGSIZE;
	if (!urpc__mb_is_view(resp))
		rpc->internal_bufs++; /* the library's now */
	if (resp->data_size <= rpc->max_msg) {
		if (g)
			ret = urpc__cuda_copy_to_host(sl->resp_mb.buf, resp->buf, resp->data_size);
		else
			memcpy(sl->resp_mb.buf, resp->buf, resp->data_size);
	} else if (g && g->host) {
		/* Staging: the client READs the pinned copy. */
		ret = urpc__cuda_copy_to_host(g->host, resp->buf, resp->data_size);
	}
	if (unlikely(ret)) {
		resp_copy_failed(rpc, s, sl, resp, ret);
		return 1;
	}
	if (resp->data_size <= rpc->max_msg) {
		sl->resp_mb.data_size = resp->data_size;
		urpc__rpc_buf_release(rpc, resp);
	} else {
		sl->large_resp = *resp;
		memset(resp, 0, sizeof(*resp));
		/* The library's allocation now: copies the handler kept are stale. */
		if (!urpc__mb_is_view(&sl->large_resp))
			urpc__pool_restamp(rpc->pool, &sl->large_resp);
	}
	return 0;
}

URPC_API int urpc_resp_enqueue(struct urpc_req_handle *h, struct urpc_msgbuf *resp)
{
	struct urpc_sslot *sl;
	struct urpc_session *s;
	struct urpc_rpc *rpc;
	int ret;

	if (unlikely(!h))
		return -EINVAL;
	sl = container_of(h, struct urpc_sslot, h);
	rpc = h->rpc;
	s = h->sess;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (unlikely(sl->srv_state != URPC_SRV_IN_HANDLER))
		return -EINVAL;
	if (unlikely(resp != &sl->resp_mb)) {
		ret = resp ? resp_take(rpc, s, sl, resp) : -EINVAL;
		if (ret)
			return ret < 0 ? resp_refused(rpc, s, sl, ret) : 0;
	} else if (unlikely(resp->data_size > rpc->max_msg)) {
		return resp_refused(rpc, s, sl, -EMSGSIZE);
	}
	/* Reset while the response was deferred: dropped. */
	if (unlikely(resp_dropped(rpc, s, sl)))
		return 0;
	if (unlikely(sl->large_resp.buf))
		large_pkt_fill(sl, URPC_PKT_RESP, h->req_type, &sl->large_resp, s->remote_num,
			       sl->cur_req_num, s->token);
	else
		urpc__pkthdr_fill(hdr_of(&sl->resp_mb), URPC_PKT_RESP, h->req_type, 0,
				  (uint32_t)sl->resp_mb.data_size, s->remote_num, sl->cur_req_num,
				  s->token);
	sl->srv_state = URPC_SRV_RESPONDED;
	server_send_resp(rpc, s, sl);
	return 0;
}

/* ---- completions of large messages ---- */

/* The READ of a large request finished: run its handler, or answer the error. */
static void srv_req_done(struct urpc_rpc *rpc, struct urpc_os_op *op, int status)
{
	struct urpc_session *s = rpc->sessions[op->sess_num];
	struct urpc_sslot *sl = &s->slots[op->slot];

	if (unlikely(status)) {
		URPC_WARN_RATELIMIT(rpc->id, "reading a %zu-byte request failed: %s", op->len,
				    urpc_strerror(status));
		server_error_resp(rpc, s, sl, op->req_type, status == -EACCES ? EACCES : EIO);
		return;
	}
	server_run_handler(rpc, s, sl, &rpc->handlers[op->req_type], op->req_type, op->buf.buf,
			   op->len);
	/* Deferred: let the client's deadline free its buffer meanwhile. */
	if (sl->srv_state == URPC_SRV_IN_HANDLER && s->state == URPC_SESS_CONNECTED)
		server_send_ack(rpc, s, sl);
}

/* The READ of a large response finished: complete the request. */
static void cli_resp_done(struct urpc_rpc *rpc, struct urpc_os_op *op, int status)
{
	struct urpc_session *s = rpc->sessions[op->sess_num];
	struct urpc_sslot *sl = &s->slots[op->slot];

	sl->reading = false;
	if (!status)
		status = sl->late_status;
	if (!status && urpc__mb_gpu(sl->resp) && urpc__mb_gpu(sl->resp)->host &&
	    urpc__cuda_copy_to_device(sl->resp->buf, urpc__mb_gpu(sl->resp)->host, op->len))
		status = -EIO; /* staging into GPU memory failed */
	if (!status)
		sl->resp->data_size = op->len;
	rpc->st.resps_rx++;
	complete(rpc, s, sl, status);
}

/*
 * A completion whose wr_id names no operation in flight (beyond the table,
 * or a free entry): a transport bug. Counted, logged and ignored.
 */
static URPC_COLD void bad_comp(struct urpc_rpc *rpc, const struct urpc_tp_comp *c)
{
	rpc->st.drop_bad_comp++;
	URPC_WARN_RATELIMIT(rpc->id, "a %s completion names no operation in flight (wr_id %llu)",
			    urpc__tp_op_str(c->op), (unsigned long long)c->wr_id);
}

void urpc__dp_poll_os(struct urpc_rpc *rpc)
{
	struct urpc_tp_comp c[16];
	int n, k;

	n = rpc->tp->ops->poll_completions(rpc->tp, c, 16);
	for (k = 0; k < n; k++) {
		struct urpc_os_op *op;
		struct urpc_msgbuf buf;
		uint16_t i;

		/* The bound first: nothing of os[] is read for a wr_id beyond it. */
		if (unlikely(c[k].wr_id >= URPC_OS_OPS || !rpc->os[c[k].wr_id].busy)) {
			bad_comp(rpc, &c[k]);
			continue;
		}
		i = (uint16_t)c[k].wr_id;
		op = &rpc->os[i];
		buf = op->buf;
		/* Free the entry first: what runs below may start new operations. */
		memset(&op->buf, 0, sizeof(op->buf));
		if (op->kind == URPC_OS_SRV_REQ) {
			if (!op->orphan) {
				op->buf = buf; /* the handler's view, freed right after */
				srv_req_done(rpc, op, c[k].status);
			}
			urpc__pool_free(rpc->pool, &buf);
			rpc->internal_bufs--;
			os_put(rpc, i);
		} else if (op->orphan) {
			os_put(rpc, i);
			os_lend(rpc, op, -1);
			run_cont(rpc, op->cont, op->tag, op->status, op->resp);
		} else {
			struct urpc_os_op copy = *op;

			os_put(rpc, i);
			cli_resp_done(rpc, &copy, c[k].status);
		}
	}
}

void urpc__dp_session_gone(struct urpc_rpc *rpc, struct urpc_session *s)
{
	unsigned i;

	for (i = 0; i < URPC_OS_OPS; i++) {
		struct urpc_os_op *op = &rpc->os[i];

		if (!op->busy || op->orphan || op->sess_num != s->local_num)
			continue;
		if (op->kind == URPC_OS_CLI_RESP) {
			struct urpc_sslot *sl = &s->slots[op->slot];

			/* Not failed before (fail_all orphans what it finds). */
			orphan_client_op(rpc, sl, -ECONNRESET);
		} else {
			op->orphan = true;
		}
	}
	for (i = 0; i < URPC_SESSION_SLOTS; i++) {
		struct urpc_sslot *sl = &s->slots[i];

		if (sl->large_resp.buf) {
			urpc__rpc_tx_forget(rpc, &sl->lpkt.h, NULL);
			urpc__rpc_buf_release(rpc, &sl->large_resp);
		}
	}
}

bool urpc__dp_session_reading(const struct urpc_rpc *rpc, const struct urpc_session *s)
{
	unsigned i;

	if (!rpc->os_busy)
		return false;
	for (i = 0; i < URPC_OS_OPS; i++) {
		const struct urpc_os_op *op = &rpc->os[i];

		if (op->busy && op->kind == URPC_OS_CLI_RESP && op->sess_num == s->local_num)
			return true;
	}
	return false;
}

void urpc__dp_drain_os(struct urpc_rpc *rpc)
{
	uint64_t end = urpc__now_ns() + 5000000000ull;
	struct urpc_tp_rx rx[URPC_RX_BATCH];
	int n;

	while (rpc->os_busy && urpc__now_ns() < end) {
		/* loop and udp serve peers' operations inside rx_burst() */
		n = rpc->tp->ops->rx_burst(rpc->tp, rx, URPC_RX_BATCH);
		if (n > 0)
			rpc->tp->ops->rx_release(rpc->tp, rx, (unsigned)n);
		urpc__dp_poll_os(rpc);
	}
	if (rpc->os_busy)
		URPC_ERR(rpc->id, "%u one-sided operations never completed", rpc->os_busy);
}
