/* SPDX-License-Identifier: MIT */
/*
 * The loop transport: endpoints in one process joined by memory rings, with
 * seeded fault switches. See transport.h for the contract.
 *
 * Threads: every op runs on the endpoint's owner thread, and endpoints that
 * talk to each other may have different owners (the simulated network below
 * is the exception: one thread drives it all). What one endpoint hands to
 * another crosses through three rings of the receiver, each with many
 * producers (any thread) and one consumer (the receiver's owner), all of the
 * same lock-free kind (D. Vyukov's bounded queue, as DPDK's rte_ring in
 * MP/SC mode): a cell carries a sequence number; a producer claims position
 * pos with a CAS on the ring's tail once the cell's sequence reads pos,
 * fills the cell and publishes it by storing pos + 1 (release); the
 * consumer takes it when it reads pos + 1 (acquire) and frees it by storing
 * pos + size (release). A full ring refuses the producer. The rings are:
 *   - the receive ring (datagrams): cell i describes ring slot i, so a
 *     sender copies into a slot only after it claimed its cell, and the
 *     slot goes back to senders when rx_release() stores its next sequence;
 *   - the request queue (one-sided requests queued at a target, naming an
 *     operation in the requester's table);
 *   - the completion ring (finished operations of the requester, written by
 *     the target that served them, or by the requester itself); never full,
 *     as it holds one cell per operation slot, so producers claim with a
 *     fetch-and-add.
 * No other memory of an endpoint is written by another thread: the free
 * stack of operation slots and the counters belong to the owner, and
 * datagrams that arrive on a full ring are counted in an atomic that the
 * owner folds into its stats. A producer between its claim and its publish
 * holds back the cells after it (as in rte_ring); it runs no code that could
 * wait meanwhile. In one thread the rings cost what the plain FIFO and free
 * stack did (urpc-cpu-cost under callgrind: 1038 instructions per RPC
 * before and after): a CAS and two sequence stores per datagram replace the
 * stack's pop and push, and the receive counters moved from the sender's
 * copy to the receiver's burst.
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
 * Endpoint bytes: kind, version, a 32-bit id (never reused in a process) and
 * a 32-bit random generation; resolving needs both to match a live endpoint,
 * so the bytes of a destroyed endpoint give -ENOENT.
 *
 * Lifetime: an endpoint is reference counted (atomically): one reference
 * for itself, one per peer handle that names it, one per datagram held by a
 * reorder switch and one per one-sided request queued at a target (held on
 * the requester). destroy() marks it dead and drops its own reference;
 * datagrams sent to a dead endpoint vanish like datagrams to a host that
 * went away, and the memory goes with the last reference.
 *
 * One-sided service: a request sits in the target's queue until the
 * target's rx_burst() or poll_completions() serves it (key, access and
 * bounds checked, then memcpy). If the target is destroyed first, the
 * operation completes with -ECONNRESET (the loop never times out: a target
 * that stays alive but never polls keeps its requesters' operations
 * outstanding; cfg->one_sided_timeout_ms is not used). dereg_mem() of the
 * local region completes the operations using it with -EIO at once; the
 * target then skips them. Each operation completes exactly once.
 *
 * Simulated network (urpc__loop_set_net, tests/sim): every datagram goes to
 * the net's send() instead of the peer's ring, and the net delivers it
 * later with urpc__loop_net_deliver() (or never); one-sided requests are
 * served only while the net says requester and target can reach each other.
 * It rides the fault-switch branch, so the plain datapath pays nothing.
 *
 * Delay switch: a delayed datagram takes its receive-ring entry at once and
 * becomes visible when the receiver's poll count reaches its due stamp; the
 * receive ring is the in-flight queue (preallocated, in order, so a delayed
 * datagram also holds back those queued behind it).
 */
#define URPC_LOG_MODULE "loop"
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mem/hugepage.h"
#include "../util/compiler.h"
#include "../util/log.h"
#include "../util/rand.h"
#include "transport.h"

#define LOOP_EP_VERSION 1
#define LOOP_EP_LEN 10
#define LOOP_DEFAULT_MTU 4096
#define LOOP_MAX_OPS 64	  /* one-sided operations a requester may have outstanding */
#define LOOP_INCOMING 256 /* one-sided requests queued at a target */
#define LOOP_MAX_REORDER 64

static_assert(URPC_IS_POW2(LOOP_MAX_OPS), "completion ring index wraps");
static_assert(URPC_IS_POW2(LOOP_INCOMING), "request ring index wraps");

/* States of an operation's tag; the bits above them are its generation. */
enum {
	OP_FREE = 0,	/* not posted (or reaped) */
	OP_QUEUED = 1,	/* posted, not yet taken by the target or failed */
	OP_SERVING = 2, /* the target is copying */
	OP_DONE = 3,	/* finished; its completion is (being) queued */
};
#define OP_STATE_MASK 3u
#define OP_STATE(tag) ((tag)&OP_STATE_MASK)
#define OP_WITH(tag, state) (((tag) & ~OP_STATE_MASK) | (state))
#define OP_NEXT_GEN(tag) (((tag) & ~OP_STATE_MASK) + OP_STATE_MASK + 1)

struct loop_ep;

struct urpc_tp_peer {
	struct loop_ep *ep;		  /* the remote endpoint; one reference */
	struct urpc_tp_peer *next, *prev; /* the resolving endpoint's list */
};

/*
 * A receive-ring cell; cell i describes ring slot i. Eight bytes, so that
 * the hot loops index the cells with a scaled address (callgrind: one or
 * two instructions less per datagram in each of deliver(), rx_burst() and
 * rx_release() than with the due stamp in the cell).
 */
struct rx_cell {
	uint32_t seq; /* atomic: pos free for a sender, pos + 1 published */
	uint32_t len; /* | RX_DELAYED: the delay switch set dues[] for it */
};

#define RX_DELAYED 0x80000000u
static_assert(sizeof(struct rx_cell) == 8, "scaled index");
static_assert((1u << 20) < RX_DELAYED, "a datagram's length leaves the flag free");

/* A one-sided operation, in its requester's slot table. */
struct os_op {
	uint32_t tag; /* atomic: generation | OP_* state; see the top of the file */
	enum urpc_tp_op op;
	/* Written by the owner while the operation is free; read by the target while it serves. */
	const struct urpc_tp_peer *peer; /* owner only */
	uint32_t lkey;			 /* owner only */
	void *local;
	uint64_t raddr;
	uint32_t rkey;
	size_t len;
	uint64_t wr_id; /* owner only */
};

/* A request queued at its target: names the requester's slot and its tag. */
struct os_ref {
	uint32_t seq; /* atomic: as rx_cell.seq */
	uint32_t slot;
	uint32_t tag;	      /* the operation's tag when queued (state OP_QUEUED) */
	struct loop_ep *from; /* one reference */
};

/* A finished operation waiting for its requester's poll_completions(). */
struct comp_cell {
	uint32_t seq; /* atomic: as rx_cell.seq */
	uint32_t slot;
	int status;
};

struct held {
	struct loop_ep *to; /* one reference */
	uint32_t len;
};

struct loop_ep {
	struct urpc_tp base; /* owner only (its stats) */
	uint32_t ep_id;
	uint32_t gen;
	/* fault switches for what this endpoint sends; owner only */
	struct urpc_loop_faults faults;
	bool faults_on;		  /* any switch set: the common case skips them all */
	struct urpc_rand rng;	  /* fault switches only: a function of cfg->seed */
	struct urpc_rand key_rng; /* rkeys: seeded from the process-wide source */
	struct held held[LOOP_MAX_REORDER];
	uint8_t *held_buf; /* LOOP_MAX_REORDER * mtu */
	uint32_t nheld;
	/* peers this endpoint resolved; owner only */
	struct urpc_tp_peer *peers;
	/* registrations and own operations; owner only (ops[].tag excepted) */
	struct urpc_tp_mr **regs;
	uint32_t nregs, cap_regs;
	struct os_op ops[LOOP_MAX_OPS];
	uint32_t op_free[LOOP_MAX_OPS];
	uint32_t nop_free;
	uint32_t outstanding; /* posted and not yet reaped */
	struct loop_ep *next; /* registry */

	/* Read by senders: constant after create, but for dead (set once by destroy) and refs. */
	uint8_t *ring_base URPC_CACHE_ALIGNED; /* rq_depth slots of mtu bytes */
	struct rx_cell *cells;		       /* rq_depth */
	uint64_t *dues;			       /* rq_depth: visible once polls reaches it */
	uint32_t rx_mask;		       /* rq_depth - 1 */
	uint32_t mtu;
	bool dead; /* atomic */
	int refs;  /* atomic */
	struct urpc_hp_region ring;

	/* Consumer side: written by the owner only. */
	uint32_t rx_head URPC_CACHE_ALIGNED;
	uint32_t in_head;
	uint32_t comp_head;
	uint64_t polls; /* atomic: read by senders' delay switch */

	/* Producer indices: claimed by senders, requesters and targets. */
	uint32_t rx_tail URPC_CACHE_ALIGNED;   /* atomic */
	uint32_t rx_full;		       /* atomic: datagrams lost on a full ring, unfolded */
	uint32_t in_tail URPC_CACHE_ALIGNED;   /* atomic */
	uint32_t comp_tail URPC_CACHE_ALIGNED; /* atomic */

	struct os_ref incoming[LOOP_INCOMING] URPC_CACHE_ALIGNED;
	struct comp_cell comps[LOOP_MAX_OPS];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_ep *registry; /* registry_lock */
static uint32_t next_id = 1;	 /* registry_lock */
static struct urpc_loop_net net; /* set while no endpoint exists (tests/sim) */
static bool net_on;

static URPC_COLD void flush_held(struct loop_ep *ep);

static inline struct loop_ep *to_ep(struct urpc_tp *tp)
{
	return container_of(tp, struct loop_ep, base);
}

/* Take a reference on @ep. Thread: any that holds one already, or under registry_lock. */
static inline void ep_get(struct loop_ep *ep)
{
	__atomic_add_fetch(&ep->refs, 1, __ATOMIC_RELAXED);
}

/*
 * Drop a reference (pairs with ep_get); the last one frees @ep and what it
 * owns, with the references of the requests still queued at it (those that
 * requesters queued after destroy() looked, and failed themselves).
 * Thread: any.
 */
static void ep_put(struct loop_ep *ep)
{
	uint32_t tail;

	/* ACQ_REL: every thread's last use of @ep happens before the free. */
	if (__atomic_sub_fetch(&ep->refs, 1, __ATOMIC_ACQ_REL))
		return;
	tail = __atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED);
	while (ep->in_head != tail)
		ep_put(ep->incoming[ep->in_head++ & (LOOP_INCOMING - 1)].from);
	urpc__hp_free(&ep->ring);
	free(ep->cells);
	free(ep->dues);
	free(ep->held_buf);
	free(ep->regs);
	free(ep);
}

/*
 * Create an endpoint: ring and reorder buffers preallocated, listed in the
 * registry. The caller owns the endpoint until loop_destroy(). Thread: any.
 */
static int loop_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	uint32_t mtu = cfg->mtu ? cfg->mtu : LOOP_DEFAULT_MTU;
	struct loop_ep *ep;
	uint64_t key_seed;
	void *mem;
	uint32_t i;
	int ret;

	if (!URPC_IS_POW2(cfg->rq_depth) || mtu < 64 || mtu > (1u << 20)) {
		URPC_ERR(cfg->id, "loop: rq_depth must be a power of two and mtu in [64, 1 MiB]");
		return -EINVAL;
	}
	if (posix_memalign(&mem, URPC_CACHELINE, sizeof(*ep)))
		return -ENOMEM;
	ep = memset(mem, 0, sizeof(*ep));
	ep->base.ops = &urpc__tp_loop_ops;
	ep->base.kind = URPC_TRANSPORT_LOOP;
	ep->base.mtu = mtu;
	ep->base.rq_depth = cfg->rq_depth;
	ep->base.sq_depth = cfg->sq_depth;
	ep->base.id = cfg->id;
	ep->mtu = mtu;
	ep->rx_mask = cfg->rq_depth - 1;
	ep->refs = 1;
	ep->gen = (uint32_t)urpc__entropy64() | 1;
	key_seed = urpc__entropy64();
	urpc__rand_seed(&ep->rng, cfg->seed);
	ret = urpc__hp_alloc((size_t)cfg->rq_depth * mtu, cfg->hp_flags, &ep->ring);
	if (ret) {
		URPC_ERR(cfg->id, "loop: no memory for a %u x %u receive ring", cfg->rq_depth, mtu);
		goto out_free;
	}
	ep->ring_base = ep->ring.addr;
	ep->cells = calloc(cfg->rq_depth, sizeof(*ep->cells));
	ep->dues = calloc(cfg->rq_depth, sizeof(*ep->dues));
	ep->held_buf = malloc((size_t)LOOP_MAX_REORDER * mtu);
	if (!ep->cells || !ep->dues || !ep->held_buf) {
		URPC_ERR(cfg->id, "loop: out of memory for the ring's bookkeeping");
		ret = -ENOMEM;
		goto out_free;
	}
	/* Cell i is free for the producer of position i (published by the registry's lock). */
	for (i = 0; i < cfg->rq_depth; i++)
		ep->cells[i].seq = i;
	for (i = 0; i < LOOP_INCOMING; i++)
		ep->incoming[i].seq = i;
	for (i = 0; i < LOOP_MAX_OPS; i++) {
		ep->comps[i].seq = i;
		ep->op_free[i] = LOOP_MAX_OPS - 1 - i;
	}
	ep->nop_free = LOOP_MAX_OPS;

	pthread_mutex_lock(&registry_lock);
	ep->faults_on = net_on;
	ep->ep_id = next_id++;
	ep->next = registry;
	registry = ep;
	pthread_mutex_unlock(&registry_lock);
	urpc__rand_seed(&ep->key_rng, key_seed);
	*out = &ep->base;
	return 0;

out_free:
	ep_put(ep);
	return ret;
}

/*
 * Queue the completion of @ep's operation @slot with @status; the caller
 * moved its tag to OP_DONE. Never full: at most LOOP_MAX_OPS operations are
 * unreaped and each completes once, so the cell was freed before the claim;
 * the wait only orders us after that free (pairs with the release in
 * loop_poll_completions()). Thread: any (the target, or @ep's owner).
 */
static void comp_push(struct loop_ep *ep, uint32_t slot, int status)
{
	uint32_t pos = __atomic_fetch_add(&ep->comp_tail, 1, __ATOMIC_RELAXED);
	struct comp_cell *c = &ep->comps[pos & (LOOP_MAX_OPS - 1)];

	while (unlikely(__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != pos))
		; /* no syscall: this runs on the target's datapath */
	c->slot = slot;
	c->status = status;
	/* Pairs with the acquire in loop_poll_completions(). */
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
	/* Acquire pairs with the target's release of OP_DONE in serve_incoming(). */
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

/* Release every peer @ep resolved. Thread: @ep's owner. */
static void release_all_peers(struct loop_ep *ep)
{
	struct urpc_tp_peer *p, *next;

	for (p = ep->peers; p; p = next) {
		next = p->next;
		ep_put(p->ep);
		free(p);
	}
	ep->peers = NULL;
}

/*
 * Destroy @tp and the peers it resolved; -EBUSY (nothing done) while its own
 * one-sided operations are outstanding or memory is registered. Requests
 * that peers queued here complete -ECONNRESET. Thread: @tp's owner.
 */
static int loop_destroy(struct urpc_tp *tp)
{
	struct loop_ep *ep = to_ep(tp), **pp;
	uint32_t tail;

	if (ep->outstanding || ep->nregs)
		return -EBUSY;
	flush_held(ep);
	pthread_mutex_lock(&registry_lock);
	for (pp = &registry; *pp; pp = &(*pp)->next) {
		if (*pp == ep) {
			*pp = ep->next;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
	/*
	 * Requests that targeted us will never be served. SEQ_CST pairs with
	 * post()'s CAS on in_tail and its load of dead: a request claimed
	 * before our load of in_tail is ours to fail; one claimed after it
	 * sees dead and fails itself (the tag's CAS picks one if both try).
	 */
	__atomic_store_n(&ep->dead, true, __ATOMIC_SEQ_CST);
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
		ep_put(r->from);
		ep->in_head++;
	}
	release_all_peers(ep);
	ep_put(ep);
	return 0;
}

/* Write @tp's LOOP_EP_LEN endpoint bytes to @buf. Thread: any. */
static size_t loop_get_endpoint(struct urpc_tp *tp, uint8_t *buf)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t id = htole32(ep->ep_id), gen = htole32(ep->gen);

	buf[0] = URPC_TRANSPORT_LOOP;
	buf[1] = LOOP_EP_VERSION;
	memcpy(buf + 2, &id, 4);
	memcpy(buf + 6, &gen, 4);
	return LOOP_EP_LEN;
}

/*
 * Look up the live endpoint named by @buf and hand back a peer holding a
 * reference on it; the peer belongs to @tp. Thread: @tp's owner.
 */
static int loop_resolve_peer(struct urpc_tp *tp, const uint8_t *buf, size_t len,
			     struct urpc_tp_peer **out)
{
	struct loop_ep *self = to_ep(tp), *ep;
	struct urpc_tp_peer *peer;
	uint32_t id, gen;

	if (!buf || len != LOOP_EP_LEN || buf[0] != URPC_TRANSPORT_LOOP ||
	    buf[1] != LOOP_EP_VERSION)
		return -EINVAL;
	memcpy(&id, buf + 2, 4);
	memcpy(&gen, buf + 6, 4);
	id = le32toh(id);
	gen = le32toh(gen);
	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return -ENOMEM;
	pthread_mutex_lock(&registry_lock);
	for (ep = registry; ep; ep = ep->next)
		if (ep->ep_id == id && ep->gen == gen)
			break;
	if (ep)
		ep_get(ep);
	pthread_mutex_unlock(&registry_lock);
	if (!ep) {
		free(peer);
		return -ENOENT;
	}
	peer->ep = ep;
	peer->next = self->peers;
	if (self->peers)
		self->peers->prev = peer;
	self->peers = peer;
	*out = peer;
	return 0;
}

/* Free @peer (resolved by @tp) and its reference. Thread: @tp's owner. */
static void loop_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	struct loop_ep *self = to_ep(tp);
	uint32_t slot;

	if (!peer)
		return;
	/* Our operations on it end now; the target skips their queued requests. */
	for (slot = 0; slot < LOOP_MAX_OPS; slot++)
		if (OP_STATE(__atomic_load_n(&self->ops[slot].tag, __ATOMIC_RELAXED)) != OP_FREE &&
		    self->ops[slot].peer == peer)
			op_cancel(self, slot, -ECONNRESET);
	if (peer->prev)
		peer->prev->next = peer->next;
	else
		self->peers = peer->next;
	if (peer->next)
		peer->next->prev = peer->prev;
	ep_put(peer->ep);
	free(peer);
}

/*
 * Copy one datagram into @to's ring (or drop it when the ring is full):
 * claim the cell at the ring's tail, copy into its slot, publish it.
 * Always inlined into the send loop: callgrind showed the call itself at a
 * quarter of this function's cost on the cpu_cost benchmark.
 * Thread: any holding a reference on @to.
 */
static inline __attribute__((always_inline)) void deliver(struct loop_ep *to, uint32_t delay_polls,
							  const void *a, uint32_t alen,
							  const void *b, uint32_t blen)
{
	/* Read before the acquire below, which makes the compiler read them again after it. */
	struct rx_cell *cells = to->cells, *c;
	uint8_t *base = to->ring_base, *slot;
	uint32_t mask = to->rx_mask, mtu = to->mtu, pos, seq;

	if (unlikely(__atomic_load_n(&to->dead, __ATOMIC_RELAXED)))
		return;
	pos = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);
	for (;;) {
		c = &cells[pos & mask];
		/* Acquire pairs with the release in loop_rx_release(): the slot is ours to fill. */
		seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		if (likely(seq == pos)) {
			if (likely(__atomic_compare_exchange_n(&to->rx_tail, &pos, pos + 1, true,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED)))
				break;
		} else if ((int32_t)(seq - pos) < 0) {
			/* The oldest entry is still held: the ring is full. */
			__atomic_add_fetch(&to->rx_full, 1, __ATOMIC_RELAXED);
			return;
		} else {
			pos = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);
		}
	}
	slot = base + (size_t)(pos & mask) * mtu;
	memcpy(slot, a, alen);
	if (blen)
		memcpy(slot + alen, b, blen);
	c->len = alen + blen;
	if (delay_polls) { /* a constant 0 on the plain path */
		to->dues[pos & mask] = __atomic_load_n(&to->polls, __ATOMIC_RELAXED) + delay_polls;
		c->len |= RX_DELAYED;
	}
	/* Pairs with the acquire in loop_rx_burst(). */
	__atomic_store_n(&c->seq, pos + 1, __ATOMIC_RELEASE);
}

/* Release held datagram @i (reorder switch) and its reference. Thread: @ep's owner. */
static void release_held(struct loop_ep *ep, uint32_t i)
{
	struct held h = ep->held[i];
	uint8_t *buf = ep->held_buf + (size_t)i * ep->base.mtu;

	deliver(h.to, ep->faults.delay_polls, buf, h.len, NULL, 0);
	ep_put(h.to);
	ep->nheld--;
	if (i != ep->nheld) {
		ep->held[i] = ep->held[ep->nheld];
		memcpy(buf, ep->held_buf + (size_t)ep->nheld * ep->base.mtu, ep->held[i].len);
	}
}

/*
 * Release every held datagram in a random order. Out of line: inlined, its
 * random draw cost loop_rx_burst() a constant load on every call.
 * Thread: @ep's owner.
 */
static URPC_COLD void flush_held(struct loop_ep *ep)
{
	while (ep->nheld)
		release_held(ep, (uint32_t)urpc__rand_below(&ep->rng, ep->nheld));
}

/* Send @t through the fault switches. Thread: @ep's owner. */
static void send_faulty(struct loop_ep *ep, const struct urpc_tp_tx *t)
{
	const struct urpc_loop_faults *f = &ep->faults;
	struct loop_ep *to = t->peer->ep;
	int copies = 1;

	if (net_on) {
		net.send(net.arg, ep->ep_id, to->ep_id, t->hdr, t->hdr_len, t->data, t->data_len);
		return;
	}
	if (unlikely(f->drop > 0 && urpc__rand_unit(&ep->rng) < f->drop)) {
		ep->base.stats.tx_dropped++;
		return;
	}
	if (unlikely(f->dup > 0 && urpc__rand_unit(&ep->rng) < f->dup)) {
		ep->base.stats.tx_duplicated++;
		copies = 2;
	}
	while (copies--) {
		if (unlikely(f->reorder)) {
			uint8_t *buf;

			if (ep->nheld == f->reorder)
				release_held(ep, (uint32_t)urpc__rand_below(&ep->rng, ep->nheld));
			buf = ep->held_buf + (size_t)ep->nheld * ep->base.mtu;
			memcpy(buf, t->hdr, t->hdr_len);
			if (t->data_len)
				memcpy(buf + t->hdr_len, t->data, t->data_len);
			ep->held[ep->nheld].to = to;
			ep->held[ep->nheld].len = t->hdr_len + t->data_len;
			ep_get(to);
			ep->nheld++;
			ep->base.stats.tx_reordered++;
			continue;
		}
		deliver(to, f->delay_polls, t->hdr, t->hdr_len, t->data, t->data_len);
	}
}

/* Copy @n datagrams into their destinations' rings. Thread: @tp's owner. Datapath. */
static int loop_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned i;

	for (i = 0; i < n; i++) {
		if (unlikely(!pkts[i].peer))
			return -EINVAL;
		if (unlikely((uint64_t)pkts[i].hdr_len + pkts[i].data_len > tp->mtu))
			return -EMSGSIZE;
	}
	for (i = 0; i < n; i++) {
		const struct urpc_tp_tx *t = &pkts[i];

		if (unlikely(ep->faults_on))
			send_faulty(ep, t);
		else
			deliver(t->peer->ep, 0, t->hdr, t->hdr_len, t->data, t->data_len);
		tp->stats.tx_bytes += t->hdr_len + t->data_len;
	}
	tp->stats.tx_pkts += n;
	return (int)n;
}

/* Nothing to wait for: tx_burst() copied everything. Thread: @tp's owner. */
static void loop_tx_flush(struct urpc_tp *tp)
{
}

/* @ep's registration with @rkey, or NULL. Thread: @ep's owner. */
static const struct urpc_tp_mr *find_reg(struct loop_ep *ep, uint32_t rkey)
{
	uint32_t i;

	for (i = 0; i < ep->nregs; i++)
		if (ep->regs[i]->rkey == rkey)
			return ep->regs[i];
	return NULL;
}

/*
 * Serve the one-sided requests queued at @ep, in order: take the operation
 * (its tag from queued to serving), check key, access and bounds before any
 * byte moves, copy, and queue the completion at the requester.
 * Thread: @ep's owner.
 */
static void serve_incoming(struct loop_ep *ep)
{
	for (;;) {
		uint32_t pos = ep->in_head, slot, tag, cur;
		struct os_ref *r = &ep->incoming[pos & (LOOP_INCOMING - 1)];
		const struct urpc_tp_mr *mr;
		struct loop_ep *from;
		struct os_op *op;
		uint64_t start;
		unsigned need;
		int status = 0;

		/* Acquire pairs with the release in post(). */
		if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != pos + 1)
			break; /* empty, or a requester between its claim and its publish */
		from = r->from;
		slot = r->slot;
		tag = r->tag;
		op = &from->ops[slot];
		cur = __atomic_load_n(&op->tag, __ATOMIC_RELAXED);
		/* Partitioned: served once the net heals. A finished one goes at once. */
		if (cur == tag && net_on && !net.reachable(net.arg, from->ep_id, ep->ep_id))
			break;
		/* Free the cell for requesters; pairs with the acquire in post(). */
		__atomic_store_n(&r->seq, pos + LOOP_INCOMING, __ATOMIC_RELEASE);
		ep->in_head = pos + 1;
		/* The tag's CAS decides between us and the requester's op_cancel(). */
		if (cur != tag ||
		    !__atomic_compare_exchange_n(&op->tag, &cur, OP_WITH(tag, OP_SERVING), false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			ep_put(from); /* failed by its requester (dereg_mem, release_peer) */
			continue;
		}
		mr = find_reg(ep, op->rkey);
		need = op->op == URPC_TP_OP_READ ? URPC_TP_ACCESS_REMOTE_READ
						 : URPC_TP_ACCESS_REMOTE_WRITE;
		start = mr ? (uint64_t)(uintptr_t)mr->addr : 0;
		ep->base.stats.os_served++;
		if (!mr || !(mr->access & need) || op->raddr < start || op->len > mr->len ||
		    op->raddr - start > mr->len - op->len) {
			status = -EACCES;
			ep->base.stats.os_rejected++;
		} else if (op->op == URPC_TP_OP_READ) {
			memcpy(op->local, (void *)(uintptr_t)op->raddr, op->len);
		} else {
			memcpy((void *)(uintptr_t)op->raddr, op->local, op->len);
		}
		/* Pairs with the acquire in op_cancel(): the copy is over. */
		__atomic_store_n(&op->tag, OP_WITH(tag, OP_DONE), __ATOMIC_RELEASE);
		comp_push(from, slot, status);
		ep_put(from);
	}
}

/* Fold the datagrams senders lost on @ep's full ring into its stats. Thread: @ep's owner. */
static URPC_COLD void fold_ring_full(struct loop_ep *ep)
{
	ep->base.stats.rx_drop_ring_full += __atomic_exchange_n(&ep->rx_full, 0, __ATOMIC_RELAXED);
}

/*
 * Lend up to @n due datagrams from the ring; also serves peers' one-sided
 * requests and releases reorder-held datagrams. Thread: @tp's owner. Datapath.
 */
static int loop_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	uint64_t polls = ep->polls + 1, bytes = 0;
	struct rx_cell *cells;
	uint32_t pos, mask, mtu;
	const uint8_t *base;
	unsigned got = 0;

	__atomic_store_n(&ep->polls, polls, __ATOMIC_RELAXED);
	if (unlikely(ep->nheld))
		flush_held(ep);
	if (unlikely(__atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED) != ep->in_head))
		serve_incoming(ep);
	if (unlikely(__atomic_load_n(&ep->rx_full, __ATOMIC_RELAXED)))
		fold_ring_full(ep);
	/* In locals: the acquire in the loop would make the compiler read them every time. */
	cells = ep->cells;
	base = ep->ring_base;
	mask = ep->rx_mask;
	mtu = ep->mtu;
	pos = ep->rx_head;
	while (got < n) {
		struct rx_cell *c = &cells[pos & mask];
		uint32_t len;

		/* Acquire pairs with the release in deliver(). */
		if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != pos + 1)
			break;
		len = c->len;
		if (unlikely(len & RX_DELAYED)) {
			if (ep->dues[pos & mask] > polls)
				break;
			len &= ~RX_DELAYED;
		}
		pkts[got].buf = base + (size_t)(pos & mask) * mtu;
		pkts[got].len = len;
		pkts[got].ring_idx = pos;
		bytes += len;
		pos++;
		got++;
	}
	ep->rx_head = pos;
	tp->stats.rx_pkts += got;
	tp->stats.rx_bytes += bytes;
	return (int)got;
}

/*
 * Take back @n lent ring entries (ring_idx is the entry's position): each
 * cell's next sequence frees its slot for senders. Entries are reused in
 * ring order, so one held long holds back the reuse of those after it.
 * Thread: @tp's owner. Datapath.
 */
static void loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	struct rx_cell *cells = ep->cells;
	uint32_t mask = ep->rx_mask;
	unsigned i;

	for (i = 0; i < n; i++) {
		uint32_t pos = pkts[i].ring_idx;

		/* Pairs with the acquire in deliver(). */
		__atomic_store_n(&cells[pos & mask].seq, pos + mask + 1, __ATOMIC_RELEASE);
	}
}

/*
 * Register [addr, addr + len) under a fresh random nonzero key (lkey ==
 * rkey). The table of registrations grows here, never on the datapath.
 * @mr is the caller's until dereg. Thread: @tp's owner.
 */
static int loop_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			struct urpc_tp_mr *mr)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t key;

	if (!addr || !len || !mr ||
	    (access & ~(URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)))
		return -EINVAL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -EFAULT;
	if (ep->nregs == ep->cap_regs) {
		uint32_t cap = ep->cap_regs ? ep->cap_regs * 2 : 16;
		struct urpc_tp_mr **n = realloc(ep->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ep->regs = n;
		ep->cap_regs = cap;
	}
	do
		key = (uint32_t)urpc__rand_next(&ep->key_rng);
	while (!key || find_reg(ep, key));
	mr->addr = addr;
	mr->len = len;
	mr->lkey = key;
	mr->rkey = key;
	mr->access = access;
	mr->handle = ep;
	ep->regs[ep->nregs++] = mr;
	return 0;
}

/*
 * Undo loop_reg_mem(): own operations whose local buffer lies in @mr
 * complete -EIO now (those a target is copying for finish first); peers'
 * requests against it are refused from now on. Thread: @tp's owner.
 */
static void loop_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct loop_ep *ep = to_ep(tp);
	bool found = false;
	uint32_t i;

	if (!mr)
		return;
	for (i = 0; i < ep->nregs && !found; i++) {
		if (ep->regs[i] == mr) {
			ep->regs[i] = ep->regs[--ep->nregs];
			found = true;
		}
	}
	if (!found)
		return;
	for (i = 0; i < LOOP_MAX_OPS; i++)
		if (OP_STATE(__atomic_load_n(&ep->ops[i].tag, __ATOMIC_RELAXED)) != OP_FREE &&
		    ep->ops[i].lkey == mr->lkey)
			op_cancel(ep, i, -EIO);
	mr->handle = NULL;
}

/*
 * Queue a one-sided request at the peer. The operation's slot and the
 * queue's cell are preallocated; -EAGAIN when either is full.
 * Thread: @tp's owner. Datapath.
 */
static int post(struct urpc_tp *tp, struct urpc_tp_peer *peer, enum urpc_tp_op op, void *local,
		const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
		uint64_t wr_id)
{
	struct loop_ep *ep = to_ep(tp), *to;
	uintptr_t l = (uintptr_t)local, m;
	uint32_t slot, tag, pos, seq;
	struct os_ref *r;
	struct os_op *o;

	if (unlikely(!peer || !mr || !len))
		return -EINVAL;
	m = (uintptr_t)mr->addr;
	if (unlikely(l < m || len > mr->len || l - m > mr->len - len))
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
	/* Claim a cell; SEQ_CST pairs with loop_destroy() (see there). */
	pos = __atomic_load_n(&to->in_tail, __ATOMIC_RELAXED);
	for (;;) {
		r = &to->incoming[pos & (LOOP_INCOMING - 1)];
		/* Acquire pairs with the release in serve_incoming(). */
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
	ep->nop_free--;
	ep->outstanding++;
	__atomic_store_n(&o->tag, tag, __ATOMIC_RELAXED);
	ep_get(ep); /* the queued request keeps its requester's memory alive */
	r->from = ep;
	r->slot = slot;
	r->tag = tag;
	/* Publish the request and the operation; pairs with the acquire in serve_incoming(). */
	__atomic_store_n(&r->seq, pos + 1, __ATOMIC_RELEASE);
	if (unlikely(__atomic_load_n(&to->dead, __ATOMIC_SEQ_CST)))
		op_cancel(ep, slot, -ECONNRESET); /* destroyed after our early look */
	return 0;
}

/* See post(). Thread: @tp's owner. */
static int loop_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			  const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			  uint64_t wr_id)
{
	return post(tp, peer, URPC_TP_OP_READ, local, mr, raddr, rkey, len, wr_id);
}

/* See post(). Thread: @tp's owner. */
static int loop_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			   const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
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
static int loop_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned got = 0;

	if (unlikely(__atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED) != ep->in_head))
		serve_incoming(ep);
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
		/* Done to free, next generation: stale queued requests fail their CAS. */
		__atomic_store_n(&o->tag, OP_NEXT_GEN(__atomic_load_n(&o->tag, __ATOMIC_RELAXED)),
				 __ATOMIC_RELAXED);
		ep->op_free[ep->nop_free++] = slot;
		ep->outstanding--;
		got++;
	}
	return (int)got;
}

/*
 * Set the fault switches for what @tp sends; datagrams held by the previous
 * reorder setting are released first. Thread: @tp's owner.
 */
int urpc__loop_set_faults(struct urpc_tp *tp, const struct urpc_loop_faults *f)
{
	struct loop_ep *ep;

	if (!tp || tp->kind != URPC_TRANSPORT_LOOP || !f || !(f->drop >= 0 && f->drop <= 1) ||
	    !(f->dup >= 0 && f->dup <= 1) || f->reorder > LOOP_MAX_REORDER)
		return -EINVAL;
	ep = to_ep(tp);
	flush_held(ep);
	ep->faults = *f;
	ep->faults_on = net_on || f->drop > 0 || f->dup > 0 || f->reorder || f->delay_polls;
	return 0;
}

/* Install or remove (NULL) the simulated network. Thread: any, with no endpoint alive. */
int urpc__loop_set_net(const struct urpc_loop_net *n)
{
	int ret = 0;

	pthread_mutex_lock(&registry_lock);
	if (registry)
		ret = -EBUSY;
	else if (n && (!n->send || !n->reachable))
		ret = -EINVAL;
	else if (n)
		net = *n;
	if (!ret)
		net_on = n != NULL;
	pthread_mutex_unlock(&registry_lock);
	return ret;
}

/*
 * Put a datagram the net carried into endpoint @to_id's ring. 0, or
 * -ENOENT when the endpoint is gone (the datagram vanishes), -EMSGSIZE.
 * Thread: the one driving every endpoint (the simulator's).
 */
int urpc__loop_net_deliver(uint32_t to_id, const void *buf, uint32_t len)
{
	struct loop_ep *ep;
	int ret = 0;

	pthread_mutex_lock(&registry_lock);
	for (ep = registry; ep && ep->ep_id != to_id; ep = ep->next)
		;
	if (ep)
		ep_get(ep);
	pthread_mutex_unlock(&registry_lock);
	if (!ep)
		return -ENOENT;
	if (len > ep->mtu)
		ret = -EMSGSIZE;
	else
		deliver(ep, 0, buf, len, NULL, 0);
	ep_put(ep);
	return ret;
}

uint32_t urpc__loop_ep_id(const struct urpc_tp *tp)
{
	return container_of(tp, const struct loop_ep, base)->ep_id;
}

const struct urpc_tp_ops urpc__tp_loop_ops = {
	.name = "loop",
	.create = loop_create,
	.destroy = loop_destroy,
	.get_endpoint = loop_get_endpoint,
	.resolve_peer = loop_resolve_peer,
	.release_peer = loop_release_peer,
	.tx_burst = loop_tx_burst,
	.tx_flush = loop_tx_flush,
	.rx_burst = loop_rx_burst,
	.rx_release = loop_rx_release,
	.reg_mem = loop_reg_mem,
	.dereg_mem = loop_dereg_mem,
	.post_read = loop_post_read,
	.post_write = loop_post_write,
	.poll_completions = loop_poll_completions,
};
