/* SPDX-License-Identifier: MIT */
/*
 * Large messages (large.h). Owns the one-sided operation table (rpc->os[],
 * its free list and its share of rpc->os_busy) and the orphans in it, the
 * grants that let a session's peer READ a large message
 * (urpc__grant_read()), and the entries that hold a server slot's large
 * stored response (sl->large), then, until the client has let go of it,
 * the Rpc's (rpc->retiring). Hands the completions of the users'
 * operations to rop.h, and tells it when a session goes.
 * May call: rop.h (users' completions, a session's end, their batches at
 * destroy), tx.h (forget a freed response's descriptor), msgbuf.h (give
 * buffers back), the pool, the transport's grant/revoke/revoke_ready and
 * rx_burst/poll_completions.
 */
#define URPC_LOG_MODULE "large"
#include "large.h"

#include <errno.h>

#include "../util/log.h"
#include "../util/seam.h"
#include "msgbuf.h"
#include "quota.h"
#include "rop.h"
#include "states.h"
#include "tx.h"

int urpc__grant_read(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_msgbuf *mb,
		     struct urpc_tp_grant *g)
{
	int ret = rpc->tp->ops->grant(rpc->tp, s->peer, urpc__mb_mr(mb), urpc__mb_dma(mb),
				      mb->data_size, URPC_TP_ACCESS_REMOTE_READ, g);

	if (unlikely(ret)) {
		g->key = 0;
		URPC_WARN_RATELIMIT(rpc->id, "no grant for a %zu-byte message: %s", mb->data_size,
				    urpc_strerror(ret));
	}
	return ret;
}

/* May @g be revoked without waiting for its reader (revoke_ready in transport.h)? */
static bool grant_ready(struct urpc_rpc *rpc, struct urpc_tp_grant *g)
{
	return !g->key || !rpc->tp->ops->revoke_ready || rpc->tp->ops->revoke_ready(rpc->tp, g);
}

uint64_t urpc__cli_large_allowance(const struct urpc_session *s)
{
	uint64_t bytes = 0;
	unsigned i;

	for (i = 0; i <= s->slot_mask; i++) {
		const struct urpc_cslot *sl = &s->cli.slots[i];

		if (sl->large_req && sl->state == URPC_CLI_SENT)
			bytes += sl->req->data_size;
	}
	return (bytes >> 16) * 3000000ull;
}

void urpc__cli_grant_read_done(struct urpc_rpc *rpc, struct urpc_tp_grant *g)
{
	if (grant_ready(rpc, g))
		urpc__grant_revoke(rpc, g);
}

/* Revoke @l's grant, give its response back, free it. */
static void srv_large_end(struct urpc_rpc *rpc, struct urpc_srv_large *l)
{
	struct urpc_msgbuf self = l->self;

	urpc__quota_grant_end(rpc, l);
	urpc__grant_revoke(rpc, &l->grant);
	urpc__mb_release(rpc, &l->resp);
	(void)urpc__pool_free(rpc->pool, &self);
}

URPC_COLD int urpc__srv_large_take(struct urpc_rpc *rpc, struct urpc_sslot *sl,
				   struct urpc_msgbuf *resp)
{
	struct urpc_msgbuf self;
	struct urpc_srv_large *l;
	int ret;

	/* Past its share: its responses past their time make room first, oldest first. */
	if (unlikely(urpc__quota_bytes_over(rpc, sl, resp->data_size))) {
		uint32_t b = sl->h.priv_sess->srv.src_bucket;
		struct urpc_sslot *old;

		while (urpc__quota_bytes_over(rpc, sl, resp->data_size) &&
		       (old = urpc__quota_grant_expired(rpc, b)) != NULL)
			urpc__srv_large_retire(rpc, old);
		if (urpc__quota_bytes_refuse(rpc, sl, resp->data_size))
			return -ENOBUFS;
	}
	ret = urpc__pool_alloc(rpc->pool, sizeof(*l), &self);
	if (unlikely(ret)) {
		URPC_WARN_RATELIMIT(rpc->id,
				    "no room to store a %zu-byte response (%s): the Rpc's "
				    "message-buffer pool is capped at 1 GiB",
				    resp->data_size, urpc_strerror(ret));
		return ret;
	}
	l = (struct urpc_srv_large *)(void *)self.buf;
	l->self = self;
	l->resp = *resp;
	memset(&l->grant, 0, sizeof(l->grant));
	memset(resp, 0, sizeof(*resp));
	/* The library's allocation now: copies the handler kept are stale. */
	if (!urpc__mb_is_view(&l->resp))
		urpc__pool_restamp(rpc->pool, &l->resp);
	sl->large = l;
	urpc__quota_grant_start(rpc, l, sl);
	return 0;
}

URPC_COLD void urpc__srv_large_free(struct urpc_rpc *rpc, struct urpc_sslot *sl)
{
	if (!sl->large)
		return;
	srv_large_end(rpc, sl->large);
	sl->large = NULL;
}

URPC_COLD void urpc__srv_large_retire(struct urpc_rpc *rpc, struct urpc_sslot *sl)
{
	struct urpc_srv_large *l = sl->large;

	if (grant_ready(rpc, &l->grant)) {
		urpc__srv_large_free(rpc, sl);
		return;
	}
	urpc__quota_grant_end(rpc, l); /* the client read it, or its time is up */
	l->next = rpc->retiring;
	l->sess_num = sl->h.priv_sess->local_num;
	rpc->retiring = l;
	sl->large = NULL;
	rpc->st.resps_retiring++;
}

/* End what on rpc->retiring came from session @sess_num (UINT32_MAX: all that may end now). */
static void retiring_end(struct urpc_rpc *rpc, uint32_t sess_num)
{
	struct urpc_srv_large **pp = &rpc->retiring, *l;

	while ((l = *pp) != NULL) {
		if (sess_num == UINT32_MAX ? !grant_ready(rpc, &l->grant)
					   : l->sess_num != sess_num) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		srv_large_end(rpc, l);
	}
}

void urpc__srv_large_retiring(struct urpc_rpc *rpc, bool all)
{
	struct urpc_srv_large *l;

	if (!all) {
		retiring_end(rpc, UINT32_MAX);
		return;
	}
	while ((l = rpc->retiring) != NULL) {
		rpc->retiring = l->next;
		srv_large_end(rpc, l);
	}
}

URPC_COLD bool urpc__cli_large_retire(struct urpc_rpc *rpc, struct urpc_session *s,
				      struct urpc_cslot *sl, int status)
{
	struct urpc_cli_retiring *r;
	struct urpc_msgbuf self;

	/* A view's bytes are gone once this pass ends: its continuation cannot wait either. */
	if (grant_ready(rpc, &sl->grant) || sl->resp == &rpc->resp_view ||
	    urpc__pool_alloc(rpc->pool, sizeof(*r), &self)) { /* no room: wait here, as before */
		urpc__grant_revoke(rpc, &sl->grant);
		return false;
	}
	r = (struct urpc_cli_retiring *)(void *)self.buf;
	*r = (struct urpc_cli_retiring){.self = self,
					.grant = sl->grant,
					.next = rpc->cli_retiring,
					.cont = sl->cont,
					.tag = sl->tag,
					.req = sl->req,
					.resp = sl->resp,
					.status = status,
					.sess_num = s->local_num};
	rpc->cli_retiring = r;
	sl->grant.key = 0;
	rpc->st.reqs_retiring++;
	return true;
}

void urpc__cli_retiring(struct urpc_rpc *rpc, bool all)
{
	/* Taken whole: the continuations may add to it. */
	struct urpc_cli_retiring *r, *next = rpc->cli_retiring;

	rpc->cli_retiring = NULL;
	while ((r = next) != NULL) {
		struct urpc_msgbuf self = r->self;
		struct urpc_cli_retiring c = *r;

		next = r->next;
		if (!all && !grant_ready(rpc, &r->grant)) {
			r->next = rpc->cli_retiring;
			rpc->cli_retiring = r;
			continue;
		}
		urpc__grant_revoke(rpc, &c.grant);
		(void)urpc__pool_free(rpc->pool, &self);
		urpc__run_cont(rpc, c.cont, c.tag, c.status, c.resp);
	}
}

URPC_COLD void urpc__large_pkt_fill(struct urpc_large_pkt *p, enum urpc_pkt_type type,
				    uint8_t req_type, const struct urpc_tp_grant *g, uint32_t dest,
				    uint64_t req_num, uint64_t token)
{
	urpc__pkthdr_fill(&p->h, type, req_type, 0, sizeof(p->d), dest, req_num, token);
	p->h.flags = URPC_PKT_F_LARGE;
	p->d.addr = htole64(g->addr);
	p->d.len = htole64(g->len);
	p->d.key = htole64(g->key);
}

void urpc__os_orphan_client(struct urpc_rpc *rpc, struct urpc_cslot *sl, int status)
{
	struct urpc_os_op *op = &rpc->os[sl->os_idx];

	/* The session failed: its request's grant goes now, not at completion. */
	urpc__grant_revoke(rpc, &sl->grant);
	op->orphan = true;
	op->cont = sl->cont;
	op->tag = sl->tag;
	op->req = sl->req;
	op->resp = sl->resp;
	op->status = status;
	urpc__cli_set(rpc, sl, URPC_CLI_FREE);
	sl->req = NULL;
	sl->resp = NULL;
}

/*
 * A completion whose wr_id names no operation in flight (beyond the table,
 * or a free entry): a transport bug. Counted, logged and ignored.
 */
static URPC_COLD void bad_comp(struct urpc_rpc *rpc, const struct urpc_tp_comp *c)
{
	rpc->st.drop_bad_comp++;
	URPC_WARN_RATELIMIT(rpc->id, "a %s completion names no operation in flight (wr_id %llu)",
			    urpc__tp_op_str(c->op), (unsigned long long)c->wr_id);
}

bool urpc__os_take(struct urpc_rpc *rpc, const struct urpc_tp_comp *c, struct urpc_os_op *out)
{
	struct urpc_os_op *op;
	uint16_t i;

	/* The bound first: nothing of os[] is read for a wr_id beyond it. */
	if (unlikely(c->wr_id >= URPC_OS_OPS || !rpc->os[c->wr_id].busy)) {
		if (c->wr_id & URPC_ROP_WR)
			urpc__rop_comp(rpc, c); /* a user's operation: rop.c */
		else
			bad_comp(rpc, c);
		return false;
	}
	i = (uint16_t)c->wr_id;
	op = &rpc->os[i];
	/* Free the entry first: what runs next may start new operations. */
	*out = *op;
	memset(&op->buf, 0, sizeof(op->buf));
	urpc__os_put(rpc, i);
	if (!out->orphan)
		return true;
	if (out->kind == URPC_OS_SRV_REQ)
		urpc__pool_free(rpc->pool, &out->buf);
	else
		urpc__run_cont(rpc, out->cont, out->tag, out->status, out->resp);
	return false;
}

void urpc__os_session_gone(struct urpc_rpc *rpc, struct urpc_session *s)
{
	struct urpc_cli_retiring *r;
	unsigned i;

	urpc__rop_session_gone(rpc, s);

	for (i = 0; i < URPC_OS_OPS; i++) {
		struct urpc_os_op *op = &rpc->os[i];

		if (!op->busy || op->orphan || op->sess_num != s->local_num)
			continue;
		if (op->kind == URPC_OS_CLI_RESP) {
			struct urpc_cslot *sl = &s->cli.slots[op->slot];

			/* Not failed before (fail_all orphans what it finds). */
			urpc__os_orphan_client(rpc, sl, -ECONNRESET);
		} else {
			op->orphan = true;
		}
	}
	if (s->role != URPC_ROLE_SERVER) {
		for (i = 0; i <= s->slot_mask; i++)
			urpc__grant_revoke(rpc, &s->cli.slots[i].grant);
		/* Requests answered: their grants go now, their continuations with the next scan. */
		for (r = rpc->cli_retiring; r; r = r->next)
			if (r->sess_num == s->local_num)
				urpc__grant_revoke(rpc, &r->grant);
		return;
	}
	for (i = 0; i <= s->slot_mask; i++) {
		struct urpc_sslot *sl = &s->srv.slots[i];

		if (sl->large) {
			urpc__tx_forget(rpc, urpc__mb_hdr(&sl->h.priv_resp), NULL);
			urpc__srv_large_free(rpc, sl);
		}
	}
	if (unlikely(rpc->retiring != NULL))
		retiring_end(rpc, s->local_num);
}

bool urpc__os_session_reading(const struct urpc_rpc *rpc, const struct urpc_session *s)
{
	unsigned i;

	if (!rpc->os_busy)
		return false;
	for (i = 0; i < URPC_OS_OPS; i++) {
		const struct urpc_os_op *op = &rpc->os[i];

		if (op->busy && op->kind == URPC_OS_CLI_RESP && op->sess_num == s->local_num)
			return true;
	}
	return false;
}

void urpc__os_drain(struct urpc_rpc *rpc)
{
	uint64_t end = urpc__now_ns() + 5000000000ull;
	struct urpc_tp_rx rx[URPC_RX_BATCH];
	struct urpc_tp_comp c[16];
	struct urpc_os_op op;
	int n, k;

	while (rpc->os_busy && urpc__now_ns() < end) {
		/* loop and udp serve peers' operations inside rx_burst() */
		n = rpc->tp->ops->rx_burst(rpc->tp, rx, URPC_RX_BATCH);
		if (n > 0)
			rpc->tp->ops->rx_release(rpc->tp, rx, (unsigned)n);
		n = rpc->tp->ops->poll_completions(rpc->tp, c, URPC_ARRAY_SIZE(c));
		for (k = 0; k < n; k++)
			if (urpc__os_take(rpc, &c[k], &op))
				URPC_ERR(rpc->id, "a live one-sided operation at destroy");
		urpc__rop_run_due(rpc); /* users' batches that lost their session */
	}
	if (rpc->os_busy)
		URPC_ERR(rpc->id, "%u one-sided operations never completed", rpc->os_busy);
}
