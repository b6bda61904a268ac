/* SPDX-License-Identifier: MIT */
/*
 * The TX batch (tx.h). Owns rpc->tx, rpc->ntx and rpc->tx_epoch.
 * May call: the transport's tx_burst and tx_now. Nothing here allocates.
 */
#define URPC_LOG_MODULE "rpc"
#include "tx.h"

#include <string.h>

#include "../util/log.h"

/*
 * urpc__tx_flush() once the transport did not take the whole batch at once
 * (back-pressure, or an error: the batch is dropped as a lossy wire would).
 */
static __attribute__((noinline)) void flush_rest(struct urpc_rpc *rpc, int n)
{
	unsigned done = 0;

	if (n > 0)
		done = (unsigned)n;
	while (n > 0 && done < rpc->ntx) {
		n = rpc->tp->ops->tx_burst(rpc->tp, rpc->tx + done, rpc->ntx - done);
		if (n > 0)
			done += (unsigned)n;
	}
	if (unlikely(n < 0))
		URPC_ERR_RATELIMIT(rpc->id, "sending datagrams failed: %s", urpc_strerror(n));
	rpc->st.pkts_tx += done;
	if (done < rpc->ntx && done > 0)
		memmove(rpc->tx, rpc->tx + done, (rpc->ntx - done) * sizeof(rpc->tx[0]));
	rpc->ntx = (n < 0) ? 0 : rpc->ntx - done;
	if (!rpc->ntx)
		rpc->tx_epoch++;
}

void urpc__tx_flush(struct urpc_rpc *rpc)
{
	unsigned ntx = rpc->ntx;
	int n;

	if (unlikely(!ntx)) {
		rpc->tx_epoch++;
		return;
	}
	/* The common case: the transport takes the whole batch. */
	n = rpc->tp->ops->tx_burst(rpc->tp, rpc->tx, ntx);
	if (likely(n == (int)ntx)) {
		rpc->st.pkts_tx += ntx;
		rpc->ntx = 0;
		rpc->tx_epoch++;
		return;
	}
	flush_rest(rpc, n);
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
