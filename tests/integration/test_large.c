/* SPDX-License-Identifier: MIT */
/*
 * Large messages end to end, through the public API: requests and
 * responses above one datagram move by one-sided READ against the sender's
 * buffer. Built once per transport (LARGE_KIND / LARGE_NAME from CMake):
 * loop and udp here, verbs on Soft-RoCE in tests/vm (client on
 * URPC_TEST_DEVICE_A, server on URPC_TEST_DEVICE_B).
 *
 * The echo handler answers byte ^ 0x5a for every request byte, from the
 * slot's buffer when the answer fits a datagram and from a buffer of its
 * own (handed to the library) when it does not. Every request carries its
 * id in its first 8 bytes; the handler counts its runs per id.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h"
#include "transport/loop_hooks.h"
#include "transport/transport.h"
#include "transport/udp.h"
#include "util/log.h"
#include "verbs_skip.h"

#ifndef LARGE_KIND
#error "build with -DLARGE_KIND=URPC_TRANSPORT_<KIND> -DLARGE_NAME=<suite>"
#endif

#define T_ECHO 1
#define T_VIEW 2  /* answers with a view of the server's own array */
#define T_DEFER 3 /* checks the request, answers later (W.deferred) */
#define T_SHORT 4 /* checks the request, answers its 8-byte id */
#define VIEW_LEN (1u << 20)
#define MAX_IDS 4096
#define WAIT_NS 60000000000ull
/*
 * Bulk transfers are bounded by progress, not by a total: they fail when
 * nothing moved for STALL_NS. On a loaded host (Soft-RoCE beside other
 * work moved under 1 MB/s) 64 MiB each way took longer than any total
 * that was not absurd, while a stalled transfer shows in one interval.
 */
#define STALL_NS 60000000000ull

struct call {
	struct urpc_msgbuf req, resp;
	uint64_t id;
	size_t len;
	int status;
	unsigned runs;
	bool busy;
	bool realloc_in_cont; /* free both buffers in the continuation and make new ones */
	uint8_t type;	      /* the request type; 0: T_ECHO */
};

struct world {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	unsigned handler_runs[MAX_IDS];
	unsigned handler_errors;
	unsigned cont_runs;
	struct urpc_req_handle *deferred; /* T_DEFER's request, not answered yet */
	bool drop_ack;			  /* T_DEFER: lose what the server sends next (loop) */
};

static struct world W;

static uint8_t pat(uint64_t id, size_t i)
{
	return (uint8_t)((i * 2654435761u + id * 40503u) >> 11);
}

/* Count a run of the request's id and check its bytes against the pattern. */
static void note_request(struct world *w, const uint8_t *d, size_t len)
{
	uint64_t id = 0;
	size_t i;

	if (len >= 8)
		memcpy(&id, d, 8);
	if (id < MAX_IDS)
		w->handler_runs[id]++;
	else
		w->handler_errors++;
	for (i = 8; i < len; i++)
		if (d[i] != pat(id, i)) {
			w->handler_errors++;
			break;
		}
}

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct urpc_msgbuf own, *resp;
	const uint8_t *d;
	size_t len, i;

	d = urpc_req_data(h, &len);
	note_request(w, d, len);
	if (len <= urpc_rpc_max_msg_size(rpc)) {
		resp = urpc_req_resp_msgbuf(h);
	} else {
		if (urpc_msgbuf_alloc(rpc, len, &own)) {
			w->handler_errors++;
			return;
		}
		resp = &own;
	}
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0x5a;
	urpc_msgbuf_resize(resp, len);
	if (urpc_resp_enqueue(h, resp))
		w->handler_errors++;
	if (resp == &own && own.buf)
		w->handler_errors++; /* the library must have taken it */
}

static void short_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	note_request(w, d, len);
	memcpy(resp->buf, d, 8);
	urpc_msgbuf_resize(resp, 8);
	if (urpc_resp_enqueue(h, resp))
		w->handler_errors++;
}

/* The server's array that T_VIEW answers with, zero-copy. */
static uint8_t *srv_array;

static void view_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_msgbuf view;

	if (urpc_msgbuf_register(urpc_req_rpc(h), srv_array, VIEW_LEN, URPC_MEM_PEER_READS,
				 &view) ||
	    urpc_resp_enqueue(h, &view) || view.buf)
		w->handler_errors++;
}

/* Check the request as the echo handler does; answer when the test says so. */
static void defer_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	note_request(w, d, len);
	w->deferred = h;
	if (w->drop_ack) {
		struct urpc_loop_faults f = {.drop = 1.0};

		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(urpc_req_rpc(h)), &f), 0);
	}
}

static void start(struct call *c);

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->status = status;
	c->runs++;
	c->busy = false;
	W.cont_runs++;
	if (c->realloc_in_cont && !status) {
		/* Buffers are the application's again: free, allocate, resend. */
		c->realloc_in_cont = false;
		cr_assert_eq(urpc_msgbuf_free(rpc, &c->req), 0);
		cr_assert_eq(urpc_msgbuf_free(rpc, &c->resp), 0);
		c->id += MAX_IDS / 2;
		start(c);
	}
}

/*
 * @seed fixes what loop's fault switches decide (0 would draw it at random):
 * a case that turns them on then loses the same datagrams in every run.
 */
static void opts_for(struct urpc_rpc_opts *o, const char *device_env, uint64_t seed)
{
	urpc_rpc_opts_init(o);
	o->transport = LARGE_KIND;
	o->device = getenv(device_env);
	o->seed = seed;
	o->rto_us = 20000; /* a large READ takes a while on an emulated NIC */
	o->peer_timeout_ms = 5000;
	o->ping_interval_ms = 200;
	/*
	 * Soft-RoCE in a TCG guest beside two CPU hogs (tests/stress.sh) has
	 * left a 1 MiB response unread for more than the default's 1 s plus
	 * 1 s a MiB, and the server revoked it as it must (docs/SECURITY.md):
	 * no case here is about that time-out, so the emulated NIC gets 10 s.
	 */
	if (LARGE_KIND == URPC_TRANSPORT_VERBS)
		o->one_sided_timeout_ms = 10000;
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
}

static void world_up(void)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	char hp[64];
	uint64_t end;
	int st = 1;

	verbs_skip_without_port(LARGE_KIND);
	memset(&W, 0, sizeof(W));
	urpc_nexus_opts_init(&no);
	no.host = test_host();
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, &W), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_VIEW, view_handler, &W), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_DEFER, defer_handler, &W), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_SHORT, short_handler, &W), 0);
	opts_for(&o, "URPC_TEST_DEVICE_B", 1);
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	opts_for(&o, "URPC_TEST_DEVICE_A", 2);
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.cli), 0);
	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.cli, hp, 1, &W.sess), 0);
	/* Connected once a tiny request comes back. */
	{
		struct call c = {.id = MAX_IDS - 1, .len = 16};

		start(&c);
		end = urpc__now_ns() + WAIT_NS;
		while (c.busy && urpc__now_ns() < end)
			pump();
		st = c.status;
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c.resp), 0);
	}
	cr_assert_eq(st, 0, "first request: %s", urpc_strerror(st));
}

static void world_down(void)
{
	if (W.cli)
		cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	if (W.srv)
		cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
	cr_assert_eq(W.handler_errors, 0, "the handler saw %u bad requests", W.handler_errors);
}

static void start(struct call *c)
{
	size_t i;
	int ret;

	cr_assert_eq(urpc_msgbuf_alloc(W.cli, c->len < 8 ? 8 : c->len, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, c->len < 8 ? 8 : c->len, &c->resp), 0);
	urpc_msgbuf_resize(&c->req, c->len);
	memcpy(c->req.buf, &c->id, c->len < 8 ? c->len : 8);
	for (i = 8; i < c->len; i++)
		c->req.buf[i] = pat(c->id, i);
	c->busy = true;
	c->status = 1;
	c->runs = 0;
	ret = urpc_req_enqueue(W.cli, W.sess, c->type ? c->type : T_ECHO, &c->req, &c->resp, cont,
			       c, 0);
	cr_assert_eq(ret, 0, "enqueue of %zu bytes: %s", c->len, urpc_strerror(ret));
}

/* The echo of @c's request, byte for byte. */
static void check(const struct call *c)
{
	size_t i;

	cr_assert_eq(c->status, 0, "request %lu (%zu bytes): %s", (unsigned long)c->id, c->len,
		     urpc_strerror(c->status));
	cr_assert_eq(c->runs, 1, "continuation of %lu ran %u times", (unsigned long)c->id, c->runs);
	cr_assert_eq(c->resp.data_size, c->len, "response of %lu: %zu bytes, want %zu",
		     (unsigned long)c->id, c->resp.data_size, c->len);
	for (i = 0; i < c->len; i++)
		cr_assert_eq(c->resp.buf[i], (uint8_t)(c->req.buf[i] ^ 0x5a),
			     "request %lu (%zu bytes): byte %zu corrupted", (unsigned long)c->id,
			     c->len, i);
}

/*
 * What has moved so far, on both sides: pieces of one-sided transfers
 * done, handlers run, responses and acknowledgements taken. Retransmissions
 * and heartbeats are not progress.
 */
static uint64_t moved(void)
{
	struct urpc_rpc_stats s, c;

	cr_assert_eq(urpc_rpc_get_stats(W.srv, &s), 0);
	cr_assert_eq(urpc_rpc_get_stats(W.cli, &c), 0);
	return s.os_progress + s.reqs_handled + c.os_progress + c.resps_rx + c.acks_rx;
}

struct watchdog {
	uint64_t mark;	   /* moved() when last seen to change */
	uint64_t stall_at; /* when the transfer counts as stalled */
};

static void watchdog_start(struct watchdog *w)
{
	w->mark = moved();
	w->stall_at = urpc__now_ns() + STALL_NS;
}

/* Fails the test when nothing moved for STALL_NS. */
static void watchdog_check(struct watchdog *w, const char *what)
{
	uint64_t m = moved(), now = urpc__now_ns();

	if (m != w->mark) {
		w->mark = m;
		w->stall_at = now + STALL_NS;
		return;
	}
	cr_assert_lt(now, w->stall_at, "%s: nothing moved for %llu s", what,
		     (unsigned long long)(STALL_NS / 1000000000ull));
}

static void run_calls(struct call *calls, unsigned n)
{
	struct watchdog w;
	unsigned i, busy;

	for (i = 0; i < n; i++)
		start(&calls[i]);
	watchdog_start(&w);
	do {
		watchdog_check(&w, "large requests did not complete");
		pump();
		for (busy = 0, i = 0; i < n; i++)
			busy += calls[i].busy;
	} while (busy);
	for (i = 0; i < n; i++) {
		check(&calls[i]);
		cr_assert_eq(W.handler_runs[calls[i].id], 1, "handler of %lu ran %u times",
			     (unsigned long)calls[i].id, W.handler_runs[calls[i].id]);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &calls[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &calls[i].resp), 0);
	}
}

Test(LARGE_NAME, sizes_across_the_threshold, .timeout = 240)
{
	struct call c[8];
	size_t m;
	unsigned i;

	world_up();
	m = urpc_rpc_max_msg_size(W.cli);
	{
		const size_t sizes[8] = {m - 1,	   m,	    m + 1,   2 * m + 3,
					 64 << 10, 1 << 20, 3 << 20, (1 << 20) + 12345};

		for (i = 0; i < 8; i++)
			c[i] = (struct call){.id = i, .len = sizes[i]};
	}
	run_calls(c, 8); /* all in flight at once, on one session */
	world_down();
}

/* .timeout: a hang guard only (a loaded Soft-RoCE host); the watchdog judges. */
Test(LARGE_NAME, the_largest_message, .timeout = 1800)
{
	struct call c = {.id = 1, .len = URPC_MAX_MSG_SIZE};
	struct urpc_rpc_stats s, cl;

	world_up();
	run_calls(&c, 1);
	/* Each side READ the other's 64 MiB: its progress counter moved. */
	cr_assert_eq(urpc_rpc_get_stats(W.srv, &s), 0);
	cr_assert_eq(urpc_rpc_get_stats(W.cli, &cl), 0);
	cr_assert_gt(s.os_progress, 0, "the server's READ of the request counted no progress");
	cr_assert_gt(cl.os_progress, 0, "the client's READ of the response counted no progress");
	world_down();
}

Test(LARGE_NAME, random_sizes_and_reuse_in_continuations, .timeout = 240)
{
	enum { N = 24 };
	struct call c[N];
	struct watchdog w;
	unsigned i, busy;
	size_t m;

	world_up();
	m = urpc_rpc_max_msg_size(W.cli);
	srand(7);
	for (i = 0; i < N; i++)
		c[i] = (struct call){.id = i,
				     .len = 1 + (size_t)rand() % (4 * m + (i % 3 ? 0 : 300000)),
				     .realloc_in_cont = i % 2};
	for (i = 0; i < N; i++)
		start(&c[i]);
	watchdog_start(&w);
	do {
		watchdog_check(&w, "requests did not complete");
		pump();
		for (busy = 0, i = 0; i < N; i++)
			busy += c[i].busy;
	} while (busy);
	for (i = 0; i < N; i++) {
		check(&c[i]);
		cr_assert_eq(W.handler_runs[c[i].id], 1);
		if (i % 2) {
			/* The second round ran from the continuation. */
			cr_assert_eq(W.handler_runs[c[i].id - MAX_IDS / 2], 1);
		}
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
	}
	world_down();
}

/* A lossy wire: descriptors are lost and resent; each handler still runs once. */
Test(LARGE_NAME, loss_keeps_exactly_once, .timeout = 240)
{
	enum { N = 40 };
	struct call c[N];
	struct urpc_rpc_stats st;
	unsigned i;
	size_t m;

	if (LARGE_KIND == URPC_TRANSPORT_VERBS)
		cr_skip_test("verbs loses packets under netem in the loss run, not by a switch");
	world_up();
	if (LARGE_KIND == URPC_TRANSPORT_LOOP) {
		struct urpc_loop_faults f = {.drop = 0.05, .dup = 0.02};

		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(W.cli), &f), 0);
		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(W.srv), &f), 0);
	} else {
		cr_assert_eq(urpc__udp_set_drop(urpc__rpc_transport(W.cli), 0.05, 11), 0);
		cr_assert_eq(urpc__udp_set_drop(urpc__rpc_transport(W.srv), 0.05, 12), 0);
	}
	m = urpc_rpc_max_msg_size(W.cli);
	for (i = 0; i < N; i++)
		c[i] = (struct call){.id = i, .len = i % 4 ? 3 * m + i : 200000 + i};
	run_calls(c, 8);
	run_calls(c + 8, 8);
	run_calls(c + 16, 8);
	run_calls(c + 24, 8);
	run_calls(c + 32, 8);
	cr_assert_eq(urpc_rpc_get_stats(W.cli, &st), 0);
	if (LARGE_KIND == URPC_TRANSPORT_LOOP) {
		struct urpc_tp *ct = urpc__rpc_transport(W.cli);
		struct urpc_tp *stp = urpc__rpc_transport(W.srv);

		/*
		 * loop loses datagrams: descriptors and small answers are resent.
		 * Each call is one datagram each way, 82 in all: with a random seed
		 * 5% lost none of them in 1.5% of the runs; the fixed seeds lose some.
		 */
		cr_assert_gt(ct->stats.tx_dropped + stp->stats.tx_dropped, 0,
			     "the loss switch lost none of %lu datagrams",
			     (unsigned long)(ct->stats.tx_pkts + stp->stats.tx_pkts));
		cr_assert_gt(st.retransmits, 0, "%lu datagrams lost, none sent again",
			     (unsigned long)(ct->stats.tx_dropped + stp->stats.tx_dropped));
	} else {
		/* udp's switch loses one-sided chunks: the transport resends them */
		cr_assert_gt(urpc__rpc_transport(W.cli)->stats.os_retries +
				     urpc__rpc_transport(W.srv)->stats.os_retries,
			     0, "the loss switch lost nothing");
	}
	world_down();
}

Test(LARGE_NAME, several_sessions_many_in_flight, .timeout = 240)
{
	enum { S = 3, PER = 12 };
	struct call c[S * PER];
	int sess[S];
	char hp[64];
	unsigned i, busy;
	struct watchdog w;

	world_up();
	sess[0] = W.sess;
	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(W.nx));
	for (i = 1; i < S; i++)
		cr_assert_eq(urpc_session_connect(W.cli, hp, 1, &sess[i]), 0);
	for (i = 0; i < S * PER; i++) {
		c[i] = (struct call){.id = i, .len = (i % 2 ? 256 << 10 : 3000) + i};
		W.sess = sess[i % S]; /* queued until connected, then 8 at a time */
		start(&c[i]);
	}
	watchdog_start(&w);
	do {
		watchdog_check(&w, "requests did not complete");
		pump();
		for (busy = 0, i = 0; i < S * PER; i++)
			busy += c[i].busy;
	} while (busy);
	for (i = 0; i < S * PER; i++) {
		check(&c[i]);
		cr_assert_eq(W.handler_runs[c[i].id], 1);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
	}
	world_down();
}

/* The late-release cases need loop's release_polls switch. */
static void skip_unless_loop_release(const char *when)
{
	if (LARGE_KIND != URPC_TRANSPORT_LOOP)
		cr_skip_test("release_polls is a loop switch; verbs takes this path whenever a "
			     "release notice comes %s (test_large_verbs), and udp never makes a "
			     "revoke wait",
			     when);
}

/*
 * A large response whose slot takes a new request before the client has
 * let go of its grant (loop's release_polls plays a verbs reader whose
 * release notice comes late): the server keeps it, grant live and buffer
 * untouched, until the transport says it may revoke, and the event loop
 * never waits for it meanwhile. The engine counts those grants throughout,
 * and destroying the server with some still kept frees them.
 */
Test(LARGE_NAME, responses_retire_once_the_reader_lets_go, .timeout = 240)
{
	enum { N = 8, ROUNDS = 4, LAG = 40 };
	struct urpc_loop_faults f = {.release_polls = LAG};
	struct urpc_rpc_stats st;
	struct call c[N];
	struct urpc_tp *stp;
	uint64_t end;
	unsigned i, r;

	skip_unless_loop_release("after the next request");
	world_up();
	stp = urpc__rpc_transport(W.srv);
	cr_assert_eq(urpc__loop_set_faults(stp, &f), 0);
	/* Each round takes all N slots again: it retires the round before. */
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < N; i++)
			c[i] = (struct call){.id = r * N + i, .len = (64u << 10) + r * N + i};
		run_calls(c, N);
		cr_assert_eq(urpc__rpc_grants(W.srv), stp->stats.grants_live,
			     "round %u: the engine holds %llu grants, the transport %llu", r,
			     (unsigned long long)urpc__rpc_grants(W.srv),
			     (unsigned long long)stp->stats.grants_live);
	}
	urpc_rpc_get_stats(W.srv, &st);
	cr_assert_eq(st.resps_retiring, (ROUNDS - 1) * N,
		     "%llu responses were kept for their reader, want %u",
		     (unsigned long long)st.resps_retiring, (ROUNDS - 1) * N);
	/* Past the lag (and the next timer scan), only the last round's stored responses hold grants. */
	end = urpc__now_ns() + WAIT_NS;
	while (stp->stats.grants_live > N && urpc__now_ns() < end)
		pump();
	cr_assert_eq(stp->stats.grants_live, N, "%llu grants live after the lag, want %u",
		     (unsigned long long)stp->stats.grants_live, N);
	cr_assert_eq(urpc__rpc_grants(W.srv), N);
	/* A reader that never lets go: the server is destroyed with them kept. */
	f.release_polls = 1000000000u;
	cr_assert_eq(urpc__loop_set_faults(stp, &f), 0);
	for (i = 0; i < N; i++)
		c[i] = (struct call){.id = ROUNDS * N + i, .len = (64u << 10) + 7 * i};
	run_calls(c, N);
	cr_assert_eq(stp->stats.grants_live, 2 * N);
	cr_assert_eq(urpc__rpc_grants(W.srv), 2 * N);
	world_down(); /* urpc_rpc_destroy() of the server returns 0; ASan: nothing leaks */
}

/*
 * The client's side of the same: a large request answered before the
 * server let go of its grant, with a short response (rounds 0 and 2) or a
 * large one the client READs first (round 1: the descriptor says the
 * server has read the request, but the grant may not go yet either). Its
 * continuation waits until the transport says the grant may go, the
 * request buffer stays the library's meanwhile, and the event loop goes
 * on; destroying the client runs the continuations still waiting.
 */
Test(LARGE_NAME, answers_wait_until_the_server_lets_go, .timeout = 240)
{
	enum { N = 8 };
	struct urpc_loop_faults f = {.release_polls = 1000000000u};
	struct urpc_rpc_stats st;
	struct call c[N];
	struct urpc_tp *ctp;
	unsigned i, done, round;
	uint64_t end;

	skip_unless_loop_release("after the answer");
	world_up();
	ctp = urpc__rpc_transport(W.cli);
	for (round = 0; round < 3; round++) {
		f.release_polls = 1000000000u; /* the server never lets go, until told */
		cr_assert_eq(urpc__loop_set_faults(ctp, &f), 0);
		for (i = 0; i < N; i++) {
			c[i] = (struct call){.id = round * N + i,
					     .len = (64u << 10) + 3 * i,
					     .type = round == 1 ? 0 : T_SHORT};
			start(&c[i]);
		}
		/* Every request answered, no continuation run. */
		end = urpc__now_ns() + WAIT_NS;
		do {
			cr_assert_lt(urpc__now_ns(), end, "the server did not answer");
			pump();
			urpc_rpc_get_stats(W.cli, &st);
		} while (st.reqs_retiring < (round + 1) * N);
		for (i = 0; i < N; i++)
			cr_assert(c[i].busy, "request %u completed while its grant lived", i);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[0].req), -EBUSY,
			     "the application freed a request the server could still read");
		cr_assert_eq(ctp->stats.grants_live, N);
		cr_assert_eq(urpc__rpc_grants(W.cli), N);
		if (round == 2)
			break; /* destroyed with them waiting */
		f.release_polls = 1;
		cr_assert_eq(urpc__loop_set_faults(ctp, &f), 0);
		end = urpc__now_ns() + WAIT_NS;
		do {
			cr_assert_lt(urpc__now_ns(), end, "continuations did not run");
			pump();
			for (done = 0, i = 0; i < N; i++)
				done += !c[i].busy;
		} while (done < N);
		for (i = 0; i < N; i++) {
			uint64_t id;

			if (round == 1) {
				check(&c[i]); /* the echo, byte for byte */
			} else {
				cr_assert_eq(c[i].status, 0, "request %u: %s", i,
					     urpc_strerror(c[i].status));
				cr_assert_eq(c[i].runs, 1);
				cr_assert_eq(c[i].resp.data_size, 8);
				memcpy(&id, c[i].resp.buf, 8);
				cr_assert_eq(id, c[i].id);
			}
			cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
			cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
		}
		cr_assert_eq(ctp->stats.grants_live, 0);
	}
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	W.cli = NULL;
	for (i = 0; i < N; i++) {
		cr_assert_eq(c[i].runs, 1, "request %u: %u continuation runs at destroy", i,
			     c[i].runs);
		cr_assert_eq(c[i].status, 0);
	}
	world_down();
}

/*
 * The server goes away while large transfers are under way: every
 * continuation runs exactly once with an error, and the client can destroy
 * cleanly (nothing still reads or writes its buffers).
 */
Test(LARGE_NAME, server_destroyed_during_transfers, .timeout = 240)
{
	enum { N = 8 };
	struct call c[N];
	uint64_t end;
	unsigned i, busy, k;

	world_up();
	for (i = 0; i < N; i++) {
		c[i] = (struct call){.id = i, .len = (1 << 20) + i};
		start(&c[i]);
	}
	/* A few passes: some transfers start, none can finish yet. */
	for (k = 0; k < 3; k++)
		pump();
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	W.srv = NULL;
	end = urpc__now_ns() + WAIT_NS;
	do {
		cr_assert_lt(urpc__now_ns(), end, "continuations did not all run");
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
		for (busy = 0, i = 0; i < N; i++)
			busy += c[i].busy;
	} while (busy);
	for (i = 0; i < N; i++) {
		cr_assert_eq(c[i].runs, 1, "continuation %u ran %u times", i, c[i].runs);
		if (c[i].status == 0)
			check(&c[i]);
		else
			cr_assert(c[i].status == -ECONNRESET || c[i].status == -EIO ||
					  c[i].status == -ETIMEDOUT,
				  "request %u: %s", i, urpc_strerror(c[i].status));
	}
	for (i = 0; i < N; i++) {
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
	}
	world_down();
}

/* The client goes away with large responses being read: destroy completes them. */
Test(LARGE_NAME, client_destroyed_during_transfers, .timeout = 240)
{
	enum { N = 8 };
	struct call c[N];
	unsigned i, k;

	world_up();
	for (i = 0; i < N; i++) {
		c[i] = (struct call){.id = i, .len = (2 << 20) + i};
		start(&c[i]);
	}
	for (k = 0; k < 40; k++)
		pump();
	/* Destroy wants back what the application holds: the finished ones. */
	for (i = 0; i < N; i++) {
		if (c[i].busy)
			continue;
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
	}
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	W.cli = NULL;
	for (i = 0; i < N; i++) {
		cr_assert_eq(c[i].runs, 1, "continuation %u ran %u times", i, c[i].runs);
		cr_assert(c[i].status == 0 || c[i].status == -ECONNRESET, "request %u: %s", i,
			  urpc_strerror(c[i].status));
	}
	/* The server keeps running alone and lets go of everything. */
	for (k = 0; k < 100; k++)
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	world_down();
}

Test(LARGE_NAME, response_larger_than_the_buffer)
{
	struct call c = {.id = 5};
	size_t m;
	uint64_t end;

	world_up();
	m = urpc_rpc_max_msg_size(W.cli);
	c.len = 4 * m;
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, c.len, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, m, &c.resp), 0);
	memcpy(c.req.buf, &c.id, 8);
	for (size_t i = 8; i < c.len; i++)
		c.req.buf[i] = pat(c.id, i);
	c.busy = true;
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &c.req, &c.resp, cont, &c, 0), 0);
	end = urpc__now_ns() + WAIT_NS;
	while (c.busy) {
		cr_assert_lt(urpc__now_ns(), end);
		pump();
	}
	cr_assert_eq(c.status, -EMSGSIZE, "status %s", urpc_strerror(c.status));
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.resp), 0);
	world_down();
}

/*
 * The continuation of a request that may have timed out: it records how
 * often the handler had run by then, and reuses the request buffer at once
 * (a new pattern), as an application may: a peer still reading it would
 * hand the handler bytes it never sent.
 */
static unsigned runs_at_cont;

static void reuse_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	cont(rpc, tag, status, resp);
	runs_at_cont = W.handler_runs[c->id];
	memset(c->req.buf + 8, 0xee, c->len - 8);
}

/* Enqueue @c (T_@type, large) with a deadline of @ms and reuse_cont. */
static void start_timed(struct call *c, uint8_t type, uint32_t ms)
{
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, c->len, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, c->len, &c->resp), 0);
	memcpy(c->req.buf, &c->id, 8);
	for (size_t i = 8; i < c->len; i++)
		c->req.buf[i] = pat(c->id, i);
	c->busy = true;
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, type, &c->req, &c->resp, reuse_cont, c, ms),
		     0);
}

/* Run only the client for @ms milliseconds: its deadlines pass, the server sleeps. */
static void pump_client_only(unsigned ms)
{
	uint64_t end = urpc__now_ns() + (uint64_t)ms * 1000000;

	while (urpc__now_ns() < end)
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
}

/*
 * The deadline passes before the server has even seen the descriptor: the
 * request buffer is not handed back (the continuation would reuse it) until
 * the server has read it. The handler sees exactly what was sent, once;
 * the continuation runs once, with -ETIMEDOUT, after the handler.
 */
Test(LARGE_NAME, deadline_waits_until_the_server_has_read, .timeout = 240)
{
	struct call c = {.id = 31};
	uint64_t end;

	world_up();
	c.len = 3 * urpc_rpc_max_msg_size(W.cli) + 5;
	runs_at_cont = 0;
	start_timed(&c, T_ECHO, 1);
	pump_client_only(30);
	cr_assert(c.busy, "the continuation ran while the server could still read the buffer");
	end = urpc__now_ns() + WAIT_NS;
	while (c.busy) {
		cr_assert_lt(urpc__now_ns(), end, "the request never completed");
		pump();
	}
	cr_assert_eq(c.status, -ETIMEDOUT, "status %s", urpc_strerror(c.status));
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(runs_at_cont, 1, "the continuation ran before the handler");
	for (int k = 0; k < 50; k++)
		pump();
	cr_assert_eq(W.handler_runs[c.id], 1, "the handler ran %u times", W.handler_runs[c.id]);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.resp), 0);
	world_down(); /* the handler saw no reused bytes */
}

/*
 * A handler that answers late: the server says it has read the request
 * (URPC_PKT_F_ACK), so the deadline completes the request without waiting
 * for the answer. The late answer is then dropped as stale. On loop the
 * first acknowledgement is lost too: the resent descriptor gets another.
 */
Test(LARGE_NAME, acknowledged_request_times_out_without_its_answer, .timeout = 240)
{
	struct urpc_loop_faults none = {0};
	struct urpc_rpc_stats cs, ss;
	struct call c = {.id = 32};
	uint64_t end;

	world_up();
	c.len = 2 * urpc_rpc_max_msg_size(W.cli) + 3;
	W.drop_ack = LARGE_KIND == URPC_TRANSPORT_LOOP;
	start_timed(&c, T_DEFER, 1);
	pump_client_only(5);
	end = urpc__now_ns() + WAIT_NS;
	while (!W.deferred) {
		cr_assert_lt(urpc__now_ns(), end, "the handler never ran");
		pump();
	}
	if (W.drop_ack)
		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(W.srv), &none), 0);
	while (c.busy) {
		cr_assert_lt(urpc__now_ns(), end, "the request never completed");
		pump();
	}
	cr_assert_eq(c.status, -ETIMEDOUT, "status %s", urpc_strerror(c.status));
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(urpc_rpc_get_stats(W.cli, &cs), 0);
	cr_assert_eq(urpc_rpc_get_stats(W.srv, &ss), 0);
	cr_assert_eq(cs.acks_rx, 1);
	if (W.drop_ack)
		cr_assert_geq(ss.acks_sent, 2, "the lost acknowledgement was not sent again");
	else
		cr_assert_geq(ss.acks_sent, 1);
	/* The answer comes after all: stale for the client, nothing runs twice. */
	{
		struct urpc_msgbuf *r = urpc_req_resp_msgbuf(W.deferred);

		urpc_msgbuf_resize(r, 1);
		r->buf[0] = 1;
		cr_assert_eq(urpc_resp_enqueue(W.deferred, r), 0);
	}
	for (int k = 0; k < 50; k++)
		pump();
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(W.handler_runs[c.id], 1);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.resp), 0);
	world_down();
}

/* Large responses the client is READing right now (its own or orphaned operations). */
static unsigned client_reads(void)
{
	unsigned i, n = 0;

	for (i = 0; i < URPC_OS_OPS; i++)
		n += W.cli->os[i].busy && W.cli->os[i].kind == URPC_OS_CLI_RESP;
	return n;
}

/*
 * A disconnect while large responses are being read: the server frees
 * them when the disconnect reaches it, so the client sends it only once
 * its READs are over. While any runs, the server still holds the session;
 * every continuation runs once; the session ends.
 */
Test(LARGE_NAME, disconnect_waits_for_responses_being_read, .timeout = 240)
{
	enum { N = 4 };
	struct urpc_rpc_stats ss;
	struct call c[N];
	uint64_t end;
	unsigned i, busy;

	world_up();
	for (i = 0; i < N; i++) {
		c[i] = (struct call){.id = 40 + i, .len = (2 << 20) + i};
		start(&c[i]);
	}
	end = urpc__now_ns() + WAIT_NS;
	while (!client_reads()) {
		cr_assert_lt(urpc__now_ns(), end, "no response was ever being read");
		pump();
	}
	cr_assert_eq(urpc_session_disconnect(W.cli, W.sess), 0);
	/*
	 * Time for a disconnect sent now to reach the server's queue before
	 * the server serves the READs (loop and udp serve them in its loop).
	 */
	pump_client_only(20);
	do {
		cr_assert_lt(urpc__now_ns(), end, "the disconnect did not finish");
		/* Checked between the server's pass and the client's. */
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
		cr_assert_eq(urpc_rpc_get_stats(W.srv, &ss), 0);
		if (client_reads())
			cr_assert_eq(ss.sessions, 1,
				     "the server let go of the session during the client's READs");
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
		for (busy = 0, i = 0; i < N; i++)
			busy += c[i].busy;
	} while (busy || ss.sessions);
	for (i = 0; i < N; i++) {
		cr_assert_eq(c[i].runs, 1, "continuation %u ran %u times", i, c[i].runs);
		if (c[i].status == 0)
			check(&c[i]);
		else
			cr_assert_eq(c[i].status, -ECONNRESET, "request %u: %s", i,
				     urpc_strerror(c[i].status));
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c[i].resp), 0);
	}
	world_down();
}

/* Wait for @c, enqueued by the caller. */
static void wait_call(struct call *c)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;

	while (c->busy) {
		cr_assert_lt(urpc__now_ns(), end, "request %lu did not complete",
			     (unsigned long)c->id);
		pump();
	}
}

/* The application's own memory, sent and received without a copy. */
Test(LARGE_NAME, views_of_application_memory, .timeout = 240)
{
	const size_t len = (3u << 20) + 7;
	struct urpc_regcache_stats rs;
	uint8_t *in = malloc(len), *out = malloc(len);
	struct call c = {.id = 9, .len = len};
	uint64_t regs;
	size_t i;

	cr_assert(in && out);
	world_up();
	memcpy(in, &c.id, 8);
	for (i = 8; i < len; i++)
		in[i] = pat(c.id, i);
	memset(out, 0, len);
	cr_assert_eq(urpc_msgbuf_register(W.cli, in, len, URPC_MEM_PEER_READS, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_register(W.cli, out, len, 0, &c.resp), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), -EINVAL, "a view is unregistered, not freed");
	c.busy = true;
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &c.req, &c.resp, cont, &c, 0), 0);
	wait_call(&c);
	check(&c);
	cr_assert(c.resp.buf == out, "the response landed in the application's array");

	/* The same memory again: a cache hit, no new registration. */
	urpc__regcache_get_stats(W.cli->regcache, &rs);
	regs = rs.registrations;
	cr_assert_eq(urpc_msgbuf_unregister(W.cli, &c.req), 0);
	cr_assert_null(c.req.buf);
	cr_assert_eq(urpc_msgbuf_register(W.cli, in, len, URPC_MEM_PEER_READS, &c.req), 0);
	urpc__regcache_get_stats(W.cli->regcache, &rs);
	cr_assert_eq(rs.registrations, regs, "a view of cached memory registered it again");
	cr_assert_gt(rs.hits, 0);

	/* A view the peer may not read cannot be a request. */
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &c.resp, &c.req, cont, &c, 0),
		     -EINVAL);

	/* A small view travels as a large message too (no header room in front of it). */
	cr_assert_eq(urpc_msgbuf_unregister(W.cli, &c.req), 0);
	c.len = 100;
	c.id = 10;
	memcpy(in, &c.id, 8);
	for (i = 8; i < c.len; i++)
		in[i] = pat(c.id, i);
	cr_assert_eq(urpc_msgbuf_register(W.cli, in, c.len, URPC_MEM_PEER_READS, &c.req), 0);
	c.busy = true;
	c.runs = 0;
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &c.req, &c.resp, cont, &c, 0), 0);
	wait_call(&c);
	check(&c);

	/* Destroy refuses while the application holds views; forget deregisters. */
	cr_assert_eq(urpc_rpc_destroy(W.cli), -EBUSY);
	cr_assert_eq(urpc_msgbuf_unregister(W.cli, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_unregister(W.cli, &c.resp), 0);
	urpc__regcache_get_stats(W.cli->regcache, &rs);
	regs = rs.deregistrations;
	cr_assert_eq(urpc_mem_forget(W.cli, in, len), 0);
	cr_assert_eq(urpc_mem_forget(W.cli, out, len), 0);
	urpc__regcache_get_stats(W.cli->regcache, &rs);
	cr_assert_geq(rs.deregistrations, regs + 2, "forget left registrations behind");
	world_down();
	free(in);
	free(out);
}

/* A handler answers with a view of its own array; the library lets go of it. */
Test(LARGE_NAME, response_from_a_server_view, .timeout = 240)
{
	struct call c = {.id = 11, .len = 16};
	size_t i;
	int round;

	srv_array = malloc(VIEW_LEN);
	cr_assert_not_null(srv_array);
	for (i = 0; i < VIEW_LEN; i++)
		srv_array[i] = (uint8_t)(i * 13 + 1);
	world_up();
	for (round = 0; round < 3; round++) {
		cr_assert_eq(urpc_msgbuf_alloc(W.cli, 16, &c.req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(W.cli, VIEW_LEN, &c.resp), 0);
		c.busy = true;
		c.runs = 0;
		cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_VIEW, &c.req, &c.resp, cont, &c, 0),
			     0);
		wait_call(&c);
		cr_assert_eq(c.status, 0, "%s", urpc_strerror(c.status));
		cr_assert_eq(c.resp.data_size, VIEW_LEN);
		cr_assert(memcmp(c.resp.buf, srv_array, VIEW_LEN) == 0, "the view's bytes differ");
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c.req), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &c.resp), 0);
	}
	/* The views still held as stored responses go with the session: destroy succeeds. */
	world_down();
	free(srv_array);
	srv_array = NULL;
}
