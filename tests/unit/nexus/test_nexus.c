/* SPDX-License-Identifier: MIT */
/*
 * The Nexus: SM socket life cycle, handler and Rpc tables, routing of SM
 * packets between two Nexus endpoints on 127.0.0.1, and host:port parsing.
 * Every wait is bounded (WAIT_MS).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "nexus/nexus.h"
#include "nexus/nexus_peer.h"
#include "nexus/sm.h"
#include "transport/verbs_dev.h"
#include "util/log.h"

#define WAIT_MS 2000u

static struct urpc_nexus *nexus_new(void)
{
	struct urpc_nexus *nx = NULL;

	cr_assert_eq(urpc_nexus_create(NULL, &nx), 0);
	cr_assert_not_null(nx);
	return nx;
}

static struct urpc_sm_queue *queue_new(void)
{
	struct urpc_sm_queue *q = aligned_alloc(URPC_CACHELINE, sizeof(*q));

	cr_assert_not_null(q);
	urpc__sm_queue_init(q);
	return q;
}

static struct sockaddr_in addr_of(const struct urpc_nexus *nx)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(urpc_nexus_port(nx));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* Pop one packet, waiting up to @ms. 1 when one came, else 0. */
static int wait_pop(struct urpc_sm_queue *q, struct urpc_sm_pkt *p, unsigned ms)
{
	uint64_t deadline = urpc__now_ns() + (uint64_t)ms * 1000000u;

	do {
		if (urpc__sm_queue_pop(q, p))
			return 1;
		sleep_ms(1);
	} while (urpc__now_ns() < deadline);
	return urpc__sm_queue_pop(q, p);
}

/* Wait up to WAIT_MS for the counter at @off in @nx's stats to reach @want; returns it. */
static uint64_t wait_stat(const struct urpc_nexus *nx, size_t off, uint64_t want)
{
	uint64_t deadline = urpc__now_ns() + WAIT_MS * 1000000ull;
	struct urpc_nexus_stats st;
	uint64_t v;

	for (;;) {
		urpc__nexus_get_stats(nx, &st);
		memcpy(&v, (const char *)&st + off, sizeof(v));
		if (v >= want || urpc__now_ns() > deadline)
			return v;
		sleep_ms(1);
	}
}

static void make_req(struct urpc_sm_pkt *p, enum urpc_sm_pkt_type t, uint8_t client_rpc,
		     uint8_t server_rpc)
{
	uint16_t i;

	memset(p, 0, sizeof(*p));
	p->type = t;
	p->client_rpc_id = client_rpc;
	p->server_rpc_id = server_rpc;
	p->transport = URPC_TRANSPORT_LOOP;
	p->client_sess = 41;
	p->server_sess = 0x12345678u;
	p->token = 0xfeedfacecafebeefull;
	p->seq = 77;
	p->max_msg = 4096;
	p->ep_len = 12;
	for (i = 0; i < p->ep_len; i++)
		p->ep[i] = (uint8_t)(0x30 + i);
}

/* The cookie Nexus @to gives what Nexus @from sends (both on 127.0.0.1). */
static uint64_t cookie_for(struct urpc_nexus *to, const struct urpc_nexus *from)
{
	struct sockaddr_in a = addr_of(from);

	return urpc__nexus_cookie(to, &a);
}

/* A UDP socket bound to 127.0.0.1 on a free port, and that address in *@a. */
static int bound_socket(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert_geq(fd, 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)a, &len), 0);
	return fd;
}

#define HOUR_NS 3600000000000ull

/*
 * Give Nexus @from an entry for @to (and with it a nonce to send in every
 * packet there, nexus_auth.h), idle, so that it pings nobody.
 */
static void nonce_for(struct urpc_nexus *from, struct urpc_nexus *to)
{
	struct sockaddr_in a = addr_of(to);
	struct urpc_nx_peer *p = urpc__nexus_peer_get(from, &a, HOUR_NS, HOUR_NS, 1);

	cr_assert_not_null(p);
	urpc__nexus_peer_put(from, p, 1);
}

/*
 * The handshake a connect makes: @cli sends @srv a CONNECT_REQ with a valid
 * cookie (to an Rpc id nobody attached, whose answer @srv's Nexus signs),
 * so that both share a secret and sign what they send each other. Counts
 * one datagram each way.
 */
static void handshake(struct urpc_nexus *cli, struct urpc_nexus *srv)
{
	struct sockaddr_in to = addr_of(srv);
	uint64_t deadline = urpc__now_ns() + WAIT_MS * 1000000ull;
	struct urpc_sm_pkt req;

	nonce_for(cli, srv);
	make_req(&req, URPC_SM_PKT_CONNECT_REQ, 254, 255);
	req.cookie = cookie_for(srv, cli);
	cr_assert_eq(urpc__nexus_sm_send(cli, &to, &req), 0);
	while (!urpc__nexus_peer_is_keyed(cli, &to) && urpc__now_ns() < deadline)
		sleep_ms(1);
	cr_assert(urpc__nexus_peer_is_keyed(cli, &to), "no signed answer to the handshake");
}

static void handler_a(struct urpc_req_handle *h, void *arg)
{
}

static void handler_b(struct urpc_req_handle *h, void *arg)
{
}

/* ---- life cycle ---------------------------------------------------------- */

Test(nexus, create_on_port_zero_reports_a_port)
{
	struct urpc_nexus_opts o;
	struct urpc_nexus *nx = NULL;

	urpc_nexus_opts_init(&o);
	cr_assert_str_eq(o.host, "127.0.0.1");
	cr_assert_eq(o.port, 0);
	cr_assert_eq(urpc_nexus_create(&o, &nx), 0);
	cr_assert_neq(urpc_nexus_port(nx), 0);
	cr_assert_str_eq(urpc__nexus_host(nx), "127.0.0.1");
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

Test(nexus, second_create_on_same_port_is_addrinuse)
{
	struct urpc_nexus *a = nexus_new(), *b = NULL;
	struct urpc_nexus_opts o;

	urpc_nexus_opts_init(&o);
	o.port = urpc_nexus_port(a);
	cr_assert_eq(urpc_nexus_create(&o, &b), -EADDRINUSE);
	cr_assert_null(b);
	cr_assert_eq(urpc_nexus_destroy(a), 0);

	/* The port is free again once its Nexus is gone. */
	cr_assert_eq(urpc_nexus_create(&o, &b), 0);
	cr_assert_eq(urpc_nexus_port(b), o.port);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
}

Test(nexus, bad_host_is_einval)
{
	static const char *bad[] = {"not-an-ip", "localhost", "::1", "256.1.1.1", "1.2.3", ""};
	struct urpc_nexus_opts o;
	struct urpc_nexus *nx = NULL;
	size_t i;

	for (i = 0; i < URPC_ARRAY_SIZE(bad); i++) {
		urpc_nexus_opts_init(&o);
		o.host = bad[i];
		cr_assert_eq(urpc_nexus_create(&o, &nx), -EINVAL, "host '%s'", bad[i]);
		cr_assert_null(nx);
	}
}

Test(nexus, register_handler_rules)
{
	struct urpc_nexus *nx = nexus_new();
	const struct urpc_handler *h;
	int arg;

	cr_assert_eq(urpc_nexus_register_handler(nx, 1, NULL, NULL), -EINVAL);
	cr_assert_eq(urpc_nexus_register_handler(nx, 1, handler_a, &arg), 0);
	cr_assert_eq(urpc_nexus_register_handler(nx, 1, handler_b, NULL), -EEXIST);
	cr_assert_eq(urpc_nexus_register_handler(nx, 255, handler_b, NULL), 0);

	h = urpc__nexus_handlers(nx);
	cr_assert_eq(h[1].fn, handler_a, "the first registration stays");
	cr_assert_eq(h[1].arg, &arg);
	cr_assert_eq(h[255].fn, handler_b);
	cr_assert_null(h[0].fn);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

Test(nexus, register_after_attach_is_ebusy)
{
	struct urpc_nexus *nx = nexus_new();
	struct urpc_sm_queue *q = queue_new();

	cr_assert_eq(urpc_nexus_register_handler(nx, 1, handler_a, NULL), 0);
	cr_assert_eq(urpc__nexus_attach_rpc(nx, 0, q), 0);
	cr_assert_eq(urpc_nexus_register_handler(nx, 2, handler_b, NULL), -EBUSY);
	urpc__nexus_detach_rpc(nx, 0);
	cr_assert_eq(urpc_nexus_register_handler(nx, 2, handler_b, NULL), -EBUSY,
		     "the table stays frozen after the Rpc is gone");
	cr_assert_null(urpc__nexus_handlers(nx)[2].fn);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
	free(q);
}

Test(nexus, destroy_while_attached_is_ebusy)
{
	struct urpc_nexus *nx = nexus_new();
	struct urpc_sm_queue *q1 = queue_new(), *q2 = queue_new();

	cr_assert_eq(urpc__nexus_attach_rpc(nx, 3, q1), 0);
	cr_assert_eq(urpc__nexus_attach_rpc(nx, 3, q2), -EEXIST);
	cr_assert_eq(urpc__nexus_attach_rpc(nx, 4, q2), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), -EBUSY);
	urpc__nexus_detach_rpc(nx, 3);
	cr_assert_eq(urpc_nexus_destroy(nx), -EBUSY);
	urpc__nexus_detach_rpc(nx, 4);
	urpc__nexus_detach_rpc(nx, 4); /* detaching twice is harmless */
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
	free(q1);
	free(q2);
}

/*
 * The default transport considers verbs in a verbs build: a placement hint
 * naming no PCI device is refused then, not silently ignored. An explicit
 * udp transport needs no hint and ignores it.
 */
Test(nexus, rpc_with_a_bad_near_pci_hint)
{
	struct urpc_nexus *nx = nexus_new();
	struct urpc_rpc_opts o;
	struct urpc_rpc *rpc;

	if (!urpc__verbs_built())
		cr_skip_test("this build has no verbs transport: the hint is never read");
	unsetenv("URPC_TRANSPORT");
	unsetenv("URPC_DEVICE");
	urpc_rpc_opts_init(&o);
	cr_assert_eq(o.numa_node, -1, "no NUMA preference by default");
	o.near_pci = "not-a-pci-address";
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL);
	o.near_pci = "0000:ff:1f.7"; /* well formed, not on this machine */
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL);
	o.transport = URPC_TRANSPORT_UDP;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), 0);
	cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

/* ---- routing ------------------------------------------------------------- */

Test(nexus, request_reaches_the_server_rpc_intact)
{
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *q = queue_new();
	struct sockaddr_in to = addr_of(a);
	struct urpc_sm_pkt req, got;

	cr_assert_eq(urpc__nexus_attach_rpc(a, 3, q), 0);
	nonce_for(b, a);
	make_req(&req, URPC_SM_PKT_CONNECT_REQ, 9, 3);
	req.cookie = cookie_for(a, b);
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &req), 0);

	cr_assert_eq(wait_pop(q, &got, WAIT_MS), 1, "no CONNECT_REQ within %u ms", WAIT_MS);
	cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_REQ);
	cr_assert_eq(got.status, 0);
	cr_assert_eq(got.client_rpc_id, 9);
	cr_assert_eq(got.server_rpc_id, 3);
	cr_assert_eq(got.transport, URPC_TRANSPORT_LOOP);
	cr_assert_eq(got.client_sess, req.client_sess);
	cr_assert_eq(got.server_sess, req.server_sess);
	cr_assert_eq(got.token, req.token);
	cr_assert_eq(got.seq, req.seq);
	cr_assert_eq(got.max_msg, req.max_msg);
	cr_assert_eq(got.cookie, req.cookie);
	cr_assert_eq(got.ep_len, req.ep_len);
	cr_assert_arr_eq(got.ep, req.ep, req.ep_len);
	cr_assert_eq(got.from.sin_family, AF_INET);
	cr_assert_eq(ntohs(got.from.sin_port), urpc_nexus_port(b), "from must name B");
	cr_assert_eq(ntohl(got.from.sin_addr.s_addr), INADDR_LOOPBACK);
	cr_assert_eq(urpc__sm_queue_pop(q, &got), 0, "exactly one packet");

	urpc__nexus_detach_rpc(a, 3);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	free(q);
}

Test(nexus, responses_and_reset_reach_the_client_rpc)
{
	static const enum urpc_sm_pkt_type types[] = {URPC_SM_PKT_CONNECT_RESP,
						      URPC_SM_PKT_DISCONNECT_RESP,
						      URPC_SM_PKT_PING_RESP, URPC_SM_PKT_RESET};
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *client = queue_new(), *server = queue_new();
	struct sockaddr_in to = addr_of(a);
	struct urpc_sm_pkt p, got;
	size_t i;

	/* Rpc 5 is the client, Rpc 6 a server on the same Nexus: only 5 must see them. */
	cr_assert_eq(urpc__nexus_attach_rpc(a, 5, client), 0);
	cr_assert_eq(urpc__nexus_attach_rpc(a, 6, server), 0);
	handshake(b, a);
	for (i = 0; i < URPC_ARRAY_SIZE(types); i++) {
		make_req(&p, types[i], 5, 6);
		p.status = types[i] == URPC_SM_PKT_RESET ? -ECONNRESET : 0;
		p.seq = 100 + i;
		cr_assert_eq(urpc__nexus_sm_send(b, &to, &p), 0);
	}
	for (i = 0; i < URPC_ARRAY_SIZE(types); i++) {
		cr_assert_eq(wait_pop(client, &got, WAIT_MS), 1, "missing %s",
			     urpc__sm_pkt_type_str(types[i]));
		cr_assert_eq(got.type, types[i]);
		cr_assert_eq(got.seq, 100 + i);
		cr_assert_eq(got.status, types[i] == URPC_SM_PKT_RESET ? -ECONNRESET : 0);
	}
	cr_assert_eq(urpc__sm_queue_pop(server, &got), 0, "responses never go to the server id");

	/* Transport control bytes go by direction: S2C to the client, C2S to the server. */
	make_req(&p, URPC_SM_PKT_TP_CTL_S2C, 5, 6);
	p.ep_len = 3;
	memcpy(p.ep, "abc", 3);
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &p), 0);
	cr_assert_eq(wait_pop(client, &got, WAIT_MS), 1, "missing TP_CTL_S2C");
	cr_assert_eq(got.type, URPC_SM_PKT_TP_CTL_S2C);
	cr_assert_eq(got.ep_len, 3);
	cr_assert(memcmp(got.ep, "abc", 3) == 0);
	p.type = URPC_SM_PKT_TP_CTL_C2S;
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &p), 0);
	cr_assert_eq(wait_pop(server, &got, WAIT_MS), 1, "missing TP_CTL_C2S");
	cr_assert_eq(got.type, URPC_SM_PKT_TP_CTL_C2S);
	cr_assert_eq(urpc__sm_queue_pop(client, &got), 0);

	urpc__nexus_detach_rpc(a, 5);
	urpc__nexus_detach_rpc(a, 6);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	free(client);
	free(server);
}

/*
 * An Rpc's outbox goes out in one batch (sendmmsg), more than one system
 * call's worth here; a datagram the socket refuses (port 0) loses only
 * itself. The receiving SM thread takes them in batches (recvmmsg), routes
 * them in order and wakes the sleeping Rpc.
 */
Test(nexus, a_batch_arrives_in_order_and_a_refused_datagram_loses_only_itself)
{
	enum { N = URPC_SM_OUT_BATCH + 9, BAD = 7 };
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *client = queue_new();
	struct urpc_sm_dgram *d = calloc(N, sizeof(*d));
	struct sockaddr_in to = addr_of(a), nowhere;
	struct urpc_nexus_stats st;
	struct urpc_sm_pkt p, got;
	struct pollfd pfd;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	uint64_t tx0, rx0;
	unsigned i;

	cr_assert_not_null(d);
	cr_assert_geq(efd, 0);
	urpc__sm_queue_set_wake_fd(client, efd);
	cr_assert_eq(urpc__nexus_attach_rpc(a, 5, client), 0);
	memset(&nowhere, 0, sizeof(nowhere));
	nowhere.sin_family = AF_INET;
	nowhere.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	handshake(b, a);
	urpc__nexus_get_stats(b, &st);
	tx0 = st.sm_tx;
	urpc__nexus_get_stats(a, &st);
	rx0 = st.sm_rx;
	for (i = 0; i < N; i++) {
		make_req(&p, URPC_SM_PKT_CONNECT_RESP, 5, 6);
		p.seq = 1000 + i;
		urpc__nexus_sm_pack(b, i == BAD ? &nowhere : &to, &p, &d[i]);
	}
	urpc__sm_queue_sleep_begin(client); /* as an idle Rpc does before poll() */
	cr_assert_eq(urpc__nexus_sm_send_batch(b, d, N, -1), N - 1);
	urpc__nexus_get_stats(b, &st);
	cr_assert_eq(st.sm_tx - tx0, N - 1);
	pfd = (struct pollfd){.fd = efd, .events = POLLIN};
	cr_assert_eq(poll(&pfd, 1, WAIT_MS), 1, "the sleeping Rpc was not woken");
	urpc__sm_queue_sleep_end(client, true);
	for (i = 0; i < N; i++) {
		if (i == BAD)
			continue;
		cr_assert_eq(wait_pop(client, &got, WAIT_MS), 1, "datagram %u is missing", i);
		cr_assert_eq(got.seq, 1000 + i, "datagram %u came out of order", i);
	}
	cr_assert_eq(urpc__sm_queue_pop(client, &got), 0);
	cr_assert_eq(wait_stat(a, offsetof(struct urpc_nexus_stats, sm_rx), rx0 + N - 1),
		     rx0 + N - 1);

	urpc__nexus_detach_rpc(a, 5);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	close(efd);
	free(client);
	free(d);
}

Test(nexus, requests_for_a_missing_rpc_are_answered)
{
	static const struct {
		enum urpc_sm_pkt_type req, resp;
		int status;
	} cases[] = {
		{URPC_SM_PKT_CONNECT_REQ, URPC_SM_PKT_CONNECT_RESP, -ENOENT},
		{URPC_SM_PKT_DISCONNECT_REQ, URPC_SM_PKT_DISCONNECT_RESP, -ECONNRESET},
		{URPC_SM_PKT_PING_REQ, URPC_SM_PKT_PING_RESP, -ECONNRESET},
	};
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *q = queue_new();
	struct sockaddr_in to = addr_of(a);
	struct urpc_nexus_stats st;
	struct urpc_sm_pkt req, got;
	size_t i;

	/* B's client Rpc 7 asks for Rpc 9 on A, which has no Rpc at all. */
	cr_assert_eq(urpc__nexus_attach_rpc(b, 7, q), 0);
	nonce_for(b, a); /* the CONNECT_REQ is the handshake; A signs its answers */
	for (i = 0; i < URPC_ARRAY_SIZE(cases); i++) {
		make_req(&req, cases[i].req, 7, 9);
		req.seq = 500 + i;
		req.cookie = cookie_for(a, b);
		cr_assert_eq(urpc__nexus_sm_send(b, &to, &req), 0);
		cr_assert_eq(wait_pop(q, &got, WAIT_MS), 1, "no answer to %s",
			     urpc__sm_pkt_type_str(cases[i].req));
		cr_assert_eq(got.type, cases[i].resp);
		cr_assert_eq(got.status, cases[i].status);
		cr_assert_eq(got.client_rpc_id, 7);
		cr_assert_eq(got.server_rpc_id, 9);
		cr_assert_eq(got.client_sess, req.client_sess);
		cr_assert_eq(got.server_sess, req.server_sess);
		cr_assert_eq(got.token, req.token);
		cr_assert_eq(got.seq, req.seq);
		cr_assert_eq(ntohs(got.from.sin_port), urpc_nexus_port(a), "from must name A");
	}
	/* A counts a reply after its sendto returns, which may be after B got it. */
	cr_assert_eq(wait_stat(a, offsetof(struct urpc_nexus_stats, replied_no_rpc),
			       URPC_ARRAY_SIZE(cases)),
		     URPC_ARRAY_SIZE(cases));
	urpc__nexus_get_stats(a, &st);
	cr_assert_eq(st.sm_rx, URPC_ARRAY_SIZE(cases));
	cr_assert_eq(st.sm_tx, URPC_ARRAY_SIZE(cases));

	urpc__nexus_detach_rpc(b, 7);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	free(q);
}

Test(nexus, connect_req_without_a_valid_cookie_gets_one_and_reaches_no_rpc)
{
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *srv = queue_new(), *cli = queue_new();
	struct sockaddr_in to = addr_of(a), elsewhere = addr_of(b);
	struct urpc_nexus_stats st;
	struct urpc_sm_pkt req, got;
	uint64_t want = cookie_for(a, b);

	cr_assert_eq(urpc__nexus_attach_rpc(a, 3, srv), 0);
	cr_assert_eq(urpc__nexus_attach_rpc(b, 9, cli), 0);
	nonce_for(b, a);
	make_req(&req, URPC_SM_PKT_CONNECT_REQ, 9, 3);
	/* No cookie, then one made for another address: each answered with B's. */
	elsewhere.sin_port = htons((uint16_t)(ntohs(elsewhere.sin_port) + 1));
	for (int i = 0; i < 2; i++) {
		req.cookie = i ? urpc__nexus_cookie(a, &elsewhere) : 0;
		cr_assert_eq(urpc__nexus_sm_send(b, &to, &req), 0);
		cr_assert_eq(wait_pop(cli, &got, WAIT_MS), 1, "no CONNECT_COOKIE (%d)", i);
		cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_COOKIE);
		cr_assert_eq(got.cookie, want);
		cr_assert_eq(got.status, 0);
		cr_assert_eq(got.client_rpc_id, 9);
		cr_assert_eq(got.server_rpc_id, 3);
		cr_assert_eq(got.client_sess, req.client_sess);
		cr_assert_eq(got.token, req.token);
		cr_assert_eq(got.seq, req.seq);
		cr_assert_eq(got.ep_len, 0, "the answer carries no endpoint");
	}
	/* Echoed: it reaches the server Rpc, and is the only thing that did. */
	req.cookie = got.cookie;
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &req), 0);
	cr_assert_eq(wait_pop(srv, &got, WAIT_MS), 1, "the echoed CONNECT_REQ never came");
	cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_REQ);
	cr_assert_eq(urpc__sm_queue_pop(srv, &got), 0, "exactly one packet reached the Rpc");
	/* A counts a cookie after its sendto returns, which may be after B got it. */
	cr_assert_eq(wait_stat(a, offsetof(struct urpc_nexus_stats, cookies_tx), 2), 2);
	urpc__nexus_get_stats(a, &st);
	cr_assert_eq(st.sm_rx, 3);

	urpc__nexus_detach_rpc(a, 3);
	urpc__nexus_detach_rpc(b, 9);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	free(srv);
	free(cli);
}

Test(nexus, detached_rpc_gets_nothing_more)
{
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct urpc_sm_queue *srv = queue_new(), *cli = queue_new();
	struct sockaddr_in to = addr_of(a);
	struct urpc_sm_pkt req, got;

	cr_assert_eq(urpc__nexus_attach_rpc(a, 3, srv), 0);
	cr_assert_eq(urpc__nexus_attach_rpc(b, 8, cli), 0);
	urpc__nexus_detach_rpc(a, 3);
	nonce_for(b, a);

	make_req(&req, URPC_SM_PKT_CONNECT_REQ, 8, 3);
	req.cookie = cookie_for(a, b);
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &req), 0);
	cr_assert_eq(wait_pop(cli, &got, WAIT_MS), 1);
	cr_assert_eq(got.type, URPC_SM_PKT_CONNECT_RESP);
	cr_assert_eq(got.status, -ENOENT);
	cr_assert_eq(urpc__sm_queue_pop(srv, &got), 0);

	urpc__nexus_detach_rpc(b, 8);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
	free(srv);
	free(cli);
}

Test(nexus, response_for_a_missing_client_is_dropped)
{
	struct urpc_nexus *a = nexus_new(), *b = nexus_new();
	struct sockaddr_in to = addr_of(a);
	struct urpc_nexus_stats st;
	struct urpc_sm_pkt p;

	make_req(&p, URPC_SM_PKT_PING_RESP, 11, 12);
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &p), 0);
	make_req(&p, URPC_SM_PKT_RESET, 11, 12);
	cr_assert_eq(urpc__nexus_sm_send(b, &to, &p), 0);
	cr_assert_eq(wait_stat(a, offsetof(struct urpc_nexus_stats, drop_no_rpc), 2), 2);
	urpc__nexus_get_stats(a, &st);
	cr_assert_eq(st.replied_no_rpc, 0, "responses are never answered");
	cr_assert_eq(st.drop_bad_pkt, 0);

	cr_assert_eq(urpc_nexus_destroy(a), 0);
	cr_assert_eq(urpc_nexus_destroy(b), 0);
}

Test(nexus, garbage_datagrams_are_dropped)
{
	struct urpc_nexus *a = nexus_new();
	struct urpc_sm_queue *q = queue_new();
	struct sockaddr_in to = addr_of(a);
	uint8_t buf[512], valid[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt p, got;
	struct urpc_nexus_stats st;
	struct sockaddr_in from;
	size_t valid_len, i;
	unsigned sent_bad = 0;
	int fd;

	cr_assert_eq(urpc__nexus_attach_rpc(a, 3, q), 0);
	fd = bound_socket(&from);

	make_req(&p, URPC_SM_PKT_CONNECT_REQ, 1, 3);
	p.cookie = urpc__nexus_cookie(a, &from);
	p.nx_nonce = 0x0123456789abcdefull; /* its half of a secret (nexus_auth.h) */
	valid_len = urpc__sm_encode(&p, valid);

#define SEND_BAD(b, l)                                                                             \
	do {                                                                                       \
		cr_assert_eq(sendto(fd, b, l, 0, (struct sockaddr *)&to, sizeof(to)),              \
			     (ssize_t)(l));                                                        \
		sent_bad++;                                                                        \
	} while (0)

	SEND_BAD(buf, 0); /* empty */
	memset(buf, 0xa5, sizeof(buf));
	SEND_BAD(buf, 1);		/* one byte of noise */
	SEND_BAD(buf, 100);		/* noise */
	SEND_BAD(valid, valid_len - 1); /* truncated */
	memcpy(buf, valid, valid_len);
	SEND_BAD(buf, valid_len + 1); /* one byte too many */
	SEND_BAD(buf, sizeof(buf));   /* larger than any SM packet */
	buf[0] ^= 0xff;
	SEND_BAD(buf, valid_len); /* bad magic */
	memcpy(buf, valid, valid_len);
	buf[3] = 0x42;
	SEND_BAD(buf, valid_len); /* bad type */
#undef SEND_BAD

	/* Datagrams between two sockets on loopback arrive in order: this one comes last. */
	p.seq = 4242;
	valid_len = urpc__sm_encode(&p, valid);
	cr_assert_eq(sendto(fd, valid, valid_len, 0, (struct sockaddr *)&to, sizeof(to)),
		     (ssize_t)valid_len);
	cr_assert_eq(wait_pop(q, &got, WAIT_MS), 1, "the valid packet never came");
	cr_assert_eq(got.seq, 4242, "only the valid packet is queued");
	cr_assert_eq(urpc__sm_queue_pop(q, &got), 0);

	urpc__nexus_get_stats(a, &st);
	cr_assert_eq(st.drop_bad_pkt, sent_bad);
	cr_assert_eq(st.sm_rx, sent_bad + 1);
	for (i = 0; i < 3; i++) /* the SM thread survives it all */
		cr_assert_eq(urpc__sm_queue_pop(q, &got), 0);

	close(fd);
	urpc__nexus_detach_rpc(a, 3);
	cr_assert_eq(urpc_nexus_destroy(a), 0);
	free(q);
}

static void count_ping(void *arg, const struct urpc_nx_peer *p)
{
	(void)p;
	(*(unsigned *)arg)++;
}

/*
 * A stall of our own (the SM thread or the whole process not running) does
 * not count as the peer's silence: a tick far later than the last one asked
 * for credits the lateness to the peer. Silence while we do run on time
 * still fails the peer after its timeout.
 */
Test(nexus, own_stall_is_not_the_peers_silence)
{
	const uint64_t ms = 1000000, ping = 100 * ms, timeout = 500 * ms;
	struct urpc_nx_peers t;
	struct sockaddr_in a;
	struct urpc_nx_peer *p;
	uint64_t now = 1000 * ms, due, silent_from;
	unsigned pings = 0;
	bool failed;

	memset(&t, 0, sizeof(t));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(4242);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p = urpc__nxp_get(&t, &a, ping, timeout, 1, now);
	cr_assert_not_null(p);
	urpc__nxp_seen(&t, &a, 77, 1, 0, 0, now); /* heard once: its silence counts */
	due = urpc__nxp_tick(&t, now, &failed, count_ping, &pings);
	cr_assert_not(failed);
	cr_assert_eq(pings, 1, "a new peer is pinged at once");
	cr_assert_leq(due, now + ping);

	/* Two seconds late (four timeouts): our stall, not the peer's silence. */
	now = due + 2000 * ms;
	due = urpc__nxp_tick(&t, now, &failed, count_ping, &pings);
	cr_assert_not(failed, "our own 2 s stall failed a peer that had 500 ms");
	cr_assert_eq(pings, 2, "a ping goes out on the tick after a stall");

	/* From now on we run on time and the peer says nothing: it fails. */
	silent_from = now - ping; /* at most one interval was credited beyond the last ping */
	while (!failed && now < silent_from + 4 * timeout) {
		now = due;
		due = urpc__nxp_tick(&t, now, &failed, count_ping, &pings);
	}
	cr_assert(failed, "a silent peer was not failed while we ticked on time");
	cr_assert_geq(now - silent_from, timeout, "failed after %llu ms of silence",
		      (unsigned long long)((now - silent_from) / ms));
	urpc__nxp_put(&t, p, 1, now);
	urpc__nxp_clear(&t);
}

/*
 * A tick whose time was read before another thread stamped the peer heard
 * (its first session, made while the tick waited for the Nexus's lock)
 * sees a stamp after its own time: no silence, not an unsigned wrap to a
 * silence of centuries. Before, the peer failed at once ("no heartbeat",
 * -EHOSTDOWN: the kv_smoke client reset 0.36 s into its run under ASan
 * beside the stress run's hogs).
 */
Test(nexus, a_stamp_after_the_ticks_time_is_no_silence)
{
	const uint64_t ms = 1000000, ping = 100 * ms, timeout = 10000 * ms;
	struct urpc_nx_peers t;
	struct sockaddr_in a;
	struct urpc_nx_peer *p;
	uint64_t now = 1000 * ms;
	unsigned pings = 0;
	bool failed = true;

	memset(&t, 0, sizeof(t));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(4244);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p = urpc__nxp_get(&t, &a, ping, timeout, 1, now + 5 * ms);
	cr_assert_not_null(p);
	urpc__nxp_seen(&t, &a, 77, 1, 0, 0, now + 5 * ms);
	(void)urpc__nxp_tick(&t, now, &failed, count_ping, &pings);
	cr_assert_not(failed, "a stamp 5 ms after the tick's time failed the peer");
	cr_assert_eq(urpc__nxp_fail_gen(p), 0);
	urpc__nxp_put(&t, p, 1, now);
	urpc__nxp_clear(&t);
}

/*
 * A peer never heard from is pinged but never failed (nor logged as a lost
 * heartbeat): only connects wait on it, and they have their own time-out.
 */
Test(nexus, peer_never_heard_is_not_failed)
{
	const uint64_t ms = 1000000, ping = 100 * ms, timeout = 500 * ms;
	struct urpc_nx_peers t;
	struct sockaddr_in a;
	struct urpc_nx_peer *p;
	uint64_t now = 1000 * ms, due, end = now + 10 * timeout;
	unsigned pings = 0;
	bool failed = false;

	memset(&t, 0, sizeof(t));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(4243);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p = urpc__nxp_get(&t, &a, ping, timeout, 1, now);
	cr_assert_not_null(p);
	while (!failed && now < end) {
		due = urpc__nxp_tick(&t, now, &failed, count_ping, &pings);
		cr_assert_gt(due, now, "the tick asks to run again later");
		now = due;
	}
	cr_assert_not(failed, "a peer never heard from was failed");
	cr_assert_eq(urpc__nxp_fail_gen(p), 0);
	cr_assert_geq(pings, 40, "it is still pinged: %u pings", pings);
	cr_assert(urpc__nxp_refused(&t, &a), "its entry takes a refusal");
	cr_assert_eq(urpc__nxp_refused_gen(p), 1);
	urpc__nxp_put(&t, p, 1, now);
	urpc__nxp_clear(&t);
}

Test(nexus, sm_event_names)
{
	cr_assert_str_eq(urpc_sm_event_str(URPC_SM_CONNECTED), "connected");
	cr_assert_str_eq(urpc_sm_event_str(URPC_SM_CONNECT_FAILED), "connect_failed");
	cr_assert_str_eq(urpc_sm_event_str(URPC_SM_DISCONNECTED), "disconnected");
	cr_assert_str_eq(urpc_sm_event_str(URPC_SM_RESET), "reset");
	cr_assert_str_eq(urpc_sm_event_str((enum urpc_sm_event)0), "?");
}

/* ---- host:port ----------------------------------------------------------- */

Test(nexus, parse_host_port_accepts)
{
	struct sockaddr_in a;

	cr_assert_eq(urpc__parse_host_port("10.1.2.3:31850", &a), 0);
	cr_assert_eq(a.sin_family, AF_INET);
	cr_assert_eq(ntohs(a.sin_port), 31850);
	cr_assert_eq(ntohl(a.sin_addr.s_addr), 0x0a010203u);

	cr_assert_eq(urpc__parse_host_port("127.0.0.1:1", &a), 0);
	cr_assert_eq(ntohs(a.sin_port), 1);
	cr_assert_eq(urpc__parse_host_port("0.0.0.0:65535", &a), 0);
	cr_assert_eq(ntohs(a.sin_port), 65535);

	cr_assert_eq(urpc__parse_host_port("localhost:8080", &a), 0);
	cr_assert_eq(ntohs(a.sin_port), 8080);
	cr_assert_eq(ntohl(a.sin_addr.s_addr) >> 24, 127, "localhost is a loopback address");
}

Test(nexus, parse_host_port_rejects)
{
	static const char *bad[] = {
		"",
		":",
		":80",
		"127.0.0.1",
		"127.0.0.1:",
		"127.0.0.1:0",
		"127.0.0.1:00000",
		"127.0.0.1:65536",
		"127.0.0.1:99999",
		"127.0.0.1:123456",
		"127.0.0.1:-1",
		"127.0.0.1:+80",
		"127.0.0.1: 80",
		"127.0.0.1:80x",
		"127.0.0.1:0x50",
		"256.0.0.1:80",
		"1.2.3:80",
		"::1:80",
		"[::1]:80",
		"not a host:80",
		"-bad:80",
		"host_name:80",
	};
	struct sockaddr_in a;
	size_t i;

	for (i = 0; i < URPC_ARRAY_SIZE(bad); i++)
		cr_assert_eq(urpc__parse_host_port(bad[i], &a), -EINVAL, "'%s' accepted", bad[i]);
	cr_assert_eq(urpc__parse_host_port(NULL, &a), -EINVAL);
}
