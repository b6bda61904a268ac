/* SPDX-License-Identifier: MIT */
/*
 * What the Nexus offers its Rpcs (internal). The public half is in
 * include/urpc/urpc.h.
 *
 * The Nexus owns one kernel UDP socket (session management) and a thread
 * that receives on it. Only clients initiate: CONNECT_REQ, DISCONNECT_REQ
 * and PING_REQ go client -> server and are pushed into the queue of Rpc
 * server_rpc_id; their responses and RESET (server -> client, e.g. when the
 * server Rpc is destroyed) go into the queue of Rpc client_rpc_id.
 * Liveness is per peer process: the SM thread heartbeats the peers' Nexuses
 * (nexus_peer.h).
 *
 * A CONNECT_REQ, DISCONNECT_REQ or PING_REQ for an Rpc id that does not
 * exist is answered by the SM thread itself, with status -ENOENT (connect)
 * or -ECONNRESET (others), so a client learns at once that the peer is gone.
 * Packets for an unknown client Rpc are dropped.
 *
 * A CONNECT_REQ goes on to an Rpc only with a cookie valid for its source
 * address (sm_cookie.h); any other is answered by the SM thread with
 * CONNECT_COOKIE, for the client to echo, before the -ENOENT above.
 */
#ifndef URPC_NEXUS_H
#define URPC_NEXUS_H

#include <netinet/in.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "../util/addr.h"
#include "nexus_io.h"
#include "nexus_table.h"
#include "nexus_types.h"
#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

int urpc__nexus_create_sim(const char *host, uint16_t port, const struct urpc_sm_net *net,
			   struct urpc_nexus **out);
void urpc__nexus_sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from);

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
 * The cookie @nx gives source @from now (what its CONNECT_COOKIE would
 * carry). For tests that craft CONNECT_REQs. Thread: any.
 */
uint64_t urpc__nexus_cookie(struct urpc_nexus *nx, const struct sockaddr_in *from);

/*
 * Test hook: a muted Nexus drops what it receives and sends no heartbeat,
 * as a hung process would, while its own timers still run. Thread: any.
 */
void urpc__nexus_set_mute(struct urpc_nexus *nx, bool mute);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_H */
