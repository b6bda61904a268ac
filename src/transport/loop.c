/* SPDX-License-Identifier: MIT */
/*
 * The loop transport: endpoints in one process joined by memory rings, with
 * seeded fault switches. See transport.h for the contract. This file is
 * its top: create/destroy, peers, the fault switches' settings, the
 * simulated network and the ops table; it calls down into loop_dgram.c
 * (datagrams: the receive ring, the lane, the fault switches' path) and
 * loop_os.c (one-sided operations and registrations, the last reference
 * of an endpoint), which never call back up. loop_int.h holds the types.
 *
 * Threads: every op runs on the endpoint's owner thread, and endpoints that
 * talk to each other may have different owners (the simulated network below
 * is the exception: one thread drives it all). What one endpoint hands to
 * another crosses through three rings of the receiver, each with many
 * producers (any thread) and one consumer (the receiver's owner), all
 * lock-free bounded queues in the manner of D. Vyukov's (DPDK's rte_ring in
 * MP/SC mode): a producer claims position pos with a CAS on the ring's
 * tail, fills the cell and publishes it by storing pos + 1 into its
 * sequence (release); the consumer takes it when it reads pos + 1
 * (acquire). A full ring refuses the producer. The rings are:
 *   - the receive ring (datagrams, loop_dgram.c): cell i describes ring
 *     slot i; a position is free for senders below a limit the consumer
 *     publishes (release) as it hands slots back;
 *   - the request queue (one-sided requests queued at a target, naming an
 *     operation in the requester's table) and the completion ring
 *     (finished operations of the requester, written by the target that
 *     served them, or by the requester itself; never full, as it holds one
 *     cell per operation slot, so producers claim with a fetch-and-add),
 *     loop_os.c: the consumer frees a cell by storing pos + size into its
 *     sequence (release), and a producer claims only a cell reading pos.
 * Beside them, an endpoint with cfg.rx_reclaim has a lane (loop_int.h):
 * a receive ring with one producer, the endpoint that claimed it, which
 * publishes by storing the lane's tail (release) and takes no CAS; the
 * consumer gives slots back by publishing its limit (release). Lanes are
 * claimed and let go in resolve_peer()/release_peer() (CAS on lane.from).
 * No other memory of an endpoint is written by another thread (but the
 * lane's producer side, by its owner: tail, npeers, its slots, which that
 * owner allocates the first time): the free
 * stack of operation slots and the counters belong to the owner, and
 * datagrams that arrive on a full ring are counted in an atomic that the
 * owner folds into its stats. Producers that leave the owner such rare
 * work (a datagram lost on the full ring, a queued one-sided request) also
 * set a bit in its attn word afterwards, so that rx_burst() tests one word
 * for all of it (loop_int.h, LOOP_ATTN_*). A producer between its claim and its publish
 * holds back the cells after it (as in rte_ring); it runs no code that could
 * wait meanwhile.
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
#include "loop_dgram.h"
#include "loop_int.h"
#include "loop_os.h"
#include "tp_default.h"
#include "transport.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_ep *registry; /* registry_lock */
static uint32_t next_id = 1;	 /* registry_lock */
static struct urpc_loop_net net; /* set while no endpoint exists (tests/sim) */
static bool net_on;

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
	ep->lane.limit = cfg->rq_depth;
	ep->lane.hp_flags = cfg->hp_flags;
	for (i = 0; i < LOOP_INCOMING; i++)
		ep->incoming[i].seq = i;
	for (i = 0; i < LOOP_MAX_OPS; i++) {
		ep->comps[i].seq = i;
		ep->op_free[i] = LOOP_MAX_OPS - 1 - i;
	}
	ep->nop_free = LOOP_MAX_OPS;

	pthread_mutex_lock(&registry_lock);
	ep->faults_on = net_on;
	ep->tx_lim = net_on ? 0 : URPC_MIN(mtu, LOOP_TX_INLINE);
	ep->net = net_on ? &net : NULL;
	/*
	 * The simulator drives the batch path and explicit release, as udp
	 * and verbs have them.
	 */
	ep->reclaim = cfg->rx_reclaim && !net_on;
	ep->base.caps = net_on ? 0 : URPC_TP_CAP_TX_NOW;
	if (ep->reclaim)
		ep->base.caps |= URPC_TP_CAP_RX_RECLAIM | URPC_TP_CAP_RX_RUN;
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

/*
 * Let @self's new @peer send its plain datagrams through the lane of its
 * endpoint when that endpoint has one (cfg.rx_reclaim) and it is free or
 * already @self's (loop_int.h); else they go through the shared ring. The
 * lane's slots are allocated by its first owner. Thread: @self's owner.
 */
static void lane_claim(struct loop_ep *self, struct urpc_tp_peer *peer)
{
	struct loop_ep *to = peer->ep, *none = NULL;
	struct loop_lane *l = &to->lane;

	/* The bytes between two of the receiver's reads fit in 32 bits (loop_int.h). */
	if (!to->reclaim || self->net || 2ull * (to->rx_mask + 1ull) * to->mtu > UINT32_MAX)
		return;
	/* Only we store ourselves there: a relaxed read that finds us is ours. */
	if (__atomic_load_n(&l->from, __ATOMIC_RELAXED) != self) {
		/* Acquire pairs with the release in lane_let_go(): its last publish is visible. */
		if (!__atomic_compare_exchange_n(&l->from, &none, self, false, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			return; /* another endpoint's */
		if (!l->base) {
			size_t n = (size_t)to->rx_mask + 1, i;

			l->rx = calloc(n, sizeof(*l->rx));
			if (!l->rx || urpc__hp_alloc(n * to->mtu, l->hp_flags, &l->mem)) {
				free(l->rx);
				l->rx = NULL;
				__atomic_store_n(&l->from, NULL, __ATOMIC_RELEASE);
				return; /* the shared ring serves */
			}
			for (i = 0; i < n; i++)
				l->rx[i].buf = (uint8_t *)l->mem.addr + i * to->mtu;
			/* Read by the receiver after the first tail it sees (acquire). */
			l->base = l->mem.addr;
		}
		l->npeers = 0;
	}
	l->npeers++;
	peer->lane = true;
}

/*
 * @peer is going away: when it was the last of its endpoint's lane's
 * owner's peers, the lane is free for another sender. Thread: @self's owner.
 */
static void lane_let_go(struct urpc_tp_peer *peer)
{
	struct loop_lane *l = &peer->ep->lane;

	/* Release pairs with the acquire in lane_claim(): our publishes come first. */
	if (peer->lane && !--l->npeers)
		__atomic_store_n(&l->from, NULL, __ATOMIC_RELEASE);
}

/* Release every peer @ep resolved. Thread: @ep's owner. */
static void release_all_peers(struct loop_ep *ep)
{
	struct urpc_tp_peer *p, *next;

	for (p = ep->peers; p; p = next) {
		next = p->next;
		lane_let_go(p);
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
	urpc__loop_flush_held(ep);
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
	/* Senders find the ring full from now on: what they send vanishes (urpc__loop_tx_now()). */
	__atomic_store_n(&ep->rx_limit, ep->rx_free, __ATOMIC_RELEASE);
	__atomic_store_n(&ep->lane.limit, ep->lane.freed, __ATOMIC_RELEASE); /* the lane too */
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
	lane_claim(self, peer);
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
	lane_let_go(peer);
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
	urpc__loop_flush_held(ep);
	ep->faults = *f;
	ep->faults_on = net_on || f->drop > 0 || f->dup > 0 || f->reorder || f->delay_polls;
	ep->tx_lim = ep->faults_on ? 0 : URPC_MIN(ep->base.mtu, LOOP_TX_INLINE);
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
		urpc__loop_deliver(ep, 0, buf, len, NULL, 0);
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
	.tx_burst = urpc__loop_tx_burst,
	.tx_flush = urpc__loop_tx_flush,
	.tx_now = urpc__loop_tx_now,
	.rx_burst = urpc__loop_rx_burst,
	.rx_run = urpc__loop_rx_run,
	.rx_release = urpc__loop_rx_release,
	.reg_mem = urpc__loop_os_reg_mem,
	.dereg_mem = urpc__loop_os_dereg_mem,
	.post_read = urpc__loop_os_post_read,
	.post_write = urpc__loop_os_post_write,
	.set_peer_token = urpc__loop_os_set_peer_token,
	.set_peer_window = urpc__loop_os_set_peer_window,
	.peer_os_rtt = urpc__loop_os_peer_rtt,
	.grant = urpc__loop_os_grant,
	.revoke = urpc__loop_os_revoke,
	.revoke_ready = urpc__loop_os_revoke_ready,
	.poll_completions = urpc__loop_os_poll_completions,
	.cancel = urpc__loop_os_cancel,
	.os_idle = urpc__tp_default_os_idle,   /* an operation is one copy */
	.wait_arm = urpc__tp_default_wait_arm, /* loop cannot block: no URPC_TP_CAP_WAIT */
	.wait_ack = urpc__tp_default_wait_ack,
	.reg_dmabuf = urpc__tp_default_reg_dmabuf,
	.ctl_pop = urpc__tp_default_ctl_pop,
	.ctl_push = urpc__tp_default_ctl_push,
};
