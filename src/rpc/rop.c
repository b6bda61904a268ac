/* SPDX-License-Identifier: MIT */
/*
 * The users' one-sided operations (rop.h). Owns rpc->rop: the operation
 * table (free list, the FIFO of queued operations, the count posted), the
 * batch table (free list, the list of batches due), and the users' share
 * of rpc->os_busy (one per live batch). Runs the batches' continuations.
 * May call: the transport's post_read/post_write/cancel/os_idle, the CUDA
 * driver's copies (a GPU view staged through pinned host memory); nothing
 * of the engine above engine.h.
 */
#define URPC_LOG_MODULE "rmem"
#include "rop.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/log.h"

static inline uint64_t rop_wr(const struct urpc_rop_tab *t, uint32_t i)
{
	return URPC_ROP_WR | (uint64_t)t->op[i].gen << 32 | i;
}

/* Grow the operation table so that @n more fit; 0 or -ENOMEM. Cold. */
static int ops_reserve(struct urpc_rop_tab *t, uint32_t n)
{
	uint32_t cap = t->cap ? t->cap : 64, i;
	struct urpc_rop *o;

	if (t->cap - t->live >= n)
		return 0;
	while (cap - t->live < n)
		cap *= 2;
	o = realloc(t->op, (size_t)cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	memset(o + t->cap, 0, (size_t)(cap - t->cap) * sizeof(*o));
	for (i = cap; i-- > t->cap;) {
		o[i].next = t->free;
		t->free = i;
	}
	t->op = o;
	t->cap = cap;
	return 0;
}

/* A free batch entry (the table grown when full), or URPC_ROP_NIL. Cold. */
static uint32_t batch_get(struct urpc_rop_tab *t)
{
	uint32_t cap, i;
	struct urpc_rbatch *b;

	if (t->bfree == URPC_ROP_NIL) {
		cap = t->bcap ? 2 * t->bcap : 16;
		b = realloc(t->b, (size_t)cap * sizeof(*b));
		if (!b)
			return URPC_ROP_NIL;
		memset(b + t->bcap, 0, (size_t)(cap - t->bcap) * sizeof(*b));
		for (i = cap; i-- > t->bcap;) {
			b[i].next = t->bfree;
			t->bfree = i;
		}
		t->b = b;
		t->bcap = cap;
	}
	i = t->bfree;
	t->bfree = t->b[i].next;
	return i;
}

static struct urpc_rop_tab *tab_get(struct urpc_rpc *rpc)
{
	struct urpc_rop_tab *t = rpc->rop;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->free = t->bfree = t->due = URPC_ROP_NIL;
	t->qhead = t->qtail = URPC_ROP_NIL;
	rpc->rop = t;
	return t;
}

static void op_free(struct urpc_rop_tab *t, uint32_t i)
{
	struct urpc_rop *o = &t->op[i];

	o->state = URPC_ROP_FREE;
	memset(&o->buf, 0, sizeof(o->buf));
	o->next = t->free;
	t->free = i;
	t->live--;
}

/* Batch @bi lost one operation: when none is left it is due. */
static void batch_let_go(struct urpc_rop_tab *t, uint32_t bi)
{
	struct urpc_rbatch *b = &t->b[bi];

	if (--b->left)
		return;
	b->next = t->due;
	t->due = bi;
}

/*
 * Batch @bi failed with @status: the first real failure is what it
 * reports; a connection's end (a flush) gives way to an access refusal
 * that is reported after it, never the other way round. Its queued
 * operations are dropped (the posted ones finish in the transport).
 */
static void batch_fail(struct urpc_rop_tab *t, uint32_t bi, int status)
{
	struct urpc_rbatch *b = &t->b[bi];
	uint32_t i, prev = URPC_ROP_NIL, nx;

	if (!b->status || (b->status == -ECONNRESET && status == -EACCES))
		b->status = status;
	for (i = t->qhead; i != URPC_ROP_NIL; i = nx) {
		nx = t->op[i].next;
		if (t->op[i].batch != bi) {
			prev = i;
			continue;
		}
		if (prev == URPC_ROP_NIL)
			t->qhead = nx;
		else
			t->op[prev].next = nx;
		if (t->qtail == i)
			t->qtail = prev;
		op_free(t, i);
		batch_let_go(t, bi);
	}
}

/*
 * @o's local buffer is a GPU view staged through pinned host memory (no
 * dma-buf): its bytes cross between the device and the staging copy, out
 * (@in false) before a WRITE is posted, in after a READ completed. A view
 * on dma-buf, or host memory: nothing to do. 0 or -EIO. Cold.
 */
static URPC_COLD int gpu_stage(const struct urpc_rop *o, bool in)
{
	struct urpc_gpu_view *g = urpc__mb_gpu(&o->buf);
	uint8_t *dev, *host;

	if (!g->host)
		return 0;
	dev = (uint8_t *)o->buf.buf + o->off;
	host = (uint8_t *)g->host + o->off;
	if (in ? urpc__cuda_copy_to_device(dev, host, o->len)
	       : urpc__cuda_copy_to_host(host, dev, o->len))
		return -EIO;
	return 0;
}

/* Post queued operations while the window and the transport have room. */
static void pump(struct urpc_rpc *rpc)
{
	struct urpc_rop_tab *t = rpc->rop;

	while (t->qhead != URPC_ROP_NIL && t->posted < URPC_ROP_WINDOW) {
		uint32_t i = t->qhead, bi = t->op[i].batch;
		struct urpc_rop *o = &t->op[i];
		struct urpc_session *s = urpc__rpc_session(rpc, (int)t->b[bi].sess_num);
		uint8_t *at;
		int ret;

		if (unlikely(!s || !s->peer || s->state != URPC_SESS_CONNECTED)) {
			batch_fail(t, bi, -ECONNRESET); /* drops @i too */
			continue;
		}
		at = (uint8_t *)urpc__mb_dma(&o->buf) + o->off;
		o->gen++;
		ret = unlikely(o->write && urpc__mb_gpu(&o->buf)) ? gpu_stage(o, false) : 0;
		if (!ret)
			ret = o->write ? rpc->tp->ops->post_write(rpc->tp, s->peer, at,
								  urpc__mb_mr(&o->buf), o->raddr,
								  o->rkey, o->len, rop_wr(t, i))
				       : rpc->tp->ops->post_read(rpc->tp, s->peer, at,
								 urpc__mb_mr(&o->buf), o->raddr,
								 o->rkey, o->len, rop_wr(t, i));
		if (ret == -EAGAIN)
			return; /* the transport is full: the next completion or scan retries */
		t->qhead = o->next;
		if (t->qhead == URPC_ROP_NIL)
			t->qtail = URPC_ROP_NIL;
		if (unlikely(ret)) {
			op_free(t, i);
			batch_let_go(t, bi);
			batch_fail(t, bi, ret);
			continue;
		}
		o->state = URPC_ROP_POSTED;
		t->posted++;
		t->b[bi].posted++;
	}
}

void urpc__rop_each_session(struct urpc_rpc *rpc,
			    void (*fn)(struct urpc_rpc *rpc, struct urpc_session *s))
{
	const struct urpc_rop_tab *t = rpc->rop;
	uint32_t bi;

	for (bi = 0; t && bi < t->bcap; bi++) {
		struct urpc_session *s;

		if (!t->b[bi].cont || !t->b[bi].posted)
			continue;
		s = urpc__rpc_session(rpc, (int)t->b[bi].sess_num);
		if (s)
			fn(rpc, s);
		t = rpc->rop;
	}
}

void urpc__rop_run_due(struct urpc_rpc *rpc)
{
	struct urpc_rop_tab *t = rpc->rop;

	while (t && t->due != URPC_ROP_NIL) {
		uint32_t bi = t->due;
		struct urpc_rbatch *b = &t->b[bi];
		urpc_rdma_cont_fn cont = b->cont;
		void *tag = b->tag;
		int status = b->status;

		t->due = b->next;
		memset(b, 0, sizeof(*b));
		b->next = t->bfree;
		t->bfree = bi;
		t->batches--;
		rpc->os_busy--;
		rpc->in_cb++;
		cont(rpc, tag, status);
		rpc->in_cb--;
		t = rpc->rop; /* the same table; its arrays may have moved */
	}
}

int urpc__rop_submit(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_rdma_op *ops,
		     uint32_t n, uint64_t timeout_ns, urpc_rdma_cont_fn cont, void *tag)
{
	struct urpc_rop_tab *t = tab_get(rpc);
	struct urpc_rbatch *b;
	uint32_t bi, k;

	if (!t)
		return -ENOMEM;
	if (n > URPC_RDMA_MAX_OPS - t->live)
		return -EAGAIN;
	if (ops_reserve(t, n))
		return -ENOMEM;
	bi = batch_get(t);
	if (bi == URPC_ROP_NIL)
		return -ENOMEM;
	if (!rpc->in_loop)
		rpc->now = urpc__rpc_clock(rpc);
	b = &t->b[bi];
	b->cont = cont;
	b->tag = tag;
	b->sess_num = s->local_num;
	b->left = n;
	b->posted = 0;
	b->status = 0;
	b->expired = false;
	b->next = URPC_ROP_NIL;
	if (timeout_ns) {
		b->idle_ns = 0;
		b->deadline_ns = rpc->now + timeout_ns;
	} else {
		b->idle_ns = URPC_MAX(rpc->tp->one_sided_timeout_ns, URPC_OS_TIMEOUT_MIN_NS);
		b->deadline_ns = rpc->now + b->idle_ns;
	}
	for (k = 0; k < n; k++) {
		const struct urpc_rbuf *rb = ops[k].rbuf;
		uint32_t i = t->free;
		struct urpc_rop *o = &t->op[i];

		t->free = o->next;
		t->live++;
		o->state = URPC_ROP_QUEUED;
		o->write = ops[k].opcode == URPC_RDMA_WRITE;
		o->batch = bi;
		o->buf = *ops[k].local;
		o->off = ops[k].local_off;
		o->raddr = le64toh(rb->addr) + ops[k].remote_off;
		o->rkey = le64toh(rb->key);
		o->len = ops[k].len;
		o->next = URPC_ROP_NIL;
		if (t->qtail == URPC_ROP_NIL)
			t->qhead = i;
		else
			t->op[t->qtail].next = i;
		t->qtail = i;
	}
	t->batches++;
	rpc->os_busy++;
	pump(rpc);
	return 0;
}

/* A transport's status as the continuation reports it (urpc.h). */
static int user_status(int status)
{
	if (status && status != -EACCES && status != -ETIMEDOUT)
		return -ECONNRESET; /* a flush: the session, the peer or the registration went */
	return status;
}

void urpc__rop_comp(struct urpc_rpc *rpc, const struct urpc_tp_comp *c)
{
	struct urpc_rop_tab *t = rpc->rop;
	uint32_t i = (uint32_t)c->wr_id, bi;
	struct urpc_rbatch *b;
	int status;

	if (unlikely(!t || i >= t->cap || t->op[i].state != URPC_ROP_POSTED ||
		     c->wr_id != rop_wr(t, i))) {
		rpc->st.drop_bad_comp++;
		URPC_WARN_RATELIMIT(rpc->id, "a completion names no user operation (wr_id %llx)",
				    (unsigned long long)c->wr_id);
		return;
	}
	bi = t->op[i].batch;
	b = &t->b[bi];
	t->posted--;
	b->posted--;
	status = user_status(c->status);
	if (unlikely(status == -EACCES)) {
		struct urpc_session *s = urpc__rpc_session(rpc, (int)b->sess_num);

		/* Refused because its session is ending (the owner revoked with it): the end is why. */
		if (!s || s->state != URPC_SESS_CONNECTED)
			status = -ECONNRESET;
	}
	if (unlikely(!status && !t->op[i].write && urpc__mb_gpu(&t->op[i].buf)))
		status = gpu_stage(&t->op[i], true);
	op_free(t, i);
	if (status)
		batch_fail(t, bi, status);
	else if (b->idle_ns)
		b->deadline_ns = rpc->now + b->idle_ns; /* progress */
	batch_let_go(t, bi);
	pump(rpc);
	urpc__rop_run_due(rpc);
}

/* Batch @bi's deadline passed: drop what is queued, cancel what is posted. Cold. */
static void batch_expire(struct urpc_rpc *rpc, uint32_t bi)
{
	struct urpc_rop_tab *t = rpc->rop;
	uint32_t i;

	t->b[bi].expired = true;
	batch_fail(t, bi, -ETIMEDOUT);
	for (i = 0; i < t->cap && t->b[bi].posted; i++)
		if (t->op[i].state == URPC_ROP_POSTED && t->op[i].batch == bi)
			/* -ENOTSUP (verbs): it completes in its own time */
			(void)rpc->tp->ops->cancel(rpc->tp, rop_wr(t, i), -ETIMEDOUT);
}

/*
 * The deadline of batch @bi, which has none of its own (timeout 0), passed
 * with operations posted: if one of them made progress in the transport
 * within the one-sided timeout (a chunk done, on udp and verbs; loop's
 * operation is one copy and tells nothing), the deadline moves to that
 * progress plus the timeout, and true. Cold: a walk, once per timeout.
 */
static bool batch_moves(struct urpc_rpc *rpc, uint32_t bi)
{
	struct urpc_rop_tab *t = rpc->rop;
	struct urpc_rbatch *b = &t->b[bi];
	uint64_t idle, least = UINT64_MAX;
	uint32_t i, n = b->posted;

	for (i = 0; i < t->cap && n; i++) {
		if (t->op[i].state != URPC_ROP_POSTED || t->op[i].batch != bi)
			continue;
		n--;
		if (!rpc->tp->ops->os_idle(rpc->tp, rop_wr(t, i), &idle))
			least = URPC_MIN(least, idle);
	}
	if (least >= b->idle_ns)
		return false;
	b->deadline_ns = rpc->now + (b->idle_ns - least);
	return true;
}

void urpc__rop_timers(struct urpc_rpc *rpc)
{
	struct urpc_rop_tab *t = rpc->rop;
	uint32_t bi;

	if (!t || !t->batches)
		return;
	for (bi = 0; bi < t->bcap; bi++) {
		struct urpc_rbatch *b = &t->b[bi];

		if (!b->cont || b->expired || !b->left || rpc->now < b->deadline_ns)
			continue;
		if (b->idle_ns && !b->posted) {
			/* Waiting for the window behind others: no stall of its own. */
			b->deadline_ns = rpc->now + b->idle_ns;
			continue;
		}
		if (b->idle_ns && batch_moves(rpc, bi))
			continue;
		batch_expire(rpc, bi);
	}
	pump(rpc);
	urpc__rop_run_due(rpc);
}

void urpc__rop_session_gone(struct urpc_rpc *rpc, const struct urpc_session *s)
{
	struct urpc_rop_tab *t = rpc->rop;
	uint32_t bi;

	if (!t || !t->batches)
		return;
	for (bi = 0; bi < t->bcap; bi++)
		if (t->b[bi].cont && t->b[bi].left && t->b[bi].sess_num == s->local_num)
			batch_fail(t, bi, -ECONNRESET);
}

bool urpc__rop_holds(const struct urpc_rpc *rpc, const struct urpc_msgbuf *mb)
{
	const struct urpc_rop_tab *t = rpc->rop;
	uint32_t i;

	if (!t || !t->live)
		return false;
	for (i = 0; i < t->cap; i++)
		if (t->op[i].state != URPC_ROP_FREE && t->op[i].buf.buf == mb->buf)
			return true;
	return false;
}

struct held_ent {
	uintptr_t buf;
	bool view;
};

static int held_cmp(const void *a, const void *b)
{
	const struct held_ent *x = a, *y = b;

	if (x->buf != y->buf)
		return x->buf < y->buf ? -1 : 1;
	return (int)x->view - (int)y->view;
}

void urpc__rop_held(const struct urpc_rpc *rpc, size_t *bufs, size_t *views)
{
	const struct urpc_rop_tab *t = rpc->rop;
	struct held_ent *p;
	uint32_t i, n = 0;

	if (!t || !t->live)
		return;
	p = malloc((size_t)t->live * sizeof(*p));
	for (i = 0; i < t->cap; i++) {
		const struct urpc_msgbuf *mb = &t->op[i].buf;

		if (t->op[i].state == URPC_ROP_FREE)
			continue;
		if (!p) { /* no room to sort: count each (destroy is then lenient) */
			*(urpc__mb_is_view(mb) ? views : bufs) += 1;
			continue;
		}
		p[n].buf = (uintptr_t)mb->buf;
		p[n++].view = urpc__mb_is_view(mb);
	}
	if (!p)
		return;
	qsort(p, n, sizeof(*p), held_cmp);
	for (i = 0; i < n; i++)
		if (!i || p[i].buf != p[i - 1].buf || p[i].view != p[i - 1].view)
			*(p[i].view ? views : bufs) += 1;
	free(p);
}

int urpc__rop_check(const struct urpc_rpc *rpc, uint32_t *batches, char *why, size_t n)
{
	const struct urpc_rop_tab *t = rpc->rop;
	uint32_t i, live = 0, posted = 0, queued = 0, nb = 0, left = 0;

	*batches = 0;
	if (!t)
		return 0;
	for (i = 0; i < t->cap; i++) {
		const struct urpc_rop *o = &t->op[i];

		if (o->state == URPC_ROP_FREE)
			continue;
		live++;
		posted += o->state == URPC_ROP_POSTED;
		if (o->batch >= t->bcap || !t->b[o->batch].cont) {
			snprintf(why, n, "user operation %u names no live batch", i);
			return -EFAULT;
		}
	}
	for (i = t->qhead; i != URPC_ROP_NIL && queued <= t->cap; i = t->op[i].next)
		queued++;
	for (i = 0; i < t->bcap; i++) {
		nb += t->b[i].cont != NULL;
		left += t->b[i].left;
	}
	if (live != t->live || posted != t->posted || queued != live - posted || left != live ||
	    nb != t->batches || posted > URPC_ROP_WINDOW) {
		snprintf(why, n,
			 "user operations: %u live (counter %u), %u posted (counter %u), %u "
			 "queued, %u left in %u batches (counter %u)",
			 live, t->live, posted, t->posted, queued, left, nb, t->batches);
		return -EFAULT;
	}
	*batches = nb;
	return 0;
}

void urpc__rop_fini(struct urpc_rpc *rpc)
{
	struct urpc_rop_tab *t = rpc->rop;

	if (!t)
		return;
	if (t->batches)
		URPC_ERR(rpc->id, "%u batches of one-sided operations never completed", t->batches);
	free(t->op);
	free(t->b);
	free(t);
	rpc->rop = NULL;
}
