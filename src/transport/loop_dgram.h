/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's datagrams (loop_dgram.c), for loop.c: the datagram
 * ops of its table, delivery into a ring and the reorder switch's held
 * datagrams. Calls only loop_os.h.
 */
#ifndef URPC_TRANSPORT_LOOP_DGRAM_H
#define URPC_TRANSPORT_LOOP_DGRAM_H

#include "loop_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Put one datagram, @a then @b, into @to's ring, visible after the
 * receiver's next @delay_polls rx_bursts (0: at once); dropped when @to is
 * dead or its ring full. Thread: any holding a reference on @to.
 */
void urpc__loop_deliver(struct loop_ep *to, uint32_t delay_polls, const void *a, uint32_t alen,
			const void *b, uint32_t blen);

/* Release every datagram the reorder switch holds, in a random order. Thread: @ep's owner. */
void urpc__loop_flush_held(struct loop_ep *ep);

/* The datagram ops of the ops table (transport.h). Thread: @tp's owner. */
int urpc__loop_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n);
int urpc__loop_tx_now(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf, uint32_t len);
void urpc__loop_tx_flush(struct urpc_tp *tp);
int urpc__loop_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
int urpc__loop_rx_run(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n);
void urpc__loop_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_LOOP_DGRAM_H */
