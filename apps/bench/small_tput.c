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
#define SESSION_SLOTS 8 /* requests a session keeps in flight (the engine's constant) */
#define MIN_SIZE 8
#define MAX_SIZE 4096
#define DEFAULT_WINDOWS "1,8,32"
#define STALL_S 30.0

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, ..., --csv */
	unsigned long windows[MAX_WINDOWS];
	unsigned nwindows;
	unsigned long batch; /* 0: the window */
	unsigned long size;
};

struct client;

struct slot {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct client *c;
	int session;
	bool busy;
};

struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	int sessions[MAX_WINDOW / SESSION_SLOTS];
	unsigned nsessions;
	struct bench_sm sm; /* its sm_handler's counts */
	struct slot *slots;
	unsigned nslots;
	unsigned long completed;
	unsigned long errors;
	int first_error;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-small-tput - small-RPC rate per client core next to a raw baseline\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-small-tput [--transport loop|udp|verbs] [--windows LIST] [--batch B]\n"
		"                    [--size BYTES] [--duration SEC] [--device DEV]\n"
		"                    [--server-device DEV] [--perftest-server IP]\n"
		"                    [--no-baseline] [--csv FILE]\n"
		"    urpc-small-tput --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this process over the chosen\n"
		"    transport. For each window W the client keeps W requests of SIZE bytes\n"
		"    outstanding, spread over ceil(W/%d) sessions to the server (a session\n"
		"    keeps %d in flight), and the server echoes each. The client enqueues up\n"
		"    to B requests between two passes of its event loop (the batch), then\n"
		"    runs one pass. The rate is RPCs completed per second over SEC seconds\n"
		"    after 0.1 s of warm-up, on one client core: on udp and verbs the\n"
		"    server Rpc runs on a second thread, both busy-polling; on loop both\n"
		"    share the main thread (so the figure is both sides on one core).\n"
		"\n"
		"    The baseline is measured in the same run, while the urpc server\n"
		"    thread is paused (it would busy-poll a core away from the baseline):\n"
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
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default udp).\n"
		"    -w, --windows LIST\n"
		"        Comma-separated windows, 1 to %d each (default " DEFAULT_WINDOWS ").\n"
		"    -b, --batch B\n"
		"        Requests enqueued per event-loop pass at most, 1 to %d; default the\n"
		"        window. Also the raw echo's sendmmsg batch.\n"
		"    -s, --size BYTES\n"
		"        Request and response size, %d to %d (default 32).\n"
		"    -d, --duration SEC\n"
		"        Seconds measured per window and per measurement, 0.01 to 3600\n"
		"        (default 2).\n"
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
		"    window: window, batch, sessions, urpc RPCs/s, the client's\n"
		"    retransmissions, the baseline's name and rate, and urpc / baseline.\n"
		"    Progress goes to stderr. CSV columns: transport, size, window, batch,\n"
		"    sessions, rpcs, urpc_rate, retransmits, baseline, base_rate, ratio.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step, an RPC or a baseline fails; 2 on bad\n"
		"    usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-small-tput --transport udp --windows 8,32 --duration 1\n"
		"    urpc-small-tput --transport udp --windows 32 --batch 4\n"
		"    urpc-small-tput --transport verbs --device rxe1 --server-device rxe0\n",
		SESSION_SLOTS, SESSION_SLOTS, MAX_WINDOW, MAX_WINDOW, MIN_SIZE, MAX_SIZE);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_LIST("windows", 'w', o->windows, 1, MAX_WINDOW, MAX_WINDOWS,
			       &o->nwindows)},
		{URPC_APP_ULONG("batch", 'b', &o->batch, 1, MAX_WINDOW)},
		{URPC_APP_ULONG("size", 's', &o->size, MIN_SIZE, MAX_SIZE)},
	};

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->size = 32;
	o->nwindows = (unsigned)urpc_app_parse_list(PROG, DEFAULT_WINDOWS, "--windows", 1,
						    MAX_WINDOW, o->windows, MAX_WINDOWS);
	return bench_parse_args(PROG, argc, argv, &o->cli, BENCH_CLI_ALL, own, URPC_APP_NOPTS(own),
				usage);
}

/* ---- urpc ------------------------------------------------------------------------ */

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
		urpc_msgbuf_free(c->rpc, &c->slots[i].resp);
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
		s->session = c->sessions[c->nslots / SESSION_SLOTS];
		ret = urpc_msgbuf_alloc(c->rpc, c->o->size, &s->req);
		if (ret)
			return ret;
		ret = urpc_msgbuf_alloc(c->rpc, c->o->size, &s->resp);
		if (ret) {
			urpc_msgbuf_free(c->rpc, &s->req);
			return ret;
		}
		memset(s->req.buf, 0xa5, c->o->size);
	}
	return 0;
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
			s->req.buf[0]++;
			s->busy = true;
			ret = urpc_req_enqueue(c->rpc, s->session, BENCH_REQ_TYPE, &s->req,
					       &s->resp, cont, s, 0);
			if (ret) {
				s->busy = false;
				if (ret == -ENOMEM)
					break; /* the session's queue is full: poll, then retry */
				fprintf(stderr, PROG ": enqueue: %s\n", urpc_strerror(ret));
				return ret;
			}
			i = (i + 1) % c->nslots;
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
		if (c->errors) {
			fprintf(stderr, PROG ": %lu RPCs failed or came back wrong (first: %s)\n",
				c->errors, urpc_strerror(c->first_error));
			return -EIO;
		}
		if (c->completed == seen) {
			if (bench_now_s() - t_seen > STALL_S) {
				fprintf(stderr, PROG ": no RPC completed for %.0f s\n", STALL_S);
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
		if (n <= 0)
			continue;
		for (i = 0; i < n; i++)
			iov[i].iov_len = m[i].msg_len;
		for (sent = 0; sent < n;) {
			int r = sendmmsg(p->srv_fd, m + sent, (unsigned)(n - sent), 0);

			if (r <= 0)
				break;
			sent += r;
		}
	}
	return NULL;
}

/*
 * Keep @window datagrams outstanding for @secs after a warm-up; echoes per
 * second in *@rate. A window lost on loopback (no answer for 10 ms) is
 * counted as gone and refilled. 0 or -errno.
 */
static int raw_echo(const struct opts *o, unsigned window, unsigned long batch, double *rate)
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
			if (n > 0)
				outstanding += (unsigned)n;
		}
		n = recvmmsg(fd, rm, RAW_BATCH, MSG_DONTWAIT, NULL);
		t = bench_now_s();
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
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static int measure_window(struct client *c, unsigned window, FILE *csv)
{
	const struct opts *o = c->o;
	unsigned long batch = o->batch ? o->batch : window, rpcs = 0;
	struct urpc_rpc_stats before, after;
	const char *base = "none";
	double span = 0, rate, brate = 0, ratio = 0, v[4];
	unsigned nsess = (window + SESSION_SLOTS - 1) / SESSION_SLOTS;
	int ret, n;

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
	fprintf(stderr, PROG ": window %u, batch %lu, %u sessions: measuring urpc for %g s\n",
		window, batch, nsess, o->cli.duration);
	urpc_rpc_get_stats(c->rpc, &before);
	ret = pump(c, batch, 0.1, o->cli.duration, &rpcs, &span);
	urpc_rpc_get_stats(c->rpc, &after);
	if (ret)
		goto out;
	rate = (double)rpcs / span;
	if (o->cli.baseline && o->cli.transport == URPC_TRANSPORT_UDP) {
		base = "raw UDP echo";
		fprintf(stderr, PROG ": window %u: measuring the raw UDP echo\n", window);
		bench_server_pause(c->sv, true);
		ret = raw_echo(o, window, batch, &brate);
		bench_server_pause(c->sv, false);
		if (ret) {
			fprintf(stderr, PROG ": raw UDP echo: %s\n", strerror(-ret));
			goto out;
		}
	} else if (o->cli.baseline && o->cli.transport == URPC_TRANSPORT_VERBS) {
		/* It does not depend on the window: measured once, for the first. */
		static double perftest_rate;

		base = "ib_send_bw UD msg rate";
		if (!perftest_rate) {
			bench_server_pause(c->sv, true);
			n = bench_perftest(PROG, "ib_send_bw", "-c UD -n 100000 -F",
					   o->cli.server_device ? o->cli.server_device : "rxe0",
					   o->cli.device ? o->cli.device : "rxe0",
					   o->cli.perftest_ip, o->size, 18800, v, 4);
			bench_server_pause(c->sv, false);
			if (n < 4) {
				ret = n < 0 ? n : -EIO;
				goto out;
			}
			/* iterations, BW peak, BW average, MsgRate[Mpps] */
			perftest_rate = v[3] * 1e6;
		}
		brate = perftest_rate;
	}
	ratio = brate > 0 ? rate / brate : 0;
	printf("| %u | %lu | %u | %.0f | %llu | %s |", window, batch, nsess, rate,
	       (unsigned long long)(after.retransmits - before.retransmits), base);
	if (brate > 0)
		printf(" %.0f | %.2f |\n", brate, ratio);
	else
		printf(" - | - |\n");
	fflush(stdout);
	if (csv) {
		fprintf(csv, "%s,%lu,%u,%lu,%u,%lu,%.1f,%llu,%s,%.1f,%.4f\n",
			urpc_transport_str(o->cli.transport), o->size, window, batch, nsess, rpcs,
			rate, (unsigned long long)(after.retransmits - before.retransmits), base,
			brate, ratio);
		fflush(csv);
	}
	fprintf(stderr, PROG ": window %u: urpc %.0f RPCs/s, %s %.0f/s\n", window, rate, base,
		brate);
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
	FILE *csv = NULL;
	const char *what;
	struct opts o;
	unsigned i;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,size,window,batch,sessions,rpcs,urpc_rate,retransmits,"
			    "baseline,base_rate,ratio\n",
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
	printf("%s: transport %s, %lu B requests and responses, %g s per window, one client "
	       "core%s; rates in RPCs (or echoes, messages) per second\n\n",
	       PROG, what, o.size, o.cli.duration,
	       sv.threaded ? ", server on a second thread" : " (server on the same thread)");
	printf("| window | batch | sessions | urpc RPCs/s | retx | baseline | baseline /s | "
	       "urpc/baseline |\n");
	printf("|---:|---:|---:|---:|---:|---|---:|---:|\n");
	fflush(stdout);
	status = 0;
	for (i = 0; i < o.nwindows && !status; i++)
		if (measure_window(&c, (unsigned)o.windows[i], csv))
			status = 1;
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
