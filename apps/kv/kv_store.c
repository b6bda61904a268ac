/* SPDX-License-Identifier: MIT */
/*
 * urpc-kv-server's store and request handlers (kv_server.h): each thread's
 * hash table of the keys that hash to it, and the GET, PUT, DEL, multi-GET,
 * INFO and STATS handlers, run by the owner thread of the receiving Rpc.
 * The memory budget is one process-wide atomic counter. Large values ride
 * urpc's one-sided path: a GET whose answer exceeds the preallocated
 * response buffer answers from a buffer of its own (urpc_msgbuf_alloc).
 * Uses only <urpc/urpc.h>.
 */
#include "kv_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_parse.h"
#include "kv_proto.h"

static size_t kv_item_size(uint32_t key_len, uint32_t val_len)
{
	return sizeof(struct kv_item) + key_len + val_len;
}

/* ---- the hash table of one thread (owner thread only) ---- */

static struct kv_item **table_find(struct kv_thread *t, const uint8_t *key, uint32_t len,
				   uint64_t hash)
{
	struct kv_item **pp = &t->buckets[(hash >> 8) & (t->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == hash && (*pp)->key_len == len && !memcmp((*pp)->data, key, len))
			return pp;
	return pp;
}

/* Double the bucket array once items outnumber buckets; on -ENOMEM keep the old one. */
static void table_grow(struct kv_thread *t)
{
	size_t n = t->nbuckets * 2, i;
	struct kv_item **nb = calloc(n, sizeof(*nb)), *it, *next;

	if (!nb)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (it = t->buckets[i]; it; it = next) {
			next = it->next;
			it->next = nb[(it->hash >> 8) & (n - 1)];
			nb[(it->hash >> 8) & (n - 1)] = it;
		}
	}
	free(t->buckets);
	t->buckets = nb;
	t->nbuckets = n;
}

void kv_table_free(struct kv_thread *t)
{
	struct kv_item *it, *next;
	size_t i;

	for (i = 0; t->buckets && i < t->nbuckets; i++) {
		for (it = t->buckets[i]; it; it = next) {
			next = it->next;
			__atomic_fetch_sub(&t->srv->used, kv_item_size(it->key_len, it->val_len),
					   __ATOMIC_RELAXED);
			free(it);
		}
	}
	free(t->buckets);
	t->buckets = NULL;
}

/* ---- request handlers (the owner thread of the receiving Rpc) ---- */

static struct kv_thread *thread_of(struct urpc_req_handle *h, void *arg)
{
	struct server *srv = arg;

	return &srv->th[urpc_rpc_id(urpc_req_rpc(h))];
}

/* Answer with a bare header from the preallocated buffer. */
static void answer_status(struct kv_thread *t, struct urpc_req_handle *h, uint32_t status)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);

	kv_put_resp_hdr(resp->buf, status, 0);
	if (urpc_msgbuf_resize(resp, sizeof(struct kv_resp_hdr)) || urpc_resp_enqueue(h, resp))
		stat_add(&t->st.bad, 1);
}

/*
 * A response of @size bytes: the preallocated buffer when it fits, else one
 * of our own (the library frees it after the client has read it). NULL when
 * none could be had.
 */
static struct urpc_msgbuf *resp_buf(struct kv_thread *t, struct urpc_req_handle *h, size_t size,
				    struct urpc_msgbuf *own)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);

	if (size <= resp->max_data_size) {
		urpc_msgbuf_resize(resp, size);
		return resp;
	}
	if (urpc_msgbuf_alloc(t->rpc, size, own))
		return NULL;
	return own;
}

/* Check a single-key request (kv_parse.h); the key's status, KV_OK when it may proceed. */
static uint32_t check_key(struct kv_thread *t, const uint8_t *d, size_t len, struct kv_req_hdr *rh,
			  uint64_t *hash)
{
	return kv_parse_key_req(d, len, t->id, (unsigned)t->srv->o.threads, rh, hash);
}

static void handle_get(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct urpc_msgbuf own = {0}, *resp;
	struct kv_req_hdr rh;
	struct kv_item *it;
	const uint8_t *d;
	uint64_t hash;
	uint32_t st;
	size_t len;

	stat_add(&t->st.gets, 1);
	d = urpc_req_data(h, &len);
	st = check_key(t, d, len, &rh, &hash);
	if (st == KV_OK && rh.val_len)
		st = KV_BAD_REQUEST;
	if (st != KV_OK) {
		stat_add(&t->st.bad, 1);
		answer_status(t, h, st);
		return;
	}
	it = *table_find(t, d + sizeof(rh), rh.key_len, hash);
	if (!it) {
		answer_status(t, h, KV_NOT_FOUND);
		return;
	}
	stat_add(&t->st.get_hits, 1);
	resp = resp_buf(t, h, sizeof(struct kv_resp_hdr) + it->val_len, &own);
	if (!resp) {
		answer_status(t, h, KV_SERVER_ERROR);
		return;
	}
	kv_put_resp_hdr(resp->buf, KV_OK, it->val_len);
	memcpy(resp->buf + sizeof(struct kv_resp_hdr), it->data + it->key_len, it->val_len);
	if (urpc_resp_enqueue(h, resp)) {
		stat_add(&t->st.bad, 1);
		if (own.buf)
			urpc_msgbuf_free(t->rpc, &own);
	}
}

static void handle_put(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct kv_item **pp, *it, *old;
	struct kv_req_hdr rh;
	const uint8_t *d;
	uint64_t hash, need, used;
	uint32_t st;
	size_t len;

	stat_add(&t->st.puts, 1);
	d = urpc_req_data(h, &len);
	st = check_key(t, d, len, &rh, &hash);
	if (st == KV_OK && rh.val_len > KV_MAX_VALUE)
		st = KV_TOO_BIG;
	if (st != KV_OK) {
		stat_add(&t->st.bad, 1);
		answer_status(t, h, st);
		return;
	}
	/* Charge first, so that threads racing for the last bytes cannot overshoot. */
	need = kv_item_size(rh.key_len, rh.val_len);
	used = __atomic_add_fetch(&t->srv->used, need, __ATOMIC_RELAXED);
	if (used > t->srv->budget) {
		__atomic_fetch_sub(&t->srv->used, need, __ATOMIC_RELAXED);
		stat_add(&t->st.puts_full, 1);
		answer_status(t, h, KV_FULL);
		return;
	}
	it = malloc(need);
	if (!it) {
		__atomic_fetch_sub(&t->srv->used, need, __ATOMIC_RELAXED);
		stat_add(&t->st.puts_full, 1);
		answer_status(t, h, KV_FULL);
		return;
	}
	it->hash = hash;
	it->key_len = rh.key_len;
	it->val_len = rh.val_len;
	memcpy(it->data, d + sizeof(rh), (size_t)rh.key_len + rh.val_len);
	pp = table_find(t, it->data, it->key_len, hash);
	old = *pp;
	it->next = old ? old->next : NULL;
	*pp = it;
	if (old) {
		stat_add(&t->st.bytes, (uint64_t)rh.val_len - old->val_len);
		__atomic_fetch_sub(&t->srv->used, kv_item_size(old->key_len, old->val_len),
				   __ATOMIC_RELAXED);
		free(old);
	} else {
		stat_add(&t->st.items, 1);
		stat_add(&t->st.bytes, (uint64_t)rh.key_len + rh.val_len);
		if (stat_get(&t->st.items) > t->nbuckets)
			table_grow(t);
	}
	answer_status(t, h, KV_OK);
}

static void handle_del(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct kv_item **pp, *it;
	struct kv_req_hdr rh;
	const uint8_t *d;
	uint64_t hash;
	uint32_t st;
	size_t len;

	stat_add(&t->st.dels, 1);
	d = urpc_req_data(h, &len);
	st = check_key(t, d, len, &rh, &hash);
	if (st == KV_OK && rh.val_len)
		st = KV_BAD_REQUEST;
	if (st != KV_OK) {
		stat_add(&t->st.bad, 1);
		answer_status(t, h, st);
		return;
	}
	pp = table_find(t, d + sizeof(rh), rh.key_len, hash);
	it = *pp;
	if (!it) {
		answer_status(t, h, KV_NOT_FOUND);
		return;
	}
	*pp = it->next;
	stat_add(&t->st.del_hits, 1);
	stat_add(&t->st.items, (uint64_t)-1);
	stat_add(&t->st.bytes, -(uint64_t)(it->key_len + it->val_len));
	__atomic_fetch_sub(&t->srv->used, kv_item_size(it->key_len, it->val_len), __ATOMIC_RELAXED);
	free(it);
	answer_status(t, h, KV_OK);
}

/*
 * Multi-GET: parse every key first (kv_parse.h; the request bytes stay
 * valid for the whole handler), look them up and size the response, then
 * fill it.
 */
static void handle_mget(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct kv_item *items[KV_MAX_MGET_KEYS];
	struct urpc_msgbuf own = {0}, *resp;
	struct kv_mget_req m;
	const uint8_t *d;
	size_t len, total, i;
	uint32_t st;
	uint8_t *p;

	stat_add(&t->st.mgets, 1);
	d = urpc_req_data(h, &len);
	st = kv_parse_mget(d, len, t->id, (unsigned)t->srv->o.threads, &m);
	if (st != KV_OK)
		goto bad;
	total = sizeof(struct kv_resp_hdr);
	for (i = 0; i < m.nkeys; i++) {
		items[i] = *table_find(t, m.key[i], m.key_len[i], m.hash[i]);
		total += sizeof(struct kv_resp_hdr) + (items[i] ? items[i]->val_len : 0);
	}
	stat_add(&t->st.mget_keys, m.nkeys);
	if (total > URPC_MAX_MSG_SIZE) {
		answer_status(t, h, KV_TOO_BIG);
		return;
	}
	resp = resp_buf(t, h, total, &own);
	if (!resp) {
		answer_status(t, h, KV_SERVER_ERROR);
		return;
	}
	kv_put_resp_hdr(resp->buf, KV_OK, m.nkeys);
	p = resp->buf + sizeof(struct kv_resp_hdr);
	for (i = 0; i < m.nkeys; i++) {
		if (!items[i]) {
			kv_put_resp_hdr(p, KV_NOT_FOUND, 0);
			p += sizeof(struct kv_resp_hdr);
			continue;
		}
		stat_add(&t->st.mget_hits, 1);
		kv_put_resp_hdr(p, KV_OK, items[i]->val_len);
		p += sizeof(struct kv_resp_hdr);
		memcpy(p, items[i]->data + items[i]->key_len, items[i]->val_len);
		p += items[i]->val_len;
	}
	if (urpc_resp_enqueue(h, resp)) {
		stat_add(&t->st.bad, 1);
		if (own.buf)
			urpc_msgbuf_free(t->rpc, &own);
	}
	return;
bad:
	stat_add(&t->st.bad, 1);
	answer_status(t, h, st);
}

static void handle_info(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	struct kv_info info;

	info.nthreads = htole32((uint32_t)t->srv->o.threads);
	info.max_value = htole32(KV_MAX_VALUE);
	info.memory_budget = htole64(t->srv->budget);
	kv_put_resp_hdr(resp->buf, KV_OK, sizeof(info));
	memcpy(resp->buf + sizeof(struct kv_resp_hdr), &info, sizeof(info));
	if (urpc_msgbuf_resize(resp, sizeof(struct kv_resp_hdr) + sizeof(info)) ||
	    urpc_resp_enqueue(h, resp))
		stat_add(&t->st.bad, 1);
}

/* The statistics as text into @buf (at most @size bytes); the length written. */
size_t kv_format_stats(struct server *srv, char *buf, size_t size)
{
	struct kv_stats sum = {0};
	size_t off = 0;
	unsigned i;
	int n;

#define KV_APPEND(...)                                                                             \
	do {                                                                                       \
		n = snprintf(buf + off, size - off, __VA_ARGS__);                                  \
		if (n > 0)                                                                         \
			off += (size_t)n < size - off ? (size_t)n : size - off - 1;                \
	} while (0)

	KV_APPEND("%-6s %10s %10s %10s %10s %10s %10s %10s %10s %10s %12s\n", "thread", "gets",
		  "hits", "puts", "full", "dels", "mgets", "mget-keys", "bad", "items", "bytes");
	for (i = 0; i < srv->o.threads; i++) {
		const struct kv_stats *s = &srv->th[i].st;
		uint64_t v[12];
		unsigned j;

		for (j = 0; j < 12; j++)
			v[j] = stat_get((const uint64_t *)s + j);
		/* v: gets get_hits puts puts_full dels del_hits mgets mget_keys mget_hits bad items bytes */
		KV_APPEND("%-6u %10lu %10lu %10lu %10lu %10lu %10lu %10lu %10lu %10lu %12lu\n", i,
			  (unsigned long)v[0], (unsigned long)(v[1] + v[8]), (unsigned long)v[2],
			  (unsigned long)v[3], (unsigned long)v[4], (unsigned long)v[6],
			  (unsigned long)v[7], (unsigned long)v[9], (unsigned long)v[10],
			  (unsigned long)v[11]);
		for (j = 0; j < 12; j++)
			((uint64_t *)&sum)[j] += v[j];
	}
	KV_APPEND(
		"total: %lu gets (%lu hits, %lu misses), %lu puts (%lu refused: full), %lu dels (%lu hits), %lu multi-gets of %lu keys (%lu hits), %lu bad requests\n",
		(unsigned long)sum.gets, (unsigned long)sum.get_hits,
		(unsigned long)(sum.gets - sum.get_hits), (unsigned long)sum.puts,
		(unsigned long)sum.puts_full, (unsigned long)sum.dels, (unsigned long)sum.del_hits,
		(unsigned long)sum.mgets, (unsigned long)sum.mget_keys,
		(unsigned long)sum.mget_hits, (unsigned long)sum.bad);
	KV_APPEND("stored: %lu items, %lu bytes of keys and values; memory %.1f of %.1f MiB used\n",
		  (unsigned long)sum.items, (unsigned long)sum.bytes,
		  (double)__atomic_load_n(&srv->used, __ATOMIC_RELAXED) / (1 << 20),
		  (double)srv->budget / (1 << 20));
#undef KV_APPEND
	return off;
}
static_assert(sizeof(struct kv_stats) == 12 * sizeof(uint64_t),
	      "kv_format_stats walks 12 counters");

static void handle_stats(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	size_t hdr = sizeof(struct kv_resp_hdr), n;

	n = kv_format_stats(t->srv, (char *)resp->buf + hdr, resp->max_data_size - hdr);
	kv_put_resp_hdr(resp->buf, KV_OK, (uint32_t)n);
	if (urpc_msgbuf_resize(resp, hdr + n) || urpc_resp_enqueue(h, resp))
		stat_add(&t->st.bad, 1);
}

int kv_register_handlers(struct server *srv)
{
	static const struct {
		uint8_t type;
		urpc_req_handler_fn fn;
	} tab[] = {
		{KV_REQ_GET, handle_get},   {KV_REQ_PUT, handle_put},
		{KV_REQ_DEL, handle_del},   {KV_REQ_MGET, handle_mget},
		{KV_REQ_INFO, handle_info}, {KV_REQ_STATS, handle_stats},
	};
	size_t i;
	int ret;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		ret = urpc_nexus_register_handler(srv->nx, tab[i].type, tab[i].fn, srv);
		if (ret)
			return ret;
	}
	return 0;
}
