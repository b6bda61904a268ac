/* SPDX-License-Identifier: MIT */
/*
 * The message-buffer allocator.
 *
 * Buffers come in power-of-two size classes carved from large chunks that
 * urpc__hp_alloc() maps. Each new chunk is handed once to the registration
 * hook (the transport's reg_mem), so allocating a buffer never calls the NIC
 * driver. Every buffer has @headroom bytes in front of its data for the
 * packet header; struct urpc_msgbuf.buf points past them.
 *
 * A pool belongs to one thread (its Rpc's); nothing here locks.
 * The datapath calls are urpc__pool_alloc/free/resize: they allocate from a
 * free list and make no syscall unless the class needs a new chunk.
 */
#ifndef URPC_MEM_POOL_H
#define URPC_MEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h> /* struct urpc_msgbuf: a plain value type */

#include "hugepage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the registration hook hands back for one chunk. */
struct urpc_mem_reg {
	uint32_t lkey;
	uint32_t rkey;
	void *handle; /* the transport's own (an ibv_mr, a region entry) */
};

/* Register [addr, addr+len) with the transport; 0 or -errno. */
typedef int (*urpc_mem_reg_fn)(void *ctx, void *addr, size_t len, struct urpc_mem_reg *out);
/* Undo one registration. */
typedef void (*urpc_mem_dereg_fn)(void *ctx, struct urpc_mem_reg *reg);

struct urpc_pool_opts {
	size_t headroom;	 /* bytes before each buffer's data; multiple of 64, default 64 */
	size_t chunk_size;	 /* bytes mapped at a time for small classes; default 2 MiB */
	size_t max_bytes;	 /* cap on all memory mapped by the pool; default 1 GiB */
	size_t max_buf;		 /* largest data size a buffer may have; default 64 MiB */
	size_t keep_bytes;	 /* freed large (own-chunk) buffers kept for reuse; default 0 */
	unsigned hp_flags;	 /* URPC_HP_* flags passed to urpc__hp_alloc() */
	urpc_mem_reg_fn reg;	 /* may be NULL: no registration */
	urpc_mem_dereg_fn dereg; /* may be NULL */
	void *reg_ctx;
};

struct urpc_pool_stats {
	size_t bytes_mapped; /* all chunks currently mapped */
	size_t chunks;	     /* chunks currently mapped */
	size_t bufs_out;     /* buffers allocated and not yet freed */
	uint64_t allocs;
	uint64_t frees;
	uint64_t alloc_failures;
	enum urpc_hp_backing last_backing; /* backing of the most recent chunk */
};

struct urpc_pool;

/* Fill @o with the defaults above. */
void urpc__pool_opts_init(struct urpc_pool_opts *o);

/* Create a pool; maps nothing yet. 0, -EINVAL (bad options) or -ENOMEM. */
int urpc__pool_create(const struct urpc_pool_opts *o, struct urpc_pool **out);

/*
 * Destroy a pool: deregisters and unmaps every chunk. Returns -EBUSY, and
 * destroys nothing, while buffers are still allocated.
 */
int urpc__pool_destroy(struct urpc_pool *p);

/*
 * Destroy a pool even though buffers are still allocated: they become
 * invalid. For an owner that is going away (an Rpc being destroyed).
 */
void urpc__pool_destroy_all(struct urpc_pool *p);

/*
 * Allocate a buffer with capacity for at least @size data bytes and
 * data_size = @size. 0, -EINVAL (size 0 or above max_buf), or -ENOMEM (the
 * max_bytes cap, or mapping/registration failed). @mb is untouched on error.
 * Ownership: the caller owns the buffer until urpc__pool_free().
 */
int urpc__pool_alloc(struct urpc_pool *p, size_t size, struct urpc_msgbuf *mb);

/*
 * Return a buffer to its class; @mb is zeroed. 0, or -EINVAL and nothing
 * touched when @mb is not a buffer this pool has out now: zeroed, freed
 * before, or a stale copy of a handle whose buffer was freed (and perhaps
 * handed out again). Each allocation carries a serial number (priv_gen)
 * that its buffer keeps until it is freed; a handle from another pool, or
 * one whose fields were overwritten, is not detected.
 */
int urpc__pool_free(struct urpc_pool *p, struct urpc_msgbuf *mb);

/* Is @mb a handle of a buffer this pool has out now (what free would take)? */
bool urpc__pool_is_out(const struct urpc_pool *p, const struct urpc_msgbuf *mb);

/*
 * Give the buffer @mb names a new serial, in @mb and in the pool: every
 * other copy of the handle becomes stale (its owner handed it over).
 * Nothing happens when @mb is not out now.
 */
void urpc__pool_restamp(struct urpc_pool *p, struct urpc_msgbuf *mb);

/* Set data_size to @size; 0, or -EINVAL when @size > max_data_size. */
int urpc__pool_resize(struct urpc_msgbuf *mb, size_t size);

/* The header room in front of mb->buf (@headroom bytes long). */
static inline uint8_t *urpc__pool_headroom(const struct urpc_pool_opts *o,
					   const struct urpc_msgbuf *mb)
{
	return mb->buf - o->headroom;
}

void urpc__pool_get_stats(const struct urpc_pool *p, struct urpc_pool_stats *s);

/*
 * The registration hook's handle for the chunk an allocated buffer lies in
 * (what the registration hook returned in urpc_mem_reg.handle), or NULL
 * when the pool registers nothing or @mb is not one of its buffers' views.
 */
void *urpc__pool_reg_handle(const struct urpc_msgbuf *mb);

#ifdef __cplusplus
}
#endif

#endif /* URPC_MEM_POOL_H */
