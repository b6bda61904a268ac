/* SPDX-License-Identifier: MIT */
/*
 * The two sides of an endpoint's lane (struct loop_lane, loop_int.h), for
 * loop_dgram.c only, which inlines them: lane_put() on the owner's thread,
 * lane_lend() and lane_run() on the receiver's. Calls nothing but memcpy().
 *
 * The owner (a peer's endpoint, on its owner's thread) copies into slot
 * tail & mask and publishes by storing tail + 1 (release); the receiver
 * lends up to the tail it reads (acquire) and, at its next rx_burst() or
 * rx_run(), gives everything back by publishing limit = head + size
 * (release), which the owner reads (acquire) before it copies.
 */
#ifndef URPC_TRANSPORT_LOOP_LANE_H
#define URPC_TRANSPORT_LOOP_LANE_H

#include <stdint.h>
#include <string.h>

#include "../util/compiler.h"
#include "loop_int.h"
#include "transport.h"

/* The tail in lane publish word @pub (loop_int.h). */
static inline uint32_t lane_tail(uint64_t pub)
{
	return (uint32_t)pub;
}

/*
 * Publish one more datagram of @len bytes in lane @l after @pub, the word
 * the owner read (release: the slot and its entry first). Thread: the
 * lane owner's.
 */
static inline void lane_publish(struct loop_lane *l, uint64_t pub, uint32_t len)
{
	__atomic_store_n(&l->pub, pub + 1 + ((uint64_t)len << 32), __ATOMIC_RELEASE);
}

/*
 * Add the bytes published in @ep's lane since the last call (@pub, the
 * word just read) to stats.rx_bytes: a lane's datagrams count when they
 * land in it, as a NIC counts what it writes into its ring, and the
 * receiver walks no lengths for the count. Thread: @ep's owner.
 */
static inline void lane_fold(struct loop_ep *ep, uint64_t pub)
{
	uint32_t b = (uint32_t)(pub >> 32);

	ep->base.stats.rx_bytes += (uint32_t)(b - ep->lane.bytes_seen);
	ep->lane.bytes_seen = b;
}

/*
 * The receiver's two steps around a lend from @ep's lane at position
 * @pos: lane_give_back() returns every slot lent before to the owner (once
 * per position), lane_lent() moves the head past @want datagrams and
 * counts them, and the bytes published in @pub. Thread: @ep's owner.
 */
static inline void lane_give_back(struct loop_ep *ep, uint32_t pos)
{
	struct loop_lane *l = &ep->lane;

	if (l->freed != pos) {
		l->freed = pos;
		/* Pairs with the acquire in lane_put() and tx_now(). */
		__atomic_store_n(&l->limit, pos + ep->rx_mask + 1, __ATOMIC_RELEASE);
	}
}

static inline void lane_lent(struct loop_ep *ep, uint32_t pos, uint32_t want, uint64_t pub)
{
	ep->lane.head = pos + want;
	ep->base.stats.rx_pkts += want;
	lane_fold(ep, pub);
}

/*
 * Put one datagram, @a then @b, into @to's lane, which our endpoint owns
 * (loop_int.h), or drop it when the lane is full: the position is the
 * tail, which only we write; a dead endpoint's lane reads full
 * (loop_destroy()). Thread: the lane owner's.
 */
static inline void lane_put(struct loop_ep *to, const void *a, uint32_t alen, const void *b,
			    uint32_t blen)
{
	struct loop_lane *l = &to->lane;
	uint64_t pub = __atomic_load_n(&l->pub, __ATOMIC_RELAXED);
	uint32_t p = lane_tail(pub);
	struct urpc_tp_rx *r = &l->rx[p & to->rx_mask];
	uint8_t *slot = (uint8_t *)(uintptr_t)r->buf;

	/* Acquire pairs with the release in lane_lend(): the slot's last datagram is read. */
	if (unlikely((int32_t)(p - __atomic_load_n(&l->limit, __ATOMIC_ACQUIRE)) >= 0)) {
		__atomic_add_fetch(&to->rx_full, 1, __ATOMIC_RELAXED);
		__atomic_or_fetch(&to->attn, LOOP_ATTN_FULL, __ATOMIC_RELEASE);
		return;
	}
	memcpy(slot, a, alen);
	if (blen)
		memcpy(slot + alen, b, blen);
	r->len = alen + blen;
	/* Pairs with the acquire in lane_lend(). */
	lane_publish(l, pub, alen + blen);
}

/*
 * Lend up to @n datagrams from @ep's lane, having taken back everything it
 * lent before (an endpoint has a lane only with cfg.rx_reclaim): the run
 * from head to the tail the owner published, walked as rx_lend() walks the
 * ring, in at most two stretches, but with no cell to check (loop_int.h).
 * Thread: @ep's owner.
 */
static inline __attribute__((always_inline)) int lane_lend(struct loop_ep *ep,
							   struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_lane *l = &ep->lane;
	uint32_t pos = l->head, mask = ep->rx_mask, i = pos & mask;
	/* Acquire pairs with the release in lane_publish(): slots and lengths. */
	uint64_t pub = __atomic_load_n(&l->pub, __ATOMIC_ACQUIRE);
	uint32_t ready = lane_tail(pub) - pos, want = URPC_MIN(ready, n);
	struct urpc_tp_rx *p = pkts, *end = pkts + want;
	struct urpc_tp_rx *stop = pkts + URPC_MIN(want, mask + 1 - i);
	const struct urpc_tp_rx *r;

	lane_give_back(ep, pos);
	if (!want)
		return 0;
	/* Before the walk: fewer values live across it. */
	lane_lent(ep, pos, want, pub);
	r = l->rx + i;
	for (;;) {
		while (p != stop) {
			p->buf = r->buf;
			p->len = r->len;
			r++;
			p++;
		}
		if (p == end)
			break;
		/* The second stretch, from the lane's start. */
		r = l->rx;
		stop = end;
	}
	return (int)want;
}

/*
 * Lend up to @n datagrams from @ep's lane as a run (rx_run()): the lane's
 * own entries, having taken back everything lent before, as lane_lend()
 * does; the first stretch only, up to the lane's end (what waits from its
 * start comes at the next call), so that the entries are consecutive.
 * Thread: @ep's owner.
 */
static inline __attribute__((always_inline)) int lane_run(struct loop_ep *ep,
							  const struct urpc_tp_rx **rx, unsigned n)
{
	struct loop_lane *l = &ep->lane;
	uint32_t pos = l->head, mask = ep->rx_mask, i = pos & mask;
	/* Acquire pairs with the release in lane_publish(): slots and lengths. */
	uint64_t pub = __atomic_load_n(&l->pub, __ATOMIC_ACQUIRE);
	uint32_t ready = lane_tail(pub) - pos, room = mask + 1 - i, want = URPC_MIN(ready, n);

	lane_give_back(ep, pos);
	want = URPC_MIN(want, room);
	if (!want)
		return 0;
	lane_lent(ep, pos, want, pub);
	*rx = l->rx + i;
	return (int)want;
}

#endif /* URPC_TRANSPORT_LOOP_LANE_H */
