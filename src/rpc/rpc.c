/* SPDX-License-Identifier: MIT */
/*
 * The Rpc object: creation and teardown, message buffers, the event loop and
 * the TX batch. Sessions live in session.c, the datapath in datapath.c.
 */
#define _GNU_SOURCE /* ppoll */
#define URPC_LOG_MODULE "rpc"
#include "rpc.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../mem/cuda.h"
#include "../util/log.h"

#define SCAN_INTERVAL_NS 1000000ull /* timers are looked at once a millisecond */
#define SCAN_ALL 256u		    /* session timers: all of them while no more */
#define SCAN_SLICES 16u		    /* ... else this many scans cover them all */
/*
 * Longest idle sleep, whatever the timers say: a backstop, so that a timer
 * idle_wake_time() does not know about is late by a second at most.
 */
#define IDLE_MAX_SLEEP_NS 1000000000ull

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
	o->max_sessions = 1024;
	o->numa_node = -1;
	o->cuda_device = -1;
	o->idle_block_us = 100;
}

static uint64_t default_clock(void *arg)
{
	return urpc__now_ns();
}

/*
 * The derived one-sided timeout (opts.one_sided_timeout_ms 0): 16 RTOs of
 * the session-management round trip (RTO = srtt + 4 rttvar), within
 * [OS_TIMEOUT_MIN_NS, OS_TIMEOUT_MAX_NS]; OS_TIMEOUT_MIN_NS before the
 * first sample. A READ waits on the peer's event loop as a heartbeat does,
 * so a loaded peer that answers heartbeats late gets more time.
 */
#define OS_TIMEOUT_MIN_NS 1000000000ull
#define OS_TIMEOUT_MAX_NS 60000000000ull
#define OS_TIMEOUT_RTOS 16

void urpc__rpc_sm_rtt_sample(struct urpc_rpc *rpc, uint64_t rtt_ns)
{
	uint64_t rto, t, d;

	if (!rpc->sm_srtt_ns) {
		rpc->sm_srtt_ns = rtt_ns;
		rpc->sm_rttvar_ns = rtt_ns / 2;
	} else {
		d = rtt_ns > rpc->sm_srtt_ns ? rtt_ns - rpc->sm_srtt_ns : rpc->sm_srtt_ns - rtt_ns;
		rpc->sm_rttvar_ns = rpc->sm_rttvar_ns - rpc->sm_rttvar_ns / 4 + d / 4;
		rpc->sm_srtt_ns = rpc->sm_srtt_ns - rpc->sm_srtt_ns / 8 + rtt_ns / 8;
	}
	if (rpc->o.one_sided_timeout_ms)
		return;
	rto = rpc->sm_srtt_ns + 4 * rpc->sm_rttvar_ns;
	t = rto > OS_TIMEOUT_MAX_NS / OS_TIMEOUT_RTOS ? OS_TIMEOUT_MAX_NS : rto * OS_TIMEOUT_RTOS;
	rpc->tp->one_sided_timeout_ns = URPC_MAX(t, OS_TIMEOUT_MIN_NS);
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
	urpc__rand_seed(&rpc->rng, seed);
	rpc->max_sessions = o->max_sessions;
	rpc->sessions = calloc(o->max_sessions, sizeof(*rpc->sessions));
	rpc->busy_map = calloc((o->max_sessions + 63) / 64, sizeof(*rpc->busy_map));
	rpc->smq = aligned_alloc(URPC_CACHELINE, URPC_ALIGN_UP(sizeof(*rpc->smq), URPC_CACHELINE));
	if (!rpc->sessions || !rpc->busy_map || !rpc->smq) {
		ret = -ENOMEM;
		goto out_free;
	}
	urpc__sm_queue_init(rpc->smq);

	urpc__tp_cfg_init(&cfg, o->transport);
	cfg.host = urpc__nexus_host(nx);
	cfg.seed = seed;
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
	cfg.one_sided_timeout_ms =
		o->one_sided_timeout_ms ? o->one_sided_timeout_ms : OS_TIMEOUT_MIN_NS / 1000000;
	ret = urpc__tp_create(&cfg, &rpc->tp);
	if (ret)
		goto out_free;
	if (rpc->tp->mtu <= sizeof(struct urpc_pkthdr)) {
		ret = -EINVAL;
		goto out_tp;
	}
	rpc->max_msg = rpc->tp->mtu - (uint32_t)sizeof(struct urpc_pkthdr);
	/* The Rpc's to keep (and to derive, urpc__rpc_sm_rtt_sample()): every transport. */
	rpc->tp->one_sided_timeout_ns = (uint64_t)cfg.one_sided_timeout_ms * 1000000;
	for (i = 0; i < URPC_OS_OPS; i++)
		rpc->os[i].next_free = (uint16_t)(i + 1 < URPC_OS_OPS ? i + 1 : URPC_OS_NIL);
	rpc->os_free = 0;

	/* Idle blocking needs a transport that can wait (loop cannot). */
	if (o->idle_block_us && rpc->tp->ops->wait_arm && rpc->tp->ops->wait_ack) {
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
	rpc->now = rpc->clock(rpc->clock_arg);
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
	free(rpc->smq);
	free(rpc->sessions);
	free(rpc->busy_map);
	free(rpc);
	return ret;
}

/* Buffers of the application lent to pending client requests: views in *views. */
static size_t lent_bufs(const struct urpc_rpc *rpc, size_t *views)
{
	size_t n = 0;
	uint32_t i, j;

	*views = 0;
	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = rpc->sessions[i];

		if (!s || s->role != URPC_ROLE_CLIENT)
			continue;
		for (j = 0; j < URPC_SESSION_SLOTS + URPC_SESSION_WAITQ; j++) {
			const struct urpc_msgbuf *req, *resp;

			if (j < URPC_SESSION_SLOTS) {
				if (!s->slots[j].busy)
					continue;
				req = s->slots[j].req;
				resp = s->slots[j].resp;
			} else {
				uint32_t k = s->wq_head + (j - URPC_SESSION_SLOTS);

				if (k - s->wq_head >= s->wq_tail - s->wq_head)
					continue;
				req = s->waitq[k % URPC_SESSION_WAITQ].req;
				resp = s->waitq[k % URPC_SESSION_WAITQ].resp;
			}
			if (urpc__mb_is_view(req))
				++*views;
			else
				n++;
			if (resp == req)
				continue;
			if (urpc__mb_is_view(resp))
				++*views;
			else
				n++;
		}
	}
	return n;
}

/* Views the library holds as large stored responses of server slots. */
static size_t server_views(const struct urpc_rpc *rpc)
{
	size_t n = 0;
	uint32_t i, j;

	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = rpc->sessions[i];

		if (!s || s->role != URPC_ROLE_SERVER)
			continue;
		for (j = 0; j < URPC_SESSION_SLOTS; j++)
			n += s->slots[j].large_resp.buf &&
			     urpc__mb_is_view(&s->slots[j].large_resp);
	}
	return n;
}

URPC_API int urpc_rpc_destroy(struct urpc_rpc *rpc)
{
	struct urpc_pool_stats ps;
	size_t owned, views;
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
	owned = ps.bufs_out - rpc->internal_bufs - lent_bufs(rpc, &views) - rpc->os_lent;
	if (owned) {
		URPC_ERR(rpc->id, "%zu message buffers are still allocated: free them first",
			 owned);
		return -EBUSY;
	}
	views = rpc->views - views - rpc->os_lent_views - server_views(rpc);
	if (views) {
		URPC_ERR(rpc->id, "%zu registered views are still held: unregister them first",
			 views);
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
	/* Their peers released, the transport completes what they had in flight. */
	urpc__dp_drain_os(rpc);
	urpc__rpc_tx_flush(rpc);
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
	free(rpc->sessions);
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
	return 0;
}

/* ---- message buffers ---- */

URPC_API int urpc_msgbuf_alloc(struct urpc_rpc *rpc, size_t size, struct urpc_msgbuf *mb)
{
	int ret;

	if (unlikely(!rpc || !mb))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (likely(size))
		return urpc__pool_alloc(rpc->pool, size, mb);
	/* An empty message: the smallest buffer, holding nothing yet. */
	ret = urpc__pool_alloc(rpc->pool, 1, mb);
	if (!ret)
		mb->data_size = 0;
	return ret;
}

URPC_API int urpc_msgbuf_resize(struct urpc_msgbuf *mb, size_t size)
{
	if (unlikely(!mb))
		return -EINVAL;
	return urpc__pool_resize(mb, size);
}

/* Do @a (the engine's pointer, may be NULL) and @b describe the same buffer? */
static inline bool mb_same(const struct urpc_msgbuf *a, const struct urpc_msgbuf *b)
{
	return a && (a == b || a->buf == b->buf);
}

bool urpc__rpc_mb_is_lent(const struct urpc_rpc *rpc, const struct urpc_msgbuf *mb)
{
	const struct urpc_session *s;
	uint32_t i;

	if (mb->priv_sess == URPC_MB_SESS_LIBRARY)
		return true;
	/* The session it was last lent to (a number beyond the table names none). */
	s = mb->priv_sess < rpc->hi_session ? rpc->sessions[mb->priv_sess] : NULL;
	if (s && s->role == URPC_ROLE_CLIENT) {
		for (i = 0; i < URPC_SESSION_SLOTS; i++) {
			const struct urpc_sslot *sl = &s->slots[i];

			if (sl->busy && (mb_same(sl->req, mb) || mb_same(sl->resp, mb)))
				return true;
		}
		for (i = s->wq_head; i != s->wq_tail; i++) {
			const struct urpc_waiting_req *w = &s->waitq[i % URPC_SESSION_WAITQ];

			if (mb_same(w->req, mb) || mb_same(w->resp, mb))
				return true;
		}
	}
	/* Continuations of failed sessions still waiting for their READ. */
	if (rpc->os_lent || rpc->os_lent_views) {
		for (i = 0; i < URPC_OS_OPS; i++) {
			const struct urpc_os_op *op = &rpc->os[i];

			if (op->busy && op->orphan && op->kind == URPC_OS_CLI_RESP &&
			    (mb_same(op->req, mb) || mb_same(op->resp, mb)))
				return true;
		}
	}
	return false;
}

URPC_API int urpc_msgbuf_free(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
{
	if (unlikely(!rpc || !mb))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (!mb->buf || urpc__mb_is_view(mb))
		return -EINVAL;
	if (urpc__rpc_mb_is_lent(rpc, mb))
		return -EBUSY;
	/* A double free or a stale copy: refused, the pool untouched. */
	return urpc__pool_free(rpc->pool, mb);
}

static void gpu_view_free(struct urpc_rpc *rpc, struct urpc_gpu_view *g)
{
	rpc->tp->ops->dereg_mem(rpc->tp, &g->mr);
	urpc__cuda_host_free(g->host);
	free(g);
}

/*
 * A view of device memory: dma-buf where the transport and the driver can
 * (the NIC moves the bytes to and from the GPU), else a pinned staging copy
 * (logged once). Not the datapath.
 */
static int gpu_view_new(struct urpc_rpc *rpc, void *dev, size_t len, unsigned access,
			struct urpc_gpu_view **out)
{
	static atomic_flag logged = ATOMIC_FLAG_INIT;
	struct urpc_gpu_view *g = calloc(1, sizeof(*g));
	uint64_t off;
	int fd, ret = -ENOTSUP;

	if (!g)
		return -ENOMEM;
	g->dev = dev;
	g->len = len;
	if (rpc->tp->ops->reg_dmabuf) {
		ret = urpc__cuda_dmabuf_fd(dev, len, &fd, &off);
		if (!ret) {
			ret = rpc->tp->ops->reg_dmabuf(rpc->tp, fd, off, len,
						       (uint64_t)(uintptr_t)dev, access, &g->mr);
			close(fd);
			if (ret && !atomic_flag_test_and_set(&logged))
				URPC_WARN(rpc->id,
					  "registering GPU memory through dma-buf failed (%s): "
					  "staging through pinned host memory",
					  urpc_strerror(ret));
		}
	}
	if (ret) {
		/* Staging: the transport sees a pinned host copy. */
		ret = urpc__cuda_host_alloc(len, &g->host);
		if (!ret) {
			ret = rpc->tp->ops->reg_mem(rpc->tp, g->host, len, access, &g->mr);
			if (ret)
				urpc__cuda_host_free(g->host);
		}
	}
	if (ret) {
		free(g);
		return ret;
	}
	*out = g;
	return 0;
}

/* Describe a view in @mb; @tagged is its backing with its URPC_MB_* bit. */
static void view_fill(struct urpc_rpc *rpc, struct urpc_msgbuf *mb, void *addr, size_t len,
		      uintptr_t tagged, uint32_t lkey, uint32_t rkey)
{
	memset(mb, 0, sizeof(*mb));
	mb->buf = addr;
	mb->data_size = len;
	mb->max_data_size = len;
	mb->priv_class = (void *)tagged;
	mb->priv_lkey = lkey;
	mb->priv_rkey = rkey;
	rpc->views++;
}

URPC_API int urpc_msgbuf_register(struct urpc_rpc *rpc, void *addr, size_t len, unsigned flags,
				  struct urpc_msgbuf *mb)
{
	unsigned access = (flags & URPC_MEM_PEER_READS) ? URPC_TP_ACCESS_REMOTE_READ : 0;
	struct urpc_regcache_ent *ent;
	struct urpc_gpu_view *g;
	int ret;

	if (unlikely(!rpc || !addr || !mb))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (!len || len > URPC_MAX_MSG_SIZE || (flags & ~URPC_MEM_PEER_READS))
		return -EINVAL;
	if (urpc__cuda_load() == 0 && urpc__cuda_is_device_ptr(addr)) {
		ret = gpu_view_new(rpc, addr, len, access, &g);
		if (ret)
			return ret;
		view_fill(rpc, mb, addr, len, (uintptr_t)g | URPC_MB_GPU_VIEW, g->mr.lkey,
			  g->mr.rkey);
		return 0;
	}
	ret = urpc__regcache_get(rpc->regcache, addr, len, access, &ent);
	if (ret)
		return ret;
	view_fill(rpc, mb, addr, len, (uintptr_t)ent | URPC_MB_HOST_VIEW, ent->reg.lkey,
		  ent->reg.rkey);
	return 0;
}

URPC_API int urpc_msgbuf_unregister(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
{
	if (unlikely(!rpc || !mb))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (!mb->buf || !urpc__mb_is_view(mb))
		return -EINVAL;
	if (urpc__rpc_mb_is_lent(rpc, mb))
		return -EBUSY;
	urpc__rpc_buf_release(rpc, mb);
	return 0;
}

URPC_API int urpc_mem_forget(struct urpc_rpc *rpc, void *addr, size_t len)
{
	if (unlikely(!rpc || !addr))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	return urpc__regcache_invalidate(rpc->regcache, addr, len);
}

void urpc__rpc_buf_release(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
{
	if (urpc__mb_gpu(mb)) {
		gpu_view_free(rpc, urpc__mb_gpu(mb));
		memset(mb, 0, sizeof(*mb));
		rpc->views--;
	} else if (urpc__mb_is_view(mb)) {
		urpc__regcache_put(rpc->regcache, urpc__mb_view_ent(mb));
		memset(mb, 0, sizeof(*mb));
		rpc->views--;
	} else {
		urpc__pool_free(rpc->pool, mb);
		rpc->internal_bufs--;
	}
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
	uint32_t w, nw = (rpc->hi_session + 63) / 64, k, n;

	/*
	 * Requests in flight (retransmission, deadlines): every scan, but only
	 * on the client sessions that have some (busy_map), so an Rpc with
	 * thousands of idle sessions does not walk them all each millisecond.
	 */
	for (w = 0; w < nw; w++) {
		uint64_t bits = rpc->busy_map[w];

		while (bits) {
			uint32_t num = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct urpc_session *s = rpc->sessions[num];

			bits &= bits - 1;
			if (s && s->role == URPC_ROLE_CLIENT &&
			    (s->state == URPC_SESS_CONNECTED || s->state == URPC_SESS_CONNECTING))
				urpc__dp_timers(rpc, s);
			s = rpc->sessions[num]; /* callbacks may have freed it */
			if (!s || !urpc__dp_session_busy(s))
				rpc->busy_map[w] &= ~(1ull << (num & 63));
		}
	}
	/*
	 * Session management (heartbeats, peer time-outs, connect and
	 * disconnect retries): every session each scan while there are few;
	 * beyond SCAN_ALL a slice, so each is seen every SCAN_SLICES scans
	 * (16 ms), far below any heartbeat interval worth having.
	 */
	n = rpc->hi_session;
	if (n > SCAN_ALL)
		n = URPC_MAX(SCAN_ALL, (n + SCAN_SLICES - 1) / SCAN_SLICES);
	for (k = 0; k < n && rpc->hi_session; k++) {
		struct urpc_session *s;

		if (rpc->scan_cursor >= rpc->hi_session)
			rpc->scan_cursor = 0;
		s = rpc->sessions[rpc->scan_cursor++];
		if (s)
			urpc__session_timers(rpc, s);
	}
}

/*
 * One pass. Returns how much it did (SM packets, datagrams received, pending
 * events raised, a TX batch sent): 0 means an idle pass. Owner thread only.
 */
static unsigned loop_once(struct urpc_rpc *rpc)
{
	struct urpc_tp_rx rx[URPC_RX_BATCH];
	struct urpc_sm_pkt pkt;
	unsigned work = 0;
	int n, i;

	rpc->now = rpc->clock(rpc->clock_arg);
	rpc->in_loop = true;

	while (urpc__sm_queue_pop(rpc->smq, &pkt)) {
		rpc->st.sm_pkts_rx++;
		work++;
		urpc__session_handle_sm(rpc, &pkt);
	}

	n = rpc->tp->ops->rx_burst(rpc->tp, rx, URPC_RX_BATCH);
	if (n > 0) {
		rpc->st.pkts_rx += (uint64_t)n;
		work += (unsigned)n;
		for (i = 0; i < n; i++)
			urpc__dp_rx(rpc, rx[i].buf, rx[i].len);
		rpc->tp->ops->rx_release(rpc->tp, rx, (unsigned)n);
	}
	if (unlikely(rpc->tp->ctl_pending))
		urpc__session_tp_ctl(rpc);
	if (unlikely(rpc->os_busy)) {
		work++; /* polling is the work: never sleep with operations in flight */
		urpc__dp_poll_os(rpc);
	}

	if (unlikely(rpc->now >= rpc->next_scan_ns)) {
		rpc->next_scan_ns = rpc->now + SCAN_INTERVAL_NS;
		scan_timers(rpc);
	}
	if (unlikely(rpc->have_pending)) {
		work++;
		urpc__session_run_pending(rpc);
	}
	if (rpc->ntx) {
		work++;
		urpc__rpc_tx_flush(rpc);
	}
	rpc->in_loop = false;
	return work;
}

URPC_API int urpc_rpc_run_event_loop_once(struct urpc_rpc *rpc)
{
	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb))
		return -EPERM;
	loop_once(rpc);
	return 0;
}

/* ---- idle waiting ---- */

/*
 * May the Rpc sleep, and until when? False while something needs polling
 * rather than a timer: a client request in a slot or waiting for one (its
 * response, retransmission and deadline), a server slot whose handler has
 * not answered yet (a deferred response comes from this thread), an SM
 * event to raise, datagrams the transport has not taken. Otherwise true,
 * with *wake_ns (Rpc clock) the earliest timer urpc__session_timers() has:
 * SM retries and deadlines, pings, peer timeouts; never before the next
 * timer scan, which is when a due timer is acted on. With no session it is
 * UINT64_MAX: only traffic or the caller's end wakes the Rpc.
 * Must stay in step with urpc__session_timers() and urpc__dp_timers().
 * Cold path: runs only once the loop has been idle for idle_ns.
 * Owner thread only.
 */
static bool idle_wake_time(const struct urpc_rpc *rpc, uint64_t *wake_ns)
{
	const uint32_t all_free = (1u << URPC_SESSION_SLOTS) - 1;
	uint64_t t = UINT64_MAX;
	uint32_t i;

	if (rpc->have_pending || rpc->ntx || rpc->os_busy)
		return false;
	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = rpc->sessions[i];

		if (!s)
			continue;
		if (s->role == URPC_ROLE_SERVER) {
			if (s->deferred)
				return false;
			if (s->state == URPC_SESS_CONNECTED)
				t = URPC_MIN(t, s->last_heard_ns + rpc->peer_timeout_ns + 1);
			continue;
		}
		if (s->free_mask != all_free || s->wq_head != s->wq_tail)
			return false;
		switch (s->state) {
		case URPC_SESS_CONNECTING:
		case URPC_SESS_DISCONNECTING:
			t = URPC_MIN(t, URPC_MIN(s->sm_deadline_ns, s->sm_next_retry_ns));
			break;
		case URPC_SESS_CONNECTED:
			t = URPC_MIN(t, s->next_ping_ns);
			t = URPC_MIN(t, s->last_heard_ns + rpc->peer_timeout_ns + 1);
			break;
		case URPC_SESS_DISCONNECTED:
		case URPC_SESS_RESET:
			break;
		}
	}
	*wake_ns = URPC_MAX(t, rpc->next_scan_ns);
	return true;
}

/*
 * Sleep until a datagram or completion, an SM packet, the next timer or
 * @end_ns (urpc__now_ns() time), whichever comes first; or return at once
 * when there is work after all. run_event_loop() calls it after idle_ns
 * without work. Owner thread only, never inside a callback.
 *
 * Order matters twice. The sleep is announced on the SM queue before the
 * last look at it (urpc__sm_queue_sleep_begin(), ordering explained in
 * sm.c), and the transport is armed before the last look at it (work that
 * came before wait_arm() wakes nothing): the extra pass after both sees
 * anything that arrived earlier, and anything later makes a descriptor
 * readable.
 */
static void idle_wait(struct urpc_rpc *rpc, uint64_t end_ns)
{
	struct pollfd pfd[2];
	struct timespec ts;
	uint64_t wake, sleep_ns, t;
	bool signalled = false;
	int fd, ret;

	if (!idle_wake_time(rpc, &wake))
		return;
	urpc__sm_queue_sleep_begin(rpc->smq);
	fd = rpc->tp->ops->wait_arm(rpc->tp);
	if (fd < 0) {
		/* -EBUSY: the transport has work of its own that needs polling. */
		if (fd != -EBUSY)
			URPC_WARN_RATELIMIT(rpc->id, "wait_arm failed, busy-polling: %s",
					    urpc_strerror(fd));
		goto out_end;
	}
	/* The last look; its clock read (rpc->now) also times the sleep. */
	if (loop_once(rpc) || !idle_wake_time(rpc, &wake))
		goto out_end;
	sleep_ns = wake > rpc->now ? wake - rpc->now : 0;
	t = urpc__now_ns();
	sleep_ns = URPC_MIN(sleep_ns, end_ns > t ? end_ns - t : 0);
	sleep_ns = URPC_MIN(sleep_ns, IDLE_MAX_SLEEP_NS);
	if (!sleep_ns)
		goto out_end;

	pfd[0] = (struct pollfd){.fd = fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = rpc->wake_fd, .events = POLLIN};
	ts.tv_sec = (time_t)(sleep_ns / 1000000000u);
	ts.tv_nsec = (long)(sleep_ns % 1000000000u);
	rpc->st.idle_sleeps++;
	ret = ppoll(pfd, URPC_ARRAY_SIZE(pfd), &ts, NULL);
	if (ret > 0) {
		signalled = pfd[1].revents != 0;
		rpc->st.idle_wakeups++;
		rpc->st.idle_sm_wakeups += signalled;
	} else if (ret < 0 && errno != EINTR) {
		URPC_WARN_RATELIMIT(rpc->id, "ppoll: %s", urpc_strerror(-errno));
	}
	rpc->tp->ops->wait_ack(rpc->tp);
out_end:
	urpc__sm_queue_sleep_end(rpc->smq, signalled);
}

URPC_API int urpc_rpc_run_event_loop(struct urpc_rpc *rpc, unsigned ms)
{
	uint64_t t, end, idle_from;

	if (unlikely(!rpc))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc) || rpc->in_cb))
		return -EPERM;
	t = urpc__now_ns();
	end = t + (uint64_t)ms * 1000000;
	idle_from = t;
	do {
		unsigned work = loop_once(rpc);

		t = urpc__now_ns();
		if (work) {
			idle_from = t;
		} else if (unlikely(rpc->idle_ns && t - idle_from >= rpc->idle_ns && t < end)) {
			/*
			 * Idle long enough: sleep. Whether it slept or found
			 * the Rpc busy, spin another idle_ns before the next
			 * try, so a busy Rpc scans its sessions rarely.
			 */
			idle_wait(rpc, end);
			t = urpc__now_ns();
			idle_from = t;
		}
	} while (t < end);
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

/*
 * The engine's own bookkeeping, checked against itself (tests/sim after
 * every step): slot masks against slot flags, the busy bitmap, deferred
 * counts against server slots, the one-sided table against its free list,
 * the session count. Writes the first inconsistency to @why and returns
 * -EFAULT; else 0 with *@pending_conts set to the continuations the engine
 * still owes (requests in slots or queues, orphaned reads). Cold.
 */
int urpc__rpc_check(const struct urpc_rpc *rpc, uint64_t *pending_conts, char *why, size_t n)
{
	uint64_t owed = 0, open = 0;
	unsigned i, j, busy_os = 0, nfree = 0;
	uint16_t f;

	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = rpc->sessions[i];
		unsigned busy = 0, deferred = 0;

		if (!s)
			continue;
		open++;
		if (s->local_num != i) {
			snprintf(why, n, "session %u says it is number %u", i, s->local_num);
			return -EFAULT;
		}
		for (j = 0; j < URPC_SESSION_SLOTS; j++) {
			const struct urpc_sslot *sl = &s->slots[j];

			busy += sl->busy;
			deferred += sl->srv_state == URPC_SRV_IN_HANDLER;
			if (s->role == URPC_ROLE_CLIENT &&
			    sl->busy == !!(s->free_mask & (1u << j))) {
				snprintf(why, n, "session %u slot %u: busy %d but free bit %d", i,
					 j, sl->busy, !!(s->free_mask & (1u << j)));
				return -EFAULT;
			}
		}
		if (s->role == URPC_ROLE_SERVER && deferred != s->deferred) {
			snprintf(why, n, "server session %u: %u slots in handler, deferred says %u",
				 i, deferred, s->deferred);
			return -EFAULT;
		}
		if (s->wq_tail - s->wq_head > URPC_SESSION_WAITQ) {
			snprintf(why, n, "session %u: wait queue holds %u of %u", i,
				 s->wq_tail - s->wq_head, URPC_SESSION_WAITQ);
			return -EFAULT;
		}
		if (s->role == URPC_ROLE_CLIENT) {
			owed += busy + (s->wq_tail - s->wq_head);
			if (urpc__dp_session_busy(s) &&
			    !(rpc->busy_map[i >> 6] & (1ull << (i & 63)))) {
				snprintf(why, n, "client session %u has requests but no busy bit",
					 i);
				return -EFAULT;
			}
		}
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
	if (busy_os != rpc->os_busy || nfree != URPC_OS_OPS - busy_os) {
		snprintf(why, n, "one-sided table: %u busy, counter %u, %u on the free list",
			 busy_os, rpc->os_busy, nfree);
		return -EFAULT;
	}
	*pending_conts = owed;
	return 0;
}
