/* SPDX-License-Identifier: MIT */
/*
 * The memory-registration cache: user memory (an existing array passed as a
 * payload) is registered once and reused while it stays cached.
 *
 * urpc__regcache_get() hands back an entry whose registration covers the
 * bytes asked for with at least the remote access asked for. A cached entry
 * that does is reused (a hit). Otherwise the cache registers exactly the
 * range rounded out to opts.align (the page size by default) with exactly
 * the access asked for: never more, and never the whole address space.
 *
 * Access on a miss: when a cached entry covers the bytes but lacks an access
 * bit (read-only cached, write asked), the new entry gets the access asked
 * for, not the union with the cached one. The union would grant the cached
 * access on bytes outside the cached range that nobody asked for; the old
 * entry stays cached for its own users and ages out through the LRU.
 * Overlapping requests are not merged, for the same reason.
 *
 * Entries are reference counted. An entry nobody holds stays registered on
 * an LRU list until a cap (entries, or bytes kept registered while unused)
 * forces it out; then it is deregistered. urpc__regcache_invalidate() is for
 * memory the user is about to free or unmap: overlapping entries nobody
 * holds are deregistered at once, held ones at their last put, and neither
 * is found by a lookup again.
 *
 * src/mem uses only libc: registration goes through the callbacks in the
 * options (the transport's adapter is urpc__tp_regcache_reg/_dereg).
 *
 * Thread: a cache belongs to one thread (its Rpc's); nothing here locks.
 * Hot path: a hit allocates nothing and makes no syscall; a miss calls the
 * registration callback (the NIC driver) and is not for the datapath.
 */
#ifndef URPC_MEM_REGCACHE_H
#define URPC_MEM_REGCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h" /* struct urpc_mem_reg */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Remote access bits; the same values as URPC_TP_ACCESS_* (transport.c
 * checks): REMOTE_* open the registration itself, GRANT_* let grants on it
 * give that access (what the engine asks for).
 */
#define URPC_REGCACHE_ACCESS_REMOTE_READ 0x1u
#define URPC_REGCACHE_ACCESS_REMOTE_WRITE 0x2u
#define URPC_REGCACHE_ACCESS_GRANT_READ 0x4u
#define URPC_REGCACHE_ACCESS_GRANT_WRITE 0x8u
#define URPC_REGCACHE_ACCESS_ALL 0xfu

/*
 * Register [addr, addr+len) for local access and the remote access in
 * @access (URPC_REGCACHE_ACCESS_*); fill @out. 0 or -errno. -ENOMEM makes
 * the cache deregister every unused entry and try once more (a pinning
 * limit); any other error is returned to the caller of get.
 */
typedef int (*urpc_regcache_reg_fn)(void *ctx, void *addr, size_t len, unsigned access,
				    struct urpc_mem_reg *out);
/* Undo one registration. */
typedef void (*urpc_regcache_dereg_fn)(void *ctx, struct urpc_mem_reg *reg);

struct urpc_regcache_opts {
	urpc_regcache_reg_fn reg;     /* required */
	urpc_regcache_dereg_fn dereg; /* required */
	void *ctx;		      /* passed to both */
	size_t max_unused_bytes;      /* bytes kept registered while unused; default 1 GiB */
	uint32_t max_entries;	      /* entries cached (held or not); default 1024 */
	/*
	 * Registrations are rounded out to this power of two; default the page
	 * size. 1 registers exactly the bytes asked for, so a peer with remote
	 * write cannot reach neighbours that share a page with the buffer.
	 */
	size_t align;
};

/*
 * One cached registration. The fields up to @reg are read-only for the
 * holder and stay valid until its urpc__regcache_put(); the rest is the
 * cache's. With the transport adapter, reg.handle is the struct urpc_tp_mr
 * that post_read()/post_write() take as @mr.
 */
struct urpc_regcache_ent {
	void *addr;		 /* start of the registration (aligned) */
	size_t len;		 /* its length (aligned) */
	unsigned access;	 /* URPC_REGCACHE_ACCESS_* it grants */
	struct urpc_mem_reg reg; /* lkey, rkey and the transport's handle */

	/* private */
	uint32_t refs;
	bool invalid; /* invalidated while held: deregistered at the last put */
	struct urpc_regcache_ent *lru_prev, *lru_next;
};

struct urpc_regcache_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t registrations;
	uint64_t deregistrations;
	uint64_t evictions;	 /* deregistrations forced by a cap or -ENOMEM */
	uint64_t reg_failures;	 /* registration callbacks that failed */
	size_t bytes_registered; /* all live registrations, held, unused or invalidated */
	size_t bytes_unused;	 /* ... of which on the LRU list */
	size_t entries;		 /* entries a lookup can find */
	size_t held;		 /* entries with references, invalidated ones included */
};

struct urpc_regcache;

/* Fill @o with the defaults above (no callbacks). */
void urpc__regcache_opts_init(struct urpc_regcache_opts *o);

/*
 * Create a cache; registers nothing yet. 0, -EINVAL (no callbacks, zero
 * max_entries, align not a power of two; 0 means the page size) or -ENOMEM.
 * Ownership: the caller owns the cache until urpc__regcache_destroy().
 */
int urpc__regcache_create(const struct urpc_regcache_opts *o, struct urpc_regcache **out);

/*
 * Deregister every entry and free the cache. Returns -EBUSY, and destroys
 * nothing, while any entry is held (invalidated ones included).
 */
int urpc__regcache_destroy(struct urpc_regcache *rc);

/*
 * Destroy even though entries are held (their owner is going away): every
 * entry the cache can still find is deregistered and freed; the holders'
 * pointers become invalid.
 */
void urpc__regcache_destroy_all(struct urpc_regcache *rc);

/*
 * Get an entry covering [addr, addr+len) with at least @access and take a
 * reference on it. 0 and *out set, or:
 *   -EINVAL  NULL @addr or @out, len 0, addr+len overflows, unknown access bits;
 *   -EAGAIN  max_entries are cached and every one is held: put some, retry;
 *   -ENOMEM  no memory for the entry;
 *   or the registration callback's error (nothing is cached then).
 * Ownership: the caller holds the entry until urpc__regcache_put(); the
 * memory must stay mapped until then.
 */
int urpc__regcache_get(struct urpc_regcache *rc, void *addr, size_t len, unsigned access,
		       struct urpc_regcache_ent **out);

/*
 * Drop a reference taken by urpc__regcache_get(). The last one leaves the
 * entry cached (most recently used) and applies the caps, or deregisters it
 * when it was invalidated. The NIC must be done with the memory.
 */
void urpc__regcache_put(struct urpc_regcache *rc, struct urpc_regcache_ent *ent);

/*
 * Forget registrations overlapping [addr, addr+len): memory the user is
 * about to free or unmap. Unused ones are deregistered now, held ones at
 * their last put; no lookup finds either again. 0, or -EINVAL (len 0 or
 * addr+len overflows).
 */
int urpc__regcache_invalidate(struct urpc_regcache *rc, void *addr, size_t len);

/* Deregister every unused entry. */
void urpc__regcache_flush(struct urpc_regcache *rc);

void urpc__regcache_get_stats(const struct urpc_regcache *rc, struct urpc_regcache_stats *s);

#ifdef __cplusplus
}
#endif

#endif /* URPC_MEM_REGCACHE_H */
