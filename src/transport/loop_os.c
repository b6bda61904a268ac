/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's one-sided operations and registrations (the table
 * is sw_mr.c's), and the last reference of an endpoint (which drops the
 * references its queued requests hold). loop.c calls in here through
 * loop_os.h; this file calls only sw_mr.h below it, and the CUDA driver's
 * copies (mem/cuda.h) for grants on device memory (URPC_TP_ACCESS_DEVICE;
 * a copy the driver fails completes the operation with -EIO). The rings
 * and the threads are described at the top of loop.c.
 *
 * One-sided operations: an operation's tag (a generation and a state: free,
 * queued, being served, done) is the one word two threads may write. The
 * target serves a queued request only after moving its tag from queued to
 * serving (a CAS that also rejects requests the requester finished or
 * reused meanwhile), copies, sets done and queues the completion. The
 * requester fails an operation itself (dereg_mem(), release_peer(), a target
 * that went away) with the same CAS from queued to done; if the target is
 * copying, it waits until it is done, so neither side touches the local
 * buffer after that. The slot goes back to the requester's free stack when
 * poll_completions() reaps it, on the requester's thread.
 *
 * One-sided service: a request sits in the target's queue until the
 * target's rx_burst() or poll_completions() serves it (the key names a
 * live grant for the requesting endpoint and the token its request
 * carries, access and exact bounds checked, then memcpy; sw_mr.c). A
 * request whose key names no live grant of its requester (unknown,
 * revoked, another peer's) is refused at once with -EACCES (the loop has
 * no time-out to drop it into): counted in os_rejected when the requester
 * is a peer this endpoint resolved, with that peer's token, else in
 * os_dropped. If the target is destroyed first, the
 * operation completes with -ECONNRESET (the loop never times out: a target
 * that stays alive but never polls keeps its requesters' operations
 * outstanding; cfg->one_sided_timeout_ms is not used). dereg_mem() of the
 * local region completes the operations using it with -EIO at once; the
 * target then skips them. Each operation completes exactly once.
 *
 * A peer's one-sided window (set_peer_window, issue 32): while it is set,
 * an operation that would take the bytes in flight to that peer past it
 * (one always goes) is held on the requester, unseen by the target, and
 * published oldest first by a later poll_completions() once earlier ones
 * completed; a held one is failed as a queued one (the same CAS, nothing
 * to wait for). Each completion leaves its round trip for peer_os_rtt.
 */
#define URPC_LOG_MODULE "loop"
#include "loop_os.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"

void urpc__loop_ep_put(struct loop_ep *ep)
{
	uint32_t tail;

	/* ACQ_REL: every thread's last use of @ep happens before the free. */
	if (__atomic_sub_fetch(&ep->refs, 1, __ATOMIC_ACQ_REL))
		return;
	tail = __atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED);
	while (ep->in_head != tail)
		urpc__loop_ep_put(ep->incoming[ep->in_head++ & (LOOP_INCOMING - 1)].from);
	urpc__hp_free(&ep->ring);
	urpc__hp_free(&ep->lane.mem);
	free(ep->lane.rx);
	free(ep->cells);
	free(ep->dues);
	free(ep->held_buf);
	urpc__sw_mr_fini(&ep->mrs);
	free(ep);
}

/*
 * Queue the completion of @ep's operation @slot with @status; the caller
 * moved its tag to OP_DONE. Never full: at most LOOP_MAX_OPS operations are
 * unreaped and each completes once, so the cell was freed before the claim;
 * the wait only orders us after that free (pairs with the release in
 * urpc__loop_os_poll_completions()). Thread: any (the target, or @ep's owner).
 */
static void comp_push(struct loop_ep *ep, uint32_t slot, int status)
{
	uint32_t pos = __atomic_fetch_add(&ep->comp_tail, 1, __ATOMIC_RELAXED);
	struct comp_cell *c = &ep->comps[pos & (LOOP_MAX_OPS - 1)];

	while (unlikely(__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != pos))
		; /* no syscall: this runs on the target's datapath */
	c->slot = slot;
	c->status = status;
	/* Pairs with the acquire in urpc__loop_os_poll_completions(). */
	__atomic_store_n(&c->seq, pos + 1, __ATOMIC_RELEASE);
}

/*
 * Fail own operation @slot with @status unless its target finished it
 * first. While the target copies, wait (a memcpy) for it to finish: after
 * this returns, nothing touches the operation's local buffer.
 * Thread: @ep's owner. Not the datapath.
 */
static void op_cancel(struct loop_ep *ep, uint32_t slot, int status)
{
	struct os_op *op = &ep->ops[slot];
	/* Acquire pairs with the target's release of OP_DONE in urpc__loop_os_serve(). */
	uint32_t tag = __atomic_load_n(&op->tag, __ATOMIC_ACQUIRE);

	for (;;) {
		switch (OP_STATE(tag)) {
		case OP_QUEUED:
			if (__atomic_compare_exchange_n(&op->tag, &tag, OP_WITH(tag, OP_DONE),
							false, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				comp_push(ep, slot, status);
				return;
			}
			break; /* the target took it meanwhile: @tag reloaded */
		case OP_SERVING:
			sched_yield();
			tag = __atomic_load_n(&op->tag, __ATOMIC_ACQUIRE);
			break;
		default: /* done (its completion is queued) or not posted */
			return;
		}
	}
}

/* The simulator's name of an endpoint (transport.h; here for loop.c's length). */
uint32_t urpc__loop_ep_id(const struct urpc_tp *tp)
{
	return container_of(tp, const struct loop_ep, base)->ep_id;
}

int urpc__loop_os_cancel(struct urpc_tp *tp, uint64_t wr_id, int status)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t slot;

	for (slot = 0; slot < LOOP_MAX_OPS; slot++) {
		if (OP_STATE(__atomic_load_n(&ep->ops[slot].tag, __ATOMIC_RELAXED)) == OP_FREE ||
		    ep->ops[slot].wr_id != wr_id)
			continue;
		op_cancel(ep, slot, status);
		return 0;
	}
	return -ENOENT;
}

void urpc__loop_os_fail_incoming(struct loop_ep *ep)
{
	uint32_t tail;

	tail = __atomic_load_n(&ep->in_tail, __ATOMIC_SEQ_CST);
	while (ep->in_head != tail) {
		struct os_ref *r = &ep->incoming[ep->in_head & (LOOP_INCOMING - 1)];
		uint32_t tag;

		/* A requester between its claim and its publish: a few stores away. */
		while (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != ep->in_head + 1)
			sched_yield();
		tag = r->tag;
		if (__atomic_compare_exchange_n(&r->from->ops[r->slot].tag, &tag,
						OP_WITH(tag, OP_DONE), false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			comp_push(r->from, r->slot, -ECONNRESET);
		urpc__loop_ep_put(r->from);
		ep->in_head++;
	}
}

void urpc__loop_os_cancel_peer(struct loop_ep *ep, const struct urpc_tp_peer *peer)
{
	uint32_t slot;

	urpc__sw_revoke_peer(&ep->mrs, peer);
	for (slot = 0; slot < LOOP_MAX_OPS; slot++) {
		if (OP_STATE(__atomic_load_n(&ep->ops[slot].tag, __ATOMIC_RELAXED)) != OP_FREE &&
		    ep->ops[slot].peer == peer)
			op_cancel(ep, slot, -ECONNRESET);
		if (ep->ops[slot].peer == peer)
			ep->ops[slot].peer = NULL; /* it goes: its completions take no sample */
	}
}

/*
 * Has @ep resolved @from as a peer with @token (a session's)? Only for
 * requests whose key names no grant of theirs: linear in the peers.
 * Thread: @ep's owner (the peer list is its own).
 */
static bool known_peer(const struct loop_ep *ep, const struct loop_ep *from, uint64_t token)
{
	const struct urpc_tp_peer *p;

	for (p = ep->peers; p; p = p->next)
		if (p->ep == from && p->token == token)
			return true;
	return false;
}

/* Copy a granted request on device memory with the driver: 0 or -EIO. Cold. */
static URPC_COLD int serve_device(const struct loop_ep *ep, const struct os_op *op)
{
	void *dev = (void *)(uintptr_t)op->raddr;
	int ret = op->op == URPC_TP_OP_READ ? urpc__cuda_copy_to_host(op->local, dev, op->len)
					    : urpc__cuda_copy_to_device(dev, op->local, op->len);

	if (!ret)
		return 0;
	URPC_WARN_RATELIMIT(ep->base.id, "a one-sided copy of device memory failed: %s",
			    urpc_strerror(ret));
	return -EIO;
}

void urpc__loop_os_serve(struct loop_ep *ep)
{
	for (;;) {
		uint32_t pos = ep->in_head, slot, tag, cur;
		struct os_ref *r = &ep->incoming[pos & (LOOP_INCOMING - 1)];
		struct loop_ep *from;
		struct os_op *op;
		unsigned need;
		bool device = false;
		int status = 0;

		/* Acquire pairs with the release in post(). */
		if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != pos + 1)
			break; /* empty, or a requester between its claim and its publish */
		from = r->from;
		slot = r->slot;
		tag = r->tag;
		op = &from->ops[slot];
		cur = __atomic_load_n(&op->tag, __ATOMIC_RELAXED);
		/* Partitioned, or its bytes still on the simulated fabric: served later. A finished one goes at once. */
		if (cur == tag && ep->net &&
		    (!ep->net->reachable(ep->net->arg, from->ep_id, ep->ep_id) ||
		     (ep->net->os_admit &&
		      !ep->net->os_admit(ep->net->arg, from->ep_id, ep->ep_id,
					 op->op == URPC_TP_OP_READ, op->len,
					 ((uint64_t)from->ep_id << 40) ^ ((uint64_t)slot << 24) ^
						 tag))))
			break;
		/* Free the cell for requesters; pairs with the acquire in post(). */
		__atomic_store_n(&r->seq, pos + LOOP_INCOMING, __ATOMIC_RELEASE);
		ep->in_head = pos + 1;
		/* The tag's CAS decides between us and the requester's op_cancel(). */
		if (cur != tag ||
		    !__atomic_compare_exchange_n(&op->tag, &cur, OP_WITH(tag, OP_SERVING), false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			urpc__loop_ep_put(
				from); /* failed by its requester (dereg_mem, release_peer) */
			continue;
		}
		need = op->op == URPC_TP_OP_READ ? URPC_TP_ACCESS_REMOTE_READ
						 : URPC_TP_ACCESS_REMOTE_WRITE;
		switch (urpc__sw_grant_check(&ep->mrs, op->rkey, op->token, loop_peer_id(from),
					     need, op->raddr, op->len)) {
		case URPC_SW_SERVE:
			ep->base.stats.os_served++;
			break;
		case URPC_SW_SERVE_DEVICE:
			ep->base.stats.os_served++;
			status = serve_device(ep, op);
			device = true;
			break;
		case URPC_SW_UNKNOWN:
			if (!known_peer(ep, from, op->token)) {
				ep->base.stats.os_dropped++;
				status = -EACCES;
				break;
			}
			/* a peer of ours with its token, and a key not its: refused */
			URPC_FALLTHROUGH;
		case URPC_SW_REFUSE:
		default:
			ep->base.stats.os_served++;
			ep->base.stats.os_rejected++;
			status = -EACCES;
			break;
		}
		if (status || device) {
			/* refused (nothing copied), or copied by serve_device() */
		} else if (op->op == URPC_TP_OP_READ) {
			memcpy(op->local, (void *)(uintptr_t)op->raddr, op->len);
		} else {
			memcpy((void *)(uintptr_t)op->raddr, op->local, op->len);
		}
		/* Pairs with the acquire in op_cancel(): the copy is over. */
		__atomic_store_n(&op->tag, OP_WITH(tag, OP_DONE), __ATOMIC_RELEASE);
		comp_push(from, slot, status);
		urpc__loop_ep_put(from);
	}
}

void urpc__loop_os_set_peer_token(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token)
{
	if (peer)
		peer->token = token;
}

/* Datapath; the table grows only when every entry is live. */
int urpc__loop_os_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
			const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g)
{
	if (unlikely(!peer))
		return -EINVAL;
	return urpc__sw_grant(&to_ep(tp)->mrs, peer, loop_peer_id(peer->ep), peer->token, mr, addr,
			      len, access, g);
}

void urpc__loop_os_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g)
{
	urpc__sw_revoke(&to_ep(tp)->mrs, g);
}

/* The release_polls switch (transport.h), counted in this endpoint's rx_burst() calls. */
bool urpc__loop_os_revoke_ready(struct urpc_tp *tp, struct urpc_tp_grant *g)
{
	struct loop_ep *ep = to_ep(tp);

	return urpc__sw_revoke_ready(&ep->mrs, g, __atomic_load_n(&ep->polls, __ATOMIC_RELAXED),
				     ep->faults.release_polls);
}

int urpc__loop_os_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			  struct urpc_tp_mr *mr)
{
	return urpc__sw_mr_reg(&to_ep(tp)->mrs, addr, len, access, mr);
}

/*
 * Undo urpc__loop_os_reg_mem(): own operations whose local buffer lies in @mr
 * complete -EIO now (those a target is copying for finish first); peers'
 * requests against it are refused from now on. Thread: @tp's owner.
 */
void urpc__loop_os_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t lkey = mr ? mr->lkey : 0;
	uint32_t i;

	if (!urpc__sw_mr_dereg(&ep->mrs, mr))
		return;
	for (i = 0; i < LOOP_MAX_OPS; i++)
		if (OP_STATE(__atomic_load_n(&ep->ops[i].tag, __ATOMIC_RELAXED)) != OP_FREE &&
		    ep->ops[i].lkey == lkey)
			op_cancel(ep, i, -EIO);
}

/*
 * Bytes of own operations to @peer at its target (published, not done).
 * Thread: @ep's owner. Cold: only while a controller bounds @peer's window.
 */
static uint64_t peer_inflight(const struct loop_ep *ep, const struct urpc_tp_peer *peer)
{
	uint64_t bytes = 0;
	uint32_t i;

	for (i = 0; i < LOOP_MAX_OPS; i++) {
		const struct os_op *o = &ep->ops[i];
		uint32_t st = OP_STATE(__atomic_load_n(&o->tag, __ATOMIC_RELAXED));

		if (o->peer == peer && o->pub_ns && (st == OP_QUEUED || st == OP_SERVING))
			bytes += o->len;
	}
	return bytes;
}

/* Is one of the first @n held operations for @peer (and still held)? */
static bool peer_held(const struct loop_ep *ep, const struct urpc_tp_peer *peer, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		const struct os_op *o = &ep->ops[ep->held_ops[i].slot];

		if (o->peer == peer &&
		    __atomic_load_n(&o->tag, __ATOMIC_RELAXED) == ep->held_ops[i].tag)
			return true;
	}
	return false;
}

/*
 * May an operation of @len bytes to @peer go to its target now, the held
 * ones before it being the first @n? Its peer's window bounds the bytes
 * in flight to it; one operation always goes; none overtakes an earlier.
 */
static bool window_admits(const struct loop_ep *ep, const struct urpc_tp_peer *peer, size_t len,
			  uint32_t n)
{
	uint64_t bytes;

	if (!peer->os_window)
		return !peer_held(ep, peer, n);
	if (peer_held(ep, peer, n))
		return false;
	bytes = peer_inflight(ep, peer);
	return !bytes || bytes + len <= peer->os_window;
}

static int publish(struct loop_ep *ep, uint32_t slot, uint32_t tag);

/*
 * Publish the held operations that their peers' windows now let go,
 * oldest first; fail those whose target went away; forget those
 * cancelled meanwhile (their tag moved on: the completion is queued).
 * Thread: @ep's owner.
 */
static void release_held(struct loop_ep *ep)
{
	uint32_t i, n = 0;

	for (i = 0; i < ep->nheld_ops; i++) {
		uint32_t slot = ep->held_ops[i].slot, tag = ep->held_ops[i].tag;
		struct os_op *o = &ep->ops[slot];

		if (__atomic_load_n(&o->tag, __ATOMIC_RELAXED) != tag)
			continue;
		if (__atomic_load_n(&o->peer->ep->dead, __ATOMIC_RELAXED)) {
			op_cancel(ep, slot, -ECONNRESET);
			continue;
		}
		if (window_admits(ep, o->peer, o->len, n) && !publish(ep, slot, tag))
			continue;
		ep->held_ops[n++] = ep->held_ops[i];
	}
	ep->nheld_ops = n;
}

/*
 * Queue a one-sided request at the peer. The operation's slot and the
 * queue's cell are preallocated; -EAGAIN when either is full.
 * Thread: @tp's owner. Datapath.
 */
static int post(struct urpc_tp *tp, struct urpc_tp_peer *peer, enum urpc_tp_op op, void *local,
		const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
		uint64_t wr_id)
{
	struct loop_ep *ep = to_ep(tp), *to;
	uint32_t slot, tag;
	struct os_op *o;
	int ret;

	if (unlikely(!peer || urpc__sw_mr_check_local(&ep->mrs, mr, local, len)))
		return -EINVAL;
	if (unlikely(ep->outstanding == LOOP_MAX_OPS))
		return -EAGAIN;
	to = peer->ep;
	/* The slot is free: nobody reads its fields until the request is published. */
	slot = ep->op_free[ep->nop_free - 1];
	o = &ep->ops[slot];
	o->op = op;
	o->peer = peer;
	o->lkey = mr->lkey;
	o->local = local;
	o->raddr = raddr;
	o->rkey = rkey;
	o->token = peer->token;
	o->len = len;
	o->wr_id = wr_id;
	tag = OP_WITH(__atomic_load_n(&o->tag, __ATOMIC_RELAXED), OP_QUEUED);
	if (unlikely(__atomic_load_n(&to->dead, __ATOMIC_RELAXED))) {
		/* Gone: fails at once, nothing queued. */
		ep->nop_free--;
		ep->outstanding++;
		__atomic_store_n(&o->tag, OP_WITH(tag, OP_DONE), __ATOMIC_RELAXED);
		comp_push(ep, slot, -ECONNRESET);
		return 0;
	}
	if (unlikely(peer->os_window || ep->nheld_ops) &&
	    !window_admits(ep, peer, len, ep->nheld_ops)) {
		/* Held by its peer's window: published by a later poll_completions(). */
		ep->nop_free--;
		ep->outstanding++;
		o->pub_ns = 0;
		__atomic_store_n(&o->tag, tag, __ATOMIC_RELAXED);
		ep->held_ops[ep->nheld_ops].slot = slot;
		ep->held_ops[ep->nheld_ops++].tag = tag;
		return 0;
	}
	ret = publish(ep, slot, tag);
	if (!ret) {
		ep->nop_free--;
		ep->outstanding++;
	}
	return ret;
}

/*
 * Queue own operation @slot (tagged @tag, its fields set) at its target.
 * 0, or -EAGAIN when the target's queue is full (nothing changed).
 * Thread: @ep's owner.
 */
static int publish(struct loop_ep *ep, uint32_t slot, uint32_t tag)
{
	struct os_op *o = &ep->ops[slot];
	struct loop_ep *to = o->peer->ep;
	uint32_t pos, seq;
	struct os_ref *r;

	/* Claim a cell; SEQ_CST pairs with loop_destroy() in loop.c (see there). */
	pos = __atomic_load_n(&to->in_tail, __ATOMIC_RELAXED);
	for (;;) {
		r = &to->incoming[pos & (LOOP_INCOMING - 1)];
		/* Acquire pairs with the release in urpc__loop_os_serve(). */
		seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
		if (seq == pos) {
			if (__atomic_compare_exchange_n(&to->in_tail, &pos, pos + 1, true,
							__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
				break;
		} else if ((int32_t)(seq - pos) < 0) {
			return -EAGAIN; /* the target's queue is full; the slot stays free */
		} else {
			pos = __atomic_load_n(&to->in_tail, __ATOMIC_RELAXED);
		}
	}
	o->pub_ns = URPC_MAX(urpc__now_ns(), 1);
	__atomic_store_n(&o->tag, tag, __ATOMIC_RELAXED);
	ep_get(ep); /* the queued request keeps its requester's memory alive */
	r->from = ep;
	r->slot = slot;
	r->tag = tag;
	/* Publish the request and the operation; pairs with the acquire in urpc__loop_os_serve(). */
	__atomic_store_n(&r->seq, pos + 1, __ATOMIC_RELEASE);
	__atomic_or_fetch(&to->attn, LOOP_ATTN_OS, __ATOMIC_RELEASE); /* rx_burst() serves it */
	if (unlikely(__atomic_load_n(&to->dead, __ATOMIC_SEQ_CST)))
		op_cancel(ep, slot, -ECONNRESET); /* destroyed after our early look */
	return 0;
}

/* The round trip of own operation @o, done: its peer's newest (peer_os_rtt). */
static void sample(const struct os_op *o)
{
	struct urpc_tp_peer *p = (struct urpc_tp_peer *)(uintptr_t)o->peer;
	uint64_t now = urpc__now_ns();

	p->os_rtt_ns = now > o->pub_ns ? now - o->pub_ns : 1;
	p->os_rtt_bytes = o->len;
}

uint64_t urpc__loop_os_peer_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes)
{
	uint64_t rtt = peer ? peer->os_rtt_ns : 0;

	(void)tp;
	if (rtt) {
		peer->os_rtt_ns = 0;
		*bytes = peer->os_rtt_bytes;
	}
	return rtt;
}

void urpc__loop_os_set_peer_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes)
{
	(void)tp;
	if (peer)
		peer->os_window = bytes;
}

/* See post(). Thread: @tp's owner. */
int urpc__loop_os_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			    const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			    uint64_t wr_id)
{
	return post(tp, peer, URPC_TP_OP_READ, local, mr, raddr, rkey, len, wr_id);
}

/* See post(). Thread: @tp's owner. */
int urpc__loop_os_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			     const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			     uint64_t wr_id)
{
	return post(tp, peer, URPC_TP_OP_WRITE, (void *)(uintptr_t)local, mr, raddr, rkey, len,
		    wr_id);
}

/*
 * Serve peers' requests, then hand out up to @n completions of own
 * operations (each exactly once); their slots are free again.
 * Thread: @tp's owner. Datapath.
 */
int urpc__loop_os_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned got = 0;

	if (unlikely(__atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED) != ep->in_head))
		urpc__loop_os_serve(ep);
	while (got < n) {
		uint32_t pos = ep->comp_head;
		struct comp_cell *c = &ep->comps[pos & (LOOP_MAX_OPS - 1)];
		struct os_op *o;
		uint32_t slot;

		/* Acquire pairs with the release in comp_push(). */
		if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != pos + 1)
			break;
		slot = c->slot;
		comps[got].status = c->status;
		/* Pairs with the acquire in comp_push(). */
		__atomic_store_n(&c->seq, pos + LOOP_MAX_OPS, __ATOMIC_RELEASE);
		ep->comp_head = pos + 1;
		o = &ep->ops[slot];
		comps[got].wr_id = o->wr_id;
		comps[got].op = o->op;
		if (o->peer && o->pub_ns && !comps[got].status) /* its round trip (peer_os_rtt) */
			sample(o);
		/* Done to free, next generation: stale queued requests fail their CAS. */
		__atomic_store_n(&o->tag, OP_NEXT_GEN(__atomic_load_n(&o->tag, __ATOMIC_RELAXED)),
				 __ATOMIC_RELAXED);
		ep->op_free[ep->nop_free++] = slot;
		ep->outstanding--;
		tp->stats.os_progress++;
		got++;
	}
	if (unlikely(ep->nheld_ops))
		release_held(ep);
	return (int)got;
}
