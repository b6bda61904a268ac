/* SPDX-License-Identifier: MIT */
/*
 * Message buffers (msgbuf.h). Owns rpc->views (views registered and not
 * released) and the GPU views behind them.
 * May call: the pool, the registration cache, the CUDA loader, the
 * transport's reg_mem/reg_dmabuf/dereg_mem, rop.h (which buffers the users'
 * operations hold). Reads (never writes) client and server slots and the
 * one-sided table to answer "is it lent?".
 */
#define URPC_LOG_MODULE "rpc"
#include "msgbuf.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "rop.h"

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

/* Do @a (the engine's pointer, may be NULL) and @b describe the same buffer? */
static inline bool mb_same(const struct urpc_msgbuf *a, const struct urpc_msgbuf *b)
{
	return a && (a == b || a->buf == b->buf);
}

bool urpc__mb_is_lent(const struct urpc_rpc *rpc, const struct urpc_msgbuf *mb)
{
	const struct urpc_cli_retiring *r;
	const struct urpc_session *s;
	uint32_t i;

	if (mb->priv_sess == URPC_MB_SESS_LIBRARY)
		return true;
	/* The session it was last lent to (a number beyond the table names none). */
	s = mb->priv_sess < rpc->hi_session ? urpc__sess_at(rpc, mb->priv_sess) : NULL;
	if (s && s->role == URPC_ROLE_CLIENT) {
		for (i = 0; i <= s->slot_mask; i++) {
			const struct urpc_cslot *sl = &s->cli.slots[i];

			if (sl->state != URPC_CLI_FREE &&
			    (mb_same(sl->req, mb) || mb_same(sl->resp, mb)))
				return true;
		}
		for (i = s->cli.wq_head; i != s->cli.wq_tail; i++) {
			const struct urpc_waiting_req *w = &s->cli.waitq[i % URPC_SESSION_WAITQ];

			if (mb_same(w->req, mb) || mb_same(w->resp, mb))
				return true;
		}
	}
	/* Requests answered whose server has not let go of them yet. */
	for (r = rpc->cli_retiring; r; r = r->next)
		if (mb_same(r->req, mb) || mb_same(r->resp, mb))
			return true;
	/* Continuations of failed sessions still waiting for their READ. */
	if (rpc->os_busy) {
		for (i = 0; i < URPC_OS_OPS; i++) {
			const struct urpc_os_op *op = &rpc->os[i];

			if (op->busy && op->orphan && op->kind == URPC_OS_CLI_RESP &&
			    (mb_same(op->req, mb) || mb_same(op->resp, mb)))
				return true;
		}
		/* A user's READ or WRITE (rop.c) holds its local buffer. */
		if (urpc__rop_holds(rpc, mb))
			return true;
	}
	return false;
}

URPC_API int urpc_msgbuf_free(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
{
	if (unlikely(!rpc || !mb))
		return -EINVAL;
	if (unlikely(!urpc__rpc_is_owner(rpc)))
		return -EPERM;
	if (!mb->buf || urpc__mb_is_view(mb) || mb == &rpc->resp_view)
		return -EINVAL;
	if (urpc__mb_is_lent(rpc, mb))
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
	if (rpc->tp->caps & URPC_TP_CAP_DMABUF) {
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
	/* Peers READ a view only through a grant, while it is a large message in flight. */
	unsigned access = (flags & URPC_MEM_PEER_READS) ? URPC_TP_ACCESS_GRANT_READ : 0;
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
	if (urpc__mb_is_lent(rpc, mb))
		return -EBUSY;
	urpc__mb_release(rpc, mb);
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

void urpc__mb_release(struct urpc_rpc *rpc, struct urpc_msgbuf *mb)
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
	}
}

/* Count @mb (may be NULL or empty) as a pool buffer or a view. */
static void held_add(const struct urpc_msgbuf *mb, size_t *bufs, size_t *views)
{
	if (!mb || !mb->buf)
		return;
	if (urpc__mb_is_view(mb))
		++*views;
	else
		++*bufs;
}

/*
 * A request's buffers: the response buffer may be the request buffer, or
 * the Rpc's view (urpc_req_enqueue_view), which is no buffer.
 */
static void held_pair(const struct urpc_rpc *rpc, const struct urpc_msgbuf *req,
		      const struct urpc_msgbuf *resp, size_t *bufs, size_t *views)
{
	held_add(req, bufs, views);
	if (resp != req && resp != &rpc->resp_view)
		held_add(resp, bufs, views);
}

void urpc__mb_held(const struct urpc_rpc *rpc, size_t *bufs, size_t *views)
{
	const struct urpc_cli_retiring *r;
	const struct urpc_srv_large *l;
	uint32_t i, j;

	*bufs = 0;
	*views = 0;
	for (l = rpc->retiring; l; l = l->next) { /* large responses their client still holds */
		held_add(&l->self, bufs, views);
		held_add(&l->resp, bufs, views);
	}
	for (r = rpc->cli_retiring; r; r = r->next) { /* large requests their server still holds */
		held_add(&r->self, bufs, views);
		held_pair(rpc, r->req, r->resp, bufs, views);
	}
	for (i = 0; i < rpc->hi_session; i++) {
		const struct urpc_session *s = urpc__sess_at(rpc, i);

		if (!s)
			continue;
		if (s->role == URPC_ROLE_SERVER) {
			for (j = 0; j <= s->slot_mask; j++) {
				held_add(&s->srv.slots[j].h.priv_resp, bufs, views);
				if (!s->srv.slots[j].large)
					continue;
				held_add(&s->srv.slots[j].large->self, bufs, views);
				held_add(&s->srv.slots[j].large->resp, bufs, views);
			}
			continue;
		}
		for (j = 0; j <= s->slot_mask; j++)
			if (s->cli.slots[j].state != URPC_CLI_FREE)
				held_pair(rpc, s->cli.slots[j].req, s->cli.slots[j].resp, bufs,
					  views);
		for (j = s->cli.wq_head; j != s->cli.wq_tail; j++)
			held_pair(rpc, s->cli.waitq[j % URPC_SESSION_WAITQ].req,
				  s->cli.waitq[j % URPC_SESSION_WAITQ].resp, bufs, views);
	}
	for (i = 0; i < URPC_OS_OPS; i++) {
		const struct urpc_os_op *op = &rpc->os[i];

		if (!op->busy)
			continue;
		if (op->kind == URPC_OS_SRV_REQ)
			held_add(&op->buf, bufs, views);
		else if (op->orphan)
			held_pair(rpc, op->req, op->resp, bufs, views);
	}
	urpc__rop_held(rpc, bufs, views); /* users' operations: each buffer once */
}

int urpc__mb_stage_out(const struct urpc_msgbuf *mb)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(mb);

	if (likely(!g || !g->host))
		return 0;
	return urpc__cuda_copy_to_host(g->host, mb->buf, mb->data_size) ? -EIO : 0;
}

int urpc__mb_stage_in(struct urpc_msgbuf *mb, size_t len)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(mb);

	if (likely(!g || !g->host))
		return 0;
	return urpc__cuda_copy_to_device(mb->buf, g->host, len) ? -EIO : 0;
}
