/* SPDX-License-Identifier: MIT */
/*
 * Internal knobs and entry points of the udp transport, for tests and the
 * fuzzer only. Not part of the public API; always compiled.
 */
#ifndef URPC_TRANSPORT_UDP_H
#define URPC_TRANSPORT_UDP_H

#include <netinet/in.h>
#include <stddef.h>
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

/*
 * Hand @tp the datagram of @len bytes at @buf as if recvmmsg() had received
 * it from @src: it takes a free ring slot (cut to the slot's size and marked
 * truncated when longer, as the kernel does) and goes through the receive
 * path's checks and dispatch. A peer's one-sided request is served and the
 * replies it queued are sent before this returns; a reply to one of our
 * operations advances it; DATA waits for rx_burst() like a received one.
 * For the fuzzer (tests/fuzz/fuzz_udp_os.c): the datapath never calls it.
 * Returns 1 (DATA, queued for rx_burst()), 0 (served, or dropped and
 * counted), -EAGAIN (every ring slot is held) or -EINVAL (not a udp
 * endpoint, or no @src). Owner thread only.
 */
int urpc__udp_rx_inject(struct urpc_tp *tp, const void *buf, size_t len,
			const struct sockaddr_in *src);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_H */
