/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's top: endpoint create/destroy, peers (and the socket
 * connected while they share one address), idle waiting, the test entry
 * points of udp.h and the ops table. Datagrams are udp_io.c's; the
 * emulated one-sided protocol and registrations udp_os.c's. Neither calls
 * back up. udp_int.h holds the types and the wire format.
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp.h"
#include "udp_ep.h"

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
#include "udp_io.h"
#include "udp_os.h"

/* ---- create / destroy --------------------------------------------------- */

void urpc__udp_ep_free(struct udp_tp *u)
{
	struct urpc_tp_peer *p, *next;

	for (p = u->peers; p; p = next) {
		next = p->next;
		free(p);
	}
	if (u->fd >= 0)
		close(u->fd);
	urpc__sw_mr_fini(&u->mrs);
	free(u->tx_stage);
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
	u->tx_stage = malloc(UDP_TX_STAGE);
	if (!u->ring || !u->rx_src || !u->rx_len || !u->rx_iov || !u->held || !u->free_stk ||
	    !u->pend || !u->tx_msgs || !u->tx_iov || !u->tx_hdrs || !u->tx_stage)
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

/*
 * Bind u->fd to u->local with port 0 replaced by a free port named
 * explicitly: one the kernel picks for a throwaway socket, released and
 * bound again at once (tried a few times, as another socket may take it
 * in between). A socket bound to a named port keeps it when its connect()
 * is undone (udp_conn_update()); one bound to port 0 would lose it. Sets
 * port_locked when it bound; otherwise the caller binds to port 0 and the
 * socket is never connected.
 */
static void udp_bind_free_port(struct udp_tp *u)
{
	struct sockaddr_in sa = u->local;
	socklen_t alen;
	int tries, fd;

	for (tries = 0; tries < 8 && !u->port_locked; tries++) {
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return;
		sa.sin_port = 0;
		alen = sizeof(sa);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    getsockname(fd, (struct sockaddr *)&sa, &alen) < 0) {
			close(fd);
			return;
		}
		close(fd);
		if (bind(u->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			u->port_locked = true;
		else if (errno != EADDRINUSE)
			return;
	}
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
	if (!cfg->port)
		udp_bind_free_port(u);
	if (!u->port_locked) {
		if (bind(u->fd, (struct sockaddr *)&u->local, sizeof(u->local)) < 0) {
			ret = -errno;
			URPC_ERR(cfg->id, "bind %s:%u: %s", host, cfg->port, strerror(-ret));
			return ret;
		}
		u->port_locked = cfg->port != 0;
	}
	alen = sizeof(u->local);
	if (getsockname(u->fd, (struct sockaddr *)&u->local, &alen) < 0) {
		ret = -errno;
		URPC_ERR(cfg->id, "getsockname: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

int urpc__udp_ep_init(struct udp_tp *u, const struct urpc_tp_cfg *cfg,
		      const struct urpc_tp_ops *ops, enum urpc_transport_kind kind)
{
	uint32_t mtu;
	int ret;

	u->fd = -1;
	ret = udp_check_cfg(cfg, &mtu);
	if (ret)
		return ret;
	u->base.ops = ops;
	u->base.kind = kind;
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
	urpc__sw_mr_init(&u->mrs, 0);
	u->mrs.live_stat = &u->base.stats.grants_live;
	ret = udp_alloc_arrays(u);
	if (ret) {
		URPC_ERR(cfg->id, "out of memory for %u-entry rings", cfg->rq_depth);
		return ret;
	}
	return udp_open(u, cfg);
}

static int udp_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct udp_tp *u;
	int ret;

	u = calloc(1, sizeof(*u));
	if (!u) {
		URPC_ERR(cfg->id, "out of memory for the endpoint");
		return -ENOMEM;
	}
	ret = urpc__udp_ep_init(u, cfg, &urpc__tp_udp_ops, URPC_TRANSPORT_UDP);
	if (ret) {
		urpc__udp_ep_free(u);
		return ret;
	}
	*out = &u->base;
	return 0;
}

static int udp_destroy(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);

	if (u->nops || u->mrs.n)
		return -EBUSY;
	urpc__udp_ep_free(u);
	return 0;
}

/* ---- endpoints and peers ------------------------------------------------- */

size_t urpc__udp_get_endpoint(struct urpc_tp *tp, uint8_t *buf)
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
bool urpc__udp_rx_is_from(struct urpc_tp *tp, const struct urpc_tp_rx *rx,
			  const struct urpc_tp_peer *peer)
{
	const struct sockaddr_in *sa;

	if (rx->ring_idx >= tp->rq_depth)
		return false;
	sa = &to_udp(tp)->rx_src[rx->ring_idx];
	return sa->sin_addr.s_addr == peer->sa.sin_addr.s_addr && sa->sin_port == peer->sa.sin_port;
}

static int udp_tx_reply(struct urpc_tp *tp, const struct urpc_tp_rx *rx, const void *buf,
			uint32_t len)
{
	struct udp_tp *u = to_udp(tp);
	struct udp_hdr h;
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)(uintptr_t)buf, len}};
	struct msghdr m;

	if (rx->ring_idx >= tp->rq_depth || len > tp->mtu)
		return -EINVAL;
	udp_hdr_init(&h, UDP_T_DATA, 0, 0, 0);
	memset(&m, 0, sizeof(m));
	m.msg_name = &u->rx_src[rx->ring_idx];
	m.msg_namelen = sizeof(u->rx_src[rx->ring_idx]);
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	return sendmsg(u->fd, &m, 0) < 0 ? -errno : 0;
}

int urpc__udp_ep_host(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr)
{
	if (!ep || len != UDP_EP_LEN || ep[0] != (uint8_t)URPC_TRANSPORT_UDP ||
	    ep[1] != UDP_EP_VERSION)
		return -EINVAL;
	memcpy(addr, ep + 2, 4);
	return 0;
}

static inline bool udp_sa_eq(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/*
 * Connect the socket while all peers share one address, undo it otherwise
 * (see udp_int.h). Best effort: a socket that is not connected works, only
 * its sends look the route up. Not for the datapath.
 */
static void udp_conn_update(struct udp_tp *u)
{
	/* an xdp endpoint's socket sends only to peers on this host: never connected */
	bool want = !u->xdp && u->port_locked && u->npeers && u->nsame == u->npeers;

	if (want && !u->connected) {
		u->connected = connect(u->fd, (const struct sockaddr *)&u->same_sa,
				       sizeof(u->same_sa)) == 0;
	} else if (!want && u->connected) {
		struct sockaddr_in none = {.sin_family = AF_UNSPEC};

		if (connect(u->fd, (const struct sockaddr *)&none, sizeof(none)) < 0)
			URPC_WARN(u->base.id, "undoing connect: %s", strerror(errno));
		u->connected = false;
	}
}

int urpc__udp_resolve_peer(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			   struct urpc_tp_peer **out)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_tp_peer *p;
	uint32_t max_dgram;

	/* Another release's endpoint (a small version number: not garbage) is named as such. */
	if (ep && len == UDP_EP_LEN && ep[0] == (uint8_t)URPC_TRANSPORT_UDP && ep[1] &&
	    ep[1] < 16 && ep[1] != UDP_EP_VERSION) {
		URPC_WARN(u->base.id,
			  "the peer's udp endpoint speaks wire version %u, this build %u: "
			  "run the same urpc release on both sides",
			  ep[1], UDP_EP_VERSION);
		return -EPROTO;
	}
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
	if (!u->nsame)
		u->same_sa = p->sa;
	u->nsame += udp_sa_eq(&p->sa, &u->same_sa);
	u->npeers++;
	udp_conn_update(u);
	*out = p;
	return 0;
}

/*
 * Operations still using @peer complete with -ECONNRESET: from here on
 * their replies are stale (the op is no longer active) and are ignored.
 */
void urpc__udp_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
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
	u->npeers--;
	u->nsame -= udp_sa_eq(&peer->sa, &u->same_sa);
	if (u->npeers == 1 && !u->nsame) {
		/* the one left has an address of its own: it is the one now */
		u->same_sa = u->peers->sa;
		u->nsame = 1;
	}
	free(peer);
	udp_conn_update(u);
}

/* ---- sending, receiving: udp_io.c; idle waiting ---- */

static void udp_tx_flush(struct urpc_tp *tp)
{
	/* sendmmsg() copied the bytes already */
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
int urpc__udp_wait_arm(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);

	if (u->nops || u->pend_cnt)
		return -EBUSY;
	return u->fd;
}

void urpc__udp_wait_ack(struct urpc_tp *tp)
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

	if (!urpc__udp_is_udp_tp(tp) || (!buf && len) || !src)
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
	data = urpc__udp_rx_done(u, slot, (uint32_t)n, len > u->slot_size, &now);
	urpc__udp_os_flush(u);
	return data ? 1 : 0;
}

int urpc__udp_set_drop(struct urpc_tp *tp, double p, uint64_t seed)
{
	struct udp_tp *u;

	if (!urpc__udp_is_udp_tp(tp) || !(p >= 0.0 && p <= 1.0))
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
	.get_endpoint = urpc__udp_get_endpoint,
	.resolve_peer = urpc__udp_resolve_peer,
	.release_peer = urpc__udp_release_peer,
	.ep_host = urpc__udp_ep_host,
	.rx_is_from = urpc__udp_rx_is_from,
	.tx_reply = udp_tx_reply,
	.tx_burst = urpc__udp_tx_burst,
	.tx_flush = udp_tx_flush,
	.tx_now = urpc__tp_default_tx_now,
	.reg_mem = urpc__udp_os_reg_mem,
	.dereg_mem = urpc__udp_os_dereg_mem,
	.post_read = urpc__udp_os_post_read,
	.post_write = urpc__udp_os_post_write,
	.set_peer_token = urpc__udp_os_set_peer_token,
	.set_peer_window = urpc__udp_os_set_peer_window,
	.peer_os_rtt = urpc__udp_os_peer_rtt,
	.grant = urpc__udp_os_grant,
	.revoke = urpc__udp_os_revoke,
	.rx_burst = urpc__udp_rx_burst,
	.rx_run = urpc__tp_default_rx_run,
	.rx_release = urpc__udp_rx_release,
	.poll_completions = urpc__udp_poll_completions,
	.cancel = urpc__udp_os_cancel,
	.os_idle = urpc__udp_os_idle,
	.wait_arm = urpc__udp_wait_arm,
	.wait_ack = urpc__udp_wait_ack,
	.reg_dmabuf = urpc__tp_default_reg_dmabuf,
	.ctl_pop = urpc__tp_default_ctl_pop,
	.ctl_push = urpc__tp_default_ctl_push,
};
