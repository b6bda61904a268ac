/* SPDX-License-Identifier: MIT */
/*
 * The TX batch: datagrams collected during a loop pass and handed to the
 * transport in one tx_burst, or to a transport that takes each at once
 * (URPC_TP_CAP_TX_NOW) one by one. Everything above sends through it.
 */
#ifndef URPC_RPC_TX_H
#define URPC_RPC_TX_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hand the batch to the transport; what it does not take stays queued. */
void urpc__tx_flush(struct urpc_rpc *rpc);

/*
 * Take out of the TX batch every datagram whose header is @hdr or, with @hdr
 * NULL, every datagram to @peer, so that memory or a peer about to be given
 * back is never read by a later flush. Cold path. Owner thread only.
 */
void urpc__tx_forget(struct urpc_rpc *rpc, const void *hdr, const struct urpc_tp_peer *peer);

/*
 * Send the datagram @hdr + @data_len payload bytes that follow it: queue it
 * for the next tx_burst, into a batch that has room (rpc->ntx <
 * URPC_TX_BATCH), or hand it to a transport that sends at once
 * (rpc->tx_now). Returns true when it waits in the batch (the bytes must
 * stay unchanged until the transport is done with them, see tx_flush, or
 * urpc__tx_forget() took it out), false when it is gone already. Nothing
 * is live after tx_now() (callers do their bookkeeping first), so that the
 * fast paths keep few registers across the call: what it refuses (no peer,
 * longer than the MTU) the engine never sends, and the transport logs.
 */
static inline bool urpc__tx_put(struct urpc_rpc *rpc, struct urpc_tp_peer *peer,
				const struct urpc_pkthdr *hdr, uint32_t data_len, uint32_t lkey)
{
	struct urpc_tp_tx *t;

	if (rpc->tx_now) {
		/* Counted by the transport (tx_stats.tx_pkts): urpc_rpc_get_stats() adds it. */
		(void)rpc->tx_now(rpc->tp, peer, hdr, (uint32_t)sizeof(*hdr) + data_len);
		return false;
	}
	t = &rpc->tx[rpc->ntx++];
	t->peer = peer;
	t->hdr = hdr;
	t->hdr_len = (uint32_t)sizeof(*hdr) + data_len;
	t->hdr_lkey = lkey;
	t->data_len = 0;
	return true;
}

/*
 * As urpc__tx_put(), into any batch: flushes it first when it is full. A
 * transport that sends at once never has a batch (nothing else fills it):
 * tested first, so its path skips the batch's test.
 */
static inline bool urpc__tx_push(struct urpc_rpc *rpc, struct urpc_tp_peer *peer,
				 const struct urpc_pkthdr *hdr, uint32_t data_len, uint32_t lkey)
{
	if (rpc->tx_now)
		return urpc__tx_put(rpc, peer, hdr, data_len, lkey);
	if (unlikely(rpc->ntx == URPC_TX_BATCH)) {
		urpc__tx_flush(rpc);
		if (rpc->ntx == URPC_TX_BATCH) {
			/* The transport is stuck: drop; retransmission recovers. */
			rpc->ntx = 0;
			rpc->tx_epoch++;
		}
	}
	return urpc__tx_put(rpc, peer, hdr, data_len, lkey);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_TX_H */
