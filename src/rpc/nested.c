/* SPDX-License-Identifier: MIT */
/*
 * Deadlines that follow nested calls (nested.h, issue 35): a handler reads
 * the time its client has left (urpc_req_deadline_ms()), and a request it
 * makes on the client's behalf inherits that deadline
 * (urpc_req_enqueue_nested()): the earlier of the two deadlines holds, and
 * the nested request carries it on to its own server in turn. Owns
 * nothing: the deadline lives in the handle (deadline.h), the request in
 * client.c's slots.
 * May call: client.h (urpc__cli_enqueue), deadline.h, the Rpc's clock.
 */
#define URPC_LOG_MODULE "nested"
#include "nested.h"

#include <errno.h>

#include "client.h"
#include "deadline.h"

/*
 * The deadline (Rpc clock) of the request of handle @h, in state
 * IN_HANDLER, or 0; the Rpc's now is read first when outside a pass.
 */
static uint64_t handle_deadline(struct urpc_rpc *rpc, const struct urpc_req_handle *h)
{
	if (!rpc->in_loop)
		rpc->now = urpc__rpc_clock(rpc);
	return urpc__dl_abs(rpc->now, h->priv_budget, h->priv_data != NULL);
}

/* The handle @h names a request whose handler has not answered yet, on its owner's thread. */
static int handle_check(const struct urpc_req_handle *h)
{
	const struct urpc_sslot *sl;

	if (!h || !h->priv_rpc)
		return -EINVAL;
	if (!urpc__rpc_is_owner(h->priv_rpc))
		return -EPERM;
	sl = container_of(h, struct urpc_sslot, h);
	if (sl->state != URPC_SRV_IN_HANDLER || h->priv_answer == h)
		return -EINVAL;
	return 0;
}

URPC_API int64_t urpc_req_deadline_ms(const struct urpc_req_handle *h)
{
	uint64_t d;
	int ret = handle_check(h);

	if (ret)
		return ret;
	d = handle_deadline(h->priv_rpc, h);
	if (!d)
		return URPC_NO_DEADLINE;
	if (d <= h->priv_rpc->now)
		return 0;
	return (int64_t)((d - h->priv_rpc->now + 999999) / 1000000);
}

URPC_API int urpc_req_enqueue_nested(struct urpc_req_handle *parent, int session, uint8_t req_type,
				     struct urpc_msgbuf *req, struct urpc_msgbuf *resp,
				     urpc_cont_fn cont, void *tag, uint32_t timeout_ms)
{
	struct urpc_rpc *rpc;
	uint64_t d;
	int ret = handle_check(parent);

	if (ret)
		return ret;
	rpc = parent->priv_rpc;
	d = handle_deadline(rpc, parent);
	if (d && d <= rpc->now)
		return -ETIMEDOUT; /* the client has given up: nothing is sent */
	return urpc__cli_enqueue(rpc, session, req_type, req, resp, cont, tag, timeout_ms, d);
}
