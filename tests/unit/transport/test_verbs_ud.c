/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datagram path (verbs_ud.c, issue 34): tx_burst()'s
 * walk writes only four fields of a common entry's WR and trusts the rest
 * to be as the last burst left them, and each receive slot has its own WR,
 * linked behind the last one given back whatever the order of the
 * releases. Here bursts mix every kind of entry (one inlined piece, two
 * inlined pieces, a copy into a send slot, a send from registered memory)
 * with bursts of the common kind alone, through a small send queue (its
 * signaled WRs wrap many times), into a small receive ring whose entries
 * are held across bursts and released in reverse order (it wraps many
 * times): every datagram must arrive once, whole, with its own length.
 * Runs where an RDMA port is active (Soft-RoCE in tests/vm, in the
 * test_verbs binary); elsewhere it skips.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "util/log.h"
#include "verbs_skip.h"
#include "verbs_tp.h"

/* Skips the case unless URPC_TEST_DEVICE_A's RDMA port is active (verbs_skip.h). */
static void skip_without_device(void)
{
	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
}

#if URPC_HAVE_VERBS

#define WAIT_NS 30000000000ull
#define ROUNDS 300u
#define BURST 6u
#define TOTAL (ROUNDS * BURST)
#define HOLD 4u /* entries taken per rx_burst(), held until the next one */
#define REG_LEN 700u

/* Datagram @seq's kind: every BURST-th round's third entry is not common. */
enum kind { COMMON, TWO_PIECES, COPIED, REGISTERED };

static enum kind kind_of(uint32_t seq)
{
	uint32_t round = seq / BURST;

	if (seq % BURST != 2 || round % 2)
		return COMMON;
	return (enum kind)(1 + (round / 2) % 3);
}

static uint32_t len_of(uint32_t seq)
{
	switch (kind_of(seq)) {
	case TWO_PIECES:
		return 16 + 24 + seq % 8;
	case COPIED:
		return 600 + seq % 16;
	case REGISTERED:
		return REG_LEN;
	case COMMON:
		break;
	}
	return 40 + seq % 8; /* lengths change from one use of a WR to the next */
}

/* Datagram @seq's bytes: its number, then a pattern of it. */
static void fill(uint8_t *buf, uint32_t seq, uint32_t len)
{
	uint32_t j;

	memcpy(buf, &seq, 4);
	for (j = 4; j < len; j++)
		buf[j] = (uint8_t)(seq * 7 + j);
}

/* A datagram whole; returns its number. */
static uint32_t check(const struct urpc_tp_rx *rx)
{
	uint32_t seq, j;

	cr_assert_geq(rx->len, 4);
	memcpy(&seq, rx->buf, 4);
	cr_assert_lt(seq, TOTAL, "datagram number %u", seq);
	cr_assert_eq(rx->len, len_of(seq), "datagram %u: %u bytes, not %u", seq, rx->len,
		     len_of(seq));
	for (j = 4; j < rx->len; j++)
		cr_assert_eq(rx->buf[j], (uint8_t)(seq * 7 + j), "datagram %u: byte %u", seq, j);
	return seq;
}

/* Hand back @n entries held since the last poll, last first, each still whole (not reposted). */
static void release_held(struct urpc_tp *b, const struct urpc_tp_rx *rx, const uint32_t *seqs,
			 unsigned n)
{
	while (n--) {
		cr_assert_eq(check(&rx[n]), seqs[n], "a held slot was overwritten");
		b->ops->rx_release(b, &rx[n], 1);
	}
}

Test(verbs_ud, mixed_bursts_and_releases_in_any_order, .timeout = 120)
{
	static uint8_t bufs[BURST][1024], seen[TOTAL];
	struct urpc_tp_peer *a2b, *b2a;
	struct urpc_tp_rx rx[2][HOLD];
	uint32_t seqs[2][HOLD];
	struct urpc_tp_tx tx[BURST];
	struct urpc_tp_mr mr;
	struct urpc_tp *a, *b;
	uint32_t round, i, got = 0;
	unsigned held = 0, cur = 0;
	uint8_t *reg;
	int k, ret;

	skip_without_device();
	memset(seen, 0, sizeof(seen));
	a = verbs_tp_open("URPC_TEST_DEVICE_A", 16, 64, 0);
	b = verbs_tp_open("URPC_TEST_DEVICE_B", 64, 32, 0);
	verbs_tp_resolve(a, b, &a2b);
	verbs_tp_resolve(b, a, &b2a);
	cr_assert_lt(a->max_inline, 600, "the COPIED datagrams must not be inlined");
	reg = malloc((size_t)TOTAL * REG_LEN);
	cr_assert_not_null(reg);
	cr_assert_eq(a->ops->reg_mem(a, reg, (size_t)TOTAL * REG_LEN, 0, &mr), 0);

	for (round = 0; round < ROUNDS; round++) {
		uint64_t end = urpc__now_ns() + WAIT_NS;
		unsigned sent = 0;

		for (i = 0; i < BURST; i++) {
			uint32_t seq = round * BURST + i, len = len_of(seq);
			uint8_t *at =
				kind_of(seq) == REGISTERED ? reg + (size_t)seq * REG_LEN : bufs[i];

			fill(at, seq, len);
			tx[i] = (struct urpc_tp_tx){.peer = a2b, .hdr = at, .hdr_len = len};
			if (kind_of(seq) == TWO_PIECES) {
				tx[i].hdr_len = 16;
				tx[i].data = at + 16;
				tx[i].data_len = len - 16;
			} else if (kind_of(seq) == REGISTERED) {
				tx[i].hdr_lkey = mr.lkey;
			}
		}
		while (sent < BURST) {
			cr_assert_lt(urpc__now_ns(), end, "round %u: %u of %u sent", round, sent,
				     BURST);
			ret = a->ops->tx_burst(a, tx + sent, BURST - sent);
			cr_assert_geq(ret, 0, "tx_burst: %s", urpc_strerror(ret));
			sent += (unsigned)ret;
		}
		/* B takes HOLD at most a poll, and hands back the poll before's in reverse. */
		while (got < (round + 1) * BURST) {
			cr_assert_lt(urpc__now_ns(), end, "round %u: %u of %u arrived", round, got,
				     (round + 1) * BURST);
			k = b->ops->rx_burst(b, rx[cur], HOLD);
			cr_assert_geq(k, 0);
			if (!k)
				continue;
			for (i = 0; i < (unsigned)k; i++) {
				seqs[cur][i] = check(&rx[cur][i]);
				cr_assert(!seen[seqs[cur][i]], "datagram %u arrived twice",
					  seqs[cur][i]);
				seen[seqs[cur][i]] = 1;
			}
			got += (unsigned)k;
			release_held(b, rx[!cur], seqs[!cur], held);
			held = (unsigned)k;
			cur = !cur;
		}
	}
	release_held(b, rx[!cur], seqs[!cur], held);
	for (i = 0; i < TOTAL; i++)
		cr_assert(seen[i], "datagram %u never arrived", i);
	cr_assert_eq(b->stats.rx_pkts, TOTAL);
	cr_assert_eq(a->stats.tx_pkts, TOTAL);

	a->ops->tx_flush(a);
	a->ops->dereg_mem(a, &mr);
	free(reg);
	a->ops->release_peer(a, a2b);
	b->ops->release_peer(b, b2a);
	cr_assert_eq(a->ops->destroy(a), 0);
	cr_assert_eq(b->ops->destroy(b), 0);
}

#else /* !URPC_HAVE_VERBS */

Test(verbs_ud, skipped)
{
	skip_without_device();
}

#endif
