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
#include "nexus_hb.h"
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

/*
 * The cookie @nx gives source @from now (what its CONNECT_COOKIE would
 * carry). For tests that craft CONNECT_REQs. Thread: any.
 */
uint64_t urpc__nexus_cookie(struct urpc_nexus *nx, const struct sockaddr_in *from);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_H */
