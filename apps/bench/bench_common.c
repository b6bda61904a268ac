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
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the command line ------------------------------------------------------------ */

/*
 * --transport: loop, udp, verbs, xdp or default. Without it, the library's
 * default (URPC_TRANSPORT, else verbs on an active RDMA port, else udp),
 * resolved by bench_parse_args() so that each program knows what it runs.
 */
static int parse_transport(const char *prog, const char *val, void *dst)
{
	return urpc_app_parse_transport(
		prog, val,
		(1u << URPC_TRANSPORT_DEFAULT) | (1u << URPC_TRANSPORT_LOOP) |
			(1u << URPC_TRANSPORT_UDP) | (1u << URPC_TRANSPORT_VERBS) |
			(1u << URPC_TRANSPORT_XDP),
		"loop, udp, verbs, xdp or default", "", dst);
}

/* The rows for the shared flags @flags asks for, appended to @tab (room for 7). */
static unsigned cli_rows(struct bench_cli *cli, unsigned flags, struct urpc_app_opt *tab)
{
	unsigned n = 0;

	if (flags & BENCH_CLI_TRANSPORT)
		tab[n++] = (struct urpc_app_opt){
			URPC_APP_FN("transport", 't', &cli->transport, parse_transport)};
	if (flags & BENCH_CLI_DURATION)
		tab[n++] = (struct urpc_app_opt){
			URPC_APP_SECONDS("duration", 'd', &cli->duration, 0.01, 3600),
			.set = &cli->duration_set};
	if (flags & BENCH_CLI_DEVICES) {
		tab[n++] = (struct urpc_app_opt){URPC_APP_STR("device", 0, &cli->device)};
		tab[n++] = (struct urpc_app_opt){
			URPC_APP_STR("server-device", 0, &cli->server_device)};
	}
	if (flags & BENCH_CLI_PERFTEST)
		tab[n++] = (struct urpc_app_opt){
			URPC_APP_STR("perftest-server", 0, &cli->perftest_ip)};
	if (flags & BENCH_CLI_NO_BASELINE)
		tab[n++] = (struct urpc_app_opt){URPC_APP_FALSE("no-baseline", 0, &cli->baseline)};
	if (flags & BENCH_CLI_CSV)
		tab[n++] = (struct urpc_app_opt){URPC_APP_STR("csv", 0, &cli->csv)};
	return n;
}

int bench_parse_args(const char *prog, int argc, char **argv, struct bench_cli *cli, unsigned flags,
		     const struct urpc_app_opt *own, unsigned nown, void (*usage)(FILE *f))
{
	struct urpc_app_opt tab[URPC_APP_MAX_OPTS];
	struct urpc_app_cmdline cl = {
		.prog = prog, .usage = usage, .opts = tab, .refusal = URPC_APP_REFUSE_NAMED};
	int ret;

	cl.nopts = cli_rows(cli, flags, tab);
	assert(cl.nopts + nown <= URPC_APP_MAX_OPTS);
	memcpy(tab + cl.nopts, own, nown * sizeof(*own));
	cl.nopts += nown;
	ret = urpc_app_parse_args(&cl, argc, argv, NULL);
	if (ret)
		return ret;
	ret = urpc_transport_resolve(cli->transport, &cli->transport);
	if (ret) {
		fprintf(stderr, "%s: cannot choose the default transport: %s\n", prog,
			urpc_strerror(ret));
		return 2;
	}
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
	cli->transport = URPC_TRANSPORT_DEFAULT; /* the library's; resolved after parsing */
	cli->duration = 2.0;
	cli->baseline = true;
}

/* ---- pairs and system calls --------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The @q quantile of sorted @v[0..@n), @n > 0, interpolated between ranks. */
static double quantile(const double *v, unsigned n, double q)
{
	double pos = q * (n - 1);
	unsigned i = (unsigned)pos;

	return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

struct bench_spread bench_spread_of(double *v, unsigned n)
{
	struct bench_spread r = {0, 0, 0, 0, 0};

	if (!n)
		return r;
	qsort(v, n, sizeof(*v), cmp_double);
	r.min = v[0];
	r.max = v[n - 1];
	r.med = quantile(v, n, 0.5);
	r.q1 = quantile(v, n, 0.25);
	r.q3 = quantile(v, n, 0.75);
	return r;
}

void bench_sys_fmt(char *buf, size_t len, const struct bench_sys *s, uint64_t rpcs)
{
	double d = rpcs ? (double)rpcs : 1;
	int n;

	if (!rpcs || !(s->tx + s->rx + s->empty + s->sleeps)) {
		snprintf(buf, len, "-");
		return;
	}
	n = snprintf(buf, len, "%.2f/%.2f/%.2f", (double)s->tx / d, (double)s->rx / d,
		     (double)s->empty / d);
	if (s->sleeps && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " +%.2f ppoll", (double)s->sleeps / d);
}

void bench_sys_csv(FILE *f, const struct bench_sys *s, uint64_t rpcs)
{
	double d = rpcs ? (double)rpcs : 1;

	fprintf(f, "%.3f,%.3f,%.3f,%.3f", (double)s->tx / d, (double)s->rx / d,
		(double)s->empty / d, (double)s->sleeps / d);
}

void bench_sys_csv_sides(FILE *f, const struct bench_sys *cli, uint64_t rpcs,
			 const struct bench_sys *srv, uint64_t srv_rpcs,
			 const struct bench_sys *bcli, const struct bench_sys *bsrv, uint64_t brpcs)
{
	bench_sys_csv(f, cli, rpcs);
	fputc(',', f);
	bench_sys_csv(f, srv, srv_rpcs);
	fputc(',', f);
	bench_sys_csv(f, bcli, brpcs);
	fputc(',', f);
	bench_sys_csv(f, bsrv, brpcs);
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

const char *bench_host(void)
{
	const char *h = getenv("URPC_BENCH_HOST");

	return h && *h ? h : "127.0.0.1";
}

int bench_nexus_open(const char *prog, urpc_req_handler_fn fn, void *arg, struct urpc_nexus **nx)
{
	struct urpc_nexus_opts no;
	int ret;

	urpc_nexus_opts_init(&no);
	no.host = bench_host();
	ret = urpc_nexus_create(&no, nx);

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

	snprintf(hp, sizeof(hp), "%s:%u", bench_host(), urpc_nexus_port(sv->nx));
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

/* A UDP socket bound to 127.0.0.1, any port, its address in @addr; the fd or -errno. */
static int udp_socket(struct sockaddr_in *addr)
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

int bench_udp_pair_start(struct bench_udp_pair *p, void *(*echo)(void *p))
{
	struct sockaddr_in srv, cli;
	int ret;

	atomic_store(&p->stop, false);
	memset(&p->sys, 0, sizeof(p->sys));
	p->srv_fd = udp_socket(&srv);
	if (p->srv_fd < 0)
		return p->srv_fd;
	p->cli_fd = udp_socket(&cli);
	if (p->cli_fd < 0) {
		ret = p->cli_fd;
		goto out_close_srv;
	}
	if (connect(p->cli_fd, (struct sockaddr *)&srv, sizeof(srv))) {
		ret = -errno;
		goto out_close_cli;
	}
	ret = -pthread_create(&p->th, NULL, echo, p);
	if (ret)
		goto out_close_cli;
	return 0;

out_close_cli:
	close(p->cli_fd);
out_close_srv:
	close(p->srv_fd);
	return ret;
}

void bench_udp_pair_stop(struct bench_udp_pair *p)
{
	atomic_store(&p->stop, true);
	pthread_join(p->th, NULL);
	close(p->cli_fd);
	close(p->srv_fd);
}
