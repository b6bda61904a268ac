/* SPDX-License-Identifier: MIT */
/*
 * urpc-sessions: one server Rpc holding N client sessions. Memory per
 * session and the RPC rate with every session active, for N up to 20,000
 * and beyond. See usage() for the method. Uses only <urpc/urpc.h>.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"

#define PROG "urpc-sessions"
#define MAX_COUNTS 16
#define MAX_SESSIONS 1000000ul
#define MSG_SIZE 32
#define DEFAULT_COUNTS "1,1000,20000"
#define STALL_S 30.0

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, --server-device, --csv */
	unsigned long counts[MAX_COUNTS];
	unsigned ncounts;
	unsigned long connect_batch;
	unsigned long window;  /* requests outstanding over all sessions */
	unsigned long ping_ms; /* 0: the library's default */
};

struct client;

/* One client session and its one request. */
struct sess {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct client *c;
	int num;
	bool busy;
	bool used; /* completed an RPC in the measured span */
	bool have_bufs;
};

struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	struct sess *s;
	unsigned long n;
	unsigned long started; /* sessions with a connect issued */
	struct bench_sm sm;    /* its sm_handler's counts */
	unsigned long completed;
	unsigned long nused;	   /* sessions with .used set */
	unsigned long outstanding; /* requests lent to the engine */
	unsigned long errors;
	int first_error;
	bool measuring;
};

struct result {
	unsigned long sessions;
	double connect_s;
	size_t rss_before;
	size_t rss_after;
	double bytes_per_session;
	unsigned long rpcs;
	double rate;
	unsigned long active;
	uint64_t retransmits;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-sessions - memory per session and the RPC rate with N sessions active\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-sessions [--transport loop|udp|verbs] [--sessions LIST] [--duration SEC]\n"
		"                  [--window W] [--connect-batch K] [--ping-ms MS] [--device DEV]\n"
		"                  [--server-device DEV] [--csv FILE]\n"
		"    urpc-sessions --help\n"
		"\n"
		"DESCRIPTION\n"
		"    For each N: creates a server Rpc and a client Rpc in this process, both\n"
		"    with opts.max_sessions = N, and connects N client sessions to the one\n"
		"    server Rpc (at most K connecting at a time). Then the client sends\n"
		"    %d-byte requests, which the server echoes, round robin over all N\n"
		"    sessions with W outstanding in all (at most one per session), for SEC\n"
		"    seconds and on until every session has completed an RPC (at most %.0f s\n"
		"    more): the rate is RPCs completed per second, and the active column\n"
		"    counts the sessions that completed at least one RPC in that span (N\n"
		"    when all of them are active). Finally the sessions are disconnected and\n"
		"    both Rpcs destroyed. (One request outstanding on every session at once\n"
		"    would overrun the server's receive ring at large N: the low-numbered\n"
		"    sessions refill it first and the others retransmit, starved.)\n"
		"\n"
		"    Memory per session is the growth of this process's resident set\n"
		"    (/proc/self/statm) from just after both Rpcs are created to the end of\n"
		"    the measured traffic, divided by N: the client's and the server's\n"
		"    share together (session state, the server's preallocated response\n"
		"    buffers, the client's request and response buffers).\n"
		"\n"
		"    On udp and verbs the server Rpc runs on a second thread, on loop both\n"
		"    share the main thread; both busy-poll. Heartbeats go between the\n"
		"    Nexuses over session management (kernel UDP), one per peer process\n"
		"    and ping interval whatever the number of sessions.\n"
		"\n"
		"    There is no baseline program: the row for a small N is the reference\n"
		"    for the larger ones (the ratio column).\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default udp).\n"
		"    -n, --sessions LIST\n"
		"        Comma-separated session counts, 1 to %lu each (default " DEFAULT_COUNTS
		").\n"
		"    -d, --duration SEC\n"
		"        Seconds of traffic measured per count, 0.01 to 3600 (default 2).\n"
		"    -w, --window W\n"
		"        Requests outstanding over all sessions, 1 to 65536 (default 64).\n"
		"    --connect-batch K\n"
		"        Sessions connecting at once at most, 1 to 65536 (default 256).\n"
		"    --ping-ms MS\n"
		"        opts.ping_interval_ms of both Rpcs, 1 to 60000 (default: the\n"
		"        library's, 100); the peer timeout is kept at 100 times it.\n"
		"    --device DEV, --server-device DEV\n"
		"        verbs: the client's and the server's RDMA devices.\n"
		"    --csv FILE\n"
		"        Also write one row per count to FILE (overwritten).\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout, one row per\n"
		"    count: sessions, seconds to connect them all, resident MB before and\n"
		"    after, bytes per session, RPCs/s with all active, active sessions, the\n"
		"    client's retransmissions, and the rate relative to the first row.\n"
		"    Progress goes to stderr. CSV columns: transport, sessions, connect_s,\n"
		"    rss_before, rss_after, bytes_per_session, rpcs, rate, active,\n"
		"    retransmits, ratio_first.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step fails (including a count the engine\n"
		"    refuses), an RPC fails, or not every session stays active; 2 on bad\n"
		"    usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-sessions --transport loop --sessions 20000 --duration 1\n"
		"    urpc-sessions --transport udp --sessions 100,5000,20000\n",
		MSG_SIZE, STALL_S, MAX_SESSIONS);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_LIST("sessions", 'n', o->counts, 1, MAX_SESSIONS, MAX_COUNTS,
			       &o->ncounts)},
		{URPC_APP_ULONG("connect-batch", 0, &o->connect_batch, 1, 65536)},
		{URPC_APP_ULONG("window", 'w', &o->window, 1, 65536)},
		{URPC_APP_ULONG("ping-ms", 0, &o->ping_ms, 1, 60000)},
	};

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->connect_batch = 256;
	o->window = 64;
	o->ncounts = (unsigned)urpc_app_parse_list(PROG, DEFAULT_COUNTS, "--sessions", 1,
						   MAX_SESSIONS, o->counts, MAX_COUNTS);
	return bench_parse_args(PROG, argc, argv, &o->cli,
				BENCH_CLI_TRANSPORT | BENCH_CLI_DURATION | BENCH_CLI_DEVICES |
					BENCH_CLI_CSV,
				own, URPC_APP_NOPTS(own), usage);
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct sess *s = tag;
	struct client *c = s->c;

	s->busy = false;
	c->completed++;
	c->outstanding--;
	if (c->measuring && !s->used) {
		s->used = true;
		c->nused++;
	}
	if (!status && (resp->data_size != MSG_SIZE || resp->buf[0] != s->req.buf[0]))
		status = -EBADMSG;
	if (status) {
		if (!c->errors)
			c->first_error = status;
		c->errors++;
	}
}

static bool any_busy(const void *arg)
{
	return ((const struct client *)arg)->outstanding > 0;
}

/* Connect c->n sessions, at most K at a time; 0 or -errno (reported). */
static int connect_all(struct urpc_nexus *nx, struct client *c)
{
	double t_seen = bench_now_s();
	unsigned long seen = 0;
	char hp[32];
	int ret;

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(nx));
	while (c->sm.connected < c->n) {
		while (c->started < c->n && c->started - c->sm.connected < c->o->connect_batch) {
			ret = urpc_session_connect(c->rpc, hp, BENCH_SRV_ID, &c->s[c->started].num);
			if (ret) {
				fprintf(stderr, PROG ": connect of session %lu: %s\n",
					c->started + 1, urpc_strerror(ret));
				return ret;
			}
			c->started++;
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
		if (c->sm.failed) {
			fprintf(stderr, PROG ": %u sessions failed to connect (first: %s)\n",
				c->sm.failed, urpc_strerror(c->sm.status));
			return c->sm.status;
		}
		if (c->sm.connected != seen) {
			if (c->sm.connected / 5000 != seen / 5000)
				fprintf(stderr, PROG ": %u of %lu sessions connected\n",
					c->sm.connected, c->n);
			seen = c->sm.connected;
			t_seen = bench_now_s();
		} else if (bench_now_s() - t_seen > STALL_S) {
			fprintf(stderr, PROG ": no session connected for %.0f s (%u of %lu)\n",
				STALL_S, c->sm.connected, c->n);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Disconnect every connected session and wait for the events. */
static void disconnect_all(struct client *c)
{
	unsigned long i, n = 0;

	for (i = 0; i < c->started; i++)
		if (!urpc_session_disconnect(c->rpc, c->s[i].num))
			n++;
	bench_drain(PROG, c->rpc, c->sv, &c->sm, c->sm.disconnected + (unsigned)n, any_busy, c);
}

/* Every session keeps one request outstanding for the duration. */
static int traffic(struct client *c, struct result *r)
{
	double t = bench_now_s(), t_start = t + 0.2, t0 = 0, t_seen = t;
	unsigned long c0 = 0, seen = 0, issued = 0, next = 0, tries;
	int ret;

	c->completed = c->errors = 0;
	for (;;) {
		/* Round robin over all sessions, @window outstanding in all. */
		for (tries = 0; issued - c->completed < c->o->window && tries < c->n; tries++) {
			struct sess *s = &c->s[next];

			next = next + 1 == c->n ? 0 : next + 1;
			if (s->busy)
				continue;
			s->req.buf[0]++;
			s->busy = true;
			ret = urpc_req_enqueue(c->rpc, s->num, BENCH_REQ_TYPE, &s->req, &s->resp,
					       cont, s, 0);
			if (ret) {
				s->busy = false;
				fprintf(stderr, PROG ": enqueue on session %d: %s\n", s->num,
					urpc_strerror(ret));
				return ret;
			}
			c->outstanding++;
			issued++;
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
		if (c->errors) {
			fprintf(stderr, PROG ": %lu RPCs failed or came back wrong (first: %s)\n",
				c->errors, urpc_strerror(c->first_error));
			return -EIO;
		}
		t = bench_now_s();
		if (c->completed != seen) {
			seen = c->completed;
			t_seen = t;
		} else if (t - t_seen > STALL_S) {
			fprintf(stderr, PROG ": no RPC completed for %.0f s\n", STALL_S);
			return -ETIMEDOUT;
		}
		if (!t0 && t >= t_start) {
			t0 = t;
			c0 = c->completed;
			c->measuring = true;
		} else if (t0 && t - t0 >= c->o->cli.duration &&
			   (c->nused == c->n || t - t0 >= c->o->cli.duration + STALL_S)) {
			/*
			 * Not before every session had its turn: the rate is one
			 * over all N, and on a loaded machine a short span can end
			 * before a round robin went all the way round.
			 */
			c->measuring = false;
			r->rpcs = c->completed - c0;
			r->rate = (double)r->rpcs / (t - t0);
			r->active = c->nused;
			return 0;
		}
	}
}

/* One session count, from Rpc creation to destruction; 0 or 1. */
static int run_count(struct urpc_nexus *nx, const struct opts *o, unsigned long n, struct result *r)
{
	struct urpc_rpc_stats before, after;
	struct bench_server sv;
	struct urpc_rpc_opts ro;
	struct client c;
	unsigned long i;
	char what[48];
	double t0;
	int ret, status = 1;

	memset(&sv, 0, sizeof(sv));
	memset(&c, 0, sizeof(c));
	memset(r, 0, sizeof(*r));
	r->sessions = n;
	c.o = o;
	c.sv = &sv;
	c.n = n;
	bench_rpc_opts(&ro, o->cli.transport);
	ro.max_sessions = (uint32_t)n;
	if (o->ping_ms)
		ro.ping_interval_ms = (uint32_t)o->ping_ms;
	ro.peer_timeout_ms = ro.ping_interval_ms * 100;
	sv.nx = nx;
	sv.ro = ro;
	sv.ro.device = o->cli.server_device;
	sv.threaded = o->cli.transport != URPC_TRANSPORT_LOOP;
	r->rss_before = bench_rss_bytes();
	snprintf(what, sizeof(what), "max_sessions %lu", n);
	if (bench_rpcs_create(PROG, &sv, &ro, o->cli.device, &c.sm, what, what, &c.rpc))
		return 1;
	c.s = calloc(n, sizeof(*c.s));
	if (!c.s) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_cli;
	}
	r->rss_before = bench_rss_bytes();
	fprintf(stderr, PROG ": %lu sessions: connecting\n", n);
	t0 = bench_now_s();
	ret = connect_all(nx, &c);
	r->connect_s = bench_now_s() - t0;
	if (ret)
		goto out_sess;
	for (i = 0; i < n; i++) {
		struct sess *s = &c.s[i];

		s->c = &c;
		ret = urpc_msgbuf_alloc(c.rpc, MSG_SIZE, &s->req);
		if (!ret) {
			ret = urpc_msgbuf_alloc(c.rpc, MSG_SIZE, &s->resp);
			if (ret)
				urpc_msgbuf_free(c.rpc, &s->req);
		}
		if (ret) {
			fprintf(stderr, PROG ": cannot allocate buffers for session %lu: %s\n",
				i + 1, urpc_strerror(ret));
			goto out_sess;
		}
		s->have_bufs = true;
		memset(s->req.buf, 0xa5, MSG_SIZE);
	}
	fprintf(stderr, PROG ": %lu sessions connected in %.2f s; traffic for %g s\n", n,
		r->connect_s, o->cli.duration);
	urpc_rpc_get_stats(c.rpc, &before);
	ret = traffic(&c, r);
	urpc_rpc_get_stats(c.rpc, &after);
	r->rss_after = bench_rss_bytes();
	r->bytes_per_session = r->rss_after > r->rss_before
				       ? (double)(r->rss_after - r->rss_before) / (double)n
				       : 0;
	r->retransmits = after.retransmits - before.retransmits;
	if (!ret && r->active == n)
		status = 0;
	else if (!ret)
		fprintf(stderr, PROG ": only %lu of %lu sessions completed an RPC\n", r->active, n);
out_sess:
	disconnect_all(&c);
	for (i = 0; i < n; i++) {
		if (!c.s[i].have_bufs || c.s[i].busy)
			continue;
		urpc_msgbuf_free(c.rpc, &c.s[i].req);
		urpc_msgbuf_free(c.rpc, &c.s[i].resp);
	}
	free(c.s);
out_cli:
	if (urpc_rpc_destroy(c.rpc)) {
		fprintf(stderr, PROG ": cannot destroy the client Rpc\n");
		status = 1;
	}
	if (bench_server_stop(PROG, &sv))
		status = 1;
	return status;
}

int main(int argc, char **argv)
{
	struct urpc_nexus *nx;
	struct result r;
	double first = 0;
	FILE *csv = NULL;
	struct opts o;
	unsigned i;
	int ret, status = 0;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,sessions,connect_s,rss_before,rss_after,bytes_per_session,"
			    "rpcs,rate,active,retransmits,ratio_first\n",
			    &csv))
		return 1;
	if (bench_nexus_open(PROG, bench_echo, NULL, &nx)) {
		status = 1;
		goto out_csv;
	}
	printf("%s: transport %s, one server Rpc, %d B requests round robin over all sessions, "
	       "%lu outstanding, %g s per count, ping interval %lu ms%s\n\n",
	       PROG, urpc_transport_str(o.cli.transport), MSG_SIZE, o.window, o.cli.duration,
	       o.ping_ms ? o.ping_ms : 100ul,
	       o.cli.transport == URPC_TRANSPORT_LOOP ? ", client and server on one thread"
						      : ", server on a second thread");
	printf("| sessions | connect s | RSS MB before | RSS MB after | bytes/session | RPCs/s "
	       "| active | retx | rate/first |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	fflush(stdout);
	for (i = 0; i < o.ncounts && !status; i++) {
		double ratio;

		status = run_count(nx, &o, o.counts[i], &r);
		if (!r.rpcs)
			break; /* nothing measured (reported) */
		if (!i)
			first = r.rate;
		ratio = first > 0 ? r.rate / first : 0;
		printf("| %lu | %.2f | %.1f | %.1f | %.0f | %.0f | %lu | %llu | %.2f |\n",
		       r.sessions, r.connect_s, (double)r.rss_before / 1e6,
		       (double)r.rss_after / 1e6, r.bytes_per_session, r.rate, r.active,
		       (unsigned long long)r.retransmits, ratio);
		fflush(stdout);
		if (csv) {
			fprintf(csv, "%s,%lu,%.3f,%zu,%zu,%.0f,%lu,%.1f,%lu,%llu,%.4f\n",
				urpc_transport_str(o.cli.transport), r.sessions, r.connect_s,
				r.rss_before, r.rss_after, r.bytes_per_session, r.rpcs, r.rate,
				r.active, (unsigned long long)r.retransmits, ratio);
			fflush(csv);
		}
		fprintf(stderr, PROG ": %lu sessions: %.0f bytes each, %.0f RPCs/s\n", r.sessions,
			r.bytes_per_session, r.rate);
	}
	if (urpc_nexus_destroy(nx))
		status = 1;
out_csv:
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
	return status;
}
