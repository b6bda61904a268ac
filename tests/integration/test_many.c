/* SPDX-License-Identifier: MIT */
/*
 * Many sessions on one Rpc: their CONNECT_REQs leave in batches (the SM
 * outbox, sent whenever it is full and at the end of an event-loop pass);
 * the timer scan looks at session management (connect and disconnect
 * retries, probes) only on sessions with such a timer armed, at retransmission only on the sessions with requests in
 * flight (evtimer.c, urpc__evloop_scan_timers), and at the peer's liveness only when the
 * Nexus has noticed something. Established idle sessions are in neither
 * bitmap, yet every session is reached: requests on the highest-numbered
 * sessions are resent through a lossy loop wire, and when the server's
 * process hangs, every client session is reset when the Nexus's heartbeat
 * times out.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/rpc.h"
#include "transport/loop_hooks.h"
#include "transport/transport.h"
#include "util/log.h"

#define N_SESS 600 /* more than the old scan's 256 at a time */
#define N_REQ 40   /* requests, on the last N_REQ sessions */
#define T_ECHO 1
#define WAIT_NS 60000000000ull
#define PEER_TIMEOUT_MS 1000

struct mworld {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess[N_SESS];
	unsigned connected, reset, other_events;
	unsigned done[N_REQ];
	int status[N_REQ];
};

static struct mworld M;

static void echo(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);
	size_t len;
	const uint8_t *d = urpc_req_data(h, &len);

	(void)arg;
	memcpy(r->buf, d, len);
	urpc_msgbuf_resize(r, len);
	cr_assert_eq(urpc_resp_enqueue(h, r), 0);
}

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	(void)rpc, (void)session, (void)status, (void)arg;
	if (ev == URPC_SM_CONNECTED)
		M.connected++;
	else if (ev == URPC_SM_RESET)
		M.reset++;
	else
		M.other_events++;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	unsigned i = (unsigned)(uintptr_t)tag;

	(void)rpc, (void)resp;
	M.done[i]++;
	M.status[i] = status;
}

Test(many_sessions, timers_reach_every_session, .timeout = 120)
{
	struct urpc_msgbuf req[N_REQ], resp[N_REQ];
	struct urpc_loop_faults lossy = {.drop = 0.3};
	struct urpc_rpc_stats cs;
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	uint64_t end, start, took_ms;
	unsigned i, left;
	char hp[64];

	memset(&M, 0, sizeof(M));
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &M.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(M.nx, T_ECHO, echo, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.max_sessions = N_SESS;
	o.ping_interval_ms = 50;
	o.peer_timeout_ms = PEER_TIMEOUT_MS;
	o.rto_us = 2000;
	cr_assert_eq(urpc_rpc_create(M.nx, 1, &o, &M.srv), 0);
	o.sm_handler = sm_cb;
	cr_assert_eq(urpc_rpc_create(M.nx, 2, &o, &M.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(M.nx));
	for (i = 0; i < N_SESS; i++)
		cr_assert_eq(urpc_session_connect(M.cli, hp, 1, &M.sess[i]), 0);
	/*
	 * The CONNECT_REQs go out a full outbox at a time; the rest wait for
	 * the client's next pass, which sends them.
	 */
	cr_assert_eq(urpc_rpc_get_stats(M.cli, &cs), 0);
	cr_assert_eq(cs.sm_pkts_tx, N_SESS - N_SESS % URPC_SM_OUT_BATCH,
		     "%llu CONNECT_REQs left before the event loop ran",
		     (unsigned long long)cs.sm_pkts_tx);
	cr_assert_eq(urpc_rpc_run_event_loop_once(M.cli), 0);
	cr_assert_eq(urpc_rpc_get_stats(M.cli, &cs), 0);
	/* ... with what it sends itself (cookie echoes): nothing is left behind. */
	cr_assert_eq(M.cli->smo_n, 0, "%u SM packets still wait after the pass", M.cli->smo_n);
	cr_assert_geq(cs.sm_pkts_tx, N_SESS, "the pass sent %llu SM packets",
		      (unsigned long long)cs.sm_pkts_tx);
	end = urpc__now_ns() + WAIT_NS;
	while (M.connected < N_SESS) {
		cr_assert_lt(urpc__now_ns(), end, "%u of %d sessions connected", M.connected,
			     N_SESS);
		cr_assert_eq(M.reset + M.other_events, 0, "a session failed to connect");
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.cli), 0);
	}
	cr_assert_eq(M.cli->hi_session, N_SESS);
	/*
	 * Connected and idle: the scans soon find no session with a timer,
	 * and leave every one out of their bitmaps.
	 */
	start = urpc__now_ns();
	for (;;) {
		uint64_t bits = 0;

		for (i = 0; i < (N_SESS + 63) / 64; i++)
			bits |= M.cli->sm_map[i] | M.cli->busy_map[i] | M.srv->sm_map[i] |
				M.srv->busy_map[i];
		if (!bits)
			break;
		cr_assert_lt(urpc__now_ns() - start, 5000000000ull,
			     "idle sessions stay in the scan's bitmaps");
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.cli), 0);
	}

	/* A lossy wire: requests on the last sessions complete by resending. */
	cr_assert_eq(urpc__loop_set_faults(urpc__rpc_transport(M.cli), &lossy), 0);
	for (i = 0; i < N_REQ; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(M.cli, 8, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_alloc(M.cli, 8, &resp[i]), 0);
		memcpy(req[i].buf, &i, sizeof(i));
		urpc_msgbuf_resize(&req[i], sizeof(i));
		cr_assert_eq(urpc_req_enqueue(M.cli, M.sess[N_SESS - 1 - i], T_ECHO, &req[i],
					      &resp[i], cont, (void *)(uintptr_t)i, 0),
			     0);
	}
	do {
		cr_assert_lt(urpc__now_ns(), end, "requests did not complete");
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.cli), 0);
		for (left = 0, i = 0; i < N_REQ; i++)
			left += !M.done[i];
	} while (left);
	for (i = 0; i < N_REQ; i++) {
		cr_assert_eq(M.done[i], 1);
		cr_assert_eq(M.status[i], 0, "request %u: %s", i, urpc_strerror(M.status[i]));
		cr_assert_eq(memcmp(resp[i].buf, &i, sizeof(i)), 0);
		cr_assert_eq(urpc_msgbuf_free(M.cli, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(M.cli, &resp[i]), 0);
	}
	cr_assert_eq(urpc_rpc_get_stats(M.cli, &cs), 0);
	cr_assert_gt(cs.retransmits, 0, "the loss switch lost nothing");

	/*
	 * The server's process hangs without a word (its Nexus hears and
	 * sends nothing; here both Rpcs share that Nexus): one heartbeat per
	 * peer process notices within the peer time-out, and every session
	 * to it is reset at once.
	 */
	urpc__nexus_set_mute(M.nx, true);
	start = urpc__now_ns();
	while (M.reset < N_SESS) {
		cr_assert_lt(urpc__now_ns(), end, "%u of %d sessions were reset", M.reset, N_SESS);
		cr_assert_eq(urpc_rpc_run_event_loop_once(M.cli), 0);
	}
	took_ms = (urpc__now_ns() - start) / 1000000;
	cr_assert_geq(took_ms, PEER_TIMEOUT_MS - 100,
		      "reset after %lu ms, before the peer time-out", (unsigned long)took_ms);
	/*
	 * Within a few peer time-outs: detection rides the Nexus's thread, which
	 * a loaded host runs late (3.8 s seen beside a simulator run); later
	 * still would mean the failure was not noticed by the heartbeat.
	 */
	cr_assert_lt(took_ms, 5 * PEER_TIMEOUT_MS,
		     "the last reset came %lu ms after the server stopped", (unsigned long)took_ms);
	cr_assert_eq(urpc_rpc_destroy(M.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(M.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(M.nx), 0);
}
