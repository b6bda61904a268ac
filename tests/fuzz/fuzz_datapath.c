/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the datapath receive path of a connected Rpc
 * (urpc__evloop_rx, src/rpc/evloop.c, client.c, server.c) on both ends of a session, and the
 * session-management packets a Nexus routes to its Rpcs (src/nexus/sm.c,
 * nexus.c, session.c).
 *
 * The world, built once and kept across inputs: a Nexus whose session
 * management goes through an in-process mailbox (urpc__nexus_create_sim),
 * a server Rpc (id 1) and a client Rpc (id 2) on the loop transport, one
 * session between them, and a virtual clock and seeded entropy behind the
 * engine's seams (src/util/seam.h): one thread, no sockets, no real time,
 * so what an input does depends on it and on the state the inputs before it
 * left, which the patches below mostly hide (they are relative to the live
 * session). An input that leaves the session unusable (reset, disconnected,
 * forged sessions beside it, a request stuck on a server session that is
 * gone) gets it closed on both sides and a new one opened on the same Rpcs
 * (new Rpcs cost tens of milliseconds of page faults for their pools); when
 * that fails, the Rpcs are destroyed, which must succeed (the engine's
 * buffer accounting is checked there), and created anew.
 *
 * An input is a program of commands (formats.h): datagrams handed to the
 * server's or the client's urpc__evloop_rx from an exact-size heap copy (ASan
 * sees a read past the end, or a use of the bytes after the call), real
 * requests from the client, event-loop passes, clock steps, answers to
 * deferred requests, SM datagrams for the Nexus, a disconnect. A datagram's
 * first bytes choose which header fields are patched to valid values (the
 * session number, token, request numbers relative to the live slots, a
 * descriptor of the peer's exposed memory), so inputs reach the handlers,
 * the duplicate and stale paths and the one-sided reads. After the program
 * the loops run until every request has completed. Checked throughout:
 * each continuation runs exactly once with a status the API documents, a
 * handler sees bytes it may read, the engine's own bookkeeping agrees with
 * itself and with the continuations still owed (urpc__rpc_check) after
 * every command, and nothing leaks (LeakSanitizer).
 *
 * Owns: the world above (globals). Calls: the public API, src/rpc/rpc.h
 * internals (session slots, urpc__evloop_rx), urpc__nexus_create_sim and
 * urpc__nexus_sm_input (nexus.h), the seams, the loop transport's ops.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "formats.h"
#include "fuzz.h"
#include "nexus/nexus.h"
#include "rpc/pkthdr.h"
#include "rpc/rpc.h"
#include "util/seam.h"

#define NX_HOST "127.0.0.1"
#define NX_PORT 31999
#define SRV_ID 1
#define CLI_ID 2
#define EXPOSE_LEN 16384 /* each side's buffer that descriptors point into */
#define MAX_CALLS 16	 /* client requests in flight at once */
#define MAX_DEFERRED 64
#define MAILBOX 256 /* SM datagrams in transit */
#define SETTLE_PASSES 256
#define SETTLE_STEP_NS 10000000ull /* 256 steps: past deadlines and the disconnect time-out */

/* ---- the seams: a virtual clock and a seeded entropy source ---- */

static uint64_t vclock = 1000000000ull;
static uint64_t entropy_state = 0x75727063ull;

/* Every read moves time on a little, so loops that wait on the clock end. */
static uint64_t fuzz_clock(void *arg)
{
	vclock += 1000;
	return vclock;
}

static void fuzz_entropy(void *arg, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		entropy_state = entropy_state * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(entropy_state >> 56);
	}
}

/* ---- session management through a mailbox ---- */

struct sm_dgram {
	size_t len;
	uint8_t buf[URPC_SM_PKT_MAX];
};

static struct sm_dgram mailbox[MAILBOX];
static unsigned mb_head, mb_count;
static struct sockaddr_in nx_addr, stranger_addr;

/* The Nexus sends: datagrams to itself are delivered later, others vanish. */
static int sm_send(void *arg, struct urpc_nexus *from, const struct sockaddr_in *to,
		   const uint8_t *buf, size_t len)
{
	struct sm_dgram *d;

	if (to->sin_addr.s_addr != nx_addr.sin_addr.s_addr || to->sin_port != nx_addr.sin_port)
		return 0;
	if (mb_count == MAILBOX || len > URPC_SM_PKT_MAX)
		return 0; /* a lossy network: SM requests are retried */
	d = &mailbox[(mb_head + mb_count++) % MAILBOX];
	memcpy(d->buf, buf, len);
	d->len = len;
	return 0;
}

/* ---- the world ---- */

struct call {
	bool busy;
	struct urpc_msgbuf req, resp;
};

static struct world {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int cli_sess;	   /* the client's session number */
	uint32_t srv_sess; /* the server's number of the same session */
	uint64_t token;
	struct urpc_msgbuf srv_expose, cli_expose;
	struct call calls[MAX_CALLS];
	unsigned pending; /* calls whose continuation has not run */
	struct urpc_req_handle *deferred[MAX_DEFERRED];
	unsigned ndeferred;
	int connected;	 /* the client's sm_handler saw CONNECTED (1) or a failure (-1) */
	bool in_enqueue; /* inside urpc_req_enqueue(): no continuation may run */
	bool up;
	unsigned long rebuilds, reconnects;
} w;

static void deliver_sm(void)
{
	while (mb_count) {
		struct sm_dgram d = mailbox[mb_head];

		mb_head = (mb_head + 1) % MAILBOX;
		mb_count--;
		urpc__nexus_sm_input(w.nx, d.buf, d.len, &nx_addr);
	}
}

static void pump(unsigned passes)
{
	while (passes--) {
		FUZZ_CHECK(urpc_rpc_run_event_loop_once(w.srv) == 0, "server loop");
		deliver_sm();
		FUZZ_CHECK(urpc_rpc_run_event_loop_once(w.cli) == 0, "client loop");
		deliver_sm();
	}
}

/* ---- server handlers ---- */

/*
 * Fill with memset, not a loop: this file is instrumented for coverage,
 * and a per-byte loop over 64 KiB buffers would cost more than the engine.
 */
static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	memset(p, seed, n);
}

/*
 * Copy every byte a handler is given (ASan checks the whole range may be
 * read, in one interceptor call); returns the first one, or 0.
 */
static uint8_t touch(struct urpc_req_handle *h)
{
	static uint8_t scratch[65536];
	size_t len, off;
	const uint8_t *d = urpc_req_data(h, &len);

	int64_t dl = urpc_req_deadline_ms(h);

	FUZZ_CHECK(d || !len, "%zu request bytes at NULL", len);
	/* The client's time left, whatever budget_us a datagram carried: at most 2^32 us. */
	FUZZ_CHECK(dl == URPC_NO_DEADLINE || (dl >= 0 && dl <= 4294968),
		   "urpc_req_deadline_ms() gave %lld", (long long)dl);
	for (off = 0; off < len; off += sizeof(scratch))
		memcpy(scratch, d + off, URPC_MIN(len - off, sizeof(scratch)));
	return len ? d[0] : 0;
}

/* Answer @h with @n bytes: the slot's buffer, or a large one of our own. */
static void answer(struct urpc_req_handle *h, size_t n, uint8_t seed)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);
	struct urpc_msgbuf own;
	int ret;

	if (n <= r->max_data_size) {
		fill(r->buf, n, seed);
		FUZZ_CHECK(urpc_msgbuf_resize(r, n) == 0, "resize to %zu", n);
		ret = urpc_resp_enqueue(h, r);
		FUZZ_CHECK(ret == 0, "resp_enqueue: %s", urpc_strerror(ret));
		return;
	}
	ret = urpc_msgbuf_alloc(urpc_req_rpc(h), n, &own);
	FUZZ_CHECK(ret == 0, "alloc %zu: %s", n, urpc_strerror(ret));
	fill(own.buf, n, seed);
	ret = urpc_resp_enqueue(h, &own);
	FUZZ_CHECK(ret == 0, "resp_enqueue of a large response: %s", urpc_strerror(ret));
}

static void h_echo(struct urpc_req_handle *h, void *arg)
{
	size_t len;
	const uint8_t *d = urpc_req_data(h, &len);
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);
	struct urpc_msgbuf own;
	int ret;

	touch(h);
	if (len <= r->max_data_size) {
		memcpy(r->buf, d, len);
		FUZZ_CHECK(urpc_msgbuf_resize(r, len) == 0, "resize");
		ret = urpc_resp_enqueue(h, r);
	} else {
		ret = urpc_msgbuf_alloc(urpc_req_rpc(h), len, &own);
		FUZZ_CHECK(ret == 0, "alloc %zu: %s", len, urpc_strerror(ret));
		memcpy(own.buf, d, len);
		ret = urpc_resp_enqueue(h, &own);
	}
	FUZZ_CHECK(ret == 0, "echo: resp_enqueue: %s", urpc_strerror(ret));
}

static void h_defer(struct urpc_req_handle *h, void *arg)
{
	touch(h);
	if (w.ndeferred == MAX_DEFERRED) {
		answer(h, 1, 0);
		return;
	}
	w.deferred[w.ndeferred++] = h;
}

static void h_large(struct urpc_req_handle *h, void *arg)
{
	size_t max = urpc_rpc_max_msg_size(urpc_req_rpc(h));

	answer(h, max + 1 + (size_t)touch(h) * 97, 0x4c);
}

static void h_copy(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf own;
	size_t n = touch(h) % 200;
	int ret = urpc_msgbuf_alloc(urpc_req_rpc(h), 256, &own);

	FUZZ_CHECK(ret == 0, "alloc: %s", urpc_strerror(ret));
	fill(own.buf, n, 0xc0);
	FUZZ_CHECK(urpc_msgbuf_resize(&own, n) == 0, "resize");
	ret = urpc_resp_enqueue(h, &own);
	FUZZ_CHECK(ret == 0, "copy: resp_enqueue: %s", urpc_strerror(ret));
}

/* Answer every deferred request with @n bytes. */
static void answer_deferred(size_t n)
{
	while (w.ndeferred)
		answer(w.deferred[--w.ndeferred], n, 0xde);
}

/* ---- client side ---- */

static struct urpc_session *rx_session(struct urpc_rpc *rpc);
static struct urpc_session *cli_session(void);

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	FUZZ_CHECK(!w.in_enqueue, "a continuation ran inside urpc_req_enqueue()");
	FUZZ_CHECK(c->busy, "a continuation ran twice (call %td)", c - w.calls);
	FUZZ_CHECK(resp == &c->resp, "the continuation got another response buffer");
	/* 0 or -errno; a peer's error code passes through (a 16-bit field). */
	FUZZ_CHECK(status <= 0 && status >= -65535, "status %d", status);
	if (!status)
		FUZZ_CHECK(resp->data_size <= resp->max_data_size, "%zu bytes in a %zu-byte buffer",
			   resp->data_size, resp->max_data_size);
	c->busy = false;
	w.pending--;
	FUZZ_CHECK(urpc_msgbuf_free(rpc, &c->req) == 0, "free the request");
	FUZZ_CHECK(urpc_msgbuf_free(rpc, &c->resp) == 0, "free the response");
}

static void sm_event(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
		     void *arg)
{
	w.connected = ev == URPC_SM_CONNECTED ? 1 : -1;
}

static void enqueue(uint8_t type, size_t size, size_t resp_size, uint32_t timeout_ms)
{
	struct call *c = NULL;
	unsigned i;
	int ret;

	for (i = 0; i < MAX_CALLS && !c; i++)
		if (!w.calls[i].busy)
			c = &w.calls[i];
	if (!c)
		return;
	FUZZ_CHECK(urpc_msgbuf_alloc(w.cli, size ? size : 1, &c->req) == 0, "alloc req");
	FUZZ_CHECK(urpc_msgbuf_alloc(w.cli, resp_size, &c->resp) == 0, "alloc resp");
	FUZZ_CHECK(urpc_msgbuf_resize(&c->req, size) == 0, "resize req");
	fill(c->req.buf, size, type);
	c->busy = true;
	w.pending++;
	w.in_enqueue = true;
	ret = urpc_req_enqueue(w.cli, w.cli_sess, type, &c->req, &c->resp, cont, c, timeout_ms);
	w.in_enqueue = false;
	if (ret) {
		c->busy = false;
		w.pending--;
		/*
		 * Refused (a full wait queue, a session failed or gone, its number
		 * taken by a server session a forged CONNECT_REQ opened on the
		 * client's Rpc): it never runs.
		 */
		FUZZ_CHECK(ret == -EAGAIN || ret == -ECONNRESET ||
				   (ret == -EINVAL && !cli_session()),
			   "enqueue: %s", urpc_strerror(ret));
		urpc_msgbuf_free(w.cli, &c->req);
		urpc_msgbuf_free(w.cli, &c->resp);
	}
}

/* ---- building and tearing down the world ---- */

/* The grant behind the descriptors of each side's exposed buffer (one at a time). */
static struct urpc_tp_grant srv_grant, cli_grant;

/*
 * Grant the session's peer READ of @n bytes at @off of @owner's exposed
 * buffer @x, as a large message would be; the key, or 0 without a session.
 */
static uint64_t expose_grant(struct urpc_rpc *owner, const struct urpc_msgbuf *x, uint64_t off,
			     uint64_t n)
{
	struct urpc_tp_grant *g = owner == w.cli ? &cli_grant : &srv_grant;
	struct urpc_session *s =
		urpc__rpc_session(owner, owner == w.cli ? w.cli_sess : (int)w.srv_sess);

	if (g->key)
		owner->tp->ops->revoke(owner->tp, g);
	if (!s || !s->peer ||
	    owner->tp->ops->grant(owner->tp, s->peer, urpc__mb_mr(x), x->buf + off, (size_t)n,
				  URPC_TP_ACCESS_REMOTE_READ, g))
		g->key = 0;
	return g->key;
}

static void world_down(void)
{
	int ret;

	answer_deferred(0);
	if (srv_grant.key)
		w.srv->tp->ops->revoke(w.srv->tp, &srv_grant);
	if (cli_grant.key)
		w.cli->tp->ops->revoke(w.cli->tp, &cli_grant);
	urpc_msgbuf_free(w.srv, &w.srv_expose);
	urpc_msgbuf_free(w.cli, &w.cli_expose);
	ret = urpc_rpc_destroy(w.cli);
	FUZZ_CHECK(ret == 0, "destroy the client: %s", urpc_strerror(ret));
	FUZZ_CHECK(w.pending == 0, "%u continuations did not run at destroy", w.pending);
	ret = urpc_rpc_destroy(w.srv);
	FUZZ_CHECK(ret == 0, "destroy the server: %s", urpc_strerror(ret));
	deliver_sm(); /* to Rpcs that are gone: answered or dropped by the Nexus */
	mb_count = 0;
	w.srv = w.cli = NULL;
	w.ndeferred = 0;
	w.up = false;
}

/* Open a client session to the server; false when it does not connect. */
static bool session_up(void)
{
	struct urpc_session_info info;
	char addr[64];
	int ret, i;

	snprintf(addr, sizeof(addr), "%s:%u", NX_HOST, NX_PORT);
	w.connected = 0;
	ret = urpc_session_connect(w.cli, addr, SRV_ID, &w.cli_sess);
	FUZZ_CHECK(ret == 0, "connect: %s", urpc_strerror(ret));
	for (i = 0; i < 100 && !w.connected; i++)
		pump(1);
	if (w.connected != 1 || urpc__rpc_session_info(w.cli, w.cli_sess, &info))
		return false;
	w.srv_sess = info.remote_num;
	w.token = info.token;
	return true;
}

static void world_up(void)
{
	struct urpc_rpc_opts o;
	int ret;

	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.seed = 42;
	o.idle_block_us = 0;
	/* No heartbeat within any run: time moves only as inputs say. */
	o.ping_interval_ms = 1u << 31;
	o.peer_timeout_ms = UINT32_MAX;
	o.max_sessions = 8;
	ret = urpc_rpc_create(w.nx, SRV_ID, &o, &w.srv);
	FUZZ_CHECK(ret == 0, "create the server: %s", urpc_strerror(ret));
	o.sm_handler = sm_event;
	ret = urpc_rpc_create(w.nx, CLI_ID, &o, &w.cli);
	FUZZ_CHECK(ret == 0, "create the client: %s", urpc_strerror(ret));
	FUZZ_CHECK(session_up(), "a fresh session did not connect");

	FUZZ_CHECK(urpc_msgbuf_alloc(w.srv, EXPOSE_LEN, &w.srv_expose) == 0, "alloc");
	FUZZ_CHECK(urpc_msgbuf_alloc(w.cli, EXPOSE_LEN, &w.cli_expose) == 0, "alloc");
	fill(w.srv_expose.buf, EXPOSE_LEN, 0x11);
	fill(w.cli_expose.buf, EXPOSE_LEN, 0x22);
	w.up = true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct urpc_seams seams = {
		.clock = fuzz_clock,
		.entropy = fuzz_entropy,
	};
	struct urpc_sm_net net = {.send = sm_send};
	int ret;

	urpc_log_set_level(URPC_LOG_ERR);
	urpc__seams_set(&seams);
	memset(&nx_addr, 0, sizeof(nx_addr));
	nx_addr.sin_family = AF_INET;
	nx_addr.sin_port = htons(NX_PORT);
	inet_pton(AF_INET, NX_HOST, &nx_addr.sin_addr);
	stranger_addr = nx_addr;
	stranger_addr.sin_port = htons(NX_PORT + 1);
	ret = urpc__nexus_create_sim(NX_HOST, NX_PORT, &net, &w.nx);
	FUZZ_CHECK(ret == 0, "create the Nexus: %s", urpc_strerror(ret));
	FUZZ_CHECK(urpc_nexus_register_handler(w.nx, DP_T_ECHO, h_echo, NULL) == 0, "handler");
	FUZZ_CHECK(urpc_nexus_register_handler(w.nx, DP_T_DEFER, h_defer, NULL) == 0, "handler");
	FUZZ_CHECK(urpc_nexus_register_handler(w.nx, DP_T_LARGE, h_large, NULL) == 0, "handler");
	FUZZ_CHECK(urpc_nexus_register_handler(w.nx, DP_T_COPY, h_copy, NULL) == 0, "handler");
	return 0;
}

/* ---- commands ---- */

/* The client's session, while it lives (its number may then serve another). */
static struct urpc_session *cli_session(void)
{
	struct urpc_session *s = rx_session(w.cli);

	return s && s->role == URPC_ROLE_CLIENT ? s : NULL;
}

/* The live session as the receiver @rpc knows it, or NULL once it is gone. */
static struct urpc_session *rx_session(struct urpc_rpc *rpc)
{
	uint32_t num = rpc == w.srv ? w.srv_sess : (uint32_t)w.cli_sess;

	return num < rpc->hi_session ? urpc__sess_at(rpc, num) : NULL;
}

/* A datagram for @rpc's urpc__evloop_rx, patched as the command asks. */
static void cmd_pkt(struct urpc_rpc *rpc, struct fz_in *in)
{
	uint8_t patch = fz_u8(in), sel = fz_u8(in);
	size_t want = fz_u16(in), got, len;
	const uint8_t *src = fz_bytes(in, want, &got);
	const size_t hl = sizeof(struct urpc_pkthdr);
	struct urpc_session *s = rx_session(rpc);
	struct urpc_pkthdr h;
	uint8_t *d;

	len = got;
	if (patch & DP_P_DESC)
		len = hl + sizeof(struct urpc_large_desc);
	if (len > rpc->tp->mtu)
		len = rpc->tp->mtu; /* no transport delivers more */
	d = calloc(1, len ? len : 1);
	FUZZ_CHECK(d, "out of memory");
	memcpy(d, src, got < len ? got : len);
	if (len >= hl) {
		memcpy(&h, d, hl);
		if (patch & DP_P_HDR) {
			h.magic = htole16(URPC_PKT_MAGIC);
			h.version = URPC_PKT_VERSION;
			h.pkt_type = rpc == w.srv ? URPC_PKT_REQ : URPC_PKT_RESP;
		}
		if ((patch & DP_P_SESS) && s) {
			h.dest_session = htole32(s->local_num);
			h.token = htole64(s->token);
		}
		if (patch & DP_P_SIZE)
			h.msg_size = htole32((uint32_t)(len - hl));
		if ((patch & DP_P_REQ) && s) {
			uint64_t win = urpc__sess_window(s);
			uint64_t cur = s->role == URPC_ROLE_CLIENT
					       ? s->cli.slots[sel & s->slot_mask].cur_req_num
					       : s->srv.slots[sel & s->slot_mask].cur_req_num;
			uint64_t ahead = win * (uint64_t)(1 + (sel >> 5));
			static const int rel[3] = {0, 1, -1};
			unsigned r = (sel >> 3) & 3;

			h.req_num = htole64(r < 3 ? cur + (uint64_t)(rel[r] * (int64_t)win)
						  : cur + ahead);
		}
		if (patch & DP_P_TYPE)
			h.req_type %= DP_NTYPES;
		if (patch & DP_P_CLEAR_FLAGS)
			h.flags = 0;
		if ((patch & DP_P_DESC) && len == hl + sizeof(struct urpc_large_desc)) {
			/* A piece of the other side's exposed buffer. */
			const struct urpc_msgbuf *x = rpc == w.srv ? &w.cli_expose : &w.srv_expose;
			struct urpc_large_desc desc;
			uint64_t off, n;

			memcpy(&desc, d + hl, sizeof(desc));
			off = le64toh(desc.addr) % EXPOSE_LEN;
			n = 1 + le64toh(desc.len) % (EXPOSE_LEN - off);
			desc.addr = htole64((uint64_t)(uintptr_t)x->buf + off);
			desc.len = htole64(n);
			desc.key = htole64(expose_grant(rpc == w.srv ? w.cli : w.srv, x, off, n));
			memcpy(d + hl, &desc, sizeof(desc));
			h.flags = URPC_PKT_F_LARGE;
			h.msg_size = htole32((uint32_t)sizeof(desc));
		}
		memcpy(d, &h, hl);
	}
	/* One pass's receive step, as loop_once() runs it. */
	rpc->now = urpc__now_ns();
	rpc->in_loop = true;
	urpc__evloop_rx(rpc, d, (uint32_t)len);
	rpc->in_loop = false;
	free(d);
}

/* An SM datagram for the Nexus, patched per the wire layout of sm.c. */
static void cmd_sm(struct fz_in *in)
{
	uint8_t patch = fz_u8(in), sel = fz_u8(in);
	size_t want = fz_u8(in), got, len;
	const uint8_t *src = fz_bytes(in, want, &got);
	uint8_t d[256 + URPC_TP_EP_MAX]; /* up to 255 input bytes, or a header + an endpoint */
	struct urpc_tp *tp = NULL;
	uint8_t *copy;

	memset(d, 0, sizeof(d));
	memcpy(d, src, got);
	len = got;
	if (patch & DP_S_HDR) {
		d[0] = 0x53; /* magic "SM", little-endian */
		d[1] = 0x4d;
		d[2] = 4;		/* version */
		d[5] = d[6] = d[7] = 0; /* status: 0 to 255 */
		d[11] = 0;		/* window: 0 (8) */
	}
	if (patch & DP_S_TYPE)
		d[3] = (uint8_t)(URPC_SM_PKT_CONNECT_REQ + sel % URPC_SM_PKT_WIRE_MAX);
	if (patch & DP_S_IDS) {
		d[8] = CLI_ID;
		d[9] = SRV_ID;
		fz_put_le32(d + 12, (uint32_t)w.cli_sess);
		fz_put_le32(d + 16, w.srv_sess);
		fz_put_le64(d + 20, w.token);
	}
	if (patch & DP_S_EP) {
		/* Requests and client control come from the client's side. */
		tp = urpc__sm_pkt_to_server((enum urpc_sm_pkt_type)d[3]) ? w.cli->tp : w.srv->tp;
		d[10] = (uint8_t)URPC_TRANSPORT_LOOP;
		d[40] = (uint8_t)tp->ops->get_endpoint(tp, d + URPC_SM_HDR_LEN);
		d[41] = 0;
	}
	if (patch & DP_S_COOKIE)
		fz_put_le64(d + 62,
			    urpc__nexus_cookie(w.nx, (patch & DP_S_FROM_NEXUS) ? &nx_addr
									       : &stranger_addr));
	if (patch & (DP_S_LEN | DP_S_EP))
		len = URPC_SM_HDR_LEN + (d[40] | (size_t)d[41] << 8) % (URPC_TP_EP_MAX + 1);
	/* From the Nexus itself: signed as it signs (nexus_auth.h), so that it reaches the Rpcs. */
	if (patch & DP_S_FROM_NEXUS)
		urpc__nexus_sign_as_peer(w.nx, &nx_addr, d, len);
	copy = malloc(len ? len : 1);
	FUZZ_CHECK(copy, "out of memory");
	memcpy(copy, d, len);
	urpc__nexus_sm_input(w.nx, copy, len,
			     (patch & DP_S_FROM_NEXUS) ? &nx_addr : &stranger_addr);
	free(copy);
}

static void run_cmd(struct fz_in *in)
{
	uint8_t op = fz_u8(in) % DP_NCMD;

	switch (op) {
	case DP_SRV_PKT:
		cmd_pkt(w.srv, in);
		break;
	case DP_CLI_PKT:
		cmd_pkt(w.cli, in);
		break;
	case DP_ENQUEUE: {
		uint8_t type = fz_u8(in);
		size_t size = fz_u16(in), resp = 1 + (size_t)fz_u16(in);

		enqueue(type, size, resp, 1 + fz_u8(in));
		break;
	}
	case DP_PUMP:
		pump(1 + fz_u8(in) % 8);
		break;
	case DP_ADVANCE:
		vclock += (uint64_t)fz_u8(in) * 1000000ull;
		break;
	case DP_ANSWER:
		answer_deferred(fz_u16(in));
		break;
	case DP_SM:
		cmd_sm(in);
		break;
	case DP_DISCONNECT:
		/* -EINVAL once it is already disconnecting: fine. */
		urpc_session_disconnect(w.cli, w.cli_sess);
		break;
	}
}

/*
 * The engine's bookkeeping checked against itself (urpc__rpc_check: slot
 * masks, busy bitmap, deferred counts, the one-sided table, the session
 * count), and the continuations the client still owes against ours.
 */
static void check_books(void)
{
	uint64_t owed_srv, owed_cli;
	char why[256];

	FUZZ_CHECK(urpc__rpc_check(w.srv, &owed_srv, why, sizeof(why)) == 0, "server: %s", why);
	FUZZ_CHECK(urpc__rpc_check(w.cli, &owed_cli, why, sizeof(why)) == 0, "client: %s", why);
	FUZZ_CHECK(owed_cli == w.pending && owed_srv == 0,
		   "the client owes %llu continuations (the server %llu), %u are pending",
		   (unsigned long long)owed_cli, (unsigned long long)owed_srv, w.pending);
}

static bool smq_empty(const struct urpc_rpc *rpc)
{
	return atomic_load(&rpc->smq->head) == atomic_load(&rpc->smq->tail);
}

/*
 * Nothing in flight: no request, deferred answer, one-sided read, datagram
 * or SM packet on its way, and the client's session not half-way through a
 * connect or disconnect.
 */
static bool quiet(void)
{
	struct urpc_session *cs = cli_session();

	return !w.pending && !w.ndeferred && !w.srv->os_busy && !w.cli->os_busy && !mb_count &&
	       !w.srv->ntx && !w.cli->ntx && smq_empty(w.srv) && smq_empty(w.cli) &&
	       !w.srv->have_pending && !w.cli->have_pending &&
	       (!cs || (cs->state != URPC_SESS_CONNECTING && cs->state != URPC_SESS_DISCONNECTING));
}

/* One client session, connected, and its server side connected too. */
static bool healthy(void)
{
	struct urpc_session *cs = cli_session(), *ss = rx_session(w.srv);

	return cs && ss && cs->state == URPC_SESS_CONNECTED && ss->state == URPC_SESS_CONNECTED &&
	       ss->token == cs->token && ss->remote_num == cs->local_num &&
	       cs->remote_num == ss->local_num && w.cli->st.sessions == 1;
}

/*
 * Ask Rpc @rpc, as the client of its server session @ss would, to drop it
 * (the client's Rpc too may serve: a forged CONNECT_REQ can name it).
 */
static void drop_server_session(const struct urpc_rpc *rpc, const struct urpc_session *ss)
{
	struct urpc_sm_pkt p;
	uint8_t buf[URPC_SM_PKT_MAX];
	size_t n;

	memset(&p, 0, sizeof(p));
	p.type = URPC_SM_PKT_DISCONNECT_REQ;
	p.client_rpc_id = ss->remote_rpc_id;
	p.server_rpc_id = rpc->id;
	p.transport = (uint8_t)URPC_TRANSPORT_LOOP;
	p.client_sess = ss->remote_num;
	p.server_sess = ss->local_num;
	p.token = ss->token;
	n = urpc__sm_encode(&p, buf);
	urpc__nexus_sign_as_peer(w.nx, &nx_addr, buf, n);
	urpc__nexus_sm_input(w.nx, buf, n, &nx_addr);
}

/*
 * The input broke the session (a disconnect, a reset, a forged SM packet, a
 * request stuck on a server session that is gone): close what is left of it
 * on both sides (its requests fail) and open a new one, keeping the Rpcs,
 * which is much cheaper than new ones (their memory pools stay warm). False
 * when that did not give a healthy, quiet world.
 */
static bool reconnect(void)
{
	struct urpc_session *cs = cli_session();
	uint32_t i;

	answer_deferred(0);
	if (cs && cs->state != URPC_SESS_DISCONNECTING && cs->state != URPC_SESS_DISCONNECTED)
		urpc_session_disconnect(w.cli, w.cli_sess);
	/* A lost DISCONNECT_RESP ends with the disconnect's time-out. */
	for (i = 0; i < 100 && (cli_session() || !quiet()); i++) {
		pump(1);
		answer_deferred(0);
		vclock += 50000000ull;
	}
	if (cli_session() || !quiet())
		return false;
	/* Server sessions left without a client (a reset or forged connect). */
	for (i = 0; i < w.srv->hi_session; i++)
		if (urpc__sess_at(w.srv, i) && w.srv->sessions[i]->state == URPC_SESS_CONNECTED)
			drop_server_session(w.srv, w.srv->sessions[i]);
	for (i = 0; i < w.cli->hi_session; i++)
		if (urpc__sess_at(w.cli, i) && w.cli->sessions[i]->role == URPC_ROLE_SERVER &&
		    w.cli->sessions[i]->state == URPC_SESS_CONNECTED)
			drop_server_session(w.cli, w.cli->sessions[i]);
	pump(2);
	if (w.srv->st.sessions || w.cli->st.sessions || !quiet())
		return false;
	return session_up() && healthy();
}

/* FUZZ_VERBOSE=1: what an input did, to see how far a seed reaches. */
static void report(const char *when)
{
	static int verbose = -1;
	struct urpc_rpc_stats s, c;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!verbose || !w.up)
		return;
	urpc_rpc_get_stats(w.srv, &s);
	urpc_rpc_get_stats(w.cli, &c);
	fprintf(stderr,
		"%s: server handled %llu dup %llu stale %llu bad_hdr %llu bad_sess %llu "
		"unknown %llu acks %llu | client sent %llu resps %llu dup %llu stale %llu "
		"retx %llu acks %llu resets %llu | rebuilds %lu reconnects %lu | pending %u deferred %u os %u/%u "
		"mail %u cli_sess %d srv_sess %d hi %u/%u\n",
		when, (unsigned long long)s.reqs_handled, (unsigned long long)s.dup_reqs,
		(unsigned long long)s.drop_stale, (unsigned long long)s.drop_bad_hdr,
		(unsigned long long)s.drop_bad_session, (unsigned long long)s.unknown_req_type,
		(unsigned long long)s.acks_sent, (unsigned long long)c.reqs_sent,
		(unsigned long long)c.resps_rx, (unsigned long long)c.dup_resps,
		(unsigned long long)c.drop_stale, (unsigned long long)c.retransmits,
		(unsigned long long)c.acks_rx, (unsigned long long)c.resets, w.rebuilds,
		w.reconnects, w.pending, w.ndeferred, w.srv->os_busy, w.cli->os_busy, mb_count,
		rx_session(w.cli) ? (int)rx_session(w.cli)->state : -1,
		rx_session(w.srv) ? (int)rx_session(w.srv)->state : -1, w.cli->hi_session,
		w.srv->hi_session);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {data, size};
	unsigned pass;

	if (!w.up)
		world_up();
	while (in.n) {
		run_cmd(&in);
		check_books();
	}

	/* Run until every request has completed (deadlines bound the wait). */
	for (pass = 0; pass < SETTLE_PASSES; pass++) {
		answer_deferred(0);
		if (quiet())
			break;
		pump(1);
		vclock += SETTLE_STEP_NS;
	}
	check_books();
	report(!quiet() ? "stuck" : healthy() ? "kept" : "broken");
	if (quiet() && healthy())
		return 0;
	if (reconnect()) {
		check_books();
		w.reconnects++;
		return 0;
	}
	report("rebuild");
	world_down();
	w.rebuilds++;
	return 0;
}
