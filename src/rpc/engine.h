/* SPDX-License-Identifier: MIT */
/*
 * The bottom rung of the engine (docs/ENGINE.md): the types every file of
 * src/rpc shares (the Rpc, sessions, slots, one-sided operations) and small
 * inline helpers that read them. No functions of the engine are declared
 * here; each file's own header declares what it offers to the files above.
 * Everything here is owner-thread only.
 *
 * May include: mem/, transport/, util/, pkthdr.h, large_types.h, sm.h, nexus.h.
 */
#ifndef URPC_RPC_ENGINE_H
#define URPC_RPC_ENGINE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "../mem/pool.h"
#include "../mem/regcache.h"
#include "../nexus/nexus.h"
#include "../nexus/nexus_peer.h"
#include "../nexus/sm.h"
#include "../transport/transport.h"
#include "../util/compiler.h"
#include "../util/csprng.h"
#include "../util/idset.h"
#include "../util/rand.h"
#include "../util/seam.h"
#include "../util/tsc.h"
#include "cc.h"
#include "large_types.h"
#include "pkthdr.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A session's window (its slots: requests in flight) is a power of two from
 * 1 to URPC_SESSION_WINDOW_MAX, agreed at connect (opts.session_window of
 * both sides, the server's bounding the client's); the requests waiting
 * for a slot: the public limit.
 */
#define URPC_SESSION_WAITQ URPC_SESSION_MAX_WAITING

#define URPC_TX_BATCH 64 /* datagrams collected before one tx_burst */
#define URPC_RX_BATCH 32 /* datagrams taken per rx_burst */
#define URPC_OS_OPS 64	 /* one-sided operations of large messages in flight per Rpc */
static_assert(URPC_IS_POW2(URPC_SESSION_WINDOW_MAX), "the largest window is a power of two");
static_assert(URPC_SESSION_WINDOW_MAX <= 64, "a session's free slots are a 64-bit mask");
static_assert(URPC_IS_POW2(URPC_SESSION_WAITQ), "wait queue size must be a power of two");

enum urpc_session_role {
	URPC_ROLE_CLIENT = 1,
	URPC_ROLE_SERVER = 2,
};

/*
 * Session states (urpc__session_transition() in session.c is their only
 * writer, through urpc__sess_set_state() in states.h; docs/ENGINE.md has
 * the table). X(name, value, string).
 */
#define URPC_SESSION_STATES(X)                                                                     \
	X(NEW, 0, "new")		     /* allocated, not yet connecting or accepted */       \
	X(CONNECTING, 1, "connecting")	     /* client: CONNECT_REQ sent */                        \
	X(CONNECTED, 2, "connected")	     /* requests flow */                                   \
	X(DISCONNECTING, 3, "disconnecting") /* client: DISCONNECT_REQ sent */                     \
	X(DISCONNECTED, 4, "disconnected")   /* client: closed; freed after its event */           \
	X(RESET, 5,                                                                                \
	  "reset") /* failed (connect failed, peer gone or reset), or closed by the client */

/* Events of the session state machine. X(name, value, string). */
#define URPC_SESSION_EVENTS(X)                                                                     \
	X(CONNECT_START, 1, "connect-start")	 /* client: urpc_session_connect() */              \
	X(ACCEPT, 2, "accept")			 /* server: a CONNECT_REQ was taken */             \
	X(CONNECT_OK, 3, "connect-ok")		 /* client: CONNECT_RESP with success */           \
	X(CONNECT_FAILED, 4, "connect-failed")	 /* client: refused or timed out */                \
	X(DISCONNECT_REQ, 5, "disconnect-req")	 /* client: urpc_session_disconnect() */           \
	X(DISCONNECT_DONE, 6, "disconnect-done") /* client: answered or given up */                \
	X(PEER_CLOSED, 7, "peer-closed")	 /* server: the client disconnected */             \
	X(PEER_FAILED, 8, "peer-failed")	 /* the peer reset or stopped answering */         \
	X(RPC_DESTROY, 9, "rpc-destroy")	 /* the Rpc goes away */

/*
 * Client slot states (one request each; requests beyond the slots wait in
 * the session's queue, outside any slot). X(name, value, string).
 */
#define URPC_CLI_STATES(X)                                                                         \
	X(FREE, 0, "free")	 /* no request; its bit is set in free_mask */                     \
	X(SENT, 1, "sent")	 /* sent, no answer yet; a large one may be READ by the server */  \
	X(ACKED, 2, "acked")	 /* a large request the server has read; its answer is due */      \
	X(READING, 3, "reading") /* a large response is being READ into resp (op os_idx) */

/* Server slot states. X(name, value, string). */
#define URPC_SRV_STATES(X)                                                                         \
	X(IDLE, 0, "idle")	 /* no request yet */                                              \
	X(READING, 1, "reading") /* a large request's payload is being READ from the client */     \
	X(IN_HANDLER, 2, "in-handler") /* handler ran, response not enqueued yet (deferred) */     \
	X(RESPONDED, 3, "responded")   /* the stored response answers duplicates */

#define URPC__ENUM_SESS(name, val, str) URPC_SESS_##name = val,
#define URPC__ENUM_SEV(name, val, str) URPC_SEV_##name = val,
#define URPC__ENUM_CLI(name, val, str) URPC_CLI_##name = val,
#define URPC__ENUM_SRV(name, val, str) URPC_SRV_##name = val,
enum urpc_session_state { URPC_SESSION_STATES(URPC__ENUM_SESS) };
enum urpc_session_ev { URPC_SESSION_EVENTS(URPC__ENUM_SEV) };
enum urpc_cli_state { URPC_CLI_STATES(URPC__ENUM_CLI) };
enum urpc_srv_state { URPC_SRV_STATES(URPC__ENUM_SRV) };
#undef URPC__ENUM_SESS
#undef URPC__ENUM_SEV
#undef URPC__ENUM_CLI
#undef URPC__ENUM_SRV

/* Server slot: what was queued beyond the first send of a stored response. */
#define URPC_RESENT_RESP 0x1u /* the stored response, again */
#define URPC_RESENT_ACK 0x2u  /* the ack (a large request read, its handler deferred) */

/*
 * A client session's round-trip estimate (rtt.c): smoothed RTT and
 * variance as RFC 6298 keeps them, and the largest sample of the last one
 * or two windows, so that a peer that was descheduled once recently is
 * given that long again. Sampled at most once per RTT_GAP_NS, from
 * requests answered without a retransmission (Karn).
 */
struct urpc_rtt {
	uint64_t rto_ns;  /* what a new request starts with; 0 until connected */
	uint64_t srtt_ns; /* 0: no sample yet */
	uint64_t rttvar_ns;
	uint64_t win_max_ns[2]; /* [0]: this window's largest sample, [1]: the last one's */
	uint64_t win_end_ns;	/* when [0] becomes [1] */
	uint64_t next_ns;	/* the next response that may be sampled */
};

/* A client slot: one request in flight (slot.h has its state machine). */
struct urpc_cslot {
	uint64_t cur_req_num; /* slot index + k * URPC_SESSION_WINDOW_MAX */
	enum urpc_cli_state state;
	uint32_t idx; /* this slot's index in its session */
	struct urpc_msgbuf *req;
	struct urpc_msgbuf *resp;
	urpc_cont_fn cont;
	void *tag;
	uint64_t tx_ns;	      /* last (re)transmission */
	uint64_t rto_ns;      /* current retransmission timeout */
	uint64_t deadline_ns; /* 0: none */
	uint32_t retries;
	/*
	 * The deadline passed while the server may still READ the request
	 * (SENT, large) or we READ the response (READING): the request
	 * completes with this once the buffers are free. 0 in other states.
	 * Beside retries: a request's start clears both in one store.
	 */
	int late_status;
	bool large_req; /* the request travels as a descriptor (lpkt) */
	/*
	 * tx_ns is the timer scan's, not the send's (a request that left
	 * outside the loop and not by a pass's flush): its answer gives no
	 * round-trip sample, which would be short by the time until the scan.
	 */
	bool tx_unknown;
	uint16_t os_idx;
	/* A large request's grant to the server: until it has read it (ack, answer, failure). */
	struct urpc_tp_grant grant;
	struct urpc_large_pkt lpkt; /* a large request's descriptor */
};

/*
 * A server slot: the latest request on it and its stored response. Kept
 * small (100,000 server sessions hold 8 each): what only large messages
 * need lives in @h.priv_resp or beside it (@large).
 */
struct urpc_sslot {
	uint64_t cur_req_num; /* the latest request's: slot index + k * URPC_SESSION_WINDOW_MAX */
	enum urpc_srv_state state;
	uint16_t idx;	     /* this slot's index in its session */
	uint8_t resent;	     /* URPC_RESENT_*: copies that may still be in flight */
	uint64_t resp_epoch; /* rpc->tx_epoch when the stored response was last queued; 0: sent */
	struct urpc_srv_large *large; /* a large stored response; NULL: none */
	/*
	 * What the handler gets (struct urpc_req_handle is in urpc.h, for the
	 * inline calls of a handler). Its priv_resp, allocated with the slot's
	 * first request, holds the stored response: a small one's header and
	 * bytes, or a large one's descriptor (its struct urpc_large_pkt: the
	 * header in the header room, the 24 bytes of urpc_large_desc as data,
	 * urpc__sslot_lpkt()). While the handler of a large request is
	 * deferred, its header room holds the ack.
	 */
	struct urpc_req_handle h;
};
/* A power of two: a slot's address is one shift (and 100,000 sessions hold 8 each). */
static_assert(sizeof(struct urpc_sslot) == 128, "server slot size");

/* A request waiting for a free slot (client). */
struct urpc_waiting_req {
	struct urpc_msgbuf *req;
	struct urpc_msgbuf *resp;
	urpc_cont_fn cont;
	void *tag;
	uint64_t deadline_ns;
	uint8_t req_type;
};

/* What only a client session has. */
struct urpc_cli_half {
	/* session management */
	uint64_t sm_next_retry_ns;
	uint64_t sm_deadline_ns;
	uint64_t sm_tx_ns;	/* when the first CONNECT_REQ left; 0 once resent */
	uint64_t cookie;	/* the last CONNECT_COOKIE that made it resend at once */
	uint64_t probe_next_ns; /* a PING_REQ awaits its answer: resend then; 0: none */
	int pending_ev;		/* an sm_handler event to raise on the next loop pass, or 0 */
	int pending_status;	/* its status */
	bool free_after_ev;	/* free the session once pending_ev was raised */
	int fail_status;	/* fail every pending request with this on the next pass, or 0 */
	/*
	 * The peer's Nexus answered the connect itself (its Rpc id is not
	 * attached yet) with this status: the connect keeps trying, and its
	 * time-out fails with it rather than -ETIMEDOUT. 0: no such answer.
	 */
	int no_rpc_status;
	uint32_t nx_refused_gen; /* the peer's refused_gen when the connect began */
	/* on the Rpc's list of sessions with pending_ev or fail_status (session_table.c) */
	bool on_pend;
	uint32_t pend_prev, pend_next; /* session number + 1; 0: none */
	/* datapath */
	struct urpc_rtt rtt; /* the first retransmission timeout of a request */
	uint64_t
		free_mask; /* bit i set: slot i is FREE; the free slots are the session's credits */
	uint64_t all_free; /* free_mask with every slot of the window FREE */
	uint32_t wq_head, wq_tail;
	bool cc_limited; /* cc.cc.limited: requests go through the wait queue and the pacer */
	struct urpc_waiting_req waitq[URPC_SESSION_WAITQ];
	struct urpc_cc_sess cc; /* congestion control (cc_sess.c) */
	/* slot_mask + 1 of them (the agreed window); allocated for the proposed one */
	struct urpc_cslot slots[];
};

/* What only a server session has. */
struct urpc_srv_half {
	uint32_t deferred;   /* slots IN_HANDLER: handlers that have not responded yet */
	uint32_t hnext;	     /* next in its chain of the CONNECT_REQ index: number + 1; 0: none */
	uint32_t src_bucket; /* its source's count (session_src.h): bucket + 1; 0: none */
	/* its one-sided transfers' controller (cc_sess.c), started by their first sample */
	struct urpc_cc_sess cc;
	struct urpc_cc_share_peer share; /* its client as the Rpc's fair share sees it (cc.h) */
	struct urpc_sslot slots[];	 /* slot_mask + 1 of them: the agreed window */
};

/*
 * A session. Only the half of its role is allocated (session_table.c):
 * a client session never touches srv, a server session never cli.
 */
struct urpc_session {
	enum urpc_session_role role;
	enum urpc_session_state state;
	uint32_t local_num;
	uint32_t remote_num;
	uint32_t rx_word; /* URPC_PKT_WORD of what it receives while CONNECTED; 0 else */
	/*
	 * The window less one. Client slot i sends request numbers i + k *
	 * URPC_SESSION_WINDOW_MAX (a multiple of every window), so req_num &
	 * slot_mask names the slot on both sides. Client: its proposal until
	 * the server's CONNECT_RESP agrees one (never larger).
	 */
	uint32_t slot_mask;
	uint64_t token;
	uint64_t rx_token; /* the receive check's: token, masked while unproven (session_src.h) */
	/*
	 * The header of what this session sends (a request or a response),
	 * built once it is connected: sending copies it and sets the three
	 * fields that change (urpc__pkthdr_from).
	 */
	struct urpc_pkthdr tx_hdr;
	uint8_t remote_rpc_id;
	struct sockaddr_in peer_nexus;
	struct urpc_tp_peer *peer; /* NULL until the endpoint is resolved */
	uint64_t sm_seq;
	/*
	 * Liveness comes from the Nexus (nexus_peer.h): the heartbeat entry of
	 * the peer's Nexus, and its generations when the session was
	 * established; the session fails when they move.
	 */
	struct urpc_nx_peer *nxp;
	uint32_t nx_fail_gen, nx_rpc_gen, nx_probe_gen;
	union {
		struct urpc_cli_half cli;
		struct urpc_srv_half srv;
	};
};

typedef uint64_t (*urpc_clock_fn)(void *arg);

struct urpc_rmem_tab;

struct urpc_rpc {
	const void *owner;     /* urpc__thread_name() of the creating thread */
	const void *owner_tag; /* its &urpc_priv_thread_tag: a handle's priv_answer */
	struct urpc_nexus *nx;
	const struct urpc_handler *handlers;
	uint8_t id;
	struct urpc_rpc_opts o;
	struct urpc_tp *tp;
	struct urpc_pool *pool;
	struct urpc_pool_opts pool_opts;
	struct urpc_regcache *regcache; /* the application's memory (views) */
	uint32_t views;			/* views registered and not unregistered */
	uint32_t max_msg;
	struct urpc_sm_queue *smq;
	int wake_fd; /* eventfd the SM thread signals while we sleep; -1: never sleeps */
	uint64_t idle_ns, shared_until, yield_off_until; /* idle sleep, shared core (evloop.c) */
	uint32_t yield_debt;				 /* long yields lately (evloop.c) */
	uint64_t spin_ns; /* idle spin beside a CPU-bound thread, as spinning paid (evloop.c) */
	bool spin_ok;	  /* the last yield gave the core to a CPU-bound thread (evloop.c) */
	struct urpc_session **sessions;
	uint32_t max_sessions;
	uint32_t hi_session;	/* one past the highest session number in use */
	struct urpc_idset nums; /* the session numbers in use */
	/*
	 * Server sessions by what their CONNECT_REQ said (client Nexus, Rpc,
	 * session number, token), so a retried one finds its session: chains
	 * through srv.hnext, session number + 1 per bucket (0: empty).
	 */
	uint32_t *srv_index;
	uint32_t srv_index_mask; /* buckets - 1 */
	uint32_t srv_sessions;	 /* server sessions in the index */
	uint64_t srv_index_salt;
	/* client sessions with an event or failure for the next pass: number + 1 */
	uint32_t pend_head, pend_tail;
	int in_cb; /* depth of user callbacks running outside a pass (in_loop bars the rest) */
	/*
	 * Inside loop_once: now is this pass's time; no loop or destroy. As
	 * wide as in_cb and beside it: the loop's entry tests both with one
	 * compare of the 8 bytes.
	 */
	uint32_t in_loop;
	uint64_t now;
	/*
	 * A request's send time: now while the pass runs handlers and
	 * continuations (evloop.c's pass_first and pass_rest), 0 elsewhere.
	 */
	uint64_t tx_stamp;
	urpc_clock_fn clock; /* NULL: the TSC clock, else CLOCK_MONOTONIC (urpc__now_ns()) */
	void *clock_arg;
	struct urpc_tsc tsc; /* the TSC clock (util/tsc.h); anchored by the timer scan */
	uint64_t next_scan_ns;
	/*
	 * Bit per session number: a session-management timer may be armed
	 * (connect or disconnect retries, a probe). Set where one is armed,
	 * cleared by the scan once the session has none, so the scan never
	 * walks idle sessions.
	 */
	uint64_t *sm_map;
	uint32_t nx_notices_seen; /* urpc__nexus_notices() when the sessions were last checked */
	uint64_t srv_deferred;	  /* server slots in a handler, all sessions together */
	uint64_t *busy_map;	  /* bit per session number: client requests in flight or waiting */
	uint64_t rto_ns, rto_max_ns, ping_ns, peer_timeout_ns, connect_timeout_ns, sm_retry_ns;
	struct urpc_cc_params ccp; /* congestion control; its pacer (NULL: algo off): */
	struct urpc_wheel *cc_wheel;
	uint64_t cc_os_next_ns;	       /* the next look at one-sided round trips (cc_sess.h) */
	struct urpc_cc_share cc_share; /* a server's fair share for its senders (while CC is on) */
	/* session-management round trips (ns), smoothed as TCP's (RFC 6298); 0: no sample */
	uint64_t sm_srtt_ns, sm_rttvar_ns;
	struct urpc_csprng secrets; /* session tokens: unpredictable from earlier ones */
	/* Server sessions per source address (session_src.h); NULL: no limit. */
	uint32_t *src_count;
	uint64_t *src_bytes; /* ... [2b]: stored large responses' bytes, [2b+1]: READs (quota.c) */
	uint64_t src_bytes_max; /* ... at most (URPC_QUOTA_SRC_BYTES; tests lower it) */
	uint64_t
		pool_failures_seen; /* the pool's alloc_failures at the last timer scan (quota.c) */
	uint32_t src_limit, nosess_n; /* ... and NOSESS answers sent since nosess_ns */
	uint64_t src_key, nosess_ns;
	uint64_t os_wait_ns; /* the last time a large request waited for an operation (quota.c) */
	unsigned ntx;
	/* The transport's tx_now() when it sends each datagram at once (URPC_TP_CAP_TX_NOW); NULL: batches */
	int (*tx_now)(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf, uint32_t len);
	bool rx_reclaim; /* rx_burst() takes back the last burst (URPC_TP_CAP_RX_RECLAIM) */
	/* The transport's rx_run() where it lends runs (URPC_TP_CAP_RX_RUN); NULL: rx_burst() */
	int (*rx_run)(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n);
	const struct urpc_tp_rx *rx_ent; /* the entries rx_run() lent this pass */
	uint64_t tx_epoch;		 /* advances each time the TX batch empties */
	/*
	 * The response a continuation of urpc_req_enqueue_view() gets: the bytes in the receive
	 * ring, set by client.c for each answer; empty (buf NULL) for an error. Not a buffer:
	 * priv_class NULL and max_data_size 0, so every call that takes one refuses it.
	 */
	struct urpc_msgbuf resp_view;
	struct urpc_os_op os[URPC_OS_OPS];
	uint16_t os_free; /* free list of os[], URPC_OS_NIL at the end */
	union {		  /* the pass's rare work: one load of rare tells it there is none */
		struct {
			uint32_t os_busy; /* os[] in use, and the users' live batches (rop.c) */
			uint16_t smo_n; /* SM packets in smo[] for the next flush (session_sm.c) */
			uint16_t have_pending; /* some session has a pending_ev (no padding) */
		};
		uint64_t rare;
	};
	/*
	 * Large responses whose slot took a new request while the transport
	 * still waits for the client to let go of their grant (revoke_ready):
	 * kept, untouched, until it may revoke without blocking (large.c).
	 */
	struct urpc_srv_large *retiring;
	struct urpc_srv_large *grants_live, *grants_tail; /* stored in slots, oldest first */
	struct urpc_cli_retiring *cli_retiring; /* ... and large requests (the same, client side) */
	/* Users' exposures (rmem.c); NULL until the first. */
	struct urpc_rmem_tab *rmem;
	/*
	 * Users' one-sided operations (rop.c); NULL until the first. Their
	 * batches count in os_busy too (the loop polls while any is live).
	 */
	struct urpc_rop_tab *rop;
	struct urpc_tp_tx tx[URPC_TX_BATCH];
	struct urpc_tp_rx rx[URPC_RX_BATCH]; /* rx_burst()'s entries of the pass (evloop.c) */
	struct urpc_sm_dgram smo[URPC_SM_OUT_BATCH]; /* sent in one system call */
	struct urpc_rpc_stats st;
	uint64_t bad_transitions; /* illegal slot or session transitions (slot.h); must stay 0 */
};

/*
 * A view of GPU memory: registered through dma-buf (the NIC reads and writes
 * the device memory itself) or, where that cannot be, staged through a
 * pinned host copy (@host) that the engine fills before sending and copies
 * back after receiving. Not cached: one registration per view.
 */
struct urpc_gpu_view {
	void *dev;
	size_t len;
	void *host; /* staging copy; NULL with dma-buf */
	struct urpc_tp_mr mr;
};

/*
 * The Rpc's clock, read in line (the event loop reads it once a pass): the
 * TSC clock once it is calibrated (util/tsc.h: CLOCK_MONOTONIC's scale,
 * a dozen instructions), else the one installed with urpc__rpc_set_clock()
 * (which turns the TSC clock off), else urpc__now_ns() (the process's
 * seam: CLOCK_MONOTONIC, or a simulation's clock, which also keeps the
 * TSC clock off).
 */
uint64_t urpc__rpc_clock_slow(const struct urpc_rpc *rpc);

static inline uint64_t urpc__rpc_clock(const struct urpc_rpc *rpc)
{
	if (likely(rpc->tsc.mult != 0))
		return urpc__tsc_read(&rpc->tsc);
	return urpc__rpc_clock_slow(rpc); /* out of line: the pass needs no frame for it */
}

/*
 * A view (urpc_msgbuf_register) carries in priv_class its cache entry with
 * bit 0 set (host memory), or its struct urpc_gpu_view with bit 1 set; a
 * pool buffer carries its chunk (aligned: both bits clear).
 */
#define URPC_MB_HOST_VIEW 1u
#define URPC_MB_GPU_VIEW 2u

static inline bool urpc__mb_is_view(const struct urpc_msgbuf *mb)
{
	return ((uintptr_t)mb->priv_class & 3u) != 0;
}

static inline struct urpc_regcache_ent *urpc__mb_view_ent(const struct urpc_msgbuf *mb)
{
	return (struct urpc_regcache_ent *)((uintptr_t)mb->priv_class & ~(uintptr_t)3);
}

/* The GPU view behind @mb, or NULL. */
static inline struct urpc_gpu_view *urpc__mb_gpu(const struct urpc_msgbuf *mb)
{
	if (!((uintptr_t)mb->priv_class & URPC_MB_GPU_VIEW))
		return NULL;
	return (struct urpc_gpu_view *)((uintptr_t)mb->priv_class & ~(uintptr_t)3);
}

/* The transport registration (struct urpc_tp_mr *) covering @mb, or NULL. */
static inline const struct urpc_tp_mr *urpc__mb_mr(const struct urpc_msgbuf *mb)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(mb);

	if (g)
		return &g->mr;
	if (urpc__mb_is_view(mb))
		return urpc__mb_view_ent(mb)->reg.handle;
	return urpc__pool_reg_handle(mb);
}

/*
 * May a grant let the peer READ @mb? Pool buffers: always; views: with
 * URPC_MEM_PEER_READS.
 */
static inline bool urpc__mb_peer_readable(const struct urpc_msgbuf *mb)
{
	const struct urpc_tp_mr *mr = urpc__mb_mr(mb);

	return mr && (mr->access & URPC_TP_ACCESS_GRANT_READ);
}

/* Where the transport reads or writes @mb's bytes: the staging copy of a GPU view. */
static inline void *urpc__mb_dma(const struct urpc_msgbuf *mb)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(mb);

	return g && g->host ? g->host : mb->buf;
}

/*
 * urpc_priv_thread_tag (urpc.h, defined in rpc.c): one byte per thread
 * whose address names the thread: comparing it costs a load from the
 * thread pointer, where pthread_self() is a call into libc on every public
 * entry point. Initial-exec: no __tls_get_addr call.
 */

/*
 * The calling thread's name: where GCC gives it, the thread pointer itself
 * (one load from %fs on x86-64, with no offset to fetch first: the thread
 * control block's address, as unique among live threads as the tag's),
 * else the tag's address. The whole library is built one way.
 */
static inline const void *urpc__thread_name(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
	return __builtin_thread_pointer();
#else
	return &urpc_priv_thread_tag;
#endif
}

/* Owner-thread check used by every public entry point. */
static inline bool urpc__rpc_is_owner(const struct urpc_rpc *rpc)
{
	return rpc->owner == urpc__thread_name();
}

/*
 * msgbuf.priv_sess: the client session a buffer was last lent to by
 * urpc_req_enqueue() (whether it still is, that session's slots and queue
 * say), or this value for a buffer the library keeps for good (a server
 * slot's preallocated response buffer).
 */
#define URPC_MB_SESS_LIBRARY UINT32_MAX

#define URPC_OS_NIL 0xffffu

/* The shortest one-sided timeout, and the one before any round trip was measured. */
#define URPC_OS_TIMEOUT_MIN_NS 1000000000ull

/*
 * The header sits right in front of a buffer's data, inside its headroom,
 * so header and payload leave as one contiguous datagram (one copy on loop,
 * one iovec on udp, one SGE on verbs). buf is 64-byte aligned and the header
 * 40 bytes long, so the header stays 8-byte aligned.
 */
static_assert(sizeof(struct urpc_pkthdr) % 8 == 0, "header alignment");

static inline struct urpc_pkthdr *urpc__mb_hdr(const struct urpc_msgbuf *mb)
{
	return (struct urpc_pkthdr *)(void *)(mb->buf - sizeof(struct urpc_pkthdr));
}

/*
 * The descriptor of server slot @sl's large stored response, in its
 * buffer: the header in the header room, the descriptor as the data (every
 * transport's datagram carries at least 24 bytes beside the header).
 */
static_assert(offsetof(struct urpc_large_pkt, d) == sizeof(struct urpc_pkthdr),
	      "a large packet is a header and its descriptor, as a buffer holds them");
static inline struct urpc_large_pkt *urpc__sslot_lpkt(const struct urpc_sslot *sl)
{
	return (struct urpc_large_pkt *)(void *)urpc__mb_hdr(&sl->h.priv_resp);
}

/* Set bit @num of a bitmap of session numbers (busy_map, sm_map). */
static inline void urpc__map_set(uint64_t *map, uint32_t num)
{
	map[num >> 6] |= 1ull << (num & 63);
}

/*
 * Every entry of rpc->sessions below hi_session is a session or, where the
 * number is free, &urpc__sess_none (session_table.c): a session that is
 * never written, that takes no datagram a peer sends (rx_word 0, as a
 * session that is not CONNECTED) and that no fast path of the client
 * takes, so that the datapath's lookups test no NULL (urpc__evloop_rx(),
 * the enqueue; callgrind on urpc-cpu-cost: 7 instructions per RPC).
 * Everything else reads the table through urpc__sess_at(), which gives
 * NULL for it.
 */
union urpc_sess_placeholder {
	struct urpc_session s;
	uint8_t room[offsetof(struct urpc_session, cli.slots) + sizeof(struct urpc_cslot)];
};
extern union urpc_sess_placeholder urpc__sess_placeholder;
#define urpc__sess_none (urpc__sess_placeholder.s)

/* A session's window: its slots, requests in flight at once. */
static inline unsigned urpc__sess_window(const struct urpc_session *s)
{
	return s->slot_mask + 1;
}

/* Client session @s works with @window of its slots (all FREE; at most those allocated). */
static inline void urpc__cli_set_window(struct urpc_session *s, unsigned window)
{
	s->slot_mask = window - 1;
	s->cli.all_free = window >= 64 ? UINT64_MAX : (1ull << window) - 1;
	s->cli.free_mask = s->cli.all_free;
}

/* The session in table entry @num (below hi_session, or a map's bit), or NULL. */
static inline struct urpc_session *urpc__sess_at(const struct urpc_rpc *rpc, uint32_t num)
{
	struct urpc_session *s = rpc->sessions[num];

	return s == &urpc__sess_none ? NULL : s;
}

/* The session numbered @num, or NULL. */
static inline struct urpc_session *urpc__rpc_session(struct urpc_rpc *rpc, int num)
{
	if (unlikely(num < 0 || (uint32_t)num >= rpc->hi_session))
		return NULL;
	return urpc__sess_at(rpc, (uint32_t)num);
}

/* Run a continuation: destroy and the event loop refuse to run inside one. */
static inline void urpc__run_cont(struct urpc_rpc *rpc, urpc_cont_fn cont, void *tag, int status,
				  struct urpc_msgbuf *resp)
{
	rpc->resp_view.buf = NULL; /* a view request comes here only with an error: no bytes */
	rpc->resp_view.data_size = 0;
	rpc->in_cb++;
	cont(rpc, tag, status, resp);
	rpc->in_cb--;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_ENGINE_H */
