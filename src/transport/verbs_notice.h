/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's release notices (verbs_notice.c): a reader done
 * with a grant tells its owner on the RC QP they share. For verbs_rc.c
 * (send, receive), verbs_qp.c (the receives posted) and verbs_mw.c (the
 * held ones).
 */
#ifndef URPC_TRANSPORT_VERBS_NOTICE_H
#define URPC_TRANSPORT_VERBS_NOTICE_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Post a receive on @qp for a peer's notice (no data: the notice is its immediate). */
void urpc__verbs_notice_recv_post(struct ibv_qp *qp);

/* Tell the owner of grant @notice on @c's READY QP; held while v->hold_notices. */
void urpc__verbs_notice_send(struct verbs_tp *v, struct verbs_conn *c, uint32_t notice);

/* Post the notices held while verbs_mw.c waited. */
void urpc__verbs_notice_post_held(struct verbs_tp *v);

/* A peer's notice came (@wc, a receive): mark its grant released, repost. */
void urpc__verbs_notice_got(struct verbs_tp *v, const struct ibv_wc *wc);

#ifdef __cplusplus
}
#endif

#endif
