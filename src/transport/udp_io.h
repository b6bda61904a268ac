/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's datagrams (udp_io.c), for udp.c: the tx/rx ops of
 * transport.h and the receive path's dispatch. Calls only udp_os.h below it.
 */
#ifndef URPC_TRANSPORT_UDP_IO_H
#define URPC_TRANSPORT_UDP_IO_H

#include "udp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The datagram ops (transport.h). */
int urpc__udp_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n);
int urpc__udp_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
void urpc__udp_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n);

/* Drain the socket (requests served, replies taken), then the operations' timers. */
int urpc__udp_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n);

/*
 * The datagram of @len bytes that arrived in @slot (just taken from the
 * free stack): DATA joins the pending FIFO (the slot stays held), anything
 * else is served and its slot is free again. Returns true for DATA. *@now
 * is the clock for one-sided replies, read on the first (0: not yet).
 */
bool urpc__udp_rx_done(struct udp_tp *u, uint32_t slot, uint32_t len, bool trunc, uint64_t *now);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_IO_H */
