/* SPDX-License-Identifier: MIT */
/*
 * urpc-latency: round-trip latency of small RPCs (p50, p99, p99.9) against
 * message size, next to a baseline measured in the same run: a raw UDP
 * ping-pong, busy-polled, on udp; perftest's ib_send_lat (UD and RC) on
 * verbs. See usage() for the method. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"

#define PROG "urpc-latency"
#define MAX_SIZES 16
#define MIN_SIZE 8 /* the request carries its number */
#define MAX_SIZE 4096
#define DEFAULT_SIZES "32,256,1024"
#define WARMUP 200
#define CDF_POINTS 200

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, ..., --csv */
	unsigned long sizes[MAX_SIZES];
	unsigned nsizes;
	unsigned long pairs;
	const char *cdf;
};

/* Latency samples of one measurement, in nanoseconds. */
struct samples {
	uint64_t *v;
	size_t n;
	size_t cap;
};

struct stat3 {
	double p50, p99, p999; /* microseconds */
	size_t n;
};

/* One size's figures over all pairs. */
struct size_run {
	struct samples all, ball; /* urpc's and the baseline's samples, pooled */
	double ratio[BENCH_MAX_PAIRS];
	unsigned npairs;
	struct bench_sys cli, srv, bcli, bsrv; /* system calls of each side */
	uint64_t rpcs, srv_rpcs, brpcs;	       /* ... and the round trips they made */
};

struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	int session;
	struct bench_sm sm; /* its sm_handler's counts */
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	bool busy;
	int status;
	uint64_t seq;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-latency - round-trip latency of small urpc RPCs next to a raw baseline\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-latency [--transport loop|udp|verbs] [--sizes LIST] [--duration SEC]\n"
		"                 [--pairs N] [--device DEV] [--server-device DEV]\n"
		"                 [--perftest-server IP] [--no-baseline] [--csv FILE]\n"
		"                 [--cdf FILE]\n"
		"    urpc-latency --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this process, connected by one\n"
		"    session over the chosen transport. For each size the client sends one\n"
		"    request of SIZE bytes at a time (window 1), the server echoes it, and the\n"
		"    time from urpc_req_enqueue() to the continuation is recorded for every\n"
		"    RPC during SEC seconds, after %d warm-up RPCs. Both sides busy-poll\n"
		"    (idle_block_us 0): on udp and verbs the server Rpc runs its event loop\n"
		"    on a second thread, on loop both Rpcs share the main thread.\n"
		"\n"
		"    The baseline is measured in the same run, with the same size, while the\n"
		"    urpc server thread is paused (it would busy-poll a core away from the\n"
		"    baseline). On a busy machine one measurement of each says little: for\n"
		"    each size urpc and the baseline are measured N times in turn (urpc,\n"
		"    baseline, urpc, baseline, ...), and the ratio reported is the median of\n"
		"    the N per-pair ratios of p50, with their spread:\n"
		"      udp    a raw UDP ping-pong over 127.0.0.1 between two threads of\n"
		"             this process, both busy-polling non-blocking sockets; the\n"
		"             round trip of each exchange is recorded like the RPC's.\n"
		"      verbs  perftest's ib_send_lat -c UD and -c RC, server on the server\n"
		"             device, client on the client device. perftest reports half\n"
		"             the round trip: the table shows twice its t_typical, 99%% and\n"
		"             99.9%% figures, to compare with the RPC's full round trip.\n"
		"             The GID index comes from URPC_RXE_GID_INDEX when set.\n"
		"      loop   none (in-process rings have no raw counterpart).\n"
		"    On verbs perftest runs once per size, after the N urpc measurements.\n"
		"\n"
		"    Each side's system calls are counted over each measurement (warm-up\n"
		"    included): urpc's from urpc_rpc_get_stats() (tp_sys_tx, tp_sys_rx,\n"
		"    tp_sys_rx_empty, idle_sleeps), the raw ping-pong's by its two threads.\n"
		"    Busy-polling sides make one receive call per idle pass, so the empty\n"
		"    receives grow with the time spent waiting for the other side.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default: the library's, URPC_TRANSPORT, else\n"
		"        verbs on an active RDMA port, else udp).\n"
		"    -s, --sizes LIST\n"
		"        Comma-separated request and response sizes in bytes, %d to %d and at\n"
		"        most urpc_rpc_max_msg_size() (default " DEFAULT_SIZES ").\n"
		"    -d, --duration SEC\n"
		"        Seconds measured per size and per measurement, 0.01 to 3600\n"
		"        (default 2). A size takes 2 x N x SEC seconds with the baseline.\n"
		"    -p, --pairs N\n"
		"        Measurements of urpc and of the baseline per size, taken in turn,\n"
		"        1 to %d (default %d).\n"
		"    --device DEV\n"
		"        verbs: the client's RDMA device (\"rxe1\"); default URPC_DEVICE, else\n"
		"        the first active port. Also perftest's client device.\n"
		"    --server-device DEV\n"
		"        verbs: the server's RDMA device; default as --device.\n"
		"    --perftest-server IP\n"
		"        verbs: the address perftest's client connects to (default\n"
		"        URPC_RXE_SERVER_IP, else 127.0.0.1).\n"
		"    --no-baseline\n"
		"        Measure urpc alone.\n"
		"    --csv FILE\n"
		"        Also write one row per size and baseline to FILE (overwritten).\n"
		"    --cdf FILE\n"
		"        Also write each measured distribution to FILE (overwritten), %d\n"
		"        quantiles and the tail per series. Columns: transport, size, series\n"
		"        (urpc or the baseline), latency_us, fraction. plot.sh draws it as a\n"
		"        CDF. perftest prints percentiles only: verbs baselines have no CDF.\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout, one row per size\n"
		"    and baseline: size, RPCs measured, urpc p50/p99/p99.9 in microseconds\n"
		"    (all pairs' samples pooled), the baseline's name and p50/p99/p99.9\n"
		"    (pooled too), the median of the per-pair ratios urpc p50 / baseline\n"
		"    p50, their interquartile range and, in parentheses, their range over\n"
		"    the N pairs (one pair the scheduler hit makes the range wide, the\n"
		"    quartiles move less). A second table gives\n"
		"    the system calls per round trip of each side, as tx/rx/empty: calls\n"
		"    that sent, calls that received datagrams, receive calls that found\n"
		"    none (\" +P ppoll\" when a side slept). Progress goes to stderr.\n"
		"    CSV columns: transport, size, rpcs, urpc_p50_us, urpc_p99_us,\n"
		"    urpc_p999_us, baseline, base_p50_us, base_p99_us, base_p999_us,\n"
		"    ratio_p50 (the median), pairs, ratio_min, ratio_max, then per round\n"
		"    trip tx, rx, empty and sleeps for cli_, srv_, base_cli_ and base_srv_,\n"
		"    then ratio_q1, ratio_q3 (the quartiles).\n"
		"    plot.sh draws it.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step, an RPC or a baseline fails; 2 on bad\n"
		"    usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-latency --transport udp --sizes 32,1024 --duration 1\n"
		"    urpc-latency --sizes 32 --duration 0.5 --pairs 11\n"
		"    urpc-latency --transport verbs --device rxe1 --server-device rxe0\n",
		WARMUP, MIN_SIZE, MAX_SIZE, BENCH_MAX_PAIRS, BENCH_DEFAULT_PAIRS, CDF_POINTS);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_LIST("sizes", 's', o->sizes, MIN_SIZE, MAX_SIZE, MAX_SIZES, &o->nsizes)},
		{URPC_APP_ULONG("pairs", 'p', &o->pairs, 1, BENCH_MAX_PAIRS)},
		{URPC_APP_STR("cdf", 0, &o->cdf)},
	};

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->pairs = BENCH_DEFAULT_PAIRS;
	o->nsizes = (unsigned)urpc_app_parse_list(PROG, DEFAULT_SIZES, "--sizes", MIN_SIZE,
						  MAX_SIZE, o->sizes, MAX_SIZES);
	return bench_parse_args(PROG, argc, argv, &o->cli, BENCH_CLI_ALL, own, URPC_APP_NOPTS(own),
				usage);
}

/* ---- samples ------------------------------------------------------------------ */

static int samples_add(struct samples *s, uint64_t ns)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1u << 16;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = ns;
	return 0;
}

/* Append @src's samples to @dst; 0 or -ENOMEM. */
static int samples_append(struct samples *dst, const struct samples *src)
{
	size_t i;

	for (i = 0; i < src->n; i++)
		if (samples_add(dst, src->v[i]))
			return -ENOMEM;
	return 0;
}

static struct stat3 samples_stat(struct samples *s)
{
	struct stat3 r;

	qsort(s->v, s->n, sizeof(*s->v), bench_cmp_u64);
	r.n = s->n;
	r.p50 = (double)bench_quantile(s->v, s->n, 0.5) / 1e3;
	r.p99 = (double)bench_quantile(s->v, s->n, 0.99) / 1e3;
	r.p999 = (double)bench_quantile(s->v, s->n, 0.999) / 1e3;
	return r;
}

/* CDF_POINTS evenly spaced quantiles of the sorted samples, then 99%, 99.9% and the maximum. */
static void write_cdf(FILE *f, const struct opts *o, size_t size, const char *series,
		      const struct samples *s)
{
	static const double tail[] = {0.99, 0.999, 1.0};
	unsigned k;

	if (!f || !s->n)
		return;
	for (k = 0; k < CDF_POINTS + 3; k++) {
		double q = k < CDF_POINTS ? (double)k / CDF_POINTS : tail[k - CDF_POINTS];

		fprintf(f, "%s,%zu,%s,%.3f,%.4f\n", urpc_transport_str(o->cli.transport), size,
			series, (double)bench_quantile(s->v, s->n, q) / 1e3, q);
	}
	fflush(f);
}

/* ---- urpc ------------------------------------------------------------------------ */

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct client *c = tag;

	c->busy = false;
	if (!status &&
	    (resp->data_size != c->req.data_size || memcmp(resp->buf, c->req.buf, sizeof(c->seq))))
		status = -EBADMSG;
	c->status = status;
}

static bool is_busy(const void *arg)
{
	return ((const struct client *)arg)->busy;
}

/* One RPC of the current size, waited for; its round trip in ns, or -errno. */
static int64_t one_rpc(struct client *c)
{
	uint64_t t0;
	int ret;

	c->seq++;
	memcpy(c->req.buf, &c->seq, sizeof(c->seq));
	c->busy = true;
	t0 = bench_now_ns();
	ret = urpc_req_enqueue(c->rpc, c->session, BENCH_REQ_TYPE, &c->req, &c->resp, cont, c,
			       (uint32_t)(BENCH_SETUP_S * 1000));
	if (ret) {
		c->busy = false;
		fprintf(stderr, PROG ": enqueue: %s\n", urpc_strerror(ret));
		return ret;
	}
	while (c->busy) {
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
	}
	if (c->status) {
		fprintf(stderr, PROG ": RPC of %zu B failed: %s\n", c->req.data_size,
			urpc_strerror(c->status));
		return c->status;
	}
	return (int64_t)(bench_now_ns() - t0);
}

/* Warm up, then measure for the duration into @s; the client's calls added to @r. */
static int measure_urpc(struct client *c, size_t size, struct samples *s, struct size_run *r)
{
	struct urpc_rpc_stats st0, st1;
	double t_end;
	int64_t ns;
	int i, ret;

	ret = urpc_msgbuf_resize(&c->req, size);
	if (ret)
		return ret;
	memset(c->req.buf, 0xa5, size);
	urpc_rpc_get_stats(c->rpc, &st0);
	for (i = 0; i < WARMUP; i++) {
		ns = one_rpc(c);
		if (ns < 0)
			return (int)ns;
	}
	s->n = 0;
	t_end = bench_now_s() + c->o->cli.duration;
	do {
		ns = one_rpc(c);
		if (ns < 0)
			return (int)ns;
		if (samples_add(s, (uint64_t)ns))
			return -ENOMEM;
	} while ((s->n & 63) || bench_now_s() < t_end);
	urpc_rpc_get_stats(c->rpc, &st1);
	bench_sys_add(&r->cli, &st0, &st1);
	r->rpcs += WARMUP + s->n;
	return 0;
}

/* ---- the raw UDP ping-pong ------------------------------------------------------- */

/* The pair's echo thread: busy-poll, send every datagram back where it came from. */
static void *echo_main(void *arg)
{
	struct bench_udp_pair *p = arg;
	uint8_t buf[MAX_SIZE];
	struct sockaddr_in from;
	socklen_t flen;
	ssize_t n;

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		flen = sizeof(from);
		n = recvfrom(p->srv_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from,
			     &flen);
		if (n < 0) {
			p->sys.empty++;
			continue;
		}
		p->sys.rx++;
		sendto(p->srv_fd, buf, (size_t)n, 0, (struct sockaddr *)&from, flen);
		p->sys.tx++;
	}
	return NULL;
}

/*
 * One exchange of @size bytes, its calls counted in @sys; the round trip
 * in ns, or -errno (reported).
 */
static int64_t one_ping(int fd, uint8_t *buf, size_t size, uint64_t seq, struct bench_sys *sys)
{
	double deadline = 0;
	uint64_t t0, got;
	ssize_t n;

	memcpy(buf, &seq, sizeof(seq));
	t0 = bench_now_ns();
	sys->tx++;
	if (send(fd, buf, size, 0) != (ssize_t)size) {
		fprintf(stderr, PROG ": raw UDP send: %s\n", strerror(errno));
		return -EIO;
	}
	for (;;) {
		n = recv(fd, buf, MAX_SIZE, MSG_DONTWAIT);
		if (n < 0)
			sys->empty++;
		else
			sys->rx++;
		if (n == (ssize_t)size) {
			memcpy(&got, buf, sizeof(got));
			if (got == seq)
				return (int64_t)(bench_now_ns() - t0);
			continue; /* a late answer to an earlier ping */
		}
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			fprintf(stderr, PROG ": raw UDP: bad answer\n");
			return -EIO;
		}
		if (!deadline)
			deadline = bench_now_s() + 1.0;
		else if (bench_now_s() > deadline)
			return 0; /* lost on loopback (rare): resent by the caller */
	}
}

/* The ping-pong for the duration into @s; both threads' calls added to @r. */
static int measure_udp(const struct opts *o, size_t size, struct samples *s, struct size_run *r)
{
	struct bench_udp_pair up;
	uint8_t buf[MAX_SIZE];
	uint64_t seq = 0;
	double t_end;
	int64_t ns;
	int ret, i;

	ret = bench_udp_pair_start(&up, echo_main);
	if (ret)
		return ret;
	memset(buf, 0xa5, sizeof(buf));
	s->n = 0;
	for (i = 0; i < WARMUP + 1 && ret >= 0; i++) {
		ns = one_ping(up.cli_fd, buf, size, ++seq, &r->bcli);
		if (ns < 0)
			ret = (int)ns;
	}
	t_end = bench_now_s() + o->cli.duration;
	while (!ret && ((s->n & 63) || bench_now_s() < t_end)) {
		ns = one_ping(up.cli_fd, buf, size, ++seq, &r->bcli);
		if (ns < 0)
			ret = (int)ns;
		else if (ns && samples_add(s, (uint64_t)ns))
			ret = -ENOMEM;
	}
	bench_udp_pair_stop(&up);
	r->bsrv.tx += up.sys.tx;
	r->bsrv.rx += up.sys.rx;
	r->bsrv.empty += up.sys.empty;
	r->brpcs += seq;
	return ret;
}

/* ---- output ---------------------------------------------------------------------- */

/* The CSV's columns after ratio_p50. */
#define CSV_EXTRA                                                                                  \
	"pairs,ratio_min,ratio_max,cli_tx,cli_rx,cli_empty,cli_sleeps,srv_tx,srv_rx,srv_empty,"    \
	"srv_sleeps,base_cli_tx,base_cli_rx,base_cli_empty,base_cli_sleeps,base_srv_tx,"           \
	"base_srv_rx,base_srv_empty,base_srv_sleeps,ratio_q1,ratio_q3"

/*
 * One row of the table (and of the CSV): urpc's pooled figures @u, the
 * baseline's @b (NULL: none) and the pairs' ratios in @r.
 */
static void print_row(const struct opts *o, FILE *csv, size_t size, const struct stat3 *u,
		      const char *base, const struct stat3 *b, struct size_run *r)
{
	struct bench_spread sp = bench_spread_of(r->ratio, b ? r->npairs : 0);

	printf("| %zu | %zu | %.2f | %.2f | %.2f | %s |", size, u->n, u->p50, u->p99, u->p999,
	       base);
	if (b)
		printf(" %.2f | %.2f | %.2f | %.2f | %.2f-%.2f (%.2f-%.2f) |\n", b->p50, b->p99,
		       b->p999, sp.med, sp.q1, sp.q3, sp.min, sp.max);
	else
		printf(" - | - | - | - | - |\n");
	fflush(stdout);
	if (csv) {
		fprintf(csv, "%s,%zu,%zu,%.3f,%.3f,%.3f,%s,%.3f,%.3f,%.3f,%.4f,%u,%.4f,%.4f,",
			urpc_transport_str(o->cli.transport), size, u->n, u->p50, u->p99, u->p999,
			base, b ? b->p50 : 0, b ? b->p99 : 0, b ? b->p999 : 0, sp.med, r->npairs,
			sp.min, sp.max);
		bench_sys_csv_sides(csv, &r->cli, r->rpcs, &r->srv, r->srv_rpcs, &r->bcli, &r->bsrv,
				    r->brpcs);
		fprintf(csv, ",%.4f,%.4f\n", sp.q1, sp.q3);
		fflush(csv);
	}
	if (b)
		fprintf(stderr,
			PROG ": %zu B: urpc p50 %.2f us, %s p50 %.2f us; ratio %.2f (IQR "
			     "%.2f-%.2f, min-max %.2f-%.2f, %u pairs)\n",
			size, u->p50, base, b->p50, sp.med, sp.q1, sp.q3, sp.min, sp.max,
			r->npairs);
}

/* ib_send_lat -c @conn for @size: twice its half round trips; 0 or -errno. */
static int perftest_lat(const struct opts *o, const char *conn, size_t size, unsigned port,
			struct stat3 *b)
{
	char args[64];
	double v[8];
	int n;

	snprintf(args, sizeof(args), "-c %s -n 10000 -F", conn);
	n = bench_perftest(PROG, "ib_send_lat", args,
			   o->cli.server_device ? o->cli.server_device : "rxe0",
			   o->cli.device ? o->cli.device : "rxe0", o->cli.perftest_ip, size, port,
			   BENCH_PERFTEST_LIMIT_S, v, 8);
	if (n < 8)
		return n < 0 ? n : -EIO;
	/* iterations, t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9% */
	b->n = (size_t)v[0];
	b->p50 = 2 * v[3];
	b->p99 = 2 * v[6];
	b->p999 = 2 * v[7];
	return 0;
}

/*
 * One pair for @size: urpc (its p50 in *@up50), then, with the server
 * paused, the raw ping-pong on udp (its p50 in *@bp50; 0 elsewhere). The
 * server's counters were taken when it paused last; its calls over the
 * urpc measurement are added to @r.
 */
static int one_pair(struct client *c, size_t size, struct size_run *r, struct samples *us,
		    struct samples *bs, double *up50, double *bp50)
{
	const struct opts *o = c->o;
	struct urpc_rpc_stats s0 = c->sv->st;
	int ret;

	*up50 = *bp50 = 0;
	ret = measure_urpc(c, size, us, r);
	bench_server_pause(c->sv, true);
	bench_sys_add(&r->srv, &s0, &c->sv->st);
	r->srv_rpcs += c->sv->st.reqs_handled - s0.reqs_handled;
	if (!ret && samples_append(&r->all, us))
		ret = -ENOMEM;
	if (!ret) {
		*up50 = samples_stat(us).p50;
		if (o->cli.baseline && o->cli.transport == URPC_TRANSPORT_UDP) {
			ret = measure_udp(o, size, bs, r);
			if (ret)
				fprintf(stderr, PROG ": raw UDP ping-pong: %s\n", strerror(-ret));
			else if (samples_append(&r->ball, bs))
				ret = -ENOMEM;
			else
				*bp50 = samples_stat(bs).p50;
		}
	}
	bench_server_pause(c->sv, false);
	return ret;
}

/* The system calls per round trip of @r's four sides: one row of the second table. */
static void print_sys_row(size_t size, const struct size_run *r, bool base)
{
	char cli[64], srv[64], bcli[64], bsrv[64];

	bench_sys_fmt(cli, sizeof(cli), &r->cli, r->rpcs);
	bench_sys_fmt(srv, sizeof(srv), &r->srv, r->srv_rpcs);
	bench_sys_fmt(bcli, sizeof(bcli), &r->bcli, base ? r->brpcs : 0);
	bench_sys_fmt(bsrv, sizeof(bsrv), &r->bsrv, base ? r->brpcs : 0);
	printf("| %zu | %s | %s | %s | %s |\n", size, cli, srv, bcli, bsrv);
}

static int run_sizes(struct client *c, FILE *csv, FILE *cdf)
{
	const struct opts *o = c->o;
	struct size_run runs[MAX_SIZES];
	struct samples us = {0}, bs = {0};
	struct stat3 u, b;
	unsigned i, k, nrun = 0;
	bool raw = o->cli.baseline && o->cli.transport == URPC_TRANSPORT_UDP;
	int ret = 0;

	memset(runs, 0, sizeof(runs));
	for (i = 0; i < o->nsizes && !ret; i++) {
		size_t size = o->sizes[i];
		struct size_run *r = &runs[nrun++];

		if (size > c->req.max_data_size) {
			fprintf(stderr, PROG ": size %zu is above this transport's limit %zu\n",
				size, c->req.max_data_size);
			ret = -EMSGSIZE;
			break;
		}
		bench_server_pause(c->sv, true); /* the server's counters before the first */
		bench_server_pause(c->sv, false);
		for (k = 0; k < o->pairs && !ret; k++) {
			double up50, bp50;

			fprintf(stderr, PROG ": %zu B: pair %u of %lu: urpc%s, %g s each\n", size,
				k + 1, o->pairs, raw ? " then the raw UDP ping-pong" : "",
				o->cli.duration);
			ret = one_pair(c, size, r, &us, &bs, &up50, &bp50);
			if (!ret && bp50 > 0)
				r->ratio[r->npairs++] = up50 / bp50;
		}
		if (ret)
			break;
		u = samples_stat(&r->all);
		write_cdf(cdf, o, size, "urpc", &r->all);
		if (!o->cli.baseline || o->cli.transport == URPC_TRANSPORT_LOOP ||
		    o->cli.transport == URPC_TRANSPORT_XDP) {
			print_row(o, csv, size, &u, "none", NULL, r);
		} else if (raw) {
			b = samples_stat(&r->ball);
			write_cdf(cdf, o, size, "raw UDP ping-pong", &r->ball);
			print_row(o, csv, size, &u, "raw UDP ping-pong", &b, r);
		} else {
			/* perftest's figures are for one run: the ratio has no spread. */
			bench_server_pause(c->sv, true);
			ret = perftest_lat(o, "UD", size, 18700 + 40 * i, &b);
			if (!ret) {
				r->ratio[0] = b.p50 > 0 ? u.p50 / b.p50 : 0;
				r->npairs = 1;
				print_row(o, csv, size, &u, "2x ib_send_lat UD", &b, r);
				ret = perftest_lat(o, "RC", size, 18720 + 40 * i, &b);
			}
			if (!ret) {
				r->ratio[0] = b.p50 > 0 ? u.p50 / b.p50 : 0;
				print_row(o, csv, size, &u, "2x ib_send_lat RC", &b, r);
			}
			bench_server_pause(c->sv, false);
		}
	}
	if (nrun && !ret) {
		printf("\nSystem calls per round trip, tx/rx/empty: calls that sent, that received "
		       "datagrams, receive calls that found none (busy polling)\n\n");
		printf("| size B | urpc client | urpc server | raw client | raw server |\n");
		printf("|---:|---|---|---|---|\n");
		for (k = 0; k < nrun; k++)
			print_sys_row(o->sizes[k], &runs[k], raw);
		fflush(stdout);
	}
	for (k = 0; k < nrun; k++) {
		free(runs[k].all.v);
		free(runs[k].ball.v);
	}
	free(us.v);
	free(bs.v);
	return ret;
}

int main(int argc, char **argv)
{
	struct bench_server sv;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct client c;
	FILE *csv = NULL, *cdf = NULL;
	const char *what;
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,size,rpcs,urpc_p50_us,urpc_p99_us,urpc_p999_us,baseline,"
			    "base_p50_us,base_p99_us,base_p999_us,ratio_p50," CSV_EXTRA "\n",
			    &csv))
		return 1;
	if (bench_file_open(PROG, "--cdf", o.cdf, "transport,size,series,latency_us,fraction\n",
			    &cdf))
		goto out_csv;
	memset(&sv, 0, sizeof(sv));
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.sv = &sv;
	if (bench_nexus_open(PROG, bench_echo, NULL, &nx))
		goto out_csv;

	/*
	 * Busy-poll on both sides. Neither side polls while a baseline runs
	 * (minutes under TCG), nor may a VM stall fail a session: keep the
	 * failure detector far off.
	 */
	bench_rpc_opts(&ro, o.cli.transport);
	ro.peer_timeout_ms = 3600000;
	sv.nx = nx;
	sv.ro = ro;
	sv.ro.device = o.cli.server_device;
	sv.threaded = o.cli.transport != URPC_TRANSPORT_LOOP;
	what = urpc_transport_str(o.cli.transport);
	if (bench_rpcs_create(PROG, &sv, &ro, o.cli.device, &c.sm, what, what, &c.rpc))
		goto out_nexus;
	ret = urpc_msgbuf_alloc(c.rpc, urpc_rpc_max_msg_size(c.rpc), &c.req);
	if (!ret) {
		ret = urpc_msgbuf_alloc(c.rpc, urpc_rpc_max_msg_size(c.rpc), &c.resp);
		if (ret)
			urpc_msgbuf_free(c.rpc, &c.req);
	}
	if (ret) {
		fprintf(stderr, PROG ": cannot allocate buffers: %s\n", urpc_strerror(ret));
		goto out_cli;
	}
	ret = bench_connect(PROG, c.rpc, &sv, &c.sm, &c.session, 1);
	if (ret) {
		fprintf(stderr, PROG ": cannot connect the client to the server: %s\n",
			urpc_strerror(ret));
		goto out_bufs;
	}

	printf("%s: transport %s, window 1, %lu pairs of %g s measurements per size (urpc, "
	       "then the baseline, in turn), both sides busy-polling; latencies are full "
	       "round trips in us\n\n",
	       PROG, what, o.pairs, o.cli.duration);
	printf("| size B | RPCs | urpc p50 | urpc p99 | urpc p99.9 | baseline | base p50 "
	       "| base p99 | base p99.9 | urpc/base p50 | IQR (min-max) |\n");
	printf("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
	fflush(stdout);
	if (!run_sizes(&c, csv, cdf))
		status = 0;
	if (!urpc_session_disconnect(c.rpc, c.session))
		bench_drain(PROG, c.rpc, &sv, &c.sm, 1, is_busy, &c);
out_bufs:
	if (!c.busy) {
		urpc_msgbuf_free(c.rpc, &c.req);
		urpc_msgbuf_free(c.rpc, &c.resp);
	}
out_cli:
	if (urpc_rpc_destroy(c.rpc)) {
		fprintf(stderr, PROG ": cannot destroy the client Rpc\n");
		status = 1;
	}
	if (bench_server_stop(PROG, &sv))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
out_csv:
	if (bench_file_close(PROG, "--cdf", o.cdf, cdf))
		status = 1;
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
	return status;
}
