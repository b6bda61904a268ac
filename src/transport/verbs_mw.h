/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's grants (verbs_mw.c), for verbs.c and verbs_hs.c
 * (rebinding windows after a renewal). Calls
 * verbs_rc.h (to wait for a bind or an invalidation, to start the RC
 * connection a window needs).
 */
#ifndef URPC_TRANSPORT_VERBS_MW_H
#define URPC_TRANSPORT_VERBS_MW_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Choose how grants are made on this endpoint (logged once per process):
 * type-2 memory windows where the device has them, else an MR per grant.
 * URPC_VERBS_GRANTS=mr asks for the MR way on any device, =mw-mr for
 * windows over an MR per grant (as on Soft-RoCE), =mw for windows over
 * the registration itself on any device (to measure; not exact on
 * Soft-RoCE).
 */
void urpc__verbs_mw_init(struct verbs_tp *v);

/* Free the windows and the table (every QP is gone). */
void urpc__verbs_mw_fini(struct verbs_tp *v);

/* ibv_reg_mr() access bits that let grants be made on a registration. */
int urpc__verbs_mw_reg_access(const struct verbs_tp *v);

/* The grant, revoke and revoke_ready ops (transport.h). */
int urpc__verbs_mw_grant(struct urpc_tp *tp, struct urpc_tp_peer *peer, const struct urpc_tp_mr *mr,
			 const void *addr, size_t len, unsigned access, struct urpc_tp_grant *g);
void urpc__verbs_mw_revoke(struct urpc_tp *tp, struct urpc_tp_grant *g);
bool urpc__verbs_mw_revoke_ready(struct urpc_tp *tp, struct urpc_tp_grant *g);

/*
 * @c's RC QP is READY again after a renewal: bind the windows of its old
 * QP (REBIND grants) to the new one under the same keys, then destroy the
 * old QP. A window that cannot be bound is DEAD (logged).
 */
void urpc__verbs_mw_rebind(struct verbs_tp *v, struct verbs_conn *c);

/* Registration @mr_handle, or handle @h, goes away: so do the grants on it or for it. */
void urpc__verbs_mw_mr_gone(struct verbs_tp *v, const void *mr_handle);
void urpc__verbs_mw_peer_gone(struct verbs_tp *v, const struct urpc_tp_peer *h);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_MW_H */
