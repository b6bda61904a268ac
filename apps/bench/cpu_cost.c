/* SPDX-License-Identifier: MIT */
/*
 * urpc-cpu-cost: the CPU cost of small RPCs, both sides together.
 *
 * A server Rpc and a client Rpc live in this one thread and talk over the
 * loop transport (in-process rings, no kernel), so everything measured is
 * the engine's own work: the client's enqueue, TX and RX, the server's RX,
 * handler dispatch and response, and the client's continuation. N requests
 * of 32 bytes get 32-byte responses, with WINDOW of them outstanding.
 *
 * cpu_cost_callgrind.sh runs it under callgrind at two counts and reports
 * instructions per RPC without the setup cost. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define PROG "urpc-cpu-cost"

#define MSG_SIZE 32
#define REQ_TYPE 1
#define SRV_ID 1
#define CLI_ID 2
#define MAX_WINDOW 1024
#define SETUP_MS 60000 /* connect and disconnect bound; generous for valgrind */

struct opts {
	unsigned long count;
	unsigned long window;
};

struct bench;

struct slot {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct bench *b;
	bool busy;
};

struct bench {
	struct urpc_rpc *srv;
	struct urpc_rpc *cli;
	int session;
	bool connected;
	bool disconnected;
	bool sm_failed;
	int sm_status;
	unsigned long issued;
	unsigned long completed;
	unsigned long errors;
	unsigned long handler_errors;
	struct slot *slots;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: urpc-cpu-cost [OPTIONS]\n"
		"\n"
		"Run small RPCs (%d B request, %d B response) between a client and a server Rpc\n"
		"in this one thread over the loop transport, and print RPCs per second. Both\n"
		"sides run on the same core, so the time per RPC is the CPU cost of both.\n"
		"\n"
		"Options:\n"
		"  -n, --count N    RPCs to run (default 1000000)\n"
		"  -w, --window W   requests outstanding at once, 1 to %d (default 8)\n"
		"  -h, --help       show this help\n"
		"\n"
		"Exit status: 0 on success, 1 on a failed or wrong RPC, 2 on bad usage.\n",
		MSG_SIZE, MSG_SIZE, MAX_WINDOW);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{"count", required_argument, NULL, 'n'},
		{"window", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	o->count = 1000000;
	o->window = 8;
	while ((c = getopt_long(argc, argv, "n:w:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (urpc_app_parse_ulong(PROG, optarg, "--count", 1, 4000000000ul,
						 &o->count))
				return 2;
			break;
		case 'w':
			if (urpc_app_parse_ulong(PROG, optarg, "--window", 1, MAX_WINDOW,
						 &o->window))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "urpc-cpu-cost: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return 2;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Server: echo the request with its first byte changed, so a response that
 * is the request bounced back unhandled would be caught. The handler does
 * as little as an application could: the figure is the engine's cost.
 */
static void handler(struct urpc_req_handle *h, void *arg)
{
	struct bench *b = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	memcpy(resp->buf, d, len);
	resp->buf[0] = (uint8_t)(d[0] + 1);
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		b->handler_errors++;
}

static void sm_event(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
		     void *arg)
{
	struct bench *b = arg;

	if (ev == URPC_SM_CONNECTED) {
		b->connected = true;
	} else if (ev == URPC_SM_DISCONNECTED) {
		b->disconnected = true;
	} else {
		b->sm_failed = true;
		b->sm_status = status;
	}
}

/* Client: count the RPC; a failed or wrong response is an error. */
static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct slot *s = tag;
	struct bench *b = s->b;

	s->busy = false;
	b->completed++;
	if (status || resp->data_size != MSG_SIZE || resp->buf[0] != (uint8_t)(s->req.buf[0] + 1) ||
	    resp->buf[MSG_SIZE - 1] != s->req.buf[MSG_SIZE - 1])
		b->errors++;
}

static int run_both(struct bench *b)
{
	int ret = urpc_rpc_run_event_loop_once(b->cli);

	if (!ret)
		ret = urpc_rpc_run_event_loop_once(b->srv);
	return ret;
}

/* Connect the client to the server; both loops run until CONNECTED. */
static int connect_session(struct urpc_nexus *nx, struct bench *b)
{
	double deadline = now_s() + SETUP_MS / 1000.0;
	char hp[32];
	int ret;

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(nx));
	ret = urpc_session_connect(b->cli, hp, SRV_ID, &b->session);
	if (ret)
		return ret;
	while (!b->connected && !b->sm_failed && now_s() < deadline) {
		ret = run_both(b);
		if (ret)
			return ret;
	}
	if (b->sm_failed)
		return b->sm_status ? b->sm_status : -ECONNRESET;
	return b->connected ? 0 : -ETIMEDOUT;
}

/*
 * Keep @o->window requests outstanding until @o->count have completed.
 * Not inlined: cpu_cost_callgrind.sh counts the instructions inside it.
 */
__attribute__((noinline)) static int run(struct bench *b, const struct opts *o)
{
	unsigned long i;
	int ret;

	while (b->completed < o->count) {
		for (i = 0; i < o->window && b->issued < o->count; i++) {
			struct slot *s = &b->slots[i];

			if (s->busy)
				continue;
			memset(s->req.buf, (int)(b->issued & 0x7f), MSG_SIZE);
			s->busy = true;
			ret = urpc_req_enqueue(b->cli, b->session, REQ_TYPE, &s->req, &s->resp,
					       cont, s, 0);
			if (ret) {
				s->busy = false;
				/* back-pressure: the session's queue is full; poll, then retry */
				if (ret == -ENOMEM || ret == -EAGAIN)
					break;
				fprintf(stderr, "urpc-cpu-cost: enqueue: %s\n", urpc_strerror(ret));
				return ret;
			}
			b->issued++;
		}
		ret = run_both(b);
		if (ret)
			return ret;
	}
	return 0;
}

/* Close the session; pending requests fail and give their buffers back. */
static void disconnect_session(struct bench *b, unsigned long nslots)
{
	double deadline = now_s() + SETUP_MS / 1000.0;
	unsigned long i;
	bool busy = true;

	if (urpc_session_disconnect(b->cli, b->session))
		return;
	while ((busy || !b->disconnected) && now_s() < deadline) {
		if (run_both(b))
			return;
		busy = false;
		for (i = 0; i < nslots; i++)
			busy |= b->slots[i].busy;
	}
}

int main(int argc, char **argv)
{
	struct urpc_rpc_opts ro;
	struct urpc_rpc_stats cs, ss;
	struct urpc_nexus *nx;
	struct bench b = {0};
	struct opts o;
	unsigned long i, nslots = 0;
	double t0, secs;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;

	ret = urpc_nexus_create(NULL, &nx);
	if (ret) {
		fprintf(stderr, "urpc-cpu-cost: cannot create the Nexus: %s\n", urpc_strerror(ret));
		return 1;
	}
	ret = urpc_nexus_register_handler(nx, REQ_TYPE, handler, &b);
	if (ret) {
		fprintf(stderr, "urpc-cpu-cost: cannot register the handler: %s\n",
			urpc_strerror(ret));
		goto out_nexus;
	}

	/* Both Rpcs in this thread, over the loop transport. */
	urpc_rpc_opts_init(&ro);
	ro.transport = URPC_TRANSPORT_LOOP;
	/*
	 * The loop loses nothing, so retransmissions could only be spurious, and
	 * under callgrind (50x slower) they would be: keep the timers far away.
	 */
	ro.rto_us = 2000000;
	ro.rto_max_us = 4000000;
	ro.peer_timeout_ms = 600000;
	ro.connect_timeout_ms = SETUP_MS;
	ro.sm_handler = sm_event;
	ro.sm_arg = &b;
	ret = urpc_rpc_create(nx, SRV_ID, &ro, &b.srv);
	if (ret) {
		fprintf(stderr, "urpc-cpu-cost: cannot create the server Rpc: %s\n",
			urpc_strerror(ret));
		goto out_nexus;
	}
	ret = urpc_rpc_create(nx, CLI_ID, &ro, &b.cli);
	if (ret) {
		fprintf(stderr, "urpc-cpu-cost: cannot create the client Rpc: %s\n",
			urpc_strerror(ret));
		goto out_srv;
	}

	b.slots = calloc(o.window, sizeof(*b.slots));
	if (!b.slots) {
		fprintf(stderr, "urpc-cpu-cost: out of memory\n");
		goto out_cli;
	}
	for (nslots = 0; nslots < o.window; nslots++) {
		struct slot *s = &b.slots[nslots];

		s->b = &b;
		ret = urpc_msgbuf_alloc(b.cli, MSG_SIZE, &s->req);
		if (!ret) {
			ret = urpc_msgbuf_alloc(b.cli, MSG_SIZE, &s->resp);
			if (ret)
				urpc_msgbuf_free(b.cli, &s->req);
		}
		if (ret) {
			fprintf(stderr, "urpc-cpu-cost: cannot allocate buffers: %s\n",
				urpc_strerror(ret));
			goto out_slots;
		}
	}

	ret = connect_session(nx, &b);
	if (ret) {
		fprintf(stderr, "urpc-cpu-cost: cannot connect the client to the server: %s\n",
			urpc_strerror(ret));
		goto out_slots;
	}

	t0 = now_s();
	ret = run(&b, &o);
	secs = now_s() - t0;
	if (ret)
		goto out_session;
	if (b.errors || b.handler_errors) {
		fprintf(stderr,
			"urpc-cpu-cost: %lu failed or wrong responses, %lu handler errors\n",
			b.errors, b.handler_errors);
		goto out_session;
	}
	urpc_rpc_get_stats(b.cli, &cs);
	urpc_rpc_get_stats(b.srv, &ss);
	printf("urpc-cpu-cost: %lu RPCs of %d B, window %lu, in %.3f s: %.0f RPCs/s, "
	       "%.3f us per RPC (client and server on one core)\n",
	       o.count, MSG_SIZE, o.window, secs, (double)o.count / secs,
	       secs * 1e6 / (double)o.count);
	printf("urpc-cpu-cost: client sent %llu, received %llu, retransmitted %llu; "
	       "server handled %llu\n",
	       (unsigned long long)cs.reqs_sent, (unsigned long long)cs.resps_rx,
	       (unsigned long long)cs.retransmits, (unsigned long long)ss.reqs_handled);
	status = 0;

out_session:
	disconnect_session(&b, nslots);
out_slots:
	for (i = 0; i < nslots; i++) {
		if (b.slots[i].busy)
			continue; /* still lent to the engine: destroy will say -EBUSY */
		urpc_msgbuf_free(b.cli, &b.slots[i].req);
		urpc_msgbuf_free(b.cli, &b.slots[i].resp);
	}
	free(b.slots);
out_cli:
	if (urpc_rpc_destroy(b.cli))
		status = 1;
out_srv:
	if (urpc_rpc_destroy(b.srv))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
	return status;
}
