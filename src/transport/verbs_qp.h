/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's RC QPs (verbs_qp.c), for verbs_rc.c and
 * verbs_hs.c. Calls only verbs_notice.h.
 */
#ifndef URPC_TRANSPORT_VERBS_QP_H
#define URPC_TRANSPORT_VERBS_QP_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Create @c's RC QP in INIT (and pick its PSN). 0 or -errno; on failure
 * c->rc_qp stays NULL.
 */
int urpc__verbs_qp_create(struct verbs_tp *v, struct verbs_conn *c);

/*
 * Destroy @c's QP (drained): state NONE. The memory windows bound to it
 * go with it (their grants are DEAD until revoked, which frees the rest),
 * and so does a QP kept by an earlier renewal, unless @keep (a renewal):
 * then the QP is kept as c->old_qp, its windows' grants are REBIND, and
 * verbs_mw.c binds them to the next QP under the same keys once it is
 * READY and destroys old_qp. Release notices held for the renewal are
 * dropped unless @keep.
 */
void urpc__verbs_qp_destroy(struct verbs_tp *v, struct verbs_conn *c, bool keep);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_QP_H */
