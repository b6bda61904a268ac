/* SPDX-License-Identifier: MIT */
/*
 * The loop transport across threads: every endpoint driven by its own
 * thread, as Rpcs on different threads drive theirs. Datagrams from several
 * senders into one ring (with and without cfg.rx_reclaim), echoes between every pair of threads, one-sided
 * READ and WRITE from several requesters to one target, requesters failing
 * their operations while the target copies, and a target destroyed under
 * traffic. Every byte is checked, every operation must complete exactly
 * once. scripts/test.sh also runs this file under ThreadSanitizer, built as
 * a plain program (tests/plain_test.h).
 *
 * Endpoints are created and their peers resolved on the test's thread,
 * then handed to their threads (pthread_create orders the two). Criterion
 * asserts only on the test's thread: the threads count failures (fail())
 * and the test asserts on the count after joining them.
 */
#ifdef PLAIN_TEST
#include "plain_test.h" /* the ThreadSanitizer build: Criterion cannot start under TSan */
#else
#include <criterion/criterion.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thread_fail.h"
#include "transport/transport.h"
#include "util/seam.h"

#define MAX_THREADS 4
/* Fewer rounds under ThreadSanitizer (several times slower): its reports need interleavings, not volume. */
#ifdef PLAIN_TEST
#define SCALE 3
#else
#define SCALE 1
#endif
#define WAIT_NS 60000000000ull /* a bound, not an expectation (TSan on 2 loaded cores) */

/* ---- failures seen on the threads ----------------------------------------- */

/* fail(), first_err, nerrors and give_up come from thread_fail.h. */

/* True once the test's time is up (counted as a failure) or another thread gave up. */
static bool stop_now(uint64_t end, const char *what)
{
	if (atomic_load(&give_up))
		return true;
	if (urpc__now_ns() < end)
		return false;
	fail("timed out: %s", what);
	atomic_store(&give_up, true);
	return true;
}

static void assert_no_errors(void)
{
	cr_assert_eq(nerrors, 0, "%u failures on the threads; the first: %s", nerrors, first_err);
}

static struct urpc_tp *open_ep_cfg(uint32_t rq_depth, bool reclaim)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *tp;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cfg.rq_depth = rq_depth;
	cfg.rx_reclaim = reclaim;
	cfg.hp_flags = URPC_HP_FORCE_4K; /* small rings */
	cr_assert_eq(urpc__tp_create(&cfg, &tp), 0);
	return tp;
}

static struct urpc_tp *open_ep(uint32_t rq_depth)
{
	return open_ep_cfg(rq_depth, false);
}

static struct urpc_tp_peer *resolve(struct urpc_tp *from, struct urpc_tp *to)
{
	uint8_t ep[URPC_TP_EP_MAX];
	struct urpc_tp_peer *peer;
	size_t n = to->ops->get_endpoint(to, ep);

	cr_assert_eq(from->ops->resolve_peer(from, ep, n, &peer), 0);
	return peer;
}

static void start_threads(pthread_t *th, unsigned n, void *(*fn)(void *), void *args,
			  size_t arg_size)
{
	unsigned i;

	for (i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, fn, (char *)args + i * arg_size), 0);
}

static void join_threads(pthread_t *th, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
}

/* ---- datagrams ----------------------------------------------------------- */

/* Every datagram of these tests: this header, then hdr.len pattern bytes. */
struct dgram {
	uint32_t from;
	uint32_t to;
	uint32_t seq;
	uint32_t len;
	uint32_t kind; /* K_* */
};

enum { K_DATA = 1, K_REQ = 2, K_RESP = 3 };

static uint8_t dpat(uint32_t from, uint32_t seq, uint32_t i)
{
	return (uint8_t)((from + 1) * 131u + seq * 29u + i * 7u);
}

/* Mostly small datagrams, one in 16 up to @max payload bytes. */
static uint32_t dsize(uint32_t seq, uint32_t max)
{
	return seq % 16 == 5 ? (seq * 2654435761u >> 7) % (max + 1) : seq % 61;
}

static void fill_payload(uint8_t *p, uint32_t from, uint32_t seq, uint32_t len, uint8_t xor)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = dpat(from, seq, i) ^ xor;
}

/*
 * Check a datagram's length and payload against its header (a response's
 * bytes are the request's, inverted); false (and a failure) if wrong.
 */
static bool check_dgram(const struct urpc_tp_rx *rx, struct dgram *h)
{
	uint8_t xor ;
	uint32_t i;

	if (rx->len < sizeof(*h)) {
		fail("a %u-byte datagram", rx->len);
		return false;
	}
	memcpy(h, rx->buf, sizeof(*h));
	if (h->len != rx->len - sizeof(*h)) {
		fail("datagram %u from %u: header says %u bytes, %zu came", h->seq, h->from, h->len,
		     rx->len - sizeof(*h));
		return false;
	}
	xor = h->kind == K_RESP ? 0xff : 0;
	for (i = 0; i < h->len; i++)
		if (rx->buf[sizeof(*h) + i] != (dpat(h->from, h->seq, i) ^ xor)) {
			fail("datagram %u from %u kind %u: byte %u of %u is wrong", h->seq, h->from,
			     h->kind, i, h->len);
			return false;
		}
	return true;
}

#define FAN_IN_N (6000 / SCALE) /* datagrams per sender */

struct fan_in {
	unsigned nsenders;
	bool paced;   /* senders keep what is in flight within the ring: nothing may be lost */
	bool reclaim; /* the receiver has cfg.rx_reclaim */
	bool now;     /* senders send with tx_now(), one datagram at a time */
	struct urpc_tp *rcv;
	struct urpc_tp *snd[MAX_THREADS];
	struct urpc_tp_peer *to_rcv[MAX_THREADS];
	atomic_uint credit_used[MAX_THREADS]; /* released by the receiver, per sender */
	atomic_uint senders_done;
	uint64_t end;
	unsigned received[MAX_THREADS];
};

struct fan_arg {
	struct fan_in *f;
	unsigned idx; /* sender index; the receiver is nsenders */
};

static void *fan_sender(void *p)
{
	struct fan_arg *a = p;
	struct fan_in *f = a->f;
	struct urpc_tp *tp = f->snd[a->idx];
	uint32_t credit = f->rcv->rq_depth / f->nsenders;
	static __thread uint8_t buf[8][4096];
	struct urpc_tp_tx tx[8];
	struct dgram h[8];
	uint32_t seq = 0;

	while (seq < FAN_IN_N && !stop_now(f->end, "a sender")) {
		unsigned n = 1 + seq % 8, i;
		int k;

		if (n > FAN_IN_N - seq)
			n = FAN_IN_N - seq;
		if (f->paced) {
			uint32_t released = atomic_load(&f->credit_used[a->idx]);

			if (seq + n - released > credit) {
				sched_yield();
				continue;
			}
		}
		for (i = 0; i < n; i++) {
			h[i] = (struct dgram){.from = a->idx,
					      .seq = seq + i,
					      .len = dsize(seq + i, tp->mtu - sizeof(h[i])),
					      .kind = K_DATA};
			fill_payload(buf[i], a->idx, seq + i, h[i].len, 0);
			tx[i] = (struct urpc_tp_tx){.peer = f->to_rcv[a->idx],
						    .hdr = &h[i],
						    .hdr_len = sizeof(h[i]),
						    .data = buf[i],
						    .data_len = h[i].len};
		}
		if (f->now) {
			static __thread uint8_t one[4096];

			for (i = 0, k = 0; i < n; i++) {
				memcpy(one, &h[i], sizeof(h[i]));
				memcpy(one + sizeof(h[i]), buf[i], h[i].len);
				if (tp->ops->tx_now(tp, tx[i].peer, one,
						    (uint32_t)sizeof(h[i]) + h[i].len) == 0)
					k++;
			}
		} else {
			k = tp->ops->tx_burst(tp, tx, n);
		}
		if (k != (int)n) {
			fail("tx_burst took %d of %u", k, n);
			break;
		}
		seq += n;
	}
	atomic_fetch_add(&f->senders_done, 1);
	return NULL;
}

static void *fan_receiver(void *p)
{
	struct fan_arg *a = p;
	struct fan_in *f = a->f;
	struct urpc_tp *tp = f->rcv;
	uint32_t next[MAX_THREADS] = {0}, lent_from[32];
	struct urpc_tp_rx rx[32];
	uint64_t total = (uint64_t)FAN_IN_N * f->nsenders, got = 0;
	int lent = 0;

	for (;;) {
		bool senders_done = atomic_load(&f->senders_done) == f->nsenders;
		int k = tp->ops->rx_burst(tp, rx, 32), i;
		uint32_t from[32];

		/* With rx_reclaim this burst took the last one's entries back: credit them now. */
		for (i = 0; i < lent; i++)
			if (lent_from[i] < f->nsenders)
				atomic_fetch_add(&f->credit_used[lent_from[i]], 1);
		lent = 0;
		for (i = 0; i < k; i++) {
			struct dgram h;

			from[i] = MAX_THREADS;
			if (!check_dgram(&rx[i], &h))
				continue;
			if (h.from >= f->nsenders || h.kind != K_DATA) {
				fail("datagram from unknown sender %u", h.from);
				continue;
			}
			/* One ring, FIFO per sender: in order, gaps only where the ring was full. */
			if (h.seq < next[h.from] || (f->paced && h.seq != next[h.from]))
				fail("sender %u: datagram %u after %u", h.from, h.seq,
				     next[h.from]);
			next[h.from] = h.seq + 1;
			f->received[h.from]++;
			from[i] = h.from;
		}
		if (k > 0 && f->reclaim) {
			memcpy(lent_from, from, (size_t)k * sizeof(from[0]));
			lent = k;
			got += (uint64_t)k;
		} else if (k > 0) {
			/* Credit only once the entries are back (their bytes are the senders' again). */
			tp->ops->rx_release(tp, rx, (unsigned)k);
			for (i = 0; i < k; i++)
				if (from[i] < f->nsenders)
					atomic_fetch_add(&f->credit_used[from[i]], 1);
			got += (uint64_t)k;
		}
		/* Done when everything sent is accounted for: received or lost on a full ring. */
		if (got + tp->stats.rx_drop_ring_full == total)
			break;
		if (k <= 0 && senders_done && got + tp->stats.rx_drop_ring_full > total) {
			fail("%llu received and %llu lost of %llu sent", (unsigned long long)got,
			     (unsigned long long)tp->stats.rx_drop_ring_full,
			     (unsigned long long)total);
			break;
		}
		if (stop_now(f->end, "the receiver"))
			break;
	}
	return NULL;
}

static void fan_in_run(unsigned nsenders, bool paced, bool reclaim, bool now)
{
	struct fan_arg args[MAX_THREADS + 1];
	pthread_t th[MAX_THREADS + 1];
	static struct fan_in f;
	unsigned i, sum = 0;

	memset(&f, 0, sizeof(f));
	f.nsenders = nsenders;
	f.paced = paced;
	f.reclaim = reclaim;
	f.now = now;
	f.end = urpc__now_ns() + WAIT_NS;
	/* small: it wraps every 64 datagrams and fills under flood */
	f.rcv = open_ep_cfg(64, reclaim);
	for (i = 0; i < nsenders; i++) {
		f.snd[i] = open_ep(64);
		f.to_rcv[i] = resolve(f.snd[i], f.rcv);
	}
	for (i = 0; i <= nsenders; i++)
		args[i] = (struct fan_arg){.f = &f, .idx = i};
	start_threads(th, nsenders, fan_sender, args, sizeof(args[0]));
	cr_assert_eq(pthread_create(&th[nsenders], NULL, fan_receiver, &args[nsenders]), 0);
	join_threads(th, nsenders + 1);
	assert_no_errors();
	for (i = 0; i < nsenders; i++) {
		sum += f.received[i];
		if (paced)
			cr_assert_eq(f.received[i], FAN_IN_N, "sender %u: %u arrived", i,
				     f.received[i]);
		f.snd[i]->ops->release_peer(f.snd[i], f.to_rcv[i]);
		cr_assert_eq(f.snd[i]->ops->destroy(f.snd[i]), 0);
	}
	if (paced)
		cr_assert_eq(f.rcv->stats.rx_drop_ring_full, 0, "paced senders lost datagrams");
	cr_assert_eq(sum + f.rcv->stats.rx_drop_ring_full, FAN_IN_N * nsenders);
	cr_assert_eq(f.rcv->stats.rx_pkts, sum);
	cr_assert_eq(f.rcv->ops->destroy(f.rcv), 0);
}

Test(loop_threads, one_sender_one_receiver)
{
	fan_in_run(1, true, false, false);
}

Test(loop_threads, three_senders_one_receiver)
{
	fan_in_run(3, true, false, false);
}

Test(loop_threads, three_senders_flood_a_full_ring)
{
	fan_in_run(3, false, false, false);
}

/* With rx_reclaim: sender 0 has the receiver's lane, the others share its ring. */
Test(loop_threads, three_senders_one_reclaiming_receiver)
{
	fan_in_run(3, true, true, false);
}

Test(loop_threads, three_senders_flood_a_reclaiming_receiver)
{
	fan_in_run(3, false, true, false);
}

/* tx_now() from three threads: claims race on the ring's tail (and its full limit). */
Test(loop_threads, three_senders_flood_with_tx_now)
{
	fan_in_run(3, false, true, true);
}

Test(loop_threads, three_senders_with_tx_now)
{
	fan_in_run(3, true, true, true);
}

/* ---- echoes between every pair of threads -------------------------------- */

#define ECHO_N (1500 / SCALE) /* requests each thread sends to each other thread */
#define ECHO_WINDOW 8
#define ECHO_BURST 16 /* 2 x 3 x ECHO_WINDOW + ECHO_BURST fit a 64-entry ring */

struct mesh {
	unsigned n;
	struct urpc_tp *tp[MAX_THREADS];
	struct urpc_tp_peer *peer[MAX_THREADS][MAX_THREADS]; /* [from][to] */
	atomic_uint clients_done;
	uint64_t end;
};

struct mesh_arg {
	struct mesh *m;
	unsigned idx;
};

/* Send one datagram of @kind to @to; a failure is counted. */
static void mesh_send(struct mesh *m, unsigned from, unsigned to, uint32_t kind, uint32_t seq,
		      uint8_t *scratch)
{
	struct urpc_tp *tp = m->tp[from];
	struct dgram h = {.from = kind == K_REQ ? from : to, /* the pattern's owner: the client */
			  .to = kind == K_REQ ? to : from,
			  .seq = seq,
			  .len = dsize(seq, tp->mtu - sizeof(h)),
			  .kind = kind};
	struct urpc_tp_tx tx;
	int k;

	fill_payload(scratch, h.from, seq, h.len, kind == K_RESP ? 0xff : 0);
	tx = (struct urpc_tp_tx){.peer = m->peer[from][to],
				 .hdr = &h,
				 .hdr_len = sizeof(h),
				 .data = scratch,
				 .data_len = h.len};
	k = tp->ops->tx_burst(tp, &tx, 1);
	if (k != 1)
		fail("thread %u: tx_burst to %u returned %d", from, to, k);
}

static void *mesh_thread(void *p)
{
	struct mesh_arg *a = p;
	struct mesh *m = a->m;
	struct urpc_tp *tp = m->tp[a->idx];
	static __thread uint8_t scratch[4096];
	uint32_t sent[MAX_THREADS] = {0}, answered[MAX_THREADS] = {0};
	uint32_t next_req[MAX_THREADS] = {0};
	struct urpc_tp_rx rx[32];
	bool client_done = false;
	unsigned j;

	while (atomic_load(&m->clients_done) < m->n && !stop_now(m->end, "an echo thread")) {
		int k, i;

		/* Client: keep ECHO_WINDOW requests in flight to every other thread. */
		for (j = 0; j < m->n; j++)
			while (j != a->idx && sent[j] < ECHO_N &&
			       sent[j] - answered[j] < ECHO_WINDOW)
				mesh_send(m, a->idx, j, K_REQ, sent[j]++, scratch);
		/* Server and client: answer requests, check responses. */
		k = tp->ops->rx_burst(tp, rx, ECHO_BURST);
		for (i = 0; i < k; i++) {
			struct dgram h;

			if (!check_dgram(&rx[i], &h))
				continue;
			if (h.kind == K_REQ && h.to == a->idx && h.from < m->n) {
				/* Each direction is FIFO and nothing is lost (windows fit the ring). */
				if (h.seq != next_req[h.from])
					fail("thread %u: request %u from %u, expected %u", a->idx,
					     h.seq, h.from, next_req[h.from]);
				next_req[h.from] = h.seq + 1;
				mesh_send(m, a->idx, h.from, K_RESP, h.seq, scratch);
			} else if (h.kind == K_RESP && h.from == a->idx && h.to < m->n) {
				if (h.seq != answered[h.to])
					fail("thread %u: response %u from %u, expected %u", a->idx,
					     h.seq, h.to, answered[h.to]);
				answered[h.to] = h.seq + 1;
			} else {
				fail("thread %u: stray datagram kind %u from %u to %u", a->idx,
				     h.kind, h.from, h.to);
			}
		}
		if (k > 0)
			tp->ops->rx_release(tp, rx, (unsigned)k);
		if (!client_done) {
			client_done = true;
			for (j = 0; j < m->n; j++)
				if (j != a->idx && answered[j] != ECHO_N)
					client_done = false;
			if (client_done)
				atomic_fetch_add(&m->clients_done, 1);
		}
	}
	return NULL;
}

static void mesh_run(unsigned n)
{
	struct mesh_arg args[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	static struct mesh m;
	unsigned i, j;

	memset(&m, 0, sizeof(m));
	m.n = n;
	m.end = urpc__now_ns() + WAIT_NS;
	/*
	 * 64 entries hold what may be in flight to one thread: 2 x 3 peers x
	 * the window, and the burst it holds while it answers (an entry it
	 * answered stays lent until the burst's release, while its window
	 * slot is already free for the peer's next request or response).
	 */
	for (i = 0; i < n; i++)
		m.tp[i] = open_ep(64);
	for (i = 0; i < n; i++) {
		args[i] = (struct mesh_arg){.m = &m, .idx = i};
		for (j = 0; j < n; j++)
			if (i != j)
				m.peer[i][j] = resolve(m.tp[i], m.tp[j]);
	}
	start_threads(th, n, mesh_thread, args, sizeof(args[0]));
	join_threads(th, n);
	assert_no_errors();
	for (i = 0; i < n; i++) {
		cr_assert_eq(m.tp[i]->stats.rx_drop_ring_full, 0, "thread %u's ring overflowed", i);
		cr_assert_eq(m.tp[i]->stats.rx_pkts, 2ull * ECHO_N * (n - 1));
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			if (i != j)
				m.tp[i]->ops->release_peer(m.tp[i], m.peer[i][j]);
	for (i = 0; i < n; i++)
		cr_assert_eq(m.tp[i]->ops->destroy(m.tp[i]), 0);
}

Test(loop_threads, echo_two_threads)
{
	mesh_run(2);
}

Test(loop_threads, echo_four_threads)
{
	mesh_run(4);
}

/* ---- one-sided operations from several requesters ------------------------- */

#define OS_RO_LEN (1u << 20)	/* the target's READ-only half: a pattern */
#define OS_RW_LEN (256u << 10)	/* each requester's WRITE area */
#define OS_LOCAL_LEN (1u << 20) /* each requester's local buffer */
#define OS_ROUNDS (60 / SCALE)
#define OS_BATCH 48 /* operations in flight per requester (at most 64) */
#define OS_TRACK (OS_ROUNDS * OS_BATCH * 3 + 8)

struct os_world {
	unsigned nreq;
	struct urpc_tp *target;
	uint8_t *region; /* OS_RO_LEN + nreq * OS_RW_LEN */
	struct urpc_tp_mr region_mr;
	struct urpc_tp *req[MAX_THREADS];
	struct urpc_tp_peer *to_target[MAX_THREADS];
	atomic_uint requesters_done;
	atomic_ulong posted;
	atomic_bool target_gone; /* destroy_under_traffic: the target destroyed its endpoint */
	bool destroy_midway;
	uint64_t end;
};

struct os_arg {
	struct os_world *w;
	unsigned idx;
};

static uint8_t ro_pat(size_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static uint8_t wr_pat(unsigned req, unsigned round, size_t i)
{
	return (uint8_t)((req + 3) * 17u + round * 101u + i * 13u);
}

/* Target: serve until every requester is done, then take the memory back and go. */
static void *os_target(void *p)
{
	struct os_arg *a = p;
	struct os_world *w = a->w;
	struct urpc_tp *tp = w->target;
	struct urpc_tp_rx rx[32];
	struct urpc_tp_comp c[4];
	unsigned long third = (unsigned long)w->nreq * OS_ROUNDS * OS_BATCH;
	unsigned polls;
	int k;

	while (atomic_load(&w->requesters_done) < w->nreq) {
		k = tp->ops->rx_burst(tp, rx, 32);
		if (k > 0)
			tp->ops->rx_release(tp, rx,
					    (unsigned)k); /* datagrams are not checked here */
		if (tp->ops->poll_completions(tp, c, 4) != 0)
			fail("the target has completions of its own");
		if (w->destroy_midway && atomic_load(&w->posted) >= third)
			break; /* in the middle of the traffic */
		if (stop_now(w->end, "the target"))
			break;
	}
	tp->ops->dereg_mem(tp, &w->region_mr);
	if (w->destroy_midway) {
		/* Serve a while more against no registration: every request gets -EACCES. */
		for (polls = 0; polls < 2000; polls++) {
			k = tp->ops->rx_burst(tp, rx, 32);
			if (k > 0)
				tp->ops->rx_release(tp, rx, (unsigned)k);
		}
	}
	if (tp->ops->destroy(tp) != 0)
		fail("the target's destroy failed");
	atomic_store(&w->target_gone, true);
	return NULL;
}

struct os_track {
	uint64_t wr_id;
	uint8_t *local;
	size_t len;
	uint64_t raddr;
	bool write;
	bool bad_key;
	bool done;
};

/*
 * Reap until @want completions came (or, with @until_idle, until none is
 * outstanding); check each against @t (exactly once, status, bytes).
 * Returns how many completed with -ECONNRESET.
 */
static unsigned os_reap(struct os_world *w, unsigned idx, struct os_track *t, unsigned nt,
			unsigned want)
{
	struct urpc_tp *tp = w->req[idx];
	struct urpc_tp_comp c[16];
	unsigned got = 0, reset = 0;
	size_t j;
	int k, i;

	while (got < want && !stop_now(w->end, "a requester's completions")) {
		k = tp->ops->poll_completions(tp, c, 16);
		if (k <= 0) {
			sched_yield();
			continue;
		}
		for (i = 0; i < k; i++) {
			struct os_track *o;

			if (c[i].wr_id >= nt) {
				fail("requester %u: unknown wr_id %llu", idx,
				     (unsigned long long)c[i].wr_id);
				continue;
			}
			o = &t[c[i].wr_id];
			if (o->done) {
				fail("requester %u: wr_id %llu completed twice", idx,
				     (unsigned long long)c[i].wr_id);
				continue;
			}
			o->done = true;
			got++;
			if (c[i].op != (o->write ? URPC_TP_OP_WRITE : URPC_TP_OP_READ))
				fail("requester %u: wr_id %llu completed as op %d", idx,
				     (unsigned long long)c[i].wr_id, c[i].op);
			if (c[i].status == -ECONNRESET && w->destroy_midway) {
				reset++;
				continue;
			}
			if (o->bad_key || (c[i].status == -EACCES && w->destroy_midway)) {
				if (c[i].status != -EACCES)
					fail("requester %u: a bad key completed with %d", idx,
					     c[i].status);
				continue;
			}
			if (c[i].status != 0) {
				fail("requester %u: wr_id %llu completed with %d", idx,
				     (unsigned long long)c[i].wr_id, c[i].status);
				continue;
			}
			if (o->write)
				continue;
			/* A READ of the read-only half (own area: checked by the caller). */
			for (j = 0; j < o->len; j++) {
				size_t off = (size_t)(o->raddr - (uintptr_t)w->region) + j;

				if (off < OS_RO_LEN && o->local[j] != ro_pat(off)) {
					fail("requester %u: READ of %zu bytes at %zu: byte %zu wrong",
					     idx, o->len, off - j, j);
					break;
				}
			}
		}
	}
	return reset;
}

static void *os_requester(void *p)
{
	struct os_arg *a = p;
	struct os_world *w = a->w;
	struct urpc_tp *tp = w->req[a->idx];
	struct urpc_tp_peer *peer = w->to_target[a->idx];
	uint8_t *local = malloc(OS_LOCAL_LEN), *mine = w->region + OS_RO_LEN + a->idx * OS_RW_LEN;
	struct os_track *t = calloc(OS_TRACK, sizeof(*t));
	unsigned round, i, nt = 0, reset = 0;
	struct urpc_tp_mr mr;
	uint32_t seed = 12345 + a->idx;

	if (!local || !t || tp->ops->reg_mem(tp, local, OS_LOCAL_LEN, 0, &mr)) {
		fail("requester %u: setup", a->idx);
		goto out;
	}
	for (round = 0; round < OS_ROUNDS && !reset && !atomic_load(&give_up); round++) {
		size_t chunk = OS_LOCAL_LEN / OS_BATCH, wlen = OS_RW_LEN / OS_BATCH;
		unsigned base = nt, phase;

		/* Phase 0: READs of the read-only half; 1: WRITEs of own area; 2: READ them back. */
		for (phase = 0; phase < 3 && !reset; phase++) {
			for (i = 0; i < OS_BATCH; i++) {
				struct os_track *o = &t[nt];
				uint32_t rkey = w->region_mr.rkey;
				size_t j;
				int ret;

				seed = seed * 1103515245u + 12345u;
				o->wr_id = nt;
				o->local = local + i * chunk;
				if (phase == 0) {
					o->len = 1 + (seed >> 8) % chunk;
					o->raddr = (uintptr_t)w->region +
						   (seed >> 4) % (OS_RO_LEN - o->len);
					o->bad_key = i == 7;
					if (o->bad_key)
						rkey ^= 0x80000000u;
				} else {
					o->len = wlen;
					o->raddr = (uintptr_t)mine + i * wlen;
					o->write = phase == 1;
					for (j = 0; j < wlen && o->write; j++)
						o->local[j] = wr_pat(a->idx, round, i * wlen + j);
					if (!o->write)
						memset(o->local, 0, wlen);
				}
				if (o->write)
					ret = tp->ops->post_write(tp, peer, o->local, &mr, o->raddr,
								  rkey, o->len, o->wr_id);
				else
					ret = tp->ops->post_read(tp, peer, o->local, &mr, o->raddr,
								 rkey, o->len, o->wr_id);
				if (ret) {
					fail("requester %u: post returned %d", a->idx, ret);
					goto out_dereg;
				}
				atomic_fetch_add(&w->posted, 1);
				nt++;
			}
			reset += os_reap(w, a->idx, t, nt, OS_BATCH);
			if (phase == 2 && !reset && !w->destroy_midway) {
				for (i = 0; i < OS_BATCH; i++) {
					size_t j;

					for (j = 0; j < wlen; j++)
						if (t[base + 2 * OS_BATCH + i].local[j] !=
						    wr_pat(a->idx, round, i * wlen + j)) {
							fail("requester %u: WRITE then READ of "
							     "chunk %u: byte %zu wrong",
							     a->idx, i, j);
							break;
						}
				}
			}
		}
	}
	/* Whatever is still outstanding completes (served, refused or reset). */
	{
		unsigned left = 0;

		for (i = 0; i < nt; i++)
			left += !t[i].done;
		os_reap(w, a->idx, t, nt, left);
	}
	if (w->destroy_midway) {
		/* The target is going or gone: what is posted now must fail -ECONNRESET. */
		while (!atomic_load(&w->target_gone) && !stop_now(w->end, "the target's destroy"))
			sched_yield();
		for (i = 0; i < 8; i++) {
			struct os_track *o = &t[nt];
			struct urpc_tp_comp c;
			uint32_t junk = 1;
			struct urpc_tp_tx tx = {.peer = peer, .hdr = &junk, .hdr_len = 4};

			o->wr_id = nt;
			o->local = local;
			o->len = 64;
			o->raddr = (uintptr_t)w->region;
			if (tp->ops->tx_burst(tp, &tx, 1) != 1)
				fail("a datagram to a dead endpoint must vanish quietly");
			if (tp->ops->post_read(tp, peer, local, &mr, o->raddr, w->region_mr.rkey,
					       64, nt) != 0 ||
			    tp->ops->poll_completions(tp, &c, 1) != 1 || c.wr_id != nt ||
			    c.status != -ECONNRESET)
				fail("requester %u: a READ of a destroyed target", a->idx);
			o->done = true;
			nt++;
		}
	}
out_dereg:
	tp->ops->dereg_mem(tp, &mr); /* fails what a bad post left outstanding */
out:
	atomic_fetch_add(&w->requesters_done, 1);
	free(local);
	free(t);
	return NULL;
}

static void os_run(unsigned nreq, bool destroy_midway)
{
	struct os_arg args[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	static struct os_world w;
	size_t len = OS_RO_LEN + (size_t)nreq * OS_RW_LEN, i;

	memset(&w, 0, sizeof(w));
	w.nreq = nreq;
	w.destroy_midway = destroy_midway;
	w.end = urpc__now_ns() + WAIT_NS;
	w.region = calloc(1, len);
	cr_assert_not_null(w.region);
	for (i = 0; i < OS_RO_LEN; i++)
		w.region[i] = ro_pat(i);
	w.target = open_ep(64);
	cr_assert_eq(
		w.target->ops->reg_mem(w.target, w.region, len,
				       URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE,
				       &w.region_mr),
		0);
	for (i = 0; i < nreq; i++) {
		w.req[i] = open_ep(64);
		w.to_target[i] = resolve(w.req[i], w.target);
		args[i] = (struct os_arg){.w = &w, .idx = (unsigned)i};
	}
	args[nreq] = (struct os_arg){.w = &w, .idx = nreq};
	start_threads(th, nreq, os_requester, args, sizeof(args[0]));
	cr_assert_eq(pthread_create(&th[nreq], NULL, os_target, &args[nreq]), 0);
	join_threads(th, nreq + 1);
	assert_no_errors();
	for (i = 0; i < nreq; i++) {
		w.req[i]->ops->release_peer(w.req[i], w.to_target[i]);
		cr_assert_eq(w.req[i]->ops->destroy(w.req[i]), 0);
	}
	free(w.region);
}

Test(loop_threads, one_sided_one_requester)
{
	os_run(1, false);
}

Test(loop_threads, one_sided_three_requesters)
{
	os_run(3, false);
}

Test(loop_threads, target_destroyed_under_traffic)
{
	os_run(3, true);
}

/* ---- a requester fails its operations while the target copies ------------- */

#define CANCEL_ROUNDS (120 / SCALE)
#define CANCEL_LEN (256u << 10)

struct cancel_world {
	struct urpc_tp *target, *req;
	struct urpc_tp_peer *peer;
	uint8_t *remote;
	struct urpc_tp_mr remote_mr;
	atomic_bool stop;
	uint64_t end;
	unsigned ok, failed;
};

static void *cancel_target(void *p)
{
	struct cancel_world *w = p;
	struct urpc_tp_rx rx[8];
	int k;

	while (!atomic_load(&w->stop)) {
		k = w->target->ops->rx_burst(w->target, rx, 8);
		if (k > 0)
			w->target->ops->rx_release(w->target, rx, (unsigned)k);
		if (stop_now(w->end, "the cancel target"))
			break;
	}
	return NULL;
}

/* Post a small READ into @local and wait for it: the target has worked through its queue. */
static void cancel_fence(struct cancel_world *w, uint8_t *local, struct urpc_tp_mr *mr)
{
	struct urpc_tp_comp c;
	int k;

	if (w->req->ops->post_read(w->req, w->peer, local, mr, (uintptr_t)w->remote,
				   w->remote_mr.rkey, 1, 999999)) {
		fail("the fence's post failed");
		return;
	}
	do
		k = w->req->ops->poll_completions(w->req, &c, 1);
	while (k == 0 && !stop_now(w->end, "the fence"));
	if (k == 1 && (c.wr_id != 999999 || c.status != 0))
		fail("the fence completed as %llu with %d", (unsigned long long)c.wr_id, c.status);
}

static void *cancel_requester(void *p)
{
	struct cancel_world *w = p;
	struct urpc_tp *tp = w->req;
	uint8_t *local = malloc(4 * CANCEL_LEN), *fence = malloc(64),
		*sentinel = malloc(4 * CANCEL_LEN);
	struct urpc_tp_mr mr, fmr;
	unsigned round, i;

	if (!local || !fence || !sentinel || tp->ops->reg_mem(tp, fence, 64, 0, &fmr)) {
		fail("cancel requester setup");
		goto out;
	}
	memset(sentinel, 0xee, 4 * CANCEL_LEN);
	for (round = 0; round < CANCEL_ROUNDS && !atomic_load(&give_up); round++) {
		bool by_release = round % 3 == 2;
		unsigned seen[4] = {0}, got = 0;
		struct urpc_tp_comp c[4];
		int k;

		if (tp->ops->reg_mem(tp, local, 4 * CANCEL_LEN, 0, &mr)) {
			fail("reg_mem");
			break;
		}
		for (i = 0; i < 4; i++)
			if (tp->ops->post_read(tp, w->peer, local + i * CANCEL_LEN, &mr,
					       (uintptr_t)w->remote, w->remote_mr.rkey, CANCEL_LEN,
					       i))
				fail("post_read");
		/* Let the target start on some of them, a different amount each round. */
		for (i = 0; i < round % 50; i++)
			sched_yield();
		if (by_release)
			tp->ops->release_peer(tp, w->peer);
		else
			tp->ops->dereg_mem(tp, &mr);
		/* The transport is done with @local now: a late copy would undo this. */
		memset(local, 0xee, 4 * CANCEL_LEN);
		while (got < 4 && !stop_now(w->end, "cancelled operations")) {
			k = tp->ops->poll_completions(tp, c, 4);
			for (i = 0; i < (unsigned)k; i++) {
				if (c[i].wr_id >= 4 || seen[c[i].wr_id]++) {
					fail("round %u: wr_id %llu unknown or twice", round,
					     (unsigned long long)c[i].wr_id);
					continue;
				}
				got++;
				if (c[i].status == 0)
					w->ok++;
				else if (c[i].status == (by_release ? -ECONNRESET : -EIO))
					w->failed++;
				else
					fail("round %u: status %d", round, c[i].status);
			}
		}
		if (by_release) {
			uint8_t ep[URPC_TP_EP_MAX];
			size_t n = w->target->ops->get_endpoint(w->target, ep);

			if (tp->ops->resolve_peer(tp, ep, n, &w->peer))
				fail("resolve again");
		}
		cancel_fence(w, fence, &fmr);
		if (memcmp(local, sentinel, 4 * CANCEL_LEN))
			fail("round %u: a failed operation's buffer was written after it failed",
			     round);
		if (by_release)
			tp->ops->dereg_mem(tp, &mr);
	}
	tp->ops->dereg_mem(tp, &fmr);
out:
	atomic_store(&w->stop, true);
	free(local);
	free(fence);
	free(sentinel);
	return NULL;
}

Test(loop_threads, failing_operations_while_the_target_copies)
{
	static struct cancel_world w;
	pthread_t th[2];
	size_t i;

	memset(&w, 0, sizeof(w));
	w.end = urpc__now_ns() + WAIT_NS;
	w.remote = malloc(CANCEL_LEN);
	cr_assert_not_null(w.remote);
	for (i = 0; i < CANCEL_LEN; i++)
		w.remote[i] = ro_pat(i);
	w.target = open_ep(64);
	w.req = open_ep(64);
	cr_assert_eq(w.target->ops->reg_mem(w.target, w.remote, CANCEL_LEN,
					    URPC_TP_ACCESS_REMOTE_READ, &w.remote_mr),
		     0);
	w.peer = resolve(w.req, w.target);
	cr_assert_eq(pthread_create(&th[0], NULL, cancel_target, &w), 0);
	cr_assert_eq(pthread_create(&th[1], NULL, cancel_requester, &w), 0);
	join_threads(th, 2);
	assert_no_errors();
	cr_assert_eq(w.ok + w.failed, 4u * CANCEL_ROUNDS);
	cr_assert_gt(w.failed, 0, "no operation was failed before the target got to it");
	w.req->ops->release_peer(w.req, w.peer);
	cr_assert_eq(w.req->ops->destroy(w.req), 0);
	w.target->ops->dereg_mem(w.target, &w.remote_mr);
	cr_assert_eq(w.target->ops->destroy(w.target), 0);
	free(w.remote);
}
