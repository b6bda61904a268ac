/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's one-sided datagrams seen on the wire (issue 32): a
 * READ asks for its chunks in groups (one RD_REQ for several), a responder
 * answers a group with a RD_DATA per chunk, and the batch of queued
 * datagrams sent in slices keeps what it has not sent instead of sending
 * it all at once when it fills. A plain socket of the test plays the peer.
 * Split from test_udp.c (its length).
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/transport.h"
#include "transport/udp.h"
#include "transport/udp_int.h"
#include "transport/udp_os.h"
#include "util/compiler.h"

static const struct urpc_tp_ops *ops = &urpc__tp_udp_ops;

static struct urpc_tp *mk(void)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *tp = NULL;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cr_assert_eq(ops->create(&cfg, &tp), 0);
	return tp;
}

/* A plain socket on 127.0.0.1, its address in *@sa. */
static int raw_sock(struct sockaddr_in *sa)
{
	socklen_t alen = sizeof(*sa);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)sa, &alen), 0);
	return fd;
}

/* @tp's peer at @sa: @tp's own endpoint bytes with @sa's port. */
static struct urpc_tp_peer *peer_at(struct urpc_tp *tp, const struct sockaddr_in *sa)
{
	uint8_t ep[URPC_TP_EP_MAX];
	struct urpc_tp_peer *p = NULL;
	size_t len = ops->get_endpoint(tp, ep);

	memcpy(ep + 6, &sa->sin_port, 2);
	cr_assert_eq(ops->resolve_peer(tp, ep, len, &p), 0);
	return p;
}

/*
 * The next datagram on @fd within 2 s (its header in *@h, its length
 * returned), or -1 when none comes.
 */
static ssize_t next_dgram(int fd, struct udp_hdr *h, uint8_t *buf, size_t cap, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	n = recv(fd, buf, cap, 0);
	cr_assert_geq(n, (ssize_t)sizeof(*h));
	memcpy(h, buf, sizeof(*h));
	return n;
}

/* Answer chunks [@c, @c + @n) of the READ @op_id (@chunk bytes each, of @src). */
static void answer(int fd, struct urpc_tp *a, uint32_t op_id, uint32_t c, uint32_t n,
		   uint32_t chunk, const uint8_t *src)
{
	uint8_t ep[URPC_TP_EP_MAX], pkt[sizeof(struct udp_hdr) + 2048];
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint32_t i;

	ops->get_endpoint(a, ep);
	memcpy(&to.sin_addr.s_addr, ep + 2, 4);
	memcpy(&to.sin_port, ep + 6, 2);
	cr_assert_leq(chunk, 2048);
	for (i = c; i < c + n; i++) {
		struct udp_hdr h;

		udp_hdr_init(&h, UDP_T_RD_DATA, op_id, i, 0);
		memcpy(pkt, &h, sizeof(h));
		memcpy(pkt + sizeof(h), src + (size_t)i * chunk, chunk);
		cr_assert_eq(
			sendto(fd, pkt, sizeof(h) + chunk, 0, (struct sockaddr *)&to, sizeof(to)),
			(ssize_t)(sizeof(h) + chunk));
	}
}

/*
 * A READ of 64 chunks: its first window goes as one RD_REQ for 32 chunks;
 * answering fewer than a group (UDP_RD_GROUP) asks for nothing, the group
 * then is asked for in one RD_REQ. Before: one RD_REQ per chunk.
 */
Test(udp_batch, a_read_asks_for_its_chunks_in_groups)
{
	struct urpc_tp *a = mk();
	struct sockaddr_in sa;
	int fd = raw_sock(&sa);
	struct urpc_tp_peer *p = peer_at(a, &sa);
	uint32_t chunk = p->chunk_size, nchunks = 64, op_id;
	size_t len = (size_t)chunk * nchunks;
	uint8_t *la = calloc(1, len), *rb = malloc(len), buf[2048];
	struct urpc_tp_comp comp;
	struct urpc_tp_mr ma;
	struct udp_hdr h;
	struct udp_ext e;
	uint32_t i;

	cr_assert(la && rb);
	cr_assert_leq(chunk, 2048 - sizeof(h));
	for (i = 0; i < len; i++)
		rb[i] = (uint8_t)(i * 7 + 1);
	ops->set_peer_token(a, p, 42);
	cr_assert_eq(ops->reg_mem(a, la, len, 0, &ma), 0);
	cr_assert_eq(ops->post_read(a, p, la, &ma, 0x1000, 9, len, 11), 0);

	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 2000), (ssize_t)(sizeof(h) + sizeof(e)));
	memcpy(&e, buf + sizeof(h), sizeof(e));
	cr_assert_eq(h.type, UDP_T_RD_REQ);
	cr_assert_eq(h.chunk, 0);
	cr_assert_eq(h.status, UDP_OS_WINDOW, "the first window in one RD_REQ");
	cr_assert_eq(e.len, len);
	cr_assert_eq(e.chunk_size, chunk);
	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 50), -1, "one RD_REQ, not one a chunk");
	op_id = h.op_id;

	/* fewer than a group done: nothing asked for */
	answer(fd, a, op_id, 0, UDP_RD_GROUP - 1, chunk, rb);
	for (i = 0; i < 200; i++)
		ops->poll_completions(a, &comp, 1);
	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 50), -1, "waits for a group");

	/* one more: a group's room, asked for in one RD_REQ */
	answer(fd, a, op_id, UDP_RD_GROUP - 1, 1, chunk, rb);
	for (i = 0; i < 200; i++)
		ops->poll_completions(a, &comp, 1);
	cr_assert_gt(next_dgram(fd, &h, buf, sizeof(buf), 2000), 0);
	cr_assert_eq(h.type, UDP_T_RD_REQ);
	cr_assert_eq(h.chunk, UDP_OS_WINDOW);
	cr_assert_eq(h.status, UDP_RD_GROUP);

	ops->cancel(a, 11, -ECANCELED);
	ops->poll_completions(a, &comp, 1);
	ops->dereg_mem(a, &ma);
	ops->release_peer(a, p);
	cr_assert_eq(ops->destroy(a), 0);
	close(fd);
	free(la);
	free(rb);
}

/*
 * An RD_REQ for a group of chunks is answered with one RD_DATA per chunk,
 * the last one cut at the operation's end; one for more than a window is
 * malformed. Before: only the first chunk was answered.
 */
Test(udp_batch, a_responder_answers_each_chunk_of_a_group)
{
	struct urpc_tp *b = mk();
	struct sockaddr_in sa;
	int fd = raw_sock(&sa);
	struct urpc_tp_peer *p = peer_at(b, &sa);
	uint32_t chunk = 256, want = 5, i;
	size_t len = (size_t)chunk * 4 + 100; /* the fifth chunk is 100 bytes */
	uint8_t *rb = malloc(len), pkt[sizeof(struct udp_hdr) + sizeof(struct udp_ext)], buf[2048];
	struct urpc_tp_grant g;
	struct urpc_tp_mr mb;
	struct udp_hdr h;
	struct udp_ext e;
	uint64_t bad0;

	cr_assert(rb);
	for (i = 0; i < len; i++)
		rb[i] = (uint8_t)(i * 13 + 5);
	ops->set_peer_token(b, p, 42);
	cr_assert_eq(ops->reg_mem(b, rb, len, URPC_TP_ACCESS_GRANT_READ, &mb), 0);
	cr_assert_eq(ops->grant(b, p, &mb, rb, len, URPC_TP_ACCESS_REMOTE_READ, &g), 0);
	e = (struct udp_ext){
		.raddr = g.addr, .len = len, .key = g.key, .token = 42, .chunk_size = chunk};
	udp_hdr_init(&h, UDP_T_RD_REQ, 3, 0, 8); /* 8 asked, 5 exist */
	memcpy(pkt, &h, sizeof(h));
	memcpy(pkt + sizeof(h), &e, sizeof(e));
	cr_assert_eq(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to_udp(b)->local,
			    sizeof(to_udp(b)->local)),
		     (ssize_t)sizeof(pkt));
	for (i = 0; i < want; i++) {
		uint64_t off = (uint64_t)i * chunk, clen = URPC_MIN((uint64_t)chunk, len - off);
		ssize_t n = -1;
		int tries;

		for (tries = 0; tries < 2000 && n < 0; tries++) {
			struct urpc_tp_comp c;

			ops->poll_completions(b, &c, 1);
			n = next_dgram(fd, &h, buf, sizeof(buf), 1);
		}
		cr_assert_eq(n, (ssize_t)(sizeof(h) + clen), "chunk %u: %zd bytes", i, n);
		cr_assert_eq(h.type, UDP_T_RD_DATA);
		cr_assert_eq(h.chunk, i);
		cr_assert_eq(memcmp(buf + sizeof(h), rb + off, clen), 0, "chunk %u's bytes", i);
	}
	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 50), -1, "nothing past the end");

	/* more than a window in one request: dropped as malformed */
	bad0 = b->stats.rx_drop_bad;
	udp_hdr_init(&h, UDP_T_RD_REQ, 4, 0, UDP_OS_WINDOW + 1);
	memcpy(pkt, &h, sizeof(h));
	cr_assert_eq(urpc__udp_rx_inject(b, pkt, sizeof(pkt), &sa), 0);
	cr_assert_eq(b->stats.rx_drop_bad, bad0 + 1);
	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 50), -1);

	ops->revoke(b, &g);
	ops->dereg_mem(b, &mb);
	ops->release_peer(b, p);
	cr_assert_eq(ops->destroy(b), 0);
	close(fd);
	free(rb);
}

/*
 * The batch filled while sent in slices: what was not sent yet moves to
 * the front, and nothing goes until the next slice (before: the batch went
 * at once, 60-odd datagrams in one call). Every datagram then arrives
 * once, in order, with its own header and bytes.
 */
Test(udp_batch, a_full_batch_sent_in_slices_keeps_the_rest_queued)
{
	struct urpc_tp *b = mk();
	struct udp_tp *u = to_udp(b);
	struct sockaddr_in sa;
	int fd = raw_sock(&sa);
	static uint8_t data[UDP_CTL_BATCH + UDP_OS_SLICE][32];
	uint8_t buf[2048];
	struct udp_ext e = {.raddr = 1, .len = 2, .key = 3, .token = 4, .chunk_size = 32};
	struct udp_hdr h;
	uint32_t i, got = 0;

	for (i = 0; i < UDP_CTL_BATCH + UDP_OS_SLICE; i++)
		memset(data[i], (int)i, sizeof(data[i]));
	for (i = 0; i < UDP_CTL_BATCH; i++) /* WR_DATA with an ext, RD_DATA without */
		urpc__udp_ctl_queue(u, &sa, i % 2 ? UDP_T_RD_DATA : UDP_T_WR_DATA, 7, i, 0,
				    i % 2 ? NULL : &e, data[i], sizeof(data[i]));
	urpc__udp_os_flush_some(u, UDP_OS_SLICE);
	cr_assert_eq(u->ctl_off, UDP_OS_SLICE);
	for (; i < UDP_CTL_BATCH + UDP_OS_SLICE; i++)
		urpc__udp_ctl_queue(u, &sa, UDP_T_RD_DATA, 7, i, 0, NULL, data[i], sizeof(data[i]));
	cr_assert_eq(u->ctl_off, 0, "compacted");
	cr_assert_eq(u->nctl, UDP_CTL_BATCH, "the rest still queued");
	for (i = 0; i < UDP_OS_SLICE; i++)
		cr_assert_gt(next_dgram(fd, &h, buf, sizeof(buf), 2000), 0);
	cr_assert_eq(next_dgram(fd, &h, buf, sizeof(buf), 50), -1, "no datagram beyond the slice");
	urpc__udp_os_flush(u);
	cr_assert_eq(u->nctl, 0);
	for (i = UDP_OS_SLICE; i < UDP_CTL_BATCH + UDP_OS_SLICE; i++, got++) {
		bool ext = i < UDP_CTL_BATCH && i % 2 == 0;
		ssize_t n = next_dgram(fd, &h, buf, sizeof(buf), 2000);
		struct udp_ext eg;

		cr_assert_eq(n, (ssize_t)(sizeof(h) + (ext ? sizeof(e) : 0) + 32), "datagram %u",
			     i);
		cr_assert_eq(h.chunk, i, "in order");
		if (ext) {
			memcpy(&eg, buf + sizeof(h), sizeof(eg));
			cr_assert_eq(eg.key, 3);
		}
		cr_assert_eq(memcmp(buf + n - 32, data[i], 32), 0, "datagram %u's bytes", i);
	}
	cr_assert_eq(got, UDP_CTL_BATCH + UDP_OS_SLICE - UDP_OS_SLICE);
	cr_assert_eq(ops->destroy(b), 0);
	close(fd);
}

/* Queue @n RD_DATA of 32 bytes to @sa on @u, then drain: the sendmmsg() calls it took. */
static uint64_t drain_calls(struct urpc_tp *b, const struct sockaddr_in *sa, unsigned n)
{
	static uint8_t bytes[32];
	struct udp_tp *u = to_udp(b);
	struct urpc_tp_rx rx[4];
	uint64_t before = b->stats.sys_tx;
	unsigned i;
	int got;

	for (i = 0; i < n; i++)
		urpc__udp_ctl_queue(u, sa, UDP_T_RD_DATA, 7, i, 0, NULL, bytes, sizeof(bytes));
	got = ops->rx_burst(b, rx, 4); /* its drain sends them, a slice at a time */
	if (got > 0)
		ops->rx_release(b, rx, (unsigned)got);
	cr_assert_eq(u->nctl, 0, "all sent");
	return b->stats.sys_tx - before;
}

/*
 * A transfer with no DATA beside it goes in slices of UDP_OS_SLICE_BULK
 * once UDP_OS_QUIET datagrams went without DATA found between (before:
 * slices of UDP_OS_SLICE always, ~8% of its bandwidth in receives), and
 * DATA brings the small slices back.
 */
Test(udp_batch, slices_are_small_while_data_comes_and_larger_without)
{
	struct urpc_tp *b = mk();
	struct udp_tp *u = to_udp(b);
	struct sockaddr_in sa;
	int fd = raw_sock(&sa);
	uint8_t buf[2048], pkt[sizeof(struct udp_hdr) + 4] = {0};
	struct urpc_tp_rx rx[4];
	struct udp_hdr h;
	unsigned i, n = 32;
	int got = 0;

	cr_assert_eq(drain_calls(b, &sa, n), n / UDP_OS_SLICE, "small slices at first");
	for (i = 0; i < UDP_OS_QUIET / n + 1; i++)
		drain_calls(b, &sa, n);
	cr_assert_geq(u->os_quiet, UDP_OS_QUIET);
	cr_assert_eq(drain_calls(b, &sa, n), n / UDP_OS_SLICE_BULK, "larger slices when alone");

	/* DATA arrives: small slices again */
	udp_hdr_init(&h, UDP_T_DATA, 0, 0, 0);
	memcpy(pkt, &h, sizeof(h));
	cr_assert_eq(
		sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&u->local, sizeof(u->local)),
		(ssize_t)sizeof(pkt));
	for (i = 0; i < 100000 && got <= 0; i++)
		got = ops->rx_burst(b, rx, 4);
	cr_assert_eq(got, 1);
	ops->rx_release(b, rx, 1);
	cr_assert_eq(u->os_quiet, 0);
	cr_assert_eq(drain_calls(b, &sa, n), n / UDP_OS_SLICE, "small slices after DATA");

	while (next_dgram(fd, &h, buf, sizeof(buf), 10) > 0)
		;
	cr_assert_eq(ops->destroy(b), 0);
	close(fd);
}
