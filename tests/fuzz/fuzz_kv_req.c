/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the KV demo's request parser (apps/kv/kv_parse.h), the
 * checks urpc-kv-server runs on a request before it touches its table.
 *
 * Input: byte 0 picks the request type (GET, PUT, DEL, MGET), byte 1 the
 * server's Rpc thread count (1 to 64), byte 2 the receiving thread; the rest
 * is the request payload, parsed from an exact-size heap copy (ASan sees any
 * read past the end). An accepted request must describe only bytes inside
 * the payload, tile it exactly, and name keys of the receiving thread.
 *
 * Owns: nothing across inputs. Calls: apps/kv/kv_parse.h and kv_proto.h.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../apps/kv/kv_parse.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static bool inside(const uint8_t *base, size_t len, const uint8_t *p, size_t n)
{
	return p >= base && (size_t)(p - base) <= len && n <= len - (size_t)(p - base);
}

/* GET, PUT or DEL: what the server then does with the bytes must stay in bounds. */
static void single_key(uint8_t type, const uint8_t *d, size_t len, unsigned id, unsigned nthreads)
{
	struct kv_req_hdr rh;
	uint64_t hash = 0;
	uint32_t st = kv_parse_key_req(d, len, id, nthreads, &rh, &hash);
	const uint8_t *key = d + sizeof(rh);

	FUZZ_CHECK(st == KV_OK || st == KV_BAD_REQUEST || st == KV_WRONG_THREAD, "status %u", st);
	if (st == KV_BAD_REQUEST)
		return;
	/* WRONG_THREAD too has read the key to hash it. */
	FUZZ_CHECK(rh.key_len >= 1 && rh.key_len <= KV_MAX_KEY, "key_len %u", rh.key_len);
	FUZZ_CHECK(len == sizeof(rh) + rh.key_len + (size_t)rh.val_len,
		   "%zu bytes for a %u-byte key and a %u-byte value", len, rh.key_len, rh.val_len);
	FUZZ_CHECK(inside(d, len, key, (size_t)rh.key_len + rh.val_len), "key or value outside");
	FUZZ_CHECK(hash == kv_key_hash(key, rh.key_len), "hash of another key");
	FUZZ_CHECK((hash % nthreads == id) == (st == KV_OK), "thread %u of %u, hash %% n = %llu",
		   id, nthreads, (unsigned long long)(hash % nthreads));
	if (st == KV_OK && type == KV_REQ_PUT && rh.val_len <= KV_MAX_VALUE) {
		/* handle_put() copies key and value into the item: touch them all. */
		uint8_t *item = malloc((size_t)rh.key_len + rh.val_len);

		FUZZ_CHECK(item, "out of memory");
		memcpy(item, key, (size_t)rh.key_len + rh.val_len);
		free(item);
	}
}

static void mget(const uint8_t *d, size_t len, unsigned id, unsigned nthreads)
{
	struct kv_mget_req m;
	uint32_t st = kv_parse_mget(d, len, id, nthreads, &m);
	const uint8_t *next = d + sizeof(struct kv_req_hdr);
	unsigned i;

	FUZZ_CHECK(st == KV_OK || st == KV_BAD_REQUEST || st == KV_WRONG_THREAD, "status %u", st);
	if (st != KV_OK)
		return;
	FUZZ_CHECK(m.nkeys >= 1 && m.nkeys <= KV_MAX_MGET_KEYS, "nkeys %u", m.nkeys);
	for (i = 0; i < m.nkeys; i++) {
		/* Each key follows its 16-bit length, right after the previous key. */
		FUZZ_CHECK(m.key[i] == next + 2, "key %u is not where its length says", i);
		FUZZ_CHECK(m.key_len[i] >= 1 && m.key_len[i] <= KV_MAX_KEY, "key %u: %u bytes", i,
			   m.key_len[i]);
		FUZZ_CHECK(inside(d, len, m.key[i], m.key_len[i]), "key %u outside", i);
		FUZZ_CHECK(m.hash[i] == kv_key_hash(m.key[i], m.key_len[i]), "key %u: hash", i);
		FUZZ_CHECK(m.hash[i] % nthreads == id, "key %u of another thread", i);
		next = m.key[i] + m.key_len[i];
	}
	FUZZ_CHECK(next == d + len, "%zu bytes left after the keys", (size_t)(d + len - next));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t types[] = {KV_REQ_GET, KV_REQ_PUT, KV_REQ_DEL, KV_REQ_MGET};
	struct fz_in in = {data, size};
	uint8_t type = types[fz_u8(&in) % 4];
	unsigned nthreads = 1 + fz_u8(&in) % KV_MAX_THREADS;
	unsigned id = fz_u8(&in) % nthreads;
	uint8_t *d = malloc(in.n ? in.n : 1);

	FUZZ_CHECK(d, "out of memory");
	if (in.n)
		memcpy(d, in.p, in.n);
	if (type == KV_REQ_MGET)
		mget(d, in.n, id, nthreads);
	else
		single_key(type, d, in.n, id, nthreads);
	free(d);
	return 0;
}
