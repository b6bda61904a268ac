/* SPDX-License-Identifier: MIT */
/*
 * Command-line helpers shared by the programs in apps/. Header-only; uses
 * libc alone, like the apps use include/urpc alone.
 */
#ifndef URPC_APPS_COMMON_CLI_H
#define URPC_APPS_COMMON_CLI_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Parse a decimal integer in [@min, @max] for the option @what of program
 * @prog. 0 and *out set, or -EINVAL with a one-line error on stderr naming
 * the option, the range and what was given.
 */
static inline int urpc_app_parse_ulong(const char *prog, const char *s, const char *what,
				       unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "%s: %s must be an integer from %lu to %lu, got '%s'\n", prog, what,
			min, max, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

#endif /* URPC_APPS_COMMON_CLI_H */
