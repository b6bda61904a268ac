/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's top: endpoint create/destroy, peers, datagrams
 * (DATA: sendmmsg() from the caller's memory; recvmmsg() into a ring of
 * rq_depth buffers allocated at create()), idle waiting, the test entry
 * points of udp.h and the ops table. The receive path hands one-sided
 * requests and replies to udp_os.c, which serves them inside rx_burst()
 * and poll_completions(); udp_os.c never calls back up. udp_int.h holds
 * the types and the wire format.
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
#include "../util/seam.h"
#include "tp_default.h"
#include "transport.h"
#include "udp_int.h"
#include "udp_os.h"

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
	urpc__sw_mr_fini(&u->mrs);
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
	u->base.caps = URPC_TP_CAP_WAIT;
	u->base.id = cfg->id;
	u->chunk_size = mtu - (uint32_t)sizeof(struct udp_ext);
	u->base.one_sided_timeout_ns =
		(uint64_t)(cfg->one_sided_timeout_ms ? cfg->one_sided_timeout_ms : 1000) *
		1000000ull;
	u->nonce = udp_random32();
	urpc__sw_mr_init(&u->mrs, urpc__entropy64());
	u->mrs.live_stat = &u->base.stats.grants_live;
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

	if (u->nops || u->mrs.n)
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

/* The host of a udp endpoint: bytes 2..5 (see udp_get_endpoint()). */
static int udp_ep_host(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr)
{
	if (!ep || len != UDP_EP_LEN || ep[0] != (uint8_t)URPC_TRANSPORT_UDP ||
	    ep[1] != UDP_EP_VERSION)
		return -EINVAL;
	memcpy(addr, ep + 2, 4);
	return 0;
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

/*
 * Operations still using @peer complete with -ECONNRESET: from here on
 * their replies are stale (the op is no longer active) and are ignored.
 */
static void udp_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	struct udp_tp *u = to_udp(tp);

	if (!peer)
		return;
	urpc__udp_os_release_peer(u, peer);
	if (peer->prev)
		peer->prev->next = peer->next;
	else
		u->peers = peer->next;
	if (peer->next)
		peer->next->prev = peer->prev;
	free(peer);
}

/* ---- sending ------------------------------------------------------------- */

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
		tp->stats.sys_tx++;
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

/* ---- receiving ------------------------------------------------------------ */

static inline void udp_drop_bad(struct udp_tp *u, const char *why)
{
	u->base.stats.rx_drop_bad++;
	URPC_WARN_RATELIMIT(u->base.id, "dropped a malformed datagram: %s", why);
}

/*
 * Check and dispatch the datagram in @slot. Returns true when it is DATA
 * for the caller (the slot stays held), false when the slot is free again.
 * *@now is the clock for one-sided replies, read on the first (0: not yet).
 */
static bool udp_rx_one(struct udp_tp *u, uint32_t slot, uint32_t len, bool trunc, uint64_t *now)
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
		why = urpc__udp_os_serve(u, buf, len, &u->rx_src[slot]);
		if (unlikely(why))
			udp_drop_bad(u, why);
		return false;
	case UDP_T_RD_DATA:
	case UDP_T_WR_ACK:
	case UDP_T_NAK:
		if (!*now)
			*now = urpc__now_ns();
		why = urpc__udp_os_reply(u, buf, len, &u->rx_src[slot], *now);
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
			       uint64_t *now)
{
	u->rx_len[slot] = len;
	if (udp_rx_one(u, slot, len, trunc, now)) {
		u->held[slot] = 1;
		u->pend[(u->pend_head + u->pend_cnt++) & (u->base.rq_depth - 1)] = slot;
		return true;
	}
	u->free_stk[u->nfree++] = slot;
	u->rx_armed = 0;
	return false;
}

/*
 * Point rx_msgs[0..@vlen) at the top @vlen free slots, in pop order. They
 * stay armed while the free stack does not change: a busy poller's empty
 * passes (recvmmsg() found nothing, and wrote nothing) do not redo it.
 */
static void udp_rx_arm(struct udp_tp *u, unsigned vlen)
{
	unsigned i;

	for (i = 0; i < vlen; i++) {
		uint32_t slot = u->free_stk[u->nfree - 1 - i];
		struct msghdr *mh = &u->rx_msgs[i].msg_hdr;

		u->rx_slot[i] = slot;
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &u->rx_src[slot];
		mh->msg_namelen = sizeof(u->rx_src[slot]);
		mh->msg_iov = &u->rx_iov[slot];
		mh->msg_iovlen = 1;
	}
	u->rx_armed = vlen;
}

/*
 * Drain the socket into free slots: at most UDP_RX_MAX_PASSES recvmmsg()
 * calls. DATA goes to the pending FIFO; one-sided datagrams are served and
 * their slots freed at once. Flushes the replies it queued.
 */
static void udp_rx_drain(struct udp_tp *u)
{
	uint64_t now = 0;
	int pass;

	for (pass = 0; pass < UDP_RX_MAX_PASSES && u->nfree; pass++) {
		unsigned vlen = URPC_MIN(u->nfree, UDP_RX_BATCH), i;
		int ret;

		if (u->rx_armed != vlen)
			udp_rx_arm(u, vlen);
		ret = recvmmsg(u->fd, u->rx_msgs, vlen, MSG_DONTWAIT, NULL);
		u->base.stats.sys_rx++;
		if (ret <= 0) {
			u->base.stats.sys_rx_empty++;
			if (ret < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				URPC_WARN_RATELIMIT(u->base.id, "recvmmsg: %s", strerror(errno));
			break;
		}
		/* the filled slots are the top ret ones: pop them */
		u->nfree -= (unsigned)ret;
		u->rx_armed = 0;
		for (i = 0; i < (unsigned)ret; i++) {
			uint32_t slot = u->rx_slot[i];
			bool trunc = u->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC;

			udp_rx_done(u, slot, u->rx_msgs[i].msg_len, trunc, &now);
		}
		if ((unsigned)ret < vlen)
			break;
	}
	if (unlikely(u->nctl))
		urpc__udp_os_flush(u);
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
		u->rx_armed = 0;
	}
}

/* Drain the socket (requests served, replies taken), then the operations' timers. */
static int udp_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct udp_tp *u = to_udp(tp);

	udp_rx_drain(u);
	return urpc__udp_os_poll(u, comps, n);
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
	uint64_t now = 0;
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
	u->rx_armed = 0;
	n = URPC_MIN(len, u->slot_size);
	if (n)
		memcpy(u->ring + (size_t)slot * u->slot_size, buf, n);
	u->rx_src[slot] = *src;
	data = udp_rx_done(u, slot, (uint32_t)n, len > u->slot_size, &now);
	urpc__udp_os_flush(u);
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
	.ep_host = udp_ep_host,
	.tx_burst = udp_tx_burst,
	.tx_flush = udp_tx_flush,
	.reg_mem = urpc__udp_os_reg_mem,
	.dereg_mem = urpc__udp_os_dereg_mem,
	.post_read = urpc__udp_os_post_read,
	.post_write = urpc__udp_os_post_write,
	.set_peer_token = urpc__udp_os_set_peer_token,
	.grant = urpc__udp_os_grant,
	.revoke = urpc__udp_os_revoke,
	.rx_burst = udp_rx_burst,
	.rx_release = udp_rx_release,
	.poll_completions = udp_poll_completions,
	.wait_arm = udp_wait_arm,
	.wait_ack = udp_wait_ack,
	.reg_dmabuf = urpc__tp_default_reg_dmabuf,
	.ctl_pop = urpc__tp_default_ctl_pop,
	.ctl_push = urpc__tp_default_ctl_push,
};
