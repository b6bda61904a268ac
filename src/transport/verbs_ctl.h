/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's outbox of control messages (verbs_ctl.c): RC
 * handshake messages queued for session management to carry (ctl_pop).
 * The floor of the RC side: calls nothing above it.
 */
#ifndef URPC_TRANSPORT_VERBS_CTL_H
#define URPC_TRANSPORT_VERBS_CTL_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queue a control message to @c for session management; 0 or -EAGAIN (full). */
int urpc__verbs_ctl_send(struct verbs_tp *v, struct verbs_conn *c, enum verbs_ctl_type type);

/* Connection @c goes away: its queued messages go with it. */
void urpc__verbs_ctl_purge(struct verbs_tp *v, struct verbs_conn *c);

/*
 * The ctl_pop op (transport.h). Wire form: the type (1 byte), then struct
 * verbs_ctl. The handle given out is any one resolved for the connection:
 * the session that carries it reaches the same remote endpoint.
 */
int urpc__verbs_ctl_pop(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_CTL_H */
