/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's datapath (xdp_io.c), for the udp transport's files
 * that carry an xdp endpoint's datagrams (udp_io.c, udp_os.c: see
 * udp_int.h): frames out of the UMEM through the TX ring, frames in from
 * the RX rings into the endpoint's receive slots. Called only where
 * u->xdp is set. Calls xdp_frame.h below it. In a build without libxdp,
 * xdp_none.c has these (never called: no endpoint has u->xdp).
 */
#ifndef URPC_TRANSPORT_XDP_IO_H
#define URPC_TRANSPORT_XDP_IO_H

#include <stdint.h>
#include <sys/uio.h>

#include "udp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Queue one datagram to @peer (resolved with frame headers, peer->xp set):
 * the @niov pieces of @iov, copied into a UMEM frame behind the headers,
 * checksums computed. Returns 1 (queued), 0 (no free frame or TX entry
 * even after reclaiming completions: back-pressure). The frames go out at
 * the next urpc__xdp_kick(). Owner thread only.
 */
int urpc__xdp_tx(struct udp_tp *u, const struct urpc_tp_peer *peer, const struct iovec *iov,
		 unsigned niov);

/*
 * Queue one DATA datagram to @peer: the udp header (the template's prefix,
 * urpc__xdp_frame_tmpl_pre()), then the @alen bytes at @a and the @blen
 * at @b, copied and checksummed in one pass (urpc__xdp_frame_build()).
 * Returns as urpc__xdp_tx(). Owner thread only.
 */
int urpc__xdp_tx_data(struct udp_tp *u, const struct urpc_tp_peer *peer, const void *a,
		      uint32_t alen, const void *b, uint32_t blen);

/* Wake the kernel for the frames queued, only when the TX ring asks (need_wakeup). */
void urpc__xdp_kick(struct udp_tp *u);

/*
 * Take up to @max datagrams from the RX rings: each accepted frame's
 * payload is copied into a free receive slot (popped from u->free_stk, its
 * source in u->rx_src) and named in @slots/@lens; malformed frames are
 * dropped and counted (rx_drop_bad), frames beyond the free slots too
 * (rx_drop_ring_full). Every frame goes back to the fill ring. Returns the
 * count. Owner thread only.
 */
unsigned urpc__xdp_rx(struct udp_tp *u, uint32_t *slots, uint32_t *lens, unsigned max);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_IO_H */
