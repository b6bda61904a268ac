/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's tables and accessors (see nexus.c for the threads and the
 * lock): options, handlers, attached Rpcs, counters. Owns nothing beyond
 * the fields it writes under nx->lock. Calls nothing of nexus.c.
 */
#define URPC_LOG_MODULE "nexus"
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "nexus_table.h"

#include "nexus_auth.h"
#include "nexus_int.h"

/* Fill @o with the defaults. Owns nothing. Thread: any. */
URPC_API void urpc_nexus_opts_init(struct urpc_nexus_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->host = "127.0.0.1";
	o->port = 0;
}

/* The port the SM socket is bound to (fixed at create). Thread: any. */
URPC_API uint16_t urpc_nexus_port(const struct urpc_nexus *nx)
{
	return nx ? nx->port : 0;
}

/*
 * Install @fn for @req_type. The handler table belongs to @nx; @arg stays
 * the caller's. Thread: any, before the first Rpc attaches (takes nx->lock).
 */
URPC_API int urpc_nexus_register_handler(struct urpc_nexus *nx, uint8_t req_type,
					 urpc_req_handler_fn fn, void *arg)
{
	int ret = 0;

	if (!nx || !fn)
		return -EINVAL;
	pthread_mutex_lock(&nx->lock);
	if (nx->frozen)
		ret = -EBUSY;
	else if (nx->handlers[req_type].fn)
		ret = -EEXIST;
	else
		nx->handlers[req_type] = (struct urpc_handler){.fn = fn, .arg = arg};
	pthread_mutex_unlock(&nx->lock);
	return ret;
}

/*
 * Attach Rpc @rpc_id's queue @q (still owned by the Rpc). Freezes the
 * handler table. 0 or -EEXIST. Thread: any (takes nx->lock).
 */
int urpc__nexus_attach_rpc(struct urpc_nexus *nx, uint8_t rpc_id, struct urpc_sm_queue *q)
{
	int ret = 0;

	assert(q);
	pthread_mutex_lock(&nx->lock);
	if (nx->rpcs[rpc_id]) {
		ret = -EEXIST;
	} else {
		nx->rpcs[rpc_id] = q;
		nx->nr_attached++;
		atomic_fetch_add_explicit(&nx->rpc_inc[rpc_id], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&nx->epoch, 1, memory_order_relaxed);
		nx->frozen = true;
	}
	pthread_mutex_unlock(&nx->lock);
	return ret;
}

/*
 * Detach Rpc @rpc_id. The SM thread pushes only while holding nx->lock, so
 * once this returns it no longer touches the queue. Thread: any.
 */
void urpc__nexus_detach_rpc(struct urpc_nexus *nx, uint8_t rpc_id)
{
	pthread_mutex_lock(&nx->lock);
	if (nx->rpcs[rpc_id]) {
		nx->rpcs[rpc_id] = NULL;
		nx->nr_attached--;
		atomic_fetch_add_explicit(&nx->epoch, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&nx->lock);
}

/* Copy the counters. Thread: any. */
void urpc__nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st)
{
	st->sm_rx = __atomic_load_n(&nx->stats.sm_rx, __ATOMIC_RELAXED);
	st->sm_tx = __atomic_load_n(&nx->stats.sm_tx, __ATOMIC_RELAXED);
	st->drop_bad_pkt = __atomic_load_n(&nx->stats.drop_bad_pkt, __ATOMIC_RELAXED);
	st->drop_no_rpc = __atomic_load_n(&nx->stats.drop_no_rpc, __ATOMIC_RELAXED);
	st->drop_queue_full = __atomic_load_n(&nx->stats.drop_queue_full, __ATOMIC_RELAXED);
	st->replied_no_rpc = __atomic_load_n(&nx->stats.replied_no_rpc, __ATOMIC_RELAXED);
	st->heartbeats_tx = __atomic_load_n(&nx->stats.heartbeats_tx, __ATOMIC_RELAXED);
	st->heartbeats_rx = __atomic_load_n(&nx->stats.heartbeats_rx, __ATOMIC_RELAXED);
	st->cookies_tx = __atomic_load_n(&nx->stats.cookies_tx, __ATOMIC_RELAXED);
	st->drop_auth = __atomic_load_n(&nx->stats.drop_auth, __ATOMIC_RELAXED);
}

URPC_API int urpc_nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st)
{
	if (!nx || !st)
		return -EINVAL;
	urpc__nexus_get_stats(nx, st);
	return 0;
}

/*
 * The handler table (NEXUS_MAX_HANDLERS entries, indexed by req type). An
 * Rpc reads it without the lock: it is frozen by that Rpc's attach, whose
 * lock/unlock orders every registration before the reads. Thread: any.
 */
const struct urpc_handler *urpc__nexus_handlers(const struct urpc_nexus *nx)
{
	return nx->handlers;
}

/* The IPv4 address the SM socket is bound to, as text. Thread: any. */
const char *urpc__nexus_host(const struct urpc_nexus *nx)
{
	return nx->host;
}

bool urpc__nexus_peer_is_keyed(struct urpc_nexus *nx, const struct sockaddr_in *addr)
{
	const struct urpc_nx_peer *p;
	bool keyed;

	pthread_mutex_lock(&nx->lock);
	p = urpc__nxp_find(&nx->peers, addr);
	keyed = p && p->nonce_remote;
	pthread_mutex_unlock(&nx->lock);
	return keyed;
}

void urpc__nexus_sign_as_peer(struct urpc_nexus *nx, const struct sockaddr_in *from, uint8_t *buf,
			      size_t len)
{
	const struct urpc_nx_peer *p;
	uint64_t mac;
	unsigned i;

	pthread_mutex_lock(&nx->lock);
	p = urpc__nxp_find(&nx->peers, from);
	if (p && p->nonce_remote && len >= URPC_SM_OFF_MAC + 8) {
		mac = urpc__nxa_mac(p->nonce_remote, p->nonce_local, buf, len);
		for (i = 0; i < 8; i++)
			buf[URPC_SM_OFF_MAC + i] = (uint8_t)(mac >> (8 * i));
	}
	pthread_mutex_unlock(&nx->lock);
}
