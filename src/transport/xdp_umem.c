/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's UMEMs, shared by the endpoints of one process
 * (xdp_umem.h). The kernel gives a receive queue of an interface one UMEM
 * with one fill ring and one completion ring (its buffer pool); more AF_XDP
 * sockets may bind to the queue only by sharing that UMEM
 * (XDP_SHARED_UMEM), each with its own RX and TX rings. So this process
 * keeps one group per (network namespace, interface, queue): the UMEM, its
 * two shared rings and a spin lock for them, which every endpoint of the
 * process on that queue joins with a socket of its own. Another process
 * cannot bind the queue (-EBUSY, said in the error).
 *
 * A group's UMEM has room for a number of endpoints fixed at its creation
 * (URPC_XDP_ENDPOINTS, default 4, halved while the memlock limit refuses
 * it): each takes a share of nrx receive frames and ntx send frames. The
 * receive frames of every share go to the fill ring at once and are one
 * pool (the kernel hands any of them to whichever socket the program
 * picks); a send frame belongs to its share, and a completion another
 * endpoint reclaims goes back to its share's return stack. The lock is
 * taken once per receive batch (frames back to the fill ring) and once per
 * refill of an endpoint's free send frames; with one endpoint it is never
 * contended.
 *
 * The registry is cold (create, destroy) under a mutex. Calls libxdp and
 * the log.
 */
#define _GNU_SOURCE
#define URPC_LOG_MODULE "xdp"
#include "xdp_umem.h"

#include <errno.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../util/log.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#define HUGE_2M (2u << 20)
#define SHARES_DEFAULT 4u

static pthread_mutex_t grp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct xdp_grp *grps;

static uint32_t pow2_up(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static void grp_free(struct xdp_grp *g)
{
	if (g->umem)
		(void)xsk_umem__delete(g->umem);
	if (g->area)
		munmap(g->area, g->area_len);
	free(g->ret);
	free(g);
}

/* The UMEM's memory: hugepages where there are some, else normal pages. */
static int grp_area(struct xdp_grp *g, size_t len)
{
	size_t huge_len = (len + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);

	g->area = mmap(NULL, huge_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
	if (g->area != MAP_FAILED) {
		g->area_len = huge_len;
		g->huge = true;
		return 0;
	}
	g->huge = false;
	g->area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->area == MAP_FAILED) {
		g->area = NULL;
		return -ENOMEM;
	}
	g->area_len = len;
	return 0;
}

static void memlock_hint(size_t need, long id)
{
	struct rlimit rl;

	getrlimit(RLIMIT_MEMLOCK, &rl);
	URPC_ERR(id,
		 "xdp: the UMEM (%zu KiB for a queue) counts against the memlock limit (%llu "
		 "KiB): raise it (ulimit -l unlimited, LimitMEMLOCK=infinity in systemd) or "
		 "grant CAP_IPC_LOCK",
		 need >> 10, (unsigned long long)rl.rlim_cur >> 10);
}

/* How many endpoints a new UMEM makes room for: URPC_XDP_ENDPOINTS (1-32), else 4. */
static int shares_wanted(long id, uint32_t *n)
{
	const char *env = getenv("URPC_XDP_ENDPOINTS");
	char *end;
	unsigned long v;

	*n = SHARES_DEFAULT;
	if (!env || !*env)
		return 0;
	v = strtoul(env, &end, 10);
	if (*end || v < 1 || v > URPC_XDP_SHARES_MAX) {
		URPC_ERR(id, "xdp: URPC_XDP_ENDPOINTS=%s: use 1 to %u", env, URPC_XDP_SHARES_MAX);
		return -EINVAL;
	}
	*n = (uint32_t)v;
	return 0;
}

/*
 * A new group for queue @qid: its UMEM with room for as many endpoints as
 * asked, fewer while the memlock limit refuses it (at least one).
 */
static int grp_new(const struct urpc_xdp *x, unsigned qid, bool sends, uint64_t netns, long id,
		   struct xdp_grp **out)
{
	uint32_t ntx = sends ? x->ntx : 0, nshares, i, idx, nrx_all;
	struct xdp_grp *g;
	size_t len = 0;
	int ret;

	ret = shares_wanted(id, &nshares);
	if (ret)
		return ret;
	for (;; nshares /= 2) {
		struct xsk_umem_config uc = {
			/*
			 * Room for twice the receive frames: the kernel publishes
			 * what it took only when it refills its own cache, so a
			 * ring of exactly the frames could look full while frames
			 * it took wait in RX rings to be handed back.
			 */
			.fill_size = pow2_up(2 * nshares * x->nrx),
			/* the kernel wants a ring; unused on a queue that does not send */
			.comp_size = ntx ? pow2_up(nshares * ntx) : 64,
			.frame_size = x->frame_size,
			.frame_headroom = 0,
		};

		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		g->ret = ntx ? calloc((size_t)nshares * ntx, sizeof(*g->ret)) : NULL;
		len = (size_t)nshares * (x->nrx + ntx) * x->frame_size;
		if ((ntx && !g->ret) || grp_area(g, len)) {
			grp_free(g);
			return -ENOMEM;
		}
		ret = xsk_umem__create(&g->umem, g->area, len, &g->fill, &g->comp, &uc);
		if (!ret)
			break;
		g->umem = NULL;
		grp_free(g);
		if ((ret == -ENOBUFS || ret == -EPERM || ret == -ENOMEM) && nshares > 1)
			continue;
		if (ret == -ENOBUFS || ret == -EPERM || ret == -ENOMEM)
			memlock_hint(len, id);
		else
			URPC_ERR(id, "xdp: UMEM: %s", strerror(-ret));
		return ret;
	}
	g->netns = netns;
	g->ifindex = x->ifindex;
	g->qid = qid;
	g->frame_size = x->frame_size;
	g->nrx = x->nrx;
	g->ntx = ntx;
	g->nshares = nshares;
	g->share_bytes = (uint64_t)(x->nrx + ntx) * x->frame_size;
	/* every share's receive frames into the fill ring: one pool */
	nrx_all = nshares * x->nrx;
	if (xsk_ring_prod__reserve(&g->fill, nrx_all, &idx) != nrx_all) {
		grp_free(g);
		return -EIO;
	}
	for (i = 0; i < nrx_all; i++)
		*xsk_ring_prod__fill_addr(&g->fill, idx + i) =
			(uint64_t)(i / x->nrx) * g->share_bytes +
			(uint64_t)(i % x->nrx) * x->frame_size;
	xsk_ring_prod__submit(&g->fill, nrx_all);
	for (i = 0; i < nshares && ntx; i++) {
		uint32_t k;

		for (k = 0; k < ntx; k++)
			g->ret[(size_t)i * ntx + k] = (uint64_t)i * g->share_bytes +
						      (uint64_t)(x->nrx + k) * x->frame_size;
		g->nret[i] = ntx;
	}
	if (nshares < SHARES_DEFAULT)
		URPC_INFO(id, "xdp: the memlock limit leaves room for %u endpoint(s) on queue %u",
			  nshares, qid);
	*out = g;
	return 0;
}

static uint64_t netns_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);

	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &len))
		return 0;
	return c;
}

static void msleep(unsigned ms)
{
	nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* The socket of @q in group @g: the group's first on its UMEM, else bound to share it. */
static int q_socket(struct udp_tp *u, struct urpc_xdp *x, struct xdp_q *q, struct xdp_grp *g)
{
	struct xsk_socket_config sc = {
		.rx_size = x->nrx,
		.tx_size = x->ntx,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = x->generic ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE,
	};
	struct xsk_ring_prod *tx = q == &x->q[0] ? &q->tx : NULL;
	unsigned qi = g->qid, i;
	int ret = 0;

	if (g->members) {
		/* libxdp binds with XDP_SHARED_UMEM and the group's fill and completion rings */
		return xsk_socket__create_shared(&q->xsk, x->ifname, qi, g->umem, &q->rx, tx,
						 &g->fill, &g->comp, &sc);
	}
	/*
	 * A socket closed just before lets go of the queue a little later (the
	 * kernel releases it from a work queue), so -EBUSY is retried for up
	 * to a second before it is taken as another process's.
	 */
	for (i = 0; i < 100; i++) {
		sc.bind_flags = XDP_USE_NEED_WAKEUP | XDP_ZEROCOPY;
		ret = xsk_socket__create(&q->xsk, x->ifname, qi, g->umem, &q->rx, tx, &sc);
		if (ret) {
			sc.bind_flags = XDP_USE_NEED_WAKEUP | XDP_COPY;
			ret = xsk_socket__create(&q->xsk, x->ifname, qi, g->umem, &q->rx, tx, &sc);
		} else {
			g->zerocopy = true;
		}
		if (ret != -EBUSY)
			break;
		msleep(10);
	}
	if (ret == -EBUSY)
		URPC_ERR(u->base.id,
			 "xdp: queue %u of %s is held by another process's AF_XDP socket (the "
			 "kernel gives a queue one UMEM; urpc shares it among the endpoints of one "
			 "process only): run the endpoints in one process, give each process "
			 "its own queues (URPC_XDP_QUEUES), or use another interface",
			 qi, x->ifname);
	return ret;
}

int urpc__xdp_q_open(struct udp_tp *u, struct urpc_xdp *x, unsigned i)
{
	struct xdp_q *q = &x->q[i];
	unsigned qi = x->q0 + i;
	bool sends = i == 0;
	uint64_t ns = netns_cookie(u->fd);
	struct xdp_grp *g;
	bool fresh = false;
	uint32_t s;
	int ret;

	q->fd = -1;
	pthread_mutex_lock(&grp_mu);
	for (g = grps; g; g = g->next)
		if (g->netns == ns && g->ifindex == x->ifindex && g->qid == qi)
			break;
	if (!g) {
		ret = grp_new(x, qi, sends, ns, u->base.id, &g);
		if (ret)
			goto out;
		fresh = true;
	} else if (g->frame_size != x->frame_size) {
		URPC_ERR(u->base.id,
			 "xdp: %s queue %u has %u-byte frames (its first endpoint's mtu); this "
			 "endpoint's mtu needs %u: give the endpoints of one interface one mtu",
			 x->ifname, qi, g->frame_size, x->frame_size);
		ret = -EINVAL;
		goto out;
	} else if (sends && !g->ntx) {
		URPC_ERR(u->base.id,
			 "xdp: this process's endpoints on %s receive on queue %u without sending "
			 "there (another URPC_XDP_QUEUES): give the endpoints of one process one "
			 "URPC_XDP_QUEUES",
			 x->ifname, qi);
		ret = -EINVAL;
		goto out;
	}
	for (s = 0; s < g->nshares && (g->used >> s & 1); s++)
		;
	if (s == g->nshares) {
		URPC_ERR(u->base.id,
			 "xdp: the UMEM of %s queue %u has room for %u endpoints of this process, "
			 "all taken: set URPC_XDP_ENDPOINTS (up to %u) before the first is created",
			 x->ifname, qi, g->nshares, URPC_XDP_SHARES_MAX);
		ret = -ENOSPC;
		goto out;
	}
	ret = q_socket(u, x, q, g);
	if (ret) {
		q->xsk = NULL;
		if (ret == -EPERM || ret == -EACCES)
			URPC_ERR(u->base.id,
				 "xdp: an AF_XDP socket needs CAP_NET_RAW (and CAP_NET_ADMIN): "
				 "run as root or setcap cap_net_raw,cap_net_admin,cap_bpf,"
				 "cap_ipc_lock+ep");
		else if (ret == -EAFNOSUPPORT)
			URPC_ERR(u->base.id, "xdp: this kernel has no AF_XDP (CONFIG_XDP_SOCKETS)");
		else if (ret != -EBUSY)
			URPC_ERR(u->base.id, "xdp: AF_XDP socket on %s queue %u: %s", x->ifname, qi,
				 strerror(-ret));
		goto out;
	}
	if (sends) {
		q->tx_free = calloc(g->ntx, sizeof(*q->tx_free));
		if (!q->tx_free) {
			xsk_socket__delete(q->xsk);
			q->xsk = NULL;
			ret = -ENOMEM;
			goto out;
		}
		/* the share's frames that are home; the rest come back as completions */
		memcpy(q->tx_free, g->ret + (size_t)s * g->ntx, g->nret[s] * sizeof(*q->tx_free));
		q->ntx_free = g->nret[s];
		g->nret[s] = 0;
	}
	g->used |= 1u << s;
	g->members++;
	if (fresh) {
		g->next = grps;
		grps = g;
	}
	q->g = g;
	q->share = s;
	q->area = g->area;
	q->fd = xsk_socket__fd(q->xsk);
	x->zerocopy = g->zerocopy;
	x->huge = g->huge;
	ret = 0;
out:
	if (ret && fresh)
		grp_free(g);
	pthread_mutex_unlock(&grp_mu);
	return ret;
}

/* The TX ring's descriptors all taken by the kernel (the frames are on their way). */
static bool tx_ring_empty(const struct xdp_q *q)
{
	return __atomic_load_n(q->tx.consumer, __ATOMIC_ACQUIRE) == *q->tx.producer;
}

void urpc__xdp_q_close(struct udp_tp *u, struct urpc_xdp *x, unsigned i)
{
	struct xdp_q *q = &x->q[i];
	struct xdp_grp *g = q->g, **pp;
	uint32_t idx, n, k, fidx;
	int tries;

	if (!g) {
		free(q->tx_free);
		memset(q, 0, sizeof(*q));
		return;
	}
	/* queued sends go out first: descriptors left in a closed socket's ring never complete */
	for (tries = 0; q->tx_free && q->xsk && !tx_ring_empty(q) && tries < 100; tries++) {
		(void)sendto(q->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		if (!tx_ring_empty(q))
			msleep(1);
	}
	pthread_mutex_lock(&grp_mu);
	urpc__xdp_grp_lock(g);
	/* frames waiting in this socket's RX ring go back to the pool */
	n = xsk_ring_cons__peek(&q->rx, UINT32_MAX, &idx);
	if (n && xsk_ring_prod__reserve(&g->fill, n, &fidx) == n) {
		for (k = 0; k < n; k++)
			*xsk_ring_prod__fill_addr(&g->fill, fidx + k) = xsk_umem__extract_addr(
				xsk_ring_cons__rx_desc(&q->rx, idx + k)->addr);
		xsk_ring_prod__submit(&g->fill, n);
		xsk_ring_cons__release(&q->rx, n);
	}
	/* free send frames go home; those in flight come back as completions */
	for (k = 0; q->tx_free && k < q->ntx_free; k++)
		g->ret[(size_t)q->share * g->ntx + g->nret[q->share]++] = q->tx_free[k];
	urpc__xdp_grp_unlock(g);
	if (q->xsk)
		xsk_socket__delete(q->xsk);
	g->used &= ~(1u << q->share);
	if (!--g->members) {
		for (pp = &grps; *pp != g; pp = &(*pp)->next)
			;
		*pp = g->next;
		grp_free(g);
	}
	pthread_mutex_unlock(&grp_mu);
	free(q->tx_free);
	memset(q, 0, sizeof(*q));
	q->fd = -1;
	(void)u;
}

void urpc__xdp_reclaim(struct xdp_q *q)
{
	struct xdp_grp *g = q->g;
	uint64_t *home = g->ret + (size_t)q->share * g->ntx;
	uint64_t base = (uint64_t)q->share * g->share_bytes;
	uint32_t idx, n, i, s;

	urpc__xdp_grp_lock(g);
	n = xsk_ring_cons__peek(&g->comp, UINT32_MAX, &idx);
	for (i = 0; i < n; i++) {
		uint64_t a = *xsk_ring_cons__comp_addr(&g->comp, idx + i);

		/* this endpoint's own, the usual case: a compare, not a 64-bit division */
		if (a - base < g->share_bytes) {
			q->tx_free[q->ntx_free++] = a;
			continue;
		}
		s = (uint32_t)(a / g->share_bytes);
		if (s < g->nshares)
			g->ret[(size_t)s * g->ntx + g->nret[s]++] = a;
	}
	if (n)
		xsk_ring_cons__release(&g->comp, n);
	for (i = 0; i < g->nret[q->share]; i++)
		q->tx_free[q->ntx_free++] = home[i];
	g->nret[q->share] = 0;
	urpc__xdp_grp_unlock(g);
}
