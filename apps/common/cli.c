/* SPDX-License-Identifier: MIT */
/*
 * The apps' option parser and value checks (declared in cli.h). Uses libc
 * alone: nothing here calls urpc.
 */
#include "cli.h"

#include <assert.h>
#include <getopt.h>
#include <limits.h>
#include <string.h>

int urpc_app_parse_ulong(const char *prog, const char *s, const char *what, unsigned long min,
			 unsigned long max, unsigned long *out)
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

int urpc_app_parse_seconds(const char *prog, const char *s, const char *what, double min,
			   double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max)) {
		fprintf(stderr, "%s: %s must be a number of seconds from %g to %g, got '%s'\n",
			prog, what, min, max, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int urpc_app_parse_list(const char *prog, const char *s, const char *what, unsigned long min,
			unsigned long max, unsigned long *out, unsigned cap)
{
	const char *p = s;
	unsigned n = 0;

	for (;;) {
		unsigned long v;
		char *end;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (errno || end == p || (*end && *end != ',') || p[0] < '0' || p[0] > '9' ||
		    v < min || v > max || n == cap) {
			fprintf(stderr,
				"%s: %s must be a comma-separated list of at most %u integers from "
				"%lu to %lu, got '%s'\n",
				prog, what, cap, min, max, s);
			return -EINVAL;
		}
		out[n++] = v;
		if (!*end)
			return (int)n;
		p = end + 1;
	}
}

/* A row's bound as an integer: 2^64 and above (ULONG_MAX as a double) is ULONG_MAX. */
static unsigned long bound(double v)
{
	return v >= (double)ULONG_MAX ? ULONG_MAX : (unsigned long)v;
}

/* Store @val for row @r; 0, or -EINVAL reported. */
static int set_opt(const char *prog, const struct urpc_app_opt *r, const char *val)
{
	char what[48];
	int n;

	snprintf(what, sizeof(what), "--%s", r->name);
	switch (r->arg) {
	case URPC_APP_ARG_STR:
		*(const char **)r->dst = val;
		return 0;
	case URPC_APP_ARG_TRUE:
	case URPC_APP_ARG_FALSE:
		*(bool *)r->dst = r->arg == URPC_APP_ARG_TRUE;
		return 0;
	case URPC_APP_ARG_ULONG:
		return urpc_app_parse_ulong(prog, val, what, bound(r->min), bound(r->max), r->dst);
	case URPC_APP_ARG_SECONDS:
		return urpc_app_parse_seconds(prog, val, what, r->min, r->max, r->dst);
	case URPC_APP_ARG_LIST:
		n = urpc_app_parse_list(prog, val, what, bound(r->min), bound(r->max), r->dst,
					r->cap);
		if (n < 0)
			return n;
		*r->count = (unsigned)n;
		return 0;
	case URPC_APP_ARG_FN:
		return r->fn(prog, val, r->dst);
	case URPC_APP_ARG_HELP:
		break; /* the caller's */
	}
	return -EINVAL;
}

#define OPT_LONG 256 /* getopt's value for row i without a letter: OPT_LONG + i */

/* getopt refused an option (@c is ':' or '?'): report it in @cl's style; 2. */
static int refuse(const struct urpc_app_cmdline *cl, int c, char **argv)
{
	switch (cl->refusal) {
	case URPC_APP_REFUSE_USAGE: /* getopt has said why */
		cl->usage(stderr);
		break;
	case URPC_APP_REFUSE_TRY:
		fprintf(stderr, "Try '%s --help' for more information.\n", cl->prog);
		break;
	case URPC_APP_REFUSE_NAMED:
		if (c == ':')
			fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", cl->prog,
				argv[optind - 1]);
		else
			fprintf(stderr, "%s: unknown option '%s' (see --help)\n", cl->prog,
				argv[optind - 1]);
		break;
	}
	return 2;
}

int urpc_app_parse_args(const struct urpc_app_cmdline *cl, int argc, char **argv,
			int *first_operand)
{
	struct option lopts[URPC_APP_MAX_OPTS + 2];
	char shorts[2 * URPC_APP_MAX_OPTS + 5], *p = shorts;
	const struct urpc_app_opt *r;
	unsigned i, n = cl->nopts;
	bool help_placed = false;
	int c;

	assert(n <= URPC_APP_MAX_OPTS);
	if (cl->in_order)
		*p++ = '+';
	if (cl->refusal == URPC_APP_REFUSE_NAMED)
		*p++ = ':'; /* a missing value returns ':', not '?' */
	for (i = 0; i < n; i++) {
		bool has_arg = cl->opts[i].arg != URPC_APP_ARG_TRUE &&
			       cl->opts[i].arg != URPC_APP_ARG_FALSE;
		int key = cl->opts[i].key;

		if (cl->opts[i].arg == URPC_APP_ARG_HELP) {
			has_arg = false;
			key = 'h';
			help_placed = true;
		}
		lopts[i] = (struct option){.name = cl->opts[i].name,
					   .has_arg = has_arg ? required_argument : no_argument,
					   .val = key ? key : OPT_LONG + (int)i};
		if (key) {
			*p++ = (char)key;
			if (has_arg)
				*p++ = ':';
		}
	}
	i = n;
	if (!help_placed) {
		lopts[i++] = (struct option){.name = "help", .has_arg = no_argument, .val = 'h'};
		*p++ = 'h';
	}
	lopts[i] = (struct option){0};
	*p = '\0';

	opterr = cl->refusal != URPC_APP_REFUSE_NAMED; /* getopt speaks for the others */
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		if (c == 'h') {
			cl->usage(stdout);
			return 1;
		}
		r = c >= OPT_LONG && c < OPT_LONG + (int)n ? &cl->opts[c - OPT_LONG] : NULL;
		for (i = 0; i < n && !r && c != ':' && c != '?'; i++)
			if (cl->opts[i].key == c)
				r = &cl->opts[i];
		if (!r)
			return refuse(cl, c, argv);
		if (set_opt(cl->prog, r, optarg))
			return 2;
		if (r->set)
			*r->set = true;
	}
	if (first_operand)
		*first_operand = optind;
	if ((unsigned)(argc - optind) > cl->max_operands) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", cl->prog,
			argv[optind + (int)cl->max_operands]);
		return 2;
	}
	return 0;
}
