/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's one-sided window (issue 32, verbs_rc_win.h), and
 * the session's controller driving it, as it drives udp's and loop's:
 *
 * - the transport: with set_peer_window(W) the bytes of RDMA chunks at the
 *   NIC stay within W (one chunk of each posted operation always goes),
 *   a small READ posted behind a large one starts and ends before it, and
 *   the chunks' round trips come out of peer_os_rtt with the bytes that
 *   were ahead of them; without a window an operation has its rc_chunks
 *   chunks out at once, as before;
 * - the engine: a server session whose READ round trips pass its target
 *   (1 us, against Soft-RoCE's hundreds) samples them, decreases and
 *   narrows its connection's window, and the request still arrives whole;
 *   with CC off nothing is sampled and no window is set. Before verbs had
 *   the two ops, its one-sided chunks gave the controller no sample.
 *
 * Chunks of 16 KiB (URPC_VERBS_RC_CHUNK), not the default 1 MiB: see
 * tests/vm/README.md's known problem. Runs where an RDMA port is active
 * (Soft-RoCE in tests/vm, in the test_verbs binary); elsewhere it skips.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "transport/transport.h"
#include "transport/verbs_dev.h"
#include "util/log.h"
#include "verbs_skip.h"
#include "verbs_tp.h"

/* Skips the case unless URPC_TEST_DEVICE_A's RDMA port is active (verbs_skip.h). */
static void skip_without_device(void)
{
	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
}

#if URPC_HAVE_VERBS
#include "rpc/engine.h"
#include "transport/verbs_int.h"

#define CHUNK 16384u
#define BIG (1u << 20)
#define WAIT_NS 60000000000ull

/* ---- the transport ------------------------------------------------------------ */

static struct {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b, *b2a;
	uint8_t *local, *remote;
	struct urpc_tp_mr lmr, rmr;
} T;

/* Session management's part: carry each side's control messages; drop datagrams. */
static void serve(struct urpc_tp *tp)
{
	struct urpc_tp *from = tp == T.a ? T.b : T.a;
	struct urpc_tp_peer *via = tp == T.a ? T.a2b : T.b2a, *fp;
	uint8_t buf[URPC_TP_EP_MAX];
	struct urpc_tp_rx rx[32];
	int n;

	while ((n = from->ops->ctl_pop(from, &fp, buf)) > 0)
		tp->ops->ctl_push(tp, via, buf, (size_t)n);
	n = tp->ops->rx_burst(tp, rx, 32);
	if (n > 0)
		tp->ops->rx_release(tp, rx, (unsigned)n);
}

static void post_read(uint32_t len, uint32_t at, uint64_t wr_id)
{
	int ret = T.a->ops->post_read(T.a, T.a2b, T.local + at, &T.lmr,
				      (uint64_t)(uintptr_t)T.remote + at, T.rmr.rkey, len, wr_id);

	cr_assert_eq(ret, 0, "post_read: %s", urpc_strerror(ret));
}

/* Reap A's completions (B serving) until wr_ids 0..@n-1 came, in *@order; checks @win's bound. */
static void reap(unsigned n, uint64_t *order, uint64_t win, uint64_t *max_out)
{
	const struct verbs_conn *c = T.a2b->conn;
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_tp_comp comp[8];
	unsigned got = 0;
	int k, i;

	while (got < n) {
		cr_assert_lt(urpc__now_ns(), end,
			     "only %u of %u completions came, then none for %llu s", got, n,
			     (unsigned long long)(WAIT_NS / 1000000000ull));
		serve(T.b);
		serve(T.a);
		k = T.a->ops->poll_completions(T.a, comp, 8);
		if (k > 0) /* bound by progress: WAIT_NS from the last completion */
			end = urpc__now_ns() + WAIT_NS;
		for (i = 0; i < k; i++) {
			cr_assert_eq(comp[i].status, 0, "READ %lu: %s",
				     (unsigned long)comp[i].wr_id, urpc_strerror(comp[i].status));
			order[got++] = comp[i].wr_id;
		}
		if (c->os_out > *max_out)
			*max_out = c->os_out;
		if (win)
			cr_assert_leq(c->os_out, win + CHUNK, "%lu bytes out, window %lu",
				      (unsigned long)c->os_out, (unsigned long)win);
	}
}

Test(verbs_window, a_window_bounds_the_chunks_out_and_lets_small_reads_by, .timeout = 240)
{
	const struct verbs_tp *v;
	uint64_t order[2], max_out = 0, rtt, bytes = 0, win = 3 * CHUNK;
	uint32_t i;

	skip_without_device();
	cr_assert_eq(setenv("URPC_VERBS_RC_CHUNK", "16384", 1), 0);
	memset(&T, 0, sizeof(T));
	T.a = verbs_tp_open("URPC_TEST_DEVICE_A", 0, 0, 30000);
	T.b = verbs_tp_open("URPC_TEST_DEVICE_B", 0, 0, 30000);
	verbs_tp_resolve(T.a, T.b, &T.a2b);
	verbs_tp_resolve(T.b, T.a, &T.b2a);
	T.local = calloc(1, BIG + CHUNK);
	T.remote = malloc(BIG + CHUNK);
	cr_assert(T.local && T.remote);
	for (i = 0; i < BIG + CHUNK; i++)
		T.remote[i] = (uint8_t)(i * 31 + i / 977);
	cr_assert_eq(T.a->ops->reg_mem(T.a, T.local, BIG + CHUNK, 0, &T.lmr), 0);
	cr_assert_eq(
		T.b->ops->reg_mem(T.b, T.remote, BIG + CHUNK, URPC_TP_ACCESS_REMOTE_READ, &T.rmr),
		0);
	v = to_verbs(T.a);
	post_read(64, 0, 0); /* connect */
	reap(1, order, 0, &max_out);
	while (T.a->ops->peer_os_rtt(T.a, T.a2b, &bytes)) /* what connecting left */
		;

	/* No window: the operation's rc_chunks chunks (READ slots allowing) at once. */
	post_read(BIG, 0, 0);
	cr_assert_eq(T.a2b->conn->os_out, (uint64_t)URPC_MIN(v->rc_chunks, v->rd_atomic) * CHUNK);
	reap(1, order, 0, &max_out);
	cr_assert_eq(T.a2b->conn->os_out, 0);
	cr_assert(memcmp(T.local, T.remote, BIG) == 0, "a READ misplaced bytes");

	/* A window of three chunks: never more out (but a small READ's one), and it goes first. */
	memset(T.local, 0, BIG + CHUNK);
	T.a->ops->set_peer_window(T.a, T.a2b, win);
	while (T.a->ops->peer_os_rtt(T.a, T.a2b, &bytes))
		;
	max_out = 0;
	post_read(BIG, 0, 0);
	cr_assert_eq(T.a2b->conn->os_out, win, "%lu out", (unsigned long)T.a2b->conn->os_out);
	post_read(100, BIG, 1);
	reap(2, order, win, &max_out);
	cr_assert_eq(order[0], 1, "the small READ waited for the 1 MiB one");
	cr_assert(memcmp(T.local, T.remote, BIG + 100) == 0, "a READ misplaced bytes");
	rtt = T.a->ops->peer_os_rtt(T.a, T.a2b, &bytes);
	cr_assert_gt(rtt, 0, "no round trip of a chunk came out");
	cr_assert(bytes >= 100 && bytes <= win + CHUNK, "a round trip of %lu bytes",
		  (unsigned long)bytes);
	cr_assert_eq(T.a->ops->peer_os_rtt(T.a, T.a2b, &bytes), 0, "taken twice");

	T.a->ops->dereg_mem(T.a, &T.lmr);
	T.b->ops->dereg_mem(T.b, &T.rmr);
	T.a->ops->release_peer(T.a, T.a2b);
	T.b->ops->release_peer(T.b, T.b2a);
	cr_assert_eq(T.a->ops->destroy(T.a), 0);
	cr_assert_eq(T.b->ops->destroy(T.b), 0);
	free(T.local);
	free(T.remote);
	unsetenv("URPC_VERBS_RC_CHUNK");
}

/* ---- the engine --------------------------------------------------------------- */

#define T_LEN 1

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	bool busy;
	int status;
	uint64_t got;
} E;

/* Answer with how many of the request's bytes follow the pattern. */
static void len_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t n;
	size_t len;

	(void)arg;
	d = urpc_req_data(h, &len);
	for (n = 0; n < len && d[n] == (uint8_t)(n * 7 + 1); n++)
		;
	memcpy(resp->buf, &n, sizeof(n));
	urpc_msgbuf_resize(resp, sizeof(n));
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

static void len_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc;
	(void)tag;
	E.busy = false;
	E.status = status;
	if (!status && resp->data_size == sizeof(E.got))
		memcpy(&E.got, resp->buf, sizeof(E.got));
}

static void rpc_opts(struct urpc_rpc_opts *o, const char *device_env, enum urpc_cc_algo algo)
{
	urpc_rpc_opts_init(o);
	o->transport = URPC_TRANSPORT_VERBS;
	o->device = getenv(device_env);
	o->cc_algo = algo;
	o->cc_target_us = 1;
	o->cc_line_mbps = 1000;
	o->rto_us = 20000;
	o->peer_timeout_ms = 5000;
	o->one_sided_timeout_ms = 30000;
}

/* The server's session (the only one). */
static struct urpc_session *srv_session(void)
{
	uint32_t i;

	for (i = 0; i < E.srv->hi_session; i++) {
		struct urpc_session *s = urpc__sess_at(E.srv, i);

		if (s && s->role == URPC_ROLE_SERVER)
			return s;
	}
	return NULL;
}

/*
 * One request of @len bytes (the server READs it) under @algo; the
 * narrowest window the server's connection had (UINT64_MAX: none set),
 * and the server session's statistics in *@st.
 */
static uint64_t one_large(enum urpc_cc_algo algo, size_t len, struct urpc_session_stats *st)
{
	uint64_t end, t0, min_win = UINT64_MAX;
	struct urpc_msgbuf req, resp;
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	struct urpc_session *s;
	char hp[64];
	size_t i;

	memset(&E, 0, sizeof(E));
	urpc_nexus_opts_init(&no);
	no.host = test_host();
	cr_assert_eq(urpc_nexus_create(&no, &E.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(E.nx, T_LEN, len_handler, NULL), 0);
	rpc_opts(&o, "URPC_TEST_DEVICE_B", algo);
	cr_assert_eq(urpc_rpc_create(E.nx, 1, &o, &E.srv), 0);
	rpc_opts(&o, "URPC_TEST_DEVICE_A", algo);
	cr_assert_eq(urpc_rpc_create(E.nx, 2, &o, &E.cli), 0);
	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(E.nx));
	cr_assert_eq(urpc_session_connect(E.cli, hp, 1, &E.sess), 0);
	cr_assert_eq(urpc_msgbuf_alloc(E.cli, len, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(E.cli, 64, &resp), 0);
	for (i = 0; i < len; i++)
		req.buf[i] = (uint8_t)(i * 7 + 1);
	E.busy = true;
	t0 = urpc__now_ns();
	cr_assert_eq(urpc_req_enqueue(E.cli, E.sess, T_LEN, &req, &resp, len_cont, NULL, 0), 0);
	end = urpc__now_ns() + WAIT_NS;
	while (E.busy) {
		cr_assert_lt(urpc__now_ns(), end, "the large request never completed");
		cr_assert_eq(urpc_rpc_run_event_loop_once(E.srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(E.cli), 0);
		s = srv_session();
		if (s && s->peer && s->peer->conn->os_window && s->peer->conn->os_window < min_win)
			min_win = s->peer->conn->os_window;
	}
	cr_assert_eq(E.status, 0, "the large request: %s", urpc_strerror(E.status));
	cr_assert_eq(E.got, len, "the server read %lu good bytes of %zu", (unsigned long)E.got,
		     len);
	s = srv_session();
	cr_assert_not_null(s);
	cr_assert_eq(urpc_session_get_stats(E.srv, (int)s->local_num, st), 0);
	cr_log_info("%s: %zu bytes in %.1f ms; server session: %lu samples, %lu decreases, rate "
		    "%lu b/s, srtt %lu ns; narrowest window %lu bytes",
		    urpc_cc_algo_str(algo), len, (double)(urpc__now_ns() - t0) / 1e6,
		    (unsigned long)st->cc_samples, (unsigned long)st->cc_decreases,
		    (unsigned long)st->cc_rate_bps, (unsigned long)st->cc_srtt_ns,
		    (unsigned long)(min_win == UINT64_MAX ? 0 : min_win));
	cr_assert_eq(urpc_msgbuf_free(E.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(E.cli, &resp), 0);
	cr_assert_eq(urpc_rpc_destroy(E.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(E.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(E.nx), 0);
	return min_win;
}

Test(verbs_window, a_server_session_windows_its_reads_by_its_controller, .timeout = 300)
{
	struct urpc_session_stats st;
	uint64_t min_win;

	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
	cr_assert_eq(setenv("URPC_VERBS_RC_CHUNK", "16384", 1), 0);
	min_win = one_large(URPC_CC_SWIFT, 4u << 20, &st);
	cr_assert_gt(st.cc_samples, 0, "the server session's controller took no sample");
	cr_assert_gt(st.cc_decreases, 0, "%lu samples over a 1 us target, no decrease",
		     (unsigned long)st.cc_samples);
	cr_assert_lt(min_win, 16ull * CHUNK,
		     "the READ window stayed %lu bytes (rate %lu b/s, srtt %lu ns)",
		     (unsigned long)min_win, (unsigned long)st.cc_rate_bps,
		     (unsigned long)st.cc_srtt_ns);

	/* CC off: no sample, no window (the transport's own rc_chunks). */
	min_win = one_large(URPC_CC_OFF, 4u << 20, &st);
	cr_assert_eq(st.cc_samples, 0);
	cr_assert_eq(min_win, UINT64_MAX, "CC off set a window of %lu bytes",
		     (unsigned long)min_win);
	unsetenv("URPC_VERBS_RC_CHUNK");
}

#else /* !URPC_HAVE_VERBS */

Test(verbs_window, skipped)
{
	skip_without_device();
}

#endif
