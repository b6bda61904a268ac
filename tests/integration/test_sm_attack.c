/* SPDX-License-Identifier: MIT */
/*
 * Session management under attack, on the udp transport (issue 11, items 4
 * and 5), with crafted datagrams from plain UDP sockets:
 *
 * - a flood of 100,000 forged CONNECT_REQs (random tokens, sessions, Rpc
 *   ids, cookies and endpoints, from eight source ports on another address)
 *   opens no session, resets none, and a legitimate client that starts to
 *   connect in the middle of it is connected within 1 s;
 * - the reflection ratio: every answer to an unauthenticated datagram (all
 *   types, random fields, wrong cookies, garbage) is no longer than it;
 * - a session cannot be pointed at a third address: a CONNECT_REQ whose
 *   endpoint is not on its source host is refused with -EADDRNOTAVAIL, and nothing
 *   reaches the address it named;
 * - nor at another port of the client's host (issue 31, item 4): the
 *   server sends nothing to a session's endpoint until a datagram with its
 *   token came from it;
 * - a client process gets one cookie per server Nexus, not one per session;
 * - limits refuse with -ENOSPC and reset nobody: the per-source limit
 *   (max_sessions_per_source) holds one address to its share and lets
 *   another connect; a freed session gives its source room again.
 *
 * 127.0.0.1 is the legitimate side, 127.0.0.2 the attacker (all of 127/8
 * is loopback on Linux). Waits are bounded; the figures are printed.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "nexus/nexus.h"
#include "nexus/sm.h"
#include "nexus/sm_cookie.h"
#include "rpc/engine.h"
#include "util/rand.h"
#include "util/seam.h"

#define GOOD_HOST "127.0.0.1"
#define EVIL_HOST "127.0.0.2"
#define THIRD_HOST "127.0.0.3"
#define SRV_ID 1
#define CLI_ID 2
#define T_ECHO 1
#define WAIT_NS 10000000000ull /* any single wait; far beyond what it waits for */
#define FLOOD_N 100000
#define FLOOD_SOCKS 8
#define MAX_SESS 64

struct side {
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	unsigned connected, failed, other;
	int last_status;
	int fail_status[MAX_SESS];
};

/* The server; a client; a second client process; a client on the attacker's address. */
static struct side S, C, L, E;
static uint32_t crafted_sess; /* the server session of the last crafted_connect() */
static char srv_hp[64];

static uint64_t now_ns(void)
{
	return urpc__now_ns();
}

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
	struct side *sd = arg;

	(void)rpc;
	if (ev == URPC_SM_CONNECTED) {
		sd->connected++;
	} else if (ev == URPC_SM_CONNECT_FAILED) {
		sd->failed++;
		sd->last_status = status;
		if (session >= 0 && session < MAX_SESS)
			sd->fail_status[session] = status;
	} else {
		sd->other++; /* RESET or DISCONNECTED: nothing here should cause one */
	}
}

static void side_up(struct side *sd, const char *host, bool server, uint32_t per_source)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;

	memset(sd, 0, sizeof(*sd));
	urpc_nexus_opts_init(&no);
	no.host = host;
	cr_assert_eq(urpc_nexus_create(&no, &sd->nx), 0);
	if (server)
		cr_assert_eq(urpc_nexus_register_handler(sd->nx, T_ECHO, echo, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_UDP;
	o.sm_handler = sm_cb;
	o.sm_arg = sd;
	o.max_sessions = MAX_SESS;
	o.max_sessions_per_source = per_source;
	o.connect_timeout_ms = 5000;
	o.idle_block_us = 0;
	/* Fixed: the per-source buckets of 127.0.0.1 and 127.0.0.2 differ. */
	o.seed = 11;
	cr_assert_eq(urpc_rpc_create(sd->nx, server ? SRV_ID : CLI_ID, &o, &sd->rpc), 0);
	if (server)
		snprintf(srv_hp, sizeof(srv_hp), "%s:%u", host, urpc_nexus_port(sd->nx));
}

static void side_down(struct side *sd)
{
	if (!sd->nx)
		return;
	cr_assert_eq(urpc_rpc_destroy(sd->rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(sd->nx), 0);
	memset(sd, 0, sizeof(*sd));
}

static void pump(void)
{
	urpc_rpc_run_event_loop_once(S.rpc);
	if (C.rpc)
		urpc_rpc_run_event_loop_once(C.rpc);
	if (L.rpc)
		urpc_rpc_run_event_loop_once(L.rpc);
	if (E.rpc)
		urpc_rpc_run_event_loop_once(E.rpc);
}

/* Pump until *@v reaches @want or WAIT_NS passes; true when it did. */
static bool pump_until(const unsigned *v, unsigned want)
{
	uint64_t end = now_ns() + WAIT_NS;

	while (*v < want && now_ns() < end)
		pump();
	return *v >= want;
}

static uint64_t server_sessions(void)
{
	struct urpc_rpc_stats st;

	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	return st.sessions;
}

static unsigned echo_done;
static int echo_status;

static void echo_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	echo_status = status;
	echo_done++;
}

/* One echo RPC on @sd's session @sess; returns its status. */
static int echo_once(struct side *sd, int sess)
{
	struct urpc_msgbuf req, resp;
	unsigned want = echo_done + 1;

	cr_assert_eq(urpc_msgbuf_alloc(sd->rpc, 32, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(sd->rpc, 32, &resp), 0);
	memset(req.buf, 0x5a, 32);
	cr_assert_eq(urpc_req_enqueue(sd->rpc, sess, T_ECHO, &req, &resp, echo_cont, NULL, 0), 0);
	cr_assert(pump_until(&echo_done, want), "the echo never completed");
	cr_assert_eq(urpc_msgbuf_free(sd->rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(sd->rpc, &resp), 0);
	return echo_status;
}

static struct sockaddr_in sa_of(const char *host, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	cr_assert_eq(inet_pton(AF_INET, host, &a.sin_addr), 1);
	return a;
}

/* A non-blocking UDP socket bound to @host on a free port; its address in *@a. */
static int sock_on(const char *host, struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), big = 4 << 20;

	cr_assert_geq(fd, 0);
	*a = sa_of(host, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)a, &len), 0);
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return fd;
}

static struct sockaddr_in srv_addr(void)
{
	return sa_of(GOOD_HOST, urpc_nexus_port(S.nx));
}

/*
 * A udp endpoint naming @at: the server's own endpoint bytes, with the IPv4
 * address and port (bytes 2..7, see udp_get_endpoint()) replaced.
 */
static uint16_t udp_ep(uint8_t *ep, const struct sockaddr_in *at)
{
	struct urpc_tp *tp = S.rpc->tp;
	size_t n = tp->ops->get_endpoint(tp, ep);

	memcpy(ep + 2, &at->sin_addr.s_addr, 4);
	memcpy(ep + 6, &at->sin_port, 2);
	return (uint16_t)n;
}

/* ---- the flood ---------------------------------------------------------- */

struct flood {
	int fd[FLOOD_SOCKS];
	struct sockaddr_in to;
	_Atomic unsigned sent;
	uint64_t bytes;
	uint64_t t_start, t_end;
};

/* A forged CONNECT_REQ (or, one in 16, something else) of random content. */
static size_t forge(struct urpc_rand *r, uint8_t *buf, const struct sockaddr_in *victim)
{
	struct urpc_sm_pkt p;
	uint16_t i;

	memset(&p, 0, sizeof(p));
	p.type = urpc__rand_below(r, 16) ? URPC_SM_PKT_CONNECT_REQ
					 : (enum urpc_sm_pkt_type)(1 + urpc__rand_below(r, 12));
	p.client_rpc_id = (uint8_t)urpc__rand_next(r);
	p.server_rpc_id = urpc__rand_below(r, 8) ? SRV_ID : (uint8_t)urpc__rand_next(r);
	p.transport =
		urpc__rand_below(r, 8) ? (uint8_t)URPC_TRANSPORT_UDP : (uint8_t)urpc__rand_next(r);
	p.client_sess = (uint32_t)urpc__rand_next(r);
	p.server_sess = (uint32_t)urpc__rand_next(r);
	p.token = urpc__rand_next(r);
	p.seq = urpc__rand_next(r);
	p.max_msg = (uint32_t)urpc__rand_next(r);
	p.nexus_inc = urpc__rand_next(r);
	p.rpc_inc = (uint32_t)urpc__rand_below(r, 4);
	p.cookie = urpc__rand_below(r, 4) ? urpc__rand_next(r) : 0; /* guessed, or none */
	if (urpc__rand_below(r, 2)) {
		p.ep_len = udp_ep(p.ep, victim); /* aimed at a victim's address */
	} else {
		p.ep_len = (uint16_t)urpc__rand_below(r, URPC_TP_EP_MAX + 1);
		for (i = 0; i < p.ep_len; i++)
			p.ep[i] = (uint8_t)urpc__rand_next(r);
	}
	return urpc__sm_encode(&p, buf);
}

static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	struct sockaddr_in victim = sa_of(THIRD_HOST, 9);
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_rand r;
	unsigned i;

	urpc__rand_seed(&r, 0xf100d);
	f->t_start = now_ns();
	for (i = 0; i < FLOOD_N; i++) {
		size_t n = forge(&r, buf, &victim);
		ssize_t w;

		do
			w = sendto(f->fd[i % FLOOD_SOCKS], buf, n, 0, (struct sockaddr *)&f->to,
				   sizeof(f->to));
		while (w < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR));
		if (w == (ssize_t)n)
			f->bytes += n;
		atomic_store_explicit(&f->sent, i + 1, memory_order_release);
	}
	f->t_end = now_ns();
	return NULL;
}

Test(sm_attack, connect_flood_leaves_a_legitimate_client_in, .timeout = 120)
{
	struct urpc_nexus_stats before, after;
	struct flood f;
	struct sockaddr_in a;
	pthread_t th;
	uint64_t t0, t1, idle_ms;
	int victim, late;
	unsigned i;

	side_up(&S, GOOD_HOST, true, 0);
	side_up(&C, GOOD_HOST, false, 0);
	cr_assert_eq(urpc_session_connect(C.rpc, srv_hp, SRV_ID, &victim), 0);
	cr_assert(pump_until(&C.connected, 1), "the first session did not connect");
	cr_assert_eq(echo_once(&C, victim), 0);
	urpc__nexus_get_stats(S.nx, &before);

	memset(&f, 0, sizeof(f));
	for (i = 0; i < FLOOD_SOCKS; i++)
		f.fd[i] = sock_on(EVIL_HOST, &a);
	f.to = srv_addr();
	cr_assert_eq(pthread_create(&th, NULL, flood_thread, &f), 0);

	/*
	 * A new client process (its own Nexus: no cookie yet) connects while a
	 * fifth of the flood is out.
	 */
	while (atomic_load_explicit(&f.sent, memory_order_acquire) < FLOOD_N / 5)
		pump();
	side_up(&L, GOOD_HOST, false, 0);
	t0 = now_ns();
	cr_assert_eq(urpc_session_connect(L.rpc, srv_hp, SRV_ID, &late), 0);
	cr_assert(pump_until(&L.connected, 1), "the client under the flood never connected");
	t1 = now_ns();
	cr_assert_eq(echo_once(&L, late), 0);
	{
		unsigned at = atomic_load_explicit(&f.sent, memory_order_acquire);

		fprintf(stderr,
			"flood: connect under the flood took %.1f ms (%u of %u forged requests "
			"sent when it started, %u when it was done)\n",
			(double)(t1 - t0) / 1e6, FLOOD_N / 5, FLOOD_N, at);
	}
	cr_assert_leq(t1 - t0, 1000000000ull, "connecting took %.1f ms under the flood",
		      (double)(t1 - t0) / 1e6);

	while (atomic_load_explicit(&f.sent, memory_order_acquire) < FLOOD_N)
		pump();
	pthread_join(th, NULL);
	/* The server's SM thread drains what is queued; then it has been idle a while. */
	idle_ms = 0;
	for (uint64_t end = now_ns() + WAIT_NS; now_ns() < end && idle_ms < 50;) {
		struct urpc_nexus_stats s1, s2;

		urpc__nexus_get_stats(S.nx, &s1);
		t0 = now_ns();
		while (now_ns() - t0 < 10000000)
			pump();
		urpc__nexus_get_stats(S.nx, &s2);
		idle_ms = s1.sm_rx == s2.sm_rx ? idle_ms + 10 : 0;
	}
	urpc__nexus_get_stats(S.nx, &after);
	fprintf(stderr,
		"flood: %u forged datagrams (%llu bytes) in %.1f ms; the server received %llu, "
		"answered %llu with a cookie, dropped %llu malformed; sessions %llu\n",
		FLOOD_N, (unsigned long long)f.bytes, (double)(f.t_end - f.t_start) / 1e6,
		(unsigned long long)(after.sm_rx - before.sm_rx),
		(unsigned long long)(after.cookies_tx - before.cookies_tx),
		(unsigned long long)(after.drop_bad_pkt - before.drop_bad_pkt),
		(unsigned long long)server_sessions());

	/* Nothing forged opened a session; the earlier session was not reset. */
	cr_assert_eq(server_sessions(), 2, "only the two clients' sessions are open");
	cr_assert_eq(C.other + L.other, 0, "a session was reset or closed");
	cr_assert_eq(C.failed + L.failed, 0);
	cr_assert_eq(echo_once(&C, victim), 0, "the earlier session still serves");
	cr_assert_eq(echo_once(&L, late), 0);
	for (i = 0; i < FLOOD_SOCKS; i++)
		close(f.fd[i]);
	side_down(&L);
	side_down(&C);
	side_down(&S);
}

/* ---- the cookie's cost -------------------------------------------------- */

/* Session-management packets @rpc has sent so far. */
static uint64_t sm_sent(struct urpc_rpc *rpc)
{
	struct urpc_rpc_stats st;

	cr_assert_eq(urpc_rpc_get_stats(rpc, &st), 0);
	return st.sm_pkts_tx;
}

/* Cookies the server's Nexus has sent so far. */
static uint64_t cookies_sent(void)
{
	struct urpc_nexus_stats st;

	urpc__nexus_get_stats(S.nx, &st);
	return st.cookies_tx;
}

/*
 * The cookies a process's first connect drew: at least one, and no more
 * than the cookie-less CONNECT_REQs it sent (@sent SM packets, one of which
 * carried the cookie). On an idle host exactly one; a host too busy to
 * answer within the client's resend interval (connect_timeout_ms / 4)
 * makes it resend the cookie-less request, and each copy is answered.
 */
static void assert_first_connect_cookies(uint64_t cookies, uint64_t sent, const char *who)
{
	cr_assert_geq(cookies, 1, "%s: its first connect drew no cookie", who);
	cr_assert_leq(cookies, sent - 1,
		      "%s: %llu cookies for %llu cookie-less CONNECT_REQs at most", who,
		      (unsigned long long)cookies, (unsigned long long)(sent - 1));
}

Test(sm_attack, a_process_pays_the_cookie_round_trip_once_per_server, .timeout = 60)
{
	uint64_t t0, start, first, warm, later = 0, c0, c1, c2, c3, tx0, tx1, ltx0, span;
	int s[8];
	unsigned i;

	side_up(&S, GOOD_HOST, true, 0);
	side_up(&C, GOOD_HOST, false, 0);
	c0 = cookies_sent();
	tx0 = sm_sent(C.rpc);
	t0 = start = now_ns();
	cr_assert_eq(urpc_session_connect(C.rpc, srv_hp, SRV_ID, &s[0]), 0);
	cr_assert(pump_until(&C.connected, 1));
	first = now_ns() - t0;
	/*
	 * Every cookie the first connect drew was sent before the server
	 * accepted the session (the server's socket is read in order), so
	 * before the client saw it connected: none of them counts below.
	 */
	c1 = cookies_sent();
	tx1 = sm_sent(C.rpc);
	for (i = 1; i < 8; i++) {
		t0 = now_ns();
		cr_assert_eq(urpc_session_connect(C.rpc, srv_hp, SRV_ID, &s[i]), 0);
		cr_assert(pump_until(&C.connected, i + 1));
		later += now_ns() - t0;
	}
	c2 = cookies_sent();
	span = now_ns() - start; /* the cookie is younger than this */
	/* A second process, once the server is warm: its first connect. */
	side_up(&L, GOOD_HOST, false, 0);
	ltx0 = sm_sent(L.rpc);
	t0 = now_ns();
	cr_assert_eq(urpc_session_connect(L.rpc, srv_hp, SRV_ID, &s[0]), 0);
	cr_assert(pump_until(&L.connected, 1));
	warm = now_ns() - t0;
	c3 = cookies_sent();
	fprintf(stderr,
		"cookie: a process's first connect took %.1f us (the server's first), %.1f us "
		"(a second process, the server warm): two SM round trips; the next 7 of the "
		"first process %.1f us each on average: one\n",
		(double)first / 1e3, (double)warm / 1e3, (double)later / 7e3);
	assert_first_connect_cookies(c1 - c0, tx1 - tx0, "the first process");
	/*
	 * Exact whatever the load while the cookie lives (at least one slot,
	 * sm_cookie.h): a resent request of a process that holds it carries it.
	 * A host so slow that the 7 connects outlived it draws one more per slot.
	 */
	if (span < 1ull << URPC_SM_COOKIE_SLOT_SHIFT)
		cr_assert_eq(c2 - c1, 0,
			     "the next 7 connects of a process that holds a cookie drew %llu",
			     (unsigned long long)(c2 - c1));
	else
		cr_assert_leq(c2 - c1, span >> URPC_SM_COOKIE_SLOT_SHIFT,
			      "%llu cookies in %.1f s for a process that held one",
			      (unsigned long long)(c2 - c1), (double)span / 1e9);
	assert_first_connect_cookies(c3 - c2, sm_sent(L.rpc) - ltx0, "the second process");
	cr_assert_eq(server_sessions(), 9);
	side_down(&L);
	side_down(&C);
	side_down(&S);
}

/* ---- reflection --------------------------------------------------------- */

/* Receive one datagram on @fd into @buf, pumping the Rpcs meanwhile; its length. */
static size_t recv_one(int fd, uint8_t *buf, size_t cap)
{
	uint64_t end = now_ns() + WAIT_NS;

	for (;;) {
		ssize_t n = recv(fd, buf, cap, 0);

		if (n >= 0)
			return (size_t)n;
		cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "recv: %s", strerror(errno));
		cr_assert_lt(now_ns(), end, "no answer within %llu ms",
			     (unsigned long long)(WAIT_NS / 1000000));
		pump();
	}
}

static void send_to_srv(int fd, const uint8_t *buf, size_t n)
{
	struct sockaddr_in to = srv_addr();

	cr_assert_eq(sendto(fd, buf, n, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n);
}

/*
 * Send @n bytes of @buf from @fd, then a marker (a CONNECT_REQ without a
 * cookie, which the SM thread answers after it: nothing unsigned from a
 * stranger reaches an Rpc that would answer it, nexus_auth.h), and return
 * the bytes of every answer before the marker's: what @buf made the server
 * send to its source. *@npkts gets their count.
 */
static size_t answers_to(int fd, const uint8_t *buf, size_t n, uint64_t marker, unsigned *npkts)
{
	uint8_t m[URPC_SM_PKT_MAX], in[2048];
	struct urpc_sm_pkt p;
	size_t total = 0, len;

	memset(&p, 0, sizeof(p));
	p.type = URPC_SM_PKT_CONNECT_REQ;
	p.server_rpc_id = SRV_ID;
	p.client_rpc_id = 200;
	p.token = 1;
	p.seq = marker;
	len = urpc__sm_encode(&p, m);
	send_to_srv(fd, buf, n);
	send_to_srv(fd, m, len);
	*npkts = 0;
	for (;;) {
		size_t got = recv_one(fd, in, sizeof(in));

		if (urpc__sm_decode(in, got, &p) == 0 && p.type == URPC_SM_PKT_CONNECT_COOKIE &&
		    p.seq == marker)
			return total;
		total += got;
		(*npkts)++;
	}
}

/* An unauthenticated datagram of kind @i % 8, random otherwise. */
static size_t stranger(struct urpc_rand *r, unsigned i, uint8_t *buf)
{
	struct urpc_sm_pkt p;
	size_t n, j;

	if (i % 8 == 0) { /* garbage, empty to past the largest SM packet */
		n = (size_t)urpc__rand_below(r, URPC_SM_PKT_MAX + 64);
		for (j = 0; j < n; j++)
			buf[j] = (uint8_t)urpc__rand_next(r);
		return n;
	}
	memset(&p, 0, sizeof(p));
	p.type = (enum urpc_sm_pkt_type)(1 + urpc__rand_below(r, URPC_SM_PKT_WIRE_MAX));
	if (i % 8 == 1)
		p.type = URPC_SM_PKT_CONNECT_REQ; /* the smallest: no endpoint, no cookie */
	if (i % 8 == 2)
		p.type = URPC_SM_PKT_NX_PING;
	p.status = -(int32_t)urpc__rand_below(r, 200);
	p.client_rpc_id = urpc__rand_below(r, 2) ? SRV_ID : (uint8_t)urpc__rand_next(r);
	p.server_rpc_id = urpc__rand_below(r, 2) ? SRV_ID : (uint8_t)urpc__rand_next(r);
	p.transport = (uint8_t)URPC_TRANSPORT_UDP;
	p.client_sess = (uint32_t)urpc__rand_below(r, 4);
	p.server_sess = (uint32_t)urpc__rand_below(r, 4);
	p.token = urpc__rand_next(r);
	p.seq = urpc__rand_next(r) >> 8;
	p.max_msg = 4096;
	p.nexus_inc = urpc__rand_next(r);
	p.nexus_epoch = urpc__rand_below(r, 3);
	p.rpc_inc = (uint32_t)urpc__rand_below(r, 3);
	p.cookie = urpc__rand_below(r, 2) ? urpc__rand_next(r) : 0;
	p.ep_len = (uint16_t)urpc__rand_below(r, URPC_TP_EP_MAX + 1);
	if (i % 8 == 1)
		p.ep_len = 0, p.cookie = 0;
	if (i % 8 == 2)
		p.ep_len = (uint16_t)urpc__rand_below(r, 33); /* a heartbeat, maybe short */
	for (j = 0; j < p.ep_len; j++)
		p.ep[j] = (uint8_t)urpc__rand_next(r);
	return urpc__sm_encode(&p, buf);
}

Test(sm_attack, no_answer_to_a_stranger_is_larger_than_its_datagram, .timeout = 120)
{
	const unsigned n = 4000;
	struct urpc_nexus_stats before, after;
	uint8_t buf[URPC_SM_PKT_MAX + 64];
	uint64_t in = 0, out = 0, answered = 0, replies = 0;
	double worst = 0;
	struct sockaddr_in a;
	struct urpc_rand r;
	unsigned i, k;
	int fd;

	side_up(&S, GOOD_HOST, true, 0);
	fd = sock_on(EVIL_HOST, &a);
	urpc__rand_seed(&r, 0x5eed);
	urpc__nexus_get_stats(S.nx, &before);
	for (i = 0; i < n; i++) {
		size_t len = stranger(&r, i, buf), got;

		got = answers_to(fd, buf, len, 0xa11ce00000000000ull + i, &k);
		cr_assert_leq(got, len, "datagram %u (%zu bytes, type byte %u) drew %zu bytes", i,
			      len, len > 3 ? buf[3] : 0, got);
		in += len;
		out += got;
		replies += k;
		answered += k > 0;
		if (len && (double)got / (double)len > worst)
			worst = (double)got / (double)len;
	}
	urpc__nexus_get_stats(S.nx, &after);
	fprintf(stderr,
		"reflection: %u unauthenticated datagrams, %llu bytes in, %llu bytes out (ratio "
		"%.3f; worst single datagram %.3f); %llu answered\n",
		n, (unsigned long long)in, (unsigned long long)out, (double)out / (double)in, worst,
		(unsigned long long)answered);
	cr_assert_leq(out, in);
	/*
	 * Only CONNECT_REQs are answered (with a cookie): nothing else unsigned
	 * changes or draws anything (nexus_auth.h). The test must see answers.
	 */
	cr_assert_gt(answered, n / 8, "the CONNECT_REQs are answered");
	/* Every send of the Nexus went to us (answers and markers): nothing elsewhere. */
	cr_assert_eq(after.sm_tx - before.sm_tx, replies + n);
	cr_assert_eq(server_sessions(), 0);
	close(fd);
	side_down(&S);
}

/* ---- a session cannot be pointed at a third address --------------------- */

/* A CONNECT_REQ from @fd (at @from) with endpoint @ep_at; the server's CONNECT_RESP status. */
static int crafted_connect(int fd, const struct sockaddr_in *from, const struct sockaddr_in *ep_at,
			   uint64_t token)
{
	uint8_t buf[URPC_SM_PKT_MAX], in[2048];
	struct urpc_sm_pkt p, got;
	uint64_t before, after;
	size_t len, n;

	memset(&p, 0, sizeof(p));
	p.type = URPC_SM_PKT_CONNECT_REQ;
	p.client_rpc_id = 9;
	p.server_rpc_id = SRV_ID;
	p.transport = (uint8_t)URPC_TRANSPORT_UDP;
	p.client_sess = 7;
	p.token = token;
	p.seq = 1;
	p.max_msg = 4096;
	p.ep_len = udp_ep(p.ep, ep_at);
	p.nx_nonce = token * 0x9e3779b97f4a7c15ull | 1; /* its half of the pair's secret */
	/* The exchange a client makes: no cookie, then the one it is given. */
	len = urpc__sm_encode(&p, buf);
	/* The server's clock slot is the one before its answer or the one after. */
	before = urpc__nexus_cookie(S.nx, from);
	send_to_srv(fd, buf, len);
	n = recv_one(fd, in, sizeof(in));
	after = urpc__nexus_cookie(S.nx, from);
	cr_assert_eq(urpc__sm_decode(in, n, &got), 0);
	cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_COOKIE);
	cr_assert(got.cookie == before || got.cookie == after,
		  "the cookie is not the one made for this source address");
	p.cookie = got.cookie;
	len = urpc__sm_encode(&p, buf);
	send_to_srv(fd, buf, len);
	n = recv_one(fd, in, sizeof(in));
	cr_assert_eq(urpc__sm_decode(in, n, &got), 0);
	cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_RESP);
	cr_assert_eq(got.token, token);
	crafted_sess = got.server_sess;
	return got.status;
}

Test(sm_attack, a_session_cannot_be_pointed_at_a_third_address, .timeout = 60)
{
	struct sockaddr_in from, third, own;
	struct urpc_rpc_stats st;
	uint8_t in[2048];
	int fd, vic, own_fd;
	uint64_t end;

	side_up(&S, GOOD_HOST, true, 0);
	fd = sock_on(EVIL_HOST, &from);
	vic = sock_on(THIRD_HOST, &third);
	own_fd = sock_on(EVIL_HOST, &own);

	cr_assert_eq(crafted_connect(fd, &from, &third, 0x7e57), -EADDRNOTAVAIL);
	cr_assert_eq(server_sessions(), 0, "no session for an endpoint on another host");
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.connects_refused, 1);
	/* Its endpoint on the host it connects from (another port): accepted. */
	cr_assert_eq(crafted_connect(fd, &from, &own, 0x7e58), 0);
	cr_assert_eq(server_sessions(), 1);
	/* Nothing went to the third address meanwhile (the server's own sends are done). */
	for (end = now_ns() + 20000000; now_ns() < end;)
		pump();
	cr_assert_eq(recv(vic, in, sizeof(in), 0), -1, "the third address got a datagram");
	cr_assert_eq(errno, EAGAIN);
	close(fd);
	close(vic);
	close(own_fd);
	side_down(&S);
}

/* ---- limits ------------------------------------------------------------- */

static _Atomic unsigned limit_lines;

static void sink(enum urpc_log_level level, const char *line, void *arg)
{
	(void)level, (void)arg;
	if (strstr(line, "max_sessions_per_source") && strstr(line, EVIL_HOST))
		atomic_fetch_add(&limit_lines, 1);
}

Test(sm_attack, per_source_limit_refuses_with_enospc_and_resets_nobody, .timeout = 60)
{
	const unsigned limit = 3, tries = 5;
	int es[5], cs, i;

	urpc_log_set_sink(sink, NULL);
	side_up(&S, GOOD_HOST, true, limit);
	side_up(&E, EVIL_HOST, false, 0);
	side_up(&C, GOOD_HOST, false, 0);
	for (i = 0; i < (int)tries; i++)
		cr_assert_eq(urpc_session_connect(E.rpc, srv_hp, SRV_ID, &es[i]), 0);
	cr_assert(pump_until(&E.failed, tries - limit), "refusals missing");
	cr_assert(pump_until(&E.connected, limit), "sessions within the limit missing");
	cr_assert_eq(E.connected, limit);
	cr_assert_eq(E.last_status, -ENOSPC);
	for (i = 0; i < (int)tries; i++)
		cr_assert(E.fail_status[es[i]] == 0 || E.fail_status[es[i]] == -ENOSPC);
	cr_assert_geq(atomic_load(&limit_lines), 1, "no log line names the limit");

	/* Another address is not held to it; nobody was reset. */
	cr_assert_eq(urpc_session_connect(C.rpc, srv_hp, SRV_ID, &cs), 0);
	cr_assert(pump_until(&C.connected, 1), "the other address could not connect");
	cr_assert_eq(E.other + C.other, 0);
	cr_assert_eq(server_sessions(), limit + 1);
	for (i = 0; i < (int)tries; i++)
		if (!E.fail_status[es[i]])
			cr_assert_eq(echo_once(&E, es[i]), 0);

	/* A session that goes gives its source room again. */
	for (i = 0; E.fail_status[es[i]]; i++)
		;
	cr_assert_eq(urpc_session_disconnect(E.rpc, es[i]), 0);
	{
		uint64_t end = now_ns() + WAIT_NS;

		while (server_sessions() > limit && now_ns() < end)
			pump();
	}
	cr_assert_eq(server_sessions(), limit);
	cr_assert_eq(urpc_session_connect(E.rpc, srv_hp, SRV_ID, &es[0]), 0);
	cr_assert(pump_until(&E.connected, limit + 1), "no room after a disconnect");
	side_down(&C);
	side_down(&E);
	side_down(&S);
	urpc_log_set_sink(NULL, NULL);
}

/* ---- no reflection to another port of the client's host (issue 31, item 4) ---- */

/* The server Rpc's datapath (udp) address, from its endpoint bytes. */
static struct sockaddr_in srv_dp_addr(void)
{
	struct urpc_tp *tp = S.rpc->tp;
	uint8_t ep[URPC_TP_EP_MAX];
	struct sockaddr_in a;

	cr_assert_geq(tp->ops->get_endpoint(tp, ep), 8);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	memcpy(&a.sin_addr.s_addr, ep + 2, 4);
	memcpy(&a.sin_port, ep + 6, 2);
	return a;
}

/*
 * Send on @fd a request datagram of server session @sess with @token (udp
 * DATA framing): @large, a descriptor of 64 MiB at a made-up key, else a
 * 64-byte echo. Returns its length.
 */
static size_t dp_request(int fd, uint32_t sess, uint64_t token, uint64_t req_num, bool large)
{
	struct sockaddr_in to = srv_dp_addr();
	uint8_t pkt[16 + sizeof(struct urpc_pkthdr) + 64];
	struct urpc_large_desc d = {.addr = 1ull << 40, .len = 64ull << 20, .key = 0x5eed};
	struct urpc_pkthdr h;
	uint32_t plen = large ? (uint32_t)sizeof(d) : 64;
	size_t n = 16 + sizeof(h) + plen;

	memset(pkt, 0, sizeof(pkt));
	pkt[0] = 0x55; /* UDP_MAGIC, little-endian */
	pkt[1] = 0x70;
	pkt[2] = 2; /* UDP_VERSION */
	pkt[3] = 1; /* UDP_T_DATA */
	urpc__pkthdr_fill(&h, URPC_PKT_REQ, T_ECHO, 0, plen, sess, req_num, token);
	if (large)
		h.flags = URPC_PKT_F_LARGE;
	memcpy(pkt + 16, &h, sizeof(h));
	if (large)
		memcpy(pkt + 16 + sizeof(h), &d, sizeof(d));
	cr_assert_eq(sendto(fd, pkt, n, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n);
	return n;
}

/* Pump for @ms milliseconds; the datagrams (*@bytes their bytes) that reached @fd. */
static unsigned drain_for(int fd, unsigned ms, uint64_t *bytes)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	uint8_t in[65536];
	unsigned n = 0;
	ssize_t r;

	*bytes = 0;
	while (now_ns() < end) {
		pump();
		while ((r = recv(fd, in, sizeof(in), 0)) >= 0) {
			n++;
			*bytes += (uint64_t)r;
		}
	}
	return n;
}

Test(sm_attack, a_session_naming_another_port_sends_nothing_there_until_it_proves_it, .timeout = 60)
{
	struct sockaddr_in from, vic_a, own_a;
	struct urpc_rpc_stats st;
	int fd, vic, own, legit;
	uint64_t bytes, sent = 0, token = 0x7e5701;
	unsigned got, i;

	side_up(&S, GOOD_HOST, true, 0);
	/*
	 * A legitimate client first: while all its peers share one address and
	 * port, the server's socket is connected to it and the kernel drops
	 * datagrams from any other source (udp.c), which hides the attack.
	 */
	side_up(&C, GOOD_HOST, false, 0);
	cr_assert_eq(urpc_session_connect(C.rpc, srv_hp, SRV_ID, &legit), 0);
	cr_assert(pump_until(&C.connected, 1));
	fd = sock_on(EVIL_HOST, &from);
	vic = sock_on(EVIL_HOST, &vic_a); /* another process's port on the attacker's host */
	own = sock_on(EVIL_HOST, &own_a); /* the attacker's own datapath socket */

	cr_assert_eq(crafted_connect(fd, &from, &vic_a, token), 0);
	/* From its own socket, with the session's token: large and small requests. */
	for (i = 0; i < 8; i++)
		sent += dp_request(own, crafted_sess, token, URPC_SESSION_WINDOW_MAX + i,
				   i % 2 == 0);
	got = drain_for(vic, 300, &bytes);
	printf("reflection: %zu B sent from another port, %u datagrams (%llu B) reached the "
	       "endpoint the session named\n",
	       (size_t)sent, got, (unsigned long long)bytes);
	cr_assert_eq(got, 0, "the server sent %u datagrams (%llu B) to an unproven endpoint", got,
		     (unsigned long long)bytes);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.drop_unproven, 8);
	cr_assert_eq(st.reqs_handled, 0);

	/* A datagram from the endpoint itself proves it: its echo comes back there. */
	dp_request(vic, crafted_sess, token, 2 * URPC_SESSION_WINDOW_MAX + 1, false);
	got = drain_for(vic, 100, &bytes);
	cr_assert_eq(got, 1, "the proven endpoint got %u answers", got);
	cr_assert_eq(bytes, 16 + sizeof(struct urpc_pkthdr) + 64);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.reqs_handled, 1);
	cr_assert_eq(echo_once(&C, legit), 0, "the legitimate client is served");
	close(fd);
	close(vic);
	close(own);
	side_down(&C);
	side_down(&S);
}
