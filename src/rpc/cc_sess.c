/* SPDX-License-Identifier: MIT */
/*
 * Congestion control of an Rpc's client sessions (cc_sess.h): options,
 * per-session controllers (cc.c), the Rpc's pacer (a timing wheel) and
 * urpc_session_get_stats(). Calls cc.c, the log, rop.h (the sessions of
 * users' one-sided batches) and the transport's set_peer_window and
 * peer_os_rtt (the one-sided window follows the controller, fed by the
 * transfers' own round trips); never the datapath (client.c kicks a
 * released session itself).
 */
#define URPC_LOG_MODULE "cc"
#include "cc_sess.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "rop.h"

#define CC_WHEEL_SHIFT 10	/* 1.024 us slots: 4.2 ms ahead */
#define CC_OS_TICK_NS 10000	/* one-sided round trips are looked at every 10 us at most */
#define CC_SHARE_UTIL_MILLI 970 /* a server's fair shares add up to 97% of its line (CC.md) */
/*
 * A server session's one-sided samples are judged against CC_OS_BASE_X
 * times the least round trip of its transfers' own pieces (at least
 * CC_OS_TARGET_MIN_NS), when that is under the session's target: the
 * queue a bulk transfer keeps is what a small RPC on its session waits
 * behind (CC.md). Not a client session's: its controller also takes its
 * RPCs' round trips, against the session's target (on the simulator's
 * fabric, one controller under both targets kept deeper queues).
 */
#ifndef CC_OS_BASE_X /* -DCC_OS_BASE_X=1000000: the session's target alone, as before */
#define CC_OS_BASE_X 3
#endif
#define CC_OS_TARGET_MIN_NS 5000
/*
 * A paced Rpc sleeps until this long before its next release: the
 * kernel's timer slack for an ordinary thread (50 us) and a wake-up's
 * cost, so the sleep does not make the session late (CC.md).
 */
#define CC_IDLE_EARLY_NS 80000
#define CC_IDLE_LOOK 512 /* slots looked at for the next release (0.5 ms: then look again) */

URPC_API const char *urpc_cc_algo_str(enum urpc_cc_algo a)
{
	switch (a) {
	case URPC_CC_DEFAULT:
		return "default";
	case URPC_CC_OFF:
		return "off";
	case URPC_CC_SWIFT:
		return "swift";
	case URPC_CC_TIMELY:
		return "timely";
	}
	return "?";
}

/*
 * URPC_CC=off|swift|timely[:TARGET_US[:LINE_MBPS]] for an Rpc whose options
 * leave cc_algo at its default (as URPC_TRANSPORT for the transport): @env
 * into @o. 0, or -EINVAL.
 */
static int cc_from_env(const char *env, struct urpc_rpc_opts *o)
{
	char *end;
	unsigned long v;
	size_t n = strcspn(env, ":");

	if (n == 3 && !strncmp(env, "off", 3))
		o->cc_algo = URPC_CC_OFF;
	else if (n == 5 && !strncmp(env, "swift", 5))
		o->cc_algo = URPC_CC_SWIFT;
	else if (n == 6 && !strncmp(env, "timely", 6))
		o->cc_algo = URPC_CC_TIMELY;
	else
		return -EINVAL;
	if (!env[n])
		return 0;
	errno = 0;
	v = strtoul(env + n + 1, &end, 10);
	if (errno || end == env + n + 1 || !v || v > 100000 || (*end && *end != ':'))
		return -EINVAL;
	o->cc_target_us = (uint32_t)v;
	if (!*end)
		return 0;
	v = strtoul(end + 1, &end, 10);
	if (errno || !v || v > 10000000 || *end)
		return -EINVAL;
	o->cc_line_mbps = (uint32_t)v;
	return 0;
}

int urpc__cc_rpc_init(struct urpc_rpc *rpc, const struct urpc_rpc_opts *opts)
{
	struct urpc_rpc_opts env_o = *opts;
	const struct urpc_rpc_opts *o = opts;
	const char *env = getenv("URPC_CC");
	uint32_t target;
	uint64_t line;
	const char *what = NULL;

	if (opts->cc_algo == URPC_CC_DEFAULT && env && *env) {
		if (cc_from_env(env, &env_o)) {
			URPC_ERR(rpc->id,
				 "URPC_CC='%s': want off, swift or timely, then "
				 "optionally :TARGET_US (1-100000) and :LINE_MBPS",
				 env);
			return -EINVAL;
		}
		o = &env_o;
	}
	target = o->cc_target_us ? o->cc_target_us : 100;
	line = o->cc_line_mbps ? o->cc_line_mbps : 100000;
	if ((unsigned)o->cc_algo > URPC_CC_TIMELY)
		what = "cc_algo";
	else if (target > 100000)
		what = "cc_target_us";
	else if (line > 10000000)
		what = "cc_line_mbps";
	if (what) {
		URPC_ERR(rpc->id, "urpc_rpc_opts.%s is out of range (docs/CC.md)", what);
		return -EINVAL;
	}
	urpc__cc_params_default(&rpc->ccp, line * 1000000, target * 1000);
	/* Default off: round trips of RPCs over a host's scheduler are not a fabric's (CC.md). */
	rpc->ccp.algo = o->cc_algo == URPC_CC_SWIFT    ? URPC_CC_ALGO_SWIFT
			: o->cc_algo == URPC_CC_TIMELY ? URPC_CC_ALGO_TIMELY
						       : URPC_CC_ALGO_OFF;
	if (urpc__cc_params_check(&rpc->ccp, &what)) {
		URPC_ERR(rpc->id, "urpc_rpc_opts: congestion parameter %s out of range", what);
		return -EINVAL;
	}
	if (rpc->ccp.algo == URPC_CC_ALGO_OFF)
		return 0;
	rpc->cc_wheel = malloc(sizeof(*rpc->cc_wheel));
	if (!rpc->cc_wheel)
		return -ENOMEM;
	urpc__wheel_init(rpc->cc_wheel, urpc__rpc_clock(rpc), CC_WHEEL_SHIFT);
	/*
	 * As a server: its line over the clients it heard from in the last
	 * epoch (at least the delay target, long enough for a client at its
	 * share to send URPC_CC_SHARE_PKTS datagrams, of 4096 B until rpc.c
	 * knows its transport's MTU), echoed in its answers.
	 */
	urpc__cc_share_init(&rpc->cc_share, rpc->ccp.line_bps, CC_SHARE_UTIL_MILLI, 4096,
			    rpc->ccp.target_ns, urpc__rpc_clock(rpc));
	return 0;
}

void urpc__cc_rpc_fini(struct urpc_rpc *rpc)
{
	free(rpc->cc_wheel);
	rpc->cc_wheel = NULL;
}

void urpc__cc_sess_init(struct urpc_rpc *rpc, struct urpc_session *s)
{
	urpc__cc_init(&s->cli.cc.cc, &rpc->ccp);
	s->cli.cc.queued = false;
	s->cli.cc_limited = false;
	s->cli.cc.os_base_ns = 0;
}

void urpc__cc_sess_forget(struct urpc_rpc *rpc, struct urpc_session *s)
{
	if (s->cli.cc.queued)
		urpc__wheel_del(rpc->cc_wheel, &s->cli.cc.ent);
	s->cli.cc.queued = false;
}

/*
 * One-sided transfers on @s (a client's READs of large responses, a
 * server's READs of large requests, the owner's side of urpc_rdma_*) keep
 * rate x round trip in flight while its controller @cs is limited, the
 * transport's own window while it is free: a bulk transfer backs off with
 * the RPCs, and a burst of them into one port with each other.
 */
static void cc_window(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cc_sess *cs)
{
	const struct urpc_cc *c = &cs->cc;
	uint64_t win = 0;

	if (c->limited && c->srtt_ns)
		win = URPC_MAX(c->rate_bps / 8 * (c->srtt_ns / 1000) / 1000000,
			       1); /* no overflow */
	if (s->peer && rpc->tp->ops->set_peer_window && win != cs->os_window) {
		cs->os_window = win;
		rpc->tp->ops->set_peer_window(rpc->tp, s->peer, win);
	}
}

/* After the controller moved: limited sessions sample every answer, free ones now and then. */
static void cc_moved(struct urpc_rpc *rpc, struct urpc_session *s)
{
	s->cli.cc_limited = s->cli.cc.cc.limited;
	if (s->cli.cc_limited)
		s->cli.rtt.next_ns = rpc->now;
	cc_window(rpc, s, &s->cli.cc);
}

/*
 * The newest round trip of a piece of @s's one-sided transfers (the
 * transport's peer_os_rtt) into its controller: a client's own (one
 * session, one controller), a server session's (started at its first
 * sample). The piece's own time on the line at line rate is taken out
 * (a loop operation is a whole message): what is left is the path's
 * delay and queue, as an RPC's round trip.
 */
static void cc_os_sample(struct urpc_rpc *rpc, struct urpc_session *s)
{
	struct urpc_cc_params p = rpc->ccp;
	struct urpc_cc_sess *cs;
	uint64_t bytes = 0, rtt, wire;

	if (!s->peer || s->state != URPC_SESS_CONNECTED)
		return;
	rtt = rpc->tp->ops->peer_os_rtt(rpc->tp, s->peer, &bytes);
	if (!rtt)
		return;
	cs = s->role == URPC_ROLE_CLIENT ? &s->cli.cc : &s->srv.cc;
	if (!cs->cc.rate_bps)
		urpc__cc_init(&cs->cc, &rpc->ccp);
	wire = (uint64_t)((double)bytes * 8e9 / (double)rpc->ccp.line_bps);
	rtt = rtt > wire ? rtt - wire : 1;
	if (!cs->os_base_ns || rtt < cs->os_base_ns)
		cs->os_base_ns = rtt;
	if (s->role != URPC_ROLE_CLIENT) /* its controller hears nothing else (CC_OS_BASE_X) */
		p.target_ns = (uint32_t)URPC_MIN(
			p.target_ns, URPC_MAX(CC_OS_BASE_X * cs->os_base_ns, CC_OS_TARGET_MIN_NS));
	p.fs_range_ns = URPC_MIN(p.fs_range_ns, p.target_ns);
	/* a window's worth acknowledged per sample (one a round trip); the piece's at least */
	urpc__cc_sample(&cs->cc, &p, rtt, false,
			(uint32_t)URPC_MIN(URPC_MAX(cs->os_window, bytes), UINT32_MAX), rpc->now);
	if (s->role == URPC_ROLE_CLIENT)
		cc_moved(rpc, s);
	else
		cc_window(rpc, s, cs);
}

URPC_COLD void urpc__cc_os_scan(struct urpc_rpc *rpc)
{
	unsigned i;

	rpc->cc_os_next_ns = rpc->now + CC_OS_TICK_NS;
	if (!rpc->tp->ops->peer_os_rtt)
		return;
	for (i = 0; i < URPC_OS_OPS; i++) {
		struct urpc_session *s;

		if (!rpc->os[i].busy || rpc->os[i].orphan)
			continue;
		s = urpc__rpc_session(rpc, (int)rpc->os[i].sess_num);
		if (s)
			cc_os_sample(rpc, s);
	}
	urpc__rop_each_session(rpc, cc_os_sample);
}

URPC_COLD void urpc__cc_sess_sample(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t rtt_ns,
				    uint32_t share_mbps)
{
	if (!rpc->cc_wheel)
		return; /* off */
	if (share_mbps) /* 0: the server did not say (CC off there, or not a plain answer) */
		urpc__cc_share_echo(&s->cli.cc.cc, &rpc->ccp, (uint64_t)share_mbps * 1000000);
	/* one request's worth acknowledged: an MTU's (the sample is one RPC's) */
	urpc__cc_sample(&s->cli.cc.cc, &rpc->ccp, rtt_ns, false, 4096, rpc->now);
	cc_moved(rpc, s);
}

URPC_COLD void urpc__cc_sess_timeout(struct urpc_rpc *rpc, struct urpc_session *s)
{
	urpc__cc_timeout(&s->cli.cc.cc, &rpc->ccp, rpc->now, s->cli.rtt.rto_ns);
	cc_moved(rpc, s);
}

URPC_COLD bool urpc__cc_sess_may_send(struct urpc_rpc *rpc, struct urpc_session *s, uint64_t bytes)
{
	uint64_t at;

	if (!rpc->cc_wheel)
		return true;
	at = urpc__cc_tx(&s->cli.cc.cc, (uint32_t)URPC_MIN(bytes, UINT32_MAX / 1024), rpc->now);
	if (!at)
		return true;
	if (!s->cli.cc.queued) {
		s->cli.cc.queued = true;
		s->cli.cc.cc.paced++;
		urpc__wheel_add(rpc->cc_wheel, &s->cli.cc.ent, at);
	}
	return false;
}

struct poll_arg {
	struct urpc_rpc *rpc;
	void (*kick)(struct urpc_rpc *rpc, struct urpc_session *s);
};

static void released(struct urpc_wheel_ent *e, void *arg)
{
	struct urpc_session *s = container_of(e, struct urpc_session, cli.cc.ent);
	struct poll_arg *a = arg;

	s->cli.cc.queued = false;
	if (s->state == URPC_SESS_CONNECTED)
		a->kick(a->rpc, s);
}

URPC_COLD bool urpc__cc_idle_until(const struct urpc_rpc *rpc, uint64_t *wake_ns)
{
	uint64_t at;

	if (!rpc->cc_wheel || !rpc->cc_wheel->n)
		return true;
	at = urpc__wheel_next_ns(rpc->cc_wheel, CC_IDLE_LOOK);
	if (at <= rpc->now + CC_IDLE_EARLY_NS)
		return false;
	*wake_ns = URPC_MIN(*wake_ns, at - CC_IDLE_EARLY_NS);
	return true;
}

void urpc__cc_poll(struct urpc_rpc *rpc, void (*kick)(struct urpc_rpc *, struct urpc_session *))
{
	struct poll_arg a = {rpc, kick};

	urpc__wheel_poll(rpc->cc_wheel, rpc->now, released, &a);
}

URPC_API int urpc_session_get_stats(struct urpc_rpc *rpc, int session,
				    struct urpc_session_stats *st)
{
	struct urpc_session *s;

	if (!rpc || !st || !urpc__rpc_is_owner(rpc))
		return -EINVAL;
	s = urpc__rpc_session(rpc, session);
	if (!s || (s->role != URPC_ROLE_CLIENT && s->role != URPC_ROLE_SERVER))
		return -EINVAL;
	if (s->role == URPC_ROLE_SERVER) { /* its one-sided transfers' controller */
		const struct urpc_cc *c = &s->srv.cc.cc;

		*st = (struct urpc_session_stats){
			.cc_rate_bps = c->rate_bps ? c->rate_bps : rpc->ccp.line_bps,
			.cc_line_bps = rpc->ccp.line_bps,
			.cc_srtt_ns = c->srtt_ns,
			.cc_samples = c->samples,
			.cc_decreases = c->decreases,
			.cc_limited = c->limited,
		};
		return 0;
	}
	*st = (struct urpc_session_stats){
		.cc_rate_bps = s->cli.cc.cc.rate_bps,
		.cc_line_bps = rpc->ccp.line_bps,
		.srtt_ns = s->cli.rtt.srtt_ns,
		.cc_srtt_ns = s->cli.cc.cc.srtt_ns,
		.cc_samples = s->cli.cc.cc.samples,
		.cc_decreases = s->cli.cc.cc.decreases,
		.cc_paced = s->cli.cc.cc.paced,
		.cc_limited = s->cli.cc.cc.limited,
		.cc_share_bps = s->cli.cc.cc.share_bps,
	};
	return 0;
}
