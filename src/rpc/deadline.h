/* SPDX-License-Identifier: MIT */
/*
 * A handler's deadline as its handle keeps it (h.priv_budget, urpc.h):
 * while the handler runs, the microseconds the client had left when it
 * sent the request (the header's budget_us, stored as it came: two
 * instructions per request); once the handler returned without an answer,
 * the deadline itself, on the Rpc's clock in units of 1,024 ns, truncated
 * to 32 bits (never 0). Compared by a signed difference, so a deadline is
 * kept at most 30 minutes ahead (longer ones are cut to that). Types and
 * inline helpers only.
 *
 * May include: util/.
 */
#ifndef URPC_RPC_DEADLINE_H
#define URPC_RPC_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_DL_SHIFT 10	     /* units of 1,024 ns */
#define URPC_DL_MAX_US 1800000000ull /* 30 minutes: well within 2^31 units */

/* The deadline @budget_us after @now (ns), as a deferred handle keeps it. */
static inline uint32_t urpc__dl_pack(uint64_t now, uint32_t budget_us)
{
	uint64_t d = now + URPC_MIN((uint64_t)budget_us, URPC_DL_MAX_US) * 1000;
	uint32_t u = (uint32_t)(d >> URPC_DL_SHIFT);

	return u ? u : 1;
}

/*
 * The deadline (Rpc clock, ns) a handle's @v names at @now: @running, the
 * handler runs and @v is the budget in microseconds; else the packed
 * deadline. 0: none; a deadline that has passed reads as 1 (or earlier).
 */
static inline uint64_t urpc__dl_abs(uint64_t now, uint32_t v, bool running)
{
	int32_t ahead;

	if (!v)
		return 0;
	if (running)
		return now + (uint64_t)v * 1000;
	ahead = (int32_t)(v - (uint32_t)(now >> URPC_DL_SHIFT));
	if (ahead <= 0)
		return 1;
	return ((now >> URPC_DL_SHIFT) + (uint64_t)ahead) << URPC_DL_SHIFT;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_DEADLINE_H */
