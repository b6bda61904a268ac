/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the udp transport's emulated one-sided operations, both
 * halves (src/transport/udp_os.c, entered through udp_io.c): serving a peer's READ and WRITE requests
 * (RD_REQ, WR_DATA) against registered memory, and taking the replies
 * (RD_DATA, WR_ACK, NAK) to our own operations. Datagrams enter through
 * urpc__udp_rx_inject(), the receive path's checks and dispatch without the
 * socket.
 *
 * Each input gets a fresh endpoint (so a run depends on its input alone):
 * three registrations a peer may use (read-write, read-only, write-only;
 * exact-size heap blocks, so ASan sees any access outside them), a local
 * region, a resolved peer (a socket of ours that swallows what the endpoint
 * sends) and up to four READ/WRITE operations posted to it. Then the input's
 * datagrams are injected one by one. At the end the peer is released, and
 * every posted operation must complete exactly once with a status the
 * contract allows, before the endpoint is destroyed (which must succeed).
 *
 * Input: byte 0 picks the endpoint's mtu, byte 1 the max_dgram the peer
 * advertises, byte 2 the number of operations (0-4), each then 5 bytes
 * (kind, length, offset in the local region). Then records until the end:
 *   flags u8, sel u8, len u16 little-endian, len bytes (the datagram).
 * The flags patch what the input cannot know (keys and addresses chosen at
 * run time) or would rarely hit (lengths computed from other fields): see
 * enum udp_patch (formats.h). Patching follows the wire layout documented in udp_int.h.
 *
 * Owns: two sockets kept for the process (the peer and a stranger), and per
 * input the endpoint and its memory. Calls: the transport ops table,
 * urpc__udp_rx_inject() (src/transport/udp.h), libc sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "formats.h"
#include "fuzz.h"
#include "transport/transport.h"
#include "transport/udp.h"

/* udp_int.h's wire layout: struct udp_hdr (16 bytes), then struct udp_ext (40). */
#define W_HDR 16
#define W_EXT 40
#define W_MAGIC 0x7055u
#define W_VERSION 2
#define W_OFF_TYPE 3
#define W_OFF_OP_ID 4
#define W_OFF_CHUNK 8
#define W_OFF_RADDR (W_HDR + 0)
#define W_OFF_LEN (W_HDR + 8)
#define W_OFF_RKEY (W_HDR + 16) /* 64 bits; the token (0 here: open registrations) follows */
#define W_OFF_CHUNK_SIZE (W_HDR + 32)

#define MAX_OPS 4
#define LOCAL_LEN 4096
#define DGRAM_MAX 9000 /* a record's datagram; above the largest slot picked below */

static const uint32_t mtus[] = {64, 200, 1456, 8000};
static const uint32_t max_dgrams[] = {80, 600, 1472, 65507};

static const unsigned reg_access[3] = {
	URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE,
	URPC_TP_ACCESS_REMOTE_READ,
	URPC_TP_ACCESS_REMOTE_WRITE,
};
static const size_t reg_len[3] = {256, 100, 300};

static int peer_fd = -1, stranger_fd = -1;
static struct sockaddr_in peer_sa, stranger_sa;

static const struct urpc_tp_ops *ops = &urpc__tp_udp_ops;

/* A posted operation, as the target knows it. */
struct op {
	bool read;
	uint32_t len;
	uint32_t chunk_size;
	uint32_t nchunks;
	int done; /* completions seen */
};

/* Everything one input creates. */
struct run {
	struct urpc_tp *tp;
	struct urpc_tp_peer *peer;
	uint8_t *reg_mem[3];
	struct urpc_tp_mr reg_mr[3];
	uint8_t *local;
	struct urpc_tp_mr local_mr;
	struct op op[MAX_OPS];
	unsigned nops;
	uint32_t tp_chunk; /* the endpoint's own one-sided payload per datagram */
};

static int open_sink(struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	FUZZ_CHECK(fd >= 0, "socket: %s", strerror(errno));
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	FUZZ_CHECK(bind(fd, (struct sockaddr *)sa, sizeof(*sa)) == 0, "bind: %s", strerror(errno));
	FUZZ_CHECK(getsockname(fd, (struct sockaddr *)sa, &len) == 0, "getsockname");
	return fd;
}

/* Throw away what the endpoint sent to our sockets. */
static void drain(int fd)
{
	static uint8_t buf[65536];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	urpc_log_set_level(URPC_LOG_ERR); /* malformed datagrams are the point */
	peer_fd = open_sink(&peer_sa);
	stranger_fd = open_sink(&stranger_sa);
	return 0;
}

/* The endpoint bytes of our peer socket, as udp.c's get_endpoint() writes them. */
static size_t peer_endpoint(uint8_t *ep, uint32_t max_dgram)
{
	uint32_t nonce = 0x1234567u;

	ep[0] = (uint8_t)URPC_TRANSPORT_UDP;
	ep[1] = 3; /* UDP_EP_VERSION */
	memcpy(ep + 2, &peer_sa.sin_addr.s_addr, 4);
	memcpy(ep + 6, &peer_sa.sin_port, 2);
	memcpy(ep + 8, &nonce, 4);
	memcpy(ep + 12, &max_dgram, 4);
	return 16;
}

static void setup(struct run *r, struct fz_in *in)
{
	uint32_t mtu = mtus[fz_u8(in) % 4], max_dgram = max_dgrams[fz_u8(in) % 4];
	unsigned want = fz_u8(in) % (MAX_OPS + 1), i;
	struct urpc_tp_cfg cfg;
	uint8_t ep[URPC_TP_EP_MAX];
	size_t eplen;
	int ret;

	memset(r, 0, sizeof(*r));
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
	cfg.rq_depth = 16;
	cfg.sq_depth = 16;
	cfg.mtu = mtu;
	cfg.one_sided_timeout_ms = 60000; /* no time-out inside a run */
	ret = ops->create(&cfg, &r->tp);
	FUZZ_CHECK(ret == 0, "create: %s", urpc_strerror(ret));
	r->tp_chunk = mtu - W_EXT;

	for (i = 0; i < 3; i++) {
		r->reg_mem[i] = malloc(reg_len[i]);
		FUZZ_CHECK(r->reg_mem[i], "out of memory");
		memset(r->reg_mem[i], 0xa0 + (int)i, reg_len[i]);
		ret = ops->reg_mem(r->tp, r->reg_mem[i], reg_len[i], reg_access[i], &r->reg_mr[i]);
		FUZZ_CHECK(ret == 0, "reg_mem: %s", urpc_strerror(ret));
	}
	r->local = malloc(LOCAL_LEN);
	FUZZ_CHECK(r->local, "out of memory");
	memset(r->local, 0x5c, LOCAL_LEN);
	ret = ops->reg_mem(r->tp, r->local, LOCAL_LEN,
			   URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE, &r->local_mr);
	FUZZ_CHECK(ret == 0, "reg_mem: %s", urpc_strerror(ret));

	eplen = peer_endpoint(ep, max_dgram);
	ret = ops->resolve_peer(r->tp, ep, eplen, &r->peer);
	FUZZ_CHECK(ret == 0, "resolve_peer: %s", urpc_strerror(ret));

	for (i = 0; i < want; i++) {
		struct op *o = &r->op[r->nops];
		uint8_t kind = fz_u8(in);
		uint32_t off = fz_u16(in) % LOCAL_LEN;
		uint32_t len = 1 + fz_u16(in) % (LOCAL_LEN - off);
		uint32_t chunk = r->tp_chunk < max_dgram - W_HDR - W_EXT
					 ? r->tp_chunk
					 : max_dgram - W_HDR - W_EXT;

		o->read = !(kind & 1);
		o->len = len;
		o->chunk_size = chunk;
		o->nchunks = (len + chunk - 1) / chunk;
		/* The peer's address: the range is the peer's business, never checked here. */
		if (o->read)
			ret = ops->post_read(r->tp, r->peer, r->local + off, &r->local_mr,
					     0x10000 + kind, 77, len, r->nops);
		else
			ret = ops->post_write(r->tp, r->peer, r->local + off, &r->local_mr,
					      0x10000 + kind, 77, len, r->nops);
		FUZZ_CHECK(ret == 0, "post: %s", urpc_strerror(ret));
		r->nops++;
	}
}

/* Patch and inject one record's datagram. */
static void one_record(struct run *r, struct fz_in *in)
{
	static uint8_t d[DGRAM_MAX];
	uint8_t flags = fz_u8(in), sel = fz_u8(in);
	size_t want = fz_u16(in) % (DGRAM_MAX + 1), got, len;
	const uint8_t *src = fz_bytes(in, want, &got);
	unsigned reg = sel % 3;
	uint8_t *copy;
	int ret;

	memset(d, 0, W_HDR + W_EXT);
	memcpy(d, src, got);
	len = got;
	if (flags & UDP_P_HDR) {
		d[0] = (uint8_t)W_MAGIC;
		d[1] = (uint8_t)(W_MAGIC >> 8);
		d[2] = W_VERSION;
	}
	if ((flags & UDP_P_OP_ID) && r->nops)
		fz_put_le32(d + W_OFF_OP_ID, (d[W_OFF_OP_ID] % r->nops) | 1u << 16);
	if (flags & UDP_P_RKEY)
		fz_put_le64(d + W_OFF_RKEY, r->reg_mr[reg].rkey);
	if (flags & UDP_P_RADDR)
		fz_put_le64(d + W_OFF_RADDR, (uint64_t)(uintptr_t)r->reg_mem[reg] +
						     fz_get_le64(d + W_OFF_RADDR) % reg_len[reg]);
	if (flags & UDP_P_RANGE) {
		uint8_t type = d[W_OFF_TYPE];

		if (type == UDP_W_RD_REQ || type == UDP_W_WR_DATA) {
			/* The range from the (patched) address to the end of the registration. */
			uint64_t raddr = fz_get_le64(d + W_OFF_RADDR);
			uint64_t base = (uint64_t)(uintptr_t)r->reg_mem[reg];
			uint64_t room = raddr >= base && raddr < base + reg_len[reg]
						? base + reg_len[reg] - raddr
						: reg_len[reg];
			uint64_t olen = 1 + fz_get_le64(d + W_OFF_LEN) % room;
			uint32_t csize = 1 + (uint32_t)(d[W_OFF_CHUNK_SIZE] % 128);

			fz_put_le64(d + W_OFF_LEN, olen);
			fz_put_le32(d + W_OFF_CHUNK_SIZE, csize);
			fz_put_le32(d + W_OFF_CHUNK,
				    d[W_OFF_CHUNK] % (uint32_t)((olen + csize - 1) / csize));
		} else if (r->nops) {
			const struct op *o = &r->op[d[W_OFF_OP_ID] % r->nops];

			fz_put_le32(d + W_OFF_CHUNK, d[W_OFF_CHUNK] % o->nchunks);
		}
	}
	if (flags & UDP_P_FIT) {
		uint8_t type = d[W_OFF_TYPE];
		uint32_t chunk = fz_get_le32(d + W_OFF_CHUNK);

		len = W_HDR;
		if (type == UDP_W_RD_REQ || type == UDP_W_WR_DATA) {
			uint64_t olen = fz_get_le64(d + W_OFF_LEN);
			uint32_t csize = fz_get_le32(d + W_OFF_CHUNK_SIZE);
			uint64_t off = (uint64_t)chunk * csize;

			len += W_EXT;
			if (type == UDP_W_WR_DATA && csize && off < olen)
				len += (size_t)(olen - off < csize ? olen - off : csize);
		} else if (type == UDP_W_RD_DATA && r->nops) {
			const struct op *o = &r->op[d[W_OFF_OP_ID] % r->nops];
			uint64_t off = (uint64_t)chunk * o->chunk_size;

			if (off < o->len)
				len += o->len - off < o->chunk_size ? o->len - off : o->chunk_size;
		}
		if (len > DGRAM_MAX)
			len = DGRAM_MAX;
		if (len > got)
			memset(d + got, 0x33, len - got);
	}

	/* Exact size, so ASan sees a read past the datagram. */
	copy = malloc(len ? len : 1);
	FUZZ_CHECK(copy, "out of memory");
	memcpy(copy, d, len);
	ret = urpc__udp_rx_inject(r->tp, copy, len,
				  (flags & UDP_P_FROM_PEER) ? &peer_sa : &stranger_sa);
	FUZZ_CHECK(ret == 0 || ret == 1, "inject: %d", ret);
	if (ret == 1) {
		/* DATA: the caller gets the bytes after the transport's header. */
		struct urpc_tp_rx rx[2];
		int n = ops->rx_burst(r->tp, rx, 2);

		FUZZ_CHECK(n == 1, "DATA injected, rx_burst gave %d", n);
		FUZZ_CHECK(len >= W_HDR && rx[0].len == len - W_HDR, "DATA of %u bytes for %zu",
			   rx[0].len, len);
		FUZZ_CHECK(!memcmp(rx[0].buf, copy + W_HDR, rx[0].len), "DATA bytes differ");
		ops->rx_release(r->tp, rx, 1);
	}
	free(copy);
}

static void teardown(struct run *r)
{
	struct urpc_tp_comp c[MAX_OPS + 1];
	unsigned i;
	int n, k, ret;

	/* Operations still running complete -ECONNRESET; all are reaped now. */
	ops->release_peer(r->tp, r->peer);
	n = ops->poll_completions(r->tp, c, MAX_OPS + 1);
	FUZZ_CHECK(n == (int)r->nops, "%d completions for %u operations", n, r->nops);
	for (k = 0; k < n; k++) {
		FUZZ_CHECK(c[k].wr_id < r->nops, "completion of unknown wr_id %llu",
			   (unsigned long long)c[k].wr_id);
		FUZZ_CHECK(c[k].op == (r->op[c[k].wr_id].read ? URPC_TP_OP_READ : URPC_TP_OP_WRITE),
			   "completion of the wrong kind");
		FUZZ_CHECK(c[k].status == 0 || c[k].status == -EACCES || c[k].status == -EIO ||
				   c[k].status == -ECONNRESET,
			   "status %d", c[k].status);
		r->op[c[k].wr_id].done++;
	}
	for (i = 0; i < r->nops; i++)
		FUZZ_CHECK(r->op[i].done == 1, "operation %u completed %d times", i, r->op[i].done);
	FUZZ_CHECK(ops->poll_completions(r->tp, c, MAX_OPS + 1) == 0, "a second completion");

	for (i = 0; i < 3; i++) {
		ops->dereg_mem(r->tp, &r->reg_mr[i]);
		free(r->reg_mem[i]);
	}
	ops->dereg_mem(r->tp, &r->local_mr);
	free(r->local);
	ret = ops->destroy(r->tp);
	FUZZ_CHECK(ret == 0, "destroy: %s", urpc_strerror(ret));
	drain(peer_fd);
	drain(stranger_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {data, size};
	struct run r;

	setup(&r, &in);
	while (in.n)
		one_record(&r, &in);
	teardown(&r);
	return 0;
}
