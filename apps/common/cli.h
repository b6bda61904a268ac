/* SPDX-License-Identifier: MIT */
/*
 * Command-line and set-up helpers shared by the programs in apps/.
 * Header-only; uses <urpc/urpc.h> and libc alone, like the apps.
 */
#ifndef URPC_APPS_COMMON_CLI_H
#define URPC_APPS_COMMON_CLI_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <urpc/urpc.h>

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

/*
 * getopt_long() returned @c, an option it refused (':' for a missing
 * value, '?' for an unknown option): say which, for @prog. Returns 2, the
 * apps' exit status for bad usage.
 */
static inline int urpc_app_bad_option(const char *prog, int c, char **argv, int optind_now)
{
	if (c == ':')
		fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", prog,
			argv[optind_now - 1]);
	else
		fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog,
			argv[optind_now - 1]);
	return 2;
}

/* Arguments left after the options: 0 when none, else 2 with a message. */
static inline int urpc_app_no_operands(const char *prog, int argc, char **argv, int optind_now)
{
	if (optind_now >= argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind_now]);
	return 2;
}

/* The transports a program's --transport accepts (urpc_app_parse_transport's @allowed). */
#define URPC_APP_TRANSPORTS_NET                                                                    \
	((1u << URPC_TRANSPORT_DEFAULT) | (1u << URPC_TRANSPORT_UDP) | (1u << URPC_TRANSPORT_VERBS))
#define URPC_APP_NET_NOTE " (loop works only inside one process)"

/*
 * --transport @s, one of the kinds in @allowed (bits 1 << kind) into *@out:
 * 0, or -EINVAL with "--transport must be @names, got '@s'@note" on stderr.
 */
static inline int urpc_app_parse_transport(const char *prog, const char *s, unsigned allowed,
					   const char *names, const char *note,
					   enum urpc_transport_kind *out)
{
	if (urpc_transport_parse(s, out) || !(allowed & (1u << *out))) {
		fprintf(stderr, "%s: --transport must be %s, got '%s'%s\n", prog, names, s, note);
		return -EINVAL;
	}
	return 0;
}

/* Destroy @rpc; 0, or 1 with "cannot destroy the Rpc" and why on stderr. */
static inline int urpc_app_rpc_destroy(const char *prog, struct urpc_rpc *rpc)
{
	int ret = urpc_rpc_destroy(rpc);

	if (ret)
		fprintf(stderr, "%s: cannot destroy the Rpc: %s\n", prog, urpc_strerror(ret));
	return ret ? 1 : 0;
}

/* Destroy @nx; 0, or 1 with "cannot destroy the Nexus" and why on stderr. */
static inline int urpc_app_nexus_destroy(const char *prog, struct urpc_nexus *nx)
{
	int ret = urpc_nexus_destroy(nx);

	if (ret)
		fprintf(stderr, "%s: cannot destroy the Nexus: %s\n", prog, urpc_strerror(ret));
	return ret ? 1 : 0;
}

#endif /* URPC_APPS_COMMON_CLI_H */
