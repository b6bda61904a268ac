/* SPDX-License-Identifier: MIT */
/*
 * The congestion experiments (issue 32, docs/CC.md): urpc-sim --experiment
 * incast|victim|fairness. Clients on 100 Gb/s ports of one switch send to
 * one server whose port has a 1 MB buffer (sim_fabric.h). Each session is
 * a reliable stream of messages cut into 4 KiB packets: a window of 256 KiB
 * in flight at most (the engine's credits), every packet acknowledged by
 * the server, go-back-N after a retransmission timeout; with congestion
 * control its packets also wait for the session's pacer (src/rpc/cc.h,
 * the engine's own controller), fed by each acknowledgement's round trip
 * and ECN echo. The sessions are this file's model of the engine's
 * datapath, not the engine: the fabric and the controller are the real
 * ones. Calls sim_net.c's event queue, sim_fabric.c and src/rpc/cc.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/rpc/cc.h"
#include "sim.h"
#include "sim_fabric.h"

enum { X_INCAST = 1, X_FAIRNESS, X_VICTIM, X_SESSION };
enum { T_SEND = 1, T_PKT, T_ACK, T_RTO, T_TICK };

#define MTU 4096u
#define WINDOW (256u * 1024)
#define LINE_BPS 100000000000ull
#define PROP_NS 1000u
#define BUF (1000u * 1000)
#define TARGET_NS 8000u
#define RTO_NS 1000000ull
#define VICTIM_LEN 32u
#define T0 1000000000ull

struct flow {
	unsigned host;
	bool active, victim, send_armed, rto_armed, in_send;
	uint64_t msg;			    /* bytes per message */
	uint64_t snd_una, snd_nxt, msg_end; /* stream offsets */
	uint64_t rcv_nxt;		    /* the server's side */
	uint64_t msg_start, last_progress;
	uint64_t delivered, retx;
	struct urpc_cc own, *cc; /* the session's controller: its own, or shared (X_SESSION) */
	int first, then; /* X_SESSION: the session's stream sent before this one / after; -1 */
};

struct lat {
	uint64_t *v;
	size_t n, cap;
};

struct exp {
	struct sim_net net;
	struct sim_fabric fab;
	struct urpc_cc_params ccp;
	bool cc_on;
	unsigned nflows, server;
	struct flow *f;
	struct lat msg_lat, vic_lat;
	uint64_t measure_from; /* steady state: latencies, queue and drops from here */
	uint64_t drops_at_measure, retx_at_measure;
	/* fairness: bytes per flow per window */
	uint64_t *win_bytes;
	FILE *csv;
	const char *name;
};

static unsigned missed; /* goals missed with congestion control */

static void lat_add(struct lat *l, uint64_t v)
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

static double lat_pct(struct lat *l, double q)
{
	size_t i;

	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
	i = (size_t)(q * (double)(l->n - 1) + 0.5);
	return l->v[i] / 1000.0;
}

static void push(struct exp *x, unsigned type, unsigned flow, uint64_t at, uint64_t c)
{
	struct sim_ev *e = sim_ev_new(&x->net, EV_EXP, at, (int)flow, 0);

	e->a = type;
	e->b = flow;
	e->c = c;
	sim_ev_push(&x->net, e);
}

/* A packet (data or acknowledgement) through the fabric: @c the offset or the ack, ts its send. */
static void send_pkt(struct exp *x, unsigned type, unsigned flow, unsigned src, unsigned dst,
		     uint64_t c, uint32_t len, uint64_t ts, bool ecn)
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
	sim_fab_send(&x->fab, &x->net, e, src, dst, len + SIM_WIRE_OVERHEAD, 0, false);
}

static void try_send(struct exp *x, unsigned i)
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
				try_send(x, (unsigned)f->first);
				if (g->snd_nxt < g->msg_end)
					break; /* it waits for the pacer: so does the bulk */
			}
		}
		if (x->cc_on) {
			uint64_t at = urpc__cc_tx(f->cc, len + SIM_WIRE_OVERHEAD, x->net.now);

			if (at) {
				if (!f->send_armed) {
					f->send_armed = true;
					push(x, T_SEND, i, at, 0);
				}
				break;
			}
		}
		send_pkt(x, T_PKT, i, f->host, x->server, f->snd_nxt, len, x->net.now, false);
		f->snd_nxt += len;
	}
	if (!f->rto_armed && f->snd_una < f->snd_nxt) {
		f->rto_armed = true;
		push(x, T_RTO, i, x->net.now + RTO_NS, 0);
	}
	f->in_send = false;
	if (f->then >= 0)
		try_send(x, (unsigned)f->then);
}

static void next_msg(struct exp *x, unsigned i)
{
	struct flow *f = &x->f[i];

	f->msg_start = x->net.now;
	f->msg_end = f->snd_una + f->msg;
	try_send(x, i);
}

static void on_ack(struct exp *x, struct sim_ev *e)
{
	struct flow *f = &x->f[e->b];
	uint64_t ack = e->c, ts = (uintptr_t)e->ptr;
	bool ecn = e->from.sin_port != 0;

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
			lat_add(f->victim ? &x->vic_lat : &x->msg_lat, x->net.now - f->msg_start);
		next_msg(x, e->b);
	} else {
		try_send(x, e->b);
	}
}

static void on_pkt(struct exp *x, struct sim_ev *e)
{
	struct flow *f = &x->f[e->b];
	uint32_t len = e->from.sin_addr.s_addr;

	if (e->c == f->rcv_nxt)
		f->rcv_nxt += len;
	/* cumulative, echoing this packet's send time and mark; a response is as small */
	send_pkt(x, T_ACK, e->b, x->server, f->host, f->rcv_nxt, VICTIM_LEN, (uintptr_t)e->ptr,
		 e->ecn);
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
	push(x, T_RTO, i, f->last_progress + RTO_NS, 0);
	try_send(x, i);
}

static uint64_t total_drops(struct exp *x)
{
	uint64_t d = 0;
	unsigned i;

	for (i = 0; i < x->fab.cfg.hosts; i++)
		d += x->fab.down[i].drops;
	return d;
}

static uint64_t total_retx(struct exp *x)
{
	uint64_t r = 0;
	unsigned i;

	for (i = 0; i < x->nflows; i++)
		r += x->f[i].retx;
	return r;
}

/* Flows 0..n-1 on hosts 0..n-1; the server is host n. */
static int exp_init(struct exp *x, unsigned n, bool cc, uint64_t ecn_bytes)
{
	struct sim_fab_cfg fc = {
		.hosts = n + 1,
		.host_gbps = LINE_BPS / 1e9,
		.up_gbps = LINE_BPS / 1e9,
		.prop_ns = PROP_NS,
		.buf_bytes = BUF,
		.ecn_bytes = ecn_bytes,
		.os_chunk = MTU,
	};
	const char *bad;
	unsigned i;

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
	for (i = 0; i < n; i++) {
		x->f[i].host = i;
		urpc__cc_init(&x->f[i].own, &x->ccp);
		x->f[i].cc = &x->f[i].own;
		x->f[i].first = x->f[i].then = -1;
	}
	return 0;
}

static void exp_fini(struct exp *x)
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
static void exp_loop(struct exp *x, uint64_t end, void (*tick)(struct exp *, uint64_t))
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
			try_send(x, e->b);
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

static void start_measure(struct exp *x)
{
	x->measure_from = x->net.now;
	sim_fab_qreset(&x->fab.down[x->server]);
	x->drops_at_measure = total_drops(x);
	x->retx_at_measure = total_retx(x);
}

static void no_tick(struct exp *x, uint64_t c)
{
}

/* The victim alone: its idle round trip (us). */
static double idle_rtt(void)
{
	struct exp x;
	double r;

	if (exp_init(&x, 1, true, 0))
		return 0;
	x.f[0].victim = x.f[0].active = true;
	x.f[0].msg = VICTIM_LEN;
	next_msg(&x, 0);
	exp_loop(&x, T0 + 1000000, no_tick);
	r = lat_pct(&x.vic_lat, 0.5);
	exp_fini(&x);
	return r;
}

/*
 * incast / victim: @n clients (the last one the victim's 32 B RPCs when
 * @victim) send @msg-byte messages back to back for 20 ms; measured after 5 ms.
 */
static int incast(bool cc, unsigned n, uint64_t msg, bool victim, double idle, FILE *csv)
{
	const uint64_t warm = 5000000, run = 20000000;
	struct exp x;
	unsigned i, nin = victim ? n + 1 : n;
	double gput, qp99, port;
	uint64_t drops_all, drops_steady, retx_all, retx_steady;

	if (exp_init(&x, nin, cc, 0))
		return 2;
	for (i = 0; i < nin; i++) {
		x.f[i].active = true;
		x.f[i].msg = msg;
	}
	if (victim) {
		x.f[n].victim = true;
		x.f[n].msg = VICTIM_LEN;
	}
	for (i = 0; i < nin; i++)
		next_msg(&x, i);
	exp_loop(&x, T0 + warm, no_tick);
	start_measure(&x);
	for (i = 0; i < nin; i++)
		x.f[i].delivered = 0;
	exp_loop(&x, T0 + run, no_tick);
	for (gput = 0, i = 0; i < n; i++)
		gput += (double)x.f[i].delivered * 8;
	gput /= (run - warm) / 1e9;
	port = (double)LINE_BPS;
	qp99 = (double)sim_fab_qpct(&x.fab.down[x.server], 0.99);
	drops_all = total_drops(&x);
	drops_steady = drops_all - x.drops_at_measure;
	retx_all = total_retx(&x);
	retx_steady = retx_all - x.retx_at_measure;
	printf("%-3s %3u x %7" PRIu64 " B  goodput %6.2f Gb/s (%5.1f%%)  msg p50 %8.1f us  p99 "
	       "%8.1f us  queue p99 %7.0f KB (max %5.0f KB)  drops %6" PRIu64 " (steady %" PRIu64
	       ")  retx %6" PRIu64 " (steady %" PRIu64 ")",
	       cc ? "on" : "off", n, msg, gput / 1e9, 100 * gput / port, lat_pct(&x.msg_lat, 0.5),
	       lat_pct(&x.msg_lat, 0.99), qp99 / 1000, x.fab.down[x.server].qmax / 1000.0,
	       drops_all, drops_steady, retx_all, retx_steady);
	if (victim)
		printf("  victim p50 %.1f us p99 %.1f us (%.1fx / %.1fx idle %.1f us)",
		       lat_pct(&x.vic_lat, 0.5), lat_pct(&x.vic_lat, 0.99),
		       lat_pct(&x.vic_lat, 0.5) / idle, lat_pct(&x.vic_lat, 0.99) / idle, idle);
	printf("\n");
	/* the goals with congestion control (docs/CC.md) */
	if (cc && (gput < 0.9 * port || qp99 > 2.0 * TARGET_NS * port / 8e9 || drops_steady ||
		   (victim && lat_pct(&x.vic_lat, 0.99) > 3 * idle))) {
		printf("    GOAL MISSED: goodput >= 90%%, queue p99 <= %.0f KB, 0 drops in steady "
		       "state%s\n",
		       2.0 * TARGET_NS * port / 8e12, victim ? ", victim p99 <= 3x idle RTT" : "");
		missed++;
	}
	if (csv)
		fprintf(csv,
			"%s,%u,%" PRIu64 ",%.3f,%.2f,%.2f,%.2f,%.0f,%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64 ",%.2f,%.2f,%.2f\n",
			cc ? "on" : "off", n, msg, gput / 1e9, 100 * gput / port,
			lat_pct(&x.msg_lat, 0.5), lat_pct(&x.msg_lat, 0.99), qp99, drops_all,
			drops_steady, retx_all, retx_steady,
			victim ? lat_pct(&x.vic_lat, 0.5) : 0.0,
			victim ? lat_pct(&x.vic_lat, 0.99) : 0.0, idle);
	exp_fini(&x);
	return 0;
}

static double jain(const uint64_t *v, const bool *on, unsigned n)
{
	double s = 0, s2 = 0;
	unsigned i, k = 0;

	for (i = 0; i < n; i++) {
		if (on && !on[i])
			continue;
		s += (double)v[i];
		s2 += (double)v[i] * (double)v[i];
		k++;
	}
	return s2 > 0 ? s * s / (k * s2) : 1.0;
}

#define FTICK_NS 20000ull /* fairness: a sample every 20 us */
#define FHIST 50u	  /* ... throughput over the last 50 (1 ms) */

struct fair {
	double jain_sum, jain_min;
	unsigned jain_n, tick;
	uint64_t join_at, leave_at, join_conv, leave_conv;
	uint64_t *hist; /* [FHIST][flows]: bytes delivered per tick */
	FILE *csv;
	bool cc;
	unsigned n;
};

static struct fair F;

/*
 * Every FTICK_NS: Jain's index of the active sessions' throughput over the
 * last 1 ms and of their controllers' rates; after the join, the time until
 * the rates (with CC; the throughput without) are fair again (>= 0.95);
 * after the leave, until the port carries >= 90% again (over 100 us).
 */
static void fair_tick(struct exp *x, uint64_t c)
{
	unsigned n = x->nflows, i, t, k = 0;
	uint64_t *tp = calloc(n, sizeof(uint64_t)), *rates = calloc(n, sizeof(uint64_t)),
		 recent = 0;
	bool *on = calloc(n, sizeof(bool));
	double jt, jr;

	memcpy(&F.hist[(F.tick % FHIST) * n], x->win_bytes, n * sizeof(uint64_t));
	memset(x->win_bytes, 0, n * sizeof(uint64_t));
	F.tick++;
	for (i = 0; i < n; i++) {
		on[i] = x->f[i].active;
		k += on[i];
		rates[i] = x->f[i].cc->rate_bps;
		for (t = 0; t < FHIST; t++)
			tp[i] += F.hist[t * n + i];
		for (t = 0; t < 5; t++)
			recent += F.hist[((F.tick - 1 - t) % FHIST) * n + i];
	}
	jt = jain(tp, on, n);
	jr = jain(rates, on, n);
	if (F.csv)
		fprintf(F.csv, "%s,%u,%.1f,%.4f,%.4f,%.3f,%u\n", F.cc ? "on" : "off", F.n,
			(x->net.now - T0) / 1000.0, jt, jr, recent * 8.0 / (5 * FTICK_NS), k);
	if (x->net.now > T0 + 2000000 && x->net.now <= F.join_at) {
		F.jain_sum += jt;
		F.jain_n++;
		if (jt < F.jain_min)
			F.jain_min = jt;
	}
	if (x->net.now > F.join_at && x->net.now < F.leave_at && !F.join_conv &&
	    (F.cc ? jr : jt) >= 0.95)
		F.join_conv = x->net.now - F.join_at;
	if (x->net.now > F.leave_at && !F.leave_conv &&
	    recent * 8.0 / (5 * FTICK_NS) >= 0.9 * LINE_BPS / 1e9)
		F.leave_conv = x->net.now - F.leave_at;
	if (x->net.now == F.join_at) {
		x->f[n - 1].active = true;
		next_msg(x, n - 1);
	}
	if (x->net.now == F.leave_at)
		x->f[0].active = false;
	push(x, T_TICK, 0, x->net.now + FTICK_NS, 0);
	free(tp);
	free(rates);
	free(on);
}

/* @n long sessions: the last joins at 6 ms, the first leaves at 9 ms. */
static int fairness(bool cc, unsigned n, double idle, FILE *csv)
{
	struct exp x;
	unsigned i;

	if (exp_init(&x, n, cc, 0))
		return 2;
	x.win_bytes = calloc(n, sizeof(uint64_t));
	memset(&F, 0, sizeof(F));
	F.hist = calloc((size_t)FHIST * n, sizeof(uint64_t));
	F.jain_min = 1;
	F.join_at = T0 + 6000000;
	F.leave_at = T0 + 9000000;
	F.csv = csv;
	F.cc = cc;
	F.n = n;
	for (i = 0; i < n; i++) {
		x.f[i].msg = UINT64_MAX / 4;
		x.f[i].active = i + 1 < n;
		if (x.f[i].active)
			next_msg(&x, i);
	}
	push(&x, T_TICK, 0, T0 + FTICK_NS, 0);
	exp_loop(&x, T0 + 12000000, fair_tick);
	printf("%-3s %3u sessions  Jain (1 ms throughput) mean %.3f min %.3f over 2-6 ms  "
	       "join: fair (%s >= 0.95) after %s%.0f RTTs  leave: port >= 90%% after %s%.0f "
	       "RTTs  (RTT %.1f us)\n",
	       cc ? "on" : "off", n, F.jain_n ? F.jain_sum / F.jain_n : 0, F.jain_min,
	       cc ? "rates" : "throughput", F.join_conv ? "" : "> ",
	       (F.join_conv ? F.join_conv : F.leave_at - F.join_at) / 1000.0 / idle,
	       F.leave_conv ? "" : "> ", (F.leave_conv ? F.leave_conv : 3000000) / 1000.0 / idle,
	       idle);
	free(F.hist);
	exp_fini(&x);
	return 0;
}

/*
 * session: one client session carries a 64 MiB message (bulk 4 KiB
 * packets) and 32 B RPCs one at a time, sent before the bulk's next packet
 * and through the same pacer; the server's port runs at 25 Gb/s, a quarter
 * of the client's, so the bulk alone fills the port's buffer without
 * congestion control. 20 ms, measured after 5 ms. With @bulk false: the
 * RPCs alone (their idle round trip).
 */
static int session(bool cc, bool bulk, double idle, FILE *csv, double *p50_out)
{
	const uint64_t warm = 5000000, run = 20000000;
	struct exp x;
	double gput, rpc50, rpc99;
	uint64_t drops, retx;

	if (exp_init(&x, 2, cc, 0))
		return 2;
	x.fab.down[x.server].ps_per_byte = 320; /* 25 Gb/s */
	x.f[0].host = x.f[1].host = 0;
	x.f[0].msg = 64ull << 20;
	x.f[0].active = bulk;
	x.f[1].victim = x.f[1].active = true;
	x.f[1].msg = VICTIM_LEN;
	x.f[1].cc = &x.f[0].own; /* one session: one controller, one pacer */
	x.f[0].first = 1;
	x.f[1].then = 0;
	if (bulk)
		next_msg(&x, 0);
	next_msg(&x, 1);
	exp_loop(&x, T0 + warm, no_tick);
	start_measure(&x);
	x.f[0].delivered = 0;
	exp_loop(&x, T0 + run, no_tick);
	gput = (double)x.f[0].delivered * 8 / ((run - warm) / 1e9);
	rpc50 = lat_pct(&x.vic_lat, 0.5);
	rpc99 = lat_pct(&x.vic_lat, 0.99);
	drops = total_drops(&x);
	retx = total_retx(&x);
	if (p50_out)
		*p50_out = rpc50;
	if (bulk) {
		printf("%-3s 64 MiB + 32 B RPCs on one session  bulk %6.2f Gb/s (%5.1f%% of 25)  "
		       "RPC p50 %7.1f us  p99 %7.1f us (%.1fx / %.1fx idle %.1f us)  queue p99 %5.0f KB  "
		       "drops %" PRIu64 "  retx %" PRIu64 " (steady %" PRIu64 ")\n",
		       cc ? "on" : "off", gput / 1e9, gput / 25e7, rpc50, rpc99, rpc50 / idle,
		       rpc99 / idle, idle, sim_fab_qpct(&x.fab.down[x.server], 0.99) / 1000.0,
		       drops, retx, retx - x.retx_at_measure);
		if (cc && (rpc99 > 5 * idle || retx != x.retx_at_measure)) {
			printf("    GOAL MISSED: RPC p99 <= 5x idle, no retransmission in steady "
			       "state\n");
			missed++;
		}
		if (csv)
			fprintf(csv,
				"%s,1,%llu,%.3f,%.2f,0,0,%" PRIu64 ",%" PRIu64 ",0,%" PRIu64
				",%" PRIu64 ",%.2f,%.2f,%.2f\n",
				cc ? "on" : "off", 64ull << 20, gput / 1e9, gput / 25e7,
				sim_fab_qpct(&x.fab.down[x.server], 0.99), drops, retx,
				retx - x.retx_at_measure, rpc50, rpc99, idle);
	}
	exp_fini(&x);
	return 0;
}

int sim_exp_parse(const char *name, int *exp)
{
	if (!strcmp(name, "incast"))
		*exp = X_INCAST;
	else if (!strcmp(name, "fairness"))
		*exp = X_FAIRNESS;
	else if (!strcmp(name, "victim"))
		*exp = X_VICTIM;
	else if (!strcmp(name, "session"))
		*exp = X_SESSION;
	else
		return -1;
	return 0;
}

int sim_exp_run(int exp, const char *cc, const char *csv_path)
{
	static const uint64_t sizes[] = {64 * 1024, 1024 * 1024};
	static const unsigned ns[] = {10, 25, 50, 100};
	FILE *csv = NULL;
	double idle = idle_rtt();

	if (exp == X_SESSION && session(true, false, 1, NULL, &idle))
		return 2;
	int k, lo = strcmp(cc, "on") ? 0 : 1, hi = strcmp(cc, "off") ? 1 : 0, ret = 0;
	unsigned s;

	if (csv_path && !(csv = fopen(csv_path, "w"))) {
		perror("urpc-sim: --csv");
		return 2;
	}
	printf("# %s: 100 Gb/s ports, 1 us links, 1 MB buffer at the server's port, Swift "
	       "target %u us; idle RTT %.1f us\n",
	       exp == X_FAIRNESS  ? "fairness"
	       : exp == X_VICTIM  ? "victim"
	       : exp == X_SESSION ? "session (server port 25 Gb/s)"
				  : "incast",
	       TARGET_NS / 1000, idle);
	if (csv && exp != X_FAIRNESS)
		fprintf(csv, "cc,clients,msg_bytes,goodput_gbps,goodput_pct,p50_us,"
			     "p99_us,queue_p99_bytes,drops,drops_steady,retx,retx_steady,"
			     "victim_p50_us,victim_p99_us,idle_rtt_us\n");
	else if (csv)
		fprintf(csv, "cc,sessions,t_us,jain_tput_1ms,jain_rates,gbps_100us,active\n");
	for (k = lo; k <= hi && !ret; k++) {
		if (exp == X_SESSION) {
			ret = session(k, true, idle, csv, NULL);
			continue;
		}
		if (exp == X_FAIRNESS) {
			for (s = 0; s < sizeof(ns) / sizeof(ns[0]) && !ret; s++)
				ret = fairness(k, ns[s], idle, csv);
			continue;
		}
		for (s = 0; s < 2 && !ret; s++)
			ret = incast(k, 100, sizes[s], exp == X_VICTIM, idle, csv);
	}
	if (csv)
		fclose(csv);
	return ret ? ret : missed ? 1 : 0;
}
