/* SPDX-License-Identifier: MIT */
/*
 * The congestion experiments themselves (issue 32, docs/CC.md): incast and
 * victim, fairness, session, their tables, CSV and goals; urpc-sim's
 * --experiment. Runs sim_exp.c's model; calls it, sim_fabric.c and libc.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_exp.h"

/*
 * incast / victim: @n clients send @msg-byte messages back to back for 20
 * ms, beside (when @victim) the victim's 32 B RPCs, one at a time: one
 * session, or SIM_VICTIMS of them (light senders, which the server's
 * fair share counts as clients); measured after 5 ms.
 */
static int incast(bool cc, unsigned n, uint64_t msg, bool victim, double idle, FILE *csv)
{
	const uint64_t warm = 5000000, run = 20000000;
	const char *nv_env = getenv("SIM_VICTIMS");
	unsigned nv = nv_env ? (unsigned)strtoul(nv_env, NULL, 0) : 1;
	struct exp x;
	unsigned i, nin;
	double gput, qp99, port;
	uint64_t drops_all, drops_steady, retx_all, retx_steady;

	if (nv < 1 || nv > 1000) {
		fprintf(stderr, "urpc-sim: SIM_VICTIMS: %s out of range (1 to 1000)\n", nv_env);
		return 2;
	}
	nin = victim ? n + nv : n;
	if (exp_init(&x, nin, cc, 0))
		return 2;
	for (i = 0; i < nin; i++) {
		x.f[i].active = true;
		x.f[i].msg = msg;
	}
	for (i = n; i < nin; i++) {
		x.f[i].victim = true;
		x.f[i].msg = VICTIM_LEN;
	}
	for (i = 0; i < nin; i++)
		exp_next_msg(&x, i);
	exp_loop(&x, T0 + warm, exp_no_tick);
	exp_start_measure(&x);
	for (i = 0; i < nin; i++)
		x.f[i].delivered = 0;
	exp_loop(&x, T0 + run, exp_no_tick);
	for (gput = 0, i = 0; i < n; i++)
		gput += (double)x.f[i].delivered * 8;
	gput /= (run - warm) / 1e9;
	port = (double)LINE_BPS;
	qp99 = (double)sim_fab_qpct(&x.fab.down[x.server], 0.99);
	drops_all = exp_drops(&x);
	drops_steady = drops_all - x.drops_at_measure;
	retx_all = exp_retx(&x);
	retx_steady = retx_all - x.retx_at_measure;
	printf("%-3s %3u x %7" PRIu64 " B  goodput %6.2f Gb/s (%5.1f%%)  msg p50 %8.1f us  p99 "
	       "%8.1f us  queue p99 %7.0f KB (max %5.0f KB)  drops %6" PRIu64 " (steady %" PRIu64
	       ")  retx %6" PRIu64 " (steady %" PRIu64 ")",
	       cc ? "on" : "off", n, msg, gput / 1e9, 100 * gput / port,
	       exp_lat_pct(&x.msg_lat, 0.5), exp_lat_pct(&x.msg_lat, 0.99), qp99 / 1000,
	       x.fab.down[x.server].qmax / 1000.0, drops_all, drops_steady, retx_all, retx_steady);
	if (victim)
		printf("  victim p50 %.1f us p99 %.1f us (%.1fx / %.1fx idle %.1f us)",
		       exp_lat_pct(&x.vic_lat, 0.5), exp_lat_pct(&x.vic_lat, 0.99),
		       exp_lat_pct(&x.vic_lat, 0.5) / idle, exp_lat_pct(&x.vic_lat, 0.99) / idle,
		       idle);
	printf("\n");
	/* the goals with congestion control (docs/CC.md) */
	if (cc && (gput < 0.9 * port || qp99 > 2.0 * TARGET_NS * port / 8e9 || drops_steady ||
		   (victim && exp_lat_pct(&x.vic_lat, 0.99) > 3 * idle))) {
		printf("    GOAL MISSED: goodput >= 90%%, queue p99 <= %.0f KB, 0 drops in steady "
		       "state%s\n",
		       2.0 * TARGET_NS * port / 8e12, victim ? ", victim p99 <= 3x idle RTT" : "");
		sim_exp_missed++;
	}
	if (csv)
		fprintf(csv,
			"%s,%u,%" PRIu64 ",%.3f,%.2f,%.2f,%.2f,%.0f,%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64 ",%.2f,%.2f,%.2f\n",
			cc ? "on" : "off", n, msg, gput / 1e9, 100 * gput / port,
			exp_lat_pct(&x.msg_lat, 0.5), exp_lat_pct(&x.msg_lat, 0.99), qp99,
			drops_all, drops_steady, retx_all, retx_steady,
			victim ? exp_lat_pct(&x.vic_lat, 0.5) : 0.0,
			victim ? exp_lat_pct(&x.vic_lat, 0.99) : 0.0, idle);
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
	double jain_sum, jain_min, jain5_sum, rtt_loaded;
	unsigned jain_n, jain5_n, tick;
	uint64_t join_at, leave_at, end_at;
	/*
	 * After the join / the leave: the first tick the goal held, the start
	 * of the run of ticks it has held since (0: it does not hold now), and
	 * the start of the first run that lasted @span (0: none did).
	 */
	uint64_t join_touch, join_from, join_conv, leave_touch, leave_from, leave_conv, span;
	/* the join again, on the throughput over the last 100 us (5 ticks), not the rates */
	uint64_t tj_touch, tj_from, tj_conv;
	uint64_t *hist; /* [FHIST][flows]: bytes delivered per tick */
	FILE *csv;
	bool cc;
	unsigned n;
};

static struct fair F;

/* A goal that holds at tick @now or not: its first tick, its current run, its first run of F.span. */
static void held(bool ok, uint64_t now, uint64_t *touch, uint64_t *from, uint64_t *conv)
{
	if (!ok) {
		*from = 0;
		return;
	}
	if (!*touch)
		*touch = now;
	if (!*from)
		*from = now;
	if (!*conv && now - *from >= F.span)
		*conv = *from;
}

/*
 * Every FTICK_NS: Jain's index of the active sessions' throughput over the
 * last 1 ms and of their controllers' rates; after the join, the time from
 * which the rates (with CC; the throughput without) are fair (>= 0.95) and
 * stay fair for 50 idle round trips (the goal's own span); after the
 * leave, the time from which the port carries >= 90% (over 100 us) for as
 * long. (These were the first tick that touched the goal, which a passing
 * swing satisfies; both are printed.)
 */
static void fair_tick(struct exp *x, uint64_t c)
{
	unsigned n = x->nflows, i, t, k = 0;
	uint64_t *tp = calloc(n, sizeof(uint64_t)), *rates = calloc(n, sizeof(uint64_t)),
		 *tp5 = calloc(n, sizeof(uint64_t)), recent = 0;
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
			tp5[i] += F.hist[((F.tick - 1 - t) % FHIST) * n + i];
		recent += tp5[i];
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
	if (x->net.now > F.join_at - 1000000 && x->net.now <= F.join_at) {
		F.jain5_sum += jt;
		F.jain5_n++;
	}
	if (x->net.now > F.join_at && x->net.now < F.leave_at)
		held((F.cc ? jr : jt) >= 0.95, x->net.now, &F.join_touch, &F.join_from,
		     &F.join_conv);
	/* from 100 us after the join: the joiner's 5 ticks are all its own */
	if (x->net.now >= F.join_at + 5 * FTICK_NS && x->net.now < F.leave_at)
		held(jain(tp5, on, n) >= 0.95, x->net.now, &F.tj_touch, &F.tj_from, &F.tj_conv);
	if (x->net.now > F.leave_at)
		held(recent * 8.0 / (5 * FTICK_NS) >= 0.9 * LINE_BPS / 1e9, x->net.now,
		     &F.leave_touch, &F.leave_from, &F.leave_conv);
	if (x->net.now == F.join_at) {
		/* the sessions' own round trip under load, the unit their controllers see */
		double sum = 0;
		unsigned m = 0;

		for (i = 0; i < n; i++)
			if (x->f[i].active && x->f[i].cc->srtt_ns) {
				sum += x->f[i].cc->srtt_ns;
				m++;
			}
		F.rtt_loaded = m ? sum / m / 1000.0 : 0;
		x->f[n - 1].active = true;
		exp_next_msg(x, n - 1);
	}
	if (x->net.now == F.leave_at)
		x->f[0].active = false;
	exp_push(x, T_TICK, 0, x->net.now + FTICK_NS, 0);
	free(tp);
	free(tp5);
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
	F.end_at = T0 + 12000000;
	/* 50 idle round trips, whole ticks */
	F.span = ((uint64_t)(50 * idle * 1000) + FTICK_NS - 1) / FTICK_NS * FTICK_NS;
	F.csv = csv;
	F.cc = cc;
	F.n = n;
	for (i = 0; i < n; i++) {
		x.f[i].msg = UINT64_MAX / 4;
		x.f[i].active = i + 1 < n;
		if (x.f[i].active)
			exp_next_msg(&x, i);
	}
	exp_push(&x, T_TICK, 0, T0 + FTICK_NS, 0);
	exp_loop(&x, F.end_at, fair_tick);
	{
		double jmean = F.jain_n ? F.jain_sum / F.jain_n : 0;
		uint64_t jw = F.leave_at - F.join_at, lw = F.end_at - F.leave_at;
		uint64_t jc = F.join_conv ? F.join_conv - F.join_at : 0;
		uint64_t tc = F.tj_conv ? F.tj_conv - F.join_at : 0;
		uint64_t lc = F.leave_conv ? F.leave_conv - F.leave_at : 0;
		char jt[40], lt[40], lr[40];

		snprintf(jt, sizeof(jt), F.join_touch ? "%.0f" : "never",
			 (F.join_touch - F.join_at) / 1000.0 / idle);
		snprintf(lr, sizeof(lr), F.rtt_loaded > 0 ? "%.1f us" : "-", F.rtt_loaded);
		snprintf(lt, sizeof(lt), F.leave_touch ? "%.0f" : "never",
			 (F.leave_touch - F.leave_at) / 1000.0 / idle);
		printf("%-3s %3u sessions  Jain (1 ms throughput) mean %.3f min %.3f over 2-6 ms "
		       "(%.3f over 5-6 ms)  join: %s fair (>= 0.95) and stays for 50 RTTs after %s%.0f RTTs "
		       "(first %s), 100 us throughput after %s%.0f  leave: port >= 90%% and stays for 50 "
		       "RTTs after %s%.0f RTTs (first %s)  (RTT idle %.1f us, loaded %s)\n",
		       cc ? "on" : "off", n, jmean, F.jain_min,
		       F.jain5_n ? F.jain5_sum / F.jain5_n : 0, cc ? "rates" : "throughput",
		       jc ? "" : "> ", (jc ? jc : jw) / 1000.0 / idle, jt, tc ? "" : "> ",
		       (tc ? tc : jw) / 1000.0 / idle, lc ? "" : "> ",
		       (lc ? lc : lw) / 1000.0 / idle, lt, idle, lr);
		/* the goals with congestion control (docs/CC.md) */
		if (cc && (jmean < 0.95 || !jc || jc > 50 * idle * 1000 || !lc ||
			   lc > 50 * idle * 1000)) {
			printf("    GOAL MISSED: Jain >= 0.95, fair again and port >= 90%% again "
			       "within 50 idle RTTs\n");
			sim_exp_missed++;
		}
	}
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
	exp_share_init(&x, 25000000000ull);
	x.f[0].host = x.f[1].host = 0;
	x.f[0].msg = 64ull << 20;
	x.f[0].active = bulk;
	x.f[1].victim = x.f[1].active = true;
	x.f[1].msg = VICTIM_LEN;
	x.f[1].cc = &x.f[0].own;	/* one session: one controller, one pacer */
	x.f[1].peer = &x.f[0].own_peer; /* ... one sender to the server */
	x.f[0].first = 1;
	x.f[1].then = 0;
	if (bulk)
		exp_next_msg(&x, 0);
	exp_next_msg(&x, 1);
	exp_loop(&x, T0 + warm, exp_no_tick);
	exp_start_measure(&x);
	x.f[0].delivered = 0;
	exp_loop(&x, T0 + run, exp_no_tick);
	gput = (double)x.f[0].delivered * 8 / ((run - warm) / 1e9);
	rpc50 = exp_lat_pct(&x.vic_lat, 0.5);
	rpc99 = exp_lat_pct(&x.vic_lat, 0.99);
	drops = exp_drops(&x);
	retx = exp_retx(&x);
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
			sim_exp_missed++;
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
	double idle = exp_idle_rtt();

	if (!(idle > 0))
		return 2; /* the model could not be set up (logged) */
	if (exp == X_SESSION && session(true, false, 1, NULL, &idle))
		return 2;
	int k, lo = strcmp(cc, "on") ? 0 : 1, hi = strcmp(cc, "off") ? 1 : 0, ret = 0;
	unsigned s;

	if (csv_path && !(csv = fopen(csv_path, "w"))) {
		perror("urpc-sim: --csv");
		return 2;
	}
	printf("# %s: 100 Gb/s ports, 1 us links, 1 MB buffer at the server's port, %u B "
	       "packets, Swift target %u us; idle RTT %.1f us\n",
	       exp == X_FAIRNESS  ? "fairness"
	       : exp == X_VICTIM  ? "victim"
	       : exp == X_SESSION ? "session (server port 25 Gb/s)"
				  : "incast",
	       exp_mtu, TARGET_NS / 1000, idle);
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
	return ret ? ret : sim_exp_missed ? 1 : 0;
}
