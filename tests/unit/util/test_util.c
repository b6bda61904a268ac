/* SPDX-License-Identifier: MIT */
/* Public helpers: version, status strings, transport names, the log sink. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <urpc/urpc.h>

#include "util/log.h"
#include "util/rand.h"

Test(util, version_matches_macros)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", URPC_VERSION_MAJOR, URPC_VERSION_MINOR,
		 URPC_VERSION_PATCH);
	cr_assert_str_eq(urpc_version(), want);
}

Test(util, strerror_covers_engine_codes)
{
	cr_assert_str_eq(urpc_strerror(0), "success");
	cr_assert(strstr(urpc_strerror(-ECONNRESET), "reset") != NULL);
	cr_assert(strstr(urpc_strerror(-EAGAIN), "retry") != NULL);
	cr_assert(strstr(urpc_strerror(-EPERM), "thread") != NULL);
	/* Codes urpc has no text of its own for fall back to libc's. */
	cr_assert_str_eq(urpc_strerror(-ENOSPC), strerror(ENOSPC));
	cr_assert_str_eq(urpc_strerror(12345), "unknown status");
}

Test(util, transport_names_round_trip)
{
	static const char *names[] = {"default", "loop", "udp", "verbs"};
	enum urpc_transport_kind k;
	unsigned i;

	for (i = 0; i < 4; i++) {
		cr_assert_eq(urpc_transport_parse(names[i], &k), 0);
		cr_assert_str_eq(urpc_transport_str(k), names[i]);
	}
	k = URPC_TRANSPORT_LOOP;
	cr_assert_eq(urpc_transport_parse("UDP", &k), -EINVAL);
	cr_assert_eq(urpc_transport_parse("", &k), -EINVAL);
	cr_assert_eq(urpc_transport_parse(NULL, &k), -EINVAL);
	cr_assert_eq(k, URPC_TRANSPORT_LOOP, "a failed parse must leave the output alone");
}

struct captured {
	int calls;
	enum urpc_log_level level;
	char line[640];
};

static void capture(enum urpc_log_level level, const char *line, void *arg)
{
	struct captured *c = arg;

	c->calls++;
	c->level = level;
	snprintf(c->line, sizeof(c->line), "%s", line);
}

Test(util, log_sink_level_and_errno)
{
	struct captured c = {0};

	urpc_log_set_sink(capture, &c);
	urpc_log_set_level(URPC_LOG_WARN);
	errno = EXDEV;
	URPC_WARN(7, "value %d", 42);
	cr_assert_eq(errno, EXDEV, "logging must preserve errno");
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.level, URPC_LOG_WARN);
	cr_assert(strstr(c.line, "value 42") != NULL, "line: %s", c.line);
	cr_assert(strstr(c.line, "[7]") != NULL, "line: %s", c.line);
	cr_assert(strstr(c.line, __func__) != NULL, "line: %s", c.line);

	URPC_INFO(-1, "filtered out");
	cr_assert_eq(c.calls, 1, "INFO must be dropped at level WARN");
	urpc_log_set_sink(NULL, NULL);
	urpc_log_set_level(URPC_LOG_INFO);
}

Test(util, ratelimit_allows_one_line_a_second)
{
	struct urpc_log_rl rl = {0};
	int allowed = 0, i;

	for (i = 0; i < 1000; i++)
		allowed += urpc__log_rl_allow(&rl);
	cr_assert_eq(allowed, 1);
	cr_assert_eq(rl.suppressed, 999);
}

Test(util, rand_is_deterministic_per_seed)
{
	struct urpc_rand a, b, c;
	int i, differ = 0;

	urpc__rand_seed(&a, 1);
	urpc__rand_seed(&b, 1);
	urpc__rand_seed(&c, 2);
	for (i = 0; i < 100; i++) {
		uint64_t x = urpc__rand_next(&a);

		cr_assert_eq(x, urpc__rand_next(&b));
		differ += x != urpc__rand_next(&c);
		cr_assert_lt(urpc__rand_unit(&a), 1.0);
		urpc__rand_unit(&b);
		urpc__rand_unit(&c);
	}
	cr_assert_gt(differ, 90);
}
