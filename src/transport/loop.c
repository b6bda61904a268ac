/* SPDX-License-Identifier: MIT */
/*
 * The loop transport: endpoints in one process joined by memory rings, with
 * seeded fault switches. See transport.h for the contract. This file is
 * its top: create/destroy, peers, datagrams (the rings and the fault
 * switches), the simulated network and the ops table; it calls down into
 * loop_os.c (one-sided operations and registrations, the last reference
 * of an endpoint), which never calls back up. loop_int.h holds the types.
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
 * wait meanwhile. A sender reads a destination's ring once per run of
 * datagrams to it and guesses each next position (put()).
 *
 * Endpoint bytes: kind, version, a 32-bit id (never reused in a process) and
 * a 32-bit random generation; resolving needs both to match a live endpoint,
 * so the bytes of a destroyed endpoint give -ENOENT.
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
#include "../util/copy.h"
#include "../util/log.h"
#include "../util/rand.h"
#include "../util/seam.h"
#include "loop_int.h"
#include "loop_os.h"
#include "tp_default.h"
#include "transport.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_ep *registry; /* registry_lock */
static uint32_t next_id = 1;	 /* registry_lock */
static struct urpc_loop_net net; /* set while no endpoint exists (tests/sim) */
static bool net_on;

static URPC_COLD void flush_held(struct loop_ep *ep);

/*
 * Create an endpoint: ring and reorder buffers preallocated, listed in the
 * registry. The caller owns the endpoint until loop_destroy(). Thread: any.
 */
static int loop_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	uint32_t mtu = cfg->mtu ? cfg->mtu : LOOP_DEFAULT_MTU;
	struct loop_ep *ep;
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
	urpc__rand_seed(&ep->rng, cfg->seed);
	ret = urpc__hp_alloc((size_t)cfg->rq_depth * mtu, cfg->hp_flags, &ep->ring);
	if (ret) {
		URPC_ERR(cfg->id, "loop: no memory for a %u x %u receive ring", cfg->rq_depth, mtu);
		goto out_free;
	}
	ep->ring_base = ep->ring.addr;
	ep->cells = calloc(cfg->rq_depth, sizeof(*ep->cells));
	/* read[] shares dues[]' allocation (freed with it): both are per slot. */
	ep->dues = calloc(cfg->rq_depth, sizeof(*ep->dues) + sizeof(*ep->read));
	ep->held_buf = malloc((size_t)LOOP_MAX_REORDER * mtu);
	if (!ep->cells || !ep->dues || !ep->held_buf) {
		URPC_ERR(cfg->id, "loop: out of memory for the ring's bookkeeping");
		ret = -ENOMEM;
		goto out_free;
	}
	/* Cell i is free for the producer of position i (published by the registry's lock). */
	for (i = 0; i < cfg->rq_depth; i++)
		ep->cells[i].seq = i; /* published at position i once it reads i + 1 */
	if (ep->dues) {
		ep->read = (uint32_t *)(void *)(ep->dues + cfg->rq_depth);
		for (i = 0; i < cfg->rq_depth; i++)
			ep->read[i] = i - 1; /* not read at position i */
	}
	ep->rx_limit = cfg->rq_depth; /* every slot free */
	for (i = 0; i < LOOP_INCOMING; i++)
		ep->incoming[i].seq = i;
	for (i = 0; i < LOOP_MAX_OPS; i++) {
		ep->comps[i].seq = i;
		ep->op_free[i] = LOOP_MAX_OPS - 1 - i;
	}
	ep->nop_free = LOOP_MAX_OPS;

	pthread_mutex_lock(&registry_lock);
	ep->faults_on = net_on;
	ep->net = net_on ? &net : NULL;
	/*
	 * The simulator drives the batch path and explicit release, as udp
	 * and verbs have them.
	 */
	ep->reclaim = cfg->rx_reclaim && !net_on;
	ep->base.caps = net_on ? 0 : URPC_TP_CAP_TX_NOW;
	if (ep->reclaim)
		ep->base.caps |= URPC_TP_CAP_RX_RECLAIM;
	ep->ep_id = next_id++;
	ep->next = registry;
	registry = ep;
	pthread_mutex_unlock(&registry_lock);
	urpc__sw_mr_init(&ep->mrs, 0);
	ep->mrs.live_stat = &ep->base.stats.grants_live;
	*out = &ep->base;
	return 0;

out_free:
	urpc__loop_ep_put(ep);
	return ret;
}

/* Release every peer @ep resolved. Thread: @ep's owner. */
static void release_all_peers(struct loop_ep *ep)
{
	struct urpc_tp_peer *p, *next;

	for (p = ep->peers; p; p = next) {
		next = p->next;
		urpc__loop_ep_put(p->ep);
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

	if (ep->outstanding || ep->mrs.n)
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
	/* Senders find the ring full from now on: what they send vanishes (loop_tx_now()). */
	__atomic_store_n(&ep->rx_limit, ep->rx_free, __ATOMIC_RELEASE);
	urpc__loop_os_fail_incoming(ep);
	release_all_peers(ep);
	urpc__loop_ep_put(ep);
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

	if (!peer)
		return;
	/* Our operations on it end now; the target skips their queued requests. */
	urpc__loop_os_cancel_peer(self, peer);
	if (peer->prev)
		peer->prev->next = peer->next;
	else
		self->peers = peer->next;
	if (peer->next)
		peer->next->prev = peer->prev;
	urpc__loop_ep_put(peer->ep);
	free(peer);
}

/*
 * Put one datagram, @a then @b, into @to's ring (whose cells, slots, mask
 * and mtu the caller read), or drop it when the ring is full: claim
 * position *@pos, copy into its slot, publish its cell. *@pos is a guess
 * at the tail (the position after the sender's last claim on @to saves
 * reading it again), which the CAS checks; on return it is the next guess,
 * never ahead of the tail. Always inlined into the send loops. Thread: any
 * holding a reference on @to.
 */
static inline __attribute__((always_inline)) void
put(struct loop_ep *to, struct rx_cell *cells, uint8_t *base, uint32_t mask, uint32_t mtu,
    uint32_t *pos, uint32_t delay_polls, const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	uint32_t p = *pos;
	struct rx_cell *c;

	do {
		/*
		 * Acquire pairs with the release in free_upto(): the slot's
		 * last datagram has been read. At the limit the oldest entry
		 * is still held: the ring is full (a guess is never ahead of
		 * the tail, so the tail is at the limit too).
		 */
		if (unlikely((int32_t)(p - __atomic_load_n(&to->rx_limit, __ATOMIC_ACQUIRE)) >=
			     0)) {
			__atomic_add_fetch(&to->rx_full, 1, __ATOMIC_RELAXED);
			*pos = p;
			return;
		}
		/* A failed CAS reads the tail into p: try again from there. */
	} while (unlikely(!__atomic_compare_exchange_n(&to->rx_tail, &p, p + 1, true,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED)));
	*pos = p + 1;
	c = &cells[p & mask];
	urpc__copy(base + (size_t)(p & mask) * mtu, a, alen);
	if (unlikely(blen))
		memcpy(base + (size_t)(p & mask) * mtu + alen, b, blen);
	c->len = alen + blen;
	if (delay_polls) { /* a constant 0 on the plain path */
		to->dues[p & mask] = __atomic_load_n(&to->polls, __ATOMIC_RELAXED) + delay_polls;
		c->len |= RX_DELAYED;
	}
	/* Pairs with the acquire in loop_rx_burst(). */
	__atomic_store_n(&c->seq, p + 1, __ATOMIC_RELEASE);
}

/* put() one datagram into @to's ring. Thread: any holding a reference on @to. */
static void deliver(struct loop_ep *to, uint32_t delay_polls, const void *a, uint32_t alen,
		    const void *b, uint32_t blen)
{
	uint32_t pos = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);

	if (likely(!__atomic_load_n(&to->dead, __ATOMIC_RELAXED)))
		put(to, to->cells, to->ring_base, to->rx_mask, to->mtu, &pos, delay_polls, a, alen,
		    b, blen);
}

/* Release held datagram @i (reorder switch) and its reference. Thread: @ep's owner. */
static void release_held(struct loop_ep *ep, uint32_t i)
{
	struct held h = ep->held[i];
	uint8_t *buf = ep->held_buf + (size_t)i * ep->base.mtu;

	deliver(h.to, ep->faults.delay_polls, buf, h.len, NULL, 0);
	urpc__loop_ep_put(h.to);
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

/* The error of the first bad entry of @pkts (tx_burst's contract). Cold path. */
static URPC_COLD int tx_bad(const struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (!pkts[i].peer)
			return -EINVAL;
		if ((uint64_t)pkts[i].hdr_len + pkts[i].data_len > tp->mtu)
			return -EMSGSIZE;
	}
	return -EINVAL;
}

/*
 * put() @n checked datagrams into their destinations' rings, reading a ring
 * once per run of datagrams to it (callgrind on urpc-cpu-cost: 59 instructions
 * per datagram before, with the ring read for each and a call to memcpy).
 */
static void send_plain(const struct urpc_tp_tx *pkts, unsigned n)
{
	struct loop_ep *to = NULL;
	struct rx_cell *cells = NULL;
	uint8_t *base = NULL;
	uint32_t mask = 0, mtu = 0, pos = 0, i;
	bool dead = false;

	for (i = 0; i < n; i++) {
		const struct urpc_tp_tx *t = &pkts[i];

		if (unlikely(t->peer->ep != to)) {
			to = t->peer->ep;
			cells = to->cells;
			base = to->ring_base;
			mask = to->rx_mask;
			mtu = to->mtu;
			dead = __atomic_load_n(&to->dead, __ATOMIC_RELAXED);
			pos = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);
		}
		if (likely(!dead))
			put(to, cells, base, mask, mtu, &pos, 0, t->hdr, t->hdr_len, t->data,
			    t->data_len);
	}
}

/*
 * Copy @n datagrams into their destinations' rings. The whole batch is
 * checked first (nothing is sent when an entry is bad).
 * Thread: @tp's owner. Datapath.
 */
static int loop_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	uint64_t bytes = 0, mtu = tp->mtu;
	unsigned i;

	for (i = 0; i < n; i++) {
		uint64_t len = (uint64_t)pkts[i].hdr_len + pkts[i].data_len;

		if (unlikely(!pkts[i].peer || len > mtu))
			return tx_bad(tp, pkts, n);
		bytes += len;
	}
	if (unlikely(ep->faults_on))
		for (i = 0; i < n; i++)
			send_faulty(ep, &pkts[i]);
	else
		send_plain(pkts, n);
	tp->stats.tx_bytes += bytes;
	tp->stats.tx_pkts += n;
	return (int)n;
}

/*
 * tx_now() of anything but a plain datagram: an error (no peer, longer
 * than the MTU), or the fault switches. Out of line, so that the plain path
 * needs no stack frame. Thread: @ep's owner.
 */
static __attribute__((noinline)) int tx_now_slow(struct loop_ep *ep, struct urpc_tp_peer *peer,
						 const void *buf, uint32_t len)
{
	const struct urpc_tp_tx t = {.peer = peer, .hdr = buf, .hdr_len = len};

	if (!peer || len > ep->base.mtu) {
		URPC_ERR_RATELIMIT(ep->base.id, "tx_now of %u bytes refused: %s", len,
				   peer ? "longer than the MTU" : "no peer");
		return peer ? -EMSGSIZE : -EINVAL;
	}
	ep->base.stats.tx_bytes += len;
	ep->base.stats.tx_pkts++;
	send_faulty(ep, &t);
	return 0;
}

/*
 * Copy one datagram into @peer's ring now (URPC_TP_CAP_TX_NOW): what
 * tx_burst() does for an entry, without the entry. Thread: @tp's owner.
 * Datapath.
 */
static int loop_tx_now(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf, uint32_t len)
{
	struct loop_ep *ep = to_ep(tp), *to;
	uint32_t pos;

	if (unlikely(!peer || len > tp->mtu || ep->faults_on))
		return tx_now_slow(ep, peer, buf, len);
	tp->stats.tx_bytes += len;
	tp->stats.tx_pkts++;
	to = peer->ep;
	/* A dead endpoint's ring reads full (loop_destroy()): no test of dead here. */
	pos = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);
	put(to, to->cells, to->ring_base, to->rx_mask, to->mtu, &pos, 0, buf, len, NULL, 0);
	return 0;
}

/* Nothing to wait for: tx_burst() copied everything. Thread: @tp's owner. */
static void loop_tx_flush(struct urpc_tp *tp)
{
}

/* Fold the datagrams senders lost on @ep's full ring into its stats. Thread: @ep's owner. */
static URPC_COLD void fold_ring_full(struct loop_ep *ep)
{
	ep->base.stats.rx_drop_ring_full += __atomic_exchange_n(&ep->rx_full, 0, __ATOMIC_RELAXED);
}

/*
 * Give every slot before position @pos back to senders: the datagrams in
 * them have been read. Thread: @ep's owner.
 */
static inline void free_upto(struct loop_ep *ep, uint32_t pos)
{
	ep->rx_free = pos;
	/* Pairs with the acquire in put(). */
	__atomic_store_n(&ep->rx_limit, pos + ep->rx_mask + 1, __ATOMIC_RELEASE);
}

/*
 * Lend up to @n due datagrams from the ring; with cfg.rx_reclaim, first
 * take back every entry lent before. Also serves peers' one-sided requests
 * and releases reorder-held datagrams. Thread: @tp's owner. Datapath.
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
		urpc__loop_os_serve(ep);
	if (unlikely(__atomic_load_n(&ep->rx_full, __ATOMIC_RELAXED)))
		fold_ring_full(ep);
	/* In locals: the acquire in the loop would make the compiler read them every time. */
	cells = ep->cells;
	base = ep->ring_base;
	mask = ep->rx_mask;
	mtu = ep->mtu;
	pos = ep->rx_head;
	if (ep->reclaim && ep->rx_free != pos)
		free_upto(ep, pos);
	while (got < n) {
		struct rx_cell *c = &cells[pos & mask];
		uint32_t len;

		/* Acquire pairs with the release in put(). */
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
 * Take back @n lent ring entries (ring_idx is the entry's position), in
 * any order: each is marked read, and the slots up to the first entry still
 * lent go back to senders. Entries are reused in ring order, so one held
 * long holds back the reuse of those after it. With cfg.rx_reclaim it does
 * nothing: the next rx_burst() takes them back. An entry not lent now is
 * ignored. Thread: @tp's owner. Datapath.
 */
static void loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);
	uint32_t mask = ep->rx_mask, lent = ep->rx_head - ep->rx_free, f;
	unsigned i;

	if (ep->reclaim)
		return;
	for (i = 0; i < n; i++) {
		uint32_t pos = pkts[i].ring_idx;

		if (pos - ep->rx_free < lent)
			ep->read[pos & mask] = pos;
	}
	for (f = ep->rx_free; f != ep->rx_head && ep->read[f & mask] == f; f++)
		;
	if (f != ep->rx_free)
		free_upto(ep, f);
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
	urpc__loop_ep_put(ep);
	return ret;
}

const struct urpc_tp_ops urpc__tp_loop_ops = {
	.name = "loop",
	.create = loop_create,
	.destroy = loop_destroy,
	.get_endpoint = loop_get_endpoint,
	.resolve_peer = loop_resolve_peer,
	.release_peer = loop_release_peer,
	.ep_host = urpc__tp_default_ep_host,
	.tx_burst = loop_tx_burst,
	.tx_flush = loop_tx_flush,
	.tx_now = loop_tx_now,
	.rx_burst = loop_rx_burst,
	.rx_release = loop_rx_release,
	.reg_mem = urpc__loop_os_reg_mem,
	.dereg_mem = urpc__loop_os_dereg_mem,
	.post_read = urpc__loop_os_post_read,
	.post_write = urpc__loop_os_post_write,
	.set_peer_token = urpc__loop_os_set_peer_token,
	.grant = urpc__loop_os_grant,
	.revoke = urpc__loop_os_revoke,
	.poll_completions = urpc__loop_os_poll_completions,
	.cancel = urpc__loop_os_cancel,
	.wait_arm = urpc__tp_default_wait_arm, /* loop cannot block: no URPC_TP_CAP_WAIT */
	.wait_ack = urpc__tp_default_wait_ack,
	.reg_dmabuf = urpc__tp_default_reg_dmabuf,
	.ctl_pop = urpc__tp_default_ctl_pop,
	.ctl_push = urpc__tp_default_ctl_push,
};
