/* SPDX-License-Identifier: MIT */
/*
 * The server's side of the datapath: requests in (small, or READ when
 * large), duplicate suppression, handlers, and responses stored for
 * retransmission; the public urpc_req_* and urpc_resp_enqueue() calls.
 */
#ifndef URPC_RPC_SERVER_H
#define URPC_RPC_SERVER_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A request datagram (header checked) for server session @s. */
void urpc__srv_rx(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_pkthdr *h,
		  const uint8_t *data, uint32_t len);

/*
 * The READ of a large request (operation @op, out of the table) finished:
 * run its handler, or answer the error; its buffer is freed after.
 */
void urpc__srv_read_done(struct urpc_rpc *rpc, struct urpc_os_op *op, int status);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SERVER_H */
