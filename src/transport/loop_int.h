/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's private types and constants, the floor of its
 * ladder (each file includes only the headers below it, and calls only
 * down):
 *   loop.c     create/destroy, peers, the fault switches' settings, the
 *              simulated network and the ops table;
 *   loop_dgram.c  datagrams: the receive ring, the lane and the fault
 *              switches' path;
 *   loop_lane.h   the lane's two sides, inlined by loop_dgram.c;
 *   loop_os.c  one-sided operations, registrations (on sw_mr.c) and an
 *              endpoint's last reference (loop_os.h);
 *   loop_int.h these types. Only src/transport/loop* include this header.
 * The protocol between threads is described at the top of loop.c, the
 * one-sided one at the top of loop_os.c.
 *
 * Lifetime: an endpoint is reference counted (atomically): one reference
 * for itself, one per peer handle that names it, one per datagram held by a
 * reorder switch and one per one-sided request queued at a target (held on
 * the requester). destroy() marks it dead and drops its own reference;
 * datagrams sent to a dead endpoint vanish like datagrams to a host that
 * went away, and the memory (the lane's slots too) goes with the last
 * reference.
 *
 */
#ifndef URPC_TRANSPORT_LOOP_INT_H
#define URPC_TRANSPORT_LOOP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../mem/hugepage.h"
#include "../util/compiler.h"
#include "../util/rand.h"
#include "loop_hooks.h"
#include "sw_mr.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOP_EP_VERSION 1
#define LOOP_EP_LEN 10
#define LOOP_DEFAULT_MTU 4096
#define LOOP_MAX_OPS 64	  /* one-sided operations a requester may have outstanding */
#define LOOP_INCOMING 256 /* one-sided requests queued at a target */
#define LOOP_MAX_REORDER 64
#define LOOP_TX_INLINE 128 /* tx_now() copies up to this with urpc__copy() (util/copy.h) */

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
	uint64_t token;			  /* the session's, carried by one-sided requests */
	struct urpc_tp_peer *next, *prev; /* the resolving endpoint's list */
	bool lane;			  /* plain datagrams go into ep's lane (we own it) */
	/*
	 * One-sided window (issue 32; owner only): bytes of own operations to
	 * this peer published at once (set_peer_window; 0: no bound; one
	 * operation always goes), and the newest round trip of one not taken
	 * yet (peer_os_rtt; 0: none) with its bytes.
	 */
	uint64_t os_window;
	uint64_t os_rtt_ns, os_rtt_bytes;
};

/*
 * An endpoint's lane: a second receive ring, with one producer, the
 * endpoint that owns it (struct loop_lane.from), for the datagrams it
 * sends without a fault switch. The sender publishes a datagram by storing
 * its tail (release) after the copy, so that neither side touches a
 * per-cell sequence and the claim needs no CAS (callgrind on
 * urpc-cpu-cost: 10.8 instructions per RPC less than through the shared
 * ring: tx_now() 32 -> 29 per datagram, rx_burst() 41.8 -> 37.0 per RPC). Only an endpoint with cfg.rx_reclaim has one (its slots go back
 * all at once at the next rx_burst(); nothing is released by position);
 * its slots are allocated when a first peer claims it and live until the
 * endpoint's last reference. Ownership moves only between whole peers'
 * lives: a peer takes it when it is free (CAS from NULL, acquire), and the
 * owner lets go (release) when the last of its peers that use it is
 * released, after its last publish.
 */
struct loop_lane {
	/*
	 * atomic: written by the owner (release), read by the receiver: the
	 * tail in the low 32 bits, and in the high 32 the bytes of every
	 * datagram put here, modulo 2^32, so that one store publishes both
	 * (lane_publish(), loop_lane.h). A lane exists only where 2 *
	 * rq_depth * mtu fits in 32 bits: the bytes between two of the
	 * receiver's reads always do.
	 */
	uint64_t pub;
	uint32_t npeers;      /* the owner's peers using it: written by the owner only */
	struct loop_ep *from; /* atomic: the owner, or NULL (lane free) */
	uint8_t *base;	      /* rq_depth slots of mtu bytes: set once, by the first owner */
	/* rq_depth: each slot's address (set once) and length (the owner's); lent by rx_run() */
	struct urpc_tp_rx *rx;
	struct urpc_hp_region mem;
	unsigned hp_flags; /* cfg.hp_flags, for mem */
	/* The receiver's: head, what the last rx_burst() lent up to (freed), limit. */
	uint32_t head URPC_CACHE_ALIGNED;
	uint32_t freed;	     /* slots before this position are free for the sender */
	uint32_t limit;	     /* atomic, read by the sender: freed + rq_depth */
	uint32_t bytes_seen; /* pub's bytes, as last added to stats.rx_bytes */
};

/*
 * A receive-ring cell; cell i describes ring slot i. Eight bytes, so that
 * the hot loops index the cells with a scaled address (callgrind: one or
 * two instructions less per datagram in each of deliver(), rx_burst() and
 * rx_release() than with the due stamp in the cell).
 */
struct rx_cell {
	uint32_t seq; /* atomic: pos free for a sender; pos + 1 published; + RX_DELAYED: delayed */
	uint32_t len;
};

/*
 * A datagram the delay switch holds back (dues[] has its due stamp) is
 * published as pos + 1 + RX_DELAYED, so that the receiver's one compare
 * with pos + 1 also tells it apart, and the plain path never looks at a
 * flag. No value a cell can hold otherwise equals either: cell i holds i
 * (never published) or the last lap's p + 1 or p + 1 + RX_DELAYED with
 * p = pos - size, and RX_DELAYED is neither size nor -size (mod 2^32) for
 * any power of two size.
 */
#define RX_DELAYED 0x80000001u

/*
 * An endpoint's rare receive-side work, one bit each in its attn word, so
 * that rx_burst() tests one word and not three: set (atomic or, release)
 * by whoever leaves the work, after leaving it (a datagram counted in
 * rx_full, a one-sided request published in incoming[], a datagram held
 * by the owner's reorder switch); the owner takes the word (exchange,
 * acquire) before it looks, and sets a bit again for work it leaves.
 */
#define LOOP_ATTN_FULL 1u
#define LOOP_ATTN_OS 2u
#define LOOP_ATTN_HELD 4u
static_assert(sizeof(struct rx_cell) == 8, "scaled index");

/* A one-sided operation, in its requester's slot table. */
struct os_op {
	uint32_t tag; /* atomic: generation | OP_* state; see the top of the file */
	enum urpc_tp_op op;
	/* Written by the owner while the operation is free; read by the target while it serves. */
	const struct urpc_tp_peer *peer; /* owner only */
	uint32_t lkey;			 /* owner only */
	void *local;
	uint64_t raddr;
	uint64_t rkey;
	uint64_t token; /* the requester's session token */
	size_t len;
	uint64_t wr_id;	 /* owner only */
	uint64_t pub_ns; /* owner only: when it went to its target; 0: held by its peer's window */
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
	bool faults_on;	 /* any switch set: the common case skips them all */
	uint32_t tx_lim; /* min(mtu, LOOP_TX_INLINE), 0 while faults_on: tx_now()'s fast test */
	struct urpc_rand rng; /* fault switches only: a function of cfg->seed */
	struct held held[LOOP_MAX_REORDER];
	uint8_t *held_buf; /* LOOP_MAX_REORDER * mtu */
	uint32_t nheld;
	/* peers this endpoint resolved; owner only */
	struct urpc_tp_peer *peers;
	/* registrations and own operations; owner only (ops[].tag excepted) */
	struct urpc_sw_mr_table mrs; /* its keys: seeded from the process-wide source */
	struct os_op ops[LOOP_MAX_OPS];
	uint32_t op_free[LOOP_MAX_OPS];
	uint32_t nop_free;
	uint32_t outstanding; /* posted and not yet reaped */
	/* posted, held back by their peer's window (slot, tag), oldest first; owner only */
	struct {
		uint32_t slot, tag;
	} held_ops[LOOP_MAX_OPS];
	uint32_t nheld_ops;
	struct loop_ep *next; /* registry */

	/* Read by senders: constant after create, but for dead (set once by destroy) and refs. */
	uint8_t *ring_base URPC_CACHE_ALIGNED; /* rq_depth slots of mtu bytes */
	struct rx_cell *cells;		       /* rq_depth */
	uint64_t *dues;			       /* rq_depth: visible once polls reaches it */
	uint32_t *read;			       /* rq_depth, owner only: position last released */
	uint32_t rx_mask;		       /* rq_depth - 1 */
	uint32_t mtu;
	const struct urpc_loop_net *net; /* the simulated network, or NULL (set at create) */
	bool dead;			 /* atomic */
	int refs;			 /* atomic */
	struct urpc_hp_region ring;

	/* Consumer side: written by the owner only. */
	uint32_t rx_head URPC_CACHE_ALIGNED;
	uint32_t rx_free;  /* slots before this position are free for senders */
	uint32_t rx_limit; /* atomic, read by senders: rx_free + rq_depth */
	bool reclaim;	   /* cfg.rx_reclaim: rx_burst() takes back what it lent before */
	uint32_t in_head;
	uint32_t comp_head;
	uint64_t polls; /* atomic: read by senders' delay switch */

	/* Producer indices: claimed by senders, requesters and targets. */
	uint32_t rx_tail URPC_CACHE_ALIGNED; /* atomic */
	uint32_t rx_full;		     /* atomic: datagrams lost on a full ring, unfolded */
	uint32_t attn; /* atomic: LOOP_ATTN_*, set after what rx_burst() must look at */
	uint32_t in_tail URPC_CACHE_ALIGNED;   /* atomic */
	uint32_t comp_tail URPC_CACHE_ALIGNED; /* atomic */

	struct loop_lane lane URPC_CACHE_ALIGNED;

	struct os_ref incoming[LOOP_INCOMING] URPC_CACHE_ALIGNED;
	struct comp_cell comps[LOOP_MAX_OPS];
};

static inline struct loop_ep *to_ep(struct urpc_tp *tp)
{
	return container_of(tp, struct loop_ep, base);
}

/* How the grant table names an endpoint: its id and generation (never reused together). */
static inline uint64_t loop_peer_id(const struct loop_ep *ep)
{
	return (uint64_t)ep->gen << 32 | ep->ep_id;
}

/* Take a reference on @ep. Thread: any that holds one already, or under registry_lock. */
static inline void ep_get(struct loop_ep *ep)
{
	__atomic_add_fetch(&ep->refs, 1, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_LOOP_INT_H */
