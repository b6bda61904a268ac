/* SPDX-License-Identifier: MIT */
/* The loop transport's own behaviour: fault switches, determinism, lifetime. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/loop_hooks.h"
#include "transport/tp_default.h"
#include "transport/transport.h"

struct pair {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b;
	bool now; /* run() sends with tx_now(), one datagram at a time */
};

static void pair_open_cfg(struct pair *p, uint64_t seed, const struct urpc_loop_faults *f,
			  bool reclaim, uint32_t depth)
{
	struct urpc_tp_cfg cfg;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cfg.seed = seed;
	cfg.hp_flags = URPC_HP_FORCE_4K; /* these rings are small */
	cfg.rx_reclaim = reclaim;
	if (depth)
		cfg.rq_depth = depth;
	p->now = false;
	cr_assert_eq(urpc__tp_create(&cfg, &p->a), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &p->b), 0);
	n = p->b->ops->get_endpoint(p->b, ep);
	cr_assert_eq(p->a->ops->resolve_peer(p->a, ep, n, &p->a2b), 0);
	if (f)
		cr_assert_eq(urpc__loop_set_faults(p->a, f), 0);
}

static void pair_open(struct pair *p, uint64_t seed, const struct urpc_loop_faults *f)
{
	pair_open_cfg(p, seed, f, false, 0);
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
		if (p->now)
			for (i = 0; i < burst; i++)
				cr_assert_eq(p->a->ops->tx_now(p->a, p->a2b, &seq[i], 4), 0);
		else
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
	cr_assert_eq(p.a->stats.tx_pkts, 10000, "dropped datagrams still count as sent");
	cr_assert_eq(p.b->stats.rx_pkts, got, "the receiver counts what arrived");
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
	cr_assert_eq(p.b->stats.rx_pkts, got);
	{
		static uint8_t copies[10000];
		unsigned i, twice = 0;

		memset(copies, 0, sizeof(copies));
		for (i = 0; i < got; i++) {
			cr_assert_lt(order1[i], 10000);
			copies[order1[i]]++;
		}
		for (i = 0; i < 10000; i++) {
			cr_assert(copies[i] == 1 || copies[i] == 2, "%u arrived %u times", i,
				  copies[i]);
			twice += copies[i] == 2;
		}
		cr_assert_eq(twice, p.a->stats.tx_duplicated, "every extra copy is a duplicate");
	}
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
	cr_assert_eq(p.a->stats.tx_reordered, 10000);
	pair_close(&p);
}

Test(loop, delay_switch)
{
	struct urpc_loop_faults f = {.delay_polls = 5};
	struct urpc_tp_rx rx[8];
	struct urpc_tp_tx tx[4];
	uint32_t seq[4] = {9, 10, 11, 12};
	struct pair p;
	int i;

	pair_open(&p, 4, &f);
	for (i = 0; i < 4; i++)
		tx[i] = (struct urpc_tp_tx){.peer = p.a2b, .hdr = &seq[i], .hdr_len = 4};
	cr_assert_eq(p.a->ops->tx_burst(p.a, tx, 4), 4);
	for (i = 0; i < 4; i++)
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 0, "visible too early at poll %d",
			     i + 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 4, "all four due at the fifth poll");
	for (i = 0; i < 4; i++)
		cr_assert_eq(memcmp(rx[i].buf, &seq[i], 4), 0, "delay keeps the order");
	p.b->ops->rx_release(p.b, rx, 4);

	/* Without the switch, the next poll sees a datagram at once. */
	f.delay_polls = 0;
	cr_assert_eq(urpc__loop_set_faults(p.a, &f), 0);
	cr_assert_eq(p.a->ops->tx_burst(p.a, tx, 1), 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 1);
	p.b->ops->rx_release(p.b, rx, 1);
	pair_close(&p);
}

/*
 * Delayed datagrams lap a four-entry ring many times, in runs of one to
 * three: each stays invisible until due, and a cell's last lap never
 * reads as published, whatever it held.
 */
Test(loop, delay_switch_laps)
{
	struct urpc_loop_faults f = {.delay_polls = 2};
	struct urpc_tp_rx rx[8];
	struct urpc_tp_tx tx[3];
	uint32_t seq[3];
	struct pair p;
	int round, i, k;

	pair_open_cfg(&p, 4, &f, false, 4);
	for (round = 0; round < 40; round++) {
		k = 1 + round % 3;
		for (i = 0; i < k; i++) {
			seq[i] = (uint32_t)(round * 3 + i);
			tx[i] = (struct urpc_tp_tx){.peer = p.a2b, .hdr = &seq[i], .hdr_len = 4};
		}
		cr_assert_eq(p.a->ops->tx_burst(p.a, tx, (unsigned)k), k);
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 0, "round %d: visible too early",
			     round);
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), k, "round %d: due", round);
		for (i = 0; i < k; i++) {
			cr_assert_eq(rx[i].len, 4);
			cr_assert_eq(memcmp(rx[i].buf, &seq[i], 4), 0);
		}
		p.b->ops->rx_release(p.b, rx, (unsigned)k);
	}
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

Test(loop, tx_now_sends_at_once_and_refuses_what_tx_burst_refuses)
{
	uint8_t big[4097] = {0}, dgram[72];
	struct urpc_tp_rx rx[8];
	struct urpc_loop_faults f = {.drop = 1};
	struct pair p;
	unsigned i;
	int n;

	pair_open(&p, 6, NULL);
	cr_assert(p.a->caps & URPC_TP_CAP_TX_NOW, "loop sends at once outside the simulator");
	for (i = 0; i < sizeof(dgram); i++)
		dgram[i] = (uint8_t)(i * 7 + 1);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + 5);
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, dgram, sizeof(dgram)), 0);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 1, "visible at the receiver's next poll");
	cr_assert_eq(rx[0].len, sizeof(dgram));
	cr_assert_eq(memcmp(rx[0].buf, dgram, sizeof(dgram)), 0, "the bytes as sent");
	p.b->ops->rx_release(p.b, rx, 1);
	cr_assert_eq(p.a->stats.tx_pkts, 1);
	cr_assert_eq(p.a->stats.tx_bytes, sizeof(dgram));

	/* What tx_burst() refuses, refused the same way, nothing sent. */
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, big, p.a->mtu + 1), -EMSGSIZE);
	cr_assert_eq(p.a->ops->tx_now(p.a, NULL, dgram, 4), -EINVAL);
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, big, p.a->mtu), 0, "the MTU itself fits");
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 1);
	cr_assert_eq(rx[0].len, p.a->mtu);
	cr_assert_eq(memcmp(rx[0].buf, big, p.a->mtu), 0, "longer than the inline copy, as sent");
	p.b->ops->rx_release(p.b, rx, 1);
	cr_assert_eq(p.a->stats.tx_pkts, 2);
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, dgram, 0), 0, "an empty datagram is sent");
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 1);
	cr_assert_eq(rx[0].len, 0);
	p.b->ops->rx_release(p.b, rx, 1);
	cr_assert_eq(p.a->stats.tx_pkts, 3);

	/* A full ring loses the datagram, counted at the receiver. */
	for (i = 0; i <= p.b->rq_depth; i++)
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, dgram, 8), 0, "never back-pressure");
	p.b->ops->rx_burst(p.b, rx, 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 1);

	/* The switches apply. */
	cr_assert_eq(urpc__loop_set_faults(p.a, &f), 0);
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, dgram, 8), 0);
	cr_assert_eq(p.a->stats.tx_dropped, 1);
	/* ... and off again, the plain path sends (into the ring, drained first). */
	f.drop = 0;
	cr_assert_eq(urpc__loop_set_faults(p.a, &f), 0);
	while ((n = p.b->ops->rx_burst(p.b, rx, 8)) > 0)
		p.b->ops->rx_release(p.b, rx, (unsigned)n);
	cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, dgram, 8), 0);
	cr_assert_eq(p.a->stats.tx_dropped, 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 1, "sent without the switch");
	cr_assert_eq(rx[0].len, 8);
	p.b->ops->rx_release(p.b, rx, 1);
	pair_close(&p);
	cr_assert_eq(urpc__tp_default_tx_now(NULL, NULL, dgram, 8), -ENOTSUP);
}

Test(loop, tx_now_and_tx_burst_meet_the_same_faults)
{
	struct urpc_loop_faults f = {.drop = 0.05, .dup = 0.05, .reorder = 4};
	struct pair p;
	unsigned g1, g2;

	pair_open(&p, 77, &f);
	g1 = run(&p, 5000, order1, 12000);
	pair_close(&p);
	pair_open(&p, 77, &f);
	p.now = true;
	g2 = run(&p, 5000, order2, 12000);
	cr_assert_gt(p.a->stats.tx_dropped, 0);
	cr_assert_gt(p.a->stats.tx_duplicated, 0);
	pair_close(&p);
	cr_assert_eq(g1, g2);
	cr_assert(memcmp(order1, order2, g1 * sizeof(uint32_t)) == 0,
		  "one datagram at a time or in bursts, a seed gives the same arrivals");
}

/* Send @n 8-byte datagrams A -> B, each @tag then its index. */
static void send_tagged(struct pair *p, uint32_t tag, unsigned n)
{
	uint32_t d[2] = {tag, 0};

	for (d[1] = 0; d[1] < n; d[1]++)
		cr_assert_eq(p->a->ops->tx_now(p->a, p->a2b, d, sizeof(d)), 0);
}

Test(loop, rx_reclaim_lends_a_burst_until_the_next)
{
	struct urpc_tp_rx *rx;
	uint32_t d[2];
	unsigned q, i;
	struct pair p;
	int n;

	pair_open_cfg(&p, 7, NULL, true, 0);
	q = p.b->rq_depth;
	rx = calloc(q, sizeof(*rx));
	cr_assert_not_null(rx);
	cr_assert(p.b->caps & URPC_TP_CAP_RX_RECLAIM);

	/* Half the ring lent: the other half takes what comes, the lent half stays as it was. */
	send_tagged(&p, 1, q / 2);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, q), (int)(q / 2));
	send_tagged(&p, 2, q);
	for (i = 0; i < q / 2; i++) {
		memcpy(d, rx[i].buf, sizeof(d));
		cr_assert(d[0] == 1 && d[1] == i, "lent entry %u overwritten", i);
	}
	p.b->ops->rx_release(p.b, rx, q / 2); /* does nothing: still lent */
	send_tagged(&p, 3, 1);
	/* The next burst takes the first half back: the half that fitted arrives. */
	n = p.b->ops->rx_burst(p.b, rx, q);
	cr_assert_eq(n, (int)(q / 2));
	cr_assert_eq(p.b->stats.rx_drop_ring_full, q / 2 + 1, "the rest was lost on a full ring");
	for (i = 0; i < (unsigned)n; i++) {
		memcpy(d, rx[i].buf, sizeof(d));
		cr_assert(d[0] == 2 && d[1] == i);
	}
	/* Now the whole ring is free but for that burst: it takes q / 2 more, in order. */
	send_tagged(&p, 4, q);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, q), (int)(q / 2));
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, q), 0);
	send_tagged(&p, 5, q);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, q), (int)q, "every slot back");
	pair_close(&p);
	free(rx);
}

/*
 * With rx_reclaim on a four-entry ring, bursts of one to four lap the ring
 * from every position, so that a burst runs past the ring's end (its two
 * stretches): every datagram comes once, in order, with its length; with
 * the delay switch on the same walk hands over to the per-position one.
 */
Test(loop, rx_reclaim_bursts_wrap_the_ring)
{
	struct urpc_loop_faults f = {.delay_polls = 2};
	struct urpc_tp_rx rx[8];
	uint32_t d[2], next = 0;
	struct pair p;
	int round, k, i;

	pair_open_cfg(&p, 9, NULL, true, 4);
	for (round = 0; round < 60; round++) {
		k = 1 + (round * 7) % 4;
		if (round == 30)
			cr_assert_eq(urpc__loop_set_faults(p.a, &f), 0);
		/* Takes the last burst back: the whole ring is free. */
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 0);
		send_tagged(&p, (uint32_t)round, (uint32_t)k);
		if (round >= 30)
			cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 0, "round %d: not due", round);
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), k, "round %d", round);
		for (i = 0; i < k; i++) {
			cr_assert_eq(rx[i].len, sizeof(d));
			memcpy(d, rx[i].buf, sizeof(d));
			cr_assert(d[0] == (uint32_t)round && d[1] == (uint32_t)i,
				  "round %d entry %d: %u/%u", round, i, d[0], d[1]);
		}
		next += (uint32_t)k;
	}
	cr_assert_eq(p.b->stats.rx_pkts, next);
	cr_assert_eq(p.b->stats.rx_bytes, (uint64_t)next * sizeof(d));
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0);
	pair_close(&p);
}

Test(loop, release_in_any_order_frees_slots_in_ring_order)
{
	struct urpc_tp_rx rx[4], one, bogus;
	struct urpc_tp_rx *all;
	unsigned q;
	struct pair p;

	pair_open(&p, 8, NULL);
	q = p.b->rq_depth;
	all = calloc(q, sizeof(*all));
	cr_assert_not_null(all);
	cr_assert_not(p.b->caps & URPC_TP_CAP_RX_RECLAIM);
	send_tagged(&p, 1, 4);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 4), 4);
	one = rx[0];
	p.b->ops->rx_release(p.b, rx + 1, 3); /* all but the oldest */
	bogus = rx[1];
	bogus.ring_idx += q; /* never lent: ignored */
	p.b->ops->rx_release(p.b, &bogus, 1);
	p.b->ops->rx_release(p.b, rx + 1, 1); /* released twice: harmless */
	/* The oldest holds back the slots after it: q - 4 more fit, then the ring is full. */
	send_tagged(&p, 2, q - 4 + 1);
	p.b->ops->rx_burst(p.b, all, 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, all, q), (int)(q - 4));
	p.b->ops->rx_release(p.b, all, q - 4);
	send_tagged(&p, 3, 1);
	p.b->ops->rx_burst(p.b, all, 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 2, "still full behind the oldest");
	/* Its release frees every slot at once: the whole ring takes datagrams again. */
	p.b->ops->rx_release(p.b, &one, 1);
	send_tagged(&p, 4, q);
	cr_assert_eq(p.b->ops->rx_burst(p.b, all, q), (int)q);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 2);
	pair_close(&p);
	free(all);
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
	/* A live id with the wrong generation is someone else's stale bytes. */
	n = a->ops->get_endpoint(a, ep);
	ep[7] ^= 0x10;
	cr_assert_eq(a->ops->resolve_peer(a, ep, n, &peer), -ENOENT, "wrong generation");
	ep[7] ^= 0x10;
	cr_assert_eq(a->ops->resolve_peer(a, ep, n, &peer), 0, "itself, with the right bytes");
	a->ops->release_peer(a, peer);
	cr_assert_eq(a->ops->destroy(a), 0);
}

Test(loop, destroy_releases_resolved_peers)
{
	struct urpc_tp_peer *p1, *p2;
	struct urpc_tp_rx rx[4];
	struct urpc_tp_tx tx;
	struct pair p;
	uint8_t ep[URPC_TP_EP_MAX];
	uint32_t seq = 3;
	size_t n;

	pair_open(&p, 7, NULL);
	n = p.b->ops->get_endpoint(p.b, ep);
	cr_assert_eq(p.a->ops->resolve_peer(p.a, ep, n, &p1), 0);
	cr_assert_eq(p.a->ops->resolve_peer(p.a, ep, n, &p2), 0);
	p.a->ops->release_peer(p.a, p1); /* from the middle of A's list */
	tx = (struct urpc_tp_tx){.peer = p2, .hdr = &seq, .hdr_len = 4};
	cr_assert_eq(p.a->ops->tx_burst(p.a, &tx, 1), 1);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 4), 1);
	p.b->ops->rx_release(p.b, rx, 1);
	/* A goes with p2 and a2b still resolved: destroy frees them (LeakSanitizer checks). */
	cr_assert_eq(p.a->ops->destroy(p.a), 0);
	cr_assert_eq(p.b->ops->destroy(p.b), 0);
}

/* Poll both ends until @a has a completion; bounded. */
static int pump_comp(struct urpc_tp *a, struct urpc_tp *b, struct urpc_tp_comp *c)
{
	struct urpc_tp_rx rx[4];
	int i, k;

	for (i = 0; i < 1000; i++) {
		k = b->ops->rx_burst(b, rx, 4);
		if (k > 0)
			b->ops->rx_release(b, rx, (unsigned)k);
		k = a->ops->poll_completions(a, c, 1);
		if (k)
			return k;
	}
	return 0;
}

Test(loop, one_sided_queue_is_bounded_and_completes_once)
{
	static uint8_t seen[65];
	struct urpc_tp_mr lmr, rmr;
	struct urpc_tp_comp c[80];
	uint8_t *local, *remote;
	struct pair p;
	int i, k, got = 0;

	pair_open(&p, 8, NULL);
	local = calloc(1, 4096);
	remote = calloc(1, 4096);
	cr_assert(local && remote);
	cr_assert_eq(p.a->ops->reg_mem(p.a, local, 4096, 0, &lmr), 0);
	cr_assert_eq(p.b->ops->reg_mem(p.b, remote, 4096, URPC_TP_ACCESS_REMOTE_READ, &rmr), 0);
	for (i = 0; i < 64; i++)
		cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local + i * 64, &lmr,
						 (uint64_t)(uintptr_t)remote, rmr.rkey, 64,
						 (uint64_t)i),
			     0);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local, &lmr, (uint64_t)(uintptr_t)remote,
					 rmr.rkey, 64, 64),
		     -EAGAIN, "the 65th outstanding operation is back-pressure");
	cr_assert_eq(p.a->ops->poll_completions(p.a, c, 80), 0, "nothing before B polls");
	cr_assert_eq(p.a->ops->destroy(p.a), -EBUSY, "operations are outstanding");
	p.b->ops->poll_completions(p.b, c, 1); /* B serves */
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < 10; i++) {
		k = p.a->ops->poll_completions(p.a, c, 80);
		for (int j = 0; j < k; j++) {
			cr_assert_lt(c[j].wr_id, 64);
			cr_assert_eq(c[j].status, 0);
			cr_assert_eq(c[j].op, URPC_TP_OP_READ);
			cr_assert_eq(seen[c[j].wr_id], 0, "wr_id %lu completed twice",
				     (unsigned long)c[j].wr_id);
			seen[c[j].wr_id] = 1;
		}
		got += k;
	}
	cr_assert_eq(got, 64);
	cr_assert_eq(p.b->stats.os_served, 64);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local, &lmr, (uint64_t)(uintptr_t)remote,
					 rmr.rkey, 64, 99),
		     0, "slots are reusable once reaped");
	cr_assert_eq(pump_comp(p.a, p.b, c), 1);
	cr_assert_eq(c[0].wr_id, 99);
	p.a->ops->dereg_mem(p.a, &lmr);
	p.b->ops->dereg_mem(p.b, &rmr);
	free(local);
	free(remote);
	pair_close(&p);
}

/*
 * A peer's one-sided window (set_peer_window, issue 32): operations past
 * its bytes wait, unseen by the target, and go oldest first as earlier
 * ones complete (one always goes); a waiting one fails at once on dereg;
 * each completes once; a completed one gives its round trip (peer_os_rtt).
 */
Test(loop, peer_window_holds_operations_until_earlier_ones_complete)
{
	struct urpc_tp_mr lmr, rmr;
	struct urpc_tp_comp c[8];
	uint8_t *local, *remote;
	uint64_t bytes = 0;
	struct pair p;
	int i, k, got = 0;

	pair_open(&p, 10, NULL);
	local = calloc(1, 4096);
	remote = calloc(1, 4096);
	cr_assert(local && remote);
	cr_assert_eq(p.a->ops->reg_mem(p.a, local, 4096, 0, &lmr), 0);
	cr_assert_eq(p.b->ops->reg_mem(p.b, remote, 4096, URPC_TP_ACCESS_REMOTE_READ, &rmr), 0);
	p.a->ops->set_peer_window(p.a, p.a2b, 1000); /* one 1 KiB operation at a time */
	for (i = 0; i < 4; i++)
		cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local + i * 1024, &lmr,
						 (uint64_t)(uintptr_t)remote, rmr.rkey, 1024,
						 (uint64_t)i),
			     0);
	cr_assert_eq(p.a->ops->peer_os_rtt(p.a, p.a2b, &bytes), 0, "no round trip yet");
	for (i = 0; i < 4; i++) {
		p.b->ops->poll_completions(p.b, c, 1); /* B serves what it was sent */
		p.b->ops->poll_completions(p.b, c, 1);
		cr_assert_eq(p.b->stats.os_served, (uint64_t)i + 1,
			     "the window let %llu through, not %d",
			     (unsigned long long)p.b->stats.os_served, i + 1);
		k = p.a->ops->poll_completions(p.a, c, 8); /* reaps one, sends the next */
		cr_assert_eq(k, 1);
		cr_assert_eq(c[0].wr_id, (uint64_t)i, "oldest first");
		cr_assert_eq(c[0].status, 0);
		got += k;
	}
	cr_assert_eq(got, 4);
	cr_assert_neq(p.a->ops->peer_os_rtt(p.a, p.a2b, &bytes), 0);
	cr_assert_eq(bytes, 1024);
	/* a held one fails at once with its memory, and never reaches B */
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local, &lmr, (uint64_t)(uintptr_t)remote,
					 rmr.rkey, 1024, 10),
		     0);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local + 1024, &lmr,
					 (uint64_t)(uintptr_t)remote, rmr.rkey, 1024, 11),
		     0);
	p.a->ops->dereg_mem(p.a, &lmr);
	k = p.a->ops->poll_completions(p.a, c, 8);
	cr_assert_eq(k, 2, "both fail at dereg: %d", k);
	cr_assert(c[0].status == -EIO && c[1].status == -EIO);
	p.b->ops->poll_completions(p.b, c, 1);
	cr_assert_eq(p.a->ops->poll_completions(p.a, c, 8), 0, "a second completion");
	cr_assert_eq(p.b->stats.os_served, 4, "the held one reached B");
	p.b->ops->dereg_mem(p.b, &rmr);
	free(local);
	free(remote);
	pair_close(&p);
}

Test(loop, dereg_fails_outstanding_operations)
{
	struct urpc_tp_mr lmr, rmr;
	struct urpc_tp_comp c;
	uint8_t local[256], remote[256];
	struct pair p;

	pair_open(&p, 9, NULL);
	memset(local, 0x11, sizeof(local));
	memset(remote, 0x22, sizeof(remote));
	cr_assert_eq(p.a->ops->reg_mem(p.a, local, sizeof(local), 0, &lmr), 0);
	cr_assert_eq(p.b->ops->reg_mem(p.b, remote, sizeof(remote),
				       URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE,
				       &rmr),
		     0);
	cr_assert_eq(p.a->ops->post_read(p.a, p.a2b, local, &lmr, (uint64_t)(uintptr_t)remote,
					 rmr.rkey, sizeof(local), 5),
		     0);
	p.a->ops->dereg_mem(p.a, &lmr);
	cr_assert_eq(p.a->ops->poll_completions(p.a, &c, 1), 1, "dereg completes it at once");
	cr_assert_eq(c.wr_id, 5);
	cr_assert_eq(c.status, -EIO);
	/* B still has the request queued: serving it must not touch A's memory. */
	cr_assert_eq(pump_comp(p.a, p.b, &c), 0, "a second completion");
	for (size_t i = 0; i < sizeof(local); i++)
		cr_assert_eq(local[i], 0x11, "READ landed in deregistered memory");
	cr_assert_eq(p.b->stats.os_served, 0);
	p.b->ops->dereg_mem(p.b, &rmr);
	pair_close(&p);
}

Test(loop, keys_of_one_endpoint_do_not_open_another)
{
	struct urpc_tp_mr amr, bmr, junk;
	struct urpc_tp_comp c;
	uint8_t amem[64], bmem[64];
	struct pair p;

	/* Same seed on both ends: the fault streams match, the keys must not. */
	pair_open(&p, 10, NULL);
	memset(bmem, 0x5c, sizeof(bmem));
	cr_assert_eq(p.a->ops->reg_mem(p.a, amem, sizeof(amem), URPC_TP_ACCESS_REMOTE_WRITE, &amr),
		     0);
	cr_assert_eq(p.b->ops->reg_mem(p.b, bmem, sizeof(bmem), URPC_TP_ACCESS_REMOTE_WRITE, &bmr),
		     0);
	cr_assert_neq(amr.rkey, 0);
	cr_assert_neq(amr.rkey, bmr.rkey);
	cr_assert_eq(p.a->ops->reg_mem(p.a, amem, sizeof(amem), 0x80, &junk), -EINVAL,
		     "unknown access bits");
	cr_assert_eq(p.a->ops->post_write(p.a, p.a2b, amem, &amr, (uint64_t)(uintptr_t)bmem,
					  amr.rkey, sizeof(amem), 1),
		     0);
	cr_assert_eq(pump_comp(p.a, p.b, &c), 1);
	cr_assert_eq(c.status, -EACCES);
	for (size_t i = 0; i < sizeof(bmem); i++)
		cr_assert_eq(bmem[i], 0x5c);
	p.a->ops->dereg_mem(p.a, &amr);
	p.b->ops->dereg_mem(p.b, &bmr);
	pair_close(&p);
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

/* A third endpoint C (rq_depth @depth, no reclaim) that resolves @p's B. */
static struct urpc_tp *third(struct pair *p, uint32_t depth, struct urpc_tp_peer **c2b)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *c;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cfg.hp_flags = URPC_HP_FORCE_4K;
	cfg.rq_depth = depth;
	cr_assert_eq(urpc__tp_create(&cfg, &c), 0);
	n = p->b->ops->get_endpoint(p->b, ep);
	cr_assert_eq(c->ops->resolve_peer(c, ep, n, c2b), 0);
	return c;
}

/* Send @n 8-byte datagrams @from -> @peer, each @tag then its index. */
static void send_from(struct urpc_tp *from, struct urpc_tp_peer *peer, uint32_t tag, unsigned n)
{
	uint32_t d[2] = {tag, 0};

	for (d[1] = 0; d[1] < n; d[1]++)
		cr_assert_eq(from->ops->tx_now(from, peer, d, sizeof(d)), 0);
}

/*
 * With rx_reclaim the first endpoint to resolve B sends through B's lane,
 * a second one through the shared ring: each holds rq_depth datagrams
 * (nothing lost below that, one over it is counted as lost on a full
 * ring), each sender's datagrams arrive in order, and when both have
 * some, the two take turns at going first in a burst.
 */
Test(loop, lane_of_the_first_sender_beside_the_shared_ring)
{
	struct urpc_tp_rx rx[16];
	struct urpc_tp_peer *c2b;
	struct urpc_tp *c;
	uint32_t d[2], next[3] = {0, 0, 0}, first[2];
	struct pair p;
	int n, k, i;

	pair_open_cfg(&p, 11, NULL, true, 8);
	c = third(&p, 8, &c2b);
	send_tagged(&p, 1, 8);
	send_from(c, c2b, 2, 8);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 0), 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0, "a ring each: 16 fit");
	for (k = 0; k < 4; k++) {
		n = p.b->ops->rx_burst(p.b, rx, 4);
		cr_assert_eq(n, 4, "burst %d", k);
		for (i = 0; i < n; i++) {
			memcpy(d, rx[i].buf, sizeof(d));
			cr_assert(d[0] == 1 || d[0] == 2);
			cr_assert_eq(d[1], next[d[0]]++, "sender %u in order", d[0]);
		}
		if (k < 2)
			memcpy(&first[k], rx[0].buf, sizeof(first[k]));
	}
	cr_assert_neq(first[0], first[1], "the lane and the ring take turns");
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 16), 0);
	/* Each is full at rq_depth on its own. */
	send_tagged(&p, 1, 9);
	send_from(c, c2b, 2, 8);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 16), 16);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 1, "the lane's ninth");
	cr_assert_eq(p.b->stats.rx_pkts, 32);
	c->ops->release_peer(c, c2b);
	cr_assert_eq(c->ops->destroy(c), 0);
	pair_close(&p);
}

/* Check the @n entries at @rx: tag @tag, indices from *@next on, in consecutive slots. */
static void check_run(const struct urpc_tp_rx *rx, int n, uint32_t tag, uint32_t *next)
{
	uint32_t d[2];
	int k;

	for (k = 0; k < n; k++) {
		cr_assert_eq(rx[k].len, sizeof(d), "datagram %d", k);
		if (k)
			cr_assert_gt(rx[k].buf, rx[k - 1].buf, "consecutive slots");
		memcpy(d, rx[k].buf, sizeof(d));
		cr_assert_eq(d[0], tag);
		cr_assert_eq(d[1], (*next)++, "in order");
	}
}

/*
 * rx_run() lends the lane's datagrams in the lane's own entries, up to
 * the lane's end (the rest at the next call), takes the last run back as
 * rx_burst() does (the sender finds the slots free again) and counts the
 * datagrams, and their bytes as they land in the lane; with anything on
 * the shared ring it lends nothing and says -EAGAIN, and rx_burst() takes
 * both. Only an endpoint with rx_reclaim has it.
 */
Test(loop, rx_run_lends_the_lane_as_runs)
{
	struct urpc_tp_rx rx[16];
	const struct urpc_tp_rx *e;
	struct urpc_tp_peer *c2b;
	struct urpc_tp *c;
	uint32_t next = 0, d[2];
	struct pair p;
	int n, i;

	pair_open_cfg(&p, 13, NULL, true, 8);
	cr_assert(p.b->caps & URPC_TP_CAP_RX_RUN);
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), 0, "nothing came");
	send_tagged(&p, 1, 5);
	n = p.b->ops->rx_run(p.b, &e, 3);
	cr_assert_eq(n, 3, "at most what was asked");
	check_run(e, n, 1, &next);
	cr_assert_eq(p.b->stats.rx_pkts, 3);
	cr_assert_eq(p.b->stats.rx_bytes, 5 * sizeof(d), "the bytes count as they land");
	n = p.b->ops->rx_run(p.b, &e, 8);
	cr_assert_eq(n, 2);
	check_run(e, n, 1, &next);
	/* 2 of 8 lent: 6 more fit, the lane's last 3 slots and its first 3. */
	for (d[0] = 1, d[1] = 5; d[1] < 11; d[1]++)
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, d, sizeof(d)), 0);
	n = p.b->ops->rx_run(p.b, &e, 8);
	cr_assert_eq(n, 3, "up to the lane's end");
	check_run(e, n, 1, &next);
	n = p.b->ops->rx_run(p.b, &e, 8);
	cr_assert_eq(n, 3, "then from its start");
	check_run(e, n, 1, &next);
	cr_assert_eq(next, 11);
	cr_assert_eq(p.b->stats.rx_pkts, 11);
	cr_assert_eq(p.b->stats.rx_bytes, 11 * sizeof(d));
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0);
	/* Everything was taken back: 8 fit again, the ninth is lost. */
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), 0);
	send_tagged(&p, 2, 9);
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), -EAGAIN, "a loss to count first");
	n = p.b->ops->rx_burst(p.b, rx, 5);
	cr_assert_eq(n, 5);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 1);
	cr_assert_eq(p.b->stats.rx_bytes, 19 * sizeof(d), "the lost one is not counted");
	for (next = 0, i = 0; i < n; i++) {
		memcpy(d, rx[i].buf, sizeof(d));
		cr_assert(d[0] == 2 && d[1] == next++);
	}

	/* A datagram on the shared ring: rx_run() lends nothing; rx_burst() takes both. */
	c = third(&p, 8, &c2b);
	send_from(c, c2b, 3, 1);
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), -EAGAIN);
	cr_assert_eq(p.b->stats.rx_pkts, 16, "nothing lent");
	n = p.b->ops->rx_burst(p.b, rx, 16);
	cr_assert_eq(n, 4, "the lane's last three and the ring's one");
	for (i = 0; i < n; i++) {
		memcpy(d, rx[i].buf, sizeof(d));
		if (d[0] == 2)
			cr_assert_eq(d[1], next++);
		else
			cr_assert(d[0] == 3 && d[1] == 0);
	}
	cr_assert_eq(next, 8);
	cr_assert_eq(p.b->stats.rx_bytes, 20 * sizeof(d));
	/* The ring's entry was lent by rx_burst(): rx_run() first needs rx_burst() to take it back. */
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), -EAGAIN);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 16), 0);
	cr_assert_eq(p.b->ops->rx_run(p.b, &e, 8), 0);
	c->ops->release_peer(c, c2b);
	cr_assert_eq(c->ops->destroy(c), 0);
	pair_close(&p);

	pair_open_cfg(&p, 14, NULL, false, 8);
	cr_assert_not(p.b->caps & URPC_TP_CAP_RX_RUN, "explicit release: no runs");
	pair_close(&p);
}

/*
 * The lane's datagrams, whatever their size and however sent (tx_now,
 * tx_burst, empty, longer than the inline copy), arrive in order with
 * their bytes, across the lane's end.
 */
Test(loop, lane_carries_every_kind_of_datagram_in_order)
{
	struct urpc_tp_rx rx[8];
	struct urpc_tp_tx tx[2];
	uint8_t big[3000], mid[72];
	uint32_t one = 7;
	struct pair p;
	int round;

	memset(big, 0xab, sizeof(big));
	memset(mid, 0x3c, sizeof(mid));
	pair_open_cfg(&p, 12, NULL, true, 8);
	for (round = 0; round < 6; round++) {
		/* Takes the last burst back: the whole lane is free. */
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 0), 0);
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, &one, 4), 0);
		tx[0] = (struct urpc_tp_tx){
			.peer = p.a2b, .hdr = mid, .hdr_len = 8, .data = mid + 8, .data_len = 64};
		tx[1] = (struct urpc_tp_tx){.peer = p.a2b, .hdr = big, .hdr_len = sizeof(big)};
		cr_assert_eq(p.a->ops->tx_burst(p.a, tx, 2), 2);
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, big, 0), 0);
		/* The inline copy's longest, and one byte more. */
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, big, 128), 0);
		cr_assert_eq(p.a->ops->tx_now(p.a, p.a2b, big, 129), 0);
		cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 8), 6, "round %d", round);
		cr_assert(rx[0].len == 4 && memcmp(rx[0].buf, &one, 4) == 0);
		cr_assert(rx[1].len == sizeof(mid) && memcmp(rx[1].buf, mid, sizeof(mid)) == 0);
		cr_assert(rx[2].len == sizeof(big) && memcmp(rx[2].buf, big, sizeof(big)) == 0);
		cr_assert_eq(rx[3].len, 0);
		cr_assert(rx[4].len == 128 && memcmp(rx[4].buf, big, 128) == 0);
		cr_assert(rx[5].len == 129 && memcmp(rx[5].buf, big, 129) == 0);
	}
	cr_assert_eq(p.b->stats.rx_bytes, 6ull * (4 + sizeof(mid) + sizeof(big) + 128 + 129));
	cr_assert_eq(p.a->stats.tx_pkts, 6 * 6);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0);
	pair_close(&p);
}

/*
 * The lane passes to the next endpoint that resolves B once its owner let
 * go of its last peer to B; what the owner left in it still arrives, first.
 * A third sender meanwhile has the shared ring. A dead B's lane reads full:
 * sending to it is a silent loss.
 */
Test(loop, lane_passes_on_with_its_datagrams)
{
	struct urpc_tp_peer *c2b, *a2b_second, *d2b;
	struct urpc_tp_rx rx[16];
	struct urpc_tp *c, *d;
	uint8_t ep[URPC_TP_EP_MAX];
	uint32_t v[2];
	struct pair p;
	size_t len;
	int n, i;

	pair_open_cfg(&p, 13, NULL, true, 8);
	/* A second peer of A to B shares A's lane; the lane stays A's until both go. */
	len = p.b->ops->get_endpoint(p.b, ep);
	cr_assert_eq(p.a->ops->resolve_peer(p.a, ep, len, &a2b_second), 0);
	send_tagged(&p, 1, 3);
	p.a->ops->release_peer(p.a, p.a2b);
	c = third(&p, 8, &c2b); /* the lane is still A's: C has the ring */
	send_from(c, c2b, 2, 8);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 0), 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 0);
	p.a->ops->release_peer(p.a, a2b_second);
	d = third(&p, 8, &d2b); /* now D takes the lane, with A's three still in it */
	send_from(d, d2b, 3, 8);
	cr_assert_eq(p.b->ops->rx_burst(p.b, rx, 0), 0);
	cr_assert_eq(p.b->stats.rx_drop_ring_full, 3, "A's three hold lane slots");
	n = p.b->ops->rx_burst(p.b, rx, 16);
	cr_assert_eq(n, 16);
	{
		uint32_t next[4] = {0, 0, 0, 0};
		bool seen_d = false;

		for (i = 0; i < n; i++) {
			memcpy(v, rx[i].buf, sizeof(v));
			cr_assert(v[0] >= 1 && v[0] <= 3);
			cr_assert_eq(v[1], next[v[0]]++, "sender %u in order", v[0]);
			if (v[0] == 3)
				seen_d = true;
			cr_assert(!(v[0] == 1 && seen_d), "A's datagrams come before D's");
		}
		cr_assert(next[1] == 3 && next[2] == 8 && next[3] == 5);
	}
	cr_assert_eq(p.b->ops->destroy(p.b), 0);
	send_from(d, d2b, 4, 20); /* into a dead lane: vanishes */
	send_from(c, c2b, 4, 20);
	d->ops->release_peer(d, d2b);
	c->ops->release_peer(c, c2b);
	cr_assert_eq(d->ops->destroy(d), 0);
	cr_assert_eq(c->ops->destroy(c), 0);
	cr_assert_eq(p.a->ops->destroy(p.a), 0);
}
