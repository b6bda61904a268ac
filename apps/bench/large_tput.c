/* SPDX-License-Identifier: MIT */
/*
 * urpc-large-tput: bandwidth of large messages (64 KiB to 16 MiB by
 * default), one direction at a time, with a single-thread memcpy bound
 * measured in the same run as the baseline.
 *
 * A server Rpc and a client Rpc live in this one process and talk over the
 * chosen transport. With --direction req (the default) the client sends
 * SIZE-byte requests, which travel as descriptors the server READs, and
 * gets 16-byte answers; with --direction resp it sends 16-byte requests and
 * the handler answers SIZE bytes from a buffer of its own, which the client
 * READs. WINDOW requests are kept outstanding on one session.
 *
 * Threads: on loop both Rpcs share the main thread (its endpoints must) and
 * one loop drives both with urpc_rpc_run_event_loop_once(). On udp and
 * verbs, real transports, the server Rpc runs urpc_rpc_run_event_loop() in
 * a thread of its own by default, as a server process would: the two sides'
 * work overlaps on two cores instead of adding up on one, and neither
 * side's polling waits for the other's. --threads 1 gives the one-thread
 * arrangement there too, for comparison: where cores are scarce (a 2-vCPU
 * VM whose kernel also runs Soft-RoCE), two spinning threads can cost more
 * than they overlap.
 *
 * Uses only <urpc/urpc.h>.
 */
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
#include "bench_common.h"

#define PROG "urpc-large-tput"

#define SMALL_SIZE 16	    /* the small side: sequence number and a size */
#define MIN_SIZE SMALL_SIZE /* a large message carries its number at both ends */
#define MAX_SIZES 32
#define MAX_WINDOW 64 /* one session holds 8 in slots, the rest queue */
#define STALL_S 60.0  /* no completion for this long: give up */
#define DEFAULT_SIZES "64K,256K,1M,4M,16M"

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, --server-device, --csv */
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
	unsigned long window;
	unsigned long count; /* 0: run for @duration */
	bool resp_dir;	     /* --direction resp */
	unsigned threads;
	double memcpy_s;
	unsigned long rto_us; /* 0: the library's default */
};

/* The handler's view of the server, on the server Rpc's owner thread. */
struct server {
	const struct opts *o;
	atomic_ulong handled;
	atomic_ulong bad_reqs;
	atomic_ulong alloc_failures;
};

struct client;

struct slot {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct client *c;
	uint64_t seq;
	double t_enq;
	bool busy;
};

/* Client side, and the state of the size being measured. */
struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	int session;
	struct bench_sm sm; /* its sm_handler's counts */
	struct slot slots[MAX_WINDOW];
	unsigned nslots; /* slots with buffers */
	size_t size;
	uint64_t next_seq;
	unsigned long issued;
	unsigned long completed;
	unsigned long errors;
	int first_error;
	double t_last; /* time of the last completion */
	/* measurement: completions after the warm-up, up to t_end */
	unsigned long warm; /* completions before t0 */
	bool measuring;
	bool done;
	double t0;
	double t_end;
	unsigned long c0;
	unsigned long n;
	double lat_sum;
};

struct result {
	size_t size;
	unsigned long msgs;
	double secs;
	double msgs_per_s;
	double mb_per_s;
	double memcpy_mb_per_s;
	double avg_lat_us;
	uint64_t retransmits;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-large-tput - bandwidth of large urpc messages next to a memcpy bound\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-large-tput [--transport loop|udp|verbs] [--sizes LIST] [--window W]\n"
		"                    [--duration SEC | --count N] [--direction req|resp]\n"
		"                    [--threads 1|2] [--device DEV] [--server-device DEV]\n"
		"                    [--memcpy-time SEC] [--rto-us US] [--csv FILE]\n"
		"    urpc-large-tput --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this process, connected by one\n"
		"    session over the chosen transport, and measures for each message size\n"
		"    how many messages per second and how many bytes per second move in one\n"
		"    direction, with W requests outstanding.\n"
		"\n"
		"    --direction req: the client sends SIZE-byte requests and gets 16-byte\n"
		"    answers. Above urpc_rpc_max_msg_size() a request travels as a\n"
		"    descriptor and the server READs the payload from the client's buffer.\n"
		"    --direction resp: 16-byte requests, SIZE-byte answers from a buffer the\n"
		"    handler allocates (urpc_msgbuf_alloc), which the client READs.\n"
		"    Neither side touches the payload beyond a sequence number at both ends,\n"
		"    which is checked, so the figure is the engine's and the transport's.\n"
		"\n"
		"    Each size first completes W messages (warm-up, not counted). The\n"
		"    measurement then runs from that last warm-up completion to the first\n"
		"    completion after SEC seconds (or the N-th completion): messages\n"
		"    completed in between, over that time, with the window kept full.\n"
		"\n"
		"    As the baseline, the same run measures a single-thread memcpy() of SIZE\n"
		"    bytes between two buffers of this process (the bound for a transport\n"
		"    that copies once on one core) and prints urpc's MB/s as a fraction of\n"
		"    it.\n"
		"\n"
		"    On loop both Rpcs run in the main thread (the transport requires it),\n"
		"    one event loop pass each in turn. On udp and verbs the server Rpc runs\n"
		"    urpc_rpc_run_event_loop() in a second thread by default, as a separate\n"
		"    server would, so both sides' work overlaps instead of adding up.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default: the library's, URPC_TRANSPORT, else\n"
		"        verbs on an active RDMA port, else udp). verbs needs an active RDMA\n"
		"        port (Soft-RoCE: see tests/vm/rxe-vm.sh).\n"
		"    -s, --sizes LIST\n"
		"        Comma-separated message sizes in bytes, with an optional K or M\n"
		"        suffix (KiB, MiB: 64K = 65536), each from %d to 64M\n"
		"        (default " DEFAULT_SIZES ").\n"
		"    -w, --window W\n"
		"        Requests outstanding at once, 1 to %d (default 4). A session keeps\n"
		"        8 in flight; the rest wait in its queue.\n"
		"    -d, --duration SEC\n"
		"        Seconds to measure per size, 0.01 to 3600 (default 2).\n"
		"    -n, --count N\n"
		"        Measure N messages per size instead of a duration.\n"
		"    -D, --direction req|resp\n"
		"        Which side carries SIZE bytes (default req: client to server).\n"
		"    -T, --threads 1|2\n"
		"        1: both Rpcs in the main thread; 2: the server Rpc in its own\n"
		"        thread. Default 1 on loop (the only choice there), 2 otherwise.\n"
		"    --device DEV\n"
		"        verbs: the client's RDMA device (\"rxe1\", \"mlx5_0:1\"); default\n"
		"        URPC_DEVICE, else the first active port.\n"
		"    --server-device DEV\n"
		"        verbs: the server's RDMA device; default as --device.\n"
		"    --memcpy-time SEC\n"
		"        Seconds the memcpy bound runs per size, 0.01 to 60 (default 0.25).\n"
		"    --rto-us US\n"
		"        First retransmission timeout of both Rpcs, in microseconds\n"
		"        (default: the library's). The retx column counts the client's.\n"
		"    --csv FILE\n"
		"        Also write one row per size to FILE (overwritten), with a header.\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout, one row per\n"
		"    size: messages measured, messages/s, MB/s (10^6 bytes of payload per\n"
		"    second), the memcpy bound in MB/s, urpc/memcpy, the mean time from\n"
		"    enqueue to continuation, and the client's retransmissions. A progress\n"
		"    line per size goes to stderr. CSV columns: transport, direction, size,\n"
		"    window, threads, messages, seconds, msgs_per_s, mb_per_s,\n"
		"    memcpy_mb_per_s, ratio_memcpy, avg_lat_us, retransmits.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step fails, a request fails or comes back\n"
		"    wrong, or nothing completes for %.0f s; 2 on bad usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-large-tput --transport udp --sizes 64K,1M --duration 1\n"
		"    urpc-large-tput --transport udp --direction resp --csv udp.csv\n"
		"    urpc-large-tput --transport verbs --device rxe1 --server-device rxe0\n",
		MIN_SIZE, MAX_WINDOW, STALL_S);
}

/* ---- option parsing -------------------------------------------------------- */

static int parse_sizes(const char *prog, const char *list, void *dst)
{
	struct opts *o = dst;

	return bench_parse_sizes(prog, list, MIN_SIZE, o->sizes, MAX_SIZES, &o->nsizes);
}

static int parse_direction(const char *prog, const char *val, void *dst)
{
	if (strcmp(val, "req") && strcmp(val, "resp")) {
		fprintf(stderr, "%s: --direction must be req or resp, got '%s'\n", prog, val);
		return -EINVAL;
	}
	*(bool *)dst = !strcmp(val, "resp");
	return 0;
}

static int parse_threads(const char *prog, const char *val, void *dst)
{
	unsigned long v;

	if (urpc_app_parse_ulong(prog, val, "--threads", 1, 2, &v))
		return -EINVAL;
	*(unsigned *)dst = (unsigned)v;
	return 0;
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_FN("sizes", 's', o, parse_sizes)},
		{URPC_APP_ULONG("window", 'w', &o->window, 1, MAX_WINDOW)},
		{URPC_APP_ULONG("count", 'n', &o->count, 1, 1000000000ul)},
		{URPC_APP_FN("direction", 'D', &o->resp_dir, parse_direction)},
		{URPC_APP_FN("threads", 'T', &o->threads, parse_threads)},
		{URPC_APP_SECONDS("memcpy-time", 0, &o->memcpy_s, 0.01, 60)},
		{URPC_APP_ULONG("rto-us", 0, &o->rto_us, 100, 10000000ul)},
	};
	int ret;

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->window = 4;
	o->memcpy_s = 0.25;
	if (parse_sizes(PROG, DEFAULT_SIZES, o))
		return 2;
	ret = bench_parse_args(PROG, argc, argv, &o->cli,
			       BENCH_CLI_TRANSPORT | BENCH_CLI_DURATION | BENCH_CLI_DEVICES |
				       BENCH_CLI_CSV,
			       own, URPC_APP_NOPTS(own), usage);
	if (ret)
		return ret;
	if (o->cli.duration_set && o->count) {
		fprintf(stderr, PROG ": give --duration or --count, not both\n");
		return 2;
	}
	if (o->cli.transport == URPC_TRANSPORT_LOOP && o->threads == 2) {
		fprintf(stderr, PROG ": --threads 2 needs udp or verbs: the loop transport's "
				     "endpoints must share one thread\n");
		return 2;
	}
	if (!o->threads)
		o->threads = o->cli.transport == URPC_TRANSPORT_LOOP ? 1 : 2;
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

/* "64 KiB", "16 MiB", or bytes when neither divides. */
static const char *size_str(size_t size, char *buf, size_t len)
{
	if (size >= (1u << 20) && !(size % (1u << 20)))
		snprintf(buf, len, "%zu MiB", size >> 20);
	else if (size >= (1u << 10) && !(size % (1u << 10)))
		snprintf(buf, len, "%zu KiB", size >> 10);
	else
		snprintf(buf, len, "%zu B", size);
	return buf;
}

static void put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* A large message carries its sequence number in its first and last 8 bytes. */
static void stamp(uint8_t *buf, size_t len, uint64_t seq)
{
	put_u64(buf, seq);
	put_u64(buf + len - 8, seq);
}

static bool stamp_is(const uint8_t *buf, size_t len, uint64_t seq)
{
	return get_u64(buf) == seq && get_u64(buf + len - 8) == seq;
}

static void rpc_opts(const struct opts *o, const char *device, struct urpc_rpc_opts *ro)
{
	urpc_rpc_opts_init(ro);
	ro->transport = o->cli.transport;
	ro->device = device;
	if (o->rto_us) {
		ro->rto_us = (uint32_t)o->rto_us;
		if (ro->rto_max_us < ro->rto_us)
			ro->rto_max_us = ro->rto_us;
	}
	/*
	 * One 16 MiB READ takes half a second on Soft-RoCE under emulation, and
	 * a vCPU can stall for milliseconds: keep the failure detectors far off.
	 */
	ro->peer_timeout_ms = 10000;
	ro->connect_timeout_ms = (uint32_t)(BENCH_SETUP_S * 1000);
}

/* ---- server ----------------------------------------------------------------- */

/*
 * req: check the request's stamps and answer its number and size (16 B).
 * resp: the request names a number and a size; answer that many bytes,
 * stamped, from a buffer of our own when they do not fit one datagram.
 */
static void handler(struct urpc_req_handle *h, void *arg)
{
	struct server *sv = arg;
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct urpc_msgbuf own, *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t seq, want;
	size_t len;

	atomic_fetch_add_explicit(&sv->handled, 1, memory_order_relaxed);
	d = urpc_req_data(h, &len);
	if (!sv->o->resp_dir) {
		seq = len >= MIN_SIZE ? get_u64(d) : UINT64_MAX;
		if (len < MIN_SIZE || !stamp_is(d, len, seq))
			atomic_fetch_add_explicit(&sv->bad_reqs, 1, memory_order_relaxed);
		put_u64(resp->buf, seq);
		put_u64(resp->buf + 8, len);
		urpc_msgbuf_resize(resp, SMALL_SIZE);
		urpc_resp_enqueue(h, resp);
		return;
	}
	if (len != SMALL_SIZE) {
		atomic_fetch_add_explicit(&sv->bad_reqs, 1, memory_order_relaxed);
		urpc_msgbuf_resize(resp, 0);
		urpc_resp_enqueue(h, resp); /* the client sees a wrong size */
		return;
	}
	seq = get_u64(d);
	want = get_u64(d + 8);
	if (want > urpc_rpc_max_msg_size(rpc)) {
		if (urpc_msgbuf_alloc(rpc, (size_t)want, &own)) {
			atomic_fetch_add_explicit(&sv->alloc_failures, 1, memory_order_relaxed);
			urpc_msgbuf_resize(resp, 0);
			urpc_resp_enqueue(h, resp);
			return;
		}
		resp = &own;
	}
	urpc_msgbuf_resize(resp, (size_t)want);
	stamp(resp->buf, (size_t)want, seq);
	urpc_resp_enqueue(h, resp);
}

/* ---- client ----------------------------------------------------------------- */

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct slot *s = tag;
	struct client *c = s->c;
	double t = bench_now_s();
	bool ok;

	s->busy = false;
	c->completed++;
	c->t_last = t;
	if (c->o->resp_dir)
		ok = !status && resp->data_size == c->size && stamp_is(resp->buf, c->size, s->seq);
	else
		ok = !status && resp->data_size == SMALL_SIZE && get_u64(resp->buf) == s->seq &&
		     get_u64(resp->buf + 8) == c->size;
	if (!ok) {
		if (!c->errors)
			c->first_error = status ? status : -EBADMSG;
		c->errors++;
	}
	if (c->done)
		return;
	if (!c->measuring) {
		if (c->completed == c->warm) {
			c->measuring = true;
			c->t0 = t;
			c->c0 = c->completed;
		}
		return;
	}
	c->lat_sum += t - s->t_enq;
	if ((c->o->count && c->completed - c->c0 >= c->o->count) ||
	    (!c->o->count && t - c->t0 >= c->o->cli.duration)) {
		c->done = true;
		c->t_end = t;
		c->n = c->completed - c->c0;
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

static void free_slots(struct client *c)
{
	unsigned i;

	for (i = 0; i < c->nslots; i++) {
		if (c->slots[i].busy)
			continue; /* still lent to the engine: destroy will say -EBUSY */
		urpc_msgbuf_free(c->rpc, &c->slots[i].req);
		urpc_msgbuf_free(c->rpc, &c->slots[i].resp);
	}
	c->nslots = 0;
}

/* Buffers for @size: the large side is written once, so its pages exist. */
static int alloc_slots(struct client *c, size_t size)
{
	size_t req_len = c->o->resp_dir ? SMALL_SIZE : size;
	size_t resp_len = c->o->resp_dir ? size : SMALL_SIZE;
	char sz[32];
	int ret;

	for (c->nslots = 0; c->nslots < c->o->window; c->nslots++) {
		struct slot *s = &c->slots[c->nslots];

		memset(s, 0, sizeof(*s));
		s->c = c;
		ret = urpc_msgbuf_alloc(c->rpc, req_len, &s->req);
		if (ret)
			goto fail;
		ret = urpc_msgbuf_alloc(c->rpc, resp_len, &s->resp);
		if (ret) {
			urpc_msgbuf_free(c->rpc, &s->req);
			goto fail;
		}
		memset(s->req.buf, 0xa5, req_len);
		memset(s->resp.buf, 0x5a, resp_len);
	}
	return 0;

fail:
	fprintf(stderr, PROG ": cannot allocate %lu buffers of %s: %s\n", c->o->window,
		size_str(size, sz, sizeof(sz)), urpc_strerror(ret));
	free_slots(c);
	return ret;
}

static int issue(struct client *c, struct slot *s)
{
	int ret;

	s->seq = c->next_seq++;
	if (c->o->resp_dir) {
		put_u64(s->req.buf, s->seq);
		put_u64(s->req.buf + 8, c->size);
	} else {
		stamp(s->req.buf, c->size, s->seq);
	}
	s->busy = true;
	s->t_enq = bench_now_s();
	ret = urpc_req_enqueue(c->rpc, c->session, BENCH_REQ_TYPE, &s->req, &s->resp, cont, s, 0);
	if (ret) {
		s->busy = false;
		return ret;
	}
	c->issued++;
	return 0;
}

/* Keep the window full until the measurement is done, then drain it. */
static int measure(struct client *c, size_t size)
{
	unsigned long seen = 0;
	double t_seen = bench_now_s();
	char sz[32];
	unsigned i;
	int ret;

	c->size = size;
	c->issued = c->completed = c->errors = 0;
	c->first_error = 0;
	c->warm = c->o->window;
	c->measuring = c->done = false;
	c->n = 0;
	c->lat_sum = 0;
	while (!c->done || any_busy(c)) {
		for (i = 0; i < c->nslots && !c->done && !c->errors; i++) {
			if (c->slots[i].busy)
				continue;
			ret = issue(c, &c->slots[i]);
			if (ret == -EAGAIN)
				break; /* the session's queue is full: poll, then retry */
			if (ret) {
				fprintf(stderr, PROG ": enqueue of %s: %s\n",
					size_str(size, sz, sizeof(sz)), urpc_strerror(ret));
				return ret;
			}
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
		if (c->errors && !any_busy(c))
			break;
		if (c->completed != seen) {
			seen = c->completed;
			t_seen = c->t_last;
		} else if (bench_now_s() - t_seen > STALL_S) {
			fprintf(stderr, PROG ": %s: no message completed for %.0f s\n",
				size_str(size, sz, sizeof(sz)), STALL_S);
			return -ETIMEDOUT;
		}
	}
	if (c->errors) {
		fprintf(stderr,
			PROG ": %s: %lu of %lu requests failed or came back wrong (first: %s)\n",
			size_str(size, sz, sizeof(sz)), c->errors, c->completed,
			urpc_strerror(c->first_error));
		return -EIO;
	}
	return 0;
}

/* ---- the memcpy bound ------------------------------------------------------- */

/* MB/s of memcpy() of @size bytes between two warm buffers, for about @secs. */
static double memcpy_bound(size_t size, double secs)
{
	unsigned long iters = 0;
	uint8_t *src, *dst;
	double t0, t;

	src = malloc(size);
	dst = malloc(size);
	if (!src || !dst) {
		free(src);
		free(dst);
		return 0;
	}
	memset(src, 0xa5, size);
	memset(dst, 0x5a, size);
	memcpy(dst, src, size); /* warm */
	t0 = bench_now_s();
	do {
		memcpy(iters % 2 ? src : dst, iters % 2 ? dst : src, size);
		__asm__ __volatile__("" : : "r"(src), "r"(dst) : "memory");
		iters++;
		t = bench_now_s();
	} while (t - t0 < secs || iters < 3);
	free(src);
	free(dst);
	return (double)size * (double)iters / (t - t0) / 1e6;
}

/* ---- main ------------------------------------------------------------------- */

static void print_header(const struct client *c)
{
	const struct opts *o = c->o;

	printf("%s: transport %s, direction %s, window %lu, %u thread%s, datagram limit %zu B",
	       PROG, urpc_transport_str(o->cli.transport),
	       o->resp_dir ? "resp (server -> client, the client READs)"
			   : "req (client -> server, the server READs)",
	       o->window, o->threads, o->threads > 1 ? "s" : "", urpc_rpc_max_msg_size(c->rpc));
	if (o->count)
		printf(", %lu messages per size\n", o->count);
	else
		printf(", %g s per size\n", o->cli.duration);
	printf("\n| size | messages | msgs/s | MB/s | memcpy MB/s | urpc/memcpy | avg latency us "
	       "| retx |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	fflush(stdout);
}

static void print_row(const struct result *r, FILE *csv, const struct opts *o)
{
	double ratio = r->memcpy_mb_per_s > 0 ? r->mb_per_s / r->memcpy_mb_per_s : 0;
	char sz[32];

	printf("| %s | %lu | %.1f | %.1f | %.0f | %.3f | %.0f | %llu |\n",
	       size_str(r->size, sz, sizeof(sz)), r->msgs, r->msgs_per_s, r->mb_per_s,
	       r->memcpy_mb_per_s, ratio, r->avg_lat_us, (unsigned long long)r->retransmits);
	fflush(stdout);
	if (csv) {
		fprintf(csv, "%s,%s,%zu,%lu,%u,%lu,%.6f,%.3f,%.3f,%.3f,%.5f,%.1f,%llu\n",
			urpc_transport_str(o->cli.transport), o->resp_dir ? "resp" : "req", r->size,
			o->window, o->threads, r->msgs, r->secs, r->msgs_per_s, r->mb_per_s,
			r->memcpy_mb_per_s, ratio, r->avg_lat_us,
			(unsigned long long)r->retransmits);
		fflush(csv);
	}
	fprintf(stderr, PROG ": %s: %lu messages in %.2f s, %.1f MB/s (memcpy %.0f MB/s, %.3fx)\n",
		size_str(r->size, sz, sizeof(sz)), r->msgs, r->secs, r->mb_per_s,
		r->memcpy_mb_per_s, ratio);
}

/* Every size in turn; 0 or -errno (reported). */
static int run_sizes(struct client *c, FILE *csv)
{
	const struct opts *o = c->o;
	struct urpc_rpc_stats before, after;
	struct result r;
	unsigned i;
	int ret;

	for (i = 0; i < o->nsizes; i++) {
		memset(&r, 0, sizeof(r));
		r.size = o->sizes[i];
		ret = alloc_slots(c, r.size);
		if (ret)
			return ret;
		urpc_rpc_get_stats(c->rpc, &before);
		ret = measure(c, r.size);
		urpc_rpc_get_stats(c->rpc, &after);
		free_slots(c);
		if (ret)
			return ret;
		r.msgs = c->n;
		r.secs = c->t_end - c->t0;
		r.msgs_per_s = r.secs > 0 ? (double)r.msgs / r.secs : 0;
		r.mb_per_s = r.msgs_per_s * (double)r.size / 1e6;
		r.avg_lat_us = r.msgs ? c->lat_sum / (double)r.msgs * 1e6 : 0;
		r.retransmits = after.retransmits - before.retransmits;
		r.memcpy_mb_per_s = memcpy_bound(r.size, o->memcpy_s);
		print_row(&r, csv, o);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct client c; /* large: the slots */
	struct bench_server bsv;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct server sv;
	FILE *csv = NULL;
	char srv_what[96], cli_what[96];
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (bench_file_open(PROG, "--csv", o.cli.csv,
			    "transport,direction,size,window,threads,messages,seconds,msgs_per_s,"
			    "mb_per_s,memcpy_mb_per_s,ratio_memcpy,avg_lat_us,retransmits\n",
			    &csv))
		return 1;

	memset(&sv, 0, sizeof(sv));
	memset(&bsv, 0, sizeof(bsv));
	sv.o = &o;
	c.o = &o;
	c.sv = &bsv;
	if (bench_nexus_open(PROG, handler, &sv, &nx))
		goto out_csv;
	bsv.nx = nx;
	rpc_opts(&o, o.cli.server_device, &bsv.ro);
	bsv.threaded = o.threads == 2;
	rpc_opts(&o, NULL, &ro);
	snprintf(srv_what, sizeof(srv_what), "%s%s%s", urpc_transport_str(o.cli.transport),
		 o.cli.server_device ? ", device " : "",
		 o.cli.server_device ? o.cli.server_device : "");
	snprintf(cli_what, sizeof(cli_what), "%s%s%s", urpc_transport_str(o.cli.transport),
		 o.cli.device ? ", device " : "", o.cli.device ? o.cli.device : "");
	if (bench_rpcs_create(PROG, &bsv, &ro, o.cli.device, &c.sm, srv_what, cli_what, &c.rpc))
		goto out_nexus;
	ret = bench_connect(PROG, c.rpc, &bsv, &c.sm, &c.session, 1);
	if (ret) {
		fprintf(stderr, PROG ": cannot connect the client to the server: %s\n",
			urpc_strerror(ret));
		goto out_cli;
	}

	print_header(&c);
	if (!run_sizes(&c, csv))
		status = 0;

	/* Close the session; pending requests fail and give their buffers back. */
	if (!urpc_session_disconnect(c.rpc, c.session))
		bench_drain(PROG, c.rpc, &bsv, &c.sm, 1, any_busy, &c);
	free_slots(&c);
out_cli:
	if (urpc_rpc_destroy(c.rpc)) {
		fprintf(stderr, PROG ": cannot destroy the client Rpc\n");
		status = 1;
	}
	if (bench_server_stop(PROG, &bsv))
		status = 1;
	if (!status) {
		unsigned long bad = atomic_load(&sv.bad_reqs);
		unsigned long nomem = atomic_load(&sv.alloc_failures);

		if (bad || nomem) {
			fprintf(stderr,
				PROG ": the server saw %lu bad requests, %lu failed allocations\n",
				bad, nomem);
			status = 1;
		}
	}
	fprintf(stderr,
		PROG ": server handled %lu requests (%llu duplicates), slept %llu times, "
		     "%llu large responses retired before their client let go\n",
		atomic_load(&sv.handled), (unsigned long long)bsv.st.dup_reqs,
		(unsigned long long)bsv.st.idle_sleeps, (unsigned long long)bsv.st.resps_retiring);
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
out_csv:
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
	return status;
}
