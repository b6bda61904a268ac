/* SPDX-License-Identifier: MIT */
/*
 * Small RPCs beside a bulk transfer on one session, and the one-sided
 * window of server sessions (issue 32, docs/CC.md "Large transfers"):
 *
 * - small RPCs complete, one at a time, while a large request on the same
 *   session is still being read, each within a few loop passes (as alone),
 *   with no retransmission, on loop and udp;
 * - a server session's READs of large requests are windowed by its own
 *   controller, fed by the chunks' round trips: with round trips over the
 *   target its peer's window narrows below the transport's (udp: chunks;
 *   loop: bytes), the request still arrives whole; with CC off, or a
 *   target the round trips never reach, nothing narrows.
 *
 * Two Rpcs in this thread under a virtual clock that moves by a step
 * between the server's and the client's passes: a host's hiccup is no
 * round trip here, so the figures do not depend on the machine's load.
 */
#define _GNU_SOURCE /* udp_int.h: struct mmsghdr */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/engine.h"
#include "transport/udp_int.h"
#include "util/seam.h"

#define T_ECHO 1
#define SMALL 32
#define WAIT_NS 60000000000ull

static uint64_t vnow_ns;

static uint64_t test_clock(void *arg)
{
	(void)arg;
	return __atomic_load_n(&vnow_ns, __ATOMIC_RELAXED);
}

static struct {
	enum urpc_transport_kind kind;
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	uint64_t step_ns;
	struct urpc_msgbuf sreq, sresp, breq, bresp;
	bool sbusy, bbusy;
	int bstatus;
	unsigned small_done, small_bad, small_beside;
	unsigned passes, max_passes; /* of the small RPC in flight; the most any took */
} W;

/* Echo a small request; answer a large one with its length. */
static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t n;
	size_t len;

	(void)arg;
	d = urpc_req_data(h, &len);
	if (len <= SMALL) {
		memcpy(resp->buf, d, len);
		urpc_msgbuf_resize(resp, len);
	} else {
		n = len;
		for (n = 0; n < len && d[n] == (uint8_t)(n * 7 + 1); n++)
			;
		memcpy(resp->buf, &n, sizeof(n));
		urpc_msgbuf_resize(resp, sizeof(n));
	}
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

static void small_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc;
	(void)tag;
	W.sbusy = false;
	if (status || resp->data_size != SMALL || memcmp(resp->buf, W.sreq.buf, SMALL))
		W.small_bad++;
	W.small_done++;
	if (W.bbusy)
		W.small_beside++;
	if (W.passes > W.max_passes)
		W.max_passes = W.passes;
}

static void bulk_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	uint64_t n = 0;

	(void)rpc;
	(void)tag;
	W.bbusy = false;
	if (!status && resp->data_size == sizeof(n))
		memcpy(&n, resp->buf, sizeof(n));
	W.bstatus = status ? status : n == W.breq.data_size ? 0 : -EBADMSG;
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	__atomic_add_fetch(&vnow_ns, W.step_ns, __ATOMIC_RELAXED);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
	W.passes++;
}

static void world_up(enum urpc_transport_kind kind, enum urpc_cc_algo algo, uint32_t target_us,
		     size_t bulk)
{
	struct urpc_seams seams = {.clock = test_clock};
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t end;
	char hp[64];
	size_t i;

	memset(&W, 0, sizeof(W));
	W.kind = kind;
	W.step_ns = 1000;
	vnow_ns = 1000000000ull;
	urpc__seams_set(&seams);
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = kind;
	o.cc_algo = algo;
	o.cc_target_us = target_us;
	o.cc_line_mbps = 10000;
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.cli, hp, 1, &W.sess), 0);
	end = urpc__now_ns() + WAIT_NS;
	while (!urpc_session_is_connected(W.cli, W.sess)) {
		cr_assert_lt(urpc__now_ns(), end, "no connection");
		pump();
	}
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, SMALL, &W.sreq), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, SMALL, &W.sresp), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, bulk, &W.breq), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, 64, &W.bresp), 0);
	for (i = 0; i < bulk; i++)
		W.breq.buf[i] = (uint8_t)(i * 7 + 1);
}

static void world_down(void)
{
	cr_assert_eq(urpc_msgbuf_free(W.cli, &W.sreq), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &W.sresp), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &W.breq), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &W.bresp), 0);
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
	urpc__seams_set(NULL);
}

/* The server's session (the only one). */
static struct urpc_session *srv_session(void)
{
	uint32_t i;

	for (i = 0; i < W.srv->hi_session; i++) {
		struct urpc_session *s = urpc__sess_at(W.srv, i);

		if (s && s->role == URPC_ROLE_SERVER)
			return s;
	}
	cr_assert_fail("no server session");
	return NULL;
}

/* The window its transport keeps for the server session's READs: 0 while it is its own. */
static uint64_t srv_window(void)
{
	struct urpc_session *s = srv_session();

	if (!s->peer)
		return 0;
	return W.kind == URPC_TRANSPORT_UDP ? s->peer->os_window : 0;
}

/*
 * Send the bulk request, then small RPCs one at a time until it is done;
 * @min_win: the narrowest window the server session's peer had (udp).
 */
static void run_mix(uint64_t *min_win)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_rpc_stats st;
	unsigned i;

	*min_win = UINT64_MAX;
	W.bbusy = true;
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &W.breq, &W.bresp, bulk_cont, NULL, 0),
		     0);
	while (W.bbusy || W.sbusy) {
		cr_assert_lt(urpc__now_ns(), end, "stuck: bulk %d, %u small done", W.bbusy,
			     W.small_done);
		if (W.bbusy && !W.sbusy) {
			for (i = 0; i < SMALL; i++)
				W.sreq.buf[i] = (uint8_t)(W.small_done + i);
			W.sbusy = true;
			W.passes = 0;
			cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &W.sreq, &W.sresp,
						      small_cont, NULL, 0),
				     0);
		}
		pump();
		if (W.kind == URPC_TRANSPORT_UDP && srv_session()->peer) {
			uint64_t w = srv_session()->peer->os_window;

			if (w && w < *min_win)
				*min_win = w;
		}
	}
	cr_assert_eq(W.bstatus, 0, "the bulk request: %s", urpc_strerror(W.bstatus));
	cr_assert_eq(W.small_bad, 0, "%u wrong small answers", W.small_bad);
	urpc_rpc_get_stats(W.cli, &st);
	cr_assert_eq(st.retransmits, 0, "%llu retransmissions on a loss-free path",
		     (unsigned long long)st.retransmits);
}

static void interleave_on(enum urpc_transport_kind kind, enum urpc_cc_algo algo)
{
	uint64_t min_win;

	world_up(kind, algo, 100000, 4u << 20);
	run_mix(&min_win);
	/* loop: the READ is one copy, a pass or two; udp: thousands of chunks */
	cr_assert_geq(W.small_beside, kind == URPC_TRANSPORT_UDP ? 20 : 1,
		      "only %u small RPCs completed beside the bulk", W.small_beside);
	/*
	 * Sent in a client pass, answered in the server's next, taken in the
	 * client's next (loop); udp: the kernel may hand a loopback datagram
	 * to its soft-interrupt thread on a loaded host, a pass or more later,
	 * but never the bulk's thousands of chunks later.
	 */
	cr_assert_leq(W.max_passes, kind == URPC_TRANSPORT_UDP ? 64 : 3,
		      "a small RPC beside the bulk took %u passes", W.max_passes);
	world_down();
}

Test(bulk_mix, small_rpcs_interleave_with_bulk_on_loop)
{
	interleave_on(URPC_TRANSPORT_LOOP, URPC_CC_OFF);
}

Test(bulk_mix, small_rpcs_interleave_with_bulk_on_udp)
{
	interleave_on(URPC_TRANSPORT_UDP, URPC_CC_OFF);
	interleave_on(URPC_TRANSPORT_UDP, URPC_CC_SWIFT);
}

/*
 * Round trips of several steps against a 10 us target: the server
 * session's controller (started by its chunks' round trips) limits, and
 * its READs keep fewer chunks in flight than the transport's window.
 */
Test(bulk_mix, server_session_windows_its_reads_on_udp)
{
	struct urpc_session_stats st;
	uint64_t min_win;
	int num;

	world_up(URPC_TRANSPORT_UDP, URPC_CC_SWIFT, 10, 4u << 20);
	W.step_ns = 20000;
	run_mix(&min_win);
	num = (int)srv_session()->local_num;
	cr_assert_eq(urpc_session_get_stats(W.srv, num, &st), 0);
	cr_assert_gt(st.cc_samples, 0, "the server session's controller took no sample");
	cr_assert_gt(st.cc_decreases, 0);
	cr_assert(min_win >= 1 && min_win < UDP_OS_WINDOW,
		  "the server's READ window stayed %llu chunks (rate %llu b/s)",
		  (unsigned long long)min_win, (unsigned long long)st.cc_rate_bps);
	world_down();

	/* the same round trips with CC off: the transport's own window throughout */
	world_up(URPC_TRANSPORT_UDP, URPC_CC_OFF, 10, 4u << 20);
	W.step_ns = 20000;
	run_mix(&min_win);
	cr_assert_eq(min_win, UINT64_MAX, "CC off narrowed the window to %llu",
		     (unsigned long long)min_win);
	cr_assert_eq(srv_window(), 0);
	world_down();
}
