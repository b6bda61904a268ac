/* SPDX-License-Identifier: MIT */
/*
 * What one peer may hold of a server (issue 31, fair shares): the time a
 * large response may wait for its client to READ it. A stored large
 * response (large.c) lives on rpc->grants_live from the moment its handler
 * answers; its time is the one-sided time-out plus the time its bytes take
 * at URPC_QUOTA_GRANT_RATE. The clients of one source address hold at
 * most URPC_QUOTA_SRC_BYTES of stored responses at once (with the
 * per-source limit on, the default), and one past its time is revoked only
 * when a newer response of its address needs the room: a live client that
 * is slow to run (starved of CPU, descheduled for seconds) still reads its
 * response, and one that never reads pins at most its address's share.
 * The timer scan revokes those past their time when the pool needs the
 * room (an allocation failed since the last scan, or 7/8 of its cap is
 * mapped), and always without a per-source share (max_sessions_per_source
 * 0), where nothing bounds what a client pins but time. A session that ends (its peer's Nexus judged dead
 * included) revokes its responses at once, whatever their time.
 * May call: the log.
 */
#ifndef URPC_RPC_QUOTA_H
#define URPC_RPC_QUOTA_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The slowest a READ of a large request may go while others wait for an operation: 4 MiB/s. */
#define URPC_QUOTA_MIN_RATE (4ull << 20)
/*
 * The slowest a client may READ a large response before its grant expires:
 * 1 MiB/s. The server cannot see a READ's progress on verbs (the NIC serves
 * it), so the allowance must cover a slow legitimate reader: Soft-RoCE moves
 * 3.4 MB/s on an idle host and less beside other work (at 4 MiB/s a 64 MiB
 * response was revoked while it was being read, in the CI's Soft-RoCE run).
 */
#define URPC_QUOTA_GRANT_RATE (1ull << 20)
/*
 * The bytes of stored large responses the clients at one source address
 * may hold together (with the per-source limit on): an eighth of the
 * pool's 1 GiB cap.
 */
#define URPC_QUOTA_SRC_BYTES (128ull << 20)

/*
 * Would storing a @len-byte large response in slot @sl take its source
 * past URPC_QUOTA_SRC_BYTES? Then true, counted (grants_refused) and
 * logged: the caller refuses the response (the client gets EIO).
 */
bool urpc__quota_bytes_refuse(struct urpc_rpc *rpc, const struct urpc_sslot *sl, size_t len);

/*
 * The server's one-sided operations (URPC_OS_OPS, READs of large requests):
 * the sessions of one source address hold at most URPC_QUOTA_SRC_OPS of
 * them at once, so that one slow reader cannot hold them all.
 */
#define URPC_QUOTA_SRC_OPS (URPC_OS_OPS / 4)

/*
 * May server session @s start another READ? True (refuse: the request is
 * dropped and its client's retransmission brings it again; counted in
 * os_share_waits) when its source holds its share.
 */
bool urpc__quota_op_refuse(struct urpc_rpc *rpc, const struct urpc_session *s);

/*
 * The minimum rate under contention (issue 31). A large request that finds
 * no operation (its source's share, or the table, full) marks contention
 * (urpc__quota_op_waited); while contention is recent (within the
 * one-sided time-out), urpc__quota_os_scan() cuts every READ of a large
 * request that has run past the one-sided time-out plus its bytes at
 * URPC_QUOTA_MIN_RATE (slower than that rate: cancelled, the request
 * fails with EIO, os_cut). Without contention a READ the transport timed
 * out (-ETIMEDOUT, no progress) on a session still CONNECTED (its peer's
 * Nexus alive) is posted again instead (server.c, os_reposted): a slow or
 * starved owner delays only itself.
 */
void urpc__quota_op_waited(struct urpc_rpc *rpc);
bool urpc__quota_contended(const struct urpc_rpc *rpc);
void urpc__quota_os_scan(struct urpc_rpc *rpc);

/* Operation @op reads a request of @s now: counted in its source's share until urpc__os_put(). */
void urpc__quota_op_take(struct urpc_rpc *rpc, const struct urpc_session *s, struct urpc_os_op *op);

/* Operation @op is over: its source's share. */
static inline void urpc__quota_op_put(struct urpc_rpc *rpc, struct urpc_os_op *op)
{
	if (op->src_bucket && rpc->src_bytes)
		rpc->src_bytes[2 * (op->src_bucket - 1u) + 1]--;
	op->src_bucket = 0;
}

/* Large response @l, just stored in slot @sl: its time starts now. Owner thread. */
void urpc__quota_grant_start(struct urpc_rpc *rpc, struct urpc_srv_large *l, struct urpc_sslot *sl);

/* @l leaves its slot (read, replaced, its session gone): off the list. Owner thread. */
void urpc__quota_grant_end(struct urpc_rpc *rpc, struct urpc_srv_large *l);

/*
 * The slot of the oldest stored large response past its time, of source
 * bucket @src_bucket (0: of any source), taken off the list and counted in
 * grants_expired (the caller retires it with urpc__srv_large_retire()),
 * else NULL. large.c, to make room in a source's share; the timer scan
 * (urpc__quota_grants_due()). Owner thread.
 */
struct urpc_sslot *urpc__quota_grant_expired(struct urpc_rpc *rpc, uint32_t src_bucket);

/*
 * Should the timer scan revoke every stored response past its time? With
 * no per-source share, always; else when the pool needs the room (an
 * allocation failed since the last call, or 7/8 of its cap is mapped).
 */
bool urpc__quota_grants_due(struct urpc_rpc *rpc);

/*
 * How many bytes past its source's share (URPC_QUOTA_SRC_BYTES) storing a
 * @len-byte large response in slot @sl would take it; 0 when it fits or
 * no share applies.
 */
uint64_t urpc__quota_bytes_over(const struct urpc_rpc *rpc, const struct urpc_sslot *sl,
				size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_QUOTA_H */
