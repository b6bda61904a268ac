/* SPDX-License-Identifier: MIT */
/*
 * Per-peer quotas on a server (quota.h): large responses that wait too
 * long for their READ; the shares of the one-sided operations and the
 * minimum rate under contention (rpc->os_wait_ns, the cut of slow READs).
 * Owns rpc->grants_live and each stored response's place on it. May call:
 * the transport's cancel (a cut), the log (large.c and evtimer.c free what
 * is revoked, large.h). Cold: a few operations per large response, one
 * look at the list's head (and the pool's counters) per timer scan while
 * responses are stored, and a walk of os[] only under contention.
 */
#define URPC_LOG_MODULE "rpc"
#include "quota.h"

#include <errno.h>

#include "../util/log.h"

void urpc__quota_grant_start(struct urpc_rpc *rpc, struct urpc_srv_large *l, struct urpc_sslot *sl)
{
	struct urpc_srv_large *p = rpc->grants_tail;
	uint32_t b = sl->h.priv_sess->srv.src_bucket;

	/* Its bytes count in its source's share of the pool while it is stored. */
	l->src_bucket = rpc->src_bytes ? b : 0;
	if (l->src_bucket)
		rpc->src_bytes[2 * (b - 1)] += l->resp.data_size;
	/* The one-sided time-out, and the time its bytes take at the slowest rate allowed. */
	l->slot = sl;
	l->expires_ns = rpc->now + URPC_MAX(rpc->tp->one_sided_timeout_ns, URPC_OS_TIMEOUT_MIN_NS) +
			(uint64_t)l->resp.data_size * 1000000000ull / URPC_QUOTA_GRANT_RATE;
	/* Sorted by expiry: from the tail, where a new one nearly always goes. */
	while (p && p->expires_ns > l->expires_ns)
		p = p->lprev;
	l->lprev = p;
	l->lnext = p ? p->lnext : rpc->grants_live;
	if (l->lnext)
		l->lnext->lprev = l;
	else
		rpc->grants_tail = l;
	if (p)
		p->lnext = l;
	else
		rpc->grants_live = l;
}

void urpc__quota_grant_end(struct urpc_rpc *rpc, struct urpc_srv_large *l)
{
	if (!l->slot)
		return;
	if (l->src_bucket)
		rpc->src_bytes[2 * (l->src_bucket - 1)] -= l->resp.data_size;
	if (l->lprev)
		l->lprev->lnext = l->lnext;
	else
		rpc->grants_live = l->lnext;
	if (l->lnext)
		l->lnext->lprev = l->lprev;
	else
		rpc->grants_tail = l->lprev;
	l->lprev = l->lnext = NULL;
	l->slot = NULL;
}

struct urpc_sslot *urpc__quota_grant_expired(struct urpc_rpc *rpc, uint32_t src_bucket)
{
	struct urpc_srv_large *l = rpc->grants_live;
	struct urpc_sslot *sl;

	/* Sorted by expiry: the first past its time of that source, if any. */
	while (l && rpc->now >= l->expires_ns && src_bucket && l->src_bucket != src_bucket)
		l = l->lnext;
	if (!l || rpc->now < l->expires_ns)
		return NULL;
	sl = l->slot;
	rpc->st.grants_expired++;
	URPC_WARN_RATELIMIT(rpc->id,
			    "session %u: a %zu-byte large response not read within the "
			    "one-sided time-out (%llu ms; urpc_rpc_opts.one_sided_timeout_ms) "
			    "was revoked %s, its memory given back",
			    sl->h.priv_sess->local_num, l->resp.data_size,
			    (unsigned long long)(URPC_MAX(rpc->tp->one_sided_timeout_ns,
							  URPC_OS_TIMEOUT_MIN_NS) /
						 1000000),
			    src_bucket	     ? "for a newer response of its address's share"
			    : rpc->src_bytes ? "for the Rpc's message-buffer pool, nearly full"
					     : "(no per-source share: max_sessions_per_source 0)");
	urpc__quota_grant_end(rpc, l);
	return sl;
}

bool urpc__quota_grants_due(struct urpc_rpc *rpc)
{
	struct urpc_pool_stats ps;
	bool failed;

	if (!rpc->src_bytes)
		return true;
	urpc__pool_get_stats(rpc->pool, &ps);
	failed = ps.alloc_failures != rpc->pool_failures_seen;
	rpc->pool_failures_seen = ps.alloc_failures;
	return failed || ps.bytes_mapped >= rpc->pool_opts.max_bytes / 8 * 7;
}

uint64_t urpc__quota_bytes_over(const struct urpc_rpc *rpc, const struct urpc_sslot *sl, size_t len)
{
	uint32_t b = sl->h.priv_sess->srv.src_bucket;
	uint64_t held;

	if (!b || !rpc->src_bytes)
		return 0;
	held = rpc->src_bytes[2 * (b - 1)] + len;
	return held > rpc->src_bytes_max ? held - rpc->src_bytes_max : 0;
}

bool urpc__quota_bytes_refuse(struct urpc_rpc *rpc, const struct urpc_sslot *sl, size_t len)
{
	uint32_t b = sl->h.priv_sess->srv.src_bucket;

	if (!urpc__quota_bytes_over(rpc, sl, len))
		return false;
	rpc->st.grants_refused++;
	URPC_WARN_RATELIMIT(
		rpc->id,
		"session %u: refusing to store a %zu-byte large response: the clients "
		"at its address hold %llu bytes of unread large responses, their "
		"share (%llu MiB, with max_sessions_per_source on); the client gets EIO",
		sl->h.priv_sess->local_num, len, (unsigned long long)rpc->src_bytes[2 * (b - 1)],
		(unsigned long long)(URPC_QUOTA_SRC_BYTES >> 20));
	return true;
}

bool urpc__quota_op_refuse(struct urpc_rpc *rpc, const struct urpc_session *s)
{
	uint32_t b = s->srv.src_bucket;

	if (!b || !rpc->src_bytes || rpc->src_bytes[2 * (b - 1) + 1] < URPC_QUOTA_SRC_OPS)
		return false;
	rpc->st.os_share_waits++;
	return true;
}

void urpc__quota_op_take(struct urpc_rpc *rpc, const struct urpc_session *s, struct urpc_os_op *op)
{
	uint32_t b = rpc->src_bytes ? s->srv.src_bucket : 0;

	op->src_bucket = (uint16_t)b;
	if (b)
		rpc->src_bytes[2 * (b - 1) + 1]++;
}

/* The one-sided time-out the quotas count from. */
static uint64_t os_timeout_ns(const struct urpc_rpc *rpc)
{
	return URPC_MAX(rpc->tp->one_sided_timeout_ns, URPC_OS_TIMEOUT_MIN_NS);
}

bool urpc__quota_contended(const struct urpc_rpc *rpc)
{
	return rpc->os_wait_ns && rpc->now - rpc->os_wait_ns < os_timeout_ns(rpc);
}

void urpc__quota_op_waited(struct urpc_rpc *rpc)
{
	rpc->os_wait_ns = URPC_MAX(rpc->now, 1);
}

void urpc__quota_os_scan(struct urpc_rpc *rpc)
{
	uint16_t i;

	if (!urpc__quota_contended(rpc))
		return;
	for (i = 0; i < URPC_OS_OPS; i++) {
		struct urpc_os_op *op = &rpc->os[i];

		if (!op->busy || op->orphan || op->kind != URPC_OS_SRV_REQ || !op->start_ns ||
		    rpc->now - op->start_ns <
			    os_timeout_ns(rpc) + op->len * 1000000000ull / URPC_QUOTA_MIN_RATE)
			continue;
		op->start_ns = 0; /* cut once, and never posted again */
		if (rpc->tp->ops->cancel(rpc->tp, i, -ETIMEDOUT))
			continue;
		rpc->st.os_cut++;
		URPC_WARN_RATELIMIT(
			rpc->id,
			"session %u: cutting the READ of a %zu-byte request: slower than "
			"%llu MiB/s while other large requests wait for an operation; "
			"the client gets EIO",
			op->sess_num, op->len, (unsigned long long)(URPC_QUOTA_MIN_RATE >> 20));
	}
}
