/* SPDX-License-Identifier: MIT */
/*
 * nx_pair.c - the two sides of the control-plane tests (nx_pair.h): their
 * Nexus and Rpc on udp, the handlers the server registers, the session
 * events each side counts, and the waits the cases share. Calls only the
 * public API and the Rpc's clock (urpc__now_ns).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "nx_pair.h"
#include "util/seam.h"

struct side S, C;

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

/* A large response of big_len bytes (BIG_LEN unless a case says), whatever the request. */
size_t big_len = BIG_LEN;

static void big(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);
	struct urpc_msgbuf mb;

	(void)arg, (void)r;
	cr_assert_eq(urpc_msgbuf_alloc(urpc_req_rpc(h), big_len, &mb), 0);
	memset(mb.buf, 0xb1, big_len);
	/* Refused past its source's share (-ENOBUFS; the client gets EIO): still ours. */
	if (urpc_resp_enqueue(h, &mb))
		cr_assert_eq(urpc_msgbuf_free(urpc_req_rpc(h), &mb), 0);
}

/* Any request: answered later, by the case (late_h). */
struct urpc_req_handle *late_h;

static void late(struct urpc_req_handle *h, void *arg)
{
	(void)arg;
	late_h = h;
}

/* Any request: an 8-byte answer (a large request is READ before it runs). */
static void sink_h(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	(void)arg;
	memset(r->buf, 0, 8);
	urpc_msgbuf_resize(r, 8);
	cr_assert_eq(urpc_resp_enqueue(h, r), 0);
}

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	struct side *sd = arg;

	(void)rpc, (void)session;
	if (ev == URPC_SM_CONNECTED) {
		sd->connected++;
	} else {
		sd->resets++; /* RESET, DISCONNECTED or a failed connect: none must happen */
		sd->last_ev = ev;
		sd->last_status = status;
	}
}

/* Options a test may change before side_up(): 0 / -1 keep the defaults. */
uint32_t opt_os_timeout_ms;
int opt_per_source = -1;
uint32_t opt_peer_timeout_ms = QUIET_TIMEOUT_MS;

void side_up(struct side *sd, bool server)
{
	side_up_at(sd, server, HOST);
}

void side_up_at(struct side *sd, bool server, const char *host)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;

	memset(sd, 0, sizeof(*sd));
	urpc_nexus_opts_init(&no);
	no.host = host;
	cr_assert_eq(urpc_nexus_create(&no, &sd->nx), 0);
	if (server) {
		cr_assert_eq(urpc_nexus_register_handler(sd->nx, T_ECHO, echo, NULL), 0);
		cr_assert_eq(urpc_nexus_register_handler(sd->nx, T_BIG, big, NULL), 0);
		cr_assert_eq(urpc_nexus_register_handler(sd->nx, T_SINK, sink_h, NULL), 0);
		cr_assert_eq(urpc_nexus_register_handler(sd->nx, T_LATE, late, NULL), 0);
	}
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_UDP;
	o.sm_handler = sm_cb;
	o.sm_arg = sd;
	o.ping_interval_ms = PING_MS;
	o.peer_timeout_ms = opt_peer_timeout_ms;
	/*
	 * No case measures the connect: the default 2 s is too short a bound
	 * for a connect under ASan beside CPU hogs (one such connect did not
	 * end within it in a stress run); half of connect_one()'s wait, so
	 * that a connect that times out still says so there.
	 */
	o.connect_timeout_ms = QUIET_TIMEOUT_MS / 2;
	o.idle_block_us = 0;
	o.one_sided_timeout_ms = opt_os_timeout_ms;
	if (opt_per_source >= 0)
		o.max_sessions_per_source = (uint32_t)opt_per_source;
	cr_assert_eq(urpc_rpc_create(sd->nx, server ? SRV_ID : CLI_ID, &o, &sd->rpc), 0);
}

void side_down(struct side *sd)
{
	cr_assert_eq(urpc_rpc_destroy(sd->rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(sd->nx), 0);
}

void pump(void)
{
	urpc_rpc_run_event_loop_once(S.rpc);
	urpc_rpc_run_event_loop_once(C.rpc);
}

unsigned echo_done;
int echo_status;

void echo_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	echo_status = status;
	echo_done++;
}

/* One echo on session @sess of the client with a deadline; its status (0: served). */
int echo_once(int sess)
{
	struct urpc_msgbuf req, resp;
	unsigned want = echo_done + 1;
	uint64_t end = urpc__now_ns() + WAIT_NS;
	int ret;

	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 32, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 32, &resp), 0);
	memset(req.buf, 0x5a, 32);
	ret = urpc_req_enqueue(C.rpc, sess, T_ECHO, &req, &resp, echo_cont, NULL, 0);
	if (!ret) {
		while (echo_done < want && urpc__now_ns() < end)
			pump();
		cr_assert_eq(echo_done, want, "the echo never completed");
		ret = echo_status;
	}
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	return ret; /* a session that is gone refuses the enqueue */
}

/* Connect the client to the server; the session number. */
int connect_one(void)
{
	char hp[64];
	uint64_t t0;
	int sess;

	snprintf(hp, sizeof(hp), "%s:%u", HOST, urpc_nexus_port(S.nx));
	cr_assert_eq(urpc_session_connect(C.rpc, hp, SRV_ID, &sess), 0);
	for (t0 = urpc__now_ns(); !C.connected && !C.resets && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	/* Say how a connect ended that did not connect: its event, or nothing at all. */
	cr_assert_eq(C.connected, 1, "the connect ended in %s (%s) after %.1f s, %u events",
		     C.resets ? urpc_sm_event_str(C.last_ev) : "no event",
		     C.resets ? urpc_strerror(C.last_status) : "-",
		     (double)(urpc__now_ns() - t0) / 1e9, C.resets);
	return sess;
}
