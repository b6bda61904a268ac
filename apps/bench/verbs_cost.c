/* SPDX-License-Identifier: MIT */
/*
 * urpc-verbs-cost: one side (server or client) of a small-RPC run whose
 * instructions callgrind counts, each side in a process of its own, as
 * verbs_cost_vm.sh runs them on Soft-RoCE. Its counted parts are three
 * functions that callgrind's --toggle-collect names: count_idle() (empty
 * event-loop passes, before any session), count_serve() (the server's
 * passes from the first counted request to the pass that answers the
 * last) and count_run() (the client's passes from the first counted
 * request to the last continuation). Each counts its passes and those in
 * which the application saw work, and prints them, so that the script can
 * take the empty passes out of the figure. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"

#define PROG "urpc-verbs-cost"
#define MSG_SIZE 32
#define MAX_WINDOW 8 /* the session's slots: nothing waits in its queue */

struct opts {
	const char *connect; /* --connect HOST:PORT: the client; else the server */
	bool serve;
	bool idle_only; /* --idle-only: count_idle() alone, then exit */
	bool linger;	/* --linger: the client waits for SIGTERM before it disconnects */
	unsigned long port;
	unsigned long count, warmup, window, idle_passes, max_s;
	const char *device;
};

struct side;

struct slot {
	struct urpc_msgbuf req;
	struct side *sd;
};

struct side {
	struct urpc_rpc *rpc;
	int session;
	struct bench_sm sm;
	struct slot slot[MAX_WINDOW];
	unsigned long window;
	unsigned long target;	    /* the client issues requests until it has issued this many */
	unsigned long issued, done; /* requests issued; completions (client) or handled (server) */
	unsigned long errors;
	int enqueue_err;
	unsigned long passes, busy; /* of the last counted function */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-verbs-cost - one side of a small-RPC run counted by callgrind\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-verbs-cost --serve [--port PORT] [--device DEV] [--count N]\n"
		"                    [--warmup W] [--idle-passes P] [--max-seconds S]\n"
		"    urpc-verbs-cost --serve --idle-only [--device DEV] [--idle-passes P]\n"
		"    urpc-verbs-cost --connect HOST:PORT [--device DEV] [--count N]\n"
		"                    [--warmup W] [--window W] [--idle-passes P] [--linger]\n"
		"    urpc-verbs-cost --help\n"
		"\n"
		"DESCRIPTION\n"
		"    The server echoes %d-byte requests; the client keeps --window of them\n"
		"    outstanding, each continuation sending its slot's next request, both\n"
		"    busy-polling with urpc_rpc_run_event_loop_once(), heartbeats a minute\n"
		"    apart and retransmission timers seconds away (callgrind under TCG is\n"
		"    slow). Each side runs P empty passes before it has a session\n"
		"    (count_idle()), then W warm-up RPCs, then N counted ones\n"
		"    (count_serve(), count_run()), then P empty passes with the session\n"
		"    still open (count_idle() again). The server then serves until SIGTERM\n"
		"    (or --max-seconds); the client disconnects and exits, or with --linger\n"
		"    waits for SIGTERM first, so that neither side's session ends while\n"
		"    the other still counts. All counted functions spin in one loop\n"
		"    (spin()): an empty pass costs the same in each. Run each side under\n"
		"    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=F\n"
		"    --dump-after=F for each counted function F; verbs_cost_vm.sh does.\n"
		"    The transport is URPC_TRANSPORT's (verbs in the VM).\n"
		"\n"
		"OPTIONS\n"
		"    --serve            run the server (Rpc id %d) until SIGTERM or --max-seconds\n"
		"    --connect HOST:PORT  run the client against that server's Nexus\n"
		"    --idle-only        --serve: count the empty passes, then exit\n"
		"    --port PORT        --serve: session-management UDP port, 0 any (default 31870)\n"
		"    --device DEV       the RDMA device (rxe0, rxe1); default URPC_DEVICE\n"
		"    --count N          counted RPCs, 1 to 10000000 (default 2000)\n"
		"    --warmup W         RPCs before them, 0 to 10000000 (default 200)\n"
		"    --window W         client: requests outstanding, 1 to %d (default 1)\n"
		"    --idle-passes P    empty passes counted first, 1 to 100000000 (default 20000)\n"
		"    --linger           client: wait for SIGTERM (or --max-seconds) before it\n"
		"                       disconnects\n"
		"    --max-seconds S    stop serving, or lingering, after S seconds (default 900)\n"
		"    -h, --help         show this help\n"
		"\n"
		"OUTPUT\n"
		"    Lines 'urpc-verbs-cost: FUNCTION passes P busy B rpcs N' for each\n"
		"    counted function in turn (count_idle, count_serve or count_run, then\n"
		"    count_idle_after; busy: passes in which a request was handled or a\n"
		"    continuation ran), then the side's counters.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a step fails; 2 on bad usage.\n",
		MSG_SIZE, BENCH_SRV_ID, MAX_WINDOW);
}

/* Server: echo the request (the application's least possible work). */
static void handler(struct urpc_req_handle *h, void *arg)
{
	struct side *sd = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	memcpy(resp->buf, d, len);
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		sd->errors++;
	sd->done++;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

static void issue(struct side *sd, struct slot *sl)
{
	int ret;

	memset(sl->req.buf, (int)(sd->issued & 0x7f), MSG_SIZE);
	ret = urpc_req_enqueue_view(sd->rpc, sd->session, BENCH_REQ_TYPE, &sl->req, cont, sl, 0);
	if (ret) {
		if (!sd->enqueue_err)
			sd->enqueue_err = ret;
		return;
	}
	sd->issued++;
}

/* Client: count, check the echo, and send this slot's next request. */
static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct slot *sl = tag;
	struct side *sd = sl->sd;

	(void)rpc;
	sd->done++;
	if (status || resp->data_size != MSG_SIZE || resp->buf[0] != sl->req.buf[0])
		sd->errors++;
	if (sd->issued < sd->target && !sd->enqueue_err)
		issue(sd, sl);
}

/*
 * Passes until @until completions (or @maxp passes), counting them and
 * those in which the application saw work. Every counted function spins
 * here, so that an empty pass costs the same instructions in each.
 */
__attribute__((noinline)) static void spin(struct side *sd, unsigned long until, unsigned long maxp)
{
	unsigned long last = sd->done;

	sd->passes = sd->busy = 0;
	while (sd->passes < maxp && sd->done < until && !sd->enqueue_err && !stop) {
		urpc_rpc_run_event_loop_once(sd->rpc);
		sd->passes++;
		if (sd->done != last) {
			last = sd->done;
			sd->busy++;
		}
	}
}

/*
 * The counted functions must stay on the stack while spin() runs: a tail
 * call would leave them (and end callgrind's collection) at once.
 */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

/* @p empty passes. Counted by callgrind. */
__attribute__((noinline)) static void count_idle(struct side *sd, unsigned long p)
{
	spin(sd, ULONG_MAX, p);
	NO_TAIL_CALL();
}

/* Server: passes until @until requests have been handled. Counted by callgrind. */
__attribute__((noinline)) static void count_serve(struct side *sd, unsigned long until)
{
	spin(sd, until, ULONG_MAX);
	NO_TAIL_CALL();
}

/* Client: issue the window, then pass until @n more RPCs completed. */
static void client_run(struct side *sd, unsigned long n)
{
	unsigned long i;

	sd->target = sd->issued + n;
	for (i = 0; i < sd->window && sd->issued < sd->target; i++)
		issue(sd, &sd->slot[i]);
	spin(sd, sd->done + n, ULONG_MAX);
}

/* client_run(), counted by callgrind. */
__attribute__((noinline)) static void count_run(struct side *sd, unsigned long n)
{
	client_run(sd, n);
	NO_TAIL_CALL();
}

/* Run until SIGTERM (or @deadline): the script stops both sides once both have counted. */
static void linger(struct side *sd, double deadline)
{
	while (!stop && bench_now_s() < deadline)
		urpc_rpc_run_event_loop(sd->rpc, 10);
}

static void report(const char *fn, const struct side *sd, unsigned long rpcs)
{
	printf(PROG ": %s passes %lu busy %lu rpcs %lu\n", fn, sd->passes, sd->busy, rpcs);
}

static void rpc_opts(struct urpc_rpc_opts *ro, const struct opts *o, struct side *sd)
{
	urpc_rpc_opts_init(ro);
	ro->device = o->device;
	ro->idle_block_us = 0; /* busy-poll */
	/* Nothing is lost on the veth: keep the timers away from a slow callgrind run. */
	ro->rto_us = 2000000;
	ro->rto_max_us = 4000000;
	ro->ping_interval_ms = 60000; /* heartbeats off for the count */
	ro->peer_timeout_ms = 600000;
	ro->connect_timeout_ms = 120000;
	ro->sm_handler = bench_sm_event;
	ro->sm_arg = &sd->sm;
}

static int run_server(const struct opts *o)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts ro;
	struct urpc_rpc_stats st;
	struct urpc_nexus *nx;
	struct side sd = {0};
	double deadline;
	int ret, status = 1;

	urpc_nexus_opts_init(&no);
	no.host = bench_host();
	no.port = (uint16_t)o->port;
	ret = urpc_nexus_create(&no, &nx);
	if (ret) {
		fprintf(stderr, PROG ": cannot create the Nexus on port %lu: %s\n", o->port,
			urpc_strerror(ret));
		return 1;
	}
	ret = urpc_nexus_register_handler(nx, BENCH_REQ_TYPE, handler, &sd);
	if (!ret) {
		rpc_opts(&ro, o, &sd);
		ret = urpc_rpc_create(nx, BENCH_SRV_ID, &ro, &sd.rpc);
	}
	if (ret) {
		fprintf(stderr, PROG ": cannot create the server Rpc: %s\n", urpc_strerror(ret));
		goto out_nexus;
	}
	count_idle(&sd, o->idle_passes);
	report("count_idle", &sd, 0);
	if (o->idle_only) {
		status = 0;
		goto out_rpc;
	}
	printf(PROG ": serving on port %u\n", urpc_nexus_port(nx));
	fflush(stdout);
	deadline = bench_now_s() + (double)o->max_s;
	while (sd.done < o->warmup && !stop && bench_now_s() < deadline)
		urpc_rpc_run_event_loop_once(sd.rpc);
	if (sd.done >= o->warmup && !stop) {
		count_serve(&sd, o->warmup + o->count);
		report("count_serve", &sd, sd.done - o->warmup);
		count_idle(&sd, o->idle_passes);
		report("count_idle_after", &sd, 0);
	}
	linger(&sd, deadline);
	urpc_rpc_get_stats(sd.rpc, &st);
	printf(PROG ": server handled %llu, errors %lu\n", (unsigned long long)st.reqs_handled,
	       sd.errors);
	status = sd.done >= o->warmup + o->count && !sd.errors ? 0 : 1;
	if (status)
		fprintf(stderr, PROG ": server handled %lu of %lu requests\n", sd.done,
			o->warmup + o->count);
out_rpc:
	if (urpc_rpc_destroy(sd.rpc))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
	return status;
}

static int run_client(const struct opts *o)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts ro;
	struct urpc_rpc_stats st;
	struct urpc_nexus *nx;
	struct side sd = {0};
	unsigned long i;
	double deadline;
	int ret, status = 1;

	urpc_nexus_opts_init(&no);
	no.host = bench_host();
	ret = urpc_nexus_create(&no, &nx);
	if (ret) {
		fprintf(stderr, PROG ": cannot create the Nexus: %s\n", urpc_strerror(ret));
		return 1;
	}
	rpc_opts(&ro, o, &sd);
	ret = urpc_rpc_create(nx, BENCH_CLI_ID, &ro, &sd.rpc);
	if (ret) {
		fprintf(stderr, PROG ": cannot create the client Rpc: %s\n", urpc_strerror(ret));
		goto out_nexus;
	}
	sd.window = o->window;
	for (i = 0; i < sd.window; i++) {
		sd.slot[i].sd = &sd;
		ret = urpc_msgbuf_alloc(sd.rpc, MSG_SIZE, &sd.slot[i].req);
		if (ret) {
			fprintf(stderr, PROG ": cannot allocate buffers: %s\n", urpc_strerror(ret));
			goto out_bufs;
		}
	}
	count_idle(&sd, o->idle_passes);
	report("count_idle", &sd, 0);
	ret = urpc_session_connect(sd.rpc, o->connect, BENCH_SRV_ID, &sd.session);
	if (ret) {
		fprintf(stderr, PROG ": --connect %s: %s\n", o->connect, urpc_strerror(ret));
		goto out_bufs;
	}
	deadline = bench_now_s() + 120;
	while (!sd.sm.connected && !sd.sm.failed && !stop && bench_now_s() < deadline)
		urpc_rpc_run_event_loop(sd.rpc, 10);
	if (!sd.sm.connected) {
		fprintf(stderr, PROG ": cannot connect to %s: %s\n", o->connect,
			sd.sm.failed ? urpc_strerror(sd.sm.status) : "timed out");
		goto out_bufs;
	}
	if (o->warmup)
		client_run(&sd, o->warmup);
	count_run(&sd, o->count);
	report("count_run", &sd, o->count);
	count_idle(&sd, o->idle_passes);
	report("count_idle_after", &sd, 0);
	urpc_rpc_get_stats(sd.rpc, &st);
	printf(PROG ": client window %lu sent %llu, received %llu, retransmitted %llu, errors "
		    "%lu\n",
	       sd.window, (unsigned long long)st.reqs_sent, (unsigned long long)st.resps_rx,
	       (unsigned long long)st.retransmits, sd.errors);
	status = sd.errors || sd.enqueue_err || sd.done < o->warmup + o->count ? 1 : 0;
	if (sd.enqueue_err)
		fprintf(stderr, PROG ": enqueue: %s\n", urpc_strerror(sd.enqueue_err));
	if (o->linger)
		linger(&sd, bench_now_s() + (double)o->max_s);
	if (!urpc_session_disconnect(sd.rpc, sd.session)) {
		deadline = bench_now_s() + 30;
		while (!sd.sm.disconnected && bench_now_s() < deadline)
			urpc_rpc_run_event_loop(sd.rpc, 10);
	}
out_bufs:
	for (i = 0; i < sd.window; i++)
		if (sd.slot[i].req.buf)
			urpc_msgbuf_free(sd.rpc, &sd.slot[i].req);
	if (urpc_rpc_destroy(sd.rpc))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
	return status;
}

int main(int argc, char **argv)
{
	struct opts o = {.port = 31870,
			 .count = 2000,
			 .warmup = 200,
			 .window = 1,
			 .idle_passes = 20000,
			 .max_s = 900};
	const struct urpc_app_opt tab[] = {
		{URPC_APP_TRUE("serve", 0, &o.serve)},
		{URPC_APP_STR("connect", 0, &o.connect)},
		{URPC_APP_TRUE("idle-only", 0, &o.idle_only)},
		{URPC_APP_TRUE("linger", 0, &o.linger)},
		{URPC_APP_ULONG("port", 0, &o.port, 0, 65535)},
		{URPC_APP_STR("device", 0, &o.device)},
		{URPC_APP_ULONG("count", 'n', &o.count, 1, 10000000)},
		{URPC_APP_ULONG("warmup", 0, &o.warmup, 0, 10000000)},
		{URPC_APP_ULONG("window", 'w', &o.window, 1, MAX_WINDOW)},
		{URPC_APP_ULONG("idle-passes", 0, &o.idle_passes, 1, 100000000)},
		{URPC_APP_ULONG("max-seconds", 0, &o.max_s, 1, 86400)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, tab)};
	int ret;

	ret = urpc_app_parse_args(&cl, argc, argv, NULL);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (o.serve == (o.connect != NULL)) {
		fprintf(stderr, PROG ": give exactly one of --serve and --connect HOST:PORT (see "
				     "--help)\n");
		return 2;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return o.serve ? run_server(&o) : run_client(&o);
}
