/* SPDX-License-Identifier: MIT */
/*
 * Logging. URPC_ERR/WARN/INFO(ctx, fmt, ...) prefix the level and the object
 * id @ctx (an Rpc or transport id; -1 for none), and at level DBG also the
 * module, function and line. They preserve errno. The default level is WARN:
 * a healthy start prints nothing. A line at WARN or ERR says what happened
 * and what to do, in the user's terms (options, environment variables),
 * never the library's internal names. URPC_DBG compiles to nothing unless
 * URPC_DEBUG is defined.
 * Datapath callers use the _RATELIMIT forms, which print at most one line a
 * second per call site and count the rest.
 */
#ifndef URPC_UTIL_LOG_H
#define URPC_UTIL_LOG_H

#include <stdint.h>

#include <urpc/urpc.h>

#include "seam.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef URPC_LOG_MODULE
#define URPC_LOG_MODULE "urpc"
#endif

/* Thread: any. Formats one line and hands it to the sink. Keeps errno. */
void urpc__log(enum urpc_log_level level, const char *module, const char *func, int line, long ctx,
	       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Thread: any. True when a line of @level would be emitted. */
int urpc__log_enabled(enum urpc_log_level level);

/*
 * Thread: any. Rate limiter state for one call site: true when a line may be
 * printed now (at most one per second); otherwise counts the suppressed line.
 */
struct urpc_log_rl {
	uint64_t last_ns;
	uint64_t suppressed;
};
int urpc__log_rl_allow(struct urpc_log_rl *rl);

/* urpc__now_ns() lives with the other seams. */

#define URPC_LOG_(lvl, ctx, ...)                                                                   \
	do {                                                                                       \
		if (urpc__log_enabled(lvl))                                                        \
			urpc__log(lvl, URPC_LOG_MODULE, __func__, __LINE__, (long)(ctx),           \
				  __VA_ARGS__);                                                    \
	} while (0)

#define URPC_ERR(ctx, ...) URPC_LOG_(URPC_LOG_ERR, ctx, __VA_ARGS__)
#define URPC_WARN(ctx, ...) URPC_LOG_(URPC_LOG_WARN, ctx, __VA_ARGS__)
#define URPC_INFO(ctx, ...) URPC_LOG_(URPC_LOG_INFO, ctx, __VA_ARGS__)
#ifdef URPC_DEBUG
#define URPC_DBG(ctx, ...) URPC_LOG_(URPC_LOG_DBG, ctx, __VA_ARGS__)
#else
#define URPC_DBG(ctx, ...)                                                                         \
	do {                                                                                       \
	} while (0)
#endif

#define URPC_LOG_RATELIMIT_(lvl, ctx, ...)                                                         \
	do {                                                                                       \
		static struct urpc_log_rl rl_;                                                     \
		if (urpc__log_rl_allow(&rl_))                                                      \
			URPC_LOG_(lvl, ctx, __VA_ARGS__);                                          \
	} while (0)
#define URPC_ERR_RATELIMIT(ctx, ...) URPC_LOG_RATELIMIT_(URPC_LOG_ERR, ctx, __VA_ARGS__)
#define URPC_WARN_RATELIMIT(ctx, ...) URPC_LOG_RATELIMIT_(URPC_LOG_WARN, ctx, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_LOG_H */
