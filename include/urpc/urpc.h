/* SPDX-License-Identifier: MIT */
/*
 * urpc: a kernel-bypass RPC engine for datacenter networks.
 *
 * This is the one header an application includes. It declares only what the
 * library implements today; docs/API.md describes the whole planned API
 * (Nexus, Rpc, sessions, requests) and which parts have landed.
 *
 * Conventions used by every function below:
 *  - A fallible call returns 0 or a negative errno value; urpc_strerror()
 *    turns it into text.
 *  - "Thread: any" means the function may be called from any thread; all
 *    other functions are owner-thread only.
 */
#ifndef URPC_URPC_H
#define URPC_URPC_H

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
 * The default is URPC_LOG_INFO, or the value of the URPC_LOG environment
 * variable ("err", "warn", "info", "dbg") when it is set.
 * Thread: any.
 */
URPC_API void urpc_log_set_level(enum urpc_log_level level);

/* The datagram transports. The value is chosen per Rpc at run time. */
enum urpc_transport_kind {
	URPC_TRANSPORT_DEFAULT = 0, /* verbs when an RDMA port is active, else udp */
	URPC_TRANSPORT_LOOP = 1,    /* in-process rings; tests and CPU-cost benchmarks */
	URPC_TRANSPORT_UDP = 2,	    /* kernel UDP sockets; any machine */
	URPC_TRANSPORT_VERBS = 3,   /* RDMA UD + RC through libibverbs */
};

/**
 * urpc_transport_str() - Name of a transport kind ("loop", "udp", ...).
 * Thread: any.
 */
URPC_API const char *urpc_transport_str(enum urpc_transport_kind kind);

/**
 * urpc_transport_parse() - Parse a transport name as used by URPC_TRANSPORT.
 *
 * @param name "default", "loop", "udp" or "verbs" (case-sensitive).
 * @param out  receives the kind on success.
 * @return 0, or -EINVAL for an unknown name (@out untouched).
 * Thread: any.
 */
URPC_API int urpc_transport_parse(const char *name, enum urpc_transport_kind *out);

/**
 * struct urpc_msgbuf - A message buffer.
 *
 * @buf:      the message bytes; the application reads and writes
 *            buf[0 .. data_size).
 * @data_size: the message length; change it only through urpc_msgbuf_resize.
 * @max_data_size: the capacity fixed at allocation.
 *
 * The fields after these are private to the library. Room for the packet
 * header lies in front of @buf and belongs to the library.
 *
 * Ownership: the application owns a buffer it allocated, except while it is
 * lent to the engine (from a successful enqueue until the matching
 * continuation runs, or for a response, for good).
 */
struct urpc_msgbuf {
	uint8_t *buf;
	size_t data_size;
	size_t max_data_size;
	/* private */
	void *priv_class;
	uint32_t priv_lkey;
	uint32_t priv_rkey;
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_URPC_H */
