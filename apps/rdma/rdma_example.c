/* SPDX-License-Identifier: MIT */
/*
 * urpc-rdma-example: remote memory in five minutes.
 *
 * A server owns a region of memory. A client asks for it with an RPC; the
 * server exposes the region to that client's session (urpc_mem_expose) and
 * answers with the struct urpc_rbuf that describes it. Then the client
 *
 *   1. WRITEs a pattern into the region with urpc_rdma_write(): one-sided,
 *      no handler runs at the server;
 *   2. sends a CHECK request: the server compares its region with the
 *      pattern (a write is visible to the owner once the writer's
 *      continuation has run and the writer then sends a message);
 *   3. READs the region back into another buffer with urpc_rdma_read() and
 *      compares it too;
 *   4. sends DONE: the server revokes the exposure (urpc_mem_revoke).
 *
 * By default both sides run in this one process, each with its own Rpc,
 * driven by one thread (the loop transport needs that). --serve runs only
 * the server and --connect only the client, for two processes or machines.
 * Uses only <urpc/urpc.h>.
 */
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define PROG "urpc-rdma-example"

#define REQ_EXPOSE 1 /* -> the rbuf of the server's region */
#define REQ_CHECK 2  /* u64 seed -> u64 bytes that match the pattern from the start */
#define REQ_DONE 3   /* -> nothing; the exposure is revoked */
#define SERVER_RPC_ID 0
#define CLIENT_RPC_ID 1
#define DEFAULT_PORT 31870 /* the KV demo has 31860, urpc-hello 31850 */

struct opts {
	const char *connect; /* --connect HOST:PORT: client only */
	bool serve;	     /* --serve: server only */
	const char *host, *bind, *device, *server_device;
	unsigned long port, size, count, timeout_ms;
	enum urpc_transport_kind kind;
	bool kind_set;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-rdma-example - expose memory, WRITE it and READ it back, one-sided\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-rdma-example [--transport loop|udp|verbs|default] [--size BYTES]\n"
		"                      [--device DEV] [--server-device DEV] [--timeout MS]\n"
		"    urpc-rdma-example --serve [--host ADDR] [--port PORT] [--count N]\n"
		"                      [--transport ...] [--size BYTES] [--device DEV]\n"
		"    urpc-rdma-example --connect HOST:PORT [--bind ADDR] [--transport ...]\n"
		"                      [--device DEV] [--timeout MS]\n"
		"\n"
		"DESCRIPTION\n"
		"    The server owns a region of BYTES bytes. The client asks for it with an\n"
		"    RPC and the server answers with a struct urpc_rbuf: the region exposed\n"
		"    (urpc_mem_expose) to that client's session, for READ and WRITE. The\n"
		"    client WRITEs a pattern into it (urpc_rdma_write), tells the server with\n"
		"    a CHECK request, and the server compares its memory with the pattern.\n"
		"    Then the client READs the region back (urpc_rdma_read) and compares, and\n"
		"    a DONE request makes the server revoke the exposure (urpc_mem_revoke).\n"
		"    Each step prints one line; the source, apps/rdma/rdma_example.c, is\n"
		"    meant to be read.\n"
		"\n"
		"    Without --serve or --connect both sides run in this process, each with\n"
		"    its own Rpc, one thread driving both event loops. --serve runs the\n"
		"    server alone (Rpc id %d; one client at a time: a new client's request\n"
		"    revokes the previous exposure), --connect the client alone.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport NAME\n"
		"        loop, udp, verbs or default (default: URPC_TRANSPORT, else verbs\n"
		"        when an RDMA port is active, else udp). loop works only inside one\n"
		"        process: not with --serve or --connect.\n"
		"    -s, --size BYTES\n"
		"        The server's region, 1 to %u bytes (default 1048576). A client\n"
		"        moves as many bytes as the rbuf it gets says.\n"
		"    --serve\n"
		"        Run only the server.\n"
		"    -c, --connect HOST:PORT\n"
		"        Run only the client, against the server's Nexus at HOST:PORT.\n"
		"    -H, --host ADDR\n"
		"        --serve: IPv4 address to listen on (default 127.0.0.1).\n"
		"    -p, --port PORT\n"
		"        --serve: session-management UDP port (default %d).\n"
		"    -n, --count N\n"
		"        --serve: exit after N clients said DONE (default 0: never; stop\n"
		"        with Ctrl-C).\n"
		"    -b, --bind ADDR\n"
		"        --connect: local IPv4 address for session management (default\n"
		"        127.0.0.1; use one the server can reach).\n"
		"    -d, --device DEV\n"
		"        verbs: this process's RDMA device (\"rxe1\", \"mlx5_0:1\"); in one\n"
		"        process, the client's. Default URPC_DEVICE, else the first active\n"
		"        port.\n"
		"    --server-device DEV\n"
		"        verbs, in one process: the server's device (default as --device).\n"
		"    -T, --timeout MS\n"
		"        Give up on a step after MS milliseconds, 1 to 3600000 (default\n"
		"        10000).\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 when every byte came back as written (--serve: on a clean stop);\n"
		"    1 on a runtime error (no server, a failed operation, a mismatch, a\n"
		"    timeout); 2 on bad usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-rdma-example --transport loop\n"
		"    urpc-rdma-example --transport udp --size 4194304\n"
		"    urpc-rdma-example --serve --port 31870 &\n"
		"    urpc-rdma-example --connect 127.0.0.1:31870\n",
		SERVER_RPC_ID, URPC_MAX_MSG_SIZE, DEFAULT_PORT);
}

/* --transport: any kind; whether loop fits the mode is checked after parsing. */
static int parse_kind(const char *prog, const char *val, void *dst)
{
	unsigned all = URPC_APP_TRANSPORTS_NET | 1u << URPC_TRANSPORT_LOOP;

	return urpc_app_parse_transport(prog, val, all, "loop, udp, verbs or default", "", dst);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_FN("transport", 't', &o->kind, parse_kind), .set = &o->kind_set},
		{URPC_APP_ULONG("size", 's', &o->size, 1, URPC_MAX_MSG_SIZE)},
		{URPC_APP_TRUE("serve", 0, &o->serve)},
		{URPC_APP_STR("connect", 'c', &o->connect)},
		{URPC_APP_STR("host", 'H', &o->host)},
		{URPC_APP_ULONG("port", 'p', &o->port, 0, 65535)},
		{URPC_APP_ULONG("count", 'n', &o->count, 0, 1000000000ul)},
		{URPC_APP_STR("bind", 'b', &o->bind)},
		{URPC_APP_STR("device", 'd', &o->device)},
		{URPC_APP_STR("server-device", 0, &o->server_device)},
		{URPC_APP_ULONG("timeout", 'T', &o->timeout_ms, 1, 3600000)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts),
					    .refusal = URPC_APP_REFUSE_NAMED};
	int ret;

	memset(o, 0, sizeof(*o));
	o->host = o->bind = "127.0.0.1";
	o->port = DEFAULT_PORT;
	o->size = 1u << 20;
	o->timeout_ms = 10000;
	ret = urpc_app_parse_args(&cl, argc, argv, NULL);
	if (ret)
		return ret;
	if (o->serve && o->connect) {
		fprintf(stderr, PROG ": give --serve or --connect, not both\n");
		return 2;
	}
	if ((o->serve || o->connect) && o->kind_set && o->kind == URPC_TRANSPORT_LOOP) {
		fprintf(stderr, PROG ": --transport loop works only inside one process: drop "
				     "--serve and --connect\n");
		return 2;
	}
	if (!o->serve && !o->connect)
		o->server_device = o->server_device ? o->server_device : o->device;
	return 0;
}

/* The pattern byte at @i for @seed: what the client writes and both sides check. */
static uint8_t pattern(uint64_t seed, uint64_t i)
{
	return (uint8_t)(seed + i * 131 + (i >> 9));
}

/* Bytes of @p[0..@len) that match the pattern from the start (@len: all of them). */
static uint64_t matching(const uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern(seed, i))
			break;
	return i;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the server: a region, and handlers that expose, check and revoke it ---- */

struct server {
	uint8_t *region;
	size_t size;
	struct urpc_rbuf rbuf; /* the live exposure, when @exposed */
	bool exposed;
	unsigned long done; /* clients that said DONE */
	int failed;	    /* a handler could not answer */
};

/* Answer @h with @len bytes of @data from its preallocated response buffer. */
static void answer(struct server *srv, struct urpc_req_handle *h, const void *data, size_t len)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	int ret;

	if (len)
		memcpy(resp->buf, data, len);
	ret = urpc_msgbuf_resize(resp, len);
	if (!ret)
		ret = urpc_resp_enqueue(h, resp);
	if (ret) {
		fprintf(stderr, PROG ": server: cannot answer: %s\n", urpc_strerror(ret));
		srv->failed = ret;
	}
}

static void end_exposure(struct urpc_rpc *rpc, struct server *srv)
{
	int ret;

	if (!srv->exposed)
		return;
	ret = urpc_mem_revoke(rpc, &srv->rbuf);
	if (ret) {
		fprintf(stderr, PROG ": server: cannot revoke: %s\n", urpc_strerror(ret));
		srv->failed = ret;
	}
	srv->exposed = false;
}

/* EXPOSE: let this session's peer READ and WRITE the region; answer the rbuf. */
static void on_expose(struct urpc_req_handle *h, void *arg)
{
	struct server *srv = arg;
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	int ret;

	end_exposure(rpc, srv); /* one client at a time */
	ret = urpc_mem_expose(rpc, urpc_req_session(h), srv->region, srv->size,
			      URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &srv->rbuf);
	if (ret) {
		fprintf(stderr, PROG ": server: cannot expose %zu bytes: %s\n", srv->size,
			urpc_strerror(ret));
		answer(srv, h, NULL, 0); /* an empty answer: the client reports it */
		return;
	}
	srv->exposed = true;
	printf("server: exposed %zu bytes at %p for READ and WRITE (generation %llu)\n", srv->size,
	       (void *)srv->region, (unsigned long long)le64toh(srv->rbuf.gen));
	answer(srv, h, &srv->rbuf, sizeof(srv->rbuf));
}

/* CHECK: the client wrote the pattern of this seed; count the bytes that match. */
static void on_check(struct urpc_req_handle *h, void *arg)
{
	struct server *srv = arg;
	uint64_t seed = 0, ok;
	size_t len;
	const uint8_t *d = urpc_req_data(h, &len);

	if (len == sizeof(seed))
		memcpy(&seed, d, sizeof(seed));
	seed = le64toh(seed);
	ok = htole64(matching(srv->region, srv->size, seed));
	printf("server: %llu of %zu bytes in my memory are as the client wrote them\n",
	       (unsigned long long)le64toh(ok), srv->size);
	answer(srv, h, &ok, sizeof(ok));
}

/* DONE: revoke the exposure; the client's rbuf is dead from here on. */
static void on_done(struct urpc_req_handle *h, void *arg)
{
	struct server *srv = arg;

	end_exposure(urpc_req_rpc(h), srv);
	printf("server: revoked the exposure\n");
	srv->done++;
	answer(srv, h, NULL, 0);
}

/* ---- the client ------------------------------------------------------------ */

struct client {
	struct urpc_rpc *rpc;
	struct urpc_rpc *srv_rpc; /* the server's, when it lives in this process */
	int session;
	bool connected, connect_failed;
	int sm_status;
	bool finished; /* the last request's or operation's continuation ran */
	int status;    /* ... with this status */
	struct urpc_msgbuf req, resp, wbuf, rbuf_local;
};

static void on_sm_event(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
			void *arg)
{
	struct client *cl = arg;

	cl->sm_status = status;
	if (ev == URPC_SM_CONNECTED)
		cl->connected = true;
	else if (ev == URPC_SM_CONNECT_FAILED)
		cl->connect_failed = true;
	else if (ev == URPC_SM_RESET)
		fprintf(stderr, PROG ": client: the session was reset: %s\n",
			urpc_strerror(status));
}

/* Continuations: a request's, and a READ's or WRITE's. Each runs exactly once. */
static void on_response(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct client *cl = tag;

	cl->finished = true;
	cl->status = status;
}

static void on_rdma_done(struct urpc_rpc *rpc, void *tag, int status)
{
	struct client *cl = tag;

	cl->finished = true;
	cl->status = status;
}

/* Run the event loop(s) until *@flag, at most @ms; 0, or -ETIMEDOUT. */
static int wait_for(struct client *cl, const bool *flag, unsigned long ms)
{
	double end = now_ms() + (double)ms;
	int ret;

	while (!*flag) {
		if (now_ms() > end)
			return -ETIMEDOUT;
		ret = urpc_rpc_run_event_loop_once(cl->rpc);
		if (!ret && cl->srv_rpc)
			ret = urpc_rpc_run_event_loop_once(cl->srv_rpc);
		if (ret)
			return ret;
	}
	return 0;
}

/* One request of @type with @len bytes of @data; the answer is in cl->resp. */
static int call(struct client *cl, uint8_t type, const void *data, size_t len, unsigned long ms)
{
	int ret;

	if (len)
		memcpy(cl->req.buf, data, len);
	urpc_msgbuf_resize(&cl->req, len);
	cl->finished = false;
	ret = urpc_req_enqueue(cl->rpc, cl->session, type, &cl->req, &cl->resp, on_response, cl,
			       (uint32_t)ms);
	if (!ret)
		ret = wait_for(cl, &cl->finished, ms + 1000); /* its deadline comes first */
	return ret ? ret : cl->status;
}

/* urpc_rdma_write() (@write) or _read() of @len bytes at offset 0; waits for it. */
static int rdma(struct client *cl, bool write, struct urpc_msgbuf *local,
		const struct urpc_rbuf *rb, size_t len, unsigned long ms)
{
	int ret;

	cl->finished = false;
	if (write)
		ret = urpc_rdma_write(cl->rpc, cl->session, local, 0, rb, 0, len, on_rdma_done, cl,
				      (uint32_t)ms);
	else
		ret = urpc_rdma_read(cl->rpc, cl->session, local, 0, rb, 0, len, on_rdma_done, cl,
				     (uint32_t)ms);
	if (!ret)
		ret = wait_for(cl, &cl->finished, ms + 1000);
	return ret ? ret : cl->status;
}

/* Steps 1-4 of the file's comment on a connected session; 0 or -errno (reported). */
static int client_steps(struct client *cl, unsigned long ms)
{
	uint64_t seed = (uint64_t)time(NULL), seed_le = htole64(seed), ok;
	struct urpc_rbuf rb;
	size_t len;
	double t;
	int ret;

	ret = urpc_msgbuf_alloc(cl->rpc, sizeof(seed), &cl->req);
	if (!ret)
		ret = urpc_msgbuf_alloc(cl->rpc, sizeof(rb), &cl->resp);
	if (ret) {
		fprintf(stderr, PROG ": client: cannot allocate buffers: %s\n", urpc_strerror(ret));
		return ret;
	}

	/* 0. Ask for the region: the answer is its rbuf, plain bytes. */
	ret = call(cl, REQ_EXPOSE, NULL, 0, ms);
	if (ret || cl->resp.data_size != sizeof(rb)) {
		fprintf(stderr, PROG ": client: no rbuf from the server: %s\n",
			ret ? urpc_strerror(ret) : "it could not expose its region (see its log)");
		return ret ? ret : -EIO;
	}
	memcpy(&rb, cl->resp.buf, sizeof(rb));
	len = (size_t)le64toh(rb.len);
	printf("client: got an rbuf for %zu bytes of the server's memory\n", len);
	ret = urpc_msgbuf_alloc(cl->rpc, len, &cl->wbuf);
	if (!ret)
		ret = urpc_msgbuf_alloc(cl->rpc, len, &cl->rbuf_local);
	if (ret) {
		fprintf(stderr, PROG ": client: cannot allocate 2 x %zu bytes: %s\n", len,
			urpc_strerror(ret));
		return ret;
	}

	/* 1. WRITE the pattern into the server's memory. */
	for (size_t i = 0; i < len; i++)
		cl->wbuf.buf[i] = pattern(seed, i);
	t = now_ms();
	ret = rdma(cl, true, &cl->wbuf, &rb, len, ms);
	if (ret) {
		fprintf(stderr, PROG ": client: urpc_rdma_write failed: %s\n", urpc_strerror(ret));
		return ret;
	}
	printf("client: wrote %zu bytes with urpc_rdma_write in %.3f ms\n", len, now_ms() - t);

	/* 2. Tell the server; it checks its own memory. */
	ret = call(cl, REQ_CHECK, &seed_le, sizeof(seed_le), ms);
	if (ret || cl->resp.data_size != sizeof(ok)) {
		fprintf(stderr, PROG ": client: CHECK failed: %s\n",
			ret ? urpc_strerror(ret) : "a malformed answer");
		return ret ? ret : -EIO;
	}
	memcpy(&ok, cl->resp.buf, sizeof(ok));
	if (le64toh(ok) != len) {
		fprintf(stderr, PROG ": client: the server found byte %llu not as written\n",
			(unsigned long long)le64toh(ok));
		return -EIO;
	}

	/* 3. READ it back into another buffer and compare. */
	memset(cl->rbuf_local.buf, 0, len);
	t = now_ms();
	ret = rdma(cl, false, &cl->rbuf_local, &rb, len, ms);
	if (ret) {
		fprintf(stderr, PROG ": client: urpc_rdma_read failed: %s\n", urpc_strerror(ret));
		return ret;
	}
	ok = matching(cl->rbuf_local.buf, len, seed);
	printf("client: read %zu bytes back with urpc_rdma_read in %.3f ms: %s\n", len,
	       now_ms() - t, ok == len ? "all as written" : "MISMATCH");
	if (ok != len) {
		fprintf(stderr, PROG ": client: byte %llu read back is not as written\n",
			(unsigned long long)ok);
		return -EIO;
	}

	/* 4. Done: the server revokes the exposure. */
	ret = call(cl, REQ_DONE, NULL, 0, ms);
	if (ret)
		fprintf(stderr, PROG ": client: DONE failed: %s\n", urpc_strerror(ret));
	return ret;
}

/* Connect to @where, run the steps, disconnect; 0 or 1 (reported). */
static int client_run(struct client *cl, const char *where, const struct opts *o)
{
	struct urpc_msgbuf *bufs[] = {&cl->req, &cl->resp, &cl->wbuf, &cl->rbuf_local};
	int ret, status = 1;

	ret = urpc_session_connect(cl->rpc, where, SERVER_RPC_ID, &cl->session);
	if (ret) {
		fprintf(stderr, PROG ": client: cannot connect to '%s': %s\n", where,
			urpc_strerror(ret));
		return 1;
	}
	ret = wait_for(cl, &cl->connected, o->timeout_ms);
	if (!ret && cl->connect_failed)
		ret = cl->sm_status;
	if (ret || !cl->connected) {
		/* connect_timeout_ms = --timeout: CONNECT_FAILED comes first, or the wait ends */
		fprintf(stderr, PROG ": client: no session with rpc %d at %s: %s\n", SERVER_RPC_ID,
			where, urpc_strerror(ret ? ret : cl->sm_status));
		return 1;
	}
	if (!client_steps(cl, o->timeout_ms)) {
		printf("client: OK\n");
		status = 0;
	}
	/* Buffers still lent (a timed-out step) come back when the Rpc is destroyed. */
	urpc_session_disconnect(cl->rpc, cl->session);
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		if (bufs[i]->buf && urpc_msgbuf_free(cl->rpc, bufs[i]) == -EBUSY)
			status = 1;
	return status;
}

/* ---- main: one process with both sides, or one side ------------------------ */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

/* The transport asked for, as a name ("default" leaves the choice to the library). */
static const char *kind_name(const struct opts *o)
{
	const char *env = getenv("URPC_TRANSPORT");

	if (o->kind_set)
		return urpc_transport_str(o->kind);
	return env && *env ? env : "default";
}

/* An Rpc of the chosen transport on @nx; 0, or -errno (reported as @who). */
static int rpc_create(struct urpc_nexus *nx, uint8_t id, const struct opts *o, const char *dev,
		      struct client *cl, const char *who, struct urpc_rpc **rpc)
{
	struct urpc_rpc_opts ro;
	int ret;

	urpc_rpc_opts_init(&ro);
	if (o->kind_set)
		ro.transport = o->kind;
	ro.device = dev;
	ro.connect_timeout_ms = (uint32_t)o->timeout_ms;
	if (cl) {
		ro.sm_handler = on_sm_event;
		ro.sm_arg = cl;
	}
	ret = urpc_rpc_create(nx, id, &ro, rpc);
	if (ret)
		fprintf(stderr, PROG ": cannot create the %s Rpc%s%s: %s%s\n", who,
			dev ? " on device " : "", dev ? dev : "", urpc_strerror(ret),
			ret == -ENODEV ? " (verbs needs an active RDMA port: see urpc-info)" : "");
	return ret;
}

int main(int argc, char **argv)
{
	struct urpc_nexus_opts no;
	struct urpc_nexus *nx;
	struct urpc_rpc *srv_rpc = NULL;
	struct server srv = {0};
	struct client cl = {0};
	char where[300];
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;

	/* A Nexus: session management, and the handlers (before the first Rpc). */
	urpc_nexus_opts_init(&no);
	no.host = o.connect ? o.bind : o.host;
	no.port = o.serve ? (uint16_t)o.port : 0;
	ret = urpc_nexus_create(&no, &nx);
	if (ret) {
		fprintf(stderr, PROG ": cannot create the Nexus on %s:%u: %s\n", no.host, no.port,
			urpc_strerror(ret));
		return 1;
	}
	if (!o.connect) {
		srv.size = o.size;
		srv.region = aligned_alloc(4096, (o.size + 4095) / 4096 * 4096);
		if (!srv.region) {
			fprintf(stderr, PROG ": cannot allocate %lu bytes\n", o.size);
			goto out_nexus;
		}
		memset(srv.region, 0, o.size);
		ret = urpc_nexus_register_handler(nx, REQ_EXPOSE, on_expose, &srv);
		if (!ret)
			ret = urpc_nexus_register_handler(nx, REQ_CHECK, on_check, &srv);
		if (!ret)
			ret = urpc_nexus_register_handler(nx, REQ_DONE, on_done, &srv);
		if (ret) {
			fprintf(stderr, PROG ": cannot register the handlers: %s\n",
				urpc_strerror(ret));
			goto out_nexus;
		}
		if (rpc_create(nx, SERVER_RPC_ID, &o, o.serve ? o.device : o.server_device, NULL,
			       "server", &srv_rpc))
			goto out_nexus;
	}

	if (o.serve) {
		/* The server alone: its event loop serves EXPOSE, CHECK and DONE. */
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		printf("server: listening on %s:%u, rpc id %d, transport %s\n", o.host,
		       urpc_nexus_port(nx), SERVER_RPC_ID, kind_name(&o));
		fflush(stdout);
		status = 0;
		while (!stop && !srv.failed && (!o.count || srv.done < o.count)) {
			ret = urpc_rpc_run_event_loop(srv_rpc, 100);
			if (ret) {
				fprintf(stderr, PROG ": event loop: %s\n", urpc_strerror(ret));
				status = 1;
				break;
			}
			fflush(stdout);
		}
		urpc_rpc_run_event_loop(srv_rpc, 100); /* the last answer goes out */
		if (srv.failed)
			status = 1;
	} else {
		/* The client, against the server in this process or at --connect. */
		if (rpc_create(nx, CLIENT_RPC_ID, &o, o.device, &cl, "client", &cl.rpc))
			goto out_server;
		cl.srv_rpc = srv_rpc;
		if (o.connect)
			snprintf(where, sizeof(where), "%s", o.connect);
		else
			snprintf(where, sizeof(where), "127.0.0.1:%u", urpc_nexus_port(nx));
		if (!o.connect)
			printf("one process, transport %s: server Rpc %d, client Rpc %d\n",
			       kind_name(&o), SERVER_RPC_ID, CLIENT_RPC_ID);
		status = client_run(&cl, where, &o);
		if (srv.failed)
			status = 1;
		if (urpc_app_rpc_destroy(PROG, cl.rpc))
			status = 1;
	}

out_server:
	if (srv_rpc && urpc_app_rpc_destroy(PROG, srv_rpc))
		status = 1;
out_nexus:
	if (urpc_app_nexus_destroy(PROG, nx))
		status = 1;
	free(srv.region);
	return status;
}
