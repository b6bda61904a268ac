/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's datagrams (udp_io.h): DATA sent with sendmmsg() from
 * the caller's memory (a lone small one with send()/sendto() from one
 * copy), received with recvmmsg() (recvfrom() while they come one at a
 * time) into the receive ring, handed out and released; one-sided
 * datagrams found on the way go to udp_os.c, which serves them.
 *
 * udp.c calls in here (its ops table, the fuzzer's entry point); this file
 * calls only udp_os.h below it.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg; must precede every include */
#define URPC_LOG_MODULE "udp"
#include "udp_io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../util/compiler.h"
#include "../util/log.h"
#include "../util/seam.h"
#include "udp_os.h"
#include "xdp_io.h"

/* ---- sending ------------------------------------------------------------- */

/*
 * Send one small datagram with sendto() from a contiguous copy: for a lone
 * datagram, cheaper than sendmmsg() with its msghdr and three iovecs (the
 * copy costs less than the kernel's import of them). Returns 1 when sent or
 * lost, 0 when the socket is full (EAGAIN), as sendmmsg() would count it.
 */
static int udp_tx_one(struct udp_tp *u, const struct urpc_tp_tx *t)
{
	uint8_t *p = u->tx_stage;
	size_t len = sizeof(struct udp_hdr);
	ssize_t ret;

	udp_hdr_init((struct udp_hdr *)(void *)p, UDP_T_DATA, 0, 0, 0);
	if (t->hdr_len) {
		memcpy(p + len, t->hdr, t->hdr_len);
		len += t->hdr_len;
	}
	if (t->data_len) {
		memcpy(p + len, t->data, t->data_len);
		len += t->data_len;
	}
	do {
		/* connected: every peer has the socket's address (udp_conn_update()) */
		if (u->connected)
			ret = send(u->fd, p, len, MSG_DONTWAIT);
		else
			ret = sendto(u->fd, p, len, MSG_DONTWAIT,
				     (const struct sockaddr *)&t->peer->sa, sizeof(t->peer->sa));
		u->base.stats.sys_tx++;
	} while (unlikely(ret < 0 && errno == EINTR));
	if (unlikely(ret < 0)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
			return 0;
		/* an unreliable datagram: lost, as sendmmsg()'s caller would see it */
		if (errno != ECONNREFUSED)
			URPC_WARN_RATELIMIT(u->base.id, "send: %s", strerror(errno));
		return 1;
	}
	u->base.stats.tx_pkts++;
	u->base.stats.tx_bytes += t->hdr_len + t->data_len;
	return 1;
}

/*
 * One DATA datagram through the kernel socket with sendmsg(), to the peer's
 * address (an xdp endpoint's peer on this host). As udp_tx_one() returns.
 */
static int udp_tx_kernel(struct udp_tp *u, const struct urpc_tp_tx *t)
{
	struct udp_hdr h;
	struct iovec iov[3] = {{&h, sizeof(h)}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 1};
	ssize_t ret;

	udp_hdr_init(&h, UDP_T_DATA, 0, 0, 0);
	if (t->hdr_len)
		iov[mh.msg_iovlen++] = (struct iovec){(void *)(uintptr_t)t->hdr, t->hdr_len};
	if (t->data_len)
		iov[mh.msg_iovlen++] = (struct iovec){(void *)(uintptr_t)t->data, t->data_len};
	mh.msg_name = (void *)(uintptr_t)&t->peer->sa;
	mh.msg_namelen = sizeof(t->peer->sa);
	ret = sendmsg(u->fd, &mh, MSG_DONTWAIT);
	u->base.stats.sys_tx++;
	if (ret < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
		return 0;
	if (ret >= 0) {
		u->base.stats.tx_pkts++;
		u->base.stats.tx_bytes += t->hdr_len + t->data_len;
	}
	return 1;
}

/*
 * An xdp endpoint's DATA (udp_int.h): a frame per datagram through the TX
 * ring, built from the peer's template with the DATA header in it, one
 * kick at the end; a peer on this host through the kernel
 * socket. Returns the count accepted.
 */
static int udp_tx_burst_xdp(struct udp_tp *u, const struct urpc_tp_tx *pkts, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		const struct urpc_tp_tx *t = &pkts[i];

		if (unlikely(!t->peer->xp)) {
			if (!udp_tx_kernel(u, t))
				break;
			continue;
		}
		/* the DATA header is the peer's frame template's prefix (xdp.c) */
		if (!urpc__xdp_tx_data(u, t->peer, t->hdr, t->hdr_len, t->data, t->data_len))
			break;
		u->base.stats.tx_pkts++;
		u->base.stats.tx_bytes += t->hdr_len + t->data_len;
	}
	urpc__xdp_kick(u);
	return (int)i;
}

int urpc__udp_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	unsigned i, done = 0;

	for (i = 0; i < n; i++) {
		if (unlikely(!pkts[i].peer))
			return -EINVAL;
		if (unlikely((uint64_t)pkts[i].hdr_len + pkts[i].data_len > tp->mtu))
			return -EMSGSIZE;
	}
	if (unlikely(u->xdp))
		return udp_tx_burst_xdp(u, pkts, n);
	if (n == 1 && sizeof(struct udp_hdr) + pkts[0].hdr_len + pkts[0].data_len <= UDP_TX_STAGE)
		return udp_tx_one(u, &pkts[0]);
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
			if (!u->connected) {
				mh->msg_name = &t->peer->sa;
				mh->msg_namelen = sizeof(t->peer->sa);
			}
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
			if (errno != ECONNREFUSED)
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
bool urpc__udp_rx_done(struct udp_tp *u, uint32_t slot, uint32_t len, bool trunc, uint64_t *now)
{
	u->rx_len[slot] = len;
	if (udp_rx_one(u, slot, len, trunc, now)) {
		u->os_quiet = 0; /* DATA comes: small slices (udp_rx_drain()) */
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
 * How many datagrams to ask the next recvmmsg() for. Having found as many
 * as it was asked for, recvmmsg() tries for one more inside the call, and
 * on a ping-pong (one datagram at a time) that failed try is a sizeable
 * part of the receive. So while datagrams come one at a time (rx_single)
 * ask for one; the call after each one found asks for a whole batch, and
 * what it finds tells the pattern: nothing keeps rx_single, two or more
 * end it (a burst). A batch call that finds one, followed by an empty
 * call, starts it again.
 */
static inline unsigned udp_rx_vlen(const struct udp_tp *u)
{
	if (u->rx_single && u->rx_last != 1)
		return 1;
	return URPC_MIN(u->nfree, UDP_RX_BATCH);
}

static inline void udp_rx_learn(struct udp_tp *u, int ret)
{
	unsigned got = ret > 0 ? (unsigned)ret : 0;

	if (got >= 2)
		u->rx_single = false;
	else if (!got && u->rx_last == 1)
		u->rx_single = true;
	u->rx_last = got;
}

/*
 * Receive one datagram into the top free slot with recvfrom(), which needs
 * no msghdr or iovec: cheaper than recvmmsg() for one (see udp_rx_vlen()).
 * Returns what recvmmsg() would: 1, or -1 with errno.
 */
static int udp_rx_lone(struct udp_tp *u, uint64_t *now)
{
	uint32_t slot = u->free_stk[u->nfree - 1];
	socklen_t alen = sizeof(u->rx_src[slot]);
	ssize_t n;

	/* MSG_TRUNC: the datagram's own length, even when longer than the slot */
	n = recvfrom(u->fd, u->ring + (size_t)slot * u->slot_size, u->slot_size,
		     MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&u->rx_src[slot], &alen);
	if (n < 0)
		return -1;
	u->nfree--;
	u->rx_armed = 0;
	urpc__udp_rx_done(u, slot, (uint32_t)URPC_MIN((size_t)n, u->slot_size),
			  (size_t)n > u->slot_size, now);
	return 1;
}

/*
 * An xdp endpoint's receive (udp_int.h): frames from the RX rings into free
 * slots, then the same dispatch as the socket's datagrams. At most
 * UDP_RX_MAX_PASSES batches.
 */
static void udp_rx_drain_xdp(struct udp_tp *u, uint64_t *now)
{
	uint32_t slots[UDP_RX_BATCH], lens[UDP_RX_BATCH];
	unsigned pass, got, i, want;

	for (pass = 0; pass < UDP_RX_MAX_PASSES && u->nfree; pass++) {
		want = URPC_MIN(u->nfree, UDP_RX_BATCH);
		got = urpc__xdp_rx(u, slots, lens, want);
		for (i = 0; i < got; i++)
			urpc__udp_rx_done(u, slots[i], lens[i], false, now);
		if (got < want)
			break;
	}
}

/*
 * One receive into free slots: DATA goes to the pending FIFO; one-sided
 * datagrams are served and their slots freed at once. Returns true when
 * the socket may hold more.
 */
static bool udp_rx_pass(struct udp_tp *u, uint64_t *now)
{
	unsigned vlen = udp_rx_vlen(u), i;
	int ret;

	if (vlen == 1) {
		ret = udp_rx_lone(u, now);
	} else {
		if (u->rx_armed < vlen)
			udp_rx_arm(u, vlen);
		ret = recvmmsg(u->fd, u->rx_msgs, vlen, MSG_DONTWAIT, NULL);
	}
	u->base.stats.sys_rx++;
	udp_rx_learn(u, ret);
	if (ret <= 0) {
		u->base.stats.sys_rx_empty++;
		if (ret < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
		    errno != ECONNREFUSED)
			URPC_WARN_RATELIMIT(u->base.id, "recvmmsg: %s", strerror(errno));
		return false;
	}
	if (vlen == 1)
		return false; /* a lone datagram goes up at once: the caller's next pass probes */
	/* the filled slots are the top ret ones: pop them */
	u->nfree -= (unsigned)ret;
	u->rx_armed = 0;
	for (i = 0; i < (unsigned)ret; i++) {
		uint32_t slot = u->rx_slot[i];
		bool trunc = u->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC;

		urpc__udp_rx_done(u, slot, u->rx_msgs[i].msg_len, trunc, now);
	}
	return (unsigned)ret == vlen;
}

/*
 * Drain the socket into free slots (at most UDP_RX_MAX_PASSES receives),
 * then send the one-sided datagrams it queued in slices of UDP_OS_SLICE,
 * receiving between them (issue 32). A window of chunks served in one
 * sendmmsg() keeps the thread in the kernel for hundreds of microseconds
 * on a loaded host, and a small RPC's datagram that arrives meanwhile
 * waits it out; so once DATA for the caller is pending the rest stays
 * queued (the caller has work: its next drain goes on with it), none of
 * it sent before the DATA goes up for UDP_OS_HOLDS drains in a row (then
 * a slice: a flood of DATA cannot starve them). Without DATA the slices
 * go on, a receive between each two, until the queue is empty. A slice is
 * UDP_OS_SLICE datagrams while DATA comes, UDP_OS_SLICE_BULK once
 * UDP_OS_QUIET of them went without DATA found between (a transfer with
 * no RPC beside it: the receives between small slices cost it ~8% of its
 * bytes; an RPC after such a spell waits one larger slice). A window
 * of 1.4 KB chunks sent at once took 64-127 us on loopback, and the small
 * answer that came meanwhile waited it out (the old rule, the rest at
 * once after 16 slices, was the p99 of urpc-bulk-mix's answers). A revoke,
 * a deregistration or a peer's release sends what is queued first
 * (udp_os.c): nothing queued outlives the grant it reads.
 */
static void udp_rx_drain(struct udp_tp *u)
{
	uint64_t now = 0;
	int pass;

	if (u->xdp) {
		udp_rx_drain_xdp(u, &now);
		if (likely(!u->kpeers)) {
			if (unlikely(u->nctl))
				urpc__udp_os_flush(u);
			return;
		}
	}
	for (pass = 0; pass < UDP_RX_MAX_PASSES && u->nfree; pass++)
		if (!udp_rx_pass(u, &now))
			break;
	while (unlikely(u->nctl)) {
		unsigned slice = u->os_quiet < UDP_OS_QUIET ? UDP_OS_SLICE : UDP_OS_SLICE_BULK;

		if (!u->nfree) {
			urpc__udp_os_flush(u);
			break;
		}
		if (u->pend_cnt && urpc__udp_os_hold(u))
			break; /* DATA first: the caller's next drain sends them */
		if (u->os_quiet < UDP_OS_QUIET)
			u->os_quiet += slice;
		urpc__udp_os_flush_some(u, slice);
		if (!u->nctl || u->pend_cnt)
			break;
		udp_rx_pass(u, &now);
	}
}

/*
 * rx_burst() of an xdp endpoint with nothing pending and no peer on this
 * host (the usual case): udp_rx_drain()'s receive (as many passes and
 * frames), but DATA goes to @pkts at once while it has room, without the
 * pending FIFO; DATA beyond @n joins the FIFO as there, anything else is
 * dispatched as there. The order is the same: the FIFO was empty.
 */
static int udp_rx_burst_xdp(struct udp_tp *u, struct urpc_tp_rx *pkts, unsigned n)
{
	uint32_t slots[UDP_RX_BATCH], lens[UDP_RX_BATCH];
	unsigned pass, want, got, i, cnt = 0;
	uint64_t now = 0;

	for (pass = 0; pass < UDP_RX_MAX_PASSES && u->nfree; pass++) {
		want = URPC_MIN(u->nfree, UDP_RX_BATCH);
		got = urpc__xdp_rx(u, slots, lens, want);
		for (i = 0; i < got; i++) {
			uint32_t slot = slots[i], len = lens[i];
			uint8_t *buf = u->ring + (size_t)slot * u->slot_size;
			const struct udp_hdr *h = (const struct udp_hdr *)(const void *)buf;

			if (likely(cnt < n && len >= sizeof(*h) && h->magic == UDP_MAGIC &&
				   h->version == UDP_VERSION && h->type == UDP_T_DATA)) {
				u->base.stats.rx_pkts++;
				u->base.stats.rx_bytes += len - sizeof(*h);
				u->held[slot] = 1;
				u->rx_len[slot] = len;
				pkts[cnt].buf = buf + sizeof(*h);
				pkts[cnt].len = len - (uint32_t)sizeof(*h);
				pkts[cnt++].ring_idx = slot;
			} else {
				urpc__udp_rx_done(u, slot, len, false, &now);
			}
		}
		if (got < want)
			break;
	}
	if (unlikely(u->nctl))
		urpc__udp_os_flush(u);
	return (int)cnt;
}

int urpc__udp_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct udp_tp *u = to_udp(tp);
	uint32_t mask = tp->rq_depth - 1;
	unsigned i, cnt;

	if (u->xdp && !u->pend_cnt && !u->kpeers)
		return udp_rx_burst_xdp(u, pkts, n);

	/* DATA found by the last drain goes up first: the next call drains (issue 32) */
	if (!u->pend_cnt || (u->pend_cnt < n && !u->nops && !u->nctl))
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

void urpc__udp_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n)
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
int urpc__udp_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct udp_tp *u = to_udp(tp);

	udp_rx_drain(u);
	return urpc__udp_os_poll(u, comps, n);
}
