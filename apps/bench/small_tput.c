/* SPDX-License-Identifier: MIT */
/*
 * urpc-small-tput: small-RPC rate of one client core, with the window and
 * the batch as knobs, next to a baseline measured in the same run: a raw
 * UDP echo with the same window on udp, perftest's ib_send_bw message rate
 * on verbs. See usage() for the method. Uses only <urpc/urpc.h>.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg */
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

#define PROG "urpc-small-tput"
#define MAX_WINDOWS 16
#define MAX_WINDOW 1024
#define MIN_SIZE 8
#define MAX_SIZE 4096
#define DEFAULT_WINDOWS "1,8,32"
#define STALL_S 30.0

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, ..., --csv */
	unsigned long windows[MAX_WINDOWS];
	unsigned nwindows;
	unsigned long batch;	      /* 0: the window */
	unsigned long session_window; /* both Rpcs' opts.session_window */
	unsigned long size;
	unsigned long pairs;
	unsigned long
		idle_us; /* 0: busy-poll; else both Rpcs' idle_block_us, and the client waits */
};

/* One window's figures over all pairs. */
struct window_run {
	double rate[BENCH_MAX_PAIRS], brate[BENCH_MAX_PAIRS], ratio[BENCH_MAX_PAIRS];
	unsigned npairs, nbase;
	uint64_t rpcs_measured, retx;
	struct bench_sys cli, srv, bcli, bsrv; /* system calls of each side */
	uint64_t rpcs, srv_rpcs, brpcs;	       /* ... and the RPCs (echoes) they made */
};

struct client;

struct slot {
	struct urpc_msgbuf req; /* the response is read in place (urpc_req_enqueue_view) */
	struct client *c;
	int session;
	bool busy;
};

struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	int sessions[MAX_WINDOW]; /* a window of W over sessions of at least 1 */
	unsigned nsessions;
	struct bench_sm sm; /* its sm_handler's counts */
	struct slot *slots;
	unsigned nslots;
	unsigned long completed;
	unsigned long errors;
	int first_error;
	bool refill; /* --idle-us: continuations send the slot's next request */
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-small-tput - small-RPC rate per client core next to a raw baseline\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-small-tput [--transport loop|udp|verbs] [--windows LIST] [--batch B]\n"
		"                    [--session-window SW] [--size BYTES] [--duration SEC]\n"
		"                    [--pairs N]\n"
		"                    [--device DEV] [--server-device DEV]\n"
		"                    [--perftest-server IP] [--no-baseline] [--csv FILE]\n"
		"    urpc-small-tput --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this process over the chosen\n"
		"    transport. For each window W the client keeps W requests of SIZE bytes\n"
		"    outstanding, spread over ceil(W/SW) sessions to the server (a session\n"
		"    keeps SW in flight: --session-window), and the server echoes each. The client enqueues up\n"
		"    to B requests between two passes of its event loop (the batch), then\n"
		"    runs one pass; it reads each response where it arrived\n"
		"    (urpc_req_enqueue_view). The rate is RPCs completed per second over\n"
		"    SEC seconds after 0.1 s of warm-up, on one client core: on udp and\n"
		"    verbs the server Rpc runs on a second thread, both busy-polling; on\n"
		"    loop both share the main thread (so the figure is both sides on one\n"
		"    core).\n"
		"\n"
		"    The baseline is measured in the same run, while the urpc server\n"
		"    thread is paused (it would busy-poll a core away from the baseline).\n"
		"    On a busy machine one measurement of each says little: for each window\n"
		"    urpc and the baseline are measured N times in turn (urpc, baseline,\n"
		"    urpc, baseline, ...), and the ratio reported is the median of the N\n"
		"    per-pair rate ratios, with their spread:\n"
		"      udp    a raw UDP echo over 127.0.0.1: the client thread keeps W\n"
		"             datagrams of SIZE bytes outstanding, sending up to B at a time\n"
		"             with sendmmsg() and reaping with recvmmsg(), both busy-polled;\n"
		"             an echo thread answers each (recvmmsg/sendmmsg). Its rate is\n"
		"             echoes completed per second.\n"
		"      verbs  perftest's ib_send_bw -c UD message rate (one-way SENDs of SIZE\n"
		"             bytes per second, its default queue depth), server on the\n"
		"             server device, measured once for all windows. It sends one\n"
		"             way only, where an RPC is a message each way: a reference for\n"
		"             the emulated device's speed, not a like-for-like bound.\n"
		"             The GID index comes from URPC_RXE_GID_INDEX when set.\n"
		"      loop   none.\n"
		"\n"
		"    Each side's system calls are counted over each measurement (warm-up\n"
		"    included): urpc's from urpc_rpc_get_stats() (tp_sys_tx, tp_sys_rx,\n"
		"    tp_sys_rx_empty, idle_sleeps), the raw echo's by its two threads.\n"
		"    Busy-polling sides make one receive call per idle pass, so the empty\n"
		"    receives grow with the time spent waiting for the other side.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default: the library's, URPC_TRANSPORT, else\n"
		"        verbs on an active RDMA port, else udp).\n"
		"    -w, --windows LIST\n"
		"        Comma-separated windows, 1 to %d each (default " DEFAULT_WINDOWS ").\n"
		"    -b, --batch B\n"
		"        Requests enqueued per event-loop pass at most, 1 to %d; default the\n"
		"        window. Also the raw echo's sendmmsg batch.\n"
		"    -S, --session-window SW\n"
		"        Both Rpcs' session window (opts.session_window): a power of two\n"
		"        from 1 to %d (default %d). A window of W runs on one session when\n"
		"        SW >= W.\n"
		"    -s, --size BYTES\n"
		"        Request and response size, %d to %d (default 32).\n"
		"    -d, --duration SEC\n"
		"        Seconds measured per window and per measurement, 0.01 to 3600\n"
		"        (default 2). A window takes 2 x N x SEC seconds with the baseline.\n"
		"    -p, --pairs N\n"
		"        Measurements of urpc and of the raw echo per window, taken in turn,\n"
		"        1 to %d (default %d). On verbs perftest runs once.\n"
		"    -i, --idle-us US\n"
		"        0 to 1000000 (default 0: both sides busy-poll). Else both Rpcs'\n"
		"        idle_block_us, and the client runs as an application that waits:\n"
		"        each continuation sends its slot's next request and the client\n"
		"        runs urpc_rpc_run_event_loop() in slices of 1 ms, so that an Rpc\n"
		"        with nothing to do but wait sleeps until an answer comes instead\n"
		"        of spinning (--batch then bounds only the first fill). What a\n"
		"        host with more busy threads than cores needs (busy_host.sh); udp\n"
		"        and verbs only (loop cannot block). The raw echo busy-polls\n"
		"        either way.\n"
		"    --device DEV, --server-device DEV\n"
		"        verbs: the client's and the server's RDMA devices (\"rxe1\", \"rxe0\");\n"
		"        default URPC_DEVICE, else the first active port. perftest uses them\n"
		"        too.\n"
		"    --perftest-server IP\n"
		"        verbs: the address perftest's client connects to (default\n"
		"        URPC_RXE_SERVER_IP, else 127.0.0.1).\n"
		"    --no-baseline\n"
		"        Measure urpc alone.\n"
		"    --csv FILE\n"
		"        Also write one row per window to FILE (overwritten).\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout, one row per\n"
		"    window: window, batch, sessions, urpc RPCs/s (the median of the pairs),\n"
		"    the client's retransmissions (all pairs), the baseline's name and rate\n"
		"    (the median), the median of the per-pair ratios urpc / baseline, their\n"
		"    interquartile range and, in parentheses, their range. A second table\n"
		"    gives the system calls per RPC of each side, as tx/rx/empty: calls that sent, calls that received\n"
		"    datagrams, receive calls that found none (\" +P ppoll\" when a side\n"
		"    slept). Progress goes to stderr. CSV columns: transport, size, window,\n"
		"    batch, sessions, rpcs (measured, all pairs), urpc_rate, retransmits,\n"
		"    baseline, base_rate, ratio (the median), pairs, ratio_min, ratio_max,\n"
		"    then per RPC tx, rx, empty and sleeps for cli_, srv_, base_cli_ and\n"
		"    base_srv_, then ratio_q1, ratio_q3 (the quartiles), session_window.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step, an RPC or a baseline fails; 2 on bad\n"
		"    usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-small-tput --transport udp --windows 8,32 --duration 1\n"
		"    urpc-small-tput --transport udp --windows 32 --batch 4\n"
		"    urpc-small-tput --transport udp --windows 8,32,64 --session-window 64\n"
		"    urpc-small-tput --windows 1,8,32 --duration 0.5 --pairs 11\n"
		"    urpc-small-tput --transport verbs --device rxe1 --server-device rxe0\n",
		MAX_WINDOW, MAX_WINDOW, URPC_SESSION_WINDOW_MAX, URPC_SESSION_WINDOW_DEFAULT,
		MIN_SIZE, MAX_SIZE, BENCH_MAX_PAIRS, BENCH_DEFAULT_PAIRS);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	int ret;

	const struct urpc_app_opt own[] = {
		{URPC_APP_LIST("windows", 'w', o->windows, 1, MAX_WINDOW, MAX_WINDOWS,
			       &o->nwindows)},
		{URPC_APP_ULONG("batch", 'b', &o->batch, 1, MAX_WINDOW)},
		{URPC_APP_ULONG("session-window", 'S', &o->session_window, 1,
				URPC_SESSION_WINDOW_MAX)},
		{URPC_APP_ULONG("size", 's', &o->size, MIN_SIZE, MAX_SIZE)},
		{URPC_APP_ULONG("pairs", 'p', &o->pairs, 1, BENCH_MAX_PAIRS)},
		{URPC_APP_ULONG("idle-us", 'i', &o->idle_us, 0, 1000000)},
	};

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->size = 32;
	o->pairs = BENCH_DEFAULT_PAIRS;
	o->session_window = URPC_SESSION_WINDOW_DEFAULT;
	o->nwindows = (unsigned)urpc_app_parse_list(PROG, DEFAULT_WINDOWS, "--windows", 1,
						    MAX_WINDOW, o->windows, MAX_WINDOWS);
	ret = bench_parse_args(PROG, argc, argv, &o->cli, BENCH_CLI_ALL, own, URPC_APP_NOPTS(own),
			       usage);
	if (!ret && (o->session_window & (o->session_window - 1))) {
		fprintf(stderr, PROG ": --session-window %lu is not a power of two\n",
			o->session_window);
		return 2;
	}
	return ret;
}

/* ---- urpc ------------------------------------------------------------------------ */

static int issue(struct client *c, struct slot *s);

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct slot *s = tag;
	struct client *c = s->c;

	s->busy = false;
	c->completed++;
	if (!status && (resp->data_size != s->req.data_size || resp->buf[0] != s->req.buf[0]))
		status = -EBADMSG;
	if (status) {
		if (!c->errors)
			c->first_error = status;
		c->errors++;
	} else if (c->refill && issue(c, s) && !c->errors) {
		c->first_error = -EIO;
		c->errors++;
	}
}

static bool any_busy(const void *arg)
{
	const struct client *c = arg;
	unsigned i;

	for (i = 0; i < c->nslots; i++)
		if (c->slots[i].busy)
			return true;
	return false;
}

static void disconnect_sessions(struct client *c)
{
	unsigned i, n = 0;

	for (i = 0; i < c->nsessions; i++)
		if (!urpc_session_disconnect(c->rpc, c->sessions[i]))
			n++;
	bench_drain(PROG, c->rpc, c->sv, &c->sm, c->sm.disconnected + n, any_busy, c);
	c->nsessions = 0;
}

static void free_slots(struct client *c)
{
	unsigned i;

	for (i = 0; i < c->nslots; i++) {
		if (c->slots[i].busy)
			continue; /* still lent to the engine: destroy will say -EBUSY */
		urpc_msgbuf_free(c->rpc, &c->slots[i].req);
	}
	free(c->slots);
	c->slots = NULL;
	c->nslots = 0;
}

static int alloc_slots(struct client *c, unsigned window)
{
	int ret;

	c->slots = calloc(window, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	for (c->nslots = 0; c->nslots < window; c->nslots++) {
		struct slot *s = &c->slots[c->nslots];

		s->c = c;
		s->session = c->sessions[c->nslots / c->o->session_window];
		ret = urpc_msgbuf_alloc(c->rpc, c->o->size, &s->req);
		if (ret)
			return ret;
		memset(s->req.buf, 0xa5, c->o->size);
	}
	return 0;
}

/* Send slot @s's next request (its first byte changed); 0 or -errno (the slot stays free). */
static int issue(struct client *c, struct slot *s)
{
	int ret;

	s->req.buf[0]++;
	s->busy = true;
	ret = urpc_req_enqueue_view(c->rpc, s->session, BENCH_REQ_TYPE, &s->req, cont, s, 0);
	if (ret)
		s->busy = false;
	return ret;
}

/*
 * Keep the window full for @secs (after a warm-up of @warm_s), issuing at
 * most @batch per pass; the RPCs completed in the measured span and its
 * length. 0 or -errno (reported).
 */
static int pump(struct client *c, unsigned long batch, double warm_s, double secs,
		unsigned long *rpcs, double *span)
{
	unsigned long c0 = 0, seen = 0;
	double t = bench_now_s(), t_start = t + warm_s, t0 = 0, t_seen = t;
	unsigned i = 0, k;
	int ret;

	c->completed = c->errors = 0;
	for (;;) {
		for (k = 0; k < batch; k++) {
			struct slot *s;
			unsigned tries;

			for (tries = 0; tries < c->nslots && c->slots[i].busy; tries++)
				i = (i + 1) % c->nslots;
			s = &c->slots[i];
			if (s->busy)
				break;
			ret = issue(c, s);
			if (ret) {
				if (ret == -EAGAIN)
					break; /* the session's queue is full: poll, then retry */
				fprintf(stderr, PROG ": enqueue: %s\n", urpc_strerror(ret));
				c->refill = false;
				return ret;
			}
			i = (i + 1) % c->nslots;
		}
		/*
		 * --idle-us: continuations refill the window, and the loop runs
		 * in slices of a millisecond, in which an Rpc with every request
		 * in flight sleeps until an answer comes (idle_block_us), as an
		 * application that waits does.
		 */
		c->refill = c->o->idle_us != 0;
		ret = c->refill ? urpc_rpc_run_event_loop(c->rpc, 1)
				: bench_run_once(PROG, c->rpc, c->sv);
		if (ret) {
			c->refill = false;
			return ret;
		}
		if (c->errors) {
			fprintf(stderr, PROG ": %lu RPCs failed or came back wrong (first: %s)\n",
				c->errors, urpc_strerror(c->first_error));
			c->refill = false;
			return -EIO;
		}
		if (c->completed == seen) {
			if (bench_now_s() - t_seen > STALL_S) {
				fprintf(stderr, PROG ": no RPC completed for %.0f s\n", STALL_S);
				c->refill = false;
				return -ETIMEDOUT;
			}
			continue;
		}
		seen = c->completed;
		t = bench_now_s();
		t_seen = t;
		if (!t0 && t >= t_start) {
			t0 = t;
			c0 = c->completed;
		} else if (t0 && t - t0 >= secs) {
			*rpcs = c->completed - c0;
			*span = t - t0;
			c->refill = false;
			return 0;
		}
	}
}

/* ---- the raw UDP echo ------------------------------------------------------------ */

#define RAW_BATCH 64

/* The pair's echo thread: busy-poll, answer every datagram where it came from, in batches. */
static void *echo_main(void *arg)
{
	struct bench_udp_pair *p = arg;
	static uint8_t bufs[RAW_BATCH][MAX_SIZE];
	struct sockaddr_in from[RAW_BATCH];
	struct mmsghdr m[RAW_BATCH];
	struct iovec iov[RAW_BATCH];
	int i, n, sent;

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		for (i = 0; i < RAW_BATCH; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = MAX_SIZE;
			memset(&m[i], 0, sizeof(m[i]));
			m[i].msg_hdr.msg_iov = &iov[i];
			m[i].msg_hdr.msg_iovlen = 1;
			m[i].msg_hdr.msg_name = &from[i];
			m[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		n = recvmmsg(p->srv_fd, m, RAW_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			p->sys.empty++;
			continue;
		}
		p->sys.rx++;
		for (i = 0; i < n; i++)
			iov[i].iov_len = m[i].msg_len;
		for (sent = 0; sent < n;) {
			int r = sendmmsg(p->srv_fd, m + sent, (unsigned)(n - sent), 0);

			p->sys.tx++;
			if (r <= 0)
				break;
			sent += r;
		}
	}
	return NULL;
}

/*
 * Keep @window datagrams outstanding for @secs after a warm-up; echoes per
 * second in *@rate, both threads' calls added to @r. A window lost on
 * loopback (no answer for 10 ms) is counted as gone and refilled. 0 or
 * -errno.
 */
static int raw_echo(const struct opts *o, unsigned window, unsigned long batch, double *rate,
		    struct window_run *r)
{
	static uint8_t tx[RAW_BATCH][MAX_SIZE], rx[RAW_BATCH][MAX_SIZE];
	struct mmsghdr tm[RAW_BATCH], rm[RAW_BATCH];
	struct iovec tiov[RAW_BATCH], riov[RAW_BATCH];
	struct bench_udp_pair up;
	unsigned long done = 0, c0 = 0;
	unsigned outstanding = 0;
	double t, t0 = 0, t_start, t_seen;
	int fd, i, n, ret;

	if (batch > RAW_BATCH)
		batch = RAW_BATCH;
	ret = bench_udp_pair_start(&up, echo_main);
	if (ret)
		return ret;
	fd = up.cli_fd;
	for (i = 0; i < RAW_BATCH; i++) {
		memset(tx[i], 0xa5, o->size);
		tiov[i].iov_base = tx[i];
		tiov[i].iov_len = o->size;
		memset(&tm[i], 0, sizeof(tm[i]));
		tm[i].msg_hdr.msg_iov = &tiov[i];
		tm[i].msg_hdr.msg_iovlen = 1;
		riov[i].iov_base = rx[i];
		riov[i].iov_len = MAX_SIZE;
		memset(&rm[i], 0, sizeof(rm[i]));
		rm[i].msg_hdr.msg_iov = &riov[i];
		rm[i].msg_hdr.msg_iovlen = 1;
	}
	t = bench_now_s();
	t_start = t + 0.1;
	t_seen = t;
	for (;;) {
		unsigned want = window - outstanding;

		if (want > batch)
			want = (unsigned)batch;
		if (want) {
			n = sendmmsg(fd, tm, want, 0);
			r->bcli.tx++;
			if (n > 0)
				outstanding += (unsigned)n;
		}
		n = recvmmsg(fd, rm, RAW_BATCH, MSG_DONTWAIT, NULL);
		t = bench_now_s();
		if (n > 0)
			r->bcli.rx++;
		else
			r->bcli.empty++;
		if (n > 0) {
			outstanding -= (unsigned)n < outstanding ? (unsigned)n : outstanding;
			done += (unsigned long)n;
			t_seen = t;
			if (!t0 && t >= t_start) {
				t0 = t;
				c0 = done;
			} else if (t0 && t - t0 >= o->cli.duration) {
				*rate = (double)(done - c0) / (t - t0);
				break;
			}
		} else if (t - t_seen > 0.01) {
			outstanding = 0; /* lost on loopback: refill the window */
			t_seen = t;
		}
	}
	bench_udp_pair_stop(&up);
	r->bsrv.tx += up.sys.tx;
	r->bsrv.rx += up.sys.rx;
	r->bsrv.empty += up.sys.empty;
	r->brpcs += done;
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

/* After a pump: let the window's last requests come back (none then waits through a pause). */
static int drain_window(struct client *c)
{
	double t_end = bench_now_s() + STALL_S;
	int ret;

	while (any_busy(c)) {
		if (bench_now_s() > t_end) {
			fprintf(stderr, PROG ": requests still outstanding after %.0f s\n",
				STALL_S);
			return -ETIMEDOUT;
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * One pair for @window: urpc, then, with the server paused, the raw echo
 * on udp. The server's counters were taken when it paused last; its calls
 * over the urpc measurement are added to @r with the client's.
 */
static int one_pair(struct client *c, unsigned window, unsigned long batch, struct window_run *r)
{
	const struct opts *o = c->o;
	struct urpc_rpc_stats before, after, s0 = c->sv->st;
	unsigned long rpcs = 0;
	double span = 0, brate = 0;
	int ret;

	urpc_rpc_get_stats(c->rpc, &before);
	ret = pump(c, batch, 0.1, o->cli.duration, &rpcs, &span);
	if (!ret)
		ret = drain_window(c);
	urpc_rpc_get_stats(c->rpc, &after);
	bench_server_pause(c->sv, true);
	bench_sys_add(&r->cli, &before, &after);
	r->rpcs += c->completed;
	bench_sys_add(&r->srv, &s0, &c->sv->st);
	r->srv_rpcs += c->sv->st.reqs_handled - s0.reqs_handled;
	r->retx += after.retransmits - before.retransmits;
	if (ret)
		goto out;
	r->rate[r->npairs++] = (double)rpcs / span;
	r->rpcs_measured += rpcs;
	if (o->cli.baseline && o->cli.transport == URPC_TRANSPORT_UDP) {
		ret = raw_echo(o, window, batch, &brate, r);
		if (ret) {
			fprintf(stderr, PROG ": raw UDP echo: %s\n", strerror(-ret));
			goto out;
		}
		r->ratio[r->nbase] = brate > 0 ? (double)rpcs / span / brate : 0;
		r->brate[r->nbase++] = brate;
	}
out:
	bench_server_pause(c->sv, false);
	return ret;
}

/* perftest's ib_send_bw -c UD message rate, measured once for all windows; 0 or -errno. */
static int perftest_rate(struct client *c, double *rate)
{
	static double once;
	const struct opts *o = c->o;
	double v[4];
	int n;

	if (!once) {
		bench_server_pause(c->sv, true);
		n = bench_perftest(PROG, "ib_send_bw", "-c UD -n 100000 -F",
				   o->cli.server_device ? o->cli.server_device : "rxe0",
				   o->cli.device ? o->cli.device : "rxe0", o->cli.perftest_ip,
				   o->size, 18800, BENCH_PERFTEST_LIMIT_S, v, 4);
		bench_server_pause(c->sv, false);
		if (n < 4)
			return n < 0 ? n : -EIO;
		/* iterations, BW peak, BW average, MsgRate[Mpps] */
		once = v[3] * 1e6;
	}
	*rate = once;
	return 0;
}

/* The CSV's columns after ratio. */
#define CSV_EXTRA                                                                                  \
	"pairs,ratio_min,ratio_max,cli_tx,cli_rx,cli_empty,cli_sleeps,srv_tx,srv_rx,srv_empty,"    \
	"srv_sleeps,base_cli_tx,base_cli_rx,base_cli_empty,base_cli_sleeps,base_srv_tx,"           \
	"base_srv_rx,base_srv_empty,base_srv_sleeps,ratio_q1,ratio_q3,session_window"

static void print_row(const struct opts *o, FILE *csv, unsigned window, unsigned long batch,
		      unsigned nsess, const char *base, struct window_run *r)
{
	struct bench_spread rate = bench_spread_of(r->rate, r->npairs);
	struct bench_spread brate = bench_spread_of(r->brate, r->nbase);
	struct bench_spread ratio = bench_spread_of(r->ratio, r->nbase);

	printf("| %u | %lu | %u | %.0f | %llu | %s |", window, batch, nsess, rate.med,
	       (unsigned long long)r->retx, base);
	if (brate.med > 0)
		printf(" %.0f | %.2f | %.2f-%.2f (%.2f-%.2f) |\n", brate.med, ratio.med, ratio.q1,
		       ratio.q3, ratio.min, ratio.max);
	else
		printf(" - | - | - |\n");
	fflush(stdout);
	if (csv) {
		fprintf(csv, "%s,%lu,%u,%lu,%u,%llu,%.1f,%llu,%s,%.1f,%.4f,%u,%.4f,%.4f,",
			urpc_transport_str(o->cli.transport), o->size, window, batch, nsess,
			(unsigned long long)r->rpcs_measured, rate.med, (unsigned long long)r->retx,
			base, brate.med, ratio.med, r->nbase, ratio.min, ratio.max);
		bench_sys_csv_sides(csv, &r->cli, r->rpcs, &r->srv, r->srv_rpcs, &r->bcli, &r->bsrv,
				    r->brpcs);
		fprintf(csv, ",%.4f,%.4f,%lu\n", ratio.q1, ratio.q3, o->session_window);
		fflush(csv);
	}
	fprintf(stderr,
		PROG ": window %u: urpc %.0f RPCs/s, %s %.0f/s; ratio %.2f (IQR %.2f-%.2f, "
		     "min-max %.2f-%.2f, %u pairs)\n",
		window, rate.med, base, brate.med, ratio.med, ratio.q1, ratio.q3, ratio.min,
		ratio.max, r->nbase);
}

/* The system calls per RPC of @r's four sides: one row of the second table. */
static void print_sys_row(unsigned window, const struct window_run *r)
{
	char cli[64], srv[64], bcli[64], bsrv[64];

	bench_sys_fmt(cli, sizeof(cli), &r->cli, r->rpcs);
	bench_sys_fmt(srv, sizeof(srv), &r->srv, r->srv_rpcs);
	bench_sys_fmt(bcli, sizeof(bcli), &r->bcli, r->brpcs);
	bench_sys_fmt(bsrv, sizeof(bsrv), &r->bsrv, r->brpcs);
	printf("| %u | %s | %s | %s | %s |\n", window, cli, srv, bcli, bsrv);
}

static int measure_window(struct client *c, unsigned window, FILE *csv, struct window_run *r)
{
	const struct opts *o = c->o;
	unsigned long batch = o->batch ? o->batch : window;
	const char *base = "none";
	unsigned sw = (unsigned)o->session_window, nsess = (window + sw - 1) / sw, k;
	bool raw = o->cli.baseline && o->cli.transport == URPC_TRANSPORT_UDP;
	double brate = 0;
	int ret;

	ret = bench_connect(PROG, c->rpc, c->sv, &c->sm, c->sessions, nsess);
	c->nsessions = nsess; /* those not begun are -1: their disconnect is refused */
	if (ret) {
		fprintf(stderr, PROG ": cannot connect %u sessions: %s\n", nsess,
			urpc_strerror(ret));
		disconnect_sessions(c);
		return ret;
	}
	ret = alloc_slots(c, window);
	if (ret) {
		fprintf(stderr, PROG ": cannot allocate buffers: %s\n", urpc_strerror(ret));
		goto out;
	}
	bench_server_pause(c->sv, true); /* the server's counters before the first */
	bench_server_pause(c->sv, false);
	for (k = 0; k < o->pairs && !ret; k++) {
		fprintf(stderr,
			PROG
			": window %u, batch %lu, %u sessions: pair %u of %lu: urpc%s, %g s each\n",
			window, batch, nsess, k + 1, o->pairs, raw ? " then the raw UDP echo" : "",
			o->cli.duration);
		ret = one_pair(c, window, batch, r);
	}
	if (ret)
		goto out;
	if (raw) {
		base = "raw UDP echo";
	} else if (o->cli.baseline && o->cli.transport == URPC_TRANSPORT_VERBS) {
		/* It does not depend on the window: measured once, for the first. */
		base = "ib_send_bw UD msg rate";
		ret = perftest_rate(c, &brate);
		if (ret)
			goto out;
		for (k = 0; k < r->npairs; k++) {
			r->brate[k] = brate;
			r->ratio[k] = r->rate[k] / brate;
		}
		r->nbase = r->npairs;
	}
	print_row(o, csv, window, batch, nsess, base, r);
out:
	disconnect_sessions(c);
	free_slots(c);
	return ret;
}

int main(int argc, char **argv)
{
	struct bench_server sv;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct client c;
	struct window_run *runs;
	FILE *csv = NULL;
	const char *what;
	struct opts o;
	unsigned i;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (o.idle_us && o.cli.transport == URPC_TRANSPORT_LOOP) {
		fprintf(stderr, PROG ": --idle-us needs udp or verbs: the loop transport cannot "
				     "block\n");
		return 2;
	}
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,size,window,batch,sessions,rpcs,urpc_rate,retransmits,"
			    "baseline,base_rate,ratio," CSV_EXTRA "\n",
			    &csv))
		return 1;
	memset(&sv, 0, sizeof(sv));
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.sv = &sv;
	if (bench_nexus_open(PROG, bench_echo, NULL, &nx))
		goto out_csv;
	bench_rpc_opts(&ro, o.cli.transport);
	ro.peer_timeout_ms = 3600000; /* neither side polls while a baseline runs */
	ro.idle_block_us = (uint32_t)o.idle_us;
	ro.session_window = (uint32_t)o.session_window;
	sv.nx = nx;
	sv.ro = ro;
	sv.ro.device = o.cli.server_device;
	sv.threaded = o.cli.transport != URPC_TRANSPORT_LOOP;
	what = urpc_transport_str(o.cli.transport);
	if (bench_rpcs_create(PROG, &sv, &ro, o.cli.device, &c.sm, what, what, &c.rpc))
		goto out_nexus;
	if (o.size > urpc_rpc_max_msg_size(c.rpc)) {
		fprintf(stderr, PROG ": --size %lu is above this transport's limit %zu\n", o.size,
			urpc_rpc_max_msg_size(c.rpc));
		goto out_cli;
	}
	printf("%s: transport %s, %lu B requests and responses, sessions of window %lu, %lu pairs "
	       "of %g s measurements per window (urpc, then the baseline, in turn), one client "
	       "core%s; rates in RPCs (or echoes, messages) per second, medians of the pairs\n\n",
	       PROG, what, o.size, o.session_window, o.pairs, o.cli.duration,
	       sv.threaded ? ", server on a second thread" : " (server on the same thread)");
	printf("| window | batch | sessions | urpc RPCs/s | retx | baseline | baseline /s | "
	       "urpc/baseline | IQR (min-max) |\n");
	printf("|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
	fflush(stdout);
	runs = calloc(o.nwindows, sizeof(*runs));
	status = runs ? 0 : 1;
	for (i = 0; i < o.nwindows && !status; i++)
		if (measure_window(&c, (unsigned)o.windows[i], csv, &runs[i]))
			status = 1;
	if (!status) {
		printf("\nSystem calls per RPC, tx/rx/empty: calls that sent, that received "
		       "datagrams, receive calls that found none (busy polling)\n\n");
		printf("| window | urpc client | urpc server | raw client | raw server |\n");
		printf("|---:|---|---|---|---|\n");
		for (i = 0; i < o.nwindows; i++)
			print_sys_row((unsigned)o.windows[i], &runs[i]);
		fflush(stdout);
	}
	free(runs);
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
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
	return status;
}
