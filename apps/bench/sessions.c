/* SPDX-License-Identifier: MIT */
/*
 * urpc-sessions: one server Rpc holding N client sessions, from client
 * Rpcs in worker processes. Connect time, resident bytes per server
 * session, the RPC rate with all N active against the first count's, and
 * the heartbeat packets per second; see usage() for the method. Uses only
 * <urpc/urpc.h>.
 */
#define _GNU_SOURCE /* malloc_trim */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"
#include "sessions.h"

#define PROG SESS_PROG
#define MAX_COUNTS 16
#define MAX_RUNS 64 /* counts x repeats */
#define MAX_PROCS 64
#define MAX_SESSIONS 1000000ul
#define PER_PROC_AUTO 25000ul /* --procs 0: one worker per this many sessions */
#define DEFAULT_COUNTS "1,1000,20000"
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, --server-device, --csv */
	unsigned long counts[MAX_COUNTS];
	unsigned ncounts;
	unsigned long repeat;
	unsigned long procs; /* 0: auto */
	unsigned long connect_batch;
	unsigned long window;  /* requests outstanding over all sessions */
	unsigned long ping_ms; /* 0: the library's default */
	bool busy_poll;	       /* idle_block_us 0 on every Rpc */
};

struct worker_proc {
	pid_t pid;
	int cmd_fd, rep_fd;
};

struct result {
	unsigned long sessions;
	unsigned procs;
	double connect_s;
	size_t rss_before, rss_idle, rss_after;
	double bytes_idle, bytes_active; /* server process, per session */
	unsigned long rpcs, active;
	double rate;
	uint64_t retransmits, resp_bufs;
	double hb_pps;
	double srv_us, cli_us; /* CPU microseconds per RPC: server process, clients (0: n/a) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-sessions - N sessions on one server Rpc: connect time, memory per\n"
		"    server session, RPC rate with all N active, heartbeat packets\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-sessions [--transport loop|udp|verbs] [--sessions LIST] [--repeat R]\n"
		"                  [--procs P] [--duration SEC] [--window W] [--connect-batch K]\n"
		"                  [--ping-ms MS] [--busy-poll] [--device DEV] [--server-device DEV]\n"
		"                  [--csv FILE]\n"
		"    urpc-sessions --help\n"
		"\n"
		"DESCRIPTION\n"
		"    For each N of LIST, R times over in turn (N1, N2, ..., N1, N2, ...):\n"
		"    creates a server Rpc in this process and connects N client sessions to\n"
		"    it from P worker processes, each with its own Nexus and one client Rpc\n"
		"    (N/P sessions each, at most K/P connecting at a time). Every Rpc has\n"
		"    the library's default options (urpc_rpc_opts_init()) but the transport,\n"
		"    the devices, --ping-ms and --busy-poll; so max_sessions is\n"
		"    URPC_RPC_DEFAULT_MAX_SESSIONS and idle Rpcs sleep. The connect time\n"
		"    runs from the first connect to the last worker's last CONNECTED event.\n"
		"\n"
		"    Then the workers send %d-byte requests, which the server echoes, round\n"
		"    robin over all their sessions with W outstanding in all (W/P each, at\n"
		"    most one per session; each answer sends the next request). After\n"
		"    %.1f s of warm-up, and once every session has had its turn (the\n"
		"    buffers a session's first request makes both sides take are in\n"
		"    place), each worker measures for SEC seconds and on until\n"
		"    every one of its sessions has completed an RPC (at most %.0f s more),\n"
		"    while all of them keep the traffic going until the last is done: the\n"
		"    rate is the sum of the workers' RPCs per second, and the active column\n"
		"    counts the sessions that completed an RPC in the span (N when all of\n"
		"    them are active). CPU per RPC is the processes' user and system time\n"
		"    (getrusage) over the RPCs of the measured spans: the workers' in\n"
		"    theirs, and this process's (the server Rpc and its Nexus) from the\n"
		"    last worker's start to the last one's end; on loop\n"
		"    the one thread's, both sides together, in the server column. Unlike\n"
		"    the rate it hardly depends on how much of the host the benchmark\n"
		"    gets, so the cpu/first ratio (the first count's CPU per RPC over\n"
		"    this one's) is what a host of our own would give as rate/first. The heartbeat column is the NX_PING and NX_PONG\n"
		"    packets the server's Nexus sent and received per second meanwhile\n"
		"    (urpc_nexus_get_stats()): one per peer process and interval each way,\n"
		"    whatever N. Finally the sessions are disconnected and every Rpc\n"
		"    destroyed.\n"
		"\n"
		"    Memory per server session is the growth of this process's resident\n"
		"    set (/proc/self/statm; freed heap memory is handed back with\n"
		"    malloc_trim() before each count) from just after the server Rpc is\n"
		"    created, divided by N: once all are connected (idle), and after the\n"
		"    traffic (active: with the response buffers the server's slots took\n"
		"    for their requests). The clients live in the workers and are not in\n"
		"    it. On loop, whose endpoints cannot leave a process, the client runs\n"
		"    in this process, on the server's thread, and the bytes are both\n"
		"    sides'.\n"
		"\n"
		"    With R > 1 the ratio of each N's rate to the first count's is taken\n"
		"    within each round (the two ran back to back) and the summary gives\n"
		"    the median ratio with its range, so a host that is busy for a while\n"
		"    weighs on both sides of a ratio. There is no baseline program: the\n"
		"    first count is the reference for the others.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of every Rpc (default: the library's, URPC_TRANSPORT, else\n"
		"        verbs on an active RDMA port, else udp).\n"
		"    -n, --sessions LIST\n"
		"        Comma-separated session counts, 1 to %lu each (default " DEFAULT_COUNTS
		").\n"
		"    -r, --repeat R\n"
		"        Rounds over LIST, 1 to 20 (default 1); at most %d runs in all.\n"
		"    -p, --procs P\n"
		"        Worker processes, 1 to %d (default 0: one per %lu sessions, at least\n"
		"        one, never more than N). Ignored on loop.\n"
		"    -d, --duration SEC\n"
		"        Seconds of traffic measured per run, 0.01 to 3600 (default 2).\n"
		"    -w, --window W\n"
		"        Requests outstanding over all sessions, 1 to 65536 (default 64).\n"
		"    --connect-batch K\n"
		"        Sessions connecting at once over all workers, 1 to 65536 (default\n"
		"        256: the server Rpc's session-management queue holds 256 packets).\n"
		"    --ping-ms MS\n"
		"        opts.ping_interval_ms of every Rpc, 1 to 60000 (default: the\n"
		"        library's, 100).\n"
		"    --busy-poll\n"
		"        opts.idle_block_us = 0 on every Rpc: they spin instead of sleeping\n"
		"        when idle or waiting (the library's default sleeps after 100 us).\n"
		"    --device DEV, --server-device DEV\n"
		"        verbs: the clients' and the server's RDMA devices.\n"
		"    --csv FILE\n"
		"        Also write one row per run to FILE (overwritten).\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout, one row per\n"
		"    run: round, sessions, worker processes, seconds to connect them all,\n"
		"    connects per second, server bytes per session idle and active, the\n"
		"    response buffers the server holds, RPCs/s with all active, active\n"
		"    sessions, the clients' retransmissions, heartbeat packets per second,\n"
		"    the rate relative to the first count of the same round, and the CPU\n"
		"    microseconds per RPC of the server and the clients. Then a summary\n"
		"    table, one row per count: the medians over the rounds of the connect\n"
		"    time, the bytes, the rate and the CPU per RPC, and the median ratios\n"
		"    to the first count with their ranges. Progress goes to stderr. CSV\n"
		"    columns: transport, sessions, connect_s, rss_before, rss_after,\n"
		"    bytes_per_session (server, active), rpcs, rate, active, retransmits,\n"
		"    ratio_first, round, procs, bytes_per_session_idle, resp_bufs, hb_pps,\n"
		"    srv_cpu_us, cli_cpu_us.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step fails (including a count the engine\n"
		"    refuses), an RPC fails, or not every session stays active; 2 on bad\n"
		"    usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-sessions --sessions 100000 --duration 1\n"
		"    urpc-sessions --sessions 1000,20000 --repeat 5\n"
		"    urpc-sessions --transport loop --sessions 20000 --duration 1\n",
		SESS_MSG_SIZE, SESS_WARMUP_S, SESS_STALL_S, MAX_SESSIONS, MAX_RUNS, MAX_PROCS,
		PER_PROC_AUTO);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_LIST("sessions", 'n', o->counts, 1, MAX_SESSIONS, MAX_COUNTS,
			       &o->ncounts)},
		{URPC_APP_ULONG("repeat", 'r', &o->repeat, 1, 20)},
		{URPC_APP_ULONG("procs", 'p', &o->procs, 0, MAX_PROCS)},
		{URPC_APP_ULONG("connect-batch", 0, &o->connect_batch, 1, 65536)},
		{URPC_APP_ULONG("window", 'w', &o->window, 1, 65536)},
		{URPC_APP_ULONG("ping-ms", 0, &o->ping_ms, 1, 60000)},
		{URPC_APP_TRUE("busy-poll", 0, &o->busy_poll)},
	};
	int ret;

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->repeat = 1;
	o->connect_batch = 256;
	o->window = 64;
	o->ncounts = (unsigned)urpc_app_parse_list(PROG, DEFAULT_COUNTS, "--sessions", 1,
						   MAX_SESSIONS, o->counts, MAX_COUNTS);
	ret = bench_parse_args(PROG, argc, argv, &o->cli,
			       BENCH_CLI_TRANSPORT | BENCH_CLI_DURATION | BENCH_CLI_DEVICES |
				       BENCH_CLI_CSV,
			       own, URPC_APP_NOPTS(own), usage);
	if (!ret && o->ncounts * o->repeat > MAX_RUNS) {
		fprintf(stderr, PROG ": %u counts x %lu rounds is over %d runs (see --help)\n",
			o->ncounts, o->repeat, MAX_RUNS);
		return 2;
	}
	return ret;
}

static unsigned procs_for(const struct opts *o, unsigned long n)
{
	unsigned long p = o->procs ? o->procs : (n + PER_PROC_AUTO - 1) / PER_PROC_AUTO;

	if (o->cli.transport == URPC_TRANSPORT_LOOP)
		return 1;
	return (unsigned)CLAMP(p, 1, n);
}

/* ---- worker processes ---- */

static int start_workers(struct worker_proc *w, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		int cmd[2], rep[2];

		if (pipe(cmd) || pipe(rep)) {
			perror(PROG ": pipe");
			return -errno;
		}
		w[i].pid = fork();
		if (w[i].pid < 0) {
			perror(PROG ": fork");
			return -errno;
		}
		if (!w[i].pid) {
			close(cmd[1]);
			close(rep[0]);
			fflush(stdout);
			_exit(sess_worker_main(cmd[0], rep[1]));
		}
		close(cmd[0]);
		close(rep[1]);
		w[i].cmd_fd = cmd[1];
		w[i].rep_fd = rep[0];
	}
	return 0;
}

static void stop_workers(struct worker_proc *w, unsigned n)
{
	struct sess_cmd c = {.op = SESS_OP_EXIT};
	unsigned i;

	for (i = 0; i < n; i++) {
		if (write(w[i].cmd_fd, &c, sizeof(c)) != (ssize_t)sizeof(c))
			kill(w[i].pid, SIGTERM);
		close(w[i].cmd_fd);
		close(w[i].rep_fd);
		waitpid(w[i].pid, NULL, 0);
	}
}

static int send_cmd(const struct worker_proc *w, const struct sess_cmd *c)
{
	return write(w->cmd_fd, c, sizeof(*c)) == (ssize_t)sizeof(*c) ? 0 : -EIO;
}

static int get_reply(const struct worker_proc *w, struct sess_reply *r)
{
	if (read(w->rep_fd, r, sizeof(*r)) != (ssize_t)sizeof(*r)) {
		fprintf(stderr, PROG ": a worker process went away\n");
		return -EIO;
	}
	return r->status;
}

/* Send @c to workers 0..n-1 (with n_i, window_i split). */
static int send_all(struct worker_proc *w, unsigned n, struct sess_cmd c, unsigned long total,
		    unsigned long window, unsigned long batch)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		c.n = total / n + (i < total % n);
		c.window = CLAMP(window / n, 1, c.n);
		c.batch = CLAMP(batch / n, 1, 65536);
		if (send_cmd(&w[i], &c))
			return -EIO;
	}
	return 0;
}

/* Send @c to workers 0..n-1 (with n_i, window_i split), gather their replies in @r. */
static int all_workers(struct worker_proc *w, unsigned n, struct sess_cmd c, unsigned long total,
		       unsigned long window, unsigned long batch, struct sess_reply *r)
{
	unsigned i;
	int ret = send_all(w, n, c, total, window, batch), st;

	for (i = 0; !ret && i < n; i++) {
		st = get_reply(&w[i], &r[i]);
		if (st && !ret)
			ret = st;
	}
	return ret;
}

/*
 * TRAFFIC to workers 0..n-1: each answers twice, when its measured span
 * starts and when it ends (once, when it fails first). *@cpu_s: this
 * process's CPU time from the last start to the last end, the server's
 * share of the measured spans.
 */
static int traffic_workers(struct worker_proc *w, unsigned n, struct sess_cmd c,
			   unsigned long total, unsigned long window, struct sess_reply *r,
			   double *cpu_s)
{
	bool done[MAX_PROCS];
	unsigned i;
	int ret = send_all(w, n, c, total, window, 1), st;

	for (i = 0; !ret && i < n; i++) {
		st = get_reply(&w[i], &r[i]);
		done[i] = !r[i].started;
		if (st && !ret)
			ret = st;
	}
	*cpu_s = sess_cpu_s();
	for (i = 0; i < n; i++) {
		if (done[i] || ret == -EIO)
			continue;
		st = get_reply(&w[i], &r[i]);
		if (st && !ret)
			ret = st;
	}
	*cpu_s = sess_cpu_s() - *cpu_s;
	return ret;
}

/* ---- one run ---- */

static uint64_t heartbeats(struct urpc_nexus *nx)
{
	struct urpc_nexus_stats st;

	if (urpc_nexus_get_stats(nx, &st))
		return 0;
	return st.heartbeats_tx + st.heartbeats_rx;
}

/* One count in worker processes; 0 or 1 (reported). */
static int run_procs(struct urpc_nexus *nx, const struct opts *o, struct worker_proc *w,
		     struct bench_server *sv, struct result *r)
{
	struct sess_reply rep[MAX_PROCS];
	struct sess_cmd c;
	double t0, srv_cpu, cli_cpu = 0;
	uint64_t hb0;
	unsigned i;
	int ret, status = 1;

	memset(&c, 0, sizeof(c));
	c.transport = o->cli.transport;
	c.port = urpc_nexus_port(nx);
	c.ping_ms = o->ping_ms;
	c.busy_poll = o->busy_poll;
	c.duration_s = o->cli.duration;
	if (o->cli.device)
		snprintf(c.device, sizeof(c.device), "%s", o->cli.device);
	c.op = SESS_OP_CONNECT;
	t0 = bench_now_s();
	ret = all_workers(w, r->procs, c, r->sessions, o->window, o->connect_batch, rep);
	r->connect_s = bench_now_s() - t0;
	if (ret) {
		fprintf(stderr, PROG ": %lu sessions: connecting failed: %s\n", r->sessions,
			urpc_strerror(ret));
		goto out_down;
	}
	r->rss_idle = bench_rss_bytes();
	fprintf(stderr, PROG ": %lu sessions connected in %.2f s; traffic for %g s\n", r->sessions,
		r->connect_s, o->cli.duration);
	hb0 = heartbeats(nx);
	t0 = bench_now_s();
	c.op = SESS_OP_TRAFFIC;
	ret = traffic_workers(w, r->procs, c, r->sessions, o->window, rep, &srv_cpu);
	r->hb_pps = (double)(heartbeats(nx) - hb0) / (bench_now_s() - t0);
	for (i = 0; !ret && i < r->procs; i++) {
		r->rpcs += rep[i].t.rpcs;
		r->rate += (double)rep[i].t.rpcs / rep[i].t.span_s;
		r->active += rep[i].t.active;
		r->retransmits += rep[i].t.retransmits;
		cli_cpu += rep[i].t.cpu_s;
	}
	if (!ret && r->rpcs) {
		r->srv_us = srv_cpu * 1e6 / (double)r->rpcs;
		r->cli_us = cli_cpu * 1e6 / (double)r->rpcs;
	}
	c.op = SESS_OP_STOP;
	if (all_workers(w, r->procs, c, r->sessions, o->window, o->connect_batch, rep) && !ret)
		ret = -EIO;
	r->rss_after = bench_rss_bytes();
	bench_server_pause(sv, true);
	r->resp_bufs = sv->st.resp_bufs;
	bench_server_pause(sv, false);
	if (!ret && r->active == r->sessions)
		status = 0;
	else if (!ret)
		fprintf(stderr, PROG ": only %lu of %lu sessions completed an RPC\n", r->active,
			r->sessions);
out_down:
	c.op = SESS_OP_DOWN;
	if (all_workers(w, r->procs, c, r->sessions, o->window, o->connect_batch, rep))
		status = 1;
	return status;
}

/* One count on loop: the client in this process, on the server's thread. */
static int run_local(struct urpc_nexus *nx, const struct opts *o, struct bench_server *sv,
		     struct result *r)
{
	struct sess_client c;
	struct sess_traffic t;
	uint64_t hb0;
	double t0;
	int ret, status = 1;

	t0 = bench_now_s();
	ret = sess_client_connect(&c, nx, sv, o->cli.transport, o->cli.device, o->ping_ms,
				  o->busy_poll, urpc_nexus_port(nx), r->sessions, o->connect_batch);
	r->connect_s = bench_now_s() - t0;
	if (ret)
		goto out_down;
	r->rss_idle = bench_rss_bytes();
	hb0 = heartbeats(nx);
	t0 = bench_now_s();
	ret = sess_client_traffic(&c, CLAMP(o->window, 1, r->sessions), o->cli.duration, &t, NULL,
				  NULL);
	r->hb_pps = (double)(heartbeats(nx) - hb0) / (bench_now_s() - t0);
	r->rss_after = bench_rss_bytes();
	urpc_rpc_get_stats(sv->rpc, &sv->st);
	r->resp_bufs = sv->st.resp_bufs;
	r->rpcs = t.rpcs;
	r->rate = t.span_s > 0 ? (double)t.rpcs / t.span_s : 0;
	r->active = t.active;
	r->retransmits = t.retransmits;
	if (!ret && t.rpcs)
		r->srv_us = t.cpu_s * 1e6 / (double)t.rpcs; /* both sides, one thread */
	if (!ret && r->active == r->sessions)
		status = 0;
	else if (!ret)
		fprintf(stderr, PROG ": only %lu of %lu sessions completed an RPC\n", r->active,
			r->sessions);
out_down:
	if (sess_client_down(&c))
		status = 1;
	return status;
}

/* One count, from the server Rpc's creation to its destruction; 0 or 1. */
static int run_count(struct urpc_nexus *nx, const struct opts *o, struct worker_proc *w,
		     unsigned long n, struct result *r)
{
	struct bench_server sv;
	int status;

	memset(&sv, 0, sizeof(sv));
	memset(r, 0, sizeof(*r));
	r->sessions = n;
	r->procs = procs_for(o, n);
	sv.nx = nx;
	urpc_rpc_opts_init(&sv.ro);
	sv.ro.transport = o->cli.transport;
	sv.ro.device = o->cli.server_device;
	if (o->ping_ms)
		sv.ro.ping_interval_ms = (uint32_t)o->ping_ms;
	if (o->busy_poll)
		sv.ro.idle_block_us = 0;
	if (sv.ro.peer_timeout_ms <= sv.ro.ping_interval_ms)
		sv.ro.peer_timeout_ms = sv.ro.ping_interval_ms * 5;
	sv.threaded = o->cli.transport != URPC_TRANSPORT_LOOP;
	malloc_trim(0);
	if (bench_server_start(&sv)) {
		fprintf(stderr, PROG ": cannot create the server Rpc\n");
		return 1;
	}
	r->rss_before = bench_rss_bytes();
	fprintf(stderr, PROG ": %lu sessions from %u process(es): connecting\n", n, r->procs);
	status = sv.threaded ? run_procs(nx, o, w, &sv, r) : run_local(nx, o, &sv, r);
	if (bench_server_stop(PROG, &sv))
		status = 1;
	if (r->rss_idle > r->rss_before)
		r->bytes_idle = (double)(r->rss_idle - r->rss_before) / (double)n;
	if (r->rss_after > r->rss_before)
		r->bytes_active = (double)(r->rss_after - r->rss_before) / (double)n;
	return status;
}

/* ---- the summary ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of @v (sorted in place), its min and max. */
static double median(double *v, unsigned n, double *lo, double *hi)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CPU per RPC, both sides: a loop run's is all in srv_us. */
static double cpu_us(const struct result *x)
{
	return x->srv_us + x->cli_us;
}

/* The first count's CPU per RPC over @x's (0: not measured). */
static double cpu_ratio(const struct result *first, const struct result *x)
{
	return cpu_us(first) > 0 && cpu_us(x) > 0 ? cpu_us(first) / cpu_us(x) : 0;
}

static void summary(const struct opts *o, const struct result *res, const double *ratio,
		    unsigned nruns)
{
	double conn[MAX_RUNS], idle[MAX_RUNS], act[MAX_RUNS], rate[MAX_RUNS], rat[MAX_RUNS];
	double srv[MAX_RUNS], cli[MAX_RUNS], crat[MAX_RUNS];
	double lo, hi, rlo, rhi, mrate, mrat;
	unsigned i, k, m;

	printf("\nSummary over %lu round(s): medians, [min-max] where it varies\n\n", o->repeat);
	printf("| sessions | connect s | srv B/session idle | srv B/session active | RPCs/s "
	       "| rate/first | srv CPU us/RPC | cli CPU us/RPC | cpu/first |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (i = 0; i < o->ncounts; i++) {
		for (m = 0, k = i; k < nruns; k += o->ncounts, m++) {
			conn[m] = res[k].connect_s;
			idle[m] = res[k].bytes_idle;
			act[m] = res[k].bytes_active;
			rate[m] = res[k].rate;
			rat[m] = ratio[k];
			srv[m] = res[k].srv_us;
			cli[m] = res[k].cli_us;
			crat[m] = cpu_ratio(&res[k - i], &res[k]);
		}
		if (!m)
			continue;
		printf("| %lu | %.2f | %.0f |", o->counts[i], median(conn, m, &lo, &hi),
		       median(idle, m, &lo, &hi));
		printf(" %.0f |", median(act, m, &lo, &hi));
		mrate = median(rate, m, &rlo, &rhi);
		mrat = median(rat, m, &lo, &hi);
		printf(" %.0f [%.0f-%.0f] | %.2f [%.2f-%.2f] |", mrate, rlo, rhi, mrat, lo, hi);
		printf(" %.2f | %.2f |", median(srv, m, &lo, &hi), median(cli, m, &lo, &hi));
		mrat = median(crat, m, &lo, &hi);
		printf(" %.2f [%.2f-%.2f] |\n", mrat, lo, hi);
	}
}

int main(int argc, char **argv)
{
	struct worker_proc w[MAX_PROCS];
	struct result res[MAX_RUNS];
	double ratio[MAX_RUNS];
	struct urpc_nexus *nx;
	unsigned i, r, nw = 0, nruns = 0;
	FILE *csv = NULL;
	struct opts o;
	int ret, status = 0;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	/* The workers first, before any thread of this process exists. */
	for (i = 0; o.cli.transport != URPC_TRANSPORT_LOOP && i < o.ncounts; i++)
		if (procs_for(&o, o.counts[i]) > nw)
			nw = procs_for(&o, o.counts[i]);
	if (start_workers(w, nw)) {
		stop_workers(w, nw);
		return 1;
	}
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,sessions,connect_s,rss_before,rss_after,bytes_per_session,"
			    "rpcs,rate,active,retransmits,ratio_first,round,procs,"
			    "bytes_per_session_idle,resp_bufs,hb_pps,srv_cpu_us,cli_cpu_us\n",
			    &csv)) {
		status = 1;
		goto out_workers;
	}
	if (bench_nexus_open(PROG, bench_echo, NULL, &nx)) {
		status = 1;
		goto out_csv;
	}
	printf("%s: transport %s, one server Rpc, clients in %s, %d B requests round robin "
	       "over all sessions, %lu outstanding, %g s per run, ping interval %lu ms, "
	       "%lu round(s)%s\n\n",
	       PROG, urpc_transport_str(o.cli.transport),
	       o.cli.transport == URPC_TRANSPORT_LOOP ? "this process (its thread)"
						      : "worker processes",
	       SESS_MSG_SIZE, o.window, o.cli.duration, o.ping_ms ? o.ping_ms : 100ul, o.repeat,
	       o.busy_poll ? ", busy-polling" : "");
	printf("| round | sessions | procs | connect s | connects/s | srv B/session idle "
	       "| srv B/session active | resp bufs | RPCs/s | active | retx | heartbeats/s "
	       "| rate/first | srv CPU us/RPC | cli CPU us/RPC |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	fflush(stdout);
	for (r = 0; r < o.repeat && !status; r++) {
		for (i = 0; i < o.ncounts && !status; i++) {
			struct result *x = &res[nruns];
			double first;

			status = run_count(nx, &o, w, o.counts[i], x);
			if (!x->rpcs)
				break; /* nothing measured (reported) */
			first = res[nruns - i].rate;
			ratio[nruns] = first > 0 ? x->rate / first : 0;
			printf("| %u | %lu | %u | %.2f | %.0f | %.0f | %.0f | %llu | %.0f | %lu "
			       "| %llu | %.1f | %.2f | %.2f | %.2f |\n",
			       r + 1, x->sessions, x->procs, x->connect_s,
			       (double)x->sessions / x->connect_s, x->bytes_idle, x->bytes_active,
			       (unsigned long long)x->resp_bufs, x->rate, x->active,
			       (unsigned long long)x->retransmits, x->hb_pps, ratio[nruns],
			       x->srv_us, x->cli_us);
			fflush(stdout);
			if (csv) {
				fprintf(csv,
					"%s,%lu,%.3f,%zu,%zu,%.0f,%lu,%.1f,%lu,%llu,%.4f,%u,%u,%.0f,"
					"%llu,%.1f,%.3f,%.3f\n",
					urpc_transport_str(o.cli.transport), x->sessions,
					x->connect_s, x->rss_before, x->rss_after, x->bytes_active,
					x->rpcs, x->rate, x->active,
					(unsigned long long)x->retransmits, ratio[nruns], r + 1,
					x->procs, x->bytes_idle, (unsigned long long)x->resp_bufs,
					x->hb_pps, x->srv_us, x->cli_us);
				fflush(csv);
			}
			nruns++;
		}
	}
	if (nruns && nruns % o.ncounts == 0)
		summary(&o, res, ratio, nruns);
	if (urpc_nexus_destroy(nx))
		status = 1;
out_csv:
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
out_workers:
	stop_workers(w, nw);
	return status;
}
