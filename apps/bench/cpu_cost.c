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
 * instructions per RPC without the setup cost; --transport udp or xdp puts
 * a transport's user-space work in the figure (xdp_cpu_cost.sh). Uses only
 * <urpc/urpc.h>.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"

#define PROG "urpc-cpu-cost"

#define MSG_SIZE 32
/* The session's slots take 8, its wait queue the rest: enqueue never refuses. */
#define MAX_WINDOW URPC_SESSION_MAX_WAITING

struct opts {
	unsigned long count;
	unsigned long window;
	bool copy; /* responses copied into a buffer (urpc_req_enqueue), not viewed */
	unsigned long cc_target_us;	    /* 0: congestion control off (the default) */
	enum urpc_transport_kind transport; /* loop (default), udp or xdp */
	const char *device, *server_device; /* xdp: the client's and the server's interface */
};

struct bench;

struct slot {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct bench *b;
	bool busy;
};

struct bench {
	struct bench_server sv; /* on this thread */
	struct urpc_rpc *srv;	/* sv.rpc */
	struct urpc_rpc *cli;
	int session;
	struct bench_sm sm; /* the client's sm_handler's counts */
	unsigned long nslots;
	unsigned long count; /* requests to send in all */
	unsigned long issued;
	unsigned long completed;
	int enqueue_err; /* the first refused enqueue, or 0 */
	unsigned long errors;
	unsigned long handler_errors;
	struct slot *slots;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-cpu-cost - CPU cost of small urpc RPCs, client and server on one core\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-cpu-cost [--count N] [--window W] [--copy] [--cc-target-us T]\n"
		"                  [--transport loop|udp|xdp] [--device IF] [--server-device IF]\n"
		"    urpc-cpu-cost --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this one thread, connected by one\n"
		"    session over the loop transport (in-process rings, no kernel), so that\n"
		"    everything measured is the engine's own work: the client's enqueue, TX\n"
		"    and RX, the server's RX, handler dispatch and response, and the\n"
		"    client's continuation. The client keeps W requests of %d bytes\n"
		"    outstanding until N have completed, and checks every %d-byte response;\n"
		"    each continuation sends the next request, as a closed-loop client does;\n"
		"    the server's handler echoes the request with its first byte changed,\n"
		"    as little as an application could do. Both sides run on the same\n"
		"    core, so the time per RPC is the CPU cost of both. The client reads\n"
		"    each response where it arrived (urpc_req_enqueue_view), unless\n"
		"    --copy asks for the copy into a response buffer of its own.\n"
		"\n"
		"    The loop loses nothing, so the retransmission and failure timers are\n"
		"    kept far off (2 s and 600 s): under callgrind, 50 times slower, they\n"
		"    would otherwise fire spuriously.\n"
		"\n"
		"    cpu_cost_callgrind.sh, next to this program, runs it under callgrind\n"
		"    at two counts and counts only the instructions inside its run()\n"
		"    function (the RPCs, not set-up, connect or teardown): instructions per\n"
		"    RPC, a figure that does not depend on the machine's speed or load.\n"
		"\n"
		"OPTIONS\n"
		"    -n, --count N\n"
		"        RPCs to run, 1 to 4000000000 (default 1000000).\n"
		"    -w, --window W\n"
		"        Requests outstanding at once, 1 to %d (default 8): beyond the\n"
		"        session's 8 slots they wait in its queue.\n"
		"    -c, --copy\n"
		"        Send with urpc_req_enqueue() and a %d-byte response buffer per\n"
		"        request, which the engine copies each response into, instead of\n"
		"        reading the response in the receive ring.\n"
		"    -t, --cc-target-us T\n"
		"        Run the client with congestion control (Swift) and a delay target\n"
		"        of T us, 1 to 100000 (default: off, the library's default). The\n"
		"        last line gives the session's rate, round trip and pacing.\n"
		"    --transport loop|udp|xdp\n"
		"        The transport between the two Rpcs (default loop). udp and xdp\n"
		"        add their transport's user-space work: kernel sockets, or AF_XDP\n"
		"        frames between --device (the client's, on the Nexus's address,\n"
		"        URPC_BENCH_HOST) and --server-device (the server's), as\n"
		"        xdp_cpu_cost.sh runs it in a network namespace.\n"
		"    --device IF, --server-device IF\n"
		"        xdp: the client's and the server's interfaces.\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    Two lines on stdout: the RPCs, their size, the window, the seconds\n"
		"    they took, RPCs per second and microseconds per RPC; then the\n"
		"    requests the client sent, the responses it received and its\n"
		"    retransmissions (0 when the timers stayed off), and the requests the\n"
		"    server handled.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step fails or an RPC fails or comes back\n"
		"    wrong; 2 on bad usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-cpu-cost --count 2000000 --window 16\n"
		"    cpu_cost_callgrind.sh build/apps/bench/urpc-cpu-cost\n",
		MSG_SIZE, MSG_SIZE, MAX_WINDOW, MSG_SIZE);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_tp(const char *prog, const char *val, void *dst)
{
	return urpc_app_parse_transport(prog, val,
					(1u << URPC_TRANSPORT_LOOP) | (1u << URPC_TRANSPORT_UDP) |
						(1u << URPC_TRANSPORT_XDP),
					"loop, udp or xdp", "", dst);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_ULONG("count", 'n', &o->count, 1, 4000000000ul)},
		{URPC_APP_ULONG("window", 'w', &o->window, 1, MAX_WINDOW)},
		{URPC_APP_TRUE("copy", 'c', &o->copy)},
		{URPC_APP_ULONG("cc-target-us", 't', &o->cc_target_us, 1, 100000)},
		{URPC_APP_FN("transport", 0, &o->transport, parse_tp)},
		{URPC_APP_STR("device", 0, &o->device)},
		{URPC_APP_STR("server-device", 0, &o->server_device)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts)};

	o->count = 1000000;
	o->window = 8;
	o->copy = false;
	o->cc_target_us = 0;
	o->transport = URPC_TRANSPORT_LOOP;
	o->device = o->server_device = NULL;
	return urpc_app_parse_args(&cl, argc, argv, NULL);
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

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);
static void cont_copy(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/*
 * Send the next request from slot @s: fill its payload and enqueue it, for
 * a response read in place or, with @copy (--copy), copied into the slot's
 * buffer. The engine takes requests beyond its slots into the session's
 * wait queue, so with a window of at most that queue plus the slots it
 * never refuses one; a refusal stops the run with its error. Inline into
 * one function per mode: the mode costs no test per RPC.
 */
static inline __attribute__((always_inline)) void issue_as(struct bench *b, struct slot *s,
							   bool copy)
{
	int ret;

	memset(s->req.buf, (int)(b->issued & 0x7f), MSG_SIZE);
	s->busy = true;
	if (copy)
		ret = urpc_req_enqueue(b->cli, b->session, BENCH_REQ_TYPE, &s->req, &s->resp,
				       cont_copy, s, 0);
	else
		ret = urpc_req_enqueue_view(b->cli, b->session, BENCH_REQ_TYPE, &s->req, cont, s,
					    0);
	if (ret) {
		s->busy = false;
		if (!b->enqueue_err)
			b->enqueue_err = ret;
		return;
	}
	b->issued++;
}

static void issue(struct bench *b, struct slot *s)
{
	issue_as(b, s, false);
}

static void issue_copy(struct bench *b, struct slot *s)
{
	issue_as(b, s, true);
}

/*
 * Client: count the RPC (a failed or wrong response is an error: @resp is
 * a view of the response valid only here, or with @copy the slot's
 * buffer) and send the slot's next request from here, as a closed-loop
 * client does: the window refills without any scan of the slots.
 */
static inline __attribute__((always_inline)) void cont_as(void *tag, int status,
							  const struct urpc_msgbuf *resp, bool copy)
{
	struct slot *s = tag;
	struct bench *b = s->b;

	s->busy = false;
	b->completed++;
	if (status || resp->data_size != MSG_SIZE || resp->buf[0] != (uint8_t)(s->req.buf[0] + 1) ||
	    resp->buf[MSG_SIZE - 1] != s->req.buf[MSG_SIZE - 1])
		b->errors++;
	if (b->issued < b->count && !b->enqueue_err) {
		if (copy)
			issue_copy(b, s);
		else
			issue(b, s);
	}
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	cont_as(tag, status, resp, false);
}

static void cont_copy(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	cont_as(tag, status, resp, true);
}

static int run_both(struct bench *b)
{
	int ret = urpc_rpc_run_event_loop_once(b->cli);

	if (!ret)
		ret = urpc_rpc_run_event_loop_once(b->srv);
	return ret;
}

/*
 * Keep @o->window requests outstanding until @o->count have completed:
 * fill the window, then poll both Rpcs; continuations send the rest.
 * Not inlined: cpu_cost_callgrind.sh counts the instructions inside it.
 */
__attribute__((noinline)) static int run(struct bench *b, const struct opts *o)
{
	unsigned long i;
	int ret;

	b->count = o->count;
	for (i = 0; i < o->window && b->issued < o->count; i++)
		if (o->copy)
			issue_copy(b, &b->slots[i]);
		else
			issue(b, &b->slots[i]);
	while (b->completed < o->count && !b->enqueue_err) {
		ret = run_both(b);
		if (ret)
			return ret;
	}
	if (b->enqueue_err) {
		fprintf(stderr, PROG ": enqueue: %s\n", urpc_strerror(b->enqueue_err));
		return b->enqueue_err;
	}
	return 0;
}

/* Requests still lent to the engine. */
static bool any_busy(const void *arg)
{
	const struct bench *b = arg;
	unsigned long i;

	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].busy)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct urpc_rpc_opts ro;
	struct urpc_rpc_stats cs, ss;
	struct urpc_nexus *nx;
	struct bench b = {0};
	struct opts o;
	unsigned long i;
	double t0, secs;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (bench_nexus_open(PROG, handler, &b, &nx))
		return 1;

	/* Both Rpcs in this thread, over the loop transport (or --transport). */
	urpc_rpc_opts_init(&ro);
	ro.transport = o.transport;
	/*
	 * The loop loses nothing, so retransmissions could only be spurious, and
	 * under callgrind (50x slower) they would be: keep the timers far away.
	 */
	ro.rto_us = 2000000;
	ro.rto_max_us = 4000000;
	ro.peer_timeout_ms = 600000;
	ro.connect_timeout_ms = (uint32_t)(BENCH_SETUP_S * 1000);
	if (o.cc_target_us) {
		ro.cc_algo = URPC_CC_SWIFT;
		ro.cc_target_us = (uint32_t)o.cc_target_us;
	}
	b.sv.nx = nx;
	b.sv.ro = ro;
	b.sv.ro.device = o.server_device;
	if (bench_rpcs_create(PROG, &b.sv, &ro, o.device, &b.sm, urpc_transport_str(o.transport),
			      urpc_transport_str(o.transport), &b.cli))
		goto out_nexus;
	b.srv = b.sv.rpc;

	b.slots = calloc(o.window, sizeof(*b.slots));
	if (!b.slots) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_cli;
	}
	for (b.nslots = 0; b.nslots < o.window; b.nslots++) {
		struct slot *s = &b.slots[b.nslots];

		s->b = &b;
		ret = urpc_msgbuf_alloc(b.cli, MSG_SIZE, &s->req);
		if (!ret) {
			ret = urpc_msgbuf_alloc(b.cli, MSG_SIZE, &s->resp);
			if (ret)
				urpc_msgbuf_free(b.cli, &s->req);
		}
		if (ret) {
			fprintf(stderr, PROG ": cannot allocate buffers: %s\n", urpc_strerror(ret));
			goto out_slots;
		}
	}

	ret = bench_connect(PROG, b.cli, &b.sv, &b.sm, &b.session, 1);
	if (ret) {
		fprintf(stderr, PROG ": cannot connect the client to the server: %s\n",
			urpc_strerror(ret));
		goto out_slots;
	}

	t0 = bench_now_s();
	ret = run(&b, &o);
	secs = bench_now_s() - t0;
	if (ret)
		goto out_session;
	if (b.errors || b.handler_errors) {
		fprintf(stderr, PROG ": %lu failed or wrong responses, %lu handler errors\n",
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
	bench_print_session_stats(PROG, b.cli, b.session);
	status = 0;

out_session:
	/* Close the session; pending requests fail and give their buffers back. */
	if (!urpc_session_disconnect(b.cli, b.session))
		bench_drain(PROG, b.cli, &b.sv, &b.sm, 1, any_busy, &b);
out_slots:
	for (i = 0; i < b.nslots; i++) {
		if (b.slots[i].busy)
			continue; /* still lent to the engine: destroy will say -EBUSY */
		urpc_msgbuf_free(b.cli, &b.slots[i].req);
		urpc_msgbuf_free(b.cli, &b.slots[i].resp);
	}
	free(b.slots);
out_cli:
	if (urpc_rpc_destroy(b.cli))
		status = 1;
	if (bench_server_stop(PROG, &b.sv))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
	return status;
}
