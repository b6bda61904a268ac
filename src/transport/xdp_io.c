/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's datapath (xdp_io.h): send frames built in the UMEM
 * from a peer's header template (xdp_frame.c computes the checksums),
 * published to the TX ring once per burst, kicks only when the TX ring
 * asks for one (XDP_USE_NEED_WAKEUP),
 * completions reclaimed in batches when the free frames run out
 * (xdp_umem.c); receive frames checked by the parser, their payload copied
 * into the endpoint's receive slots, every frame handed back to the fill
 * ring at once, one lock of the shared ring per batch (a flood cannot
 * exhaust the UMEM). No allocation; the only system calls
 * are the kicks and the fill ring's wake-ups the kernel asks for.
 *
 * udp_io.c and udp_os.c call in here; this file calls xdp_frame.h and
 * xdp_umem.h.
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#define URPC_LOG_MODULE "xdp"
#include "xdp_io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../util/compiler.h"
#include "../util/log.h"
#include "xdp_frame.h"
#include "xdp_int.h"
#include "xdp_umem.h"

/*
 * The kick: sendto(@fd, NULL, 0, MSG_DONTWAIT, NULL, 0), 0 or -errno. On
 * x86-64 the system call instruction in line: libc's sendto() is a
 * cancellation point whose wrappers cost about 30 instructions a kick, and
 * its syscall() about 20 more with the arguments' moves and errno
 * (callgrind, xdp_cpu_cost.sh). The "memory" clobber puts the TX ring's
 * stores before it.
 */
#if defined(__x86_64__)
static inline long kick_sys(int fd)
{
	register long r10 __asm__("r10") = MSG_DONTWAIT;
	register long r8 __asm__("r8") = 0;
	register long r9 __asm__("r9") = 0;
	long ret;

	__asm__ __volatile__("syscall"
			     : "=a"(ret)
			     : "0"((long)SYS_sendto), "D"((long)fd), "S"(0L), "d"(0L), "r"(r10),
			       "r"(r8), "r"(r9)
			     : "rcx", "r11", "memory");
	return ret;
}
#else
static inline long kick_sys(int fd)
{
	return syscall(SYS_sendto, fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 ? -errno : 0;
}
#endif

static void xdp_kick_q(struct udp_tp *u, struct xdp_q *q)
{
	long r;

	/* every pass's receive poll comes here: an idle one returns at once */
	if (!q->tx_pending)
		return;
	/*
	 * The frames reserved since the last kick (all pending: tx_pending
	 * is cleared only after this), published to the kernel at once.
	 */
	xsk_ring_prod__submit(&q->tx, q->tx.cached_prod - *q->tx.producer);
	if (!xsk_ring_prod__needs_wakeup(&q->tx)) {
		q->tx_pending = 0;
		return;
	}
	r = kick_sys(q->fd);
	u->base.stats.sys_tx++;
	if (likely(r >= 0)) {
		q->tx_pending = 0;
		return;
	}
	/* EAGAIN/EBUSY/ENOBUFS: the kernel is busy; the next kick or poll retries */
	if (r != -EAGAIN && r != -EBUSY && r != -ENOBUFS) {
		q->tx_pending = 0;
		if (r != -ENETDOWN)
			URPC_WARN_RATELIMIT(u->base.id, "AF_XDP send kick: %s", strerror((int)-r));
	}
}

void urpc__xdp_kick(struct udp_tp *u)
{
	xdp_kick_q(u, &u->xdp->q[0]);
}

/*
 * A free frame of @q's UMEM share and a TX ring entry for it (*idx, *addr);
 * with no free frame, completions are reclaimed, after one kick if need
 * be. False when either is missing: the caller sends nothing.
 */
static inline bool tx_take(struct udp_tp *u, struct xdp_q *q, uint32_t *idx, uint64_t *addr)
{
	if (unlikely(!q->ntx_free)) {
		urpc__xdp_reclaim(q);
		if (!q->ntx_free) {
			xdp_kick_q(u, q);
			urpc__xdp_reclaim(q);
			if (!q->ntx_free)
				return false;
		}
	}
	if (unlikely(xsk_ring_prod__reserve(&q->tx, 1, idx) != 1))
		return false;
	*addr = q->tx_free[--q->ntx_free];
	return true;
}

int urpc__xdp_tx(struct udp_tp *u, const struct urpc_tp_peer *peer, const struct iovec *iov,
		 unsigned niov)
{
	struct urpc_xdp *x = u->xdp;
	struct xdp_q *q = &x->q[0];
	struct xdp_desc *d;
	uint32_t idx, total = 0, i;
	uint64_t addr;
	uint8_t *f;

	if (unlikely(!tx_take(u, q, &idx, &addr)))
		return 0;
	f = xsk_umem__get_data(q->area, addr);
	memcpy(f, peer->xp->hdr, URPC_XDP_HDR_LEN);
	for (i = 0; i < niov; i++) {
		/* tx_burst checked the mtu, which leaves the headers room in a frame */
		memcpy(f + URPC_XDP_HDR_LEN + total, iov[i].iov_base, iov[i].iov_len);
		total += (uint32_t)iov[i].iov_len;
	}
	d = xsk_ring_prod__tx_desc(&q->tx, idx);
	d->addr = addr;
	d->len = urpc__xdp_frame_finish(f, total, x->ip_id++);
	d->options = 0;
	q->tx_pending++; /* published by the kick at the burst's end (xdp_kick_q()) */
	return 1;
}

int urpc__xdp_tx_data(struct udp_tp *u, const struct urpc_tp_peer *peer, const void *a,
		      uint32_t alen, const void *b, uint32_t blen)
{
	struct urpc_xdp *x = u->xdp;
	struct xdp_q *q = &x->q[0];
	struct xdp_desc *d;
	uint32_t idx;
	uint64_t addr;

	if (unlikely(!tx_take(u, q, &idx, &addr)))
		return 0;
	d = xsk_ring_prod__tx_desc(&q->tx, idx);
	d->addr = addr;
	/* tx_burst checked the mtu, which leaves the headers room in a frame */
	d->len = urpc__xdp_frame_build(xsk_umem__get_data(q->area, addr), peer->xp, a, alen, b,
				       blen, x->ip_id++);
	d->options = 0;
	q->tx_pending++; /* published by the kick at the burst's end (xdp_kick_q()) */
	return 1;
}

static void xdp_drop(struct udp_tp *u, enum urpc_xdp_drop why)
{
	u->xdp->drops[why]++;
	u->base.stats.rx_drop_bad++;
	URPC_WARN_RATELIMIT(u->base.id, "dropped a frame: %s", urpc__xdp_drop_str(why));
}

/*
 * Copy a received payload of @len bytes: a small RPC's datagram (40 to
 * 128 bytes: the 40-byte header and up to 88 of data) in two overlapping
 * fixed-size moves the compiler puts in line, anything else by memcpy().
 * The libc call cost about 21 instructions a frame for a 32-byte RPC's 72
 * bytes (callgrind, xdp_cpu_cost.sh).
 */
static inline void rx_copy(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	if (len > 64 && len <= 128) {
		memcpy(dst, src, 64);
		memcpy(dst + len - 64, src + len - 64, 64);
	} else if (len >= 40 && len <= 64) { /* a DATA header at least (40 bytes) */
		memcpy(dst, src, 32);
		memcpy(dst + len - 32, src + len - 32, 32);
	} else {
		memcpy(dst, src, len);
	}
}

/* One received frame: into a free slot when it is ours and well formed. */
static bool xdp_rx_frame(struct udp_tp *u, const uint8_t *f, uint32_t len, uint32_t *slot,
			 uint32_t *dlen)
{
	struct urpc_xdp *x = u->xdp;
	struct urpc_xdp_dgram d;
	enum urpc_xdp_drop why;
	uint32_t s;

	why = urpc__xdp_frame_parse(f, len, x->addr, x->port, !x->csum_trusted, &d);
	if (unlikely(why)) {
		xdp_drop(u, why);
		return false;
	}
	if (unlikely(d.len > u->slot_size)) {
		xdp_drop(u, URPC_XDP_DROP_BAD_UDP_LEN);
		return false;
	}
	if (unlikely(!u->nfree)) {
		u->base.stats.rx_drop_ring_full++;
		return false;
	}
	s = u->free_stk[--u->nfree];
	rx_copy(u->ring + (size_t)s * u->slot_size, f + d.off, d.len);
	u->rx_src[s].sin_family = AF_INET;
	u->rx_src[s].sin_port = d.sport;
	u->rx_src[s].sin_addr.s_addr = d.saddr;
	*slot = s;
	*dlen = d.len;
	return true;
}

unsigned urpc__xdp_rx(struct udp_tp *u, uint32_t *slots, uint32_t *lens, unsigned max)
{
	struct urpc_xdp *x = u->xdp;
	unsigned got = 0, k, qi = x->hot;

	xdp_kick_q(u, &x->q[0]); /* a kick the kernel put off */
	/*
	 * The queue that last had frames first (a flow stays on the queue its
	 * RSS picked: on veth, the peer's sending queue); the others only when
	 * it had none, or on every URPC_XDP_COLD_EVERY-th call, so that a
	 * busy queue cannot starve them. An RPC's frame at window 1 skips the
	 * other queue's empty peek (xdp_cpu_cost.sh).
	 */
	for (k = 0; k < x->nq && got < max; k++, qi = qi + 1 < x->nq ? qi + 1 : 0) {
		struct xdp_q *q = &x->q[qi];
		struct xdp_grp *g = q->g;
		uint64_t back[URPC_XDP_RX_BATCH];
		uint32_t idx_rx, idx_fq, n, i;
		bool wake;

		n = xsk_ring_cons__peek(&q->rx, URPC_MIN(max - got, URPC_XDP_RX_BATCH), &idx_rx);
		if (!n)
			continue;
		x->hot = qi;
		for (i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&q->rx, idx_rx + i);
			const uint8_t *f = xsk_umem__get_data(q->area, d->addr);

			if (xdp_rx_frame(u, f, d->len, &slots[got], &lens[got]))
				got++;
			back[i] = xsk_umem__extract_addr(d->addr);
		}
		xsk_ring_cons__release(&q->rx, n);
		/*
		 * Every frame back to the fill ring the process's endpoints on
		 * this queue share (xdp_umem.c). It has room for twice the
		 * frames of the UMEM, so the reserve cannot fail.
		 */
		urpc__xdp_grp_lock(g);
		if (unlikely(xsk_ring_prod__reserve(&g->fill, n, &idx_fq) != n)) {
			urpc__xdp_grp_unlock(g);
			URPC_ERR_RATELIMIT(u->base.id, "fill ring of queue %u has no room", qi);
			continue;
		}
		for (i = 0; i < n; i++)
			*xsk_ring_prod__fill_addr(&g->fill, idx_fq + i) = back[i];
		xsk_ring_prod__submit(&g->fill, n);
		wake = xsk_ring_prod__needs_wakeup(&g->fill);
		urpc__xdp_grp_unlock(g);
		if (wake) {
			(void)recvfrom(q->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			u->base.stats.sys_rx++;
		}
		if (!k && (++x->cold_skip & (URPC_XDP_COLD_EVERY - 1)))
			break;
	}
	if (got) {
		u->rx_armed = 0;
	} else if (x->busy_poll) {
		/* nothing came: let the kernel run the driver's receive on this thread */
		for (qi = 0; qi < x->nq; qi++)
			(void)recvfrom(x->q[qi].fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		u->base.stats.sys_rx += x->nq;
		u->base.stats.sys_rx_empty += x->nq;
	}
	return got;
}
