/* SPDX-License-Identifier: MIT */
/*
 * The congestion experiments' model (issue 32, docs/CC.md; the runs are in
 * sim_exp_runs.c). Clients on 100 Gb/s ports of one switch send to
 * one server whose port has a 1 MB buffer (sim_fabric.h). Each session is
 * a reliable stream of messages cut into 4 KiB packets (SIM_MTU=BYTES for
 * another size, e.g. udp's 1472 B datagrams): a window of 256 KiB
 * in flight at most (the engine's credits), every packet acknowledged by
 * the server, go-back-N after a retransmission timeout; with congestion
 * control its packets also wait for the session's pacer (src/rpc/cc.h,
 * the engine's own controller), fed by each acknowledgement's round trip
 * and ECN echo, and capped by the server's fair share (cc.h's struct
 * urpc_cc_share: its port's rate over the senders it heard from lately,
 * echoed in each acknowledgement, as the engine's responses carry it;
 * SIM_SHARE=0 turns it off, SIM_SHARE_UTIL=MILLI sets its utilization,
 * 970 by default). The sessions are this file's model of the engine's
 * datapath, not the engine: the fabric and the controller are the real
 * ones. Calls sim_net.c's event queue, sim_fabric.c and src/rpc/cc.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_exp.h"

unsigned sim_exp_missed; /* goals missed with congestion control */
unsigned exp_mtu = 4096;

void exp_lat_add(struct lat *l, uint64_t v)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v) {
			fprintf(stderr, "urpc-sim: out of memory\n");
			exit(2);
		}
	}
	l->v[l->n++] = v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double exp_lat_pct(struct lat *l, double q)
{
	size_t i;

	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
	i = (size_t)(q * (double)(l->n - 1) + 0.5);
	return l->v[i] / 1000.0;
}

void exp_push(struct exp *x, unsigned type, unsigned flow, uint64_t at, uint64_t c)
{
	struct sim_ev *e = sim_ev_new(&x->net, EV_EXP, at, (int)flow, 0);

	e->a = type;
	e->b = flow;
	e->c = c;
	sim_ev_push(&x->net, e);
}

/* A packet (data or acknowledgement) through the fabric: @c the offset or the ack, ts its send. */
static void send_pkt(struct exp *x, unsigned type, unsigned flow, unsigned src, unsigned dst,
		     uint64_t c, uint32_t len, uint64_t ts, bool ecn, uint64_t share)
{
	struct sim_ev *e = sim_ev_new(&x->net, EV_EXP, x->net.now, (int)flow, 0);

	e->a = type;
	e->b = flow;
	e->c = c;
	e->len = 0;
	e->seq = 0;
	e->from.sin_port = ecn; /* the echo of a mark, on the way back */
	e->extra_ns = 0;
	e->ptr = (void *)(uintptr_t)ts;
	e->from.sin_addr.s_addr = len;
	memcpy(e->from.sin_zero, &share, sizeof(share)); /* the server's fair share, echoed */
	sim_fab_send(&x->fab, &x->net, e, src, dst, len + SIM_WIRE_OVERHEAD, 0, false);
}

void exp_try_send(struct exp *x, unsigned i)
{
	struct flow *f = &x->f[i];
	uint64_t win = WINDOW;

	if (f->in_send)
		return;
	f->in_send = true;
	if (x->cc_on && f->cc->limited) {
		/* Swift's window: what the rate carries in one round trip (one packet at least) */
		win = f->cc->rate_bps / 8 * (f->cc->srtt_ns ? f->cc->srtt_ns : TARGET_NS) /
		      1000000000ull;
		win = win < MTU ? MTU : win > WINDOW ? WINDOW : win;
	}
	while (f->active && f->snd_nxt < f->msg_end && f->snd_nxt - f->snd_una < win) {
		uint32_t len =
			(uint32_t)(f->msg_end - f->snd_nxt < MTU ? f->msg_end - f->snd_nxt : MTU);

		if (f->first >= 0) {
			/* the session's small RPCs go before its next bulk packet */
			struct flow *g = &x->f[f->first];

			if (g->active && g->snd_nxt < g->msg_end) {
				exp_try_send(x, (unsigned)f->first);
				if (g->snd_nxt < g->msg_end)
					break; /* it waits for the pacer: so does the bulk */
			}
		}
		if (x->cc_on) {
			uint64_t at = urpc__cc_tx(f->cc, len + SIM_WIRE_OVERHEAD, x->net.now);

			if (at) {
				if (!f->send_armed) {
					f->send_armed = true;
					exp_push(x, T_SEND, i, at, 0);
				}
				break;
			}
		}
		send_pkt(x, T_PKT, i, f->host, x->server, f->snd_nxt, len, x->net.now, false, 0);
		f->snd_nxt += len;
	}
	if (!f->rto_armed && f->snd_una < f->snd_nxt) {
		f->rto_armed = true;
		exp_push(x, T_RTO, i, x->net.now + RTO_NS, 0);
	}
	f->in_send = false;
	if (f->then >= 0)
		exp_try_send(x, (unsigned)f->then);
}

void exp_next_msg(struct exp *x, unsigned i)
{
	struct flow *f = &x->f[i];

	f->msg_start = x->net.now;
	f->msg_end = f->snd_una + f->msg;
	exp_try_send(x, i);
}

static void on_ack(struct exp *x, struct sim_ev *e)
{
	struct flow *f = &x->f[e->b];
	uint64_t ack = e->c, ts = (uintptr_t)e->ptr;
	bool ecn = e->from.sin_port != 0;
	uint64_t share;

	memcpy(&share, e->from.sin_zero, sizeof(share));
	if (x->cc_on && share)
		urpc__cc_share_echo(f->cc, &x->ccp, share);
	/* every acknowledgement is a sample, a duplicate too (it echoes its packet's time) */
	if (x->cc_on)
		urpc__cc_sample(f->cc, &x->ccp, x->net.now - ts, ecn,
				(uint32_t)(ack > f->snd_una ? ack - f->snd_una : 0), x->net.now);
	if (ack <= f->snd_una)
		return; /* a duplicate (go-back-N's receiver) */
	f->delivered += ack - f->snd_una;
	if (x->win_bytes)
		x->win_bytes[e->b] += ack - f->snd_una;
	f->snd_una = ack;
	if (f->snd_nxt < ack)
		f->snd_nxt = ack;
	f->last_progress = x->net.now;
	if (f->snd_una >= f->msg_end) {
		if (x->net.now >= x->measure_from)
			exp_lat_add(f->victim ? &x->vic_lat : &x->msg_lat,
				    x->net.now - f->msg_start);
		exp_next_msg(x, e->b);
	} else {
		exp_try_send(x, e->b);
	}
}

static void on_pkt(struct exp *x, struct sim_ev *e)
{
	struct flow *f = &x->f[e->b];
	uint32_t len = e->from.sin_addr.s_addr;
	uint64_t share = 0;

	if (e->c == f->rcv_nxt)
		f->rcv_nxt += len;
	if (x->share_on)
		share = urpc__cc_share_seen(&x->share, f->peer, len + SIM_WIRE_OVERHEAD,
					    x->net.now);
	/* cumulative, echoing this packet's send time and mark; a response is as small */
	send_pkt(x, T_ACK, e->b, x->server, f->host, f->rcv_nxt, VICTIM_LEN, (uintptr_t)e->ptr,
		 e->ecn, share);
}

static void on_rto(struct exp *x, unsigned i)
{
	struct flow *f = &x->f[i];

	f->rto_armed = false;
	if (f->snd_una >= f->snd_nxt)
		return;
	if (x->net.now - f->last_progress >= RTO_NS) {
		f->retx += (f->snd_nxt - f->snd_una + MTU - 1) / MTU;
		f->snd_nxt = f->snd_una; /* go back */
		if (x->cc_on)
			urpc__cc_timeout(f->cc, &x->ccp, x->net.now, 0);
		f->last_progress = x->net.now;
	}
	f->rto_armed = true;
	exp_push(x, T_RTO, i, f->last_progress + RTO_NS, 0);
	exp_try_send(x, i);
}

uint64_t exp_drops(struct exp *x)
{
	uint64_t d = 0;
	unsigned i;

	for (i = 0; i < x->fab.cfg.hosts; i++)
		d += x->fab.down[i].drops;
	return d;
}

uint64_t exp_retx(struct exp *x)
{
	uint64_t r = 0;
	unsigned i;

	for (i = 0; i < x->nflows; i++)
		r += x->f[i].retx;
	return r;
}

/* Flows 0..n-1 on hosts 0..n-1; the server is host n. */
int exp_init(struct exp *x, unsigned n, bool cc, uint64_t ecn_bytes)
{
	struct sim_fab_cfg fc = {
		.hosts = n + 1,
		.host_gbps = LINE_BPS / 1e9,
		.up_gbps = LINE_BPS / 1e9,
		.prop_ns = PROP_NS,
		.buf_bytes = BUF,
		.ecn_bytes = ecn_bytes,
	};
	const char *bad;
	unsigned i;

	if (getenv("SIM_MTU")) {
		exp_mtu = (unsigned)strtoul(getenv("SIM_MTU"), NULL, 0);
		if (exp_mtu < 256 || exp_mtu > 65536) {
			fprintf(stderr, "urpc-sim: SIM_MTU: %s out of range (256 to 65536)\n",
				getenv("SIM_MTU"));
			return -1;
		}
	}
	fc.os_chunk = MTU;
	memset(x, 0, sizeof(*x));
	sim_net_init(&x->net, 32, 0);
	if (sim_fab_init(&x->fab, &fc))
		return -1;
	x->cc_on = cc;
	x->nflows = n;
	x->server = n;
	x->f = calloc(n, sizeof(*x->f));
	if (!x->f)
		return -1;
	urpc__cc_params_default(&x->ccp, LINE_BPS, TARGET_NS);
	if (getenv("SIM_CC_AI_DIV"))
		x->ccp.ai_bps = LINE_BPS / strtoull(getenv("SIM_CC_AI_DIV"), NULL, 0);
	if (getenv("SIM_CC_BETA"))
		x->ccp.beta_milli = (uint16_t)strtoul(getenv("SIM_CC_BETA"), NULL, 0);
	if (getenv("SIM_CC_MAXMD"))
		x->ccp.max_md_milli = (uint16_t)strtoul(getenv("SIM_CC_MAXMD"), NULL, 0);
	if (getenv("SIM_CC_RAMP"))
		x->ccp.ai_ramp = strtod(getenv("SIM_CC_RAMP"), NULL);
	if (getenv("SIM_CC_FS"))
		x->ccp.fs_range_ns = (uint32_t)strtoul(getenv("SIM_CC_FS"), NULL, 0);
	if (getenv("SIM_CC_TO"))
		x->ccp.timeout_div = strtod(getenv("SIM_CC_TO"), NULL);
	if (getenv("SIM_CC_MI"))
		x->ccp.mi_div = strtod(getenv("SIM_CC_MI"), NULL);
	if (getenv("SIM_CC_TARGET"))
		x->ccp.target_ns = (uint32_t)strtoul(getenv("SIM_CC_TARGET"), NULL, 0);
	if (getenv("SIM_CC_ALGO") && !strcmp(getenv("SIM_CC_ALGO"), "timely"))
		x->ccp.algo = URPC_CC_ALGO_TIMELY;
	if (urpc__cc_params_check(&x->ccp, &bad)) {
		fprintf(stderr, "urpc-sim: SIM_CC_*: %s out of range\n", bad);
		return -1;
	}
	x->share_on = !getenv("SIM_SHARE") || strcmp(getenv("SIM_SHARE"), "0");
	exp_share_init(x, LINE_BPS);
	for (i = 0; i < n; i++) {
		x->f[i].host = i;
		urpc__cc_init(&x->f[i].own, &x->ccp);
		x->f[i].cc = &x->f[i].own;
		x->f[i].peer = &x->f[i].own_peer;
		x->f[i].first = x->f[i].then = -1;
	}
	return 0;
}

void exp_share_init(struct exp *x, uint64_t line_bps)
{
	const char *u = getenv("SIM_SHARE_UTIL");
	unsigned long util = u ? strtoul(u, NULL, 0) : 970;

	if (!util || util > 1000) {
		fprintf(stderr, "urpc-sim: SIM_SHARE_UTIL: %s out of range (1 to 1000)\n", u);
		util = 970;
	}
	urpc__cc_share_init(&x->share, line_bps, (uint16_t)util, MTU + SIM_WIRE_OVERHEAD,
			    x->ccp.target_ns, x->net.now);
}

void exp_fini(struct exp *x)
{
	struct sim_ev *e;

	while ((e = sim_ev_pop(&x->net)))
		free(e);
	free(x->net.heap);
	sim_fab_fini(&x->fab);
	free(x->f);
	free(x->msg_lat.v);
	free(x->vic_lat.v);
	free(x->win_bytes);
}

/* Run until @end; T_TICK events go to @tick. */
void exp_loop(struct exp *x, uint64_t end, void (*tick)(struct exp *, uint64_t))
{
	struct sim_ev *e;

	while (x->net.nheap && x->net.heap[0]->t <= end) {
		e = sim_ev_pop(&x->net);
		if (e->kind == EV_HOP) {
			sim_fab_hop(&x->fab, &x->net, e);
			continue;
		}
		switch (e->a) {
		case T_SEND:
			x->f[e->b].send_armed = false;
			exp_try_send(x, e->b);
			break;
		case T_PKT:
			on_pkt(x, e);
			break;
		case T_ACK:
			on_ack(x, e);
			break;
		case T_RTO:
			on_rto(x, e->b);
			break;
		case T_TICK:
			tick(x, e->c);
			break;
		}
		free(e);
	}
}

void exp_start_measure(struct exp *x)
{
	x->measure_from = x->net.now;
	sim_fab_qreset(&x->fab.down[x->server]);
	x->drops_at_measure = exp_drops(x);
	x->retx_at_measure = exp_retx(x);
}

void exp_no_tick(struct exp *x, uint64_t c)
{
}

/* The victim alone: its idle round trip (us). */
double exp_idle_rtt(void)
{
	struct exp x;
	double r;

	if (exp_init(&x, 1, true, 0))
		return 0;
	x.f[0].victim = x.f[0].active = true;
	x.f[0].msg = VICTIM_LEN;
	exp_next_msg(&x, 0);
	exp_loop(&x, T0 + 1000000, exp_no_tick);
	r = exp_lat_pct(&x.vic_lat, 0.5);
	exp_fini(&x);
	return r;
}
