/* SPDX-License-Identifier: MIT */
/*
 * Protocol tests: crafted packets injected at a server Rpc from a raw loop
 * endpoint, checked against the server's counters and handler runs; plus
 * the engine's argument and thread checks.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "rpc/engine.h"
#include "rpc/pkthdr.h"
#include "rpc/rpc.h"
#include "util/log.h"

#define T_ECHO 1
#define T_DEFER 2
#define T_FILL 3
#define T_NOHANDLER 9

static int echo_runs;
static struct urpc_req_handle *deferred_h;	  /* the latest deferred request */
static struct urpc_req_handle *deferred_all[128]; /* every one, in arrival order */
static int n_deferred;

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	size_t len;
	const uint8_t *d = urpc_req_data(h, &len);

	echo_runs++;
	memcpy(resp->buf, d, len);
	cr_assert_eq(urpc_msgbuf_resize(resp, len), 0);
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0);
}

static void defer_handler(struct urpc_req_handle *h, void *arg)
{
	deferred_h = h;
	cr_assert_lt(n_deferred, 128);
	deferred_all[n_deferred++] = h;
}

/* Answer with as many bytes as the preallocated buffer says it holds. */
static void fill_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);

	memset(resp->buf, 0x5a, resp->max_data_size);
	cr_assert_eq(urpc_msgbuf_resize(resp, resp->max_data_size), 0);
	cr_assert_eq(urpc_resp_enqueue(h, resp), 0, "a full preallocated buffer must be accepted");
}

/* Answer deferred request @h with @len bytes of @fill. */
static void answer(struct urpc_req_handle *h, uint8_t fill, size_t len)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	memset(r->buf, fill, len);
	cr_assert_eq(urpc_msgbuf_resize(r, len), 0);
	cr_assert_eq(urpc_resp_enqueue(h, r), 0);
}

struct env {
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	int connected;
};

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	struct env *e = arg;

	if (ev == URPC_SM_CONNECTED)
		e->connected = 1;
	else
		e->connected = -1;
}

/* Run both loops until *flag != 0 or 3 s pass. */
static void pump_until(struct env *e, volatile int *flag)
{
	uint64_t end = urpc__now_ns() + 3000000000ull;

	while (!*flag && urpc__now_ns() < end) {
		cr_assert_eq(urpc_rpc_run_event_loop_once(e->srv), 0);
		cr_assert_eq(urpc_rpc_run_event_loop_once(e->cli), 0);
	}
	cr_assert(*flag, "timed out waiting");
}

static void pump_n(struct env *e, int n)
{
	while (n-- > 0) {
		urpc_rpc_run_event_loop_once(e->srv);
		urpc_rpc_run_event_loop_once(e->cli);
	}
}

/* Server and client Rpcs with session windows @srv_win and @cli_win, one session connected. */
static void env_up_win(struct env *e, unsigned srv_win, unsigned cli_win)
{
	struct urpc_rpc_opts o;
	char addr[64];

	memset(e, 0, sizeof(*e));
	echo_runs = 0;
	deferred_h = NULL;
	n_deferred = 0;
	cr_assert_eq(urpc_nexus_create(NULL, &e->nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(e->nx, T_ECHO, echo_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(e->nx, T_DEFER, defer_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(e->nx, T_FILL, fill_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.seed = 42;
	o.session_window = srv_win;
	cr_assert_eq(urpc_rpc_create(e->nx, 1, &o, &e->srv), 0);
	o.sm_handler = sm_cb;
	o.sm_arg = e;
	o.session_window = cli_win;
	cr_assert_eq(urpc_rpc_create(e->nx, 2, &o, &e->cli), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", urpc_nexus_port(e->nx));
	cr_assert_eq(urpc_session_connect(e->cli, addr, 1, &e->sess), 0);
	pump_until(e, &e->connected);
	cr_assert_eq(e->connected, 1);
}

static void env_up(struct env *e)
{
	env_up_win(e, URPC_SESSION_WINDOW_DEFAULT, URPC_SESSION_WINDOW_DEFAULT);
}

static void env_down(struct env *e)
{
	cr_assert_eq(urpc_rpc_destroy(e->cli), 0);
	cr_assert_eq(urpc_rpc_destroy(e->srv), 0);
	cr_assert_eq(urpc_nexus_destroy(e->nx), 0);
}

struct call {
	int done;
	int status;
	int runs;
	struct urpc_msgbuf *resp; /* what the continuation got */
};

static void cont_cb(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->runs++;
	c->done = 1;
	c->status = status;
	c->resp = resp;
}

/* One RPC of @type with @len bytes; returns the continuation's status. */
static int do_rpc(struct env *e, uint8_t type, size_t len, uint32_t timeout_ms, struct call *c)
{
	struct urpc_msgbuf req, resp;
	int ret;

	memset(c, 0, sizeof(*c));
	cr_assert_eq(urpc_msgbuf_alloc(e->cli, len, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(e->cli, urpc_rpc_max_msg_size(e->cli), &resp), 0);
	memset(req.buf, 0x5a, len);
	ret = urpc_req_enqueue(e->cli, e->sess, type, &req, &resp, cont_cb, c, timeout_ms);
	cr_assert_eq(ret, 0, "enqueue: %s", urpc_strerror(ret));
	cr_assert_eq(c->runs, 0, "a continuation never runs inside enqueue");
	pump_until(e, &c->done);
	if (c->status == 0) {
		cr_assert_eq(resp.data_size, len, "got %zu want %zu", resp.data_size, len);
		cr_assert_eq(resp.buf[len - 1], 0x5a);
	}
	urpc_msgbuf_free(e->cli, &req);
	urpc_msgbuf_free(e->cli, &resp);
	return c->status;
}

/* A raw loop endpoint that can send crafted datagrams to the server Rpc. */
struct raw {
	struct urpc_tp *tp;
	struct urpc_tp_peer *peer;
};

static void raw_open(struct env *e, struct raw *r)
{
	struct urpc_tp *stp = urpc__rpc_transport(e->srv);
	struct urpc_tp_cfg cfg;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cr_assert_eq(urpc__tp_create(&cfg, &r->tp), 0);
	n = stp->ops->get_endpoint(stp, ep);
	cr_assert_eq(r->tp->ops->resolve_peer(r->tp, ep, n, &r->peer), 0);
}

static void raw_close(struct raw *r)
{
	r->tp->ops->release_peer(r->tp, r->peer);
	cr_assert_eq(r->tp->ops->destroy(r->tp), 0);
}

static void raw_send(struct raw *r, const void *pkt, uint32_t len)
{
	struct urpc_tp_tx tx = {.peer = r->peer, .hdr = pkt, .hdr_len = len};

	cr_assert_eq(r->tp->ops->tx_burst(r->tp, &tx, 1), 1);
}

/* A request packet for the server's side of the client's session. */
static void craft(struct env *e, uint8_t *pkt, uint8_t type, uint64_t req_num, uint32_t len)
{
	struct urpc_session_info info;

	cr_assert_eq(urpc__rpc_session_info(e->cli, e->sess, &info), 0);
	urpc__pkthdr_fill((struct urpc_pkthdr *)(void *)pkt, URPC_PKT_REQ, type, 0, len,
			  info.remote_num, req_num, info.token);
	memset(pkt + sizeof(struct urpc_pkthdr), 0x5a, len);
}

static struct urpc_rpc_stats srv_stats(struct env *e)
{
	struct urpc_rpc_stats st;

	cr_assert_eq(urpc_rpc_get_stats(e->srv, &st), 0);
	return st;
}

Test(protocol, crafted_packets_are_checked)
{
	uint8_t pkt[128] __attribute__((aligned(8)));
	struct urpc_rpc_stats before, after, cst;
	struct env e;
	struct raw r;
	struct call c;

	env_up(&e);
	cr_assert_eq(do_rpc(&e, T_ECHO, 32, 0, &c), 0); /* slot 0, request number 8 */
	cr_assert_eq(echo_runs, 1);
	raw_open(&e, &r);

	/*
	 * Positive control: a new request number runs the handler. Slot 7, far
	 * ahead of the client's own numbers, so the client's later requests
	 * are not mistaken for duplicates of it.
	 */
	craft(&e, pkt, T_ECHO, 7 + 8 * 100, 8);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);
	cr_assert_eq(echo_runs, 2, "an injected new request must run the handler");

	/* Duplicate of that request: answered from the stored response. */
	before = srv_stats(&e);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(echo_runs, 2, "a duplicate must not run the handler again");
	cr_assert_eq(after.dup_reqs, before.dup_reqs + 1);
	cr_assert_eq(after.pkts_tx, before.pkts_tx + 1, "the stored response is sent again");
	cr_assert_eq(urpc_rpc_get_stats(e.cli, &cst), 0);
	cr_assert_geq(cst.dup_resps + cst.drop_stale, 2, "the client drops unsolicited responses");

	/* An older request number on a slot: stale (slot 0 is at 8 now). */
	before = srv_stats(&e);
	craft(&e, pkt, T_ECHO, 0, 8);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(after.drop_stale, before.drop_stale + 1);
	cr_assert_eq(echo_runs, 2);

	/* Wrong token. */
	before = srv_stats(&e);
	craft(&e, pkt, T_ECHO, 24, 8);
	((struct urpc_pkthdr *)(void *)pkt)->token ^= 1;
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(after.drop_bad_session, before.drop_bad_session + 1);

	/* Unknown session number. */
	craft(&e, pkt, T_ECHO, 24, 8);
	((struct urpc_pkthdr *)(void *)pkt)->dest_session = htole32(999);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(after.drop_bad_session, before.drop_bad_session + 2);

	/* Bad magic, short datagram, size that disagrees with the length. */
	before = srv_stats(&e);
	craft(&e, pkt, T_ECHO, 24, 8);
	pkt[0] ^= 0xff;
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	raw_send(&r, pkt, 7);
	craft(&e, pkt, T_ECHO, 24, 8);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 4);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(after.drop_bad_hdr, before.drop_bad_hdr + 3);
	cr_assert_eq(echo_runs, 2, "no bad packet reaches a handler");

	/* The session still works. */
	cr_assert_eq(do_rpc(&e, T_ECHO, 100, 0, &c), 0);
	raw_close(&r);
	env_down(&e);
}

/*
 * A free session number below the highest in use names the table's
 * placeholder (engine.h), not NULL: a datagram to it is dropped whatever it
 * carries, and one forged to match the placeholder itself (first word 0,
 * token 0, its size right) is dropped as stale or a duplicate and writes
 * nothing.
 */
/*
 * The server answers a duplicate of a request it has answered from its
 * stored response; the client, whose slot is FREE again by then, counts a
 * duplicate answer (not a stale one) and runs no continuation twice.
 */
Test(protocol, a_duplicate_answer_to_a_free_slot_is_counted_and_ignored)
{
	uint8_t pkt[128] __attribute__((aligned(8)));
	struct urpc_rpc_stats sbefore, safter, cbefore, cafter;
	struct env e;
	struct raw r;
	struct call c;

	env_up(&e);
	/* Slot 0's first request: number 0 plus the stride (client.c's slot_take()). */
	cr_assert_eq(do_rpc(&e, T_ECHO, 8, 0, &c), 0);
	cr_assert_eq(c.runs, 1);
	raw_open(&e, &r);
	sbefore = srv_stats(&e);
	cr_assert_eq(urpc_rpc_get_stats(e.cli, &cbefore), 0);

	craft(&e, pkt, T_ECHO, URPC_SESSION_WINDOW_MAX, 8);
	raw_send(&r, pkt, sizeof(struct urpc_pkthdr) + 8);
	pump_n(&e, 20);

	safter = srv_stats(&e);
	cr_assert_eq(urpc_rpc_get_stats(e.cli, &cafter), 0);
	cr_assert_eq(safter.dup_reqs, sbefore.dup_reqs + 1, "the server saw the duplicate");
	cr_assert_eq(echo_runs, 1, "and ran no handler for it");
	cr_assert_eq(cafter.dup_resps, cbefore.dup_resps + 1, "the client counts a duplicate");
	cr_assert_eq(cafter.drop_stale, cbefore.drop_stale, "not a stale answer");
	cr_assert_eq(c.runs, 1, "the continuation ran once");
	raw_close(&r);
	env_down(&e);
}

Test(protocol, a_free_session_number_takes_no_datagram)
{
	uint8_t pkt[128] __attribute__((aligned(8)));
	static union urpc_sess_placeholder copy;
	struct urpc_rpc_stats before, after;
	struct urpc_session_info info;
	struct urpc_pkthdr *h = (struct urpc_pkthdr *)(void *)pkt;
	char addr[64];
	struct env e;
	struct raw r;
	uint64_t end, req_num;
	int second;

	env_up(&e);
	cr_assert_eq(urpc__rpc_session_info(e.cli, e.sess, &info), 0);
	e.connected = 0;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", urpc_nexus_port(e.nx));
	cr_assert_eq(urpc_session_connect(e.cli, addr, 1, &second), 0);
	pump_until(&e, &e.connected);
	cr_assert_eq(urpc_session_disconnect(e.cli, e.sess), 0);
	/* The server closes its side when the DISCONNECT comes: a few passes. */
	end = urpc__now_ns() + 3000000000ull;
	while (srv_stats(&e).sessions != 1 && urpc__now_ns() < end)
		pump_n(&e, 1);
	cr_assert_eq(srv_stats(&e).sessions, 1, "the server closed the first session");
	cr_assert_lt(info.remote_num, e.srv->hi_session, "a free number below the highest");
	cr_assert_null(urpc__sess_at(e.srv, info.remote_num));
	cr_assert_eq(e.srv->sessions[info.remote_num], &urpc__sess_none);
	raw_open(&e, &r);
	memcpy(&copy, &urpc__sess_placeholder, sizeof(copy));

	/* A well-formed request to the free number: a bad session. */
	before = srv_stats(&e);
	urpc__pkthdr_fill(h, URPC_PKT_REQ, T_ECHO, 0, 8, info.remote_num, 8, info.token);
	raw_send(&r, pkt, sizeof(*h) + 8);
	pump_n(&e, 20);
	after = srv_stats(&e);
	cr_assert_eq(after.drop_bad_session, before.drop_bad_session + 1);

	/* One that matches the placeholder's fields (a response to its one FREE slot). */
	for (req_num = 0; req_num < 9; req_num++) {
		memset(pkt, 0, sizeof(pkt));
		h->msg_size = htole32(8);
		h->dest_session = htole32(info.remote_num);
		h->req_num = htole64(req_num == 8 ? UINT64_MAX : req_num);
		before = srv_stats(&e);
		raw_send(&r, pkt, sizeof(*h) + 8);
		pump_n(&e, 20);
		after = srv_stats(&e);
		cr_assert_eq(after.drop_stale + after.dup_resps,
			     before.drop_stale + before.dup_resps + 1, "request number %lu",
			     (unsigned long)req_num);
	}
	cr_assert_eq(echo_runs, 0, "no handler ran");
	cr_assert_eq(memcmp(&copy, &urpc__sess_placeholder, sizeof(copy)), 0, "nothing wrote it");
	raw_close(&r);
	env_down(&e);
}

Test(protocol, unknown_request_type_gets_an_error)
{
	struct env e;
	struct call c;
	struct urpc_rpc_stats st;

	env_up(&e);
	cr_assert_eq(do_rpc(&e, T_NOHANDLER, 16, 0, &c), -ENOSYS);
	cr_assert_eq(c.runs, 1);
	cr_assert_eq(urpc_rpc_get_stats(e.srv, &st), 0);
	cr_assert_eq(st.unknown_req_type, 1);
	env_down(&e);
}

/*
 * The preallocated response buffer holds urpc_rpc_max_msg_size() bytes, and
 * says so: it used to report its pool class's size (4096 on loop for 4056),
 * so a handler that filled it to max_data_size had its response refused and
 * the request never answered (found by tests/fuzz/fuzz_datapath; the KV
 * server answers GETs that way: values just above one datagram timed out).
 */
Test(protocol, preallocated_response_holds_the_max_message_size)
{
	struct urpc_msgbuf req, resp;
	struct env e;
	struct call c = {0};

	env_up(&e);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, urpc_rpc_max_msg_size(e.cli), &resp), 0);
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_FILL, &req, &resp, cont_cb, &c, 1000), 0);
	pump_until(&e, &c.done);
	cr_assert_eq(c.status, 0, "status %d", c.status);
	cr_assert_eq(resp.data_size, urpc_rpc_max_msg_size(e.srv));
	urpc_msgbuf_free(e.cli, &req);
	urpc_msgbuf_free(e.cli, &resp);
	env_down(&e);
}

Test(protocol, request_above_the_largest_message_is_refused)
{
	struct urpc_msgbuf req, resp;
	struct env e;
	struct call c = {0};

	env_up(&e);
	/* Above one datagram is a large message; above URPC_MAX_MSG_SIZE nothing. */
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, urpc_rpc_max_msg_size(e.cli) + 1, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 64, &resp), 0);
	req.data_size = (size_t)URPC_MAX_MSG_SIZE + 1; /* past what any buffer holds */
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_ECHO, &req, &resp, cont_cb, &c, 0),
		     -EMSGSIZE);
	req.data_size = 1;
	pump_n(&e, 10);
	cr_assert_eq(c.runs, 0, "a refused request never runs its continuation");
	urpc_msgbuf_free(e.cli, &req);
	urpc_msgbuf_free(e.cli, &resp);
	env_down(&e);
}

Test(protocol, deferred_response_and_deadline)
{
	struct urpc_msgbuf req, resp, *r;
	struct env e;
	struct call c = {0}, late = {0};

	env_up(&e);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 64, &resp), 0);
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_DEFER, &req, &resp, cont_cb, &c, 0), 0);
	for (int i = 0; i < 100000 && !deferred_h; i++)
		pump_n(&e, 1);
	cr_assert_not_null(deferred_h, "the deferring handler never ran");
	pump_n(&e, 50);
	cr_assert_eq(c.runs, 0, "no response yet");
	r = urpc_req_resp_msgbuf(deferred_h);
	memcpy(r->buf, "later", 5);
	urpc_msgbuf_resize(r, 5);
	cr_assert_eq(urpc_resp_enqueue(deferred_h, r), 0);
	cr_assert_eq(urpc_resp_enqueue(deferred_h, r), -EINVAL, "one response per request");
	pump_until(&e, &c.done);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(resp.data_size, 5);
	cr_assert(memcmp(resp.buf, "later", 5) == 0);

	/* A deadline on a request whose handler never answers. */
	deferred_h = NULL;
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_DEFER, &req, &resp, cont_cb, &late, 50), 0);
	pump_until(&e, &late.done);
	cr_assert_eq(late.status, -ETIMEDOUT);
	cr_assert_eq(late.runs, 1);
	pump_n(&e, 100);
	cr_assert_eq(late.runs, 1, "exactly once");
	urpc_msgbuf_free(e.cli, &req);
	urpc_msgbuf_free(e.cli, &resp);
	env_down(&e);
}

struct wrong_thread {
	struct env *e;
	int loop, enqueue, alloc, stats, disconnect;
};

static void *wrong_thread_fn(void *arg)
{
	struct wrong_thread *w = arg;
	struct urpc_msgbuf mb = {0};
	struct urpc_rpc_stats st;

	w->loop = urpc_rpc_run_event_loop_once(w->e->cli);
	w->enqueue = urpc_req_enqueue(w->e->cli, w->e->sess, T_ECHO, &mb, &mb, cont_cb, NULL, 0);
	w->alloc = urpc_msgbuf_alloc(w->e->cli, 64, &mb);
	w->stats = urpc_rpc_get_stats(w->e->cli, &st);
	w->disconnect = urpc_session_disconnect(w->e->cli, w->e->sess);
	return NULL;
}

Test(protocol, wrong_thread_calls_are_refused)
{
	struct wrong_thread w = {0};
	pthread_t t;
	struct env e;

	env_up(&e);
	w.e = &e;
	cr_assert_eq(pthread_create(&t, NULL, wrong_thread_fn, &w), 0);
	pthread_join(t, NULL);
	cr_assert_eq(w.loop, -EPERM);
	cr_assert_eq(w.enqueue, -EPERM);
	cr_assert_eq(w.alloc, -EPERM);
	cr_assert_eq(w.stats, -EPERM);
	cr_assert_eq(w.disconnect, -EPERM);
	env_down(&e);
}

Test(protocol, late_handler_registration_is_refused)
{
	struct env e;

	env_up(&e);
	cr_assert_eq(urpc_nexus_register_handler(e.nx, 77, echo_handler, NULL), -EBUSY);
	cr_assert_eq(urpc_nexus_destroy(e.nx), -EBUSY, "Rpcs still exist");
	env_down(&e);
}

struct owned_call {
	struct urpc_msgbuf req, resp;
	struct call c;
	bool free_in_cont;
};

static void freeing_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct owned_call *oc = tag;

	oc->c.runs++;
	oc->c.status = status;
	oc->c.resp = resp;
	if (oc->free_in_cont) {
		cr_assert_eq(urpc_msgbuf_free(rpc, &oc->req), 0);
		cr_assert_eq(urpc_msgbuf_free(rpc, &oc->resp), 0);
	}
}

/* Destroy with requests in flight: their buffers come back to the continuations. */
static void destroy_in_flight(bool free_in_cont)
{
	struct owned_call oc[3];
	struct urpc_msgbuf held;
	struct env e;
	int i;

	env_up(&e);
	memset(oc, 0, sizeof(oc));
	for (i = 0; i < 3; i++) {
		oc[i].free_in_cont = free_in_cont;
		cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &oc[i].req), 0);
		cr_assert_eq(urpc_msgbuf_alloc(e.cli, 64, &oc[i].resp), 0);
		cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_DEFER, &oc[i].req, &oc[i].resp,
					      freeing_cont, &oc[i], 0),
			     0);
	}
	pump_n(&e, 50);
	/* A buffer the application holds blocks the destroy. */
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &held), 0);
	cr_assert_eq(urpc_rpc_destroy(e.cli), -EBUSY);
	cr_assert_eq(oc[0].c.runs, 0, "a refused destroy changes nothing");
	cr_assert_eq(urpc_msgbuf_free(e.cli, &held), 0);

	cr_assert_eq(urpc_rpc_destroy(e.cli), 0);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(oc[i].c.runs, 1);
		cr_assert_eq(oc[i].c.status, -ECONNRESET);
		cr_assert_eq(oc[i].c.resp, &oc[i].resp, "the response buffer comes back");
	}
	cr_assert_eq(urpc_rpc_destroy(e.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(e.nx), 0);
}

Test(protocol, destroy_with_requests_in_flight)
{
	destroy_in_flight(true);
}

Test(protocol, destroy_releases_buffers_continuations_kept)
{
	destroy_in_flight(false);
}

/*
 * The client's deadline frees a slot while the server's handler for it has
 * not answered. The next request on that slot must not take over the handle
 * the application still holds: it waits (the client retransmits) and runs
 * once the old response is out, and the old response never answers it.
 */
Test(protocol, newer_request_waits_for_the_slot_s_deferred_handler)
{
	struct urpc_msgbuf req, resp;
	struct urpc_rpc_stats before, after, cst;
	struct env e;
	struct call old = {0}, next = {0};

	env_up(&e);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(e.cli, 64, &resp), 0);
	memset(req.buf, 0x5a, 8);
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_DEFER, &req, &resp, cont_cb, &old, 30), 0);
	pump_until(&e, &old.done);
	cr_assert_eq(old.status, -ETIMEDOUT);
	cr_assert_eq(n_deferred, 1, "the handler ran before the deadline");

	/* Same slot (the lowest free one), next request number. */
	before = srv_stats(&e);
	cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_ECHO, &req, &resp, cont_cb, &next, 0), 0);
	pump_n(&e, 50);
	after = srv_stats(&e);
	cr_assert_eq(echo_runs, 0, "the slot is still held by the deferred request");
	cr_assert_geq(after.drop_stale, before.drop_stale + 1);
	cr_assert_eq(next.runs, 0);

	/* The late answer goes out for the old request and is dropped by the client. */
	answer(deferred_h, 0xee, 16);
	pump_until(&e, &next.done);
	cr_assert_eq(next.status, 0);
	cr_assert_eq(next.runs, 1);
	cr_assert_eq(echo_runs, 1);
	cr_assert_eq(resp.data_size, 8, "the echo, not the old request's answer");
	cr_assert_eq(resp.buf[0], 0x5a);
	cr_assert_eq(urpc_rpc_get_stats(e.cli, &cst), 0);
	cr_assert_geq(cst.retransmits, 1, "the dropped request was sent again");
	cr_assert_eq(old.runs, 1, "exactly once");
	cr_assert_eq(old.resp, &resp, "a timed-out request gets its response buffer back");
	urpc_msgbuf_free(e.cli, &req);
	urpc_msgbuf_free(e.cli, &resp);
	env_down(&e);
}

/*
 * Every slot of a session with window @win (client and server) busy: a
 * deadline behind a waiting request without one still fires, exactly
 * @win handlers run until a slot frees, and then the queue moves on.
 */
static void waiting_request_expires(unsigned srv_win, unsigned cli_win)
{
	const unsigned win = srv_win < cli_win ? srv_win : cli_win;
	const int n = (int)win + 2, waiting = (int)win;
	struct urpc_msgbuf req[URPC_SESSION_WINDOW_MAX + 2], resp[URPC_SESSION_WINDOW_MAX + 2];
	struct call c[URPC_SESSION_WINDOW_MAX + 2];
	struct env e;
	int i;

	env_up_win(&e, srv_win, cli_win);
	memset(c, 0, sizeof(c));
	for (i = 0; i < n; i++) {
		cr_assert_eq(urpc_msgbuf_alloc(e.cli, 8, &req[i]), 0);
		cr_assert_eq(urpc_msgbuf_alloc(e.cli, 64, &resp[i]), 0);
		/* All without a deadline except the last, which waits behind one. */
		cr_assert_eq(urpc_req_enqueue(e.cli, e.sess, T_DEFER, &req[i], &resp[i], cont_cb,
					      &c[i], i == n - 1 ? 30 : 0),
			     0);
	}
	pump_until(&e, &c[n - 1].done);
	cr_assert_eq(c[n - 1].status, -ETIMEDOUT);
	cr_assert_eq(n_deferred, (int)win,
		     "one handler per slot of the window %u, none for the queue", win);
	for (i = 0; i < n - 1; i++)
		cr_assert_eq(c[i].runs, 0, "request %d is still pending", i);

	/* Answer the slots; the waiting request gets one and is answered too. */
	for (i = 0; i < (int)win; i++)
		answer(deferred_all[i], (uint8_t)i, 4);
	for (i = 0; i < 100000 && n_deferred == (int)win; i++)
		pump_n(&e, 1);
	cr_assert_eq(n_deferred, (int)win + 1);
	answer(deferred_all[win], 0x77, 4);
	pump_until(&e, &c[waiting].done);
	for (i = 0; i < n; i++) {
		if (i < n - 1)
			pump_until(&e, &c[i].done);
		cr_assert_eq(c[i].runs, 1, "request %d: exactly once", i);
	}
	for (i = 0; i < (int)win; i++) {
		cr_assert_eq(c[i].status, 0);
		cr_assert_eq(resp[i].buf[0], (uint8_t)i, "request %d got its own answer", i);
	}
	cr_assert_eq(c[waiting].status, 0);
	cr_assert_eq(resp[waiting].buf[0], 0x77);
	for (i = 0; i < n; i++) {
		urpc_msgbuf_free(e.cli, &req[i]);
		urpc_msgbuf_free(e.cli, &resp[i]);
	}
	env_down(&e);
}

Test(protocol, waiting_request_expires_behind_one_without_deadline)
{
	waiting_request_expires(8, 8);
}

Test(protocol, window_32_carries_32_and_queues_the_rest)
{
	waiting_request_expires(32, 32);
}

Test(protocol, window_64_carries_64_and_queues_the_rest)
{
	waiting_request_expires(64, 64);
}

/* The server's window bounds the client's proposal, and a smaller proposal stands. */
Test(protocol, server_window_bounds_the_clients)
{
	waiting_request_expires(16, 64);
}

Test(protocol, client_window_below_the_servers_stands)
{
	waiting_request_expires(64, 4);
}

/* A window that is not a power of two from 1 to 64: -EINVAL and a line naming the option. */
Test(protocol, bad_session_window_is_einval)
{
	static const uint32_t bad[] = {0, 3, 12, 128, 1u << 20};
	struct urpc_rpc_opts o;
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc = NULL;
	unsigned i;

	cr_assert_eq(urpc_nexus_create(NULL, &nx), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		urpc_rpc_opts_init(&o);
		o.transport = URPC_TRANSPORT_LOOP;
		o.session_window = bad[i];
		cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), -EINVAL, "window %u", bad[i]);
	}
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.session_window = 1;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), 0, "a window of 1 is allowed");
	cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

/* A client Rpc whose session points at a UDP port where nobody answers. */
struct lone {
	struct urpc_nexus *nx;
	struct urpc_rpc *cli;
	int sock;
	int sess;
	int events, last_ev, last_status;
};

static void lone_sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
		       void *arg)
{
	struct lone *l = arg;

	l->events++;
	l->last_ev = ev;
	l->last_status = status;
}

static void lone_up(struct lone *l)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct urpc_rpc_opts o;
	char addr[64];

	memset(l, 0, sizeof(*l));
	l->sock = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_geq(l->sock, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(l->sock, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(l->sock, (struct sockaddr *)&a, &alen), 0);
	cr_assert_eq(urpc_nexus_create(NULL, &l->nx), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.seed = 7;
	o.connect_timeout_ms = 300;
	o.sm_handler = lone_sm_cb;
	o.sm_arg = l;
	cr_assert_eq(urpc_rpc_create(l->nx, 2, &o, &l->cli), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(a.sin_port));
	cr_assert_eq(urpc_session_connect(l->cli, addr, 1, &l->sess), 0);
}

/* Run the client's loop until *flag != 0 or 3 s pass. */
static void lone_pump_until(struct lone *l, volatile int *flag)
{
	uint64_t end = urpc__now_ns() + 3000000000ull;

	while (!*flag && urpc__now_ns() < end)
		cr_assert_eq(urpc_rpc_run_event_loop_once(l->cli), 0);
	cr_assert(*flag, "timed out waiting");
}

static void lone_down(struct lone *l)
{
	cr_assert_eq(urpc_rpc_destroy(l->cli), 0);
	cr_assert_eq(urpc_nexus_destroy(l->nx), 0);
	close(l->sock);
}

/* Deadlines run while the session still connects, behind a request without one. */
Test(protocol, deadline_fires_while_connecting)
{
	struct urpc_msgbuf req, resp;
	struct call a = {0}, b = {0};
	struct lone l;
	int disconnected;

	lone_up(&l);
	cr_assert_eq(urpc_msgbuf_alloc(l.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(l.cli, 64, &resp), 0);
	cr_assert_eq(urpc_req_enqueue(l.cli, l.sess, T_ECHO, &req, &resp, cont_cb, &a, 0), 0);
	cr_assert_eq(urpc_req_enqueue(l.cli, l.sess, T_ECHO, &req, &resp, cont_cb, &b, 20), 0);
	lone_pump_until(&l, &b.done);
	cr_assert_eq(b.status, -ETIMEDOUT);
	cr_assert_eq(l.events, 0, "the connect has not failed yet (300 ms)");
	cr_assert_eq(a.runs, 0);

	/* Disconnecting fails the other one, once, from the loop. */
	cr_assert_eq(urpc_session_disconnect(l.cli, l.sess), 0);
	cr_assert_eq(a.runs, 0, "never inside the call");
	lone_pump_until(&l, &a.done);
	cr_assert_eq(a.status, -ECONNRESET);
	disconnected = 0;
	for (uint64_t end = urpc__now_ns() + 3000000000ull;
	     urpc__now_ns() < end && !disconnected;) {
		cr_assert_eq(urpc_rpc_run_event_loop_once(l.cli), 0);
		disconnected = l.events > 0;
	}
	cr_assert_eq(l.events, 1);
	cr_assert_eq(l.last_ev, URPC_SM_DISCONNECTED);
	cr_assert_eq(a.runs, 1);
	cr_assert_eq(b.runs, 1);
	cr_assert_eq(a.resp, &resp, "a failed request gets its response buffer back");
	cr_assert_eq(b.resp, &resp);
	urpc_msgbuf_free(l.cli, &req);
	urpc_msgbuf_free(l.cli, &resp);
	lone_down(&l);
}

/* A RESET for a session that is still connecting is reported as the connect's failure. */
Test(protocol, reset_while_connecting_is_a_connect_failure)
{
	struct urpc_session_info info;
	struct urpc_msgbuf req, resp;
	struct urpc_sm_pkt p;
	struct call a = {0};
	struct lone l;

	lone_up(&l);
	cr_assert_eq(urpc_msgbuf_alloc(l.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(l.cli, 64, &resp), 0);
	cr_assert_eq(urpc_req_enqueue(l.cli, l.sess, T_ECHO, &req, &resp, cont_cb, &a, 0), 0);
	cr_assert_eq(urpc__rpc_session_info(l.cli, l.sess, &info), 0);
	cr_assert_eq(info.state, URPC_SESS_CONNECTING);

	/* Nothing else writes this client's SM queue: the silent port never answers. */
	memset(&p, 0, sizeof(p));
	p.type = URPC_SM_PKT_RESET;
	p.status = -ECONNRESET;
	p.client_rpc_id = 2;
	p.server_rpc_id = 1;
	p.transport = URPC_TRANSPORT_LOOP;
	p.client_sess = (uint32_t)l.sess;
	p.token = info.token;
	cr_assert_eq(urpc__sm_queue_push(l.cli->smq, &p), 0);
	lone_pump_until(&l, &a.done);
	cr_assert_eq(a.status, -ECONNRESET);
	cr_assert_eq(l.events, 1);
	cr_assert_eq(l.last_ev, URPC_SM_CONNECT_FAILED, "got event %d", l.last_ev);
	cr_assert_eq(l.last_status, -ECONNRESET);
	/* A failed session is freed once its event returned: the number names nothing. */
	cr_assert_eq(urpc_req_enqueue(l.cli, l.sess, T_ECHO, &req, &resp, cont_cb, &a, 0), -EINVAL,
		     "a failed session refuses requests at once");
	cr_assert_eq(a.runs, 1);
	urpc_msgbuf_free(l.cli, &req);
	urpc_msgbuf_free(l.cli, &resp);
	lone_down(&l);
}
