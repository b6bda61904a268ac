/* SPDX-License-Identifier: MIT */
/*
 * The Rpc object: creation and teardown, message buffers, the event loop and
 * the TX batch. Sessions live in session.c, the datapath in datapath.c.
 */
#define URPC_LOG_MODULE "rpc"
#include "rpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../util/log.h"

#define SCAN_INTERVAL_NS 1000000ull /* timers are looked at once a millisecond */

URPC_API void urpc_rpc_opts_init(struct urpc_rpc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->transport = URPC_TRANSPORT_DEFAULT;
	o->rto_us = 5000;
	o->rto_max_us = 200000;
	o->ping_interval_ms = 100;
	o->peer_timeout_ms = 500;
	o->connect_timeout_ms = 2000;
	o->max_sessions = 1024;
}

static uint64_t default_clock(void *arg)
{
	return urpc__now_ns();
}

static int check_opts(const struct urpc_rpc_opts *o)
{
	if (!o->rto_us || o->rto_max_us < o->rto_us || !o->ping_interval_ms ||
	    o->peer_timeout_ms <= o->ping_interval_ms || !o->connect_timeout_ms ||
	    !o->max_sessions || o->max_sessions > (1u << 24))
		return -EINVAL;
	return 0;
}

URPC_API int urpc_rpc_create(struct urpc_nexus *nx, uint8_t rpc_id, const struct urpc_rpc_opts *o,
			     struct urpc_rpc **out)
{
	struct urpc_rpc_opts def;
	struct urpc_tp_cfg cfg;
	struct urpc_rpc *rpc;
	uint64_t seed;
	int ret;

	if (!nx || !out)
		return -EINVAL;
	if (!o) {
		urpc_rpc_opts_init(&def);
		o = &def;
	}
	ret = check_opts(o);
	if (ret) {
		URPC_ERR(rpc_id, "invalid Rpc options (timeouts must be nonzero, rto_max >= rto, "
				 "peer_timeout > ping_interval, 1 <= max_sessions <= 2^24)");
		return ret;
	}
	rpc = calloc(1, sizeof(*rpc));
	if (!rpc)
		return -ENOMEM;
	rpc->owner = pthread_self();
	rpc->nx = nx;
	rpc->id = rpc_id;
	rpc->o = *o;
	rpc->clock = default_clock;
	rpc->tx_epoch = 1; /* server slots start at 0: nothing of theirs is queued */
	rpc->rto_ns = (uint64_t)o->rto_us * 1000;
	rpc->rto_max_ns = (uint64_t)o->rto_max_us * 1000;
	rpc->ping_ns = (uint64_t)o->ping_interval_ms * 1000000;
	rpc->peer_timeout_ns = (uint64_t)o->peer_timeout_ms * 1000000;
	rpc->connect_timeout_ns = (uint64_t)o->connect_timeout_ms * 1000000;
	rpc->sm_retry_ns = URPC_MIN(rpc->connect_timeout_ns / 4, 100000000ull);
	seed = o->seed;
	if (!seed && getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = urpc__now_ns() ^ ((uint64_t)rpc_id << 56);
	urpc__rand_seed(&rpc->rng, seed);
	rpc->max_sessions = o->max_sessions;
	rpc->sessions = calloc(o->max_sessions, sizeof(*rpc->sessions));
	rpc->smq = aligned_alloc(URPC_CACHELINE, URPC_ALIGN_UP(sizeof(*rpc->smq), URPC_CACHELINE));
	if (!rpc->sessions || !rpc->smq) {
		ret = -ENOMEM;
		goto out_free;
	}
	urpc__sm_queue_init(rpc->smq);

	urpc__tp_cfg_init(&cfg, o->transport);
	cfg.host = urpc__nexus_host(nx);
	cfg.seed = seed;
	cfg.device = o->device;
	cfg.id = rpc_id;
	ret = urpc__tp_create(&cfg, &rpc->tp);
	if (ret)
		goto out_free;
	if (rpc->tp->mtu <= sizeof(struct urpc_pkthdr)) {
		ret = -EINVAL;
		goto out_tp;
	}
	rpc->max_msg = rpc->tp->mtu - (uint32_t)sizeof(struct urpc_pkthdr);

	urpc__pool_opts_init(&rpc->pool_opts);
	rpc->pool_opts.headroom = URPC_ALIGN_UP(sizeof(struct urpc_pkthdr), 64);
	rpc->pool_opts.reg = urpc__tp_pool_reg;
	rpc->pool_opts.dereg = urpc__tp_pool_dereg;
	rpc->pool_opts.reg_ctx = rpc->tp;
	ret = urpc__pool_create(&rpc->pool_opts, &rpc->pool);
	if (ret)
		goto out_tp;

	ret = urpc__nexus_attach_rpc(nx, rpc_id, rpc->smq);
	if (ret) {
		URPC_ERR(rpc_id, "Rpc id %u is already in use on this Nexus", rpc_id);
		goto out_pool;
	}
	rpc->handlers = urpc__nexus_handlers(nx);
	rpc->now = rpc->clock(rpc->clock_arg);
	*out = rpc;
	return 0;

out_pool:
	urpc__pool_destroy(rpc->pool);
out_tp:
	rpc->tp->ops->destroy(rpc->tp);
out_free:
	free(rpc->smq);
	free(rpc->sessions);
	free(rpc);
	return ret;
}

/* Message buffers lent to the engine by pending client requests. */
static size_t lent_bufs(const struct urpc_rpc *rpc)
{
	size_t n = 0;
	uint32_t i, j;

	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = rpc->sessions[i];

		if (!s || s->role != URPC_ROLE_CLIENT)
			continue;
		for (j = 0; j < URPC_SESSION_SLOTS; j++)
			if (s->slots[j].busy)
				n += 1 + (s->slots[j].resp != s->slots[j].req);
		for (j = s->wq_head; j != s->wq_tail; j++) {
			const struct urpc_waiting_req *w = &s->waitq[j % URPC_SESSION_WAITQ];

			n += 1 + (w->resp != w->req);
		}
	}
	return n;
}

URPC_API int urpc_rpc_destroy(struct urpc_rpc *rpc)
{
	struct urpc_pool_stats ps;
	size_t owned;
	uint32_t i;
	int ret;

	if (!rpc)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	if (rpc->in_cb)
		return -EBUSY;
	/*
	 * Buffers the application holds must be freed first; buffers lent to
	 * pending requests come back through their continuations below.
	 */
	urpc__pool_get_stats(rpc->pool, &ps);
	owned = ps.bufs_out - rpc->internal_bufs - lent_bufs(rpc);
	if (owned) {
		URPC_ERR(rpc->id, "%zu message buffers are still allocated: free them first",
			 owned);
		return -EBUSY;
	}

	rpc->now = rpc->clock(rpc->clock_arg);
	for (i = 0; i < rpc->hi_session; i++) {
		struct urpc_session *s = rpc->sessions[i];

		if (s)
			urpc__session_transition(rpc, s, URPC_SEV_RPC_DESTROY, -ECONNRESET);
	}
	/* Continuations may have allocated; they may not have destroyed us (in_cb). */
	for (i = 0; i < rpc->hi_session; i++)
		if (rpc->sessions[i])
			urpc__session_free(rpc, rpc->sessions[i]);
	urpc__rpc_tx_flush(rpc);
	rpc->tp->ops->tx_flush(rpc->tp);

	urpc__nexus_detach_rpc(rpc->nx, rpc->id);
	urpc__pool_get_stats(rpc->pool, &ps);
	if (ps.bufs_out)
		URPC_WARN(rpc->id,
			  "%zu message buffers were not freed by their continuations; "
			  "they are released with the Rpc",
			  ps.bufs_out);
	urpc__pool_destroy_all(rpc->pool);
	ret = rpc->tp->ops->destroy(rpc->tp);
	if (ret)
		URPC_ERR(rpc->id, "transport destroy failed: %s", urpc_strerror(ret));
	free(rpc->smq);
	free(rpc->sessions);
	free(rpc);
	return 0;
}

URPC_API uint8_t urpc_rpc_id(const struct urpc_rpc *rpc)
{
	return rpc->id;
}

URPC_API size_t urpc_rpc_max_msg_size(const struct urpc_rpc *rpc)
{
	return rpc->max_msg;
}

URPC_API int urpc_rpc_get_stats(struct urpc_rpc *rpc, struct urpc_rpc_stats *st)
{
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	*st = rpc->st;
	return 0;
}

/* ---- message buffers ---- */

URPC_API int urpc_msgbuf_alloc(struct urpc_rpc *rpc, size_t size, struct urpc_msgbuf *mb)
{
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (unlikely(!mb))
		return -EINVAL;
	return urpc__pool_alloc(rpc->pool, size, mb);
}

URPC_API int urpc_msgbuf_resize(struct urpc_msgbuf *mb, size_t size)
{
	return urpc__pool_resize(mb, size);
}

URPC_API int urpc_msgbuf_free(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
{
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (!mb || !mb->buf)
		return -EINVAL;
	urpc__pool_free(rpc->pool, mb);
	return 0;
}

/* ---- TX batch ---- */

void urpc__rpc_tx_flush(struct urpc_rpc *rpc)
{
	unsigned done = 0;
	int n = 0;

	while (done < rpc->ntx) {
		n = rpc->tp->ops->tx_burst(rpc->tp, rpc->tx + done, rpc->ntx - done);
		if (unlikely(n <= 0)) {
			if (n < 0)
				URPC_ERR_RATELIMIT(rpc->id, "tx_burst failed: %s",
						   urpc_strerror(n));
			break;
		}
		done += (unsigned)n;
	}
	rpc->st.pkts_tx += done;
	if (unlikely(done < rpc->ntx && done > 0))
		memmove(rpc->tx, rpc->tx + done, (rpc->ntx - done) * sizeof(rpc->tx[0]));
	/*
	 * Datagrams the transport did not take (back-pressure) stay queued for
	 * the next pass; an error drops them like a lossy wire would, and the
	 * client's retransmission recovers.
	 */
	rpc->ntx = (n < 0) ? 0 : rpc->ntx - done;
	if (likely(!rpc->ntx))
		rpc->tx_epoch++;
}

void urpc__rpc_tx_forget(struct urpc_rpc *rpc, const void *hdr, const struct urpc_tp_peer *peer)
{
	unsigned i, n = 0;

	for (i = 0; i < rpc->ntx; i++) {
		const struct urpc_tp_tx *t = &rpc->tx[i];

		if (hdr ? t->hdr == hdr : t->peer == peer)
			continue;
		rpc->tx[n++] = *t;
	}
	rpc->ntx = n;
	if (!n)
		rpc->tx_epoch++;
}

/* ---- the event loop ---- */

static void scan_timers(struct urpc_rpc *rpc)
{
	uint32_t i;

	for (i = 0; i < rpc->hi_session; i++) {
		struct urpc_session *s = rpc->sessions[i];

		if (!s)
			continue;
		if (s->role == URPC_ROLE_CLIENT &&
		    (s->state == URPC_SESS_CONNECTED || s->state == URPC_SESS_CONNECTING))
			urpc__dp_timers(rpc, s);
		s = rpc->sessions[i]; /* callbacks may have freed it */
		if (s)
			urpc__session_timers(rpc, s);
	}
}

static void loop_once(struct urpc_rpc *rpc)
{
	struct urpc_tp_rx rx[URPC_RX_BATCH];
	struct urpc_sm_pkt pkt;
	int n, i;

	rpc->now = rpc->clock(rpc->clock_arg);
	rpc->in_loop = true;

	while (urpc__sm_queue_pop(rpc->smq, &pkt)) {
		rpc->st.sm_pkts_rx++;
		urpc__session_handle_sm(rpc, &pkt);
	}

	n = rpc->tp->ops->rx_burst(rpc->tp, rx, URPC_RX_BATCH);
	if (n > 0) {
		rpc->st.pkts_rx += (uint64_t)n;
		for (i = 0; i < n; i++)
			urpc__dp_rx(rpc, rx[i].buf, rx[i].len);
		rpc->tp->ops->rx_release(rpc->tp, rx, (unsigned)n);
	}

	if (unlikely(rpc->now >= rpc->next_scan_ns)) {
		rpc->next_scan_ns = rpc->now + SCAN_INTERVAL_NS;
		scan_timers(rpc);
	}
	if (unlikely(rpc->have_pending))
		urpc__session_run_pending(rpc);
	if (rpc->ntx)
		urpc__rpc_tx_flush(rpc);
	rpc->in_loop = false;
}

URPC_API int urpc_rpc_run_event_loop_once(struct urpc_rpc *rpc)
{
	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb))
		return -EPERM;
	loop_once(rpc);
	return 0;
}

URPC_API int urpc_rpc_run_event_loop(struct urpc_rpc *rpc, unsigned ms)
{
	uint64_t end;

	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb))
		return -EPERM;
	end = urpc__now_ns() + (uint64_t)ms * 1000000;
	do
		loop_once(rpc);
	while (urpc__now_ns() < end);
	return 0;
}

/* ---- test hooks ---- */

void urpc__rpc_set_clock(struct urpc_rpc *rpc, urpc_clock_fn fn, void *arg)
{
	rpc->clock = fn ? fn : default_clock;
	rpc->clock_arg = arg;
	rpc->now = rpc->clock(rpc->clock_arg);
	rpc->next_scan_ns = 0;
}

struct urpc_tp *urpc__rpc_transport(struct urpc_rpc *rpc)
{
	return rpc->tp;
}

int urpc__rpc_session_info(struct urpc_rpc *rpc, int session, struct urpc_session_info *info)
{
	struct urpc_session *s = urpc__rpc_session(rpc, session);

	if (!s)
		return -EINVAL;
	info->role = s->role;
	info->state = s->state;
	info->remote_num = s->remote_num;
	info->token = s->token;
	return 0;
}
