/* SPDX-License-Identifier: MIT */
/*
 * Command-line and set-up helpers shared by the programs in apps/: one
 * table-driven option parser (urpc_app_parse_args) and the checks behind it,
 * in cli.c (libc alone: library urpc_app_cli); the helpers that call urpc
 * are static inline here, so that the library links no urpc library and a
 * program brings its own (the shared one, or urpc_internal for urpc-demo).
 */
#ifndef URPC_APPS_COMMON_CLI_H
#define URPC_APPS_COMMON_CLI_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <urpc/urpc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- option values (cli.c): 0 and *out set, or -EINVAL with a one-line error on stderr ---- */

/* A decimal integer in [@min, @max] for the option @what of program @prog. */
int urpc_app_parse_ulong(const char *prog, const char *s, const char *what, unsigned long min,
			 unsigned long max, unsigned long *out);

/* A decimal number of seconds in [@min, @max] for option @what. */
int urpc_app_parse_seconds(const char *prog, const char *s, const char *what, double min,
			   double max, double *out);

/*
 * A comma-separated list of integers in [@min, @max], at most @cap of them,
 * into @out; the count, or -EINVAL reported.
 */
int urpc_app_parse_list(const char *prog, const char *s, const char *what, unsigned long min,
			unsigned long max, unsigned long *out, unsigned cap);

/* ---- the option parser (cli.c) ---- */

/* What one option stores in its row's dst. */
enum urpc_app_arg {
	URPC_APP_ARG_STR,     /* const char **: the value as given */
	URPC_APP_ARG_TRUE,    /* bool *: true; the option takes no value */
	URPC_APP_ARG_FALSE,   /* bool *: false; the option takes no value */
	URPC_APP_ARG_ULONG,   /* unsigned long *: an integer from min to max */
	URPC_APP_ARG_SECONDS, /* double *: seconds from min to max */
	URPC_APP_ARG_LIST,    /* unsigned long[cap], its length in *count: integers */
	URPC_APP_ARG_FN,      /* fn(prog, value, dst): 0, or -EINVAL reported */
	URPC_APP_ARG_HELP,    /* -h, --help at this place in the table (else it comes last) */
};

/*
 * One option: --name (and -key when key is not 0), and where its value goes.
 * A refused value is reported as "--name must be ...". ULONG's max is
 * ULONG_MAX when it is 2^64 or more (a double cannot hold ULONG_MAX).
 */
struct urpc_app_opt {
	const char *name;
	int key;
	enum urpc_app_arg arg;
	void *dst;
	double min, max; /* ULONG, SECONDS, LIST */
	unsigned cap;	 /* LIST */
	unsigned *count; /* LIST */
	int (*fn)(const char *prog, const char *val, void *dst);
	bool *set; /* when not NULL: set to true once the option is given */
};

/*
 * How a program reports an option getopt refused (an unknown option, a
 * missing value): each keeps the style it has always had.
 */
enum urpc_app_refusal {
	URPC_APP_REFUSE_USAGE, /* getopt's message, then the whole usage on stderr */
	URPC_APP_REFUSE_TRY, /* getopt's message, then "Try 'PROG --help' for more information." */
	URPC_APP_REFUSE_NAMED, /* "PROG: option '--x' needs a value (see --help)", or
				  "PROG: unknown option '--x' (see --help)" */
};

/* A program's command line. */
struct urpc_app_cmdline {
	const char *prog;
	void (*usage)(FILE *f); /* -h, --help: usage(stdout) */
	const struct urpc_app_opt *opts;
	unsigned nopts; /* at most URPC_APP_MAX_OPTS */
	enum urpc_app_refusal refusal;
	unsigned max_operands; /* arguments allowed after the options; more are refused */
	bool in_order;	       /* stop at the first operand ("+" in getopt's terms) */
};

/*
 * A row's fields, so that a table reads one option a line; more fields may
 * follow in the braces: {URPC_APP_ULONG("keys", 'k', &o->keys, 1, 100), .set = &o->load}.
 * @n the long name, @k the letter or 0, @d where the value goes.
 */
#define URPC_APP_STR(n, k, d) .name = (n), .key = (k), .arg = URPC_APP_ARG_STR, .dst = (d)
#define URPC_APP_TRUE(n, k, d) .name = (n), .key = (k), .arg = URPC_APP_ARG_TRUE, .dst = (d)
#define URPC_APP_FALSE(n, k, d) .name = (n), .key = (k), .arg = URPC_APP_ARG_FALSE, .dst = (d)
#define URPC_APP_ULONG(n, k, d, lo, hi)                                                            \
	.name = (n), .key = (k), .arg = URPC_APP_ARG_ULONG, .dst = (d), .min = (lo), .max = (hi)
#define URPC_APP_SECONDS(n, k, d, lo, hi)                                                          \
	.name = (n), .key = (k), .arg = URPC_APP_ARG_SECONDS, .dst = (d), .min = (lo), .max = (hi)
#define URPC_APP_LIST(n, k, d, lo, hi, cap_, count_)                                               \
	.name = (n), .key = (k), .arg = URPC_APP_ARG_LIST, .dst = (d), .min = (lo), .max = (hi),   \
	.cap = (cap_), .count = (count_)
#define URPC_APP_FN(n, k, d, f)                                                                    \
	.name = (n), .key = (k), .arg = URPC_APP_ARG_FN, .dst = (d), .fn = (f)
#define URPC_APP_HELP .name = "help", .arg = URPC_APP_ARG_HELP

/* The fields of a command line that names its rows @rows (an array). */
#define URPC_APP_CMDLINE(prog_, usage_, rows)                                                      \
	.prog = (prog_), .usage = (usage_), .opts = (rows), .nopts = URPC_APP_NOPTS(rows)

#define URPC_APP_MAX_OPTS 32
#define URPC_APP_NOPTS(rows) ((unsigned)(sizeof(rows) / sizeof((rows)[0])))

/*
 * Parse @argv with getopt_long: the rows of @cl (their order is the long
 * option table's, which getopt's "ambiguous" message follows) and
 * -h/--help, appended last unless a HELP row places it. Values are checked as they come, in order; the
 * first refusal ends the parse. Operands beyond @cl->max_operands are
 * refused with "unexpected argument 'ARG' (see --help)". *@first_operand
 * (when not NULL) is the index in @argv of the first operand.
 * Returns 0: run; 1: help printed; 2: bad usage (reported).
 */
int urpc_app_parse_args(const struct urpc_app_cmdline *cl, int argc, char **argv,
			int *first_operand);

/* ---- helpers that call urpc (inline: the library links none) ---- */

/* The transports a program's --transport accepts (urpc_app_parse_transport's @allowed). */
#define URPC_APP_TRANSPORTS_NET                                                                    \
	((1u << URPC_TRANSPORT_DEFAULT) | (1u << URPC_TRANSPORT_UDP) |                             \
	 (1u << URPC_TRANSPORT_VERBS) | (1u << URPC_TRANSPORT_XDP))
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

/* A row's fn for --transport udp|verbs|default across processes (dst: the kind). */
static inline int urpc_app_net_transport(const char *prog, const char *val, void *dst)
{
	return urpc_app_parse_transport(prog, val, URPC_APP_TRANSPORTS_NET,
					"udp, verbs, xdp or default", URPC_APP_NET_NOTE, dst);
}

/* A row for -t, --transport udp|verbs|default into the kind @d, setting *@set_. */
#define URPC_APP_NET_TRANSPORT(d, set_)                                                            \
	URPC_APP_FN("transport", 't', (d), urpc_app_net_transport), .set = (set_)

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

#ifdef __cplusplus
}
#endif

#endif /* URPC_APPS_COMMON_CLI_H */
