/* SPDX-License-Identifier: MIT */
/*
 * Deadlines that follow nested calls (issue 35, item 6), on the loop
 * transport, one thread: a client calls a front Rpc whose handler calls a
 * back Rpc with urpc_req_enqueue_nested(). The request carries the time the
 * client has left (pkthdr.h, budget_us); each handler reads it with
 * urpc_req_deadline_ms(); a nested request fails with -ETIMEDOUT at the
 * client's deadline, not at its own longer time-out, and is refused at
 * once when that deadline has passed already.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#define FRONT_ID 1
#define CLI_ID 2
#define BACK_ID 3

#define T_FRONT 1 /* nested call to the back Rpc, answer deferred */
#define T_BACK 2  /* deferred: held in W.back_h */
#define T_ECHO 3  /* answers at once */

/* A nested request's own time-out: far beyond the client's deadline. */
#define OWN_TIMEOUT_MS 20000u

struct call {
	struct urpc_msgbuf req, resp;
	int status;
	int runs;
	uint64_t done_ms;
};

static struct world {
	struct urpc_nexus *nx;
	struct urpc_rpc *front, *cli, *back;
	int cli_sess, front_sess; /* client -> front; front -> back */
	int connected;
	uint8_t nested_type;	   /* what the front handler calls the back with */
	int64_t front_dl, back_dl; /* urpc_req_deadline_ms() in each handler */
	int nested_ret;
	struct urpc_req_handle *front_h, *back_h;
	struct call nested;
} W;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->status = status;
	c->runs++;
	c->done_ms = now_ms();
}

static void front_handler(struct urpc_req_handle *h, void *arg)
{
	W.front_h = h;
	W.front_dl = urpc_req_deadline_ms(h);
	W.nested_ret = urpc_req_enqueue_nested(h, W.front_sess, W.nested_type, &W.nested.req,
					       &W.nested.resp, cont, &W.nested, OWN_TIMEOUT_MS);
}

static void back_handler(struct urpc_req_handle *h, void *arg)
{
	W.back_h = h;
	W.back_dl = urpc_req_deadline_ms(h);
}

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	W.back_dl = urpc_req_deadline_ms(h);
	cr_assert_eq(urpc_msgbuf_resize(r, 4), 0);
	memset(r->buf, 0x3c, 4);
	cr_assert_eq(urpc_resp_enqueue(h, r), 0);
}

static void sm_cb(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status, void *arg)
{
	W.connected += ev == URPC_SM_CONNECTED ? 1 : 0;
}

static void pass(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.cli), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.front), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.back), 0);
}

/* Drive the three loops until *@n reaches @want or @ms pass; true if it did. */
static bool wait_for(const int *n, int want, unsigned ms)
{
	uint64_t end = now_ms() + ms;

	while (*n < want && now_ms() < end)
		pass();
	return *n >= want;
}

static void world_up(void)
{
	struct urpc_rpc_opts o;
	char hp[32];

	memset(&W, 0, sizeof(W));
	cr_assert_eq(urpc_nexus_create(NULL, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_FRONT, front_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_BACK, back_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_ECHO, echo_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.sm_handler = sm_cb;
	o.seed = 35;
	cr_assert_eq(urpc_rpc_create(W.nx, FRONT_ID, &o, &W.front), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, CLI_ID, &o, &W.cli), 0);
	cr_assert_eq(urpc_rpc_create(W.nx, BACK_ID, &o, &W.back), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.cli, hp, FRONT_ID, &W.cli_sess), 0);
	cr_assert_eq(urpc_session_connect(W.front, hp, BACK_ID, &W.front_sess), 0);
	cr_assert(wait_for(&W.connected, 2, 5000), "the two sessions did not connect");
	cr_assert_eq(urpc_msgbuf_alloc(W.front, 8, &W.nested.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.front, 64, &W.nested.resp), 0);
	W.nested.runs = 0;
	W.nested_ret = 1; /* not called yet */
}

static void answer(struct urpc_req_handle *h)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	cr_assert_eq(urpc_msgbuf_resize(r, 0), 0);
	cr_assert_eq(urpc_resp_enqueue(h, r), 0);
}

static void world_down(void)
{
	int i;

	for (i = 0; i < 50; i++)
		pass();
	cr_assert_eq(urpc_msgbuf_free(W.front, &W.nested.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.front, &W.nested.resp), 0);
	cr_assert_eq(urpc_rpc_destroy(W.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(W.front), 0);
	cr_assert_eq(urpc_rpc_destroy(W.back), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
}

/* The client's request to the front, with @timeout_ms (0: none). */
static void client_call(struct call *c, uint32_t timeout_ms)
{
	memset(c, 0, sizeof(*c));
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, 8, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.cli, 64, &c->resp), 0);
	cr_assert_eq(urpc_req_enqueue(W.cli, W.cli_sess, T_FRONT, &c->req, &c->resp, cont, c,
				      timeout_ms),
		     0);
}

static void client_free(struct call *c)
{
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c->req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.cli, &c->resp), 0);
}

TestSuite(deadline, .timeout = 60);

/*
 * The client gives 150 ms; the back Rpc never answers the nested request,
 * whose own time-out is 20 s: it fails with -ETIMEDOUT at the client's
 * deadline, and the back's handler saw that deadline too. Once it has
 * passed, another nested request is refused at once.
 */
Test(deadline, nested_call_fails_at_the_clients_deadline)
{
	struct call c, late = {0};
	uint64_t t0;

	world_up();
	W.nested_type = T_BACK;
	t0 = now_ms();
	client_call(&c, 150);
	cr_assert(wait_for(&W.nested.runs, 1, OWN_TIMEOUT_MS / 2),
		  "the nested request waited for its own time-out");
	cr_assert_eq(W.nested_ret, 0);
	cr_assert_eq(W.nested.status, -ETIMEDOUT, "nested: %s", urpc_strerror(W.nested.status));
	cr_assert_geq(W.nested.done_ms - t0, 140, "not before the client's deadline");
	cr_assert_lt(W.nested.done_ms - t0, 3000, "at the client's deadline, not its own 20 s");
	cr_assert(W.front_dl > 0 && W.front_dl <= 150, "the front saw %lld ms left",
		  (long long)W.front_dl);
	cr_assert(W.back_dl > 0 && W.back_dl <= W.front_dl, "the back saw %lld ms left",
		  (long long)W.back_dl);
	cr_assert(wait_for(&c.runs, 1, 5000));
	cr_assert_eq(c.status, -ETIMEDOUT);

	/* The front's answer is still deferred: its client's time is up. */
	cr_assert_eq(urpc_req_deadline_ms(W.front_h), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.front, 8, &late.req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.front, 64, &late.resp), 0);
	cr_assert_eq(urpc_req_enqueue_nested(W.front_h, W.front_sess, T_ECHO, &late.req, &late.resp,
					     cont, &late, OWN_TIMEOUT_MS),
		     -ETIMEDOUT, "nothing is sent for a client that gave up");
	cr_assert(!wait_for(&late.runs, 1, 50), "a refused request's continuation never runs");
	cr_assert_eq(urpc_msgbuf_free(W.front, &late.req), 0);
	cr_assert_eq(urpc_msgbuf_free(W.front, &late.resp), 0);

	answer(W.front_h);
	answer(W.back_h);
	client_free(&c);
	world_down();
}

/* In time, the nested request is answered; the back sees the client's time, not its own 20 s. */
Test(deadline, nested_call_in_time_carries_the_clients_deadline)
{
	struct call c;

	world_up();
	W.nested_type = T_ECHO;
	client_call(&c, 5000);
	cr_assert(wait_for(&W.nested.runs, 1, 5000));
	cr_assert_eq(W.nested.status, 0, "nested: %s", urpc_strerror(W.nested.status));
	cr_assert(W.back_dl > 0 && W.back_dl <= 5000, "the back saw %lld ms left",
		  (long long)W.back_dl);
	answer(W.front_h);
	cr_assert(wait_for(&c.runs, 1, 5000));
	cr_assert_eq(c.status, 0);
	client_free(&c);
	world_down();
}

/* A client without a deadline: none for the front; the nested request has its own alone. */
Test(deadline, no_client_deadline_leaves_the_nested_ones_own)
{
	struct call c;

	world_up();
	W.nested_type = T_ECHO;
	client_call(&c, 0);
	cr_assert(wait_for(&W.nested.runs, 1, 5000));
	cr_assert_eq(W.front_dl, URPC_NO_DEADLINE);
	cr_assert(W.back_dl > 0 && W.back_dl <= (int64_t)OWN_TIMEOUT_MS &&
			  W.back_dl > (int64_t)OWN_TIMEOUT_MS - 5000,
		  "the back saw %lld ms left", (long long)W.back_dl);
	cr_assert_eq(urpc_req_deadline_ms(NULL), -EINVAL);
	answer(W.front_h);
	cr_assert_eq(urpc_req_deadline_ms(W.front_h), -EINVAL, "answered: no longer the handler's");
	cr_assert(wait_for(&c.runs, 1, 5000));
	cr_assert_eq(c.status, 0);
	client_free(&c);
	world_down();
}
