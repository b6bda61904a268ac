/* SPDX-License-Identifier: MIT */
/*
 * The loop transport: endpoints in one process joined by memory rings, with
 * seeded fault switches. See transport.h for the contract.
 *
 * Threads: endpoints that talk to each other are driven from one thread (the
 * tests and the CPU-cost benchmark do so). The registry that maps endpoint
 * ids to endpoints is the only shared state; its mutex is taken at create,
 * destroy and resolve, never on the datapath.
 *
 * Endpoint bytes: kind, version, a 32-bit id (never reused in a process) and
 * a 32-bit random generation; resolving needs both to match a live endpoint,
 * so the bytes of a destroyed endpoint give -ENOENT.
 *
 * Lifetime: an endpoint is reference counted: one reference for itself, one
 * per peer handle that names it, one per datagram held by a reorder switch
 * and one per one-sided request queued at a target (held on the requester).
 * destroy() marks it dead and drops its own reference; datagrams sent to a
 * dead endpoint vanish like datagrams to a host that went away.
 *
 * One-sided operations: a request sits in the target's queue until the
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
 * receiver's ring FIFO is the in-flight queue (preallocated, in order, so a
 * delayed datagram also holds back those queued behind it).
 */
#define URPC_LOG_MODULE "loop"
#include <endian.h>
#include <errno.h>
#include <pthread.h>
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

struct loop_ep;

struct urpc_tp_peer {
	struct loop_ep *ep;		  /* the remote endpoint; one reference */
	struct urpc_tp_peer *next, *prev; /* the resolving endpoint's list */
};

struct rx_entry {
	uint32_t idx;
	uint32_t len;
	uint64_t due; /* visible once the receiver's poll count reaches this */
};

/* A one-sided operation, in its requester's slot table. */
struct os_op {
	enum urpc_tp_op op;
	bool active;
	const struct urpc_tp_peer *peer; /* released: the operation completes -ECONNRESET */
	uint32_t seq; /* bumped when the slot is finished; stale queue entries skip it */
	uint32_t lkey;
	void *local;
	uint64_t raddr;
	uint32_t rkey;
	size_t len;
	uint64_t wr_id;
};

/* A request queued at its target: names the requester's slot. */
struct os_ref {
	struct loop_ep *from; /* one reference */
	uint32_t slot;
	uint32_t seq;
};

struct held {
	struct loop_ep *to; /* one reference */
	uint32_t len;
};

struct loop_ep {
	struct urpc_tp base;
	uint32_t ep_id;
	uint32_t gen;
	int refs; /* atomic */
	bool dead;
	/* receive ring */
	struct urpc_hp_region ring;
	uint32_t *free_stack;
	uint32_t nfree;
	struct rx_entry *fifo; /* rq_depth entries */
	uint32_t fifo_head, fifo_tail;
	uint64_t polls;
	/* fault switches for what this endpoint sends */
	struct urpc_loop_faults faults;
	bool faults_on;		  /* any switch set: the common case skips them all */
	struct urpc_rand rng;	  /* fault switches only: a function of cfg->seed */
	struct urpc_rand key_rng; /* rkeys: seeded from the process-wide source */
	struct held held[LOOP_MAX_REORDER];
	uint8_t *held_buf; /* LOOP_MAX_REORDER * mtu */
	uint32_t nheld;
	/* peers this endpoint resolved */
	struct urpc_tp_peer *peers;
	/* one-sided: registrations, requests served for peers, own operations */
	struct urpc_tp_mr **regs;
	uint32_t nregs, cap_regs;
	struct os_ref incoming[LOOP_INCOMING];
	uint32_t in_head, in_tail;
	struct os_op ops[LOOP_MAX_OPS];
	uint32_t op_free[LOOP_MAX_OPS];
	uint32_t nop_free;
	struct urpc_tp_comp comps[LOOP_MAX_OPS];
	uint32_t comp_head, comp_tail;
	uint32_t outstanding; /* posted and not yet reaped */
	struct loop_ep *next; /* registry */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_ep *registry; /* registry_lock */
static uint32_t next_id = 1;	 /* registry_lock */
static struct urpc_loop_net net; /* set while no endpoint exists (tests/sim) */
static bool net_on;

static void flush_held(struct loop_ep *ep);

static inline struct loop_ep *to_ep(struct urpc_tp *tp)
{
	return container_of(tp, struct loop_ep, base);
}

/* Take a reference on @ep. Thread: the thread driving @ep, or under registry_lock. */
static inline void ep_get(struct loop_ep *ep)
{
	__atomic_add_fetch(&ep->refs, 1, __ATOMIC_RELAXED);
}

/* Drop a reference (pairs with ep_get); the last one frees @ep and what it owns. */
static void ep_put(struct loop_ep *ep)
{
	if (__atomic_sub_fetch(&ep->refs, 1, __ATOMIC_ACQ_REL))
		return;
	urpc__hp_free(&ep->ring);
	free(ep->free_stack);
	free(ep->fifo);
	free(ep->held_buf);
	free(ep->regs);
	free(ep);
}

/*
 * Create an endpoint: ring, FIFO and reorder buffers preallocated, listed in
 * the registry. The caller owns the endpoint until loop_destroy(). Thread: any.
 */
static int loop_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	uint32_t mtu = cfg->mtu ? cfg->mtu : LOOP_DEFAULT_MTU;
	struct loop_ep *ep;
	uint64_t key_seed;
	uint32_t i;
	int ret;

	if (!URPC_IS_POW2(cfg->rq_depth) || mtu < 64 || mtu > (1u << 20)) {
		URPC_ERR(cfg->id, "loop: rq_depth must be a power of two and mtu in [64, 1 MiB]");
		return -EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->base.ops = &urpc__tp_loop_ops;
	ep->base.kind = URPC_TRANSPORT_LOOP;
	ep->base.mtu = mtu;
	ep->base.rq_depth = cfg->rq_depth;
	ep->base.sq_depth = cfg->sq_depth;
	ep->base.id = cfg->id;
	ep->refs = 1;
	ep->gen = (uint32_t)urpc__entropy64() | 1;
	key_seed = urpc__entropy64();
	urpc__rand_seed(&ep->rng, cfg->seed);
	ep->faults_on = net_on;
	ret = urpc__hp_alloc((size_t)cfg->rq_depth * mtu, cfg->hp_flags, &ep->ring);
	if (ret) {
		URPC_ERR(cfg->id, "loop: no memory for a %u x %u receive ring", cfg->rq_depth, mtu);
		goto out_free;
	}
	ep->free_stack = calloc(cfg->rq_depth, sizeof(*ep->free_stack));
	ep->fifo = calloc(cfg->rq_depth, sizeof(*ep->fifo));
	ep->held_buf = malloc((size_t)LOOP_MAX_REORDER * mtu);
	if (!ep->free_stack || !ep->fifo || !ep->held_buf) {
		URPC_ERR(cfg->id, "loop: out of memory for the ring's bookkeeping");
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < cfg->rq_depth; i++)
		ep->free_stack[i] = cfg->rq_depth - 1 - i;
	ep->nfree = cfg->rq_depth;
	for (i = 0; i < LOOP_MAX_OPS; i++)
		ep->op_free[i] = LOOP_MAX_OPS - 1 - i;
	ep->nop_free = LOOP_MAX_OPS;

	pthread_mutex_lock(&registry_lock);
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
 * Finish the operation in @from's slot @slot with @status: its completion
 * is queued for @from's poll_completions() and the slot is free again.
 * Thread: the one driving @from.
 */
static void op_finish(struct loop_ep *from, uint32_t slot, int status)
{
	struct os_op *op = &from->ops[slot];
	struct urpc_tp_comp *c = &from->comps[from->comp_tail++ & (LOOP_MAX_OPS - 1)];

	c->wr_id = op->wr_id;
	c->op = op->op;
	c->status = status;
	op->active = false;
	op->seq++;
	from->op_free[from->nop_free++] = slot;
}

/* The operation @r names, or NULL when it was finished meanwhile (dereg_mem). */
static struct os_op *ref_op(const struct os_ref *r)
{
	struct os_op *op = &r->from->ops[r->slot];

	return op->active && op->seq == r->seq ? op : NULL;
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
	ep->dead = true;
	/* Requests that targeted us will never be served. */
	while (ep->in_head != ep->in_tail) {
		struct os_ref *r = &ep->incoming[ep->in_head++ & (LOOP_INCOMING - 1)];

		if (ref_op(r))
			op_finish(r->from, r->slot, -ECONNRESET);
		ep_put(r->from);
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
		if (self->ops[slot].active && self->ops[slot].peer == peer)
			op_finish(self, slot, -ECONNRESET);
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
 * Copy one datagram into @to's ring (or drop it when the ring is full).
 * Always inlined into the send loop: callgrind showed the call itself at a
 * quarter of this function's cost on the cpu_cost benchmark.
 * Thread: the one driving both endpoints.
 */
static inline __attribute__((always_inline)) void deliver(struct loop_ep *to, uint32_t delay_polls,
							  const void *a, uint32_t alen,
							  const void *b, uint32_t blen)
{
	struct rx_entry *e;
	uint32_t idx;
	uint8_t *slot;

	if (unlikely(to->dead))
		return;
	if (unlikely(!to->nfree)) {
		to->base.stats.rx_drop_ring_full++;
		return;
	}
	idx = to->free_stack[--to->nfree];
	slot = (uint8_t *)to->ring.addr + (size_t)idx * to->base.mtu;
	memcpy(slot, a, alen);
	if (blen)
		memcpy(slot + alen, b, blen);
	e = &to->fifo[to->fifo_tail++ & (to->base.rq_depth - 1)];
	e->idx = idx;
	e->len = alen + blen;
	e->due = to->polls + delay_polls;
	to->base.stats.rx_pkts++;
	to->base.stats.rx_bytes += e->len;
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

/* Release every held datagram in a random order. Thread: @ep's owner. */
static void flush_held(struct loop_ep *ep)
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
 * Serve the one-sided requests queued at @ep: key, access and bounds are
 * checked before any byte moves. Thread: the one driving @ep and the requesters.
 */
static void serve_incoming(struct loop_ep *ep)
{
	while (ep->in_head != ep->in_tail) {
		struct os_ref *r = &ep->incoming[ep->in_head & (LOOP_INCOMING - 1)];
		struct os_op *op = ref_op(r);

		/* Partitioned: served once the net heals. A finished one goes at once. */
		if (op && net_on && !net.reachable(net.arg, r->from->ep_id, ep->ep_id))
			break;
		ep->in_head++;
		const struct urpc_tp_mr *mr;
		uint64_t start;
		unsigned need;
		int status = 0;

		if (!op) { /* finished by the requester's dereg_mem() */
			ep_put(r->from);
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
		op_finish(r->from, r->slot, status);
		ep_put(r->from);
	}
}

/*
 * Lend up to @n due datagrams from the ring; also serves peers' one-sided
 * requests and releases reorder-held datagrams. Thread: @tp's owner. Datapath.
 */
static int loop_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned got = 0;

	ep->polls++;
	if (unlikely(ep->nheld))
		flush_held(ep);
	if (unlikely(ep->in_head != ep->in_tail))
		serve_incoming(ep);
	while (got < n && ep->fifo_head != ep->fifo_tail) {
		struct rx_entry *e = &ep->fifo[ep->fifo_head & (tp->rq_depth - 1)];

		if (unlikely(e->due > ep->polls))
			break;
		pkts[got].buf = (const uint8_t *)ep->ring.addr + (size_t)e->idx * tp->mtu;
		pkts[got].len = e->len;
		pkts[got].ring_idx = e->idx;
		ep->fifo_head++;
		got++;
	}
	return (int)got;
}

/* Take back @n lent ring entries. Thread: @tp's owner. Datapath. */
static void loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned i;

	for (i = 0; i < n; i++)
		ep->free_stack[ep->nfree++] = pkts[i].ring_idx;
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
 * complete -EIO now; peers' requests against it are refused from now on.
 * Thread: @tp's owner.
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
		if (ep->ops[i].active && ep->ops[i].lkey == mr->lkey)
			op_finish(ep, i, -EIO);
	mr->handle = NULL;
}

/*
 * Queue a one-sided request at the peer. The operation's slot and the
 * queue entry are preallocated; -EAGAIN when either is full.
 * Thread: @tp's owner. Datapath.
 */
static int post(struct urpc_tp *tp, struct urpc_tp_peer *peer, enum urpc_tp_op op, void *local,
		const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
		uint64_t wr_id)
{
	struct loop_ep *ep = to_ep(tp), *to;
	uintptr_t l = (uintptr_t)local, m;
	struct os_ref *r;
	struct os_op *o;
	uint32_t slot;

	if (unlikely(!peer || !mr || !len))
		return -EINVAL;
	m = (uintptr_t)mr->addr;
	if (unlikely(l < m || len > mr->len || l - m > mr->len - len))
		return -EINVAL;
	if (unlikely(ep->outstanding == LOOP_MAX_OPS))
		return -EAGAIN;
	to = peer->ep;
	if (unlikely(to->in_tail - to->in_head == LOOP_INCOMING))
		return -EAGAIN;
	slot = ep->op_free[--ep->nop_free];
	o = &ep->ops[slot];
	o->op = op;
	o->active = true;
	o->peer = peer;
	o->lkey = mr->lkey;
	o->local = local;
	o->raddr = raddr;
	o->rkey = rkey;
	o->len = len;
	o->wr_id = wr_id;
	ep->outstanding++;
	if (unlikely(to->dead)) {
		op_finish(ep, slot, -ECONNRESET);
		return 0;
	}
	r = &to->incoming[to->in_tail++ & (LOOP_INCOMING - 1)];
	r->from = ep;
	r->slot = slot;
	r->seq = o->seq;
	ep_get(ep); /* the queued request keeps its requester's memory alive */
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
 * operations (each exactly once). Thread: @tp's owner. Datapath.
 */
static int loop_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned got = 0;

	if (unlikely(ep->in_head != ep->in_tail))
		serve_incoming(ep);
	while (got < n && ep->comp_head != ep->comp_tail) {
		comps[got++] = ep->comps[ep->comp_head++ & (LOOP_MAX_OPS - 1)];
		ep->outstanding--;
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

	pthread_mutex_lock(&registry_lock);
	for (ep = registry; ep && ep->ep_id != to_id; ep = ep->next)
		;
	pthread_mutex_unlock(&registry_lock);
	if (!ep)
		return -ENOENT;
	if (len > ep->base.mtu)
		return -EMSGSIZE;
	deliver(ep, 0, buf, len, NULL, 0);
	return 0;
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
