/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's own behaviour, beyond the contract suite: the RC
 * connection life cycle (a handshake time-out and a new attempt, a stalled
 * pair renewed, reconnection after the peer is resolved again), errors drained to their first cause, more
 * operations than an RC send queue holds, operations failing when their
 * memory or peer goes, send-queue back-pressure, and idle waiting.
 *
 * Runs where an RDMA port is active: on Soft-RoCE in tests/vm (A on
 * URPC_TEST_DEVICE_A, B on URPC_TEST_DEVICE_B); elsewhere every case skips.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "transport/verbs_dev.h"
#include "util/log.h"
#include "verbs_skip.h"
#include "verbs_tp.h"
#if URPC_HAVE_VERBS
#include "transport/verbs_int.h"
#include "transport/verbs_rc.h"
#endif

#define WAIT_NS 10000000000ull

struct pair {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b, *b2a;
};

/* The pair under test: serve() relays its control messages. */
static struct pair *cur;

struct region {
	uint8_t *mem;
	size_t len;
	struct urpc_tp_mr mr;
};

/* Skips the case unless URPC_TEST_DEVICE_A's RDMA port is active (verbs_skip.h). */
static void skip_without_device(void)
{
	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
}

static void pair_open(struct pair *p, uint32_t sq_depth, uint32_t timeout_ms)
{
	skip_without_device();
	cur = p;
	p->a = verbs_tp_open("URPC_TEST_DEVICE_A", sq_depth, 0, timeout_ms);
	p->b = verbs_tp_open("URPC_TEST_DEVICE_B", 0, 0, 0);
	verbs_tp_resolve(p->a, p->b, &p->a2b);
	verbs_tp_resolve(p->b, p->a, &p->b2a);
}

static void pair_close(struct pair *p)
{
	cur = NULL;
	if (p->a2b)
		p->a->ops->release_peer(p->a, p->a2b);
	p->b->ops->release_peer(p->b, p->b2a);
	cr_assert_eq(p->a->ops->destroy(p->a), 0);
	cr_assert_eq(p->b->ops->destroy(p->b), 0);
}

static void region_open(struct urpc_tp *tp, struct region *r, size_t len, uint8_t fill)
{
	r->len = len;
	r->mem = malloc(len);
	cr_assert_not_null(r->mem);
	memset(r->mem, fill, len);
	cr_assert_eq(tp->ops->reg_mem(tp, r->mem, len,
				      URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE,
				      &r->mr),
		     0);
}

static void region_close(struct urpc_tp *tp, struct region *r)
{
	tp->ops->dereg_mem(tp, &r->mr);
	free(r->mem);
}

/*
 * What session management does for an Rpc: carry the other endpoint's
 * control messages (verbs: the RC handshake) to @tp, over @tp's handle
 * for that endpoint.
 */
static void relay_to(struct urpc_tp *tp)
{
	struct urpc_tp_peer *from_peer, *via;
	uint8_t buf[URPC_TP_EP_MAX];
	struct urpc_tp *from;
	int n;

	if (!cur || !(tp->caps & URPC_TP_CAP_CTL))
		return;
	from = tp == cur->a ? cur->b : cur->a;
	via = tp == cur->a ? cur->a2b : cur->b2a;
	while ((n = from->ops->ctl_pop(from, &from_peer, buf)) > 0)
		if (via)
			tp->ops->ctl_push(tp, via, buf, (size_t)n);
}

/* Let @tp serve control messages and drop whatever datagrams came. */
static void serve(struct urpc_tp *tp)
{
	struct urpc_tp_rx rx[32];
	int n;

	relay_to(tp);
	n = tp->ops->rx_burst(tp, rx, 32);

	if (n > 0)
		tp->ops->rx_release(tp, rx, (unsigned)n);
}

/*
 * Reap completions on A (B serving when @serve_b) until @n came; stores
 * their statuses by wr_id (wr_ids are 0..n-1) and checks each comes once.
 */
static void reap(struct pair *p, unsigned n, int *status, bool serve_b)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_tp_comp c[16];
	bool *seen = calloc(n, 1);
	unsigned got = 0;
	int k, i;

	cr_assert_not_null(seen);
	while (got < n) {
		cr_assert_lt(urpc__now_ns(), end, "only %u of %u completions came", got, n);
		if (serve_b)
			serve(p->b);
		serve(p->a);
		k = p->a->ops->poll_completions(p->a, c, 16);
		for (i = 0; i < k; i++) {
			cr_assert_lt(c[i].wr_id, n);
			cr_assert(!seen[c[i].wr_id], "wr_id %lu completed twice",
				  (unsigned long)c[i].wr_id);
			seen[c[i].wr_id] = true;
			status[c[i].wr_id] = c[i].status;
		}
		got += (unsigned)k;
	}
	free(seen);
	for (i = 0; i < 100; i++) {
		serve(p->b);
		cr_assert_eq(p->a->ops->poll_completions(p->a, c, 16), 0, "an extra completion");
	}
}

static int read_one(struct pair *p, struct region *local, struct region *remote, bool serve_b)
{
	int st = 1;

	cr_assert_eq(p->a->ops->post_read(p->a, p->a2b, local->mem, &local->mr,
					  (uint64_t)(uintptr_t)remote->mem, remote->mr.rkey, 64, 0),
		     0);
	reap(p, 1, &st, serve_b);
	return st;
}

/*
 * A handshake without an answer fails what waited for it after the
 * one-sided time-out, and leaves no tombstone: the next operation asks
 * again (and waits its own time-out while the peer stays silent), and
 * once the peer answers, it works on the same peer handle, with no
 * session reset. Before, every later operation failed at once until the
 * peer was resolved again.
 */
Test(verbs, handshake_timeout_then_a_new_attempt, .timeout = 60)
{
	struct region local, remote;
	struct pair p;
	uint64_t t0;

	pair_open(&p, 0, 300);
	region_open(p.a, &local, 4096, 0);
	region_open(p.b, &remote, 4096, 0x5c);

	/* B does not poll: its side never answers the connection request. */
	t0 = urpc__now_ns();
	cr_assert_eq(read_one(&p, &local, &remote, false), -ETIMEDOUT);
	cr_assert_geq(urpc__now_ns() - t0, 250000000ull, "failed before its time-out");
	/* No tombstone: the next one asks again and waits its time-out too. */
	t0 = urpc__now_ns();
	cr_assert_eq(read_one(&p, &local, &remote, false), -ETIMEDOUT);
	cr_assert_geq(urpc__now_ns() - t0, 250000000ull, "failed at once: a tombstone");

	/* B polling: the same peer handle connects and works. */
	cr_assert_eq(read_one(&p, &local, &remote, true), 0);
	cr_assert_eq(local.mem[0], 0x5c);
	cr_assert_eq(local.mem[63], 0x5c);

	/* Resolved again (a session reset does this): it still works. */
	p.a->ops->release_peer(p.a, p.a2b);
	verbs_tp_resolve(p.a, p.b, &p.a2b);
	local.mem[0] = 0;
	cr_assert_eq(read_one(&p, &local, &remote, true), 0);
	cr_assert_eq(local.mem[0], 0x5c);

	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}

/*
 * A connection whose operations made no progress for the one-sided
 * time-out (a loaded host, an emulated NIC, a link that flapped) fails
 * what was posted with -ETIMEDOUT, but is no tombstone: the peer answered
 * its handshake, and whether it lives is the Nexus's call. The next
 * operation connects a new pair and works. Before, every later operation
 * failed at once until the session was reset, and a server that posted
 * the READ of a large request again (it does, while its peer lives) spun
 * on that failure: the largest message then hung under the stress run.
 * The deadline's scan calls urpc__verbs_rc_stall() on its own; here the
 * test calls it, on a READ in flight, because a stall of the NIC cannot
 * be made on demand (a handshake without an answer can: the test above).
 */
Test(verbs, a_stalled_connection_is_renewed_by_the_next_operation, .timeout = 60)
{
#if URPC_HAVE_VERBS
	enum { LEN = 1 << 20 };
	struct region local, remote;
	struct verbs_conn *c;
	int st = 1;
	struct pair p;

	pair_open(&p, 0, 0);
	region_open(p.a, &local, LEN, 0);
	region_open(p.b, &remote, LEN, 0x3c);
	cr_assert_eq(read_one(&p, &local, &remote, true), 0, "connect first");
	c = to_verbs(p.a)->conns;
	cr_assert_not_null(c);
	cr_assert_null(c->next, "one connection, to B");
	cr_assert_eq(c->rc_state, VERBS_RC_READY);

	/* A READ in flight when the deadline gives up on the pair. */
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local.mem, &local.mr,
					 (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey, LEN, 0),
		     0);
	urpc__verbs_rc_stall(to_verbs(p.a), c, "the test stalls it");
	reap(&p, 1, &st, true);
	/* Flushed with the cause (or, rarely, done before the flush). */
	cr_assert(st == -ETIMEDOUT || st == 0, "the stalled READ: %s", urpc_strerror(st));

	/* The next operation, on the same peer handle: a new pair, and it works. */
	memset(local.mem, 0, LEN);
	st = read_one(&p, &local, &remote, true);
	cr_assert_eq(st, 0, "after a stall: %s (a tombstone?)", urpc_strerror(st));
	cr_assert_eq(local.mem[0], 0x3c);
	cr_assert_eq(local.mem[63], 0x3c);
	cr_assert_eq(c->rc_state, VERBS_RC_READY);

	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
#else
	cr_skip_test("this build has no verbs transport (libibverbs not found)");
#endif
}

Test(verbs, flushed_operations_report_the_first_error, .timeout = 60)
{
	enum { N = 24 };
	struct region local, remote;
	int status[N], i;
	struct pair p;

	pair_open(&p, 0, 0);
	region_open(p.a, &local, 4096, 0);
	region_open(p.b, &remote, 4096, 0x77);
	cr_assert_eq(read_one(&p, &local, &remote, true), 0, "connect first");

	/* A WRITE with a wrong key, then READs behind it on the same QP. */
	cr_assert_eq(p.a->ops->post_write(p.a, p.a2b, local.mem, &local.mr,
					  (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey ^ 0x1234,
					  64, 0),
		     0);
	for (i = 1; i < N; i++)
		cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local.mem + 64 * i, &local.mr,
						 (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey,
						 64, (uint64_t)i),
			     0);
	reap(&p, N, status, true);
	cr_assert_eq(status[0], -EACCES);
	for (i = 1; i < N; i++)
		cr_assert(status[i] == -EACCES || status[i] == 0,
			  "operation %d behind the error: %s (a flush must report the cause)", i,
			  urpc_strerror(status[i]));
	cr_assert_eq(status[N - 1], -EACCES);

	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}

/* Post one READ or WRITE of @len bytes at @raddr and reap its single completion. */
static int one_op(struct pair *p, bool write, struct region *local, uint64_t raddr, uint32_t rkey,
		  size_t len)
{
	int st = 1, ret;

	if (write)
		ret = p->a->ops->post_write(p->a, p->a2b, local->mem, &local->mr, raddr, rkey, len,
					    0);
	else
		ret = p->a->ops->post_read(p->a, p->a2b, local->mem, &local->mr, raddr, rkey, len,
					   0);
	cr_assert_eq(ret, 0);
	reap(p, 1, &st, true);
	return st;
}

/*
 * Large operations go out in chunks, at most 16 at the NIC, each
 * completion sending the next (URPC_VERBS_RC_CHUNK=4096 here, so 64 KiB + 5
 * is 17 chunks: the last goes out only when one of the first 16 is back):
 * each operation still completes exactly once, the bytes land where they
 * belong whatever the remainder, and a chunk outside the peer's region
 * fails the whole operation, whether it is the last one or the first.
 */
Test(verbs, chunked_operations_complete_once_and_fail_on_any_chunk, .timeout = 120)
{
	enum { LEN = 65536 + 5 };
	struct region local, remote;
	uint64_t base;
	struct pair p;
	int i, st;

	cr_assert_eq(setenv("URPC_VERBS_RC_CHUNK", "4096", 1), 0);
	pair_open(&p, 0, 0);
	region_open(p.a, &local, LEN, 0);
	region_open(p.b, &remote, LEN, 0);
	base = (uint64_t)(uintptr_t)remote.mem;
	for (i = 0; i < LEN; i++)
		remote.mem[i] = (uint8_t)(i * 13 + i / 4097);
	st = one_op(&p, false, &local, base, remote.mr.rkey, LEN);
	cr_assert_eq(st, 0, "chunked READ: %s", urpc_strerror(st));
	cr_assert(memcmp(local.mem, remote.mem, LEN) == 0, "a chunked READ misplaced bytes");
	for (i = 0; i < LEN; i++)
		local.mem[i] = (uint8_t)(i * 5 + 1);
	st = one_op(&p, true, &local, base, remote.mr.rkey, LEN);
	cr_assert_eq(st, 0, "chunked WRITE: %s", urpc_strerror(st));
	cr_assert(memcmp(local.mem, remote.mem, LEN) == 0, "a chunked WRITE misplaced bytes");
	/* The last chunk (signaled) runs past the region. */
	st = one_op(&p, false, &local, base + 4096, remote.mr.rkey, LEN);
	cr_assert_eq(st, -EACCES, "last chunk outside: %s", urpc_strerror(st));
	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);

	/* A fresh connection: now the first chunk (unsignaled) is outside. */
	pair_open(&p, 0, 0);
	region_open(p.a, &local, LEN, 0);
	region_open(p.b, &remote, LEN, 0);
	base = (uint64_t)(uintptr_t)remote.mem;
	cr_assert_eq(read_one(&p, &local, &remote, true), 0, "connect first");
	st = one_op(&p, false, &local, base - 4096, remote.mr.rkey, LEN - 4096);
	cr_assert_eq(st, -EACCES, "first chunk outside: %s", urpc_strerror(st));
	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
	unsetenv("URPC_VERBS_RC_CHUNK");
}

Test(verbs, more_operations_than_an_rc_queue_holds, .timeout = 120)
{
	enum { N = 200, LEN = 1024 };
	struct region local, remote;
	struct urpc_tp_comp c;
	int status[256], i, ret;
	struct pair p;

	pair_open(&p, 0, 0);
	region_open(p.a, &local, (size_t)N * LEN, 0);
	region_open(p.b, &remote, (size_t)N * LEN, 0);
	for (i = 0; i < N * LEN; i++)
		remote.mem[i] = (uint8_t)(i * 7 + i / LEN);
	for (i = 0; i < N; i++)
		cr_assert_eq(
			p.a->ops->post_read(p.a, p.a2b, local.mem + (size_t)i * LEN, &local.mr,
					    (uint64_t)(uintptr_t)remote.mem + (uint64_t)i * LEN,
					    remote.mr.rkey, LEN, (uint64_t)i),
			0);
	reap(&p, N, status, true);
	for (i = 0; i < N; i++)
		cr_assert_eq(status[i], 0, "READ %d: %s", i, urpc_strerror(status[i]));
	cr_assert(memcmp(local.mem, remote.mem, (size_t)N * LEN) == 0, "READs corrupted data");

	/* The table holds 256: the next one is refused without a completion. */
	for (i = 0; i < 256; i++)
		cr_assert_eq(p.a->ops->post_write(p.a, p.a2b, local.mem, &local.mr,
						  (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey,
						  LEN, (uint64_t)i),
			     0);
	ret = p.a->ops->post_write(p.a, p.a2b, local.mem, &local.mr,
				   (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey, LEN, 999);
	cr_assert_eq(ret, -EAGAIN);
	reap(&p, 256, status, true);
	for (i = 0; i < 256; i++)
		cr_assert_eq(status[i], 0);
	cr_assert_eq(p.a->ops->poll_completions(p.a, &c, 1), 0);

	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}

Test(verbs, release_fails_operations_in_flight, .timeout = 60)
{
	enum { N = 8 };
	struct region local, remote;
	struct urpc_tp_comp c[N + 1];
	struct pair p;
	int i, k, got = 0, st;
	bool seen[N] = {0};

	pair_open(&p, 0, 0);
	region_open(p.a, &local, (size_t)N << 20, 0);
	region_open(p.b, &remote, (size_t)N << 20, 0);
	cr_assert_eq(read_one(&p, &local, &remote, true), 0, "connect first");
	for (i = 0; i < N; i++)
		cr_assert_eq(
			p.a->ops->post_read(p.a, p.a2b, local.mem + ((size_t)i << 20), &local.mr,
					    (uint64_t)(uintptr_t)remote.mem + ((uint64_t)i << 20),
					    remote.mr.rkey, 1 << 20, (uint64_t)i),
			0);
	/* Released at once: each completes once, done or reset; none later. */
	p.a->ops->release_peer(p.a, p.a2b);
	p.a2b = NULL;
	k = p.a->ops->poll_completions(p.a, c, N + 1);
	cr_assert_eq(k, N, "every operation completed by the release");
	for (i = 0; i < k; i++) {
		cr_assert_lt(c[i].wr_id, N);
		cr_assert(!seen[c[i].wr_id]);
		seen[c[i].wr_id] = true;
		st = c[i].status;
		cr_assert(st == 0 || st == -ECONNRESET, "status %s", urpc_strerror(st));
		got++;
	}
	cr_assert_eq(got, N);
	for (i = 0; i < 100; i++) {
		serve(p.b);
		cr_assert_eq(p.a->ops->poll_completions(p.a, c, N), 0);
	}
	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}

Test(verbs, dereg_fails_waiting_operations, .timeout = 60)
{
	struct region local, remote;
	struct urpc_tp_comp c;
	struct pair p;

	pair_open(&p, 0, 0);
	region_open(p.a, &local, 4096, 0);
	region_open(p.b, &remote, 4096, 0);
	/* B does not poll yet: the READ waits for the connection. */
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local.mem, &local.mr,
					 (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey, 64, 42),
		     0);
	region_close(p.a, &local);
	cr_assert_eq(p.a->ops->poll_completions(p.a, &c, 1), 1);
	cr_assert_eq(c.wr_id, 42);
	cr_assert_eq(c.status, -EIO);
	region_close(p.b, &remote);
	pair_close(&p);
}

Test(verbs, send_queue_back_pressure_and_registered_sends, .timeout = 60)
{
	enum { N = 64, LEN = 900 };
	struct urpc_tp_tx tx[N];
	struct urpc_tp_rx rx[32];
	struct region src;
	uint64_t end;
	struct pair p;
	unsigned sent = 0, got = 0;
	int k, i, ret;

	pair_open(&p, 16, 0);
	cr_assert_lt(p.a->max_inline, LEN, "these datagrams must not be inlined");
	region_open(p.a, &src, (size_t)N * LEN, 0);
	for (i = 0; i < N; i++) {
		memset(src.mem + (size_t)i * LEN, i + 1, LEN);
		tx[i] = (struct urpc_tp_tx){.peer = p.a2b,
					    .hdr = src.mem + (size_t)i * LEN,
					    .hdr_len = LEN,
					    .hdr_lkey = src.mr.lkey};
	}
	/* A send queue of 16 takes at most 16 of a burst of 64. */
	ret = p.a->ops->tx_burst(p.a, tx, N);
	cr_assert(ret > 0 && ret <= 16, "tx_burst took %d of %d with sq_depth 16", ret, N);
	sent = (unsigned)ret;
	end = urpc__now_ns() + WAIT_NS;
	while (got < N) {
		cr_assert_lt(urpc__now_ns(), end, "%u of %d datagrams arrived", got, N);
		if (sent < N) {
			ret = p.a->ops->tx_burst(p.a, tx + sent, N - sent);
			cr_assert_geq(ret, 0);
			sent += (unsigned)ret;
		}
		k = p.b->ops->rx_burst(p.b, rx, 32);
		for (i = 0; i < k; i++) {
			cr_assert_eq(rx[i].len, LEN);
			cr_assert_eq(rx[i].buf[0], rx[i].buf[LEN - 1]);
			cr_assert(rx[i].buf[0] >= 1 && rx[i].buf[0] <= N);
		}
		if (k > 0)
			p.b->ops->rx_release(p.b, rx, (unsigned)k);
		got += k > 0 ? (unsigned)k : 0;
	}
	p.a->ops->tx_flush(p.a);
	region_close(p.a, &src);
	pair_close(&p);
}

Test(verbs, idle_wait_wakes_on_a_datagram, .timeout = 60)
{
	struct region local, remote;
	struct urpc_tp_rx rx[4];
	struct pollfd pfd;
	uint32_t seq = 7;
	struct urpc_tp_tx tx = {.hdr = &seq, .hdr_len = 4};
	struct pair p;
	int fd, k;

	pair_open(&p, 0, 0);
	tx.peer = p.a2b;
	cr_assert_not_null(p.b->ops->wait_arm);
	fd = p.b->ops->wait_arm(p.b);
	cr_assert_geq(fd, 0, "wait_arm: %s", urpc_strerror(fd));
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 4), 0);
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	cr_assert_eq(poll(&pfd, 1, 50), 0, "woken with nothing received");

	cr_assert_eq(p.a->ops->tx_burst(p.a, &tx, 1), 1);
	cr_assert_eq(poll(&pfd, 1, 5000), 1, "a datagram did not wake the waiter");
	p.b->ops->wait_ack(p.b);
	k = p.b->ops->rx_burst(p.b, rx, 4);
	cr_assert_eq(k, 1);
	cr_assert_eq(memcmp(rx[0].buf, &seq, 4), 0);
	p.b->ops->rx_release(p.b, rx, 1);
	p.a->ops->tx_flush(p.a);

	/* Not while a one-sided operation needs the loop's timers. */
	region_open(p.a, &local, 4096, 0);
	region_open(p.b, &remote, 4096, 0);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local.mem, &local.mr,
					 (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey, 64, 0),
		     0);
	cr_assert_eq(p.a->ops->wait_arm(p.a), -EBUSY);
	{
		int st;

		reap(&p, 1, &st, true);
		cr_assert_eq(st, 0);
	}
	cr_assert_geq(p.a->ops->wait_arm(p.a), 0);
	p.a->ops->wait_ack(p.a);
	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}

/* Two sessions between the same two endpoints: one RC connection, shared. */
Test(verbs, peers_of_one_endpoint_share_a_connection, .timeout = 60)
{
	struct region local, remote;
	struct urpc_tp_peer *second;
	struct pair p;
	int st;

	pair_open(&p, 0, 0);
	region_open(p.a, &local, 4096, 0);
	region_open(p.b, &remote, 4096, 0x3c);
	verbs_tp_resolve(p.a, p.b, &second);
	cr_assert_eq(read_one(&p, &local, &remote, true), 0);
	/* The second handle uses the connection the first one made. */
	cr_assert_eq(p.a->ops->post_read(p.a, second, local.mem + 64, &local.mr,
					 (uint64_t)(uintptr_t)remote.mem, remote.mr.rkey, 64, 0),
		     0);
	reap(&p, 1, &st, true);
	cr_assert_eq(st, 0);
	cr_assert_eq(local.mem[64], 0x3c);
	/* Releasing the first leaves the second working. */
	p.a->ops->release_peer(p.a, p.a2b);
	p.a2b = second;
	local.mem[0] = 0;
	cr_assert_eq(read_one(&p, &local, &remote, true), 0);
	cr_assert_eq(local.mem[0], 0x3c);
	region_close(p.a, &local);
	region_close(p.b, &remote);
	pair_close(&p);
}
