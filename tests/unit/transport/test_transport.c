/* SPDX-License-Identifier: MIT */
/*
 * The transport layer's shared parts: every ops table is complete (an op a
 * transport lacks is a default that returns -ENOTSUP, and its capability
 * bit is clear), and the software registration table of loop and udp
 * (sw_mr.c) gives one errno for each failure and random grant keys.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "transport/sw_mr.h"
#include "transport/tp_default.h"
#include "transport/transport.h"

#define OPS_FOR_EACH(X)                                                                            \
	X(create)                                                                                  \
	X(destroy)                                                                                 \
	X(get_endpoint)                                                                            \
	X(resolve_peer)                                                                            \
	X(release_peer)                                                                            \
	X(ep_host)                                                                                 \
	X(tx_burst)                                                                                \
	X(tx_flush)                                                                                \
	X(tx_now)                                                                                  \
	X(rx_burst)                                                                                \
	X(rx_run)                                                                                  \
	X(rx_release)                                                                              \
	X(reg_mem)                                                                                 \
	X(dereg_mem)                                                                               \
	X(post_read)                                                                               \
	X(post_write)                                                                              \
	X(poll_completions)                                                                        \
	X(cancel)                                                                                  \
	X(wait_arm)                                                                                \
	X(wait_ack)                                                                                \
	X(reg_dmabuf)                                                                              \
	X(ctl_pop)                                                                                 \
	X(ctl_push)

/* The caps an endpoint of @kind reports; the kinds without a device create one. */
static unsigned caps_of(enum urpc_transport_kind kind)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *tp;
	unsigned caps;

	if (kind == URPC_TRANSPORT_VERBS) /* no device needed: what verbs.c sets */
		return URPC_TP_CAP_WAIT | URPC_TP_CAP_DMABUF | URPC_TP_CAP_CTL;
	urpc__tp_cfg_init(&cfg, kind);
	cr_assert_eq(urpc__tp_ops(kind)->create(&cfg, &tp), 0);
	caps = tp->caps;
	cr_assert_eq(tp->ops, urpc__tp_ops(kind), "an endpoint uses its kind's table");
	cr_assert_eq(tp->ops->destroy(tp), 0);
	return caps;
}

Test(transport, every_ops_table_is_complete_and_matches_its_caps)
{
	const enum urpc_transport_kind kinds[] = {URPC_TRANSPORT_LOOP, URPC_TRANSPORT_UDP,
						  URPC_TRANSPORT_VERBS};
	unsigned i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const struct urpc_tp_ops *ops = urpc__tp_ops(kinds[i]);
		unsigned caps;

		if (!ops) {
			cr_assert_eq(kinds[i], URPC_TRANSPORT_VERBS, "only verbs may be left out");
			continue;
		}
		caps = caps_of(kinds[i]);
		cr_assert_not_null(ops->name);
#define CHECK_OP(op) cr_assert(ops->op, "%s: the op " #op " is NULL", ops->name);
		OPS_FOR_EACH(CHECK_OP)
#undef CHECK_OP
		/* A capability's ops are the transport's own; a missing one's the defaults. */
		cr_assert_eq(!!(caps & URPC_TP_CAP_CTL), ops->ctl_pop != urpc__tp_default_ctl_pop,
			     "%s: ctl_pop and URPC_TP_CAP_CTL disagree", ops->name);
		cr_assert_eq(!!(caps & URPC_TP_CAP_CTL), ops->ctl_push != urpc__tp_default_ctl_push,
			     "%s: ctl_push and URPC_TP_CAP_CTL disagree", ops->name);
		cr_assert_eq(!!(caps & URPC_TP_CAP_WAIT),
			     ops->wait_arm != urpc__tp_default_wait_arm,
			     "%s: wait_arm and URPC_TP_CAP_WAIT disagree", ops->name);
		cr_assert_eq(!!(caps & URPC_TP_CAP_WAIT),
			     ops->wait_ack != urpc__tp_default_wait_ack,
			     "%s: wait_ack and URPC_TP_CAP_WAIT disagree", ops->name);
		if (caps & URPC_TP_CAP_TX_NOW)
			cr_assert_neq(ops->tx_now, urpc__tp_default_tx_now,
				      "%s: URPC_TP_CAP_TX_NOW without a tx_now", ops->name);
		if (caps & URPC_TP_CAP_RX_RUN)
			cr_assert_neq(ops->rx_run, urpc__tp_default_rx_run,
				      "%s: URPC_TP_CAP_RX_RUN without an rx_run", ops->name);
		cr_assert_eq(!!(caps & URPC_TP_CAP_DMABUF),
			     ops->reg_dmabuf != urpc__tp_default_reg_dmabuf,
			     "%s: reg_dmabuf and URPC_TP_CAP_DMABUF disagree", ops->name);
	}
}

Test(transport, the_defaults_refuse_with_enotsup)
{
	struct urpc_tp_peer *peer = NULL;
	struct urpc_tp_mr mr;
	uint8_t buf[URPC_TP_EP_MAX] = {0};
	uint32_t host;

	cr_assert_eq(urpc__tp_default_wait_arm(NULL), -ENOTSUP);
	urpc__tp_default_wait_ack(NULL);
	cr_assert_eq(urpc__tp_default_reg_dmabuf(NULL, 3, 0, 4096, 0, 0, &mr), -ENOTSUP);
	cr_assert_eq(urpc__tp_default_ctl_pop(NULL, &peer, buf), -ENOTSUP);
	cr_assert_eq(urpc__tp_default_tx_now(NULL, peer, buf, 4), -ENOTSUP);
	cr_assert_eq(urpc__tp_default_rx_run(NULL, NULL, 4), -ENOTSUP);
	cr_assert_eq(urpc__tp_default_ep_host(NULL, buf, 4, &host), -ENOTSUP);
	cr_assert_eq(urpc__tp_default_cancel(NULL, 1, -ETIMEDOUT), -ENOTSUP);
	urpc__tp_default_ctl_push(NULL, NULL, buf, 1);
}

Test(transport, op_kinds_have_names)
{
	cr_assert_str_eq(urpc__tp_op_str(URPC_TP_OP_READ), "READ");
	cr_assert_str_eq(urpc__tp_op_str(URPC_TP_OP_WRITE), "WRITE");
	cr_assert_str_eq(urpc__tp_op_str((enum urpc_tp_op)0), "?");
}

/* ---- sw_mr.c: one errno for each failure (see sw_mr.h) ---- */

Test(sw_mr, one_errno_for_each_failure)
{
	struct urpc_sw_mr_table t;
	struct urpc_tp_mr mr, other;
	static uint8_t buf[4097];
	uint8_t *mem = buf + 1; /* so that mem - 1 is a valid pointer */
	void *top = (void *)(UINTPTR_MAX - 15);

	urpc__sw_mr_init(&t, 1);
	cr_assert_eq(urpc__sw_mr_reg(&t, NULL, 16, 0, &mr), -EINVAL);
	cr_assert_eq(urpc__sw_mr_reg(&t, mem, 0, 0, &mr), -EINVAL);
	cr_assert_eq(urpc__sw_mr_reg(&t, mem, 16, 0, NULL), -EINVAL);
	cr_assert_eq(urpc__sw_mr_reg(&t, mem, 16, 0x80, &mr), -EINVAL);
	cr_assert_eq(urpc__sw_mr_reg(&t, top, 32, 0, &mr), -EFAULT, "wraps the address space");
	cr_assert_eq(t.n, 0);

	cr_assert_eq(urpc__sw_mr_reg(&t, mem, 4096, URPC_TP_ACCESS_REMOTE_READ, &mr), 0);
	cr_assert_neq(mr.rkey, 0);
	cr_assert_eq(mr.lkey, mr.rkey);
	cr_assert_eq(urpc__sw_mr_check_local(&t, &mr, mem + 16, 32), 0);
	cr_assert_eq(urpc__sw_mr_check_local(&t, &mr, mem + 4090, 32), -EINVAL);
	cr_assert_eq(urpc__sw_mr_check_local(&t, &mr, mem - 1, 2), -EINVAL);
	cr_assert_eq(urpc__sw_mr_check_local(&t, &mr, mem, 0), -EINVAL);
	cr_assert_eq(urpc__sw_mr_check_local(&t, NULL, mem, 1), -EINVAL);
	cr_assert_eq(urpc__sw_mr_check_remote(&t, mr.rkey, URPC_TP_ACCESS_REMOTE_READ,
					      (uintptr_t)mem, 4096),
		     0);
	cr_assert_eq(urpc__sw_mr_check_remote(&t, mr.rkey, URPC_TP_ACCESS_REMOTE_WRITE,
					      (uintptr_t)mem, 1),
		     -EACCES, "no write access");
	cr_assert_eq(urpc__sw_mr_check_remote(&t, mr.rkey + 1, URPC_TP_ACCESS_REMOTE_READ,
					      (uintptr_t)mem, 1),
		     -EACCES, "no such key");
	cr_assert_eq(urpc__sw_mr_check_remote(&t, mr.rkey, URPC_TP_ACCESS_REMOTE_READ,
					      (uintptr_t)mem + 1, 4096),
		     -EACCES, "past the end");
	cr_assert_eq(
		urpc__sw_mr_check_remote(&t, mr.rkey, URPC_TP_ACCESS_REMOTE_READ, UINT64_MAX, 2),
		-EACCES, "wraps");

	/* A copy of a live registration's description is not another registration. */
	other = mr;
	other.lkey ^= 1;
	cr_assert_not(urpc__sw_mr_dereg(&t, &other));
	cr_assert(urpc__sw_mr_dereg(&t, &mr));
	cr_assert_null(mr.handle);
	cr_assert_not(urpc__sw_mr_dereg(&t, &mr), "not live any more");
	cr_assert_eq(urpc__sw_mr_check_local(&t, &mr, mem, 1), -EINVAL);
	cr_assert_eq(t.n, 0);
	urpc__sw_mr_fini(&t);
}

Test(sw_mr, keys_are_unique_and_entries_reused)
{
	enum { N = 40 };
	struct urpc_sw_mr_table t;
	struct urpc_tp_mr mr[N];
	static uint8_t mem[N][64];
	unsigned i, j;

	urpc__sw_mr_init(&t, 7);
	for (i = 0; i < N; i++)
		cr_assert_eq(urpc__sw_mr_reg(&t, mem[i], 64, 0, &mr[i]), 0);
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++)
			cr_assert_neq(mr[i].rkey, mr[j].rkey);
	cr_assert(urpc__sw_mr_dereg(&t, &mr[3]));
	cr_assert_eq(urpc__sw_mr_reg(&t, mem[3], 64, 0, &mr[3]), 0);
	cr_assert_eq(t.n, N);
	cr_assert_leq(t.cap, 64, "a freed entry is reused");
	for (i = 0; i < N; i++)
		cr_assert(urpc__sw_mr_dereg(&t, &mr[i]));
	urpc__sw_mr_fini(&t);
}

/* ---- sw_mr.c: grant keys (issue 16: 64 random bits, never reused) ---- */

#define G_PEER ((const void *)0x1000)
#define G_PEER_ID 0xabcdull
#define G_TOKEN 0x5eed5eed5eed5eedull

static enum urpc_sw_verdict g_check(const struct urpc_sw_mr_table *t, uint64_t key,
				    const uint8_t *at, uint64_t len)
{
	return urpc__sw_grant_check(t, key, G_TOKEN, G_PEER_ID, URPC_TP_ACCESS_REMOTE_READ,
				    (uint64_t)(uintptr_t)at, len);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Thousands of grants over several doublings of the table: every key is
 * distinct, has a nonzero upper half, and each bit is set in about half
 * of them; every live key is found (its own bytes only, its own peer and
 * token only); a revoked key names nothing, also after its entry and the
 * same bytes were granted anew, and no new key equals an old one.
 */
Test(sw_mr, grant_keys_are_random_64_bit_and_never_come_back)
{
	enum { N = 3000, ALL = N + N / 2 };
	static uint8_t mem[N];
	static uint64_t keys[ALL];
	static struct urpc_tp_grant g[N];
	struct urpc_sw_mr_table t;
	struct urpc_tp_mr mr;
	unsigned i, b, ones[64] = {0};

	urpc__sw_mr_init(&t, 0);
	cr_assert_eq(urpc__sw_mr_reg(&t, mem, N, URPC_TP_ACCESS_GRANT_READ, &mr), 0);
	for (i = 0; i < N; i++) {
		cr_assert_eq(urpc__sw_grant(&t, G_PEER, G_PEER_ID, G_TOKEN, &mr, mem + i, 1,
					    URPC_TP_ACCESS_REMOTE_READ, &g[i]),
			     0);
		keys[i] = g[i].key;
		cr_assert_neq(keys[i] >> 32, 0, "a grant key is never a registration's");
	}
	cr_assert_eq(t.ngrants, N);
	for (i = 0; i < N; i++) {
		cr_assert_eq(g_check(&t, g[i].key, mem + i, 1), URPC_SW_SERVE, "grant %u", i);
		cr_assert_eq(g_check(&t, g[i].key, mem + i, 2), URPC_SW_REFUSE);
		cr_assert_eq(g_check(&t, g[i].key, mem + i + 1, 1), URPC_SW_REFUSE);
		cr_assert_eq(urpc__sw_grant_check(&t, g[i].key, G_TOKEN ^ 1, G_PEER_ID,
						  URPC_TP_ACCESS_REMOTE_READ,
						  (uint64_t)(uintptr_t)(mem + i), 1),
			     URPC_SW_UNKNOWN, "another token");
		cr_assert_eq(urpc__sw_grant_check(&t, g[i].key, G_TOKEN, G_PEER_ID + 1,
						  URPC_TP_ACCESS_REMOTE_READ,
						  (uint64_t)(uintptr_t)(mem + i), 1),
			     URPC_SW_UNKNOWN, "another peer");
		cr_assert_eq(g_check(&t, g[i].key ^ (1ull << (i % 64)), mem + i, 1),
			     URPC_SW_UNKNOWN, "a key one bit away");
	}
	/* Revoke every other grant, then take the entries again for the same bytes. */
	for (i = 0; i < N; i += 2)
		urpc__sw_revoke(&t, &g[i]);
	for (i = 0; i < N; i += 2) {
		cr_assert_eq(g[i].key, 0);
		cr_assert_eq(g_check(&t, keys[i], mem + i, 1), URPC_SW_UNKNOWN, "revoked %u", i);
		cr_assert_eq(g_check(&t, keys[i + 1], mem + i + 1, 1), URPC_SW_SERVE);
	}
	for (i = 0; i < N; i += 2) {
		cr_assert_eq(urpc__sw_grant(&t, G_PEER, G_PEER_ID, G_TOKEN, &mr, mem + i, 1,
					    URPC_TP_ACCESS_REMOTE_READ, &g[i]),
			     0);
		keys[N + i / 2] = g[i].key;
	}
	for (i = 0; i < N; i += 2) {
		cr_assert_eq(g_check(&t, keys[i], mem + i, 1), URPC_SW_UNKNOWN,
			     "the old key of bytes granted anew");
		cr_assert_eq(g_check(&t, g[i].key, mem + i, 1), URPC_SW_SERVE);
	}
	/* Every key ever made is distinct. */
	qsort(keys, ALL, sizeof(keys[0]), cmp_u64);
	for (i = 1; i < ALL; i++)
		cr_assert_neq(keys[i], keys[i - 1], "a key was made twice");
	/* Each bit set in about half of the grants alive now (N keys): 50% +- 5%. */
	for (i = 0; i < N; i++)
		for (b = 0; b < 64; b++)
			ones[b] += (unsigned)(g[i].key >> b & 1);
	for (b = 0; b < 64; b++)
		cr_assert(ones[b] > N * 45 / 100 && ones[b] < N * 55 / 100,
			  "bit %u set in %u of %u", b, ones[b], N);
	/* dereg_mem() revokes them all; no key names anything then. */
	cr_assert(urpc__sw_mr_dereg(&t, &mr));
	cr_assert_eq(t.ngrants, 0);
	for (i = 0; i < N; i++)
		cr_assert_eq(g_check(&t, g[i].key, mem + i, 1), URPC_SW_UNKNOWN);
	urpc__sw_mr_fini(&t);
}
