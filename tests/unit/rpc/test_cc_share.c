/* SPDX-License-Identifier: MIT */
/*
 * The receiver-driven fair share (src/rpc/cc.h, docs/CC.md), alone, under
 * a virtual clock. The server's side: its share is util x line over the
 * senders it heard from (a joiner counted at once, a leaver gone after an
 * epoch, a lone sender given the whole line), what light senders leave
 * goes to the heavy ones, and an epoch lasts what a
 * sender at the share takes for URPC_CC_SHARE_PKTS packets, within its
 * bounds. The client's side: an echoed share caps the rate at once, the
 * rate moves toward a higher share while the delay is within the target,
 * a share at or above the line (or none) leaves a free session free, and
 * a peer's garbage stays within [min_bps, line]. Through the engine (loop,
 * virtual clock): a server with congestion control echoes its share in
 * its answers and its clients' sessions are capped by it; a lone client
 * is never capped.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/cc.h"
#include "util/seam.h"

#define LINE 100000000000ull /* 100 Gb/s */
#define TARGET 8000u	     /* 8 us */
#define PKT 4096u
#define T0 1000000000ull

static struct urpc_cc_share share_at(uint64_t now)
{
	struct urpc_cc_share sh;

	urpc__cc_share_init(&sh, LINE, 970, PKT, TARGET, now);
	return sh;
}

#define BASE (LINE / 1000 * 970) /* util x line */

/*
 * One epoch from *@t to its end: senders [0, heavy) send their share's
 * URPC_CC_SHARE_PKTS packets, spread over it, senders [heavy, heavy + light)
 * one 100 B request; then *@t is the epoch's end (the next packet rolls it).
 * Returns the share the last packet was told.
 */
static uint64_t epoch(struct urpc_cc_share *sh, struct urpc_cc_share_peer *p, unsigned heavy,
		      unsigned light, uint64_t *t)
{
	uint64_t end, len, s = 0;
	unsigned i, k;

	(void)urpc__cc_share_seen(sh, &p[0], 0, *t); /* roll first: the epoch's length */
	end = sh->epoch_end_ns;
	len = end - *t;
	for (k = 0; k < URPC_CC_SHARE_PKTS; k++)
		for (i = 0; i < heavy; i++)
			s = urpc__cc_share_seen(sh, &p[i], PKT, *t + len * k / URPC_CC_SHARE_PKTS);
	for (i = heavy; i < heavy + light; i++)
		s = urpc__cc_share_seen(sh, &p[i], 100, *t);
	*t = end;
	return s;
}

Test(cc_share, share_is_line_over_active_senders)
{
	struct urpc_cc_share sh = share_at(T0);
	struct urpc_cc_share_peer p[100] = {{0}};
	uint64_t t = T0, s;
	int e;

	/* one sender: the whole line (never held below it) */
	cr_assert_eq(urpc__cc_share_seen(&sh, &p[0], PKT, t), LINE);
	/* many: counted as they come, within the first epoch already */
	for (unsigned i = 0; i < 10; i++)
		s = urpc__cc_share_seen(&sh, &p[i], PKT, t);
	cr_assert_eq(s, BASE / 10, "share %llu", (unsigned long long)s);
	cr_assert_eq(sh.share_mbps, BASE / 10 / 1000000);
	/* a sender counted once an epoch, however often it sends */
	for (int k = 0; k < 50; k++)
		s = urpc__cc_share_seen(&sh, &p[3], 1, t + (uint64_t)k);
	cr_assert_eq(s, BASE / 10);
	/* the same ten, each sending its share: steady */
	for (e = 0; e < 20; e++) {
		s = epoch(&sh, p, 10, 0, &t);
		cr_assert_eq(s, BASE / 10, "epoch %d: %llu", e, (unsigned long long)s);
		/* (the first epoch counts none heavy: no share was known when it began) */
		cr_assert_eq(sh.heavy_cur, e ? 10 : 0, "epoch %d: %u heavy", e, sh.heavy_cur);
	}
	/* 100: a joiner raises the count at once, without waiting for an epoch's end */
	for (unsigned i = 0; i < 100; i++)
		s = urpc__cc_share_seen(&sh, &p[i], PKT, t);
	cr_assert_eq(s, BASE / 100);
}

/*
 * Ten heavy senders beside ten light ones: the heavy ones share what the
 * light ones leave, more than an equal share of twenty; all light: each
 * may take util x the line.
 */
Test(cc_share, light_senders_leave_their_share_to_heavy_ones)
{
	struct urpc_cc_share sh = share_at(T0);
	struct urpc_cc_share_peer p[20] = {{0}};
	uint64_t t = T0, s = 0, light_bps;
	int e;

	for (e = 0; e < 10; e++)
		s = epoch(&sh, p, 10, 10, &t);
	light_bps = sh.light_prev_bps;
	cr_assert_gt(light_bps, 0);
	cr_assert_lt(light_bps, BASE / 100, "ten 100 B requests an epoch: %llu b/s",
		     (unsigned long long)light_bps);
	cr_assert_eq(sh.heavy_prev, 10);
	cr_assert_eq(s, (BASE - light_bps) / 10, "share %llu", (unsigned long long)s);
	cr_assert_gt(s, BASE / 20);
	/* the heavy ones stop: twenty light senders, each may take it all */
	for (e = 0; e < 3; e++)
		s = epoch(&sh, p + 10, 0, 10, &t);
	cr_assert_geq(s, BASE - sh.light_prev_bps, "share %llu", (unsigned long long)s);
}

Test(cc_share, leaver_gone_after_an_epoch)
{
	struct urpc_cc_share sh = share_at(T0);
	struct urpc_cc_share_peer p[10] = {{0}};
	uint64_t t = T0, s = 0, len;
	int e;

	for (e = 0; e < 4; e++)
		epoch(&sh, p, 10, 0, &t);
	/* the epoch fits URPC_CC_SHARE_PKTS packets at the share, at least the minimum */
	(void)urpc__cc_share_seen(&sh, &p[0], 0, t);
	len = (uint64_t)PKT * URPC_CC_SHARE_PKTS * 8000000000ull / (BASE / 10);
	cr_assert_eq(sh.epoch_end_ns - t, len > TARGET ? len : TARGET);
	t = sh.epoch_end_ns;
	/* one leaves: the share stays until an epoch passes without it, then rises */
	for (e = 0; e < 3; e++)
		s = epoch(&sh, p, 9, 0, &t);
	cr_assert_eq(s, BASE / 9, "share %llu", (unsigned long long)s);
	/* all but one go: that one gets the whole line */
	for (e = 0; e < 3; e++)
		s = epoch(&sh, p, 1, 0, &t);
	cr_assert_eq(s, LINE);
	/* a silence longer than an epoch forgets everyone: the next sender is alone */
	t = sh.epoch_end_ns + 10ull * URPC_CC_SHARE_MAX_EPOCH_NS;
	cr_assert_eq(urpc__cc_share_seen(&sh, &p[5], PKT, t), LINE);
}

Test(cc_share, epoch_bounded)
{
	static struct urpc_cc_share_peer p[1000];
	struct urpc_cc_share sh;
	uint64_t t = T0;
	unsigned i;

	/* a 1 Gb/s port and 1000 senders: one packet at the share is 33 ms; the epoch stops at 1 ms */
	urpc__cc_share_init(&sh, 1000000000ull, 970, PKT, TARGET, t);
	for (i = 0; i < 1000; i++)
		(void)urpc__cc_share_seen(&sh, &p[i], PKT, t);
	t = sh.epoch_end_ns;
	for (i = 0; i < 1000; i++)
		(void)urpc__cc_share_seen(&sh, &p[i], PKT, t);
	cr_assert_eq(sh.epoch_end_ns - t, URPC_CC_SHARE_MAX_EPOCH_NS);
	cr_assert_eq(sh.share_mbps, 1, "at least 1 Mb/s on the wire, got %u", sh.share_mbps);
}

static struct urpc_cc_params params(void)
{
	struct urpc_cc_params p;

	urpc__cc_params_default(&p, LINE, TARGET);
	return p;
}

Test(cc_share, echo_caps_then_rate_moves_toward_it)
{
	struct urpc_cc_params p = params();
	struct urpc_cc cc;
	uint64_t t = T0, share = LINE / 50;
	int i;

	urpc__cc_init(&cc, &p);
	/* capped at once, by the first answer, whatever the delay says */
	urpc__cc_share_echo(&cc, &p, share);
	cr_assert_eq(cc.rate_bps, share);
	cr_assert(cc.limited, "a capped session is paced");
	/* samples within the target never lift it past the cap */
	for (i = 0; i < 1000; i++, t += 5000)
		urpc__cc_sample(&cc, &p, 5000, false, PKT, t);
	cr_assert_eq(cc.rate_bps, share);
	/* the share doubles (a sender left): the rate gets there within a few round trips */
	urpc__cc_share_echo(&cc, &p, 2 * share);
	for (i = 0; i < 20 * 64; i++, t += 100) /* a packet per 100 ns: ~50 packets a round trip */
		urpc__cc_sample(&cc, &p, 5000, false, PKT, t);
	cr_assert_geq(cc.rate_bps, 2 * share * 95 / 100, "rate %llu after 20 round trips",
		      (unsigned long long)cc.rate_bps);
	cr_assert_leq(cc.rate_bps, 2 * share);
	/* above the target the delay still rules: the rate falls below the share */
	urpc__cc_sample(&cc, &p, 4 * TARGET, false, PKT, t + 100000);
	cr_assert_lt(cc.rate_bps, 2 * share);
}

Test(cc_share, line_or_none_leaves_a_free_session_free)
{
	struct urpc_cc_params p = params();
	struct urpc_cc cc;
	uint64_t t = T0;
	int i;

	urpc__cc_init(&cc, &p);
	/* a lone client hears the server's line: no cap, never paced */
	urpc__cc_share_echo(&cc, &p, LINE);
	urpc__cc_share_echo(&cc, &p, 4 * LINE); /* a server faster than this client's line */
	cr_assert_eq(cc.share_bps, 0);
	for (i = 0; i < 10000; i++, t += 2000) {
		urpc__cc_sample(&cc, &p, 4000, false, PKT, t);
		cr_assert_eq(cc.rate_bps, LINE);
		cr_assert_eq(urpc__cc_tx(&cc, PKT, t), 0, "a free session was paced");
	}
	/* a cap taken away (a share at the line again) frees the rate to grow back */
	urpc__cc_share_echo(&cc, &p, LINE / 10);
	cr_assert_eq(cc.rate_bps, LINE / 10);
	urpc__cc_share_echo(&cc, &p, LINE);
	for (i = 0; i < 2000; i++, t += 100)
		urpc__cc_sample(&cc, &p, 1000, false, PKT, t);
	cr_assert_eq(cc.rate_bps, LINE, "rate %llu", (unsigned long long)cc.rate_bps);
	cr_assert(!cc.limited);
}

Test(cc_share, garbage_share_stays_in_bounds)
{
	struct urpc_cc_params p = params();
	struct urpc_cc cc;

	urpc__cc_init(&cc, &p);
	urpc__cc_share_echo(&cc, &p, 1); /* 1 b/s: a peer cannot stop the session */
	cr_assert_eq(cc.rate_bps, p.min_bps);
	cr_assert_eq(cc.share_bps, p.min_bps);
	urpc__cc_share_echo(&cc, &p, UINT64_MAX); /* nor push it past the line */
	cr_assert_eq(cc.share_bps, 0);
	cr_assert_leq(cc.rate_bps, LINE);
}

/* ---- through the engine ---- */

#define NSESS 4
#define INFL 2
#define LEN 1000
#define T_ECHO 1
#define WAIT_NS 30000000000ull

static uint64_t vnow_ns;

static uint64_t test_clock(void *arg)
{
	return __atomic_load_n(&vnow_ns, __ATOMIC_RELAXED);
}

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess[NSESS];
	bool on[NSESS]; /* its continuations issue again */
	struct urpc_msgbuf req[NSESS][INFL], resp[NSESS][INFL];
	unsigned inflight, done[NSESS], bad;
} E;

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

static void e_issue(unsigned k, unsigned i);

static void e_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	unsigned k = (unsigned)(uintptr_t)tag / INFL, i = (unsigned)(uintptr_t)tag % INFL;

	E.inflight--;
	if (status || resp->data_size != LEN)
		E.bad++;
	E.done[k]++;
	if (E.on[k])
		e_issue(k, i);
}

static void e_issue(unsigned k, unsigned i)
{
	cr_assert_eq(urpc_req_enqueue(E.cli, E.sess[k], T_ECHO, &E.req[k][i], &E.resp[k][i], e_cont,
				      (void *)(uintptr_t)(k * INFL + i), 0),
		     0);
	E.inflight++;
}

static void e_pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(E.srv), 0);
	__atomic_add_fetch(&vnow_ns, 2500, __ATOMIC_RELAXED);
	cr_assert_eq(urpc_rpc_run_event_loop_once(E.cli), 0);
	__atomic_add_fetch(&vnow_ns, 2500, __ATOMIC_RELAXED);
}

/* Pump for @ns of virtual time. */
static void e_run(uint64_t ns)
{
	uint64_t end = vnow_ns + ns, wall = urpc__now_ns() + WAIT_NS;

	while (vnow_ns < end) {
		cr_assert_lt(urpc__now_ns(), wall, "stuck");
		e_pump();
	}
	cr_assert_eq(E.bad, 0);
}

/* Both Rpcs with Swift, a 1 Gb/s line and a 1 ms target (no delay ever exceeds it). */
static void e_up(enum urpc_transport_kind kind, unsigned nsess)
{
	struct urpc_seams seams = {.clock = test_clock};
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t end;
	char hp[64];
	unsigned k, i;

	memset(&E, 0, sizeof(E));
	vnow_ns = 1000000000ull;
	urpc__seams_set(&seams);
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &E.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(E.nx, T_ECHO, echo_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = kind;
	o.cc_algo = URPC_CC_SWIFT;
	o.cc_target_us = 1000;
	o.cc_line_mbps = 1000;
	cr_assert_eq(urpc_rpc_create(E.nx, 1, &o, &E.srv), 0);
	cr_assert_eq(urpc_rpc_create(E.nx, 2, &o, &E.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(E.nx));
	for (k = 0; k < nsess; k++) {
		cr_assert_eq(urpc_session_connect(E.cli, hp, 1, &E.sess[k]), 0);
		end = urpc__now_ns() + WAIT_NS;
		while (!urpc_session_is_connected(E.cli, E.sess[k])) {
			cr_assert_lt(urpc__now_ns(), end, "no connection");
			e_pump();
		}
		for (i = 0; i < INFL; i++) {
			cr_assert_eq(urpc_msgbuf_alloc(E.cli, LEN, &E.req[k][i]), 0);
			cr_assert_eq(urpc_msgbuf_alloc(E.cli, LEN, &E.resp[k][i]), 0);
		}
	}
}

static void e_start(unsigned k)
{
	unsigned i;

	E.on[k] = true;
	for (i = 0; i < INFL; i++)
		e_issue(k, i);
}

static void e_down(unsigned nsess)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	unsigned k, i;

	memset(E.on, 0, sizeof(E.on));
	while (E.inflight) {
		cr_assert_lt(urpc__now_ns(), end, "%u requests never completed", E.inflight);
		e_pump();
	}
	for (k = 0; k < nsess; k++)
		for (i = 0; i < INFL; i++) {
			cr_assert_eq(urpc_msgbuf_free(E.cli, &E.req[k][i]), 0);
			cr_assert_eq(urpc_msgbuf_free(E.cli, &E.resp[k][i]), 0);
		}
	cr_assert_eq(urpc_rpc_destroy(E.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(E.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(E.nx), 0);
	urpc__seams_set(NULL);
}

/*
 * One session alone: never capped, never paced. Four: each is told 970/4
 * Mb/s (on loop exactly; on udp, whose kernel may deliver a client's
 * requests late enough for an epoch to call it light, at least that and
 * at most 970) and held at it or below. Three stop: after an epoch or two
 * the one left is told nothing binding (the server has one client) and
 * its rate comes back to the line.
 */
static void share_caps_its_clients(enum urpc_transport_kind kind)
{
	struct urpc_session_stats st;
	unsigned k;

	e_up(kind, NSESS);
	e_start(0);
	e_run(5000000);
	cr_assert_eq(urpc_session_get_stats(E.cli, E.sess[0], &st), 0);
	cr_assert_eq(st.cc_share_bps, 0, "a lone client was capped at %llu",
		     (unsigned long long)st.cc_share_bps);
	cr_assert(!st.cc_limited);
	cr_assert_eq(st.cc_paced, 0);
	cr_assert_gt(E.done[0], 100);

	for (k = 1; k < NSESS; k++)
		e_start(k);
	e_run(5000000);
	for (k = 0; k < NSESS; k++) {
		cr_assert_eq(urpc_session_get_stats(E.cli, E.sess[k], &st), 0);
		if (kind == URPC_TRANSPORT_LOOP)
			cr_assert_eq(st.cc_share_bps, 970000000ull / NSESS / 1000000 * 1000000,
				     "session %u told %llu", k,
				     (unsigned long long)st.cc_share_bps);
		cr_assert(st.cc_share_bps >= 970000000ull / NSESS / 1000000 * 1000000 &&
				  st.cc_share_bps <= 970000000ull,
			  "session %u told %llu", k, (unsigned long long)st.cc_share_bps);
		cr_assert_leq(st.cc_rate_bps, st.cc_share_bps);
		cr_assert(st.cc_limited);
	}

	for (k = 1; k < NSESS; k++)
		E.on[k] = false;
	e_run(10000000);
	cr_assert_eq(urpc_session_get_stats(E.cli, E.sess[0], &st), 0);
	cr_assert_eq(st.cc_share_bps, 0, "still capped at %llu",
		     (unsigned long long)st.cc_share_bps);
	cr_assert_eq(st.cc_rate_bps, st.cc_line_bps, "rate %llu",
		     (unsigned long long)st.cc_rate_bps);
	e_down(NSESS);
}

Test(cc_share, server_share_caps_its_clients)
{
	share_caps_its_clients(URPC_TRANSPORT_LOOP);
}

Test(cc_share, server_share_caps_its_clients_on_udp)
{
	share_caps_its_clients(URPC_TRANSPORT_UDP);
}
