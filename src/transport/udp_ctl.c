/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's batch of outgoing one-sided datagrams (udp_ctl.h):
 * RD_REQ, WR_DATA and the requester's resends from udp_os.c, RD_DATA,
 * WR_ACK and NAK from udp_serve.c, queued with their headers and sent with
 * sendmmsg() (an xdp endpoint's through its TX ring), whole or in slices
 * (udp_io.c's drain: issue 32). Split from udp_os.c (its length).
 *
 * udp_os.c, udp_serve.c and udp_io.c call in here through udp_ctl.h; this
 * file calls only the socket and xdp_io.h below it.
 */
#define _GNU_SOURCE /* sendmmsg; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp_ctl.h"

#include <errno.h>
#include <string.h>

#include "../util/log.h"
#include "xdp_io.h"

/* The peer whose address is @sa, or NULL. Walks the peers: xdp only. */
static const struct urpc_tp_peer *udp_peer_of(const struct udp_tp *u, const struct sockaddr_in *sa)
{
	const struct urpc_tp_peer *p;

	for (p = u->peers; p; p = p->next)
		if (p->sa.sin_addr.s_addr == sa->sin_addr.s_addr && p->sa.sin_port == sa->sin_port)
			return p;
	return NULL;
}

/*
 * An xdp endpoint's one-sided datagrams: frames to peers resolved with
 * frame headers, the kernel socket for the others; one kick at the end.
 * Replies only ever go to a peer's address (udp_int.h), so each has one.
 */
static void udp_os_flush_xdp(struct udp_tp *u)
{
	unsigned i;

	for (i = u->ctl_off; i < u->nctl; i++) {
		const struct msghdr *mh = &u->ctl_msgs[i].msg_hdr;
		const struct urpc_tp_peer *p = udp_peer_of(u, &u->ctl_dst[i]);

		if (p && p->xp) {
			if (!urpc__xdp_tx(u, p, mh->msg_iov, (unsigned)mh->msg_iovlen))
				break; /* the rest is lost; the requester's timer resends */
		} else {
			(void)sendmsg(u->fd, mh, MSG_DONTWAIT);
			u->base.stats.sys_tx++;
		}
	}
	urpc__xdp_kick(u);
	u->nctl = 0;
}

/*
 * Send at most @max of the queued one-sided datagrams; what the socket
 * refuses is lost (the requester's timer resends), the rest of the queue
 * with it.
 */
void urpc__udp_os_flush_some(struct udp_tp *u, unsigned max)
{
	unsigned end = URPC_MIN(u->nctl, u->ctl_off + max);

	u->os_holds = 0; /* they move: the holds begin again */

	if (u->xdp) { /* into the TX ring, all at once: no system call to slice */
		udp_os_flush_xdp(u);
		u->nctl = u->ctl_off = 0;
		return;
	}

	while (u->ctl_off < end) {
		int ret = sendmmsg(u->fd, u->ctl_msgs + u->ctl_off, end - u->ctl_off, MSG_DONTWAIT);

		u->base.stats.sys_tx++;

		if (ret < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
			    errno != ECONNREFUSED)
				URPC_WARN_RATELIMIT(u->base.id, "sendmmsg: %s", strerror(errno));
			/* EAGAIN: the rest is lost; the requester's timer resends */
			u->ctl_off = u->nctl;
			break;
		}
		u->ctl_off += (unsigned)ret;
	}
	if (u->ctl_off >= u->nctl)
		u->nctl = u->ctl_off = 0;
}

bool urpc__udp_os_hold(struct udp_tp *u)
{
	if (u->os_holds < UDP_OS_HOLDS) {
		u->os_holds++;
		return true;
	}
	return false; /* a slice goes; sending starts the count again */
}

/* Send every queued one-sided datagram. */
void urpc__udp_os_flush(struct udp_tp *u)
{
	urpc__udp_os_flush_some(u, UDP_CTL_BATCH);
}

/*
 * Move the queued datagrams not sent yet (from ctl_off) to the front of the
 * batch. Sending in slices (udp_io.c's drain) leaves the sent ones in
 * place until the queue empties, and while a peer's requests keep coming
 * it never does: the batch filled and went at once, 20-40 datagrams of 1.4
 * KB in one call (64-127 us on loopback, the small answer behind them:
 * issue 32). Not while device grants exist: their RD_DATA read a staging
 * slot named by its entry's place (udp_serve.c).
 */
static void udp_ctl_compact(struct udp_tp *u)
{
	unsigned i, j;

	for (i = 0, j = u->ctl_off; j < u->nctl; i++, j++) {
		struct msghdr *mh = &u->ctl_msgs[i].msg_hdr;
		size_t k, niov = u->ctl_msgs[j].msg_hdr.msg_iovlen;
		bool ext = niov > 1 && u->ctl_iov[j][1].iov_base == &u->ctl_hdrs[j].e;

		u->ctl_hdrs[i] = u->ctl_hdrs[j];
		u->ctl_dst[i] = u->ctl_dst[j];
		for (k = 0; k < niov; k++)
			u->ctl_iov[i][k] = u->ctl_iov[j][k];
		u->ctl_iov[i][0].iov_base = &u->ctl_hdrs[i].h;
		if (ext)
			u->ctl_iov[i][1].iov_base = &u->ctl_hdrs[i].e;
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &u->ctl_dst[i];
		mh->msg_namelen = sizeof(u->ctl_dst[i]);
		mh->msg_iov = u->ctl_iov[i];
		mh->msg_iovlen = niov;
	}
	u->nctl -= u->ctl_off;
	u->ctl_off = 0;
}

/*
 * Queue one one-sided datagram to @dst: the header, @ext when not NULL, and
 * @len bytes at @data. The bytes are read at the next udp_ctl_flush().
 */
void urpc__udp_ctl_queue(struct udp_tp *u, const struct sockaddr_in *dst, enum udp_type type,
			 uint32_t op_id, uint32_t chunk, uint32_t status, const struct udp_ext *ext,
			 const void *data, size_t len)
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
	if (u->nctl == UDP_CTL_BATCH) {
		if (u->ctl_off && !u->ndev)
			udp_ctl_compact(u);
		else
			urpc__udp_os_flush(u);
	}
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
