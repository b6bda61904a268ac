/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC handshake (verbs_hs.c), for verbs.c: control
 * messages from peers and the handshake's timers.
 */
#ifndef URPC_TRANSPORT_VERBS_HS_H
#define URPC_TRANSPORT_VERBS_HS_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Resend REQs due and fail connections past their deadline. verbs.c runs
 * them from rx_burst() and poll_completions() while a handshake is pending
 * (v->npending). @now in ns.
 */
void urpc__verbs_hs_timers(struct verbs_tp *v, uint64_t now);

/* The ctl_push op (transport.h): a control message that came from @peer's side. */
void urpc__verbs_hs_ctl_push(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			     size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_HS_H */
