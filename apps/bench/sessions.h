/* SPDX-License-Identifier: MIT */
/*
 * urpc-sessions, the client side (sessions_client.c): a client Rpc with
 * many sessions to one server Rpc, connecting them, keeping a window of
 * echo requests going round robin over all of them, and closing them. It
 * runs in worker processes (udp, verbs), each with its own Nexus, driven
 * by the main process over a pair of pipes; or, on loop, in the main
 * process beside the server. Uses only <urpc/urpc.h>.
 */
#ifndef URPC_BENCH_SESSIONS_H
#define URPC_BENCH_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include <urpc/urpc.h>

#include "bench_common.h"

#define SESS_PROG "urpc-sessions"
#define SESS_MSG_SIZE 32
#define SESS_STALL_S 30.0 /* no progress for this long: give up */
#define SESS_WARMUP_S 0.2 /* traffic before the measured span */

struct sess;

/* One client Rpc and its sessions. */
struct sess_client {
	struct urpc_nexus *nx; /* its own, or the server's on loop */
	bool own_nx;
	struct bench_server *sv; /* on loop: the server, driven beside it */
	struct urpc_rpc *rpc;
	struct sess *s;
	unsigned long n;
	unsigned long batch;   /* connects or disconnects under way at most */
	unsigned long started; /* sessions with a connect issued */
	struct bench_sm sm;
	/* traffic */
	unsigned long window, next, outstanding, completed, errors, nused;
	int first_error;
	bool measuring, stopping;
	void (*on_start)(void *arg); /* called when the measured span starts; may be NULL */
	void *start_arg;
};

/* What a client reports of its traffic. */
struct sess_traffic {
	unsigned long rpcs;   /* completed in the measured span */
	double span_s;	      /* its length */
	unsigned long active; /* sessions that completed one in it */
	uint64_t retransmits;
	double cpu_s; /* this process's CPU time in the span (user + system) */
};

/* CPU seconds (user + system) this process has used so far. */
static inline double sess_cpu_s(void)
{
	struct rusage u;

	if (getrusage(RUSAGE_SELF, &u))
		return 0;
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/*
 * Create the client Rpc (default options but @transport, @device,
 * @ping_ms when nonzero, and idle_block_us 0 with @busy_poll) on @nx, or on a Nexus of its own when @nx is
 * NULL, and connect @n sessions to the server Rpc at @port, at most
 * @batch connecting at a time. 0 or -errno (reported on stderr).
 */
int sess_client_connect(struct sess_client *c, struct urpc_nexus *nx, struct bench_server *sv,
			enum urpc_transport_kind transport, const char *device,
			unsigned long ping_ms, bool busy_poll, uint16_t port, unsigned long n,
			unsigned long batch);

/*
 * Traffic, @window requests outstanding round robin over all sessions:
 * after SESS_WARMUP_S and once every session has had its turn (so the
 * buffers both sides take on a session's first request are in place),
 * measure for @duration_s and on until every session completed an RPC (at
 * most SESS_STALL_S more), then report in *@t; if @more is set, keep the
 * traffic going until more(@arg) returns false. 0 or -errno (reported).
 */
int sess_client_traffic(struct sess_client *c, unsigned long window, double duration_s,
			struct sess_traffic *t, bool (*more)(void *arg), void *arg);

/* Disconnect every session, free the buffers, destroy the Rpc (and Nexus). 0 or 1. */
int sess_client_down(struct sess_client *c);

/* The commands the main process sends a worker, and its replies. */
enum sess_op {
	SESS_OP_CONNECT = 1,
	SESS_OP_TRAFFIC = 2, /* answered once measured; traffic goes on until ... */
	SESS_OP_STOP = 3,    /* ... this, answered once the requests are back */
	SESS_OP_DOWN = 4,
	SESS_OP_EXIT = 5,
};

struct sess_cmd {
	enum sess_op op;
	enum urpc_transport_kind transport;
	uint16_t port;
	unsigned long n, batch, window, ping_ms;
	bool busy_poll;
	double duration_s;
	char device[64];
};

struct sess_reply {
	bool started; /* TRAFFIC's first answer: the measured span starts now */
	int status;   /* 0 or -errno */
	double connect_s;
	struct sess_traffic t;
};

/* A worker process's main loop: commands from @cmd_fd, replies to @rep_fd. Exit status. */
int sess_worker_main(int cmd_fd, int rep_fd);

#endif /* URPC_BENCH_SESSIONS_H */
