/* SPDX-License-Identifier: MIT */
/*
 * urpc: a kernel-bypass RPC engine for datacenter networks.
 *
 * This is the one header an application includes. It declares only what the
 * library implements today; docs/API.md describes the whole planned API
 * (Nexus, Rpc, sessions, requests) and which parts have landed.
 *
 * Conventions used by every function below (docs/API.md states the whole
 * contract: buffers, sessions, threads, liveness):
 *  - A fallible call returns 0 or a negative errno value; urpc_strerror()
 *    turns it into text.
 *  - A NULL object or out-pointer is refused with -EINVAL (a call that
 *    returns no status returns 0, false or NULL instead); no call
 *    dereferences a NULL argument.
 *  - "Thread: any" means the function may be called from any thread; all
 *    other functions are owner-thread only (-EPERM from another thread).
 */
#ifndef URPC_URPC_H
#define URPC_URPC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(URPC_BUILDING_LIBRARY)
#define URPC_API __attribute__((visibility("default")))
#else
#define URPC_API
#endif

#define URPC_VERSION_MAJOR 0
#define URPC_VERSION_MINOR 1
#define URPC_VERSION_PATCH 0

/**
 * urpc_version() - The library's version as "MAJOR.MINOR.PATCH".
 *
 * @return a static string; never NULL.
 * Thread: any.
 */
URPC_API const char *urpc_version(void);

/**
 * urpc_strerror() - Describe a status returned by urpc.
 *
 * @param status 0 or a negative errno value returned by a urpc call or handed
 *               to a continuation.
 * @return a static string; never NULL. Unknown codes get a generic text.
 * Thread: any.
 */
URPC_API const char *urpc_strerror(int status);

/* Log levels, most severe first. */
enum urpc_log_level {
	URPC_LOG_ERR = 0,
	URPC_LOG_WARN = 1,
	URPC_LOG_INFO = 2,
	URPC_LOG_DBG = 3,
};

/**
 * urpc_log_level_str() - Name of a log level ("ERR", "WARN", ...).
 * Thread: any.
 */
URPC_API const char *urpc_log_level_str(enum urpc_log_level level);

/**
 * typedef urpc_log_fn - A log sink.
 *
 * @param level severity of the line.
 * @param line  one complete line without a trailing newline; valid only for
 *              the duration of the call.
 * @param arg   the pointer given to urpc_log_set_sink().
 *
 * Callback: may run on any thread that uses urpc, possibly concurrently; it
 * must not call back into urpc.
 */
typedef void (*urpc_log_fn)(enum urpc_log_level level, const char *line, void *arg);

/**
 * urpc_log_set_sink() - Route urpc's log lines to @fn instead of stderr.
 *
 * @param fn  the sink, or NULL to restore the default (stderr).
 * @param arg passed to every call of @fn.
 * Thread: any; set it before creating urpc objects, since lines being logged
 * concurrently may still go to the previous sink.
 */
URPC_API void urpc_log_set_sink(urpc_log_fn fn, void *arg);

/**
 * urpc_log_set_level() - Drop lines less severe than @level.
 *
 * The default is URPC_LOG_WARN (a healthy start prints nothing), or the
 * value of the URPC_LOG environment variable ("err", "warn", "info", "dbg")
 * when it is set; "info" adds the transport chosen and the hugepage
 * fall-back, once per process each. At URPC_LOG_DBG each line also names
 * its source (module, function, line). Debug lines exist only in a library
 * built with -DURPC_DEBUG=ON: elsewhere URPC_LOG_DBG prints what
 * URPC_LOG_INFO does, with the source locations, and URPC_LOG=dbg says so
 * once (the DBG call sites are compiled out, so they cost nothing on the
 * datapath).
 * Thread: any.
 */
URPC_API void urpc_log_set_level(enum urpc_log_level level);

/* The datagram transports. The value is chosen per Rpc at run time. */
enum urpc_transport_kind {
	URPC_TRANSPORT_DEFAULT = 0, /* verbs when an RDMA port is active, else udp */
	URPC_TRANSPORT_LOOP = 1,    /* in-process rings; tests and CPU-cost benchmarks */
	URPC_TRANSPORT_UDP = 2,	    /* kernel UDP sockets; any machine */
	URPC_TRANSPORT_VERBS = 3,   /* RDMA UD + RC through libibverbs */
	URPC_TRANSPORT_XDP = 4,	    /* AF_XDP on a named interface; speaks udp's wire format */
};

/**
 * urpc_transport_str() - Name of a transport kind ("loop", "udp", ...).
 * Thread: any.
 */
URPC_API const char *urpc_transport_str(enum urpc_transport_kind kind);

/**
 * urpc_transport_parse() - Parse a transport name as used by URPC_TRANSPORT.
 *
 * @param name "default", "loop", "udp", "verbs" or "xdp" (case-sensitive).
 * @param out  receives the kind on success.
 * @return 0, or -EINVAL for an unknown name (@out untouched).
 * Thread: any.
 */
URPC_API int urpc_transport_parse(const char *name, enum urpc_transport_kind *out);

/**
 * urpc_transport_resolve() - The transport an Rpc created with @kind would
 * use on this machine now: @kind itself, or for URPC_TRANSPORT_DEFAULT the
 * URPC_TRANSPORT environment variable when set, else verbs when an RDMA
 * port is active (URPC_DEVICE's, else the first), else udp.
 *
 * @param out receives the kind (never URPC_TRANSPORT_DEFAULT).
 * @return 0; -EINVAL (@out NULL, or URPC_TRANSPORT names no transport);
 *         -ENODEV (URPC_DEVICE names a device that cannot be used); each
 *         logged with its cause.
 * Thread: any.
 */
URPC_API int urpc_transport_resolve(enum urpc_transport_kind kind, enum urpc_transport_kind *out);

/**
 * struct urpc_msgbuf - A message buffer.
 *
 * @buf:      the message bytes; the application reads and writes
 *            buf[0 .. data_size).
 * @data_size: the message length; change it only through urpc_msgbuf_resize.
 * @max_data_size: the capacity fixed at allocation.
 *
 * The fields after these are private to the library: where the buffer came
 * from, its registration keys, the serial number of its allocation (a
 * stale copy of a freed buffer is refused by urpc_msgbuf_free()) and the
 * session it was last lent to (a lent buffer is refused with -EBUSY). Room
 * for the packet header lies in front of @buf and belongs to the library.
 *
 * Ownership: the application owns a buffer it allocated, except while it is
 * lent to the engine (from a successful enqueue until the matching
 * continuation runs, or for a response, for good). While it is lent, its
 * bytes and fields must not change (no write, resize or free).
 */
struct urpc_msgbuf {
	uint8_t *buf;
	size_t data_size;
	size_t max_data_size;
	/* private */
	void *priv_class;
	uint32_t priv_lkey;
	uint32_t priv_rkey;
	uint32_t priv_gen;
	uint32_t priv_sess;
};

/* ------------------------------------------------------------------------
 * Nexus: one per process. Owns the session-management endpoint (kernel UDP
 * at host:port) and the table of request handlers.
 * ------------------------------------------------------------------------ */

struct urpc_nexus;
struct urpc_rpc;
struct urpc_session;

/**
 * struct urpc_req_handle - A request as its handler sees it: what
 * urpc_req_data(), urpc_req_resp_msgbuf() and urpc_resp_enqueue() work on.
 *
 * Every field is private to the library: read them only through those
 * calls. The handle is defined here so that the calls a handler makes on
 * every request can be inline (they cost a handler a few instructions, not
 * a call each): urpc_req_data(), urpc_req_resp_msgbuf(),
 * urpc_msgbuf_resize() and the common case of urpc_resp_enqueue() below.
 */
struct urpc_req_handle {
	const uint8_t *priv_data; /* the request's bytes while its handler runs, else NULL */
	size_t priv_len;
	struct urpc_msgbuf priv_resp; /* the preallocated response buffer */
	/*
	 * While the handler runs and has not answered: the address of the
	 * owner thread's urpc_priv_thread_tag; once it answered with
	 * priv_resp from inside (inline): the handle itself; else NULL.
	 */
	const void *priv_answer;
	struct urpc_rpc *priv_rpc;
	struct urpc_session *priv_sess;
	uint8_t priv_req_type;
	/*
	 * The client's deadline: while the handler runs, the time it had left
	 * (microseconds, as the request carried it); once it returned
	 * unanswered, the deadline on the Rpc's clock; 0: none.
	 */
	uint32_t priv_budget;
};

/*
 * Private: one byte per thread, whose address names the thread for the
 * inline calls (urpc_resp_enqueue() answers inline only on the thread
 * whose handler runs). Defined by the library.
 */
URPC_API extern __thread char urpc_priv_thread_tag __attribute__((tls_model("initial-exec")));

struct urpc_nexus_opts {
	const char *host; /* IPv4 address to bind session management to; default "127.0.0.1" */
	uint16_t port;	  /* UDP port; 0 picks a free one (see urpc_nexus_port) */
};

/** urpc_nexus_opts_init() - Fill @o with the defaults (NULL: nothing). Thread: any. */
URPC_API void urpc_nexus_opts_init(struct urpc_nexus_opts *o);

/**
 * urpc_nexus_create() - Create the process's Nexus and start its
 * session-management thread.
 *
 * @param o   options, or NULL for the defaults.
 * @param out receives the Nexus.
 * @return 0, -EINVAL (bad host, @out NULL), -EADDRINUSE (port taken), -ENOMEM.
 * Thread: any. Ownership: the caller owns the Nexus until urpc_nexus_destroy().
 */
URPC_API int urpc_nexus_create(const struct urpc_nexus_opts *o, struct urpc_nexus **out);

/**
 * urpc_nexus_destroy() - Stop the session-management thread and free @nx.
 *
 * @return 0, -EINVAL (@nx NULL), or -EBUSY (nothing freed) while any Rpc of
 *         @nx still exists.
 * Thread: any, but not concurrently with other calls on @nx.
 */
URPC_API int urpc_nexus_destroy(struct urpc_nexus *nx);

/* Counters of a Nexus's session-management thread; new fields are appended. */
struct urpc_nexus_stats {
	uint64_t sm_rx;		  /* datagrams received on the SM socket */
	uint64_t sm_tx;		  /* SM packets sent */
	uint64_t drop_bad_pkt;	  /* malformed datagrams dropped */
	uint64_t drop_no_rpc;	  /* responses/RESET for an Rpc id that is not attached */
	uint64_t drop_queue_full; /* packets lost because an Rpc's SM queue was full */
	uint64_t replied_no_rpc;  /* requests for a missing Rpc answered by the SM thread */
	uint64_t heartbeats_tx;	  /* NX_PING and NX_PONG sent (one per peer process and interval) */
	uint64_t heartbeats_rx;	  /* ... and received */
	uint64_t cookies_tx;	  /* CONNECT_REQs without a valid cookie, answered with one */
	uint64_t drop_auth; /* SM packets that failed the peer's MAC (or had none): no effect */
};

/**
 * urpc_nexus_get_stats() - Copy the counters (each read atomically, the
 * set not as one snapshot). @return 0 or -EINVAL (a NULL argument).
 * Thread: any.
 */
URPC_API int urpc_nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st);

/**
 * urpc_nexus_port() - The UDP port session management is bound to (0 for a
 * NULL @nx). Thread: any.
 */
URPC_API uint16_t urpc_nexus_port(const struct urpc_nexus *nx);

/**
 * typedef urpc_req_handler_fn - A server's request handler.
 *
 * @param h   the request; read it with urpc_req_data(), answer with
 *            urpc_resp_enqueue(), now or later (a deferred response).
 * @param arg the pointer given at registration.
 *
 * Callback: runs on the owner thread of the Rpc that received the request,
 * inside its event loop, at most once per request. It must not block or run
 * the event loop; it may enqueue requests (nested RPCs) and responses.
 */
typedef void (*urpc_req_handler_fn)(struct urpc_req_handle *h, void *arg);

/**
 * urpc_nexus_register_handler() - Route requests of @req_type to @fn.
 *
 * @return 0; -EINVAL (@nx or @fn NULL); -EEXIST (@req_type already has a handler);
 *         -EBUSY (an Rpc was already created on @nx: register handlers first).
 * Thread: any, before the first urpc_rpc_create() on @nx.
 */
URPC_API int urpc_nexus_register_handler(struct urpc_nexus *nx, uint8_t req_type,
					 urpc_req_handler_fn fn, void *arg);

/* ------------------------------------------------------------------------
 * Rpc: one per thread, with its own transport endpoint and event loop.
 * ------------------------------------------------------------------------ */

/*
 * Session-management events reported to the Rpc's sm_handler. The last three
 * end the session: once the handler has returned from one of them (every
 * pending request having failed before it, with @status), the session
 * number is free, and urpc_session_connect() may hand it out again.
 */
enum urpc_sm_event {
	URPC_SM_CONNECTED = 1, /* the session is ready for requests */
	/*
	 * Status says why: -ETIMEDOUT, -ECONNREFUSED, -ENOENT (no such Rpc),
	 * -ENOSPC (too many sessions), -EADDRNOTAVAIL (address mismatch),
	 * -EPROTO (another transport), -ENOMEM (docs/API.md, "Status codes").
	 */
	URPC_SM_CONNECT_FAILED = 2,
	URPC_SM_DISCONNECTED = 3, /* a disconnect completed */
	/*
	 * The session ended without a disconnect; status says why: -EHOSTDOWN
	 * (no heartbeat from the peer process within peer_timeout_ms),
	 * -ESTALE (the peer process restarted) or -ECONNRESET (the peer's Rpc
	 * ended the session or is gone). Its pending requests get -ECONNRESET.
	 */
	URPC_SM_RESET = 4,
};

/** urpc_sm_event_str() - Name of an event ("connected", ...). Thread: any. */
URPC_API const char *urpc_sm_event_str(enum urpc_sm_event ev);

/**
 * typedef urpc_sm_handler_fn - Session-management event callback.
 *
 * Callback: runs on the Rpc's owner thread inside its event loop, once per
 * event; it may call urpc_session_* and urpc_req_enqueue, not the event loop.
 * After URPC_SM_CONNECT_FAILED, URPC_SM_DISCONNECTED or URPC_SM_RESET
 * returns, @session names nothing (or, after a later connect, another
 * session): forget the number.
 */
typedef void (*urpc_sm_handler_fn)(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev,
				   int status, void *arg);

/* Congestion controllers (urpc_rpc_opts.cc_algo, docs/CC.md). */
enum urpc_cc_algo {
	URPC_CC_DEFAULT = 0, /* URPC_CC_OFF for now (docs/CC.md says why) */
	URPC_CC_OFF = 1,     /* never paced */
	URPC_CC_SWIFT = 2,   /* delay target, additive increase, bounded decrease */
	URPC_CC_TIMELY = 3,  /* RTT gradient; for comparison: it paces jittery idle paths */
};
/** urpc_cc_algo_str() - The name of @a ("swift"), or "?". Thread: any. */
URPC_API const char *urpc_cc_algo_str(enum urpc_cc_algo a);

struct urpc_rpc_opts {
	enum urpc_transport_kind transport; /* default: URPC_TRANSPORT env, else auto */
	urpc_sm_handler_fn sm_handler;	    /* may be NULL */
	void *sm_arg;
	uint32_t rto_us;	     /* floor of the first retransmission timeout; default 5000 */
	uint32_t rto_max_us;	     /* cap of the RTO and its back-off; default 200000 */
	uint32_t ping_interval_ms;   /* Nexus heartbeat per peer process; default 100 */
	uint32_t peer_timeout_ms;    /* peer process failed after this silence; default 500 */
	uint32_t connect_timeout_ms; /* connect fails after this; default 2000 */
	/*
	 * Sessions this Rpc may hold, client and server together, 1 to 2^24;
	 * default sized to the host's memory (sessions of 1,280 B in 1/16 of
	 * it), at most URPC_RPC_DEFAULT_MAX_SESSIONS. Beyond it a connect gets
	 * -ENOSPC (urpc_session_connect() on this side; the client's
	 * URPC_SM_CONNECT_FAILED event when this Rpc is the server). Its
	 * tables take about 8.3 bytes of address space per possible session
	 * (8.7 MB at the default), resident only where sessions are.
	 */
	uint32_t max_sessions;
	/*
	 * Server sessions of this Rpc that clients at one IPv4 address may
	 * hold together; beyond it their connects get -ENOSPC (in the
	 * client's URPC_SM_CONNECT_FAILED event) and this Rpc logs which
	 * address and limit. Default: max_sessions / 8 (as urpc_rpc_opts_init
	 * sizes max_sessions). 0, or max_sessions and above: no limit but
	 * max_sessions (docs/SECURITY.md). Counted in 4096 buckets
	 * (16 KiB) by a secret hash of the address: addresses that share a
	 * bucket share its limit.
	 */
	uint32_t max_sessions_per_source;
	uint64_t seed;	    /* loop transport fault switches and tokens; 0: random */
	const char *device; /* verbs: RDMA device ("mlx5_0" or "rxe0:1"); NULL: URPC_DEVICE
					env, else the first active port */
	/*
	 * Idle blocking, in microseconds: once urpc_rpc_run_event_loop() has
	 * found no work for this long and the Rpc needs no polling (no deferred
	 * response pending, no one-sided operation in flight; requests waiting
	 * for their answers do not count: waiting is not working), the owner
	 * thread sleeps in poll() until a datagram, a session-management
	 * packet, the Rpc's next timer (a retransmission or deadline among
	 * them) or the end of the call, so an idle or waiting Rpc does not
	 * burn a core. The first request after a
	 * sleep pays the kernel's wake-up latency. Default 20 (short, so that
	 * more busy threads than cores still make progress: 2+2 KV threads on 2
	 * cores reached 0.45x the ops/s of 1+1 with it, 0.29x with 100). For
	 * 100 ms after an idle pass found that the thread had lost its core to
	 * another thread, the spin is at most 2 us (docs/ENGINE.md); 0: never sleep,
	 * busy-poll (what a zero-initialised struct gives). udp and verbs only:
	 * the loop transport cannot block and always busy-polls. An Rpc with it
	 * set holds one eventfd. urpc_rpc_run_event_loop_once() never blocks.
	 */
	uint32_t idle_block_us;
	/*
	 * verbs, when @device and URPC_DEVICE name none: prefer the active
	 * port nearest, in the PCI tree, to this PCI device (a GPU's address
	 * as CUDA or nvidia-smi print it, "00000000:3B:00.0"); default NULL.
	 * An address that does not exist here makes urpc_rpc_create() fail
	 * with -EINVAL.
	 */
	const char *near_pci;
	int numa_node; /* verbs: ... then a port on this NUMA node; default -1 (none) */
	/*
	 * verbs, without @near_pci: prefer the port nearest CUDA device number
	 * @cuda_device (its PCI address read through the CUDA driver, loaded at
	 * run time); default -1 (none). A device the driver does not have makes
	 * urpc_rpc_create() fail with -EINVAL.
	 */
	int cuda_device;
	/*
	 * A large message's one-sided READ by this Rpc that makes no progress
	 * for this long fails, whatever the request's own deadline: as a
	 * server, the client's continuation gets -EIO (the request could not
	 * be read; its handler never runs) if other large requests wait for
	 * the server's operations, else the READ is posted again while the
	 * session lives (a slow owner delays only itself; under contention a
	 * READ slower than 4 MiB/s after this time, at least 1 s, is cut);
	 * as a client, -ETIMEDOUT (the response could not be read). udp and
	 * verbs; the loop transport never times out. 0 (the default): derived from the session-management
	 * round trips this Rpc measures (its connects), smoothed as
	 * TCP's RTO (srtt + 4 rttvar): 16 RTOs, at least 1000 ms, at most 60 s;
	 * 1000 ms before the first sample. On udp, time the Rpc is not polled
	 * (a descheduled owner, a long handler) counts at most 50 ms per gap.
	 */
	uint32_t one_sided_timeout_ms;
	/* The application's pointer for this Rpc, returned by urpc_rpc_ctx(); default NULL. */
	void *ctx;
	/*
	 * Congestion control of this Rpc's client sessions (docs/CC.md): a
	 * rate per session that a delay-based controller moves on round-trip
	 * samples, and a pacer that holds a session to it once it is below
	 * the line rate. A session that never saw a round trip above its
	 * target is never paced and pays a test per request. 0 in each field
	 * (a zero-initialised struct, or urpc_rpc_opts_init()): the default.
	 * Out of range: urpc_rpc_create() fails with -EINVAL and logs the field.
	 */
	/* default: URPC_CC=off|swift|timely[:TARGET_US[:LINE_MBPS]] from the environment, else off */
	enum urpc_cc_algo cc_algo;
	uint32_t cc_target_us; /* delay target, 1 to 100000; default 100 */
	uint32_t cc_line_mbps; /* the line rate, 1 to 10^7 Mb/s; default 100000 */
	/*
	 * Requests a session carries at once (its slots and credits): a power
	 * of two from 1 to URPC_SESSION_WINDOW_MAX (64), default 8; anything
	 * else makes urpc_rpc_create() fail with -EINVAL. Agreed at connect:
	 * a client proposes its own, the server's bounds it (a session gets
	 * the smaller of the two), so a server caps what each client may
	 * have in flight. A session costs a client about 200 bytes per slot,
	 * a server 128. Requests beyond the window wait in the session's
	 * queue (URPC_SESSION_MAX_WAITING).
	 */
	uint32_t session_window;
	/*
	 * Registrations this Rpc keeps at once, 1 to 2^20; default (and 0)
	 * URPC_RPC_DEFAULT_MAX_REGISTRATIONS. One per distinct range of
	 * memory it registered: each view (urpc_msgbuf_register) and each
	 * exposure (urpc_mem_expose) in use holds one; unused ones are kept
	 * for reuse and dropped when room is needed. With every one in use,
	 * those calls return -EAGAIN until a message that holds a view
	 * completes or the application unregisters or revokes one.
	 */
	uint32_t max_registrations;
};
#define URPC_RPC_DEFAULT_MAX_REGISTRATIONS 1024u

/** urpc_rpc_opts_init() - Fill @o with the defaults (NULL: nothing). Thread: any. */
URPC_API void urpc_rpc_opts_init(struct urpc_rpc_opts *o);

/**
 * urpc_rpc_create() - Create an Rpc owned by the calling thread.
 *
 * @param nx     the process's Nexus.
 * @param rpc_id unique among the Rpcs of @nx; peers name it when connecting.
 * @param o      options, or NULL for the defaults.
 * @param out    receives the Rpc.
 * @return 0, -EEXIST (@rpc_id taken), -EINVAL (@nx or @out NULL, bad
 *         options), -ENOMEM, or the transport's error (logged with its cause).
 * Thread: any; the calling thread becomes the owner.
 */
URPC_API int urpc_rpc_create(struct urpc_nexus *nx, uint8_t rpc_id, const struct urpc_rpc_opts *o,
			     struct urpc_rpc **out);

/**
 * urpc_rpc_destroy() - Destroy an Rpc: resets every session (pending
 * continuations run once with -ECONNRESET, inside this call since the loop
 * will not run again), then frees everything.
 *
 * Ownership: buffers lent to pending requests come back to their
 * continuations, which may free them; buffers still allocated after that are
 * released with the Rpc and must not be used again.
 *
 * @return 0; -EINVAL (@rpc NULL); -EPERM (not the owner thread); -EBUSY
 *         (called from inside one of the Rpc's callbacks, or the application
 *         still holds message buffers that are not lent to a pending request:
 *         free them first; nothing is destroyed).
 */
URPC_API int urpc_rpc_destroy(struct urpc_rpc *rpc);

/**
 * urpc_rpc_run_event_loop() - Run the event loop for about @ms milliseconds.
 *
 * It busy-polls while there is work. With opts.idle_block_us set (the
 * default) and a transport that can block (udp, verbs), an Rpc that stays
 * idle that long sleeps in poll() instead of spinning, and wakes for
 * traffic, session management, its timers, or the end of @ms.
 *
 * Liveness belongs to the process: the Nexus's session-management thread
 * sends and answers the heartbeats (one per peer process), so sessions
 * survive an owner that does not run the loop for a while. Nothing else
 * moves without the loop: requests, responses, handlers, retransmissions,
 * deadlines and session events (a peer's failure among them) all happen
 * here (docs/API.md, "Liveness").
 * @return 0, -EINVAL (@rpc NULL), or -EPERM (not the owner, or called from a
 *         callback).
 */
URPC_API int urpc_rpc_run_event_loop(struct urpc_rpc *rpc, unsigned ms);

/**
 * urpc_rpc_run_event_loop_once() - One pass: receive, run handlers and
 * continuations, transmit, check timers.
 * @return 0, -EINVAL (@rpc NULL), or -EPERM (not the owner, or called from a
 *         callback).
 */
URPC_API int urpc_rpc_run_event_loop_once(struct urpc_rpc *rpc);

/** urpc_rpc_id() - The Rpc's id (0 for a NULL @rpc). Thread: any. */
URPC_API uint8_t urpc_rpc_id(const struct urpc_rpc *rpc);

/**
 * urpc_rpc_ctx() - The pointer given as opts.ctx at creation (NULL for a
 * NULL @rpc): a handler's per-Rpc state is urpc_rpc_ctx(urpc_req_rpc(h)).
 * Thread: any.
 */
URPC_API void *urpc_rpc_ctx(const struct urpc_rpc *rpc);

/*
 * Largest request or response, in bytes. Messages above
 * urpc_rpc_max_msg_size() are large: a descriptor travels in a datagram and
 * the receiver READs the payload from the sender's registered buffer (by
 * RDMA on verbs; emulated on udp and loop).
 */
#define URPC_MAX_MSG_SIZE (64u << 20)

/**
 * urpc_rpc_max_msg_size() - Largest request or response data size, in
 * bytes, that rides one datagram on this Rpc's transport; larger ones, up
 * to URPC_MAX_MSG_SIZE, move by one-sided READ. 0 for a NULL @rpc.
 * Thread: any.
 */
URPC_API size_t urpc_rpc_max_msg_size(const struct urpc_rpc *rpc);

/* Counters of one Rpc; every field always exists. */
struct urpc_rpc_stats {
	uint64_t pkts_tx;
	uint64_t pkts_rx;
	uint64_t reqs_sent;	   /* client: requests first transmitted */
	uint64_t resps_rx;	   /* client: responses accepted */
	uint64_t retransmits;	   /* client: requests sent again after a timeout */
	uint64_t reqs_handled;	   /* server: handler invocations */
	uint64_t dup_reqs;	   /* server: duplicates answered from the stored response */
	uint64_t dup_resps;	   /* client: responses for requests already completed */
	uint64_t drop_bad_hdr;	   /* bad magic/version/type/size */
	uint64_t drop_bad_session; /* unknown session or wrong token */
	uint64_t drop_stale;	   /* old request or response numbers */
	uint64_t unknown_req_type; /* requests answered with -ENOSYS */
	uint64_t sessions;	   /* sessions currently open */
	uint64_t sm_pkts_tx;
	uint64_t sm_pkts_rx;
	uint64_t resets;	  /* sessions reset (peer failure or explicit) */
	uint64_t idle_sleeps;	  /* run_event_loop() slept for want of work */
	uint64_t idle_wakeups;	  /* ... and was woken by traffic (else by a timer or its end) */
	uint64_t idle_sm_wakeups; /* ... of which by a session-management packet */
	uint64_t acks_sent; /* server: "read it" for large requests whose handler answers later */
	/*
	 * Server: large responses whose slot took a new request before the
	 * client had let go of them (verbs: its release notice had not come);
	 * kept untouched until it did, instead of the event loop waiting.
	 */
	uint64_t resps_retiring;
	/*
	 * Client: large requests answered before the server had let go of
	 * them; their continuation ran once it had (the buffer is the
	 * application's only when the server can no longer read it), instead
	 * of the event loop waiting.
	 */
	uint64_t reqs_retiring;
	uint64_t acks_rx;	   /* client: ... received */
	uint64_t drop_bad_comp;	   /* one-sided completions naming no operation in flight */
	uint64_t connects_refused; /* server: CONNECT_REQs refused (limit, memory, transport) */
	uint64_t resp_bufs;	   /* server: response buffers its slots hold now */
	uint64_t drop_no_buf;	   /* server: requests dropped for want of a response buffer */
	/*
	 * System calls of this thread's datapath (udp; 0 on loop and verbs):
	 * sendmmsg() calls, recvmmsg() calls and those of them that found
	 * nothing (a busy-polling Rpc makes one per idle pass). The idle
	 * sleep's ppoll() calls are idle_sleeps.
	 */
	uint64_t tp_sys_tx;
	uint64_t tp_sys_rx;
	uint64_t tp_sys_rx_empty;
	/*
	 * Peers' one-sided requests (READs of this Rpc's large messages) that
	 * were refused: from the session the grant is for, but outside its
	 * bytes or access, or after it was revoked...
	 */
	uint64_t os_refused;
	/*
	 * ... or dropped: not from the session a grant is for (unknown key,
	 * wrong session token or source address). udp and loop count them
	 * (verbs: the NIC refuses such requests itself, uncounted here).
	 */
	uint64_t os_dropped;
	/*
	 * Passes of run_event_loop() without work that lost the core to
	 * another thread (idle_block_us set); for 100 ms after one, the Rpc
	 * spins at most 2 us before it sleeps.
	 */
	uint64_t idle_lost_core;
	/*
	 * sched_yield() calls of run_event_loop() on a shared core: before it
	 * sleeps, the Rpc gives its core to another runnable thread (at most
	 * 16 times in a row; none for 100 ms once yields lately went to
	 * CPU-bound threads: two of over 3 ms close together).
	 */
	uint64_t idle_yields;
	/*
	 * Pieces of this Rpc's own one-sided operations done: large messages'
	 * READs and the users' urpc_rdma_* operations (udp: chunks
	 * acknowledged; verbs: chunks of up to 1 MiB completed; loop: whole
	 * operations). It moves while a transfer does: a watchdog that waits
	 * on a large transfer can judge progress by it instead of by a total.
	 */
	uint64_t os_progress;
	/*
	 * Server: large responses their client did not read within the
	 * one-sided time-out (plus their bytes at 1 MiB/s), revoked when a
	 * newer response of the same address needed the room in its share
	 * or the Rpc's pool needed it (without a per-source share: at once):
	 * their grant revoked, their
	 * memory given back (a READ after that fails; the request with
	 * -ECONNRESET).
	 */
	uint64_t grants_expired;
	/*
	 * Server: large responses refused (the client gets EIO) because the
	 * clients at its address held their share of unread ones (128 MiB).
	 */
	uint64_t grants_refused;
	/*
	 * Server: large requests not read yet (their client resends them)
	 * because the sessions at their address held their share of the
	 * one-sided operations (a quarter).
	 */
	uint64_t os_share_waits;
	/*
	 * Server: datagrams of a session that carried its token but did not
	 * come from the udp endpoint it named, before one that did (nothing
	 * is sent to an endpoint until it has proven itself so).
	 */
	uint64_t drop_unproven;
	/*
	 * Server: "no such session" answers sent to requests for sessions it
	 * does not have (rate-limited; udp). Client: sessions reset by one
	 * (it carried their token and their server's session number).
	 */
	uint64_t nosess_tx;
	uint64_t nosess_rx;
	/*
	 * Server: READs of large requests cut because they went slower than
	 * the minimum rate while another large request waited for an
	 * operation (the request fails with EIO), and READs that timed out
	 * without progress but were posted again: nobody waited and the
	 * session (its peer's Nexus) was alive.
	 */
	uint64_t os_cut;
	uint64_t os_reposted;
};

/**
 * urpc_rpc_get_stats() - Copy the counters.
 * @return 0, -EINVAL (a NULL argument) or -EPERM. Owner thread only: the
 *         counters are plain fields the datapath bumps without atomics; a
 *         monitoring thread asks the owner for a copy (through its own
 *         queue, or in a continuation).
 */
URPC_API int urpc_rpc_get_stats(struct urpc_rpc *rpc, struct urpc_rpc_stats *st);

/* ------------------------------------------------------------------------
 * Sessions: a client Rpc's connection to one remote Rpc. The server side
 * of a session is the library's: it is opened by the client's connect and
 * closed by the client's disconnect, its reset or its silence (there is no
 * server-side close yet).
 * ------------------------------------------------------------------------ */

/*
 * A session's window: the requests it carries at once (urpc_rpc_opts.
 * session_window, a power of two from 1 to URPC_SESSION_WINDOW_MAX; the
 * default URPC_SESSION_WINDOW_DEFAULT). Further ones wait in its queue, up
 * to URPC_SESSION_MAX_WAITING, after which urpc_req_enqueue() returns
 * -EAGAIN until a continuation has run (back-pressure; nothing is
 * allocated per request).
 */
#define URPC_SESSION_WINDOW_DEFAULT 8
#define URPC_SESSION_WINDOW_MAX 64
/* The largest default of urpc_rpc_opts.max_sessions (it is sized to memory). */
#define URPC_RPC_DEFAULT_MAX_SESSIONS (1u << 20)
#define URPC_SESSION_MAX_WAITING 64

/**
 * urpc_session_connect() - Start connecting to Rpc @remote_rpc_id of the
 * Nexus at @host_port ("10.0.0.1:31850"). The connect request leaves with
 * the Rpc's next event-loop pass, in one system call with the other
 * session-management packets of that pass (connecting many sessions costs
 * a few calls, not one each).
 *
 * @param session_out receives the session number.
 * @return 0: the sm_handler runs later, once, with URPC_SM_CONNECTED or
 *         URPC_SM_CONNECT_FAILED; requests may be enqueued at once and are
 *         sent when the session connects (or fail with its error).
 *         <0: -EINVAL (bad address, a NULL argument), -ENOSPC (max_sessions
 *         numbers in use: a number is free again once its session's last
 *         event, CONNECT_FAILED, DISCONNECTED or RESET, has returned),
 *         -ENOMEM (no memory for the session), -EPERM; no event follows.
 *         A server that refuses the session makes the event
 *         URPC_SM_CONNECT_FAILED with -ENOSPC (all of its max_sessions in
 *         use), -ENOMEM (its memory), -ENOENT (no such Rpc) or -EPROTO
 *         (another transport).
 */
URPC_API int urpc_session_connect(struct urpc_rpc *rpc, const char *host_port,
				  uint8_t remote_rpc_id, int *session_out);

/**
 * urpc_session_disconnect() - Close a client session. Requests still
 * pending fail with -ECONNRESET; the sm_handler then gets
 * URPC_SM_DISCONNECTED, after which the number is free. The disconnect
 * request leaves with the next event-loop pass (as connect's does).
 *
 * A session that failed (CONNECT_FAILED or RESET) needs no disconnect: the
 * library frees it once its event has returned. Called from inside that
 * event (or from a continuation its failure runs), disconnect does nothing
 * and returns 0; no DISCONNECTED follows. Called later, the number names no
 * session (-EINVAL), or a new one.
 *
 * @return 0, -EINVAL (@rpc NULL, no such session, not a client session, or
 *         one already disconnecting), -EPERM.
 */
URPC_API int urpc_session_disconnect(struct urpc_rpc *rpc, int session);

/* What urpc_session_get_stats() reports of one client session. */
struct urpc_session_stats {
	uint64_t cc_rate_bps;  /* the controller's rate (the line rate while free) */
	uint64_t cc_line_bps;  /* the line rate it may reach */
	uint64_t srtt_ns;      /* smoothed round trip (RFC 6298); 0: no sample yet */
	uint64_t cc_srtt_ns;   /* ... as the controller smooths its samples; 0: none */
	uint64_t cc_samples;   /* samples the controller took (a free session skips most) */
	uint64_t cc_decreases; /* times it lowered the rate (delay, or a timeout) */
	uint64_t cc_paced;     /* requests that waited for the pacer */
	bool cc_limited;       /* below the line rate: paced */
	/*
	 * the fair share its server echoed last (docs/CC.md), which caps
	 * cc_rate_bps; 0: none (the server's CC is off, or it has one client)
	 */
	uint64_t cc_share_bps;
};

/**
 * urpc_session_get_stats() - Copy client session @session's round-trip
 * estimate and congestion state.
 * @return 0, or -EINVAL (no such client session, @st NULL, not the owner).
 * Thread: the Rpc's owner.
 */
URPC_API int urpc_session_get_stats(struct urpc_rpc *rpc, int session,
				    struct urpc_session_stats *st);

/**
 * urpc_session_is_connected() - True when @session is ready for requests;
 * false for a NULL @rpc or from another thread.
 */
URPC_API bool urpc_session_is_connected(struct urpc_rpc *rpc, int session);

/* ------------------------------------------------------------------------
 * Message buffers.
 * ------------------------------------------------------------------------ */

/**
 * urpc_msgbuf_alloc() - Allocate a buffer of @size data bytes (capacity at
 * least @size, and at least 1) from the Rpc's registered memory. @size 0
 * gives a 0-byte message (an empty request) ready to send.
 * @return 0, -EINVAL (a NULL argument, @size above URPC_MAX_MSG_SIZE),
 *         -ENOMEM, -EPERM.
 * Ownership: the caller owns @mb until urpc_msgbuf_free().
 */
URPC_API int urpc_msgbuf_alloc(struct urpc_rpc *rpc, size_t size, struct urpc_msgbuf *mb);

/**
 * urpc_msgbuf_resize() - Set the data size within the capacity.
 * @return 0, or -EINVAL when @mb is NULL or @size > max_data_size. Thread: the
 *         buffer's owner. Not while the buffer is lent (not checked: the
 *         datapath resizes a response per request). Inline.
 */
static inline int urpc_msgbuf_resize(struct urpc_msgbuf *mb, size_t size)
{
	if (!mb || size > mb->max_data_size)
		return -EINVAL;
	mb->data_size = size;
	return 0;
}

/**
 * urpc_msgbuf_free() - Give a buffer back; @mb is zeroed.
 * @return 0; -EBUSY (lent to the engine: a request or response buffer of a
 *         request whose continuation has not run, or a server slot's
 *         preallocated response buffer; nothing changes); -EINVAL (NULL
 *         arguments, a view from urpc_msgbuf_register(): use
 *         urpc_msgbuf_unregister(); or not a buffer this Rpc has out now: a
 *         zeroed struct, a double free, a stale copy of a freed buffer or of
 *         a response buffer handed to urpc_resp_enqueue(); nothing is
 *         touched); -EPERM.
 *         The -EBUSY check knows the struct given to urpc_req_enqueue() and
 *         copies made after it; a copy made before the enqueue is not
 *         recognised as lent.
 */
URPC_API int urpc_msgbuf_free(struct urpc_rpc *rpc, struct urpc_msgbuf *mb);

/* urpc_msgbuf_register() flags. */
#define URPC_MEM_PEER_READS 0x1u /* the peer reads it: a request or response payload */

/**
 * urpc_msgbuf_register() - Use the application's own memory [@addr, @addr +
 * @len) as a message buffer (a large existing array, say), without a copy.
 *
 * The memory is registered through the Rpc's registration cache (another
 * view of memory a cached registration covers with the access needed is a
 * hit: no new registration) for exactly these bytes, for local access only.
 * With URPC_MEM_PEER_READS the library may grant a peer READ of a view's
 * bytes while they travel as a message to that peer's session (and only
 * then); without it, none (a response buffer the library reads into). A
 * view has no header room, so it always travels
 * as a large message, whatever its size: the peer READs it.
 *
 * GPU memory (a CUDA device pointer, detected through the driver loaded at
 * run time) is registered through dma-buf where the transport and the
 * driver can (verbs: the NIC reads and writes the GPU directly); otherwise
 * through a pinned host copy that the library fills from the GPU at enqueue
 * and copies back to the GPU before the continuation runs (logged once).
 * GPU views are not cached: each one registers anew.
 *
 * @param mb receives the view: buf = @addr, data_size = max_data_size = @len.
 * @return 0, -EINVAL (NULL, len 0, len above URPC_MAX_MSG_SIZE, unknown flags),
 *         -EAGAIN (all of opts.max_registrations in use), -ENOMEM, the
 *         transport's error (logged), -EPERM.
 * Ownership: the memory stays the application's; while a view is lent to the
 * engine (a request until its continuation; a response handed to
 * urpc_resp_enqueue() until the library lets go of it: the client's next
 * request on that slot, or the session's end) its bytes must not change.
 */
URPC_API int urpc_msgbuf_register(struct urpc_rpc *rpc, void *addr, size_t len, unsigned flags,
				  struct urpc_msgbuf *mb);

/**
 * urpc_msgbuf_unregister() - Drop a view. Its registration stays cached for
 * the next view of the same memory, until the cache needs the room or
 * urpc_mem_forget() is called. @mb is zeroed.
 * @return 0, -EBUSY (lent to a request whose continuation has not run;
 *         nothing changes), -EINVAL (NULL, not a view), -EPERM. A view has
 *         no serial number: unregistering a stale copy of a dropped view is
 *         not detected.
 */
URPC_API int urpc_msgbuf_unregister(struct urpc_rpc *rpc, struct urpc_msgbuf *mb);

/**
 * urpc_mem_forget() - The application is about to free or unmap [@addr,
 * @addr + @len): deregister cached registrations that overlap it (those
 * still in use, at their last release).
 * @return 0, -EINVAL (NULL @rpc or @addr, @len 0), -EPERM.
 */
URPC_API int urpc_mem_forget(struct urpc_rpc *rpc, void *addr, size_t len);

/* ------------------------------------------------------------------------
 * Requests (client) and responses (server).
 * ------------------------------------------------------------------------ */

/**
 * typedef urpc_cont_fn - A request's continuation.
 *
 * @param status 0 with the response in @resp (resp->data_size set), or
 *               -ECONNRESET (session reset or disconnected), -ETIMEDOUT
 *               (deadline passed), -ENOSYS (no handler for the request type on
 *               the server), -EMSGSIZE (response larger than @resp, or larger
 *               than the buffer the server's handler answered with), -EIO
 *               (the handler answered with a buffer the server could not
 *               send), or for a large message -EIO/-EACCES (the payload could
 *               not be read, see opts.one_sided_timeout_ms), -ETIMEDOUT (the
 *               response could not be read: a READ without progress for
 *               that time-out is posted again while the session lives,
 *               docs/API.md), -ENOMEM (the server
 *               had no buffer for a large request), or for GPU memory -EIO (a
 *               copy to or from the GPU failed, on either side).
 * @param resp   the response buffer given to urpc_req_enqueue(), or for
 *               urpc_req_enqueue_view() a view of the response's bytes,
 *               valid only while the continuation runs.
 *
 * Callback: runs exactly once, on the owner thread inside the event loop (or
 * inside urpc_rpc_destroy()). From then on the request and response buffers
 * belong to the application again; it may free or reuse them here.
 */
typedef void (*urpc_cont_fn)(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/**
 * urpc_req_enqueue() - Send a request on a session.
 *
 * @param req  the request (data_size bytes, up to URPC_MAX_MSG_SIZE; above
 *             urpc_rpc_max_msg_size() the server READs it from this buffer,
 *             which must come from urpc_msgbuf_alloc()); lent to the engine
 *             until the continuation runs.
 * @param resp where the response goes (capacity max_data_size); lent likewise.
 * @param timeout_ms deadline for the whole request, 0 for none; past it the
 *             continuation runs with -ETIMEDOUT. A large request's buffer
 *             may still be read by the server then: its continuation runs
 *             (with -ETIMEDOUT) once the server says it has read it, or
 *             the session fails.
 * @return 0: @cont runs exactly once, later. <0 (it never runs): -EINVAL
 *         (@rpc NULL, bad session, NULL buffers or @cont), -EMSGSIZE
 *         (request above URPC_MAX_MSG_SIZE), -ECONNRESET (session failed or
 *         disconnected), -EAGAIN (the session's window of requests in
 *         flight and URPC_SESSION_MAX_WAITING waiting on this session:
 *         back-pressure; run the event loop and retry), -EPERM.
 * Inline: it calls the library's urpc_priv_req_enqueue() (no deadline) or
 * urpc_priv_req_enqueue_full(); applications call only this one.
 */
#define URPC_PRIV_RESP_VIEW 0x100u /* private: urpc_req_enqueue_view() */
URPC_API int urpc_priv_req_enqueue_full(struct urpc_rpc *rpc, int session, unsigned type_flags,
					struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
					urpc_cont_fn cont, void *tag, uint32_t timeout_ms);
URPC_API int urpc_priv_req_enqueue(struct urpc_rpc *rpc, struct urpc_msgbuf *req,
				   struct urpc_msgbuf *resp, urpc_cont_fn cont, void *tag,
				   uint64_t session_type);
URPC_API int urpc_priv_req_enqueue_view(struct urpc_rpc *rpc, struct urpc_msgbuf *req,
					urpc_cont_fn cont, void *tag, uint64_t session_type);

static inline int urpc_req_enqueue(struct urpc_rpc *rpc, int session, uint8_t req_type,
				   struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
				   urpc_cont_fn cont, void *tag, uint32_t timeout_ms)
{
	/*
	 * Inline, the argument checks a caller's constants settle (a deadline,
	 * NULL buffers or continuation: the full path, which says what is
	 * wrong), and a call of six arguments, all in registers, for the
	 * common case. The library checks everything else.
	 */
	if (timeout_ms || !req || !resp || !cont)
		return urpc_priv_req_enqueue_full(rpc, session, req_type, req, resp, cont, tag,
						  timeout_ms);
	return urpc_priv_req_enqueue(rpc, req, resp, cont, tag,
				     (uint32_t)session | (uint64_t)req_type << 32);
}

/**
 * urpc_req_enqueue_view() - Send a request whose continuation reads the
 * response where it arrived (in the receive ring), without a response
 * buffer: urpc_req_enqueue() without the copy into one.
 *
 * @param req, @param timeout_ms, the return value and the errors: as
 *             urpc_req_enqueue() (no @resp to check).
 * @param cont runs exactly once, as for urpc_req_enqueue(), and gets as
 *             @resp a view, not a buffer: with status 0, resp->buf points
 *             at the response's resp->data_size bytes in host memory (the
 *             receive ring; never GPU memory: copy what a GPU needs) and
 *             resp->max_data_size is 0; with an error, buf is NULL and
 *             data_size 0. Like urpc_req_data() in a handler, the view is
 *             valid only until @cont returns: copy what is needed later.
 *             It is read-only: write nothing through it and pass it to no
 *             call (the library refuses it with -EINVAL where it can tell:
 *             urpc_msgbuf_free(), urpc_msgbuf_resize() above 0 bytes,
 *             urpc_resp_enqueue(), urpc_req_enqueue() with a deadline).
 * A response above urpc_rpc_max_msg_size() (a large response, which the
 * client READs into a buffer) cannot be viewed: its continuation gets
 * -EMSGSIZE and the server frees it as for any client that refused it.
 * Inline: it calls the library's urpc_priv_req_enqueue_view() (no
 * deadline) or urpc_priv_req_enqueue_full().
 */
static inline int urpc_req_enqueue_view(struct urpc_rpc *rpc, int session, uint8_t req_type,
					struct urpc_msgbuf *req, urpc_cont_fn cont, void *tag,
					uint32_t timeout_ms)
{
	if (timeout_ms || !req || !cont)
		return urpc_priv_req_enqueue_full(rpc, session, req_type | URPC_PRIV_RESP_VIEW, req,
						  NULL, cont, tag, timeout_ms);
	return urpc_priv_req_enqueue_view(rpc, req, cont, tag,
					  (uint32_t)session | (uint64_t)req_type << 32);
}

/**
 * urpc_req_data() - The request's bytes. Valid only inside the handler (they
 * point into the receive ring): copy what a deferred response needs. A NULL
 * @h gives NULL and *@len 0; @len may be NULL. Inline.
 */
static inline const uint8_t *urpc_req_data(const struct urpc_req_handle *h, size_t *len)
{
	if (!h) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = h->priv_len;
	return h->priv_data;
}

/**
 * urpc_req_copy_data() - Copy the request's bytes to @dst, which may be GPU
 * memory (detected; copied by the CUDA driver), inside the handler.
 * @return the number of bytes copied (the request's length), -EMSGSIZE
 *         (@len smaller than the request), -EINVAL (@h or @dst NULL, or
 *         outside the handler), -EIO (the GPU copy failed), -EPERM.
 */
URPC_API int urpc_req_copy_data(const struct urpc_req_handle *h, void *dst, size_t len);

/** urpc_req_type() - The request's type (0 for a NULL @h). */
URPC_API uint8_t urpc_req_type(const struct urpc_req_handle *h);

/* urpc_req_deadline_ms() of a request whose client set no deadline. */
#define URPC_NO_DEADLINE (-1)

/**
 * urpc_req_deadline_ms() - The time the client of request @h has left
 * before its deadline (urpc_req_enqueue()'s @timeout_ms, carried by the
 * request as the time left when it was sent, in microseconds, up to about
 * 71 minutes; a deferred request keeps at most 30 minutes of it).
 *
 * @return milliseconds left, rounded up (at least 1 while time is left); 0
 *         once the deadline has passed (the client has given up or is
 *         about to: its answer will be dropped); URPC_NO_DEADLINE (-1)
 *         when the client set none; -EINVAL (@h NULL, or answered
 *         already), -EPERM (not the owner thread).
 * Thread: the owner of @h's Rpc, inside the handler or while the answer is
 * deferred. The time is counted from when the request arrived (a large
 * request: its descriptor), one-way delay not included.
 */
URPC_API int64_t urpc_req_deadline_ms(const struct urpc_req_handle *h);

/**
 * urpc_req_enqueue_nested() - urpc_req_enqueue() on behalf of request
 * @parent, whose handler runs or has deferred its answer: the request
 * inherits the client's deadline. It is sent on @session of @parent's Rpc
 * (a client session of the same Rpc, to a backend), and its deadline is the
 * earlier of the client's (urpc_req_deadline_ms()) and @timeout_ms (0:
 * the client's alone; neither: none). Past it the continuation runs with
 * -ETIMEDOUT, however long @timeout_ms, and the backend's handler sees the
 * same deadline in turn.
 *
 * @return 0: @cont runs exactly once, later. <0 (it never runs): as
 *         urpc_req_enqueue(), and -ETIMEDOUT when the client's deadline
 *         has passed already (nothing is sent), -EINVAL when @parent is
 *         NULL or answered already.
 * Thread: the owner of @parent's Rpc. Ownership: as urpc_req_enqueue().
 */
URPC_API int urpc_req_enqueue_nested(struct urpc_req_handle *parent, int session, uint8_t req_type,
				     struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
				     urpc_cont_fn cont, void *tag, uint32_t timeout_ms);

/**
 * urpc_req_rpc() - The Rpc that received the request (for nested requests;
 * NULL for a NULL @h).
 */
URPC_API struct urpc_rpc *urpc_req_rpc(const struct urpc_req_handle *h);

/**
 * urpc_req_resp_msgbuf() - The request's preallocated response buffer, with
 * capacity (max_data_size) urpc_rpc_max_msg_size(): what one datagram
 * carries. Fill it, resize it, and pass it to urpc_resp_enqueue(). Valid
 * until then; it stays the library's (urpc_msgbuf_free() refuses it with
 * -EBUSY). A longer answer needs a buffer of the handler's own. NULL for a
 * NULL @h. Inline.
 */
static inline struct urpc_msgbuf *urpc_req_resp_msgbuf(struct urpc_req_handle *h)
{
	return h ? &h->priv_resp : NULL;
}

/**
 * urpc_resp_enqueue() - Answer a request, inside its handler or later.
 *
 * @param resp the buffer from urpc_req_resp_msgbuf(@h), or for a response
 *             above urpc_rpc_max_msg_size() (up to URPC_MAX_MSG_SIZE) one
 *             from urpc_msgbuf_alloc(): the library owns it from this call
 *             on (the caller's struct is zeroed) and frees it once the
 *             client has read it.
 * @return 0 (the handle is then invalid). If the session was reset
 *         meanwhile, the response is dropped silently and 0 returned. A
 *         response in GPU memory whose copy out of the GPU fails is not
 *         sent: the client's continuation gets -EIO, the buffer is taken
 *         all the same, and 0 returned (the failure is logged).
 *         A response the library cannot send is never left pending: the
 *         request is answered with an error instead, the handle is invalid
 *         and @resp stays the caller's (not zeroed): -EMSGSIZE (data_size
 *         above @resp's capacity, or above URPC_MAX_MSG_SIZE; the client
 *         gets -EMSGSIZE), -EINVAL (@resp NULL, or neither kind of buffer:
 *         not one this Rpc has allocated and not freed, lent to a request, a
 *         view without URPC_MEM_PEER_READS; the client gets -EIO).
 *         Refused without answering: -EINVAL (@h NULL, or its request was
 *         answered already), -EPERM.
 */
URPC_API int urpc_priv_resp_enqueue(struct urpc_req_handle *h, struct urpc_msgbuf *resp);

static inline int urpc_resp_enqueue(struct urpc_req_handle *h, struct urpc_msgbuf *resp)
{
	/*
	 * Inline, the common case: the handler, on its own thread, answers
	 * with the preallocated buffer within its capacity. The answer is
	 * noted in the handle and sent as soon as the handler returns.
	 * Everything else (a deferred answer, another buffer, every misuse)
	 * is the library's urpc_priv_resp_enqueue(), which says what is wrong.
	 */
	if (h && resp == &h->priv_resp && h->priv_answer == &urpc_priv_thread_tag &&
	    resp->data_size <= resp->max_data_size) {
		h->priv_answer = h;
		return 0;
	}
	return urpc_priv_resp_enqueue(h, resp);
}

/* ------------------------------------------------------------------------
 * Remote memory (issue 16): expose a buffer to a session's peer, hand it
 * a struct urpc_rbuf inside any message, and let the peer READ or WRITE
 * it directly (no handler, no copy on the owner's side), one operation at
 * a time or in batches.
 * ------------------------------------------------------------------------ */

/* urpc_mem_expose() access (URPC_MEM_PEER_READS is defined above). */
#define URPC_MEM_PEER_WRITES 0x2u /* the peer writes it (urpc_rdma_write) */

#define URPC_RBUF_VERSION 1

/**
 * struct urpc_rbuf - A remote buffer: what the owner of exposed memory hands
 * a peer. Plain bytes, no pointers, every field little-endian (le16toh()
 * etc. to read them on a big-endian host); copy it into any request or
 * response as it is. Its size is fixed (56 bytes) and written in @size.
 *
 * @version:       URPC_RBUF_VERSION
 * @size:          sizeof(struct urpc_rbuf)
 * @access:        URPC_MEM_PEER_READS and/or URPC_MEM_PEER_WRITES, as exposed
 * @owner_rpc:     the owner's Rpc id
 * @owner_session: the owner's number of the session it was exposed on
 * @owner_id:      a 64-bit digest of that session's secret token (a keyed
 *                 function: it does not reveal the token), which both ends
 *                 of the session can compute: it names the session's two
 *                 endpoints as the engine knows them
 * @addr:          the owner's address of the first byte
 * @len:           bytes
 * @key:           the transport's key of the owner's grant
 * @gen:           the exposure's generation (never 0, never reused by the Rpc);
 *                 for the application: the owner checks the key, not this
 */
struct urpc_rbuf {
	uint16_t version;
	uint16_t size;
	uint8_t access;
	uint8_t owner_rpc;
	uint16_t reserved0;
	uint32_t owner_session;
	uint32_t reserved1;
	uint64_t owner_id;
	uint64_t addr;
	uint64_t len;
	uint64_t key;
	uint64_t gen;
};

/**
 * urpc_mem_expose() - Let the peer of @session READ and/or WRITE exactly
 * [@addr, @addr + @len) of this process's host or GPU memory, until
 * urpc_mem_revoke(), the session's end, or urpc_rpc_destroy().
 *
 * GPU memory (a CUDA device pointer, detected through the driver as for
 * urpc_msgbuf_register()) gets a registration of its own: on verbs a
 * dma-buf one (the NIC reads and writes the GPU), and where the driver,
 * the device or the NIC cannot, -ENOTSUP with the reason logged; on loop
 * and udp the owner's one-sided service reaches it with the driver's
 * copies (a copy that fails ends the peer's operation with an error).
 *
 * An exposure is for one session: the memory is registered through the
 * Rpc's registration cache and granted (the transport's exact grant: bytes,
 * access, peer) to that session's peer only. To expose the same memory to
 * several peers, expose it once per session. A request arriving on another
 * session, or from anyone else, is refused by the transport.
 *
 * @param session a connected session of @rpc (client or server side; a
 *                handler finds its own with urpc_req_session()).
 * @param access  URPC_MEM_PEER_READS, URPC_MEM_PEER_WRITES, or both.
 * @param rbuf    receives the description to hand the peer.
 * @return 0; -EINVAL (NULL, @len 0 or above URPC_MAX_MSG_SIZE, no or
 *         unknown access bits, no such session); -ENOTCONN (the session is
 *         not connected); -ENOTSUP (GPU memory on verbs without dma-buf);
 *         -ENOMEM, -EAGAIN (all of opts.max_registrations in use: revoke
 *         or unregister some, or raise it), the transport's error; -EPERM. Nothing is held on failure.
 * Cold: registration and a grant. When the session ends, the peer can no
 *         longer use the rbuf (the transport revokes its grants); the
 *         registration is held until urpc_mem_revoke() or urpc_rpc_destroy().
 */
URPC_API int urpc_mem_expose(struct urpc_rpc *rpc, int session, void *addr, size_t len,
			     unsigned access, struct urpc_rbuf *rbuf);

/**
 * urpc_mem_revoke() - End an exposure made by urpc_mem_expose() on this Rpc.
 * When it returns, no new operation against it succeeds on the peer (its
 * key is refused; a key never becomes valid again, and exposing the same
 * memory anew gives a new key and generation); the peer's operations being
 * served finish first. A slice of it (urpc_rbuf_slice()) is revoked with it.
 * @return 0; -EINVAL (NULL, or not a live exposure of this Rpc: a slice, a
 *         copy already revoked, another Rpc's); -EPERM.
 */
URPC_API int urpc_mem_revoke(struct urpc_rpc *rpc, const struct urpc_rbuf *rbuf);

/**
 * urpc_rbuf_slice() - Narrow @rbuf to [@off, @off + @len) of it in @out
 * (which may be @rbuf), without asking the owner. The key stays the
 * exposure's: a slice narrows what its holder names, the owner's grant
 * stays what the transport enforces.
 * @return 0; -EINVAL (NULL, a malformed rbuf, @len 0, or the range not
 *         inside @rbuf); @out is untouched on failure.
 */
URPC_API int urpc_rbuf_slice(const struct urpc_rbuf *rbuf, uint64_t off, uint64_t len,
			     struct urpc_rbuf *out);

/**
 * typedef urpc_rdma_cont_fn - The continuation of urpc_rdma_read(),
 * urpc_rdma_write() or urpc_rdma_submit(); runs exactly once, on the Rpc's
 * thread, from its event loop (or from urpc_rpc_destroy()), never inside
 * the call that started it, and only once the transport has let go of
 * every local buffer of the operations (they are the application's again).
 * @status: 0 (done: a READ's bytes are in the local buffer, a WRITE's are
 *          in the owner's memory); -EACCES (the owner refused: revoked,
 *          a key it never granted this session, out of its bounds, access
 *          not granted); -ETIMEDOUT (the deadline passed); -ECONNRESET
 *          (the session or the peer went away, or the owner could not
 *          copy its GPU memory); -EIO (the staging copy of a GPU view as
 *          the local buffer failed). For a batch: the first real
 *          failure (a connection's end that follows an -EACCES is never
 *          what is reported; an -EACCES reported after a connection's end
 *          is), and after a failure the local bytes of the batch's other
 *          READs are unspecified.
 */
typedef void (*urpc_rdma_cont_fn)(struct urpc_rpc *rpc, void *tag, int status);

/**
 * urpc_rdma_read() - Copy @len bytes at @remote_off of the peer's @rbuf
 * into @local at @local_off, one-sided (no handler runs at the owner).
 * A batch of one (urpc_rdma_submit()).
 *
 * @param session the session @rbuf was exposed on, seen from this side:
 *                the rbuf's owner must be this session's peer.
 * @param local   a message buffer of this Rpc (urpc_msgbuf_alloc()) or a
 *                view (urpc_msgbuf_register(): host or GPU memory; a GPU
 *                view without dma-buf is staged through its pinned host
 *                copy, and a copy that fails ends the operation with
 *                -EIO); [@local_off,
 *                @local_off + @len) must lie within its max_data_size. It
 *                belongs to the library until the continuation runs
 *                (urpc_msgbuf_free() and _unregister() return -EBUSY).
 * @param timeout_ms the deadline, from the call: once it passes the
 *                operation fails with -ETIMEDOUT (the continuation runs as
 *                soon as the transport has let go of @local: at once on
 *                loop and udp, which cancel it; on verbs once the queue
 *                pair it is on was flushed, see docs/API.md). 0: no
 *                deadline of its own; it fails with -ETIMEDOUT once it has
 *                made no progress for the Rpc's one-sided timeout
 *                (urpc_rpc_opts.one_sided_timeout_ms, else derived from
 *                session-management round trips, at least 1 s; time spent
 *                waiting behind other operations for the window does not
 *                count). On udp and verbs each piece of it that the
 *                transport moved (a datagram, a work request) is progress:
 *                a large operation lives as long as it moves.
 * @return 0 (@cont will run exactly once); -EINVAL (NULL, @len 0, a range
 *         outside @local or @rbuf, a malformed rbuf: version, size,
 *         access, an rbuf whose owner is not this session's peer, no such
 *         session; nothing happens); -ENOTCONN (the session is not
 *         connected); -EAGAIN (the Rpc
 *         has URPC_RDMA_MAX_OPS operations live: run the event loop and try
 *         again); -ENOMEM; -EPERM.
 */
URPC_API int urpc_rdma_read(struct urpc_rpc *rpc, int session, struct urpc_msgbuf *local,
			    size_t local_off, const struct urpc_rbuf *rbuf, uint64_t remote_off,
			    size_t len, urpc_rdma_cont_fn cont, void *tag, uint32_t timeout_ms);

/**
 * urpc_rdma_write() - Copy @len bytes of @local at @local_off to @remote_off
 * of the peer's @rbuf, one-sided. As urpc_rdma_read() otherwise.
 */
URPC_API int urpc_rdma_write(struct urpc_rpc *rpc, int session, struct urpc_msgbuf *local,
			     size_t local_off, const struct urpc_rbuf *rbuf, uint64_t remote_off,
			     size_t len, urpc_rdma_cont_fn cont, void *tag, uint32_t timeout_ms);

/* struct urpc_rdma_op.opcode */
#define URPC_RDMA_READ 1u
#define URPC_RDMA_WRITE 2u

/*
 * The most operations of users live (queued or in the transport) per Rpc,
 * batches together; also the largest batch.
 */
#define URPC_RDMA_MAX_OPS 65536u

/**
 * struct urpc_rdma_op - One operation of a batch (urpc_rdma_submit()):
 * what urpc_rdma_read() / urpc_rdma_write() take, as fields.
 *
 * @opcode:     URPC_RDMA_READ (the peer's bytes into @local) or
 *              URPC_RDMA_WRITE (@local's bytes to the peer)
 * @local:      a message buffer of this Rpc or a view (host or GPU); several
 *              operations may name the same one
 * @local_off:  where in @local's data
 * @rbuf:       the peer's remote buffer (a slice of it is fine)
 * @remote_off: where in @rbuf
 * @len:        bytes, at least 1
 */
struct urpc_rdma_op {
	unsigned opcode;
	struct urpc_msgbuf *local;
	size_t local_off;
	const struct urpc_rbuf *rbuf;
	uint64_t remote_off;
	size_t len;
};

/**
 * urpc_rdma_submit() - Run @n one-sided operations on @session as one
 * batch, with one deadline and one continuation.
 *
 * The operations go out in order, as many at once as the transport takes
 * (the rest wait in the library and go out as earlier ones complete: a
 * batch of thousands needs no retry loop); they may complete in any order.
 * @cont runs once: with 0 when every operation has succeeded, or with the
 * first real failure (see urpc_rdma_cont_fn): after a failure or the
 * deadline, the operations not yet posted are dropped, and @cont runs once
 * every posted one has let go of its buffers. Every local buffer belongs to
 * the library until then. A batch costs one continuation however many
 * operations it has.
 *
 * @param ops   @n operations, read during the call only (the rbufs they
 *              point at too). Every one is checked before anything is
 *              queued: one bad operation refuses the whole batch.
 * @param n     1 to URPC_RDMA_MAX_OPS.
 * @param timeout_ms as urpc_rdma_read(), for the batch as a whole; with 0
 *              any operation's completion, or a piece of a posted one
 *              moving, counts as progress.
 * @return 0 (@cont will run exactly once); -EINVAL (NULL @ops or @cont, @n
 *         0 or above URPC_RDMA_MAX_OPS, an @opcode other than the two, or
 *         any operation that urpc_rdma_read() would refuse with -EINVAL;
 *         nothing happens); -ENOTCONN; -EAGAIN (the
 *         Rpc would have more than URPC_RDMA_MAX_OPS operations live: run
 *         the event loop and try again); -ENOMEM; -EPERM.
 * Thread: the Rpc's owner. Callback: @cont, from the event loop.
 */
URPC_API int urpc_rdma_submit(struct urpc_rpc *rpc, int session, const struct urpc_rdma_op *ops,
			      size_t n, uint32_t timeout_ms, urpc_rdma_cont_fn cont, void *tag);

/**
 * urpc_req_session() - The (server) session number a request came on, for
 * urpc_mem_expose() inside a handler. -1 for a NULL @h.
 */
URPC_API int urpc_req_session(const struct urpc_req_handle *h);

#ifdef __cplusplus
}
#endif

#endif /* URPC_URPC_H */
