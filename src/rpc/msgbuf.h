/* SPDX-License-Identifier: MIT */
/*
 * Message buffers above the pool: the public urpc_msgbuf_* calls, views of
 * the application's memory (host, or GPU through dma-buf or a pinned
 * staging copy), giving buffers back, and the one walk that says which
 * buffers the engine holds (urpc_msgbuf_free() and destroy ask it).
 */
#ifndef URPC_RPC_MSGBUF_H
#define URPC_RPC_MSGBUF_H

#include <errno.h>
#include <string.h>

#include "../mem/cuda.h"
#include "../util/copy.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Give back a buffer the library owns: a pool buffer is freed, a view released. */
void urpc__mb_release(struct urpc_rpc *rpc, struct urpc_msgbuf *mb);

/*
 * Is @mb (or a copy of it) lent to the engine: in a client slot or wait
 * queue, held by an orphaned operation, or the library's own? Cold: free
 * and unregister ask. Owner thread only.
 */
bool urpc__mb_is_lent(const struct urpc_rpc *rpc, const struct urpc_msgbuf *mb);

/*
 * What the engine holds right now, found by walking its owners (client
 * slots and queues, server slots, one-sided operations): pool buffers in
 * *@bufs, views in *@views. Destroy compares them with what was allocated
 * and registered to tell what the application still holds. Cold.
 */
void urpc__mb_held(const struct urpc_rpc *rpc, size_t *bufs, size_t *views);

/*
 * GPU staging, one pair for every path. stage_out: before the peer READs
 * @mb, a GPU view staged through pinned host memory gets a fresh copy of
 * the device bytes. stage_in: after a READ of @len bytes into @mb's staging
 * copy, the bytes go to the device. copy_out/copy_in: a small message's
 * @len bytes between @mb (host or GPU) and host memory. 0 or -EIO.
 */
int urpc__mb_stage_out(const struct urpc_msgbuf *mb);
int urpc__mb_stage_in(struct urpc_msgbuf *mb, size_t len);

static inline int urpc__mb_copy_out(void *dst, const struct urpc_msgbuf *mb, size_t len)
{
	if (unlikely(urpc__mb_gpu(mb)))
		return urpc__cuda_copy_to_host(dst, mb->buf, len) ? -EIO : 0;
	urpc__copy(dst, mb->buf, len);
	return 0;
}

static inline int urpc__mb_copy_in(struct urpc_msgbuf *mb, const void *src, size_t len)
{
	if (unlikely(urpc__mb_gpu(mb)))
		return urpc__cuda_copy_to_device(mb->buf, src, len) ? -EIO : 0;
	urpc__copy(mb->buf, src, len);
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_MSGBUF_H */
