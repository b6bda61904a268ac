/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's datagrams, for verbs.c: the UD QP, its receive
 * ring and send slots (verbs_ud_init.c), and the datagram ops
 * (verbs_ud.c). Calls nothing above.
 */
#ifndef URPC_TRANSPORT_VERBS_UD_H
#define URPC_TRANSPORT_VERBS_UD_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Create the UD QP on v->pd, v->send_cq and v->recv_cq (set v->base.mtu,
 * sq_depth and rq_depth first), the ring of receive and send slots and
 * its registration, and post every receive. 0, or -errno (logged); what
 * was made is undone by urpc__verbs_ud_free().
 */
int urpc__verbs_ud_create(struct verbs_tp *v, const struct urpc_tp_cfg *cfg);

/* Free what urpc__verbs_ud_create() made (any part of it). */
void urpc__verbs_ud_free(struct verbs_tp *v);

/* The datagram ops (transport.h). rx_burst() only receives: no timers. */
int urpc__verbs_ud_tx_burst(struct urpc_tp *tp, const struct urpc_tp_tx *pkts, unsigned n);
void urpc__verbs_ud_tx_flush(struct urpc_tp *tp);
int urpc__verbs_ud_rx_burst(struct urpc_tp *tp, struct urpc_tp_rx *pkts, unsigned n);
void urpc__verbs_ud_rx_release(struct urpc_tp *tp, const struct urpc_tp_rx *pkts, unsigned n);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_UD_H */
