/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the benchmarks (urpc-latency, urpc-small-tput,
 * urpc-sessions, urpc-large-tput, urpc-cpu-cost): the command line, clocks,
 * option values, percentiles, a server Rpc on a thread of its own, the
 * client's Rpc and session set-up, output files and perftest runs for the
 * verbs baselines. Small ones are static inline here; the rest live in
 * bench_common.c. Uses <urpc/urpc.h> and libc alone.
 */
#ifndef URPC_APPS_BENCH_COMMON_H
#define URPC_APPS_BENCH_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define BENCH_REQ_TYPE 1
#define BENCH_SRV_ID 1
#define BENCH_CLI_ID 2
#define BENCH_SETUP_S 30.0 /* server start, connect, disconnect; the VM is slow */

/*
 * A message size as --sizes takes it: decimal bytes, or with a K or M
 * suffix (optionally "KiB"/"MiB"), from @min to URPC_MAX_MSG_SIZE. 0 or
 * -EINVAL.
 */
static inline int bench_parse_size(const char *s, size_t min, size_t *out)
{
	unsigned long long v, mul = 1;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20;
	else if (*end)
		return -EINVAL;
	if (*end) {
		end++;
		if (!strcmp(end, "iB"))
			end += 2;
		if (*end)
			return -EINVAL;
	}
	if (v > URPC_MAX_MSG_SIZE / mul)
		return -EINVAL;
	v *= mul;
	if (v < min || v > URPC_MAX_MSG_SIZE)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

/*
 * A comma-separated --sizes list into @sizes (at most @max of them, each
 * from @min to URPC_MAX_MSG_SIZE; *@n of them filled). 0, or -EINVAL
 * with the reason on stderr.
 */
static inline int bench_parse_sizes(const char *prog, const char *list, size_t min, size_t *sizes,
				    unsigned max, unsigned *n)
{
	const char *p = list;
	char tok[32];

	*n = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (*n == max) {
			fprintf(stderr, "%s: --sizes takes at most %u sizes\n", prog, max);
			return -EINVAL;
		}
		if (!len || len >= sizeof(tok))
			break;
		memcpy(tok, p, len);
		tok[len] = '\0';
		if (bench_parse_size(tok, min, &sizes[*n]))
			break;
		(*n)++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
	fprintf(stderr,
		"%s: --sizes: '%.*s' in '%s' is not a size from %zu to 64M (bytes, or with a K "
		"or M suffix: 64K, 16M)\n",
		prog, (int)strcspn(p, ","), p, list, min);
	return -EINVAL;
}

static inline double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sort helper and the @q quantile (0..1, nearest rank) of @n sorted samples. */
static inline int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static inline uint64_t bench_quantile(const uint64_t *sorted, size_t n, double q)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(q * (double)n);
	if (i >= n)
		i = n - 1;
	return sorted[i];
}

/* Resident set size of this process in bytes, from /proc/self/statm; 0 if unknown. */
static inline size_t bench_rss_bytes(void)
{
	unsigned long size, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return (size_t)rss * 4096u;
}

/* ---- pairs: urpc and its baseline measured in turn -------------------------------- */

/*
 * On a noisy machine one measurement of each says little: urpc-latency and
 * urpc-small-tput measure urpc, then its baseline, PAIRS times in turn
 * (--pairs), and report the median of the per-pair ratios with their
 * interquartile range and their range.
 */
#define BENCH_DEFAULT_PAIRS 5
#define BENCH_MAX_PAIRS 100

/* The median, quartiles, smallest and largest of some values. */
struct bench_spread {
	double med, q1, q3, min, max;
};

/*
 * The spread of @v[0..@n) (sorted in place; quartiles interpolated
 * between ranks); all 0 when @n is 0.
 */
struct bench_spread bench_spread_of(double *v, unsigned n);

/*
 * One side's system calls over a measurement: calls that sent, calls that
 * received something, receive calls that found nothing (a busy poller's
 * idle passes), and idle sleeps (ppoll). For urpc they come from
 * urpc_rpc_stats (tp_sys_*, idle_sleeps), the raw baselines count their own.
 */
struct bench_sys {
	uint64_t tx, rx, empty, sleeps;
};

/* Add the calls @b made since @a (two stats of one Rpc) to @s. */
static inline void bench_sys_add(struct bench_sys *s, const struct urpc_rpc_stats *a,
				 const struct urpc_rpc_stats *b)
{
	s->tx += b->tp_sys_tx - a->tp_sys_tx;
	s->rx += (b->tp_sys_rx - b->tp_sys_rx_empty) - (a->tp_sys_rx - a->tp_sys_rx_empty);
	s->empty += b->tp_sys_rx_empty - a->tp_sys_rx_empty;
	s->sleeps += b->idle_sleeps - a->idle_sleeps;
}

/*
 * "tx/rx/empty" per RPC (@rpcs of them), with " +N ppoll" when the side
 * slept; "-" when nothing was counted.
 */
void bench_sys_fmt(char *buf, size_t len, const struct bench_sys *s, uint64_t rpcs);

/* The same as three (four) CSV fields: tx,rx,empty,sleeps per RPC. */
void bench_sys_csv(FILE *f, const struct bench_sys *s, uint64_t rpcs);

/*
 * The four sides' fields in the benchmarks' CSV order: urpc client (per
 * @rpcs), urpc server (per @srv_rpcs), raw client and raw server (per
 * @brpcs), comma-separated.
 */
void bench_sys_csv_sides(FILE *f, const struct bench_sys *cli, uint64_t rpcs,
			 const struct bench_sys *srv, uint64_t srv_rpcs,
			 const struct bench_sys *bcli, const struct bench_sys *bsrv,
			 uint64_t brpcs);

/* ---- the client's session events and the server's handler ---------------------- */

/* What a client's sm_handler saw (bench_sm_event, sm_arg = this). */
struct bench_sm {
	unsigned connected;
	unsigned disconnected;
	unsigned failed; /* connect failures and resets */
	int status;	 /* the first failure's cause (-ECONNRESET when it gave none) */
};

/* One line: client session @session's congestion state (urpc_session_get_stats). */
static inline void bench_print_session_stats(const char *prog, struct urpc_rpc *rpc, int session)
{
	struct urpc_session_stats st;

	if (urpc_session_get_stats(rpc, session, &st))
		return;
	printf("%s: session %d: rate %.2f of %.2f Gb/s%s, srtt %.1f us (controller's %.1f us), "
	       "%llu samples, %llu decreases, %llu paced, server's share %.2f Gb/s%s\n",
	       prog, session, st.cc_rate_bps / 1e9, st.cc_line_bps / 1e9,
	       st.cc_limited ? " (paced)" : "", st.srtt_ns / 1e3, st.cc_srtt_ns / 1e3,
	       (unsigned long long)st.cc_samples, (unsigned long long)st.cc_decreases,
	       (unsigned long long)st.cc_paced, st.cc_share_bps / 1e9,
	       st.cc_share_bps ? "" : " (none)");
}

static inline void bench_sm_event(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev,
				  int status, void *arg)
{
	struct bench_sm *sm = arg;

	(void)rpc;
	(void)session;
	if (ev == URPC_SM_CONNECTED) {
		sm->connected++;
	} else if (ev == URPC_SM_DISCONNECTED) {
		sm->disconnected++;
	} else {
		if (!sm->failed)
			sm->status = status ? status : -ECONNRESET;
		sm->failed++;
	}
}

/* The server's handler: echo the request from the slot's own buffer. */
static inline void bench_echo(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	size_t len;

	(void)arg;
	d = urpc_req_data(h, &len);
	memcpy(resp->buf, d, len);
	urpc_msgbuf_resize(resp, len);
	urpc_resp_enqueue(h, resp);
}

/* ---- a server Rpc -------------------------------------------------------------- */

/*
 * The server side: an Rpc created on its own thread (udp, verbs), running
 * its event loop until told to stop, or on the caller's thread (loop, whose
 * endpoints must share one thread), driven by the caller.
 */
struct bench_server {
	struct urpc_nexus *nx;
	struct urpc_rpc_opts ro;
	bool threaded;
	struct urpc_rpc *rpc;
	pthread_t th;
	atomic_int state; /* 0 starting, 1 serving, 2 create failed */
	atomic_bool stop;
	atomic_bool pause;  /* asked: stop polling (a baseline is being measured) */
	atomic_bool paused; /* ... and done: the thread sleeps */
	int create_ret;
	int loop_ret;
	int destroy_ret;
	struct urpc_rpc_stats st; /* its counters when it paused last, or stopped */
};

static inline void *bench_server_main(void *arg)
{
	struct bench_server *sv = arg;

	sv->create_ret = urpc_rpc_create(sv->nx, BENCH_SRV_ID, &sv->ro, &sv->rpc);
	if (sv->create_ret) {
		atomic_store(&sv->state, 2);
		return NULL;
	}
	atomic_store(&sv->state, 1);
	while (!atomic_load_explicit(&sv->stop, memory_order_relaxed) && !sv->loop_ret) {
		if (atomic_load(&sv->pause)) {
			struct timespec ts = {0, 1000000};

			if (!atomic_load(&sv->paused)) {
				/* published by the store: read once paused is seen */
				urpc_rpc_get_stats(sv->rpc, &sv->st);
				atomic_store(&sv->paused, true);
			}
			nanosleep(&ts, NULL);
			continue;
		}
		atomic_store(&sv->paused, false);
		sv->loop_ret = urpc_rpc_run_event_loop(sv->rpc, 5);
	}
	urpc_rpc_get_stats(sv->rpc, &sv->st);
	sv->destroy_ret = urpc_rpc_destroy(sv->rpc);
	sv->rpc = NULL;
	return NULL;
}

/* Create the server Rpc (on a thread when @sv->threaded); 0 or -errno. */
static inline int bench_server_start(struct bench_server *sv)
{
	double deadline;
	int ret;

	if (!sv->threaded)
		return urpc_rpc_create(sv->nx, BENCH_SRV_ID, &sv->ro, &sv->rpc);
	ret = pthread_create(&sv->th, NULL, bench_server_main, sv);
	if (ret)
		return -ret;
	deadline = bench_now_s() + BENCH_SETUP_S;
	while (atomic_load(&sv->state) == 0 && bench_now_s() < deadline)
		sched_yield();
	if (atomic_load(&sv->state) == 1)
		return 0;
	if (atomic_load(&sv->state) == 0)
		sv->create_ret = -ETIMEDOUT;
	atomic_store(&sv->stop, true);
	pthread_join(sv->th, NULL);
	return sv->create_ret;
}

/*
 * Pause or resume a threaded server's polling, so that a baseline measured
 * meanwhile has the cores to itself as urpc had (the server would otherwise
 * busy-poll a core away from it). Returns once the thread has paused, its
 * counters in sv->st. The peers' timeouts must outlast the pause. On the
 * caller's thread: no pause, only the counters.
 */
static inline void bench_server_pause(struct bench_server *sv, bool pause)
{
	if (!sv->threaded) {
		if (pause)
			urpc_rpc_get_stats(sv->rpc, &sv->st);
		return;
	}
	atomic_store(&sv->pause, pause);
	while (pause && !atomic_load(&sv->paused) && !atomic_load(&sv->stop) && !sv->loop_ret)
		sched_yield();
}

/* Stop and destroy the server Rpc; 0, or 1 when it failed (reported). */
static inline int bench_server_stop(const char *prog, struct bench_server *sv)
{
	if (!sv->threaded) {
		urpc_rpc_get_stats(sv->rpc, &sv->st);
		sv->destroy_ret = urpc_rpc_destroy(sv->rpc);
	} else {
		atomic_store(&sv->stop, true);
		pthread_join(sv->th, NULL);
	}
	if (sv->loop_ret)
		fprintf(stderr, "%s: server event loop: %s\n", prog, urpc_strerror(sv->loop_ret));
	if (sv->destroy_ret)
		fprintf(stderr, "%s: cannot destroy the server Rpc: %s\n", prog,
			urpc_strerror(sv->destroy_ret));
	return sv->loop_ret || sv->destroy_ret;
}

/* ---- perftest (the verbs baselines) --------------------------------------------- */

/* How long a perftest side may run when its work is fixed and small (10,000 round trips). */
#define BENCH_PERFTEST_LIMIT_S 120

/* A device name as perftest takes it: letters, digits, '_' and '-' (no shell quoting). */
static inline bool bench_name_is_plain(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

/*
 * Run a perftest pair: "TOOL ARGS -d SERVER_DEV" in the background, then
 * "TOOL ARGS -d CLIENT_DEV SERVER_IP", retried while the server is not
 * listening yet (processes start slowly under TCG). The client's result row
 * (the first line whose first field is @size) is split into @vals (up to
 * @nvals numbers); the count of numbers, or -errno (reported). Each side is
 * killed after @limit_s seconds (timeout(1)): a run that does not finish by
 * then is not retried and gives -ETIMEDOUT. The GID index comes from
 * URPC_RXE_GID_INDEX when set (the Soft-RoCE VM), else perftest's default.
 * @port must differ between calls.
 */
static inline int bench_perftest(const char *prog, const char *tool, const char *args,
				 const char *server_dev, const char *client_dev,
				 const char *server_ip, size_t size, unsigned port,
				 unsigned limit_s, double *vals, int nvals)
{
	static const char rc_tag[] = "bench-perftest-exit ";
	const char *gid = getenv("URPC_RXE_GID_INDEX");
	char gidarg[32] = "", cmd[1200], line[512];
	int n = -EIO, try, rc;
	FILE *p;

	if (!bench_name_is_plain(server_dev) || !bench_name_is_plain(client_dev) ||
	    !bench_name_is_plain(server_ip) || (gid && !bench_name_is_plain(gid))) {
		fprintf(stderr, "%s: perftest needs plain device names and a server address\n",
			prog);
		return -EINVAL;
	}
	if (gid)
		snprintf(gidarg, sizeof(gidarg), "-x %s", gid);
	for (try = 0; try < 10 && n == -EIO; try++) {
		snprintf(cmd, sizeof(cmd),
			 "timeout -k 5 %u %s %s %s -s %zu -p %u -d %s >/dev/null 2>&1 & spid=$!; "
			 "sleep 1; timeout -k 5 %u %s %s %s -s %zu -p %u -d %s %s 2>&1; "
			 "echo %s$?; kill $spid 2>/dev/null; wait",
			 limit_s + 10, tool, args, gidarg, size, port + (unsigned)try, server_dev,
			 limit_s, tool, args, gidarg, size, port + (unsigned)try, client_dev,
			 server_ip, rc_tag);
		fprintf(stderr, "%s: running %s -s %zu (try %d, at most %u s)\n", prog, tool, size,
			try + 1, limit_s);
		p = popen(cmd, "r");
		if (!p) {
			fprintf(stderr, "%s: cannot run %s: %s\n", prog, tool, strerror(errno));
			return -errno;
		}
		rc = -1;
		while (fgets(line, sizeof(line), p)) {
			char *s = line, *end;
			int k = 0;

			if (!strncmp(line, rc_tag, sizeof(rc_tag) - 1))
				rc = atoi(line + sizeof(rc_tag) - 1);
			if (n != -EIO)
				continue;
			errno = 0;
			if (strtoull(s, &end, 10) != size || end == s ||
			    (*end != ' ' && *end != '\t'))
				continue;
			for (s = end; k < nvals; s = end) {
				double v = strtod(s, &end);

				if (end == s)
					break;
				vals[k++] = v;
			}
			n = k;
		}
		pclose(p);
		if (n == -EIO && (rc == 124 || rc == 137)) { /* timeout(1) killed it */
			fprintf(stderr, "%s: %s -s %zu did not finish in %u s; killed\n", prog,
				tool, size, limit_s);
			return -ETIMEDOUT;
		}
	}
	if (n < 0)
		fprintf(stderr, "%s: %s -s %zu printed no result (is perftest installed?)\n", prog,
			tool, size);
	return n;
}

/* ---- the command line (bench_common.c) ------------------------------------------ */

/* The flags several benchmarks share, with the same meaning and checks in each. */
struct bench_cli {
	enum urpc_transport_kind transport; /* -t, --transport loop|udp|verbs */
	const char *device;		    /* --device DEV */
	const char *server_device;	    /* --server-device DEV; default: device */
	const char *perftest_ip;	    /* --perftest-server IP; default: see below */
	double duration;		    /* -d, --duration SEC, 0.01 to 3600 */
	bool duration_set;		    /* ... given on the command line */
	bool baseline;			    /* cleared by --no-baseline */
	const char *csv;		    /* --csv FILE */
};

/* Which of them a program takes (bench_parse_args' @flags). */
enum {
	BENCH_CLI_TRANSPORT = 1u << 0,
	BENCH_CLI_DURATION = 1u << 1,
	BENCH_CLI_DEVICES = 1u << 2, /* --device and --server-device */
	BENCH_CLI_PERFTEST = 1u << 3,
	BENCH_CLI_NO_BASELINE = 1u << 4,
	BENCH_CLI_CSV = 1u << 5,
	BENCH_CLI_ALL = (1u << 6) - 1,
};

/* Defaults: udp, 2 s, the baseline on, everything else unset. */
void bench_cli_init(struct bench_cli *cli);

/*
 * Parse the command line: the shared flags in @flags into @cli, the
 * program's own options @own[0..@nown), and -h/--help (@usage(stdout)).
 * Values are checked as they come, in order, each refusal naming its
 * option and range on stderr; a missing value, an unknown option or an
 * operand is refused the same way. Afterwards --server-device defaults to
 * --device, and --perftest-server to URPC_RXE_SERVER_IP, else 127.0.0.1.
 * Returns 0: run; 1: help printed; 2: bad usage (reported).
 */
int bench_parse_args(const char *prog, int argc, char **argv, struct bench_cli *cli, unsigned flags,
		     const struct urpc_app_opt *own, unsigned nown, void (*usage)(FILE *f));

/* ---- set-up and output (bench_common.c) ------------------------------------------ */

/*
 * Open @path for writing (none when NULL: *@out = NULL) and write @header;
 * 0, or -errno with "cannot write @opt '@path'" on stderr.
 */
int bench_file_open(const char *prog, const char *opt, const char *path, const char *header,
		    FILE **out);

/* Close @f (may be NULL); 0, or 1 with "cannot write @opt '@path'" on stderr. */
int bench_file_close(const char *prog, const char *opt, const char *path, FILE *f);

/* A Nexus on a free port with @fn for BENCH_REQ_TYPE; 0, or -errno reported (none left). */
int bench_nexus_open(const char *prog, urpc_req_handler_fn fn, void *arg, struct urpc_nexus **nx);

/* Options for a busy-polling Rpc of @transport, with the set-up bound BENCH_SETUP_S. */
void bench_rpc_opts(struct urpc_rpc_opts *ro, enum urpc_transport_kind transport);

/*
 * Start the server @sv (its nx, ro and threaded set), then create the client
 * Rpc from @ro on @device, its session events counted in @sm. 0 with both up,
 * or -errno with neither, reported as "cannot create the server Rpc
 * (@srv_what)" or "... client Rpc (@cli_what)".
 */
int bench_rpcs_create(const char *prog, struct bench_server *sv, const struct urpc_rpc_opts *ro,
		      const char *device, struct bench_sm *sm, const char *srv_what,
		      const char *cli_what, struct urpc_rpc **cli);

/* One pass of the client's event loop, and of the server's when it shares this thread. */
int bench_run_once(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv);

/*
 * Connect @n sessions of @rpc to the server @sv into @sessions and run the
 * loops until @sm has counted them all connected (at most BENCH_SETUP_S);
 * 0, or -errno (not reported). A session not begun is -1 in @sessions.
 */
int bench_connect(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv,
		  struct bench_sm *sm, int *sessions, unsigned n);

/*
 * After disconnects: run the loops until @sm has counted @want disconnections
 * and @busy(@arg) is false (requests given back), at most BENCH_SETUP_S.
 */
void bench_drain(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv,
		 const struct bench_sm *sm, unsigned want, bool (*busy)(const void *arg),
		 const void *arg);

/*
 * The address the Nexus binds and the client connects to: URPC_BENCH_HOST,
 * else 127.0.0.1. xdp (apps/bench/xdp_bench.sh): the client's interface
 * address, so its endpoint is on the host its connect comes from.
 */
const char *bench_host(void);

/*
 * The raw UDP baselines' pair over 127.0.0.1: a server socket that an echo
 * thread busy-polls until @stop, and a client socket connected to it.
 */
struct bench_udp_pair {
	int srv_fd;	      /* the echo thread's */
	int cli_fd;	      /* connected to srv_fd */
	atomic_bool stop;     /* set by bench_udp_pair_stop(); the echo thread polls it */
	struct bench_sys sys; /* the echo thread's system calls; read after the stop */
	pthread_t th;
};

/*
 * Open both sockets and run @echo(@p) on a thread of its own; 0, or -errno
 * with nothing left open.
 */
int bench_udp_pair_start(struct bench_udp_pair *p, void *(*echo)(void *p));

/* Stop and join the echo thread, then close both sockets. */
void bench_udp_pair_stop(struct bench_udp_pair *p);

#endif /* URPC_APPS_BENCH_COMMON_H */
