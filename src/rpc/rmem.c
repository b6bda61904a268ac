/* SPDX-License-Identifier: MIT */
/*
 * Remote memory for users (rmem.h; issue 16). Owns rpc->rmem: the table
 * of exposures (a registration of the cache held, and the transport's
 * grant to one session's peer), and the generations of exposures. Checks
 * the arguments of the users' READs, WRITEs and batches and hands them to
 * rop.h, which runs them.
 * May call: rop.h (submit; the tables' end), large.h (revoke a grant),
 * msgbuf.h (is a buffer one of ours), the registration cache, the
 * transport's grant/revoke, the ChaCha20 block (the owner digest).
 */
#define URPC_LOG_MODULE "rmem"
#include "rmem.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mem/cuda.h"
#include "../util/log.h"
#include "large.h"
#include "msgbuf.h"
#include "rop.h"

/* One exposure: live while @g.key is not 0 or @ent or @dmr is held. */
struct rmem_ent {
	struct urpc_tp_grant g;
	struct urpc_regcache_ent *ent; /* host memory: the cache's registration */
	struct urpc_tp_mr *dmr;	       /* GPU memory: a registration of its own */
	uint64_t gen;
	uint32_t sess; /* the session number it was exposed on */
};

struct urpc_rmem_tab {
	struct rmem_ent *e;
	uint32_t cap;
	uint32_t live;
	uint64_t next_gen; /* the next exposure's generation (from 1) */
};

/*
 * The owner digest of a session's token: the first 64 bits of a ChaCha20
 * block keyed by the token (and a fixed label), so the rbuf does not
 * reveal the token, and both ends of the session compute the same value.
 */
static uint64_t owner_id(uint64_t token)
{
	/* "urpc rbuf owner\0" as words, then zeros: a label, not a secret. */
	uint32_t key[8] = {(uint32_t)token,
			   (uint32_t)(token >> 32),
			   0x63707275u,
			   0x75627220u,
			   0x776f2066u,
			   0x0072656eu,
			   0,
			   0};
	uint32_t nonce[3] = {0, 0, 0}, out[16];

	urpc__chacha20_block(key, 0, nonce, out);
	return (uint64_t)out[1] << 32 | out[0];
}

/* A connected session of @rpc with a resolved peer; -EINVAL / -ENOTCONN. */
static int conn_session(struct urpc_rpc *rpc, int num, struct urpc_session **out)
{
	struct urpc_session *s = urpc__rpc_session(rpc, num);

	if (!s)
		return -EINVAL;
	if (s->state != URPC_SESS_CONNECTED || !s->peer)
		return -ENOTCONN;
	*out = s;
	return 0;
}

/* The owner's side of session @s, as its peer sees it (for the rbuf). */
static void rbuf_fill(struct urpc_rpc *rpc, const struct urpc_session *s, const struct rmem_ent *e,
		      unsigned access, struct urpc_rbuf *rb)
{
	memset(rb, 0, sizeof(*rb));
	rb->version = htole16(URPC_RBUF_VERSION);
	rb->size = htole16((uint16_t)sizeof(*rb));
	rb->access = (uint8_t)access;
	rb->owner_rpc = rpc->id;
	rb->owner_session = htole32(s->local_num);
	rb->owner_id = htole64(owner_id(s->token));
	rb->addr = htole64(e->g.addr);
	rb->len = htole64(e->g.len);
	rb->key = htole64(e->g.key);
	rb->gen = htole64(e->gen);
}

/* Does @e hold an exposure? */
static bool ent_live(const struct rmem_ent *e)
{
	return e->ent || e->dmr;
}

/* A free entry of the table (grown when full), or NULL. Cold. */
static struct rmem_ent *ent_get(struct urpc_rpc *rpc)
{
	struct urpc_rmem_tab *t = rpc->rmem;
	struct rmem_ent *n;
	uint32_t i, cap;

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		t->next_gen = 1;
		rpc->rmem = t;
	}
	for (i = 0; i < t->cap; i++)
		if (!ent_live(&t->e[i]))
			return &t->e[i];
	cap = t->cap ? 2 * t->cap : 16;
	n = realloc(t->e, (size_t)cap * sizeof(*n));
	if (!n)
		return NULL;
	memset(n + t->cap, 0, (size_t)(cap - t->cap) * sizeof(*n));
	t->e = n;
	i = t->cap;
	t->cap = cap;
	return &t->e[i];
}

static void ent_put(struct urpc_rpc *rpc, struct rmem_ent *e)
{
	urpc__grant_revoke(rpc, &e->g);
	if (e->dmr) {
		rpc->tp->ops->dereg_mem(rpc->tp, e->dmr);
		free(e->dmr);
	} else {
		urpc__regcache_put(rpc->regcache, e->ent);
	}
	memset(e, 0, sizeof(*e));
	rpc->rmem->live--;
}

/* The transport's GRANT_* (@grant) and REMOTE_* (@remote) bits of URPC_MEM_PEER_* @access. */
static void tp_bits(unsigned access, unsigned *grant, unsigned *remote)
{
	*grant = *remote = 0;
	if (access & URPC_MEM_PEER_READS) {
		*grant |= URPC_TP_ACCESS_GRANT_READ;
		*remote |= URPC_TP_ACCESS_REMOTE_READ;
	}
	if (access & URPC_MEM_PEER_WRITES) {
		*grant |= URPC_TP_ACCESS_GRANT_WRITE;
		*remote |= URPC_TP_ACCESS_REMOTE_WRITE;
	}
}

/*
 * Register GPU memory for an exposure, in @mr: verbs through dma-buf
 * (the NIC reaches the GPU), where the driver and the device export one;
 * loop and udp as device memory that their one-sided service reaches with
 * the driver's copies (URPC_TP_ACCESS_DEVICE). -ENOTSUP, with the reason
 * logged, where neither can be. Cold.
 */
static int gpu_reg(struct urpc_rpc *rpc, void *addr, size_t len, unsigned grant,
		   struct urpc_tp_mr *mr)
{
	uint64_t off;
	int fd, ret;

	if (!(rpc->tp->caps & URPC_TP_CAP_ONE_SIDED_HW))
		return rpc->tp->ops->reg_mem(rpc->tp, addr, len, grant | URPC_TP_ACCESS_DEVICE, mr);
	ret = -ENOTSUP;
	if (rpc->tp->caps & URPC_TP_CAP_DMABUF) {
		ret = urpc__cuda_dmabuf_fd(addr, len, &fd, &off);
		if (!ret) {
			ret = rpc->tp->ops->reg_dmabuf(rpc->tp, fd, off, len,
						       (uint64_t)(uintptr_t)addr, grant, mr);
			close(fd);
		}
	}
	if (ret) {
		URPC_WARN(rpc->id,
			  "urpc_mem_expose: GPU memory on %s needs a dma-buf registration, which "
			  "failed: %s",
			  rpc->tp->ops->name, urpc_strerror(ret));
		return -ENOTSUP;
	}
	return 0;
}

/* urpc_mem_expose() of GPU memory (after its checks): a registration of its own. Cold. */
static int expose_gpu(struct urpc_rpc *rpc, struct urpc_session *s, void *addr, size_t len,
		      unsigned access, struct urpc_rbuf *rbuf)
{
	unsigned grant, remote;
	struct rmem_ent *e;
	int ret;

	tp_bits(access, &grant, &remote);
	e = ent_get(rpc);
	if (!e)
		return -ENOMEM;
	e->dmr = calloc(1, sizeof(*e->dmr)); /* stays where it is while registered */
	if (!e->dmr)
		return -ENOMEM;
	ret = gpu_reg(rpc, addr, len, grant, e->dmr);
	if (!ret) {
		ret = rpc->tp->ops->grant(rpc->tp, s->peer, e->dmr, addr, len, remote, &e->g);
		if (ret) {
			rpc->tp->ops->dereg_mem(rpc->tp, e->dmr);
			URPC_WARN(rpc->id,
				  "urpc_mem_expose: no grant for %zu bytes of GPU memory: %s", len,
				  urpc_strerror(ret));
		}
	}
	if (ret) {
		free(e->dmr);
		e->dmr = NULL;
		e->g.key = 0;
		return ret;
	}
	e->gen = rpc->rmem->next_gen++;
	e->sess = s->local_num;
	rpc->rmem->live++;
	rbuf_fill(rpc, s, e, access, rbuf);
	return 0;
}

URPC_API int urpc_mem_expose(struct urpc_rpc *rpc, int session, void *addr, size_t len,
			     unsigned access, struct urpc_rbuf *rbuf)
{
	unsigned tp_grant = 0, tp_remote = 0;
	struct urpc_regcache_ent *ent;
	struct urpc_session *s;
	struct rmem_ent *e;
	int ret;

	if (!rpc || !addr || !rbuf)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	if (!len || len > URPC_MAX_MSG_SIZE || !access ||
	    (access & ~(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES)) ||
	    (uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	ret = conn_session(rpc, session, &s);
	if (ret)
		return ret;
	if (urpc__cuda_load() == 0 && urpc__cuda_is_device_ptr(addr))
		return expose_gpu(rpc, s, addr, len, access, rbuf);
	if (access & URPC_MEM_PEER_READS) {
		tp_grant |= URPC_TP_ACCESS_GRANT_READ;
		tp_remote |= URPC_TP_ACCESS_REMOTE_READ;
	}
	if (access & URPC_MEM_PEER_WRITES) {
		tp_grant |= URPC_TP_ACCESS_GRANT_WRITE;
		tp_remote |= URPC_TP_ACCESS_REMOTE_WRITE;
	}
	e = ent_get(rpc);
	if (!e)
		return -ENOMEM;
	ret = urpc__regcache_get(rpc->regcache, addr, len, tp_grant, &ent);
	if (ret)
		return ret;
	ret = rpc->tp->ops->grant(rpc->tp, s->peer, ent->reg.handle, addr, len, tp_remote, &e->g);
	if (ret) {
		e->g.key = 0;
		urpc__regcache_put(rpc->regcache, ent);
		URPC_WARN(rpc->id, "urpc_mem_expose: no grant for %zu bytes: %s", len,
			  urpc_strerror(ret));
		return ret;
	}
	e->ent = ent;
	e->gen = rpc->rmem->next_gen++;
	e->sess = s->local_num;
	rpc->rmem->live++;
	rbuf_fill(rpc, s, e, access, rbuf);
	return 0;
}

/* Is @rb well formed (version, size, access, length, generation)? */
static bool rbuf_ok(const struct urpc_rbuf *rb)
{
	return le16toh(rb->version) == URPC_RBUF_VERSION && le16toh(rb->size) == sizeof(*rb) &&
	       rb->access && !(rb->access & ~(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES)) &&
	       rb->len && le64toh(rb->addr) + le64toh(rb->len) >= le64toh(rb->addr) && rb->gen;
}

URPC_API int urpc_mem_revoke(struct urpc_rpc *rpc, const struct urpc_rbuf *rbuf)
{
	struct urpc_rmem_tab *t;
	uint32_t i;

	if (!rpc || !rbuf)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	t = rpc->rmem;
	if (!t || !rbuf_ok(rbuf) || rbuf->owner_rpc != rpc->id)
		return -EINVAL;
	for (i = 0; i < t->cap; i++) {
		struct rmem_ent *e = &t->e[i];

		/* The whole exposure: a slice names other bytes. */
		if (ent_live(e) && e->gen == le64toh(rbuf->gen) &&
		    e->sess == le32toh(rbuf->owner_session) && e->g.addr == le64toh(rbuf->addr) &&
		    e->g.len == le64toh(rbuf->len)) {
			ent_put(rpc, e);
			return 0;
		}
	}
	return -EINVAL;
}

URPC_API int urpc_rbuf_slice(const struct urpc_rbuf *rbuf, uint64_t off, uint64_t len,
			     struct urpc_rbuf *out)
{
	struct urpc_rbuf r;

	if (!rbuf || !out || !rbuf_ok(rbuf) || !len)
		return -EINVAL;
	if (off > le64toh(rbuf->len) || len > le64toh(rbuf->len) - off)
		return -EINVAL;
	r = *rbuf;
	r.addr = htole64(le64toh(rbuf->addr) + off);
	r.len = htole64(len);
	*out = r;
	return 0;
}

URPC_API int urpc_req_session(const struct urpc_req_handle *h)
{
	return h && h->priv_sess ? (int)h->priv_sess->local_num : -1;
}

/* The checks of operation @o that need no session: 0 or -EINVAL. */
static int op_check(const struct urpc_rdma_op *o)
{
	const struct urpc_msgbuf *local = o->local;
	const struct urpc_rbuf *rb = o->rbuf;

	if (!local || !rb || !o->len ||
	    (o->opcode != URPC_RDMA_READ && o->opcode != URPC_RDMA_WRITE))
		return -EINVAL;
	if (!rbuf_ok(rb) || !local->buf || o->local_off > local->max_data_size ||
	    o->len > local->max_data_size - o->local_off || o->remote_off > le64toh(rb->len) ||
	    o->len > le64toh(rb->len) - o->remote_off)
		return -EINVAL;
	return 0;
}

/*
 * The rest, on session @s whose owner digest is @oid: the rbuf's owner is
 * the session's peer, the local buffer is one of ours (host memory, or a
 * view of host or GPU memory). 0 or -EINVAL.
 */
static int op_check_sess(struct urpc_rpc *rpc, const struct urpc_session *s, uint64_t oid,
			 const struct urpc_rdma_op *o)
{
	const struct urpc_rbuf *rb = o->rbuf;

	if (rb->owner_rpc != s->remote_rpc_id || le32toh(rb->owner_session) != s->remote_num ||
	    le64toh(rb->owner_id) != oid)
		return -EINVAL;
	if (!urpc__mb_is_view(o->local) && !urpc__pool_is_out(rpc->pool, o->local))
		return -EINVAL;
	if (!urpc__mb_mr(o->local))
		return -EINVAL;
	return 0;
}

URPC_API int urpc_rdma_submit(struct urpc_rpc *rpc, int session, const struct urpc_rdma_op *ops,
			      size_t n, uint32_t timeout_ms, urpc_rdma_cont_fn cont, void *tag)
{
	struct urpc_session *s;
	uint64_t oid;
	size_t k;
	int ret;

	if (!rpc || !ops || !cont || !n || n > URPC_RDMA_MAX_OPS)
		return -EINVAL;
	if (!urpc__rpc_is_owner(rpc))
		return -EPERM;
	/* Every operation is checked before anything is queued. */
	for (k = 0; k < n; k++)
		if (op_check(&ops[k]))
			return -EINVAL;
	ret = conn_session(rpc, session, &s);
	if (ret)
		return ret;
	oid = owner_id(s->token); /* one ChaCha20 block per batch */
	for (k = 0; k < n; k++) {
		ret = op_check_sess(rpc, s, oid, &ops[k]);
		if (ret)
			return ret;
	}
	return urpc__rop_submit(rpc, s, ops, (uint32_t)n, (uint64_t)timeout_ms * 1000000, cont,
				tag);
}

URPC_API int urpc_rdma_read(struct urpc_rpc *rpc, int session, struct urpc_msgbuf *local,
			    size_t local_off, const struct urpc_rbuf *rbuf, uint64_t remote_off,
			    size_t len, urpc_rdma_cont_fn cont, void *tag, uint32_t timeout_ms)
{
	struct urpc_rdma_op op = {URPC_RDMA_READ, local, local_off, rbuf, remote_off, len};

	return urpc_rdma_submit(rpc, session, &op, 1, timeout_ms, cont, tag);
}

URPC_API int urpc_rdma_write(struct urpc_rpc *rpc, int session, struct urpc_msgbuf *local,
			     size_t local_off, const struct urpc_rbuf *rbuf, uint64_t remote_off,
			     size_t len, urpc_rdma_cont_fn cont, void *tag, uint32_t timeout_ms)
{
	struct urpc_rdma_op op = {URPC_RDMA_WRITE, local, local_off, rbuf, remote_off, len};

	return urpc_rdma_submit(rpc, session, &op, 1, timeout_ms, cont, tag);
}

uint32_t urpc__rmem_grants(const struct urpc_rpc *rpc)
{
	const struct urpc_rmem_tab *t = rpc->rmem;
	uint32_t i, n = 0;

	for (i = 0; t && i < t->cap; i++)
		n += t->e[i].ent && t->e[i].g.key;
	return n;
}

void urpc__rmem_session_gone(struct urpc_rpc *rpc, const struct urpc_session *s)
{
	struct urpc_rmem_tab *t = rpc->rmem;
	uint32_t i;

	for (i = 0; t && t->live && i < t->cap; i++)
		if (t->e[i].ent && t->e[i].sess == s->local_num)
			t->e[i].g.key = 0; /* release_peer() revokes it in the transport */
}

uint32_t urpc__rmem_live(const struct urpc_rpc *rpc)
{
	return rpc->rmem ? rpc->rmem->live : 0;
}

void urpc__rmem_fini(struct urpc_rpc *rpc)
{
	struct urpc_rmem_tab *t = rpc->rmem;
	uint32_t i;

	urpc__rop_fini(rpc);
	if (!t)
		return;
	for (i = 0; i < t->cap; i++)
		if (ent_live(&t->e[i]))
			ent_put(rpc, &t->e[i]);
	free(t->e);
	free(t);
	rpc->rmem = NULL;
}
