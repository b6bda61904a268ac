/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's own tests (test_verbs, test_verbs_ud,
 * test_verbs_window): an endpoint on a test device, and a peer resolved
 * from another endpoint's bytes. Header-only, for test files (tests/ is on
 * their include path); the caller skips first where no port exists
 * (verbs_skip.h).
 */
#ifndef URPC_TEST_VERBS_TP_H
#define URPC_TEST_VERBS_TP_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include <urpc/urpc.h>

#include "transport/transport.h"

/*
 * A verbs endpoint on the device named by environment variable
 * @device_env, in 4 KiB pages; @sq_depth, @rq_depth and the one-sided
 * time-out @timeout_ms where not 0, else the defaults.
 */
static inline struct urpc_tp *verbs_tp_open(const char *device_env, uint32_t sq_depth,
					    uint32_t rq_depth, uint32_t timeout_ms)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *tp;
	int ret;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_VERBS);
	cfg.device = getenv(device_env);
	cfg.hp_flags = URPC_HP_FORCE_4K;
	if (sq_depth)
		cfg.sq_depth = sq_depth;
	if (rq_depth)
		cfg.rq_depth = rq_depth;
	if (timeout_ms)
		cfg.one_sided_timeout_ms = timeout_ms;
	ret = urpc__tp_create(&cfg, &tp);
	cr_assert_eq(ret, 0, "create: %s", urpc_strerror(ret));
	cr_assert_eq(tp->kind, URPC_TRANSPORT_VERBS);
	return tp;
}

/* *@out: @to as a peer of @from. */
static inline void verbs_tp_resolve(struct urpc_tp *from, struct urpc_tp *to,
				    struct urpc_tp_peer **out)
{
	uint8_t ep[URPC_TP_EP_MAX];
	size_t n = to->ops->get_endpoint(to, ep);

	cr_assert_eq(from->ops->resolve_peer(from, ep, n, out), 0);
}

#endif /* URPC_TEST_VERBS_TP_H */
