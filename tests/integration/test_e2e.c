/* SPDX-License-Identifier: MIT */
/*
 * End-to-end tests of the Rpc engine through the public API only: a Nexus,
 * server and client Rpcs, sessions, windows of requests, deferred and nested
 * responses, and the error statuses a continuation can get.
 *
 * The same body is built once per transport (tests/CMakeLists.txt):
 * E2E_KIND=URPC_TRANSPORT_LOOP and E2E_NAME=e2e_loop, ..._UDP and e2e_udp,
 * ..._VERBS and e2e_verbs.
 *
 * Verbs runs where an RDMA port is active (a NIC, or Soft-RoCE in
 * tests/vm/verbs-stage.sh); elsewhere every case skips. The client Rpc uses
 * the device URPC_TEST_DEVICE_A names and the server Rpcs the one
 * URPC_TEST_DEVICE_B names (rxe1 and rxe0 in the VM, so the datapath crosses
 * the veth pair); unset, each Rpc takes the default port. Session management
 * always goes through the Nexus's kernel UDP socket on 127.0.0.1.
 *
 * Unless a test says otherwise, every Rpc lives in the test's thread and the
 * test drives their event loops in turn (pass()), bounded by wall time.
 * Criterion forks per test, so the file-scope world is fresh in each test.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h" /* urpc__rpc_set_clock(), for the idle-gap test only */
#include "verbs_skip.h"

#ifndef E2E_KIND
#error "build with -DE2E_KIND=URPC_TRANSPORT_<KIND> -DE2E_NAME=<suite>"
#endif

/* Request types. UNKNOWN has no handler. */
enum {
	REQ_ECHO = 1,	 /* answers ~byte for every byte, at once */
	REQ_DEFER = 2,	 /* answers byte ^ 0xa5, from a later loop pass */
	REQ_NESTED = 3,	 /* asks SRV_B for REQ_ECHO, answers its response ^ 0x33 */
	REQ_BIG = 4,	 /* answers max_msg_size bytes */
	REQ_UNKNOWN = 99 /* no handler registered */
};

/* Rpc ids. */
#define SRV_A 1
#define SRV_B 2
#define CLI 3
#define NR_IDS 4

#define MAX_SESS 64	    /* sm_log capacity; also the Rpcs' max_sessions */
#define MAX_REQ_ID 40000    /* request ids of one test */
#define MAX_PENDING 256	    /* deferred requests held at once */
#define NESTED_POOL 64	    /* nested requests in flight on SRV_A */
#define WAIT_MS 5000	    /* bound of a connect or disconnect wait */
#define PHASE_MS 60000	    /* a windowed run in which nothing completed this long fails */
#define TEST_TIMEOUT_S 120. /* Criterion kills a test that runs longer */

struct sm_log {
	unsigned connected[MAX_SESS];
	unsigned failed[MAX_SESS];
	unsigned disconnected[MAX_SESS];
	unsigned reset[MAX_SESS];
	int status[MAX_SESS];
	unsigned bad; /* events with a session number out of range */
};

/* A deferred request held by the test, answered from a later pass. */
struct pending {
	struct urpc_req_handle *h;
	uint64_t id;
	uint64_t stored_pass;
	uint64_t ready_us;
	size_t len;
	uint8_t *data; /* copy of the request bytes (the handler's view dies with it) */
};

/* A nested request of SRV_A to SRV_B, issued by the REQ_NESTED handler. */
struct nested {
	bool busy;
	struct urpc_req_handle *h;
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
};

/* A client request context: one per window position. */
struct creq {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	int session;
	uint8_t type;
	uint64_t id;
	bool busy;
	int status;
};

struct world {
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc[NR_IDS];
	struct sm_log sm[NR_IDS];
	size_t max_msg;
	uint64_t pass;
	uint64_t next_id;

	/* server side */
	atomic_uint handler_errors;
	uint8_t seen_echo[MAX_REQ_ID];
	uint8_t seen_defer[MAX_REQ_ID];
	uint8_t seen_nested[MAX_REQ_ID];
	struct pending defer[MAX_PENDING];
	unsigned nr_defer;
	uint64_t defer_hold_us; /* 0: answer on the next pass */
	int nested_session;	/* SRV_A's session to SRV_B */
	struct nested nested[NESTED_POOL];

	/* client side */
	uint8_t done[MAX_REQ_ID];
	unsigned completed;
	unsigned cont_errors;
	char first_err[256];
};

static struct world W;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void note_err(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Count a failure seen inside a callback; the test asserts on the count. */
static void note_err(struct world *w, const char *fmt, ...)
{
	va_list ap;

	if (w->cont_errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(w->first_err, sizeof(w->first_err), fmt, ap);
		va_end(ap);
	}
}

/* ---- payloads ------------------------------------------------------------- */

static uint8_t pat(uint64_t id, size_t i)
{
	return (uint8_t)(id * 131u + i * 7u + 3u);
}

/* Sizes from 8 to max, so full datagrams are exercised too. */
static size_t req_size_for(uint64_t id, size_t max)
{
	return 8 + (size_t)((id * 7919u) % (max - 8 + 1));
}

static void fill_req(uint8_t *p, size_t len, uint64_t id)
{
	size_t i;

	memcpy(p, &id, sizeof(id));
	for (i = sizeof(id); i < len; i++)
		p[i] = pat(id, i);
}

static uint64_t id_of(const uint8_t *p)
{
	uint64_t id;

	memcpy(&id, p, sizeof(id));
	return id;
}

/* The byte a response must carry at @i for request type @type. */
static uint8_t expect_byte(uint8_t type, uint8_t req_byte)
{
	switch (type) {
	case REQ_ECHO:
		return (uint8_t)~req_byte;
	case REQ_DEFER:
		return req_byte ^ 0xa5;
	case REQ_NESTED:
		return (uint8_t)(~req_byte) ^ 0x33;
	default:
		return 0;
	}
}

/* ---- handlers (run on the server Rpcs' owner thread) ---------------------- */

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len, i;
	uint64_t id;

	d = urpc_req_data(h, &len);
	if (!d || len < 8 || !resp || len > resp->max_data_size || urpc_req_type(h) != REQ_ECHO) {
		w->handler_errors++;
		return;
	}
	id = id_of(d);
	if (id < MAX_REQ_ID)
		w->seen_echo[id]++;
	for (i = 0; i < len; i++)
		resp->buf[i] = (uint8_t)~d[i];
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		w->handler_errors++;
}

static void defer_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct pending *p;
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	if (!d || len < 8 || len > w->max_msg || w->nr_defer == MAX_PENDING) {
		w->handler_errors++;
		return;
	}
	p = &w->defer[w->nr_defer++];
	p->h = h;
	p->id = id_of(d);
	p->stored_pass = w->pass;
	p->ready_us = now_us() + w->defer_hold_us;
	p->len = len;
	memcpy(p->data, d, len);
	if (p->id < MAX_REQ_ID)
		w->seen_defer[p->id]++;
}

/* Answer the deferred requests stored in an earlier pass whose hold is over. */
static void service_deferred(struct world *w)
{
	uint64_t t = now_us();
	unsigned i = 0;
	size_t j;

	while (i < w->nr_defer) {
		struct pending *p = &w->defer[i];
		struct urpc_msgbuf *resp;
		uint8_t *tmp;

		/* A full pass of every Rpc must lie between the handler and the answer. */
		if (p->stored_pass + 1 >= w->pass || t < p->ready_us) {
			i++;
			continue;
		}
		if (p->id < MAX_REQ_ID && w->done[p->id])
			note_err(w, "request %llu completed before its deferred response was sent",
				 (unsigned long long)p->id);
		resp = urpc_req_resp_msgbuf(p->h);
		for (j = 0; j < p->len; j++)
			resp->buf[j] = p->data[j] ^ 0xa5;
		cr_assert_eq(urpc_msgbuf_resize(resp, p->len), 0);
		cr_assert_eq(urpc_resp_enqueue(p->h, resp), 0);
		/* Swap with the last entry, keeping the data buffers distinct. */
		tmp = p->data;
		*p = w->defer[--w->nr_defer];
		w->defer[w->nr_defer].data = tmp;
	}
}

static void nested_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct nested *n = tag;
	struct urpc_msgbuf *out = urpc_req_resp_msgbuf(n->h);
	size_t i;

	if (!n->busy || resp != &n->resp || status != 0 || resp->data_size != n->req.data_size) {
		W.handler_errors++;
		return;
	}
	for (i = 0; i < resp->data_size; i++) {
		if (resp->buf[i] != expect_byte(REQ_ECHO, n->req.buf[i])) {
			W.handler_errors++;
			return;
		}
		out->buf[i] = resp->buf[i] ^ 0x33;
	}
	n->busy = false;
	if (urpc_msgbuf_resize(out, resp->data_size) || urpc_resp_enqueue(n->h, out))
		W.handler_errors++;
}

static void nested_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct nested *n = NULL;
	const uint8_t *d;
	size_t len;
	unsigned i;
	int ret;

	d = urpc_req_data(h, &len);
	for (i = 0; i < NESTED_POOL && !n; i++)
		if (!w->nested[i].busy)
			n = &w->nested[i];
	if (!d || len < 8 || len > w->max_msg || !n || rpc != w->rpc[SRV_A]) {
		w->handler_errors++;
		return;
	}
	if (id_of(d) < MAX_REQ_ID)
		w->seen_nested[id_of(d)]++;
	n->busy = true;
	n->h = h;
	memcpy(n->req.buf, d, len);
	cr_assert_eq(urpc_msgbuf_resize(&n->req, len), 0);
	ret = urpc_req_enqueue(rpc, w->nested_session, REQ_ECHO, &n->req, &n->resp, nested_cont, n,
			       0);
	if (ret) {
		n->busy = false;
		w->handler_errors++;
	}
}

static void big_handler(struct urpc_req_handle *h, void *arg)
{
	struct world *w = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);

	memset(resp->buf, 0x5c, w->max_msg);
	if (urpc_msgbuf_resize(resp, w->max_msg) || urpc_resp_enqueue(h, resp))
		w->handler_errors++;
}

/* ---- setup and teardown --------------------------------------------------- */

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	struct sm_log *l = arg;

	if (session < 0 || session >= MAX_SESS) {
		l->bad++;
		return;
	}
	l->status[session] = status;
	switch (ev) {
	case URPC_SM_CONNECTED:
		l->connected[session]++;
		break;
	case URPC_SM_CONNECT_FAILED:
		l->failed[session]++;
		break;
	case URPC_SM_DISCONNECTED:
		l->disconnected[session]++;
		break;
	case URPC_SM_RESET:
		l->reset[session]++;
		break;
	default:
		l->bad++;
		break;
	}
}

/* xdp: SRV_A's endpoint on device A, beside CLI's (nested requests). */
static bool srv_a_on_a;

static void opts_for(struct world *w, uint8_t id, struct urpc_rpc_opts *o)
{
	urpc_rpc_opts_init(o);
	o->transport = E2E_KIND;
	/* Verbs only (loop and udp ignore it): client on device A, servers on B. */
	o->device = getenv(id == CLI ? "URPC_TEST_DEVICE_A" : "URPC_TEST_DEVICE_B");
	/*
	 * xdp: one endpoint per interface (the kernel gives one AF_XDP socket
	 * per queue), so SRV_B takes a third one where tests/xdp-stage.sh made it.
	 */
	if (E2E_KIND == URPC_TRANSPORT_XDP && id == SRV_B && getenv("URPC_TEST_DEVICE_C"))
		o->device = getenv("URPC_TEST_DEVICE_C");
	/*
	 * xdp, nested requests: SRV_A is a client too, so its endpoint goes
	 * on the Nexus's address, device A, beside CLI's (the endpoints of a
	 * process share an interface's UMEM; CLI reaches it through the
	 * kernel socket, it reaches SRV_B by AF_XDP frames).
	 */
	if (E2E_KIND == URPC_TRANSPORT_XDP && id == SRV_A && srv_a_on_a)
		o->device = getenv("URPC_TEST_DEVICE_A");
	o->sm_handler = sm_cb;
	o->sm_arg = &w->sm[id];
	o->max_sessions = MAX_SESS;
	/* The loop's faults are off here; the seed only fixes the tokens. */
	o->seed = 0x5eed0000u + id;
}

static void world_nexus_up(struct world *w)
{
	struct urpc_nexus_opts no;
	unsigned i;

	verbs_skip_without_port(E2E_KIND);
	memset(w, 0, sizeof(*w));
	urpc_nexus_opts_init(&no);
	no.host = test_host();
	no.port = 0;
	cr_assert_eq(urpc_nexus_create(&no, &w->nx), 0);
	cr_assert_neq(urpc_nexus_port(w->nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(w->nx, REQ_ECHO, echo_handler, w), 0);
	cr_assert_eq(urpc_nexus_register_handler(w->nx, REQ_DEFER, defer_handler, w), 0);
	cr_assert_eq(urpc_nexus_register_handler(w->nx, REQ_NESTED, nested_handler, w), 0);
	cr_assert_eq(urpc_nexus_register_handler(w->nx, REQ_BIG, big_handler, w), 0);
	w->nested_session = -1;
	for (i = 0; i < MAX_PENDING; i++)
		w->defer[i].data = NULL;
}

static struct urpc_rpc *rpc_up(struct world *w, uint8_t id)
{
	struct urpc_rpc_opts o;
	size_t m;
	unsigned i;

	opts_for(w, id, &o);
	cr_assert_eq(urpc_rpc_create(w->nx, id, &o, &w->rpc[id]), 0, "urpc_rpc_create(%u)", id);
	cr_assert_eq(urpc_rpc_id(w->rpc[id]), id);
	m = urpc_rpc_max_msg_size(w->rpc[id]);
	cr_assert_geq(m, 64, "max_msg_size %zu is too small to be useful", m);
	if (!w->max_msg) {
		w->max_msg = m;
		for (i = 0; i < MAX_PENDING; i++) {
			w->defer[i].data = malloc(m);
			cr_assert_not_null(w->defer[i].data);
		}
	}
	cr_assert_eq(m, w->max_msg, "Rpcs of one transport disagree on max_msg_size");
	return w->rpc[id];
}

static void world_up(struct world *w)
{
	world_nexus_up(w);
	rpc_up(w, SRV_A);
	rpc_up(w, SRV_B);
	rpc_up(w, CLI);
}

static void nested_pool_free(struct world *w)
{
	unsigned i;

	for (i = 0; i < NESTED_POOL; i++) {
		if (!w->nested[i].req.buf)
			continue;
		cr_assert_not(w->nested[i].busy);
		cr_assert_eq(urpc_msgbuf_free(w->rpc[SRV_A], &w->nested[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(w->rpc[SRV_A], &w->nested[i].resp), 0);
		w->nested[i].req.buf = NULL;
	}
}

static void world_down(struct world *w)
{
	unsigned i;

	nested_pool_free(w);
	for (i = 0; i < NR_IDS; i++) {
		if (!w->rpc[i])
			continue;
		cr_assert_eq(urpc_rpc_destroy(w->rpc[i]), 0, "urpc_rpc_destroy(%u)", i);
		w->rpc[i] = NULL;
	}
	cr_assert_eq(urpc_nexus_destroy(w->nx), 0);
	w->nx = NULL;
	for (i = 0; i < MAX_PENDING; i++)
		free(w->defer[i].data);
	cr_assert_eq(w->handler_errors, 0, "handlers saw %u errors", w->handler_errors);
}

/* One pass of every Rpc the test thread owns, then the deferred answers. */
static void pass(struct world *w)
{
	unsigned i;

	for (i = 0; i < NR_IDS; i++)
		if (w->rpc[i])
			cr_assert_eq(urpc_rpc_run_event_loop_once(w->rpc[i]), 0);
	w->pass++;
	service_deferred(w);
}

static int connect_wait(struct world *w, uint8_t cli, uint8_t srv)
{
	struct sm_log *l = &w->sm[cli];
	char hp[32];
	uint64_t deadline;
	int s;

	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(w->nx));
	cr_assert_eq(urpc_session_connect(w->rpc[cli], hp, srv, &s), 0);
	cr_assert(s >= 0 && s < MAX_SESS, "session number %d out of range", s);
	cr_assert_not(urpc_session_is_connected(w->rpc[cli], s));
	deadline = now_us() + WAIT_MS * 1000u;
	while (!l->connected[s] && !l->failed[s] && now_us() < deadline)
		pass(w);
	if (l->failed[s]) {
		struct urpc_nexus_stats ns;
		struct urpc_rpc_stats cs;

		/*
		 * Which side went silent (seen once, under load: the 2 s connect
		 * time-out ran out): what the Nexus and the client Rpc counted.
		 */
		cr_assert_eq(urpc_nexus_get_stats(w->nx, &ns), 0);
		cr_assert_eq(urpc_rpc_get_stats(w->rpc[cli], &cs), 0);
		cr_assert_fail(
			"connect %u -> %u failed after %llu ms: %s (Nexus: SM rx %llu tx "
			"%llu, cookies %llu, drop bad %llu auth %llu no-rpc %llu queue-full "
			"%llu; client Rpc: SM tx %llu rx %llu)",
			cli, srv,
			(unsigned long long)(now_us() - deadline + WAIT_MS * 1000u) / 1000,
			urpc_strerror(l->status[s]), (unsigned long long)ns.sm_rx,
			(unsigned long long)ns.sm_tx, (unsigned long long)ns.cookies_tx,
			(unsigned long long)ns.drop_bad_pkt, (unsigned long long)ns.drop_auth,
			(unsigned long long)ns.drop_no_rpc, (unsigned long long)ns.drop_queue_full,
			(unsigned long long)cs.sm_pkts_tx, (unsigned long long)cs.sm_pkts_rx);
	}
	cr_assert_eq(l->connected[s], 1, "connect %u -> %u: no CONNECTED within %d ms", cli, srv,
		     WAIT_MS);
	cr_assert_eq(l->status[s], 0);
	cr_assert(urpc_session_is_connected(w->rpc[cli], s));
	return s;
}

static void disconnect_wait(struct world *w, uint8_t cli, int s)
{
	struct sm_log *l = &w->sm[cli];
	uint64_t deadline = now_us() + WAIT_MS * 1000u;

	cr_assert_eq(urpc_session_disconnect(w->rpc[cli], s), 0);
	while (!l->disconnected[s] && now_us() < deadline)
		pass(w);
	cr_assert_eq(l->disconnected[s], 1, "no DISCONNECTED within %d ms", WAIT_MS);
	cr_assert_not(urpc_session_is_connected(w->rpc[cli], s));
	cr_assert_eq(l->reset[s], 0);
}

static void get_stats(struct urpc_rpc *rpc, struct urpc_rpc_stats *st)
{
	cr_assert_eq(urpc_rpc_get_stats(rpc, st), 0);
}

/* ---- windowed client runs --------------------------------------------------- */

static void client_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct creq *c = tag;
	struct world *w = &W;
	size_t i;

	if (!c->busy) {
		note_err(w, "continuation of request %llu ran twice", (unsigned long long)c->id);
		return;
	}
	c->busy = false;
	c->status = status;
	w->completed++;
	if (c->id < MAX_REQ_ID)
		w->done[c->id]++;
	if (rpc != w->rpc[CLI] || resp != &c->resp) {
		note_err(w, "request %llu: continuation got the wrong rpc or buffer",
			 (unsigned long long)c->id);
		return;
	}
	if (status != 0) {
		note_err(w, "request %llu (type %u): status %d (%s)", (unsigned long long)c->id,
			 c->type, status, urpc_strerror(status));
		return;
	}
	if (resp->data_size != c->req.data_size) {
		note_err(w, "request %llu: response has %zu bytes, request %zu",
			 (unsigned long long)c->id, resp->data_size, c->req.data_size);
		return;
	}
	for (i = 0; i < resp->data_size; i++) {
		if (resp->buf[i] != expect_byte(c->type, c->req.buf[i])) {
			note_err(w, "request %llu (type %u): byte %zu is 0x%02x, want 0x%02x",
				 (unsigned long long)c->id, c->type, i, resp->buf[i],
				 expect_byte(c->type, c->req.buf[i]));
			return;
		}
	}
}

/*
 * Issue @n requests of @type over @sess (round robin), keeping @window
 * outstanding per session, and drive every Rpc until all have completed.
 */
static void run_window(struct world *w, const int *sess, unsigned nsess, uint8_t type, unsigned n,
		       unsigned window)
{
	struct urpc_rpc *cli = w->rpc[CLI];
	unsigned nctx = nsess * window, issued = 0, i;
	unsigned start_completed = w->completed, last_completed = w->completed;
	uint64_t deadline = now_us() + PHASE_MS * 1000ull;
	struct creq *ctx;

	cr_assert_leq(w->next_id + n, MAX_REQ_ID);
	ctx = calloc(nctx, sizeof(*ctx));
	cr_assert_not_null(ctx);
	for (i = 0; i < nctx; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(cli, w->max_msg, &ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(cli, w->max_msg, &ctx[i].resp), 0);
		cr_assert_geq(ctx[i].req.max_data_size, w->max_msg);
		ctx[i].session = sess[i % nsess];
		ctx[i].type = type;
	}
	while (w->completed - start_completed < n) {
		for (i = 0; i < nctx && issued < n; i++) {
			struct creq *c = &ctx[i];
			size_t len;
			int ret;

			if (c->busy)
				continue;
			c->id = w->next_id;
			len = req_size_for(c->id, w->max_msg);
			cr_assert_eq(urpc_msgbuf_resize(&c->req, len), 0);
			fill_req(c->req.buf, len, c->id);
			c->busy = true;
			ret = urpc_req_enqueue(cli, c->session, type, &c->req, &c->resp,
					       client_cont, c, 0);
			if (ret == -ENOMEM || ret == -EAGAIN) {
				/* back-pressure: this session's queue is full; retry next pass */
				c->busy = false;
				continue;
			}
			cr_assert_eq(ret, 0, "urpc_req_enqueue: %s", urpc_strerror(ret));
			w->next_id++;
			issued++;
		}
		/* Bound by progress: PHASE_MS from the last completion, not in all. */
		if (w->completed != last_completed) {
			last_completed = w->completed;
			deadline = now_us() + PHASE_MS * 1000ull;
		}
		cr_assert_lt(now_us(), deadline, "%u of %u requests completed, then none for %d ms",
			     w->completed - start_completed, n, PHASE_MS);
		pass(w);
	}
	cr_assert_eq(w->cont_errors, 0, "%u continuation errors; first: %s", w->cont_errors,
		     w->first_err);
	for (i = 0; i < nctx; i++) {
		cr_assert_not(ctx[i].busy);
		cr_assert_eq(urpc_msgbuf_free(cli, &ctx[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(cli, &ctx[i].resp), 0);
	}
	free(ctx);
}

/* Wait until the continuation of @c has run. */
static void wait_done(struct world *w, struct creq *c)
{
	uint64_t deadline = now_us() + WAIT_MS * 1000u;

	while (c->busy && now_us() < deadline)
		pass(w);
	cr_assert_not(c->busy, "request %llu: no continuation within %d ms",
		      (unsigned long long)c->id, WAIT_MS);
}

/* Every id in [from, to) was handled exactly once by the @seen handler. */
static void assert_once(const uint8_t *seen, uint64_t from, uint64_t to, const char *what)
{
	uint64_t id;

	for (id = from; id < to; id++)
		cr_assert_eq(seen[id], 1, "%s handler ran %u times for request %llu", what,
			     seen[id], (unsigned long long)id);
}

static void assert_done_once(const struct world *w, uint64_t from, uint64_t to)
{
	uint64_t id;

	for (id = from; id < to; id++)
		cr_assert_eq(w->done[id], 1, "continuation of request %llu ran %u times",
			     (unsigned long long)id, w->done[id]);
}

/* ---- tests -------------------------------------------------------------------- */

Test(E2E_NAME, connect_then_one_request, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_rpc_stats st;
	int s;

	world_up(&W);
	s = connect_wait(&W, CLI, SRV_A);
	get_stats(W.rpc[CLI], &st);
	cr_assert_eq(st.sessions, 1);
	run_window(&W, &s, 1, REQ_ECHO, 1, 1);
	assert_once(W.seen_echo, 0, 1, "echo");
	disconnect_wait(&W, CLI, s);
	get_stats(W.rpc[CLI], &st);
	cr_assert_eq(st.sessions, 0);
	world_down(&W);
}

/*
 * Its own Criterion bound: 20,000 requests took longer than 120 s through
 * the emulated NIC beside heavy load (5,592 in 60 s at load average 14-24),
 * while they moved; run_window() fails when nothing completes for PHASE_MS.
 */
Test(E2E_NAME, windowed_requests_over_several_sessions, .timeout = 600)
{
	const unsigned n = 20000;
	struct urpc_rpc_stats c, a, b;
	uint64_t deadline;
	int s[4], i;

	world_up(&W);
	/* Two sessions to each server Rpc. */
	for (i = 0; i < 4; i++)
		s[i] = connect_wait(&W, CLI, i % 2 ? SRV_B : SRV_A);
	for (i = 0; i < 4; i++)
		cr_assert_eq(urpc_session_is_connected(W.rpc[CLI], s[i]), true);
	get_stats(W.rpc[SRV_A], &a);
	get_stats(W.rpc[SRV_B], &b);
	cr_assert_eq(a.sessions, 2);
	cr_assert_eq(b.sessions, 2);

	/* More outstanding than a session has slots: the excess waits in its queue. */
	run_window(&W, s, 4, REQ_ECHO, n, 16);
	assert_once(W.seen_echo, 0, n, "echo");
	assert_done_once(&W, 0, n);

	get_stats(W.rpc[CLI], &c);
	get_stats(W.rpc[SRV_A], &a);
	get_stats(W.rpc[SRV_B], &b);
	cr_assert_eq(c.reqs_sent, n, "client reqs_sent %llu", (unsigned long long)c.reqs_sent);
	cr_assert_eq(c.resps_rx, c.reqs_sent, "client resps_rx %llu != reqs_sent %llu",
		     (unsigned long long)c.resps_rx, (unsigned long long)c.reqs_sent);
	cr_assert_eq(a.reqs_handled + b.reqs_handled, n, "servers handled %llu + %llu",
		     (unsigned long long)a.reqs_handled, (unsigned long long)b.reqs_handled);
	/* Both servers took part (2 + 2 sessions). */
	cr_assert_gt(a.reqs_handled, n / 4);
	cr_assert_gt(b.reqs_handled, n / 4);
	cr_assert_eq(c.drop_bad_hdr + a.drop_bad_hdr + b.drop_bad_hdr, 0);
	cr_assert_eq(c.drop_bad_session + a.drop_bad_session + b.drop_bad_session, 0);
	cr_assert_eq(a.unknown_req_type + b.unknown_req_type, 0);
	cr_assert_geq(c.pkts_tx, n);
	cr_assert_geq(c.pkts_rx, n);
	cr_assert_geq(a.pkts_rx + b.pkts_rx, n);
	cr_assert_eq(c.sessions, 4);
	/*
	 * The datapath's system calls: udp counts its sendmmsg()/recvmmsg()
	 * calls, batched (never more than one per datagram, each receive that
	 * found some took at least one); loop and verbs make none.
	 */
	if (E2E_KIND == URPC_TRANSPORT_UDP) {
		cr_assert_gt(c.tp_sys_tx, 0);
		cr_assert_leq(c.tp_sys_tx, c.pkts_tx);
		cr_assert_gt(c.tp_sys_rx, c.tp_sys_rx_empty);
		cr_assert_leq(c.tp_sys_rx - c.tp_sys_rx_empty, c.pkts_rx);
		cr_assert_gt(a.tp_sys_rx - a.tp_sys_rx_empty, 0);
		cr_assert_leq(a.tp_sys_tx, a.pkts_tx);
	} else if (E2E_KIND == URPC_TRANSPORT_XDP) {
		/* receiving costs no system call; sending at most one kick per datagram */
		cr_assert_eq(c.tp_sys_rx + a.tp_sys_rx + b.tp_sys_rx, 0,
			     "xdp received with a syscall");
		cr_assert_leq(c.tp_sys_tx, c.pkts_tx);
		cr_assert_leq(a.tp_sys_tx, a.pkts_tx);
	} else {
		cr_assert_eq(c.tp_sys_tx + c.tp_sys_rx + c.tp_sys_rx_empty, 0);
		cr_assert_eq(a.tp_sys_tx + a.tp_sys_rx + a.tp_sys_rx_empty, 0);
	}

	for (i = 0; i < 4; i++)
		disconnect_wait(&W, CLI, s[i]);
	/* The servers free their halves once the disconnects are through. */
	deadline = now_us() + WAIT_MS * 1000u;
	do {
		pass(&W);
		get_stats(W.rpc[SRV_A], &a);
		get_stats(W.rpc[SRV_B], &b);
	} while ((a.sessions || b.sessions) && now_us() < deadline);
	cr_assert_eq(a.sessions + b.sessions, 0, "servers still hold %llu sessions",
		     (unsigned long long)(a.sessions + b.sessions));
	world_down(&W);
}

Test(E2E_NAME, enqueue_before_connected_is_sent_on_connect, .timeout = TEST_TIMEOUT_S)
{
	struct creq c = {0};
	char hp[32];
	int s;

	world_up(&W);
	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.rpc[CLI], hp, SRV_A, &s), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 64, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 64, &c.resp), 0);
	fill_req(c.req.buf, 64, 0);
	c.type = REQ_ECHO;
	c.busy = true;
	W.next_id = 1;
	cr_assert_eq(urpc_req_enqueue(W.rpc[CLI], s, REQ_ECHO, &c.req, &c.resp, client_cont, &c, 0),
		     0);
	cr_assert(c.busy, "the continuation ran inside urpc_req_enqueue");
	wait_done(&W, &c);
	cr_assert_eq(W.sm[CLI].connected[s], 1);
	cr_assert_eq(W.cont_errors, 0, "%s", W.first_err);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &c.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &c.resp), 0);
	disconnect_wait(&W, CLI, s);
	world_down(&W);
}

Test(E2E_NAME, deferred_responses_from_a_later_pass, .timeout = TEST_TIMEOUT_S)
{
	const unsigned n = 2000;
	struct urpc_rpc_stats c, a;
	int s[2];

	world_up(&W);
	s[0] = connect_wait(&W, CLI, SRV_A);
	s[1] = connect_wait(&W, CLI, SRV_A);
	run_window(&W, s, 2, REQ_DEFER, n, 8);
	cr_assert_eq(W.nr_defer, 0);
	assert_once(W.seen_defer, 0, n, "deferred");
	assert_done_once(&W, 0, n);
	get_stats(W.rpc[CLI], &c);
	get_stats(W.rpc[SRV_A], &a);
	cr_assert_eq(c.reqs_sent, n);
	cr_assert_eq(c.resps_rx, n);
	cr_assert_eq(a.reqs_handled, n);
	disconnect_wait(&W, CLI, s[0]);
	disconnect_wait(&W, CLI, s[1]);
	world_down(&W);
}

/*
 * A deferred response that takes several RTOs: the client retransmits, the
 * server must not run the handler again while it is still pending, and the
 * continuation runs once.
 */
Test(E2E_NAME, deferred_response_outlasting_retransmissions, .timeout = TEST_TIMEOUT_S)
{
	const unsigned n = 64;
	struct urpc_rpc_opts o;
	struct urpc_rpc_stats c, a;
	int s;

	world_nexus_up(&W);
	rpc_up(&W, SRV_A);
	opts_for(&W, CLI, &o);
	o.rto_us = 1000;
	o.rto_max_us = 2000;
	cr_assert_eq(urpc_rpc_create(W.nx, CLI, &o, &W.rpc[CLI]), 0);
	W.defer_hold_us = 15000; /* at least 7 RTOs */
	s = connect_wait(&W, CLI, SRV_A);
	run_window(&W, &s, 1, REQ_DEFER, n, 8);
	assert_once(W.seen_defer, 0, n, "deferred");
	assert_done_once(&W, 0, n);
	get_stats(W.rpc[CLI], &c);
	get_stats(W.rpc[SRV_A], &a);
	cr_assert_gt(c.retransmits, 0, "no retransmission during a 15 ms hold with a 1 ms RTO");
	cr_assert_eq(a.reqs_handled, n, "handler ran %llu times for %u requests",
		     (unsigned long long)a.reqs_handled, n);
	cr_assert_eq(c.reqs_sent, n);
	cr_assert_eq(c.resps_rx, n);
	disconnect_wait(&W, CLI, s);
	world_down(&W);
}

Test(E2E_NAME, nested_request_from_a_handler, .timeout = TEST_TIMEOUT_S)
{
	const unsigned n = 3000;
	struct urpc_rpc_stats c, a, b;
	unsigned i;
	int s;

	srv_a_on_a = true;
	world_up(&W);
	for (i = 0; i < NESTED_POOL; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(W.rpc[SRV_A], W.max_msg, &W.nested[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(W.rpc[SRV_A], W.max_msg, &W.nested[i].resp), 0);
	}
	W.nested_session = connect_wait(&W, SRV_A, SRV_B);
	s = connect_wait(&W, CLI, SRV_A);
	run_window(&W, &s, 1, REQ_NESTED, n, 8);
	assert_once(W.seen_nested, 0, n, "nested");
	assert_once(W.seen_echo, 0, n, "echo (inner)");
	assert_done_once(&W, 0, n);
	get_stats(W.rpc[CLI], &c);
	get_stats(W.rpc[SRV_A], &a);
	get_stats(W.rpc[SRV_B], &b);
	cr_assert_eq(c.reqs_sent, n);
	cr_assert_eq(c.resps_rx, n);
	cr_assert_eq(a.reqs_handled, n);
	cr_assert_eq(a.reqs_sent, n, "SRV_A as a client sent %llu",
		     (unsigned long long)a.reqs_sent);
	cr_assert_eq(a.resps_rx, n);
	cr_assert_eq(b.reqs_handled, n);
	disconnect_wait(&W, CLI, s);
	disconnect_wait(&W, SRV_A, W.nested_session);
	world_down(&W);
}

Test(E2E_NAME, request_type_without_handler_gets_enoent, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_rpc_stats a;
	struct creq c = {0};
	int s;

	world_up(&W);
	s = connect_wait(&W, CLI, SRV_A);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 32, &c.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 32, &c.resp), 0);
	W.next_id = 5;
	c.id = 5;
	fill_req(c.req.buf, 32, c.id);
	c.type = REQ_UNKNOWN;
	c.busy = true;
	cr_assert_eq(
		urpc_req_enqueue(W.rpc[CLI], s, REQ_UNKNOWN, &c.req, &c.resp, client_cont, &c, 0),
		0);
	wait_done(&W, &c);
	cr_assert_eq(c.status, -ENOSYS, "status %d (%s), want -ENOSYS", c.status,
		     urpc_strerror(c.status));
	cr_assert_eq(W.done[5], 1);
	get_stats(W.rpc[SRV_A], &a);
	cr_assert_eq(a.unknown_req_type, 1);
	cr_assert_eq(a.reqs_handled, 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &c.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &c.resp), 0);

	/* The session still works. */
	W.cont_errors = 0;
	W.next_id = 10;
	run_window(&W, &s, 1, REQ_ECHO, 10, 4);
	assert_once(W.seen_echo, 10, 20, "echo");
	disconnect_wait(&W, CLI, s);
	world_down(&W);
}

Test(E2E_NAME, oversized_request_and_response, .timeout = TEST_TIMEOUT_S)
{
	struct creq big = {0}, small = {0};
	int s, ret;

	world_up(&W);
	s = connect_wait(&W, CLI, SRV_A);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], W.max_msg, &big.resp), 0);

	/*
	 * Above one datagram a request is large (see test_large.c); above
	 * URPC_MAX_MSG_SIZE, which no buffer holds, enqueue refuses it.
	 */
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], W.max_msg, &big.req), 0);
	big.req.data_size = (size_t)URPC_MAX_MSG_SIZE + 1;
	ret = urpc_req_enqueue(W.rpc[CLI], s, REQ_ECHO, &big.req, &big.resp, client_cont, &big, 0);
	cr_assert_eq(ret, -EMSGSIZE, "enqueue of %zu bytes: %d", big.req.data_size, ret);

	/* Exactly the limit is fine. */
	big.type = REQ_ECHO;
	big.id = 0;
	cr_assert_eq(urpc_msgbuf_resize(&big.req, W.max_msg), 0);
	fill_req(big.req.buf, W.max_msg, big.id);
	big.busy = true;
	cr_assert_eq(urpc_req_enqueue(W.rpc[CLI], s, REQ_ECHO, &big.req, &big.resp, client_cont,
				      &big, 0),
		     0);
	wait_done(&W, &big);
	cr_assert_eq(W.cont_errors, 0, "%s", W.first_err);
	cr_assert_eq(big.status, 0);
	cr_assert_eq(big.resp.data_size, W.max_msg);

	/* A response larger than the response buffer: -EMSGSIZE in the continuation. */
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 16, &small.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 1, &small.resp), 0);
	if (small.resp.max_data_size < W.max_msg) {
		small.id = 1;
		small.type = REQ_BIG;
		fill_req(small.req.buf, 16, small.id);
		small.busy = true;
		cr_assert_eq(urpc_req_enqueue(W.rpc[CLI], s, REQ_BIG, &small.req, &small.resp,
					      client_cont, &small, 0),
			     0);
		wait_done(&W, &small);
		cr_assert_eq(small.status, -EMSGSIZE, "status %d (%s), want -EMSGSIZE",
			     small.status, urpc_strerror(small.status));
	} else {
		cr_log_warn("a 1-byte buffer has capacity %zu: response -EMSGSIZE not tested",
			    small.resp.max_data_size);
	}
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &small.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &small.resp), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &big.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &big.resp), 0);

	/* The session survives both. */
	W.cont_errors = 0;
	W.next_id = 100;
	run_window(&W, &s, 1, REQ_ECHO, 20, 4);
	disconnect_wait(&W, CLI, s);
	world_down(&W);
}

Test(E2E_NAME, destroy_with_session_open_resets_it, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_rpc_stats a;
	uint64_t deadline;
	int s;

	world_up(&W);
	s = connect_wait(&W, CLI, SRV_A);
	run_window(&W, &s, 1, REQ_ECHO, 10, 2);
	/* Destroying the client with a live session succeeds... */
	cr_assert_eq(urpc_rpc_destroy(W.rpc[CLI]), 0);
	W.rpc[CLI] = NULL;
	/* ...and the server lets go of its half (a RESET, or the ping timeout). */
	deadline = now_us() + WAIT_MS * 1000u;
	do {
		pass(&W);
		get_stats(W.rpc[SRV_A], &a);
	} while (a.sessions && now_us() < deadline);
	cr_assert_eq(a.sessions, 0, "server still holds the destroyed client's session");
	world_down(&W);
}

/* A client clock that only the test moves (nanoseconds). */
static uint64_t fake_ns;

static uint64_t fake_clock(void *arg)
{
	return fake_ns;
}

/*
 * An application may work for a while without running the event loop, then
 * enqueue. The request's timeout and RTO count from the enqueue: with the
 * client's clock frozen after the gap, the request cannot have waited at all,
 * so it must complete, without a retransmission and without -ETIMEDOUT.
 */
Test(E2E_NAME, request_after_idle_gap_is_timed_from_enqueue, .timeout = TEST_TIMEOUT_S)
{
	struct urpc_rpc_opts o;
	struct urpc_rpc_stats c;
	struct creq r = {0};
	int s, i;

	world_nexus_up(&W);
	rpc_up(&W, SRV_A);
	opts_for(&W, CLI, &o);
	o.peer_timeout_ms = 600000; /* the gap is not a peer failure */
	cr_assert_eq(urpc_rpc_create(W.nx, CLI, &o, &W.rpc[CLI]), 0);
	fake_ns = now_us() * 1000u;
	urpc__rpc_set_clock(W.rpc[CLI], fake_clock, NULL);
	s = connect_wait(&W, CLI, SRV_A);
	for (i = 0; i < 10; i++)
		pass(&W);

	/* One second of application work, then a request with a 100 ms timeout. */
	fake_ns += 1000000000ull;
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 64, &r.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.rpc[CLI], 64, &r.resp), 0);
	fill_req(r.req.buf, 64, 0);
	r.type = REQ_ECHO;
	r.busy = true;
	W.next_id = 1;
	cr_assert_eq(
		urpc_req_enqueue(W.rpc[CLI], s, REQ_ECHO, &r.req, &r.resp, client_cont, &r, 100),
		0);
	wait_done(&W, &r);
	get_stats(W.rpc[CLI], &c);
	cr_assert_eq(r.status, 0,
		     "status %s: the 100 ms timeout was counted from the last loop pass, before "
		     "the 1 s gap, not from the enqueue",
		     urpc_strerror(r.status));
	cr_assert_eq(c.retransmits, 0,
		     "%llu retransmissions with the clock frozen: the RTO was counted from the "
		     "last loop pass, not from the transmission",
		     (unsigned long long)c.retransmits);
	cr_assert_eq(W.cont_errors, 0, "%s", W.first_err);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &r.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.rpc[CLI], &r.resp), 0);
	disconnect_wait(&W, CLI, s);
	world_down(&W);
}

/* ---- two threads (udp and verbs) ---------------------------------------------- */

struct srv_thread {
	struct world *w;
	atomic_int state; /* 0 starting, 1 serving, 2 create failed */
	atomic_bool stop;
	int create_ret;
	int loop_ret;
	int stats_ret;
	int destroy_ret;
	struct urpc_rpc_stats st;
};

static void *server_main(void *arg)
{
	struct srv_thread *t = arg;
	struct urpc_rpc_opts o;
	struct urpc_rpc *rpc;
	uint64_t deadline = now_us() + 100 * 1000000ull;

	opts_for(t->w, SRV_A, &o);
	o.sm_handler = NULL;
	t->create_ret = urpc_rpc_create(t->w->nx, SRV_A, &o, &rpc);
	if (t->create_ret) {
		atomic_store(&t->state, 2);
		return NULL;
	}
	atomic_store(&t->state, 1);
	while (!atomic_load(&t->stop) && now_us() < deadline && !t->loop_ret)
		t->loop_ret = urpc_rpc_run_event_loop(rpc, 2);
	t->stats_ret = urpc_rpc_get_stats(rpc, &t->st);
	t->destroy_ret = urpc_rpc_destroy(rpc);
	return NULL;
}

Test(E2E_NAME, server_and_client_in_two_threads, .timeout = TEST_TIMEOUT_S)
{
	const unsigned n = 10000;
	struct srv_thread t = {0};
	struct urpc_rpc_stats c;
	pthread_t th;
	uint64_t deadline;
	int s;

	if (E2E_KIND == URPC_TRANSPORT_LOOP)
		cr_skip_test("the loop transport's endpoints must share one thread");
	world_nexus_up(&W);
	rpc_up(&W, CLI);
	t.w = &W;
	cr_assert_eq(pthread_create(&th, NULL, server_main, &t), 0);
	deadline = now_us() + WAIT_MS * 1000u;
	while (atomic_load(&t.state) == 0 && now_us() < deadline)
		sched_yield();
	cr_assert_eq(atomic_load(&t.state), 1, "server thread did not start: %s",
		     urpc_strerror(t.create_ret));

	s = connect_wait(&W, CLI, SRV_A);
	run_window(&W, &s, 1, REQ_ECHO, n, 8);
	assert_done_once(&W, 0, n);
	disconnect_wait(&W, CLI, s);
	get_stats(W.rpc[CLI], &c);

	atomic_store(&t.stop, true);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(t.loop_ret, 0, "server loop: %s", urpc_strerror(t.loop_ret));
	cr_assert_eq(t.stats_ret, 0);
	cr_assert_eq(t.destroy_ret, 0, "server urpc_rpc_destroy: %s", urpc_strerror(t.destroy_ret));
	assert_once(W.seen_echo, 0, n, "echo");
	cr_assert_eq(t.st.reqs_handled, n);
	cr_assert_eq(c.reqs_sent, n);
	cr_assert_eq(c.resps_rx, n);
	world_down(&W);
}
