/* SPDX-License-Identifier: MIT */
/*
 * The event loop: one pass (SM packets, datagrams, completions, timers,
 * pending events, the TX batch), the dispatch of what arrives to the
 * client, server and session files, and the idle sleep.
 */
#ifndef URPC_RPC_EVLOOP_H
#define URPC_RPC_EVLOOP_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A datagram from the transport: checked against its session in one pass,
 * then handed to the client or the server side. Tests and fuzz targets
 * call it directly.
 */
void urpc__evloop_rx(struct urpc_rpc *rpc, const uint8_t *buf, uint32_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_EVLOOP_H */
