/* SPDX-License-Identifier: MIT */
/*
 * The authenticated control plane on udp (issue 31, item 1): an off-path
 * attacker who forges the source address of a peer's Nexus (a raw socket)
 * sends every kind of SM packet a peer could send: heartbeats with another
 * incarnation (a "restart") or a higher failure count, session pings,
 * disconnects, resets and transport control, signed with a guessed MAC or
 * not signed at all. None may end the victim's session or change what the
 * Nexus believes of its peer; each is counted in drop_auth, and the victim
 * keeps being served throughout (its echo success rate is printed). Before
 * the control plane was signed, the first forged heartbeat made the server
 * declare the client failed and free its session.
 *
 * No half-open session (item 2): a server that frees a session and tells
 * nobody (as a bug, or a limit, would) is found out by its client within a
 * peer time-out, from the session counts the heartbeats carry.
 *
 * Both processes are on 127.0.0.1; the forger needs CAP_NET_RAW (the test
 * skips without it). Waits are bounded by what they wait for.
 */
#define _GNU_SOURCE /* struct mmsghdr in transport/udp_int.h */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "nexus/nexus.h"
#include "nexus/nexus_peer.h"
#include "nexus/sm.h"
#include "rpc/engine.h"
#include "rpc/rpc.h"
#include "rpc/session.h"
#include "rpc/session_src.h"
#include "transport/udp_int.h"
#include "udp_forge.h"
#include "util/rand.h"
#include "util/seam.h"

#define HOST "127.0.0.1"
#define SRV_ID 1
#define CLI_ID 2
#define T_ECHO 1
#define T_BIG 2
#define T_SINK 3
#define T_LATE 4
#define PUT_LEN (1u << 20)
#define BIG_LEN (4u << 20)
#define PING_MS 20
#define TIMEOUT_MS 200	       /* the peer time-out of a case that measures liveness */
#define WAIT_NS 10000000000ull /* any single wait; far beyond what it waits for */
/*
 * The peer time-out of every other case: a peer declared failed there is a
 * false verdict (both processes live), so it needs a silence as long as the
 * longest wait. At load 12 on 2 cores a 20 ms poll() overslept by up to
 * 298 ms (2 of 709 above 180 ms), and 200 ms reset sessions mid-case.
 */
#define QUIET_TIMEOUT_MS ((uint32_t)(WAIT_NS / 1000000))

struct side {
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	unsigned connected, resets;
	enum urpc_sm_event last_ev; /* of the last reset or failure, for messages */
	int last_status;
};

static struct side S, C;

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
static size_t big_len = BIG_LEN;

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
static struct urpc_req_handle *late_h;

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

static void side_up_at(struct side *sd, bool server, const char *host);
/* Options a test may change before side_up(): 0 / -1 keep the defaults. */
static uint32_t opt_os_timeout_ms;
static int opt_per_source = -1;
static uint32_t opt_peer_timeout_ms = QUIET_TIMEOUT_MS;

static void side_up(struct side *sd, bool server)
{
	side_up_at(sd, server, HOST);
}

static void side_up_at(struct side *sd, bool server, const char *host)
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

static void side_down(struct side *sd)
{
	cr_assert_eq(urpc_rpc_destroy(sd->rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(sd->nx), 0);
}

static void pump(void)
{
	urpc_rpc_run_event_loop_once(S.rpc);
	urpc_rpc_run_event_loop_once(C.rpc);
}

static struct sockaddr_in nx_addr(const struct side *sd)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(urpc_nexus_port(sd->nx));
	cr_assert_eq(inet_pton(AF_INET, HOST, &a.sin_addr), 1);
	return a;
}

static unsigned echo_done;
static int echo_status;

static void echo_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	echo_status = status;
	echo_done++;
}

static unsigned echo_errors;
static int echo_last_error;

static void count_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	if (status) {
		echo_errors++;
		echo_last_error = status;
	}
	echo_done++;
}

/* The legitimate request of a flood test alone (the attacker's run count_cont). */
static unsigned legit_done;
static int legit_status;

static void legit_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	legit_status = status;
	legit_done++;
}

/* One echo on session @sess of the client with a deadline; its status (0: served). */
static int echo_once(int sess)
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Forged packet @i: a kind a peer's Nexus or Rpc sends, with fields an
 * off-path attacker can know (Rpc ids, session numbers 0-3) and what it
 * cannot (incarnation, tokens, MAC) guessed. @to_server: for the server.
 */
static size_t forged(struct urpc_rand *r, unsigned i, bool to_server, uint8_t *buf)
{
	static const enum urpc_sm_pkt_type to_srv[] = {
		URPC_SM_PKT_NX_PONG,	    URPC_SM_PKT_NX_PING,    URPC_SM_PKT_PING_REQ,
		URPC_SM_PKT_DISCONNECT_REQ, URPC_SM_PKT_TP_CTL_C2S,
	};
	static const enum urpc_sm_pkt_type to_cli[] = {
		URPC_SM_PKT_NX_PONG,   URPC_SM_PKT_NX_PING,	    URPC_SM_PKT_RESET,
		URPC_SM_PKT_PING_RESP, URPC_SM_PKT_DISCONNECT_RESP, URPC_SM_PKT_TP_CTL_S2C,
	};
	struct urpc_sm_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = to_server ? to_srv[i % URPC_ARRAY_SIZE(to_srv)]
			   : to_cli[i % URPC_ARRAY_SIZE(to_cli)];
	p.status = p.type == URPC_SM_PKT_RESET || p.type == URPC_SM_PKT_PING_RESP ? -ECONNRESET : 0;
	p.client_rpc_id = CLI_ID;
	p.server_rpc_id = SRV_ID;
	p.transport = (uint8_t)URPC_TRANSPORT_UDP;
	p.client_sess = (uint32_t)urpc__rand_below(r, 4);
	p.server_sess = (uint32_t)urpc__rand_below(r, 4);
	p.token = urpc__rand_next(r);
	/* Heartbeats: the count of failures it declared, higher than any so far. */
	p.seq = 1000 + i;
	/* A new incarnation (a "restart"), every other packet; else a guess of the current one. */
	p.nexus_inc = urpc__rand_next(r) | 1;
	p.nexus_epoch = 1000 + i;
	p.rpc_inc = 1000 + i;
	p.nx_nonce = urpc__rand_next(r);
	p.mac = urpc__rand_below(r, 2) ? urpc__rand_next(r) : 0;
	if (p.type == URPC_SM_PKT_NX_PING || p.type == URPC_SM_PKT_NX_PONG)
		p.ep_len = URPC_NXP_RPC_BYTES; /* no Rpc listed: "every Rpc went" */
	return urpc__sm_encode(&p, buf);
}

Test(nx_auth, forged_control_packets_from_a_peers_address_change_nothing, .timeout = 120)
{
	enum { rounds = 200, per_round = 10 };
	uint64_t lat[rounds], base_p99;
	struct urpc_nexus_stats s0, s1, c0, c1;
	struct sockaddr_in s_at, c_at;
	uint8_t buf[URPC_SM_PKT_MAX];
	unsigned i, k, served = 0, to_srv = 0;
	uint64_t worst = 0, t0, t, c_sm0, cli_probes, rx = 0, counted = 0;
	struct urpc_rpc_stats cst;
	struct urpc_rand r;
	int fd, sess, after;

	fd = udp_forge_open();
	if (fd < 0)
		cr_skip_test("no raw socket (CAP_NET_RAW): cannot forge a source address (%s)",
			     strerror(errno));
	side_up(&S, true);
	side_up(&C, false);
	s_at = nx_addr(&S);
	c_at = nx_addr(&C);
	{
		char hp[64];

		snprintf(hp, sizeof(hp), "%s:%u", HOST, urpc_nexus_port(S.nx));
		cr_assert_eq(urpc_session_connect(C.rpc, hp, SRV_ID, &sess), 0);
	}
	for (t0 = urpc__now_ns(); !C.connected && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(C.connected, 1);
	cr_assert_eq(echo_once(sess), 0);
	/* The victim's p99 alone first, then with the forgeries between its echoes. */
	for (i = 0; i < rounds; i++) {
		t = urpc__now_ns();
		cr_assert_eq(echo_once(sess), 0);
		lat[i] = urpc__now_ns() - t;
	}
	qsort(lat, rounds, sizeof(lat[0]), cmp_u64);
	base_p99 = lat[rounds * 99 / 100];
	urpc__nexus_get_stats(S.nx, &s0);
	urpc__nexus_get_stats(C.nx, &c0);
	cr_assert_eq(urpc_rpc_get_stats(C.rpc, &cst), 0);
	c_sm0 = cst.sm_pkts_tx;

	urpc__rand_seed(&r, 0xf0f0);
	for (i = 0; i < rounds; i++) {
		/* The client's Nexus "says" it restarted, failed us, lost its Rpcs... */
		for (k = 0; k < per_round; k++, to_srv++) {
			size_t n = forged(&r, i * per_round + k, true, buf);

			udp_forge_send(fd, &c_at, &s_at, buf, n);
		}
		/* ... and the server's says as much to the client. */
		for (k = 0; k < per_round / 2; k++) {
			size_t n = forged(&r, i * per_round + k, false, buf);

			udp_forge_send(fd, &s_at, &c_at, buf, n);
		}
		t = urpc__now_ns();
		if (echo_once(sess) == 0)
			served++;
		lat[i] = urpc__now_ns() - t;
		worst = URPC_MAX(worst, lat[i]);
	}
	qsort(lat, rounds, sizeof(lat[0]), cmp_u64);
	/*
	 * Until both Nexuses took two heartbeats sent after the last forgery
	 * (a socket is FIFO: every forgery that arrived was handled), the
	 * Rpcs polled meanwhile: what a forgery did would show by now.
	 */
	urpc__nexus_get_stats(S.nx, &s1);
	urpc__nexus_get_stats(C.nx, &c1);
	for (t0 = urpc__now_ns(); urpc__now_ns() - t0 < WAIT_NS;) {
		struct urpc_nexus_stats s2, c2;

		pump();
		urpc__nexus_get_stats(S.nx, &s2);
		urpc__nexus_get_stats(C.nx, &c2);
		if (s2.heartbeats_rx >= s1.heartbeats_rx + 2 &&
		    c2.heartbeats_rx >= c1.heartbeats_rx + 2)
			break;
	}
	after = echo_once(sess);
	cr_assert_eq(urpc_rpc_get_stats(C.rpc, &cst), 0);
	cli_probes = cst.sm_pkts_tx - c_sm0; /* no connect or disconnect meanwhile */
	urpc__nexus_get_stats(S.nx, &s1);
	urpc__nexus_get_stats(C.nx, &c1);
	fprintf(stderr,
		"forged control plane: %u packets from the client's Nexus address, %u from the "
		"server's; victim served %u/%u echoes during, p99 %.3f ms (%.3f ms without "
		"forgeries), slowest %.2f ms; drop_auth server %llu, client %llu\n",
		rounds * per_round, rounds * per_round / 2, served, rounds,
		(double)lat[rounds * 99 / 100] / 1e6, (double)base_p99 / 1e6, (double)worst / 1e6,
		(unsigned long long)(s1.drop_auth - s0.drop_auth),
		(unsigned long long)(c1.drop_auth - c0.drop_auth));
	cr_assert_eq(after, 0, "the victim is no longer served");
	cr_assert_eq(served, rounds, "a forged packet cost the victim an echo");
	cr_assert_eq(C.resets, 0, "the client's session was reset or disconnected");
	cr_assert(urpc_session_is_connected(C.rpc, sess));
	/*
	 * Every forgery that reached the server was refused and counted (none is
	 * an answer it could route): all else it received was the client's
	 * signed heartbeats and the client Rpc's session probes (its sessions
	 * ask after 3 silent ping intervals, 60 ms: on a host at load 12 a
	 * 20 ms sleep overslept by up to 298 ms), each counted on the client's
	 * side when sent (the kernel may lose a sent one in the burst). The
	 * counters are read one after the other while the SM thread runs, and
	 * it counts a datagram in sm_rx before its verdict: they are read again
	 * until it is between two datagrams (a thread descheduled mid-datagram
	 * for a while on a loaded host showed one too many either way).
	 */
	for (t0 = urpc__now_ns(); urpc__now_ns() - t0 < WAIT_NS;) {
		urpc__nexus_get_stats(S.nx, &s1);
		rx = s1.sm_rx - s0.sm_rx;
		counted = (s1.drop_auth - s0.drop_auth) + (s1.heartbeats_rx - s0.heartbeats_rx);
		if (rx >= counted && rx <= counted + cli_probes)
			break;
	}
	cr_assert(rx >= counted && rx <= counted + cli_probes,
		  "a forgery to the server went uncounted: %llu received, %llu refused, "
		  "%llu heartbeats, %llu probes sent",
		  (unsigned long long)rx, (unsigned long long)(s1.drop_auth - s0.drop_auth),
		  (unsigned long long)(s1.heartbeats_rx - s0.heartbeats_rx),
		  (unsigned long long)cli_probes);
	/*
	 * The attack arrived: a burst beyond the socket's buffer loses part of
	 * itself in the kernel (936 of 2,000 counted once on a host at load
	 * 10), so a tenth is the bound; the equation above is the property.
	 */
	cr_assert_geq(s1.drop_auth - s0.drop_auth, to_srv / 10);
	cr_assert_gt(c1.drop_auth - c0.drop_auth, 0);
	/* Heartbeats kept flowing, signed: the peer was heard all along. */
	cr_assert_gt(s1.heartbeats_rx - s0.heartbeats_rx, 0);

	cr_assert_eq(urpc_session_disconnect(C.rpc, sess), 0);
	for (t0 = urpc__now_ns(); C.resets == 0 && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	close(fd);
	side_down(&C);
	side_down(&S);
}

/*
 * Run only @rpc, which has sent nothing before, until @n requests took a
 * slot and as many datagrams left (a request, or a large one's
 * descriptor, is one): a fixed time of its loop sends fewer when the host
 * deschedules it.
 */
static void sent_by(struct urpc_rpc *rpc, uint64_t n)
{
	struct urpc_rpc_stats st;
	uint64_t t0 = urpc__now_ns();

	do {
		urpc_rpc_run_event_loop_once(rpc);
		cr_assert_eq(urpc_rpc_get_stats(rpc, &st), 0);
	} while ((st.reqs_sent < n || st.pkts_tx < n) && urpc__now_ns() - t0 < WAIT_NS);
	cr_assert_eq(st.reqs_sent, n, "sent %llu of %llu requests",
		     (unsigned long long)st.reqs_sent, (unsigned long long)n);
	cr_assert_geq(st.pkts_tx, n);
}

/* Connect the client to the server; the session number. */
static int connect_one(void)
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

Test(nx_auth, a_session_the_server_forgot_is_reset_within_a_peer_timeout, .timeout = 60)
{
	struct urpc_session *ss = NULL;
	uint64_t t0, took;
	uint32_t i;
	int sess;

	opt_peer_timeout_ms = TIMEOUT_MS; /* its bound is a peer time-out */
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(echo_once(sess), 0);
	/* The server frees its session and tells nobody. */
	for (i = 0; i < S.rpc->hi_session && !ss; i++) {
		ss = urpc__rpc_session(S.rpc, (int)i);
		if (ss && ss->role != URPC_ROLE_SERVER)
			ss = NULL;
	}
	cr_assert_not_null(ss);
	urpc__session_transition(S.rpc, ss, URPC_SEV_PEER_CLOSED, 0);
	t0 = urpc__now_ns();
	while (!C.resets && urpc__now_ns() - t0 < WAIT_NS)
		pump();
	took = urpc__now_ns() - t0;
	fprintf(stderr,
		"half-open: the client learnt that the server forgot its session in %.1f ms "
		"(ping %u ms, peer time-out %u ms)\n",
		(double)took / 1e6, PING_MS, TIMEOUT_MS);
	cr_assert_eq(C.resets, 1, "the client session stayed CONNECTED: half-open");
	cr_assert(!urpc_session_is_connected(C.rpc, sess));
	/* Within a peer time-out, with room for a loaded host. */
	cr_assert_lt(took, 3ull * TIMEOUT_MS * 1000000, "%.1f ms", (double)took / 1e6);
	side_down(&C);
	side_down(&S);
}

/* Fair shares by default (item 3): max_sessions sized to memory, a per-source limit on. */
Test(nx_auth, defaults_give_every_source_a_share)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
	struct urpc_rpc_opts o;
	uint64_t mem_sessions;

	urpc_rpc_opts_init(&o);
	cr_assert_leq(o.max_sessions, URPC_RPC_DEFAULT_MAX_SESSIONS);
	cr_assert_geq(o.max_sessions, 4096);
	if (pages > 0 && page > 0) {
		mem_sessions = (uint64_t)pages * (uint64_t)page / 16 / 1280;
		cr_assert_leq(o.max_sessions, URPC_MAX(mem_sessions, 4096ull),
			      "%u sessions would take more than 1/16 of %llu MiB", o.max_sessions,
			      (unsigned long long)((uint64_t)pages * (uint64_t)page >> 20));
	}
	cr_assert_eq(o.max_sessions_per_source, o.max_sessions / 8);
	cr_assert_gt(o.max_sessions_per_source, 0, "the per-source limit is on by default");
	fprintf(stderr, "defaults: max_sessions %u, max_sessions_per_source %u\n", o.max_sessions,
		o.max_sessions_per_source);
}

/*
 * Without a per-source share (max_sessions_per_source 0), a large response
 * its client does not READ (its process stops polling) is revoked after
 * the one-sided time-out and the time its bytes take at
 * URPC_QUOTA_GRANT_RATE, and its memory and grant are given back (item 3):
 * nothing else bounds what it pins. The client, once it runs again, fails
 * that request with -ECONNRESET and keeps its session.
 */
Test(nx_auth, without_a_share_an_unread_large_response_is_revoked_after_its_time, .timeout = 60)
{
	struct urpc_msgbuf req, resp;
	struct urpc_rpc_stats st;
	uint64_t t0, want_ns;
	unsigned want;
	int sess;

	opt_per_source = 0;
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, BIG_LEN, &resp), 0);
	want = echo_done + 1;
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_BIG, &req, &resp, echo_cont, NULL, 0), 0);
	/* The client sends its request, then stops: only the server runs. */
	sent_by(C.rpc, 1);
	t0 = urpc__now_ns();
	while (!S.rpc->grants_live && urpc__now_ns() - t0 < WAIT_NS)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_not_null(S.rpc->grants_live, "the large response was never stored");
	cr_assert_eq(urpc__rpc_transport(S.rpc)->stats.grants_live, 1);
	want_ns = S.rpc->grants_live->expires_ns - S.rpc->now;
	t0 = urpc__now_ns();
	while (S.rpc->grants_live && urpc__now_ns() - t0 < WAIT_NS)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr,
		"grant quota: a %u-byte response unread for %.2f s (allowed %.2f s) was revoked; "
		"grants_expired %llu\n",
		BIG_LEN, (double)(urpc__now_ns() - t0) / 1e9, (double)want_ns / 1e9,
		(unsigned long long)st.grants_expired);
	cr_assert_eq(st.grants_expired, 1);
	cr_assert_null(S.rpc->grants_live);
	cr_assert_eq(urpc__rpc_transport(S.rpc)->stats.grants_live, 0, "the grant still lives");
	/* The client runs again: that request fails, the session serves the next. */
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(echo_done, want);
	cr_assert_eq(echo_status, -ECONNRESET, "status %d", echo_status);
	cr_assert_eq(echo_once(sess), 0);
	cr_assert_eq(C.resets, 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	side_down(&C);
	side_down(&S);
}

/* Run the server alone until a large response is stored; that response. */
static struct urpc_srv_large *stored_alone(void)
{
	uint64_t t0 = urpc__now_ns();

	while (!S.rpc->grants_live && urpc__now_ns() - t0 < WAIT_NS)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_not_null(S.rpc->grants_live, "the large response was never stored");
	return S.rpc->grants_live;
}

/* Run the server alone until its clock is @ns past @l's time (the client starved). */
static void server_past(const struct urpc_srv_large *l, uint64_t ns)
{
	uint64_t until = l->expires_ns + ns, t0 = urpc__now_ns();

	while (S.rpc->now < until && urpc__now_ns() - t0 < WAIT_NS)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_geq(S.rpc->now, until, "the server's clock stood still");
}

struct late_op {
	unsigned done;
	int status;
};

static void late_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct late_op *o = tag;

	(void)rpc, (void)resp;
	o->status = status;
	o->done++;
}

/*
 * With the per-source share on (the default), a client starved of the CPU
 * past its large response's time (the one-sided time-out plus its bytes at
 * URPC_QUOTA_GRANT_RATE) still reads it when it runs again: nothing needed
 * the room, so nothing was revoked. Before, the timer scan revoked it and
 * the request failed with -ECONNRESET although both Rpcs lived (seen as
 * "session ended" in test_threads_loop under ASan beside CPU hogs).
 */
Test(nx_auth, a_client_starved_past_its_time_still_reads_its_large_response, .timeout = 60)
{
	struct urpc_msgbuf req, resp;
	struct urpc_rpc_stats st;
	struct late_op o = {0};
	uint64_t t0;
	size_t i;
	int sess;

	big_len = 64u << 10;
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, big_len, &resp), 0);
	memset(resp.buf, 0, big_len);
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_BIG, &req, &resp, late_cont, &o, 0), 0);
	sent_by(C.rpc, 1);
	server_past(stored_alone(), 200000000ull);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.grants_expired, 0, "revoked while nothing needed its room");
	cr_assert_not_null(S.rpc->grants_live);
	for (t0 = urpc__now_ns(); !o.done && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(o.done, 1);
	cr_assert_eq(o.status, 0, "status %d (%s)", o.status, urpc_strerror(o.status));
	cr_assert_eq(resp.data_size, big_len);
	for (i = 0; i < big_len; i++)
		cr_assert_eq(((uint8_t *)resp.buf)[i], 0xb1, "byte %zu", i);
	cr_assert_eq(C.resets, 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * A large response past its time makes room when a newer response of its
 * address needs it (the share lowered here to hold one): the newer one is
 * stored, not refused; the old one is revoked (grants_expired) and its
 * request fails with -ECONNRESET once the client runs; the session serves on.
 */
Test(nx_auth, a_response_past_its_time_makes_room_for_its_address, .timeout = 60)
{
	struct urpc_msgbuf req[2], resp[2], mb;
	struct urpc_rpc_stats st;
	struct late_op o[2] = {{0}};
	uint64_t t0;
	int i, sess;

	big_len = 64u << 10;
	side_up(&S, true);
	side_up(&C, false);
	S.rpc->src_bytes_max = big_len + big_len / 2;
	sess = connect_one();
	for (i = 0; i < 2; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_alloc(C.rpc, big_len, &resp[i]), 0);
		cr_assert_eq(urpc_req_enqueue(C.rpc, sess, i ? T_LATE : T_BIG, &req[i], &resp[i],
					      late_cont, &o[i], 0),
			     0);
	}
	sent_by(C.rpc, 2);
	server_past(stored_alone(), 100000000ull);
	for (t0 = urpc__now_ns(); !late_h && urpc__now_ns() - t0 < WAIT_NS;)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_not_null(late_h, "the second request was never handled");
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.grants_expired, 0, "revoked before anything needed its room");
	/* The late answer needs the share the first one holds. */
	cr_assert_eq(urpc_msgbuf_alloc(S.rpc, big_len, &mb), 0);
	memset(mb.buf, 0xb2, big_len);
	cr_assert_eq(urpc_resp_enqueue(late_h, &mb), 0,
		     "refused although the old one was past its time");
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr, "grant room: grants_expired %llu, grants_refused %llu\n",
		(unsigned long long)st.grants_expired, (unsigned long long)st.grants_refused);
	cr_assert_eq(st.grants_expired, 1);
	cr_assert_eq(st.grants_refused, 0);
	for (t0 = urpc__now_ns(); (!o[0].done || !o[1].done) && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(o[0].done, 1);
	cr_assert_eq(o[0].status, -ECONNRESET, "status %d", o[0].status);
	cr_assert_eq(o[1].done, 1);
	cr_assert_eq(o[1].status, 0, "status %d (%s)", o[1].status, urpc_strerror(o[1].status));
	cr_assert_eq(((uint8_t *)resp[1].buf)[big_len - 1], 0xb2);
	for (i = 0; i < 2; i++) {
		cr_assert_eq(urpc_msgbuf_free(C.rpc, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp[i]), 0);
	}
	cr_assert_eq(echo_once(sess), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * A large response past its time makes room when the server's pool needs
 * it: once an allocation fails (here, 64 MiB buffers taken until the 1 GiB
 * cap refuses one), the next timer scan revokes what is past its time, the
 * request fails with -ECONNRESET, and the pool serves the next allocation.
 */
Test(nx_auth, a_response_past_its_time_makes_room_for_the_pool, .timeout = 60)
{
	struct urpc_msgbuf req, resp, hog[32];
	struct urpc_rpc_stats st;
	struct late_op o = {0};
	uint64_t t0;
	int i, n = 0;
	int sess;

	big_len = 64u << 10;
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, big_len, &resp), 0);
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_BIG, &req, &resp, late_cont, &o, 0), 0);
	sent_by(C.rpc, 1);
	server_past(stored_alone(), 100000000ull);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	cr_assert_eq(st.grants_expired, 0, "revoked before anything needed its room");
	/* Untouched 64 MiB buffers (mapped, not written) until the pool's cap refuses one. */
	while (n < 32 && urpc_msgbuf_alloc(S.rpc, 64u << 20, &hog[n]) == 0)
		n++;
	cr_assert_lt(n, 32, "the pool never refused: no cap");
	for (t0 = urpc__now_ns(); S.rpc->grants_live && urpc__now_ns() - t0 < WAIT_NS;)
		urpc_rpc_run_event_loop_once(S.rpc);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr, "pool room: %d 64 MiB buffers, then a refusal; grants_expired %llu\n", n,
		(unsigned long long)st.grants_expired);
	cr_assert_eq(st.grants_expired, 1);
	cr_assert_null(S.rpc->grants_live);
	for (i = 0; i < n; i++)
		cr_assert_eq(urpc_msgbuf_free(S.rpc, &hog[i]), 0);
	for (t0 = urpc__now_ns(); !o.done && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(o.done, 1);
	cr_assert_eq(o.status, -ECONNRESET, "status %d", o.status);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	cr_assert_eq(echo_once(sess), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * The clients of one address hold at most their share of unread large
 * responses (item 3; lowered here to 16 MiB so that the test stays small):
 * the fifth unread 4 MiB response of an address is refused (its client
 * gets EIO, the server counts grants_refused), the four stored are read
 * once the client runs again, and the session keeps serving.
 */
Test(nx_auth, one_address_holds_at_most_its_share_of_unread_responses, .timeout = 60)
{
	struct urpc_msgbuf req[6], resp[6];
	struct urpc_rpc_stats st;
	uint64_t t0;
	unsigned i, want;
	int sess;

	side_up(&S, true);
	side_up(&C, false);
	S.rpc->src_bytes_max = 16u << 20;
	sess = connect_one();
	want = echo_done + 6;
	echo_errors = 0;
	for (i = 0; i < 6; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_alloc(C.rpc, BIG_LEN, &resp[i]), 0);
		cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_BIG, &req[i], &resp[i], count_cont,
					      NULL, 0),
			     0);
	}
	/*
	 * The client sends all 6 and stops reading; the server handles all 6
	 * and stores what it may (the handler stores or refuses at once).
	 * Waits on both: a fixed 20 ms and 300 ms let a descheduled thread
	 * send or handle fewer than 6 on a loaded host, and refuse fewer.
	 */
	sent_by(C.rpc, 6);
	for (t0 = urpc__now_ns(); urpc__now_ns() - t0 < WAIT_NS;) {
		urpc_rpc_run_event_loop_once(S.rpc);
		cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
		if (st.reqs_handled >= 6)
			break;
	}
	cr_assert_eq(st.reqs_handled, 6, "the server handled %llu of 6 requests",
		     (unsigned long long)st.reqs_handled);
	fprintf(stderr, "pool share: 6 unread 4 MiB responses of one address: %llu refused\n",
		(unsigned long long)st.grants_refused);
	cr_assert_eq(st.grants_refused, 2, "4 fit a 16 MiB share, 2 do not");
	/* The client reads again: 4 served, 2 failed with EIO. */
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(echo_done, want);
	cr_assert_eq(echo_errors, 2, "%u failed, the last with %d", echo_errors, echo_last_error);
	cr_assert_eq(echo_last_error, -EIO);
	for (i = 0; i < 6; i++) {
		cr_assert_eq(urpc_msgbuf_free(C.rpc, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp[i]), 0);
	}
	cr_assert_eq(echo_once(sess), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * One slow reader cannot hold every one-sided operation of a server (item
 * 3): a client at 127.0.0.2 sends 64 large requests on 8 sessions and then
 * stops serving its READs; it holds at most URPC_OS_OPS / 4 of the server's
 * operations, and a client at 127.0.0.1 has its own large request read
 * and answered meanwhile (before: all 64 were held, and the victim waited
 * for the one-sided time-out).
 */
Test(nx_auth, a_slow_reader_holds_at_most_its_share_of_one_sided_operations, .timeout = 60)
{
	enum { NS = 8, PER = 8 };
	static struct urpc_msgbuf ereq[NS * PER], eresp[NS * PER];
	struct urpc_msgbuf vreq, vresp;
	struct side E;
	char hp[64];
	int es[NS], sess;
	unsigned i, k, want, e_conn = 0;
	uint64_t t0, took;
	struct urpc_rpc_stats st;

	side_up(&S, true);
	side_up(&C, false);
	side_up_at(&E, false, "127.0.0.2");
	sess = connect_one();
	snprintf(hp, sizeof(hp), "%s:%u", HOST, urpc_nexus_port(S.nx));
	for (i = 0; i < NS; i++)
		cr_assert_eq(urpc_session_connect(E.rpc, hp, SRV_ID, &es[i]), 0);
	for (t0 = urpc__now_ns(); E.connected < NS && urpc__now_ns() - t0 < WAIT_NS;) {
		pump();
		urpc_rpc_run_event_loop_once(E.rpc);
	}
	cr_assert_eq(E.connected, NS);
	for (i = 0; i < NS; i++)
		for (k = 0; k < PER; k++) {
			struct urpc_msgbuf *q = &ereq[i * PER + k], *r = &eresp[i * PER + k];

			cr_assert_eq(urpc_msgbuf_alloc(E.rpc, PUT_LEN, q), 0);
			cr_assert_eq(urpc_msgbuf_alloc(E.rpc, 64, r), 0);
			memset(q->buf, 0xe1, PUT_LEN);
			cr_assert_eq(
				urpc_req_enqueue(E.rpc, es[i], T_SINK, q, r, count_cont, NULL, 0),
				0);
		}
	/*
	 * Its descriptors leave; then it stops: the server's READs of it stall
	 * until its share is full and a request of it waits (a fixed 20 + 50 ms
	 * was short on a host at load 12).
	 */
	sent_by(E.rpc, NS * PER);
	for (t0 = urpc__now_ns(); urpc__now_ns() - t0 < WAIT_NS;) {
		pump();
		cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
		if (st.os_share_waits)
			break;
	}
	e_conn = S.rpc->os_busy;
	/* The victim's large request, meanwhile. */
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, PUT_LEN, &vreq), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 64, &vresp), 0);
	memset(vreq.buf, 0x5a, PUT_LEN);
	want = echo_done + 1;
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_SINK, &vreq, &vresp, echo_cont, NULL, 0), 0);
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	took = urpc__now_ns() - t0;
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr,
		"one-sided share: a stalled reader held %u of the server's %u operations "
		"(os_share_waits %llu); the victim's 1 MiB request took %.1f ms\n",
		e_conn, URPC_OS_OPS, (unsigned long long)st.os_share_waits, (double)took / 1e6);
	cr_assert_eq(echo_done, want);
	cr_assert_eq(echo_status, 0);
	cr_assert_leq(e_conn, URPC_OS_OPS / 4);
	cr_assert_gt(st.os_share_waits, 0);
	cr_assert_lt(took, 500000000ull, "the victim waited %.1f ms", (double)took / 1e6);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &vreq), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &vresp), 0);
	/* The slow reader runs again: its requests end, one way or another. */
	want = echo_done + NS * PER;
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < 3 * WAIT_NS;) {
		pump();
		urpc_rpc_run_event_loop_once(E.rpc);
	}
	cr_assert_eq(echo_done, want);
	for (i = 0; i < NS * PER; i++) {
		cr_assert_eq(urpc_msgbuf_free(E.rpc, &ereq[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(E.rpc, &eresp[i]), 0);
	}
	side_down(&E);
	side_down(&C);
	side_down(&S);
}

/* ---- "no such session" on the datapath (item 2) ---- */

/* @rpc's udp datapath address, from its endpoint bytes (udp_int.h). */
static struct sockaddr_in dp_addr(struct urpc_rpc *rpc)
{
	uint8_t ep[URPC_TP_EP_MAX];
	struct sockaddr_in a;

	cr_assert_geq(rpc->tp->ops->get_endpoint(rpc->tp, ep), 8);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	memcpy(&a.sin_addr.s_addr, ep + 2, 4);
	memcpy(&a.sin_port, ep + 6, 2);
	return a;
}

/* A udp DATA datagram holding a header of @type and @plen zero bytes; its length. */
static size_t dp_pkt(uint8_t *pkt, enum urpc_pkt_type type, uint32_t dest, uint32_t src,
		     uint64_t token, uint32_t plen)
{
	struct urpc_pkthdr h;
	struct udp_hdr u;

	udp_hdr_init(&u, UDP_T_DATA, 0, 0, 0);
	urpc__pkthdr_fill(&h, type, T_ECHO, 0, plen, dest, 2 * URPC_SESSION_WINDOW_MAX, token);
	h.src_session = htole32(src);
	memcpy(pkt, &u, sizeof(u));
	memcpy(pkt + sizeof(u), &h, sizeof(h));
	memset(pkt + sizeof(u) + sizeof(h), 0, plen);
	return sizeof(u) + sizeof(h) + plen;
}

Test(nx_auth, a_request_for_a_session_the_server_lost_draws_a_verified_notice, .timeout = 60)
{
	struct sockaddr_in me = {.sin_family = AF_INET}, srv, cli;
	struct urpc_rpc_stats st, cst;
	struct urpc_session *ss = NULL;
	uint64_t in_b = 0, out_b = 0, t0, took, end;
	uint8_t pkt[256], got[2048];
	unsigned i, answers = 0, bigger = 0;
	int fd, raw, sess;
	ssize_t n;

	side_up(&S, true);
	srv = dp_addr(S.rpc);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(echo_once(sess), 0);
	for (i = 0; i < S.rpc->hi_session && !ss; i++) {
		ss = urpc__rpc_session(S.rpc, (int)i);
		if (ss && ss->role != URPC_ROLE_SERVER)
			ss = NULL;
	}
	cr_assert_not_null(ss);
	/* Forged notices from the server's address: a wrong token, a wrong server session. */
	raw = udp_forge_open();
	if (raw >= 0) {
		cli = dp_addr(C.rpc);
		dp_pkt(pkt, URPC_PKT_NOSESS, (uint32_t)sess, ss->local_num, ss->token ^ 1, 0);
		udp_forge_send(raw, &srv, &cli, pkt, sizeof(struct udp_hdr) + 40);
		dp_pkt(pkt, URPC_PKT_NOSESS, (uint32_t)sess, ss->local_num + 1, ss->token, 0);
		udp_forge_send(raw, &srv, &cli, pkt, sizeof(struct udp_hdr) + 40);
		for (end = urpc__now_ns() + 20000000; urpc__now_ns() < end;)
			pump();
		close(raw);
		cr_assert_eq(C.resets, 0, "a forged notice reset the session");
		cr_assert_eq(echo_once(sess), 0);
	} else {
		fprintf(stderr, "no CAP_NET_RAW: forged notices not sent\n");
	}
	/* The server frees the session and tells nobody; the next request learns it. */
	urpc__session_transition(S.rpc, ss, URPC_SEV_PEER_CLOSED, 0);
	t0 = urpc__now_ns();
	cr_assert_eq(echo_once(sess), -ECONNRESET);
	took = urpc__now_ns() - t0;
	cr_assert_eq(urpc_rpc_get_stats(C.rpc, &cst), 0);
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr,
		"no such session: the client's request after the server forgot its session failed "
		"with -ECONNRESET in %.2f ms (server notices %llu, client resets by notice %llu)\n",
		(double)took / 1e6, (unsigned long long)st.nosess_tx,
		(unsigned long long)cst.nosess_rx);
	cr_assert_eq(cst.nosess_rx, 1, "the session was not reset by the notice");
	cr_assert(!urpc_session_is_connected(C.rpc, sess));
	side_down(&C);
	/*
	 * Strangers' requests, with no session left (the server's socket takes
	 * any source then): 1,000 for made-up sessions, each answered with at
	 * most its own length, at most URPC_NOSESS_MAX a window.
	 */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(fd, 0);
	inet_pton(AF_INET, HOST, &me.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	srv = dp_addr(S.rpc);
	t0 = urpc__now_ns();
	for (i = 0; i < 1000; i++) {
		size_t len = dp_pkt(pkt, URPC_PKT_REQ, i % 64, 7, 0x1000 + i, i % 3 ? 0 : 64);

		in_b += len;
		cr_assert_eq(sendto(fd, pkt, len, 0, (struct sockaddr *)&srv, sizeof(srv)),
			     (ssize_t)len);
		if (i % 50 == 49)
			urpc_rpc_run_event_loop_once(S.rpc);
	}
	for (end = urpc__now_ns() + 50000000; urpc__now_ns() < end;) {
		urpc_rpc_run_event_loop_once(S.rpc);
		while ((n = recv(fd, got, sizeof(got), 0)) >= 0) {
			answers++;
			out_b += (uint64_t)n;
			bigger += (size_t)n > sizeof(struct udp_hdr) + sizeof(struct urpc_pkthdr);
		}
	}
	took = urpc__now_ns() - t0;
	fprintf(stderr,
		"no such session: 1000 strangers' requests (%llu B) drew %u notices (%llu B, ratio "
		"%.3f) in %.0f ms\n",
		(unsigned long long)in_b, answers, (unsigned long long)out_b,
		(double)out_b / (double)in_b, (double)took / 1e6);
	cr_assert_eq(bigger, 0, "an answer longer than a bare header");
	cr_assert_gt(answers, 0);
	cr_assert_leq(answers, URPC_NOSESS_MAX * (took / URPC_NOSESS_WINDOW_NS + 1));
	cr_assert_leq(out_b, in_b);
	close(fd);

	side_down(&S);
}

/* ---- the one-sided time-out and the minimum rate (item 3, issue 35 item 11) ---- */

/* Run @rpc's loop (NULL: both S and C) for @ms milliseconds. */
static void run_for(struct urpc_rpc *rpc, unsigned ms)
{
	uint64_t end = urpc__now_ns() + (uint64_t)ms * 1000000;

	while (urpc__now_ns() < end) {
		if (rpc)
			urpc_rpc_run_event_loop_once(rpc);
		else
			pump();
	}
}

/*
 * An owner that is alive (its Nexus answers heartbeats) but whose loop
 * does not run for five one-sided time-outs, with nobody else waiting for
 * the server's operations: its large request is read when it runs again
 * (before: the READ timed out and the request failed with EIO).
 */
Test(nx_auth, a_starved_owner_without_contention_completes, .timeout = 60)
{
	struct urpc_msgbuf req, resp;
	struct urpc_rpc_stats st;
	unsigned want;
	uint64_t t0;
	int sess;

	opt_os_timeout_ms = 100;
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, PUT_LEN, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 64, &resp), 0);
	memset(req.buf, 0x3c, PUT_LEN);
	want = echo_done + 1;
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_SINK, &req, &resp, echo_cont, NULL, 0), 0);
	sent_by(C.rpc, 1); /* the descriptor leaves */
	run_for(S.rpc, 5 * 100);
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr,
		"starved owner: its 1 MiB request ended with status %d after a 500 ms stall "
		"(one-sided time-out 100 ms; READs posted again %llu, cut %llu)\n",
		echo_status, (unsigned long long)st.os_reposted, (unsigned long long)st.os_cut);
	cr_assert_eq(echo_done, want);
	cr_assert_eq(echo_status, 0, "the starved owner's request failed: %d", echo_status);
	cr_assert_geq(st.os_reposted, 1);
	cr_assert_eq(st.os_cut, 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * The other way round: a server that is alive (its Nexus answers
 * heartbeats) but whose loop stops for five one-sided time-outs while the
 * client READs its large response: the client reads it again when the
 * server runs, and the request completes (before: the READ timed out and
 * the request failed with -ETIMEDOUT).
 */
Test(nx_auth, a_starved_server_s_large_response_is_read_again, .timeout = 60)
{
	struct urpc_msgbuf req, resp;
	struct urpc_rpc_stats st;
	unsigned want, i, reading;
	uint64_t t0;
	int sess;

	opt_os_timeout_ms = 100;
	side_up(&S, true);
	side_up(&C, false);
	sess = connect_one();
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 64, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, BIG_LEN, &resp), 0);
	memset(req.buf, 0x11, 64);
	want = echo_done + 1;
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_BIG, &req, &resp, echo_cont, NULL, 0), 0);
	/* Until the client READs the response, and the server has served some of it. */
	for (t0 = urpc__now_ns(), reading = 0; !reading && urpc__now_ns() - t0 < WAIT_NS;) {
		pump();
		for (i = 0; i < URPC_OS_OPS; i++)
			reading += C.rpc->os[i].busy && C.rpc->os[i].kind == URPC_OS_CLI_RESP;
	}
	cr_assert_eq(reading, 1, "the client never READ the response");
	cr_assert_eq(echo_done, want - 1, "done before the stall: too fast to test");
	run_for(C.rpc, 5 * 100); /* the server starves: nothing of the READ moves */
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	cr_assert_eq(urpc_rpc_get_stats(C.rpc, &st), 0);
	fprintf(stderr,
		"starved server: its %u B response ended with status %d after a 500 ms stall "
		"(one-sided time-out 100 ms; READs posted again %llu)\n",
		BIG_LEN, echo_status, (unsigned long long)st.os_reposted);
	cr_assert_eq(echo_done, want);
	cr_assert_eq(echo_status, 0, "the starved server's response failed: %s",
		     urpc_strerror(echo_status));
	cr_assert_eq(resp.data_size, BIG_LEN);
	cr_assert_eq(resp.buf[0], 0xb1);
	cr_assert_eq(resp.buf[BIG_LEN - 1], 0xb1);
	cr_assert_geq(st.os_reposted, 1);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &resp), 0);
	side_down(&C);
	side_down(&S);
}

/*
 * A slow reader that keeps making some progress (its loop runs every
 * 5 ms: about 1 MB/s per operation) holds every operation of a server whose per-source share is
 * off; a legitimate client's large request waits, and the slow READs,
 * past the one-sided time-out plus their bytes at 4 MiB/s, are cut: the
 * legitimate request is read (before: it waited for the slow ones).
 */
Test(nx_auth, a_slow_reader_is_cut_while_a_legitimate_client_waits, .timeout = 120)
{
	enum { NS = 8, PER = 8, SLOW_LEN = 4u << 20 };
	static struct urpc_msgbuf ereq[NS * PER], eresp[NS * PER];
	struct urpc_msgbuf vreq, vresp;
	struct urpc_rpc_stats st;
	struct side E;
	unsigned i, k, want, held, e_base;
	uint64_t t0, took, e_next;
	char hp[64];
	int es[NS], sess;

	/* Long enough that the slow reader's READs never stall that long, even on a busy host. */
	opt_os_timeout_ms = 1500;
	opt_per_source = 0; /* no share: the slow reader may hold every operation */
	side_up(&S, true);
	side_up(&C, false);
	side_up_at(&E, false, "127.0.0.2");
	sess = connect_one();
	snprintf(hp, sizeof(hp), "%s:%u", HOST, urpc_nexus_port(S.nx));
	for (i = 0; i < NS; i++)
		cr_assert_eq(urpc_session_connect(E.rpc, hp, SRV_ID, &es[i]), 0);
	for (t0 = urpc__now_ns(); E.connected < NS && urpc__now_ns() - t0 < WAIT_NS;) {
		pump();
		urpc_rpc_run_event_loop_once(E.rpc);
	}
	cr_assert_eq(E.connected, NS);
	e_base = echo_done; /* the slow reader's continuations count from here */
	for (i = 0; i < NS; i++)
		for (k = 0; k < PER; k++) {
			struct urpc_msgbuf *q = &ereq[i * PER + k], *r = &eresp[i * PER + k];

			cr_assert_eq(urpc_msgbuf_alloc(E.rpc, SLOW_LEN, q), 0);
			cr_assert_eq(urpc_msgbuf_alloc(E.rpc, 64, r), 0);
			memset(q->buf, 0xe2, SLOW_LEN);
			cr_assert_eq(
				urpc_req_enqueue(E.rpc, es[i], T_SINK, q, r, count_cont, NULL, 0),
				0);
		}
	/* Until it holds every operation (a fixed 20 + 50 ms held 32 of 64 at load 12). */
	sent_by(E.rpc, NS * PER);
	for (t0 = urpc__now_ns(); S.rpc->os_busy < URPC_OS_OPS && urpc__now_ns() - t0 < WAIT_NS;)
		pump();
	held = S.rpc->os_busy;
	/* The legitimate request, while the slow reader runs every 150 ms. */
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, PUT_LEN, &vreq), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 64, &vresp), 0);
	memset(vreq.buf, 0x5a, PUT_LEN);
	want = legit_done + 1;
	cr_assert_eq(urpc_req_enqueue(C.rpc, sess, T_SINK, &vreq, &vresp, legit_cont, NULL, 0), 0);
	t0 = urpc__now_ns();
	for (e_next = t0; legit_done < want && urpc__now_ns() - t0 < 3 * WAIT_NS;) {
		pump();
		if (urpc__now_ns() >= e_next) {
			urpc_rpc_run_event_loop_once(E.rpc);
			e_next = urpc__now_ns() + 5000000;
		}
	}
	took = urpc__now_ns() - t0;
	cr_assert_eq(urpc_rpc_get_stats(S.rpc, &st), 0);
	fprintf(stderr,
		"minimum rate: a slow reader held %u of %u operations; the legitimate 1 MiB "
		"request took %.1f ms (READs cut %llu, posted again %llu)\n",
		held, URPC_OS_OPS, (double)took / 1e6, (unsigned long long)st.os_cut,
		(unsigned long long)st.os_reposted);
	cr_assert_eq(held, URPC_OS_OPS);
	cr_assert_eq(legit_done, want);
	cr_assert_eq(legit_status, 0, "the legitimate request failed: %d", legit_status);
	cr_assert_gt(st.os_cut, 0);
	/* Cut at 1.5 s + 4 MiB at 4 MiB/s; without the cut it waited 18.0 s here. */
	cr_assert_lt(took, 8000000000ull, "the legitimate request waited %.1f ms",
		     (double)took / 1e6);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &vreq), 0);
	cr_assert_eq(urpc_msgbuf_free(C.rpc, &vresp), 0);
	/* The slow reader runs again: its requests end, one way or another. */
	want = e_base + NS * PER; /* some ended already, cut while the victim waited */
	for (t0 = urpc__now_ns(); echo_done < want && urpc__now_ns() - t0 < 3 * WAIT_NS;) {
		pump();
		urpc_rpc_run_event_loop_once(E.rpc);
	}
	cr_assert_eq(echo_done, want);
	for (i = 0; i < NS * PER; i++) {
		cr_assert_eq(urpc_msgbuf_free(E.rpc, &ereq[i]), 0);
		cr_assert_eq(urpc_msgbuf_free(E.rpc, &eresp[i]), 0);
	}
	side_down(&E);
	side_down(&C);
	side_down(&S);
}
