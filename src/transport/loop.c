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
 * Lifetime: an endpoint is reference counted: one reference for itself and
 * one per peer handle that names it. destroy() marks it dead and drops its
 * own reference; datagrams sent to a dead endpoint vanish like datagrams to
 * a host that went away, and one-sided operations complete -ECONNRESET.
 */
#define URPC_LOG_MODULE "loop"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

struct loop_ep;

struct urpc_tp_peer {
	struct loop_ep *ep;
};

struct rx_entry {
	uint32_t idx;
	uint32_t len;
	uint64_t due; /* visible once the receiver's poll count reaches this */
};

struct os_req {
	struct loop_ep *from;
	enum urpc_tp_op op;
	void *local;
	uint64_t raddr;
	uint32_t rkey;
	size_t len;
	uint64_t wr_id;
};

struct held {
	struct loop_ep *to;
	uint32_t len;
};

struct loop_ep {
	struct urpc_tp base;
	uint32_t ep_id;
	uint32_t gen;
	int refs;
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
	bool faults_on; /* any switch set: the common case skips them all */
	struct urpc_rand rng;
	struct held held[LOOP_MAX_REORDER];
	uint8_t *held_buf; /* LOOP_MAX_REORDER * mtu */
	uint32_t nheld;
	/* one-sided */
	struct urpc_tp_mr **regs;
	uint32_t nregs, cap_regs;
	struct os_req incoming[LOOP_INCOMING];
	uint32_t in_head, in_tail;
	struct urpc_tp_comp comps[LOOP_MAX_OPS];
	uint32_t comp_head, comp_tail;
	uint32_t outstanding;
	struct loop_ep *next; /* registry */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_ep *registry;
static uint32_t next_id = 1;

static void flush_held(struct loop_ep *ep);

static inline struct loop_ep *to_ep(struct urpc_tp *tp)
{
	return container_of(tp, struct loop_ep, base);
}

static void ep_put(struct loop_ep *ep)
{
	if (--ep->refs)
		return;
	urpc__hp_free(&ep->ring);
	free(ep->free_stack);
	free(ep->fifo);
	free(ep->held_buf);
	free(ep->regs);
	free(ep);
}

static int loop_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	uint32_t mtu = cfg->mtu ? cfg->mtu : LOOP_DEFAULT_MTU;
	struct loop_ep *ep;
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
	urpc__rand_seed(&ep->rng, cfg->seed);
	ret = urpc__hp_alloc((size_t)cfg->rq_depth * mtu, cfg->hp_flags, &ep->ring);
	if (ret)
		goto out_free;
	ep->free_stack = calloc(cfg->rq_depth, sizeof(*ep->free_stack));
	ep->fifo = calloc(cfg->rq_depth, sizeof(*ep->fifo));
	ep->held_buf = malloc((size_t)LOOP_MAX_REORDER * mtu);
	if (!ep->free_stack || !ep->fifo || !ep->held_buf) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < cfg->rq_depth; i++)
		ep->free_stack[i] = cfg->rq_depth - 1 - i;
	ep->nfree = cfg->rq_depth;

	pthread_mutex_lock(&registry_lock);
	ep->ep_id = next_id++;
	ep->gen = (uint32_t)urpc__rand_next(&ep->rng) | 1;
	ep->next = registry;
	registry = ep;
	pthread_mutex_unlock(&registry_lock);
	*out = &ep->base;
	return 0;

out_free:
	ep_put(ep);
	return ret;
}

/* Complete @r at its requester with @status. */
static void os_complete(struct os_req *r, int status)
{
	struct loop_ep *from = r->from;
	struct urpc_tp_comp *c = &from->comps[from->comp_tail++ % LOOP_MAX_OPS];

	c->wr_id = r->wr_id;
	c->op = r->op;
	c->status = status;
}

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
		struct os_req *r = &ep->incoming[ep->in_head++ % LOOP_INCOMING];

		os_complete(r, -ECONNRESET);
		ep_put(r->from);
	}
	ep_put(ep);
	return 0;
}

static size_t loop_get_endpoint(struct urpc_tp *tp, uint8_t *buf)
{
	struct loop_ep *ep = to_ep(tp);

	buf[0] = URPC_TRANSPORT_LOOP;
	buf[1] = LOOP_EP_VERSION;
	memcpy(buf + 2, &(uint32_t){htole32(ep->ep_id)}, 4);
	memcpy(buf + 6, &(uint32_t){htole32(ep->gen)}, 4);
	return LOOP_EP_LEN;
}

static int loop_resolve_peer(struct urpc_tp *tp, const uint8_t *buf, size_t len,
			     struct urpc_tp_peer **out)
{
	struct urpc_tp_peer *peer;
	struct loop_ep *ep;
	uint32_t id, gen;

	if (len != LOOP_EP_LEN || buf[0] != URPC_TRANSPORT_LOOP || buf[1] != LOOP_EP_VERSION)
		return -EINVAL;
	memcpy(&id, buf + 2, 4);
	memcpy(&gen, buf + 6, 4);
	id = le32toh(id);
	gen = le32toh(gen);
	peer = malloc(sizeof(*peer));
	if (!peer)
		return -ENOMEM;
	pthread_mutex_lock(&registry_lock);
	for (ep = registry; ep; ep = ep->next)
		if (ep->ep_id == id && ep->gen == gen)
			break;
	if (ep)
		ep->refs++;
	pthread_mutex_unlock(&registry_lock);
	if (!ep) {
		free(peer);
		return -ENOENT;
	}
	peer->ep = ep;
	*out = peer;
	return 0;
}

static void loop_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	if (!peer)
		return;
	ep_put(peer->ep);
	free(peer);
}

/*
 * Copy one datagram into @to's ring (or drop it when the ring is full).
 * Always inlined into the send loop: callgrind showed the call itself at a
 * quarter of this function's cost on the cpu_cost benchmark.
 */
static inline __attribute__((always_inline)) void deliver(struct loop_ep *from, struct loop_ep *to,
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
	e->due = to->polls + from->faults.delay_polls;
	to->base.stats.rx_pkts++;
	to->base.stats.rx_bytes += e->len;
}

/* Release held datagram @i (reorder switch). */
static void release_held(struct loop_ep *ep, uint32_t i)
{
	struct held h = ep->held[i];
	uint8_t *buf = ep->held_buf + (size_t)i * ep->base.mtu;

	deliver(ep, h.to, buf, h.len, NULL, 0);
	ep_put(h.to);
	ep->nheld--;
	if (i != ep->nheld) {
		ep->held[i] = ep->held[ep->nheld];
		memcpy(buf, ep->held_buf + (size_t)ep->nheld * ep->base.mtu, ep->held[i].len);
	}
}

static void flush_held(struct loop_ep *ep)
{
	while (ep->nheld)
		release_held(ep, (uint32_t)urpc__rand_below(&ep->rng, ep->nheld));
}

static void send_faulty(struct loop_ep *ep, const struct urpc_tp_tx *t)
{
	const struct urpc_loop_faults *f = &ep->faults;
	struct loop_ep *to = t->peer->ep;
	int copies = 1;

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
			to->refs++;
			ep->nheld++;
			ep->base.stats.tx_reordered++;
			continue;
		}
		deliver(ep, to, t->hdr, t->hdr_len, t->data, t->data_len);
	}
}

static int loop_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned i;

	for (i = 0; i < n; i++) {
		if (unlikely(!pkts[i].peer))
			return -EINVAL;
		if (unlikely(pkts[i].hdr_len + pkts[i].data_len > tp->mtu))
			return -EMSGSIZE;
	}
	for (i = 0; i < n; i++) {
		const struct urpc_tp_tx *t = &pkts[i];

		if (unlikely(ep->faults_on))
			send_faulty(ep, t);
		else
			deliver(ep, t->peer->ep, t->hdr, t->hdr_len, t->data, t->data_len);
		tp->stats.tx_bytes += t->hdr_len + t->data_len;
	}
	tp->stats.tx_pkts += n;
	return (int)n;
}

static void loop_tx_flush(struct urpc_tp *tp)
{
}

static const struct urpc_tp_mr *find_reg(struct loop_ep *ep, uint32_t rkey)
{
	uint32_t i;

	for (i = 0; i < ep->nregs; i++)
		if (ep->regs[i]->rkey == rkey)
			return ep->regs[i];
	return NULL;
}

/* Serve the one-sided requests queued at @ep. */
static void serve_incoming(struct loop_ep *ep)
{
	while (ep->in_head != ep->in_tail) {
		struct os_req *r = &ep->incoming[ep->in_head++ % LOOP_INCOMING];
		const struct urpc_tp_mr *mr = find_reg(ep, r->rkey);
		unsigned need = r->op == URPC_TP_OP_READ ? URPC_TP_ACCESS_REMOTE_READ
							 : URPC_TP_ACCESS_REMOTE_WRITE;
		uint64_t start = mr ? (uint64_t)(uintptr_t)mr->addr : 0;
		int status = 0;

		ep->base.stats.os_served++;
		if (!mr || !(mr->access & need) || r->raddr < start || r->len > mr->len ||
		    r->raddr - start > mr->len - r->len) {
			status = -EACCES;
			ep->base.stats.os_rejected++;
		} else if (r->op == URPC_TP_OP_READ) {
			memcpy(r->local, (void *)(uintptr_t)r->raddr, r->len);
		} else {
			memcpy((void *)(uintptr_t)r->raddr, r->local, r->len);
		}
		os_complete(r, status);
		ep_put(r->from);
	}
}

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

static void loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned i;

	for (i = 0; i < n; i++)
		ep->free_stack[ep->nfree++] = pkts[i].ring_idx;
}

static int loop_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			struct urpc_tp_mr *mr)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t key;

	if (!addr || !len)
		return -EINVAL;
	if (ep->nregs == ep->cap_regs) {
		uint32_t cap = ep->cap_regs ? ep->cap_regs * 2 : 16;
		struct urpc_tp_mr **n = realloc(ep->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ep->regs = n;
		ep->cap_regs = cap;
	}
	do
		key = (uint32_t)urpc__rand_next(&ep->rng);
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

static void loop_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t i;

	for (i = 0; i < ep->nregs; i++) {
		if (ep->regs[i] == mr) {
			ep->regs[i] = ep->regs[--ep->nregs];
			return;
		}
	}
}

static int post(struct urpc_tp *tp, struct urpc_tp_peer *peer, enum urpc_tp_op op, void *local,
		const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
		uint64_t wr_id)
{
	struct loop_ep *ep = to_ep(tp), *to;
	uintptr_t l = (uintptr_t)local, m;
	struct os_req *r;

	if (!peer || !mr || !len)
		return -EINVAL;
	m = (uintptr_t)mr->addr;
	if (l < m || len > mr->len || l - m > mr->len - len)
		return -EINVAL;
	if (ep->outstanding == LOOP_MAX_OPS)
		return -EAGAIN;
	to = peer->ep;
	if (to->in_tail - to->in_head == LOOP_INCOMING)
		return -EAGAIN;
	ep->outstanding++;
	if (to->dead) {
		struct os_req dead = {.from = ep, .op = op, .wr_id = wr_id};

		os_complete(&dead, -ECONNRESET);
		return 0;
	}
	r = &to->incoming[to->in_tail++ % LOOP_INCOMING];
	r->from = ep;
	r->op = op;
	r->local = local;
	r->raddr = raddr;
	r->rkey = rkey;
	r->len = len;
	r->wr_id = wr_id;
	ep->refs++; /* the request keeps its requester alive */
	return 0;
}

static int loop_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			  const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			  uint64_t wr_id)
{
	return post(tp, peer, URPC_TP_OP_READ, local, mr, raddr, rkey, len, wr_id);
}

static int loop_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			   const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			   uint64_t wr_id)
{
	return post(tp, peer, URPC_TP_OP_WRITE, (void *)(uintptr_t)local, mr, raddr, rkey, len,
		    wr_id);
}

static int loop_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	unsigned got = 0;

	if (unlikely(ep->in_head != ep->in_tail))
		serve_incoming(ep);
	while (got < n && ep->comp_head != ep->comp_tail) {
		comps[got++] = ep->comps[ep->comp_head++ % LOOP_MAX_OPS];
		ep->outstanding--;
	}
	return (int)got;
}

int urpc__loop_set_faults(struct urpc_tp *tp, const struct urpc_loop_faults *f)
{
	struct loop_ep *ep;

	if (!tp || tp->kind != URPC_TRANSPORT_LOOP || !f || f->drop < 0 || f->drop > 1 ||
	    f->dup < 0 || f->dup > 1 || f->reorder > LOOP_MAX_REORDER)
		return -EINVAL;
	ep = to_ep(tp);
	flush_held(ep);
	ep->faults = *f;
	ep->faults_on = f->drop > 0 || f->dup > 0 || f->reorder || f->delay_polls;
	return 0;
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
