/* SPDX-License-Identifier: MIT */
/*
 * The part of Criterion's interface that the thread tests use (Test(),
 * cr_assert*()), as a plain program: every test runs in turn in this
 * process, and the first failed assertion prints its place and exits 1.
 *
 * Why: ThreadSanitizer and Criterion do not mix. Criterion 2.4.1 aborts at
 * start under -fsanitize=thread ("Could not initialize inheritable arena",
 * Criterion issue 274, checked here with clang 14), so the TSan builds of
 * the thread tests include this header instead (PLAIN_TEST defined; see
 * tests/CMakeLists.txt). Usage: the program [substring of suite::name].
 */
#ifndef URPC_TESTS_PLAIN_TEST_H
#define URPC_TESTS_PLAIN_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct plain_test {
	const char *suite;
	const char *name;
	void (*fn)(void);
	struct plain_test *next;
};

static struct plain_test *plain_tests;

/* Register @t; tests run in the order of the file. */
static inline void plain_test_add(struct plain_test *t)
{
	struct plain_test **pp = &plain_tests;

	while (*pp)
		pp = &(*pp)->next;
	*pp = t;
}

#define Test(suite, name)                                                                          \
	static void suite##_##name(void);                                                          \
	static struct plain_test plain_##suite##_##name = {#suite, #name, suite##_##name, NULL};   \
	__attribute__((constructor)) static void plain_add_##suite##_##name(void)                  \
	{                                                                                          \
		plain_test_add(&plain_##suite##_##name);                                           \
	}                                                                                          \
	static void suite##_##name(void)

static void plain_fail(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), noreturn));

static void plain_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: Assertion failed: %s\n ", file, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

/* The message arguments are optional; " " keeps the format a non-empty literal. */
#define cr_assert(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			plain_fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                    \
	} while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)

int main(int argc, char **argv)
{
	struct plain_test *t;
	unsigned ran = 0;

	for (t = plain_tests; t; t = t->next) {
		char full[256];
		struct timespec a, b;

		snprintf(full, sizeof(full), "%s::%s", t->suite, t->name);
		if (argc > 1 && !strstr(full, argv[1]))
			continue;
		clock_gettime(CLOCK_MONOTONIC, &a);
		t->fn();
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("[PASS] %s: (%.2fs)\n", full,
		       (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
		fflush(stdout);
		ran++;
	}
	printf("[====] Synthesis: Tested: %u | Passing: %u | Failing: 0\n", ran, ran);
	return ran ? 0 : 1;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TESTS_PLAIN_TEST_H */
