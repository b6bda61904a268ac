/* SPDX-License-Identifier: MIT */
/*
 * The event loop's timers (evtimer.c): the scan that acts on them once a
 * millisecond, and the earliest of them, which bounds the idle sleep.
 * evloop.c is the only caller.
 */
#ifndef URPC_RPC_EVTIMER_H
#define URPC_RPC_EVTIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The timer scan: requests in flight of the busy client sessions, session
 * management (the Nexus's notices, SM timers), users' one-sided batches,
 * grants and retiring large messages. Owner thread, inside a pass.
 */
void urpc__evloop_scan_timers(struct urpc_rpc *rpc);

/*
 * May the Rpc sleep, and until when (*wake_ns, Rpc clock)? See evtimer.c.
 * Idle path only.
 */
bool urpc__evloop_idle_wake_time(const struct urpc_rpc *rpc, uint64_t *wake_ns);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_EVTIMER_H */
