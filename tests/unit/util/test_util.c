/* SPDX-License-Identifier: MIT */
/* Public helpers: version, status strings, transport names, the log sink. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "util/copy.h"
#include "util/csprng.h"
#include "util/idset.h"
#include "util/log.h"
#include "util/rand.h"

Test(util, version_matches_macros)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", URPC_VERSION_MAJOR, URPC_VERSION_MINOR,
		 URPC_VERSION_PATCH);
	cr_assert_str_eq(urpc_version(), want);
}

Test(util, strerror_covers_engine_codes)
{
	cr_assert_str_eq(urpc_strerror(0), "success");
	cr_assert(strstr(urpc_strerror(-ECONNRESET), "reset") != NULL);
	cr_assert(strstr(urpc_strerror(-EAGAIN), "retry") != NULL);
	cr_assert(strstr(urpc_strerror(-EPERM), "thread") != NULL);
	/* Codes urpc has no text of its own for fall back to libc's. */
	cr_assert_str_eq(urpc_strerror(-EXDEV), strerror(EXDEV));
	cr_assert_str_eq(urpc_strerror(12345), "unknown status");
}

/* Each status names its one cause in urpc's terms (docs/API.md, "Status codes"). */
Test(util, strerror_names_the_cause)
{
	static const int codes[] = {
		-EAGAIN,     -EINVAL,	     -ENOMEM,	  -EMSGSIZE,	 -EACCES, -ETIMEDOUT,
		-ECONNRESET, -EHOSTDOWN,     -ESTALE,	  -ECONNREFUSED, -ENOENT, -ENOSYS,
		-ENOSPC,     -EADDRNOTAVAIL, -ENOTCONN,	  -EPERM,	 -EBUSY,  -ENODEV,
		-ENOTSUP,    -EEXIST,	     -EADDRINUSE, -EIO,		 -EPROTO};
	unsigned i, j;

	cr_assert(strstr(urpc_strerror(-ENOSPC), "too many sessions"));
	cr_assert(strstr(urpc_strerror(-EADDRNOTAVAIL), "address mismatch"));
	cr_assert(strstr(urpc_strerror(-ENOENT), "no such Rpc"));
	cr_assert(strstr(urpc_strerror(-ESTALE), "restarted"));
	cr_assert(strstr(urpc_strerror(-EHOSTDOWN), "heartbeat"));
	cr_assert(strstr(urpc_strerror(-ENOSYS), "no handler"));
	cr_assert(strstr(urpc_strerror(-EAGAIN), "back-pressure"));
	cr_assert_null(strstr(urpc_strerror(-EADDRNOTAVAIL), "key"));
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		cr_assert_str_neq(urpc_strerror(codes[i]), strerror(-codes[i]),
				  "%d has libc's text", codes[i]);
		for (j = 0; j < i; j++)
			cr_assert_str_neq(urpc_strerror(codes[i]), urpc_strerror(codes[j]),
					  "%d and %d share a text", codes[i], codes[j]);
	}
}

Test(util, transport_names_round_trip)
{
	static const char *names[] = {"default", "loop", "udp", "verbs"};
	enum urpc_transport_kind k;
	unsigned i;

	for (i = 0; i < 4; i++) {
		cr_assert_eq(urpc_transport_parse(names[i], &k), 0);
		cr_assert_str_eq(urpc_transport_str(k), names[i]);
	}
	k = URPC_TRANSPORT_LOOP;
	cr_assert_eq(urpc_transport_parse("UDP", &k), -EINVAL);
	cr_assert_eq(urpc_transport_parse("", &k), -EINVAL);
	cr_assert_eq(urpc_transport_parse(NULL, &k), -EINVAL);
	cr_assert_eq(k, URPC_TRANSPORT_LOOP, "a failed parse must leave the output alone");
}

struct captured {
	int calls;
	enum urpc_log_level level;
	char line[640];
};

static void capture(enum urpc_log_level level, const char *line, void *arg)
{
	struct captured *c = arg;

	c->calls++;
	c->level = level;
	snprintf(c->line, sizeof(c->line), "%s", line);
}

Test(util, log_sink_level_and_errno)
{
	struct captured c = {0};

	urpc_log_set_sink(capture, &c);
	urpc_log_set_level(URPC_LOG_WARN);
	errno = EXDEV;
	URPC_WARN(7, "value %d", 42);
	cr_assert_eq(errno, EXDEV, "logging must preserve errno");
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.level, URPC_LOG_WARN);
	cr_assert(strstr(c.line, "value 42") != NULL, "line: %s", c.line);
	cr_assert(strstr(c.line, "[7]") != NULL, "line: %s", c.line);
	cr_assert(strstr(c.line, __func__) == NULL, "no function names below DBG: %s", c.line);
	cr_assert_str_eq(c.line, "urpc WARN [7] value 42");

	URPC_INFO(-1, "filtered out");
	cr_assert_eq(c.calls, 1, "INFO must be dropped at level WARN");

	/* At DBG a line names its source, for whoever debugs the library. */
	urpc_log_set_level(URPC_LOG_DBG);
	URPC_INFO(-1, "where");
	cr_assert_eq(c.calls, 2);
	cr_assert(strstr(c.line, __func__) != NULL, "line: %s", c.line);
	cr_assert(strstr(c.line, "where") != NULL, "line: %s", c.line);
	urpc_log_set_sink(NULL, NULL);
	urpc_log_set_level(URPC_LOG_WARN);
}

/* A process that sets nothing logs at WARN: INFO lines (transport, hugepages) stay quiet. */
Test(util, log_default_level_is_warn)
{
	struct captured c = {0};

	cr_assert_eq(unsetenv("URPC_LOG"), 0);
	urpc_log_set_sink(capture, &c);
	URPC_INFO(-1, "healthy start");
	cr_assert_eq(c.calls, 0, "INFO printed by default: %s", c.line);
	URPC_WARN(-1, "something to act on");
	cr_assert_eq(c.calls, 1);
	urpc_log_set_sink(NULL, NULL);
}

/* URPC_LOG=info shows INFO; a bad value falls back to warn and says so. */
Test(util, log_level_from_environment)
{
	struct captured c = {0};

	cr_assert_eq(setenv("URPC_LOG", "info", 1), 0);
	urpc_log_set_sink(capture, &c);
	URPC_INFO(-1, "shown");
	cr_assert_eq(c.calls, 1);
	urpc_log_set_sink(NULL, NULL);
}

Test(util, log_bad_environment_value_is_reported)
{
	struct captured c = {0};

	cr_assert_eq(setenv("URPC_LOG", "verbose", 1), 0);
	urpc_log_set_sink(capture, &c);
	URPC_INFO(-1, "hidden");
	cr_assert_eq(c.calls, 1, "one line about URPC_LOG");
	cr_assert(strstr(c.line, "URPC_LOG is none of err, warn, info, dbg"), "%s", c.line);
	urpc_log_set_sink(NULL, NULL);
}

Test(util, ratelimit_allows_one_line_a_second)
{
	struct urpc_log_rl rl = {0};
	int allowed = 0, i;

	for (i = 0; i < 1000; i++)
		allowed += urpc__log_rl_allow(&rl);
	cr_assert_eq(allowed, 1);
	cr_assert_eq(rl.suppressed, 999);
}

Test(util, rand_is_deterministic_per_seed)
{
	struct urpc_rand a, b, c;
	int i, differ = 0;

	urpc__rand_seed(&a, 1);
	urpc__rand_seed(&b, 1);
	urpc__rand_seed(&c, 2);
	for (i = 0; i < 100; i++) {
		uint64_t x = urpc__rand_next(&a);

		cr_assert_eq(x, urpc__rand_next(&b));
		differ += x != urpc__rand_next(&c);
		cr_assert_lt(urpc__rand_unit(&a), 1.0);
		urpc__rand_unit(&b);
		urpc__rand_unit(&c);
	}
	cr_assert_gt(differ, 90);
}

/* RFC 8439, 2.3.2: the ChaCha20 block function's test vector. */
Test(util, chacha20_block_matches_rfc8439)
{
	static const uint32_t want[16] = {
		0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
		0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
		0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2,
	};
	const uint32_t nonce[3] = {0x09000000, 0x4a000000, 0x00000000};
	uint32_t key[8], out[16];
	unsigned i;

	for (i = 0; i < 8; i++) /* key bytes 00 01 .. 1f, little-endian words */
		key[i] = (uint32_t)(4 * i) | (uint32_t)(4 * i + 1) << 8 |
			 (uint32_t)(4 * i + 2) << 16 | (uint32_t)(4 * i + 3) << 24;
	urpc__chacha20_block(key, 1, nonce, out);
	for (i = 0; i < 16; i++)
		cr_assert_eq(out[i], want[i], "word %u: %08x, want %08x", i, out[i], want[i]);
}

/*
 * Session tokens come from it (issue 11, item 3): one token does not give
 * the next, as it did with xorshift64* (whose output is its state times a
 * constant, so state = output * inverse, then one step). The attack that
 * broke the old tokens predicts none of 4,096 here; the bits are balanced.
 */
Test(util, csprng_outputs_are_not_predictable_from_earlier_ones)
{
	const uint64_t c = 0x2545f4914f6cdd1dull;
	struct urpc_csprng g, h;
	uint64_t inv = c, prev, v, ones = 0;
	unsigned i, predicted = 0;

	for (i = 0; i < 5; i++) /* Newton: the inverse of an odd number mod 2^64 */
		inv *= 2 - c * inv;
	cr_assert_eq(c * inv, 1ull);
	urpc__csprng_init(&g, 0);
	prev = urpc__csprng_next(&g);
	for (i = 0; i < 4096; i++) {
		uint64_t x = prev * inv;

		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		v = urpc__csprng_next(&g);
		predicted += v == x * c;
		ones += (uint64_t)__builtin_popcountll(v);
		prev = v;
	}
	cr_assert_eq(predicted, 0, "%u of 4096 outputs predicted from the one before", predicted);
	/* 4096 * 64 bits, half set: sd 181; 6 sd either way. */
	cr_assert(ones > 131072 - 1086 && ones < 131072 + 1086, "%llu ones of 262144 bits",
		  (unsigned long long)ones);
	/* The same attack does predict xorshift64*: the test can fail. */
	{
		struct urpc_rand r;
		uint64_t a, b, x;

		urpc__rand_seed(&r, 42);
		a = urpc__rand_next(&r);
		b = urpc__rand_next(&r);
		x = a * inv;
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		cr_assert_eq(x * c, b, "the attack works on the old generator");
	}
	/* A seed makes it repeatable (tests); entropy makes two generators differ. */
	urpc__csprng_init(&g, 7);
	urpc__csprng_init(&h, 7);
	cr_assert_eq(urpc__csprng_next(&g), urpc__csprng_next(&h));
	urpc__csprng_init(&g, 0);
	urpc__csprng_init(&h, 0);
	cr_assert_neq(urpc__csprng_next(&g), urpc__csprng_next(&h));
}

/* A plain array answers what the number set must: lowest free, highest taken. */
static void idset_check(uint32_t max, unsigned ops, uint64_t seed)
{
	struct urpc_idset s;
	struct urpc_rand r;
	bool *ref = calloc(max, sizeof(*ref));
	uint32_t taken = 0, i, lo, end, hiwater = 0;
	unsigned k;

	cr_assert_not_null(ref);
	cr_assert_eq(urpc__idset_init(&s, max), 0);
	urpc__rand_seed(&r, seed);
	cr_assert_eq(urpc__idset_end(&s), 0);
	for (k = 0; k < ops; k++) {
		/* Mostly take until full, then mostly give back: both ends get exercised. */
		bool take = taken < max && (urpc__rand_next(&r) % 4 != 0 || !taken ||
					    (k / (ops / 4 + 1)) % 2 == 0);

		if (take) {
			int64_t id = urpc__idset_take(&s);

			for (lo = 0; lo < max && ref[lo]; lo++) /* lowest first: short */
				;
			cr_assert_eq(id, (int64_t)lo, "max %u: took %lld, lowest free is %u", max,
				     (long long)id, lo);
			ref[lo] = true;
			taken++;
			if (lo + 1 > hiwater)
				hiwater = lo + 1;
		} else if (taken) {
			i = (uint32_t)(urpc__rand_next(&r) % hiwater); /* all taken are below */
			while (!ref[i])
				i = i + 1 == max ? 0 : i + 1;
			urpc__idset_put(&s, i);
			ref[i] = false;
			taken--;
		}
		for (end = hiwater; end && !ref[end - 1]; end--)
			;
		cr_assert_eq(urpc__idset_end(&s), end, "max %u: end %u, want %u", max,
			     urpc__idset_end(&s), end);
		cr_assert_eq(s.count, taken);
	}
	/* Full: no number left, and the set says so without reading past its end. */
	while (taken < max) {
		cr_assert_geq(urpc__idset_take(&s), 0);
		taken++;
	}
	cr_assert_eq(urpc__idset_take(&s), -1);
	for (i = 0; i < max; i++)
		cr_assert(urpc__idset_has(&s, i));
	cr_assert_not(urpc__idset_has(&s, max));
	urpc__idset_put(&s, max - 1);
	cr_assert_eq(urpc__idset_take(&s), (int64_t)(max - 1));
	urpc__idset_fini(&s);
	free(ref);
}

Test(util, idset_lowest_free_and_highest_taken)
{
	static const uint32_t sizes[] = {1, 2, 63, 64, 65, 4095, 4096, 4097, 262145};
	unsigned i;

	for (i = 0; i < (unsigned)(sizeof(sizes) / sizeof(sizes[0])); i++)
		idset_check(sizes[i], sizes[i] > 5000 ? 3000 : 4 * sizes[i] + 50, 1000 + i);
	/* The largest set the Rpc allows: only the words it touches are resident. */
	idset_check(1u << 24, 2000, 7);
}

Test(util, idset_refuses_bad_sizes)
{
	struct urpc_idset s;

	cr_assert_eq(urpc__idset_init(&s, 0), -EINVAL);
	cr_assert_eq(urpc__idset_init(&s, (1u << 24) + 1), -EINVAL);
	urpc__idset_fini(&s); /* zeroed by the failed init: harmless */
}

/*
 * urpc__copy() against memcpy: every length of its inline cases and past
 * them, at every source and destination offset within 16 bytes, and not a
 * byte written outside the copy.
 */
Test(util, copy_matches_memcpy_at_every_length_and_offset)
{
	static uint8_t src[400], dst[400], want[400];
	size_t n, so, dof, i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	for (n = 0; n <= 300; n++) {
		for (so = 0; so < 16; so++) {
			for (dof = 0; dof < 16; dof++) {
				memset(dst, 0xa5, sizeof(dst));
				memset(want, 0xa5, sizeof(want));
				memcpy(want + dof, src + so, n);
				urpc__copy(dst + dof, src + so, n);
				cr_assert(memcmp(dst, want, sizeof(dst)) == 0,
					  "length %zu, offsets %zu/%zu", n, so, dof);
			}
		}
	}
}
