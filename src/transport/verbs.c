/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's top: endpoint create/destroy, peers (connections
 * and their address handles), memory registration, idle waiting and the
 * ops table. It calls down into verbs_ud.c (datagrams), verbs_mw.c
 * (grants), verbs_hs.c (the RC handshake), verbs_rc.c (RC connections and
 * one-sided operations), verbs_rc_poll.c (their completions), verbs_rc_end.c
 * (cancel, and operations ending with their handle, connection or memory)
 * and verbs_ctl.c (the outbox of control messages); none of them calls up.
 * verbs_int.h holds the types; tp_default.h the ops it does not have
 * (ep_host: a verbs endpoint is a QP on the fabric, not an IP host).
 *
 * Endpoint bytes (VERBS_EP_LEN, little-endian):
 *   0  u8  kind (URPC_TRANSPORT_VERBS)   1  u8  VERBS_EP_VERSION
 *   2  u8  1 for RoCE (GRH), 0 for IB    3  u8  0
 *   4  u32 UD QPN                        8  u16 LID, 10 u16 0
 *  12  u32 active MTU in bytes          16  u32 nonce
 *  20  u8[16] GID
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "tp_default.h"
#include "verbs_ctl.h"
#include "verbs_dev.h"
#include "verbs_hs.h"
#include "verbs_mw.h"
#include "verbs_rc.h"
#include "verbs_rc_end.h"
#include "verbs_rc_poll.h"
#include "verbs_rc_win.h"
#include "verbs_ud.h"

static const struct urpc_tp_ops verbs_ops;
static int verbs_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "verbs.c assumes a little-endian host (the wire format is little-endian)"
#endif

/* ---- create and destroy -------------------------------------------------- */

static void verbs_free(struct verbs_tp *v)
{
	urpc__verbs_mw_fini(v);
	urpc__verbs_ud_free(v);
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
	v->port.mtu_enum = verbs_mtu_enum(port.active_mtu);
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
	if (env && *env) {
		char *end;
		unsigned long c;

		errno = 0;
		c = strtoul(env, &end, 0);
		if (errno || *end || end == env || (c && (c < 4096 || c > 1ul << 30)))
			URPC_WARN(cfg->id,
				  "URPC_VERBS_RC_CHUNK=%s ignored: give 0 (no chunks) or bytes "
				  "from 4096 to 2^30; chunks stay %u bytes",
				  env, v->rc_chunk);
		else
			v->rc_chunk = (uint32_t)c;
	}
	if (v->rc_chunks <= 1) { /* no room for chains: one work request per operation */
		v->rc_chunks = 1;
		v->rc_chunk = 0;
	}
	if ((uint32_t)da.max_qp_wr < cfg->sq_depth || (uint32_t)da.max_qp_wr < cfg->rq_depth) {
		URPC_ERR(cfg->id, "%s allows %d WRs per queue; asked for sq %u, rq %u", v->port.dev,
			 da.max_qp_wr, cfg->sq_depth, cfg->rq_depth);
		return -EINVAL;
	}
	return 0;
}

static int verbs_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct verbs_tp *v;
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
	v->base.caps =
		URPC_TP_CAP_ONE_SIDED_HW | URPC_TP_CAP_WAIT | URPC_TP_CAP_DMABUF | URPC_TP_CAP_CTL;
	v->base.id = cfg->id;
	v->nonce = verbs_random32();
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
	ret = urpc__verbs_ud_create(v, cfg);
	if (ret)
		goto out_free;
	if (v->base.max_inline)
		v->base.caps |= URPC_TP_CAP_INLINE;
	urpc__verbs_rc_init(v);
	urpc__verbs_mw_init(v);

	v->base.ops = &verbs_ops;
	v->rx_side = verbs_rx_burst;
	v->rx_plain = urpc__verbs_ud_rx_burst;
	verbs_rx_pick(v);
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

static void conn_put(struct verbs_tp *v, struct verbs_conn *p)
{
	if (--p->refs)
		return;
	urpc__verbs_rc_conn_fini(v, p);
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

	urpc__verbs_mw_peer_gone(v, h);
	urpc__verbs_rc_peer_quiesce(v, h);
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

#define VERBS_ACCESS_ALL URPC_TP_ACCESS_ALL

/*
 * Verbs access flags for URPC_TP_ACCESS_* bits (local write always). The
 * GRANT_* bits open nothing by themselves: they let grants be made on the
 * registration (verbs_mw.c).
 */
static int ibv_access(const struct verbs_tp *v, unsigned access)
{
	int flags = IBV_ACCESS_LOCAL_WRITE;

	if (access & URPC_TP_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & URPC_TP_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & (URPC_TP_ACCESS_GRANT_READ | URPC_TP_ACCESS_GRANT_WRITE))
		flags |= urpc__verbs_mw_reg_access(v);
	return flags;
}

/* The RC QP names the peer: no token travels. */
static void verbs_set_peer_token(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t token)
{
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
	m = ibv_reg_mr(v->pd, addr, len, ibv_access(v, access));
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
	m = ibv_reg_dmabuf_mr(v->pd, offset, len, iova, fd, ibv_access(v, access));
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

	if (!mr || !mr->handle)
		return;
	urpc__verbs_mw_mr_gone(v, mr->handle);
	urpc__verbs_rc_mr_quiesce(v, mr->handle);
	ibv_dereg_mr(mr->handle);
	mr->handle = NULL;
	v->nregs--;
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

/* ---- the datapath: down into verbs_ud.c and verbs_rc.c, timers from here ---- */

/*
 * Datagrams; the RC handshake's timers ride along while one is pending,
 * and while grants live, their readers' release notices are reaped (their
 * receives go back): the engine polls completions only while operations
 * of its own are in flight, and a user's exposure outlives them.
 */
static URPC_COLD int rx_burst_side(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);

	if (v->npending)
		urpc__verbs_hs_timers(v, urpc__now_ns());
	if (v->base.stats.grants_live)
		urpc__verbs_rc_reap(v);
	return urpc__verbs_ud_rx_burst(tp, pkts, n);
}

/*
 * ops->rx_burst, and base.rx_burst while there is such work (verbs_rx_pick(),
 * which otherwise has the event loop call urpc__verbs_ud_rx_burst() itself).
 */
static int verbs_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);

	if (unlikely(v->npending || v->base.stats.grants_live))
		return rx_burst_side(tp, pkts, n);
	return urpc__verbs_ud_rx_burst(tp, pkts, n);
}

static int verbs_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n)
{
	struct verbs_tp *v = to_verbs(tp);

	if (unlikely(v->npending))
		urpc__verbs_hs_timers(v, urpc__now_ns());
	return urpc__verbs_rc_poll_completions(tp, comps, n);
}

static const struct urpc_tp_ops verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
	.destroy = verbs_destroy,
	.get_endpoint = verbs_get_endpoint,
	.resolve_peer = verbs_resolve_peer,
	.release_peer = verbs_release_peer,
	.ep_host = urpc__tp_default_ep_host,
	.tx_burst = urpc__verbs_ud_tx_burst,
	.tx_flush = urpc__verbs_ud_tx_flush,
	.tx_now = urpc__tp_default_tx_now,
	.rx_burst = verbs_rx_burst,
	.rx_run = urpc__tp_default_rx_run,
	.rx_release = urpc__verbs_ud_rx_release,
	.reg_mem = verbs_reg_mem,
	.dereg_mem = verbs_dereg_mem,
	.post_read = urpc__verbs_rc_post_read,
	.post_write = urpc__verbs_rc_post_write,
	.set_peer_token = verbs_set_peer_token,
	.set_peer_window = urpc__verbs_rc_set_window,
	.peer_os_rtt = urpc__verbs_rc_os_rtt,
	.grant = urpc__verbs_mw_grant,
	.revoke = urpc__verbs_mw_revoke,
	.revoke_ready = urpc__verbs_mw_revoke_ready,
	.poll_completions = verbs_poll_completions,
	.cancel = urpc__verbs_rc_cancel,
	.os_idle = urpc__verbs_rc_os_idle,
	.wait_arm = verbs_wait_arm,
	.wait_ack = verbs_wait_ack,
	.reg_dmabuf = verbs_reg_dmabuf,
	.ctl_pop = urpc__verbs_ctl_pop,
	.ctl_push = urpc__verbs_hs_ctl_push,
};

const struct urpc_tp_ops *urpc__tp_verbs_ops(void)
{
	return &verbs_ops;
}
