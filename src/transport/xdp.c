/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's top: endpoint create/destroy, peers, idle waiting
 * and the ops table. An xdp endpoint is a udp endpoint (udp_ep.h) whose
 * datagrams travel through AF_XDP sockets, one per receive queue of the
 * interface (opts.device / URPC_DEVICE), each with its own RX / TX rings
 * sized from the endpoint's config, on the process's UMEM of that queue
 * (xdp_umem.c: shared by the process's endpoints there), bound with
 * XDP_USE_NEED_WAKEUP, zero-copy where the driver offers it and copy mode
 * otherwise. The udp files keep the wire format, the receive
 * slots and the one-sided protocol (so xdp and udp endpoints talk to each
 * other); xdp_io.c carries the frames, xdp_bpf.c the program and maps,
 * xdp_nl.c the interface and neighbours.
 *
 * The endpoint's address is cfg->host when the interface has it, else the
 * interface's first IPv4 address; its kernel UDP socket holds the port and
 * carries peers on this host's own interface.
 */
#define _GNU_SOURCE
#define URPC_LOG_MODULE "xdp"
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/log.h"
#include "tp_default.h"
#include "udp_ep.h"
#include "udp_io.h"
#include "udp_os.h"
#include "xdp_int.h"
#include "xdp_sys.h"
#include "xdp_umem.h"

static const struct urpc_tp_ops xdp_ops;

static_assert(sizeof(struct udp_hdr) <= URPC_XDP_PRE_MAX, "a DATA header fits a frame template");

static void xdp_fini(struct udp_tp *u, struct urpc_xdp *x, long id)
{
	int lock = urpc__xdp_lock(x->ifname);
	unsigned i;

	urpc__xdp_maps_del(x, id);
	urpc__xdp_unlock(lock);
	for (i = 0; i < x->nq; i++)
		urpc__xdp_q_close(u, x, i);
	if (x->epfd >= 0)
		close(x->epfd);
	free(x);
}

/* One queue's socket, on the process's UMEM of that queue (xdp_umem.c). */
static int xdp_q_init(struct udp_tp *u, struct urpc_xdp *x, unsigned qi)
{
	struct xdp_q *q = &x->q[qi];
	int ret;

	ret = urpc__xdp_q_open(u, x, qi);
	if (ret)
		return ret;
	if (x->busy_poll) {
		int one = 1, us = 20, budget = 64;

		(void)setsockopt(q->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one));
		(void)setsockopt(q->fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
		(void)setsockopt(q->fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget));
	}
	return 0;
}

/*
 * URPC_XDP_QUEUES=A or A-B: bind only receive queues A to B of the
 * interface (each process on an interface its own queues, a NIC's flow
 * rules steering each one's ports there; frames that land on another queue
 * reach the endpoint through its kernel socket). Unset: every queue.
 */
static int xdp_queues(struct urpc_xdp *x, long id)
{
	const char *env = getenv("URPC_XDP_QUEUES");
	unsigned long a, b;
	char *end;

	x->q0 = 0;
	x->partial = false;
	if (!env || !*env)
		return 0;
	a = strtoul(env, &end, 10);
	b = a;
	if (end != env && *end == '-')
		b = strtoul(end + 1, &end, 10);
	if (end == env || *end || a > b || b >= x->nq) {
		URPC_ERR(id, "xdp: URPC_XDP_QUEUES=%s: use A or A-B with A <= B < %u (%s's queues)",
			 env, x->nq, x->ifname);
		return -EINVAL;
	}
	x->q0 = (unsigned)a;
	x->partial = a > 0 || b + 1 < x->nq;
	x->nq = (unsigned)(b - a + 1);
	return 0;
}

/* Interface, address and mtu into @x and @c. */
static int xdp_prepare(struct urpc_xdp *x, struct urpc_tp_cfg *c, char *host, size_t hlen)
{
	uint32_t ifmtu, mtu, want = 0;
	char driver[32];
	int ret;

	ret = urpc__xdp_if_info(x, &ifmtu, driver, sizeof(driver), c->id);
	if (!ret)
		ret = xdp_queues(x, c->id);
	if (ret)
		return ret;
	if (c->host)
		inet_pton(AF_INET, c->host, &want);
	ret = urpc__xdp_if_addr(x, want, c->id);
	if (ret)
		return ret;
	inet_ntop(AF_INET, &x->addr, host, (socklen_t)hlen);
	c->host = host;
	/* a frame holds the headers, udp's header and the payload; 4 KiB at most */
	mtu = URPC_MIN(ifmtu - 28, 4096u - URPC_XDP_HDR_LEN) - (uint32_t)sizeof(struct udp_hdr);
	if (c->mtu > mtu) {
		URPC_ERR(c->id, "xdp: mtu %u is above what %s carries (%u)", c->mtu, x->ifname,
			 mtu);
		return -EINVAL;
	}
	if (!c->mtu)
		c->mtu = URPC_MIN(mtu, UDP_DEFAULT_DGRAM - (uint32_t)sizeof(struct udp_hdr));
	x->frame_size = URPC_XDP_HDR_LEN + sizeof(struct udp_hdr) + c->mtu <= 2048 ? 2048 : 4096;
	x->csum_trusted = !strcmp(driver, "veth");
	return 0;
}

static int xdp_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct urpc_tp_cfg c = *cfg;
	char host[INET_ADDRSTRLEN];
	const char *dev = cfg->device;
	struct urpc_xdp *x;
	struct udp_tp *u;
	unsigned i;
	int ret, lock;

	if (!dev || !*dev)
		dev = getenv("URPC_DEVICE");
	if (!dev || !*dev) {
		URPC_ERR(cfg->id,
			 "xdp needs an interface: set urpc_rpc_opts.device or URPC_DEVICE");
		return -EINVAL;
	}
	u = calloc(1, sizeof(*u));
	x = calloc(1, sizeof(*x));
	if (!u || !x) {
		free(u);
		free(x);
		return -ENOMEM;
	}
	x->epfd = -1;
	x->prog_fd = x->ports_fd = x->xsks_fd = x->pslot_fd = -1;
	snprintf(x->ifname, sizeof(x->ifname), "%s", dev);
	ret = xdp_prepare(x, &c, host, sizeof(host));
	if (ret)
		goto out_free;
	ret = urpc__udp_ep_init(u, &c, &xdp_ops, URPC_TRANSPORT_XDP);
	if (ret)
		goto out_free;
	x->port = u->local.sin_port;
	x->nrx = c.rq_depth;
	x->busy_poll = getenv("URPC_XDP_BUSY_POLL") && !strcmp(getenv("URPC_XDP_BUSY_POLL"), "1");
	/*
	 * Send frames: twice the send queue, all on queue 0 (a burst of
	 * one-sided replies may outrun the completions of a loaded host).
	 */
	x->ntx = 2 * c.sq_depth;
	lock = urpc__xdp_lock(x->ifname);
	ret = urpc__xdp_prog_get(x, c.id);
	if (ret)
		goto out_unlock;
	x->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (x->epfd < 0) {
		ret = -errno;
		goto out_unlock;
	}
	for (i = 0; i < x->nq; i++) {
		ret = xdp_q_init(u, x, i);
		if (ret)
			goto out_unlock;
	}
	if (x->partial) {
		/*
		 * Datagrams that land on a queue this endpoint does not bind
		 * pass to the kernel: its socket is read as for a peer on this
		 * host, for the endpoint's life (a peer count that never ends).
		 */
		u->kpeers++;
	}
	ret = urpc__xdp_maps_add(x, c.id);
	if (ret)
		goto out_unlock;
	urpc__xdp_unlock(lock);
	u->xdp = x;
	URPC_INFO(c.id, "xdp: %s:%u on %s, %u queue(s) from %u%s, %s mode, %s XDP, UMEM in %s",
		  host, ntohs(x->port), x->ifname, x->nq, x->q0,
		  x->partial ? " (URPC_XDP_QUEUES; the kernel socket read too)" : "",
		  x->zerocopy ? "zero-copy" : "copy", x->generic ? "generic" : "native",
		  x->huge ? "hugepages" : "normal pages");
	*out = &u->base;
	return 0;

out_unlock:
	urpc__xdp_unlock(lock);
out_free:
	xdp_fini(u, x, c.id);
	urpc__udp_ep_free(u);
	return ret;
}

static void xdp_peer_free(struct udp_tp *u, struct urpc_tp_peer *p)
{
	if (p->xp) {
		free(p->xp);
		p->xp = NULL;
	} else if (u->kpeers) {
		u->kpeers--;
	}
}

static int xdp_destroy(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_tp_peer *p;

	if (u->nops || u->mrs.n)
		return -EBUSY;
	for (p = u->peers; p; p = p->next)
		xdp_peer_free(u, p);
	xdp_fini(u, u->xdp, tp->id);
	u->xdp = NULL;
	urpc__udp_ep_free(u);
	return 0;
}

static int xdp_resolve_peer(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			    struct urpc_tp_peer **out)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_xdp *x = u->xdp;
	struct urpc_tp_peer *p;
	uint8_t mac[6];
	int ret;

	ret = urpc__udp_resolve_peer(tp, ep, len, &p);
	if (ret)
		return ret;
	ret = urpc__xdp_nexthop(x, p->sa.sin_addr.s_addr, mac, tp->id);
	if (ret < 0) {
		urpc__udp_release_peer(tp, p);
		return ret;
	}
	if (ret) {
		struct udp_hdr h;

		p->xp = calloc(1, sizeof(*p->xp));
		if (!p->xp) {
			urpc__udp_release_peer(tp, p);
			return -ENOMEM;
		}
		urpc__xdp_frame_tmpl(p->xp, x->mac, mac, x->addr, p->sa.sin_addr.s_addr, x->port,
				     p->sa.sin_port);
		/* every DATA frame starts with the same udp header (udp_io.c) */
		udp_hdr_init(&h, UDP_T_DATA, 0, 0, 0);
		urpc__xdp_frame_tmpl_pre(p->xp, &h, sizeof(h));
	} else {
		/* on this host: the kernel socket carries it both ways (read while kpeers) */
		u->kpeers++;
	}
	*out = p;
	return 0;
}

static void xdp_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	if (!peer)
		return;
	xdp_peer_free(to_udp(tp), peer);
	urpc__udp_release_peer(tp, peer);
}

static void xdp_tx_flush(struct urpc_tp *tp)
{
	/* the frames were copied into the UMEM */
}

/*
 * Idle waiting: the AF_XDP sockets, and the kernel socket while it has
 * peers on this host, in one epoll set, only from wait_arm() to wait_ack()
 * (xdp_int.h: a busy endpoint's sockets have no sleeper to wake). A
 * datagram that came before the add makes the epoll fd readable at once.
 * ep_fds(): the descriptors to watch, into @fds; their number.
 */
static unsigned ep_fds(const struct udp_tp *u, int fds[URPC_XDP_MAXQ + 1])
{
	const struct urpc_xdp *x = u->xdp;
	unsigned i, n = 0;

	for (i = 0; i < x->nq; i++)
		fds[n++] = x->q[i].fd;
	if (u->kpeers)
		fds[n++] = u->fd;
	return n;
}

static int xdp_wait_arm(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_xdp *x = u->xdp;
	int fds[URPC_XDP_MAXQ + 1], ret;
	unsigned i, n;

	if (u->nops || u->pend_cnt)
		return -EBUSY;
	if (x->in_ep)
		return x->epfd;
	n = ep_fds(u, fds);
	for (i = 0; i < n; i++) {
		struct epoll_event ev = {.events = EPOLLIN};

		if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
			ret = -errno;
			while (i--)
				(void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, fds[i], NULL);
			return ret;
		}
	}
	x->in_ep = n;
	return x->epfd;
}

/* After the idle wait (or an arm the loop did not sleep on): the sockets leave the set. */
static void xdp_wait_ack(struct urpc_tp *tp)
{
	struct udp_tp *u = to_udp(tp);
	struct urpc_xdp *x = u->xdp;
	int fds[URPC_XDP_MAXQ + 1];
	unsigned i;

	if (!x->in_ep)
		return;
	/* the set of the arm: no peer comes or goes while the Rpc waits */
	(void)ep_fds(u, fds);
	for (i = 0; i < x->in_ep; i++)
		(void)epoll_ctl(x->epfd, EPOLL_CTL_DEL, fds[i], NULL);
	x->in_ep = 0;
}

static const struct urpc_tp_ops xdp_ops = {
	.name = "xdp",
	.create = xdp_create,
	.destroy = xdp_destroy,
	.get_endpoint = urpc__udp_get_endpoint,
	.resolve_peer = xdp_resolve_peer,
	.release_peer = xdp_release_peer,
	.ep_host = urpc__udp_ep_host,
	.rx_is_from = urpc__udp_rx_is_from, /* rx_src: the frame's IPv4/UDP source */
	.tx_burst = urpc__udp_tx_burst,
	.tx_flush = xdp_tx_flush,
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
	.wait_arm = xdp_wait_arm,
	.wait_ack = xdp_wait_ack,
	.reg_dmabuf = urpc__tp_default_reg_dmabuf,
	.ctl_pop = urpc__tp_default_ctl_pop,
	.ctl_push = urpc__tp_default_ctl_push,
};

const struct urpc_tp_ops *urpc__tp_xdp_ops(void)
{
	return &xdp_ops;
}
