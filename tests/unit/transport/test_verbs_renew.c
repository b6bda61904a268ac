/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's rule under stalls and renewals of an RC pair: an
 * operation reports success only when every one of its bytes was moved by
 * a work request that completed successfully on the QP it was posted on.
 *
 * Two endpoints READ each other's granted bytes at once (as a client reads
 * large responses while its server reads large requests, over one RC
 * connection), in operations of many chunks, while the test stalls either
 * side's pair (what the one-sided deadline's scan does,
 * urpc__verbs_rc_stall()), cancels an operation in flight (a renewal: the
 * others are requeued on both sides), or revokes a grant being read (the
 * owner's responder refuses it: both QPs go to the error state). Whatever
 * ends in an error is posted again, as the engine does (read_again() in
 * server.c and client.c), into a destination poisoned first; every byte of
 * every operation that reports success is checked against the source's
 * pattern, which changes every round (so bytes of an earlier round show
 * too).
 *
 * Two cases: small chunks (16 KiB, up to 19 an operation, 24 rounds: many
 * chunk boundaries and requeues) and the transport's own chunk (1 MiB,
 * VERBS_RC_CHUNK, 16 rounds: what production posts). URPC_TEST_RENEW_CHUNK
 * and URPC_TEST_RENEW_ROUNDS override both cases' chunk and rounds;
 * URPC_TEST_RENEW_ONLY=0|1|2 keeps one disturbance (stall, cancel, revoke),
 * 9 none but the deadline scan's own stalls.
 *
 * Written for a corruption in the stress run (test_large_verbs after an RC
 * stall: a READ reported success with its bytes past the first 1 MiB chunk
 * never written). It was the guest kernel's: on Debian's 6.1 kernel the
 * 1 MiB case fails in most runs ("byte 1048576 ... not moved", with two
 * successful completions of the operation's two chunks on a fresh QP and
 * nothing else posted there, whatever the disturbance and with none); on
 * its 6.12 kernel, which tests/vm/rxe-vm.sh now boots, it passes
 * (tests/vm/README.md, "Soft-RoCE's kernel"). The 16 KiB case passed on
 * both.
 *
 * Runs where an RDMA port is active (Soft-RoCE in tests/vm, in the
 * test_verbs binary); elsewhere it skips.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "transport/verbs_dev.h"
#include "util/log.h"
#include "verbs_skip.h"
#if URPC_HAVE_VERBS
#include "transport/verbs_int.h"
#include "transport/verbs_rc.h"

#define K 6			/* operations of each side in flight */
#define SMALL_CHUNK 16384u	/* up to 19 chunks an operation */
#define ROUND_NS 60000000000ull /* a round in which nothing succeeded for this long fails */
#define POISON 0xee

struct side {
	struct urpc_tp *tp;
	struct urpc_tp_peer *peer; /* the other side */
	uint8_t *src, *dst;
	struct urpc_tp_mr src_mr, dst_mr;
	struct op {
		struct urpc_tp_grant g; /* the other side's grant this one READs */
		uint32_t off, len;	/* in the other side's source */
		bool busy, done;
		bool revoked; /* its grant went under it: its source is scribbled over */
		unsigned tries;
	} op[K];
	unsigned stalls, cancels, revokes, errors, checked;
};

static struct side S[2];
static uint32_t MAX_OP = 19 * SMALL_CHUNK - 4000; /* bytes of one operation, at most */
static uint32_t SRC_LEN;			  /* each side's source: K disjoint ranges */
static uint32_t SLOT_LEN = 19 * SMALL_CHUNK;	  /* each operation's destination */
static uint64_t gap_ns; /* between disturbances: up to twice a chunk's time, at first */

static uint8_t pat(unsigned side, unsigned round, uint32_t off)
{
	uint32_t h = (off ^ (round << 24) ^ (side << 31)) * 0x9e3779b1u;

	return (uint8_t)((h >> 24) ^ (h >> 11));
}

/* Skips the case unless URPC_TEST_DEVICE_A's RDMA port is active (verbs_skip.h). */
static void skip_without_device(void)
{
	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
}

static void side_open(struct side *s, const char *device_env, uint32_t timeout_ms)
{
	struct urpc_tp_cfg cfg;
	int ret;

	memset(s, 0, sizeof(*s));
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_VERBS);
	cfg.device = getenv(device_env);
	cfg.hp_flags = URPC_HP_FORCE_4K;
	cfg.one_sided_timeout_ms = timeout_ms;
	ret = urpc__tp_create(&cfg, &s->tp);
	cr_assert_eq(ret, 0, "create: %s", urpc_strerror(ret));
	s->src = malloc(SRC_LEN);
	s->dst = malloc((size_t)K * SLOT_LEN);
	cr_assert(s->src && s->dst);
	cr_assert_eq(
		s->tp->ops->reg_mem(s->tp, s->src, SRC_LEN, URPC_TP_ACCESS_GRANT_READ, &s->src_mr),
		0);
	cr_assert_eq(s->tp->ops->reg_mem(s->tp, s->dst, (size_t)K * SLOT_LEN, 0, &s->dst_mr), 0);
}

static void resolve(struct side *from, struct side *to)
{
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n = to->tp->ops->get_endpoint(to->tp, ep);

	cr_assert_eq(from->tp->ops->resolve_peer(from->tp, ep, n, &from->peer), 0);
}

/* Session management's part: carry @x's control messages to the other side; drop datagrams. */
static void serve(unsigned x)
{
	struct side *s = &S[x], *o = &S[!x];
	struct urpc_tp_peer *from;
	uint8_t buf[URPC_TP_EP_MAX];
	struct urpc_tp_rx rx[32];
	int n;

	while ((n = s->tp->ops->ctl_pop(s->tp, &from, buf)) > 0)
		o->tp->ops->ctl_push(o->tp, o->peer, buf, (size_t)n);
	n = s->tp->ops->rx_burst(s->tp, rx, 32);
	if (n > 0)
		s->tp->ops->rx_release(s->tp, rx, (unsigned)n);
}

/* Post op @k of side @x (READ of the other side's grant) into its poisoned slot. */
static void post(unsigned x, unsigned k)
{
	struct side *s = &S[x];
	struct op *op = &s->op[k];
	uint8_t *d = s->dst + (size_t)k * SLOT_LEN;
	int ret;

	memset(d, POISON, op->len);
	ret = s->tp->ops->post_read(s->tp, s->peer, d, &s->dst_mr, op->g.addr, op->g.key, op->len,
				    k);
	cr_assert_eq(ret, 0, "post_read: %s", urpc_strerror(ret));
	op->busy = true;
	op->tries++;
}

/* Start round @r: new bytes in both sources, new grants, every operation posted. */
static void round_start(unsigned r)
{
	unsigned x, k;
	uint32_t i;

	for (x = 0; x < 2; x++)
		for (i = 0; i < SRC_LEN; i++)
			S[x].src[i] = pat(x, r, i);
	for (x = 0; x < 2; x++) {
		struct side *o = &S[!x];

		for (k = 0; k < K; k++) {
			struct op *op = &S[x].op[k];

			op->len = 1 + (uint32_t)rand() % MAX_OP;
			/* Its own range of the source: scribbling over it touches no other. */
			op->off = k * SLOT_LEN + (uint32_t)rand() % (SLOT_LEN - op->len + 1);
			op->revoked = false;
			op->done = false;
			op->tries = 0;
			cr_assert_eq(o->tp->ops->grant(o->tp, o->peer, &o->src_mr, o->src + op->off,
						       op->len, URPC_TP_ACCESS_REMOTE_READ, &op->g),
				     0);
			post(x, k);
		}
	}
}

/* Op @k of side @x failed after its grant was revoked: the bytes back, a new grant. */
static void regrant(unsigned x, unsigned k, unsigned r)
{
	struct side *o = &S[!x];
	struct op *op = &S[x].op[k];
	uint32_t i;

	for (i = 0; i < op->len; i++)
		o->src[op->off + i] = pat(!x, r, op->off + i);
	cr_assert_eq(o->tp->ops->grant(o->tp, o->peer, &o->src_mr, o->src + op->off, op->len,
				       URPC_TP_ACCESS_REMOTE_READ, &op->g),
		     0);
	op->revoked = false;
}

/* Every byte of op @k of side @x, which reported success. */
static void check(unsigned x, unsigned k, unsigned r)
{
	const uint8_t *d = S[x].dst + (size_t)k * SLOT_LEN;
	const struct op *op = &S[x].op[k];
	uint32_t i;

	for (i = 0; i < op->len; i++)
		cr_assert_eq(d[i], pat(!x, r, op->off + i),
			     "round %u, side %u, op %u (%u bytes, try %u): byte %u of %u not "
			     "moved (0x%02x, want 0x%02x), yet the READ reported success",
			     r, x, k, op->len, op->tries, i, op->len, d[i],
			     pat(!x, r, op->off + i));
	S[x].checked++;
}

/*
 * Stall side @x's pair, cancel one of its operations in flight (a
 * renewal), or revoke the grant one of its READs is reading (the other
 * side's responder refuses it: both QPs go to the error state) and grant
 * the same bytes again for the next try.
 */
static void disturb(unsigned x)
{
	struct side *s = &S[x], *o = &S[!x];
	struct verbs_tp *v = to_verbs(s->tp);
	unsigned k = (unsigned)rand() % K;
	struct op *op = &s->op[k];

	if (!v->nposted || !v->conns)
		return;
	const char *only = getenv("URPC_TEST_RENEW_ONLY");

	switch (only && *only ? atoi(only) : rand() % 3) {
	case 0:
		urpc__verbs_rc_stall(v, v->conns, "the test stalls it");
		s->stalls++;
		break;
	case 1:
		if (op->busy && !s->tp->ops->cancel(s->tp, k, -ECANCELED))
			s->cancels++;
		break;
	case 2:
		/*
		 * The owner gives the memory back, to be used again: a READ
		 * that still reported success would show the scribble.
		 */
		if (!op->busy || op->revoked)
			break;
		o->tp->ops->revoke(o->tp, &op->g);
		memset(o->src + op->off, POISON ^ 0xff, op->len);
		op->revoked = true;
		s->revokes++;
		break;
	}
}

/* Poll both sides until every operation of round @r succeeded; disturb while @disturbing. */
static void round_run(unsigned r, bool disturbing)
{
	uint64_t now, end = urpc__now_ns() + ROUND_NS, next = 0, gap = gap_ns;
	unsigned was_left = 2 * K;
	bool moved = true; /* an operation succeeded since the last disturbance */
	struct urpc_tp_comp c[16];
	unsigned x, left = 2 * K;
	int n, i;

	while (left) {
		now = urpc__now_ns();
		/* Bound by progress: ROUND_NS from the last success (from the start before one). */
		if (left != was_left) {
			was_left = left;
			end = now + ROUND_NS;
		}
		cr_assert_lt(now, end, "round %u: %u operations made no progress for %llu s", r,
			     left, (unsigned long long)(ROUND_NS / 1000000000ull));
		for (x = 0; x < 2; x++) {
			serve(x);
			n = S[x].tp->ops->poll_completions(S[x].tp, c, 16);
			for (i = 0; i < n; i++) {
				unsigned k = (unsigned)c[i].wr_id;
				struct op *op = &S[x].op[k];

				cr_assert_lt(k, K);
				cr_assert(op->busy, "side %u op %u completed twice", x, k);
				op->busy = false;
				if (c[i].status) {
					S[x].errors++;
					if (op->revoked)
						regrant(x, k, r);
					post(x, k); /* as the engine reads again */
					continue;
				}
				check(x, k, r);
				op->done = true;
				moved = true;
				S[!x].tp->ops->revoke(S[!x].tp, &op->g);
				left--;
			}
			if (disturbing && now >= next) {
				/*
				 * Twice the gap after one that let nothing succeed, so
				 * a slow (loaded) host still finishes the round: up to
				 * 16 s, the time a 1 MiB chunk and a reconnect took
				 * through the emulated NIC beside the stress run's load
				 * (at a 1 s cap, every disturbance there came before
				 * any of 8 operations could succeed, for 60 s).
				 */
				gap = moved ? gap_ns : URPC_MIN(2 * gap, 16000000000ull);
				if (next)
					disturb((unsigned)rand() % 2);
				moved = false;
				next = now + (uint64_t)rand() % (2 * gap);
			}
		}
	}
}

#endif /* URPC_HAVE_VERBS */

#if URPC_HAVE_VERBS
/* One case: @chunk bytes a work request, @rounds rounds (the environment's
 * URPC_TEST_RENEW_* override both). */
static void run_renew(uint32_t chunk, unsigned rounds)
{
	const char *env = getenv("URPC_TEST_RENEW_ROUNDS");
	unsigned r;
	char buf[32];

	skip_without_device();
	if (env && atoi(env) > 0)
		rounds = (unsigned)atoi(env);
	srand(12345);
	env = getenv("URPC_TEST_RENEW_CHUNK");
	if (env && atoi(env) >= 4096)
		chunk = (uint32_t)atoi(env);
	MAX_OP = URPC_MIN(19 * chunk - 1000, 3u << 20);
	SLOT_LEN = MAX_OP;
	SRC_LEN = K * SLOT_LEN;
	gap_ns = (5 + chunk / 16384) * 1000000ull;
	snprintf(buf, sizeof(buf), "%u", chunk);
	cr_assert_eq(setenv("URPC_VERBS_RC_CHUNK", buf, 1), 0);
	side_open(&S[0], "URPC_TEST_DEVICE_A", 1000);
	side_open(&S[1], "URPC_TEST_DEVICE_B", 1000);
	unsetenv("URPC_VERBS_RC_CHUNK");
	resolve(&S[0], &S[1]);
	resolve(&S[1], &S[0]);
	for (r = 0; r < rounds; r++) {
		round_start(r);
		round_run(r, r + 1 < rounds); /* the last round settles undisturbed */
	}
	cr_log_info("stalls %u/%u, cancels %u/%u, revokes %u/%u, errors re-posted %u/%u, "
		    "checked %u/%u",
		    S[0].stalls, S[1].stalls, S[0].cancels, S[1].cancels, S[0].revokes,
		    S[1].revokes, S[0].errors, S[1].errors, S[0].checked, S[1].checked);
	cr_assert_gt(S[0].stalls + S[1].stalls + S[0].cancels + S[1].cancels, 0,
		     "nothing was disturbed");
	for (unsigned x = 0; x < 2; x++) {
		struct side *s = &S[x];

		s->tp->ops->release_peer(s->tp, s->peer);
	}
	for (unsigned x = 0; x < 2; x++) {
		struct side *s = &S[x];

		s->tp->ops->dereg_mem(s->tp, &s->src_mr);
		s->tp->ops->dereg_mem(s->tp, &s->dst_mr);
		cr_assert_eq(s->tp->ops->destroy(s->tp), 0);
		free(s->src);
		free(s->dst);
	}
}
#endif /* URPC_HAVE_VERBS */

Test(verbs_renew, stalls_and_renewals_never_report_bytes_not_moved, .timeout = 600)
{
#if URPC_HAVE_VERBS
	run_renew(SMALL_CHUNK, 24);
#else
	cr_skip_test("this build has no verbs transport (libibverbs not found)");
#endif
}

Test(verbs_renew, transport_chunks_never_report_bytes_not_moved, .timeout = 600)
{
#if URPC_HAVE_VERBS
	run_renew(VERBS_RC_CHUNK, 16);
#else
	cr_skip_test("this build has no verbs transport (libibverbs not found)");
#endif
}
