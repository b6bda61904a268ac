/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's tables and accessors (nexus_table.c), part of what the Nexus
 * offers its Rpcs (nexus.h includes this header).
 */
#ifndef URPC_NEXUS_TABLE_H
#define URPC_NEXUS_TABLE_H

#include <stdint.h>

#include "nexus_types.h"
#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Attach Rpc @rpc_id with its SM queue @q (owned by the Rpc; must stay valid
 * until detach). Freezes the handler table. 0 or -EEXIST. Thread: any.
 */
int urpc__nexus_attach_rpc(struct urpc_nexus *nx, uint8_t rpc_id, struct urpc_sm_queue *q);

/*
 * Detach Rpc @rpc_id. When it returns, the SM thread no longer touches the
 * queue. Thread: any.
 */
void urpc__nexus_detach_rpc(struct urpc_nexus *nx, uint8_t rpc_id);

/* Copy the counters (each read atomically). Thread: any. */
void urpc__nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st);

/* The handler table, read-only once an Rpc is attached. Thread: any. */
const struct urpc_handler *urpc__nexus_handlers(const struct urpc_nexus *nx);

/* The host the Nexus is bound to (used as the default transport host). */
const char *urpc__nexus_host(const struct urpc_nexus *nx);

/*
 * Does @nx share a secret with the Nexus at @addr (nexus_auth.h), so that
 * what it sends there is signed? Tests and diagnostics. Thread: any.
 */
bool urpc__nexus_peer_is_keyed(struct urpc_nexus *nx, const struct sockaddr_in *addr);

/*
 * Test hook (fuzzers, crafted packets): sign the encoded packet @buf of
 * @len bytes as the peer at @from would for @nx, if they share a secret
 * (else leave it unsigned). Thread: any.
 */
void urpc__nexus_sign_as_peer(struct urpc_nexus *nx, const struct sockaddr_in *from, uint8_t *buf,
			      size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_TABLE_H */
