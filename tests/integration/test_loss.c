/* SPDX-License-Identifier: MIT */
/*
 * Exactly-once over a lossy wire: many RPCs over a few sessions, each of
 * which must complete once with the right response, its handler having run
 * exactly once. Unlike test_faults.c (the loop transport's fault switches),
 * the losses come from outside the process: tests/vm/verbs-stage.sh runs the
 * verbs build under `netem loss 5%` on both veths of the Soft-RoCE VM, so
 * requests and responses are dropped on the wire under the UD datapath. The
 * case is valid without loss too: outside the VM the udp build runs it on a
 * clean loopback, and the verbs build skips without an active RDMA port.
 *
 * Built once per transport (tests/CMakeLists.txt): LOSS_KIND=URPC_TRANSPORT_<K>
 * and LOSS_NAME=loss_<k>.
 *
 * Environment:
 *   URPC_TEST_DEVICE_A, _B   verbs devices of the client and the server
 *                            (rxe1 and rxe0 in the VM; unset: the default)
 *   URPC_TEST_LOSS_RPCS      RPCs to run (default 4000, at most 100000)
 *   URPC_TEST_EXPECT_LOSS    loss percentage the runner applied to each
 *                            direction of the wire: the client must then have
 *                            retransmitted at least that share of the RPCs,
 *                            proof that the datapath crossed the lossy wire
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "verbs_skip.h"

#ifndef LOSS_KIND
#error "build with -DLOSS_KIND=URPC_TRANSPORT_<KIND> -DLOSS_NAME=<suite>"
#endif

#define DEF_RPCS 4000u
#define MAX_RPCS 100000u
#define NR_SESS 4
#define WINDOW 8 /* per session */
#define MIN_REQ 16
#define REQ_ECHO 9
#define SRV_ID 1
#define CLI_ID 2
#define MAX_SESS 16
#define WAIT_MS 10000 /* connect and disconnect; generous for an emulated VM */
#define RUN_MS 240000 /* bound of the RPC phase */
#define TEST_TIMEOUT_S 300.

struct lreq {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	int session;
	uint64_t id;
	bool busy;
};

struct lworld {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv;
	struct urpc_rpc *cli;
	size_t max_msg;
	int sess[NR_SESS];
	unsigned connected[MAX_SESS];
	unsigned disconnected[MAX_SESS];
	unsigned sm_other; /* connect failures, resets, bad session numbers */

	unsigned n;
	uint64_t next_id;
	unsigned completed;
	unsigned errors;
	char first_err[256];
	unsigned handler_errors;
	uint8_t handled[MAX_RPCS]; /* server: handler runs per request id */
	uint8_t done[MAX_RPCS];	   /* client: continuations per request id */
	struct lreq ctx[NR_SESS * WINDOW];
};

static struct lworld L;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
	const char *s = getenv(name);
	unsigned long v;
	char *end;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoul(s, &end, 10);
	cr_assert(!errno && !*end && v <= max, "%s=%s: want a number up to %u", name, s, max);
	return (unsigned)v;
}

static void note_err(struct lworld *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_err(struct lworld *l, const char *fmt, ...)
{
	va_list ap;

	if (l->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(l->first_err, sizeof(l->first_err), fmt, ap);
		va_end(ap);
	}
}

/* Request sizes cycle from MIN_REQ to the largest message, full datagrams included. */
static size_t size_for(const struct lworld *l, uint64_t id)
{
	return MIN_REQ + (size_t)((id * 4099u) % (l->max_msg - MIN_REQ + 1));
}

static uint8_t pat(uint64_t id, size_t i)
{
	return (uint8_t)(id * 193u + i * 11u + 5u);
}

/* Server: count the request, answer every byte ^ 0x5a. */
static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct lworld *l = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t id;
	size_t len, i;

	d = urpc_req_data(h, &len);
	if (!d || len < MIN_REQ || !resp || len > resp->max_data_size) {
		l->handler_errors++;
		return;
	}
	memcpy(&id, d, sizeof(id));
	if (id >= MAX_RPCS || len != size_for(l, id)) {
		l->handler_errors++;
		return;
	}
	l->handled[id]++;
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0x5a;
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		l->handler_errors++;
}

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	struct lworld *l = arg;

	if (session < 0 || session >= MAX_SESS)
		l->sm_other++;
	else if (ev == URPC_SM_CONNECTED)
		l->connected[session]++;
	else if (ev == URPC_SM_DISCONNECTED)
		l->disconnected[session]++;
	else
		l->sm_other++;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/* Issue the next request on @c: 0, or -EAGAIN/-ENOMEM (back-pressure; retry later). */
static int issue(struct lworld *l, struct lreq *c)
{
	size_t len = size_for(l, l->next_id), i;
	int ret;

	c->id = l->next_id;
	cr_assert_eq(urpc_msgbuf_resize(&c->req, len), 0);
	memcpy(c->req.buf, &c->id, sizeof(c->id));
	for (i = sizeof(c->id); i < len; i++)
		c->req.buf[i] = pat(c->id, i);
	c->busy = true;
	ret = urpc_req_enqueue(l->cli, c->session, REQ_ECHO, &c->req, &c->resp, cont, c, 0);
	if (ret) {
		c->busy = false;
		return ret;
	}
	l->next_id++;
	return 0;
}

/* Client: check the response, then reuse the context for the next request. */
static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct lworld *l = &L;
	struct lreq *c = tag;
	size_t i;
	int ret;

	if (!c->busy) {
		note_err(l, "continuation of request %llu ran twice", (unsigned long long)c->id);
		return;
	}
	c->busy = false;
	l->completed++;
	l->done[c->id]++;
	if (status) {
		note_err(l, "request %llu: status %s", (unsigned long long)c->id,
			 urpc_strerror(status));
		return;
	}
	if (resp != &c->resp || resp->data_size != c->req.data_size) {
		note_err(l, "request %llu: response of %zu bytes, request %zu",
			 (unsigned long long)c->id, resp->data_size, c->req.data_size);
		return;
	}
	for (i = 0; i < resp->data_size; i++) {
		if (resp->buf[i] != (c->req.buf[i] ^ 0x5a)) {
			note_err(l, "request %llu: byte %zu is 0x%02x, want 0x%02x",
				 (unsigned long long)c->id, i, resp->buf[i], c->req.buf[i] ^ 0x5a);
			return;
		}
	}
	if (l->next_id < l->n) {
		ret = issue(l, c);
		if (ret && ret != -ENOMEM && ret != -EAGAIN)
			note_err(l, "enqueue from a continuation: %s", urpc_strerror(ret));
	}
}

static void pass(struct lworld *l)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(l->cli), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(l->srv), 0);
}

static void setup(struct lworld *l)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t deadline;
	char hp[32];
	unsigned i;
	int ret;

	verbs_skip_without_port(LOSS_KIND);
	memset(l, 0, sizeof(*l));
	l->n = env_uint("URPC_TEST_LOSS_RPCS", DEF_RPCS, MAX_RPCS);
	urpc_nexus_opts_init(&no);
	no.host = test_host();
	cr_assert_eq(urpc_nexus_create(&no, &l->nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(l->nx, REQ_ECHO, echo_handler, l), 0);

	urpc_rpc_opts_init(&o);
	o.transport = LOSS_KIND;
	o.sm_handler = sm_cb;
	o.sm_arg = l;
	o.max_sessions = MAX_SESS;
	/*
	 * Liveness is not under test: an emulated vCPU can stall for a while,
	 * and a lossy wire can eat a few heartbeats in a row.
	 */
	o.peer_timeout_ms = 20000;
	o.device = getenv("URPC_TEST_DEVICE_B");
	ret = urpc_rpc_create(l->nx, SRV_ID, &o, &l->srv);
	cr_assert_eq(ret, 0, "server urpc_rpc_create: %s", urpc_strerror(ret));
	o.device = getenv("URPC_TEST_DEVICE_A");
	ret = urpc_rpc_create(l->nx, CLI_ID, &o, &l->cli);
	cr_assert_eq(ret, 0, "client urpc_rpc_create: %s", urpc_strerror(ret));
	l->max_msg = urpc_rpc_max_msg_size(l->cli);
	cr_assert_geq(l->max_msg, 64);
	cr_assert_eq(urpc_rpc_max_msg_size(l->srv), l->max_msg);

	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(l->nx));
	for (i = 0; i < NR_SESS; i++) {
		cr_assert_eq(urpc_session_connect(l->cli, hp, SRV_ID, &l->sess[i]), 0);
		cr_assert(l->sess[i] >= 0 && l->sess[i] < MAX_SESS);
	}
	deadline = now_us() + WAIT_MS * 1000ull;
	for (i = 0; i < NR_SESS; i++) {
		while (!l->connected[l->sess[i]] && !l->sm_other && now_us() < deadline)
			pass(l);
		cr_assert_eq(l->sm_other, 0, "a connect failed");
		cr_assert_eq(l->connected[l->sess[i]], 1, "session %d did not connect in %d ms",
			     l->sess[i], WAIT_MS);
	}
	for (i = 0; i < NR_SESS * WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(l->cli, l->max_msg, &l->ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(l->cli, l->max_msg, &l->ctx[i].resp), 0);
		l->ctx[i].session = l->sess[i % NR_SESS];
	}
}

/* Run l->n RPCs, every context busy; returns the wall time in ms. */
static uint64_t run(struct lworld *l)
{
	uint64_t start = now_us(), deadline = start + RUN_MS * 1000ull;
	unsigned i;
	int ret;

	while (l->completed < l->n) {
		for (i = 0; i < NR_SESS * WINDOW && l->next_id < l->n; i++) {
			if (l->ctx[i].busy)
				continue;
			ret = issue(l, &l->ctx[i]);
			if (ret == -ENOMEM || ret == -EAGAIN)
				break;
			cr_assert_eq(ret, 0, "urpc_req_enqueue: %s", urpc_strerror(ret));
		}
		pass(l);
		cr_assert_eq(l->errors, 0, "%u errors; first: %s", l->errors, l->first_err);
		cr_assert_lt(now_us(), deadline, "only %u of %u RPCs completed in %d ms",
			     l->completed, l->n, RUN_MS);
	}
	return (now_us() - start) / 1000u;
}

static void teardown(struct lworld *l)
{
	uint64_t deadline;
	unsigned i;

	for (i = 0; i < NR_SESS * WINDOW; i++) {
		cr_assert_not(l->ctx[i].busy);
		cr_assert_eq(urpc_msgbuf_free(l->cli, &l->ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(l->cli, &l->ctx[i].resp), 0);
	}
	for (i = 0; i < NR_SESS; i++)
		cr_assert_eq(urpc_session_disconnect(l->cli, l->sess[i]), 0);
	deadline = now_us() + WAIT_MS * 1000ull;
	for (i = 0; i < NR_SESS; i++) {
		while (!l->disconnected[l->sess[i]] && now_us() < deadline)
			pass(l);
		cr_assert_eq(l->disconnected[l->sess[i]], 1, "session %d did not disconnect",
			     l->sess[i]);
	}
	cr_assert_eq(urpc_rpc_destroy(l->cli), 0);
	cr_assert_eq(urpc_rpc_destroy(l->srv), 0);
	cr_assert_eq(urpc_nexus_destroy(l->nx), 0);
}

Test(LOSS_NAME, every_rpc_completes_once, .timeout = TEST_TIMEOUT_S)
{
	unsigned expect_loss = env_uint("URPC_TEST_EXPECT_LOSS", 0, 100), id;
	struct urpc_rpc_stats c, s;
	uint64_t ms;

	setup(&L);
	ms = run(&L);

	cr_assert_eq(L.completed, L.n);
	cr_assert_eq(L.handler_errors, 0, "handlers saw %u bad requests", L.handler_errors);
	cr_assert_eq(L.sm_other, 0, "a session failed or was reset");
	for (id = 0; id < L.n; id++) {
		cr_assert_eq(L.handled[id], 1, "handler ran %u times for request %u", L.handled[id],
			     id);
		cr_assert_eq(L.done[id], 1, "continuation ran %u times for request %u", L.done[id],
			     id);
	}

	cr_assert_eq(urpc_rpc_get_stats(L.cli, &c), 0);
	cr_assert_eq(urpc_rpc_get_stats(L.srv, &s), 0);
	cr_log_info("%s: %u RPCs (%zu-byte max) in %llu ms; retransmits %llu, dup_reqs %llu, "
		    "dup_resps %llu, drop_stale %llu+%llu",
		    urpc_transport_str(LOSS_KIND), L.n, L.max_msg, (unsigned long long)ms,
		    (unsigned long long)c.retransmits, (unsigned long long)s.dup_reqs,
		    (unsigned long long)c.dup_resps, (unsigned long long)c.drop_stale,
		    (unsigned long long)s.drop_stale);
	cr_assert_eq(c.reqs_sent, L.n, "reqs_sent %llu (first transmissions only)",
		     (unsigned long long)c.reqs_sent);
	cr_assert_eq(c.resps_rx, L.n, "resps_rx %llu", (unsigned long long)c.resps_rx);
	cr_assert_eq(s.reqs_handled, L.n, "reqs_handled %llu", (unsigned long long)s.reqs_handled);
	cr_assert_eq(c.drop_bad_hdr + s.drop_bad_hdr, 0);
	cr_assert_eq(c.drop_bad_session + s.drop_bad_session, 0);
	cr_assert_eq(c.unknown_req_type + s.unknown_req_type, 0);
	cr_assert_eq(c.resets + s.resets, 0);
	if (expect_loss) {
		/*
		 * With p% lost in each direction about 2p% of the RPCs lose a
		 * round and need a retransmission: p% is a safe floor. Fewer
		 * means the datapath did not cross the lossy wire.
		 */
		cr_assert_geq(c.retransmits, (uint64_t)L.n * expect_loss / 100,
			      "%llu retransmissions for %u RPCs under %u%% loss each way: did the "
			      "datapath cross the lossy wire?",
			      (unsigned long long)c.retransmits, L.n, expect_loss);
		cr_assert_gt(s.dup_reqs, 0, "no lost response was answered again");
	}
	teardown(&L);
}
