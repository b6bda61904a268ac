/* SPDX-License-Identifier: MIT */
/*
 * urpc-kv-server: a key-value store served by several Rpc threads.
 *
 * Thread i owns Rpc id i and the keys whose hash falls on it (see
 * kv_proto.h), in its own hash table (kv_store.c, with the handlers): no
 * locks. This file: the options, the threads and their Rpcs, and the main
 * thread, which waits for signals:
 * SIGUSR1 prints the statistics, SIGINT/SIGTERM stop the server. Uses only
 * <urpc/urpc.h>.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "kv_parse.h"
#include "kv_proto.h"
#include "kv_server.h"

#define PROG "urpc-kv-server"

/* Default --max-sessions-per-source: 128 client processes of a host, two sessions each. */
#define KV_PER_SOURCE 256u

static void usage(FILE *f)
{
	struct urpc_rpc_opts def;

	urpc_rpc_opts_init(&def);
	fprintf(f,
		"Usage: urpc-kv-server [OPTIONS]\n"
		"\n"
		"Serve a key-value store over urpc: GET, PUT, DELETE and multi-GET, with\n"
		"values from one byte to %u MiB (values larger than one datagram move by\n"
		"one-sided READ). Keys are partitioned by hash over THREADS Rpc threads,\n"
		"Rpc ids 0 to THREADS-1; urpc-kv-client learns the count when it connects\n"
		"and opens a session to each.\n"
		"\n"
		"Options:\n"
		"  -H, --host ADDR       IPv4 address to listen on (default 127.0.0.1)\n"
		"  -p, --port PORT       session-management UDP port (default 31860; 0 picks a\n"
		"                        free one, printed on the 'listening' line)\n"
		"  -j, --threads N       Rpc threads, 1 to %d (default 2)\n"
		"  -m, --memory MIB      memory budget for keys and values, in MiB (default\n"
		"                        256); a PUT beyond it is refused with \"server full\"\n"
		"  -t, --transport NAME  udp, verbs or default (default: URPC_TRANSPORT, else\n"
		"                        verbs when an RDMA port is active, else udp)\n"
		"  -d, --device NAME     verbs: the RDMA device or device:port (\"mlx5_0\",\n"
		"                        \"rxe0:1\"; default: URPC_DEVICE, else the first active)\n"
		"      --peer-timeout MS\n"
		"                        how long a client process may go without a\n"
		"                        heartbeat before it is taken for dead and its\n"
		"                        sessions dropped: %d to %d milliseconds\n"
		"                        (default %u; heartbeats go every %u ms). A process\n"
		"                        that gets no CPU for about MS less one heartbeat\n"
		"                        (stopped, or on a host too busy to run it) is taken\n"
		"                        for dead too; a dead one is noticed only after MS.\n"
		"                        Whichever side's timeout runs out first fails both:\n"
		"                        give urpc-kv-client the same value\n"
		"      --max-sessions-per-source N\n"
		"                        sessions the clients at one IPv4 address may hold\n"
		"                        with each thread, 1 to %u (default %u); beyond it a\n"
		"                        connect is refused (-ENOSPC) and the server logs\n"
		"                        the address: one host cannot take every session\n"
		"  -h, --help            show this help\n"
		"\n"
		"Signals: SIGUSR1 prints the statistics (operations per type and thread,\n"
		"hits and misses, items and bytes stored); SIGINT or SIGTERM stops the\n"
		"server, which prints them once more and frees everything.\n"
		"\n"
		"Exit status: 0 on a clean stop, 1 on a runtime error, 2 on bad usage.\n",
		KV_MAX_VALUE >> 20, KV_MAX_THREADS, KV_PEER_TIMEOUT_MIN_MS, KV_PEER_TIMEOUT_MAX_MS,
		def.peer_timeout_ms, def.ping_interval_ms, URPC_RPC_DEFAULT_MAX_SESSIONS,
		KV_PER_SOURCE);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_STR("host", 'H', &o->host)},
		{URPC_APP_ULONG("port", 'p', &o->port, 0, 65535)},
		{URPC_APP_ULONG("threads", 'j', &o->threads, 1, KV_MAX_THREADS)},
		{URPC_APP_ULONG("memory", 'm', &o->memory_mib, 1, 1ul << 20)},
		{URPC_APP_NET_TRANSPORT(&o->kind, &o->kind_set)},
		{URPC_APP_STR("device", 'd', &o->device)},
		{URPC_APP_ULONG("peer-timeout", 0, &o->peer_timeout_ms, KV_PEER_TIMEOUT_MIN_MS,
				KV_PEER_TIMEOUT_MAX_MS)},
		{URPC_APP_ULONG("max-sessions-per-source", 0, &o->per_source, 1,
				URPC_RPC_DEFAULT_MAX_SESSIONS)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts),
					    .refusal = URPC_APP_REFUSE_TRY};
	struct urpc_rpc_opts def;

	urpc_rpc_opts_init(&def);
	o->host = "127.0.0.1";
	o->device = NULL;
	o->port = 31860;
	o->threads = 2;
	o->memory_mib = 256;
	o->peer_timeout_ms = def.peer_timeout_ms;
	o->per_source = KV_PER_SOURCE;
	o->kind_set = false;
	return urpc_app_parse_args(&cl, argc, argv, NULL);
}

/* ---- threads ---- */

static void thread_started(struct server *srv)
{
	pthread_mutex_lock(&srv->mu);
	srv->started++;
	pthread_cond_broadcast(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
}

static void *thread_main(void *arg)
{
	struct kv_thread *t = arg;
	struct server *srv = t->srv;
	struct urpc_rpc_opts ro;
	int ret;

	t->nbuckets = 1024;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		t->err = -ENOMEM;
		thread_started(srv);
		return NULL;
	}
	urpc_rpc_opts_init(&ro);
	if (srv->o.kind_set)
		ro.transport = srv->o.kind;
	ro.device = srv->o.device;
	ro.peer_timeout_ms = (uint32_t)srv->o.peer_timeout_ms;
	/* A fair share of every thread for every client host (docs/SECURITY.md). */
	ro.max_sessions_per_source = (uint32_t)srv->o.per_source;
	ret = urpc_rpc_create(srv->nx, (uint8_t)t->id, &ro, &t->rpc);
	if (ret) {
		t->err = ret;
		free(t->buckets);
		t->buckets = NULL;
		thread_started(srv);
		return NULL;
	}
	thread_started(srv);
	while (!__atomic_load_n(&srv->stop, __ATOMIC_RELAXED)) {
		ret = urpc_rpc_run_event_loop(t->rpc, 100);
		if (ret) {
			fprintf(stderr, PROG ": thread %u: event loop: %s\n", t->id,
				urpc_strerror(ret));
			t->err = ret;
			break;
		}
	}
	ret = urpc_rpc_destroy(t->rpc);
	if (ret) {
		fprintf(stderr, PROG ": thread %u: cannot destroy the Rpc: %s\n", t->id,
			urpc_strerror(ret));
		t->err = ret;
	}
	kv_table_free(t);
	return NULL;
}

static void print_stats(struct server *srv)
{
	char buf[16384];

	kv_format_stats(srv, buf, sizeof(buf));
	printf("%s", buf);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct urpc_nexus_opts no;
	struct server srv = {0};
	sigset_t sigs;
	unsigned i, created = 0;
	int ret, sig, status = 1;

	ret = parse_opts(argc, argv, &srv.o);
	if (ret)
		return ret == 1 ? 0 : 2;
	srv.budget = (uint64_t)srv.o.memory_mib << 20;
	pthread_mutex_init(&srv.mu, NULL);
	pthread_cond_init(&srv.cv, NULL);

	/* Signals go to the main thread's sigwait() alone: block them before any thread. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	urpc_nexus_opts_init(&no);
	no.host = srv.o.host;
	no.port = (uint16_t)srv.o.port;
	ret = urpc_nexus_create(&no, &srv.nx);
	if (ret) {
		fprintf(stderr, PROG ": cannot listen on %s:%lu: %s%s\n", srv.o.host, srv.o.port,
			urpc_strerror(ret),
			ret == -EADDRINUSE ? " (another server runs there? pick --port)" : "");
		return 1;
	}
	ret = kv_register_handlers(&srv);
	if (ret) {
		fprintf(stderr, PROG ": cannot register the handlers: %s\n", urpc_strerror(ret));
		goto out_nexus;
	}
	srv.th = calloc(srv.o.threads, sizeof(*srv.th));
	if (!srv.th) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_nexus;
	}
	for (i = 0; i < srv.o.threads; i++) {
		srv.th[i].srv = &srv;
		srv.th[i].id = i;
		ret = pthread_create(&srv.th[i].tid, NULL, thread_main, &srv.th[i]);
		if (ret) {
			fprintf(stderr, PROG ": cannot start thread %u: %s\n", i, strerror(ret));
			break;
		}
		created++;
	}
	pthread_mutex_lock(&srv.mu);
	while (srv.started < created)
		pthread_cond_wait(&srv.cv, &srv.mu);
	pthread_mutex_unlock(&srv.mu);
	status = created == srv.o.threads ? 0 : 1;
	for (i = 0; i < created; i++) {
		if (srv.th[i].err) {
			fprintf(stderr, PROG ": thread %u: cannot create its Rpc: %s\n", i,
				urpc_strerror(srv.th[i].err));
			status = 1;
		}
	}
	if (!status) {
		printf(PROG
		       ": listening on %s:%u, %lu threads (rpc ids 0-%lu), memory budget %lu MiB, transport %s\n",
		       srv.o.host, urpc_nexus_port(srv.nx), srv.o.threads, srv.o.threads - 1,
		       srv.o.memory_mib,
		       srv.o.kind_set ? urpc_transport_str(srv.o.kind) : "default");
		fflush(stdout);
		for (;;) {
			if (sigwait(&sigs, &sig))
				continue;
			if (sig == SIGUSR1) {
				print_stats(&srv);
				continue;
			}
			printf(PROG ": %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
			print_stats(&srv); /* before the tables are freed */
			break;
		}
	}
	__atomic_store_n(&srv.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < created; i++) {
		pthread_join(srv.th[i].tid, NULL);
		if (srv.th[i].err)
			status = 1;
	}
	free(srv.th);
out_nexus:
	if (urpc_app_nexus_destroy(PROG, srv.nx))
		status = 1;
	pthread_cond_destroy(&srv.cv);
	pthread_mutex_destroy(&srv.mu);
	return status;
}
