/* SPDX-License-Identifier: MIT */
/*
 * The transport contract: one ops table, four implementations (loop, udp,
 * verbs, xdp). The Rpc layer sees nothing else of a transport.
 *
 * A transport endpoint (struct urpc_tp) carries unreliable datagrams to
 * resolved peers and performs one-sided READ/WRITE against memory a peer
 * registered. It works in bursts.
 *
 * Threads: an endpoint belongs to its owner thread (the one that drives
 * it; create() and get_endpoint() may run anywhere); every other op is
 * owner-only. Endpoints that exchange traffic may have different owners, on
 * every transport: loop hands datagrams, one-sided requests and their
 * completions to another endpoint through lock-free rings that any thread
 * may fill and only the receiver's owner drains (loop.c), so two Rpcs on two
 * threads may talk over loop. The simulated network below is the exception:
 * one thread drives every endpoint.
 *
 * Progress: a transport makes progress only inside its ops. In particular
 * the emulated one-sided operations of loop and udp are served by the
 * *remote* endpoint inside its rx_burst() and poll_completions() (on its
 * owner thread), so the peer must keep polling for a READ or WRITE to
 * complete.
 *
 * Errors: 0 or -errno; bursts return a count >= 0 (or -errno for a burst
 * that was refused as a whole).
 */
#ifndef URPC_TRANSPORT_TRANSPORT_H
#define URPC_TRANSPORT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "../mem/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest endpoint description, in bytes (sent over session management). */
#define URPC_TP_EP_MAX 64

/*
 * Capability bits reported in struct urpc_tp.caps. A caller tests these,
 * never an op for NULL: an op a transport lacks is a default that returns
 * -ENOTSUP (see the ops table below).
 */
#define URPC_TP_CAP_ONE_SIDED_HW 0x1u /* READ/WRITE done by the NIC, no remote CPU */
#define URPC_TP_CAP_INLINE 0x2u	      /* small sends are inlined */
#define URPC_TP_CAP_WAIT 0x4u	      /* wait_arm()/wait_ack() can block (udp, verbs) */
#define URPC_TP_CAP_DMABUF 0x8u	      /* reg_dmabuf() registers device memory (verbs) */
#define URPC_TP_CAP_CTL 0x10u	      /* control messages for session management (verbs) */
/*
 * tx_now() hands a datagram over at once for less than a batch entry
 * costs, so the caller sends each as it comes instead of batching (loop,
 * except under the simulated network, which drives the batch path that
 * udp and verbs take).
 */
#define URPC_TP_CAP_TX_NOW 0x20u
/*
 * The endpoint honours cfg.rx_reclaim: each rx_burst() first takes back
 * every entry lent before, and rx_release() does nothing (loop, except
 * under the simulated network, which keeps explicit release as udp and
 * verbs have it).
 */
#define URPC_TP_CAP_RX_RECLAIM 0x40u
/*
 * rx_run() lends what waits in entries the transport keeps, without
 * filling the caller's (loop, where its lanes serve the receive; with
 * URPC_TP_CAP_RX_RECLAIM only).
 */
#define URPC_TP_CAP_RX_RUN 0x80u

/*
 * Access flags for reg_mem(). Local access is always granted.
 *
 * REMOTE_READ / REMOTE_WRITE open the registration itself to any peer that
 * knows its rkey, as an ibv MR with those flags is: for the transport's own
 * tests and tools. The engine never asks for them.
 *
 * GRANT_READ / GRANT_WRITE let grant() give a peer that access to exact
 * bytes of the registration (verbs: a memory window is bound on it); the
 * registration by itself stays closed to peers (loop and udp; verbs until
 * it has memory windows maps them to REMOTE_* on the MR).
 */
#define URPC_TP_ACCESS_REMOTE_READ 0x1u
#define URPC_TP_ACCESS_REMOTE_WRITE 0x2u
#define URPC_TP_ACCESS_GRANT_READ 0x4u
#define URPC_TP_ACCESS_GRANT_WRITE 0x8u
#define URPC_TP_ACCESS_ALL 0xfu
/*
 * DEVICE (loop and udp, with reg_mem(); not part of ALL): the memory is
 * CUDA device memory (src/mem/cuda.h). Their emulated one-sided service
 * reaches it only through the CUDA driver's copies, never a CPU load or
 * store: peers READ and WRITE grants on it, and a copy the driver fails
 * completes the peer's operation with -EIO. It cannot be @local of
 * post_read()/post_write() (-EINVAL). verbs refuses the bit (-EINVAL):
 * device memory reaches its NIC through reg_dmabuf().
 */
#define URPC_TP_ACCESS_DEVICE 0x10u

struct urpc_tp_ops;
struct urpc_tp_peer; /* opaque, one per resolved remote endpoint */

/* Options common to every transport; urpc__tp_cfg_init() sets defaults. */
struct urpc_tp_cfg {
	enum urpc_transport_kind kind;
	uint32_t rq_depth;	       /* receive ring entries; power of two; default 512 */
	uint32_t sq_depth;	       /* send queue entries; power of two; default 256 */
	uint32_t mtu;		       /* wanted datagram payload; 0: the transport's default */
	const char *host;	       /* udp: local IPv4 address to bind; default 127.0.0.1 */
	uint16_t port;		       /* udp: local port; 0 picks a free one */
	const char *device;	       /* verbs: device name; NULL picks one */
	const char *near_pci;	       /* verbs: prefer the port nearest this PCI device */
	int numa_node;		       /* verbs: ... or on this NUMA node; -1: none */
	uint64_t seed;		       /* loop: seed of the fault switches */
	long id;		       /* id used in log lines; -1 for none */
	unsigned hp_flags;	       /* URPC_HP_* flags for the receive ring's memory */
	uint32_t one_sided_timeout_ms; /* fail a READ/WRITE after this; default 1000 */
	/*
	 * Entries lent by rx_burst() stay valid until the next rx_burst(),
	 * which takes them back: the caller never calls rx_release(). Only
	 * where the endpoint reports URPC_TP_CAP_RX_RECLAIM; elsewhere the
	 * caller releases as usual. Default false.
	 */
	bool rx_reclaim;
};

/* A datagram to send: a header and a payload, sent back to back. */
struct urpc_tp_tx {
	struct urpc_tp_peer *peer;
	const void *hdr;
	uint32_t hdr_len;
	/*
	 * lkey of the header's memory (verbs; ignored by loop/udp). 0 means
	 * unregistered memory: verbs inlines or copies such a datagram into a
	 * send buffer of its own.
	 */
	uint32_t hdr_lkey;
	const void *data; /* may be NULL when data_len is 0 */
	uint32_t data_len;
	uint32_t data_lkey; /* as hdr_lkey, for @data */
};

/*
 * A received datagram. @buf points into the receive ring and stays valid
 * until the entry is handed back with rx_release(). @ring_idx is private.
 */
struct urpc_tp_rx {
	const uint8_t *buf;
	uint32_t len;
	uint32_t ring_idx;
};

/* One-sided operation kinds, as reported in completions (X-macro: name, value). */
#define URPC_TP_OPS(X)                                                                             \
	X(READ, 1)                                                                                 \
	X(WRITE, 2)

enum urpc_tp_op {
#define URPC_TP_OP_ENUM(name, value) URPC_TP_OP_##name = value,
	URPC_TP_OPS(URPC_TP_OP_ENUM)
#undef URPC_TP_OP_ENUM
};
/* In the header, beside its enum, so that no transport calls transport.c for it. */
static inline const char *urpc__tp_op_str(enum urpc_tp_op op)
{
	switch (op) {
#define URPC_TP_OP_CASE(name, value)                                                               \
	case URPC_TP_OP_##name:                                                                    \
		return #name;
		URPC_TP_OPS(URPC_TP_OP_CASE)
#undef URPC_TP_OP_CASE
	}
	return "?";
}

/* A completed one-sided operation. */
struct urpc_tp_comp {
	uint64_t wr_id;
	enum urpc_tp_op op;
	int status; /* 0, -EACCES (key or bounds), -ETIMEDOUT, -ECONNRESET, -EIO */
};

/* A registration: local and remote keys of [addr, addr + len). */
struct urpc_tp_mr {
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access;
	void *handle; /* the transport's own */
};

/*
 * A grant: remote access to exact bytes of a registration, for one peer
 * (the peer handle of one session, whose token the peer's one-sided
 * requests carry), until revoke(). What the peer names in its requests:
 * [addr, addr + len) and key. grant() fills every field; revoke() clears
 * key. @handle is the transport's own.
 */
struct urpc_tp_grant {
	uint64_t addr;
	uint64_t len;
	uint64_t key;	 /* 0: no grant */
	unsigned access; /* URPC_TP_ACCESS_REMOTE_READ and/or _WRITE */
	uint32_t handle;
};

/* Counters every transport keeps; fields always exist. */
struct urpc_tp_stats {
	uint64_t tx_pkts;
	uint64_t rx_pkts;
	uint64_t tx_bytes;
	uint64_t rx_bytes;
	uint64_t rx_drop_ring_full; /* datagrams lost because every ring entry was held */
	uint64_t rx_drop_bad;	    /* malformed transport-level datagrams */
	uint64_t tx_dropped;	    /* loop: dropped by the drop switch */
	uint64_t tx_duplicated;	    /* loop: extra copies made by the duplicate switch */
	uint64_t tx_reordered;	    /* loop: datagrams that were held back by the reorder switch */
	uint64_t os_served;	    /* emulated one-sided requests served for peers */
	uint64_t os_rejected;	    /* ... of which rejected (key or bounds) */
	uint64_t os_retries;	    /* emulated one-sided retransmissions */
	uint64_t sys_tx;	    /* udp: system calls that sent (sendmmsg, send) */
	uint64_t sys_rx;	    /* udp: system calls that received (recvmmsg, recvfrom) */
	uint64_t sys_rx_empty;	    /* ... of which found no datagram */
	/*
	 * Peers' one-sided requests dropped unanswered (udp) or refused at
	 * once (loop): no live grant or open registration has their key, or
	 * they do not come from the grant's peer (source, session token).
	 */
	uint64_t os_dropped;
	uint64_t grants_live; /* grants made and not yet revoked */
	/* verbs: operations flushed by a renewal of their RC pair (a cancel) and re-posted */
	uint64_t os_requeued;
	/*
	 * Pieces of own one-sided operations done (udp: chunks acknowledged;
	 * verbs: chunks, work requests of up to rc_chunk bytes, completed;
	 * loop: operations completed, one copy each): a figure that moves
	 * while a transfer does (urpc_rpc_stats.os_progress).
	 */
	uint64_t os_progress;
};

/*
 * The base object embedded at the start of every implementation's endpoint.
 * Read-only for the Rpc layer after create().
 */
struct urpc_tp {
	const struct urpc_tp_ops *ops;
	enum urpc_transport_kind kind;
	uint32_t mtu;	   /* largest hdr_len + data_len that tx_burst() accepts */
	uint32_t rq_depth; /* receive ring entries */
	uint32_t sq_depth;
	uint32_t max_inline;
	unsigned caps; /* URPC_TP_CAP_* */
	long id;
	uint32_t ctl_pending; /* control messages for ctl_pop() */
	/*
	 * The rx_burst() the event loop calls this pass: ops->rx_burst (set by
	 * urpc__tp_create() where create() left it NULL), or a leaner one the
	 * transport swaps in while it has no work of its own to do beside the
	 * datagrams (verbs: its RC handshakes and grants). Owner thread.
	 */
	int (*rx_burst)(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
	/*
	 * A one-sided operation without progress this long fails (udp, verbs;
	 * loop never times out). create() sets it from cfg; the owner may
	 * change it between calls (the Rpc derives it from its round trips).
	 */
	uint64_t one_sided_timeout_ns;
	struct urpc_tp_stats stats;
};

/*
 * The ops table. No entry is NULL: an op that a transport lacks is one of
 * the urpc__tp_default_*() of tp_default.h, which return -ENOTSUP (or do
 * nothing, for the void ones), as rdma-core fills provider tables from
 * dummy_ops.c; what a transport can do is reported in struct urpc_tp.caps.
 */
struct urpc_tp_ops {
	const char *name;

	/*
	 * Create an endpoint. 0 and *out set, or -errno (-EINVAL bad cfg,
	 * -EADDRINUSE, -ENODEV, -ENOMEM ...), with an error logged naming the
	 * cause. The caller owns the endpoint until destroy().
	 */
	int (*create)(const struct urpc_tp_cfg *cfg, struct urpc_tp **out);

	/*
	 * Destroy an endpoint and every peer it resolved. Returns -EBUSY (and
	 * destroys nothing) while one-sided operations are outstanding or
	 * memory is still registered.
	 */
	int (*destroy)(struct urpc_tp *tp);

	/*
	 * Describe this endpoint for a peer: writes at most URPC_TP_EP_MAX bytes
	 * to @buf and returns the length. The bytes start with the transport
	 * kind, so resolving another transport's endpoint fails cleanly.
	 */
	size_t (*get_endpoint)(struct urpc_tp *tp, uint8_t *buf);

	/*
	 * Resolve a peer's endpoint bytes. 0 and *out set, -EINVAL (malformed
	 * or another transport's bytes), -ENOENT (loop: no such endpoint),
	 * -ENOMEM. The peer belongs to @tp until release_peer() or destroy().
	 * Not for the datapath (verbs creates an address handle here).
	 * release_peer() completes the one-sided operations still using the
	 * peer (-ECONNRESET, or their own status if they finished meanwhile;
	 * reaped by the next poll_completions()); once it returns the transport
	 * no longer touches their local memory.
	 */
	int (*resolve_peer)(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			    struct urpc_tp_peer **out);
	void (*release_peer)(struct urpc_tp *tp, struct urpc_tp_peer *peer);

	/*
	 * The IPv4 host (network order, in *@addr) that datagrams to the
	 * endpoint @ep of @len bytes would go to, for the server to check it
	 * against the address a session's connect came from. 0; -EINVAL
	 * (malformed, or another transport's bytes); -ENOTSUP where endpoints
	 * are not IP hosts (loop: this process; verbs: the RDMA fabric).
	 * Thread: any; cold.
	 */
	int (*ep_host)(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr);

	/*
	 * Did the datagram of entry @rx (from rx_burst(), not yet handed
	 * back) come from @peer's endpoint, its exact address and port? For
	 * the server's proof of a session's endpoint before it sends there
	 * (src/rpc/session_src.h). Only where ep_host() names IP hosts and
	 * the source is known (udp); NULL elsewhere. Owner thread; cold.
	 */
	bool (*rx_is_from)(struct urpc_tp *tp, const struct urpc_tp_rx *rx,
			   const struct urpc_tp_peer *peer);
	/*
	 * Send the @len bytes at @buf as one datagram to the source of
	 * received entry @rx (as rx_is_from()), resolving no peer: the
	 * server's "no such session" answer (session_src.h). 0 or -errno
	 * (-EINVAL: @len above tp->mtu). NULL where not offered. Cold.
	 */
	int (*tx_reply)(struct urpc_tp *tp, const struct urpc_tp_rx *rx, const void *buf,
			uint32_t len);

	/*
	 * Send up to @n datagrams; returns how many were accepted (a prefix of
	 * @pkts; fewer than @n under back-pressure), or -EMSGSIZE, sending
	 * nothing, when any entry's hdr_len + data_len exceeds tp->mtu, or
	 * -EINVAL for an entry without a peer.
	 * Ownership: loop and udp copy the bytes before returning; verbs may
	 * read them later, so the memory must stay unchanged until tx_flush().
	 */
	int (*tx_burst)(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n);

	/* Wait until the NIC is done reading every datagram sent so far. */
	void (*tx_flush)(struct urpc_tp *tp);

	/*
	 * Send one datagram, the @len bytes at @buf, to @peer now: tx_burst()
	 * of one entry without building it (URPC_TP_CAP_TX_NOW; the default
	 * returns -ENOTSUP). 0 once the bytes are copied (or lost, as a lossy
	 * wire loses them; never back-pressure), or -EMSGSIZE (@len above
	 * tp->mtu) or -EINVAL (no peer), sending nothing.
	 */
	int (*tx_now)(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf, uint32_t len);

	/*
	 * Receive up to @n datagrams. Returns the count (0 when nothing came or
	 * every ring entry is held). Each entry is lent to the caller until
	 * rx_release() (with URPC_TP_CAP_RX_RECLAIM: until the next
	 * rx_burst()); at most rq_depth are held at once. Datagrams that
	 * arrive while the ring is full may be lost (counted in
	 * rx_drop_ring_full; loop reuses entries in ring order, so there an
	 * entry held long fills the ring once rq_depth - 1 came after it).
	 * Also serves peers' emulated one-sided requests.
	 */
	int (*rx_burst)(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);

	/*
	 * Receive up to @n datagrams as one run (URPC_TP_CAP_RX_RUN; the
	 * default returns -ENOTSUP): as rx_burst() with
	 * URPC_TP_CAP_RX_RECLAIM, lent until the next rx_run() or rx_burst(),
	 * in entries the transport keeps (*@rx), not filled into the
	 * caller's array (ring_idx unset). Returns the count
	 * (0: nothing came), or -EAGAIN, having received nothing, when what
	 * waits needs rx_burst() (a fault switch, a datagram from a sender
	 * without a lane, a one-sided request to serve): the caller calls
	 * rx_burst() now.
	 */
	int (*rx_run)(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n);

	/*
	 * Hand @n received entries back to the ring (in any order); nothing
	 * with URPC_TP_CAP_RX_RECLAIM.
	 */
	void (*rx_release)(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n);

	/*
	 * Register memory for local use and for the remote access in @access.
	 * 0 and @mr filled, or -errno (-EINVAL, -ENOMEM, -EFAULT). Not for the
	 * datapath. @mr must stay at the same address until dereg_mem().
	 */
	int (*reg_mem)(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
		       struct urpc_tp_mr *mr);
	/* Undo reg_mem(). Outstanding one-sided operations on it fail. */
	void (*dereg_mem)(struct urpc_tp *tp, struct urpc_tp_mr *mr);

	/*
	 * One-sided operations. READ copies [raddr, raddr + len) of the peer's
	 * memory registered under @rkey into @local; WRITE copies @local there.
	 * @local lies inside @mr. Returns 0 (the completion with @wr_id will
	 * come from poll_completions(), exactly once) or -errno without a
	 * completion: -EAGAIN (too many outstanding), -EINVAL (len 0, local
	 * range outside @mr), -ENOTSUP.
	 * @rkey is a grant's key (or an open registration's rkey), and the
	 * request carries @peer's token (set_peer_token()). A range outside
	 * what the peer granted, or the wrong access, completes with -EACCES;
	 * the peer never touches memory outside its grants. So does a key
	 * that names no live grant for this endpoint (unknown, revoked,
	 * another peer's): keys of loop and udp are 64 random bits, never
	 * reused (sw_mr.h). A request the peer cannot tie to one of its
	 * peers (a wrong token or source) is dropped there: on udp the
	 * operation then times out (-ETIMEDOUT), on loop it completes with
	 * -EACCES.
	 */
	int (*post_read)(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			 const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			 uint64_t wr_id);
	int (*post_write)(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			  const struct urpc_tp_mr *mr, uint64_t raddr, uint64_t rkey, size_t len,
			  uint64_t wr_id);

	/*
	 * Grants (struct urpc_tp_grant). set_peer_token() names the secret
	 * that one-sided requests between @peer and this endpoint carry: the
	 * session's token, which both sides hold (verbs: ignored, the RC QP
	 * names the peer). grant() gives @peer the @access (REMOTE_READ and/or
	 * REMOTE_WRITE) to [addr, addr + len), which must lie inside @mr,
	 * registered with the matching GRANT_* bits; 0 and @g filled, or
	 * -EINVAL (range, access, peer) or -ENOMEM (the table could not grow).
	 * Only requests from @peer's side, with its token, within exactly
	 * those bytes and that access are served, until revoke(@g) (which
	 * clears g->key; a revoked or never-filled grant is ignored). Peers'
	 * requests that are being served finish first. Datapath: no
	 * allocation except when the table grows (rarely: it doubles).
	 * dereg_mem() and release_peer() revoke the grants on what goes away.
	 */
	void (*set_peer_token)(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token);
	/*
	 * Optional, both (NULL: the transport's own window; no samples).
	 * set_peer_window: the bytes of own one-sided operations to @peer in
	 * flight at once, rate x round trip while the session's controller
	 * (cc_sess.c) is limited, 0 for the transport's default (udp, xdp:
	 * chunks to @peer, 1 to their window; verbs: bytes of RDMA chunks on
	 * its QP, verbs_rc_win.h). peer_os_rtt: the newest round trip (ns) of
	 * a piece not taken yet (udp: a chunk never resent), its bytes (and
	 * those ahead of it, verbs) in *@bytes; 0: none. Cold.
	 */
	void (*set_peer_window)(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes);
	uint64_t (*peer_os_rtt)(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes);
	int (*grant)(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
		     const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g);
	void (*revoke)(struct urpc_tp *tp, struct urpc_tp_grant *g);
	/*
	 * Would revoke(@g) return without waiting for the peer? Where a
	 * revoke must wait for the reader to say it is done (verbs: its
	 * release notice, see verbs_mw.c), this tells, without waiting, when
	 * it no longer must: true once the notice came, when the peer can no
	 * longer read (its connection or the grant is gone), and from a bound
	 * after the first call on (the transport's own, long enough for the
	 * peer's resends). A caller that can keep the granted bytes untouched
	 * meanwhile asks again later instead of blocking. NULL where revoke()
	 * never waits (udp; loop unless its release_polls switch is set).
	 */
	bool (*revoke_ready)(struct urpc_tp *tp, struct urpc_tp_grant *g);

	/* Reap up to @n one-sided completions; returns the count. */
	int (*poll_completions)(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n);

	/*
	 * Give up own operation @wr_id (posted, not yet reaped): unless it
	 * finished first (then it keeps its own status), it completes with
	 * @status, reaped by the next poll_completions() as any completion;
	 * once cancel() returns the transport no longer touches its local
	 * memory (loop waits for a copy under way; verbs flushes the RC QP
	 * the work requests are on and renews the pair, re-posting the other
	 * operations flushed with them). 0; -ENOENT (no such operation
	 * outstanding); -ENOTSUP (the default). A deadline's (the user's
	 * operations, issue 16). Cold: walks the operations.
	 */
	int (*cancel)(struct urpc_tp *tp, uint64_t wr_id, int status);

	/*
	 * How long own operation @wr_id (posted, not yet reaped) has gone
	 * without progress: since its post or the completion of its latest
	 * chunk (udp: a datagram's worth; verbs: a work request, or any
	 * completion on its RC connection, as its own time-out counts; an
	 * operation still waiting behind others or a handshake there: 0).
	 * 0 and *@idle_ns; -ENOENT (no such operation outstanding); -ENOTSUP
	 * (the default; loop, whose operation is one copy: its completion is
	 * its only progress). What a user's batch without a deadline counts
	 * from (issue 16). Cold: walks the operations.
	 */
	int (*os_idle)(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns);

	/*
	 * Idle waiting (URPC_TP_CAP_WAIT; loop cannot block).
	 * wait_arm() asks to be woken by the next datagram or completion and
	 * returns a file descriptor that poll(POLLIN) reports readable then,
	 * or -errno. Work that arrived before the call does not wake it: after
	 * arming, the caller polls rx_burst()/poll_completions() once more and
	 * sleeps only if that found nothing. wait_ack() consumes the wake-up
	 * after poll() returned (readable or not); it never blocks. Every arm
	 * that returned a descriptor is acknowledged, also one the caller
	 * abandons without poll() (work came, or no time to sleep): xdp
	 * keeps its sockets on the descriptor only from arm to ack.
	 * -EBUSY: the endpoint is not idle although no datagram is waiting:
	 * it has timers of its own that only its ops run (udp: emulated
	 * one-sided operations outstanding or not reaped, whose
	 * retransmissions and timeouts live in rx_burst()/poll_completions()).
	 * The caller must keep polling and not sleep; it may try again later.
	 * Other errors: the endpoint cannot wait now; the caller busy-polls.
	 * udp returns its socket, which needs no arming; verbs its completion
	 * channel's fd.
	 * Not the datapath: an idle event loop calls them before sleeping.
	 */
	int (*wait_arm)(struct urpc_tp *tp);
	void (*wait_ack)(struct urpc_tp *tp);

	/*
	 * Register device memory exported as a dma-buf (GPU memory): @len
	 * bytes at @offset into the dma-buf @fd, addressed by peers as @iova.
	 * As reg_mem() otherwise (dereg_mem() undoes it). URPC_TP_CAP_DMABUF;
	 * -ENOTSUP where the transport cannot (loop, udp: they stage through
	 * host memory).
	 * The caller may close @fd afterwards.
	 */
	int (*reg_dmabuf)(struct urpc_tp *tp, int fd, uint64_t offset, size_t len, uint64_t iova,
			  unsigned access, struct urpc_tp_mr *mr);
	/*
	 * The transport's control messages to peers, carried by session
	 * management (URPC_TP_CAP_CTL; loop and udp have none: ctl_pop()
	 * returns -ENOTSUP, ctl_push() ignores the message). verbs
	 * exchanges its RC QP's number and PSN this way. ctl_pop() hands out
	 * the next message for a peer: writes at most URPC_TP_EP_MAX bytes to
	 * @buf, sets *@peer (a handle resolved on this endpoint) and returns
	 * the length, 0 when none is waiting (tp->ctl_pending counts them).
	 * ctl_push() delivers a message that came from @peer's side. The
	 * transport retries what needs an answer; a message may be lost.
	 */
	int (*ctl_pop)(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf);
	void (*ctl_push)(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			 size_t len);
};

/* Fill @cfg with defaults for @kind. */
void urpc__tp_cfg_init(struct urpc_tp_cfg *cfg, enum urpc_transport_kind kind);

/* The ops table of a kind, or NULL when it is not built in (verbs). */
const struct urpc_tp_ops *urpc__tp_ops(enum urpc_transport_kind kind);

/* Create an endpoint of cfg->kind (DEFAULT resolves as the docs say). */
int urpc__tp_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out);

/* Registration hooks with the pool's signature (ctx = the struct urpc_tp). */
int urpc__tp_pool_reg(void *ctx, void *addr, size_t len, struct urpc_mem_reg *out);
void urpc__tp_pool_dereg(void *ctx, struct urpc_mem_reg *reg);
/*
 * Registration hooks with the registration cache's signature (ctx = the
 * struct urpc_tp): @access (URPC_TP_ACCESS_*) is passed through unchanged.
 * out->handle is a struct urpc_tp_mr (the @mr of post_read/post_write).
 */
int urpc__tp_regcache_reg(void *ctx, void *addr, size_t len, unsigned access,
			  struct urpc_mem_reg *out);
void urpc__tp_regcache_dereg(void *ctx, struct urpc_mem_reg *reg);

extern const struct urpc_tp_ops urpc__tp_loop_ops;
extern const struct urpc_tp_ops urpc__tp_udp_ops;
/* The verbs ops table, or NULL in a build without libibverbs. */
const struct urpc_tp_ops *urpc__tp_verbs_ops(void);
/*
 * The xdp ops table; in a build without libxdp, one whose create() says
 * what is missing and returns -EOPNOTSUPP (xdp_none.c).
 */
const struct urpc_tp_ops *urpc__tp_xdp_ops(void);

/*
 * The kind a peer must speak to talk to @tp: xdp endpoints speak udp's
 * wire format (datagrams, endpoint bytes, one-sided protocol), so an xdp
 * server serves udp clients and the reverse. Session management compares
 * this, not tp->kind.
 */
static inline enum urpc_transport_kind urpc__tp_wire_kind(const struct urpc_tp *tp)
{
	return tp->kind == URPC_TRANSPORT_XDP ? URPC_TRANSPORT_UDP : tp->kind;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_TRANSPORT_H */
