/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's registrations under windows, on a device that
 * checks a request through a window against the bounds of the MR under it
 * (Soft-RoCE, see verbs_mw.c): there a window exact to the byte needs an
 * MR of exactly the granted bytes. Such an MR is registered with
 * IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND and no remote access, so it
 * opens nothing to any peer by itself: only a window bound over it does,
 * and that window is invalidated at revoke as before. So it can outlive
 * the grant: this file keeps the last VERBS_UNDER of them, keyed by the
 * user registration they lie in and their bytes, and a grant of the same
 * bytes (a pool buffer used again) binds over the one it finds instead of
 * registering and deregistering 4 MiB per large message. It pins no page
 * that the registration around it does not already pin, and all of a
 * registration's go when it does (urpc__verbs_under_gone()).
 *
 * It owns the table in struct verbs_tp; it calls only libibverbs.
 * verbs_mw.c calls it.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_under.h"

#include <errno.h>

struct ibv_mr *urpc__verbs_under_get(struct verbs_tp *v, const void *reg, uintptr_t a, size_t len)
{
	struct verbs_under *u, *spare = NULL;
	struct ibv_mr *mr;
	uint32_t i;

	v->under_clock++;
	for (i = 0; i < VERBS_UNDER; i++) {
		u = &v->under[i];
		if (u->mr && u->reg == reg && u->addr == a && u->len == len) {
			u->refs++;
			u->used = v->under_clock;
			return u->mr;
		}
		/* An empty entry, else the least recently used one no grant holds. */
		if (!u->refs && (!spare || (spare->mr && (!u->mr || u->used < spare->used))))
			spare = u;
	}
	mr = ibv_reg_mr(v->pd, (void *)a, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr) {
		if (!errno)
			errno = ENOMEM;
		return NULL;
	}
	if (!spare) /* every entry held: this one is the grant's alone */
		return mr;
	if (spare->mr)
		ibv_dereg_mr(spare->mr);
	*spare = (struct verbs_under){mr, reg, a, len, 1, v->under_clock};
	return mr;
}

void urpc__verbs_under_put(struct verbs_tp *v, struct ibv_mr *mr)
{
	uint32_t i;

	for (i = 0; i < VERBS_UNDER; i++)
		if (v->under[i].mr == mr) {
			v->under[i].refs--;
			return;
		}
	ibv_dereg_mr(mr);
}

void urpc__verbs_under_gone(struct verbs_tp *v, const void *reg)
{
	uint32_t i;

	for (i = 0; i < VERBS_UNDER; i++)
		if (v->under[i].mr && (!reg || v->under[i].reg == reg)) {
			/* Its grants were ended first: no window lies on it. */
			ibv_dereg_mr(v->under[i].mr);
			v->under[i] = (struct verbs_under){0};
		}
}
