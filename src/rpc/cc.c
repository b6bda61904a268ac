/* SPDX-License-Identifier: MIT */
/*
 * The congestion controllers and the pacer's timing wheel (cc.h). Owns
 * struct urpc_cc's state changes away from the fast path; calls nothing
 * outside this file but libc.
 */
#include "cc.h"

#include <errno.h>
#include <stddef.h>

void urpc__cc_params_default(struct urpc_cc_params *p, uint64_t line_bps, uint32_t target_ns)
{
	*p = (struct urpc_cc_params){
		.algo = URPC_CC_ALGO_SWIFT,
		.line_bps = line_bps,
		.min_bps = line_bps / 4096 > 1000000 ? line_bps / 4096 : 1000000,
		.target_ns = target_ns,
		.t_high_ns = 5 * target_ns,
		.fs_range_ns = target_ns,
		/* tuned on urpc-sim --experiment incast (docs/CC.md) */
		.ai_bps = line_bps / 100000,
		.beta_milli = 300,
		.ai_ramp = 2,
		.timeout_div = 8,
		.max_gap_ns = 1000000,
		.mi_div = 8,
		.max_md_milli = 500,
		/* 100 ms, or t_high's worth and more for long targets */
		.max_sample_ns = URPC_MAX(100000000u, 10 * target_ns),
	};
	if (!p->ai_bps)
		p->ai_bps = 1;
}

int urpc__cc_params_check(const struct urpc_cc_params *p, const char **what)
{
	*what = NULL;
	if (p->algo > URPC_CC_ALGO_TIMELY)
		*what = "cc_algo";
	else if (p->line_bps < 1000000 || p->line_bps > 10000000000000ull)
		*what = "cc_line_bps";
	else if (p->min_bps < 1000 || p->min_bps > p->line_bps)
		*what = "cc_min_bps";
	else if (p->target_ns < 1000 || p->target_ns > 100000000)
		*what = "cc_target_ns";
	else if (p->t_high_ns < p->target_ns)
		*what = "cc_t_high_ns";
	else if (p->fs_range_ns > 100000000)
		*what = "cc_fs_range_ns";
	else if (!(p->ai_ramp >= 1.0 && p->ai_ramp <= 1e6))
		*what = "cc_ai_ramp";
	else if (!(p->timeout_div >= 1.0 && p->timeout_div <= 1e6))
		*what = "cc_timeout_div";
	else if (p->max_gap_ns < 1000)
		*what = "cc_max_gap_ns";
	else if (!(p->mi_div >= 0.0 && p->mi_div <= 1e6))
		*what = "cc_mi_div";
	else if (!p->ai_bps || p->ai_bps > p->line_bps)
		*what = "cc_ai_bps";
	else if (!p->beta_milli || p->beta_milli > 1000)
		*what = "cc_beta";
	else if (!p->max_md_milli || p->max_md_milli >= 1000)
		*what = "cc_max_md";
	else if (p->max_sample_ns < p->t_high_ns)
		*what = "cc_max_sample_ns";
	return *what ? -EINVAL : 0;
}

static void set_rate(struct urpc_cc *cc, const struct urpc_cc_params *p, double r)
{
	if (!(r >= (double)p->min_bps)) /* NaN included */
		r = (double)p->min_bps;
	if (r >= (double)p->line_bps)
		r = (double)p->line_bps;
	if (cc->share_bps && r > (double)cc->share_bps)
		r = (double)cc->share_bps;
	cc->rate_bps = (uint64_t)r;
	cc->limited = cc->rate_bps < p->line_bps;
	cc->ps_per_byte = 8000000000000ull / cc->rate_bps;
}

void urpc__cc_init(struct urpc_cc *cc, const struct urpc_cc_params *p)
{
	*cc = (struct urpc_cc){.max_gap_ns = p->max_gap_ns};
	set_rate(cc, p, (double)p->line_bps);
}

/* sqrt(@x) for x >= 1 by Newton's steps (no libm for one cold call). */
static double root(double x)
{
	double g = x;
	unsigned i;

	if (x <= 1.0)
		return 1.0;
	while (g * g > 4.0 * x)
		g *= 0.5;
	for (i = 0; i < 8; i++)
		g = 0.5 * (g + x / g);
	return g;
}

/* Swift: additive increase below the target, one bounded decrease per round trip above. */
static void swift(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t rtt, bool ecn,
		  uint32_t acked, uint64_t now)
{
	double r = (double)cc->rate_bps;
	/*
	 * Flow scaling (Swift, section 3.5): the slower a session, the higher
	 * its target, up to fs_range at min_bps, as 1/sqrt(rate); so that when
	 * many share a queue the fast ones give way first and they converge.
	 */
	double is = 1.0 / root(r), il = 1.0 / root((double)p->line_bps),
	       im = 1.0 / root((double)p->min_bps);
	uint64_t target = p->target_ns + (uint64_t)(p->fs_range_ns * (is - il) / (im - il));

	if (rtt <= target && !ecn) {
		/*
		 * ai per round trip, a round trip's worth being rate x srtt: a
		 * session below a packet per round trip gets more than ai per
		 * acknowledgement (as Swift's window below one packet), at most 64x.
		 */
		double win = r * cc->srtt_ns / 8e9, k = win > 0 ? acked / win : 64.0;
		/*
		 * Round trips since the last decrease, m: the increase grows with
		 * them (a quadratic ramp), so that a small ai that keeps 100
		 * sessions steady still fills a link a leaver gave back within
		 * tens of round trips.
		 */
		double m = (double)(now - cc->last_dec_ns) / (cc->srtt_ns ? cc->srtt_ns : 1);

		m = m < 1.0 ? 1.0 : m > p->ai_ramp ? p->ai_ramp : m;
		r += (double)p->ai_bps * (k < 64.0 ? k : 64.0) * m;
		/*
		 * Below the receiver's fair share with the queue within the
		 * target: half the way to it per round trip's worth (RCP's
		 * rate, reached without waiting for the additive increase).
		 */
		if (cc->share_bps && r < (double)cc->share_bps)
			r += ((double)cc->share_bps - r) * 0.5 * (k < 1.0 ? k : 1.0);
		/*
		 * A round trip under half the target saw no queue at all: what
		 * lowered the rate is gone (or was a host's hiccup, not a
		 * fabric's queue); come back by 1/mi_div of the rate per round
		 * trip's worth of such samples.
		 */
		if (rtt * 2 <= p->target_ns && p->mi_div > 0)
			r += r / p->mi_div * (k < 1.0 ? k : 1.0);
	} else if (now - cc->last_dec_ns >= URPC_MAX(rtt, cc->srtt_ns)) {
		double f = ecn && rtt <= p->target_ns
				   ? p->max_md_milli / 2000.0
				   : p->beta_milli / 1000.0 * (double)(rtt - p->target_ns) /
					     (double)rtt;

		if (f > p->max_md_milli / 1000.0)
			f = p->max_md_milli / 1000.0;
		r *= 1.0 - f;
		cc->last_dec_ns = now;
		cc->decreases++;
	}
	set_rate(cc, p, r);
}

/* Timely: gradient of the smoothed RTT difference, with t_low and t_high. */
static void timely(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t rtt, uint64_t now)
{
	double r = (double)cc->rate_bps, grad;
	int64_t d = cc->prev_rtt_ns ? (int64_t)rtt - (int64_t)cc->prev_rtt_ns : 0;

	cc->prev_rtt_ns = (uint32_t)rtt;
	cc->rtt_diff_ns = (int32_t)(cc->rtt_diff_ns - cc->rtt_diff_ns / 8 + d / 8);
	grad = (double)cc->rtt_diff_ns / (double)(cc->min_rtt_ns ? cc->min_rtt_ns : rtt);
	if (rtt < p->target_ns) {
		r += (double)p->ai_bps;
	} else if (rtt > p->t_high_ns) {
		r *= 1.0 - p->beta_milli / 1000.0 * (1.0 - (double)p->t_high_ns / (double)rtt);
		cc->decreases++;
	} else if (grad <= 0) {
		r += (double)p->ai_bps;
	} else {
		double f = p->beta_milli / 1000.0 * grad;

		r *= 1.0 - (f > p->max_md_milli / 1000.0 ? p->max_md_milli / 1000.0 : f);
		cc->decreases++;
	}
	(void)now;
	set_rate(cc, p, r);
}

URPC_COLD void urpc__cc_update(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t rtt_ns,
			       bool ecn, uint32_t acked, uint64_t now_ns)
{
	if (rtt_ns < URPC_CC_MIN_SAMPLE_NS)
		rtt_ns = URPC_CC_MIN_SAMPLE_NS;
	if (rtt_ns > p->max_sample_ns)
		rtt_ns = p->max_sample_ns;
	cc->samples++;
	cc->marks += ecn;
	if (!cc->min_rtt_ns || rtt_ns < cc->min_rtt_ns)
		cc->min_rtt_ns = (uint32_t)rtt_ns;
	cc->srtt_ns = cc->srtt_ns ? (uint32_t)(cc->srtt_ns - cc->srtt_ns / 8 + rtt_ns / 8)
				  : (uint32_t)rtt_ns;
	if (p->algo == URPC_CC_ALGO_TIMELY)
		timely(cc, p, rtt_ns, now_ns);
	else
		swift(cc, p, rtt_ns, ecn, acked, now_ns);
	if (!cc->limited)
		cc->next_tx_ns = 0;
}

URPC_COLD void urpc__cc_timeout(struct urpc_cc *cc, const struct urpc_cc_params *p, uint64_t now_ns,
				uint64_t rto_ns)
{
	/* once per round trip, and per timeout: a window of requests timing out is one signal */
	if (p->algo == URPC_CC_ALGO_OFF || now_ns - cc->last_dec_ns < URPC_MAX(cc->srtt_ns, rto_ns))
		return;
	cc->last_dec_ns = now_ns;
	cc->decreases++;
	set_rate(cc, p, (double)cc->rate_bps / p->timeout_div);
}

URPC_COLD void urpc__cc_share_set(struct urpc_cc *cc, const struct urpc_cc_params *p,
				  uint64_t share_bps)
{
	if (share_bps >= p->line_bps)
		share_bps = 0; /* none: the line bounds it already */
	else if (share_bps && share_bps < p->min_bps)
		share_bps = p->min_bps;
	cc->share_bps = share_bps;
	if (share_bps && cc->rate_bps > share_bps)
		set_rate(cc, p, (double)share_bps);
}

/* ---- the receiver's fair share ---- */

static void share_compute(struct urpc_cc_share *sh)
{
	uint32_t n = sh->cur > sh->prev ? sh->cur : sh->prev, k;
	uint64_t base = sh->line_bps / 1000 * sh->util_milli, avail;

	/*
	 * The heavy senders of the last epoch and every joiner since share what
	 * the light ones left; never less than an equal share for all.
	 */
	k = sh->heavy_prev + (sh->cur > sh->prev ? sh->cur - sh->prev : 0);
	k = URPC_MIN(URPC_MAX(k, 1), URPC_MAX(n, 1));
	avail = base > sh->light_prev_bps ? base - sh->light_prev_bps : 0;
	sh->share_bps = n <= 1 ? sh->line_bps : URPC_MAX(avail / k, base / n);
	sh->share_mbps = (uint32_t)URPC_MIN(URPC_MAX(sh->share_bps / 1000000, 1), UINT32_MAX);
}

/*
 * Bytes make a sender heavy from half what a sender at the share sends in
 * the epoch; 0 (nobody classified: a packet costs no more than its two
 * compares) while at most one sender is active, whose share is the line.
 */
static void share_heavy_bytes(struct urpc_cc_share *sh)
{
	uint64_t len = sh->epoch_end_ns - sh->epoch_start_ns;

	sh->heavy_bytes =
		URPC_MAX(sh->cur, sh->prev) <= 1
			? 0
			: (uint32_t)URPC_MIN(URPC_MAX(sh->share_bps / 16 * len / 1000000000, 1),
					     UINT32_MAX);
}

void urpc__cc_share_init(struct urpc_cc_share *sh, uint64_t line_bps, uint16_t util_milli,
			 uint32_t pkt_bytes, uint32_t min_epoch_ns, uint64_t now_ns)
{
	*sh = (struct urpc_cc_share){
		.line_bps = line_bps,
		.share_bps = line_bps,
		.epoch_start_ns = now_ns,
		.epoch_end_ns = now_ns + min_epoch_ns,
		.epoch = 1,
		.min_epoch_ns = min_epoch_ns,
		.pkt_bytes = pkt_bytes,
		.util_milli = util_milli,
	};
	share_compute(sh);
}

URPC_COLD void urpc__cc_share_roll(struct urpc_cc_share *sh, uint64_t now_ns)
{
	uint64_t len;

	/* a whole epoch passed since this one's end without a sender: none was active */
	if (now_ns - sh->epoch_end_ns >= sh->min_epoch_ns) {
		sh->prev = sh->heavy_prev = 0;
		sh->light_prev_bps = 0;
	} else if (!sh->heavy_bytes) {
		/* nobody classified (one sender at most, or it joined late): all heavy */
		sh->prev = sh->heavy_prev = sh->cur;
		sh->light_prev_bps = 0;
	} else {
		sh->prev = sh->cur;
		sh->heavy_prev = sh->heavy_cur;
		sh->light_prev_bps =
			now_ns > sh->epoch_start_ns
				? sh->light_cur * 8000000000ull / (now_ns - sh->epoch_start_ns)
				: 0;
	}
	sh->heavy_cur = 0;
	sh->light_cur = 0;
	sh->epoch_start_ns = now_ns;
	sh->cur = 0;
	sh->epoch++;
	if (!sh->epoch)
		sh->epoch = 1; /* 0 is a sender never seen */
	share_compute(sh);
	len = (uint64_t)sh->pkt_bytes * URPC_CC_SHARE_PKTS * 8000000000ull / sh->share_bps;
	len = URPC_MIN(URPC_MAX(len, sh->min_epoch_ns), URPC_CC_SHARE_MAX_EPOCH_NS);
	sh->epoch_end_ns = now_ns + len;
	share_heavy_bytes(sh);
}

URPC_COLD void urpc__cc_share_count(struct urpc_cc_share *sh, struct urpc_cc_share_peer *peer)
{
	peer->stamp = sh->epoch;
	peer->bytes = 0;
	if (++sh->cur > sh->prev) {
		share_compute(sh);
		if (!sh->heavy_bytes)
			share_heavy_bytes(sh); /* a second sender: classify from here */
	}
}

URPC_COLD void urpc__cc_share_heavy(struct urpc_cc_share *sh, uint32_t light_bytes)
{
	/* what it sent before it was heavy no longer counts as light */
	sh->light_cur -= URPC_MIN(sh->light_cur, light_bytes);
	sh->heavy_cur++;
}

/* ---- the timing wheel ---- */

void urpc__wheel_init(struct urpc_wheel *w, uint64_t now_ns, unsigned shift)
{
	unsigned i;

	w->shift = shift;
	w->cur = now_ns >> shift;
	w->n = 0;
	for (i = 0; i < URPC_WHEEL_SLOTS; i++)
		w->slot[i] = NULL;
}

void urpc__wheel_add(struct urpc_wheel *w, struct urpc_wheel_ent *e, uint64_t at_ns)
{
	uint64_t t = at_ns >> w->shift;

	if (t < w->cur)
		t = w->cur;
	if (t - w->cur >= URPC_WHEEL_SLOTS)
		t = w->cur + URPC_WHEEL_SLOTS - 1; /* past the horizon: re-added on release */
	e->at_ns = at_ns;
	e->slot = (uint32_t)(t & (URPC_WHEEL_SLOTS - 1));
	e->next = w->slot[e->slot];
	w->slot[e->slot] = e;
	w->n++;
}

void urpc__wheel_del(struct urpc_wheel *w, struct urpc_wheel_ent *e)
{
	struct urpc_wheel_ent **pp;

	for (pp = &w->slot[e->slot]; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			w->n--;
			return;
		}
	}
}

uint64_t urpc__wheel_next_ns(const struct urpc_wheel *w, unsigned max_slots)
{
	uint64_t t, end = w->cur + URPC_MIN(max_slots, URPC_WHEEL_SLOTS);

	if (!w->n)
		return UINT64_MAX;
	for (t = w->cur; t < end; t++)
		if (w->slot[t & (URPC_WHEEL_SLOTS - 1)])
			break;
	return t << w->shift;
}

unsigned urpc__wheel_poll(struct urpc_wheel *w, uint64_t now_ns,
			  void (*fn)(struct urpc_wheel_ent *e, void *arg), void *arg)
{
	uint64_t end = now_ns >> w->shift;
	unsigned done = 0, walked = 0;

	if (!w->n) {
		if (end > w->cur)
			w->cur = end;
		return 0;
	}
	while (w->cur <= end && w->n) {
		struct urpc_wheel_ent *e = w->slot[w->cur & (URPC_WHEEL_SLOTS - 1)], *next;

		w->slot[w->cur & (URPC_WHEEL_SLOTS - 1)] = NULL;
		w->cur++;
		for (; e; e = next) {
			next = e->next;
			w->n--;
			if (e->at_ns > now_ns) {
				urpc__wheel_add(w, e, e->at_ns);
			} else {
				fn(e, arg);
				done++;
			}
		}
		/* a wheel idle for longer than its horizon: each slot once, then jump */
		if (++walked == URPC_WHEEL_SLOTS && w->cur <= end)
			w->cur = end;
	}
	if (!w->n && end + 1 > w->cur)
		w->cur = end + 1;
	return done;
}
