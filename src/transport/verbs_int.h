/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's private types and constants, the floor of its
 * ladder (each file includes only the headers below it, and calls only
 * down):
 *   verbs.c     endpoint create/destroy, peers, memory, waiting, the ops
 *               table (calls verbs_ud.h, verbs_mw.h, verbs_hs.h, verbs_rc.h,
 *               verbs_rc_end.h, verbs_rc_poll.h, verbs_ctl.h);
 *   verbs_mw.c  grants: memory windows, or an MR per grant (verbs_mw.h;
 *               calls verbs_rc.h);
 *   verbs_hs.c  the RC handshake: ctl_push, connecting, its timers
 *               (verbs_hs.h; calls verbs_rc.h and verbs_ctl.h);
 *   verbs_rc_end.c operations and connections ending early: cancel,
 *               handles released, connections gone, memory deregistered
 *               (verbs_rc_end.h; calls verbs_rc.h and verbs_ctl.h);
 *   verbs_rc_poll.c poll_completions, the deadline scan (verbs_rc_poll.h;
 *               calls verbs_rc.h);
 *   verbs_rc.c  RC connections and one-sided operations (verbs_rc.h;
 *               calls verbs_ctl.h);
 *   verbs_ctl.c the outbox of control messages, ctl_pop (verbs_ctl.h);
 *   verbs_ud.c  datagrams over the UD QP (verbs_ud.h), made by
 *               verbs_ud_init.c;
 *   verbs_int.h these types, and helpers with no state of their own.
 * (verbs_dev.c and verbs_topo.c, device discovery, stand apart.)
 * Only src/transport/verbs*.c include this header.
 *
 * Datagrams ride one UD QP per endpoint. Its receive ring is one registered
 * region of rq_depth slots, each VERBS_GRH bytes of GRH room followed by the
 * datagram; behind them lie sq_depth send slots, where a datagram from
 * unregistered memory is copied when it is too large to inline, and where
 * control messages are built.
 *
 * One-sided operations ride RC QPs, one per remote endpoint, created lazily
 * by the first READ or WRITE to it. The RC endpoint info (QPN, PSN) is
 * exchanged by two control messages that session management carries
 * (ctl_pop/ctl_push, queued here in an outbox): REQ from the side that
 * needs the connection, ACK from the other. A peer's RC side is
 *   NONE    no QP yet;
 *   PENDING QP created, REQ sent (and resent with back-off), operations
 *           wait in the peer's FIFO;
 *   READY   QP in RTS, operations posted at once;
 *   FAILED  a tombstone: the QP hit an error (or could not be created);
 *           later operations complete at once with the recorded error,
 *           until the peer is released (its session reset) and resolved
 *           again. Not after a refused request (-EACCES) or a deadline
 *           (-ETIMEDOUT: no answer to REQ, or no progress; rc_stalled):
 *           those end what was posted or waiting, and the next operation
 *           connects a new pair, since the Nexus, not the NIC, judges
 *           whether the peer lives.
 * A completion error is recorded as the peer's cause; WR_FLUSH_ERR
 * completions behind it report that cause, never the flush.
 * A cancel of a posted operation (its deadline) renews the pair instead:
 * the QP goes to the error state, the cancelled operation reports the
 * cancel's status, every other operation flushed with it goes back to the
 * FIFO (from its first chunk not done) and a RENEW asks the peer for a
 * new pair; the peer requeues what it had posted the same way. Grants
 * bound to the old QP (memory windows) keep their keys: the old QP is kept
 * (old_qp) until the new one is READY, and then each window is
 * invalidated and bound to the new QP under the same key (verbs_mw.c).
 * Release notices of operations that ended during the renewal's drain are
 * held (renew_held) and sent on the new QP once it is READY.
 *
 * Threads: an endpoint belongs to the thread that created it.
 */
#ifndef URPC_TRANSPORT_VERBS_INT_H
#define URPC_TRANSPORT_VERBS_INT_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "../mem/hugepage.h"
#include "../util/compiler.h"
#include "../util/seam.h"
#include "transport.h"

#define VERBS_GRH 40u	       /* room the NIC fills in front of a UD receive */
#define VERBS_QKEY 0x75727063u /* "urpc": every urpc UD QP uses it */
#define VERBS_EP_VERSION 1
#define VERBS_EP_LEN 36		   /* see verbs_get_endpoint() */
#define VERBS_WANT_INLINE 256u	   /* inline data asked of the UD QP */
#define VERBS_RECV_BATCH 32u	   /* receives reposted per ibv_post_recv(), at most rq / 4 */
#define VERBS_POLL_BATCH 32u	   /* completions per ibv_poll_cq() */
#define VERBS_OS_OPS 256u	   /* one-sided operations outstanding per endpoint */
#define VERBS_RC_DEPTH 128u	   /* send queue of one RC QP */
#define VERBS_RD_ATOMIC 16u	   /* outstanding READs per RC QP, at most */
#define VERBS_RD_BEHIND_NOTICE 1u  /* READ operations posted behind one with a notice */
#define VERBS_RC_CHUNKS 16u	   /* work requests of one operation in flight, at most */
#define VERBS_RC_CHUNK (1u << 20)  /* their size (URPC_VERBS_RC_CHUNK overrides) */
#define VERBS_HS_RTO_NS 5000000ull /* first resend of a REQ after 5 ms */
#define VERBS_HS_RTO_MAX_NS 100000000ull
#define VERBS_OP_NS_PER_MIB 50000000ull /* allowance for one chunk in flight: 20 MB/s */
#define VERBS_DRAIN_NS 2000000000ull	/* bound of a synchronous drain */
#define VERBS_MAX_DEPTH 32768u
#define VERBS_OUTBOX 64u	      /* control messages waiting for session management */
#define VERBS_WR_LOCAL (1ull << 63)   /* wr_id bit of a bind or an invalidation (verbs_mw.c) */
#define VERBS_WR_NOTICE (1ull << 62)  /* wr_id of a release notice (unsignaled) */
#define VERBS_WR_RECV (1ull << 61)    /* wr_id of a receive (for notices) */
#define VERBS_RC_RECV 64u	      /* receives posted on an RC QP, for notices */
#define VERBS_RELEASE_NS 200000000ull /* revoke() waits this long for the peer's notice */
#define VERBS_RELEASE_READY_NS 2000000000ull /* revoke_ready() waits that long, not blocking */
#define VERBS_LOCAL_NS 1000000000ull	     /* bound of waiting for one (it is local work) */
#define VERBS_MW_BINDS 255u /* binds of one window before it is replaced: its key has 8 free bits */
#define VERBS_RXE_VENDOR 0xffffffu /* Soft-RoCE's vendor_id */
#define VERBS_HELD 64u		   /* release notices held while a wait blocks (verbs_mw.c) */
#define VERBS_RENEW_HELD 16u	   /* ... and per connection while its pair is renewed */
#define VERBS_UNDER 32u		   /* MRs kept under windows (verbs_under.c) */

static_assert(URPC_IS_POW2(VERBS_OS_OPS), "op table size is a power of two");
static_assert(VERBS_OS_OPS <= 65536, "op indices fit 16 bits");

/* Control message types (the first byte of a ctl_pop() message). */
enum verbs_ctl_type {
	VERBS_CTL_RC_REQ = 1,	/* please connect an RC QP to mine */
	VERBS_CTL_RC_ACK = 2,	/* connected: here is mine */
	VERBS_CTL_RC_RENEW = 3, /* a REQ in place of a QP that we cancelled: requeue, not fail */
};

/*
 * A control message, little-endian. @ud_qpn/@nonce/@gid name the sender's
 * endpoint, so the receiver finds the peer it resolved for it; @rc_qpn and
 * @rc_psn are the sender's RC QP. An ACK echoes in @echo_qpn the QP it
 * connected to, so a requester ignores the answer to a stale REQ (one sent
 * by a QP it has torn down since).
 */
struct verbs_ctl {
	uint32_t ud_qpn;
	uint32_t nonce;
	uint32_t rc_qpn;
	uint32_t rc_psn;
	uint32_t echo_qpn;
	uint8_t gid[16];
};
static_assert(sizeof(struct verbs_ctl) == 36, "verbs_ctl is 36 bytes on the wire");

/* The RC side of a connection (see the top of the file), with its _str(). */
#define VERBS_RC_STATES(X)                                                                         \
	X(NONE, "none")                                                                            \
	X(PENDING, "pending")                                                                      \
	X(READY, "ready")                                                                          \
	X(FAILED, "failed")

enum verbs_rc_state {
#define VERBS_RC_ENUM(name, str) VERBS_RC_##name,
	VERBS_RC_STATES(VERBS_RC_ENUM)
#undef VERBS_RC_ENUM
};
static_assert(VERBS_RC_NONE == 0, "a zeroed connection has no RC side");

static inline const char *verbs_rc_state_str(enum verbs_rc_state s)
{
	switch (s) {
#define VERBS_RC_CASE(name, str)                                                                   \
	case VERBS_RC_##name:                                                                      \
		return str;
		VERBS_RC_STATES(VERBS_RC_CASE)
#undef VERBS_RC_CASE
	}
	return "?";
}

#define VERBS_NIL 0xffffu /* end of an op list */

/*
 * The connection to one remote endpoint: its address handle and its RC
 * side. Peer handles resolved for the same endpoint (several sessions
 * between the same two Rpcs) share it, so the two endpoints have one RC
 * connection between them whatever the number of sessions.
 */
struct verbs_conn {
	unsigned refs; /* peer handles */
	struct ibv_ah *ah;
	struct ibv_ah_attr ah_attr; /* also the RC QP's path */
	uint32_t qpn;		    /* the peer's UD QP */
	uint32_t nonce;
	uint32_t mtu; /* the peer's active MTU in bytes */
	uint8_t gid[16];

	enum verbs_rc_state rc_state;
	struct ibv_qp *rc_qp;
	uint32_t rc_remote_qpn; /* READY: the peer's RC QP */
	uint32_t rc_psn;
	int rc_err;	    /* FAILED: the recorded cause (-errno) */
	bool rc_stalled;    /* FAILED by a deadline (urpc__verbs_rc_stall()): next op reconnects */
	uint32_t rc_posted; /* operations posted on rc_qp, completion not seen */
	uint32_t rd_out;    /* READ work requests posted on rc_qp, not back (<= rd_atomic) */
	uint16_t rd_ops;    /* READ operations posted on rc_qp, not retired */
	uint16_t rd_notice; /* ... of which end with a release notice (verbs_rc.c, may_post()) */
	uint16_t wait_head; /* PENDING: operations waiting, FIFO */
	uint16_t wait_tail;
	uint64_t hs_deadline_ns; /* PENDING: fail after this */
	uint64_t progress_ns;	 /* READY: the last completion (or first post) on rc_qp */
	uint64_t hs_next_ns;	 /* PENDING: resend REQ then */
	uint64_t hs_rto_ns;
	bool renew;   /* PENDING after a cancel: the REQ is a RENEW */
	bool requeue; /* draining for a renewal: flushed operations go back to the FIFO */
	/* Renewed away, kept while windows are bound to it (REBIND grants). */
	struct ibv_qp *old_qp;
	/* Notices of operations that ended in a renewal's drain: sent once READY. */
	uint32_t nrenew_held;
	uint32_t renew_held[VERBS_RENEW_HELD];
	/*
	 * The session's controller over the one-sided chunks of every handle
	 * on it (verbs_rc_win.h, issue 32): @os_window bytes at the NIC at
	 * once (set_peer_window; 0: no bound, rc_chunks per operation), the
	 * bytes out, and one chunk a round trip timed for peer_os_rtt.
	 */
	uint64_t os_window;
	uint64_t os_out;
	uint64_t os_timed_ns;	 /* the timed chunk's post */
	uint64_t os_timed_bytes; /* os_out then, its own included: ahead of it on the QP */
	uint64_t os_rtt_ns;	 /* the newest round trip not taken yet (0: none) */
	uint64_t os_rtt_bytes;
	uint32_t os_timed_seq; /* the timed chunk's number in its operation (from 1) */
	uint16_t os_timed_op;  /* its operation's index + 1 (0: none timed) */

	struct verbs_conn *next; /* the endpoint's list of connections */
	struct verbs_conn *prev;
};

/* A resolved peer: a handle on a connection. */
struct urpc_tp_peer {
	struct ibv_ah *ah; /* the connection's, copied for the datapath */
	uint32_t qpn;
	uint32_t posted; /* its operations at the NIC */
	struct verbs_conn *conn;
	struct urpc_tp_peer *next; /* the endpoint's list of peers */
	struct urpc_tp_peer *prev;
};

enum verbs_op_state {
	VERBS_OP_FREE = 0,
	VERBS_OP_WAITING, /* on its peer's FIFO until the RC QP is ready */
	VERBS_OP_POSTED,  /* at the NIC */
	VERBS_OP_DONE,	  /* on the done FIFO, completion not reaped yet */
};

struct verbs_op {
	uint64_t wr_id; /* the caller's */
	enum urpc_tp_op kind;
	enum verbs_op_state state;
	int status;
	struct urpc_tp_peer *peer; /* the handle it was posted on */
	struct verbs_conn *conn;
	void *local;
	void *mr_handle; /* the local struct ibv_mr */
	uint32_t lkey;
	uint32_t rkey;
	uint32_t notice; /* the high half of a grant's key: sent back once it succeeded */
	uint64_t raddr;
	uint32_t len;
	uint32_t qp_num;   /* POSTED: the RC QP it went to (stale completions are ignored) */
	uint32_t chunk;	   /* POSTED: the size of its work requests (the last may be shorter) */
	uint32_t off;	   /* POSTED: bytes handed to the NIC so far */
	uint16_t inflight; /* POSTED: work requests whose completion has not come */
	uint32_t out;	   /* POSTED: their bytes (the connection's os_out) */
	uint16_t next;	   /* peer's wait FIFO, then the done FIFO */
	/*
	 * POSTED: its post, or the completion of its last chunk. It fails only
	 * when neither it nor its connection (operations queued ahead of it)
	 * made progress for one_sided_timeout plus one chunk's allowance
	 * (VERBS_OP_NS_PER_MIB): a long operation lives while chunks complete.
	 */
	uint64_t progress_ns;
};

/*
 * A grant (verbs_mw.c), an entry of the endpoint's table. Its key on the
 * wire is the rkey of a type-2 memory window bound to the RC QP of the
 * grant's peer over exactly the granted bytes (MW), or, where the device
 * has no such windows or the RC connection is not up yet, of an MR
 * registered for exactly those bytes (MR). The key the engine holds is
 * (index << 8 | @gen) << 32 | rkey: a stale revoke finds nothing, and the
 * reader sends the high half back in its release notice (verbs_mw.c).
 */
enum verbs_grant_kind {
	VERBS_GRANT_FREE = 0,
	VERBS_GRANT_MW,	  /* @mw bound to @qp_num (over @mr, if it has one) */
	VERBS_GRANT_MR,	  /* @mr is the grant's own registration */
	VERBS_GRANT_DEAD, /* its window went with its QP; revoke() frees the entry */
	/* @mw still bound to @conn's old_qp (renewed): bound to the new one when READY */
	VERBS_GRANT_REBIND,
};

struct verbs_grant {
	enum verbs_grant_kind kind;
	bool released;	     /* the peer's notice came: none of its requests on it is left */
	uint64_t release_by; /* revoke_ready() asked: stop waiting for the notice then */
	uint32_t gen;	     /* 1..255 */
	uint32_t rkey;
	uint32_t qp_num;
	uint32_t binds; /* MW: of @mw, this one included */
	struct ibv_mw *mw;
	struct ibv_mr *mr; /* MR: the grant's own registration; MW: the one under it, if any */
	bool under;	   /* @mr came from verbs_under.c */
	const void *reg;   /* the registration (its struct ibv_mr) it was made on */
	uintptr_t addr;	   /* MW: what it is bound over, to bind it again (REBIND) */
	uint32_t len;
	unsigned access;
	struct verbs_conn *conn;
	struct urpc_tp_peer *peer; /* released with it */
	uint32_t next_free;
};

struct verbs_tp {
	struct urpc_tp base;
	struct urpc_verbs_port_info {
		char dev[64];
		uint8_t num;
		int gid_index;
		bool roce;
		uint16_t lid;
		enum ibv_mtu mtu_enum;
		uint32_t mtu; /* active MTU, bytes */
	} port;
	union ibv_gid gid;
	uint32_t nonce;
	uint32_t rd_atomic;
	uint32_t rc_chunk;  /* operations are cut into chunks of at least this; 0: never */
	uint32_t rc_chunks; /* ... and into at most this many (>= 1) */
	uint64_t max_msg;   /* largest one-sided length */

	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *send_cq; /* UD sends */
	struct ibv_cq *recv_cq; /* UD receives; armed for waiting */
	struct ibv_cq *rc_cq;	/* every RC QP's completions; armed for waiting */
	struct ibv_qp *qp;	/* the UD QP */

	/* Memory of the receive ring and the send slots, one registration. */
	struct urpc_hp_region ring;
	struct ibv_mr *ring_mr;
	uint32_t slot_size; /* VERBS_GRH + mtu, cache-line aligned */
	uint8_t *send_slots;

	/* UD send queue accounting: WRs posted and known complete. */
	uint64_t sq_posted;
	uint64_t sq_done;
	uint64_t sq_last_signal; /* sq_posted at the last signaled WR */
	uint32_t sig_every;	 /* one WR signaled in this many: sq_depth / 2, 1 at least */
	/*
	 * sq_depth WRs and 2 SGEs each, for one burst. Between bursts each
	 * is one inlined SGE, unsignaled (what tx_many()'s common walk
	 * leaves as it finds it); a burst that changes more restores them.
	 */
	struct ibv_send_wr *swr;
	struct ibv_sge *ssge;
	struct ibv_send_wr wr1; /* a burst of one inlined datagram (verbs_ud.c's tx_one()) */
	struct ibv_sge sge1;
	uint32_t inline_max; /* the longest datagram sent inline: max_inline, mtu at most */

	/*
	 * Receives: one WR and SGE per ring slot, set at create. A slot's
	 * wr_id (and its entries' ring_idx) is its byte offset in rslot: the
	 * datagram's address and the WR to link are one load away. Slots
	 * given back are linked behind rq_tail from rq_stub.next and posted
	 * as one chain once nrepost reach repost_batch.
	 */
	struct verbs_rslot {
		struct ibv_recv_wr wr;
		struct ibv_sge sge;
	} * rslot;
	struct ibv_recv_wr rq_stub;
	struct ibv_recv_wr *rq_tail;
	uint32_t nrepost;
	uint32_t repost_batch;
	/*
	 * rx_burst()'s completions and its caller's array, kept here rather
	 * than on the stack or in registers across ibv_poll_cq(), so that an
	 * empty poll (the idle pass) saves and restores almost nothing.
	 */
	struct ibv_wc rx_wc[VERBS_POLL_BATCH];
	struct urpc_tp_rx *rx_out;
	unsigned rx_n;

	/* One-sided operations: a table, a free list, a done FIFO. */
	struct verbs_op ops[VERBS_OS_OPS];
	uint16_t free_head;
	uint16_t done_head;
	uint16_t done_tail;
	uint32_t nops;	   /* entries not FREE */
	uint32_t nposted;  /* entries POSTED */
	uint32_t npending; /* peers PENDING (change it with verbs_rx_pick() after) */
	/* base.rx_burst's two choices (verbs_rx_pick()): with the side work, and without. */
	int (*rx_side)(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
	int (*rx_plain)(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
	uint64_t next_scan_ns; /* next deadline scan of posted operations */

	/* Control messages for ctl_pop(), FIFO; a NULL conn was purged. */
	struct verbs_outmsg {
		struct verbs_conn *conn;
		uint8_t type;
	} outbox[VERBS_OUTBOX];
	uint32_t out_head, out_tail;

	uint32_t nregs; /* user registrations alive */

	/* Grants (verbs_mw.c): entries with a free list, and windows not bound. */
	bool use_mw;	    /* the device has type-2 memory windows ... */
	bool mw_own_bounds; /* ... that it checks against their own bounds */
	struct verbs_grant *grants;
	uint32_t grants_cap;
	uint32_t grant_free; /* UINT32_MAX: none */
	struct verbs_idle_mw {
		struct ibv_mw *mw;
		uint32_t binds; /* so far */
	} * idle_mw;
	uint32_t nidle_mw, idle_mw_cap;
	struct verbs_under {
		struct ibv_mr *mr; /* NULL: empty */
		const void *reg;   /* the user registration it lies in */
		uintptr_t addr;
		size_t len;
		uint32_t refs; /* grants bound over it */
		uint64_t used; /* under_clock when last taken */
	} under[VERBS_UNDER];
	uint64_t under_clock;
	uint64_t local_seq;  /* the last bind or invalidation posted ... */
	uint64_t local_done; /* ... and the last one whose completion came */
	int local_status;    /* its enum ibv_wc_status */
	/*
	 * While verbs_mw.c blocks (a bind, an invalidation, a revoke waiting
	 * for its notice), the release notices of operations that complete
	 * meanwhile are held and posted after. A peer's Rpc on the same
	 * thread is not polled then: its notice receives are not reposted,
	 * and notices beyond them would meet RNR and stall this QP's send
	 * queue, the bind waited for included, until the wait gives up. A
	 * notice that does not fit is dropped: its owner revokes after
	 * VERBS_RELEASE_NS instead.
	 */
	bool hold_notices;
	uint32_t nheld;
	struct verbs_held {
		uint32_t qp_num;
		uint32_t notice;
	} held[VERBS_HELD];

	struct urpc_tp_peer *peers;
	struct verbs_conn *conns;
};

static inline struct verbs_tp *to_verbs(struct urpc_tp *tp)
{
	return container_of(tp, struct verbs_tp, base);
}

/*
 * The event loop's rx_burst (base.rx_burst): the one that also runs the RC
 * handshakes' timers and reaps grants' notices while there are some
 * (npending, base.stats.grants_live), else the UD receive alone (6
 * instructions less an idle pass). Call after each change of either.
 */
static inline void verbs_rx_pick(struct verbs_tp *v)
{
	v->base.rx_burst = v->npending || v->base.stats.grants_live ? v->rx_side : v->rx_plain;
}

/* ---- helpers with no state, for every verbs file ---- */

static inline uint32_t verbs_random32(void)
{
	uint32_t r;

	urpc__entropy(&r, sizeof(r));
	return r;
}

static inline enum ibv_mtu verbs_mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* The errno of a failed work completion. */
static inline int verbs_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

#endif /* URPC_TRANSPORT_VERBS_INT_H */
