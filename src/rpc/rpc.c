/* SPDX-License-Identifier: MIT */
/*
 * The top rung of the engine (docs/ENGINE.md): the Rpc object's creation,
 * options and teardown, its statistics, and the hooks tests use. Owns
 * struct urpc_rpc's setup fields (options, transport, pool, registration
 * cache, SM queue, tables) and their release.
 * May call: every file below (session.h, session_sm.h to flush the SM
 * outbox before it goes, session_table.h, large.h, msgbuf.h, rmem.h to
 * revoke exposures at destroy, client.h for
 * the bookkeeping check, tx.h), the Nexus, the
 * transport's create/destroy, the pool and registration cache, the CUDA
 * loader (placing the port near a GPU).
 */
#define URPC_LOG_MODULE "rpc"
#include "rpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "cc_sess.h"
#include "client.h"
#include "large.h"
#include "msgbuf.h"
#include "rmem.h"
#include "rop.h"
#include "session.h"
#include "session_sm.h"
#include "session_src.h"
#include "session_table.h"
#include "states.h"
#include "tx.h"

URPC_API __thread char urpc_priv_thread_tag __attribute__((tls_model("initial-exec")));

URPC_API void urpc_rpc_opts_init(struct urpc_rpc_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->transport = URPC_TRANSPORT_DEFAULT;
	o->rto_us = 5000;
	o->rto_max_us = 200000;
	o->ping_interval_ms = 100;
	o->peer_timeout_ms = 500;
	o->connect_timeout_ms = 2000;
	o->max_sessions = urpc__src_default_max_sessions();
	o->max_sessions_per_source = o->max_sessions / URPC_SRC_SOURCE_SHARE;
	o->numa_node = -1;
	o->cuda_device = -1;
	o->idle_block_us = 20;
	o->session_window = URPC_SESSION_WINDOW_DEFAULT;
	o->max_registrations = URPC_RPC_DEFAULT_MAX_REGISTRATIONS;
}

static int check_opts(const struct urpc_rpc_opts *o, uint8_t rpc_id)
{
	if (!URPC_IS_POW2(o->session_window) || o->session_window > URPC_SESSION_WINDOW_MAX) {
		URPC_ERR(rpc_id, "invalid session_window %u: a power of two from 1 to %u",
			 o->session_window, URPC_SESSION_WINDOW_MAX);
		return -EINVAL;
	}
	if (!o->rto_us || o->rto_max_us < o->rto_us || !o->ping_interval_ms ||
	    o->peer_timeout_ms <= o->ping_interval_ms || !o->connect_timeout_ms ||
	    !o->max_sessions || o->max_sessions > (1u << 24) || o->max_registrations > (1u << 20)) {
		URPC_ERR(rpc_id, "invalid Rpc options (timeouts must be nonzero, rto_max >= rto, "
				 "peer_timeout > ping_interval, 1 <= max_sessions <= 2^24, "
				 "max_registrations <= 2^20)");
		return -EINVAL;
	}
	return 0;
}

URPC_API int urpc_rpc_create(struct urpc_nexus *nx, uint8_t rpc_id, const struct urpc_rpc_opts *o,
			     struct urpc_rpc **out)
{
	struct urpc_rpc_opts def;
	struct urpc_tp_cfg cfg;
	struct urpc_rpc *rpc;
	char gpu_pci[32];
	uint64_t seed;
	unsigned i;
	int ret;

	if (!nx || !out)
		return -EINVAL;
	if (!o) {
		urpc_rpc_opts_init(&def);
		o = &def;
	}
	ret = check_opts(o, rpc_id);
	if (ret)
		return ret;
	rpc = calloc(1, sizeof(*rpc));
	if (!rpc)
		return -ENOMEM;
	rpc->owner = urpc__thread_name();
	rpc->owner_tag = &urpc_priv_thread_tag;
	rpc->nx = nx;
	rpc->id = rpc_id;
	rpc->o = *o;
	rpc->wake_fd = -1;
	rpc->tx_epoch = 1; /* server slots start at 0: nothing of theirs is queued */
	rpc->rto_ns = (uint64_t)o->rto_us * 1000;
	rpc->rto_max_ns = (uint64_t)o->rto_max_us * 1000;
	rpc->ping_ns = (uint64_t)o->ping_interval_ms * 1000000;
	rpc->peer_timeout_ns = (uint64_t)o->peer_timeout_ms * 1000000;
	rpc->connect_timeout_ns = (uint64_t)o->connect_timeout_ms * 1000000;
	rpc->sm_retry_ns = URPC_MIN(rpc->connect_timeout_ns / 4, 100000000ull);
	seed = o->seed;
	if (!seed)
		seed = urpc__entropy64();
	/* Tokens: from the seed only when the application set one (repeatable tests). */
	urpc__csprng_init(&rpc->secrets, o->seed);
	rpc->max_sessions = o->max_sessions;
	/* Tables of max_sessions entries: zeroed pages, resident only where used. */
	ret = urpc__sess_table_init(rpc);
	if (!ret)
		ret = urpc__src_init(rpc, o->max_sessions_per_source);
	if (ret)
		goto out_free;
	rpc->busy_map = calloc((o->max_sessions + 63) / 64, sizeof(*rpc->busy_map));
	rpc->smq = aligned_alloc(URPC_CACHELINE, URPC_ALIGN_UP(sizeof(*rpc->smq), URPC_CACHELINE));
	if (!rpc->busy_map || !rpc->smq) {
		ret = -ENOMEM;
		goto out_free;
	}
	urpc__sm_queue_init(rpc->smq);
	ret = urpc__cc_rpc_init(rpc, o);
	if (ret)
		goto out_free;

	urpc__tp_cfg_init(&cfg, o->transport);
	cfg.host = urpc__nexus_host(nx);
	cfg.seed = seed;
	cfg.rx_reclaim = true; /* the event loop is done with a burst before the next */
	cfg.device = o->device;
	cfg.near_pci = o->near_pci;
	if (!cfg.near_pci && o->cuda_device >= 0 &&
	    (o->transport == URPC_TRANSPORT_DEFAULT || o->transport == URPC_TRANSPORT_VERBS)) {
		ret = urpc__cuda_load();
		if (!ret)
			ret = urpc__cuda_pci_bus_id(o->cuda_device, gpu_pci, sizeof(gpu_pci));
		if (ret) {
			URPC_ERR(rpc_id, "cannot place the RDMA port near CUDA device %d: %s",
				 o->cuda_device,
				 urpc__cuda_is_loaded() ? urpc_strerror(ret) : urpc__cuda_why());
			ret = -EINVAL;
			goto out_free;
		}
		cfg.near_pci = gpu_pci;
	}
	cfg.numa_node = o->numa_node;
	cfg.id = rpc_id;
	cfg.one_sided_timeout_ms = o->one_sided_timeout_ms ? o->one_sided_timeout_ms
							   : URPC_OS_TIMEOUT_MIN_NS / 1000000;
	ret = urpc__tp_create(&cfg, &rpc->tp);
	if (ret)
		goto out_free;
	if (rpc->tp->mtu <= sizeof(struct urpc_pkthdr)) {
		ret = -EINVAL;
		goto out_tp;
	}
	rpc->max_msg = rpc->tp->mtu - (uint32_t)sizeof(struct urpc_pkthdr);
	rpc->cc_share.pkt_bytes = rpc->tp->mtu; /* the fair share's epoch (cc_sess.c) */
	rpc->tx_now = (rpc->tp->caps & URPC_TP_CAP_TX_NOW) ? rpc->tp->ops->tx_now : NULL;
	rpc->rx_reclaim = (rpc->tp->caps & URPC_TP_CAP_RX_RECLAIM) != 0;
	rpc->rx_run = (rpc->tp->caps & URPC_TP_CAP_RX_RUN) ? rpc->tp->ops->rx_run : NULL;
	/* The Rpc's to keep (and to derive, urpc__session_rtt_sample()): every transport. */
	rpc->tp->one_sided_timeout_ns = (uint64_t)cfg.one_sided_timeout_ms * 1000000;
	for (i = 0; i < URPC_OS_OPS; i++)
		rpc->os[i].next_free = (uint16_t)(i + 1 < URPC_OS_OPS ? i + 1 : URPC_OS_NIL);
	rpc->os_free = 0;

	/* Idle blocking needs a transport that can wait (loop cannot). */
	if (o->idle_block_us && (rpc->tp->caps & URPC_TP_CAP_WAIT)) {
		rpc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (rpc->wake_fd < 0) {
			ret = -errno;
			URPC_ERR(rpc_id, "cannot create the idle wake-up eventfd: %s",
				 urpc_strerror(ret));
			goto out_tp;
		}
		rpc->idle_ns = (uint64_t)o->idle_block_us * 1000;
		urpc__sm_queue_set_wake_fd(rpc->smq, rpc->wake_fd);
	}

	urpc__pool_opts_init(&rpc->pool_opts);
	rpc->pool_opts.headroom = URPC_ALIGN_UP(sizeof(struct urpc_pkthdr), 64);
	/* Large-message buffers are reused rather than mapped and registered anew. */
	rpc->pool_opts.keep_bytes = (size_t)128 << 20;
	rpc->pool_opts.reg = urpc__tp_pool_reg;
	rpc->pool_opts.dereg = urpc__tp_pool_dereg;
	rpc->pool_opts.reg_ctx = rpc->tp;
	ret = urpc__pool_create(&rpc->pool_opts, &rpc->pool);
	if (ret)
		goto out_close_wake;
	{
		struct urpc_regcache_opts ro;

		urpc__regcache_opts_init(&ro);
		ro.reg = urpc__tp_regcache_reg;
		ro.dereg = urpc__tp_regcache_dereg;
		ro.ctx = rpc->tp;
		ro.align = 1; /* exactly the application's bytes, never its neighbours */
		if (o->max_registrations)
			ro.max_entries = o->max_registrations;
		ret = urpc__regcache_create(&ro, &rpc->regcache);
		if (ret)
			goto out_pool;
	}

	ret = urpc__nexus_attach_rpc(nx, rpc_id, rpc->smq);
	if (ret) {
		URPC_ERR(rpc_id, "Rpc id %u is already in use on this Nexus", rpc_id);
		goto out_regcache;
	}
	rpc->handlers = urpc__nexus_handlers(nx);
	rpc->nx_notices_seen = urpc__nexus_notices(nx);
	urpc__tsc_init(&rpc->tsc, true);
	rpc->now = urpc__rpc_clock(rpc);
	*out = rpc;
	return 0;

out_regcache:
	urpc__regcache_destroy(rpc->regcache);
out_pool:
	urpc__pool_destroy(rpc->pool);
out_close_wake:
	if (rpc->wake_fd >= 0)
		close(rpc->wake_fd);
out_tp:
	rpc->tp->ops->destroy(rpc->tp);
out_free:
	urpc__cc_rpc_fini(rpc);
	free(rpc->smq);
	urpc__sess_table_fini(rpc);
	urpc__src_fini(rpc);
	free(rpc->busy_map);
	free(rpc);
	return ret;
}

URPC_API int urpc_rpc_destroy(struct urpc_rpc *rpc)
{
	struct urpc_pool_stats ps;
	size_t held, held_views;
	uint32_t i;
	int ret;

	if (!rpc)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	if (rpc->in_cb || rpc->in_loop) /* inside a callback */
		return -EBUSY;
	/*
	 * Buffers the application holds must be freed first; buffers lent to
	 * pending requests come back through their continuations below.
	 */
	urpc__pool_get_stats(rpc->pool, &ps);
	urpc__mb_held(rpc, &held, &held_views);
	if (ps.bufs_out > held) {
		URPC_ERR(rpc->id, "%zu message buffers are still allocated: free them first",
			 ps.bufs_out - held);
		return -EBUSY;
	}
	if (rpc->views > held_views) {
		URPC_ERR(rpc->id, "%zu registered views are still held: unregister them first",
			 rpc->views - held_views);
		return -EBUSY;
	}

	rpc->now = urpc__rpc_clock(rpc);
	for (i = 0; i < rpc->hi_session; i++) {
		struct urpc_session *s = urpc__sess_at(rpc, i);

		if (s)
			urpc__session_transition(rpc, s, URPC_SEV_RPC_DESTROY, -ECONNRESET);
	}
	/* Their DISCONNECT_REQs and RESETs, and what calls since the last pass queued. */
	urpc__sm_out_flush(rpc);
	/* Continuations may have allocated; they may not have destroyed us (in_cb). */
	for (i = 0; i < rpc->hi_session; i++)
		if (urpc__sess_at(rpc, i))
			urpc__sess_free(rpc, rpc->sessions[i]);
	/* Their peers released, the transport completes what they had in flight. */
	urpc__os_drain(rpc);
	/* Large responses still retiring: their peers are released, nothing waits. */
	urpc__srv_large_retiring(rpc, true);
	urpc__cli_retiring(rpc, true); /* their continuations run here */
	/* Exposures: revoked, their registrations back to the cache (destroyed below). */
	urpc__rmem_fini(rpc);
	urpc__tx_flush(rpc);
	rpc->tp->ops->tx_flush(rpc->tp);

	urpc__nexus_detach_rpc(rpc->nx, rpc->id);
	/* The SM thread signals it only while the queue is attached. */
	if (rpc->wake_fd >= 0)
		close(rpc->wake_fd);
	urpc__pool_get_stats(rpc->pool, &ps);
	if (ps.bufs_out)
		URPC_WARN(rpc->id,
			  "%zu message buffers were not freed by their continuations; "
			  "they are released with the Rpc",
			  ps.bufs_out);
	urpc__pool_destroy_all(rpc->pool);
	if (rpc->views)
		URPC_WARN(rpc->id,
			  "%u registered views were not unregistered by their continuations; "
			  "they are released with the Rpc",
			  rpc->views);
	urpc__regcache_destroy_all(rpc->regcache);
	ret = rpc->tp->ops->destroy(rpc->tp);
	if (ret)
		URPC_ERR(rpc->id, "transport destroy failed: %s", urpc_strerror(ret));
	free(rpc->smq);
	urpc__sess_table_fini(rpc);
	urpc__src_fini(rpc);
	urpc__cc_rpc_fini(rpc);
	free(rpc->busy_map);
	free(rpc);
	return 0;
}

URPC_API uint8_t urpc_rpc_id(const struct urpc_rpc *rpc)
{
	return rpc ? rpc->id : 0;
}

URPC_API void *urpc_rpc_ctx(const struct urpc_rpc *rpc)
{
	return rpc ? rpc->o.ctx : NULL;
}

URPC_API size_t urpc_rpc_max_msg_size(const struct urpc_rpc *rpc)
{
	return rpc ? rpc->max_msg : 0;
}

URPC_API int urpc_rpc_get_stats(struct urpc_rpc *rpc, struct urpc_rpc_stats *st)
{
	if (!rpc || !st)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	*st = rpc->st;
	/*
	 * A transport that sends each datagram at once counts them itself
	 * (urpc__tx_put(): one counter per datagram, not two); the engine
	 * hands it nothing it refuses (no peer, longer than the MTU).
	 */
	if (rpc->tx_now)
		st->pkts_tx += rpc->tp->stats.tx_pkts;
	st->tp_sys_tx = rpc->tp->stats.sys_tx;
	st->os_progress = rpc->tp->stats.os_progress;
	st->tp_sys_rx = rpc->tp->stats.sys_rx;
	st->tp_sys_rx_empty = rpc->tp->stats.sys_rx_empty;
	st->os_refused = rpc->tp->stats.os_rejected;
	st->os_dropped = rpc->tp->stats.os_dropped;
	return 0;
}

/* urpc__rpc_clock() without the TSC clock (engine.h). */
__attribute__((noinline)) uint64_t urpc__rpc_clock_slow(const struct urpc_rpc *rpc)
{
	if (unlikely(rpc->clock != NULL))
		return rpc->clock(rpc->clock_arg);
	return urpc__now_ns();
}

/* ---- test hooks ---- */

void urpc__rpc_set_clock(struct urpc_rpc *rpc, urpc_clock_fn fn, void *arg)
{
	rpc->clock = fn;
	rpc->clock_arg = arg;
	urpc__tsc_init(&rpc->tsc, fn == NULL);
	rpc->now = urpc__rpc_clock(rpc);
	rpc->next_scan_ns = 0;
}

struct urpc_tp *urpc__rpc_transport(struct urpc_rpc *rpc)
{
	return rpc->tp;
}

bool urpc__rpc_is_sleeping(const struct urpc_rpc *rpc)
{
	return urpc__sm_queue_is_sleeping(rpc->smq);
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

uint64_t urpc__rpc_grants(const struct urpc_rpc *rpc)
{
	const struct urpc_cli_retiring *r;
	const struct urpc_srv_large *l;
	uint64_t n = 0;
	unsigned i, j;

	for (l = rpc->retiring; l; l = l->next) /* large responses their client still holds */
		n += l->grant.key != 0;
	for (r = rpc->cli_retiring; r; r = r->next) /* large requests their server still holds */
		n += r->grant.key != 0;
	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = urpc__sess_at(rpc, i);

		for (j = 0; s && j <= s->slot_mask; j++)
			n += s->role == URPC_ROLE_CLIENT
				     ? s->cli.slots[j].grant.key != 0
				     : s->srv.slots[j].large != NULL &&
					       s->srv.slots[j].large->grant.key != 0;
	}
	return n + urpc__rmem_grants(rpc); /* users' exposures */
}

/* urpc__rpc_check() of client session @s (number @i); adds what it owes to *@owed. */
static int check_client(const struct urpc_rpc *rpc, const struct urpc_session *s, uint32_t i,
			uint64_t *owed, uint64_t *grants, char *why, size_t n)
{
	const struct urpc_cli_half *c = &s->cli;
	unsigned j, busy = 0;

	for (j = 0; j <= s->slot_mask; j++) {
		const struct urpc_cslot *sl = &c->slots[j];
		bool free_bit = (c->free_mask >> j) & 1;

		busy += sl->state != URPC_CLI_FREE;
		if ((sl->state == URPC_CLI_FREE) != free_bit) {
			snprintf(why, n, "session %u slot %u: %s but free bit %d", i, j,
				 urpc__cli_state_str(sl->state), free_bit);
			return -EFAULT;
		}
		if (sl->grant.key && !(sl->state != URPC_CLI_FREE && sl->large_req)) {
			snprintf(why, n, "session %u slot %u: %s but its grant to the server lives",
				 i, j, urpc__cli_state_str(sl->state));
			return -EFAULT;
		}
		*grants += sl->grant.key != 0;
		if ((sl->state == URPC_CLI_ACKED && !sl->large_req) ||
		    (sl->late_status && sl->state != URPC_CLI_FREE &&
		     !(sl->state == URPC_CLI_SENT && sl->large_req) &&
		     sl->state != URPC_CLI_READING)) {
			snprintf(why, n, "session %u slot %u: %s with large %d, late status %d", i,
				 j, urpc__cli_state_str(sl->state), sl->large_req, sl->late_status);
			return -EFAULT;
		}
	}
	if (c->wq_tail - c->wq_head > URPC_SESSION_WAITQ) {
		snprintf(why, n, "session %u: wait queue holds %u of %u", i,
			 c->wq_tail - c->wq_head, URPC_SESSION_WAITQ);
		return -EFAULT;
	}
	if ((c->free_mask & ~c->all_free) ||
	    c->all_free != (s->slot_mask >= 63 ? UINT64_MAX : (2ull << s->slot_mask) - 1)) {
		snprintf(why, n, "session %u: free mask 0x%llx or all-free 0x%llx beyond window %u",
			 i, (unsigned long long)c->free_mask, (unsigned long long)c->all_free,
			 urpc__sess_window(s));
		return -EFAULT;
	}
	if (urpc__cli_busy(s) && !(rpc->busy_map[i >> 6] & (1ull << (i & 63)))) {
		snprintf(why, n, "client session %u has requests but no busy bit", i);
		return -EFAULT;
	}
	*owed += busy + (c->wq_tail - c->wq_head);
	return 0;
}

/* urpc__rpc_check() of server session @s (number @i); adds its live grants to *@grants. */
static int check_server(const struct urpc_session *s, uint32_t i, uint64_t *grants, char *why,
			size_t n)
{
	unsigned j, deferred = 0;

	for (j = 0; j <= s->slot_mask; j++) {
		const struct urpc_sslot *sl = &s->srv.slots[j];

		/* A handler that is running (priv_answer set) is not counted yet. */
		deferred += sl->state == URPC_SRV_IN_HANDLER && !sl->h.priv_answer;
		/*
		 * A large response is stored only once answered, and granted to
		 * the client exactly while it is stored.
		 */
		if (sl->large && (sl->state != URPC_SRV_RESPONDED || !sl->large->grant.key)) {
			snprintf(why, n, "server session %u slot %u: %s, large response, grant %d",
				 i, j, urpc__srv_state_str(sl->state), sl->large->grant.key != 0);
			return -EFAULT;
		}
		*grants += sl->large != NULL;
	}
	if (deferred != s->srv.deferred) {
		snprintf(why, n, "server session %u: %u slots in handler, deferred says %u", i,
			 deferred, s->srv.deferred);
		return -EFAULT;
	}
	return 0;
}

/*
 * The engine's own bookkeeping, checked against itself (tests/sim after
 * every step): slot masks against slot states, the busy bitmap, deferred
 * counts against server slots, the one-sided table against its free list,
 * the session count, grants (live exactly while a slot needs them). Writes the first inconsistency to @why and returns
 * -EFAULT; else 0 with *@pending_conts set to the continuations the engine
 * still owes (requests in slots or queues, orphaned reads). Cold.
 */
int urpc__rpc_check(const struct urpc_rpc *rpc, uint64_t *pending_conts, char *why, size_t n)
{
	uint64_t owed = 0, open = 0, grants = 0, deferred = 0;
	const struct urpc_cli_retiring *r;
	unsigned i, busy_os = 0, nfree = 0;
	uint32_t batches;
	uint16_t f;
	int ret;

	if (rpc->bad_transitions) {
		snprintf(why, n, "%llu illegal slot transitions",
			 (unsigned long long)rpc->bad_transitions);
		return -EFAULT;
	}
	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = urpc__sess_at(rpc, i);

		if (!s)
			continue;
		open++;
		if (s->local_num != i) {
			snprintf(why, n, "session %u says it is number %u", i, s->local_num);
			return -EFAULT;
		}
		ret = s->role == URPC_ROLE_CLIENT ? check_client(rpc, s, i, &owed, &grants, why, n)
						  : check_server(s, i, &grants, why, n);
		if (ret)
			return ret;
		if (s->role == URPC_ROLE_SERVER)
			deferred += s->srv.deferred;
		if (urpc__session_next_timer(rpc, s) != UINT64_MAX &&
		    !(rpc->sm_map[i >> 6] & (1ull << (i & 63)))) {
			snprintf(why, n, "session %u has a session-management timer but no bit", i);
			return -EFAULT;
		}
	}
	if (deferred != rpc->srv_deferred) {
		snprintf(why, n, "%llu server slots in handlers, the Rpc's count says %llu",
			 (unsigned long long)deferred, (unsigned long long)rpc->srv_deferred);
		return -EFAULT;
	}
	for (r = rpc->cli_retiring; r; r = r->next) { /* answered, the server not done yet */
		owed++;
		grants += r->grant.key != 0;
	}
	/* At most: a test may hold grants of its own on the same endpoint. */
	if (grants > rpc->tp->stats.grants_live) {
		snprintf(why, n, "%llu grants in slots, the transport holds %llu",
			 (unsigned long long)grants,
			 (unsigned long long)rpc->tp->stats.grants_live);
		return -EFAULT;
	}
	if (open != rpc->st.sessions) {
		snprintf(why, n, "%llu sessions in the table, the counter says %llu",
			 (unsigned long long)open, (unsigned long long)rpc->st.sessions);
		return -EFAULT;
	}
	for (i = 0; i < URPC_OS_OPS; i++) {
		const struct urpc_os_op *op = &rpc->os[i];

		busy_os += op->busy;
		if (op->busy && op->orphan && op->kind == URPC_OS_CLI_RESP && op->cont)
			owed++;
	}
	for (f = rpc->os_free; f != URPC_OS_NIL && nfree <= URPC_OS_OPS; f = rpc->os[f].next_free) {
		if (f >= URPC_OS_OPS || rpc->os[f].busy) {
			snprintf(why, n, "one-sided free list holds %s entry %u",
				 f >= URPC_OS_OPS ? "out-of-range" : "busy", f);
			return -EFAULT;
		}
		nfree++;
	}
	/* The users' batches (rop.c) count in os_busy, and each owes its continuation. */
	ret = urpc__rop_check(rpc, &batches, why, n);
	if (ret)
		return ret;
	owed += batches;
	if (busy_os + batches != rpc->os_busy || nfree != URPC_OS_OPS - busy_os) {
		snprintf(why, n, "one-sided table: %u busy, counter %u, %u on the free list",
			 busy_os, rpc->os_busy, nfree);
		return -EFAULT;
	}
	*pending_conts = owed;
	return 0;
}
