/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's grants: remote access to exact bytes of a
 * registration, for one peer, until revoked (struct urpc_tp_grant in
 * transport.h). It owns the endpoint's table of grants and its windows
 * not bound; it calls verbs_rc.h (to post a bind or an invalidation on an
 * RC QP and wait for it, to start the RC connection a window needs) and
 * verbs_notice.h (to post the notices held while it waited). verbs.c and
 * verbs_hs.c (rebind(), when a renewed pair is READY) call in here.
 *
 * A grant is made one of two ways:
 *
 * - MW: a type-2 memory window, bound by a work request on the RC QP to
 *   the grant's peer over exactly the granted bytes of a registration
 *   made with IBV_ACCESS_MW_BIND (a registration by itself grants no
 *   remote access). Only that QP can use the window's key: any other
 *   peer's request fails at the NIC with a remote access error. grant()
 *   waits for the bind to complete, so the descriptor the engine sends
 *   next on the UD QP (not ordered with the RC QP) never names a window
 *   that is not bound yet. revoke() invalidates it (IBV_WR_LOCAL_INV,
 *   waited for) and keeps it for a later grant under a new key tag; a
 *   window bound VERBS_MW_BINDS times is freed instead, before its 8-bit
 *   tag comes round to an old key. When its QP goes, the window goes
 *   with it (verbs_qp.c) and the grant is DEAD until revoked; but when the
 *   QP is renewed (a cancel, verbs_rc_end.c), the old QP is kept until the
 *   new one is READY, and rebind() then binds the window to the new QP
 *   under the same key, before the handshake's ACK lets the peer post on
 *   it: the descriptor the peer holds keeps working.
 *   Soft-RoCE (rxe, Linux 6.1) checks a request through a window against
 *   the bounds of the registration under it, not the window's own: there
 *   the window is bound over an MR registered for exactly the granted
 *   bytes (with IBV_ACCESS_MW_BIND and no remote access of its own), so
 *   both bounds are the grant's. Such an MR opens nothing by itself, so
 *   verbs_under.c keeps it for the next grant of the same bytes: a
 *   registration per new buffer, not per grant.
 * - MR: an MR registered for exactly the granted bytes, deregistered by
 *   revoke(). Exact in bytes, access and lifetime, but any RC QP of this
 *   endpoint may use its key. Used where the device has no type-2 windows
 *   (or URPC_VERBS_GRANTS=mr), and for a grant to a peer whose RC
 *   connection is not up yet: the grant starts it, so that later grants
 *   to that peer bind windows. It costs a registration per grant.
 *
 * Revoking must wait for the peer: an RC requester may resend a READ
 * (its ack timer fired while the answer was on its way), and a resend
 * that reaches a revoked key is refused, which puts both QPs in the error
 * state although the READ had succeeded. So a reader that is done with a
 * grant sends a release notice on the same QP (verbs_rc.c: a SEND with
 * the high half of the key as immediate), which reaches the owner behind
 * any resend, and revoke() invalidates once that notice has come (or
 * VERBS_RELEASE_NS have passed, for a peer that never read). A caller
 * that can leave the bytes alone meanwhile asks revoke_ready() instead of
 * blocking, and revokes once it says so (the notice came, or
 * VERBS_RELEASE_READY_NS passed since it first asked): the server does
 * this with a large response it retires (large.c).
 *
 * The key the engine holds is (index << 8 | generation) << 32 | rkey
 * (requests on the wire use the low 32 bits), so revoking a grant whose
 * entry was ended under it (its registration or its peer went) finds
 * nothing. Grants are made per large message, not per packet.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_mw.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "verbs_notice.h"
#include "verbs_rc.h"
#include "verbs_under.h"

#define GRANT_NIL UINT32_MAX

/* Reap as urpc__verbs_rc_reap(), holding release notices (verbs_int.h). */
static int reap_holding(struct verbs_tp *v)
{
	int k;

	v->hold_notices = true;
	k = urpc__verbs_rc_reap(v);
	v->hold_notices = false;
	return k;
}

/*
 * Post @wr, local work (a bind or an invalidation), on @p's READY QP and
 * wait for its completion, reaping others meanwhile. 0, or the error that
 * failed the connection (a failed bind leaves the QP in error).
 */
static int post_local_wait(struct verbs_tp *v, struct verbs_conn *p, struct ibv_send_wr *wr)
{
	uint64_t id = VERBS_WR_LOCAL | ++v->local_seq, end = urpc__now_ns() + VERBS_LOCAL_NS;
	struct ibv_send_wr *bad;
	int ret;

	if (p->rc_state != VERBS_RC_READY)
		return p->rc_err ? p->rc_err : -ENOTCONN;
	wr->wr_id = id;
	wr->send_flags |= IBV_SEND_SIGNALED;
	wr->next = NULL;
	ret = ibv_post_send(p->rc_qp, wr, &bad);
	if (unlikely(ret)) {
		urpc__verbs_rc_fail(v, p, -ret, "posting a memory-window operation failed");
		return -ret;
	}
	while (v->local_done != id)
		if (!reap_holding(v) && urpc__now_ns() > end) {
			char why[128];

			snprintf(why, sizeof(why),
				 "%s a memory window never completed (%u operations, %u READs "
				 "ahead of it)",
				 wr->opcode == IBV_WR_BIND_MW ? "binding" : "invalidating",
				 p->rc_posted, p->rd_out);
			urpc__verbs_rc_fail(v, p, -ETIMEDOUT, why);
			return -ETIMEDOUT;
		}
	if (likely(v->local_status == IBV_WC_SUCCESS))
		return 0;
	if (v->local_status == IBV_WC_WR_FLUSH_ERR) {
		urpc__verbs_rc_fail(v, p, -ECONNRESET,
				    "its QP had failed (a flushed window operation)");
		return -ECONNRESET;
	}
	ret = verbs_wc_errno(v->local_status);
	URPC_ERR(v->base.id, "RC QP %u: %s a memory window: %s", p->rc_qp->qp_num,
		 wr->opcode == IBV_WR_BIND_MW ? "binding" : "invalidating",
		 ibv_wc_status_str(v->local_status));
	urpc__verbs_rc_fail(v, p, ret, NULL);
	return ret;
}

static int post_local(struct verbs_tp *v, struct verbs_conn *p, struct ibv_send_wr *wr)
{
	int ret = post_local_wait(v, p, wr);

	if (v->nheld)
		urpc__verbs_notice_post_held(v);
	return ret;
}

static int idle_push(struct verbs_tp *v, struct ibv_mw *mw, uint32_t binds)
{
	if (v->nidle_mw == v->idle_mw_cap) {
		uint32_t cap = v->idle_mw_cap ? v->idle_mw_cap * 2 : 16;
		struct verbs_idle_mw *n = realloc(v->idle_mw, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		v->idle_mw = n;
		v->idle_mw_cap = cap;
	}
	v->idle_mw[v->nidle_mw].mw = mw;
	v->idle_mw[v->nidle_mw].binds = binds;
	v->nidle_mw++;
	return 0;
}

/* How grants are made (URPC_VERBS_GRANTS; docs/ENGINE.md). */
enum mw_mode {
	MW_AUTO,  /* windows where the device has them; over an MR of the bytes on rxe */
	MW_NEVER, /* "mr": an MR of exactly the bytes per grant */
	MW_ON_MR, /* "mw-mr": windows, each over an MR of the bytes, on any device */
	MW_ON_REG /* "mw": windows over the registration itself (to measure) */
};

static enum mw_mode mw_mode_from_env(struct verbs_tp *v)
{
	static const char *const names[] = {
		[MW_AUTO] = "auto", [MW_NEVER] = "mr", [MW_ON_MR] = "mw-mr", [MW_ON_REG] = "mw"};
	const char *env = getenv("URPC_VERBS_GRANTS");
	unsigned m;

	if (!env || !*env)
		return MW_AUTO;
	for (m = 0; m < URPC_ARRAY_SIZE(names); m++)
		if (!strcmp(env, names[m]))
			return (enum mw_mode)m;
	URPC_WARN_RATELIMIT(v->base.id,
			    "URPC_VERBS_GRANTS='%s' is none of auto, mr, mw-mr, mw: using auto",
			    env);
	return MW_AUTO;
}

void urpc__verbs_mw_init(struct verbs_tp *v)
{
	static atomic_flag logged = ATOMIC_FLAG_INIT;
	enum mw_mode asked = mw_mode_from_env(v), mode = asked;
	struct ibv_device_attr da;
	struct ibv_mw *mw = NULL;
	bool rxe;
	int err = 0;

	v->grant_free = GRANT_NIL;
	rxe = !ibv_query_device(v->ctx, &da) && da.vendor_id == VERBS_RXE_VENDOR;
	/*
	 * On rxe the windows stay off unless asked for: there a bind or an
	 * invalidation waits behind READs that rxe retries under emulation
	 * (268 ms per try), longer than VERBS_LOCAL_NS with many large
	 * messages in flight (test_large_verbs, MTU 9000; docs/SECURITY.md).
	 */
	if (mode == MW_AUTO && rxe)
		mode = MW_NEVER;
	if (mode != MW_NEVER) {
		mw = ibv_alloc_mw(v->pd, IBV_MW_TYPE_2);
		err = mw ? 0 : (errno ? errno : EOPNOTSUPP);
	}
	if (mw && idle_push(v, mw, 0)) {
		ibv_dealloc_mw(mw);
		mw = NULL;
		err = ENOMEM;
	}
	v->use_mw = mw != NULL;
	/* Soft-RoCE checks a window's requests against its MR's bounds only. */
	v->mw_own_bounds = mode == MW_ON_REG || (mode == MW_AUTO && !rxe);
	if (atomic_flag_test_and_set(&logged))
		return;
	if (v->use_mw)
		URPC_INFO(v->base.id,
			  "%s: grants bind type-2 memory windows to the peer's RC QP (exact bytes, "
			  "one peer)%s",
			  v->port.dev,
			  v->mw_own_bounds ? ""
					   : ", over an MR of the granted bytes (the device checks "
					     "windows against their MR's bounds)");
	else
		URPC_WARN(
			v->base.id,
			"%s: %s: each grant registers an MR of its own (exact bytes and lifetime, "
			"but not tied to the peer's QP)",
			v->port.dev,
			asked == MW_NEVER ? "URPC_VERBS_GRANTS=mr"
			: rxe ? "windows are off on Soft-RoCE (URPC_VERBS_GRANTS=mw-mr turns them on)"
			      : "no type-2 memory windows on this device");
	if (err)
		URPC_DBG(v->base.id, "ibv_alloc_mw(type 2): %s", strerror(err));
}

int urpc__verbs_mw_reg_access(const struct verbs_tp *v)
{
	return v->use_mw ? IBV_ACCESS_MW_BIND : 0;
}

static int entry_get(struct verbs_tp *v, uint32_t *out)
{
	if (v->grant_free == GRANT_NIL) {
		uint32_t cap = v->grants_cap ? v->grants_cap * 2 : 64, i;
		struct verbs_grant *n = realloc(v->grants, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + v->grants_cap, 0, (cap - v->grants_cap) * sizeof(*n));
		for (i = v->grants_cap; i < cap; i++)
			n[i].next_free = i + 1 < cap ? i + 1 : GRANT_NIL;
		v->grant_free = v->grants_cap;
		v->grants = n;
		v->grants_cap = cap;
	}
	*out = v->grant_free;
	v->grant_free = v->grants[*out].next_free;
	return 0;
}

static void entry_put(struct verbs_tp *v, uint32_t idx)
{
	struct verbs_grant *e = &v->grants[idx];

	e->kind = VERBS_GRANT_FREE;
	e->mw = NULL;
	e->mr = NULL;
	e->under = false;
	e->reg = NULL;
	e->conn = NULL;
	e->peer = NULL;
	e->next_free = v->grant_free;
	v->grant_free = idx;
}

static int remote_access(unsigned access)
{
	return (access & URPC_TP_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0) |
	       (access & URPC_TP_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
}

/*
 * Bind @mw over e->addr/len with e->access, on @under, under key @rkey,
 * to the READY QP of @e's connection.
 */
static int post_bind(struct verbs_tp *v, struct verbs_grant *e, struct ibv_mw *mw,
		     struct ibv_mr *under, uint32_t rkey)
{
	struct ibv_send_wr wr;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = under;
	wr.bind_mw.bind_info.addr = e->addr;
	wr.bind_mw.bind_info.length = e->len;
	wr.bind_mw.bind_info.mw_access_flags = (unsigned)remote_access(e->access);
	ret = post_local(v, e->conn, &wr);
	if (ret)
		return ret;
	mw->rkey = rkey; /* the provider names a window by its current key */
	e->qp_num = e->conn->rc_qp->qp_num;
	return 0;
}

/* Let go of @e's own MR, or of the one under its window. */
static void mr_put(struct verbs_tp *v, struct verbs_grant *e)
{
	if (e->mr && e->under)
		urpc__verbs_under_put(v, e->mr);
	else if (e->mr)
		ibv_dereg_mr(e->mr);
	e->mr = NULL;
	e->under = false;
}

/*
 * Bind a window over [@a, @a + @len) of @mr (or of an MR of exactly those
 * bytes, where windows are checked against their MR's bounds) on the
 * READY QP of @e's peer.
 */
static int bind_window(struct verbs_tp *v, struct verbs_grant *e, const struct urpc_tp_mr *mr,
		       uintptr_t a, size_t len, unsigned access)
{
	struct verbs_idle_mw w = {NULL, 0};
	struct ibv_mr *under = mr->handle;
	int ret;

	if (!v->mw_own_bounds) {
		under = urpc__verbs_under_get(v, mr->handle, a, len);
		if (!under)
			return -errno;
		e->mr = under;
		e->under = true;
	}
	if (v->nidle_mw)
		w = v->idle_mw[--v->nidle_mw];
	else if (!(w.mw = ibv_alloc_mw(v->pd, IBV_MW_TYPE_2)))
		ret = errno ? -errno : -ENOMEM;
	if (!w.mw)
		goto out_mr;
	e->addr = a;
	e->len = (uint32_t)len;
	e->access = access;
	ret = post_bind(v, e, w.mw, under, ibv_inc_rkey(w.mw->rkey));
	if (ret) {
		ibv_dealloc_mw(w.mw); /* its state after a failed bind is not known */
		goto out_mr;
	}
	e->kind = VERBS_GRANT_MW;
	e->mw = w.mw;
	e->binds = w.binds + 1;
	e->rkey = w.mw->rkey;
	return 0;

out_mr:
	mr_put(v, e);
	return ret;
}

/*
 * Window @e (REBIND) is bound to its connection's old QP: invalidate it
 * (any QP of the protection domain may, on rxe at least; that also lets
 * go of the old QP) and bind it to the new one under the same key, so the
 * key the peer holds opens the same bytes again. It is not a new key: the
 * grant was never revoked.
 */
static int rebind_one(struct verbs_tp *v, struct verbs_grant *e)
{
	struct ibv_send_wr wr;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = e->rkey;
	ret = post_local(v, e->conn, &wr);
	if (!ret)
		ret = post_bind(v, e, e->mw, e->mr ? e->mr : (struct ibv_mr *)(uintptr_t)e->reg,
				e->rkey);
	if (!ret)
		e->kind = VERBS_GRANT_MW;
	return ret;
}

void urpc__verbs_mw_rebind(struct verbs_tp *v, struct verbs_conn *c)
{
	uint32_t i, n = 0, dead = 0;

	for (i = 0; i < v->grants_cap; i++) {
		struct verbs_grant *e = &v->grants[i];

		if (e->kind != VERBS_GRANT_REBIND || e->conn != c)
			continue;
		n++;
		if (c->rc_state == VERBS_RC_READY && !rebind_one(v, e))
			continue;
		ibv_dealloc_mw(e->mw); /* invalidates it, and lets go of the old QP */
		e->mw = NULL;
		e->kind = VERBS_GRANT_DEAD;
		dead++;
	}
	if (c->old_qp)
		ibv_destroy_qp(c->old_qp);
	c->old_qp = NULL;
	if (dead)
		URPC_WARN_RATELIMIT(
			v->base.id,
			"peer QPN %u: %u of %u memory windows could not be bound to the "
			"renewed RC QP: requests with their keys are refused",
			c->qpn, dead, n);
}

/* Register exactly [@a, @a + @len) for @e alone. */
static int own_mr(struct verbs_tp *v, struct verbs_grant *e, uintptr_t a, size_t len,
		  unsigned access)
{
	struct ibv_mr *m =
		ibv_reg_mr(v->pd, (void *)a, len, IBV_ACCESS_LOCAL_WRITE | remote_access(access));

	if (!m)
		return errno ? -errno : -ENOMEM;
	e->kind = VERBS_GRANT_MR;
	e->mr = m;
	e->rkey = m->rkey;
	return 0;
}

int urpc__verbs_mw_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
			 const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g)
{
	struct verbs_tp *v = to_verbs(tp);
	uintptr_t a = (uintptr_t)addr, base = mr ? (uintptr_t)mr->addr : 0;
	struct verbs_grant *e;
	uint32_t idx;
	int ret;

	if (unlikely(!peer || !mr || !mr->handle || !len || !access ||
		     (access & ~(URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)) ||
		     ((access << 2) & ~mr->access) || a < base || len > mr->len ||
		     a - base > mr->len - len || len > UINT32_MAX))
		return -EINVAL;
	ret = entry_get(v, &idx);
	if (unlikely(ret))
		return ret;
	if (unlikely(idx >= 1u << 24)) { /* the index has 24 bits in a key */
		entry_put(v, idx);
		return -ENOSPC;
	}
	e = &v->grants[idx];
	e->gen = e->gen % 255 + 1;
	e->released = false;
	e->release_by = 0;
	e->peer = peer;
	e->conn = peer->conn;
	e->reg = mr->handle;
	ret = -ENOTCONN;
	if (v->use_mw) {
		if (e->conn->rc_state == VERBS_RC_NONE)
			urpc__verbs_rc_start(v, e->conn); /* for the next grants */
		if (e->conn->rc_state == VERBS_RC_READY)
			ret = bind_window(v, e, mr, a, len, access);
	}
	if (ret)
		ret = own_mr(v, e, a, len, access);
	if (unlikely(ret)) {
		URPC_ERR_RATELIMIT(v->base.id, "no grant of %zu bytes to peer QPN %u: %s", len,
				   peer->qpn, strerror(-ret));
		entry_put(v, idx);
		return ret;
	}
	g->addr = a;
	g->len = len;
	g->key = (uint64_t)(idx << 8 | e->gen) << 32 | e->rkey;
	g->access = access;
	g->handle = idx + 1;
	tp->stats.grants_live++;
	verbs_rx_pick(v);
	return 0;
}

/* End entry @idx: nobody can use its key when this returns. */
static void entry_end(struct verbs_tp *v, uint32_t idx)
{
	struct verbs_grant *e = &v->grants[idx];
	struct verbs_conn *c = e->conn;
	uint64_t end = urpc__now_ns() + VERBS_RELEASE_NS;
	struct ibv_send_wr wr;

	/* Its peer's resent requests come before its notice (see the top). */
	if (e->release_by && e->release_by < end)
		end = e->release_by; /* revoke_ready() said so: it waited long enough */
	while (!e->released && e->kind != VERBS_GRANT_DEAD && c->rc_state == VERBS_RC_READY &&
	       urpc__now_ns() < end)
		reap_holding(v);
	if (v->nheld)
		urpc__verbs_notice_post_held(v);
	switch (e->kind) {
	case VERBS_GRANT_REBIND: /* bound to the old QP, kept for it */
		ibv_dealloc_mw(e->mw);
		break;
	case VERBS_GRANT_MW:
		if (c->rc_state == VERBS_RC_READY && c->rc_qp->qp_num == e->qp_num) {
			memset(&wr, 0, sizeof(wr));
			wr.opcode = IBV_WR_LOCAL_INV;
			wr.invalidate_rkey = e->rkey;
			if (!post_local(v, c, &wr) && e->binds < VERBS_MW_BINDS &&
			    !idle_push(v, e->mw, e->binds))
				break;
		}
		ibv_dealloc_mw(e->mw); /* invalidates it, whatever its QP's state */
		break;
	case VERBS_GRANT_MR:
	case VERBS_GRANT_DEAD:
	case VERBS_GRANT_FREE:
		break;
	}
	mr_put(v, e); /* after the window on it is gone */
	entry_put(v, idx);
	v->base.stats.grants_live--;
	verbs_rx_pick(v);
}

/* The live entry @g names, or NULL (revoked, or ended under it). */
static struct verbs_grant *entry_of(struct verbs_tp *v, const struct urpc_tp_grant *g)
{
	uint32_t idx = g->handle - 1;

	if (g->key && g->handle && idx < v->grants_cap && v->grants[idx].kind != VERBS_GRANT_FREE &&
	    v->grants[idx].gen == ((uint32_t)(g->key >> 32) & 0xff) &&
	    v->grants[idx].rkey == (uint32_t)g->key)
		return &v->grants[idx];
	return NULL;
}

void urpc__verbs_mw_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g)
{
	struct verbs_tp *v = to_verbs(tp);

	if (entry_of(v, g))
		entry_end(v, g->handle - 1);
	g->key = 0;
}

bool urpc__verbs_mw_revoke_ready(struct urpc_tp *tp, struct urpc_tp_grant *g)
{
	struct verbs_tp *v = to_verbs(tp);
	struct verbs_grant *e = entry_of(v, g);
	uint64_t now;

	if (!e || e->released || e->kind == VERBS_GRANT_DEAD || e->conn->rc_state != VERBS_RC_READY)
		return true;
	now = urpc__now_ns();
	if (!e->release_by)
		e->release_by = now + VERBS_RELEASE_READY_NS;
	return now >= e->release_by;
}

void urpc__verbs_mw_mr_gone(struct verbs_tp *v, const void *mr_handle)
{
	uint32_t i;

	for (i = 0; i < v->grants_cap; i++)
		if (v->grants[i].kind != VERBS_GRANT_FREE && v->grants[i].reg == mr_handle)
			entry_end(v, i);
	urpc__verbs_under_gone(v, mr_handle);
}

void urpc__verbs_mw_peer_gone(struct verbs_tp *v, const struct urpc_tp_peer *h)
{
	uint32_t i;

	for (i = 0; i < v->grants_cap; i++)
		if (v->grants[i].kind != VERBS_GRANT_FREE && v->grants[i].peer == h)
			entry_end(v, i);
}

void urpc__verbs_mw_fini(struct verbs_tp *v)
{
	uint32_t i;

	for (i = 0; i < v->grants_cap; i++) {
		if (v->grants[i].kind == VERBS_GRANT_MW || v->grants[i].kind == VERBS_GRANT_REBIND)
			ibv_dealloc_mw(v->grants[i].mw);
		if (v->grants[i].kind != VERBS_GRANT_FREE)
			mr_put(v, &v->grants[i]);
	}
	urpc__verbs_under_gone(v, NULL); /* after the windows on them */
	for (i = 0; i < v->nidle_mw; i++)
		ibv_dealloc_mw(v->idle_mw[i].mw);
	free(v->grants);
	free(v->idle_mw);
	v->grants = NULL;
	v->idle_mw = NULL;
	v->grants_cap = v->nidle_mw = v->idle_mw_cap = 0;
}
