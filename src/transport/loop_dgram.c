/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's datagrams (loop_dgram.h): the receive ring of an
 * endpoint, filled by senders on any thread and drained by its owner, its
 * lane (one sender's own ring, loop_int.h), and the fault switches' path
 * (drop, duplicate, reorder, delay, the simulated network's send). Calls loop_os.h (rx_burst() serves peers' one-sided
 * requests, a held datagram's reference goes with it); loop.c calls here.
 *
 * The receive ring (the protocol between threads is at the top of
 * loop.c): a sender claims position p with a CAS on rx_tail while p is
 * below rx_limit, copies into slot p & mask, and publishes cell p & mask
 * by storing p + 1 into its sequence (release); the owner lends the
 * datagram when it reads p + 1 (acquire) and gives slots back by moving
 * rx_free and publishing rx_limit = rx_free + size (release, free_upto()):
 * all at once at the next rx_burst() with cfg.rx_reclaim, else as
 * rx_release() finds the oldest lent entries read. A sender reads a
 * destination's ring once per run of datagrams to it and guesses each next
 * position (put()); tx_now() claims first and reads the ring's fields after.
 *
 * The lane's two sides are in loop_lane.h. A peer with a lane sends its
 * plain datagrams (tx_now(), tx_burst(), empty ones) there, and only what
 * the fault switches let through goes to the shared ring. rx_burst()
 * lends from both; when both have work they take turns at going first.
 *
 * Delay switch: a delayed datagram takes its receive-ring entry at once,
 * published as p + 1 + RX_DELAYED (loop_int.h), and is lent once the
 * receiver's poll count reaches its due stamp; the
 * receive ring is the in-flight queue (preallocated, in order, so a delayed
 * datagram also holds back those queued behind it).
 */
#define URPC_LOG_MODULE "loop"
#include "loop_dgram.h"

#include <errno.h>
#include <string.h>

#include "../util/compiler.h"
#include "../util/copy.h"
#include "../util/log.h"
#include "../util/rand.h"
#include "loop_lane.h"
#include "loop_os.h"

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
			__atomic_or_fetch(&to->attn, LOOP_ATTN_FULL, __ATOMIC_RELEASE);
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
		/* Pairs with the acquire in lend(). */
		__atomic_store_n(&c->seq, p + 1 + RX_DELAYED, __ATOMIC_RELEASE);
		return;
	}
	/* Pairs with the acquire in lend(). */
	__atomic_store_n(&c->seq, p + 1, __ATOMIC_RELEASE);
}

/* put() one datagram into @to's ring. Thread: any holding a reference on @to. */
void urpc__loop_deliver(struct loop_ep *to, uint32_t delay_polls, const void *a, uint32_t alen,
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

	urpc__loop_deliver(h.to, ep->faults.delay_polls, buf, h.len, NULL, 0);
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
URPC_COLD void urpc__loop_flush_held(struct loop_ep *ep)
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

	if (ep->net) {
		ep->net->send(ep->net->arg, ep->ep_id, to->ep_id, t->hdr, t->hdr_len, t->data,
			      t->data_len);
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
			__atomic_or_fetch(&ep->attn, LOOP_ATTN_HELD, __ATOMIC_RELAXED); /* owner */
			ep->base.stats.tx_reordered++;
			continue;
		}
		urpc__loop_deliver(to, f->delay_polls, t->hdr, t->hdr_len, t->data, t->data_len);
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
		if (t->peer->lane)
			lane_put(to, t->hdr, t->hdr_len, t->data, t->data_len);
		else if (likely(!dead))
			put(to, cells, base, mask, mtu, &pos, 0, t->hdr, t->hdr_len, t->data,
			    t->data_len);
	}
}

/*
 * Copy @n datagrams into their destinations' rings. The whole batch is
 * checked first (nothing is sent when an entry is bad).
 * Thread: @tp's owner. Datapath.
 */
int urpc__loop_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
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
 * tx_now() of anything but a short plain datagram: an error (no peer,
 * longer than the MTU), an empty one, one longer than urpc__copy() moves
 * inline (LOOP_TX_INLINE), or the fault switches. Out of line, so that
 * the plain path needs no stack frame. Thread: @ep's owner.
 */
static __attribute__((noinline)) int tx_now_slow(struct loop_ep *ep, struct urpc_tp_peer *peer,
						 const void *buf, uint32_t len)
{
	const struct urpc_tp_tx t = {.peer = peer, .hdr = buf, .hdr_len = len};

	if (!peer || len > ep->base.mtu) {
		URPC_ERR_RATELIMIT(ep->base.id, "a datagram of %u bytes was not sent: %s", len,
				   peer ? "longer than the MTU" : "no peer");
		return peer ? -EMSGSIZE : -EINVAL;
	}
	ep->base.stats.tx_bytes += len;
	ep->base.stats.tx_pkts++;
	if (ep->faults_on)
		send_faulty(ep, &t);
	else
		send_plain(&t, 1); /* empty or long: by the peer's lane if it has one */
	return 0;
}

/* tx_now() into a full lane: lane_put() counts the loss, out of line. */
static __attribute__((noinline)) int tx_now_lane_full(struct loop_ep *to, const void *buf,
						      uint32_t len)
{
	lane_put(to, buf, len, NULL, 0);
	return 0;
}

/*
 * tx_now() of a datagram whose in-line claim failed (a full ring, or
 * another sender claimed the position first): put() it, counted as lost
 * on a full ring. Out of line, so that the plain path needs no loop.
 */
static __attribute__((noinline)) int tx_now_put(struct loop_ep *to, const void *buf, uint32_t len)
{
	urpc__loop_deliver(to, 0, buf, len, NULL, 0);
	return 0;
}

/*
 * Copy one datagram into @peer's ring now (URPC_TP_CAP_TX_NOW): what
 * tx_burst() does for an entry, without the entry. Thread: @tp's owner.
 * Datapath.
 */
int urpc__loop_tx_now(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf, uint32_t len)
{
	struct loop_ep *ep = to_ep(tp), *to;
	struct urpc_tp_rx *r;
	uint32_t p, i;

	/*
	 * len 0 or over the limit (what urpc__copy() moves inline, 0 with a
	 * switch set): the slow path sorts it. One compare, not a second one
	 * against the inline copy's limit after it (callgrind on urpc-cpu-cost:
	 * 2 instructions per datagram).
	 */
	if (unlikely(!peer || len - 1u >= ep->tx_lim))
		return tx_now_slow(ep, peer, buf, len);
	/* What that compare told us (tx_lim <= LOOP_TX_INLINE): urpc__copy() tests no more. */
	if (len > LOOP_TX_INLINE)
		__builtin_unreachable();
	tp->stats.tx_bytes += len;
	tp->stats.tx_pkts++;
	to = peer->ep;
	if (likely(peer->lane)) {
		/* lane_put() in line: the tail is ours, no claim (loop_int.h). */
		struct loop_lane *l = &to->lane;

		uint64_t pub = __atomic_load_n(&l->pub, __ATOMIC_RELAXED);

		p = lane_tail(pub);
		/* Acquire pairs with the release in lane_lend(). */
		if (unlikely((int32_t)(p - __atomic_load_n(&l->limit, __ATOMIC_ACQUIRE)) >= 0))
			return tx_now_lane_full(to, buf, len);
		r = &l->rx[p & to->rx_mask];
		urpc__copy((uint8_t *)(uintptr_t)r->buf, buf, len);
		r->len = len;
		/* Pairs with the acquire in lane_lend() and lane_run(). */
		lane_publish(l, pub, len);
		return 0;
	}
	/*
	 * put() with the ring's fields read after the claim, not before it,
	 * and one try at the claim in line: fewer values live, no stack
	 * frame, no loop (callgrind on urpc-cpu-cost: 59 instructions per
	 * datagram with put(), 34 with the CAS loop here, 32 with one try;
	 * 27 by the lane above). A full ring or a lost race go to put() out
	 * of line. Acquire pairs with the release in free_upto(). A dead
	 * endpoint's ring reads full (loop_destroy()).
	 */
	p = __atomic_load_n(&to->rx_tail, __ATOMIC_RELAXED);
	if (unlikely((int32_t)(p - __atomic_load_n(&to->rx_limit, __ATOMIC_ACQUIRE)) >= 0 ||
		     !__atomic_compare_exchange_n(&to->rx_tail, &p, p + 1, false, __ATOMIC_RELAXED,
						  __ATOMIC_RELAXED)))
		return tx_now_put(to, buf, len);
	i = p & to->rx_mask;
	urpc__copy(to->ring_base + (size_t)i * to->mtu, buf, len);
	to->cells[i].len = len;
	/* Pairs with the acquire in loop_rx_burst(). */
	__atomic_store_n(&to->cells[i].seq, p + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Nothing to wait for: tx_burst() copied everything. Thread: @tp's owner. */
void urpc__loop_tx_flush(struct urpc_tp *tp)
{
}

/*
 * rx_burst()'s rare work, which @ep's attn word announced: release the
 * datagrams the reorder switch holds, serve peers' one-sided requests, and
 * fold the datagrams senders lost on the full ring into the stats.
 * Thread: @ep's owner.
 */
static URPC_COLD void rx_rare(struct loop_ep *ep)
{
	/* Acquire pairs with the release of the bits: the work is visible. */
	__atomic_exchange_n(&ep->attn, 0, __ATOMIC_ACQUIRE);
	if (ep->nheld)
		urpc__loop_flush_held(ep);
	if (__atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED) != ep->in_head) {
		urpc__loop_os_serve(ep);
		/* Left queued (a partition, a requester about to publish): look again. */
		if (__atomic_load_n(&ep->in_tail, __ATOMIC_RELAXED) != ep->in_head)
			__atomic_or_fetch(&ep->attn, LOOP_ATTN_OS, __ATOMIC_RELAXED);
	}
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
 * Is the datagram at position @pos, whose cell @i reads @seq (not pos + 1),
 * a delayed one that is due? Its due stamp was written before its cell was
 * published.
 */
static inline bool delayed_due(const struct loop_ep *ep, uint32_t i, uint32_t seq, uint32_t pos)
{
	return seq == pos + 1 + RX_DELAYED &&
	       ep->dues[i] <= __atomic_load_n(&ep->polls, __ATOMIC_RELAXED);
}

/*
 * Lend what is due of @pkts[@got..@n) from the ring, @got being lent
 * already (their bytes counted): the path of rx_lend() when a cell is not
 * plainly published (delayed, or a sender between its claim and its
 * publish), and of every burst without cfg.rx_reclaim (@idx: note each
 * entry's position for rx_release()). Moves rx_head, counts; returns how
 * many in all. Out of line: rx_lend() makes no other call.
 */
static __attribute__((noinline)) int lend_slow(struct loop_ep *ep, struct urpc_tp_rx *pkts,
					       unsigned n, unsigned got, bool idx)
{
	const struct rx_cell *cells = ep->cells;
	uint32_t pos = ep->rx_head + got, mask = ep->rx_mask, end = ep->rx_head + n;
	uint32_t tail = __atomic_load_n(&ep->rx_tail, __ATOMIC_RELAXED);
	struct urpc_tp_rx *p = pkts + got;
	uint64_t b = 0;

	if (tail - pos < end - pos)
		end = tail; /* nothing is published beyond the tail senders claimed */
	while (pos != end) {
		uint32_t i = pos & mask, len, seq;

		/* Acquire pairs with the release in put() and tx_now(). */
		seq = __atomic_load_n(&cells[i].seq, __ATOMIC_ACQUIRE);
		/* Not published, or delayed (RX_DELAYED) and not due yet: the rest waits. */
		if (seq != pos + 1 && !delayed_due(ep, i, seq, pos))
			break;
		len = cells[i].len;
		p->buf = ep->ring_base + (size_t)i * ep->mtu;
		p->len = len;
		if (idx)
			p->ring_idx = pos;
		b += len;
		pos++;
		p++;
	}
	got = (unsigned)(p - pkts);
	ep->rx_head = pos;
	ep->base.stats.rx_pkts += got;
	ep->base.stats.rx_bytes += b;
	return (int)got;
}

/*
 * rx_burst() once the rare work is done, with cfg.rx_reclaim: take back
 * every entry lent before (ring_idx stays unset: rx_release() does
 * nothing), and lend up to @n due datagrams. Nothing is published beyond
 * the tail senders claimed, so it stops there (each cell's sequence still
 * says whether it is published), and the run from rx_head to the tail is
 * at most two stretches of consecutive cells and slots, before the ring's
 * end and from its start: the loop walks each with pointers (callgrind on
 * urpc-cpu-cost: 17 instructions per datagram with the cell and slot
 * computed from the position, 12 walking). A cell that is not plainly
 * published (delayed, or between a sender's claim and its publish) and
 * every burst without cfg.rx_reclaim go on in lend_slow().
 */
static inline __attribute__((always_inline)) int rx_lend(struct loop_ep *ep,
							 struct urpc_tp_rx *pkts, unsigned n)
{
	uint32_t pos = ep->rx_head, i = pos & ep->rx_mask, mtu = ep->mtu, expect = pos + 1;
	/* One read of the tail: URPC_MIN() evaluates its arguments twice. */
	uint32_t tail = __atomic_load_n(&ep->rx_tail, __ATOMIC_RELAXED);
	uint32_t want = URPC_MIN(tail - pos, n);
	const struct rx_cell *c = &ep->cells[i];
	const uint8_t *slot = ep->ring_base + (size_t)i * mtu;
	struct urpc_tp_rx *p = pkts, *end = pkts + want;
	/* The first stretch ends at the ring's end. */
	struct urpc_tp_rx *stop = pkts + URPC_MIN(want, ep->rx_mask + 1 - i);
	uint64_t b = 0;

	if (unlikely(!ep->reclaim))
		return lend_slow(ep, pkts, n, 0, true);
	if (ep->rx_free != pos)
		free_upto(ep, pos);
	for (;;) {
		while (p != stop) {
			uint32_t len;

			/* Acquire pairs with the release in put() and tx_now(). */
			if (unlikely(__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != expect)) {
				ep->base.stats.rx_bytes += b;
				return lend_slow(ep, pkts, n, (unsigned)(p - pkts), false);
			}
			len = c->len;
			p->buf = slot;
			p->len = len;
			b += len;
			expect++;
			c++;
			slot += mtu;
			p++;
		}
		if (p == end)
			break;
		/* The second stretch, from the ring's start. */
		c = ep->cells;
		slot = ep->ring_base;
		stop = end;
	}
	ep->rx_head = expect - 1;
	ep->base.stats.rx_pkts += want;
	ep->base.stats.rx_bytes += b;
	return (int)want;
}

/*
 * rx_burst() of an endpoint with rare work (ep->attn), work on its shared
 * ring (datagrams, or lent entries to take back) or no cfg.rx_reclaim:
 * does the rare work, then lends from the shared ring and the lane. When
 * both have work they take turns at going first, so that neither starves
 * the other. Out of line: the plain burst, the lane's alone, keeps fewer
 * values live (callgrind on urpc-cpu-cost: 1.1 instructions per RPC less
 * than with both inlined). Thread: @ep's owner.
 */
static __attribute__((noinline)) int rx_burst_both(struct loop_ep *ep, struct urpc_tp_rx *pkts,
						   unsigned n)
{
	const struct loop_lane *l = &ep->lane;
	int got;

	if (__atomic_load_n(&ep->attn, __ATOMIC_RELAXED))
		rx_rare(ep);
	if (lane_tail(__atomic_load_n(&l->pub, __ATOMIC_RELAXED)) == l->head && l->freed == l->head)
		return rx_lend(ep, pkts, n);
	if (ep->polls & 1) {
		got = lane_lend(ep, pkts, n);
		return got + rx_lend(ep, pkts + got, n - (unsigned)got);
	}
	got = rx_lend(ep, pkts, n);
	return got + lane_lend(ep, pkts + got, n - (unsigned)got);
}

/*
 * Lend up to @n due datagrams from the ring and the lane. Also serves
 * peers' one-sided requests and releases reorder-held datagrams.
 * Thread: @tp's owner. Datapath.
 */
int urpc__loop_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);

	__atomic_store_n(&ep->polls, ep->polls + 1, __ATOMIC_RELAXED);
	if (unlikely(__atomic_load_n(&ep->attn, __ATOMIC_RELAXED) ||
		     __atomic_load_n(&ep->rx_tail, __ATOMIC_RELAXED) != ep->rx_head ||
		     ep->rx_free != ep->rx_head || !ep->reclaim))
		return rx_burst_both(ep, pkts, n);
	return lane_lend(ep, pkts, n);
}

/*
 * rx_run(): the lane's waiting datagrams as one run, when the lane is all
 * there is to receive from: no rare work (attn), nothing on the shared
 * ring and nothing of it lent (the endpoint has cfg.rx_reclaim: the cap
 * says so). Else -EAGAIN, having done nothing (the poll is not counted
 * either: the caller's rx_burst() counts it). Thread: @tp's owner.
 * Datapath.
 */
int urpc__loop_rx_run(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n)
{
	struct loop_ep *ep = to_ep(tp);

	if (unlikely(__atomic_load_n(&ep->attn, __ATOMIC_RELAXED) ||
		     __atomic_load_n(&ep->rx_tail, __ATOMIC_RELAXED) != ep->rx_head ||
		     ep->rx_free != ep->rx_head))
		return -EAGAIN;
	__atomic_store_n(&ep->polls, ep->polls + 1, __ATOMIC_RELAXED);
	return lane_run(ep, rx, n);
}

/*
 * Take back @n lent ring entries (ring_idx is the entry's position), in
 * any order: each is marked read, and the slots up to the first entry still
 * lent go back to senders. Entries are reused in ring order, so one held
 * long holds back the reuse of those after it. With cfg.rx_reclaim it does
 * nothing: the next rx_burst() takes them back. An entry not lent now is
 * ignored. Thread: @tp's owner. Datapath.
 */
void urpc__loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
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
