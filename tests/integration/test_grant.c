/* SPDX-License-Identifier: MIT */
/*
 * One-sided access exactly as wide as the message (issue 11), end to end.
 * A server Rpc and two client Rpcs (sessions A and B) share one Nexus over
 * the transport GRANT_KIND (loop and udp). The test plays a client (or a
 * server) that keeps the descriptors it was sent and tries them again with
 * its transport's own READ and WRITE, through its session's peer handle:
 * only the bytes of a message in flight, only READ, only from the session
 * the grant is for, only while the operation lasts. On udp it also sends
 * one-sided datagrams built from the wire format (transport/udp_int.h) on
 * a socket of its own, and through the client's own socket.
 */
#define _GNU_SOURCE /* struct mmsghdr in transport/udp_int.h */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "rpc/engine.h"
#include "rpc/rpc.h"
#include "transport/transport.h"
#include "transport/udp_int.h"
#include "udp_craft.h"
#include "util/seam.h"

#ifndef GRANT_KIND
#error "build with -DGRANT_KIND=URPC_TRANSPORT_<KIND> -DGRANT_NAME=<suite>"
#endif

#define T_BIG 1	  /* answers W.big bytes of pattern from a buffer of its own */
#define T_SMALL 2 /* answers 8 bytes */
#define T_HOLD 3  /* keeps the request; the test answers it */
#define WAIT_NS 30000000000ull
#define DROP_WAIT_NS 200000000ull /* a probe that udp drops times out after this */
/* How a request that does not come from the grant's session ends (transport.h). */
#define DROPPED (GRANT_KIND == URPC_TRANSPORT_UDP ? -ETIMEDOUT : -EACCES)
#define PROBE_WR 4242 /* the probes' wr_id: beyond the engine's operation table */

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *a, *b;
	int sa, sb;
	size_t big;
	struct urpc_req_handle *held;
	unsigned errors;
} W;

static uint8_t pat(size_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

static void big_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf own;
	size_t i;

	if (urpc_msgbuf_alloc(urpc_req_rpc(h), W.big, &own)) {
		W.errors++;
		return;
	}
	for (i = 0; i < W.big; i++)
		own.buf[i] = pat(i);
	if (urpc_resp_enqueue(h, &own))
		W.errors++;
}

static void small_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	memset(r->buf, 0x5a, 8);
	urpc_msgbuf_resize(r, 8);
	if (urpc_resp_enqueue(h, r))
		W.errors++;
}

static void hold_handler(struct urpc_req_handle *h, void *arg)
{
	W.held = h;
}

struct call {
	struct urpc_msgbuf req, resp;
	int status;
	bool busy;
};

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->status = status;
	c->busy = false;
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.a), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.b), 0);
}

/* Enqueue a @req_len-byte request of @type on @rpc's session @sess. */
static void call_start(struct urpc_rpc *rpc, int sess, uint8_t type, size_t req_len, struct call *c)
{
	size_t i;

	cr_assert_eq(urpc_msgbuf_alloc(rpc, req_len, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(rpc, W.big, &c->resp), 0);
	for (i = 0; i < req_len; i++)
		c->req.buf[i] = (uint8_t)(pat(i) ^ 0x33);
	c->busy = true;
	cr_assert_eq(urpc_req_enqueue(rpc, sess, type, &c->req, &c->resp, cont, c, 0), 0);
}

static void call_wait(struct call *c)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;

	while (c->busy) {
		cr_assert_lt(urpc__now_ns(), end, "a request did not complete");
		pump();
	}
}

static void call_free(struct urpc_rpc *rpc, struct call *c)
{
	cr_assert_eq(urpc_msgbuf_free(rpc, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_free(rpc, &c->resp), 0);
}

/* A request and its answer, start to end; the status. */
static int call(struct urpc_rpc *rpc, int sess, uint8_t type, size_t req_len)
{
	struct call c;

	call_start(rpc, sess, type, req_len, &c);
	call_wait(&c);
	if (type == T_BIG && !c.status) {
		cr_assert_eq(c.resp.data_size, W.big);
		for (size_t i = 0; i < W.big; i++)
			cr_assert_eq(c.resp.buf[i], pat(i), "response byte %zu", i);
	}
	call_free(rpc, &c);
	return c.status;
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
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_BIG, big_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_SMALL, small_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_HOLD, hold_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = GRANT_KIND;
	o.idle_block_us = 0;
	o.peer_timeout_ms = 10000;
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.a), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, 3, &o, &W.b), 0);
	W.big = 3 * urpc_rpc_max_msg_size(W.srv) + 5;
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.a, hp, 1, &W.sa), 0);
	cr_assert_eq(urpc_session_connect(W.b, hp, 1, &W.sb), 0);
	cr_assert_eq(call(W.a, W.sa, T_SMALL, 8), 0, "session A");
	cr_assert_eq(call(W.b, W.sb, T_SMALL, 8), 0, "session B");
}

static void world_down(void)
{
	cr_assert_eq(urpc_rpc_destroy(W.a), 0);
	cr_assert_eq(urpc_rpc_destroy(W.b), 0);
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
	cr_assert_eq(W.errors, 0, "%u handler errors", W.errors);
}

/* The server's half of client @cli's session @sess. */
static struct urpc_session *srv_half(struct urpc_rpc *cli, int sess)
{
	struct urpc_session_info info;

	cr_assert_eq(urpc__rpc_session_info(cli, sess, &info), 0);
	return urpc__rpc_session(W.srv, (int)info.remote_num);
}

static struct urpc_rpc_stats stats(struct urpc_rpc *rpc)
{
	struct urpc_rpc_stats st;

	cr_assert_eq(urpc_rpc_get_stats(rpc, &st), 0);
	return st;
}

/*
 * What a peer that kept a descriptor can do with it: a READ (or a WRITE
 * of 0xee bytes) of @len bytes at @raddr with @key, posted by @from's
 * transport over its session @via's peer handle, served by @target (whose
 * event loop runs; @from's does not, so the completion is the probe's).
 * Returns its status; a READ's bytes land in @got when not NULL.
 */
static int probe(struct urpc_rpc *from, struct urpc_session *via, struct urpc_rpc *target,
		 bool write, uint64_t raddr, uint64_t key, size_t len, uint8_t *got)
{
	struct urpc_tp *tp = urpc__rpc_transport(from);
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_msgbuf local;
	struct urpc_tp_comp c;
	int ret;

	cr_assert_eq(urpc_msgbuf_alloc(from, len, &local), 0);
	memset(local.buf, 0xee, len);
	tp->one_sided_timeout_ns = DROP_WAIT_NS;
	ret = write ? tp->ops->post_write(tp, via->peer, local.buf, urpc__mb_mr(&local), raddr, key,
					  len, PROBE_WR)
		    : tp->ops->post_read(tp, via->peer, local.buf, urpc__mb_mr(&local), raddr, key,
					 len, PROBE_WR);
	cr_assert_eq(ret, 0, "post: %s", urpc_strerror(ret));
	for (;;) {
		cr_assert_lt(urpc__now_ns(), end, "a probe never completed");
		cr_assert_eq(urpc_rpc_run_event_loop_once(target), 0);
		if (tp->ops->poll_completions(tp, &c, 1) == 1)
			break;
	}
	cr_assert_eq(c.wr_id, PROBE_WR);
	if (got && !c.status)
		memcpy(got, local.buf, len);
	cr_assert_eq(urpc_msgbuf_free(from, &local), 0);
	return c.status;
}

/* The large response stored in the server's slot 0 of A's session, and its descriptor. */
struct stored {
	struct urpc_sslot *sl;
	uint64_t addr, len, key;
};

static struct stored stored_resp(void)
{
	struct urpc_session *ss = srv_half(W.a, W.sa);
	struct stored r;

	cr_assert_not_null(ss);
	r.sl = &ss->srv.slots[0];
	cr_assert_eq(r.sl->state, URPC_SRV_RESPONDED);
	cr_assert_not_null(r.sl->large);
	cr_assert_neq(r.sl->large->grant.key, 0, "a stored large response is granted");
	r.addr = le64toh(urpc__sslot_lpkt(r.sl)->d.addr);
	r.len = le64toh(urpc__sslot_lpkt(r.sl)->d.len);
	r.key = le64toh(urpc__sslot_lpkt(r.sl)->d.key);
	return r;
}

Test(GRANT_NAME, a_response_descriptor_reaches_exactly_the_message)
{
	struct urpc_session *ca;
	struct stored r;
	uint8_t *got;

	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	r = stored_resp();
	/* The descriptor names the message's bytes, not its pool chunk. */
	cr_assert_eq(r.addr, (uint64_t)(uintptr_t)r.sl->large->resp.buf);
	cr_assert_eq(r.len, W.big);
	got = malloc(W.big);
	cr_assert_not_null(got);

	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, got), 0);
	for (size_t i = 0; i < W.big; i++)
		cr_assert_eq(got[i], pat(i));
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr - 1, r.key, 1, NULL), -EACCES,
		     "one byte before the message");
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr + r.len, r.key, 1, NULL), -EACCES,
		     "one byte past the message");
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len + 1, NULL), -EACCES,
		     "the message and one byte more");
	cr_assert_eq(probe(W.a, ca, W.srv, true, r.addr, r.key, 16, NULL), -EACCES,
		     "a WRITE to a read-only grant");
	cr_assert_eq(probe(W.a, ca, W.srv, true, r.addr + r.len, r.key, 16, NULL), -EACCES,
		     "a WRITE past it");
	cr_assert_not_null(r.sl->large, "the stored response was revoked meanwhile");
	for (size_t i = 0; i < W.big; i++)
		cr_assert_eq(r.sl->large->resp.buf[i], pat(i), "byte %zu was written", i);
	cr_assert_geq(stats(W.srv).os_refused, 5);
	free(got);
	world_down();
}

Test(GRANT_NAME, a_grant_for_session_a_fails_from_session_b_and_with_a_wrong_token)
{
	struct urpc_session *ca = NULL, *cb = NULL;
	struct urpc_tp *tpa;
	uint64_t dropped, refused;
	struct stored r;

	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cb = urpc__rpc_session(W.b, W.sb);
	tpa = urpc__rpc_transport(W.a);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	r = stored_resp();
	dropped = stats(W.srv).os_dropped;
	refused = stats(W.srv).os_refused;
	/*
	 * Session B (another Rpc, its own token) with A's descriptor: a peer
	 * of the server, so refused, but as if the key named nothing.
	 */
	cr_assert_eq(probe(W.b, cb, W.srv, false, r.addr, r.key, r.len, NULL), -EACCES);
	cr_assert_eq(probe(W.b, cb, W.srv, true, r.addr, r.key, 16, NULL), -EACCES);
	cr_assert_geq(stats(W.srv).os_refused, refused + 2, "refused and counted");
	/* ... even with A's token. */
	tpa->ops->set_peer_token(urpc__rpc_transport(W.b), cb->peer, ca->token);
	cr_assert_eq(probe(W.b, cb, W.srv, false, r.addr, r.key, r.len, NULL), DROPPED);
	tpa->ops->set_peer_token(urpc__rpc_transport(W.b), cb->peer, cb->token);
	/* Session A's own endpoint with a wrong token. */
	tpa->ops->set_peer_token(tpa, ca->peer, ca->token ^ 0x100);
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), DROPPED);
	tpa->ops->set_peer_token(tpa, ca->peer, ca->token);
	cr_assert_geq(stats(W.srv).os_dropped, dropped + 2, "dropped and counted");
	cr_assert_not_null(r.sl->large, "the stored response was revoked meanwhile");
	for (size_t i = 0; i < W.big; i++)
		cr_assert_eq(r.sl->large->resp.buf[i], pat(i), "byte %zu was written", i);
	/* The rightful session still reads it; both sessions keep working. */
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), 0);
	cr_assert_eq(call(W.b, W.sb, T_BIG, 8), 0);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	world_down();
}

Test(GRANT_NAME, a_kept_response_descriptor_reads_nothing_once_the_request_is_over)
{
	struct urpc_session *ca;
	struct stored r;

	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	r = stored_resp();
	/* The client's next request on that slot says it is done with the answer. */
	cr_assert_eq(call(W.a, W.sa, T_SMALL, 8), 0);
	cr_assert_null(r.sl->large, "the stored large response and its grant are gone");
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), -EACCES,
		     "READ after the request");
	cr_assert_eq(probe(W.a, ca, W.srv, true, r.addr, r.key, 16, NULL), -EACCES,
		     "WRITE after the request");
	/* A later large answer gets a grant of its own; the old key stays dead. */
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	cr_assert_neq(stored_resp().key, r.key);
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), -EACCES);
	world_down();
}

Test(GRANT_NAME, a_kept_request_descriptor_reads_nothing_once_the_server_has_read_it)
{
	struct urpc_session *ss;
	struct urpc_cslot *sl;
	struct call c;
	uint64_t addr, len, key, end;
	struct urpc_msgbuf *r;

	world_up();
	ss = srv_half(W.a, W.sa);
	call_start(W.a, W.sa, T_HOLD, W.big, &c);
	sl = &urpc__rpc_session(W.a, W.sa)->cli.slots[0];
	/* While the server may read it: exactly the request's bytes. */
	addr = le64toh(sl->lpkt.d.addr);
	len = le64toh(sl->lpkt.d.len);
	key = le64toh(sl->lpkt.d.key);
	cr_assert_eq(addr, (uint64_t)(uintptr_t)c.req.buf);
	cr_assert_eq(len, W.big);
	cr_assert_neq(key, 0);
	end = urpc__now_ns() + WAIT_NS;
	while (!W.held || sl->state != URPC_CLI_ACKED) {
		cr_assert_lt(urpc__now_ns(), end, "the held request was not read and acknowledged");
		pump();
	}
	/* Read and acknowledged: the client took its grant back. */
	cr_assert_eq(sl->grant.key, 0);
	cr_assert_eq(probe(W.srv, ss, W.a, false, addr, key, len, NULL), -EACCES,
		     "the server READs a request it has read");
	cr_assert_eq(probe(W.srv, ss, W.a, true, addr, key, 16, NULL), -EACCES,
		     "the server WRITEs into the client's request");
	for (size_t i = 0; i < W.big; i++)
		cr_assert_eq(c.req.buf[i], (uint8_t)(pat(i) ^ 0x33), "request byte %zu", i);
	r = urpc_req_resp_msgbuf(W.held);
	urpc_msgbuf_resize(r, 8);
	cr_assert_eq(urpc_resp_enqueue(W.held, r), 0);
	call_wait(&c);
	cr_assert_eq(c.status, 0);
	call_free(W.a, &c);
	cr_assert_eq(probe(W.srv, ss, W.a, false, addr, key, len, NULL), -EACCES);
	world_down();
}

/* ---- udp: datagrams built by hand ---- */

/* The server's one-sided endpoint, from its endpoint bytes. */
static struct sockaddr_in srv_udp_addr(void)
{
	struct urpc_tp *tp = urpc__rpc_transport(W.srv);
	uint8_t ep[URPC_TP_EP_MAX];
	struct sockaddr_in sa;

	cr_assert_gt(tp->ops->get_endpoint(tp, ep), 8);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	memcpy(&sa.sin_addr.s_addr, ep + 2, 4);
	memcpy(&sa.sin_port, ep + 6, 2);
	return sa;
}

Test(GRANT_NAME, crafted_one_sided_datagrams_from_another_source_are_dropped_and_counted)
{
	struct sockaddr_in to, me;
	socklen_t melen = sizeof(me);
	struct urpc_session *ca;
	uint64_t dropped, refused;
	struct stored r;
	uint8_t buf[2048];
	unsigned i, sent = 0;
	int fd;

	if (GRANT_KIND != URPC_TRANSPORT_UDP)
		cr_skip_test("datagrams are built by hand on udp only");
	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	r = stored_resp();
	to = srv_udp_addr();
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(fd, 0);
	memset(&me, 0, sizeof(me));
	me.sin_family = AF_INET;
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&me, &melen), 0);
	dropped = stats(W.srv).os_dropped;
	refused = stats(W.srv).os_refused;

	/* A's live key and A's token, from another address: a forged source. */
	udp_send_os(fd, &to, 7, false, r.addr, r.len, r.key, ca->token), sent++;
	udp_send_os(fd, &to, 7, true, r.addr, r.len, r.key, ca->token), sent++;
	/* Keys and tokens made up, over the whole response and around it. */
	for (i = 0; i < 64; i++, sent++)
		udp_send_os(fd, &to, 7, i & 1, r.addr - 4096 + 128 * i, 64,
			    r.key + ((uint64_t)i << 32), 0x1234 + i);
	for (i = 0; i < 32; i++, sent++)
		udp_send_os(fd, &to, 7, i & 1, r.addr, r.len, (uint64_t)i << 32 | i, ca->token);
	/*
	 * The rightful session's READ, sent after them on the same socket
	 * queue: once it completes, the server has seen every crafted one.
	 */
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), 0);
	cr_assert_eq(stats(W.srv).os_dropped, dropped + sent, "each dropped and counted");
	cr_assert_eq(stats(W.srv).os_refused, refused, "none answered");
	cr_assert_eq(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), -1, "nothing came back");
	cr_assert_not_null(r.sl->large, "the stored response was revoked meanwhile");
	for (i = 0; i < W.big; i++)
		cr_assert_eq(r.sl->large->resp.buf[i], pat(i), "byte %u was written", i);
	close(fd);
	/* The server goes on serving both sessions. */
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	cr_assert_eq(call(W.b, W.sb, T_BIG, W.big), 0);
	world_down();
}

Test(GRANT_NAME, crafted_one_sided_datagrams_from_the_session_itself_reach_no_other_byte)
{
	struct urpc_session *ca;
	struct sockaddr_in to;
	uint64_t refused;
	struct stored r;
	unsigned i, sent = 0;
	int fd;

	if (GRANT_KIND != URPC_TRANSPORT_UDP)
		cr_skip_test("datagrams are built by hand on udp only");
	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	r = stored_resp();
	to = srv_udp_addr();
	/* A's own socket and token: an authenticated client that misbehaves. */
	fd = to_udp(urpc__rpc_transport(W.a))->fd;
	refused = stats(W.srv).os_refused;
	for (i = 0; i < 16; i++, sent++)
		udp_send_os(fd, &to, 7, true, r.addr + i, 16, r.key, ca->token);
	udp_send_os(fd, &to, 7, false, r.addr - 1, r.len, r.key, ca->token), sent++;
	udp_send_os(fd, &to, 7, false, r.addr + 1, r.len, r.key, ca->token), sent++;
	udp_send_os(fd, &to, 7, false, r.addr, r.len + 1, r.key, ca->token), sent++;
	cr_assert_eq(probe(W.a, ca, W.srv, false, r.addr, r.key, r.len, NULL), 0);
	cr_assert_eq(stats(W.srv).os_refused, refused + sent, "each refused (NAK to A)");
	cr_assert_not_null(r.sl->large, "the stored response was revoked meanwhile");
	for (i = 0; i < W.big; i++)
		cr_assert_eq(r.sl->large->resp.buf[i], pat(i), "byte %u was written", i);
	/* A's transport ignores the NAKs for operations it never posted; all goes on. */
	cr_assert_eq(call(W.a, W.sa, T_BIG, W.big), 0);
	cr_assert_eq(call(W.b, W.sb, T_BIG, 8), 0);
	world_down();
}

/* ---- users' exposures (issue 16): what a peer can do with an rbuf ---- */

#define XGUARD 4096u /* guard bytes on each side of the exposure */
#define XLEN 3001u   /* the exposure: odd */
static uint8_t xmem[2 * XGUARD + XLEN];

static uint8_t xpat(size_t i)
{
	return (uint8_t)(pat(i) ^ 0xa5);
}

static void xmem_fill(void)
{
	for (size_t i = 0; i < sizeof(xmem); i++)
		xmem[i] = xpat(i);
}

/* Every byte of xmem as filled, but those in [from, to), which are @v. */
static void xmem_check(size_t from, size_t to, uint8_t v)
{
	for (size_t i = 0; i < sizeof(xmem); i++)
		cr_assert_eq(xmem[i], i >= from && i < to ? v : xpat(i), "byte %zd of the exposure",
			     (ssize_t)i - (ssize_t)XGUARD);
}

/* The server exposes the exposure's bytes with @access on its half of A's session. */
static struct urpc_rbuf xexpose(unsigned access)
{
	struct urpc_rbuf rb;

	cr_assert_eq(urpc_mem_expose(W.srv, (int)srv_half(W.a, W.sa)->local_num, xmem + XGUARD,
				     XLEN, access, &rb),
		     0);
	return rb;
}

Test(GRANT_NAME, a_user_exposure_reaches_exactly_its_bytes_access_and_session)
{
	struct urpc_session *ca, *cb;
	struct urpc_rbuf rw, ro, rw2;
	uint64_t at, key, rokey;
	static uint8_t got[XLEN];
	unsigned i;

	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	cb = urpc__rpc_session(W.b, W.sb);
	xmem_fill();
	rw = xexpose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	ro = xexpose(URPC_MEM_PEER_READS);
	at = le64toh(rw.addr);
	key = le64toh(rw.key);
	rokey = le64toh(ro.key);
	cr_assert_eq(at, (uint64_t)(uintptr_t)(xmem + XGUARD));
	cr_assert_neq(key, rokey);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at, key, XLEN, got), 0);
	cr_assert_eq(memcmp(got, xmem + XGUARD, XLEN), 0);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at, rokey, XLEN, NULL), 0);
	/* Bounds, to the byte, both ways, and access. */
	cr_assert_eq(probe(W.a, ca, W.srv, false, at - 1, key, XLEN, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at - 1, key, 1, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at + XLEN, key, 1, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at, key, XLEN + 1, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at + 1, key, XLEN, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at + XLEN - 8, key, 16, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at - 8, key, 16, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, rokey, 16, NULL), -EACCES,
		     "a WRITE to a read-only exposure");
	/* Forged and guessed keys, from the session itself. */
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key ^ 1, 16, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key ^ (1ull << 63), 16, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key + 1, 16, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key ^ rokey, 16, NULL), -EACCES);
	for (i = 0; i < 16; i++)
		cr_assert_eq(
			probe(W.a, ca, W.srv, true, at, key * 0x9e3779b97f4a7c15ull + i, 16, NULL),
			-EACCES);
	/* Session B (its own token): a peer of the server, not the exposure's. */
	cr_assert_eq(probe(W.b, cb, W.srv, false, at, key, XLEN, NULL), -EACCES);
	cr_assert_eq(probe(W.b, cb, W.srv, true, at, key, 16, NULL), -EACCES);
	/* B with A's token, and A with a wrong one: not a session at all. */
	urpc__rpc_transport(W.b)->ops->set_peer_token(urpc__rpc_transport(W.b), cb->peer,
						      ca->token);
	cr_assert_eq(probe(W.b, cb, W.srv, true, at, key, 16, NULL), DROPPED);
	urpc__rpc_transport(W.b)->ops->set_peer_token(urpc__rpc_transport(W.b), cb->peer,
						      cb->token);
	urpc__rpc_transport(W.a)->ops->set_peer_token(urpc__rpc_transport(W.a), ca->peer,
						      ca->token ^ 0x40);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key, 16, NULL), DROPPED);
	urpc__rpc_transport(W.a)->ops->set_peer_token(urpc__rpc_transport(W.a), ca->peer,
						      ca->token);
	xmem_check(0, 0, 0);
	/* Revoked: the key is dead, also once the same bytes are exposed anew. */
	cr_assert_eq(urpc_mem_revoke(W.srv, &rw), 0);
	cr_assert_eq(probe(W.a, ca, W.srv, false, at, key, XLEN, NULL), -EACCES);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key, 16, NULL), -EACCES);
	rw2 = xexpose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	cr_assert_neq(le64toh(rw2.key), key);
	cr_assert_neq(le64toh(rw2.gen), le64toh(rw.gen));
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, key, 16, NULL), -EACCES);
	xmem_check(0, 0, 0);
	/* The new key writes exactly the exposure. */
	cr_assert_eq(probe(W.a, ca, W.srv, true, at, le64toh(rw2.key), XLEN, NULL), 0);
	xmem_check(XGUARD, XGUARD + XLEN, 0xee);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rw2), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &ro), 0);
	cr_assert_eq(call(W.a, W.sa, T_BIG, 8), 0);
	cr_assert_eq(call(W.b, W.sb, T_BIG, 8), 0);
	world_down();
}

Test(GRANT_NAME, crafted_datagrams_against_a_user_exposure_change_nothing)
{
	struct urpc_rbuf rw, ro, old;
	struct sockaddr_in to, me;
	socklen_t melen = sizeof(me);
	struct urpc_session *ca;
	struct urpc_tp *stp;
	uint64_t at, key, dropped, refused, bad;
	unsigned nref = 0, ndrop = 0, nbad = 0, i;
	uint8_t ee[16], buf[2048];
	struct udp_craft c, w;
	int fda, fd;

	if (GRANT_KIND != URPC_TRANSPORT_UDP)
		cr_skip_test("datagrams are built by hand on udp only");
	world_up();
	ca = urpc__rpc_session(W.a, W.sa);
	stp = urpc__rpc_transport(W.srv);
	xmem_fill();
	old = xexpose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	cr_assert_eq(urpc_mem_revoke(W.srv, &old), 0);
	rw = xexpose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	ro = xexpose(URPC_MEM_PEER_READS);
	at = le64toh(rw.addr);
	key = le64toh(rw.key);
	to = srv_udp_addr();
	fda = to_udp(urpc__rpc_transport(W.a))->fd; /* A's own socket: an authenticated peer */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(fd, 0);
	memset(&me, 0, sizeof(me));
	me.sin_family = AF_INET;
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&me, &melen), 0);
	memset(ee, 0xee, sizeof(ee));
	dropped = stats(W.srv).os_dropped;
	refused = stats(W.srv).os_refused;
	bad = stp->stats.rx_drop_bad;
	memset(&w, 0, sizeof(w));
	w.type = UDP_T_WR_DATA;
	w.op_id = 7;
	w.e = (struct udp_ext){
		.raddr = at, .len = 16, .key = key, .token = ca->token, .chunk_size = 16};
	w.payload = ee;
	w.plen = sizeof(ee);

	/* From A's socket with A's token: each refused with a NAK to A. */
#define REFUSED(...)                                                                               \
	do {                                                                                       \
		c = w;                                                                             \
		__VA_ARGS__;                                                                       \
		udp_send_craft(fda, &to, &c);                                                      \
		nref++;                                                                            \
	} while (0)
	REFUSED(c.e.raddr = at - 1);
	REFUSED(c.e.raddr = at + XLEN - 15);
	REFUSED(c.e.raddr = at + XLEN);
	REFUSED(c.e.raddr = at - XGUARD);
	REFUSED(c.e.raddr = 4096);
	REFUSED(c.e.key = le64toh(ro.key));		  /* WRITE to the read-only exposure */
	REFUSED(c.e.key = le64toh(old.key));		  /* revoked, the same bytes exposed anew */
	REFUSED(c.e.len = 1ull << 40);			  /* the whole operation: far too long */
	REFUSED(c.e.len = XLEN + 1; c.e.chunk_size = 16); /* one byte too long */
	REFUSED(c.type = UDP_T_RD_REQ; c.plen = 0; c.e.raddr = at - XGUARD; c.e.len = sizeof(xmem);
		c.e.chunk_size = 1024);
	REFUSED(c.type = UDP_T_RD_REQ; c.plen = 0; c.e.len = XLEN + 1; c.e.chunk_size = 1024);
	for (i = 0; i < 64; i += 3)
		REFUSED(c.e.key = key ^ (1ull << i));
	for (i = 0; i < 32; i++)
		REFUSED(c.e.key = (key + i + 1) * 0x9e3779b97f4a7c15ull);
	REFUSED(c.e.key = 0);
	REFUSED(c.e.key = (uint32_t)key);
	/* Malformed, whoever sends them: counted as bad datagrams, unanswered. */
#define MALFORMED(...)                                                                             \
	do {                                                                                       \
		c = w;                                                                             \
		__VA_ARGS__;                                                                       \
		udp_send_craft(fda, &to, &c);                                                      \
		nbad++;                                                                            \
	} while (0)
	MALFORMED(c.e.raddr = UINT64_MAX - 7);	/* the range wraps */
	MALFORMED(c.e.len = UINT64_MAX);	/* ... so does this one */
	MALFORMED(c.chunk = 1);			/* a chunk past the operation */
	MALFORMED(c.chunk = UINT32_MAX);	/* ... far past */
	MALFORMED(c.e.chunk_size = 0);		/* no chunk size */
	MALFORMED(c.e.chunk_size = UINT32_MAX); /* larger than any datagram */
	MALFORMED(c.cut = 1);			/* a byte short of its chunk */
	MALFORMED(c.cut = 16 + 8);		/* shorter than its header */
	MALFORMED(c.type = UDP_T_RD_REQ);	/* a READ that carries bytes */
	MALFORMED(c.e.len = 32; c.e.chunk_size = 16; c.chunk = 1; c.plen = 8); /* short last */
	/* From another socket, A's live key and token: a forged source, dropped. */
	udp_send_craft(fd, &to, &w), ndrop++;
	c = w;
	c.type = UDP_T_RD_REQ;
	c.plen = 0;
	c.e.len = XLEN;
	c.e.chunk_size = 1024;
	udp_send_craft(fd, &to, &c), ndrop++;
	for (i = 0; i < 16; i++) {
		c = w;
		c.e.key = key ^ ((uint64_t)i << 17);
		c.e.token = ca->token + i;
		udp_send_craft(fd, &to, &c), ndrop++;
	}
	/* A's own socket with another token: not a session either. */
	c = w;
	c.e.token = ca->token ^ 1;
	udp_send_craft(fda, &to, &c), ndrop++;
	/* A's READ after them on the same queue: once done, all were seen. */
	cr_assert_eq(probe(W.a, ca, W.srv, false, at, key, XLEN, NULL), 0);
	cr_assert_eq(stats(W.srv).os_refused, refused + nref, "each refused and counted");
	cr_assert_eq(stats(W.srv).os_dropped, dropped + ndrop, "each dropped and counted");
	cr_assert_eq(stp->stats.rx_drop_bad, bad + nbad, "each malformed one counted");
	cr_assert_eq(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), -1, "nothing came back");
	xmem_check(0, 0, 0);
	close(fd);
	/* The right key, source and token: exactly its bytes; the server goes on. */
	udp_send_craft(fda, &to, &w);
	cr_assert_eq(probe(W.a, ca, W.srv, true, at + 16, key, XLEN - 16, NULL), 0);
	xmem_check(XGUARD, XGUARD + XLEN, 0xee);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rw), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &ro), 0);
	cr_assert_eq(call(W.a, W.sa, T_BIG, W.big), 0);
	cr_assert_eq(call(W.b, W.sb, T_BIG, 8), 0);
	world_down();
#undef REFUSED
#undef MALFORMED
}
