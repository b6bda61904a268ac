/* SPDX-License-Identifier: MIT */
/*
 * urpc-demo: ping-pong datagrams between two endpoints of one transport, then
 * move a large buffer with one-sided READ and WRITE, verifying every byte.
 * It drives the transport layer directly (the Rpc engine is not there yet).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"

#define PROG "urpc-demo"

#include "transport/transport.h"
#include "util/log.h"

struct opts {
	enum urpc_transport_kind kind;
	unsigned long count;
	unsigned long size;
	unsigned long bulk_mib;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: urpc-demo [OPTIONS]\n"
		"\n"
		"Ping-pong small datagrams between two endpoints of one urpc transport in this\n"
		"process, then move a large buffer with one-sided READ and WRITE and verify it.\n"
		"\n"
		"Options:\n"
		"  -t, --transport NAME  udp (default) or loop; URPC_TRANSPORT is ignored here\n"
		"  -n, --count N         round trips to run (default 100000)\n"
		"  -s, --size BYTES      payload of each datagram, up to the MTU (default 32)\n"
		"  -b, --bulk MIB        size of the one-sided transfer in MiB, 0 to skip (default 8)\n"
		"  -h, --help            show this help\n"
		"\n"
		"Exit status: 0 on success, 1 on a failed transfer or verification, 2 on bad usage.\n");
}

/* --transport: this process holds both endpoints, so udp or loop. */
static int parse_transport(const char *prog, const char *val, void *dst)
{
	return urpc_app_parse_transport(prog, val,
					(1u << URPC_TRANSPORT_UDP) | (1u << URPC_TRANSPORT_LOOP),
					"udp or loop", "", dst);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_FN("transport", 't', &o->kind, parse_transport)},
		{URPC_APP_ULONG("count", 'n', &o->count, 0, 1e9)},
		{URPC_APP_ULONG("size", 's', &o->size, 0, 65536)},
		{URPC_APP_ULONG("bulk", 'b', &o->bulk_mib, 0, 1024)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts)};

	o->kind = URPC_TRANSPORT_UDP;
	o->count = 100000;
	o->size = 32;
	o->bulk_mib = 8;
	return urpc_app_parse_args(&cl, argc, argv, NULL);
}

struct side {
	struct urpc_tp *tp;
	struct urpc_tp_peer *peer;
};

/* Receive one datagram on @s within @timeout_ns, polling @other so it serves. */
static int recv_one(struct side *s, struct side *other, uint8_t *out, uint32_t *len,
		    uint64_t timeout_ns)
{
	uint64_t deadline = urpc__now_ns() + timeout_ns;
	struct urpc_tp_rx rx;
	struct urpc_tp_comp comp;

	for (;;) {
		if (s->tp->ops->rx_burst(s->tp, &rx, 1) == 1) {
			memcpy(out, rx.buf, rx.len);
			*len = rx.len;
			s->tp->ops->rx_release(s->tp, &rx, 1);
			return 0;
		}
		other->tp->ops->poll_completions(other->tp, &comp, 1);
		if (urpc__now_ns() > deadline)
			return -ETIMEDOUT;
	}
}

static int send_one(struct side *s, const void *buf, uint32_t len)
{
	struct urpc_tp_tx tx = {.peer = s->peer, .hdr = buf, .hdr_len = len};
	int ret;

	do
		ret = s->tp->ops->tx_burst(s->tp, &tx, 1);
	while (ret == 0);
	return ret < 0 ? ret : 0;
}

static int pingpong(struct side *cli, struct side *srv, const struct opts *o)
{
	uint8_t *msg = calloc(1, o->size + 8), *in = calloc(1, 65536 + 64);
	uint64_t start = urpc__now_ns(), last = start, retries = 0;
	unsigned long i;
	uint32_t len;
	int ret = 0;

	if (!msg || !in) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < o->count; i++) {
		memcpy(msg, &i, sizeof(i) < o->size ? sizeof(i) : o->size);
		ret = send_one(cli, msg, (uint32_t)o->size);
		if (!ret)
			ret = recv_one(srv, cli, in, &len, 200000000ull);
		if (!ret)
			ret = send_one(srv, in, len);
		if (!ret)
			ret = recv_one(cli, srv, in, &len, 200000000ull);
		if (ret == -ETIMEDOUT && retries < 100) {
			/* Datagrams may be lost: this demo simply tries again. */
			retries++;
			i--;
			continue;
		}
		if (ret)
			break;
		if (len != o->size || memcmp(in, msg, o->size)) {
			fprintf(stderr, "urpc-demo: round trip %lu came back corrupted\n", i);
			ret = -EIO;
			break;
		}
		if (urpc__now_ns() - last >= 1000000000ull) {
			last = urpc__now_ns();
			printf("  ... %lu/%lu round trips\n", i + 1, o->count);
			fflush(stdout);
		}
	}
	if (!ret && o->count) {
		double secs = (double)(urpc__now_ns() - start) / 1e9;

		printf("ping-pong: %lu round trips of %lu B in %.2f s: %.1f us per round trip, "
		       "%.0f round trips/s, %" PRIu64 " retried\n",
		       o->count, o->size, secs, secs * 1e6 / (double)o->count,
		       (double)o->count / secs, retries);
	}
out:
	free(msg);
	free(in);
	return ret;
}

/* One one-sided op from @cli against @srv's memory; waits for its completion. */
static int one_sided(struct side *cli, struct side *srv, enum urpc_tp_op op, void *local,
		     const struct urpc_tp_mr *lmr, const struct urpc_tp_mr *rmr, size_t len)
{
	struct urpc_tp_comp comp;
	struct urpc_tp_rx rx[16];
	int ret, n;

	if (op == URPC_TP_OP_READ)
		ret = cli->tp->ops->post_read(cli->tp, cli->peer, local, lmr,
					      (uint64_t)(uintptr_t)rmr->addr, rmr->rkey, len, 1);
	else
		ret = cli->tp->ops->post_write(cli->tp, cli->peer, local, lmr,
					       (uint64_t)(uintptr_t)rmr->addr, rmr->rkey, len, 1);
	if (ret)
		return ret;
	for (;;) {
		n = srv->tp->ops->rx_burst(srv->tp, rx, 16);
		if (n > 0)
			srv->tp->ops->rx_release(srv->tp, rx, (unsigned)n);
		srv->tp->ops->poll_completions(srv->tp, &comp, 1);
		if (cli->tp->ops->poll_completions(cli->tp, &comp, 1) == 1)
			return comp.status;
	}
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31u + seed);
}

static int bulk(struct side *cli, struct side *srv, const struct opts *o)
{
	size_t len = o->bulk_mib << 20;
	uint8_t *a = malloc(len), *b = malloc(len);
	struct urpc_tp_mr amr, bmr;
	uint64_t t0, t1, t2;
	int ret = -ENOMEM;

	if (!a || !b)
		goto out_free;
	ret = cli->tp->ops->reg_mem(cli->tp, a, len, 0, &amr);
	if (ret)
		goto out_free;
	ret = srv->tp->ops->reg_mem(srv->tp, b, len,
				    URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE, &bmr);
	if (ret)
		goto out_dereg_a;

	fill(a, len, 7);
	t0 = urpc__now_ns();
	ret = one_sided(cli, srv, URPC_TP_OP_WRITE, a, &amr, &bmr, len);
	t1 = urpc__now_ns();
	if (!ret && memcmp(a, b, len))
		ret = -EIO;
	if (!ret) {
		fill(b, len, 99);
		ret = one_sided(cli, srv, URPC_TP_OP_READ, a, &amr, &bmr, len);
	}
	t2 = urpc__now_ns();
	if (!ret && memcmp(a, b, len))
		ret = -EIO;
	if (!ret)
		printf("one-sided: WRITE %lu MiB at %.0f MB/s, READ at %.0f MB/s, contents verified\n",
		       o->bulk_mib, (double)len / ((double)(t1 - t0) / 1e3),
		       (double)len / ((double)(t2 - t1) / 1e3));
	srv->tp->ops->dereg_mem(srv->tp, &bmr);
out_dereg_a:
	cli->tp->ops->dereg_mem(cli->tp, &amr);
out_free:
	free(a);
	free(b);
	return ret;
}

static int side_open(struct side *s, enum urpc_transport_kind kind, long id)
{
	struct urpc_tp_cfg cfg;

	urpc__tp_cfg_init(&cfg, kind);
	cfg.id = id;
	return urpc__tp_create(&cfg, &s->tp);
}

static int connect_sides(struct side *a, struct side *b)
{
	uint8_t ep[URPC_TP_EP_MAX];
	size_t len;
	int ret;

	len = b->tp->ops->get_endpoint(b->tp, ep);
	ret = a->tp->ops->resolve_peer(a->tp, ep, len, &a->peer);
	if (ret)
		return ret;
	len = a->tp->ops->get_endpoint(a->tp, ep);
	return b->tp->ops->resolve_peer(b->tp, ep, len, &b->peer);
}

int main(int argc, char **argv)
{
	struct side cli = {0}, srv = {0};
	struct opts o;
	int ret;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : ret;

	ret = side_open(&srv, o.kind, 0);
	if (!ret)
		ret = side_open(&cli, o.kind, 1);
	if (!ret)
		ret = connect_sides(&cli, &srv);
	if (ret) {
		fprintf(stderr, "urpc-demo: cannot set up the %s transport: %s\n",
			urpc_transport_str(o.kind), urpc_strerror(ret));
		goto out;
	}
	if (o.size > cli.tp->mtu) {
		fprintf(stderr, "urpc-demo: --size %lu exceeds the %s MTU of %u bytes\n", o.size,
			urpc_transport_str(o.kind), cli.tp->mtu);
		ret = -EMSGSIZE;
		goto out;
	}
	printf("urpc-demo: transport %s, MTU %u B, %lu round trips of %lu B, %lu MiB one-sided\n",
	       urpc_transport_str(o.kind), cli.tp->mtu, o.count, o.size, o.bulk_mib);
	ret = pingpong(&cli, &srv, &o);
	if (!ret && o.bulk_mib)
		ret = bulk(&cli, &srv, &o);
	if (ret)
		fprintf(stderr, "urpc-demo: failed: %s\n", urpc_strerror(ret));
out:
	if (cli.tp)
		cli.tp->ops->destroy(cli.tp);
	if (srv.tp)
		srv.tp->ops->destroy(srv.tp);
	return ret ? 1 : 0;
}
