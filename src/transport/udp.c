/* SPDX-License-Identifier: MIT */
/*
 * The udp transport: one non-blocking IPv4 UDP socket per endpoint.
 *
 * Datagrams are sent with sendmmsg() and received with recvmmsg() into a
 * ring of rq_depth buffers allocated at create(). One-sided READ/WRITE are
 * emulated in software: the requester splits an operation into chunks and
 * keeps at most UDP_OS_WINDOW of them in flight; the remote endpoint serves
 * them inside its rx_burst() and poll_completions().
 *
 * Wire format (little-endian). Every datagram starts with struct udp_hdr:
 *
 *   0  u16 magic    UDP_MAGIC
 *   2  u8  version  UDP_VERSION
 *   3  u8  type     enum udp_type
 *   4  u32 op_id    requester's operation: table index | generation << 16
 *   8  u32 chunk    chunk index within the operation
 *  12  u32 status   NAK: the positive errno; 0 otherwise
 *
 * DATA:    hdr, then the caller's header and payload.
 * RD_REQ:  hdr, struct udp_ext (the operation: raddr, len, rkey, chunk size).
 * RD_DATA: hdr, then the chunk's bytes.
 * WR_DATA: hdr, struct udp_ext, then the chunk's bytes.
 * WR_ACK:  hdr.
 * NAK:     hdr with status set; the requester fails the operation.
 *
 * Every request carries the whole operation's range, so the server checks
 * key, access and bounds of [raddr, raddr + len) on every chunk and keeps
 * no per-peer state.
 *
 * Endpoint bytes (UDP_EP_LEN): kind (URPC_TRANSPORT_UDP), UDP_EP_VERSION,
 * IPv4 address and port (network order), a random nonce, and max_dgram
 * (u32 little-endian): the largest datagram the endpoint receives whole.
 * A requester cuts one-sided chunks so that WR_DATA fits the peer's
 * max_dgram, and RD_DATA (sized by the requester) fits its own ring.
 *
 * Threads: an endpoint belongs to the thread that created it.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../util/compiler.h"
#include "../util/log.h"
#include "../util/rand.h"
#include "transport.h"

#define UDP_MAGIC 0x7055u /* "Up" on the wire */
#define UDP_VERSION 1
#define UDP_EP_VERSION 2
#define UDP_EP_LEN 16		/* kind, version, addr[4], port[2], nonce[4], max_dgram[4] */
#define UDP_MAX_DGRAM 65507u	/* largest IPv4 UDP payload */
#define UDP_DEFAULT_DGRAM 1472u /* Ethernet MTU less IPv4 and UDP headers */
#define UDP_MIN_MTU 64u		/* leaves room for the one-sided headers */
/* smallest max_dgram a peer may advertise: a header and the least mtu */
#define UDP_MIN_DGRAM ((uint32_t)sizeof(struct udp_hdr) + UDP_MIN_MTU)
#define UDP_SOCKBUF (4u << 20)	   /* SO_RCVBUF/SO_SNDBUF asked for */
#define UDP_MAX_DEPTH 65536u	   /* largest rq_depth/sq_depth */
#define UDP_RX_BATCH 64u	   /* datagrams per recvmmsg() */
#define UDP_CTL_BATCH 64u	   /* one-sided datagrams per sendmmsg() */
#define UDP_OS_OPS 64u		   /* one-sided operations outstanding */
#define UDP_OS_WINDOW 32u	   /* chunks in flight per operation; <= 64 */
#define UDP_RTO_MIN_NS 2000000ull  /* first retransmission after 2 ms */
#define UDP_RTO_MAX_NS 50000000ull /* doubling up to 50 ms */
#define UDP_RX_MAX_PASSES 4	   /* recvmmsg() calls per rx_burst() */

enum udp_type {
	UDP_T_DATA = 1,
	UDP_T_RD_REQ = 2,
	UDP_T_RD_DATA = 3,
	UDP_T_WR_DATA = 4,
	UDP_T_WR_ACK = 5,
	UDP_T_NAK = 6,
};

struct udp_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint32_t op_id;
	uint32_t chunk;
	uint32_t status;
};
static_assert(sizeof(struct udp_hdr) == 16, "udp_hdr is 16 bytes on the wire");

struct udp_ext {
	uint64_t raddr; /* start of the whole operation at the server */
	uint64_t len;	/* length of the whole operation */
	uint32_t rkey;	/* server's registration key */
	uint32_t chunk_size;
};
static_assert(sizeof(struct udp_ext) == 24, "udp_ext is 24 bytes on the wire");
static_assert(UDP_OS_WINDOW <= 64, "the window fits a 64-bit mask");
static_assert(URPC_IS_POW2(UDP_OS_OPS), "op table size is a power of two");

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "udp.c assumes a little-endian host (the wire format is little-endian)"
#endif

struct urpc_tp_peer {
	struct sockaddr_in sa;
	uint32_t nonce;
	uint32_t chunk_size; /* one-sided payload per datagram to this peer */
	struct urpc_tp_peer *next;
	struct urpc_tp_peer *prev;
};

/* A registration; @used is false for a free table entry. */
struct udp_reg {
	uint8_t *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access;
	bool used;
};

enum udp_op_state {
	UDP_OP_FREE = 0,
	UDP_OP_ACTIVE,
	UDP_OP_DONE, /* finished, completion not reaped yet */
};

/*
 * A one-sided operation. Chunks below @base are done; bit i of @done_mask
 * says chunk base + i is done; chunks in [base, next) have been sent.
 */
struct udp_op {
	enum udp_op_state state;
	enum urpc_tp_op kind;
	int status;
	uint16_t gen;
	struct urpc_tp_peer *peer;
	uint8_t *local;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t len;
	uint64_t wr_id;
	uint32_t chunk_size; /* the smaller of ours and what the peer receives whole */
	uint32_t nchunks;
	uint32_t base;
	uint32_t next;
	uint64_t done_mask;
	uint64_t progress_ns; /* last time a chunk was done (or the post) */
	uint64_t rto_ns;
	uint64_t retry_at_ns;
};

/* One queued outgoing one-sided datagram's headers. */
struct udp_ctl_hdrs {
	struct udp_hdr h;
	struct udp_ext e;
};

struct udp_tp {
	struct urpc_tp base;
	int fd;
	struct sockaddr_in local;
	uint32_t nonce;
	uint32_t chunk_size; /* one-sided payload per datagram */

	/* receive ring: rq_depth slots of slot_size bytes */
	uint8_t *ring;
	size_t slot_size;
	struct sockaddr_in *rx_src; /* source of each slot's datagram */
	uint32_t *rx_len;	    /* datagram length of each slot */
	struct iovec *rx_iov;	    /* one per slot */
	uint8_t *held;		    /* slot lent to the caller or pending */
	uint32_t *free_stk;	    /* free slots */
	uint32_t nfree;
	uint32_t *pend; /* received DATA slots not yet handed out (FIFO) */
	uint32_t pend_head;
	uint32_t pend_cnt;
	struct mmsghdr rx_msgs[UDP_RX_BATCH];
	uint32_t rx_slot[UDP_RX_BATCH];

	/* DATA send arrays, sq_depth entries */
	struct mmsghdr *tx_msgs;
	struct iovec *tx_iov; /* 3 per entry */
	struct udp_hdr *tx_hdrs;

	/* one-sided send batch */
	struct mmsghdr ctl_msgs[UDP_CTL_BATCH];
	struct iovec ctl_iov[UDP_CTL_BATCH][3];
	struct udp_ctl_hdrs ctl_hdrs[UDP_CTL_BATCH];
	struct sockaddr_in ctl_dst[UDP_CTL_BATCH];
	unsigned nctl;

	/* one-sided state */
	struct udp_op ops[UDP_OS_OPS];
	unsigned nops; /* ops not FREE */
	struct udp_reg *regs;
	unsigned nregs_cap;
	unsigned nregs;
	struct urpc_rand key_rng;

	/* test knob */
	double drop_p;
	struct urpc_rand drop_rng;

	struct urpc_tp_peer *peers;
};

static inline struct udp_tp *to_udp(struct urpc_tp *tp)
{
	return container_of(tp, struct udp_tp, base);
}

/* ---- create / destroy --------------------------------------------------- */

static void udp_free(struct udp_tp *u)
{
	struct urpc_tp_peer *p, *next;

	for (p = u->peers; p; p = next) {
		next = p->next;
		free(p);
	}
	if (u->fd >= 0)
		close(u->fd);
	free(u->regs);
	free(u->tx_hdrs);
	free(u->tx_iov);
	free(u->tx_msgs);
	free(u->pend);
	free(u->free_stk);
	free(u->held);
	free(u->rx_iov);
	free(u->rx_len);
	free(u->rx_src);
	free(u->ring);
	free(u);
}

static uint32_t udp_random32(void)
{
	uint32_t v;

	urpc__entropy(&v, sizeof(v));
	return v;
}

/* Check cfg and derive the mtu. Not for the datapath. */
static int udp_check_cfg(const struct urpc_tp_cfg *cfg, uint32_t *mtu)
{
	uint32_t max = UDP_MAX_DGRAM - (uint32_t)sizeof(struct udp_hdr);

	if (!URPC_IS_POW2(cfg->rq_depth) || !URPC_IS_POW2(cfg->sq_depth) ||
	    cfg->rq_depth > UDP_MAX_DEPTH || cfg->sq_depth > UDP_MAX_DEPTH) {
		URPC_ERR(cfg->id, "rq_depth %u and sq_depth %u must be powers of two <= %u",
			 cfg->rq_depth, cfg->sq_depth, UDP_MAX_DEPTH);
		return -EINVAL;
	}
	*mtu = UDP_DEFAULT_DGRAM - (uint32_t)sizeof(struct udp_hdr);
	if (cfg->mtu) {
		if (cfg->mtu > max || cfg->mtu < UDP_MIN_MTU) {
			URPC_ERR(cfg->id, "mtu %u out of range [%u, %u]", cfg->mtu, UDP_MIN_MTU,
				 max);
			return -EINVAL;
		}
		*mtu = cfg->mtu;
	}
	return 0;
}

/* Allocate the rings and arrays; the socket is opened by udp_open(). */
static int udp_alloc_arrays(struct udp_tp *u)
{
	uint32_t rq = u->base.rq_depth, sq = u->base.sq_depth, i;

	u->slot_size = URPC_ALIGN_UP(
		sizeof(struct udp_hdr) +
			URPC_MAX(u->base.mtu, UDP_DEFAULT_DGRAM - (uint32_t)sizeof(struct udp_hdr)),
		(size_t)URPC_CACHELINE);
	u->ring = aligned_alloc(URPC_CACHELINE, u->slot_size * rq);
	u->rx_src = calloc(rq, sizeof(*u->rx_src));
	u->rx_len = calloc(rq, sizeof(*u->rx_len));
	u->rx_iov = calloc(rq, sizeof(*u->rx_iov));
	u->held = calloc(rq, sizeof(*u->held));
	u->free_stk = calloc(rq, sizeof(*u->free_stk));
	u->pend = calloc(rq, sizeof(*u->pend));
	u->tx_msgs = calloc(sq, sizeof(*u->tx_msgs));
	u->tx_iov = calloc((size_t)sq * 3, sizeof(*u->tx_iov));
	u->tx_hdrs = calloc(sq, sizeof(*u->tx_hdrs));
	if (!u->ring || !u->rx_src || !u->rx_len || !u->rx_iov || !u->held || !u->free_stk ||
	    !u->pend || !u->tx_msgs || !u->tx_iov || !u->tx_hdrs)
		return -ENOMEM;
	for (i = 0; i < rq; i++) {
		u->rx_iov[i].iov_base = u->ring + (size_t)i * u->slot_size;
		u->rx_iov[i].iov_len = u->slot_size;
		/* pop order: slot 0 first */
		u->free_stk[i] = rq - 1 - i;
	}
	u->nfree = rq;
	return 0;
}

/* Open and bind the socket. Not for the datapath. */
static int udp_open(struct udp_tp *u, const struct urpc_tp_cfg *cfg)
{
	const char *host = cfg->host ? cfg->host : "127.0.0.1";
	int sz = (int)UDP_SOCKBUF;
	socklen_t alen;
	int ret;

	memset(&u->local, 0, sizeof(u->local));
	u->local.sin_family = AF_INET;
	u->local.sin_port = htons(cfg->port);
	if (inet_pton(AF_INET, host, &u->local.sin_addr) != 1) {
		URPC_ERR(cfg->id, "host '%s' is not an IPv4 address", host);
		return -EINVAL;
	}
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0) {
		ret = -errno;
		URPC_ERR(cfg->id, "socket: %s", strerror(-ret));
		return ret;
	}
	/* best effort: a smaller buffer only costs drops under bursts */
	(void)setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	(void)setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (bind(u->fd, (struct sockaddr *)&u->local, sizeof(u->local)) < 0) {
		ret = -errno;
		URPC_ERR(cfg->id, "bind %s:%u: %s", host, cfg->port, strerror(-ret));
		return ret;
	}
	alen = sizeof(u->local);
	if (getsockname(u->fd, (struct sockaddr *)&u->local, &alen) < 0) {
		ret = -errno;
		URPC_ERR(cfg->id, "getsockname: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

static int udp_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct udp_tp *u;
	uint32_t mtu;
	int ret;

	ret = udp_check_cfg(cfg, &mtu);
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u) {
		URPC_ERR(cfg->id, "out of memory for the endpoint");
		return -ENOMEM;
	}
	u->fd = -1;
	u->base.ops = &urpc__tp_udp_ops;
	u->base.kind = URPC_TRANSPORT_UDP;
	u->base.mtu = mtu;
	u->base.rq_depth = cfg->rq_depth;
	u->base.sq_depth = cfg->sq_depth;
	u->base.max_inline = 0;
	u->base.caps = 0;
	u->base.id = cfg->id;
	u->chunk_size = mtu - (uint32_t)sizeof(struct udp_ext);
	u->base.one_sided_timeout_ns =
		(uint64_t)(cfg->one_sided_timeout_ms ? cfg->one_sided_timeout_ms : 1000) *
		1000000ull;
	u->nonce = udp_random32();
	urpc__rand_seed(&u->key_rng, urpc__entropy64());
	ret = udp_alloc_arrays(u);
	if (ret) {
		URPC_ERR(cfg->id, "out of memory for %u-entry rings", cfg->rq_depth);
		goto out_free;
	}
	ret = udp_open(u, cfg);
	if (ret)
		goto out_free;
	*out = &u->base;
	return 0;

out_free:
	udp_free(u);
	return ret;
}

static int udp_destroy(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);

	if (u->nops || u->nregs)
		return -EBUSY;
	udp_free(u);
	return 0;
}

/* ---- endpoints and peers ------------------------------------------------- */

static size_t udp_get_endpoint(struct urpc_tp *tp, uint8_t *buf)
{
	struct udp_tp *u = to_udp(tp);
	struct in_addr a = u->local.sin_addr;
	uint32_t max_dgram = (uint32_t)URPC_MIN(u->slot_size, (size_t)UDP_MAX_DGRAM);

	/* a wildcard bind is reachable through loopback at least */
	if (a.s_addr == htonl(INADDR_ANY))
		a.s_addr = htonl(INADDR_LOOPBACK);
	buf[0] = (uint8_t)URPC_TRANSPORT_UDP;
	buf[1] = UDP_EP_VERSION;
	memcpy(buf + 2, &a.s_addr, 4);		/* network order */
	memcpy(buf + 6, &u->local.sin_port, 2); /* network order */
	memcpy(buf + 8, &u->nonce, 4);		/* little-endian */
	memcpy(buf + 12, &max_dgram, 4);	/* little-endian */
	return UDP_EP_LEN;
}

static int udp_resolve_peer(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			    struct urpc_tp_peer **out)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_tp_peer *p;
	uint32_t max_dgram;

	if (!ep || len != UDP_EP_LEN || ep[0] != (uint8_t)URPC_TRANSPORT_UDP ||
	    ep[1] != UDP_EP_VERSION)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->sa.sin_family = AF_INET;
	memcpy(&p->sa.sin_addr.s_addr, ep + 2, 4);
	memcpy(&p->sa.sin_port, ep + 6, 2);
	memcpy(&p->nonce, ep + 8, 4);
	memcpy(&max_dgram, ep + 12, 4);
	if (p->sa.sin_port == 0 || p->sa.sin_addr.s_addr == htonl(INADDR_ANY) ||
	    max_dgram < UDP_MIN_DGRAM || max_dgram > UDP_MAX_DGRAM) {
		free(p);
		return -EINVAL;
	}
	/* a WR_DATA chunk must arrive whole in the peer's receive slots */
	p->chunk_size = URPC_MIN(u->chunk_size, max_dgram - (uint32_t)sizeof(struct udp_hdr) -
							(uint32_t)sizeof(struct udp_ext));
	p->next = u->peers;
	if (u->peers)
		u->peers->prev = p;
	u->peers = p;
	*out = p;
	return 0;
}

static void udp_op_finish(struct udp_tp *u, struct udp_op *op, int status);

/*
 * Operations still using @peer complete with -ECONNRESET: from here on
 * their replies are stale (the op is no longer active) and are ignored.
 */
static void udp_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i;

	if (!peer)
		return;
	for (i = 0; i < UDP_OS_OPS; i++)
		if (u->ops[i].state == UDP_OP_ACTIVE && u->ops[i].peer == peer)
			udp_op_finish(u, &u->ops[i], -ECONNRESET);
	if (peer->prev)
		peer->prev->next = peer->next;
	else
		u->peers = peer->next;
	if (peer->next)
		peer->next->prev = peer->prev;
	free(peer);
}

/* ---- sending ------------------------------------------------------------- */

static inline void udp_hdr_init(struct udp_hdr *h, enum udp_type type, uint32_t op_id,
				uint32_t chunk, uint32_t status)
{
	h->magic = UDP_MAGIC;
	h->version = UDP_VERSION;
	h->type = (uint8_t)type;
	h->op_id = op_id;
	h->chunk = chunk;
	h->status = status;
}

static int udp_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i, done = 0;

	for (i = 0; i < n; i++) {
		if (unlikely(!pkts[i].peer))
			return -EINVAL;
		if (unlikely((uint64_t)pkts[i].hdr_len + pkts[i].data_len > tp->mtu))
			return -EMSGSIZE;
	}
	while (done < n) {
		unsigned cnt = URPC_MIN(n - done, tp->sq_depth);
		int ret;

		for (i = 0; i < cnt; i++) {
			const struct urpc_tp_tx *t = &pkts[done + i];
			struct iovec *iov = &u->tx_iov[3 * i];
			struct msghdr *mh = &u->tx_msgs[i].msg_hdr;
			size_t niov = 1;

			udp_hdr_init(&u->tx_hdrs[i], UDP_T_DATA, 0, 0, 0);
			iov[0].iov_base = &u->tx_hdrs[i];
			iov[0].iov_len = sizeof(struct udp_hdr);
			if (t->hdr_len) {
				iov[niov].iov_base = (void *)(uintptr_t)t->hdr;
				iov[niov++].iov_len = t->hdr_len;
			}
			if (t->data_len) {
				iov[niov].iov_base = (void *)(uintptr_t)t->data;
				iov[niov++].iov_len = t->data_len;
			}
			memset(mh, 0, sizeof(*mh));
			mh->msg_name = &t->peer->sa;
			mh->msg_namelen = sizeof(t->peer->sa);
			mh->msg_iov = iov;
			mh->msg_iovlen = niov;
		}
		ret = sendmmsg(u->fd, u->tx_msgs, cnt, MSG_DONTWAIT);
		if (unlikely(ret < 0)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
				break;
			if (errno == EINTR)
				continue;
			/* an unreliable datagram: the first one is lost, go on */
			URPC_WARN_RATELIMIT(tp->id, "sendmmsg: %s", strerror(errno));
			ret = 1;
		} else {
			for (i = 0; i < (unsigned)ret; i++) {
				tp->stats.tx_pkts++;
				tp->stats.tx_bytes +=
					pkts[done + i].hdr_len + pkts[done + i].data_len;
			}
		}
		/* after a short count the next call reports the error, if any */
		done += (unsigned)ret;
	}
	return (int)done;
}

static void udp_tx_flush(struct urpc_tp *tp)
{
	/* sendmmsg() copied the bytes already */
}

/* Send the queued one-sided datagrams; what does not fit is lost (retried). */
static void udp_ctl_flush(struct udp_tp *u)
{
	unsigned off = 0;

	while (off < u->nctl) {
		int ret = sendmmsg(u->fd, u->ctl_msgs + off, u->nctl - off, MSG_DONTWAIT);

		if (ret < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
				URPC_WARN_RATELIMIT(u->base.id, "sendmmsg: %s", strerror(errno));
			/* EAGAIN: the rest is lost; the requester's timer resends */
			break;
		}
		off += (unsigned)ret;
	}
	u->nctl = 0;
}

/*
 * Queue one one-sided datagram to @dst: the header, @ext when not NULL, and
 * @len bytes at @data. The bytes are read at the next udp_ctl_flush().
 */
static void udp_ctl_queue(struct udp_tp *u, const struct sockaddr_in *dst, enum udp_type type,
			  uint32_t op_id, uint32_t chunk, uint32_t status,
			  const struct udp_ext *ext, const void *data, size_t len)
{
	struct udp_ctl_hdrs *ch;
	struct msghdr *mh;
	struct iovec *iov;
	size_t niov = 1;
	unsigned i;

	if (unlikely(u->drop_p > 0.0) && type != UDP_T_NAK &&
	    urpc__rand_unit(&u->drop_rng) < u->drop_p) {
		u->base.stats.tx_dropped++;
		return;
	}
	if (u->nctl == UDP_CTL_BATCH)
		udp_ctl_flush(u);
	i = u->nctl++;
	ch = &u->ctl_hdrs[i];
	iov = u->ctl_iov[i];
	udp_hdr_init(&ch->h, type, op_id, chunk, status);
	iov[0].iov_base = &ch->h;
	iov[0].iov_len = sizeof(ch->h);
	if (ext) {
		ch->e = *ext;
		iov[niov].iov_base = &ch->e;
		iov[niov++].iov_len = sizeof(ch->e);
	}
	if (len) {
		iov[niov].iov_base = (void *)(uintptr_t)data;
		iov[niov++].iov_len = len;
	}
	u->ctl_dst[i] = *dst;
	mh = &u->ctl_msgs[i].msg_hdr;
	memset(mh, 0, sizeof(*mh));
	mh->msg_name = &u->ctl_dst[i];
	mh->msg_namelen = sizeof(u->ctl_dst[i]);
	mh->msg_iov = iov;
	mh->msg_iovlen = niov;
}

/* ---- registrations -------------------------------------------------------- */

/* A fresh nonzero key that no live registration uses as @rkey or lkey. */
static uint32_t udp_new_key(struct udp_tp *u, bool rkey)
{
	for (;;) {
		uint32_t k = (uint32_t)urpc__rand_next(&u->key_rng);
		bool clash = (k == 0);
		unsigned i;

		for (i = 0; i < u->nregs_cap && !clash; i++)
			if (u->regs[i].used && (rkey ? u->regs[i].rkey : u->regs[i].lkey) == k)
				clash = true;
		if (!clash)
			return k;
	}
}

/* Not for the datapath: may grow the table. */
static int udp_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
		       struct urpc_tp_mr *mr)
{
	struct udp_tp *u = to_udp(tp);
	struct udp_reg *r;
	unsigned i;

	if (!addr || !len || !mr ||
	    (access & ~(URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)) ||
	    (uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	for (i = 0; i < u->nregs_cap; i++)
		if (!u->regs[i].used)
			break;
	if (i == u->nregs_cap) {
		unsigned cap = u->nregs_cap ? 2 * u->nregs_cap : 8;
		struct udp_reg *n = realloc(u->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + u->nregs_cap, 0, (cap - u->nregs_cap) * sizeof(*n));
		u->regs = n;
		u->nregs_cap = cap;
	}
	r = &u->regs[i];
	r->addr = addr;
	r->len = len;
	r->access = access;
	r->lkey = udp_new_key(u, false);
	r->rkey = udp_new_key(u, true);
	r->used = true;
	u->nregs++;
	mr->addr = addr;
	mr->len = len;
	mr->lkey = r->lkey;
	mr->rkey = r->rkey;
	mr->access = access;
	mr->handle = (void *)(uintptr_t)(i + 1);
	return 0;
}

/* The registration behind @mr, or NULL when @mr is not a live one of @u. */
static struct udp_reg *udp_reg_of(struct udp_tp *u, const struct urpc_tp_mr *mr)
{
	uintptr_t i = (uintptr_t)mr->handle;

	if (!i || i > u->nregs_cap || !u->regs[i - 1].used || u->regs[i - 1].lkey != mr->lkey)
		return NULL;
	return &u->regs[i - 1];
}

/* The completion is reaped by poll_completions(). */
static void udp_op_finish(struct udp_tp *u, struct udp_op *op, int status)
{
	op->state = UDP_OP_DONE;
	op->status = status;
}

static void udp_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct udp_tp *u = to_udp(tp);
	struct udp_reg *r;
	unsigned i;

	if (!mr)
		return;
	r = udp_reg_of(u, mr);
	if (!r)
		return;
	/* local operations on it fail; the peer's requests now get NAKs */
	for (i = 0; i < UDP_OS_OPS; i++)
		if (u->ops[i].state == UDP_OP_ACTIVE && u->ops[i].lkey == r->lkey)
			udp_op_finish(u, &u->ops[i], -EIO);
	memset(r, 0, sizeof(*r));
	u->nregs--;
	mr->handle = NULL;
}

/* Linear in the registrations: a handful per endpoint. Datapath. */
static struct udp_reg *udp_reg_find_rkey(struct udp_tp *u, uint32_t rkey)
{
	unsigned i;

	for (i = 0; i < u->nregs_cap; i++)
		if (u->regs[i].used && u->regs[i].rkey == rkey)
			return &u->regs[i];
	return NULL;
}

static inline bool udp_reg_covers(const struct udp_reg *r, uint64_t addr, uint64_t len)
{
	uint64_t start = (uintptr_t)r->addr;

	return addr >= start && len <= r->len && addr - start <= r->len - len;
}

/* ---- one-sided: requester ------------------------------------------------ */

static inline uint32_t udp_op_id(const struct udp_tp *u, const struct udp_op *op)
{
	return (uint32_t)(op - u->ops) | ((uint32_t)op->gen << 16);
}

/* Queue chunk @c of @op (first send or resend). */
static void udp_op_send_chunk(struct udp_tp *u, struct udp_op *op, uint32_t c)
{
	uint64_t off = (uint64_t)c * op->chunk_size;
	size_t clen = (size_t)URPC_MIN((uint64_t)op->chunk_size, op->len - off);
	struct udp_ext e = {
		.raddr = op->raddr,
		.len = op->len,
		.rkey = op->rkey,
		.chunk_size = op->chunk_size,
	};

	if (op->kind == URPC_TP_OP_READ)
		udp_ctl_queue(u, &op->peer->sa, UDP_T_RD_REQ, udp_op_id(u, op), c, 0, &e, NULL, 0);
	else
		udp_ctl_queue(u, &op->peer->sa, UDP_T_WR_DATA, udp_op_id(u, op), c, 0, &e,
			      op->local + off, clen);
}

/* Send the chunks that the window newly allows. */
static void udp_op_pump(struct udp_tp *u, struct udp_op *op)
{
	while (op->next < op->nchunks && op->next - op->base < UDP_OS_WINDOW)
		udp_op_send_chunk(u, op, op->next++);
}

/* Chunk @c of @op is done; slide the window and finish or send more. */
static void udp_op_chunk_done(struct udp_tp *u, struct udp_op *op, uint32_t c, uint64_t now)
{
	op->done_mask |= 1ull << (c - op->base);
	while (op->done_mask & 1) {
		op->done_mask >>= 1;
		op->base++;
	}
	op->progress_ns = now;
	op->rto_ns = UDP_RTO_MIN_NS;
	op->retry_at_ns = now + op->rto_ns;
	if (op->base == op->nchunks)
		udp_op_finish(u, op, 0);
	else
		udp_op_pump(u, op);
}

/* Resend what is missing after a quiet RTO; fail after the timeout. */
static void udp_op_timers(struct udp_tp *u, struct udp_op *op, uint64_t now)
{
	uint32_t c;

	if (now - op->progress_ns >= u->base.one_sided_timeout_ns) {
		udp_op_finish(u, op, -ETIMEDOUT);
		return;
	}
	if (now < op->retry_at_ns)
		return;
	for (c = op->base; c < op->next; c++) {
		if (op->done_mask & (1ull << (c - op->base)))
			continue;
		udp_op_send_chunk(u, op, c);
		u->base.stats.os_retries++;
	}
	op->rto_ns = URPC_MIN(op->rto_ns * 2, UDP_RTO_MAX_NS);
	op->retry_at_ns = now + op->rto_ns;
}

static int udp_post(struct udp_tp *u, enum urpc_tp_op kind, struct urpc_tp_peer *peer,
		    const void *local, const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey,
		    size_t len, uint64_t wr_id)
{
	uint64_t now, nchunks;
	struct udp_reg *r;
	struct udp_op *op = NULL;
	unsigned i;

	if (unlikely(!peer || !mr || !local || !len))
		return -EINVAL;
	r = udp_reg_of(u, mr);
	if (unlikely(!r || (uintptr_t)local < (uintptr_t)mr->addr || len > mr->len ||
		     (uintptr_t)local - (uintptr_t)mr->addr > mr->len - len))
		return -EINVAL;
	nchunks = (len + peer->chunk_size - 1) / peer->chunk_size;
	if (unlikely(nchunks > UINT32_MAX))
		return -EINVAL;
	for (i = 0; i < UDP_OS_OPS; i++) {
		if (u->ops[i].state == UDP_OP_FREE) {
			op = &u->ops[i];
			break;
		}
	}
	if (unlikely(!op))
		return -EAGAIN;
	now = urpc__now_ns();
	op->state = UDP_OP_ACTIVE;
	op->kind = kind;
	op->status = 0;
	op->gen++;
	op->peer = peer;
	op->local = (uint8_t *)(uintptr_t)local;
	op->lkey = r->lkey;
	op->raddr = raddr;
	op->rkey = rkey;
	op->len = len;
	op->wr_id = wr_id;
	op->chunk_size = peer->chunk_size;
	op->nchunks = (uint32_t)nchunks;
	op->base = 0;
	op->next = 0;
	op->done_mask = 0;
	op->progress_ns = now;
	op->rto_ns = UDP_RTO_MIN_NS;
	op->retry_at_ns = now + op->rto_ns;
	u->nops++;
	udp_op_pump(u, op);
	udp_ctl_flush(u);
	return 0;
}

static int udp_post_read(struct urpc_tp *tp, struct urpc_tp_peer *peer, void *local,
			 const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			 uint64_t wr_id)
{
	return udp_post(to_udp(tp), URPC_TP_OP_READ, peer, local, mr, raddr, rkey, len, wr_id);
}

static int udp_post_write(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *local,
			  const struct urpc_tp_mr *mr, uint64_t raddr, uint32_t rkey, size_t len,
			  uint64_t wr_id)
{
	return udp_post(to_udp(tp), URPC_TP_OP_WRITE, peer, local, mr, raddr, rkey, len, wr_id);
}

/* ---- receiving ------------------------------------------------------------ */

static inline void udp_drop_bad(struct udp_tp *u, const char *why)
{
	u->base.stats.rx_drop_bad++;
	URPC_WARN_RATELIMIT(u->base.id, "dropped a malformed datagram: %s", why);
}

/*
 * Serve a peer's RD_REQ or WR_DATA (@len bytes at @buf, from @src). Returns
 * NULL, or why the datagram is malformed.
 */
static const char *udp_serve(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			     const struct sockaddr_in *src)
{
	const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;
	struct udp_ext e;
	struct udp_reg *r;
	uint64_t off, clen;
	bool rd = h->type == UDP_T_RD_REQ;
	unsigned need = rd ? URPC_TP_ACCESS_REMOTE_READ : URPC_TP_ACCESS_REMOTE_WRITE;

	if (unlikely(len < sizeof(*h) + sizeof(e)))
		return "short one-sided request";
	memcpy(&e, buf + sizeof(*h), sizeof(e));
	off = (uint64_t)h->chunk * e.chunk_size;
	if (unlikely(!e.chunk_size || e.chunk_size > UDP_MAX_DGRAM - sizeof(*h) || off >= e.len ||
		     e.raddr + e.len < e.raddr))
		return "bad one-sided range";
	clen = URPC_MIN((uint64_t)e.chunk_size, e.len - off);
	if (unlikely(len != sizeof(*h) + sizeof(e) + (rd ? 0 : clen)))
		return "one-sided length mismatch";
	u->base.stats.os_served++;
	r = udp_reg_find_rkey(u, e.rkey);
	if (unlikely(!r || !(r->access & need) || !udp_reg_covers(r, e.raddr, e.len))) {
		u->base.stats.os_rejected++;
		udp_ctl_queue(u, src, UDP_T_NAK, h->op_id, h->chunk, EACCES, NULL, NULL, 0);
		return NULL;
	}
	if (rd) {
		udp_ctl_queue(u, src, UDP_T_RD_DATA, h->op_id, h->chunk, 0, NULL,
			      (const void *)(uintptr_t)(e.raddr + off), (size_t)clen);
	} else {
		memcpy((void *)(uintptr_t)(e.raddr + off), buf + sizeof(*h) + sizeof(e),
		       (size_t)clen);
		udp_ctl_queue(u, src, UDP_T_WR_ACK, h->op_id, h->chunk, 0, NULL, NULL, 0);
	}
	return NULL;
}

/*
 * Handle a reply (RD_DATA, WR_ACK, NAK) to one of our operations. Returns
 * NULL (stale replies included: they are harmless), or why it is malformed.
 */
static const char *udp_reply(struct udp_tp *u, const uint8_t *buf, uint32_t len,
			     const struct sockaddr_in *src, uint64_t now)
{
	const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;
	uint32_t idx = h->op_id & 0xffffu, c = h->chunk;
	struct udp_op *op;
	uint64_t off, clen;

	if (unlikely(idx >= UDP_OS_OPS))
		return "bad op id";
	op = &u->ops[idx];
	/* stale replies (finished or reused op, done chunk) are harmless */
	if (op->state != UDP_OP_ACTIVE || op->gen != (uint16_t)(h->op_id >> 16))
		return NULL;
	if (unlikely(src->sin_addr.s_addr != op->peer->sa.sin_addr.s_addr ||
		     src->sin_port != op->peer->sa.sin_port))
		return "reply from another address";
	if (h->type == UDP_T_NAK) {
		if (unlikely(len != sizeof(*h)))
			return "bad NAK length";
		udp_op_finish(u, op, h->status == EACCES ? -EACCES : -EIO);
		return NULL;
	}
	if ((h->type == UDP_T_RD_DATA) != (op->kind == URPC_TP_OP_READ))
		return "reply type does not match the op";
	if (c < op->base || c >= op->next)
		return NULL;
	off = (uint64_t)c * op->chunk_size;
	clen = URPC_MIN((uint64_t)op->chunk_size, op->len - off);
	if (unlikely(len != sizeof(*h) + (h->type == UDP_T_RD_DATA ? clen : 0)))
		return "reply length mismatch";
	if (op->done_mask & (1ull << (c - op->base)))
		return NULL;
	if (h->type == UDP_T_RD_DATA)
		memcpy(op->local + off, buf + sizeof(*h), (size_t)clen);
	udp_op_chunk_done(u, op, c, now);
	return NULL;
}

/*
 * Check and dispatch the datagram in @slot. Returns true when it is DATA
 * for the caller (the slot stays held), false when the slot is free again.
 */
static bool udp_rx_one(struct udp_tp *u, uint32_t slot, uint32_t len, bool trunc, uint64_t now)
{
	const uint8_t *buf = u->ring + (size_t)slot * u->slot_size;
	const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;
	const char *why;

	if (unlikely(trunc || len < sizeof(*h) || h->magic != UDP_MAGIC ||
		     h->version != UDP_VERSION)) {
		udp_drop_bad(u, trunc ? "truncated" : "bad magic, version or length");
		return false;
	}
	switch (h->type) {
	case UDP_T_DATA:
		u->base.stats.rx_pkts++;
		u->base.stats.rx_bytes += len - sizeof(*h);
		return true;
	case UDP_T_RD_REQ:
	case UDP_T_WR_DATA:
		why = udp_serve(u, buf, len, &u->rx_src[slot]);
		if (unlikely(why))
			udp_drop_bad(u, why);
		return false;
	case UDP_T_RD_DATA:
	case UDP_T_WR_ACK:
	case UDP_T_NAK:
		why = udp_reply(u, buf, len, &u->rx_src[slot], now);
		if (unlikely(why))
			udp_drop_bad(u, why);
		return false;
	default:
		udp_drop_bad(u, "unknown type");
		return false;
	}
}

/*
 * The datagram of @len bytes that arrived in @slot: DATA joins the pending
 * FIFO (the slot stays held), anything else was served and its slot is free
 * again. Returns true for DATA.
 */
static inline bool udp_rx_done(struct udp_tp *u, uint32_t slot, uint32_t len, bool trunc,
			       uint64_t now)
{
	u->rx_len[slot] = len;
	if (udp_rx_one(u, slot, len, trunc, now)) {
		u->held[slot] = 1;
		u->pend[(u->pend_head + u->pend_cnt++) & (u->base.rq_depth - 1)] = slot;
		return true;
	}
	u->free_stk[u->nfree++] = slot;
	return false;
}

/*
 * Drain the socket into free slots: at most UDP_RX_MAX_PASSES recvmmsg()
 * calls. DATA goes to the pending FIFO; one-sided datagrams are served and
 * their slots freed at once. Flushes the replies it queued.
 */
static void udp_rx_drain(struct udp_tp *u)
{
	uint64_t now = urpc__now_ns();
	int pass;

	for (pass = 0; pass < UDP_RX_MAX_PASSES && u->nfree; pass++) {
		unsigned vlen = URPC_MIN(u->nfree, UDP_RX_BATCH), i;
		int ret;

		for (i = 0; i < vlen; i++) {
			uint32_t slot = u->free_stk[--u->nfree];
			struct msghdr *mh = &u->rx_msgs[i].msg_hdr;

			u->rx_slot[i] = slot;
			memset(mh, 0, sizeof(*mh));
			mh->msg_name = &u->rx_src[slot];
			mh->msg_namelen = sizeof(u->rx_src[slot]);
			mh->msg_iov = &u->rx_iov[slot];
			mh->msg_iovlen = 1;
		}
		ret = recvmmsg(u->fd, u->rx_msgs, vlen, MSG_DONTWAIT, NULL);
		if (ret < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				URPC_WARN_RATELIMIT(u->base.id, "recvmmsg: %s", strerror(errno));
			ret = 0;
		}
		for (i = 0; i < (unsigned)ret; i++) {
			uint32_t slot = u->rx_slot[i];
			bool trunc = u->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC;

			udp_rx_done(u, slot, u->rx_msgs[i].msg_len, trunc, now);
		}
		/* give back the slots recvmmsg() did not fill, in pop order */
		for (i = vlen; i-- > (unsigned)ret;)
			u->free_stk[u->nfree++] = u->rx_slot[i];
		if ((unsigned)ret < vlen)
			break;
	}
	udp_ctl_flush(u);
}

static int udp_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	uint32_t mask = tp->rq_depth - 1;
	unsigned i, cnt;

	if (u->pend_cnt < n)
		udp_rx_drain(u);
	cnt = URPC_MIN(n, u->pend_cnt);
	for (i = 0; i < cnt; i++) {
		uint32_t slot = u->pend[u->pend_head];

		u->pend_head = (u->pend_head + 1) & mask;
		pkts[i].buf = u->ring + (size_t)slot * u->slot_size + sizeof(struct udp_hdr);
		pkts[i].len = u->rx_len[slot] - (uint32_t)sizeof(struct udp_hdr);
		pkts[i].ring_idx = slot;
	}
	u->pend_cnt -= cnt;
	return (int)cnt;
}

static void udp_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i;

	for (i = 0; i < n; i++) {
		uint32_t slot = pkts[i].ring_idx;

		if (unlikely(slot >= tp->rq_depth || !u->held[slot])) {
			URPC_ERR_RATELIMIT(tp->id, "rx_release of entry %u that is not held", slot);
			continue;
		}
		u->held[slot] = 0;
		u->free_stk[u->nfree++] = slot;
	}
}

static int udp_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i, cnt = 0;
	uint64_t now;

	udp_rx_drain(u);
	if (!u->nops)
		return 0;
	now = urpc__now_ns();
	for (i = 0; i < UDP_OS_OPS; i++)
		if (u->ops[i].state == UDP_OP_ACTIVE)
			udp_op_timers(u, &u->ops[i], now);
	udp_ctl_flush(u);
	for (i = 0; i < UDP_OS_OPS && cnt < n; i++) {
		struct udp_op *op = &u->ops[i];

		if (op->state != UDP_OP_DONE)
			continue;
		comps[cnt].wr_id = op->wr_id;
		comps[cnt].op = op->kind;
		comps[cnt].status = op->status;
		cnt++;
		op->state = UDP_OP_FREE;
		u->nops--;
	}
	return (int)cnt;
}

/*
 * Idle waiting. The socket is the wake-up: poll() reports it readable while
 * any datagram is queued (level-triggered), so nothing needs arming and
 * wait_ack() has nothing to consume; rx_burst() reads the datagrams.
 * -EBUSY while one-sided operations are outstanding (or their completions
 * not reaped): their retransmissions and timeouts run only inside
 * rx_burst()/poll_completions(), which must keep being called. Also while
 * received datagrams wait in the pending FIFO, which no poll() sees.
 */
static int udp_wait_arm(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);

	if (u->nops || u->pend_cnt)
		return -EBUSY;
	return u->fd;
}

static void udp_wait_ack(struct urpc_tp *tp)
{
	/* Nothing to consume: see udp_wait_arm(). */
}

/* See udp.h. Not the datapath: the fuzzer's way into udp_rx_one(). */
int urpc__udp_rx_inject(struct urpc_tp *tp, const void *buf, size_t len,
			const struct sockaddr_in *src)
{
	struct udp_tp *u;
	uint32_t slot;
	size_t n;
	bool data;

	if (!tp || tp->ops != &urpc__tp_udp_ops || (!buf && len) || !src)
		return -EINVAL;
	u = to_udp(tp);
	if (!u->nfree)
		return -EAGAIN;
	/* What recvmmsg() does with one datagram: a free slot, cut to its size. */
	slot = u->free_stk[--u->nfree];
	n = URPC_MIN(len, u->slot_size);
	if (n)
		memcpy(u->ring + (size_t)slot * u->slot_size, buf, n);
	u->rx_src[slot] = *src;
	data = udp_rx_done(u, slot, (uint32_t)n, len > u->slot_size, urpc__now_ns());
	udp_ctl_flush(u);
	return data ? 1 : 0;
}

int urpc__udp_set_drop(struct urpc_tp *tp, double p, uint64_t seed)
{
	struct udp_tp *u;

	if (!tp || tp->ops != &urpc__tp_udp_ops || !(p >= 0.0 && p <= 1.0))
		return -EINVAL;
	u = to_udp(tp);
	u->drop_p = p;
	urpc__rand_seed(&u->drop_rng, seed);
	return 0;
}

const struct urpc_tp_ops urpc__tp_udp_ops = {
	.name = "udp",
	.create = udp_create,
	.destroy = udp_destroy,
	.get_endpoint = udp_get_endpoint,
	.resolve_peer = udp_resolve_peer,
	.release_peer = udp_release_peer,
	.tx_burst = udp_tx_burst,
	.tx_flush = udp_tx_flush,
	.reg_mem = udp_reg_mem,
	.dereg_mem = udp_dereg_mem,
	.post_read = udp_post_read,
	.post_write = udp_post_write,
	.rx_burst = udp_rx_burst,
	.rx_release = udp_rx_release,
	.poll_completions = udp_poll_completions,
	.wait_arm = udp_wait_arm,
	.wait_ack = udp_wait_ack,
};
