/* SPDX-License-Identifier: MIT */
/*
 * urpc-kv-server: a key-value store served by several Rpc threads.
 *
 * Thread i owns Rpc id i and the keys whose hash falls on it (see
 * kv_proto.h), in its own hash table: no locks. The memory budget is one
 * process-wide atomic counter. Large values ride urpc's one-sided path: a
 * GET whose answer exceeds the preallocated response buffer answers from a
 * buffer of its own (urpc_msgbuf_alloc). The main thread waits for signals:
 * SIGUSR1 prints the statistics, SIGINT/SIGTERM stop the server. Uses only
 * <urpc/urpc.h>.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "kv_parse.h"
#include "kv_proto.h"

#define PROG "urpc-kv-server"

/* Default --max-sessions-per-source: 128 client processes of a host, two sessions each. */
#define KV_PER_SOURCE 256u

struct opts {
	const char *host;
	const char *device;
	unsigned long port;
	unsigned long threads;
	unsigned long memory_mib;
	unsigned long peer_timeout_ms;
	unsigned long per_source; /* sessions one client address may hold per thread */
	enum urpc_transport_kind kind;
	bool kind_set;
};

/* One stored pair; the charge against the budget is kv_item_size(). */
struct kv_item {
	struct kv_item *next;
	uint64_t hash;
	uint32_t key_len;
	uint32_t val_len;
	uint8_t data[]; /* key, then value */
};

/* Counters of one thread: written by its owner, read by the main thread. */
struct kv_stats {
	uint64_t gets, get_hits, puts, puts_full, dels, del_hits;
	uint64_t mgets, mget_keys, mget_hits, bad, items, bytes;
};

struct kv_thread {
	struct server *srv;
	struct urpc_rpc *rpc;
	pthread_t tid;
	unsigned id;
	struct kv_item **buckets;
	size_t nbuckets; /* power of two */
	struct kv_stats st;
	int err;
};

struct server {
	struct opts o;
	struct urpc_nexus *nx;
	struct kv_thread *th;
	uint64_t budget;    /* bytes */
	uint64_t used;	    /* bytes charged; atomic */
	int stop;	    /* atomic */
	pthread_mutex_t mu; /* guards started */
	pthread_cond_t cv;
	unsigned started;
};

/* The owner thread bumps a counter the main thread may read: no lock needed. */
static inline void stat_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static inline uint64_t stat_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static size_t kv_item_size(uint32_t key_len, uint32_t val_len)
{
	return sizeof(struct kv_item) + key_len + val_len;
}

static void usage(FILE *f)
{
	struct urpc_rpc_opts def;

	urpc_rpc_opts_init(&def);
	fprintf(f,
		"Usage: urpc-kv-server [OPTIONS]\n"
		"\n"
		"Serve a key-value store over urpc: GET, PUT, DELETE and multi-GET, with\n"
		"values from one byte to %u MiB (values larger than one datagram move by\n"
		"one-sided READ). Keys are partitioned by hash over THREADS Rpc threads,\n"
		"Rpc ids 0 to THREADS-1; urpc-kv-client learns the count when it connects\n"
		"and opens a session to each.\n"
		"\n"
		"Options:\n"
		"  -H, --host ADDR       IPv4 address to listen on (default 127.0.0.1)\n"
		"  -p, --port PORT       session-management UDP port (default 31860; 0 picks a\n"
		"                        free one, printed on the 'listening' line)\n"
		"  -j, --threads N       Rpc threads, 1 to %d (default 2)\n"
		"  -m, --memory MIB      memory budget for keys and values, in MiB (default\n"
		"                        256); a PUT beyond it is refused with \"server full\"\n"
		"  -t, --transport NAME  udp, verbs or default (default: URPC_TRANSPORT, else\n"
		"                        verbs when an RDMA port is active, else udp)\n"
		"  -d, --device NAME     verbs: the RDMA device or device:port (\"mlx5_0\",\n"
		"                        \"rxe0:1\"; default: URPC_DEVICE, else the first active)\n"
		"      --peer-timeout MS\n"
		"                        how long a client process may go without a\n"
		"                        heartbeat before it is taken for dead and its\n"
		"                        sessions dropped: %d to %d milliseconds\n"
		"                        (default %u; heartbeats go every %u ms). A process\n"
		"                        that gets no CPU for about MS less one heartbeat\n"
		"                        (stopped, or on a host too busy to run it) is taken\n"
		"                        for dead too; a dead one is noticed only after MS.\n"
		"                        Whichever side's timeout runs out first fails both:\n"
		"                        give urpc-kv-client the same value\n"
		"      --max-sessions-per-source N\n"
		"                        sessions the clients at one IPv4 address may hold\n"
		"                        with each thread, 1 to %u (default %u); beyond it a\n"
		"                        connect is refused (-ENOSPC) and the server logs\n"
		"                        the address: one host cannot take every session\n"
		"  -h, --help            show this help\n"
		"\n"
		"Signals: SIGUSR1 prints the statistics (operations per type and thread,\n"
		"hits and misses, items and bytes stored); SIGINT or SIGTERM stops the\n"
		"server, which prints them once more and frees everything.\n"
		"\n"
		"Exit status: 0 on a clean stop, 1 on a runtime error, 2 on bad usage.\n",
		KV_MAX_VALUE >> 20, KV_MAX_THREADS, KV_PEER_TIMEOUT_MIN_MS, KV_PEER_TIMEOUT_MAX_MS,
		def.peer_timeout_ms, def.ping_interval_ms, URPC_RPC_DEFAULT_MAX_SESSIONS,
		KV_PER_SOURCE);
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt opts[] = {
		{URPC_APP_STR("host", 'H', &o->host)},
		{URPC_APP_ULONG("port", 'p', &o->port, 0, 65535)},
		{URPC_APP_ULONG("threads", 'j', &o->threads, 1, KV_MAX_THREADS)},
		{URPC_APP_ULONG("memory", 'm', &o->memory_mib, 1, 1ul << 20)},
		{URPC_APP_NET_TRANSPORT(&o->kind, &o->kind_set)},
		{URPC_APP_STR("device", 'd', &o->device)},
		{URPC_APP_ULONG("peer-timeout", 0, &o->peer_timeout_ms, KV_PEER_TIMEOUT_MIN_MS,
				KV_PEER_TIMEOUT_MAX_MS)},
		{URPC_APP_ULONG("max-sessions-per-source", 0, &o->per_source, 1,
				URPC_RPC_DEFAULT_MAX_SESSIONS)},
	};
	const struct urpc_app_cmdline cl = {URPC_APP_CMDLINE(PROG, usage, opts),
					    .refusal = URPC_APP_REFUSE_TRY};
	struct urpc_rpc_opts def;

	urpc_rpc_opts_init(&def);
	o->host = "127.0.0.1";
	o->device = NULL;
	o->port = 31860;
	o->threads = 2;
	o->memory_mib = 256;
	o->peer_timeout_ms = def.peer_timeout_ms;
	o->per_source = KV_PER_SOURCE;
	o->kind_set = false;
	return urpc_app_parse_args(&cl, argc, argv, NULL);
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

static void table_free(struct kv_thread *t)
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
static size_t format_stats(struct server *srv, char *buf, size_t size)
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
static_assert(sizeof(struct kv_stats) == 12 * sizeof(uint64_t), "format_stats walks 12 counters");

static void handle_stats(struct urpc_req_handle *h, void *arg)
{
	struct kv_thread *t = thread_of(h, arg);
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	size_t hdr = sizeof(struct kv_resp_hdr), n;

	n = format_stats(t->srv, (char *)resp->buf + hdr, resp->max_data_size - hdr);
	kv_put_resp_hdr(resp->buf, KV_OK, (uint32_t)n);
	if (urpc_msgbuf_resize(resp, hdr + n) || urpc_resp_enqueue(h, resp))
		stat_add(&t->st.bad, 1);
}

/* ---- threads ---- */

static void thread_started(struct server *srv)
{
	pthread_mutex_lock(&srv->mu);
	srv->started++;
	pthread_cond_broadcast(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
}

static void *thread_main(void *arg)
{
	struct kv_thread *t = arg;
	struct server *srv = t->srv;
	struct urpc_rpc_opts ro;
	int ret;

	t->nbuckets = 1024;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		t->err = -ENOMEM;
		thread_started(srv);
		return NULL;
	}
	urpc_rpc_opts_init(&ro);
	if (srv->o.kind_set)
		ro.transport = srv->o.kind;
	ro.device = srv->o.device;
	ro.peer_timeout_ms = (uint32_t)srv->o.peer_timeout_ms;
	/* A fair share of every thread for every client host (docs/SECURITY.md). */
	ro.max_sessions_per_source = (uint32_t)srv->o.per_source;
	ret = urpc_rpc_create(srv->nx, (uint8_t)t->id, &ro, &t->rpc);
	if (ret) {
		t->err = ret;
		free(t->buckets);
		t->buckets = NULL;
		thread_started(srv);
		return NULL;
	}
	thread_started(srv);
	while (!__atomic_load_n(&srv->stop, __ATOMIC_RELAXED)) {
		ret = urpc_rpc_run_event_loop(t->rpc, 100);
		if (ret) {
			fprintf(stderr, PROG ": thread %u: event loop: %s\n", t->id,
				urpc_strerror(ret));
			t->err = ret;
			break;
		}
	}
	ret = urpc_rpc_destroy(t->rpc);
	if (ret) {
		fprintf(stderr, PROG ": thread %u: cannot destroy the Rpc: %s\n", t->id,
			urpc_strerror(ret));
		t->err = ret;
	}
	table_free(t);
	return NULL;
}

static void print_stats(struct server *srv)
{
	char buf[16384];

	format_stats(srv, buf, sizeof(buf));
	printf("%s", buf);
	fflush(stdout);
}

static int register_handlers(struct server *srv)
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

int main(int argc, char **argv)
{
	struct urpc_nexus_opts no;
	struct server srv = {0};
	sigset_t sigs;
	unsigned i, created = 0;
	int ret, sig, status = 1;

	ret = parse_opts(argc, argv, &srv.o);
	if (ret)
		return ret == 1 ? 0 : 2;
	srv.budget = (uint64_t)srv.o.memory_mib << 20;
	pthread_mutex_init(&srv.mu, NULL);
	pthread_cond_init(&srv.cv, NULL);

	/* Signals go to the main thread's sigwait() alone: block them before any thread. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	urpc_nexus_opts_init(&no);
	no.host = srv.o.host;
	no.port = (uint16_t)srv.o.port;
	ret = urpc_nexus_create(&no, &srv.nx);
	if (ret) {
		fprintf(stderr, PROG ": cannot listen on %s:%lu: %s%s\n", srv.o.host, srv.o.port,
			urpc_strerror(ret),
			ret == -EADDRINUSE ? " (another server runs there? pick --port)" : "");
		return 1;
	}
	ret = register_handlers(&srv);
	if (ret) {
		fprintf(stderr, PROG ": cannot register the handlers: %s\n", urpc_strerror(ret));
		goto out_nexus;
	}
	srv.th = calloc(srv.o.threads, sizeof(*srv.th));
	if (!srv.th) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_nexus;
	}
	for (i = 0; i < srv.o.threads; i++) {
		srv.th[i].srv = &srv;
		srv.th[i].id = i;
		ret = pthread_create(&srv.th[i].tid, NULL, thread_main, &srv.th[i]);
		if (ret) {
			fprintf(stderr, PROG ": cannot start thread %u: %s\n", i, strerror(ret));
			break;
		}
		created++;
	}
	pthread_mutex_lock(&srv.mu);
	while (srv.started < created)
		pthread_cond_wait(&srv.cv, &srv.mu);
	pthread_mutex_unlock(&srv.mu);
	status = created == srv.o.threads ? 0 : 1;
	for (i = 0; i < created; i++) {
		if (srv.th[i].err) {
			fprintf(stderr, PROG ": thread %u: cannot create its Rpc: %s\n", i,
				urpc_strerror(srv.th[i].err));
			status = 1;
		}
	}
	if (!status) {
		printf(PROG
		       ": listening on %s:%u, %lu threads (rpc ids 0-%lu), memory budget %lu MiB, transport %s\n",
		       srv.o.host, urpc_nexus_port(srv.nx), srv.o.threads, srv.o.threads - 1,
		       srv.o.memory_mib,
		       srv.o.kind_set ? urpc_transport_str(srv.o.kind) : "default");
		fflush(stdout);
		for (;;) {
			if (sigwait(&sigs, &sig))
				continue;
			if (sig == SIGUSR1) {
				print_stats(&srv);
				continue;
			}
			printf(PROG ": %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
			print_stats(&srv); /* before the tables are freed */
			break;
		}
	}
	__atomic_store_n(&srv.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < created; i++) {
		pthread_join(srv.th[i].tid, NULL);
		if (srv.th[i].err)
			status = 1;
	}
	free(srv.th);
out_nexus:
	if (urpc_app_nexus_destroy(PROG, srv.nx))
		status = 1;
	pthread_cond_destroy(&srv.cv);
	pthread_mutex_destroy(&srv.mu);
	return status;
}
