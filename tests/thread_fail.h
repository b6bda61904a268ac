/* SPDX-License-Identifier: MIT */
/*
 * Failures seen on a test's threads (test_threads, test_loop_threads): the
 * first message is kept, every one is counted, and give_up tells the other
 * threads to stop. Header-only: each test program gets its own copy.
 * Calls pthread and stdio only.
 */
#ifndef URPC_TESTS_THREAD_FAIL_H
#define URPC_TESTS_THREAD_FAIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned nerrors;
static char first_err[256];
static atomic_bool give_up; /* a thread failed for good: the others stop too */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));

static void fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&err_lock);
	if (nerrors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(first_err, sizeof(first_err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&err_lock);
}

#endif /* URPC_TESTS_THREAD_FAIL_H */
