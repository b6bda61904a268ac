/* SPDX-License-Identifier: MIT */
/*
 * A large request's READ on the server (server_read.c): posted when its
 * descriptor comes, posted again when it timed out without progress. Its
 * completion runs the handler: server.c's urpc__srv_read_done().
 */
#ifndef URPC_RPC_SERVER_READ_H
#define URPC_RPC_SERVER_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The descriptor @data (@len bytes) of a large request @h for server slot
 * @sl of @s: READ the payload into a buffer of ours; the handler runs when
 * it has arrived. 0 when posted, or dropped without taking the slot (a bad
 * descriptor; no operation or buffer free now: the client's retransmission
 * brings it again); else the slot took the request and the caller answers
 * it with that error (a positive errno).
 */
int urpc__srv_read_req(struct urpc_rpc *rpc, struct urpc_session *s, struct urpc_sslot *sl,
		       const struct urpc_pkthdr *h, const uint8_t *data, uint32_t len);

/*
 * The READ of @done (taken from os[]) timed out without progress: true when
 * it was posted again in a new entry.
 */
bool urpc__srv_read_again(struct urpc_rpc *rpc, const struct urpc_os_op *done);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SERVER_READ_H */
