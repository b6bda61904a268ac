/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's SM sends (nexus_io.h). Owns nothing; reads the Nexus's
 * incarnation, epoch and attach numbers, counts its sm_tx, and signs every
 * packet to a peer it shares a secret with (nexus_auth.h).
 * May call: the SM encoder (sm.h), nexus_auth.h, sendto/sendmmsg on the SM
 * socket, or the simulated network's send.
 */
#define _GNU_SOURCE /* sendmmsg */
#define URPC_LOG_MODULE "nexus"
#include "nexus_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "../util/log.h"
#include "nexus_auth.h"
#include "nexus_int.h"

static_assert(URPC_SM_PKT_MAX <= UINT16_MAX, "a packed datagram's length fits its field");

void urpc__nexus_sm_pack(struct urpc_nexus *nx, const struct sockaddr_in *to,
			 const struct urpc_sm_pkt *p, struct urpc_sm_dgram *d)
{
	struct urpc_sm_pkt out = *p;
	const struct urpc_nx_peer *peer;

	out.nexus_inc = nx->incarnation;
	out.nexus_epoch = atomic_load_explicit(&nx->epoch, memory_order_relaxed);
	/* From an Rpc (a request from a client, an answer from a server), or the Nexus's own. */
	out.rpc_inc = 0;
	if (p->type != URPC_SM_PKT_NX_PING && p->type != URPC_SM_PKT_NX_PONG)
		out.rpc_inc = atomic_load_explicit(
			&nx->rpc_inc[urpc__sm_pkt_to_server(p->type) ? p->client_rpc_id
								     : p->server_rpc_id],
			memory_order_relaxed);
	d->to = *to;
	d->type = (uint8_t)p->type;
	out.mac = 0;
	/* The lock is recursive: heartbeats are sent with it held. */
	pthread_mutex_lock(&nx->lock);
	peer = urpc__nxp_find(&nx->peers, to);
	out.nx_nonce = peer ? peer->nonce_local : 0;
	d->len = (uint16_t)urpc__sm_encode(&out, d->buf);
	if (peer && peer->nonce_remote)
		urpc__nxa_sign(peer, d->buf, d->len);
	pthread_mutex_unlock(&nx->lock);
}

/*
 * A send that failed with @err only for an ICMP error an earlier datagram
 * caused (IP_RECVERR, nexus_err.h: the socket reports a pending error to
 * the next call, which then sends nothing, and clears it): send again.
 */
static bool pending_icmp(int err, unsigned *tries)
{
	return (err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH) && ++*tries <= 4;
}

/* Send @d alone. 0 or -errno. */
static int send_one(struct urpc_nexus *nx, const struct urpc_sm_dgram *d)
{
	unsigned tries = 0;
	ssize_t n;

	if (nx->sim) {
		n = nx->net.send(nx->net.arg, nx, &d->to, d->buf, d->len);
		if (n < 0)
			return (int)n;
		stat_inc(&nx->stats.sm_tx);
		return 0;
	}
	do {
		n = sendto(nx->fd, d->buf, d->len, 0, (const struct sockaddr *)&d->to,
			   sizeof(d->to));
	} while (n < 0 && (errno == EINTR || pending_icmp(errno, &tries)));
	if (n < 0)
		return -errno;
	stat_inc(&nx->stats.sm_tx);
	return 0;
}

int urpc__nexus_sm_send(struct urpc_nexus *nx, const struct sockaddr_in *to,
			const struct urpc_sm_pkt *p)
{
	struct urpc_sm_dgram d;

	urpc__nexus_sm_pack(nx, to, p, &d);
	return send_one(nx, &d);
}

static void send_failed(const struct urpc_sm_dgram *d, int log_id, int err)
{
	char addr[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &d->to.sin_addr, addr, sizeof(addr));
	URPC_WARN_RATELIMIT(log_id, "sending %s to %s:%u failed: %s",
			    urpc__sm_pkt_type_str((enum urpc_sm_pkt_type)d->type), addr,
			    ntohs(d->to.sin_port), urpc_strerror(err));
}

unsigned urpc__nexus_sm_send_batch(struct urpc_nexus *nx, const struct urpc_sm_dgram *d, unsigned n,
				   int log_id)
{
	struct mmsghdr m[URPC_SM_OUT_BATCH];
	struct iovec iov[URPC_SM_OUT_BATCH];
	unsigned done = 0, sent = 0, tries = 0, i, k;
	int ret;

	if (nx->sim) {
		for (i = 0; i < n; i++) {
			ret = send_one(nx, &d[i]);
			if (ret)
				send_failed(&d[i], log_id, ret);
			else
				sent++;
		}
		return sent;
	}
	while (done < n) {
		k = URPC_MIN(n - done, (unsigned)URPC_SM_OUT_BATCH);
		memset(m, 0, sizeof(m[0]) * k);
		for (i = 0; i < k; i++) {
			const struct urpc_sm_dgram *g = &d[done + i];

			iov[i].iov_base = (void *)(uintptr_t)g->buf;
			iov[i].iov_len = g->len;
			m[i].msg_hdr.msg_iov = &iov[i];
			m[i].msg_hdr.msg_iovlen = 1;
			m[i].msg_hdr.msg_name = (void *)(uintptr_t)&g->to;
			m[i].msg_hdr.msg_namelen = sizeof(g->to);
		}
		ret = sendmmsg(nx->fd, m, k, 0);
		if (ret <= 0) {
			if (ret < 0 && (errno == EINTR || pending_icmp(errno, &tries)))
				continue;
			/* The first of them was refused: skip it, send the rest. */
			send_failed(&d[done], log_id, ret < 0 ? -errno : -EIO);
			done++;
			continue;
		}
		done += (unsigned)ret;
		sent += (unsigned)ret;
	}
	__atomic_fetch_add(&nx->stats.sm_tx, sent, __ATOMIC_RELAXED);
	return sent;
}
