/* SPDX-License-Identifier: MIT */
/*
 * urpc-hello-client: the smallest complete urpc client.
 *
 * One Nexus, one Rpc, one session to urpc-hello-server, one request with a
 * name, and the response printed. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define PROG "urpc-hello-client"

#define HELLO_REQ_TYPE 1
#define HELLO_CLIENT_RPC_ID 0

struct opts {
	const char *server;
	const char *bind;
	const char *name;
	unsigned long rpc_id;
	unsigned long timeout_ms;
	enum urpc_transport_kind kind;
	bool kind_set;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: urpc-hello-client [OPTIONS] [NAME]\n"
		"\n"
		"Connect to urpc-hello-server, send NAME (default \"world\") and print the\n"
		"response (\"Hello, NAME!\").\n"
		"\n"
		"Options:\n"
		"  -s, --server HOST:PORT  the server's Nexus (default 127.0.0.1:31850)\n"
		"  -r, --rpc-id ID         the server's Rpc id (default 0)\n"
		"  -b, --bind ADDR         local IPv4 address for session management\n"
		"                          (default 127.0.0.1; use an address the server can reach)\n"
		"  -t, --transport NAME    udp, verbs, xdp (on URPC_DEVICE) or default (default:\n"
		"                        URPC_TRANSPORT, else\n"
		"                          verbs when an RDMA port is active, else udp)\n"
		"  -T, --timeout MS        give up after MS milliseconds (default 3000)\n"
		"  -h, --help              show this help\n"
		"\n"
		"Exit status: 0 when the response arrived, 1 on a runtime error (no server,\n"
		"timeout, ...), 2 on bad usage.\n");
}

/* --timeout: 1 to 3600000 ms, refused as the other integers are, 0 on its own. */
static int parse_timeout(const char *prog, const char *val, void *dst)
{
	if (urpc_app_parse_ulong(prog, val, "--timeout", 0, 3600000, dst))
		return -EINVAL;
	if (!*(unsigned long *)dst) {
		fprintf(stderr, "urpc-hello-client: --timeout must be at least 1\n");
		return -EINVAL;
	}
	return 0;
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_STR("server", 's', &o->server)},
		{URPC_APP_ULONG("rpc-id", 'r', &o->rpc_id, 0, 255)},
		{URPC_APP_STR("bind", 'b', &o->bind)},
		{URPC_APP_NET_TRANSPORT(&o->kind, &o->kind_set)},
		{URPC_APP_FN("timeout", 'T', &o->timeout_ms, parse_timeout)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts),
					    .max_operands = 1}; /* NAME */
	int ret, first;

	o->server = "127.0.0.1:31850";
	o->bind = "127.0.0.1";
	o->name = "world";
	o->rpc_id = 0;
	o->timeout_ms = 3000;
	o->kind_set = false;
	ret = urpc_app_parse_args(&cl, argc, argv, &first);
	if (ret)
		return ret;
	if (first < argc)
		o->name = argv[first];
	if (!o->name[0]) {
		fprintf(stderr, "urpc-hello-client: NAME must not be empty\n");
		return 2;
	}
	return 0;
}

/* What the callbacks report back to main(). */
struct client {
	bool connected;
	bool connect_failed;
	bool disconnected;
	int sm_status;	 /* status of the last session event */
	bool lent;	 /* the request buffers belong to the engine */
	bool responded;	 /* the continuation ran */
	int resp_status; /* ... with this status */
};

/* Session events: CONNECTED, CONNECT_FAILED (with why), DISCONNECTED, RESET. */
static void on_sm_event(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
			void *arg)
{
	struct client *cl = arg;

	cl->sm_status = status;
	switch (ev) {
	case URPC_SM_CONNECTED:
		cl->connected = true;
		break;
	case URPC_SM_CONNECT_FAILED:
		cl->connect_failed = true;
		break;
	case URPC_SM_DISCONNECTED:
		cl->disconnected = true;
		break;
	case URPC_SM_RESET:
		fprintf(stderr, "urpc-hello-client: the server reset the session: %s\n",
			urpc_strerror(status));
		break;
	}
}

/* The continuation: runs once, with the response or an error. */
static void on_response(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct client *cl = tag;

	if (status == 0)
		printf("%.*s\n", (int)resp->data_size, (const char *)resp->buf);
	cl->lent = false;
	cl->responded = true;
	cl->resp_status = status;
}

/* Run the event loop until *@a or *@b is true, at most @ms milliseconds. */
static int wait_for(struct urpc_rpc *rpc, const bool *a, const bool *b, unsigned long ms)
{
	unsigned long waited;
	int ret;

	for (waited = 0; !*a && !*b && waited < ms; waited += 10) {
		ret = urpc_rpc_run_event_loop(rpc, 10);
		if (ret)
			return ret;
	}
	return *a || *b ? 0 : -ETIMEDOUT;
}

int main(int argc, char **argv)
{
	struct urpc_msgbuf req = {0}, resp = {0};
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	struct client cl = {0};
	struct opts o;
	size_t len;
	int session, ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;

	/* 1. A Nexus; port 0 lets the system pick a free one for a client. */
	urpc_nexus_opts_init(&no);
	no.host = o.bind;
	ret = urpc_nexus_create(&no, &nx);
	if (ret) {
		fprintf(stderr, "urpc-hello-client: cannot create the Nexus on %s: %s\n", o.bind,
			urpc_strerror(ret));
		return 1;
	}
	/* 2. An Rpc owned by this thread; session events go to on_sm_event. */
	urpc_rpc_opts_init(&ro);
	if (o.kind_set)
		ro.transport = o.kind;
	ro.sm_handler = on_sm_event;
	ro.sm_arg = &cl;
	ro.connect_timeout_ms = (uint32_t)o.timeout_ms;
	ret = urpc_rpc_create(nx, HELLO_CLIENT_RPC_ID, &ro, &rpc);
	if (ret) {
		fprintf(stderr, "urpc-hello-client: cannot create the Rpc: %s\n",
			urpc_strerror(ret));
		goto out_nexus;
	}

	/* 3. A session to the server's Rpc; the sm_handler says how it went. */
	ret = urpc_session_connect(rpc, o.server, (uint8_t)o.rpc_id, &session);
	if (ret) {
		fprintf(stderr, "urpc-hello-client: cannot connect to '%s': %s\n", o.server,
			urpc_strerror(ret));
		goto out_rpc;
	}
	/* connect_timeout_ms bounds this; the extra second only guards against a bug. */
	ret = wait_for(rpc, &cl.connected, &cl.connect_failed, o.timeout_ms + 1000);
	if (ret || !cl.connected) {
		ret = ret ? ret : cl.sm_status;
		fprintf(stderr, "urpc-hello-client: no session with rpc %lu at %s: %s%s\n",
			o.rpc_id, o.server, urpc_strerror(ret),
			ret == -ENOENT ? " (the server has no Rpc with that id; see --rpc-id)"
				       : "");
		goto out_rpc;
	}

	/* 4. One request, with a buffer for the response. */
	len = strlen(o.name);
	if (len > urpc_rpc_max_msg_size(rpc)) {
		fprintf(stderr, "urpc-hello-client: NAME is longer than %zu bytes\n",
			urpc_rpc_max_msg_size(rpc));
		goto out_session;
	}
	ret = urpc_msgbuf_alloc(rpc, len, &req);
	if (!ret)
		ret = urpc_msgbuf_alloc(rpc, urpc_rpc_max_msg_size(rpc), &resp);
	if (ret) {
		fprintf(stderr, "urpc-hello-client: cannot allocate buffers: %s\n",
			urpc_strerror(ret));
		goto out_session;
	}
	memcpy(req.buf, o.name, len);
	ret = urpc_req_enqueue(rpc, session, HELLO_REQ_TYPE, &req, &resp, on_response, &cl,
			       (uint32_t)o.timeout_ms);
	if (ret) {
		fprintf(stderr, "urpc-hello-client: cannot send the request: %s\n",
			urpc_strerror(ret));
		goto out_session;
	}
	cl.lent = true;
	/* The request has its own deadline, so the continuation always comes. */
	ret = wait_for(rpc, &cl.responded, &cl.responded, o.timeout_ms + 1000);
	if (ret || cl.resp_status) {
		fprintf(stderr, "urpc-hello-client: request failed: %s\n",
			urpc_strerror(ret ? ret : cl.resp_status));
		goto out_session;
	}
	status = 0;

out_session:
	/* Disconnecting also fails a request still pending, which returns its buffers. */
	if (!urpc_session_disconnect(rpc, session))
		wait_for(rpc, &cl.disconnected, &cl.disconnected, 2000);
	if (req.buf && !cl.lent)
		urpc_msgbuf_free(rpc, &req);
	if (resp.buf && !cl.lent)
		urpc_msgbuf_free(rpc, &resp);
out_rpc:
	if (urpc_app_rpc_destroy(PROG, rpc))
		status = 1;
out_nexus:
	if (urpc_app_nexus_destroy(PROG, nx))
		status = 1;
	return status;
}
