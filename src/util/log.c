/* SPDX-License-Identifier: MIT */
/*
 * Logging: the level (URPC_LOG, urpc_log_set_level), the line's format and
 * the sink. Lines name the module, function and source line only at level
 * DBG: at the others a line is for the user, who acts on its text.
 * Calls: libc only.
 */
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

#ifdef URPC_DEBUG
#define HAVE_DBG_LINES 1
#else
#define HAVE_DBG_LINES 0
#endif

/* What URPC_LOG says, and through *@note a line to print about it (or NULL). */
static int level_from_env(const char **note)
{
	const char *s = getenv("URPC_LOG");

	*note = NULL;
	if (!s || !*s)
		return URPC_LOG_WARN;
	if (!strcmp(s, "err") || !strcmp(s, "error"))
		return URPC_LOG_ERR;
	if (!strcmp(s, "warn") || !strcmp(s, "warning"))
		return URPC_LOG_WARN;
	if (!strcmp(s, "info"))
		return URPC_LOG_INFO;
	if (!strcmp(s, "dbg") || !strcmp(s, "debug")) {
		if (!HAVE_DBG_LINES)
			*note = "URPC_LOG=dbg: this is a release build, which has no debug lines "
				"(configure with -DURPC_DEBUG=ON for them); showing the other lines "
				"with their source locations";
		return URPC_LOG_DBG;
	}
	*note = "URPC_LOG is none of err, warn, info, dbg: using warn";
	return URPC_LOG_WARN;
}

int urpc__log_enabled(enum urpc_log_level level)
{
	int cur = atomic_load_explicit(&log_level, memory_order_relaxed);

	if (cur < 0) {
		const char *note;
		int env = level_from_env(&note);

		/* Whoever wins stores the same value; a concurrent setter wins. */
		if (atomic_compare_exchange_strong(&log_level, &cur, env) && note)
			urpc__log(URPC_LOG_WARN, URPC_LOG_MODULE, __func__, __LINE__, -1, "%s",
				  note);
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
	char where[160] = "", id[24] = "";
	urpc_log_fn fn;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ctx >= 0)
		snprintf(id, sizeof(id), " [%ld]", ctx);
	/* Where in the source: for whoever debugs urpc, at level DBG only. */
	if (atomic_load_explicit(&log_level, memory_order_relaxed) >= URPC_LOG_DBG)
		snprintf(where, sizeof(where), " %s:%s:%d", module, func, line);
	snprintf(out, sizeof(out), "urpc %s%s%s %s", urpc_log_level_str(level), where, id, msg);

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
