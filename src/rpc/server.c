/* SPDX-License-Identifier: MIT */
/*
 * The server's side of the datapath (server.h). Owns server slots: their
 * request numbers, states, stored responses and the handle a handler gets;
 * and the deferred count of a server session.
 * May call: server_read.h (a large request's READ), large.h (descriptors,
 * grants, operations), msgbuf.h (responses given by the application, GPU
 * staging), session_table.h (a reset session is freed with its last
 * deferred answer), tx.h, cc_sess.h (the fair share its answers echo), the
 * pool, the transport's tx_flush, the CUDA loader (urpc_req_copy_data()
 * into device memory). Buffers come from
 * the pool, never at a session's creation: a slot's response buffer with
 * its first request (then kept, freed with the session: one allocation per
 * slot, not per request), a large request's with its descriptor.
 */
#define URPC_LOG_MODULE "server"
#include "server.h"

#include <errno.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "cc_sess.h"
#include "deadline.h"
#include "large.h"
#include "msgbuf.h"
#include "server_read.h"
#include "session_table.h"
#include "states.h"
#include "tx.h"

/* A large stored response is its descriptor in h.priv_resp; each copy with the fair share. */
static inline URPC_ALWAYS_INLINE void server_send_resp(struct urpc_rpc *rpc, struct urpc_session *s,
						       struct urpc_sslot *sl)
{
	struct urpc_pkthdr *h = urpc__cc_srv_echo(rpc, urpc__mb_hdr(&sl->h.priv_resp));
	bool queued = urpc__tx_push(rpc, s->peer, h, (uint32_t)sl->h.priv_resp.data_size,
				    sl->h.priv_resp.priv_lkey);

	sl->resp_epoch = queued ? rpc->tx_epoch : 0;
}

/*
 * Tell the client that the large request in server slot @sl has been read
 * (its handler answers later). The ack is built in the header room of the
 * slot's buffer, which no response uses until the handler answers. A copy
 * may still be queued: it is the same bytes, so it is built only once per
 * request.
 */
static URPC_COLD void server_send_ack(struct urpc_rpc *rpc, struct urpc_session *s,
				      struct urpc_sslot *sl)
{
	struct urpc_pkthdr *ack = urpc__mb_hdr(&sl->h.priv_resp);

	if (!(sl->resent & URPC_RESENT_ACK)) {
		urpc__pkthdr_fill(ack, URPC_PKT_RESP, sl->h.priv_req_type, 0, 0, s->remote_num,
				  sl->cur_req_num, s->token);
		ack->flags = URPC_PKT_F_ACK;
		sl->resent |= URPC_RESENT_ACK;
	}
	urpc__tx_push(rpc, s->peer, ack, 0, sl->h.priv_resp.priv_lkey);
	rpc->st.acks_sent++;
}

/*
 * The handler of server slot @sl answers a large request that was acked:
 * the ack's header room takes the answer's header now, so no copy of the
 * ack may still be queued or in flight. Cold.
 */
static URPC_COLD void server_drop_ack(struct urpc_rpc *rpc, struct urpc_sslot *sl)
{
	urpc__tx_forget(rpc, urpc__mb_hdr(&sl->h.priv_resp), NULL);
	rpc->tp->ops->tx_flush(rpc->tp);
	sl->resent &= (uint8_t)~URPC_RESENT_ACK;
}

/* Answer the request in server slot @sl with error @err (a positive errno). */
static void server_error_resp(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			      uint8_t req_type, int err)
{
	if (unlikely(sl->resent & URPC_RESENT_ACK))
		server_drop_ack(rpc, sl);
	urpc__pkthdr_fill(urpc__mb_hdr(&sl->h.priv_resp), URPC_PKT_RESP, req_type, (uint16_t)err, 0,
			  s->remote_num, sl->cur_req_num, s->token);
	sl->h.priv_resp.data_size = 0;
	urpc__srv_set(rpc, sl, URPC_SRV_RESPONDED);
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
	/* The ack and a large response's descriptor were queued from there too. */
	urpc__tx_forget(rpc, urpc__mb_hdr(&sl->h.priv_resp), NULL);
	if (sl->resent)
		rpc->tp->ops->tx_flush(rpc->tp);
	sl->resent = 0;
	if (sl->large)
		urpc__srv_large_retire(rpc, sl);
}

static __attribute__((noinline)) int resp_enqueue(struct urpc_req_handle *h,
						  struct urpc_msgbuf *resp);

/*
 * The handler of server slot @sl answered inline (urpc_resp_enqueue() in
 * urpc.h: its own thread, the preallocated buffer, within its capacity):
 * send the answer now that it has returned. The plain case is done here;
 * anything else (longer than a datagram, the session reset meanwhile) is
 * resp_enqueue()'s, as if the handler had called it.
 */
static inline URPC_ALWAYS_INLINE void server_answer(struct urpc_rpc *rpc, struct urpc_session *s,
						    struct urpc_sslot *sl)
{
	struct urpc_msgbuf *resp = &sl->h.priv_resp;
	/* Read once: the header's store below may alias them for the compiler. */
	struct urpc_pkthdr *hdr = urpc__mb_hdr(resp);
	size_t len = resp->data_size;
	uint32_t lkey = resp->priv_lkey;

	/*
	 * No large response or resent copy: the slot had none when the handler
	 * started (srv_rx retired them), and only resp_enqueue() makes one,
	 * which takes the inline answer away (priv_answer NULL).
	 */
	if (unlikely(len > rpc->max_msg || s->state != URPC_SESS_CONNECTED)) {
		sl->h.priv_answer = &urpc_priv_thread_tag; /* as if called inside the handler */
		(void)resp_enqueue(&sl->h, resp);
		return;
	}
	urpc__srv_set(rpc, sl, URPC_SRV_RESPONDED);
	urpc__pkthdr_patch(hdr, &s->tx_hdr, sl->h.priv_req_type, (uint32_t)len, sl->cur_req_num);
	/*
	 * server_send_resp() with the values read above. Sent at once: the
	 * epoch stays 0, as every write of it leaves it on an Rpc whose
	 * transport sends at once (tx_now, fixed for the Rpc's life).
	 */
	if (urpc__tx_push(rpc, s->peer, hdr, (uint32_t)len, lkey))
		sl->resp_epoch = rpc->tx_epoch;
}

/*
 * Run the handler of the request in server slot @sl (in state @from) over
 * @data, and send the answer it gave inline. It may answer through the
 * library's path instead (sent at once), or later (deferred).
 */
static inline URPC_ALWAYS_INLINE void
server_run_handler(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
		   enum urpc_srv_state from, const struct urpc_handler *hd, uint8_t req_type,
		   const uint8_t *data, size_t len)
{
	const void *answer;

	urpc__srv_step(rpc, sl, from, URPC_SRV_IN_HANDLER);
	sl->h.priv_resp.data_size = 0;
	/* h.priv_rpc and h.priv_sess are the slot's own: server_slot_buf(). */
	sl->h.priv_data = data;
	sl->h.priv_len = len;
	sl->h.priv_req_type = req_type;
	/* The owner's (this thread's) tag: it may answer inline (urpc_resp_enqueue() in urpc.h). */
	sl->h.priv_answer = rpc->owner_tag;
	rpc->st.reqs_handled++;
	/* Not counted in in_cb: handlers run inside a pass, where in_loop bars the loop and destroy. */
	hd->fn(&sl->h, hd->arg);
	/* The request bytes live in the RX ring or a read buffer: gone after this. */
	sl->h.priv_data = NULL;
	sl->h.priv_len = 0;
	answer = sl->h.priv_answer;
	if (likely(answer == &sl->h)) {
		server_answer(rpc, s, sl);
	} else if (answer) {
		/* Not answered: deferred. Its answer takes the library's path. */
		sl->h.priv_answer = NULL;
		if (unlikely(sl->h.priv_budget)) /* the client's deadline, no longer relative */
			sl->h.priv_budget = urpc__dl_pack(rpc->now, sl->h.priv_budget);
		s->srv.deferred++;
		rpc->srv_deferred++;
	}
}

/*
 * Give server slot @sl, about to take its first request, the buffer its
 * responses are built and stored in. False when the pool has none: the
 * request is dropped without taking the slot, and the client's
 * retransmission tries again. Cold: once per slot.
 */
static URPC_COLD bool server_slot_buf(struct urpc_rpc *rpc, struct urpc_session *s,
				      struct urpc_sslot *sl)
{
	int ret = urpc__pool_alloc(rpc->pool, rpc->max_msg, &sl->h.priv_resp);

	if (unlikely(ret)) {
		rpc->st.drop_no_buf++;
		URPC_WARN_RATELIMIT(rpc->id,
				    "no response buffer for a request (%s): dropped, the client "
				    "retransmits; the Rpc's message-buffer pool is capped at 1 GiB",
				    urpc_strerror(ret));
		return false;
	}
	/*
	 * Its capacity is one datagram's payload, as urpc_req_resp_msgbuf()
	 * promises, not the pool class's rounded-up size: a handler that
	 * trusts max_data_size must not resize it to what urpc_resp_enqueue()
	 * refuses. The class is still found from it.
	 */
	sl->h.priv_resp.max_data_size = rpc->max_msg;
	/*
	 * Its header room holds the session's header from now on: every header
	 * built there (answers, errors, acks, descriptors) has the same type,
	 * destination and token, so a plain answer only patches the rest.
	 */
	*urpc__mb_hdr(&sl->h.priv_resp) = s->tx_hdr;
	/* The library's for good: urpc_msgbuf_free() refuses it. */
	sl->h.priv_resp.priv_sess = URPC_MB_SESS_LIBRARY;
	/* What a handler's handle names never changes: set once, not per request. */
	sl->h.priv_rpc = rpc;
	sl->h.priv_sess = s;
	rpc->st.resp_bufs++;
	return true;
}

void urpc__srv_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		  const uint8_t *data, uint32_t len)
{
	uint64_t req_num = le64toh(h->req_num);
	struct urpc_sslot *sl = &s->srv.slots[req_num & s->slot_mask];
	const struct urpc_handler *hd;
	enum urpc_srv_state st;

	URPC_KEEP(sl);
	if (unlikely(req_num <= sl->cur_req_num)) {
		if (req_num == sl->cur_req_num && sl->state != URPC_SRV_IDLE) {
			rpc->st.dup_reqs++;
			if (sl->state == URPC_SRV_RESPONDED) {
				server_send_resp(rpc, s, sl);
				sl->resent |= URPC_RESENT_RESP;
			} else if (sl->state == URPC_SRV_IN_HANDLER &&
				   (sl->resent & URPC_RESENT_ACK)) {
				server_send_ack(rpc, s, sl); /* the first one was lost */
			}
		} else {
			rpc->st.drop_stale++;
		}
		return;
	}
	st = sl->state; /* nothing below changes it before the handler's step */
	if (unlikely(!((1u << st) & (1u << URPC_SRV_IDLE | 1u << URPC_SRV_RESPONDED)))) {
		if (st == URPC_SRV_IN_HANDLER || st == URPC_SRV_READING) {
			/*
			 * The client gave up on the slot's previous request
			 * (deadline) while its handler has not answered yet.
			 * The handle the application holds must keep naming
			 * that request: drop this one; the client retransmits
			 * it, and it runs once the old response is enqueued.
			 */
			rpc->st.drop_stale++;
			return;
		}
		/* Out of range (a bug): reported as the step's check would, then taken as idle. */
		urpc__bad_transition(rpc, "server", urpc__srv_state_str(st),
				     urpc__srv_state_str(URPC_SRV_IN_HANDLER));
		st = URPC_SRV_IDLE;
	}
	/*
	 * From here the handler's step starts in one of the two states that
	 * may take a request: said as a constant, its check folds away (one
	 * test above instead of two: 2 instructions a request).
	 */
	st = st == URPC_SRV_IDLE ? URPC_SRV_IDLE : URPC_SRV_RESPONDED;
	if (unlikely(!sl->h.priv_resp.buf) && !server_slot_buf(rpc, s, sl))
		return;
	if (unlikely(sl->resp_epoch == rpc->tx_epoch || (sl->resent | (uintptr_t)sl->large)))
		server_retire_resp(rpc, sl);

	urpc__cc_srv_seen(rpc, s, urpc__mb_hdr(&sl->h.priv_resp), len + (uint32_t)sizeof(*h));
	hd = &rpc->handlers[h->req_type];
	if (unlikely(!hd->fn)) {
		rpc->st.unknown_req_type++;
		sl->cur_req_num = req_num;
		server_error_resp(rpc, s, sl, h->req_type, ENOSYS);
		return;
	}
	if (unlikely(h->flags & URPC_PKT_F_LARGE)) {
		int err = urpc__srv_read_req(rpc, s, sl, h, data, len);

		if (unlikely(err))
			server_error_resp(rpc, s, sl, h->req_type, err);
		return;
	}
	sl->cur_req_num = req_num;
	sl->h.priv_budget = le32toh(h->budget_us);
	server_run_handler(rpc, s, sl, st, hd, h->req_type, data, len);
}

/* ---- the handler's side (urpc_req_data() and urpc_req_resp_msgbuf() are inline, urpc.h) ---- */

URPC_API int urpc_req_copy_data(const struct urpc_req_handle *h, void *dst, size_t len)
{
	if (unlikely(!h))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(h->priv_rpc)))
		return -EPERM;
	if (!dst || !h->priv_data)
		return -EINVAL;
	if (len < h->priv_len)
		return -EMSGSIZE;
	if (urpc__cuda_is_loaded() && urpc__cuda_is_device_ptr(dst)) {
		if (urpc__cuda_copy_to_device(dst, h->priv_data, h->priv_len))
			return -EIO;
	} else {
		memcpy(dst, h->priv_data, h->priv_len);
	}
	return (int)h->priv_len;
}

URPC_API uint8_t urpc_req_type(const struct urpc_req_handle *h)
{
	return h ? h->priv_req_type : 0;
}

URPC_API struct urpc_rpc *urpc_req_rpc(const struct urpc_req_handle *h)
{
	return h ? h->priv_rpc : NULL;
}

/*
 * The handler of server slot @sl has answered: false when the answer may be
 * sent; true when the session was reset meanwhile, the answer is dropped and
 * the session freed with its last deferred answer.
 */
static inline bool resp_dropped(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl)
{
	s->srv.deferred--;
	rpc->srv_deferred--;
	if (likely(s->state == URPC_SESS_CONNECTED))
		return false;
	urpc__srv_set(rpc, sl, URPC_SRV_IDLE);
	urpc__srv_large_free(rpc, sl); /* never granted */
	if (!s->srv.deferred)
		urpc__sess_free(rpc, s);
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
	urpc__mb_release(rpc, resp);
	if (!resp_dropped(rpc, s, sl))
		server_error_resp(rpc, s, sl, sl->h.priv_req_type, EIO);
}

/*
 * The response the handler gave for server slot @sl cannot be sent (@err:
 * -EMSGSIZE, too long for its buffer or the limit; -EINVAL, not a buffer
 * the library can send from; -ENOMEM, no room to store it): answer the request with the error instead
 * (EMSGSIZE, or EIO), so that the client is not left waiting and the slot
 * takes requests again. Returns @err for the handler. Cold.
 */
static URPC_COLD int resp_refused(struct urpc_rpc *rpc, struct urpc_session *s,
				  struct urpc_sslot *sl, int err)
{
	URPC_WARN_RATELIMIT(rpc->id,
			    "a type %u handler's response cannot be sent (%s): the client gets %s",
			    sl->h.priv_req_type, urpc_strerror(err),
			    urpc_strerror(err == -EMSGSIZE ? -EMSGSIZE : -EIO));
	if (!resp_dropped(rpc, s, sl))
		server_error_resp(rpc, s, sl, sl->h.priv_req_type,
				  err == -EMSGSIZE ? EMSGSIZE : EIO);
	return err;
}

/*
 * The application's own buffer or view @resp answers the request in server
 * slot @sl: the library takes it, copied into the slot's buffer when it fits
 * a datagram, else kept as the large stored response. Returns 0 (send it),
 * 1 (taken, but answered with EIO already: a GPU copy failed), or -EINVAL
 * (not a buffer of this Rpc's, or lent to a request), -EMSGSIZE (longer
 * than its capacity or the limit) or -ENOMEM (no room to store a large
 * one), not taken. Cold: out of the way of the
 * slot's own buffer.
 */
static URPC_COLD int resp_take(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
			       struct urpc_msgbuf *resp)
{
	int ret;

	if (!resp->buf || !urpc__mb_peer_readable(resp) || urpc__mb_is_lent(rpc, resp) ||
	    (!urpc__mb_is_view(resp) && !urpc__pool_is_out(rpc->pool, resp)))
		return -EINVAL;
	if (resp->data_size > resp->max_data_size || resp->data_size > URPC_MAX_MSG_SIZE)
		return -EMSGSIZE;
	if (resp->data_size <= rpc->max_msg)
		ret = urpc__mb_copy_out(sl->h.priv_resp.buf, resp, resp->data_size);
	else
		ret = urpc__mb_stage_out(resp); /* the client READs the staging copy */
	if (unlikely(ret)) {
		resp_copy_failed(rpc, s, sl, resp, ret);
		return 1;
	}
	if (resp->data_size > rpc->max_msg)
		return urpc__srv_large_take(rpc, sl, resp);
	sl->h.priv_resp.data_size = resp->data_size;
	urpc__mb_release(rpc, resp);
	return 0;
}

/*
 * urpc_resp_enqueue() in full: every check with its error, buffers of the
 * application's, large responses, a session reset meanwhile. The public
 * call takes the common case itself and comes here for everything else.
 */
static __attribute__((noinline)) int resp_enqueue(struct urpc_req_handle *h,
						  struct urpc_msgbuf *resp)
{
	struct urpc_sslot *sl;
	struct urpc_session *s;
	struct urpc_rpc *rpc;
	int ret;

	if (unlikely(!h))
		return -EINVAL;
	sl = container_of(h, struct urpc_sslot, h);
	rpc = h->priv_rpc;
	s = h->priv_sess;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	/* Answered already, or inline and not yet sent (the handler still runs). */
	if (unlikely(sl->state != URPC_SRV_IN_HANDLER || h->priv_answer == h))
		return -EINVAL;
	if (h->priv_answer) {
		/*
		 * From inside the handler: counted as deferred from here (the
		 * handler's return finds nothing to send or count).
		 */
		h->priv_answer = NULL;
		s->srv.deferred++;
		rpc->srv_deferred++;
	}
	if (unlikely(resp != &sl->h.priv_resp)) {
		ret = resp ? resp_take(rpc, s, sl, resp) : -EINVAL;
		if (ret)
			return ret < 0 ? resp_refused(rpc, s, sl, ret) : 0;
	} else if (unlikely(resp->data_size > rpc->max_msg)) {
		return resp_refused(rpc, s, sl, -EMSGSIZE);
	}
	/* Reset while the response was deferred: dropped. */
	if (unlikely(resp_dropped(rpc, s, sl)))
		return 0;
	if (unlikely(sl->resent & URPC_RESENT_ACK))
		server_drop_ack(rpc, sl);
	if (unlikely(sl->large)) {
		/* The client may READ exactly these bytes while they are stored. */
		if (unlikely(urpc__grant_read(rpc, s, &sl->large->resp, &sl->large->grant))) {
			urpc__srv_large_free(rpc, sl);
			server_error_resp(rpc, s, sl, h->priv_req_type, EIO);
			return 0;
		}
		urpc__large_pkt_fill(urpc__sslot_lpkt(sl), URPC_PKT_RESP, h->priv_req_type,
				     &sl->large->grant, s->remote_num, sl->cur_req_num, s->token);
		sl->h.priv_resp.data_size = sizeof(struct urpc_large_desc);
	} else
		urpc__pkthdr_from(urpc__mb_hdr(&sl->h.priv_resp), &s->tx_hdr, h->priv_req_type,
				  (uint32_t)sl->h.priv_resp.data_size, sl->cur_req_num);
	urpc__srv_set(rpc, sl, URPC_SRV_RESPONDED);
	server_send_resp(rpc, s, sl);
	return 0;
}

/*
 * urpc_resp_enqueue() (urpc.h) but for its inline case. Here too the common
 * case of a deferred answer is taken first.
 */
URPC_API int urpc_priv_resp_enqueue(struct urpc_req_handle *h, struct urpc_msgbuf *resp)
{
	struct urpc_pkthdr *hdr;
	struct urpc_sslot *sl;
	struct urpc_session *s;
	struct urpc_rpc *rpc;

	/*
	 * The common case, tested here with nothing else on the way, so that
	 * this path needs no stack frame (callgrind on urpc-cpu-cost: 80
	 * instructions per call before): the owner answers a deferred request
	 * (no handler running, priv_answer NULL) with the slot's own buffer,
	 * small, while the session is connected, no ack is queued and the TX
	 * batch has room. Anything else, every bad argument included, takes
	 * the full path, which tells what is wrong.
	 */
	if (unlikely(!h))
		goto full;
	sl = container_of(h, struct urpc_sslot, h);
	rpc = h->priv_rpc;
	s = h->priv_sess;
	if (unlikely(!urpc__rpc_is_owner(rpc) || sl->state != URPC_SRV_IN_HANDLER ||
		     h->priv_answer || resp != &sl->h.priv_resp || resp->data_size > rpc->max_msg ||
		     s->state != URPC_SESS_CONNECTED || sl->large || sl->resent ||
		     rpc->ntx == URPC_TX_BATCH))
		goto full;
	urpc__srv_set(rpc, sl, URPC_SRV_RESPONDED); /* from IN_HANDLER: folded */
	s->srv.deferred--;
	rpc->srv_deferred--;
	hdr = urpc__mb_hdr(resp);
	urpc__pkthdr_patch(hdr, &s->tx_hdr, h->priv_req_type, (uint32_t)resp->data_size,
			   sl->cur_req_num);
	/* urpc__tx_put() leaves the epoch as it is: it never flushes. */
	sl->resp_epoch = rpc->tx_now ? 0 : rpc->tx_epoch;
	urpc__tx_put(rpc, s->peer, hdr, (uint32_t)resp->data_size, resp->priv_lkey);
	return 0;

full:
	return resp_enqueue(h, resp);
}

/* ---- completions of large messages ---- */

void urpc__srv_read_done(struct urpc_rpc *rpc, struct urpc_os_op *op, int status)
{
	struct urpc_session *s = rpc->sessions[op->sess_num];
	struct urpc_sslot *sl = &s->srv.slots[op->slot];

	if (unlikely(status == -ETIMEDOUT) && urpc__srv_read_again(rpc, op))
		return; /* no one waits and the peer lives: a slow owner delays only itself */
	if (unlikely(status)) {
		URPC_WARN_RATELIMIT(rpc->id, "reading a %zu-byte request failed: %s", op->len,
				    urpc_strerror(status));
		server_error_resp(rpc, s, sl, op->req_type, status == -EACCES ? EACCES : EIO);
	} else {
		/* The time the client has left, from when its descriptor came. */
		sl->h.priv_budget =
			!op->deadline_ns ? 0
			: op->deadline_ns > rpc->now
				? (uint32_t)URPC_MIN((op->deadline_ns - rpc->now + 999) / 1000,
						     (uint64_t)UINT32_MAX)
				: 1;
		server_run_handler(rpc, s, sl, sl->state, &rpc->handlers[op->req_type],
				   op->req_type, op->buf.buf, op->len);
		/* Deferred: let the client's deadline free its buffer meanwhile. */
		if (sl->state == URPC_SRV_IN_HANDLER && s->state == URPC_SESS_CONNECTED)
			server_send_ack(rpc, s, sl);
	}
	/* The handler's view of the request is gone with it. */
	urpc__pool_free(rpc->pool, &op->buf);
}
