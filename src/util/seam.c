/* SPDX-License-Identifier: MIT */
/*
 * The clock and entropy seams (seam.h). Owns the installed pointers; calls
 * clock_gettime() and getrandom() only.
 */
#define _GNU_SOURCE
#include "seam.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "compiler.h"

static struct urpc_seams seams;

void urpc__seams_set(const struct urpc_seams *s)
{
	if (s)
		seams = *s;
	else
		memset(&seams, 0, sizeof(seams));
}

int urpc__seams_simulated(void)
{
	return seams.clock != NULL || seams.entropy != NULL;
}

uint64_t urpc__now_ns(void)
{
	struct timespec ts;

	if (unlikely(seams.clock != NULL))
		return seams.clock(seams.clock_arg);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64 finaliser: spreads the fallback's weak bits over the word. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void urpc__entropy(void *buf, size_t len)
{
	static uint64_t fallback_ctr;
	uint8_t *p = buf;
	size_t got = 0;

	if (seams.entropy) {
		seams.entropy(seams.entropy_arg, buf, len);
		return;
	}
	while (got < len) {
		ssize_t n = getrandom(p + got, len - got, GRND_NONBLOCK);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	while (got < len) {
		uint64_t v = mix64(urpc__now_ns() ^ ((uint64_t)getpid() << 32) ^
				   (uint64_t)(uintptr_t)&fallback_ctr ^
				   __atomic_add_fetch(&fallback_ctr, 1, __ATOMIC_RELAXED));
		size_t k = URPC_MIN(len - got, sizeof(v));

		memcpy(p + got, &v, k);
		got += k;
	}
}

uint64_t urpc__entropy64(void)
{
	uint64_t v;

	urpc__entropy(&v, sizeof(v));
	return v;
}
