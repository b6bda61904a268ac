/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's set_peer_window and peer_os_rtt (verbs_rc_win.h
 * says what they keep and why), which verbs.c puts in its ops table, and
 * the chains of chunks that go to the NIC within the window, which
 * verbs_rc.c posts. Calls ibv_post_send() and the log, nothing else.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_rc_win.h"

#include <string.h>

#include "../util/log.h"

/*
 * A window narrowed takes effect as chunks come back; one widened, at the
 * next completion on the connection (there is one: an operation waits
 * only while others are out).
 */
void urpc__verbs_rc_set_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes)
{
	(void)tp;
	if (peer && peer->conn)
		peer->conn->os_window = bytes;
}

uint64_t urpc__verbs_rc_os_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes)
{
	struct verbs_conn *p = peer ? peer->conn : NULL;
	uint64_t rtt = p ? p->os_rtt_ns : 0;

	(void)tp;
	if (rtt) {
		p->os_rtt_ns = 0;
		*bytes = p->os_rtt_bytes;
	}
	return rtt;
}

/*
 * Hand up to @max more chunks of op @idx to its connection's QP, as one
 * chain, each signaled: a chunk's completion is progress (what the
 * deadline counts from) and lets the next chunk go (verbs_rc.c reaps the
 * completions), so an operation has at most v->rc_chunks work requests at
 * the NIC. 0, or the positive errno of ibv_post_send() (a prefix of the
 * chain may have gone).
 */
int urpc__verbs_win_post_chunks(struct verbs_tp *v, uint16_t idx, unsigned max)
{
	struct verbs_op *op = &v->ops[idx];
	struct ibv_send_wr wr[VERBS_RC_CHUNKS], *bad = NULL;
	struct ibv_sge sge[VERBS_RC_CHUNKS];
	uint32_t off = op->off;
	unsigned n = 0, k;
	int ret;

	/*
	 * READs beyond the QP's rd_atomic would wait in the send queue, and
	 * so would everything posted behind them: release notices, binds.
	 */
	if (op->kind == URPC_TP_OP_READ)
		max = URPC_MIN(max, v->rd_atomic - op->conn->rd_out);
	memset(wr, 0, sizeof(wr));
	while (n < max && off < op->len) {
		uint32_t len = URPC_MIN(op->chunk, op->len - off);

		if (!urpc__verbs_win_room(op->conn, op, n, len))
			break;
		urpc__verbs_win_post(op->conn, op, idx, len, off / op->chunk + 1);
		sge[n] = (struct ibv_sge){(uintptr_t)op->local + off, len, op->lkey};
		wr[n].wr_id = idx;
		wr[n].sg_list = &sge[n];
		wr[n].num_sge = 1;
		wr[n].opcode = op->kind == URPC_TP_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr[n].wr.rdma.remote_addr = op->raddr + off;
		wr[n].wr.rdma.rkey = op->rkey;
		wr[n].send_flags = IBV_SEND_SIGNALED;
		wr[n].next = &wr[n + 1];
		off += len;
		n++;
	}
	if (!n)
		return 0;
	wr[n - 1].next = NULL;
	ret = ibv_post_send(op->conn->rc_qp, wr, &bad);
	if (unlikely(ret)) {
		URPC_ERR_RATELIMIT(v->base.id, "RDMA %s of %u bytes could not be posted: %s",
				   urpc__tp_op_str(op->kind), op->len, strerror(ret));
		k = bad ? (unsigned)(bad - wr) : 0;
		for (off = op->off; n > k; n--) /* never went: out of the window's books */
			urpc__verbs_win_undo(op->conn, op, idx, sge[n - 1].length);
		for (k = 0; k < n; k++)
			off += sge[k].length;
	}
	op->off = off;
	op->inflight = (uint16_t)(op->inflight + n);
	if (op->kind == URPC_TP_OP_READ)
		op->conn->rd_out += n;
	return ret;
}
