/* SPDX-License-Identifier: MIT */
/*
 * The engine's reliability under the loop transport's fault switches: lost,
 * duplicated, reordered and delayed datagrams. For each case, many small
 * RPCs over four sessions must all complete, once each, with the right
 * response; every handler must run exactly once per request (a per-request
 * count on the server), and the counters must agree with what happened.
 *
 * The faults are applied to the datapath datagrams that both Rpcs send;
 * session management travels over the Nexus's kernel UDP socket and is not
 * affected. A small RTO keeps each case short.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h"
#include "transport/loop_hooks.h"
#include "transport/transport.h"

/*
 * 100,000 per case in every build: the slowest case (10% loss) takes ~1.5 s
 * plain and ~3.3 s under ASan+UBSan here, so no sanitizer discount is needed.
 */
#define NR_RPCS 100000u
#define MAX_RPCS NR_RPCS
#define NR_SESS 4
#define WINDOW 8 /* per session: every slot busy */
#define REQ_SIZE 32
#define REQ_ECHO 7
#define SRV_ID 1
#define CLI_ID 2
#define WAIT_MS 5000
#define RUN_MS 60000 /* bound of one case's RPC phase; the target is ~20 s */
#define TEST_TIMEOUT_S 120.

struct creq {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	int session;
	uint64_t id;
	bool busy;
};

struct fworld {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv;
	struct urpc_rpc *cli;
	int sess[NR_SESS];
	unsigned connected[NR_SESS + 64];
	unsigned disconnected[NR_SESS + 64];
	unsigned failed_or_reset;

	unsigned n;	     /* RPCs to run */
	uint64_t next_id;    /* next request id to issue */
	unsigned completed;  /* continuations run */
	unsigned errors;     /* wrong status or bytes, double runs */
	char first_err[256]; /* the first of them */
	unsigned handler_errors;
	uint8_t handled[MAX_RPCS]; /* server: handler runs per request id */
	uint8_t done[MAX_RPCS];	   /* client: continuations per request id */
	struct creq ctx[NR_SESS * WINDOW];
};

static struct fworld F;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void note_err(struct fworld *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_err(struct fworld *f, const char *fmt, ...)
{
	va_list ap;

	if (f->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(f->first_err, sizeof(f->first_err), fmt, ap);
		va_end(ap);
	}
}

static uint8_t pat(uint64_t id, size_t i)
{
	return (uint8_t)(id * 167u + i * 13u + 1u);
}

/* Server: count the request, answer every byte ^ 0x6b. */
static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct fworld *f = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t id;
	size_t len, i;

	d = urpc_req_data(h, &len);
	if (!d || len != REQ_SIZE) {
		f->handler_errors++;
		return;
	}
	memcpy(&id, d, sizeof(id));
	if (id >= MAX_RPCS) {
		f->handler_errors++;
		return;
	}
	f->handled[id]++;
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0x6b;
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		f->handler_errors++;
}

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	struct fworld *f = arg;

	if (session < 0 || session >= NR_SESS + 64) {
		f->failed_or_reset++;
		return;
	}
	if (ev == URPC_SM_CONNECTED)
		f->connected[session]++;
	else if (ev == URPC_SM_DISCONNECTED)
		f->disconnected[session]++;
	else
		f->failed_or_reset++;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/* Issue the next request on @c. 0, or the back-pressure error to retry later. */
static int issue(struct fworld *f, struct creq *c)
{
	size_t i;
	int ret;

	c->id = f->next_id;
	memcpy(c->req.buf, &c->id, sizeof(c->id));
	for (i = sizeof(c->id); i < REQ_SIZE; i++)
		c->req.buf[i] = pat(c->id, i);
	c->busy = true;
	ret = urpc_req_enqueue(f->cli, c->session, REQ_ECHO, &c->req, &c->resp, cont, c, 0);
	if (ret) {
		c->busy = false;
		return ret;
	}
	f->next_id++;
	return 0;
}

/* Client: check the response, then reuse the context for the next request. */
static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct fworld *f = &F;
	struct creq *c = tag;
	size_t i;
	int ret;

	if (!c->busy) {
		note_err(f, "continuation of request %llu ran twice", (unsigned long long)c->id);
		return;
	}
	c->busy = false;
	f->completed++;
	f->done[c->id]++;
	if (status) {
		note_err(f, "request %llu: status %s", (unsigned long long)c->id,
			 urpc_strerror(status));
		return;
	}
	if (resp != &c->resp || resp->data_size != REQ_SIZE) {
		note_err(f, "request %llu: response of %zu bytes", (unsigned long long)c->id,
			 resp->data_size);
		return;
	}
	for (i = 0; i < REQ_SIZE; i++) {
		if (resp->buf[i] != (c->req.buf[i] ^ 0x6b)) {
			note_err(f, "request %llu: byte %zu is 0x%02x, want 0x%02x",
				 (unsigned long long)c->id, i, resp->buf[i], c->req.buf[i] ^ 0x6b);
			return;
		}
	}
	if (f->next_id < f->n) {
		/* Continuations may enqueue; back-pressure leaves it to the driver. */
		ret = issue(f, c);
		if (ret && ret != -ENOMEM && ret != -EAGAIN)
			note_err(f, "enqueue from a continuation: %s", urpc_strerror(ret));
	}
}

static void pass(struct fworld *f)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(f->cli), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(f->srv), 0);
}

static void setup(struct fworld *f, const struct urpc_loop_faults *cli_faults,
		  const struct urpc_loop_faults *srv_faults, uint64_t seed)
{
	struct urpc_rpc_opts o;
	uint64_t deadline;
	char hp[32];
	unsigned i;

	memset(f, 0, sizeof(*f));
	f->n = NR_RPCS;
	cr_assert_eq(urpc_nexus_create(NULL, &f->nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(f->nx, REQ_ECHO, echo_handler, f), 0);

	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.sm_handler = sm_cb;
	o.sm_arg = f;
	o.rto_us = 1000;
	o.rto_max_us = 8000;
	/* Liveness is not under test: keep a slow pass from resetting a session. */
	o.peer_timeout_ms = 10000;
	o.seed = seed;
	cr_assert_eq(urpc_rpc_create(f->nx, SRV_ID, &o, &f->srv), 0);
	o.seed = seed + 1;
	cr_assert_eq(urpc_rpc_create(f->nx, CLI_ID, &o, &f->cli), 0);
	cr_assert_geq(urpc_rpc_max_msg_size(f->cli), REQ_SIZE);

	if (cli_faults)
		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(f->cli), cli_faults), 0);
	if (srv_faults)
		cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(f->srv), srv_faults), 0);

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(f->nx));
	for (i = 0; i < NR_SESS; i++) {
		cr_assert_eq(urpc_session_connect(f->cli, hp, SRV_ID, &f->sess[i]), 0);
		cr_assert(f->sess[i] >= 0 && f->sess[i] < NR_SESS + 64);
	}
	deadline = now_us() + WAIT_MS * 1000u;
	for (i = 0; i < NR_SESS; i++) {
		while (!f->connected[f->sess[i]] && !f->failed_or_reset && now_us() < deadline)
			pass(f);
		cr_assert_eq(f->failed_or_reset, 0, "a connect failed");
		cr_assert_eq(f->connected[f->sess[i]], 1, "session %d did not connect", f->sess[i]);
	}
	for (i = 0; i < NR_SESS * WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(f->cli, REQ_SIZE, &f->ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(f->cli, REQ_SIZE, &f->ctx[i].resp), 0);
		f->ctx[i].session = f->sess[i % NR_SESS];
	}
}

/* Run f->n RPCs; returns the wall time in ms. */
static uint64_t run(struct fworld *f)
{
	uint64_t start = now_us(), deadline = start + RUN_MS * 1000ull;
	unsigned i;
	int ret;

	while (f->completed < f->n) {
		for (i = 0; i < NR_SESS * WINDOW && f->next_id < f->n; i++) {
			if (f->ctx[i].busy)
				continue;
			ret = issue(f, &f->ctx[i]);
			if (ret == -ENOMEM || ret == -EAGAIN)
				break;
			cr_assert_eq(ret, 0, "urpc_req_enqueue: %s", urpc_strerror(ret));
		}
		pass(f);
		cr_assert_eq(f->errors, 0, "%u errors; first: %s", f->errors, f->first_err);
		cr_assert_lt(now_us(), deadline, "only %u of %u RPCs completed in %d ms",
			     f->completed, f->n, RUN_MS);
	}
	return (now_us() - start) / 1000u;
}

static void check_exactly_once(const struct fworld *f)
{
	unsigned id;

	cr_assert_eq(f->completed, f->n);
	cr_assert_eq(f->handler_errors, 0);
	cr_assert_eq(f->failed_or_reset, 0, "a session failed or was reset under faults");
	for (id = 0; id < f->n; id++) {
		cr_assert_eq(f->handled[id], 1, "handler ran %u times for request %u",
			     f->handled[id], id);
		cr_assert_eq(f->done[id], 1, "continuation ran %u times for request %u",
			     f->done[id], id);
	}
}

static void teardown(struct fworld *f)
{
	uint64_t deadline;
	unsigned i;

	for (i = 0; i < NR_SESS * WINDOW; i++) {
		cr_assert_not(f->ctx[i].busy);
		cr_assert_eq(urpc_msgbuf_free(f->cli, &f->ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(f->cli, &f->ctx[i].resp), 0);
	}
	for (i = 0; i < NR_SESS; i++)
		cr_assert_eq(urpc_session_disconnect(f->cli, f->sess[i]), 0);
	deadline = now_us() + WAIT_MS * 1000u;
	for (i = 0; i < NR_SESS; i++) {
		while (!f->disconnected[f->sess[i]] && now_us() < deadline)
			pass(f);
		cr_assert_eq(f->disconnected[f->sess[i]], 1, "session %d did not disconnect",
			     f->sess[i]);
	}
	cr_assert_eq(urpc_rpc_destroy(f->cli), 0);
	cr_assert_eq(urpc_rpc_destroy(f->srv), 0);
	cr_assert_eq(urpc_nexus_destroy(f->nx), 0);
}

/* Counters both sides agree on, whatever the faults. */
static void check_counters(struct fworld *f, struct urpc_rpc_stats *c, struct urpc_rpc_stats *s)
{
	cr_assert_eq(urpc_rpc_get_stats(f->cli, c), 0);
	cr_assert_eq(urpc_rpc_get_stats(f->srv, s), 0);
	cr_assert_eq(c->reqs_sent, f->n, "reqs_sent %llu, want %u (first transmissions only)",
		     (unsigned long long)c->reqs_sent, f->n);
	cr_assert_eq(c->resps_rx, f->n, "resps_rx %llu, want %u", (unsigned long long)c->resps_rx,
		     f->n);
	cr_assert_eq(s->reqs_handled, f->n, "reqs_handled %llu, want %u",
		     (unsigned long long)s->reqs_handled, f->n);
	cr_assert_eq(c->drop_bad_hdr + s->drop_bad_hdr, 0);
	cr_assert_eq(c->drop_bad_session + s->drop_bad_session, 0);
	cr_assert_eq(c->unknown_req_type + s->unknown_req_type, 0);
	cr_assert_eq(c->resets + s->resets, 0);
	cr_assert_eq(c->sessions, NR_SESS);
	cr_assert_eq(s->sessions, NR_SESS);
}

static void report(const char *name, const struct fworld *f, uint64_t ms,
		   const struct urpc_rpc_stats *c, const struct urpc_rpc_stats *s)
{
	cr_log_info("%s: %u RPCs in %llu ms; retransmits %llu, dup_reqs %llu, dup_resps %llu, "
		    "drop_stale %llu+%llu",
		    name, f->n, (unsigned long long)ms, (unsigned long long)c->retransmits,
		    (unsigned long long)s->dup_reqs, (unsigned long long)c->dup_resps,
		    (unsigned long long)c->drop_stale, (unsigned long long)s->drop_stale);
}

/* Losses: every lost transmission round must have been retransmitted. */
static void drop_case(const char *name, double p, uint64_t seed)
{
	struct urpc_loop_faults lf = {.drop = p};
	struct urpc_rpc_stats c, s;
	struct urpc_tp *ctp, *stp;
	uint64_t ms, lost;

	setup(&F, &lf, &lf, seed);
	ms = run(&F);
	check_exactly_once(&F);
	check_counters(&F, &c, &s);
	report(name, &F, ms, &c, &s);
	ctp = urpc__rpc_transport(F.cli);
	stp = urpc__rpc_transport(F.srv);
	lost = ctp->stats.tx_dropped + stp->stats.tx_dropped;
	cr_assert_gt(ctp->stats.tx_dropped, 0, "the drop switch dropped no request");
	cr_assert_gt(stp->stats.tx_dropped, 0, "the drop switch dropped no response");
	cr_assert_gt(c.retransmits, 0);
	/* A round loses at most one datagram and each lost round needs another. */
	cr_assert_geq(c.retransmits, lost, "retransmits %llu < datagrams lost %llu",
		      (unsigned long long)c.retransmits, (unsigned long long)lost);
	/* A lost response is answered again from the stored response. */
	cr_assert_gt(s.dup_reqs, 0, "no duplicate answered from the stored response");
	teardown(&F);
}

Test(faults, drop_1_percent, .timeout = TEST_TIMEOUT_S)
{
	drop_case("drop 1%", 0.01, 101);
}

Test(faults, drop_10_percent, .timeout = TEST_TIMEOUT_S)
{
	drop_case("drop 10%", 0.10, 202);
}

Test(faults, duplication, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_loop_faults lf = {.dup = 0.10};
	struct urpc_rpc_stats c, s;
	struct urpc_tp *ctp, *stp;
	uint64_t ms;

	setup(&F, &lf, &lf, 303);
	ms = run(&F);
	check_exactly_once(&F);
	check_counters(&F, &c, &s);
	report("dup 10%", &F, ms, &c, &s);
	ctp = urpc__rpc_transport(F.cli);
	stp = urpc__rpc_transport(F.srv);
	cr_assert_gt(ctp->stats.tx_duplicated, 0);
	cr_assert_gt(stp->stats.tx_duplicated, 0);
	/* Duplicated requests: answered again (or dropped as stale), never re-run. */
	cr_assert_gt(s.dup_reqs + s.drop_stale, 0);
	cr_assert_gt(s.dup_reqs, 0, "no duplicate request answered from the stored response");
	/* Duplicated responses: counted, never delivered twice. */
	cr_assert_gt(c.dup_resps + c.drop_stale, 0);
	teardown(&F);
}

Test(faults, reordering, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_loop_faults lf = {.reorder = 8};
	struct urpc_rpc_stats c, s;
	uint64_t ms;

	setup(&F, &lf, &lf, 404);
	ms = run(&F);
	check_exactly_once(&F);
	check_counters(&F, &c, &s);
	report("reorder 8", &F, ms, &c, &s);
	cr_assert_gt(urpc__rpc_transport(F.cli)->stats.tx_reordered, 0);
	cr_assert_gt(urpc__rpc_transport(F.srv)->stats.tx_reordered, 0);
	teardown(&F);
}

Test(faults, everything_at_once, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_loop_faults lf = {.drop = 0.05, .dup = 0.05, .reorder = 4, .delay_polls = 2};
	struct urpc_rpc_stats c, s;
	struct urpc_tp *ctp;
	uint64_t ms;

	setup(&F, &lf, &lf, 505);
	ms = run(&F);
	check_exactly_once(&F);
	check_counters(&F, &c, &s);
	report("drop 5% + dup 5% + reorder 4 + delay 2", &F, ms, &c, &s);
	ctp = urpc__rpc_transport(F.cli);
	cr_assert_gt(ctp->stats.tx_dropped, 0);
	cr_assert_gt(ctp->stats.tx_duplicated, 0);
	cr_assert_gt(ctp->stats.tx_reordered, 0);
	cr_assert_gt(c.retransmits, 0);
	cr_assert_gt(s.dup_reqs, 0);
	teardown(&F);
}

/* The baseline, for the timings in the log: no faults. */
Test(faults, none, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_rpc_stats c, s;
	uint64_t ms;

	setup(&F, NULL, NULL, 606);
	ms = run(&F);
	check_exactly_once(&F);
	check_counters(&F, &c, &s);
	report("no faults", &F, ms, &c, &s);
	cr_assert_eq(urpc__rpc_transport(F.cli)->stats.tx_dropped, 0);
	teardown(&F);
}
