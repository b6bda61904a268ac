/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's UMEMs, one per queue of an interface in a process,
 * shared by the process's endpoints there (xdp_umem.c). For xdp.c (open,
 * close) and xdp_io.c (reclaim). Calls xdp_int.h's types.
 */
#ifndef URPC_TRANSPORT_XDP_UMEM_H
#define URPC_TRANSPORT_XDP_UMEM_H

#include "xdp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The endpoint's socket on queue @qi: joins the process's UMEM of that
 * queue (made on the first join, with x->nrx / x->ntx / x->frame_size per
 * endpoint), takes a share of it and binds. Sets x->q[qi] (fd, free send
 * frames), x->zerocopy, x->huge. 0 or -errno logged: -EBUSY (another
 * process holds the queue), -ENOSPC (the UMEM's shares are taken),
 * -EINVAL (another frame size), memlock and capability errors. Cold.
 */
int urpc__xdp_q_open(struct udp_tp *u, struct urpc_xdp *x, unsigned qi);

/*
 * Undo urpc__xdp_q_open() (after the socket left the program's map): the
 * TX ring flushed, the RX ring's frames back to the fill ring, free send
 * frames home, the socket closed; the last endpoint frees the UMEM. Cold.
 */
void urpc__xdp_q_close(struct udp_tp *u, struct urpc_xdp *x, unsigned qi);

/*
 * Refill @q's free send frames: the group's completions reclaimed (each to
 * its share), then this share's returned frames. Takes the group's lock.
 * Owner thread only.
 */
void urpc__xdp_reclaim(struct xdp_q *q);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_UMEM_H */
