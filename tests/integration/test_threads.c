/* SPDX-License-Identifier: MIT */
/*
 * Rpcs on different threads of one process talking over the loop
 * transport, through the public API: two and four threads, each with its
 * own Rpc, each a client of every other and a server to them. Requests of
 * 8 bytes up to one datagram, and large ones (moved by one-sided READ, as
 * are their echoed responses); the handler checks every request byte and
 * every response byte is checked in its continuation, which must run
 * exactly once. At the end each client sends one more window and
 * disconnects at once: those continuations run once, with the right bytes
 * or -ECONNRESET.
 *
 * Failures on the threads are counted (fail()) and asserted on after the
 * join. scripts/test.sh also runs this file under ThreadSanitizer, built as
 * a plain program (tests/plain_test.h).
 */
#ifdef PLAIN_TEST
#include "plain_test.h" /* the ThreadSanitizer build: Criterion cannot start under TSan */
#else
#include <criterion/criterion.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "thread_fail.h"

#define T_ECHO 1
#define MAX_THREADS 4
#define WINDOW 4 /* requests in flight per session */
#ifdef PLAIN_TEST
#define PER_PEER 120 /* requests each thread sends each other thread (TSan is slow) */
#else
#define PER_PEER 400
#endif
#define LARGE_EVERY 9		     /* one request in this many is large */
#define LARGE_MAX (192u << 10)	     /* largest request */
#define WAIT_NS 120000000000ull	     /* a bound, not an expectation */
#define MAX_REQS (PER_PEER + WINDOW) /* per session, the final window included */

/* fail(), first_err, nerrors and give_up come from thread_fail.h. */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Request bytes: the id (from, to, number) in the first 8, then a pattern of it. */
static uint8_t pat(uint64_t id, size_t i)
{
	return (uint8_t)((i * 2654435761u + id * 40503u) >> 9);
}

static uint64_t req_id(unsigned from, unsigned to, unsigned n)
{
	return (uint64_t)from << 40 | (uint64_t)to << 32 | n;
}

/* ---- the server side: one handler for every Rpc --------------------------- */

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct urpc_msgbuf own, *resp;
	const uint8_t *d;
	uint64_t id = 0;
	size_t len, i;

	(void)arg;
	d = urpc_req_data(h, &len);
	if (len < 8) {
		fail("a %zu-byte request", len);
		return;
	}
	memcpy(&id, d, 8);
	for (i = 8; i < len; i++)
		if (d[i] != pat(id, i)) {
			fail("request %llx: byte %zu of %zu is wrong", (unsigned long long)id, i,
			     len);
			break;
		}
	if (len <= urpc_rpc_max_msg_size(rpc)) {
		resp = urpc_req_resp_msgbuf(h);
	} else {
		if (urpc_msgbuf_alloc(rpc, len, &own)) {
			fail("no buffer for a %zu-byte response", len);
			return;
		}
		resp = &own;
	}
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0xff;
	urpc_msgbuf_resize(resp, len);
	if (urpc_resp_enqueue(h, resp))
		fail("urpc_resp_enqueue failed");
}

/* ---- one thread: an Rpc, a client of every other one ---------------------- */

struct world;

struct call {
	struct urpc_msgbuf req, resp;
	uint64_t id;
	size_t len;
	bool busy;
	bool last; /* sent just before the disconnect: -ECONNRESET allowed */
};

struct peer {
	int sess;
	bool connected, disconnected;
	unsigned sent, done;
	struct call calls[WINDOW];
	uint8_t runs[MAX_REQS]; /* continuation runs per request number */
};

struct thread {
	struct world *w;
	unsigned idx;
	struct urpc_rpc *rpc;
	struct peer peer[MAX_THREADS];
	unsigned ok, reset;
};

struct world {
	unsigned n;
	struct urpc_nexus *nx;
	char hp[32];
	atomic_uint created, finished, disconnected, destroyed_ok;
	uint64_t end;
	struct thread th[MAX_THREADS];
};

static void sm_handler(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
		       void *arg)
{
	struct thread *t = arg;
	unsigned j;

	for (j = 0; j < t->w->n; j++) {
		struct peer *p = &t->peer[j];

		if (j == t->idx || p->sess != session)
			continue;
		if (ev == URPC_SM_CONNECTED)
			p->connected = true;
		else if (ev == URPC_SM_DISCONNECTED)
			p->disconnected = true;
		else
			fail("thread %u, session to %u: %s (%s)", t->idx, j, urpc_sm_event_str(ev),
			     urpc_strerror(status));
		return;
	}
	/* A server-side session of another thread's client: nothing to track. */
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/* Issue request @n of @t to thread @to in window slot @c. */
static void issue(struct thread *t, unsigned to, struct call *c, unsigned n, bool last)
{
	struct urpc_rpc *rpc = t->rpc;
	size_t max = urpc_rpc_max_msg_size(rpc), i;
	int ret;

	c->id = req_id(t->idx, to, n);
	c->len = n % LARGE_EVERY == LARGE_EVERY - 1 ? max + 1 + (n * 7919u) % (LARGE_MAX - max)
						    : 8 + (n * 131u) % (max - 8 + 1);
	c->last = last;
	if (urpc_msgbuf_alloc(rpc, c->len, &c->req) || urpc_msgbuf_alloc(rpc, c->len, &c->resp)) {
		fail("thread %u: no buffers for %zu bytes", t->idx, c->len);
		return;
	}
	memcpy(c->req.buf, &c->id, 8);
	for (i = 8; i < c->len; i++)
		c->req.buf[i] = pat(c->id, i);
	c->busy = true;
	ret = urpc_req_enqueue(rpc, t->peer[to].sess, T_ECHO, &c->req, &c->resp, cont, c, 0);
	if (ret) {
		c->busy = false;
		fail("thread %u: enqueue to %u: %s", t->idx, to, urpc_strerror(ret));
		urpc_msgbuf_free(rpc, &c->req);
		urpc_msgbuf_free(rpc, &c->resp);
		return;
	}
	t->peer[to].sent++;
}

/* The call's thread and peer, from its place in the arrays. */
static void call_owner(struct world *w, struct call *c, struct thread **t, unsigned *to)
{
	unsigned i, j;

	for (i = 0; i < w->n; i++)
		for (j = 0; j < w->n; j++)
			if (c >= w->th[i].peer[j].calls && c < w->th[i].peer[j].calls + WINDOW) {
				*t = &w->th[i];
				*to = j;
				return;
			}
	*t = NULL;
}

static struct world W;

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;
	unsigned to, n = (unsigned)(c->id & 0xffffffffu);
	struct thread *t;
	size_t i;

	call_owner(&W, c, &t, &to);
	if (!t || rpc != t->rpc || !c->busy) {
		fail("a continuation for no request in flight");
		return;
	}
	c->busy = false;
	if (n >= MAX_REQS || t->peer[to].runs[n]++)
		fail("thread %u: request %u to %u: continuation ran twice", t->idx, n, to);
	t->peer[to].done++;
	if (status == -ECONNRESET && c->last) {
		t->reset++;
	} else if (status) {
		fail("thread %u: request %u to %u (%zu bytes): %s", t->idx, n, to, c->len,
		     urpc_strerror(status));
	} else if (resp->data_size != c->len) {
		fail("thread %u: request %u to %u: %zu bytes back for %zu", t->idx, n, to,
		     resp->data_size, c->len);
	} else {
		for (i = 0; i < c->len; i++) {
			uint8_t want = (uint8_t)(c->req.buf[i] ^ 0xff);

			if (resp->buf[i] != want) {
				fail("thread %u: request %u to %u: response byte %zu of %zu wrong",
				     t->idx, n, to, i, c->len);
				break;
			}
		}
		t->ok++;
	}
	if (urpc_msgbuf_free(rpc, &c->req) || urpc_msgbuf_free(rpc, &c->resp))
		fail("thread %u: msgbuf_free in the continuation", t->idx);
}

static bool timed_out(struct world *w, const char *what, unsigned idx)
{
	if (atomic_load(&give_up))
		return true;
	if (now_ns() < w->end)
		return false;
	fail("thread %u timed out: %s", idx, what);
	atomic_store(&give_up, true);
	return true;
}

/* Run the event loop until @n threads reached @counter (the others need our loop to progress). */
static void loop_until(struct thread *t, atomic_uint *counter, const char *what)
{
	while (atomic_load(counter) < t->w->n && !timed_out(t->w, what, t->idx))
		urpc_rpc_run_event_loop_once(t->rpc);
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	struct world *w = t->w;
	struct urpc_rpc_opts o;
	bool all_done = false, all_disc = false;
	unsigned j, k;

	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.sm_handler = sm_handler;
	o.sm_arg = t;
	/* Threads share two cores (and TSan): generous timers, no spurious resets. */
	o.rto_us = 50000;
	o.peer_timeout_ms = 20000;
	o.connect_timeout_ms = 20000;
	if (urpc_rpc_create(w->nx, (uint8_t)(t->idx + 1), &o, &t->rpc)) {
		fail("thread %u: urpc_rpc_create", t->idx);
		atomic_store(&give_up, true);
		atomic_fetch_add(&w->created, 1);
		return NULL;
	}
	atomic_fetch_add(&w->created, 1);
	loop_until(t, &w->created, "others' Rpcs");
	for (j = 0; j < w->n; j++)
		if (j != t->idx &&
		    urpc_session_connect(t->rpc, w->hp, (uint8_t)(j + 1), &t->peer[j].sess))
			fail("thread %u: connect to %u", t->idx, j);

	/* Keep WINDOW requests in flight on every session until PER_PEER are done. */
	while (!all_done && !timed_out(w, "its requests", t->idx)) {
		urpc_rpc_run_event_loop_once(t->rpc);
		all_done = true;
		for (j = 0; j < w->n; j++) {
			struct peer *p = &t->peer[j];

			if (j == t->idx)
				continue;
			for (k = 0; k < WINDOW && p->connected; k++)
				if (!p->calls[k].busy && p->sent < PER_PEER)
					issue(t, j, &p->calls[k], p->sent, false);
			all_done &= p->done == PER_PEER;
		}
	}
	atomic_fetch_add(&w->finished, 1);
	loop_until(t, &w->finished, "others' requests");

	/* One more window on every session, then disconnect at once. */
	for (j = 0; j < w->n; j++) {
		struct peer *p = &t->peer[j];

		if (j == t->idx)
			continue;
		for (k = 0; k < WINDOW; k++)
			issue(t, j, &p->calls[k], p->sent, true);
		if (urpc_session_disconnect(t->rpc, p->sess))
			fail("thread %u: disconnect from %u", t->idx, j);
	}
	while (!all_disc && !timed_out(w, "its disconnects", t->idx)) {
		urpc_rpc_run_event_loop_once(t->rpc);
		all_disc = true;
		for (j = 0; j < w->n; j++)
			if (j != t->idx)
				all_disc &= t->peer[j].disconnected &&
					    t->peer[j].done == t->peer[j].sent;
	}
	atomic_fetch_add(&w->disconnected, 1);
	loop_until(t, &w->disconnected, "others' disconnects");
	if (urpc_rpc_destroy(t->rpc) == 0)
		atomic_fetch_add(&w->destroyed_ok, 1);
	else
		fail("thread %u: urpc_rpc_destroy", t->idx);
	return NULL;
}

static void run(unsigned n)
{
	pthread_t th[MAX_THREADS];
	struct urpc_nexus_opts no;
	unsigned i, j, ok = 0, reset = 0;

	memset(&W, 0, sizeof(W));
	W.n = n;
	W.end = now_ns() + WAIT_NS;
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, NULL), 0);
	snprintf(W.hp, sizeof(W.hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	for (i = 0; i < n; i++) {
		W.th[i].w = &W;
		W.th[i].idx = i;
		cr_assert_eq(pthread_create(&th[i], NULL, thread_main, &W.th[i]), 0);
	}
	for (i = 0; i < n; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
	cr_assert_eq(nerrors, 0, "%u failures on the threads; the first: %s", nerrors, first_err);
	for (i = 0; i < n; i++) {
		ok += W.th[i].ok;
		reset += W.th[i].reset;
		for (j = 0; j < n; j++)
			if (j != i)
				cr_assert_eq(W.th[i].peer[j].done, PER_PEER + WINDOW,
					     "thread %u: %u of its requests to %u completed", i,
					     W.th[i].peer[j].done, j);
	}
	cr_assert_eq(ok + reset, n * (n - 1) * (PER_PEER + WINDOW));
	cr_assert_geq(ok, n * (n - 1) * PER_PEER);
	cr_assert_eq(W.destroyed_ok, n);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
}

Test(threads_loop, two_rpc_threads)
{
	run(2);
}

Test(threads_loop, four_rpc_threads)
{
	run(4);
}
