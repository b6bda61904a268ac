/* SPDX-License-Identifier: MIT */
/*
 * Internal knobs of the udp transport, for tests only. Not part of the
 * public API; always compiled.
 */
#ifndef URPC_TRANSPORT_UDP_H
#define URPC_TRANSPORT_UDP_H

#include <stdint.h>

#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Drop the fraction @p (0 <= p <= 1) of the one-sided datagrams (RD_REQ,
 * RD_DATA, WR_DATA, WR_ACK) that @tp sends, deterministically for @seed.
 * NAKs and DATA datagrams are never dropped. @tp must be a udp endpoint.
 * Returns 0 or -EINVAL. Owner thread only.
 */
int urpc__udp_set_drop(struct urpc_tp *tp, double p, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_H */
