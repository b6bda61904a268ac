/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's emulated one-sided operations (see udp_int.h for the
 * wire format): the requester splits an operation into chunks and keeps at
 * most UDP_OS_WINDOW of them in flight per operation, and at most its
 * peer's window (set_peer_window; UDP_OS_WINDOW by default) for all its
 * operations to that peer together, timing one chunk a round trip
 * (peer_os_rtt, the session's controller: issue 32), resending after a quiet RTO and
 * failing after one_sided_timeout without progress (counting at most
 * UDP_OS_GAP_NS of each gap between polls); the server answers
 * RD_REQ and WR_DATA statelessly, checking key, access and bounds of the
 * whole operation on every chunk (sw_mr.c; udp_serve.c). Also the
 * registrations. The batch of one-sided datagrams is udp_ctl.c's.
 *
 * udp.c (the ops table, peers) and udp_io.c (the receive path hands
 * requests and replies over; poll_completions drains the socket first)
 * call in here through udp_os.h; this file calls only sw_mr.h below it,
 * and the CUDA driver's copies (mem/cuda.h) for grants on device memory.
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp_os.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "../util/seam.h"

/* ---- registrations (sw_mr.c) ---------------------------------------------- */

/*
 * Not for the datapath: may grow the table; the first registration of
 * device memory allocates the staging slots of its READs.
 */
int urpc__udp_os_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			 struct urpc_tp_mr *mr)
{
	struct udp_tp *u = to_udp(tp);
	int ret;

	if ((access & URPC_TP_ACCESS_DEVICE) && !u->dev_stage) {
		u->dev_stage = malloc((size_t)UDP_CTL_BATCH * UDP_MAX_DGRAM);
		if (!u->dev_stage)
			return -ENOMEM;
	}
	ret = urpc__sw_mr_reg(&u->mrs, addr, len, access, mr);
	if (!ret && (access & URPC_TP_ACCESS_DEVICE))
		u->ndev++;
	if (ret && !u->ndev) {
		free(u->dev_stage);
		u->dev_stage = NULL;
	}
	return ret;
}

static inline uint32_t udp_op_id(const struct udp_tp *u, const struct udp_op *op)
{
	return (uint32_t)(op - u->ops) | ((uint32_t)op->gen << 16);
}

/*
 * The completion is reaped by poll_completions(). Its chunks still in
 * flight leave its peer's window (their late replies are stale).
 */
static void udp_op_finish(struct udp_tp *u, struct udp_op *op, int status)
{
	struct urpc_tp_peer *p = op->peer;
	uint32_t out = op->next - op->base - (uint32_t)__builtin_popcountll(op->done_mask);

	p->os_inflight -= URPC_MIN(out, p->os_inflight);
	if (p->os_nops)
		p->os_nops--;
	if (p->os_timed_op == udp_op_id(u, op) + 1)
		p->os_timed_op = 0;
	op->state = UDP_OP_DONE;
	op->status = status;
}

void urpc__udp_os_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct udp_tp *u = to_udp(tp);
	uint32_t lkey = mr ? mr->lkey : 0;
	unsigned i;

	if (u->nctl)
		urpc__udp_os_flush(u); /* queued replies may read it (udp_io.c's drain) */
	if (!urpc__sw_mr_dereg(&u->mrs, mr))
		return;
	if ((mr->access & URPC_TP_ACCESS_DEVICE) && !--u->ndev) {
		free(u->dev_stage);
		u->dev_stage = NULL;
	}
	/* local operations on it fail; the peer's requests now get NAKs */
	for (i = 0; i < UDP_OS_OPS; i++)
		if (u->ops[i].state == UDP_OP_ACTIVE && u->ops[i].lkey == lkey)
			udp_op_finish(u, &u->ops[i], -EIO);
}

void urpc__udp_os_release_peer(struct udp_tp *u, struct urpc_tp_peer *peer)
{
	unsigned i;

	if (u->nctl)
		urpc__udp_os_flush(u); /* queued replies may read its grants */
	urpc__sw_revoke_peer(&u->mrs, peer);
	for (i = 0; i < UDP_OS_OPS; i++)
		if (u->ops[i].state == UDP_OP_ACTIVE && u->ops[i].peer == peer)
			udp_op_finish(u, &u->ops[i], -ECONNRESET);
}

/* A late reply finds the operation done and is ignored: nothing touches @local. */
int urpc__udp_os_cancel(struct urpc_tp *tp, uint64_t wr_id, int status)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i;

	for (i = 0; i < UDP_OS_OPS; i++) {
		if (u->ops[i].state == UDP_OP_FREE || u->ops[i].wr_id != wr_id)
			continue;
		if (u->ops[i].state == UDP_OP_ACTIVE)
			udp_op_finish(u, &u->ops[i], status);
		return 0;
	}
	return -ENOENT;
}

/* Cold: a user's batch without a deadline asks, once per time-out. */
int urpc__udp_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns)
{
	struct udp_tp *u = to_udp(tp);
	uint64_t now = urpc__now_ns();
	unsigned i;

	for (i = 0; i < UDP_OS_OPS; i++) {
		if (u->ops[i].state == UDP_OP_FREE || u->ops[i].wr_id != wr_id)
			continue;
		/* done, not reaped: it ended; no time to count */
		*idle_ns = u->ops[i].state == UDP_OP_ACTIVE && now > u->ops[i].progress_ns
				   ? now - u->ops[i].progress_ns
				   : 0;
		return 0;
	}
	return -ENOENT;
}

/* ---- grants (sw_mr.c) ------------------------------------------------------ */

void urpc__udp_os_set_peer_token(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token)
{
	if (peer)
		peer->token = token;
}

void urpc__udp_os_set_peer_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes)
{
	uint64_t chunks;

	if (!peer)
		return;
	if (!bytes) {
		peer->os_window = 0;
		return;
	}
	chunks = bytes / (peer->chunk_size ? peer->chunk_size : 1);
	peer->os_window = (uint32_t)URPC_MAX(URPC_MIN(chunks, (uint64_t)UDP_OS_WINDOW), 1);
	(void)tp;
}

/* Datapath; the table grows only when every entry is live. */
int urpc__udp_os_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
		       const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g)
{
	if (unlikely(!peer))
		return -EINVAL;
	return urpc__sw_grant(&to_udp(tp)->mrs, peer, udp_peer_id(&peer->sa), peer->token, mr, addr,
			      len, access, g);
}

void urpc__udp_os_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g)
{
	struct udp_tp *u = to_udp(tp);

	if (u->nctl)
		urpc__udp_os_flush(u); /* queued replies may read it (udp_io.c's drain) */
	urpc__sw_revoke(&u->mrs, g);
}

uint64_t urpc__udp_os_peer_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes)
{
	uint64_t rtt = peer ? peer->os_rtt_ns : 0;

	(void)tp;
	if (rtt) {
		peer->os_rtt_ns = 0;
		*bytes = peer->chunk_size;
	}
	return rtt;
}

/* ---- one-sided: requester ------------------------------------------------ */

/*
 * Queue chunks [@c, @c + @n) of @op (first send or resend): a READ asks for
 * them in one RD_REQ (its status says how many, issue 32), a WRITE sends
 * each its WR_DATA.
 */
static void udp_op_send_chunks(struct udp_tp *u, struct udp_op *op, uint32_t c, uint32_t n)
{
	struct udp_ext e = {
		.raddr = op->raddr,
		.len = op->len,
		.key = op->rkey,
		.token = op->peer->token,
		.chunk_size = op->chunk_size,
		.reserved = 0,
	};

	if (op->kind == URPC_TP_OP_READ) {
		urpc__udp_ctl_queue(u, &op->peer->sa, UDP_T_RD_REQ, udp_op_id(u, op), c,
				    n > 1 ? n : 0, &e, NULL, 0);
		return;
	}
	for (; n; n--, c++) {
		uint64_t off = (uint64_t)c * op->chunk_size;
		size_t clen = (size_t)URPC_MIN((uint64_t)op->chunk_size, op->len - off);

		urpc__udp_ctl_queue(u, &op->peer->sa, UDP_T_WR_DATA, udp_op_id(u, op), c, 0, &e,
				    op->local + off, clen);
	}
}

/* The peer's window: chunks of all our operations to it in flight at once. */
static inline uint32_t udp_peer_window(const struct urpc_tp_peer *p)
{
	return p->os_window ? p->os_window : UDP_OS_WINDOW;
}

/*
 * Send the chunks that the operation's share of its peer's window (every
 * operation to it; one chunk at least, UDP_OS_WINDOW at most: its done
 * mask) and the peer's window newly allow; time the first when none of the
 * peer's is. A READ with chunks in flight asks for more only once a group
 * of them fits (UDP_RD_GROUP, at most half its share): an RD_REQ per chunk
 * was most of a requester's system calls, and the time it kept a small
 * RPC's datagram waiting in its socket (issue 32).
 */
static void udp_op_pump(struct udp_tp *u, struct udp_op *op)
{
	struct urpc_tp_peer *p = op->peer;
	uint32_t win = udp_peer_window(p);
	uint32_t share = URPC_MIN(URPC_MAX(win / URPC_MAX(p->os_nops, 1u), 1u), UDP_OS_WINDOW);
	uint32_t out = op->next - op->base, n;

	if (op->next >= op->nchunks || out >= share || p->os_inflight >= win)
		return;
	n = URPC_MIN(URPC_MIN(share - out, win - p->os_inflight), op->nchunks - op->next);
	if (op->kind == URPC_TP_OP_READ && out && n < op->nchunks - op->next &&
	    n < URPC_MAX(URPC_MIN(UDP_RD_GROUP, share / 2), 1u))
		return; /* its replies pump again */
	if (!p->os_timed_op) {
		p->os_timed_op = udp_op_id(u, op) + 1;
		p->os_timed_chunk = op->next;
		p->os_timed_ns = urpc__now_ns();
	}
	udp_op_send_chunks(u, op, op->next, n);
	op->next += n;
	p->os_inflight += n;
}

/* Room in @p's window that @op could not use: the other operations to @p may. */
static void udp_peer_pump(struct udp_tp *u, const struct urpc_tp_peer *p)
{
	unsigned i;

	for (i = 0; i < UDP_OS_OPS && p->os_inflight < udp_peer_window(p); i++)
		if (u->ops[i].state == UDP_OP_ACTIVE && u->ops[i].peer == p)
			udp_op_pump(u, &u->ops[i]);
}

/* Chunk @c of @op is done; slide the window and finish or send more. */
static void udp_op_chunk_done(struct udp_tp *u, struct udp_op *op, uint32_t c, uint64_t now)
{
	struct urpc_tp_peer *p = op->peer;

	op->done_mask |= 1ull << (c - op->base);
	u->base.stats.os_progress++;
	if (p->os_inflight)
		p->os_inflight--;
	if (p->os_timed_op == udp_op_id(u, op) + 1 && p->os_timed_chunk == c) {
		p->os_rtt_ns = URPC_MAX(now - URPC_MIN(p->os_timed_ns, now), 1);
		p->os_timed_op = 0;
	}
	while (op->done_mask & 1) {
		op->done_mask >>= 1;
		op->base++;
	}
	op->progress_ns = now;
	op->rto_ns = UDP_RTO_MIN_NS;
	op->retry_at_ns = now + op->rto_ns;
	if (op->base == op->nchunks)
		udp_op_finish(u, op, 0);
	else
		udp_op_pump(u, op);
	if (op->next == op->nchunks && p->os_inflight < udp_peer_window(p))
		udp_peer_pump(u, p);
}

/* Resend what is missing after a quiet RTO; fail after the timeout. */
static void udp_op_timers(struct udp_tp *u, struct udp_op *op, uint64_t now)
{
	uint32_t c;

	if (now - op->progress_ns >= u->base.one_sided_timeout_ns) {
		udp_op_finish(u, op, -ETIMEDOUT);
		return;
	}
	if (now < op->retry_at_ns)
		return;
	for (c = op->base; c < op->next; c++) {
		if (op->done_mask & (1ull << (c - op->base)))
			continue;
		udp_op_send_chunks(u, op, c, 1);
		u->base.stats.os_retries++;
		if (op->peer->os_timed_op == udp_op_id(u, op) + 1 && op->peer->os_timed_chunk == c)
			op->peer->os_timed_op = 0; /* a resent chunk's round trip says nothing */
	}
	op->rto_ns = URPC_MIN(op->rto_ns * 2, UDP_RTO_MAX_NS);
	op->retry_at_ns = now + op->rto_ns;
}

static int udp_post(struct udp_tp *u, enum urpc_tp_op kind, struct urpc_tp_peer *peer,
		    const void *local, const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey,
		    size_t len, uint64_t wr_id)
{
	uint64_t now, nchunks;
	struct udp_op *op = NULL;
	unsigned i;

	if (unlikely(!peer || !local || urpc__sw_mr_check_local(&u->mrs, mr, local, len)))
		return -EINVAL;
	nchunks = (len + peer->chunk_size - 1) / peer->chunk_size;
	if (unlikely(nchunks > UINT32_MAX))
		return -EINVAL;
	for (i = 0; i < UDP_OS_OPS; i++) {
		if (u->ops[i].state == UDP_OP_FREE) {
			op = &u->ops[i];
			break;
		}
	}
	if (unlikely(!op))
		return -EAGAIN;
	now = urpc__now_ns();
	op->state = UDP_OP_ACTIVE;
	op->kind = kind;
	op->status = 0;
	op->gen++;
	op->peer = peer;
	op->local = (uint8_t *)(uintptr_t)local;
	op->lkey = mr->lkey;
	op->raddr = raddr;
	op->rkey = rkey;
	op->len = len;
	op->wr_id = wr_id;
	op->chunk_size = peer->chunk_size;
	op->nchunks = (uint32_t)nchunks;
	op->base = 0;
	op->next = 0;
	op->done_mask = 0;
	op->progress_ns = now;
	op->rto_ns = UDP_RTO_MIN_NS;
	op->retry_at_ns = now + op->rto_ns;
	if (!u->nops)
		u->os_seen_ns = now; /* no gap before the first op */
	u->nops++;
	peer->os_nops++;
	udp_op_pump(u, op);
	urpc__udp_os_flush(u);
	return 0;
}

int urpc__udp_os_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			   const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			   uint64_t wr_id)
{
	return udp_post(to_udp(tp), URPC_TP_OP_READ, peer, local, mr, raddr, rkey, len, wr_id);
}

int urpc__udp_os_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			    const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			    uint64_t wr_id)
{
	return udp_post(to_udp(tp), URPC_TP_OP_WRITE, peer, local, mr, raddr, rkey, len, wr_id);
}

/* ---- replies to our operations (udp_serve.c serves the peers' requests) ---- */

/*
 * Handle a reply (RD_DATA, WR_ACK, NAK) to one of our operations. Returns
 * NULL (stale replies included: they are harmless), or why it is malformed.
 */
const char *urpc__udp_os_reply(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			       const struct sockaddr_in *src, uint64_t now)
{
	const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;
	uint32_t idx = h->op_id & 0xffffu, c = h->chunk;
	struct udp_op *op;
	uint64_t off, clen;

	if (unlikely(idx >= UDP_OS_OPS))
		return "bad op id";
	op = &u->ops[idx];
	/* stale replies (finished or reused op, done chunk) are harmless */
	if (op->state != UDP_OP_ACTIVE || op->gen != (uint16_t)(h->op_id >> 16))
		return NULL;
	if (unlikely(src->sin_addr.s_addr != op->peer->sa.sin_addr.s_addr ||
		     src->sin_port != op->peer->sa.sin_port))
		return "reply from another address";
	if (h->type == UDP_T_NAK) {
		if (unlikely(len != sizeof(*h)))
			return "bad NAK length";
		udp_op_finish(u, op, h->status == EACCES ? -EACCES : -EIO);
		return NULL;
	}
	if ((h->type == UDP_T_RD_DATA) != (op->kind == URPC_TP_OP_READ))
		return "reply type does not match the op";
	if (c < op->base || c >= op->next)
		return NULL;
	off = (uint64_t)c * op->chunk_size;
	clen = URPC_MIN((uint64_t)op->chunk_size, op->len - off);
	if (unlikely(len != sizeof(*h) + (h->type == UDP_T_RD_DATA ? clen : 0)))
		return "reply length mismatch";
	if (op->done_mask & (1ull << (c - op->base)))
		return NULL;
	if (h->type == UDP_T_RD_DATA)
		memcpy(op->local + off, buf + sizeof(*h), (size_t)clen);
	udp_op_chunk_done(u, op, c, now);
	return NULL;
}

/* ---- completions --------------------------------------------------------- */

int urpc__udp_os_poll(struct udp_tp *u, struct urpc_tp_comp *comps, unsigned n)
{
	unsigned i, cnt = 0;
	uint64_t now, late = 0;

	if (!u->nops)
		return 0;
	now = urpc__now_ns();
	/*
	 * Our own stall is not the peer's silence. When the owner did not poll
	 * for a while (descheduled on a busy host, a long handler, a caller
	 * busy elsewhere), the replies may wait unread in our socket, or were
	 * never sent because the peer is this thread or was starved beside
	 * it. Of each gap between two polls, UDP_OS_GAP_NS counts towards the
	 * timeout; the rest is credited to every operation before it is
	 * judged. A dead peer still fails: each poll counts some time.
	 */
	if (now - u->os_seen_ns > UDP_OS_GAP_NS)
		late = now - u->os_seen_ns - UDP_OS_GAP_NS;
	u->os_seen_ns = now;
	for (i = 0; i < UDP_OS_OPS; i++) {
		struct udp_op *op = &u->ops[i];

		if (op->state != UDP_OP_ACTIVE)
			continue;
		if (late)
			op->progress_ns = URPC_MIN(op->progress_ns + late, now);
		udp_op_timers(u, op, now);
		if (op->state == UDP_OP_ACTIVE)
			udp_op_pump(u, op); /* room its peer's other operations left */
	}
	/* DATA waits for the caller: a slice now, the rest after it (udp_io.c's drain) */
	/* DATA waits for the caller: it goes up first (udp_io.c's drain) */
	if (!u->pend_cnt || !urpc__udp_os_hold(u))
		urpc__udp_os_flush(u);
	for (i = 0; i < UDP_OS_OPS && cnt < n; i++) {
		struct udp_op *op = &u->ops[i];

		if (op->state != UDP_OP_DONE)
			continue;
		comps[cnt].wr_id = op->wr_id;
		comps[cnt].op = op->kind;
		comps[cnt].status = op->status;
		cnt++;
		op->state = UDP_OP_FREE;
		u->nops--;
	}
	return (int)cnt;
}
