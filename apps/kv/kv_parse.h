/* SPDX-License-Identifier: MIT */
/*
 * The KV server's request parser: checks the bytes of a request (a peer's
 * input, trusted in nothing) and says where its keys and value lie, before
 * the server touches its table. Owns nothing; reads only the request bytes
 * it is given. Header-only; calls kv_proto.h (libc and <urpc/urpc.h>) and
 * nothing else. Used by urpc-kv-server and by the fuzzer
 * (tests/fuzz/fuzz_kv_req.c).
 */
#ifndef URPC_APPS_KV_PARSE_H
#define URPC_APPS_KV_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_proto.h"

/*
 * A single-key request (GET, PUT, DEL) of @len bytes at @d, received by the
 * server Rpc @id out of @nthreads (>= 1). KV_OK with @rh filled and *@hash
 * the key's hash: the key is the rh->key_len bytes at d + sizeof(*rh), the
 * value the rh->val_len bytes right after it, and the request ends there.
 * Otherwise the status to answer: KV_BAD_REQUEST (shorter than the header,
 * an empty or too long key, or a length that disagrees with the header) or
 * KV_WRONG_THREAD (the key belongs to another Rpc). What is particular to a
 * type (no value for GET and DEL, the value's size for PUT) is the caller's.
 */
static inline uint32_t kv_parse_key_req(const uint8_t *d, size_t len, unsigned id,
					unsigned nthreads, struct kv_req_hdr *rh, uint64_t *hash)
{
	if (len < sizeof(*rh))
		return KV_BAD_REQUEST;
	kv_get_req_hdr(d, rh);
	if (!rh->key_len || rh->key_len > KV_MAX_KEY ||
	    len != sizeof(*rh) + rh->key_len + (size_t)rh->val_len)
		return KV_BAD_REQUEST;
	*hash = kv_key_hash(d + sizeof(*rh), rh->key_len);
	if (*hash % nthreads != id)
		return KV_WRONG_THREAD;
	return KV_OK;
}

/* The keys of a multi-GET, in request order; pointers into the request. */
struct kv_mget_req {
	unsigned nkeys;
	const uint8_t *key[KV_MAX_MGET_KEYS];
	uint16_t key_len[KV_MAX_MGET_KEYS];
	uint64_t hash[KV_MAX_MGET_KEYS];
};

/*
 * A multi-GET of @len bytes at @d, received by the server Rpc @id out of
 * @nthreads (>= 1). KV_OK with @m filled (1 to KV_MAX_MGET_KEYS keys, each
 * 1 to KV_MAX_KEY bytes, which tile the request after its header exactly),
 * or the status to answer: KV_BAD_REQUEST, or KV_WRONG_THREAD as soon as a
 * key belongs to another Rpc (the keys after it are not looked at). @m is
 * unspecified then.
 */
static inline uint32_t kv_parse_mget(const uint8_t *d, size_t len, unsigned id, unsigned nthreads,
				     struct kv_mget_req *m)
{
	struct kv_req_hdr rh;
	size_t off;
	unsigned i;

	if (len < sizeof(rh))
		return KV_BAD_REQUEST;
	kv_get_req_hdr(d, &rh);
	if (!rh.nkeys || rh.nkeys > KV_MAX_MGET_KEYS || rh.key_len || rh.val_len)
		return KV_BAD_REQUEST;
	off = sizeof(rh);
	for (i = 0; i < rh.nkeys; i++) {
		uint16_t klen;

		if (off + 2 > len)
			return KV_BAD_REQUEST;
		klen = kv_get_le16(d + off);
		off += 2;
		if (!klen || klen > KV_MAX_KEY || off + klen > len)
			return KV_BAD_REQUEST;
		m->hash[i] = kv_key_hash(d + off, klen);
		if (m->hash[i] % nthreads != id)
			return KV_WRONG_THREAD;
		m->key[i] = d + off;
		m->key_len[i] = klen;
		off += klen;
	}
	if (off != len)
		return KV_BAD_REQUEST;
	m->nkeys = rh.nkeys;
	return KV_OK;
}

#endif /* URPC_APPS_KV_PARSE_H */
