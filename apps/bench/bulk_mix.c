/* SPDX-License-Identifier: MIT */
/*
 * urpc-bulk-mix: a small RPC beside a bulk transfer on the same session
 * (issue 32). One client session to one server Rpc (on a thread of its own
 * on udp and verbs): first SMALL-byte requests alone, one at a time, for
 * their idle round trip; then the same requests while the session also
 * keeps one BULK-byte request in flight (a descriptor the server READs
 * from the client's buffer, the large-message path), for their latency
 * beside it. Prints p50/p99 of both, p99 over the idle p50 (the issue's
 * goal: <= 5x), the client's retransmissions in each phase and the bulk's
 * throughput. Exit status 1 on a failure, not on a missed goal.
 *
 * Uses only <urpc/urpc.h>.
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

#define PROG "urpc-bulk-mix"
#define SMALL_MAX 1024
#define STALL_S 60.0

struct opts {
	struct bench_cli cli; /* --transport, --duration, --device, --server-device */
	size_t bulk;
	unsigned long small;
	unsigned long count;  /* small RPCs per phase */
	enum urpc_cc_algo cc; /* both Rpcs' congestion control (--cc) */
	unsigned long cc_target_us;
	bool cc_both; /* --cc both: off, then Swift, one after the other */
};

/* When the server's handler last saw a small request (ns, bench_now_s()): the split. */
static uint64_t handler_ns;

struct client {
	const struct opts *o;
	struct bench_server *sv;
	struct urpc_rpc *rpc;
	int session;
	struct bench_sm sm;
	struct urpc_msgbuf sreq, sresp, breq, bresp;
	bool sbusy, bbusy, bulk_on;
	double t_small, t_bulk;
	uint64_t *lat_ns;
	uint64_t *fwd_ns;  /* enqueue to the server's handler */
	uint64_t *back_ns; /* the handler to the continuation */
	unsigned long nlat;
	unsigned long bulks;
	double bulk_s;
	unsigned long errors;
	int first_error;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-bulk-mix - latency of small RPCs beside a bulk transfer on one session\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-bulk-mix [--transport loop|udp|verbs] [--bulk SIZE] [--small BYTES]\n"
		"                  [--count N] [--cc off|swift|both[:TARGET_US]] [--device DEV]\n"
		"                  [--server-device DEV]\n"
		"\n"
		"DESCRIPTION\n"
		"    Phase idle: N requests of BYTES (default 32), one at a time. Phase\n"
		"    bulk: the same N while one request of SIZE (default 64M) is kept in\n"
		"    flight on the same session, the server READing its payload. Prints\n"
		"    each phase's p50 and p99 in microseconds, the client's\n"
		"    retransmissions, p99 over the idle p50, and the bulk's MB/s; beside\n"
		"    the bulk, the same split at the server's handler: request (to the\n"
		"    handler) and answer (back to the client).\n"
		"\n"
		"OPTIONS\n"
		"    -b, --bulk SIZE    bulk request size, 64K to 256M (K, M suffixes)\n"
		"    -s, --small BYTES  small request size, 1 to %d\n"
		"    -n, --count N      small requests per phase, 10 to 10^7 (default 2000)\n"
		"    -c, --cc MODE      congestion control of both Rpcs: off (default), swift,\n"
		"                       or both (a run with each), swift and both optionally\n"
		"                       with :TARGET_US (1-100000, default 100)\n"
		"    -h, --help         this help\n",
		SMALL_MAX);
}

static int parse_bulk(const char *prog, const char *val, void *dst)
{
	size_t v;

	if (bench_parse_size(val, 65536, &v) || v > (256u << 20)) {
		fprintf(stderr, "%s: --bulk must be a size from 64K to 256M, got '%s'\n", prog,
			val);
		return -EINVAL;
	}
	*(size_t *)dst = v;
	return 0;
}

static int parse_cc(const char *prog, const char *val, void *dst)
{
	struct opts *o = dst;
	const char *p;
	char *end;
	unsigned long t = 100;

	o->cc_both = false;
	if (!strcmp(val, "off")) {
		o->cc = URPC_CC_OFF;
		return 0;
	}
	if (!strncmp(val, "both", 4) && (!val[4] || val[4] == ':')) {
		o->cc_both = true;
		p = val + 4;
	} else if (!strncmp(val, "swift", 5) && (!val[5] || val[5] == ':')) {
		p = val + 5;
	} else {
		goto bad;
	}
	if (*p) {
		t = strtoul(p + 1, &end, 10);
		if (end == p + 1 || *end || !t || t > 100000)
			goto bad;
	}
	o->cc = URPC_CC_SWIFT;
	o->cc_target_us = t;
	return 0;
bad:
	fprintf(stderr,
		"%s: --cc must be off, swift[:TARGET_US] or both[:TARGET_US] (1-100000), "
		"got '%s'\n",
		prog, val);
	return -EINVAL;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_FN("cc", 'c', o, parse_cc)},
		{URPC_APP_FN("bulk", 'b', &o->bulk, parse_bulk)},
		{URPC_APP_ULONG("small", 's', &o->small, 1, SMALL_MAX)},
		{URPC_APP_ULONG("count", 'n', &o->count, 10, 10000000ul)},
	};

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->cli.transport = URPC_TRANSPORT_UDP;
	o->bulk = 64u << 20;
	o->small = 32;
	o->count = 2000;
	o->cc = URPC_CC_OFF;
	return bench_parse_args(PROG, argc, argv, &o->cli, BENCH_CLI_TRANSPORT | BENCH_CLI_DEVICES,
				own, URPC_APP_NOPTS(own), usage);
}

/* Echo a small request; answer a bulk one with its length (8 B). */
static void handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	const uint8_t *d;
	uint64_t n;
	size_t len;

	(void)arg;
	d = urpc_req_data(h, &len);
	if (len <= SMALL_MAX) {
		__atomic_store_n(&handler_ns, (uint64_t)(bench_now_s() * 1e9), __ATOMIC_RELEASE);
		memcpy(resp->buf, d, len);
		urpc_msgbuf_resize(resp, len);
	} else {
		n = len;
		memcpy(resp->buf, &n, sizeof(n));
		urpc_msgbuf_resize(resp, sizeof(n));
	}
	urpc_resp_enqueue(h, resp);
}

static void fail(struct client *c, int status)
{
	if (!c->errors++)
		c->first_error = status ? status : -EBADMSG;
}

static void small_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct client *c = tag;

	(void)rpc;
	c->sbusy = false;
	if (status || resp->data_size != c->o->small) {
		fail(c, status);
		return;
	}
	if (c->nlat < c->o->count) {
		uint64_t at = __atomic_load_n(&handler_ns, __ATOMIC_ACQUIRE);
		uint64_t t0 = (uint64_t)(c->t_small * 1e9);

		c->fwd_ns[c->nlat] = at > t0 ? at - t0 : 0;
		c->lat_ns[c->nlat++] = (uint64_t)((bench_now_s() - c->t_small) * 1e9);
	}
}

static void bulk_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct client *c = tag;
	uint64_t n = 0;

	(void)rpc;
	c->bbusy = false;
	if (!status && resp->data_size == sizeof(n))
		memcpy(&n, resp->buf, sizeof(n));
	if (status || n != c->o->bulk) {
		fail(c, status);
		return;
	}
	c->bulks++;
	c->bulk_s += bench_now_s() - c->t_bulk;
}

/* Run one phase: count small RPCs, one at a time, beside a bulk one when @bulk. */
static int phase(struct client *c, bool bulk)
{
	double t_seen = bench_now_s();
	unsigned long seen = 0;
	int ret;

	c->nlat = 0;
	c->bulk_on = bulk;
	while (c->nlat < c->o->count || c->sbusy || c->bbusy) {
		if (c->errors) {
			if (!c->sbusy && !c->bbusy)
				break;
		} else {
			if (c->bulk_on && !c->bbusy && c->nlat < c->o->count) {
				c->t_bulk = bench_now_s();
				c->bbusy = true;
				ret = urpc_req_enqueue(c->rpc, c->session, BENCH_REQ_TYPE, &c->breq,
						       &c->bresp, bulk_cont, c, 0);
				if (ret)
					c->bbusy = false;
			}
			/* beside a bulk transfer: only once it is in flight */
			if (!c->sbusy && c->nlat < c->o->count && (!bulk || c->bbusy)) {
				memset(c->sreq.buf, (int)(c->nlat & 0xff), c->o->small);
				c->t_small = bench_now_s();
				c->sbusy = true;
				ret = urpc_req_enqueue(c->rpc, c->session, BENCH_REQ_TYPE, &c->sreq,
						       &c->sresp, small_cont, c, 0);
				if (ret)
					c->sbusy = false;
			}
		}
		ret = bench_run_once(PROG, c->rpc, c->sv);
		if (ret)
			return ret;
		if (c->nlat != seen) {
			seen = c->nlat;
			t_seen = bench_now_s();
		} else if (bench_now_s() - t_seen > STALL_S) {
			fprintf(stderr, PROG ": nothing completed for %.0f s\n", STALL_S);
			return -ETIMEDOUT;
		}
	}
	if (c->errors) {
		fprintf(stderr, PROG ": %lu requests failed (first: %s)\n", c->errors,
			urpc_strerror(c->first_error));
		return c->first_error;
	}
	for (seen = 0; seen < c->nlat; seen++)
		c->back_ns[seen] =
			c->lat_ns[seen] > c->fwd_ns[seen] ? c->lat_ns[seen] - c->fwd_ns[seen] : 0;
	qsort(c->lat_ns, c->nlat, sizeof(c->lat_ns[0]), bench_cmp_u64);
	qsort(c->fwd_ns, c->nlat, sizeof(c->fwd_ns[0]), bench_cmp_u64);
	qsort(c->back_ns, c->nlat, sizeof(c->back_ns[0]), bench_cmp_u64);
	return 0;
}

static bool busy(const void *arg)
{
	const struct client *c = arg;

	return c->sbusy || c->bbusy;
}

static uint64_t retransmits(struct urpc_rpc *rpc)
{
	struct urpc_rpc_stats st;

	urpc_rpc_get_stats(rpc, &st);
	return st.retransmits;
}

static int run(struct client *c)
{
	double p50_idle, p90_idle, p99_idle, p50, p90, p99;
	uint64_t r0, r1, r2;
	int ret;

	r0 = retransmits(c->rpc);
	ret = phase(c, false);
	if (ret)
		return ret;
	r1 = retransmits(c->rpc);
	p50_idle = bench_quantile(c->lat_ns, c->nlat, 0.5) / 1e3;
	p90_idle = bench_quantile(c->lat_ns, c->nlat, 0.9) / 1e3;
	p99_idle = bench_quantile(c->lat_ns, c->nlat, 0.99) / 1e3;
	ret = phase(c, true);
	if (ret)
		return ret;
	r2 = retransmits(c->rpc);
	p50 = bench_quantile(c->lat_ns, c->nlat, 0.5) / 1e3;
	p90 = bench_quantile(c->lat_ns, c->nlat, 0.9) / 1e3;
	p99 = bench_quantile(c->lat_ns, c->nlat, 0.99) / 1e3;
	printf("| phase | small RPCs | p50 us | p90 us | p99 us | p99 / idle p50 | retx | bulk MB/s "
	       "|\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
	printf("| idle | %lu | %.1f | %.1f | %.1f | %.1f | %llu | |\n", c->o->count, p50_idle,
	       p90_idle, p99_idle, p99_idle / p50_idle, (unsigned long long)(r1 - r0));
	printf("| beside %zu MiB | %lu | %.1f | %.1f | %.1f | %.1f | %llu | %.1f |\n",
	       c->o->bulk >> 20, c->o->count, p50, p90, p99, p99 / p50_idle,
	       (unsigned long long)(r2 - r1),
	       c->bulk_s > 0 ? c->bulks * (double)c->o->bulk / c->bulk_s / 1e6 : 0.0);
	printf(PROG ": beside the bulk, to the server's handler p50 %.1f us p99 %.1f us, back "
		    "p50 %.1f us p99 %.1f us\n",
	       bench_quantile(c->fwd_ns, c->nlat, 0.5) / 1e3,
	       bench_quantile(c->fwd_ns, c->nlat, 0.99) / 1e3,
	       bench_quantile(c->back_ns, c->nlat, 0.5) / 1e3,
	       bench_quantile(c->back_ns, c->nlat, 0.99) / 1e3);
	printf(PROG ": congestion control %s", urpc_cc_algo_str(c->o->cc));
	if (c->o->cc == URPC_CC_SWIFT)
		printf(", target %lu us", c->o->cc_target_us);
	printf("\n" PROG ": %lu bulk requests completed\n", c->bulks);
	bench_print_session_stats(PROG, c->rpc, c->session);
	return 0;
}

/* One run with both Rpcs' congestion control @cc: set up, the two phases, tear down. 0 or 1. */
static int one_mode(struct client *c, struct opts *o, enum urpc_cc_algo cc)
{
	struct bench_server bsv;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	int ret, status = 1;

	memset(&bsv, 0, sizeof(bsv));
	o->cc = cc;
	c->sv = &bsv;
	c->sbusy = c->bbusy = c->bulk_on = false;
	c->bulks = 0;
	c->bulk_s = 0;
	c->errors = 0;
	memset(&c->sm, 0, sizeof(c->sm));
	if (bench_nexus_open(PROG, handler, NULL, &nx))
		return 1;
	bsv.nx = nx;
	bench_rpc_opts(&bsv.ro, o->cli.transport);
	bsv.ro.device = o->cli.server_device;
	bsv.ro.peer_timeout_ms = 10000;
	bsv.ro.cc_algo = cc;
	bsv.ro.cc_target_us = (uint32_t)o->cc_target_us;
	bsv.threaded = o->cli.transport != URPC_TRANSPORT_LOOP;
	bench_rpc_opts(&ro, o->cli.transport);
	ro.peer_timeout_ms = 10000;
	ro.cc_algo = cc;
	ro.cc_target_us = (uint32_t)o->cc_target_us;
	if (bench_rpcs_create(PROG, &bsv, &ro, o->cli.device, &c->sm, "server", "client", &c->rpc))
		goto out_nexus;
	ret = bench_connect(PROG, c->rpc, &bsv, &c->sm, &c->session, 1);
	if (ret) {
		fprintf(stderr, PROG ": cannot connect: %s\n", urpc_strerror(ret));
		goto out_cli;
	}
	if (urpc_msgbuf_alloc(c->rpc, o->small, &c->sreq) ||
	    urpc_msgbuf_alloc(c->rpc, o->small, &c->sresp) ||
	    urpc_msgbuf_alloc(c->rpc, o->bulk, &c->breq) ||
	    urpc_msgbuf_alloc(c->rpc, 64, &c->bresp)) {
		fprintf(stderr, PROG ": cannot allocate the buffers\n");
		goto out_cli;
	}
	memset(c->breq.buf, 0xa5, o->bulk);
	if (!run(c))
		status = 0;
	if (!urpc_session_disconnect(c->rpc, c->session))
		bench_drain(PROG, c->rpc, &bsv, &c->sm, 1, busy, c);
	urpc_msgbuf_free(c->rpc, &c->sreq);
	urpc_msgbuf_free(c->rpc, &c->sresp);
	urpc_msgbuf_free(c->rpc, &c->breq);
	urpc_msgbuf_free(c->rpc, &c->bresp);
out_cli:
	if (urpc_rpc_destroy(c->rpc))
		status = 1;
	if (bench_server_stop(PROG, &bsv))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
	return status;
}

int main(int argc, char **argv)
{
	static struct client c;
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	c.o = &o;
	c.lat_ns = calloc(o.count, sizeof(*c.lat_ns));
	c.fwd_ns = calloc(o.count, sizeof(*c.fwd_ns));
	c.back_ns = calloc(o.count, sizeof(*c.back_ns));
	if (c.lat_ns && c.fwd_ns && c.back_ns) {
		status = one_mode(&c, &o, o.cc_both ? URPC_CC_OFF : o.cc);
		if (!status && o.cc_both)
			status = one_mode(&c, &o, URPC_CC_SWIFT);
	}
	free(c.lat_ns);
	free(c.fwd_ns);
	free(c.back_ns);
	return status;
}
