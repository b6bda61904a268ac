/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's heartbeats (nexus_hb.c): liveness per peer process, what
 * the Rpcs are told of it, and their sessions' references to peer entries.
 */
#ifndef URPC_NEXUS_HB_H
#define URPC_NEXUS_HB_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "nexus_types.h"
#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_nx_peer; /* nexus_peer.h */

/*
 * A reference to the heartbeat entry of the peer Nexus at @addr, for one
 * session; @ping_ns and @timeout_ns are its Rpc's interval and silence
 * limit, @token the session's (in the peer's digest until the put with the
 * same token). NULL: out of memory. Thread: any (takes the Nexus lock; cold).
 */
struct urpc_nx_peer *urpc__nexus_peer_get(struct urpc_nexus *nx, const struct sockaddr_in *addr,
					  uint64_t ping_ns, uint64_t timeout_ns, uint64_t token);
void urpc__nexus_peer_put(struct urpc_nexus *nx, struct urpc_nx_peer *p, uint64_t token);

/*
 * How many times the Nexus has told its Rpcs to look at their peers'
 * generations (a peer failed, an Rpc of it went or came). An Rpc that
 * sees it move walks its sessions; the NX_NOTICE packets only wake it
 * sooner, so one lost to a full queue delays nothing past the next timer
 * scan. Acquire: the generations that moved are visible. Thread: any.
 */
uint32_t urpc__nexus_notices(const struct urpc_nexus *nx);

/*
 * The heartbeat timers: ping peers that are due, fail silent ones. Returns
 * when they are due next (urpc__now_ns() time; UINT64_MAX: no peer). The
 * SM thread calls it on every wake-up; a simulated Nexus's simulator calls
 * it. Thread: the SM thread's (or the simulator's).
 */
uint64_t urpc__nexus_tick(struct urpc_nexus *nx);

/*
 * Test hook: a muted Nexus drops what it receives and sends no heartbeat,
 * as a hung process would, while its own timers still run. Thread: any.
 */
void urpc__nexus_set_mute(struct urpc_nexus *nx, bool mute);

/* Tell every attached Rpc to look at its peers' generations. nx->lock held. */
void urpc__nexus_notify_rpcs(struct urpc_nexus *nx);

/* A signed heartbeat @p arrived: refresh its peer; answer a ping. SM thread. */
void urpc__nexus_heartbeat_rx(struct urpc_nexus *nx, const struct urpc_sm_pkt *p);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_HB_H */
