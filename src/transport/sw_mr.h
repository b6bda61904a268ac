/* SPDX-License-Identifier: MIT */
/*
 * The software memory-registration table of the transports without a NIC
 * (loop, udp): the keys they hand out, and the one set of checks that
 * their emulated one-sided operations apply (sw_mr.c). Calls nothing in
 * src/transport; uses only transport.h's types.
 *
 * A registration gets one random nonzero key, used as both lkey and rkey
 * and unique among the table's live registrations; mr->handle names its
 * table entry, so a struct urpc_tp_mr that was deregistered (or belongs
 * to another endpoint) is recognised as not live.
 *
 * Errors, one for each failure:
 *   -EINVAL  urpc__sw_mr_reg(): @addr NULL, @len 0, @mr NULL, or access
 *            bits other than URPC_TP_ACCESS_*;
 *            urpc__sw_mr_check_local(): @mr NULL or not a live
 *            registration of the table, @len 0, or [local, local + len)
 *            not inside it (the caller's mistake: post_* returns it);
 *   -EFAULT  urpc__sw_mr_reg(): [addr, addr + len) wraps around the end
 *            of the address space;
 *   -ENOMEM  urpc__sw_mr_reg(): the table cannot grow;
 *   -EACCES  urpc__sw_mr_check_remote(): no live registration has @rkey,
 *            it lacks the access asked for, or the range is not inside it
 *            (the peer's mistake: the operation completes with it).
 *
 * Threads: the table belongs to its endpoint's owner thread.
 */
#ifndef URPC_TRANSPORT_SW_MR_H
#define URPC_TRANSPORT_SW_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/csprng.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One registration; @used is false for a free entry. */
struct urpc_sw_mr {
	uintptr_t addr;
	size_t len;
	uint32_t key; /* lkey and rkey */
	unsigned access;
	bool used;
};

struct urpc_sw_mr_table {
	struct urpc_sw_mr *regs;
	uint32_t cap;
	uint32_t n; /* live registrations */
	struct urpc_csprng key_gen;
};

/* An empty table whose keys are drawn from a generator seeded with @key_seed. */
void urpc__sw_mr_init(struct urpc_sw_mr_table *t, uint64_t key_seed);

/* Free the table's memory (whatever is still registered). */
void urpc__sw_mr_fini(struct urpc_sw_mr_table *t);

/*
 * Register [addr, addr + len) for local use and the remote @access; fills
 * @mr. 0, -EINVAL, -EFAULT or -ENOMEM (see the top). Not the datapath:
 * the table may grow.
 */
int urpc__sw_mr_reg(struct urpc_sw_mr_table *t, void *addr, size_t len, unsigned access,
		    struct urpc_tp_mr *mr);

/*
 * Undo urpc__sw_mr_reg(): @mr->handle becomes NULL. Returns false (and
 * does nothing) when @mr is NULL or not a live registration of @t.
 */
bool urpc__sw_mr_dereg(struct urpc_sw_mr_table *t, struct urpc_tp_mr *mr);

/* 0 when @mr is a live registration of @t holding [local, local + len), else -EINVAL. */
int urpc__sw_mr_check_local(const struct urpc_sw_mr_table *t, const struct urpc_tp_mr *mr,
			    const void *local, size_t len);

/*
 * 0 when a live registration of @t has @rkey, grants @need
 * (URPC_TP_ACCESS_*) and holds [raddr, raddr + len), else -EACCES.
 * Linear in the registrations (a handful per endpoint). Datapath.
 */
int urpc__sw_mr_check_remote(const struct urpc_sw_mr_table *t, uint32_t rkey, unsigned need,
			     uint64_t raddr, uint64_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_SW_MR_H */
