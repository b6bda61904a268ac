/* SPDX-License-Identifier: MIT */
/*
 * Responses read in place (urpc_req_enqueue_view): the continuation gets a
 * view of the response in the receive ring instead of a copy in a buffer.
 * What it sees with status 0 (every size up to a datagram, windows beyond
 * the session's slots, with and without a deadline, mixed with copying
 * requests on the same session), what it sees with every error (no
 * handler, a response too large to view, a deadline, a disconnect, the
 * Rpc's destroy: status, buf NULL, data_size 0, exactly once), and that
 * every call that takes a buffer refuses the view.
 *
 * Built once per transport (tests/CMakeLists.txt): VIEW_KIND and
 * VIEW_NAME (view_loop, view_udp). Both Rpcs live in the test's thread,
 * which drives their loops in turn, bounded by wall time.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#ifndef VIEW_KIND
#error "build with -DVIEW_KIND=URPC_TRANSPORT_<KIND> -DVIEW_NAME=<suite>"
#endif

enum {
	T_ECHO = 1,  /* answers ~byte for every byte */
	T_HOLD = 2,  /* answers only when the test says (held[]) */
	T_LARGE = 3, /* answers 4 datagrams' worth from a buffer of its own */
	T_NONE = 99, /* no handler */
};

#define SRV 1
#define CLI 2
#define NREQ 40	      /* requests of one window run */
#define MAX_HELD 32   /* T_HOLD requests held at once */
#define WAIT_MS 10000 /* bound of any wait (connect, a window, a failure) */

struct req {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp; /* the copying requests' buffer */
	size_t len;
	bool copy; /* sent with urpc_req_enqueue() and @resp */
	unsigned runs;
	int status;
	size_t got_len;		  /* resp->data_size seen by the continuation */
	size_t got_cap;		  /* resp->max_data_size */
	bool got_null;		  /* resp->buf was NULL */
	bool bytes_ok;		  /* every byte was ~request byte */
	int refusals[4];	  /* what the calls that take a buffer said of the view */
	struct urpc_msgbuf *seen; /* the resp pointer it got */
};

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	size_t max_msg;
	struct urpc_req_handle *held[MAX_HELD];
	unsigned nheld;
	unsigned handler_errors;
	bool probe; /* continuations try the calls that must refuse the view */
} G;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* What T_ECHO answers for byte @b. */
static uint8_t flip(uint8_t b)
{
	return (uint8_t)(255 - b);
}

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len, i;

	d = urpc_req_data(h, &len);
	for (i = 0; i < len; i++)
		resp->buf[i] = flip(d[i]);
	if (urpc_msgbuf_resize(resp, len) || urpc_resp_enqueue(h, resp))
		G.handler_errors++;
}

static void hold_handler(struct urpc_req_handle *h, void *arg)
{
	if (G.nheld == MAX_HELD) {
		G.handler_errors++;
		return;
	}
	G.held[G.nheld++] = h;
}

static void large_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf big;

	if (urpc_msgbuf_alloc(urpc_req_rpc(h), 4 * G.max_msg, &big)) {
		G.handler_errors++;
		return;
	}
	memset(big.buf, 0x6b, big.data_size);
	if (urpc_resp_enqueue(h, &big))
		G.handler_errors++;
}

static void pass(void)
{
	if (G.srv)
		cr_assert_eq(urpc_rpc_run_event_loop_once(G.srv), 0);
	if (G.cli)
		cr_assert_eq(urpc_rpc_run_event_loop_once(G.cli), 0);
}

static void world_up(void)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t end;
	char hp[32];

	memset(&G, 0, sizeof(G));
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &G.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_ECHO, echo_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_HOLD, hold_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_LARGE, large_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = VIEW_KIND;
	cr_assert_eq(urpc_rpc_create(G.nx, SRV, &o, &G.srv), 0);
	cr_assert_eq(urpc_rpc_create(G.nx, CLI, &o, &G.cli), 0);
	G.max_msg = urpc_rpc_max_msg_size(G.cli);
	cr_assert_geq(G.max_msg, 64);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(G.nx));
	cr_assert_eq(urpc_session_connect(G.cli, hp, SRV, &G.sess), 0);
	end = now_ms() + WAIT_MS;
	while (!urpc_session_is_connected(G.cli, G.sess) && now_ms() < end)
		pass();
	cr_assert(urpc_session_is_connected(G.cli, G.sess), "no connection within %d ms", WAIT_MS);
}

static void world_down(void)
{
	if (G.cli)
		cr_assert_eq(urpc_rpc_destroy(G.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(G.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(G.nx), 0);
	cr_assert_eq(G.handler_errors, 0, "handlers saw %u errors", G.handler_errors);
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct req *r = tag;
	size_t i;

	r->runs++;
	r->status = status;
	r->seen = resp;
	if (!resp)
		return;
	r->got_len = resp->data_size;
	r->got_cap = resp->max_data_size;
	r->got_null = resp->buf == NULL;
	r->bytes_ok = !status && resp->buf && resp->data_size == r->len;
	for (i = 0; r->bytes_ok && i < r->len; i++)
		r->bytes_ok = resp->buf[i] == flip(r->req.buf[i]);
	if (!G.probe || r->copy)
		return;
	/* The view is no buffer: every call that can tell refuses it. */
	r->refusals[0] = urpc_msgbuf_free(rpc, resp);
	r->refusals[1] = urpc_msgbuf_resize(resp, 1);
	r->refusals[2] = urpc_req_enqueue(rpc, G.sess, T_ECHO, &r->req, resp, cont, r, 1000);
	r->refusals[3] = urpc_req_enqueue_view(rpc, G.sess, T_ECHO, resp, cont, r, 1000);
}

static void fill(struct req *r, size_t len, unsigned seed)
{
	size_t i;

	cr_assert_eq(urpc_msgbuf_resize(&r->req, len), 0);
	for (i = 0; i < len; i++)
		r->req.buf[i] = (uint8_t)(i * 31u + seed);
	r->len = len;
	r->runs = 0;
	r->status = 1;
}

static int send(struct req *r, uint8_t type, uint32_t timeout_ms)
{
	if (r->copy)
		return urpc_req_enqueue(G.cli, G.sess, type, &r->req, &r->resp, cont, r,
					timeout_ms);
	return urpc_req_enqueue_view(G.cli, G.sess, type, &r->req, cont, r, timeout_ms);
}

static void alloc_reqs(struct req *r, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		cr_assert_eq(urpc_msgbuf_alloc(G.cli, G.max_msg, &r[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(G.cli, G.max_msg, &r[i].resp), 0);
	}
}

static void free_reqs(struct req *r, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		cr_assert_eq(urpc_msgbuf_free(G.cli, &r[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(G.cli, &r[i].resp), 0);
	}
}

/* Pass until every one of @n has run once (or the wait bound). */
static void wait_all(struct req *r, unsigned n)
{
	uint64_t end = now_ms() + WAIT_MS;
	unsigned i, done;

	do {
		pass();
		for (i = done = 0; i < n; i++)
			done += r[i].runs != 0;
	} while (done < n && now_ms() < end);
	cr_assert_eq(done, n, "%u of %u continuations ran within %d ms", done, n, WAIT_MS);
}

/* An error's continuation: once, @status, an empty view. */
static void assert_failed_view(const struct req *r, int status, const char *what)
{
	cr_assert_eq(r->runs, 1, "%s: the continuation ran %u times", what, r->runs);
	cr_assert_eq(r->status, status, "%s: status %s, not %s", what, urpc_strerror(r->status),
		     urpc_strerror(status));
	cr_assert_not_null(r->seen, "%s: no view", what);
	cr_assert(r->got_null, "%s: an error's view points at bytes", what);
	cr_assert_eq(r->got_len, 0, "%s: an error's view has %zu bytes", what, r->got_len);
}

Test(VIEW_NAME, responses_are_read_where_they_arrived, .timeout = 120)
{
	struct req r[NREQ];
	struct urpc_rpc_stats st;
	unsigned i;

	world_up();
	alloc_reqs(r, NREQ);
	G.probe = true;
	/*
	 * 40 at once: 8 in the slots, the rest in the wait queue. Sizes 0 to a
	 * full datagram; every third copies into a buffer, every fifth has a
	 * deadline (the library's full path).
	 */
	for (i = 0; i < NREQ; i++) {
		size_t len = i == 0 ? 0 : i == 1 ? G.max_msg : (i * 37u) % G.max_msg;

		r[i].copy = i % 3 == 2;
		fill(&r[i], len, i);
		cr_assert_eq(send(&r[i], T_ECHO, i % 5 == 4 ? WAIT_MS : 0), 0, "request %u", i);
	}
	wait_all(r, NREQ);
	for (i = 0; i < NREQ; i++) {
		cr_assert_eq(r[i].runs, 1, "request %u ran %u times", i, r[i].runs);
		cr_assert_eq(r[i].status, 0, "request %u: %s", i, urpc_strerror(r[i].status));
		cr_assert_eq(r[i].got_len, r[i].len, "request %u: %zu bytes, sent %zu", i,
			     r[i].got_len, r[i].len);
		cr_assert(r[i].bytes_ok, "request %u (%zu bytes): wrong bytes", i, r[i].len);
		if (r[i].copy) {
			cr_assert_eq(r[i].seen, &r[i].resp, "a copying request got another buffer");
			continue;
		}
		cr_assert_neq(r[i].seen, &r[i].resp);
		cr_assert_eq(r[i].got_cap, 0, "a view has capacity %zu", r[i].got_cap);
		cr_assert_eq(r[i].refusals[0], -EINVAL, "urpc_msgbuf_free() of a view: %d",
			     r[i].refusals[0]);
		cr_assert_eq(r[i].refusals[1], -EINVAL, "urpc_msgbuf_resize() of a view: %d",
			     r[i].refusals[1]);
		cr_assert_eq(r[i].refusals[2], -EINVAL, "a view as a response buffer: %d",
			     r[i].refusals[2]);
		cr_assert_eq(r[i].refusals[3], -EINVAL, "a view as a request: %d",
			     r[i].refusals[3]);
	}
	cr_assert_eq(urpc_rpc_get_stats(G.cli, &st), 0);
	cr_assert_eq(st.resps_rx, NREQ);
	cr_assert_eq(st.reqs_sent, NREQ, "a refused call sent a request");
	free_reqs(r, NREQ);
	world_down();
}

Test(VIEW_NAME, errors_get_an_empty_view_once, .timeout = 120)
{
	struct req r[4];
	uint64_t end;

	world_up();
	alloc_reqs(r, 4);
	/* No handler: -ENOSYS. */
	fill(&r[0], 16, 1);
	cr_assert_eq(send(&r[0], T_NONE, 0), 0);
	/* A large response cannot be viewed: -EMSGSIZE (a copying request reads it whole). */
	fill(&r[1], 8, 2);
	cr_assert_eq(send(&r[1], T_LARGE, 0), 0);
	r[2].copy = true;
	cr_assert_eq(urpc_msgbuf_free(G.cli, &r[2].resp), 0);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, 4 * G.max_msg, &r[2].resp), 0);
	fill(&r[2], 8, 3);
	cr_assert_eq(send(&r[2], T_LARGE, 0), 0);
	/* A deadline that passes while the handler holds the request: -ETIMEDOUT. */
	fill(&r[3], 8, 4);
	cr_assert_eq(send(&r[3], T_HOLD, 50), 0);
	wait_all(r, 4);
	assert_failed_view(&r[0], -ENOSYS, "no handler");
	assert_failed_view(&r[1], -EMSGSIZE, "large response");
	cr_assert_eq(r[2].runs, 1);
	cr_assert_eq(r[2].status, 0, "the copying request's large response: %s",
		     urpc_strerror(r[2].status));
	cr_assert_eq(r[2].got_len, 4 * G.max_msg);
	assert_failed_view(&r[3], -ETIMEDOUT, "deadline");
	/* The late answer is dropped: the continuation does not run again. */
	cr_assert_eq(G.nheld, 1);
	cr_assert_eq(urpc_resp_enqueue(G.held[0], urpc_req_resp_msgbuf(G.held[0])), 0);
	end = now_ms() + 200;
	while (now_ms() < end)
		pass();
	cr_assert_eq(r[3].runs, 1);
	free_reqs(r, 4);
	world_down();
}

/*
 * Requests held by the server, 8 in slots and 4 waiting, after one answered
 * (the view then points at bytes), then a disconnect or the client's
 * destroy fails them.
 */
static void fail_held(bool destroy)
{
	struct urpc_msgbuf extra;
	struct req r[12];
	unsigned i;
	uint64_t end;

	world_up();
	alloc_reqs(r, 12);
	fill(&r[0], 8, 0);
	cr_assert_eq(send(&r[0], T_ECHO, 0), 0);
	wait_all(r, 1);
	cr_assert_eq(r[0].status, 0);
	for (i = 0; i < 12; i++) {
		fill(&r[i], 8 + i, i);
		cr_assert_eq(send(&r[i], T_HOLD, 0), 0);
	}
	end = now_ms() + WAIT_MS;
	while (G.nheld < 8 && now_ms() < end)
		pass();
	cr_assert_eq(G.nheld, 8, "the server holds %u requests", G.nheld);
	if (destroy) {
		/*
		 * The destroy counts the buffers the application holds: the
		 * requests are lent, the view is none of them, and one buffer
		 * more is the application's (-EBUSY until it is freed).
		 */
		for (i = 0; i < 12; i++)
			cr_assert_eq(urpc_msgbuf_free(G.cli, &r[i].resp), 0);
		cr_assert_eq(urpc_msgbuf_alloc(G.cli, 8, &extra), 0);
		cr_assert_eq(urpc_rpc_destroy(G.cli), -EBUSY);
		for (i = 0; i < 12; i++)
			cr_assert_eq(r[i].runs, 0, "request %u completed in a refused destroy", i);
		cr_assert_eq(urpc_msgbuf_free(G.cli, &extra), 0);
		/* The continuations run inside the destroy. */
		cr_assert_eq(urpc_rpc_destroy(G.cli), 0);
		G.cli = NULL;
	} else {
		cr_assert_eq(urpc_session_disconnect(G.cli, G.sess), 0);
		wait_all(r, 12);
	}
	for (i = 0; i < 12; i++)
		assert_failed_view(&r[i], -ECONNRESET, destroy ? "destroy" : "disconnect");
	/* The held requests' answers go nowhere. */
	for (i = 0; i < G.nheld; i++)
		cr_assert_eq(urpc_resp_enqueue(G.held[i], urpc_req_resp_msgbuf(G.held[i])), 0);
	if (!destroy)
		free_reqs(r, 12);
	world_down();
}

Test(VIEW_NAME, a_disconnect_fails_every_view_request_once, .timeout = 120)
{
	fail_held(false);
}

Test(VIEW_NAME, a_destroy_fails_every_view_request_once, .timeout = 120)
{
	fail_held(true);
}

Test(VIEW_NAME, bad_arguments_are_refused)
{
	struct urpc_msgbuf req;
	struct req r = {0};

	world_up();
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, 8, &req), 0);
	cr_assert_eq(urpc_req_enqueue_view(NULL, G.sess, T_ECHO, &req, cont, &r, 0), -EINVAL);
	cr_assert_eq(urpc_req_enqueue_view(G.cli, G.sess, T_ECHO, NULL, cont, &r, 0), -EINVAL);
	cr_assert_eq(urpc_req_enqueue_view(G.cli, G.sess, T_ECHO, &req, NULL, &r, 0), -EINVAL);
	cr_assert_eq(urpc_req_enqueue_view(G.cli, G.sess + 1, T_ECHO, &req, cont, &r, 0), -EINVAL);
	cr_assert_eq(urpc_req_enqueue_view(G.cli, -1, T_ECHO, &req, cont, &r, 5), -EINVAL);
	/* A NULL response buffer stays an error of urpc_req_enqueue(). */
	cr_assert_eq(urpc_req_enqueue(G.cli, G.sess, T_ECHO, &req, NULL, cont, &r, 0), -EINVAL);
	cr_assert_eq(r.runs, 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &req), 0);
	world_down();
}
