/* SPDX-License-Identifier: MIT */
/*
 * A large request's READ on the server (server_read.h): the operation
 * posted for its descriptor, within the per-source share of operations
 * (quota.h), and posted again when it timed out without progress while no
 * one waits. Owns nothing of its own: the slot's request number and state
 * (READING) are set here as the server's receive would set them.
 * May call: large.h (descriptors, operations), quota.h, the pool,
 * states.h, the transport's post_read. The error answers are the caller's
 * (server.c).
 */
#define URPC_LOG_MODULE "server"
#include "server_read.h"

#include <errno.h>

#include "../util/log.h"
#include "large.h"
#include "quota.h"
#include "states.h"

int urpc__srv_read_req(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
		       const struct urpc_pkthdr *h, const uint8_t *data, uint32_t len)
{
	uint64_t prev = sl->cur_req_num, total;
	struct urpc_large_desc d;
	struct urpc_os_op *op;
	uint16_t i;
	int ret;

	if (unlikely(!urpc__large_desc_parse(rpc, data, len, &d)))
		return 0;
	total = le64toh(d.len);
	sl->cur_req_num = le64toh(h->req_num);
	if (unlikely(!total || total > URPC_MAX_MSG_SIZE)) {
		return EMSGSIZE;
	}
	/* A fair share of the operations per source address (quota.h). */
	if (unlikely(urpc__quota_op_refuse(rpc, s)))
		goto out_wait;
	i = urpc__os_get(rpc);
	if (unlikely(i == URPC_OS_NIL))
		goto out_wait;
	op = &rpc->os[i];
	ret = urpc__pool_alloc(rpc->pool, (size_t)total, &op->buf);
	if (unlikely(ret)) {
		urpc__os_put(rpc, i);
		URPC_WARN_RATELIMIT(rpc->id, "no buffer for a %llu-byte request: %s",
				    (unsigned long long)total, urpc_strerror(ret));
		return ENOMEM;
	}
	ret = rpc->tp->ops->post_read(rpc->tp, s->peer, op->buf.buf,
				      urpc__pool_reg_handle(&op->buf), le64toh(d.addr),
				      le64toh(d.key), (size_t)total, i);
	if (unlikely(ret)) {
		urpc__pool_free(rpc->pool, &op->buf);
		urpc__os_put(rpc, i);
		if (ret == -EAGAIN)
			goto out_wait;
		return -ret;
	}
	op->kind = URPC_OS_SRV_REQ;
	urpc__quota_op_take(rpc, s, op);
	op->sess_num = s->local_num;
	op->slot = sl->idx;
	op->req_num = sl->cur_req_num;
	op->len = (size_t)total;
	op->req_type = h->req_type;
	op->deadline_ns = h->budget_us ? rpc->now + (uint64_t)le32toh(h->budget_us) * 1000 : 0;
	op->raddr = le64toh(d.addr);
	op->rkey = le64toh(d.key);
	op->start_ns = URPC_MAX(rpc->now, 1);
	op->post_ns = rpc->now;
	urpc__srv_set(rpc, sl, URPC_SRV_READING);
	return 0;

out_wait:
	urpc__quota_op_waited(rpc); /* contention: slow READs may be cut (quota.h) */
	sl->cur_req_num = prev;	    /* not taken: its retransmission is new again */
	return 0;
}

/*
 * The READ of @done (taken from os[]) timed out without progress: post it
 * again in a new entry, unless others wait for operations, the session is
 * no longer CONNECTED (quota.h), or the transport failed it well before
 * its time-out could pass (it refused it at once, as verbs does on a
 * connection whose handshake timed out, until the session is reset:
 * posting again would spin).
 * True when posted.
 */
URPC_COLD bool urpc__srv_read_again(struct urpc_rpc *rpc, const struct urpc_os_op *done)
{
	struct urpc_session *s = rpc->sessions[done->sess_num];
	struct urpc_os_op *op;
	uint16_t i;

	if (done->kind != URPC_OS_SRV_REQ || !done->start_ns || urpc__quota_contended(rpc) ||
	    s->state != URPC_SESS_CONNECTED || s->role != URPC_ROLE_SERVER ||
	    urpc__os_failed_at_once(rpc, done))
		return false;
	i = urpc__os_get(rpc);
	if (i == URPC_OS_NIL)
		return false;
	if (rpc->tp->ops->post_read(rpc->tp, s->peer, done->buf.buf,
				    urpc__pool_reg_handle(&done->buf), done->raddr, done->rkey,
				    done->len, i)) {
		urpc__os_put(rpc, i);
		return false;
	}
	op = &rpc->os[i];
	*op = *done;
	op->busy = true;
	op->orphan = false;
	op->post_ns = rpc->now;
	urpc__quota_op_take(rpc, s, op);
	rpc->st.os_reposted++;
	return true;
}
