/* SPDX-License-Identifier: MIT */
/*
 * The TX batch (tx.h). Owns rpc->tx, rpc->ntx and rpc->tx_epoch.
 * May call: the transport's tx_burst. Nothing here allocates.
 */
#define URPC_LOG_MODULE "rpc"
#include "tx.h"

#include <string.h>

#include "../util/log.h"

void urpc__tx_flush(struct urpc_rpc *rpc)
{
	unsigned done = 0;
	int n = 0;

	while (done < rpc->ntx) {
		n = rpc->tp->ops->tx_burst(rpc->tp, rpc->tx + done, rpc->ntx - done);
		if (unlikely(n <= 0)) {
			if (n < 0)
				URPC_ERR_RATELIMIT(rpc->id, "tx_burst failed: %s",
						   urpc_strerror(n));
			break;
		}
		done += (unsigned)n;
	}
	rpc->st.pkts_tx += done;
	if (unlikely(done < rpc->ntx && done > 0))
		memmove(rpc->tx, rpc->tx + done, (rpc->ntx - done) * sizeof(rpc->tx[0]));
	/*
	 * Datagrams the transport did not take (back-pressure) stay queued for
	 * the next pass; an error drops them like a lossy wire would, and the
	 * client's retransmission recovers.
	 */
	rpc->ntx = (n < 0) ? 0 : rpc->ntx - done;
	if (likely(!rpc->ntx))
		rpc->tx_epoch++;
}

void urpc__tx_forget(struct urpc_rpc *rpc, const void *hdr, const struct urpc_tp_peer *peer)
{
	unsigned i, n = 0;

	for (i = 0; i < rpc->ntx; i++) {
		const struct urpc_tp_tx *t = &rpc->tx[i];

		if (hdr ? t->hdr == hdr : t->peer == peer)
			continue;
		rpc->tx[n++] = *t;
	}
	rpc->ntx = n;
	if (!n)
		rpc->tx_epoch++;
}
