/* SPDX-License-Identifier: MIT */
/*
 * The benchmarks' shared command line (bench_parse_args) and the client
 * side's set-up: the Nexus, the pair of Rpcs, sessions, one event-loop
 * pass, output files and a raw UDP socket. Uses <urpc/urpc.h> and libc
 * alone; the declarations and their contracts are in bench_common.h.
 */
#include "bench_common.h"

#include <arpa/inet.h>
#include <assert.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/cli.h"

/* ---- the command line ------------------------------------------------------------ */

#define BENCH_MAX_OPTS 32
#define BENCH_OPT_LONG 256 /* getopt value of table row i without a letter: 256 + i */

/* The rows for the shared flags @flags asks for, appended to @tab (room for 7). */
static unsigned cli_rows(struct bench_cli *cli, unsigned flags, struct bench_opt *tab)
{
	unsigned n = 0;

	if (flags & BENCH_CLI_TRANSPORT)
		tab[n++] = (struct bench_opt){.name = "transport",
					      .key = 't',
					      .arg = BENCH_ARG_TRANSPORT,
					      .dst = &cli->transport};
	if (flags & BENCH_CLI_DURATION)
		tab[n++] = (struct bench_opt){.name = "duration",
					      .key = 'd',
					      .arg = BENCH_ARG_SECONDS,
					      .dst = &cli->duration,
					      .min = 0.01,
					      .max = 3600};
	if (flags & BENCH_CLI_DEVICES) {
		tab[n++] = (struct bench_opt){
			.name = "device", .arg = BENCH_ARG_STR, .dst = &cli->device};
		tab[n++] = (struct bench_opt){
			.name = "server-device", .arg = BENCH_ARG_STR, .dst = &cli->server_device};
	}
	if (flags & BENCH_CLI_PERFTEST)
		tab[n++] = (struct bench_opt){
			.name = "perftest-server", .arg = BENCH_ARG_STR, .dst = &cli->perftest_ip};
	if (flags & BENCH_CLI_NO_BASELINE)
		tab[n++] = (struct bench_opt){
			.name = "no-baseline", .arg = BENCH_ARG_FALSE, .dst = &cli->baseline};
	if (flags & BENCH_CLI_CSV)
		tab[n++] =
			(struct bench_opt){.name = "csv", .arg = BENCH_ARG_STR, .dst = &cli->csv};
	return n;
}

/* Store @val for row @r; 0, or -EINVAL reported. */
static int set_opt(const char *prog, const struct bench_opt *r, const char *val)
{
	char what[48];
	int n;

	snprintf(what, sizeof(what), "--%s", r->name);
	switch (r->arg) {
	case BENCH_ARG_STR:
		*(const char **)r->dst = val;
		return 0;
	case BENCH_ARG_FALSE:
		*(bool *)r->dst = false;
		return 0;
	case BENCH_ARG_ULONG:
		return urpc_app_parse_ulong(prog, val, what, (unsigned long)r->min,
					    (unsigned long)r->max, r->dst);
	case BENCH_ARG_SECONDS:
		return bench_parse_seconds(prog, val, what, r->min, r->max, r->dst);
	case BENCH_ARG_LIST:
		n = bench_parse_list(prog, val, what, (unsigned long)r->min, (unsigned long)r->max,
				     r->dst, r->cap);
		if (n < 0)
			return n;
		*r->count = (unsigned)n;
		return 0;
	case BENCH_ARG_TRANSPORT:
		return bench_parse_transport(prog, val, r->dst);
	case BENCH_ARG_FN:
		return r->fn(prog, val, r->dst);
	}
	return -EINVAL;
}

int bench_parse_args(const char *prog, int argc, char **argv, struct bench_cli *cli, unsigned flags,
		     const struct bench_opt *own, unsigned nown, void (*usage)(FILE *f))
{
	struct bench_opt tab[BENCH_MAX_OPTS];
	struct option lopts[BENCH_MAX_OPTS + 2];
	char shorts[2 * BENCH_MAX_OPTS + 4], *p = shorts;
	unsigned i, n;
	int c;

	n = cli_rows(cli, flags, tab);
	assert(n + nown <= BENCH_MAX_OPTS);
	memcpy(tab + n, own, nown * sizeof(*own));
	n += nown;
	*p++ = ':'; /* a missing value returns ':', reported below with the option's name */
	for (i = 0; i < n; i++) {
		bool has_arg = tab[i].arg != BENCH_ARG_FALSE;

		lopts[i] =
			(struct option){.name = tab[i].name,
					.has_arg = has_arg ? required_argument : no_argument,
					.val = tab[i].key ? tab[i].key : BENCH_OPT_LONG + (int)i};
		if (tab[i].key) {
			*p++ = (char)tab[i].key;
			if (has_arg)
				*p++ = ':';
		}
	}
	lopts[n] = (struct option){.name = "help", .has_arg = no_argument, .val = 'h'};
	lopts[n + 1] = (struct option){0};
	*p++ = 'h';
	*p = '\0';

	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		const struct bench_opt *r = NULL;

		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c >= BENCH_OPT_LONG)
			r = &tab[c - BENCH_OPT_LONG];
		for (i = 0; i < n && !r && c != ':' && c != '?'; i++)
			if (tab[i].key == c)
				r = &tab[i];
		if (!r)
			return urpc_app_bad_option(prog, c, argv, optind);
		if (set_opt(prog, r, optarg))
			return 2;
		if (r->dst == &cli->duration)
			cli->duration_set = true;
	}
	if (urpc_app_no_operands(prog, argc, argv, optind))
		return 2;
	if (!cli->server_device)
		cli->server_device = cli->device;
	if (flags & BENCH_CLI_PERFTEST) {
		if (!cli->perftest_ip)
			cli->perftest_ip = getenv("URPC_RXE_SERVER_IP");
		if (!cli->perftest_ip)
			cli->perftest_ip = "127.0.0.1";
	}
	return 0;
}

void bench_cli_init(struct bench_cli *cli)
{
	memset(cli, 0, sizeof(*cli));
	cli->transport = URPC_TRANSPORT_UDP;
	cli->duration = 2.0;
	cli->baseline = true;
}

/* ---- output files ---------------------------------------------------------------- */

int bench_file_open(const char *prog, const char *opt, const char *path, const char *header,
		    FILE **out)
{
	FILE *f;

	*out = NULL;
	if (!path)
		return 0;
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s '%s': %s\n", prog, opt, path, strerror(errno));
		return -errno;
	}
	fputs(header, f);
	*out = f;
	return 0;
}

int bench_file_close(const char *prog, const char *opt, const char *path, FILE *f)
{
	if (!f || !fclose(f))
		return 0;
	fprintf(stderr, "%s: cannot write %s '%s': %s\n", prog, opt, path, strerror(errno));
	return 1;
}

/* ---- the Nexus, the Rpcs and sessions --------------------------------------------- */

int bench_nexus_open(const char *prog, urpc_req_handler_fn fn, void *arg, struct urpc_nexus **nx)
{
	int ret = urpc_nexus_create(NULL, nx);

	if (ret) {
		fprintf(stderr, "%s: cannot create the Nexus: %s\n", prog, urpc_strerror(ret));
		return ret;
	}
	ret = urpc_nexus_register_handler(*nx, BENCH_REQ_TYPE, fn, arg);
	if (ret) {
		fprintf(stderr, "%s: cannot register the handler: %s\n", prog, urpc_strerror(ret));
		urpc_nexus_destroy(*nx);
		*nx = NULL;
	}
	return ret;
}

void bench_rpc_opts(struct urpc_rpc_opts *ro, enum urpc_transport_kind transport)
{
	urpc_rpc_opts_init(ro);
	ro->transport = transport;
	ro->idle_block_us = 0;
	ro->connect_timeout_ms = (uint32_t)(BENCH_SETUP_S * 1000);
}

int bench_rpcs_create(const char *prog, struct bench_server *sv, const struct urpc_rpc_opts *ro,
		      const char *device, struct bench_sm *sm, const char *srv_what,
		      const char *cli_what, struct urpc_rpc **cli)
{
	struct urpc_rpc_opts co = *ro;
	int ret;

	ret = bench_server_start(sv);
	if (ret) {
		fprintf(stderr, "%s: cannot create the server Rpc (%s): %s\n", prog, srv_what,
			urpc_strerror(ret));
		return ret;
	}
	co.device = device;
	co.sm_handler = bench_sm_event;
	co.sm_arg = sm;
	ret = urpc_rpc_create(sv->nx, BENCH_CLI_ID, &co, cli);
	if (ret) {
		fprintf(stderr, "%s: cannot create the client Rpc (%s): %s\n", prog, cli_what,
			urpc_strerror(ret));
		bench_server_stop(prog, sv);
	}
	return ret;
}

int bench_run_once(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv)
{
	int ret = urpc_rpc_run_event_loop_once(rpc);

	if (!ret && !sv->threaded)
		ret = urpc_rpc_run_event_loop_once(sv->rpc);
	if (ret)
		fprintf(stderr, "%s: event loop: %s\n", prog, urpc_strerror(ret));
	return ret;
}

int bench_connect(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv,
		  struct bench_sm *sm, int *sessions, unsigned n)
{
	double deadline = bench_now_s() + BENCH_SETUP_S;
	unsigned want = sm->connected + n, i;
	char hp[32];
	int ret;

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(sv->nx));
	for (i = 0; i < n; i++)
		sessions[i] = -1;
	for (i = 0; i < n; i++) {
		ret = urpc_session_connect(rpc, hp, BENCH_SRV_ID, &sessions[i]);
		if (ret)
			return ret;
	}
	while (sm->connected < want && !sm->failed && bench_now_s() < deadline) {
		ret = bench_run_once(prog, rpc, sv);
		if (ret)
			return ret;
	}
	if (sm->failed)
		return sm->status;
	return sm->connected >= want ? 0 : -ETIMEDOUT;
}

void bench_drain(const char *prog, struct urpc_rpc *rpc, const struct bench_server *sv,
		 const struct bench_sm *sm, unsigned want, bool (*busy)(const void *arg),
		 const void *arg)
{
	double deadline = bench_now_s() + BENCH_SETUP_S;

	while ((busy(arg) || sm->disconnected < want) && bench_now_s() < deadline)
		if (bench_run_once(prog, rpc, sv))
			return;
}

/* ---- the raw baselines ------------------------------------------------------------ */

int bench_udp_socket(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -errno;
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) ||
	    getsockname(fd, (struct sockaddr *)addr, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}
