/* SPDX-License-Identifier: MIT */
/* The udp transport's own tests; the shared contract lives in test_contract.c. */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/transport.h"
#include "transport/udp.h"
#include "transport/udp_int.h"
#include "transport/udp_os.h"
#include "util/compiler.h"
#include "util/log.h"

#define MS 1000000ull
/*
 * The bound of any wait for a completion: far beyond what any takes (the
 * longest, a time-out, 200 ms), since a wait ends when its completion comes.
 * 1 s failed beside the stress run's load (a process descheduled that long).
 */
#define COMP_WAIT_NS (10000 * MS)

static const struct urpc_tp_ops *ops = &urpc__tp_udp_ops;

static struct urpc_tp *mk_cfg(const struct urpc_tp_cfg *cfg)
{
	struct urpc_tp *tp = NULL;
	int ret = ops->create(cfg, &tp);

	cr_assert_eq(ret, 0, "create: %d", ret);
	return tp;
}

static struct urpc_tp *mk(void)
{
	struct urpc_tp_cfg cfg;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	return mk_cfg(&cfg);
}

/* @from resolves @to's endpoint. */
static struct urpc_tp_peer *peer_of(struct urpc_tp *from, struct urpc_tp *to)
{
	uint8_t ep[URPC_TP_EP_MAX];
	struct urpc_tp_peer *p = NULL;
	size_t len = ops->get_endpoint(to, ep);

	cr_assert_eq(ops->resolve_peer(from, ep, len, &p), 0);
	return p;
}

static uint16_t port_of(struct urpc_tp *tp)
{
	uint8_t ep[URPC_TP_EP_MAX];
	uint16_t port;

	ops->get_endpoint(tp, ep);
	memcpy(&port, ep + 6, 2);
	return ntohs(port);
}

/* Poll @b's receive side once, releasing whatever arrived. */
static void serve(struct urpc_tp *b)
{
	struct urpc_tp_rx rx[16];
	struct urpc_tp_comp c[4];
	int n = ops->rx_burst(b, rx, 16);

	if (n > 0)
		ops->rx_release(b, rx, (unsigned)n);
	ops->poll_completions(b, c, 4);
}

/* Drive @a (and @b when not NULL) until @a reports one completion. */
static struct urpc_tp_comp wait_comp(struct urpc_tp *a, struct urpc_tp *b, uint64_t limit_ns)
{
	uint64_t end = urpc__now_ns() + limit_ns;
	struct urpc_tp_comp c;

	while (urpc__now_ns() < end) {
		if (ops->poll_completions(a, &c, 1) == 1)
			return c;
		if (b)
			serve(b);
	}
	cr_assert_fail("no completion within %llu ms", (unsigned long long)(limit_ns / MS));
	return c;
}

Test(udp, endpoint_round_trip)
{
	struct urpc_tp *a = mk(), *b = mk();
	uint8_t ep[URPC_TP_EP_MAX], ep2[URPC_TP_EP_MAX];
	struct urpc_tp_peer *p = NULL;
	size_t len = ops->get_endpoint(a, ep);

	cr_assert_gt(len, 0);
	cr_assert_leq(len, URPC_TP_EP_MAX);
	cr_assert_eq(ep[0], URPC_TRANSPORT_UDP);
	cr_assert_eq(ops->get_endpoint(a, ep2), len);
	cr_assert_eq(memcmp(ep, ep2, len), 0, "stable bytes");
	cr_assert_neq(port_of(a), 0);
	cr_assert_neq(port_of(a), port_of(b));
	cr_assert_eq(ops->resolve_peer(b, ep, len, &p), 0);
	cr_assert_not_null(p);
	ops->release_peer(b, p);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

Test(udp, resolve_rejects_garbage)
{
	struct urpc_tp *a = mk();
	uint8_t ep[URPC_TP_EP_MAX], bad[URPC_TP_EP_MAX];
	struct urpc_tp_peer *p = NULL;
	size_t len = ops->get_endpoint(a, ep);

	cr_assert_eq(ops->resolve_peer(a, ep, 0, &p), -EINVAL);
	cr_assert_eq(ops->resolve_peer(a, ep, len - 1, &p), -EINVAL);
	cr_assert_eq(ops->resolve_peer(a, ep, len + 1, &p), -EINVAL);
	memcpy(bad, ep, len);
	bad[0] = URPC_TRANSPORT_LOOP;
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EINVAL, "foreign kind");
	memcpy(bad, ep, len);
	bad[1] ^= 0x5a;
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EINVAL, "foreign version");
	/* Version 2 answers a grouped READ request with one chunk: refused, not mixed. */
	bad[1] = 2;
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EPROTO, "version 2");
	memset(bad, 0xee, sizeof(bad));
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EINVAL, "garbage");
	memcpy(bad, ep, len);
	memset(bad + 12, 0, 4);
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EINVAL, "max datagram 0");
	memset(bad + 12, 0xff, 4);
	cr_assert_eq(ops->resolve_peer(a, bad, len, &p), -EINVAL, "max datagram above 64 KiB");
	cr_assert_eq(ops->destroy(a), 0);
}

Test(udp, bind_conflict_on_same_port)
{
	struct urpc_tp *a = mk(), *b = NULL;
	struct urpc_tp_cfg cfg;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.port = port_of(a);
	cr_assert_eq(ops->create(&cfg, &b), -EADDRINUSE);
	cr_assert_null(b);
	cr_assert_eq(ops->destroy(a), 0);
}

Test(udp, bad_cfg_is_einval)
{
	struct urpc_tp *a = NULL;
	struct urpc_tp_cfg cfg;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.host = "not-an-address";
	cr_assert_eq(ops->create(&cfg, &a), -EINVAL);
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.mtu = 65507;
	cr_assert_eq(ops->create(&cfg, &a), -EINVAL, "mtu above a datagram");
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.rq_depth = 100;
	cr_assert_eq(ops->create(&cfg, &a), -EINVAL, "rq_depth not a power of two");
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.mtu = 1000;
	a = mk_cfg(&cfg);
	cr_assert_eq(a->mtu, 1000);
	cr_assert_eq(ops->destroy(a), 0);
	a = mk();
	cr_assert_eq(a->mtu, 1472 - 16);
	cr_assert_eq(ops->destroy(a), 0);
}

Test(udp, burst_of_32_arrives_intact)
{
	struct urpc_tp *a = mk(), *b = mk();
	struct urpc_tp_peer *p = peer_of(a, b);
	static uint8_t data[32][1400];
	uint32_t hdrs[32];
	struct urpc_tp_tx tx[32];
	struct urpc_tp_rx rx[32];
	bool seen[32] = {false};
	unsigned i, got = 0;
	uint64_t end;

	for (i = 0; i < 32; i++) {
		hdrs[i] = i;
		memset(data[i], 0x40 + (int)i, sizeof(data[i]));
		tx[i] = (struct urpc_tp_tx){.peer = p,
					    .hdr = &hdrs[i],
					    .hdr_len = sizeof(hdrs[i]),
					    .data = data[i],
					    .data_len = 100 + 40 * i};
	}
	tx[5].data_len = a->mtu; /* hdr + data one byte too long */
	cr_assert_eq(ops->tx_burst(a, tx, 32), -EMSGSIZE);
	tx[5].data_len = a->mtu - (uint32_t)sizeof(hdrs[5]);
	tx[7].peer = NULL;
	cr_assert_eq(ops->tx_burst(a, tx, 32), -EINVAL);
	tx[7].peer = p;
	cr_assert_eq(a->stats.tx_pkts, 0, "refused bursts send nothing");
	cr_assert_eq(ops->tx_burst(a, tx, 32), 32);
	ops->tx_flush(a);
	for (end = urpc__now_ns() + 2000 * MS; got < 32 && urpc__now_ns() < end;) {
		int n = ops->rx_burst(b, rx, 32);

		for (i = 0; i < (unsigned)(n > 0 ? n : 0); i++) {
			uint32_t seq;

			cr_assert_geq(rx[i].len, sizeof(seq));
			memcpy(&seq, rx[i].buf, sizeof(seq));
			cr_assert_lt(seq, 32);
			cr_assert_not(seen[seq], "datagram %u twice", seq);
			seen[seq] = true;
			cr_assert_eq(rx[i].len, sizeof(seq) + tx[seq].data_len);
			cr_assert_eq(memcmp(rx[i].buf + sizeof(seq), data[seq], tx[seq].data_len),
				     0);
		}
		if (n > 0)
			ops->rx_release(b, rx, (unsigned)n);
		got += (unsigned)(n > 0 ? n : 0);
	}
	cr_assert_eq(got, 32);
	cr_assert_eq(b->stats.rx_pkts, 32);
	cr_assert_eq(b->stats.rx_drop_bad, 0);
	ops->release_peer(a, p);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

Test(udp, held_entries_bound_the_ring)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *a = mk(), *b;
	struct urpc_tp_peer *p;
	struct urpc_tp_tx tx[20];
	struct urpc_tp_rx rx[32], more[32];
	uint32_t seq[20];
	unsigned i, held = 0, rest = 0;
	uint64_t end;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.rq_depth = 8;
	b = mk_cfg(&cfg);
	p = peer_of(a, b);
	for (i = 0; i < 20; i++) {
		seq[i] = i;
		tx[i] = (struct urpc_tp_tx){.peer = p, .hdr = &seq[i], .hdr_len = 4};
	}
	cr_assert_eq(ops->tx_burst(a, tx, 20), 20);
	for (end = urpc__now_ns() + 1000 * MS; held < 8 && urpc__now_ns() < end;) {
		int n = ops->rx_burst(b, rx + held, 32 - held);

		held += (unsigned)(n > 0 ? n : 0);
	}
	cr_assert_eq(held, 8);
	cr_assert_eq(ops->rx_burst(b, more, 32), 0, "every entry is held");
	ops->rx_release(b, rx, 8);
	for (end = urpc__now_ns() + 1000 * MS; rest < 12 && urpc__now_ns() < end;) {
		int n = ops->rx_burst(b, more, 32);

		if (n > 0) {
			ops->rx_release(b, more, (unsigned)n);
			rest += (unsigned)n;
		}
	}
	cr_assert_eq(rest, 12, "the kernel kept the rest");
	ops->release_peer(a, p);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

/* Register @len bytes on each side, READ then WRITE it, verify both. */
static void read_write_check(struct urpc_tp *a, struct urpc_tp *b, size_t len)
{
	uint8_t *la = malloc(len), *rb = malloc(len);
	struct urpc_tp_mr ma, mb;
	struct urpc_tp_peer *p = peer_of(a, b);
	struct urpc_tp_comp c;
	size_t i;

	cr_assert(la && rb);
	for (i = 0; i < len; i++) {
		la[i] = (uint8_t)(i * 7 + 1);
		rb[i] = (uint8_t)(i * 13 + 5);
	}
	cr_assert_eq(ops->reg_mem(a, la, len, 0, &ma), 0);
	cr_assert_eq(ops->reg_mem(b, rb, len,
				  URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE, &mb),
		     0);
	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)rb, mb.rkey, len, 11), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.wr_id, 11);
	cr_assert_eq(c.op, URPC_TP_OP_READ);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(memcmp(la, rb, len), 0, "READ copied the remote bytes");

	for (i = 0; i < len; i++)
		la[i] = (uint8_t)(i * 3 + 9);
	cr_assert_eq(ops->post_write(a, p, la, &ma, (uintptr_t)rb, mb.rkey, len, 12), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.wr_id, 12);
	cr_assert_eq(c.op, URPC_TP_OP_WRITE);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(memcmp(la, rb, len), 0, "WRITE copied the local bytes");
	cr_assert_eq(ops->poll_completions(a, &c, 1), 0, "exactly one completion each");

	cr_assert_eq(ops->destroy(a), -EBUSY, "memory is registered");
	ops->dereg_mem(a, &ma);
	ops->dereg_mem(b, &mb);
	ops->release_peer(a, p);
	free(la);
	free(rb);
}

Test(udp, read_and_write_8mib)
{
	struct urpc_tp *a = mk(), *b = mk();

	read_write_check(a, b, 8u << 20);
	cr_assert_gt(b->stats.os_served, 0);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

/*
 * An endpoint with a 32 KiB mtu and one with the default: one-sided chunks
 * must fit what the other side receives whole, in both directions.
 */
Test(udp, one_sided_between_different_mtus)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *big, *def = mk();

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.mtu = 32u << 10;
	big = mk_cfg(&cfg);
	read_write_check(big, def, 1u << 20);
	read_write_check(def, big, 1u << 20);
	cr_assert_eq(big->stats.rx_drop_bad, 0);
	cr_assert_eq(def->stats.rx_drop_bad, 0, "no truncated chunks");
	cr_assert_eq(ops->destroy(big), 0);
	cr_assert_eq(ops->destroy(def), 0);
}

Test(udp, read_and_write_survive_loss)
{
	struct urpc_tp *a = mk(), *b = mk();

	cr_assert_eq(urpc__udp_set_drop(a, 0.1, 1), 0);
	cr_assert_eq(urpc__udp_set_drop(b, 0.1, 2), 0);
	read_write_check(a, b, 2u << 20);
	cr_assert_gt(a->stats.os_retries, 0);
	cr_assert_gt(a->stats.tx_dropped + b->stats.tx_dropped, 0);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

/*
 * A requester @a with a 200 ms one-sided timeout, its peer @b, and a READ's
 * two buffers registered: @la on @a, @rb on @b for remote READ.
 */
struct rd_pair {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *p;
	struct urpc_tp_mr ma, mb;
};

static void rd_up(struct rd_pair *x, void *la, void *rb, size_t len)
{
	struct urpc_tp_cfg cfg;

	x->b = mk();
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.one_sided_timeout_ms = 200;
	x->a = mk_cfg(&cfg);
	x->p = peer_of(x->a, x->b);
	cr_assert_eq(ops->reg_mem(x->a, la, len, 0, &x->ma), 0);
	cr_assert_eq(ops->reg_mem(x->b, rb, len, URPC_TP_ACCESS_REMOTE_READ, &x->mb), 0);
}

static void rd_down(struct rd_pair *x)
{
	ops->dereg_mem(x->a, &x->ma);
	ops->dereg_mem(x->b, &x->mb);
	ops->release_peer(x->a, x->p);
	cr_assert_eq(ops->destroy(x->a), 0);
	cr_assert_eq(ops->destroy(x->b), 0);
}

Test(udp, read_from_silent_peer_times_out)
{
	struct rd_pair x;
	static uint8_t la[64 << 10], rb[64 << 10];
	struct urpc_tp_comp c;
	uint64_t t0, dt;

	rd_up(&x, la, rb, sizeof(la));
	t0 = urpc__now_ns();
	cr_assert_eq(ops->post_read(x.a, x.p, la, &x.ma, (uintptr_t)rb, x.mb.rkey, sizeof(la), 7),
		     0);
	cr_assert_eq(ops->destroy(x.a), -EBUSY, "an op is outstanding");
	c = wait_comp(x.a, NULL, COMP_WAIT_NS); /* b is never polled */
	dt = urpc__now_ns() - t0;
	cr_assert_eq(c.status, -ETIMEDOUT);
	cr_assert_eq(c.wr_id, 7);
	cr_assert_geq(dt, 190 * MS, "not before the timeout: %llu ns", (unsigned long long)dt);
	cr_assert_gt(x.a->stats.os_retries, 0);
	rd_down(&x);
}

/*
 * The owner thread does not run for @ms: the stall under test (nothing to
 * wait for; a descheduled thread on a busy host looks like this).
 */
static void away(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * A requester that did not poll for three timeouts (a stall of its own, and
 * of the peer's server side, which is the same thread here) has not seen
 * the peer silent: the READ goes on and completes once both run again.
 */
Test(udp, a_stall_of_the_requester_is_not_the_peers_silence)
{
	struct rd_pair x;
	static uint8_t la[256 << 10], rb[256 << 10];
	struct urpc_tp_comp c;
	size_t i;

	for (i = 0; i < sizeof(rb); i++)
		rb[i] = (uint8_t)(i * 7 + 1);
	rd_up(&x, la, rb, sizeof(la));
	cr_assert_eq(ops->post_read(x.a, x.p, la, &x.ma, (uintptr_t)rb, x.mb.rkey, sizeof(la), 9),
		     0);
	away(3 * 200);
	cr_assert_eq(ops->poll_completions(x.a, &c, 1), 0,
		     "failed at the first poll after a stall");
	c = wait_comp(x.a, x.b, COMP_WAIT_NS);
	cr_assert_eq(c.status, 0, "status %d", c.status);
	cr_assert_eq(c.wr_id, 9);
	cr_assert_eq(memcmp(la, rb, sizeof(la)), 0);
	rd_down(&x);
}

/*
 * ... but a silent peer still fails a requester that polls only now and
 * then: each gap counts UDP_OS_GAP_NS, so the timeout takes
 * timeout / UDP_OS_GAP_NS polls, not one and not forever.
 */
Test(udp, a_silent_peer_fails_a_requester_that_polls_rarely)
{
	struct rd_pair x;
	static uint8_t la[64 << 10], rb[64 << 10];
	struct urpc_tp_comp c;
	const unsigned need = (unsigned)(200 * MS / UDP_OS_GAP_NS);
	unsigned polls = 0;

	rd_up(&x, la, rb, sizeof(la));
	cr_assert_eq(ops->post_read(x.a, x.p, la, &x.ma, (uintptr_t)rb, x.mb.rkey, sizeof(la), 5),
		     0);
	do {
		cr_assert_lt(polls, 2 * need + 2, "no timeout after %u polls", polls);
		away((unsigned)(2 * UDP_OS_GAP_NS / MS)); /* b is never polled */
		polls++;
	} while (ops->poll_completions(x.a, &c, 1) == 0);
	cr_assert_eq(c.status, -ETIMEDOUT);
	cr_assert_eq(c.wr_id, 5);
	cr_assert_geq(polls, need, "failed after %u polls, before %u gaps counted", polls, need);
	rd_down(&x);
}

Test(udp, access_is_checked_by_the_server)
{
	struct urpc_tp *a = mk(), *b = mk();
	struct urpc_tp_peer *p = peer_of(a, b);
	struct urpc_tp_mr ma, mro, mwo;
	static uint8_t la[8192], ro[8192], wo[8192];
	uint8_t canary[sizeof(ro)];
	struct urpc_tp_comp c;

	memset(ro, 0x11, sizeof(ro));
	memset(wo, 0x22, sizeof(wo));
	memset(la, 0x33, sizeof(la));
	memcpy(canary, ro, sizeof(ro));
	cr_assert_eq(ops->reg_mem(a, la, sizeof(la), 0, &ma), 0);
	cr_assert_eq(ops->reg_mem(b, ro, sizeof(ro), URPC_TP_ACCESS_REMOTE_READ, &mro), 0);
	cr_assert_eq(ops->reg_mem(b, wo, sizeof(wo), URPC_TP_ACCESS_REMOTE_WRITE, &mwo), 0);
	cr_assert_neq(mro.rkey, mwo.rkey);

	/* local validation: no completion */
	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)ro, mro.rkey, 0, 1), -EINVAL);
	cr_assert_eq(ops->post_read(a, p, la + 1, &ma, (uintptr_t)ro, mro.rkey, sizeof(la), 1),
		     -EINVAL);
	cr_assert_eq(ops->post_write(a, NULL, la, &ma, (uintptr_t)wo, mwo.rkey, 8, 1), -EINVAL);

	cr_assert_eq(ops->post_write(a, p, la, &ma, (uintptr_t)ro, mro.rkey, 100, 2), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, -EACCES, "WRITE to read-only memory");
	cr_assert_eq(memcmp(ro, canary, sizeof(ro)), 0);

	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)wo, mwo.rkey, 100, 3), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, -EACCES, "READ of write-only memory");

	/* A key that names nothing: dropped unanswered, so it times out. */
	a->one_sided_timeout_ns = 100 * MS;
	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)ro, mro.rkey ^ 1, 100, 4), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, -ETIMEDOUT, "wrong rkey");
	cr_assert_geq(b->stats.os_dropped, 1, "dropped and counted");
	a->one_sided_timeout_ns = 1000 * MS;

	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)ro + 4096, mro.rkey, 8192, 5), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, -EACCES, "range past the registration");

	cr_assert_eq(ops->post_write(a, p, la, &ma, (uintptr_t)wo - 1, mwo.rkey, 16, 6), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, -EACCES, "range before the registration");
	cr_assert_geq(b->stats.os_rejected, 4, "one NAK per rejected chunk");

	cr_assert_eq(ops->post_read(a, p, la, &ma, (uintptr_t)ro + 100, mro.rkey, 4000, 8), 0);
	c = wait_comp(a, b, COMP_WAIT_NS);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(memcmp(la, ro + 100, 4000), 0);

	cr_assert_eq(ops->destroy(b), -EBUSY, "memory is registered");
	ops->dereg_mem(a, &ma);
	ops->dereg_mem(b, &mro);
	ops->dereg_mem(b, &mwo);
	ops->release_peer(a, p);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

Test(udp, op_table_full_is_eagain)
{
	struct urpc_tp *a = mk(), *b = mk();
	struct urpc_tp_peer *p = peer_of(a, b);
	struct urpc_tp_mr ma, mb;
	static uint8_t la[64], rb[64];
	struct urpc_tp_comp c[16];
	unsigned posted = 0, done = 0;
	uint64_t end;
	int ret;

	cr_assert_eq(ops->reg_mem(a, la, sizeof(la), 0, &ma), 0);
	cr_assert_eq(ops->reg_mem(b, rb, sizeof(rb), URPC_TP_ACCESS_REMOTE_READ, &mb), 0);
	while ((ret = ops->post_read(a, p, la, &ma, (uintptr_t)rb, mb.rkey, 8, posted)) == 0)
		cr_assert_lt(++posted, 100000);
	cr_assert_eq(ret, -EAGAIN);
	cr_assert_gt(posted, 0);
	for (end = urpc__now_ns() + 2000 * MS; done < posted && urpc__now_ns() < end;) {
		int n = ops->poll_completions(a, c, 16);

		for (int i = 0; i < n; i++)
			cr_assert_eq(c[i].status, 0);
		done += (unsigned)(n > 0 ? n : 0);
		serve(b);
	}
	cr_assert_eq(done, posted);
	ops->dereg_mem(a, &ma);
	ops->dereg_mem(b, &mb);
	ops->release_peer(a, p);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

Test(udp, malformed_datagrams_are_dropped_and_counted)
{
	struct urpc_tp *b = mk();
	struct sockaddr_in dst = {.sin_family = AF_INET};
	uint8_t ep[URPC_TP_EP_MAX], pkt[64];
	struct urpc_tp_rx rx[8];
	unsigned i, got = 0;
	uint64_t end;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	/* magic 0x7055, version 2, type, op id, chunk, status: little-endian */
	static const uint8_t good[16] = {0x55, 0x70, 2, 1};
	struct {
		const char *what;
		size_t len;
		uint8_t off, val; /* patch applied to @good */
		uint8_t type, op; /* then header byte 3 and op id byte 4 */
	} bad[] = {
		{"too short", 3, 0, 0x55, 1, 0},
		{"bad magic", 16, 0, 0x56, 1, 0},
		{"bad version", 16, 2, 9, 1, 0},
		{"unknown type", 16, 0, 0x55, 0x7f, 0},
		{"type zero", 16, 0, 0x55, 0, 0},
		{"short RD_REQ", 20, 0, 0x55, 2, 0},
		{"short WR_DATA", 16, 0, 0x55, 4, 0},
		{"NAK for op 99", 16, 0, 0x55, 6, 99},
		{"RD_DATA for op 200", 40, 0, 0x55, 3, 200},
	};

	cr_assert_geq(fd, 0);
	ops->get_endpoint(b, ep);
	memcpy(&dst.sin_addr.s_addr, ep + 2, 4);
	memcpy(&dst.sin_port, ep + 6, 2);
	for (i = 0; i < URPC_ARRAY_SIZE(bad); i++) {
		memset(pkt, 0, sizeof(pkt));
		memcpy(pkt, good, sizeof(good));
		pkt[3] = bad[i].type;
		pkt[4] = bad[i].op;
		pkt[bad[i].off] = bad[i].val;
		cr_assert_eq(sendto(fd, pkt, bad[i].len, 0, (struct sockaddr *)&dst, sizeof(dst)),
			     (ssize_t)bad[i].len, "%s", bad[i].what);
	}
	/* then one well-formed DATA datagram with a 4-byte payload */
	memset(pkt, 0, sizeof(pkt));
	memcpy(pkt, good, sizeof(good));
	memcpy(pkt + 16, "ok!", 4);
	cr_assert_eq(sendto(fd, pkt, 20, 0, (struct sockaddr *)&dst, sizeof(dst)), 20);
	for (end = urpc__now_ns() + 1000 * MS; !got && urpc__now_ns() < end;) {
		int n = ops->rx_burst(b, rx, 8);

		if (n > 0) {
			got = (unsigned)n;
			cr_assert_eq(n, 1, "only the good datagram is delivered: %d, bad %llu", n,
				     (unsigned long long)b->stats.rx_drop_bad);
			cr_assert_eq(rx[0].len, 4);
			cr_assert_str_eq((const char *)rx[0].buf, "ok!");
			ops->rx_release(b, rx, 1);
		}
	}
	cr_assert_eq(got, 1);
	cr_assert_eq(b->stats.rx_drop_bad, URPC_ARRAY_SIZE(bad));
	cr_assert_eq(b->stats.rx_pkts, 1);
	close(fd);
	cr_assert_eq(ops->destroy(b), 0);
}

/* Send one DATA datagram carrying @tag from @from to @p. */
static void send_tag(struct urpc_tp *from, struct urpc_tp_peer *p, uint32_t tag)
{
	struct urpc_tp_tx tx = {.peer = p, .hdr = &tag, .hdr_len = sizeof(tag)};

	cr_assert_eq(ops->tx_burst(from, &tx, 1), 1);
}

/* Poll @to until the datagram carrying @tag arrives; every other one fails. */
static void recv_tag(struct urpc_tp *to, uint32_t tag)
{
	uint64_t end = urpc__now_ns() + 1000 * MS;
	struct urpc_tp_rx rx[4];
	uint32_t got;
	int n;

	do {
		n = ops->rx_burst(to, rx, 4);
	} while (n == 0 && urpc__now_ns() < end);
	cr_assert_eq(n, 1, "datagram %u: %d arrived", tag, n);
	cr_assert_eq(rx[0].len, sizeof(got));
	memcpy(&got, rx[0].buf, sizeof(got));
	cr_assert_eq(got, tag);
	ops->rx_release(to, rx, 1);
}

/* With @a bound to @host, the connect transitions keep every peer heard and reached. */
static void connect_transitions(const char *host)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *a, *b = mk(), *c = mk();
	struct urpc_tp_peer *ab, *ab2, *ac, *ba, *ca;
	uint16_t port;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.host = host;
	a = mk_cfg(&cfg);
	port = port_of(a);
	ab = peer_of(a, b);
	ba = peer_of(b, a);
	ca = peer_of(c, a);
	cr_assert(to_udp(a)->connected, "one peer");
	send_tag(a, ab, 1);
	recv_tag(b, 1);
	send_tag(b, ba, 2);
	recv_tag(a, 2);
	ab2 = peer_of(a, b);
	cr_assert(to_udp(a)->connected, "two peers, one address");
	ac = peer_of(a, c);
	cr_assert_not(to_udp(a)->connected, "a second address");
	cr_assert_eq(port_of(a), port, "the port stays");
	/* both peers reach a, and a reaches both */
	send_tag(c, ca, 3);
	recv_tag(a, 3);
	send_tag(b, ba, 4);
	recv_tag(a, 4);
	send_tag(a, ac, 5);
	recv_tag(c, 5);
	send_tag(a, ab2, 6);
	recv_tag(b, 6);
	ops->release_peer(a, ab);
	cr_assert_not(to_udp(a)->connected);
	ops->release_peer(a, ab2);
	cr_assert(to_udp(a)->connected, "c is the one address left");
	send_tag(c, ca, 7);
	recv_tag(a, 7);
	send_tag(a, ac, 8);
	recv_tag(c, 8);
	ops->release_peer(a, ac);
	cr_assert_not(to_udp(a)->connected, "no peer");
	cr_assert_eq(port_of(a), port);
	/* unconnected again: anyone reaches it */
	send_tag(b, ba, 9);
	recv_tag(a, 9);
	ops->release_peer(b, ba);
	ops->release_peer(c, ca);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
	cr_assert_eq(ops->destroy(c), 0);
}

Test(udp, socket_is_connected_while_all_peers_share_one_address)
{
	connect_transitions("127.0.0.1");
}

Test(udp, connect_transitions_on_a_wildcard_bind)
{
	connect_transitions("0.0.0.0");
}

Test(udp, a_closed_peer_port_is_a_lost_datagram)
{
	struct urpc_tp *a = mk(), *b = mk();
	struct urpc_tp_peer *ab = peer_of(a, b);
	struct urpc_tp_rx rx[4];
	unsigned i;

	cr_assert(to_udp(a)->connected);
	cr_assert_eq(ops->destroy(b), 0);
	/* each send draws an ICMP error, which the next call reports: all quietly lost */
	for (i = 0; i < 4; i++) {
		send_tag(a, ab, i);
		cr_assert_eq(ops->rx_burst(a, rx, 4), 0);
	}
	cr_assert_eq(a->stats.rx_drop_bad, 0);
	ops->release_peer(a, ab);
	cr_assert_eq(ops->destroy(a), 0);
}

Test(udp, lone_datagrams_are_received_one_at_a_time_and_truncation_is_seen)
{
	struct urpc_tp *a = mk(), *b = mk();
	struct urpc_tp_peer *ab = peer_of(a, b);
	struct sockaddr_in dst = {.sin_family = AF_INET};
	static uint8_t big[4000];
	uint8_t ep[URPC_TP_EP_MAX];
	struct urpc_tp_rx rx[4];
	uint64_t end;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert_geq(fd, 0);
	send_tag(a, ab, 1);
	recv_tag(b, 1);
	/* one datagram, then an empty poll: b now asks for one at a time */
	cr_assert_eq(ops->rx_burst(b, rx, 4), 0);
	cr_assert(to_udp(b)->rx_single);
	/* a datagram longer than a slot, well-formed at its start */
	udp_hdr_init((struct udp_hdr *)(void *)big, UDP_T_DATA, 0, 0, 0);
	cr_assert_gt(sizeof(big), to_udp(b)->slot_size);
	ops->get_endpoint(b, ep);
	memcpy(&dst.sin_addr.s_addr, ep + 2, 4);
	memcpy(&dst.sin_port, ep + 6, 2);
	cr_assert_eq(sendto(fd, big, sizeof(big), 0, (struct sockaddr *)&dst, sizeof(dst)),
		     (ssize_t)sizeof(big));
	for (end = urpc__now_ns() + 1000 * MS; !b->stats.rx_drop_bad && urpc__now_ns() < end;)
		cr_assert_eq(ops->rx_burst(b, rx, 4), 0, "nothing delivered");
	cr_assert_eq(b->stats.rx_drop_bad, 1, "dropped as truncated");
	send_tag(a, ab, 2);
	recv_tag(b, 2);
	cr_assert_eq(b->stats.rx_pkts, 2);
	close(fd);
	ops->release_peer(a, ab);
	cr_assert_eq(ops->destroy(a), 0);
	cr_assert_eq(ops->destroy(b), 0);
}

/*
 * Issue 32: a window of one-sided replies does not keep DATA that came
 * beside it waiting. @b's socket holds a READ's window of RD_REQs and then
 * one DATA datagram; the drain that finds the DATA sends only a slice of
 * the replies (UDP_OS_SLICE) before handing the DATA up, and the rest go
 * at the next drain. Returns @b's replies still queued after the DATA.
 */
static unsigned window_then_data(struct rd_pair *x, void *la, void *rb, size_t len)
{
	struct urpc_tp_peer *fwd = peer_of(x->a, x->b);
	struct udp_tp *ub = to_udp(x->b);
	uint64_t end = urpc__now_ns() + 1000 * MS;
	struct urpc_tp_rx rx[4];
	uint32_t tag = 77, got;
	int n;

	cr_assert_eq(ops->post_read(x->a, x->p, la, &x->ma, (uintptr_t)rb, x->mb.rkey, len, 5), 0);
	send_tag(x->a, fwd, tag);
	do {
		n = ops->rx_burst(x->b, rx, 4);
	} while (n == 0 && urpc__now_ns() < end);
	cr_assert_eq(n, 1, "the DATA came up");
	memcpy(&got, rx[0].buf, sizeof(got));
	cr_assert_eq(got, tag);
	ops->rx_release(x->b, rx, 1);
	ops->release_peer(x->a, fwd);
	return ub->nctl - ub->ctl_off;
}

Test(udp, data_beside_a_window_of_one_sided_replies_goes_up_first)
{
	size_t len = 64u << 10;
	uint8_t *la = calloc(1, len), *rb = malloc(len);
	struct rd_pair x;
	struct urpc_tp_comp c;
	unsigned held;
	size_t i;

	cr_assert(la && rb);
	for (i = 0; i < len; i++)
		rb[i] = (uint8_t)(i * 11 + 3);
	rd_up(&x, la, rb, len);
	held = window_then_data(&x, la, rb, len);
	cr_assert_gt(held, 0, "replies held back while DATA was pending");
	cr_assert_leq(held, UDP_OS_WINDOW);
	cr_assert_geq(to_udp(x.b)->os_holds, 1, "held for the DATA, and counted");
	serve(x.b); /* nothing new: what was held goes */
	cr_assert_eq(to_udp(x.b)->nctl, 0, "sent at the next drain");
	c = wait_comp(x.a, x.b, COMP_WAIT_NS);
	cr_assert_eq(c.wr_id, 5);
	cr_assert_eq(c.status, 0);
	cr_assert_eq(memcmp(la, rb, len), 0, "the READ is whole");
	rd_down(&x);
	free(la);
	free(rb);
}

/* Pending DATA holds the one-sided replies back UDP_OS_HOLDS times in a row, then a slice goes. */
Test(udp, pending_data_never_starves_the_one_sided_replies)
{
	struct udp_tp u;
	unsigned i;

	memset(&u, 0, sizeof(u));
	for (i = 0; i < UDP_OS_HOLDS; i++)
		cr_assert(urpc__udp_os_hold(&u), "hold %u of %u", i + 1, UDP_OS_HOLDS);
	cr_assert_not(urpc__udp_os_hold(&u), "a slice must go after %u holds", UDP_OS_HOLDS);
	urpc__udp_os_flush_some(&u, UDP_OS_SLICE); /* nothing queued: the count starts again */
	cr_assert(urpc__udp_os_hold(&u));
}

Test(udp, held_back_replies_go_before_their_memory_is_deregistered)
{
	size_t len = 64u << 10;
	uint8_t *la = calloc(1, len), *rb = malloc(len);
	struct rd_pair x;
	struct urpc_tp_comp c;

	cr_assert(la && rb);
	memset(rb, 0x3c, len);
	rd_up(&x, la, rb, len);
	cr_assert_gt(window_then_data(&x, la, rb, len), 0);
	ops->dereg_mem(x.b, &x.mb);
	cr_assert_eq(to_udp(x.b)->nctl, 0, "sent before the memory went");
	/* the chunks not yet asked for are refused now: the READ fails */
	c = wait_comp(x.a, x.b, COMP_WAIT_NS);
	cr_assert_eq(c.wr_id, 5);
	cr_assert_neq(c.status, 0);
	ops->dereg_mem(x.a, &x.ma);
	ops->release_peer(x.a, x.p);
	cr_assert_eq(ops->destroy(x.a), 0);
	cr_assert_eq(ops->destroy(x.b), 0);
	free(la);
	free(rb);
}
