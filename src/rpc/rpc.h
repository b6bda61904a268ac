/* SPDX-License-Identifier: MIT */
/*
 * The top rung of the engine: the Rpc's test hooks. Tests, fuzz targets
 * and the simulator include this header and, through it, every rung below
 * (docs/ENGINE.md has the map). Everything here is owner-thread only.
 */
#ifndef URPC_RPC_RPC_H
#define URPC_RPC_RPC_H

#include "client.h"
#include "engine.h"
#include "evloop.h"
#include "large.h"
#include "msgbuf.h"
#include "server.h"
#include "session.h"
#include "session_table.h"
#include "tx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- test hooks ---- */
int urpc__rpc_check(const struct urpc_rpc *rpc, uint64_t *pending_conts, char *why, size_t n);
void urpc__rpc_set_clock(struct urpc_rpc *rpc, urpc_clock_fn fn, void *arg);
struct urpc_tp *urpc__rpc_transport(struct urpc_rpc *rpc);
/*
 * True from the moment the Rpc announces an idle sleep until it is awake
 * again (it may still be on its last pass before poll()). Thread: any.
 */
bool urpc__rpc_is_sleeping(const struct urpc_rpc *rpc);

struct urpc_session_info {
	enum urpc_session_role role;
	enum urpc_session_state state;
	uint32_t remote_num;
	uint64_t token;
};
int urpc__rpc_session_info(struct urpc_rpc *rpc, int session, struct urpc_session_info *info);
/*
 * Grants the engine's slots and the users' exposures hold now (urpc__rpc_check() checks their
 * states); a test that makes none of its own compares it with the
 * transport's grants_live: equal, or a grant leaked. Cold.
 */
uint64_t urpc__rpc_grants(const struct urpc_rpc *rpc);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_RPC_H */
