/* SPDX-License-Identifier: MIT */
/*
 * The wire format of urpc-kv-server and urpc-kv-client. Header-only; libc
 * and <urpc/urpc.h> alone.
 *
 * Every field is little-endian and read or written through memcpy (a
 * request's bytes may sit unaligned in the receive ring).
 *
 * Requests (urpc request type, then the payload):
 *   KV_REQ_GET, KV_REQ_DEL  kv_req_hdr{key_len, nkeys 1, val_len 0} key
 *   KV_REQ_PUT              kv_req_hdr{key_len, nkeys 1, val_len} key value
 *   KV_REQ_MGET             kv_req_hdr{0, nkeys, 0} then nkeys x (le16 len, key)
 *   KV_REQ_INFO, KV_REQ_STATS  empty
 * Responses:
 *   GET                     kv_resp_hdr{status, val_len} value
 *   PUT, DEL                kv_resp_hdr{status, 0}
 *   MGET                    kv_resp_hdr{status, nkeys} then nkeys x (kv_resp_hdr, value)
 *   INFO                    kv_resp_hdr{KV_OK, sizeof(kv_info)} kv_info
 *   STATS                   kv_resp_hdr{KV_OK, len} text
 *
 * Keys are partitioned over the server's Rpc threads: key K lives on the
 * Rpc with id kv_key_hash(K) % nthreads, which a client learns from INFO.
 * Every key of one MGET must belong to the Rpc it is sent to. A response
 * (one value, or all of an MGET's) is bounded by URPC_MAX_MSG_SIZE.
 */
#ifndef URPC_APPS_KV_PROTO_H
#define URPC_APPS_KV_PROTO_H

#include <assert.h>
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <urpc/urpc.h>

/* Request types (wire-visible). */
#define KV_REQ_GET 1
#define KV_REQ_PUT 2
#define KV_REQ_DEL 3
#define KV_REQ_MGET 4
#define KV_REQ_INFO 5
#define KV_REQ_STATS 6

#define KV_MAX_KEY 250		 /* bytes in a key */
#define KV_MAX_VALUE (32u << 20) /* bytes in a value */
#define KV_MAX_MGET_KEYS 64	 /* keys in one multi-GET */
#define KV_MAX_THREADS 64	 /* server Rpc threads (Rpc ids 0..63) */
/*
 * --peer-timeout of both programs, in ms (urpc_rpc_opts.peer_timeout_ms):
 * at least two of the engine's 100 ms heartbeat intervals, so that one late
 * heartbeat fails nothing; at most an hour.
 */
#define KV_PEER_TIMEOUT_MIN_MS 200
#define KV_PEER_TIMEOUT_MAX_MS 3600000

/* Response status (wire-visible). */
enum kv_status {
	KV_OK = 0,
	KV_NOT_FOUND = 1,    /* GET/DEL: no such key */
	KV_FULL = 2,	     /* PUT: the server's memory budget is used up */
	KV_BAD_REQUEST = 3,  /* malformed request */
	KV_TOO_BIG = 4,	     /* key, value or multi-GET response above the limits */
	KV_WRONG_THREAD = 5, /* the key belongs to another server Rpc */
	KV_SERVER_ERROR = 6, /* the server could not allocate a response buffer */
};

static inline const char *kv_status_str(uint32_t st)
{
	switch (st) {
	case KV_OK:
		return "ok";
	case KV_NOT_FOUND:
		return "not found";
	case KV_FULL:
		return "server full (its --memory budget is used up)";
	case KV_BAD_REQUEST:
		return "bad request";
	case KV_TOO_BIG:
		return "too big";
	case KV_WRONG_THREAD:
		return "key sent to the wrong server thread";
	case KV_SERVER_ERROR:
		return "server error (out of buffers)";
	}
	return "unknown status";
}

struct kv_req_hdr {
	uint16_t key_len;
	uint16_t nkeys;
	uint32_t val_len;
};
static_assert(sizeof(struct kv_req_hdr) == 8, "kv_req_hdr is 8 bytes on the wire");

struct kv_resp_hdr {
	uint32_t status;
	uint32_t val_len;
};
static_assert(sizeof(struct kv_resp_hdr) == 8, "kv_resp_hdr is 8 bytes on the wire");

struct kv_info {
	uint32_t nthreads;
	uint32_t max_value;
	uint64_t memory_budget; /* bytes */
};
static_assert(sizeof(struct kv_info) == 16, "kv_info is 16 bytes on the wire");

static inline void kv_put_req_hdr(uint8_t *p, uint16_t key_len, uint16_t nkeys, uint32_t val_len)
{
	struct kv_req_hdr h = {htole16(key_len), htole16(nkeys), htole32(val_len)};

	memcpy(p, &h, sizeof(h));
}

static inline void kv_get_req_hdr(const uint8_t *p, struct kv_req_hdr *h)
{
	memcpy(h, p, sizeof(*h));
	h->key_len = le16toh(h->key_len);
	h->nkeys = le16toh(h->nkeys);
	h->val_len = le32toh(h->val_len);
}

static inline void kv_put_resp_hdr(uint8_t *p, uint32_t status, uint32_t val_len)
{
	struct kv_resp_hdr h = {htole32(status), htole32(val_len)};

	memcpy(p, &h, sizeof(h));
}

static inline void kv_get_resp_hdr(const uint8_t *p, struct kv_resp_hdr *h)
{
	memcpy(h, p, sizeof(*h));
	h->status = le32toh(h->status);
	h->val_len = le32toh(h->val_len);
}

static inline void kv_put_le16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t kv_get_le16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

/* FNV-1a, 64 bits: the partition is kv_key_hash() % nthreads. */
static inline uint64_t kv_key_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif /* URPC_APPS_KV_PROTO_H */
