/* SPDX-License-Identifier: MIT */
/*
 * Congestion control per session (issue 32, docs/CC.md): a rate that a
 * controller moves on round-trip samples and ECN marks, and the pacer
 * that holds a rate-limited sender to it.
 *
 * Controllers, behind one pair of calls (urpc__cc_sample(), urpc__cc_tx()):
 * - Swift (default): a delay target; below it the rate grows by ai_bps per
 *   round trip's worth of acknowledged bytes, above it (or on an ECN mark)
 *   it shrinks at most once per round trip by beta x (rtt - target) / rtt,
 *   never by more than max_md.
 * - Timely: the RTT gradient (Mittal et al., SIGCOMM'15), for comparison.
 * A session whose rate is the line rate is "free": a sample at or below
 * the target costs a compare and a branch, urpc__cc_tx() one test, and
 * nothing ever paces it. Samples are clamped to [URPC_CC_MIN_SAMPLE_NS,
 * max_sample_ns] and the rate to [min_bps, line_bps], so that a peer's
 * garbage can neither stop a session nor push it past the line.
 *
 * The pacer is a timing wheel (Carousel, SIGCOMM'17): entries embedded in
 * the caller's objects, hashed by their release time into slots of
 * 2^shift ns; polling walks the slots that time passed. No allocation, no
 * syscall, O(1) per entry.
 *
 * Calls nothing but libc's math-free integer and double arithmetic;
 * owner thread only.
 */
#ifndef URPC_RPC_CC_H
#define URPC_RPC_CC_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

enum urpc_cc_algo_int {
	URPC_CC_ALGO_OFF = 0,
	URPC_CC_ALGO_SWIFT = 1,
	URPC_CC_ALGO_TIMELY = 2,
};

#define URPC_CC_MIN_SAMPLE_NS 500u

struct urpc_cc_params {
	uint8_t algo;	    /* enum urpc_cc_algo_int */
	uint64_t line_bps;  /* the most a session may send */
	uint64_t min_bps;   /* the least a controller may set */
	uint32_t target_ns; /* Swift: delay target; Timely: t_low */
	uint32_t t_high_ns; /* Timely: above this, decrease on delay alone */
	uint32_t
		fs_range_ns; /* Swift's flow scaling: a session at min_bps gets this on its target */
	uint64_t ai_bps;     /* additive increase per round trip */
	double ai_ramp;	     /* the most the increase grows, x ai_bps (>= 1) */
	double timeout_div;  /* a retransmission timeout divides the rate by this */
	uint32_t max_gap_ns;   /* the pacer holds a session at most this long per send */
	double mi_div;	       /* below target/2: + rate/mi_div per round trip; 0: never */
	uint16_t beta_milli;   /* multiplicative decrease gain, x1000 */
	uint16_t max_md_milli; /* the largest decrease per round trip, x1000 */
	uint32_t max_sample_ns;
};

struct urpc_cc {
	uint64_t rate_bps;
	uint64_t ps_per_byte; /* pacing: 8e12 / rate */
	uint64_t max_gap_ns;  /* params' max_gap_ns */
	uint64_t next_tx_ns;  /* the pacer's earliest next send */
	uint64_t last_dec_ns;
	uint32_t srtt_ns, prev_rtt_ns, min_rtt_ns;
	int32_t rtt_diff_ns; /* Timely's smoothed difference */
	bool limited;	     /* rate below the line: paced */
	uint64_t samples, decreases, marks, paced;
	uint64_t share_bps; /* the receiver's fair share (urpc__cc_share_echo), a cap; 0: none */
};

/* Fill @p with the defaults for a @line_bps link and @target_ns. */
void urpc__cc_params_default(struct urpc_cc_params *p, uint64_t line_bps, uint32_t target_ns);
/* 0, or -EINVAL with *@what naming the first field out of range. */
int urpc__cc_params_check(const struct urpc_cc_params *p, const char **what);
/* A session starts free, at the line rate. */
void urpc__cc_init(struct urpc_cc *cc, const struct urpc_cc_params *p);

/* The controller's step on a sample that is not plainly fine (cc.c). Cold. */
void urpc__cc_update(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t rtt_ns, bool ecn,
		     uint32_t acked, uint64_t now_ns);

/*
 * A retransmission timeout at @now_ns (Swift's reaction to loss): the rate
 * is divided by timeout_div, at most once per round trip and per @rto_ns
 * (the timeout's own length). Cold.
 */
void urpc__cc_timeout(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t now_ns,
		      uint64_t rto_ns);

/*
 * Round-trip sample @rtt_ns (ECN-marked or not) acknowledging @acked bytes
 * at @now_ns. A free session with a sample within its target returns at
 * once (Timely tracks every sample: it takes the update).
 */
static inline void urpc__cc_sample(struct urpc_cc *cc, const struct urpc_cc_params *p,
				   uint64_t rtt_ns, bool ecn, uint32_t acked, uint64_t now_ns)
{
	if (likely(!cc->limited && rtt_ns <= p->target_ns && !ecn && p->algo == URPC_CC_ALGO_SWIFT))
		return;
	if (p->algo != URPC_CC_ALGO_OFF)
		urpc__cc_update(cc, p, rtt_ns, ecn, acked, now_ns);
}

/*
 * May @bytes leave now? 0: yes (and, paced, the next send moves on by
 * their time at the rate); else the time (ns) it may leave.
 */
static inline uint64_t urpc__cc_tx(struct urpc_cc *cc, uint32_t bytes, uint64_t now_ns)
{
	if (likely(!cc->limited))
		return 0;
	if (cc->next_tx_ns > now_ns)
		return cc->next_tx_ns;
	/*
	 * An idle sender gets no credit for its idle time beyond one packet;
	 * one send holds the next back by its time at the rate, at most
	 * max_gap_ns (a large message, or a rate at its floor, never stalls a
	 * session for seconds: what it sends is how its rate comes back).
	 */
	{
		uint64_t gap = (uint64_t)bytes * cc->ps_per_byte / 1000;

		cc->next_tx_ns = (cc->next_tx_ns + 2000 > now_ns ? cc->next_tx_ns : now_ns) +
				 (gap < cc->max_gap_ns ? gap : cc->max_gap_ns);
	}
	return 0;
}

/*
 * The receiver's fair share @share_bps echoed in an answer (0: none): the
 * session's rate is capped at it, and below it the rate moves toward it
 * while the delay is within the target (cc.c's swift()). Bounded to
 * [min_bps, line_bps]; one at or above the line is none (a session alone
 * at a receiver is never held below its line by it).
 */
void urpc__cc_share_set(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t share_bps);
static inline void urpc__cc_share_echo(struct urpc_cc *cc, const struct urpc_cc_params *p,
				       uint64_t share_bps)
{
	if (likely(share_bps == cc->share_bps || (share_bps >= p->line_bps && !cc->share_bps)))
		return;
	urpc__cc_share_set(cc, p, share_bps);
}

/*
 * ---- the receiver's side: a fair share from its active senders ----
 *
 * A receiver (a server's Rpc) counts the senders it heard from in the
 * current epoch and in the last one, each sender holding a stamp (the
 * epoch it was last counted in) and its bytes in that epoch. A sender
 * that sent half its share's worth is heavy; the light ones' bytes are
 * theirs. The fair share is what the light ones left of util x the
 * line, over the last epoch's heavy senders and every joiner since (a
 * joiner counts at once, a leaver after an epoch), never less than util
 * x the line over all the senders; the line when one sender is active.
 * An epoch lasts the time a sender at the share takes to send
 * URPC_CC_SHARE_PKTS of @pkt_bytes, at least @min_epoch_ns and at most
 * URPC_CC_SHARE_MAX_EPOCH_NS: every sender that keeps up its share is
 * seen in every epoch. A few compares and adds per packet; an epoch's
 * end, a new sender and a sender turning heavy are cold.
 */
#define URPC_CC_SHARE_PKTS 4u
#define URPC_CC_SHARE_MAX_EPOCH_NS 1000000u

struct urpc_cc_share {
	uint64_t line_bps, share_bps;
	uint32_t share_mbps; /* share_bps in Mb/s, at least 1: what a response header carries */
	uint64_t epoch_start_ns, epoch_end_ns;
	uint32_t epoch; /* a sender whose stamp equals it was counted in @cur */
	uint32_t cur, prev;
	/*
	 * Heavy senders: those that sent heavy_bytes (half the share's worth
	 * of the epoch) or more in it; the light ones' bytes, in this epoch
	 * and (as a rate) in the last one: what the heavy ones share is what
	 * the light ones leave.
	 */
	uint32_t heavy_cur, heavy_prev,
		heavy_bytes; /* heavy_bytes 0: one sender, none classified */
	uint64_t light_cur, light_prev_bps;
	uint32_t min_epoch_ns, pkt_bytes;
	uint16_t util_milli;
};

/* A sender as its receiver's share sees it: its epoch stamp and its bytes in that epoch. */
struct urpc_cc_share_peer {
	uint32_t stamp; /* the epoch it was last counted in; 0: never */
	uint32_t bytes;
};

/* Start @sh for a receiver's port of @line_bps at @now_ns. */
void urpc__cc_share_init(struct urpc_cc_share *sh, uint64_t line_bps, uint16_t util_milli,
			 uint32_t pkt_bytes, uint32_t min_epoch_ns, uint64_t now_ns);
/* Cold: the epoch is over (roll) or a sender was counted beyond the last epoch's count. */
void urpc__cc_share_roll(struct urpc_cc_share *sh, uint64_t now_ns);
/* Cold: @peer's first packet in this epoch; it turned heavy after @light_bytes. */
void urpc__cc_share_count(struct urpc_cc_share *sh, struct urpc_cc_share_peer *peer);
void urpc__cc_share_heavy(struct urpc_cc_share *sh, uint32_t light_bytes);

/*
 * A packet of @bytes from sender @peer (zeroed before its first) at
 * @now_ns: counted once an epoch, heavy once its bytes in the epoch reach
 * heavy_bytes. Returns the share to echo to it (bps).
 */
static inline uint64_t urpc__cc_share_seen(struct urpc_cc_share *sh,
					   struct urpc_cc_share_peer *peer, uint32_t bytes,
					   uint64_t now_ns)
{
	/*
	 * One sender, counted in this epoch (heavy_bytes 0): its share is the
	 * line, whatever the epochs do; a second one is a new stamp.
	 */
	if (unlikely(peer->stamp != sh->epoch || sh->heavy_bytes)) {
		if (unlikely(now_ns >= sh->epoch_end_ns))
			urpc__cc_share_roll(sh, now_ns);
		if (unlikely(peer->stamp != sh->epoch))
			urpc__cc_share_count(sh, peer);
		if (peer->bytes < sh->heavy_bytes) {
			peer->bytes += bytes;
			if (unlikely(peer->bytes >= sh->heavy_bytes))
				urpc__cc_share_heavy(sh, peer->bytes - bytes);
			else
				sh->light_cur += bytes;
		}
	}
	return sh->share_bps;
}

/* ---- the pacer: a timing wheel ---- */

#define URPC_WHEEL_SLOTS 4096u

struct urpc_wheel_ent {
	struct urpc_wheel_ent *next;
	uint64_t at_ns;
	uint32_t slot; /* where it is held */
};

struct urpc_wheel {
	uint64_t cur; /* the next slot to release, in ticks */
	unsigned shift;
	uint32_t n; /* entries held */
	struct urpc_wheel_ent *slot[URPC_WHEEL_SLOTS];
};

void urpc__wheel_init(struct urpc_wheel *w, uint64_t now_ns, unsigned shift);
/* Hold @e until @at_ns (past the wheel's horizon: released then re-added). */
void urpc__wheel_add(struct urpc_wheel *w, struct urpc_wheel_ent *e, uint64_t at_ns);
/* Take @e (held) out before its time. */
void urpc__wheel_del(struct urpc_wheel *w, struct urpc_wheel_ent *e);
/*
 * When the first entry held is due (its slot's start: at or before its
 * time), looking @max_slots ahead at most (none there: the end of them);
 * UINT64_MAX when none is held. Cold.
 */
uint64_t urpc__wheel_next_ns(const struct urpc_wheel *w, unsigned max_slots);
/* Release every entry due by @now_ns to @fn; returns how many. */
unsigned urpc__wheel_poll(struct urpc_wheel *w, uint64_t now_ns,
			  void (*fn)(struct urpc_wheel_ent *e, void *arg), void *arg);

/* A client session's congestion state (engine.h's struct urpc_cli_half). */
struct urpc_cc_sess {
	struct urpc_cc cc;
	struct urpc_wheel_ent ent; /* on the Rpc's pacer while @queued */
	bool queued;
	uint64_t os_window;  /* what set_peer_window was last told for its peer (0: default) */
	uint64_t os_base_ns; /* the least one-sided round trip it sampled (0: none yet) */
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_CC_H */
