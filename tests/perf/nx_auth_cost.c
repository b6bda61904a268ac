/* SPDX-License-Identifier: MIT */
/*
 * The cost of the authenticated control plane (issue 31) per heartbeat:
 * what a sender adds (the MAC over the encoded NX_PING, nexus_auth.h) and
 * what a receiver adds (finding the peer, checking the MAC), measured with
 * callgrind:
 *
 *   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=run_signed \
 *       urpc-nx-auth-cost signed N
 *   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=run_plain \
 *       urpc-nx-auth-cost plain N
 *
 * run_signed encodes, signs, decodes and checks N heartbeats; run_plain
 * encodes and decodes them (what a heartbeat cost before, on the larger
 * version-4 header); the difference over N is the instructions the MAC adds
 * per heartbeat, both sides together. tests/perf/nx_auth_cost.sh runs both.
 * Not run by CI. Calls nexus_auth.h, nexus_peer.h, sm.h.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexus/nexus_auth.h"
#include "nexus/nexus_peer.h"
#include "nexus/sm.h"

static volatile uint64_t sink;

static struct sockaddr_in addr(const char *host, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, host, &a.sin_addr);
	return a;
}

static void heartbeat(struct urpc_sm_pkt *p)
{
	memset(p, 0, sizeof(*p));
	p->type = URPC_SM_PKT_NX_PING;
	p->nexus_inc = 0x1234567890abcdefull;
	p->nexus_epoch = 3;
	p->ep_len = URPC_NXP_RPC_BYTES;
	p->ep[0] = 0x3;
}

__attribute__((noinline)) static void run_signed(struct urpc_nx_peers *tb,
						 const struct urpc_nx_peer *pa,
						 const struct sockaddr_in *from, unsigned n)
{
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt p, q;
	unsigned i;

	heartbeat(&p);
	p.nx_nonce = pa->nonce_local;
	for (i = 0; i < n; i++) {
		size_t len;

		p.seq = i;
		len = urpc__sm_encode(&p, buf);
		urpc__nxa_sign(pa, buf, len);
		if (urpc__sm_decode(buf, len, &q))
			abort();
		q.from = *from;
		sink += urpc__nxa_check(tb, &q, buf, len, 1000000000ull, 1);
	}
}

__attribute__((noinline)) static void run_plain(unsigned n)
{
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt p, q;
	unsigned i;

	heartbeat(&p);
	for (i = 0; i < n; i++) {
		size_t len;

		p.seq = i;
		len = urpc__sm_encode(&p, buf);
		if (urpc__sm_decode(buf, len, &q))
			abort();
		sink += q.seq;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = addr("10.0.0.1", 31850), b = addr("10.0.0.2", 31850);
	struct urpc_nx_peers ta, tb;
	struct urpc_nx_peer *pa, *pb;
	unsigned n;

	if (argc != 3 || (strcmp(argv[1], "signed") && strcmp(argv[1], "plain"))) {
		fprintf(stderr, "usage: %s signed|plain N\n", argv[0]);
		return 2;
	}
	n = (unsigned)strtoul(argv[2], NULL, 10);
	memset(&ta, 0, sizeof(ta));
	memset(&tb, 0, sizeof(tb));
	/* A's entry for B and B's for A, keyed as a handshake leaves them. */
	pa = urpc__nxp_get(&ta, &b, 100000000ull, 500000000ull, 7, 1);
	pb = urpc__nxp_get(&tb, &a, 100000000ull, 500000000ull, 7, 1);
	if (!pa || !pb)
		return 1;
	pa->nonce_remote = pb->nonce_local;
	pb->nonce_remote = pa->nonce_local;
	if (!strcmp(argv[1], "signed"))
		run_signed(&tb, pa, &a, n);
	else
		run_plain(n);
	printf("%s: %u heartbeats, sink %llu\n", argv[1], n, (unsigned long long)sink);
	urpc__nxp_clear(&ta);
	urpc__nxp_clear(&tb);
	return 0;
}
