/* SPDX-License-Identifier: MIT */
/*
 * The event loop (evloop.h): the public urpc_rpc_run_event_loop*() calls.
 * Owns the pass (rpc->now, rpc->in_loop, rpc->tx_stamp), when the timer
 * scan runs (next_scan_ns; the scan itself and the timers' earliest wake
 * time are evtimer.c's) and the idle policy: spinning, yielding on a
 * shared core, and the idle sleep (wake_fd).
 * Also the receive path's slow end: the datagrams that fail its fast check
 * (counted; a server session's endpoint proof and "no such session"
 * answers, session_src.h; a client's check of such an answer).
 * May call: everything below it: evtimer.h, session.h, session_in.h (SM
 * packets in), session_sm.h (the SM outbox), session_src.h, client.h,
 * retx.h (send times), server.h, large.h, cc_sess.h, tx.h;
 * the SM queue; the transport's rx_run/rx_burst/rx_release/poll_completions/
 * wait_arm/wait_ack; ppoll() (only in the idle sleep) and sched_yield()
 * (only before it, on a shared core).
 */
#define _GNU_SOURCE /* ppoll */
#define URPC_LOG_MODULE "rpc"
#include "evloop.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

#include "../util/log.h"
#include "../util/seam.h"
#include "cc_sess.h"
#include "client.h"
#include "evtimer.h"
#include "large.h"
#include "retx.h"
#include "server.h"
#include "session.h"
#include "session_in.h"
#include "session_sm.h"
#include "session_src.h"
#include "tx.h"

#define SCAN_INTERVAL_NS 1000000ull /* timers are looked at once a millisecond */
/*
 * Longest idle sleep, whatever the timers say: a backstop, so that a timer
 * idle_wake_time() does not know about is late by a second at most.
 */
#define IDLE_MAX_SLEEP_NS 1000000000ull
/*
 * A pass without work costs a microsecond or two (one empty receive poll);
 * one that took longer than IDLE_LOST_CORE_NS did not run all that time: the
 * thread lost its core to another runnable thread. For IDLE_SHARED_NS after
 * that, the core counts as shared: the Rpc spins at most IDLE_SHARED_SPIN_NS
 * (not idle_block_us) before it sleeps, so the thread it kept off the core,
 * which may well be the one that sends it its next datagram, runs sooner.
 */
#define IDLE_LOST_CORE_NS 30000ull
#define IDLE_SHARED_NS 100000000ull
#define IDLE_SHARED_SPIN_NS 2000ull
/*
 * On a shared core the Rpc yields before it sleeps: sched_yield() hands the
 * core to a runnable thread of this CPU (typically the peer thread that
 * will send the next datagram) without the cost of a sleep and a wake-up
 * (on this guest about 9 us a pair, the sender paying the wake-up). A
 * yield that came back within IDLE_YIELD_RAN_NS found no one to run: the
 * Rpc sleeps at once. At most IDLE_YIELDS yields per idle stretch, then it
 * sleeps. A yield longer than IDLE_YIELD_LONG_NS gave the core to a thread
 * that ran out whole time slices: a CPU-bound one, not a peer with a few
 * datagrams. Yielding to such threads costs slices, while a sleeping Rpc
 * is woken by its datagram at once; so each long yield adds
 * IDLE_YIELD_LONG_COST to yield_debt and every other yield takes one off,
 * and a second long one while the debt stands stops the yields for
 * IDLE_SHARED_NS. (With 2 + 2 KV threads on 2 cores about 1 yield in 400
 * took over 3 ms; beside 2 CPU-bound threads, 1 in 4.)
 */
#define IDLE_YIELD_RAN_NS 5000ull
#define IDLE_YIELD_LONG_NS 3000000ull
#define IDLE_YIELD_LONG_COST 16u
#define IDLE_YIELDS 16u
/*
 * Beside a CPU-bound thread the spin adapts. A sleeping Rpc is woken
 * behind such a thread only when the scheduler lets it (about 230 us a
 * wake-up on this guest's 6.18 kernel), and a round trip with a peer that
 * sleeps too pays two: urpc-small-tput at window 1 with one CPU hog on
 * each core ran at 0.18x a busy-polling raw echo. So while the last yield
 * gave the core away for over IDLE_YIELD_SLICE_NS (a CPU-bound thread's
 * slice, not a peer's few datagrams; a shorter yield ends it), the spin
 * before a yield or a sleep is rpc->spin_ns when that is longer: work that
 * came while the Rpc spun doubles it (up to IDLE_SPIN_MAX_NS), a spin that
 * found nothing halves it. A peer that answers from another core keeps
 * both spinning through their round trips (1.5-2.0x the raw echo); a peer
 * that needs this core cannot answer while the Rpc spins, and the spin
 * stays short. Yields to peers are shorter: between 2 + 2 KV threads the
 * spin does not grow (busy_host.sh: 0.89x of 1+1, as without it).
 */
#define IDLE_YIELD_SLICE_NS 500000ull
#define IDLE_SPIN_MAX_NS 200000ull

/* ---- receive ---- */

/*
 * A NOSESS datagram @h (header valid): the client session it names resets
 * (-ECONNRESET) when the notice carries its token and its server's session
 * number and it is CONNECTED (nosess_rx); anything else is dropped.
 */
static URPC_COLD void notice_rx(struct urpc_rpc *rpc, const struct urpc_pkthdr *h)
{
	uint32_t num = le32toh(h->dest_session);
	struct urpc_session *s = num < rpc->hi_session ? rpc->sessions[num] : NULL;

	if (!s || s->role != URPC_ROLE_CLIENT || s->state != URPC_SESS_CONNECTED ||
	    s->token != le64toh(h->token) || s->remote_num != le32toh(h->src_session) ||
	    h->msg_size) {
		rpc->st.drop_bad_session++;
		return;
	}
	rpc->st.nosess_rx++;
	URPC_WARN_RATELIMIT(rpc->id,
			    "session %u: its server no longer has it (a no-such-session answer "
			    "to a request); resetting it",
			    s->local_num);
	urpc__session_transition(rpc, s, URPC_SEV_PEER_FAILED, -ECONNRESET);
}

/*
 * Count a datagram that failed the fast check of urpc__evloop_rx, in the order
 * of docs/ENGINE.md: a bad header first, else a bad session (unknown,
 * wrong role, not connected, or wrong token; a request of one draws a
 * "no such session" answer). Handles a NOSESS answer. True only for the
 * datagram that proves an unproven server session's endpoint: the caller
 * then takes it as any other.
 */
static URPC_COLD bool rx_drop(struct urpc_rpc *rpc, struct urpc_session *s,
			      const struct urpc_pkthdr *h, uint32_t len, const struct urpc_tp_rx *e)
{
	if (!urpc__pkthdr_ok(h, len)) {
		rpc->st.drop_bad_hdr++;
		return false;
	}
	if (h->pkt_type == URPC_PKT_NOSESS) {
		notice_rx(rpc, h);
		return false;
	}
	/*
	 * A server session's first datagrams, until one proves its endpoint
	 * (session_src.h): true lets the caller take it as any other (its one
	 * call of urpc__srv_rx stays inlined: 17 instructions an RPC).
	 */
	if (s->rx_token != s->token && urpc__pkthdr_word(h) == s->rx_word &&
	    s->token == le64toh(h->token) && s->role == URPC_ROLE_SERVER)
		return urpc__src_prove(rpc, s, e);
	rpc->st.drop_bad_session++;
	if (h->pkt_type == URPC_PKT_REQ && e)
		urpc__src_notice_tx(rpc, h, e);
	return false;
}

/*
 * urpc__evloop_rx(), inlined into the pass's receive walk (rx_walk()); @e
 * is the transport's entry of the datagram (NULL: none at hand).
 */
static inline URPC_ALWAYS_INLINE void evloop_rx(struct urpc_rpc *rpc, const uint8_t *buf,
						uint32_t len, const struct urpc_tp_rx *e)
{
	const struct urpc_pkthdr *h = (const struct urpc_pkthdr *)(const void *)buf;
	/* The payload's length, in 32 bits: the size check below is one compare. */
	uint32_t plen = len - (uint32_t)sizeof(*h), num;
	struct urpc_session *s;

	if (unlikely(len < sizeof(*h))) {
		rpc->st.drop_bad_hdr++;
		return;
	}
	/*
	 * One pass over every check: the first word holds magic, version and
	 * packet type, and the session's rx_word also encodes its role, and
	 * is 0 unless it is CONNECTED. The slow path (rx_drop) sorts a
	 * failure into its counter.
	 */
	num = le32toh(h->dest_session);
	if (unlikely(num >= rpc->hi_session)) {
		/* No such session: the slow path alone (no placeholder to load in line). */
		(void)rx_drop(rpc, &urpc__sess_none, h, len, e);
		return;
	}
	s = rpc->sessions[num];
	if (unlikely(urpc__pkthdr_word(h) != s->rx_word || le32toh(h->msg_size) != plen ||
		     s->rx_token != le64toh(h->token)) &&
	    !rx_drop(rpc, s, h, len, e))
		return;
	if (s->role == URPC_ROLE_SERVER)
		urpc__srv_rx(rpc, s, h, buf + sizeof(*h), plen);
	else
		urpc__cli_rx(rpc, s, h, buf + sizeof(*h), plen);
}

void urpc__evloop_rx(struct urpc_rpc *rpc, const uint8_t *buf, uint32_t len)
{
	evloop_rx(rpc, buf, len, NULL);
}

/*
 * Hand the @n datagrams of the pass's poll at @e to urpc__evloop_rx(),
 * then the ones from rx_burst() (@e is rpc->rx) back to the transport. One walk for both kinds of
 * entry, so that the datagram's handling (the client's and the server's
 * receive in it) is inlined once.
 */
static inline URPC_ALWAYS_INLINE void rx_walk(struct urpc_rpc *rpc, const struct urpc_tp_rx *e,
					      unsigned n)
{
	const struct urpc_tp_rx *p, *end;

	for (p = e, end = e + n; p != end; p++)
		evloop_rx(rpc, p->buf, p->len, p);
	if (e == rpc->rx && !rpc->rx_reclaim)
		rpc->tp->ops->rx_release(rpc->tp, rpc->rx, n);
}

/* Reap one-sided completions of large messages. */
static void poll_os(struct urpc_rpc *rpc)
{
	struct urpc_tp_comp c[16];
	struct urpc_os_op op;
	int n, k;

	n = rpc->tp->ops->poll_completions(rpc->tp, c, URPC_ARRAY_SIZE(c));
	for (k = 0; k < n; k++) {
		if (!urpc__os_take(rpc, &c[k], &op))
			continue;
		if (op.kind == URPC_OS_SRV_REQ)
			urpc__srv_read_done(rpc, &op, c[k].status);
		else /* a response's grant revoked: the server dropped the session */
			urpc__cli_read_done(rpc, &op,
					    c[k].status == -EACCES ? -ECONNRESET : c[k].status);
	}
}

/* ---- the event loop ---- */

/*
 * The end of a pass with rare work (rpc->rare) or a timer scan due, in
 * this order: one-sided completions, the scan, pending events, the TX
 * batch, the SM packets. Returns how much it did (loop_once()).
 */
static __attribute__((noinline)) unsigned pass_rare(struct urpc_rpc *rpc)
{
	uint64_t stamp = rpc->tx_stamp;
	unsigned work = 0;

	rpc->tx_stamp = rpc->now; /* requests sent here read it (pass_rest() set it, or not) */
	if (rpc->os_busy) {
		work++; /* polling is the work: never sleep with operations in flight */
		/*
		 * Answers the pass's handlers gave go before the one-sided
		 * work: on udp, poll_completions() serves and sends a window
		 * of chunks, and a small answer waited behind them (issue 32).
		 */
		if (rpc->ntx)
			urpc__tx_flush(rpc);
		poll_os(rpc);
		urpc__cc_os_tick(rpc); /* their round trips into the controllers */
	}
	if (rpc->now >= rpc->next_scan_ns) {
		rpc->next_scan_ns = rpc->now + SCAN_INTERVAL_NS;
		urpc__evloop_scan_timers(rpc);
	}
	if (rpc->have_pending) {
		work++;
		urpc__session_run_pending(rpc);
	}
	if (rpc->ntx) {
		work++;
		urpc__tx_flush(rpc);
	}
	/* Session management of the whole pass (and of calls since the last): one sendmmsg. */
	if (rpc->smo_n) {
		work++;
		urpc__sm_out_flush(rpc);
	}
	rpc->tx_stamp = stamp;
	return work;
}

/*
 * The pass's work before its receive poll, when there is some: the SM
 * packets the Nexus queued, then what the application enqueued since the
 * last pass (it goes out before the poll: on udp that is a system call,
 * and a request waiting behind it waits for nothing).
 */
static __attribute__((noinline)) unsigned pass_first(struct urpc_rpc *rpc)
{
	struct urpc_sm_pkt pkt;
	unsigned work = 0;

	rpc->tx_stamp = rpc->now;
	while (urpc__sm_queue_pop(rpc->smq, &pkt)) {
		rpc->st.sm_pkts_rx++;
		work++;
		urpc__session_handle_sm(rpc, &pkt);
	}
	if (rpc->ntx) {
		work++;
		urpc__cli_stamp_batch(rpc); /* requests sent outside the loop leave now */
		urpc__tx_flush(rpc);
	}
	rpc->tx_stamp = 0;
	return work;
}

/*
 * The pass's work after its receive poll: the @n datagrams it found at @e
 * (NULL: rpc->rx; 0 or less: none), transport control messages, sessions the congestion pacer
 * releases, the rare work (os_busy, have_pending, smo_n) and the timer
 * scan, the TX batch.
 */
static __attribute__((noinline)) unsigned pass_rest(struct urpc_rpc *rpc,
						    const struct urpc_tp_rx *e, int n)
{
	unsigned work = 0;

	rpc->tx_stamp = rpc->now;
	if (n > 0) {
		rx_walk(rpc, e ? e : rpc->rx, (unsigned)n);
		rpc->st.pkts_rx += (uint64_t)n;
		work += (unsigned)n;
	}
	if (unlikely(rpc->tp->ctl_pending))
		urpc__session_tp_ctl(rpc);
	/* Sessions held by the congestion pacer whose time came (cc_sess.c). */
	if (unlikely(rpc->cc_wheel && rpc->cc_wheel->n))
		urpc__cc_poll(rpc, urpc__cli_kick);
	/* One test for the rare work and the scan. */
	if (unlikely(rpc->rare || rpc->now >= rpc->next_scan_ns)) {
		work += pass_rare(rpc);
	} else if (rpc->ntx) {
		work++;
		urpc__tx_flush(rpc);
	}
	rpc->tx_stamp = 0;
	return work;
}

/*
 * pass_rest(), or pass_rare() alone for a pass without datagrams, control
 * messages or sessions on the pacer's wheel: one whose work is the rare
 * work or the scan (once a millisecond) skips pass_rest()'s frame, 20-odd
 * instructions (verbs_cost_vm.sh counts pass_rare() with the scan, and
 * those went into the per-RPC figures, more the slower the host). Both
 * calls are tail calls: a pass with datagrams pays a test and a jump.
 */
static __attribute__((noinline)) unsigned pass_next(struct urpc_rpc *rpc,
						    const struct urpc_tp_rx *e, int n)
{
	if (n <= 0 && !rpc->tp->ctl_pending && !(rpc->cc_wheel && rpc->cc_wheel->n))
		return pass_rare(rpc);
	return pass_rest(rpc, e, n);
}

/*
 * After the receive poll: pass_next() when it found datagrams (@n at @e) or
 * anything else waits: the transport's control messages and the rare work
 * (one test), the pacer's wheel, the scan. The TX batch is empty here:
 * pass_first sent it, and only handlers fill it.
 */
static inline URPC_ALWAYS_INLINE unsigned after_poll(struct urpc_rpc *rpc,
						     const struct urpc_tp_rx *e, int n)
{
	if (n > 0 || unlikely((rpc->tp->ctl_pending | rpc->rare) != 0 ||
			      (rpc->cc_wheel && rpc->cc_wheel->n) || rpc->now >= rpc->next_scan_ns))
		return pass_next(rpc, e, n);
	return 0;
}

/*
 * One pass. Returns how much it did (SM packets, datagrams received, pending
 * events raised, a TX batch sent): 0 means an idle pass. Owner thread only.
 *
 * A pass without work costs the clock, a few tests and the receive poll:
 * the work before the poll and after it are out of line (pass_first,
 * pass_rest), entered only when a test says there is some, so that this
 * part needs little of a frame (issue 34, verbs_cost_vm.sh: with the TSC
 * clock and verbs' leaner rx_burst, an empty verbs pass went from 170 to
 * 119 instructions, the provider's poll, 41 of them, included).
 */
static inline URPC_ALWAYS_INLINE unsigned loop_once(struct urpc_rpc *rpc)
{
	unsigned work = 0;
	int n;

	rpc->now = urpc__rpc_clock(rpc);
	rpc->in_loop = 1;
	/* One test for both (an OR, not two branches). */
	if (unlikely((rpc->ntx | urpc__sm_queue_waiting(rpc->smq)) != 0))
		work = pass_first(rpc);
	/*
	 * The receive poll: the transport's own entries from rx_run() or,
	 * where it has none or wants rx_burst() this time, rx_burst()'s into
	 * rpc->rx (nothing stored for it: the empty pass stores little).
	 */
	if (rpc->rx_run) {
		n = rpc->rx_run(rpc->tp, &rpc->rx_ent, URPC_RX_BATCH);
		if (n >= 0) {
			work += after_poll(rpc, rpc->rx_ent, n);
			goto out;
		}
	}
	n = rpc->tp->rx_burst(rpc->tp, rpc->rx, URPC_RX_BATCH);
	work += after_poll(rpc, NULL, n); /* NULL: rpc->rx, not kept in a register meanwhile */
out:
	rpc->in_loop = 0;
	return work;
}

URPC_API int urpc_rpc_run_event_loop_once(struct urpc_rpc *rpc)
{
	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb || rpc->in_loop))
		return -EPERM;
	loop_once(rpc);
	return 0;
}

/* ---- idle waiting ---- */

/*
 * Sleep until a datagram or completion, an SM packet, the next timer or
 * @end_ns (urpc__now_ns() time), whichever comes first; or return at once
 * when there is work after all. run_event_loop() calls it after idle_ns
 * without work. Owner thread only, never inside a callback.
 *
 * Order matters twice. The sleep is announced on the SM queue before the
 * last look at it (urpc__sm_queue_sleep_begin(), ordering explained in
 * sm.c), and the transport is armed before the last look at it (work that
 * came before wait_arm() wakes nothing): the extra pass after both sees
 * anything that arrived earlier, and anything later makes a descriptor
 * readable.
 */
static void idle_wait(struct urpc_rpc *rpc, uint64_t end_ns)
{
	struct pollfd pfd[2];
	struct timespec ts;
	uint64_t wake, sleep_ns, t;
	bool signalled = false;
	int fd, ret;

	if (!urpc__evloop_idle_wake_time(rpc, &wake))
		return;
	urpc__sm_queue_sleep_begin(rpc->smq);
	fd = rpc->tp->ops->wait_arm(rpc->tp);
	if (fd < 0) {
		/* -EBUSY: the transport has work of its own that needs polling. */
		if (fd != -EBUSY)
			URPC_WARN_RATELIMIT(
				rpc->id,
				"cannot arm the idle wait (%s): this Rpc busy-polls instead of sleeping",
				urpc_strerror(fd));
		goto out_end;
	}
	/*
	 * The last look; its clock read (rpc->now) also times the sleep. An
	 * arm not slept on is acknowledged too (transport.h: xdp undoes it).
	 */
	if (loop_once(rpc) || !urpc__evloop_idle_wake_time(rpc, &wake))
		goto out_ack;
	sleep_ns = wake > rpc->now ? wake - rpc->now : 0;
	t = urpc__now_ns();
	sleep_ns = URPC_MIN(sleep_ns, end_ns > t ? end_ns - t : 0);
	sleep_ns = URPC_MIN(sleep_ns, IDLE_MAX_SLEEP_NS);
	if (!sleep_ns)
		goto out_ack;

	pfd[0] = (struct pollfd){.fd = fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = rpc->wake_fd, .events = POLLIN};
	ts.tv_sec = (time_t)(sleep_ns / 1000000000u);
	ts.tv_nsec = (long)(sleep_ns % 1000000000u);
	rpc->st.idle_sleeps++;
	ret = ppoll(pfd, URPC_ARRAY_SIZE(pfd), &ts, NULL);
	if (ret > 0) {
		signalled = pfd[1].revents != 0;
		rpc->st.idle_wakeups++;
		rpc->st.idle_sm_wakeups += signalled;
	} else if (ret < 0 && errno != EINTR) {
		URPC_WARN_RATELIMIT(rpc->id, "the idle wait failed (%s): polling again",
				    urpc_strerror(-errno));
	}
out_ack:
	rpc->tp->ops->wait_ack(rpc->tp);
out_end:
	urpc__sm_queue_sleep_end(rpc->smq, signalled);
}

/*
 * On a shared core, before a sleep: give the core to another runnable
 * thread, unless yields lately went to CPU-bound ones (IDLE_YIELD_* above).
 * Returns true when a thread ran meanwhile (poll again before sleeping),
 * false when the Rpc should sleep now. *t: the clock after the yield;
 * *yields: those of this idle stretch.
 */
static bool idle_yield(struct urpc_rpc *rpc, uint64_t *t, unsigned *yields)
{
	uint64_t t0 = *t, took;

	if (*t < rpc->yield_off_until || *yields >= IDLE_YIELDS)
		return false;
	(*yields)++;
	rpc->st.idle_yields++;
	sched_yield();
	*t = urpc__now_ns();
	took = *t - t0;
	/* A CPU-bound thread's slice: spinning keeps no peer off the core. */
	rpc->spin_ok = took > IDLE_YIELD_SLICE_NS;
	if (took > IDLE_YIELD_LONG_NS) {
		rpc->yield_debt += IDLE_YIELD_LONG_COST;
		if (rpc->yield_debt > IDLE_YIELD_LONG_COST) {
			rpc->yield_off_until = *t + IDLE_SHARED_NS;
			/* After the pause, the next long one stops them again. */
			rpc->yield_debt = IDLE_YIELD_LONG_COST;
		}
		return true; /* slices went by: look once more before the sleep */
	}
	if (rpc->yield_debt)
		rpc->yield_debt--;
	return took > IDLE_YIELD_RAN_NS;
}

URPC_API int urpc_rpc_run_event_loop(struct urpc_rpc *rpc, unsigned ms)
{
	uint64_t t, end, idle_from;
	unsigned yields = 0; /* in this idle stretch */
	bool spun = false;   /* idle passes since the last work, no sleep or yield between */

	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb || rpc->in_loop))
		return -EPERM;
	t = urpc__now_ns();
	end = t + (uint64_t)ms * 1000000;
	idle_from = t;
	do {
		unsigned work = loop_once(rpc);
		uint64_t prev = t;

		t = urpc__now_ns();
		if (work) {
			if (spun && rpc->spin_ok)
				rpc->spin_ns = URPC_MIN(2 * rpc->spin_ns + IDLE_SHARED_SPIN_NS,
							IDLE_SPIN_MAX_NS);
			spun = false;
			idle_from = t;
			yields = 0;
		} else if (unlikely(rpc->idle_ns)) {
			uint64_t spin = rpc->idle_ns;
			bool shared;

			if (t - prev > IDLE_LOST_CORE_NS) {
				rpc->st.idle_lost_core++;
				rpc->shared_until = t + IDLE_SHARED_NS;
			}
			shared = t < rpc->shared_until;
			if (shared)
				spin = URPC_MIN(spin, IDLE_SHARED_SPIN_NS);
			if (rpc->spin_ok)
				spin = URPC_MAX(spin, rpc->spin_ns);
			spun = true;
			if (t - idle_from >= spin && t < end) {
				rpc->spin_ns /= 2;
				spun = false;
				/* On a shared core, first let a peer thread run. */
				if (shared && idle_yield(rpc, &t, &yields)) {
					idle_from = t;
					continue;
				}
				/*
				 * Idle long enough: sleep. Whether it slept or
				 * found the Rpc busy, spin again before the next
				 * try, so a busy Rpc scans its sessions rarely.
				 */
				idle_wait(rpc, end);
				t = urpc__now_ns();
				idle_from = t;
				yields = 0;
			}
		}
	} while (t < end);
	return 0;
}
