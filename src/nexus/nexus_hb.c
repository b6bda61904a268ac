/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's heartbeats (nexus_hb.h): one ping per peer process per
 * interval, its answer, the Rpcs told when a peer's generations move, and
 * the references sessions hold on peer entries. Owns nothing: the peer
 * table is nexus_peer.c's, the Nexus's fields nexus.c's (nexus_int.h).
 * May call: nexus_peer.h, nexus_io.h (sending), sm.h (the Rpcs' queues),
 * util/seam.h (the clock), pthreads. Thread: the SM thread (or the
 * simulator's), and any thread for the peer references (under nx->lock).
 */
#define URPC_LOG_MODULE "nexus"
#include "nexus_hb.h"

#include <stdatomic.h>
#include <string.h>

#include "../util/seam.h"
#include "nexus_int.h"
#include "nexus_io.h"

static_assert(URPC_NXP_RPC_BYTES <= URPC_TP_EP_MAX, "a heartbeat's Rpc ids fit ep[]");

void urpc__nexus_notify_rpcs(struct urpc_nexus *nx)
{
	struct urpc_sm_pkt p;
	unsigned i;

	/* Release pairs with the acquire in urpc__nexus_notices(): the generations first. */
	atomic_fetch_add_explicit(&nx->notices, 1, memory_order_release);
	memset(&p, 0, sizeof(p));
	p.type = URPC_SM_PKT_NX_NOTICE;
	for (i = 0; i < NEXUS_MAX_RPCS; i++)
		if (nx->rpcs[i] && urpc__sm_queue_push(nx->rpcs[i], &p) < 0)
			stat_inc(&nx->stats.drop_queue_full); /* its session scan still sees it */
}

/*
 * A heartbeat of @type to @to, with what we said of it (@failed_it) and the
 * digest of the sessions we hold with it (@digest, the XOR of their tokens:
 * nexus_peer.h). nx->lock held.
 */
static void heartbeat_send(struct urpc_nexus *nx, const struct sockaddr_in *to,
			   enum urpc_sm_pkt_type type, uint64_t failed_it, uint64_t digest)
{
	struct urpc_sm_pkt p;
	unsigned i;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.seq = failed_it;
	p.token = digest;
	p.ep_len = URPC_NXP_RPC_BYTES;
	for (i = 0; i < NEXUS_MAX_RPCS; i++)
		if (nx->rpcs[i])
			p.ep[i / 8] |= (uint8_t)(1u << (i & 7));
	if (urpc__nexus_sm_send(nx, to, &p) == 0)
		stat_inc(&nx->stats.heartbeats_tx);
}

static void ping_peer(void *arg, const struct urpc_nx_peer *peer)
{
	struct urpc_nexus *nx = arg;

	/* Without a secret yet, nothing we say would be believed. */
	if (!atomic_load_explicit(&nx->mute, memory_order_relaxed) && peer->nonce_remote)
		heartbeat_send(nx, &peer->addr, URPC_SM_PKT_NX_PING, peer->failed_it, peer->digest);
}

uint32_t urpc__nexus_notices(const struct urpc_nexus *nx)
{
	return atomic_load_explicit(&nx->notices, memory_order_acquire);
}

void urpc__nexus_set_mute(struct urpc_nexus *nx, bool mute)
{
	atomic_store_explicit(&nx->mute, mute, memory_order_relaxed);
}

void urpc__nexus_heartbeat_rx(struct urpc_nexus *nx, const struct urpc_sm_pkt *p)
{
	const struct urpc_nx_peer *peer;

	stat_inc(&nx->stats.heartbeats_rx);
	pthread_mutex_lock(&nx->lock);
	if (urpc__nxp_heard(&nx->peers, &p->from, p->nexus_inc, p->nexus_epoch, p->seq, p->ep,
			    p->token, urpc__now_ns()))
		urpc__nexus_notify_rpcs(nx);
	if (p->type == URPC_SM_PKT_NX_PING) {
		peer = urpc__nxp_find(&nx->peers, &p->from);
		heartbeat_send(nx, &p->from, URPC_SM_PKT_NX_PONG, peer ? peer->failed_it : 0,
			       peer ? peer->digest : 0);
	}
	pthread_mutex_unlock(&nx->lock);
}

uint64_t urpc__nexus_tick(struct urpc_nexus *nx)
{
	uint64_t now, due;
	bool failed;

	pthread_mutex_lock(&nx->lock);
	/*
	 * Read under the lock: an Rpc thread that stamped a peer heard (its
	 * first session) while this thread waited for the lock stamped a time
	 * after one read before it.
	 */
	now = urpc__now_ns();
	due = urpc__nxp_tick(&nx->peers, now, &failed, ping_peer, nx);
	if (failed || nx->peers.probed)
		urpc__nexus_notify_rpcs(nx);
	nx->peers.probed = false;
	pthread_mutex_unlock(&nx->lock);
	return due;
}

struct urpc_nx_peer *urpc__nexus_peer_get(struct urpc_nexus *nx, const struct sockaddr_in *addr,
					  uint64_t ping_ns, uint64_t timeout_ns, uint64_t token)
{
	struct urpc_nx_peer *p;

	pthread_mutex_lock(&nx->lock);
	p = urpc__nxp_get(&nx->peers, addr, ping_ns, timeout_ns, token, urpc__now_ns());
	pthread_mutex_unlock(&nx->lock);
	/* The SM thread pings it on its next wake-up (within SM_POLL_MS). */
	return p;
}

void urpc__nexus_peer_put(struct urpc_nexus *nx, struct urpc_nx_peer *p, uint64_t token)
{
	pthread_mutex_lock(&nx->lock);
	urpc__nxp_put(&nx->peers, p, token, urpc__now_ns());
	pthread_mutex_unlock(&nx->lock);
}
