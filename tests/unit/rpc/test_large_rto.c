/* SPDX-License-Identifier: MIT */
/*
 * A window of large requests over a slow path is not sent again: the
 * server answers a large request once it has READ it, after the session's
 * other requests it has not read yet, and the client's first timeout
 * allows for all of them, not for the request alone.
 *
 * Two Rpcs on the loop transport in this thread. The server's ops table is
 * swapped for a copy whose poll_completions() holds every completion of
 * the real transport back and hands them out one per READ_NS, in order: a
 * path that moves one 16 MiB READ per READ_NS (~67 MB/s), slower than the
 * loop transport's memcpy and well within the 3 ms per 64 KiB the engine
 * allows (768 ms for 16 MiB). With WINDOW requests in flight a request's
 * answer comes WINDOW * READ_NS (1 s) after it was sent, past what the
 * request alone is allowed, and 2 s before what the window is: the test
 * stands a stall of the thread of half a second.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h"
#include "transport/transport.h"
#include "util/seam.h"

#define T_SUM 1
#define WINDOW 4
#define TOTAL (2 * WINDOW)
#define REQ_LEN (16u << 20)
#define READ_NS 250000000ull /* one READ's turn on the slow path */
#define HELD 64
#define CHECK 4096
/* Every request's answer is due within TOTAL turns; anything beyond is a hang. */
#define WAIT_NS (TOTAL * READ_NS + 60000000000ull)

/* The server's transport, its completions held back in a queue. */
static struct {
	struct urpc_tp *tp;
	const struct urpc_tp_ops *real;
	struct urpc_tp_ops ops;
	struct urpc_tp_comp held[HELD];
	uint64_t due[HELD]; /* when held[i] may go, urpc__now_ns() time */
	unsigned head, tail;
	uint64_t last_due;
	unsigned reads;
} S;

static int poll_slow(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct urpc_tp_comp c[HELD];
	uint64_t now = urpc__now_ns();
	unsigned k = 0;
	int i, got;

	cr_assert_eq(tp, S.tp);
	got = S.real->poll_completions(tp, c, HELD - (S.tail - S.head));
	cr_assert_geq(got, 0);
	for (i = 0; i < got; i++) {
		/* One after another: each waits for the one before it. */
		S.last_due = (S.last_due > now ? S.last_due : now) + READ_NS;
		S.held[S.tail % HELD] = c[i];
		S.due[S.tail % HELD] = S.last_due;
		S.tail++;
		S.reads += c[i].op == URPC_TP_OP_READ;
	}
	while (S.head != S.tail && k < n && S.due[S.head % HELD] <= now)
		comps[k++] = S.held[S.head++ % HELD];
	return (int)k;
}

static uint8_t pattern(unsigned req, size_t i)
{
	return (uint8_t)((i * 2654435761u >> 11) + req);
}

/* Answers with the request's number (its first byte), after checking runs of its bytes. */
static void sum_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len, off, i;
	uint32_t v;

	(void)arg;
	d = urpc_req_data(h, &len);
	cr_assert_eq(len, REQ_LEN);
	v = d[0]; /* pattern(num, 0) is num */
	/* The first 4 KiB of every 256 KiB, then the last 4 KiB. */
	for (off = 0; off <= len; off += 64 * CHECK) {
		size_t at = off < len ? off : len - CHECK;

		for (i = at; i < at + CHECK; i++)
			if (d[i] != pattern(v, i))
				cr_assert_fail("request %u: byte %zu is 0x%02x", v, i, d[i]);
	}
	memcpy(resp->buf, &v, sizeof(v));
	urpc_msgbuf_resize(resp, sizeof(v));
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

struct slot {
	struct urpc_msgbuf req, resp;
	unsigned num; /* which request, 0..TOTAL-1 */
	int status;
	bool busy;
};

static struct urpc_rpc *srv, *cli;
static int sess;
static unsigned sent, done;

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct slot *s = tag;
	uint32_t v;

	(void)rpc;
	cr_assert_eq(status, 0, "request %u: %s", s->num, urpc_strerror(status));
	cr_assert_eq(resp->data_size, sizeof(v));
	memcpy(&v, resp->buf, sizeof(v));
	cr_assert_eq(v, (uint8_t)s->num, "request %u answered as %u", s->num, v);
	s->busy = false;
	done++;
}

static void send_one(struct slot *s)
{
	size_t i;

	s->num = sent++;
	for (i = 0; i < REQ_LEN; i++)
		s->req.buf[i] = pattern(s->num, i);
	urpc_msgbuf_resize(&s->req, REQ_LEN);
	s->busy = true;
	cr_assert_eq(urpc_req_enqueue(cli, sess, T_SUM, &s->req, &s->resp, cont, s, 0), 0);
}

Test(large_rto, a_window_over_a_slow_path_is_not_sent_again, .timeout = 120)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	struct urpc_rpc_stats st;
	struct urpc_nexus *nx;
	struct slot slots[WINDOW];
	uint64_t end;
	char hp[64];
	unsigned i;

	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(nx, T_SUM, sum_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &srv), 0);
	cr_assert_eq(urpc_rpc_create(nx, 2, &o, &cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(nx));
	cr_assert_eq(urpc_session_connect(cli, hp, 1, &sess), 0);
	end = urpc__now_ns() + WAIT_NS;
	while (!urpc_session_is_connected(cli, sess)) {
		cr_assert_lt(urpc__now_ns(), end, "the session did not connect");
		cr_assert_eq(urpc_rpc_run_event_loop_once(srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(cli), 0);
	}
	S.tp = urpc__rpc_transport(srv);
	S.real = S.tp->ops;
	S.ops = *S.real;
	S.ops.poll_completions = poll_slow;
	S.tp->ops = &S.ops;

	for (i = 0; i < WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(cli, REQ_LEN, &slots[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(cli, 16, &slots[i].resp), 0);
		send_one(&slots[i]);
	}
	while (done < TOTAL) {
		cr_assert_lt(urpc__now_ns(), end, "%u of %u requests answered", done, TOTAL);
		cr_assert_eq(urpc_rpc_run_event_loop_once(srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(cli), 0);
		for (i = 0; i < WINDOW && sent < TOTAL; i++)
			if (!slots[i].busy)
				send_one(&slots[i]);
	}
	cr_assert_eq(S.reads, TOTAL, "the server READ %u requests for %u", S.reads, TOTAL);
	cr_assert_eq(urpc_rpc_get_stats(cli, &st), 0);
	/*
	 * The client before this allowance resent 6 of the 8 (every request
	 * that had others ahead of it); a stall of this thread of over half a
	 * second on a loaded host may still make one or two timers fire.
	 */
	cr_assert_leq(st.retransmits, 2,
		      "%lu large requests sent again while the server was reading the ones before",
		      (unsigned long)st.retransmits);

	S.tp->ops = S.real;
	for (i = 0; i < WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_free(cli, &slots[i].req), 0);
		cr_assert_eq(urpc_msgbuf_free(cli, &slots[i].resp), 0);
	}
	cr_assert_eq(urpc_rpc_destroy(cli), 0);
	cr_assert_eq(urpc_rpc_destroy(srv), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}
