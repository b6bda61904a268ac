/* SPDX-License-Identifier: MIT */
/*
 * Tests that run urpc-kv-server as a process: start it with a shell command
 * and wait until it says where it listens. Header-only, for test files.
 */
#ifndef URPC_TEST_KV_PROC_H
#define URPC_TEST_KV_PROC_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Run @cmd (its output redirected to @out by the caller's command) in
 * /bin/sh; poll @out for "listening on 127.0.0.1:PORT" and write
 * "127.0.0.1:PORT" into @addr (@addr_len bytes) once it comes. A server that
 * exits first fails the test at once, one that says nothing fails it after
 * 60 s. Returns the server's pid.
 */
static inline pid_t kv_server_spawn(const char *cmd, const char *out, char *addr, size_t addr_len)
{
	pid_t pid = fork();
	int i;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	addr[0] = '\0';
	for (i = 0; i < 6000 && !addr[0]; i++) {
		char line[512];
		FILE *f = fopen(out, "r");
		unsigned port;
		int st;

		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, "listening on ");

			if (p && sscanf(p, "listening on 127.0.0.1:%u", &port) == 1)
				snprintf(addr, addr_len, "127.0.0.1:%u", port);
		}
		if (f)
			fclose(f);
		if (addr[0])
			break;
		if (waitpid(pid, &st, WNOHANG) == pid)
			cr_assert_fail(
				"the server exited (status 0x%x) before it listened (see %s)", st,
				out);
		usleep(10000);
	}
	cr_assert(addr[0], "the server did not say where it listens within 60 s (see %s)", out);
	return pid;
}

#endif /* URPC_TEST_KV_PROC_H */
