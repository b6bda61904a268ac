/* SPDX-License-Identifier: MIT */
/*
 * Remote memory for users (issue 16): exposures of the application's
 * memory to one session's peer (urpc_mem_expose/_revoke), rbuf slices, and
 * the public calls of the users' one-sided READs, WRITEs and batches
 * (urpc_rdma_*), which run in rop.h's table.
 */
#ifndef URPC_RPC_RMEM_H
#define URPC_RPC_RMEM_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The Rpc goes away: free the users' operation tables (rop.h), revoke
 * every exposure it still has and give their registrations back to the
 * cache, then free the table. Call after the sessions and one-sided
 * operations are gone (the drain), before the cache is. Cold.
 */
void urpc__rmem_fini(struct urpc_rpc *rpc);

/*
 * Session @s goes away: its exposures' grants die with its peer (the
 * transport's release_peer() revokes them); the exposures stay, holding
 * their registrations, until urpc_mem_revoke() or the Rpc's end. Cold.
 */
void urpc__rmem_session_gone(struct urpc_rpc *rpc, const struct urpc_session *s);

/* Exposures whose grant is live (urpc__rpc_grants()). */
uint32_t urpc__rmem_grants(const struct urpc_rpc *rpc);

/* Exposures still live (tests). */
uint32_t urpc__rmem_live(const struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RMEM_H */
