/* SPDX-License-Identifier: MIT */
/*
 * The datapath's defences against its own transport: a one-sided
 * completion whose wr_id names no operation in flight (out of the table, or
 * a free entry) is counted and ignored, and never indexes the table out of
 * bounds (the ASan+UBSan build checks the reads).
 *
 * Two Rpcs on the loop transport; each one's ops table is swapped for a
 * copy whose poll_completions() hands out the completions the test queued
 * before the transport's own. The engine polls completions only while an
 * operation is in flight, so they ride along with large requests.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h"
#include "transport/transport.h"
#include "util/log.h"

#define T_ECHO 1
#define WAIT_NS 30000000000ull
#define MAX_BAD 8

/* A transport whose completions the test adds to. */
struct wrapped {
	struct urpc_tp *tp;
	const struct urpc_tp_ops *real;
	struct urpc_tp_ops ops;
	uint64_t bad[MAX_BAD]; /* wr_ids to hand out, in order */
	unsigned nbad, next;
	unsigned polls; /* poll_completions() calls */
};

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	struct wrapped w[2]; /* server, client */
} W;

static struct wrapped *wrapped_of(struct urpc_tp *tp)
{
	unsigned i;

	for (i = 0; i < 2; i++)
		if (W.w[i].tp == tp)
			return &W.w[i];
	cr_assert_fail("a transport the test did not wrap");
	return NULL;
}

/* The queued bad completions first, then the transport's own. */
static int poll_with_bad(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct wrapped *w = wrapped_of(tp);
	unsigned k = 0;
	int ret;

	w->polls++;
	while (w->next < w->nbad && k < n) {
		comps[k].wr_id = w->bad[w->next++];
		comps[k].op = URPC_TP_OP_READ;
		comps[k].status = 0;
		k++;
	}
	ret = w->real->poll_completions(tp, comps + k, n - k);
	cr_assert_geq(ret, 0);
	return (int)k + ret;
}

static void wrap(struct wrapped *w, struct urpc_rpc *rpc)
{
	w->tp = urpc__rpc_transport(rpc);
	w->real = w->tp->ops;
	w->ops = *w->real;
	w->ops.poll_completions = poll_with_bad;
	w->tp->ops = &w->ops;
}

static void unwrap(struct wrapped *w)
{
	w->tp->ops = w->real;
}

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct urpc_msgbuf own, *resp = &own;
	const uint8_t *d;
	size_t len, i;

	d = urpc_req_data(h, &len);
	if (len <= urpc_rpc_max_msg_size(rpc))
		resp = urpc_req_resp_msgbuf(h);
	else
		cr_assert_eq(urpc_msgbuf_alloc(rpc, len, &own), 0);
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0x5a;
	urpc_msgbuf_resize(resp, len);
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

struct call {
	int status;
	unsigned runs;
};

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->status = status;
	c->runs++;
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
}

/* An echo of @len bytes, checked byte for byte. */
static void echo(size_t len)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_msgbuf req, resp;
	struct call c = {0};
	size_t i;

	cr_assert_eq(urpc_msgbuf_alloc(W.cli, len, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, len, &resp), 0);
	for (i = 0; i < len; i++)
		req.buf[i] = (uint8_t)(i * 2654435761u >> 13);
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &req, &resp, cont, &c, 0), 0);
	while (!c.runs) {
		cr_assert_lt(urpc__now_ns(), end, "a %zu-byte echo did not complete", len);
		pump();
	}
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(c.status, 0, "%zu bytes: %s", len, urpc_strerror(c.status));
	cr_assert_eq(resp.data_size, len);
	for (i = 0; i < len; i++)
		cr_assert_eq(resp.buf[i], (uint8_t)(req.buf[i] ^ 0x5a), "%zu bytes: byte %zu", len,
			     i);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &resp), 0);
}

static void world_up(void)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	char hp[64];

	memset(&W, 0, sizeof(W));
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.cli, hp, 1, &W.sess), 0);
	echo(16); /* connected */
	wrap(&W.w[0], W.srv);
	wrap(&W.w[1], W.cli);
}

static void world_down(void)
{
	unwrap(&W.w[1]);
	unwrap(&W.w[0]);
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
}

/*
 * The first entry of the table that starts at or past the end of the
 * struct urpc_rpc it is embedded in: reading it reads past the allocation,
 * into ASan's redzone.
 */
static uint64_t past_the_rpc(void)
{
	size_t room = sizeof(struct urpc_rpc) - offsetof(struct urpc_rpc, os);

	return (room + sizeof(struct urpc_os_op) - 1) / sizeof(struct urpc_os_op);
}

Test(datapath, completion_with_bad_wr_id_is_counted_and_ignored)
{
	const uint64_t bad[] = {
		URPC_OS_OPS,	  /* one past the table */
		URPC_OS_OPS + 1,  /* past it */
		past_the_rpc(),	  /* past the Rpc itself */
		(1ull << 16) | 3, /* an entry's index in the low 16 bits */
		UINT64_MAX,	  /* far away */
		URPC_OS_OPS - 1,  /* in the table, but free: no operation */
	};
	const unsigned nbad = sizeof(bad) / sizeof(bad[0]);
	struct urpc_rpc_stats st;
	size_t big;
	unsigned i, r;

	world_up();
	big = urpc_rpc_max_msg_size(W.cli) * 3 + 7; /* read by the server and by the client */
	cr_assert_gt(past_the_rpc(), URPC_OS_OPS);
	for (r = 0; r < 2; r++) {
		for (i = 0; i < nbad; i++)
			W.w[r].bad[i] = bad[i];
		W.w[r].nbad = nbad;
	}
	echo(big);
	for (r = 0; r < 2; r++) {
		cr_assert_eq(W.w[r].next, nbad, "%s: the bad completions were not all handed out",
			     r ? "client" : "server");
		cr_assert_gt(W.w[r].polls, 0);
		cr_assert_eq(urpc_rpc_get_stats(r ? W.cli : W.srv, &st), 0);
		cr_assert_eq(st.drop_bad_comp, nbad, "%s: %llu bad completions counted, want %u",
			     r ? "client" : "server", (unsigned long long)st.drop_bad_comp, nbad);
	}
	/* Nothing in flight was disturbed, and the engine goes on. */
	cr_assert_eq(W.srv->os_busy, 0);
	cr_assert_eq(W.cli->os_busy, 0);
	echo(big);
	echo(100);
	echo(1u << 20);
	world_down();
}
