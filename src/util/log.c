/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic(urpc_log_fn) log_sink;
static void *_Atomic log_sink_arg;
static atomic_int log_level = -1; /* -1: not read from the environment yet */

static int level_from_env(void)
{
	const char *s = getenv("URPC_LOG");

	if (!s)
		return URPC_LOG_INFO;
	if (!strcmp(s, "err"))
		return URPC_LOG_ERR;
	if (!strcmp(s, "warn"))
		return URPC_LOG_WARN;
	if (!strcmp(s, "dbg") || !strcmp(s, "debug"))
		return URPC_LOG_DBG;
	return URPC_LOG_INFO;
}

int urpc__log_enabled(enum urpc_log_level level)
{
	int cur = atomic_load_explicit(&log_level, memory_order_relaxed);

	if (cur < 0) {
		int env = level_from_env();

		/* Whoever wins stores the same value; a concurrent setter wins. */
		atomic_compare_exchange_strong(&log_level, &cur, env);
		cur = atomic_load_explicit(&log_level, memory_order_relaxed);
	}
	return (int)level <= cur;
}

URPC_API void urpc_log_set_sink(urpc_log_fn fn, void *arg)
{
	atomic_store(&log_sink_arg, arg);
	atomic_store(&log_sink, fn);
}

URPC_API void urpc_log_set_level(enum urpc_log_level level)
{
	atomic_store(&log_level, (int)level);
}

URPC_API const char *urpc_log_level_str(enum urpc_log_level level)
{
	switch (level) {
	case URPC_LOG_ERR:
		return "ERR";
	case URPC_LOG_WARN:
		return "WARN";
	case URPC_LOG_INFO:
		return "INFO";
	case URPC_LOG_DBG:
		return "DBG";
	}
	return "?";
}

void urpc__log(enum urpc_log_level level, const char *module, const char *func, int line, long ctx,
	       const char *fmt, ...)
{
	int saved_errno = errno;
	char msg[512];
	char out[640];
	urpc_log_fn fn;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ctx >= 0)
		snprintf(out, sizeof(out), "urpc %s %s:%s:%d [%ld] %s", urpc_log_level_str(level),
			 module, func, line, ctx, msg);
	else
		snprintf(out, sizeof(out), "urpc %s %s:%s:%d %s", urpc_log_level_str(level), module,
			 func, line, msg);

	fn = atomic_load(&log_sink);
	if (fn)
		fn(level, out, atomic_load(&log_sink_arg));
	else
		fprintf(stderr, "%s\n", out);
	errno = saved_errno;
}

int urpc__log_rl_allow(struct urpc_log_rl *rl)
{
	uint64_t now = urpc__now_ns();
	uint64_t last = __atomic_load_n(&rl->last_ns, __ATOMIC_RELAXED);

	if (last && now - last < 1000000000ull) {
		__atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_store_n(&rl->last_ns, now, __ATOMIC_RELAXED);
	return 1;
}
