/* SPDX-License-Identifier: MIT */
/*
 * urpc-kv-server's shared parts: the server and its threads (kv_server.c),
 * the per-thread store and the request handlers (kv_store.c). Uses only
 * <urpc/urpc.h>.
 */
#ifndef URPC_KV_SERVER_H
#define URPC_KV_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h>

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

/* Register the KV request handlers on @srv's Nexus (kv_store.c). 0 or -errno. */
int kv_register_handlers(struct server *srv);

/* Free thread @t's hash table and give its bytes back to the budget. Its owner, at exit. */
void kv_table_free(struct kv_thread *t);

/* The statistics of every thread as text into @buf (at most @size); its length. */
size_t kv_format_stats(struct server *srv, char *buf, size_t size);

#endif /* URPC_KV_SERVER_H */
