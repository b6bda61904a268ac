/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport: set-up, peers, memory registration, the RC
 * connection life cycle and idle waiting. The datapath (datagrams and
 * one-sided operations) is in verbs_datapath.c; verbs.h describes both.
 *
 * Endpoint bytes (VERBS_EP_LEN, little-endian):
 *   0  u8  kind (URPC_TRANSPORT_VERBS)   1  u8  VERBS_EP_VERSION
 *   2  u8  1 for RoCE (GRH), 0 for IB    3  u8  0
 *   4  u32 UD QPN                        8  u16 LID, 10 u16 0
 *  12  u32 active MTU in bytes          16  u32 nonce
 *  20  u8[16] GID
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "verbs_dev.h"

static const struct urpc_tp_ops verbs_ops;

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "verbs.c assumes a little-endian host (the wire format is little-endian)"
#endif

const char *urpc__verbs_rc_state_str(enum verbs_rc_state s)
{
	switch (s) {
	case VERBS_RC_NONE:
		return "none";
	case VERBS_RC_PENDING:
		return "pending";
	case VERBS_RC_READY:
		return "ready";
	case VERBS_RC_FAILED:
		return "failed";
	}
	return "?";
}

static uint32_t random32(void)
{
	uint32_t r;

	urpc__entropy(&r, sizeof(r));
	return r;
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* ---- create and destroy -------------------------------------------------- */

static void verbs_free(struct verbs_tp *v)
{
	if (v->qp)
		ibv_destroy_qp(v->qp);
	if (v->ring_mr)
		ibv_dereg_mr(v->ring_mr);
	urpc__hp_free(&v->ring);
	if (v->send_cq)
		ibv_destroy_cq(v->send_cq);
	if (v->recv_cq)
		ibv_destroy_cq(v->recv_cq);
	if (v->rc_cq)
		ibv_destroy_cq(v->rc_cq);
	if (v->chan)
		ibv_destroy_comp_channel(v->chan);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ctx)
		ibv_close_device(v->ctx);
	free(v->swr);
	free(v->ssge);
	free(v->repost);
	free(v);
}

static int open_device(struct verbs_tp *v, const struct urpc_tp_cfg *cfg)
{
	struct urpc_verbs_port port;
	struct ibv_device **devs;
	struct ibv_device_attr da;
	const char *env;
	int i, n, ret;

	ret = urpc__verbs_pick_port_near(cfg->device, cfg->near_pci, cfg->numa_node, &port);
	if (ret)
		return ret; /* logged with the devices there are */
	devs = ibv_get_device_list(&n);
	if (!devs)
		return -errno ? -errno : -ENODEV;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(devs[i]), port.dev)) {
			v->ctx = ibv_open_device(devs[i]);
			break;
		}
	ibv_free_device_list(devs);
	if (!v->ctx) {
		URPC_ERR(cfg->id, "cannot open RDMA device %s", port.dev);
		return -ENODEV;
	}
	snprintf(v->port.dev, sizeof(v->port.dev), "%s", port.dev);
	v->port.num = port.port;
	v->port.gid_index = port.gid_index;
	v->port.roce = !strcmp(port.link_layer, "Ethernet");
	v->port.lid = port.lid;
	v->port.mtu = port.active_mtu;
	v->port.mtu_enum = mtu_enum(port.active_mtu);
	if (ibv_query_gid(v->ctx, v->port.num, v->port.gid_index, &v->gid)) {
		URPC_ERR(cfg->id, "%s:%u: cannot read GID %d", v->port.dev, v->port.num,
			 v->port.gid_index);
		return -EIO;
	}
	if (ibv_query_device(v->ctx, &da)) {
		URPC_ERR(cfg->id, "%s: ibv_query_device failed", v->port.dev);
		return -EIO;
	}
	v->rd_atomic = URPC_MIN(VERBS_RD_ATOMIC,
				(uint32_t)URPC_MIN(da.max_qp_rd_atom, da.max_qp_init_rd_atom));
	if (!v->rd_atomic)
		v->rd_atomic = 1;
	/* Chunked operations need room for their work requests on the RC QP. */
	v->rc_chunks = URPC_MIN(VERBS_RC_CHUNKS, (uint32_t)da.max_qp_wr / VERBS_RC_DEPTH);
	v->rc_chunk = VERBS_RC_CHUNK;
	env = getenv("URPC_VERBS_RC_CHUNK");
	if (env && *env)
		v->rc_chunk = (uint32_t)strtoul(env, NULL, 0);
	if (v->rc_chunks <= 1)
		v->rc_chunk = 0;
	if ((uint32_t)da.max_qp_wr < cfg->sq_depth || (uint32_t)da.max_qp_wr < cfg->rq_depth) {
		URPC_ERR(cfg->id, "%s allows %d WRs per queue; asked for sq %u, rq %u", v->port.dev,
			 da.max_qp_wr, cfg->sq_depth, cfg->rq_depth);
		return -EINVAL;
	}
	return 0;
}

static int create_ud_qp(struct verbs_tp *v, const struct urpc_tp_cfg *cfg)
{
	static const uint32_t inline_tries[] = {VERBS_WANT_INLINE, 64, 0};
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	unsigned i;

	for (i = 0; i < URPC_ARRAY_SIZE(inline_tries) && !v->qp; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = v->send_cq;
		ia.recv_cq = v->recv_cq;
		ia.qp_type = IBV_QPT_UD;
		ia.sq_sig_all = 0;
		ia.cap.max_send_wr = cfg->sq_depth;
		ia.cap.max_recv_wr = cfg->rq_depth;
		ia.cap.max_send_sge = 2;
		ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = inline_tries[i];
		v->qp = ibv_create_qp(v->pd, &ia);
	}
	if (!v->qp) {
		URPC_ERR(cfg->id, "%s: cannot create the UD QP: %s", v->port.dev, strerror(errno));
		return -errno ? -errno : -ENOMEM;
	}
	v->base.max_inline = ia.cap.max_inline_data;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = v->port.num;
	a.qkey = VERBS_QKEY;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = random32() & 0xffffff;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto fail;
	return 0;
fail:
	URPC_ERR(cfg->id, "%s: UD QP state change failed: %s", v->port.dev, strerror(errno));
	return -errno ? -errno : -EIO;
}

static int verbs_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct verbs_tp *v;
	size_t ring_len;
	uint32_t i;
	int ret;

	if (!URPC_IS_POW2(cfg->rq_depth) || !URPC_IS_POW2(cfg->sq_depth) ||
	    cfg->rq_depth > VERBS_MAX_DEPTH || cfg->sq_depth > VERBS_MAX_DEPTH) {
		URPC_ERR(cfg->id, "rq_depth %u and sq_depth %u must be powers of two up to %u",
			 cfg->rq_depth, cfg->sq_depth, VERBS_MAX_DEPTH);
		return -EINVAL;
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	ret = open_device(v, cfg);
	if (ret)
		goto out_free;
	v->base.kind = URPC_TRANSPORT_VERBS;
	v->base.mtu = v->port.mtu;
	if (cfg->mtu && cfg->mtu < v->base.mtu)
		v->base.mtu = cfg->mtu;
	v->base.rq_depth = cfg->rq_depth;
	v->base.sq_depth = cfg->sq_depth;
	v->base.caps = URPC_TP_CAP_ONE_SIDED_HW;
	v->base.id = cfg->id;
	v->nonce = random32();
	v->base.one_sided_timeout_ns =
		(uint64_t)(cfg->one_sided_timeout_ms ? cfg->one_sided_timeout_ms : 1000) *
		1000000ull;
	v->max_msg = 1ull << 31;

	ret = -ENOMEM;
	v->pd = ibv_alloc_pd(v->ctx);
	v->chan = ibv_create_comp_channel(v->ctx);
	if (!v->pd || !v->chan)
		goto out_verbs_err;
	if (fcntl(v->chan->fd, F_SETFL, fcntl(v->chan->fd, F_GETFL) | O_NONBLOCK) < 0)
		goto out_verbs_err;
	v->send_cq = ibv_create_cq(v->ctx, (int)cfg->sq_depth, NULL, NULL, 0);
	v->recv_cq = ibv_create_cq(v->ctx, (int)cfg->rq_depth, NULL, v->chan, 0);
	v->rc_cq = ibv_create_cq(v->ctx, (int)VERBS_OS_OPS, NULL, v->chan, 0);
	if (!v->send_cq || !v->recv_cq || !v->rc_cq)
		goto out_verbs_err;
	ret = create_ud_qp(v, cfg);
	if (ret)
		goto out_free;
	if (v->base.max_inline)
		v->base.caps |= URPC_TP_CAP_INLINE;

	/* The ring: rq_depth receive slots, then sq_depth send slots. */
	v->slot_size = URPC_ALIGN_UP(VERBS_GRH + v->base.mtu, (uint32_t)URPC_CACHELINE);
	ring_len = (size_t)v->slot_size * (cfg->rq_depth + cfg->sq_depth);
	ret = urpc__hp_alloc(ring_len, cfg->hp_flags, &v->ring);
	if (ret)
		goto out_free;
	v->send_slots = (uint8_t *)v->ring.addr + (size_t)v->slot_size * cfg->rq_depth;
	v->ring_mr = ibv_reg_mr(v->pd, v->ring.addr, ring_len, IBV_ACCESS_LOCAL_WRITE);
	if (!v->ring_mr) {
		ret = -errno ? -errno : -ENOMEM;
		URPC_ERR(cfg->id, "%s: cannot register the receive ring (%zu bytes): %s",
			 v->port.dev, ring_len, strerror(-ret));
		goto out_free;
	}
	v->swr = calloc(cfg->sq_depth, sizeof(*v->swr));
	v->ssge = calloc((size_t)cfg->sq_depth * 2, sizeof(*v->ssge));
	v->repost = calloc(cfg->rq_depth, sizeof(*v->repost));
	ret = -ENOMEM;
	if (!v->swr || !v->ssge || !v->repost)
		goto out_free;
	v->repost_batch = URPC_MAX(1u, URPC_MIN(VERBS_RECV_BATCH, cfg->rq_depth / 4));

	/* Every receive slot posted: the ring never runs dry unless held. */
	for (i = 0; i < cfg->rq_depth; i++)
		v->repost[v->nrepost++] = i;
	urpc__verbs_repost(v);
	if (v->nrepost) {
		ret = -EIO;
		goto out_free;
	}

	for (i = 0; i < VERBS_OS_OPS; i++)
		v->ops[i].next = (uint16_t)(i + 1 < VERBS_OS_OPS ? i + 1 : VERBS_NIL);
	v->free_head = 0;
	v->done_head = v->done_tail = VERBS_NIL;

	v->base.ops = &verbs_ops;
	URPC_DBG(cfg->id, "verbs on %s:%u (GID %d, MTU %u, UD QPN %u, inline %u)", v->port.dev,
		 v->port.num, v->port.gid_index, v->base.mtu, v->qp->qp_num, v->base.max_inline);
	*out = &v->base;
	return 0;

out_verbs_err:
	URPC_ERR(cfg->id, "%s: cannot set up PD, CQs or completion channel: %s", v->port.dev,
		 strerror(errno));
out_free:
	verbs_free(v);
	return ret;
}

static void peer_free(struct verbs_tp *v, struct urpc_tp_peer *p);
static void outbox_purge(struct verbs_tp *v, struct verbs_conn *c);

static int verbs_destroy(struct urpc_tp *tp)
{
	struct verbs_tp *v = to_verbs(tp);

	if (v->nops || v->nregs)
		return -EBUSY;
	while (v->peers)
		peer_free(v, v->peers);
	verbs_free(v);
	return 0;
}

/* ---- endpoints and peers ------------------------------------------------- */

static size_t verbs_get_endpoint(struct urpc_tp *tp, uint8_t *buf)
{
	struct verbs_tp *v = to_verbs(tp);
	uint32_t qpn = v->qp->qp_num, mtu = v->base.mtu;
	uint16_t lid = v->port.lid, zero = 0;

	buf[0] = (uint8_t)URPC_TRANSPORT_VERBS;
	buf[1] = VERBS_EP_VERSION;
	buf[2] = v->port.roce ? 1 : 0;
	buf[3] = 0;
	memcpy(buf + 4, &qpn, 4);
	memcpy(buf + 8, &lid, 2);
	memcpy(buf + 10, &zero, 2);
	memcpy(buf + 12, &mtu, 4);
	memcpy(buf + 16, &v->nonce, 4);
	memcpy(buf + 20, v->gid.raw, 16);
	return VERBS_EP_LEN;
}

/* The connection to the endpoint @ep describes, shared or new (one reference). */
static int conn_get(struct verbs_tp *v, const uint8_t *ep, struct verbs_conn **out)
{
	struct verbs_conn *p;
	uint32_t qpn, mtu, nonce;
	uint16_t lid;

	memcpy(&qpn, ep + 4, 4);
	memcpy(&lid, ep + 8, 2);
	memcpy(&mtu, ep + 12, 4);
	memcpy(&nonce, ep + 16, 4);
	if (!qpn || qpn > 0xffffff || !URPC_IS_POW2(mtu) || mtu < 256 || mtu > 4096)
		return -EINVAL;
	for (p = v->conns; p; p = p->next)
		if (p->qpn == qpn && p->nonce == nonce && !memcmp(p->gid, ep + 20, 16)) {
			p->refs++;
			*out = p;
			return 0;
		}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->refs = 1;
	p->qpn = qpn;
	p->mtu = mtu;
	p->nonce = nonce;
	memcpy(p->gid, ep + 20, 16);
	p->ah_attr.port_num = v->port.num;
	p->ah_attr.dlid = lid;
	if (v->port.roce) {
		p->ah_attr.is_global = 1;
		memcpy(p->ah_attr.grh.dgid.raw, p->gid, 16);
		p->ah_attr.grh.sgid_index = (uint8_t)v->port.gid_index;
		p->ah_attr.grh.hop_limit = 64;
	}
	p->ah = ibv_create_ah(v->pd, &p->ah_attr);
	if (!p->ah) {
		int ret = -errno ? -errno : -EINVAL;

		URPC_ERR(v->base.id, "cannot create an address handle for peer QPN %u: %s", qpn,
			 strerror(-ret));
		free(p);
		return ret;
	}
	p->wait_head = p->wait_tail = VERBS_NIL;
	p->next = v->conns;
	if (v->conns)
		v->conns->prev = p;
	v->conns = p;
	*out = p;
	return 0;
}

static int verbs_resolve_peer(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			      struct urpc_tp_peer **out)
{
	struct verbs_tp *v = to_verbs(tp);
	struct urpc_tp_peer *h;
	struct verbs_conn *c;
	int ret;

	if (!ep || len != VERBS_EP_LEN || ep[0] != (uint8_t)URPC_TRANSPORT_VERBS ||
	    ep[1] != VERBS_EP_VERSION || ep[2] != (v->port.roce ? 1 : 0) || ep[3] != 0)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	ret = conn_get(v, ep, &c);
	if (ret) {
		free(h);
		return ret;
	}
	h->conn = c;
	h->ah = c->ah;
	h->qpn = c->qpn;
	h->next = v->peers;
	if (v->peers)
		v->peers->prev = h;
	v->peers = h;
	*out = h;
	return 0;
}

/* Synchronously reap @p's posted operations (its QP is in the error state). */
static void rc_drain(struct verbs_tp *v, struct verbs_conn *p)
{
	uint64_t end = urpc__now_ns() + VERBS_DRAIN_NS;
	uint32_t i;

	while (p->rc_posted && urpc__now_ns() < end)
		urpc__verbs_rc_reap(v);
	if (!p->rc_posted)
		return;
	/* The NIC never flushed them: give up on their completions. */
	URPC_ERR(v->base.id, "RC QP %u: %u operations never completed after a flush",
		 p->rc_qp->qp_num, p->rc_posted);
	for (i = 0; i < VERBS_OS_OPS; i++)
		if (v->ops[i].state == VERBS_OP_POSTED && v->ops[i].conn == p) {
			v->nposted--;
			v->ops[i].peer->posted--;
			urpc__verbs_op_done(v, (uint16_t)i, -EIO);
		}
	p->rc_posted = 0;
}

/*
 * Tear @p's RC side down to NONE: posted operations are flushed and reaped
 * (their status the recorded cause, else @err), waiting ones fail with @err,
 * the QP is destroyed.
 */
static void rc_teardown(struct verbs_tp *v, struct verbs_conn *p, int err)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	uint16_t i;

	if (p->rc_state == VERBS_RC_PENDING)
		v->npending--;
	if (!p->rc_err)
		p->rc_err = err;
	while ((i = p->wait_head) != VERBS_NIL) {
		p->wait_head = v->ops[i].next;
		urpc__verbs_op_done(v, i, p->rc_err);
	}
	p->wait_tail = VERBS_NIL;
	if (p->rc_qp) {
		if (p->rc_posted) {
			ibv_modify_qp(p->rc_qp, &a, IBV_QP_STATE);
			rc_drain(v, p);
		}
		ibv_destroy_qp(p->rc_qp);
		p->rc_qp = NULL;
	}
	p->rc_state = VERBS_RC_NONE;
	p->rc_err = 0;
	p->rc_remote_qpn = 0;
}

static void conn_put(struct verbs_tp *v, struct verbs_conn *p)
{
	if (--p->refs)
		return;
	rc_teardown(v, p, -ECONNRESET);
	outbox_purge(v, p);
	if (p->prev)
		p->prev->next = p->next;
	else
		v->conns = p->next;
	if (p->next)
		p->next->prev = p->prev;
	ibv_destroy_ah(p->ah);
	free(p);
}

/*
 * Release handle @h. Its operations end first: waiting ones fail with
 * -ECONNRESET; posted ones are flushed with the connection when this was
 * its last handle, else waited for (bounded; past the bound the connection
 * fails, which flushes them).
 */
static void peer_free(struct verbs_tp *v, struct urpc_tp_peer *h)
{
	struct verbs_conn *c = h->conn;
	uint16_t *link = &c->wait_head, prev = VERBS_NIL;
	uint64_t end;

	while (*link != VERBS_NIL) {
		uint16_t k = *link;

		if (v->ops[k].peer == h) {
			*link = v->ops[k].next;
			urpc__verbs_op_done(v, k, -ECONNRESET);
		} else {
			prev = k;
			link = &v->ops[k].next;
		}
	}
	c->wait_tail = prev;
	if (h->posted && c->refs > 1) {
		end = urpc__now_ns() + VERBS_DRAIN_NS;
		while (h->posted && urpc__now_ns() < end)
			urpc__verbs_rc_reap(v);
		if (h->posted) {
			urpc__verbs_rc_fail(v, c, -ETIMEDOUT,
					    "operations of a released peer did not complete");
			rc_drain(v, c);
		}
	}
	if (h->prev)
		h->prev->next = h->next;
	else
		v->peers = h->next;
	if (h->next)
		h->next->prev = h->prev;
	conn_put(v, c);
	free(h);
}

/*
 * Operations still using @peer complete with -ECONNRESET (or their own
 * status); the NIC no longer touches their memory when this returns.
 */
static void verbs_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer)
{
	if (peer)
		peer_free(to_verbs(tp), peer);
}

/* ---- memory ---------------------------------------------------------------- */

#define VERBS_ACCESS_ALL (URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)

/* Verbs access flags for URPC_TP_ACCESS_* bits (local write always). */
static int ibv_access(unsigned access)
{
	int flags = IBV_ACCESS_LOCAL_WRITE;

	if (access & URPC_TP_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & URPC_TP_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	return flags;
}

static void mr_fill(struct verbs_tp *v, struct urpc_tp_mr *mr, struct ibv_mr *m, void *addr,
		    size_t len, unsigned access)
{
	mr->addr = addr;
	mr->len = len;
	mr->lkey = m->lkey;
	mr->rkey = m->rkey;
	mr->access = access;
	mr->handle = m;
	v->nregs++;
}

static int verbs_reg_mem(struct urpc_tp *tp, void *addr, size_t len, unsigned access,
			 struct urpc_tp_mr *mr)
{
	struct verbs_tp *v = to_verbs(tp);
	struct ibv_mr *m;

	if (!addr || !len || !mr || (access & ~VERBS_ACCESS_ALL))
		return -EINVAL;
	m = ibv_reg_mr(v->pd, addr, len, ibv_access(access));
	if (!m) {
		int ret = -errno ? -errno : -ENOMEM;

		URPC_ERR(v->base.id, "ibv_reg_mr(%p, %zu) failed: %s (RLIMIT_MEMLOCK?)", addr, len,
			 strerror(-ret));
		return ret;
	}
	mr_fill(v, mr, m, addr, len, access);
	return 0;
}

static int verbs_reg_dmabuf(struct urpc_tp *tp, int fd, uint64_t offset, size_t len, uint64_t iova,
			    unsigned access, struct urpc_tp_mr *mr)
{
	struct verbs_tp *v = to_verbs(tp);
	struct ibv_mr *m;

	if (fd < 0 || !len || !mr || (access & ~VERBS_ACCESS_ALL))
		return -EINVAL;
	m = ibv_reg_dmabuf_mr(v->pd, offset, len, iova, fd, ibv_access(access));
	if (!m)
		return -errno ? -errno : -EOPNOTSUPP; /* the caller logs and stages */
	mr_fill(v, mr, m, (void *)(uintptr_t)iova, len, access);
	return 0;
}

/*
 * Operations on @mr fail: waiting ones with -EIO at once; posted ones by
 * flushing their peer's QP (its RC side becomes a tombstone with -EIO) and
 * reaping them before the memory is deregistered.
 */
static void verbs_dereg_mem(struct urpc_tp *tp, struct urpc_tp_mr *mr)
{
	struct verbs_tp *v = to_verbs(tp);
	struct verbs_conn *p;
	uint32_t i;

	if (!mr || !mr->handle)
		return;
	for (p = v->conns; p; p = p->next) {
		uint16_t *link = &p->wait_head, prev = VERBS_NIL;

		while (*link != VERBS_NIL) {
			uint16_t k = *link;

			if (v->ops[k].mr_handle == mr->handle) {
				*link = v->ops[k].next;
				urpc__verbs_op_done(v, k, -EIO);
			} else {
				prev = k;
				link = &v->ops[k].next;
			}
		}
		p->wait_tail = prev;
	}
	for (i = 0; i < VERBS_OS_OPS; i++) {
		struct verbs_op *op = &v->ops[i];

		if (op->state != VERBS_OP_POSTED || op->mr_handle != mr->handle)
			continue;
		urpc__verbs_rc_fail(v, op->conn, -EIO, "its memory was deregistered");
		rc_drain(v, op->conn);
	}
	ibv_dereg_mr(mr->handle);
	mr->handle = NULL;
	v->nregs--;
}

/* ---- the RC life cycle ------------------------------------------------------ */

static int rc_qp_create(struct verbs_tp *v, struct verbs_conn *p)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = v->rc_cq;
	ia.recv_cq = v->rc_cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = VERBS_RC_DEPTH * URPC_MAX(v->rc_chunks, 1u);
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	p->rc_qp = ibv_create_qp(v->pd, &ia);
	if (!p->rc_qp)
		return -errno ? -errno : -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = v->port.num;
	a.qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		int ret = -errno ? -errno : -EIO;

		ibv_destroy_qp(p->rc_qp);
		p->rc_qp = NULL;
		return ret;
	}
	p->rc_psn = random32() & 0xffffff;
	return 0;
}

/* INIT -> RTR -> RTS against the peer's QP @rqpn starting at @rpsn. */
static int rc_qp_connect(struct verbs_tp *v, struct verbs_conn *p, uint32_t rqpn, uint32_t rpsn)
{
	enum ibv_mtu peer_mtu = mtu_enum(p->mtu);
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = URPC_MIN(v->port.mtu_enum, peer_mtu);
	a.dest_qp_num = rqpn;
	a.rq_psn = rpsn & 0xffffff;
	a.max_dest_rd_atomic = (uint8_t)v->rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr = p->ah_attr;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -errno ? -errno : -EIO;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* 4.096 us << 14 = 67 ms per try */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = p->rc_psn;
	a.max_rd_atomic = (uint8_t)v->rd_atomic;
	if (ibv_modify_qp(p->rc_qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -errno ? -errno : -EIO;
	p->rc_remote_qpn = rqpn;
	return 0;
}

int urpc__verbs_rc_start(struct verbs_tp *v, struct verbs_conn *p)
{
	uint64_t now = urpc__now_ns();
	int ret;

	ret = rc_qp_create(v, p);
	if (ret) {
		URPC_ERR(v->base.id, "cannot create an RC QP for peer QPN %u: %s", p->qpn,
			 strerror(-ret));
		p->rc_state = VERBS_RC_FAILED;
		p->rc_err = ret;
		return ret;
	}
	p->rc_state = VERBS_RC_PENDING;
	v->npending++;
	p->hs_deadline_ns = now + v->base.one_sided_timeout_ns;
	p->hs_rto_ns = VERBS_HS_RTO_NS;
	p->hs_next_ns = now + p->hs_rto_ns;
	/* A REQ the send queue refuses now is resent by the timer. */
	urpc__verbs_ctl_send(v, p, VERBS_CTL_RC_REQ);
	return 0;
}

void urpc__verbs_rc_fail(struct verbs_tp *v, struct verbs_conn *p, int err, const char *why)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	uint16_t i;

	if (p->rc_state == VERBS_RC_FAILED)
		return;
	URPC_ERR(v->base.id,
		 "RC connection to peer QPN %u failed while %s (%s); its one-sided operations "
		 "fail with '%s' until the session is reset",
		 p->qpn, urpc__verbs_rc_state_str(p->rc_state), why ? why : urpc_strerror(err),
		 urpc_strerror(err));
	if (p->rc_state == VERBS_RC_PENDING)
		v->npending--;
	p->rc_state = VERBS_RC_FAILED;
	p->rc_err = err;
	while ((i = p->wait_head) != VERBS_NIL) {
		p->wait_head = v->ops[i].next;
		urpc__verbs_op_done(v, i, err);
	}
	p->wait_tail = VERBS_NIL;
	/* Posted operations come back flushed and report @err. */
	if (p->rc_qp && p->rc_posted)
		ibv_modify_qp(p->rc_qp, &a, IBV_QP_STATE);
}

void urpc__verbs_rc_kick(struct verbs_tp *v, struct verbs_conn *p)
{
	uint16_t i;

	while (p->rc_state == VERBS_RC_READY && (i = p->wait_head) != VERBS_NIL &&
	       p->rc_posted < VERBS_RC_DEPTH) {
		p->wait_head = v->ops[i].next;
		if (p->wait_head == VERBS_NIL)
			p->wait_tail = VERBS_NIL;
		urpc__verbs_op_post(v, i);
	}
}

static struct verbs_conn *peer_of_ctl(struct verbs_tp *v, const struct verbs_ctl *c)
{
	struct verbs_conn *p;

	for (p = v->conns; p; p = p->next)
		if (p->qpn == c->ud_qpn && p->nonce == c->nonce && !memcmp(p->gid, c->gid, 16))
			return p;
	return NULL;
}

/* Connect @p's QP (PENDING, or fresh for a REQ) to the sender's and go READY. */
static void rc_accept(struct verbs_tp *v, struct verbs_conn *p, const struct verbs_ctl *c)
{
	int ret;

	if (p->rc_state == VERBS_RC_NONE) {
		ret = rc_qp_create(v, p);
		if (ret) {
			URPC_ERR(v->base.id, "cannot create an RC QP for peer QPN %u: %s", p->qpn,
				 strerror(-ret));
			return; /* the requester times out */
		}
	}
	ret = rc_qp_connect(v, p, c->rc_qpn, c->rc_psn);
	if (ret) {
		URPC_ERR(v->base.id, "RC QP %u: cannot connect to QPN %u: %s", p->rc_qp->qp_num,
			 c->rc_qpn, strerror(-ret));
		if (p->rc_state == VERBS_RC_NONE) {
			ibv_destroy_qp(p->rc_qp);
			p->rc_qp = NULL;
			return;
		}
		urpc__verbs_rc_fail(v, p, ret, "QP state change failed");
		return;
	}
	if (p->rc_state == VERBS_RC_PENDING)
		v->npending--;
	p->rc_state = VERBS_RC_READY;
	URPC_DBG(v->base.id, "RC QP %u connected to peer QPN %u (RC QPN %u)", p->rc_qp->qp_num,
		 p->qpn, c->rc_qpn);
	urpc__verbs_rc_kick(v, p);
}

void urpc__verbs_ctl_rx(struct verbs_tp *v, struct verbs_conn *via, uint32_t type,
			const uint8_t *buf, uint32_t len)
{
	struct verbs_conn *p;
	struct verbs_ctl c;

	if (len < sizeof(c) || (type != VERBS_CTL_RC_REQ && type != VERBS_CTL_RC_ACK)) {
		v->base.stats.rx_drop_bad++;
		return;
	}
	memcpy(&c, buf, sizeof(c));
	p = peer_of_ctl(v, &c);
	/* It must name the endpoint of the session that carried it. */
	if (!p || p != via || !c.rc_qpn || c.rc_qpn > 0xffffff) {
		/* Not resolved here (yet): the requester resends, then times out. */
		v->base.stats.rx_drop_bad++;
		return;
	}
	switch (p->rc_state) {
	case VERBS_RC_NONE:
		if (type == VERBS_CTL_RC_REQ)
			rc_accept(v, p, &c);
		/* an ACK for a connection torn down since: ignored */
		break;
	case VERBS_RC_PENDING:
		/* A REQ: both sides asked at once. An ACK must answer our QP. */
		if (type == VERBS_CTL_RC_REQ || c.echo_qpn == p->rc_qp->qp_num)
			rc_accept(v, p, &c);
		break;
	case VERBS_RC_READY:
		if (c.rc_qpn == p->rc_remote_qpn)
			break; /* a duplicate; a REQ is answered below (our ACK was lost) */
		if (type == VERBS_CTL_RC_REQ) {
			/* The peer made a new QP (it released and resolved us again). */
			rc_teardown(v, p, -ECONNRESET);
			rc_accept(v, p, &c);
		} else if (c.echo_qpn == p->rc_qp->qp_num) {
			/*
			 * The peer connected a new QP to ours while ours went to a
			 * stale one: start over.
			 */
			rc_teardown(v, p, -ECONNRESET);
			urpc__verbs_rc_start(v, p);
		}
		break;
	case VERBS_RC_FAILED:
		return; /* a tombstone until the peer is released */
	}
	if (type == VERBS_CTL_RC_REQ && p->rc_state == VERBS_RC_READY)
		urpc__verbs_ctl_send(v, p, VERBS_CTL_RC_ACK);
}

void urpc__verbs_hs_timers(struct verbs_tp *v, uint64_t now)
{
	struct verbs_conn *p;

	for (p = v->conns; p && v->npending; p = p->next) {
		if (p->rc_state != VERBS_RC_PENDING)
			continue;
		if (now >= p->hs_deadline_ns) {
			urpc__verbs_rc_fail(v, p, -ETIMEDOUT,
					    "no answer to the connection request");
			continue;
		}
		if (now < p->hs_next_ns)
			continue;
		urpc__verbs_ctl_send(v, p, VERBS_CTL_RC_REQ);
		p->hs_rto_ns = URPC_MIN(p->hs_rto_ns * 2, VERBS_HS_RTO_MAX_NS);
		p->hs_next_ns = now + p->hs_rto_ns;
	}
}

int urpc__verbs_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* ---- control messages, carried by session management ---- */

int urpc__verbs_ctl_send(struct verbs_tp *v, struct verbs_conn *c, enum verbs_ctl_type type)
{
	struct verbs_outmsg *m;

	if (v->out_tail - v->out_head == VERBS_OUTBOX)
		return -EAGAIN; /* a REQ is resent by its timer, an ACK on the next REQ */
	m = &v->outbox[v->out_tail++ % VERBS_OUTBOX];
	m->conn = c;
	m->type = (uint8_t)type;
	v->base.ctl_pending = v->out_tail - v->out_head;
	return 0;
}

/* A connection goes away: its queued messages go with it. */
static void outbox_purge(struct verbs_tp *v, struct verbs_conn *c)
{
	uint32_t i;

	for (i = v->out_head; i != v->out_tail; i++)
		if (v->outbox[i % VERBS_OUTBOX].conn == c)
			v->outbox[i % VERBS_OUTBOX].conn = NULL;
}

/*
 * Wire form: the type (1 byte), then struct verbs_ctl. The handle given
 * out is any one resolved for the connection: the session that carries
 * it reaches the same remote endpoint.
 */
static int verbs_ctl_pop(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf)
{
	struct verbs_tp *v = to_verbs(tp);

	while (v->out_head != v->out_tail) {
		struct verbs_outmsg m = v->outbox[v->out_head++ % VERBS_OUTBOX];
		struct urpc_tp_peer *h;
		struct verbs_ctl c;

		v->base.ctl_pending = v->out_tail - v->out_head;
		if (!m.conn || !m.conn->rc_qp)
			continue;
		for (h = v->peers; h && h->conn != m.conn; h = h->next)
			;
		if (!h)
			continue;
		memset(&c, 0, sizeof(c));
		c.ud_qpn = v->qp->qp_num;
		c.nonce = v->nonce;
		c.rc_qpn = m.conn->rc_qp->qp_num;
		c.rc_psn = m.conn->rc_psn;
		c.echo_qpn = m.type == VERBS_CTL_RC_ACK ? m.conn->rc_remote_qpn : 0;
		memcpy(c.gid, v->gid.raw, 16);
		buf[0] = m.type;
		memcpy(buf + 1, &c, sizeof(c));
		*peer = h;
		return 1 + (int)sizeof(c);
	}
	return 0;
}

static void verbs_ctl_push(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			   size_t len)
{
	struct verbs_tp *v = to_verbs(tp);

	if (!peer || len < 1 || len > URPC_TP_EP_MAX) {
		v->base.stats.rx_drop_bad++;
		return;
	}
	urpc__verbs_ctl_rx(v, peer->conn, buf[0], buf + 1, (uint32_t)len - 1);
}

/* ---- waiting ----------------------------------------------------------------- */

/*
 * Arms the receive and RC completion queues on the completion channel.
 * -EBUSY while handshakes or one-sided operations run: their timers need
 * the loop to keep polling.
 */
static int verbs_wait_arm(struct urpc_tp *tp)
{
	struct verbs_tp *v = to_verbs(tp);

	if (v->npending || v->nposted)
		return -EBUSY;
	if (ibv_req_notify_cq(v->recv_cq, 0) || ibv_req_notify_cq(v->rc_cq, 0))
		return -EIO;
	return v->chan->fd;
}

static void verbs_wait_ack(struct urpc_tp *tp)
{
	struct verbs_tp *v = to_verbs(tp);
	struct ibv_cq *cq;
	void *cq_ctx;

	/* The channel's fd is non-blocking: this returns -1 when none is left. */
	while (ibv_get_cq_event(v->chan, &cq, &cq_ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

static const struct urpc_tp_ops verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
	.destroy = verbs_destroy,
	.get_endpoint = verbs_get_endpoint,
	.resolve_peer = verbs_resolve_peer,
	.release_peer = verbs_release_peer,
	.tx_burst = urpc__verbs_tx_burst,
	.tx_flush = urpc__verbs_tx_flush,
	.rx_burst = urpc__verbs_rx_burst,
	.rx_release = urpc__verbs_rx_release,
	.reg_mem = verbs_reg_mem,
	.dereg_mem = verbs_dereg_mem,
	.post_read = urpc__verbs_post_read,
	.post_write = urpc__verbs_post_write,
	.poll_completions = urpc__verbs_poll_completions,
	.wait_arm = verbs_wait_arm,
	.wait_ack = verbs_wait_ack,
	.reg_dmabuf = verbs_reg_dmabuf,
	.ctl_pop = verbs_ctl_pop,
	.ctl_push = verbs_ctl_push,
};

const struct urpc_tp_ops *urpc__tp_verbs_ops(void)
{
	return &verbs_ops;
}
