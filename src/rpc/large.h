/* SPDX-License-Identifier: MIT */
/*
 * Large messages: their descriptors, and the table of one-sided operations
 * (rpc->os[]) that READ them, with the orphans a failed session leaves.
 * The client and server files start operations here; the event loop hands
 * completions to urpc__os_take() and the owner of what remains.
 */
#ifndef URPC_RPC_LARGE_H
#define URPC_RPC_LARGE_H

#include <string.h>

#include "engine.h"
#include "quota.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A free entry of the operation table (busy from now on), or URPC_OS_NIL. */
static inline uint16_t urpc__os_get(struct urpc_rpc *rpc)
{
	uint16_t i = rpc->os_free;

	if (unlikely(i == URPC_OS_NIL))
		return i;
	rpc->os_free = rpc->os[i].next_free;
	rpc->os[i].busy = true;
	rpc->os[i].orphan = false;
	rpc->os_busy++;
	return i;
}

/*
 * A READ that timed out may be posted again (server.c, client.c) unless
 * the transport failed it well before its time-out could pass: it refused
 * it at once, and posting again would spin.
 */
static inline bool urpc__os_failed_at_once(const struct urpc_rpc *rpc, const struct urpc_os_op *op)
{
	return rpc->now - op->post_ns < rpc->tp->one_sided_timeout_ns / 2;
}

static inline void urpc__os_put(struct urpc_rpc *rpc, uint16_t i)
{
	if (unlikely(rpc->os[i].src_bucket))
		urpc__quota_op_put(rpc, &rpc->os[i]);
	rpc->os[i].busy = false;
	rpc->os[i].next_free = rpc->os_free;
	rpc->os_free = i;
	rpc->os_busy--;
}

/*
 * Grant session @s's peer READ of exactly @mb's data bytes (where the
 * transport reads them: a GPU view's staging copy), for a large message
 * that is sent now; fills @g. 0, or -errno from the transport (-EINVAL,
 * -ENOMEM). Revoke with urpc__grant_revoke() once the peer has read it
 * (or the session failed, or the message was given up).
 */
int urpc__grant_read(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_msgbuf *mb,
		     struct urpc_tp_grant *g);

/* Revoke @g; nothing when it is not live (key 0). Datapath. */
static inline void urpc__grant_revoke(struct urpc_rpc *rpc, struct urpc_tp_grant *g)
{
	if (g->key)
		rpc->tp->ops->revoke(rpc->tp, g);
}

/*
 * How long the server of session @s may take to answer a large request
 * beyond the round trip: it answers once it has read the payload, and it
 * reads the session's large requests that are not read yet (the one just
 * sent among them) one after another over the same path. 3 ms per 64 KiB
 * of them, ~20 MB/s at worst; a slower path still backs off. Cold.
 */
uint64_t urpc__cli_large_allowance(const struct urpc_session *s);

/*
 * The server has read the large request @g grants (an acknowledgement or
 * its answer came): revoke @g now where the transport may without waiting
 * for the server's release notice; else leave it live, and the request's
 * completion revokes it or sets it aside (urpc__cli_large_retire()).
 */
void urpc__cli_grant_read_done(struct urpc_rpc *rpc, struct urpc_tp_grant *g);

/*
 * Server slot @sl stores the large response @resp, which the library takes
 * (@resp is zeroed; copies the application kept become stale): it moves to
 * an entry of its own (sl->large), not yet granted. 0, -ENOBUFS (its source
 * holds its share of stored responses, quota.h) or -ENOMEM (no pool buffer
 * for the entry): logged, nothing taken. Cold.
 */
int urpc__srv_large_take(struct urpc_rpc *rpc, struct urpc_sslot *sl, struct urpc_msgbuf *resp);

/*
 * Server slot @sl takes a new request: its large response (sl->large) has
 * been read. Freed at once where its grant can be revoked without waiting;
 * otherwise it leaves the slot for rpc->retiring, and
 * urpc__srv_large_retiring() frees it once the transport says the client
 * is done with it, so the event loop never blocks on a slow peer. Cold.
 */
void urpc__srv_large_retire(struct urpc_rpc *rpc, struct urpc_sslot *sl);

/*
 * Free what on rpc->retiring may be revoked now (from the timer scan), or
 * everything (@all: the Rpc is being destroyed, its peers released).
 */
void urpc__srv_large_retiring(struct urpc_rpc *rpc, bool all);

/*
 * Client slot @sl of @s completes with @status while it still grants the
 * server its large request (sl->grant). Where the transport may revoke
 * now (or has no say), revoked: false, the caller runs the continuation.
 * Otherwise the grant and the continuation move to rpc->cli_retiring
 * (sl->grant cleared): true, and urpc__cli_retiring() runs it once the
 * server has let go. Cold.
 */
bool urpc__cli_large_retire(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_cslot *sl,
			    int status);

/*
 * Run the continuations on rpc->cli_retiring whose grant may be revoked
 * now (from the timer scan), or all of them (@all: the Rpc is being
 * destroyed, its peers released).
 */
void urpc__cli_retiring(struct urpc_rpc *rpc, bool all);

/*
 * Server slot @sl's large stored response is over (read, given up, or
 * its session gone): its grant revoked, the response and its entry given
 * back, sl->large NULL. Nothing when it has none. Cold.
 */
void urpc__srv_large_free(struct urpc_rpc *rpc, struct urpc_sslot *sl);

/* Describe the grant @g in @p for the peer to READ. Cold. */
void urpc__large_pkt_fill(struct urpc_large_pkt *p, enum urpc_pkt_type type, uint8_t req_type,
			  const struct urpc_tp_grant *g, uint32_t dest, uint64_t req_num,
			  uint64_t token);

/* The descriptor of a large message, or false (dropped and counted). */
static inline bool urpc__large_desc_parse(struct urpc_rpc *rpc, const uint8_t *data, uint32_t len,
					  struct urpc_large_desc *d)
{
	if (unlikely(len != sizeof(*d))) {
		rpc->st.drop_bad_hdr++;
		return false;
	}
	memcpy(d, data, sizeof(*d));
	return true;
}

/*
 * Client slot @sl reads a large response and its session failed: its
 * request's grant, if still live, is revoked; hand its continuation to the
 * operation, to run with @status once the transport is done with the
 * buffers; the slot is free from now on (its session's masks are the
 * caller's). Cold path.
 */
void urpc__os_orphan_client(struct urpc_rpc *rpc, struct urpc_cslot *sl, int status);

/*
 * Completion @c: frees its table entry. An orphan's completion is handled
 * here (a server's read buffer freed, a client's continuation run); for a
 * live operation the entry is copied to *@op and true returned: the client
 * or server that started it finishes it. A user's operation (wr_id with
 * URPC_ROP_WR) goes to rop.h. A completion that names no operation in
 * flight is counted and ignored.
 */
bool urpc__os_take(struct urpc_rpc *rpc, const struct urpc_tp_comp *c, struct urpc_os_op *op);

/*
 * Session @s goes away: its one-sided operations become orphans (they clean
 * up when they complete), its users' batches fail (rop.h), its grants are
 * revoked and a server's large stored responses are freed (those retiring
 * too).
 * Call before releasing its peer (which makes the transport complete them).
 */
void urpc__os_session_gone(struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * True while client session @s still READs a large response (its own
 * operation or one orphaned from it): the server must keep those buffers,
 * so a disconnect is not sent yet. Cold: walks the operation table.
 */
bool urpc__os_session_reading(const struct urpc_rpc *rpc, const struct urpc_session *s);

/*
 * Wait (bounded) until every operation, all orphans by now, has completed,
 * and every user's batch has run its continuation: destroy.
 */
void urpc__os_drain(struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_LARGE_H */
