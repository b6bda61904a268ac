/* SPDX-License-Identifier: MIT */
/*
 * urpc-hello-server: the smallest complete urpc server.
 *
 * One Nexus (session management on HOST:PORT), one request handler that
 * answers "Hello, <name>!", one Rpc, and its event loop. Run
 * urpc-hello-client against it. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define PROG "urpc-hello-server"

#define HELLO_REQ_TYPE 1
#define HELLO_RPC_ID 0

struct opts {
	const char *host;
	unsigned long port;
	unsigned long count;
	enum urpc_transport_kind kind;
	bool kind_set;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: urpc-hello-server [OPTIONS]\n"
		"\n"
		"Serve \"hello\" requests: each request carries a name, each response is\n"
		"\"Hello, <name>!\". Stops on Ctrl-C (SIGINT) or SIGTERM.\n"
		"\n"
		"Options:\n"
		"  -H, --host ADDR       IPv4 address to listen on (default 127.0.0.1)\n"
		"  -p, --port PORT       session-management UDP port (default 31850)\n"
		"  -t, --transport NAME  udp, verbs, xdp (on URPC_DEVICE) or default (default:\n"
		"                        URPC_TRANSPORT, else\n"
		"                        verbs when an RDMA port is active, else udp)\n"
		"  -n, --count N         exit after answering N requests (default 0: never)\n"
		"  -h, --help            show this help\n"
		"\n"
		"The server's Rpc id is %d; clients name it when they connect.\n"
		"Exit status: 0 on a clean stop, 1 on a runtime error, 2 on bad usage.\n",
		HELLO_RPC_ID);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_STR("host", 'H', &o->host)},
		{URPC_APP_ULONG("port", 'p', &o->port, 0, 65535)},
		{URPC_APP_NET_TRANSPORT(&o->kind, &o->kind_set)},
		{URPC_APP_ULONG("count", 'n', &o->count, 0, 1e9)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts)};

	o->host = "127.0.0.1";
	o->port = 31850;
	o->count = 0;
	o->kind_set = false;
	return urpc_app_parse_args(&cl, argc, argv, NULL);
}

struct server {
	unsigned long answered;
	unsigned long failed;
};

/* The handler: runs inside the event loop, once per request. */
static void hello_handler(struct urpc_req_handle *h, void *arg)
{
	struct server *srv = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *name;
	size_t len;
	int n, ret;

	name = urpc_req_data(h, &len);
	n = snprintf((char *)resp->buf, resp->max_data_size, "Hello, %.*s!", (int)len,
		     (const char *)name);
	if (n < 0 || (size_t)n >= resp->max_data_size)
		n = snprintf((char *)resp->buf, resp->max_data_size, "Hello!");
	ret = urpc_msgbuf_resize(resp, (size_t)n);
	if (!ret)
		ret = urpc_resp_enqueue(h, resp);
	if (ret) {
		fprintf(stderr, "urpc-hello-server: cannot answer: %s\n", urpc_strerror(ret));
		srv->failed++;
		return;
	}
	srv->answered++;
}

int main(int argc, char **argv)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	struct server srv = {0};
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	/* 1. The Nexus: session management, and the handler table. */
	urpc_nexus_opts_init(&no);
	no.host = o.host;
	no.port = (uint16_t)o.port;
	ret = urpc_nexus_create(&no, &nx);
	if (ret) {
		fprintf(stderr, "urpc-hello-server: cannot listen on %s:%lu: %s\n", o.host, o.port,
			urpc_strerror(ret));
		return 1;
	}
	/* 2. Handlers are registered before the first Rpc exists. */
	ret = urpc_nexus_register_handler(nx, HELLO_REQ_TYPE, hello_handler, &srv);
	if (ret) {
		fprintf(stderr, "urpc-hello-server: cannot register the handler: %s\n",
			urpc_strerror(ret));
		goto out_nexus;
	}
	/* 3. An Rpc, owned by this thread. */
	urpc_rpc_opts_init(&ro);
	if (o.kind_set)
		ro.transport = o.kind;
	ret = urpc_rpc_create(nx, HELLO_RPC_ID, &ro, &rpc);
	if (ret) {
		fprintf(stderr, "urpc-hello-server: cannot create the Rpc: %s\n",
			urpc_strerror(ret));
		goto out_nexus;
	}
	printf("urpc-hello-server: listening on %s:%u, rpc id %d\n", o.host, urpc_nexus_port(nx),
	       HELLO_RPC_ID);
	fflush(stdout);

	/* 4. The event loop does all the work: sessions, requests, responses. */
	status = 0;
	while (!stop && (!o.count || srv.answered < o.count)) {
		ret = urpc_rpc_run_event_loop(rpc, 100);
		if (ret) {
			fprintf(stderr, "urpc-hello-server: event loop: %s\n", urpc_strerror(ret));
			status = 1;
			break;
		}
	}
	/* Let the last responses go out before the Rpc ends its sessions. */
	if (!status && o.count)
		urpc_rpc_run_event_loop(rpc, 100);
	printf("urpc-hello-server: answered %lu requests\n", srv.answered);
	if (srv.failed)
		status = 1;

	if (urpc_app_rpc_destroy(PROG, rpc))
		status = 1;
out_nexus:
	if (urpc_app_nexus_destroy(PROG, nx))
		status = 1;
	return status;
}
