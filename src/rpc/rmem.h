/* SPDX-License-Identifier: MIT */
/*
 * Remote memory for users (issue 16, first slice): exposures of the
 * application's memory to one session's peer (urpc_mem_expose/_revoke),
 * rbuf slices, and the user's one-sided READ and WRITE (urpc_rdma_*), which
 * run in the one-sided operation table of large.h (entries of kind
 * URPC_OS_USER, completed there).
 */
#ifndef URPC_RPC_RMEM_H
#define URPC_RPC_RMEM_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The Rpc goes away: revoke every exposure it still has and give their
 * registrations back to the cache, then free the table. Call after the
 * sessions and one-sided operations are gone, before the cache is. Cold.
 */
void urpc__rmem_fini(struct urpc_rpc *rpc);

/* Exposures still live (tests). */
uint32_t urpc__rmem_live(const struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RMEM_H */
