/* SPDX-License-Identifier: MIT */
/*
 * Tests that run urpc-kv-server as a process: start it with a shell command,
 * wait until it says where it listens, stop it and check that nothing it
 * started outlives the test. Header-only, for test files.
 */
#ifndef URPC_TEST_KV_PROC_H
#define URPC_TEST_KV_PROC_H

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Run @cmd (its output redirected to @out by the caller's command) in
 * /bin/sh, which execs it: dash forks for a command with redirections
 * unless told to exec, and the pid returned would be the shell's, so a
 * SIGTERM to it would leave the server running. The server leads a process
 * group of its own (kv_server_stop checks that the group is empty) and gets
 * SIGTERM if the test's process dies first (a failed assertion). Poll @out
 * for "listening on 127.0.0.1:PORT" and write "127.0.0.1:PORT" into @addr
 * (@addr_len bytes) once it comes. A server that exits first fails the test
 * at once, one that says nothing fails it after 60 s. Returns the server's
 * pid.
 */
static inline pid_t kv_server_spawn(const char *cmd, const char *out, char *addr, size_t addr_len)
{
	pid_t pid = fork();
	int i;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char line[1100];

		snprintf(line, sizeof(line), "exec %s", cmd);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl("/bin/sh", "sh", "-c", line, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* as the child does: whichever runs first */
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

/*
 * Stop the server @pid with SIGTERM; it must exit with status 0 within 30 s,
 * and no process of its group may be left (one would keep running after
 * the test). A server that does not stop is killed and fails the test.
 */
static inline void kv_server_stop(pid_t pid, const char *out)
{
	int i, st = 0;
	pid_t r = 0;
	bool left;

	cr_assert_eq(kill(pid, SIGTERM), 0);
	for (i = 0; i < 3000 && r == 0; i++) {
		r = waitpid(pid, &st, WNOHANG);
		if (r == 0)
			usleep(10000);
	}
	if (r == 0) {
		kill(-pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail("the server did not exit within 30 s of SIGTERM (see %s)", out);
	}
	left = kill(-pid, 0) == 0 || errno != ESRCH;
	if (left)
		kill(-pid, SIGKILL);
	cr_assert_eq(r, pid);
	cr_assert(!left, "a process of the server's group outlived it (see %s)", out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the server ended with status 0x%x on SIGTERM (see %s)", st, out);
}

#endif /* URPC_TEST_KV_PROC_H */
