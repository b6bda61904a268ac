/* SPDX-License-Identifier: MIT */
/*
 * The MRs windows are bound over on a device that checks windows against
 * their MR's bounds, kept for the next grant of the same bytes
 * (verbs_under.c).
 */
#ifndef URPC_VERBS_UNDER_H
#define URPC_VERBS_UNDER_H

#include "verbs_int.h"

/*
 * An MR of exactly [@a, @a + @len) of registration @reg, local access and
 * MW_BIND only, held until urpc__verbs_under_put(); NULL with errno set
 * when it cannot be registered.
 */
struct ibv_mr *urpc__verbs_under_get(struct verbs_tp *v, const void *reg, uintptr_t a, size_t len);
/* Let go of one that urpc__verbs_under_get() gave (no window lies on it any more). */
void urpc__verbs_under_put(struct verbs_tp *v, struct ibv_mr *mr);
/* Deregister those kept in registration @reg (NULL: all); none may be held. */
void urpc__verbs_under_gone(struct verbs_tp *v, const void *reg);

#endif
