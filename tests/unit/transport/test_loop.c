/* SPDX-License-Identifier: MIT */
/* The loop transport's own behaviour: fault switches, determinism, lifetime. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "transport/transport.h"

struct pair {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b;
};

static void pair_open(struct pair *p, uint64_t seed, const struct urpc_loop_faults *f)
{
	struct urpc_tp_cfg cfg;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cfg.seed = seed;
	cfg.hp_flags = URPC_HP_FORCE_4K; /* these rings are small */
	cr_assert_eq(urpc__tp_create(&cfg, &p->a), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &p->b), 0);
	n = p->b->ops->get_endpoint(p->b, ep);
	cr_assert_eq(p->a->ops->resolve_peer(p->a, ep, n, &p->a2b), 0);
	if (f)
		cr_assert_eq(urpc__loop_set_faults(p->a, f), 0);
}

static void pair_close(struct pair *p)
{
	p->a->ops->release_peer(p->a, p->a2b);
	cr_assert_eq(p->a->ops->destroy(p->a), 0);
	cr_assert_eq(p->b->ops->destroy(p->b), 0);
}

/*
 * Send @n sequence-numbered datagrams A -> B in bursts of 16, draining B
 * after each burst (and A, which releases reorder-held datagrams). Records
 * the arrival order in @order (up to @cap); returns how many arrived.
 */
static unsigned run(struct pair *p, unsigned n, uint32_t *order, unsigned cap)
{
	struct urpc_tp_rx rx[64];
	struct urpc_tp_tx tx[16];
	uint32_t seq[16];
	unsigned sent = 0, got = 0, i;
	int k, round;

	while (sent < n) {
		unsigned burst = n - sent < 16 ? n - sent : 16;

		for (i = 0; i < burst; i++) {
			seq[i] = sent + i;
			tx[i] = (struct urpc_tp_tx){.peer = p->a2b, .hdr = &seq[i], .hdr_len = 4};
		}
		cr_assert_eq(p->a->ops->tx_burst(p->a, tx, burst), (int)burst);
		sent += burst;
		for (round = 0; round < 4; round++) {
			p->a->ops->rx_burst(p->a, rx, 0);
			k = p->b->ops->rx_burst(p->b, rx, 64);
			for (i = 0; i < (unsigned)k; i++, got++)
				if (got < cap)
					memcpy(&order[got], rx[i].buf, 4);
			p->b->ops->rx_release(p->b, rx, (unsigned)k);
		}
	}
	for (round = 0; round < 16; round++) {
		p->a->ops->rx_burst(p->a, rx, 0);
		k = p->b->ops->rx_burst(p->b, rx, 64);
		for (i = 0; i < (unsigned)k; i++, got++)
			if (got < cap)
				memcpy(&order[got], rx[i].buf, 4);
		p->b->ops->rx_release(p->b, rx, (unsigned)k);
	}
	return got;
}

static uint32_t order1[12000], order2[12000];

Test(loop, drop_switch)
{
	struct urpc_loop_faults f = {.drop = 0.1};
	struct pair p;
	unsigned got;

	pair_open(&p, 1, &f);
	got = run(&p, 10000, order1, 12000);
	cr_assert(got >= 8500 && got <= 9500, "%u of 10000 arrived with 10%% drop", got);
	cr_assert_eq(p.a->stats.tx_dropped + got, 10000);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0);
	pair_close(&p);
}

Test(loop, duplicate_switch)
{
	struct urpc_loop_faults f = {.dup = 0.1};
	struct pair p;
	unsigned got;

	pair_open(&p, 2, &f);
	got = run(&p, 10000, order1, 12000);
	cr_assert_gt(got, 10500);
	cr_assert_lt(got, 11500);
	cr_assert_eq(got, 10000 + p.a->stats.tx_duplicated);
	pair_close(&p);
}

Test(loop, reorder_switch_loses_nothing)
{
	static uint8_t seen[10000];
	struct urpc_loop_faults f = {.reorder = 8};
	struct pair p;
	unsigned got, i, inversions = 0;

	pair_open(&p, 3, &f);
	got = run(&p, 10000, order1, 12000);
	cr_assert_eq(got, 10000);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < got; i++) {
		cr_assert_lt(order1[i], 10000);
		cr_assert_eq(seen[order1[i]], 0, "%u arrived twice", order1[i]);
		seen[order1[i]] = 1;
		if (i && order1[i] < order1[i - 1])
			inversions++;
	}
	cr_assert_gt(inversions, 1000, "reordering should be visible (%u inversions)", inversions);
	pair_close(&p);
}

Test(loop, delay_switch)
{
	struct urpc_loop_faults f = {.delay_polls = 3};
	struct urpc_tp_rx rx[4];
	struct urpc_tp_tx tx;
	struct pair p;
	uint32_t seq = 9;
	int i;

	pair_open(&p, 4, &f);
	tx = (struct urpc_tp_tx){.peer = p.a2b, .hdr = &seq, .hdr_len = 4};
	cr_assert_eq(p.a->ops->tx_burst(p.a, &tx, 1), 1);
	for (i = 0; i < 2; i++)
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 4), 0, "visible too early at poll %d",
			     i + 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 4), 1, "due at the third poll");
	p.b->ops->rx_release(p.b, rx, 1);
	pair_close(&p);
}

Test(loop, same_seed_same_run)
{
	struct urpc_loop_faults f = {.drop = 0.05, .dup = 0.05, .reorder = 4};
	struct pair p;
	unsigned g1, g2, g3;

	pair_open(&p, 99, &f);
	g1 = run(&p, 5000, order1, 12000);
	pair_close(&p);
	pair_open(&p, 99, &f);
	g2 = run(&p, 5000, order2, 12000);
	pair_close(&p);
	cr_assert_eq(g1, g2);
	cr_assert(memcmp(order1, order2, g1 * sizeof(uint32_t)) == 0,
		  "the same seed must give the same arrivals");
	pair_open(&p, 100, &f);
	g3 = run(&p, 5000, order2, 12000);
	pair_close(&p);
	cr_assert(g3 != g1 || memcmp(order1, order2, g1 * sizeof(uint32_t)) != 0,
		  "another seed should differ");
}

Test(loop, bad_fault_settings)
{
	struct urpc_loop_faults f = {.drop = 1.5};
	struct pair p;

	pair_open(&p, 5, NULL);
	cr_assert_eq(urpc__loop_set_faults(p.a, &f), -EINVAL);
	f = (struct urpc_loop_faults){.reorder = 100000};
	cr_assert_eq(urpc__loop_set_faults(p.a, &f), -EINVAL);
	pair_close(&p);
}

Test(loop, unknown_and_stale_endpoints)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *peer;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cr_assert_eq(urpc__tp_create(&cfg, &a), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &b), 0);
	n = b->ops->get_endpoint(b, ep);
	cr_assert_eq(b->ops->destroy(b), 0);
	cr_assert_eq(a->ops->resolve_peer(a, ep, n, &peer), -ENOENT, "a destroyed endpoint");
	ep[2] ^= 0x40; /* another id */
	cr_assert_eq(a->ops->resolve_peer(a, ep, n, &peer), -ENOENT);
	cr_assert_eq(a->ops->destroy(a), 0);
}

Test(loop, peer_destroyed_under_traffic)
{
	struct urpc_tp_mr mr;
	struct urpc_tp_comp c;
	struct urpc_tp_tx tx;
	struct pair p;
	uint8_t buf[64];
	uint32_t seq = 1;

	pair_open(&p, 6, NULL);
	cr_assert_eq(p.a->ops->reg_mem(p.a, buf, sizeof(buf), 0, &mr), 0);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, buf, &mr, 0x1000, 1234, 8, 77), 0);
	cr_assert_eq(p.b->ops->destroy(p.b), 0, "B has no operations of its own outstanding");
	/* Sending to the dead endpoint is a silent loss, not a crash. */
	tx = (struct urpc_tp_tx){.peer = p.a2b, .hdr = &seq, .hdr_len = 4};
	cr_assert_eq(p.a->ops->tx_burst(p.a, &tx, 1), 1);
	cr_assert_eq(p.a->ops->poll_completions(p.a, &c, 1), 1);
	cr_assert_eq(c.wr_id, 77);
	cr_assert_eq(c.status, -ECONNRESET);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, buf, &mr, 0x1000, 1234, 8, 78), 0);
	cr_assert_eq(p.a->ops->poll_completions(p.a, &c, 1), 1);
	cr_assert_eq(c.status, -ECONNRESET);
	p.a->ops->dereg_mem(p.a, &mr);
	p.a->ops->release_peer(p.a, p.a2b);
	cr_assert_eq(p.a->ops->destroy(p.a), 0);
}
