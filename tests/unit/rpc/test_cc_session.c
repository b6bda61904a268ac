/* SPDX-License-Identifier: MIT */
/*
 * Congestion control of client sessions through the public API (cc_sess.c):
 * a session whose round trips stay under the target is never paced and
 * stays at the line rate; one whose round trips exceed it is paced to its
 * controller's rate (bytes over time within the rate, every answer still
 * correct); the options are checked; urpc_session_get_stats() reports it.
 *
 * Two Rpcs on the loop transport in this thread, under a virtual clock
 * that moves by a step between the server's and the client's loop passes,
 * so that each round trip takes a step or a few.
 */
#define _GNU_SOURCE /* udp_int.h: struct mmsghdr */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "rpc/engine.h"
#include "transport/udp_int.h"
#include "util/seam.h"

#define T_ECHO 1
#define WINDOW 8
#define LEN 1000
#define WAIT_NS 30000000000ull

/*
 * The clock is virtual: it moves only when the test moves it (a host's
 * hiccup on a loaded machine is a round trip too, and would make the
 * results depend on the machine's load). Read by the Nexus thread as well.
 */
static uint64_t vnow_ns;

static uint64_t test_clock(void *arg)
{
	return __atomic_load_n(&vnow_ns, __ATOMIC_RELAXED);
}

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	uint64_t step_ns;
	struct urpc_msgbuf req[WINDOW], resp[WINDOW];
	unsigned done, bad, inflight;
	bool stop; /* continuations stop issuing */
	uint64_t bytes;
} W;

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len;

	d = urpc_req_data(h, &len);
	memcpy(resp->buf, d, len);
	urpc_msgbuf_resize(resp, len);
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

static void issue(unsigned i);

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	unsigned i = (unsigned)(uintptr_t)tag;

	W.inflight--;
	if (status || resp->data_size != LEN || memcmp(resp->buf, W.req[i].buf, LEN))
		W.bad++;
	W.done++;
	W.bytes += LEN;
	if (!W.stop)
		issue(i); /* inside the loop, as an application's continuation would */
}

static void issue(unsigned i)
{
	memset(W.req[i].buf, (int)(W.done + i), LEN);
	cr_assert_eq(urpc_req_enqueue(W.cli, W.sess, T_ECHO, &W.req[i], &W.resp[i], cont,
				      (void *)(uintptr_t)i, 0),
		     0);
	W.inflight++;
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	__atomic_add_fetch(&vnow_ns, W.step_ns, __ATOMIC_RELAXED);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
}

static void world_up_on(enum urpc_transport_kind kind, enum urpc_cc_algo algo, uint32_t target_us,
			uint32_t line_mbps)
{
	struct urpc_seams seams = {.clock = test_clock};
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t end;
	char hp[64];
	unsigned i;

	memset(&W, 0, sizeof(W));
	W.step_ns = 1000; /* while connecting */
	vnow_ns = 1000000000ull;
	urpc__seams_set(&seams);
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = kind;
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	o.cc_algo = algo;
	o.cc_target_us = target_us;
	o.cc_line_mbps = line_mbps;
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.cli, hp, 1, &W.sess), 0);
	end = urpc__now_ns() + WAIT_NS;
	while (!urpc_session_is_connected(W.cli, W.sess)) {
		cr_assert_lt(urpc__now_ns(), end, "no connection");
		pump();
	}
	for (i = 0; i < WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(W.cli, LEN, &W.req[i]), 0);
		cr_assert_eq(urpc_msgbuf_alloc(W.cli, LEN, &W.resp[i]), 0);
	}
}

static void world_down(void)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	unsigned i;

	W.stop = true;
	while (W.inflight) {
		cr_assert_lt(urpc__now_ns(), end, "%u requests never completed", W.inflight);
		pump();
	}
	for (i = 0; i < WINDOW; i++) {
		cr_assert_eq(urpc_msgbuf_free(W.cli, &W.req[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(W.cli, &W.resp[i]), 0);
	}
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
	urpc__seams_set(NULL);
}

static void world_up(enum urpc_cc_algo algo, uint32_t target_us, uint32_t line_mbps)
{
	world_up_on(URPC_TRANSPORT_LOOP, algo, target_us, line_mbps);
}

/* Keep WINDOW requests in flight until @n more completed; the slot of a completion is reused. */
static void run(unsigned n, struct urpc_session_stats *min_seen)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	unsigned target = W.done + n, i;
	struct urpc_session_stats st;

	for (i = 0; i < WINDOW && W.done == 0 && W.inflight < WINDOW; i++)
		issue(i);
	while (W.done < target) {
		cr_assert_lt(urpc__now_ns(), end, "stuck at %u of %u", W.done, target);
		pump();
		if (min_seen) {
			cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
			if (st.cc_rate_bps < min_seen->cc_rate_bps)
				*min_seen = st;
		}
	}
	cr_assert_eq(W.bad, 0, "%u wrong answers", W.bad);
}

/* Round trips of ~5 us against a 1 ms target: never paced, at the line rate. */
Test(cc_session, free_session_never_paced)
{
	struct urpc_session_stats st;

	world_up(URPC_CC_SWIFT, 1000, 0);
	W.step_ns = 5000;
	run(5000, NULL);
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
	cr_assert_eq(st.cc_rate_bps, st.cc_line_bps);
	cr_assert_eq(st.cc_line_bps, 100000000000ull);
	cr_assert(!st.cc_limited);
	cr_assert_eq(st.cc_decreases, 0, "%llu decreases, %llu samples, srtt %llu, rate %llu",
		     (unsigned long long)st.cc_decreases, (unsigned long long)st.cc_samples,
		     (unsigned long long)st.srtt_ns, (unsigned long long)st.cc_rate_bps);
	cr_assert_eq(st.cc_paced, 0);
	cr_assert_gt(st.srtt_ns, 4000, "srtt %llu", (unsigned long long)st.srtt_ns);
	world_down();
}

/*
 * Round trips of 200 us or more against a 10 us target on a 100 Mb/s line:
 * the controller lowers the rate and the pacer holds the session to it:
 * the bytes answered over the paced stretch stay within the highest rate it
 * had there (or a request per ms, the pacer's longest hold), far below what
 * the same round trips carry unpaced, and every answer is right.
 */
Test(cc_session, congested_session_paced_to_its_rate)
{
	struct urpc_session_stats st, lo = {.cc_rate_bps = UINT64_MAX};
	uint64_t t0, bytes0, hi;
	double secs;

	world_up(URPC_CC_SWIFT, 10, 100);
	W.step_ns = 200000;
	run(200, NULL);
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
	cr_assert(st.cc_limited, "still at %llu b/s after 200 slow round trips",
		  (unsigned long long)st.cc_rate_bps);
	cr_assert_gt(st.cc_decreases, 0);
	hi = st.cc_rate_bps;
	t0 = urpc__now_ns();
	bytes0 = W.bytes;
	run(300, &lo);
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
	cr_assert_gt(st.cc_paced, 0, "the pacer never held a request");
	cr_assert_geq(lo.cc_rate_bps, 1000000, "below the floor");
	cr_assert_leq(hi, 100000000);
	secs = (urpc__now_ns() - t0) / 1e9;
	/*
	 * The payload alone, against the rate that counts headers too, plus one
	 * window's burst; one send is held back at most 1 ms (cc.h max_gap_ns),
	 * so a request also goes at LEN per ms.
	 */
	if (hi < LEN * 8 * 1000)
		hi = LEN * 8 * 1000;
	cr_assert_leq((double)(W.bytes - bytes0) * 8, (double)hi * secs + WINDOW * LEN * 8,
		      "%llu bytes in %.3f s at most %llu b/s",
		      (unsigned long long)(W.bytes - bytes0), secs, (unsigned long long)hi);
	world_down();
}

/* Off: whatever the round trips, never paced and never moved. */
Test(cc_session, off_never_moves)
{
	struct urpc_session_stats st;

	world_up(URPC_CC_OFF, 10, 0);
	W.step_ns = 200000;
	run(300, NULL);
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
	cr_assert_eq(st.cc_rate_bps, st.cc_line_bps);
	cr_assert_eq(st.cc_decreases + st.cc_paced + st.cc_samples, 0);
	world_down();
}

Test(cc_session, bad_options_refused)
{
	struct urpc_nexus_opts no;
	struct urpc_nexus *nx;
	struct urpc_rpc_opts o;
	struct urpc_rpc *rpc;
	struct urpc_session_stats st;

	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &nx), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.cc_algo = (enum urpc_cc_algo)9;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL);
	o.cc_algo = URPC_CC_SWIFT;
	o.cc_target_us = 100001;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL);
	o.cc_target_us = 0;
	o.cc_line_mbps = 10000001;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL);
	o.cc_line_mbps = 0;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), 0);
	cr_assert_eq(urpc_session_get_stats(rpc, 0, &st), -EINVAL, "no such session");
	cr_assert_eq(urpc_session_get_stats(rpc, -1, &st), -EINVAL);
	cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

/*
 * udp: the session's one-sided window follows its controller: the
 * transport's own (UDP_OS_WINDOW chunks) while the session is free, rate x
 * round trip while it is paced, so a bulk READ backs off with the RPCs.
 */
Test(cc_session, paced_session_narrows_its_one_sided_window)
{
	const struct urpc_session *s;
	struct urpc_session_stats st;

	world_up_on(URPC_TRANSPORT_UDP, URPC_CC_SWIFT, 1000, 0);
	W.step_ns = 5000;
	run(500, NULL);
	s = urpc__rpc_session(W.cli, W.sess);
	cr_assert_not_null(s);
	cr_assert_eq(s->peer->os_window, 0, "a free session's window was narrowed to %u chunks",
		     s->peer->os_window);
	world_down();

	world_up_on(URPC_TRANSPORT_UDP, URPC_CC_SWIFT, 10, 100);
	W.step_ns = 200000;
	run(200, NULL);
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, &st), 0);
	cr_assert(st.cc_limited);
	s = urpc__rpc_session(W.cli, W.sess);
	/* At most 100 Mb/s x a few hundred us: a few KB, fewer chunks than the default. */
	cr_assert(s->peer->os_window >= 1 && s->peer->os_window < UDP_OS_WINDOW,
		  "window %u chunks at %llu b/s, srtt %llu ns", s->peer->os_window,
		  (unsigned long long)st.cc_rate_bps, (unsigned long long)st.srtt_ns);
	world_down();
}

/* Run both Rpcs, the clock standing still, until the request in flight is answered; its stats. */
static void answered(struct urpc_session_stats *st)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;

	while (W.inflight) {
		cr_assert_lt(urpc__now_ns(), end, "the request never completed");
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
	}
	cr_assert_eq(urpc_session_get_stats(W.cli, W.sess, st), 0);
}

/*
 * Round-trip samples of requests sent outside the loop, which have no send
 * time when they are enqueued (the clock is not read there). On udp such
 * a request waits in the TX batch: the pass that sends it gives it its
 * time, and its answer is sampled from there. Before, it had none until a
 * timer scan stamped it: an answer that came first gave no sample, one
 * that came later a sample short by the time until the scan (a client
 * sending from outside its loop on a loaded host saw samples of 0 and its
 * controller never moved: test_idle, a_paced_client_sleeps_...).
 */
Test(cc_session, a_request_sent_outside_the_loop_is_timed_from_the_pass_that_sends_it)
{
	struct urpc_session_stats st;

	world_up_on(URPC_TRANSPORT_UDP, URPC_CC_SWIFT, 1000, 0);
	W.stop = true;
	/* After this pass no timer scan is due while the clock stands still. */
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
	issue(0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0); /* sends it */
	__atomic_add_fetch(&vnow_ns, 300000, __ATOMIC_RELAXED);
	answered(&st);
	cr_assert_eq(st.srtt_ns, 300000, "srtt %llu ns for a 300 us round trip",
		     (unsigned long long)st.srtt_ns);
	world_down();
}

/*
 * On loop, which sends each datagram at once, a request sent outside the
 * loop leaves then, and its send time is not known: the timer scan's stamp
 * starts its RTO, and its answer gives no sample (before: one of 10 us,
 * from the scan 2 ms after the send to the answer).
 */
Test(cc_session, a_request_the_timer_scan_stamped_gives_no_sample)
{
	struct urpc_session_stats st;

	world_up(URPC_CC_SWIFT, 1000, 0);
	W.stop = true;
	issue(0);
	__atomic_add_fetch(&vnow_ns, 2000000, __ATOMIC_RELAXED);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0); /* the scan stamps it */
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	__atomic_add_fetch(&vnow_ns, 10000, __ATOMIC_RELAXED);
	answered(&st);
	cr_assert_eq(st.srtt_ns, 0, "a sample of %llu ns from a request sent 2 ms before",
		     (unsigned long long)st.srtt_ns);
	world_down();
}
