/* SPDX-License-Identifier: MIT */
/*
 * The key-value demo over a given transport (KV_KIND_NAME), as a user runs
 * it: urpc-kv-server and urpc-kv-client as processes, a short load run in
 * verify mode (zero mismatches), and a large value through the one-sided
 * path. Built for verbs, where it runs on Soft-RoCE in tests/vm (server on
 * URPC_TEST_DEVICE_B, client on URPC_TEST_DEVICE_A) and skips elsewhere;
 * apps/kv/kv_smoke.sh covers udp in the plain suite.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kv_proc.h"
#include "verbs_skip.h"

#ifndef KV_SERVER
#error "build with -DKV_SERVER=path -DKV_CLIENT=path -DKV_KIND_NAME=\"verbs\""
#endif

static pid_t server;
static char addr[64];

static const char *dev(const char *env)
{
	const char *d = getenv(env);

	return d && *d ? d : "";
}

/*
 * Both programs' --peer-timeout: at the default 500 ms, a process that the
 * host (here a VM under emulation) does not run for about 0.4 s is failed
 * by its peer and the run's sessions reset; 10 s, as kv_smoke's healthy
 * runs.
 */
#define PEER_TIMEOUT_MS 10000u

/* Start the server with its output in @out; fills addr once it listens. */
static void server_up(const char *out)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "%s --port 0 --threads 2 --transport %s %s%s --peer-timeout %u > %s 2>&1",
		 KV_SERVER, KV_KIND_NAME, *dev("URPC_TEST_DEVICE_B") ? "--device " : "",
		 dev("URPC_TEST_DEVICE_B"), PEER_TIMEOUT_MS, out);
	server = kv_server_spawn(cmd, out, addr, sizeof(addr));
}

static void server_down(const char *out)
{
	kv_server_stop(server, out);
}

/* Run the client with @args; returns its exit status, output in @out. */
static int client(const char *args, const char *out)
{
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd),
		 "%s --transport %s %s%s --server %s --peer-timeout %u %s > %s 2>&1", KV_CLIENT,
		 KV_KIND_NAME, *dev("URPC_TEST_DEVICE_A") ? "--device " : "",
		 dev("URPC_TEST_DEVICE_A"), addr, PEER_TIMEOUT_MS, args, out);
	st = system(cmd);
	cr_assert(WIFEXITED(st), "the client died: %s", cmd);
	return WEXITSTATUS(st);
}

static bool file_has(const char *path, const char *s)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, s) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void show(const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f))
		cr_log_info("%s", line);
	if (f)
		fclose(f);
}

Test(kv, verify_run_with_large_values, .timeout = 300)
{
	char srv[64], out[64];

	verbs_skip_without_port(URPC_TRANSPORT_VERBS);
	snprintf(srv, sizeof(srv), "/tmp/kv-server.%d", getpid());
	snprintf(out, sizeof(out), "/tmp/kv-client.%d", getpid());
	server_up(srv);
	/* Mixed reads and writes from two client threads, every read checked. */
	cr_assert_eq(client("--verify -j 2 -D 2 -w A -k 2000", out), 0, "verify run failed");
	show(out);
	cr_assert(file_has(out, " 0 mismatches"), "no zero-mismatch line");
	/* Values above one datagram move by one-sided READ. */
	cr_assert_eq(client("--verify -j 1 -D 1 -w A -k 50 -v 300000", out), 0,
		     "large-value verify run failed");
	show(out);
	cr_assert(file_has(out, " 0 mismatches"), "no zero-mismatch line for large values");
	server_down(srv);
	unlink(srv);
	unlink(out);
}
