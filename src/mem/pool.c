/* SPDX-License-Identifier: MIT */
/*
 * The message-buffer pool: power-of-two size classes carved from registered
 * chunks. See pool.h for the contract.
 *
 * Layout of one buffer: [headroom][data: class size]. While a buffer is
 * free, the first bytes of its headroom hold the free-list link and the
 * chunk it belongs to; the caller never sees a free buffer, so nothing of
 * the caller's is overwritten.
 *
 * Double frees: every allocation takes a serial number from the pool
 * (never 0), kept in the handle (priv_gen) and, outside the buffer's
 * memory, in its chunk (one word per buffer of a shared chunk, one for an
 * own chunk); freeing writes 0 there. A free whose handle does not carry
 * the serial its buffer holds now (a stale copy of a freed handle, or of
 * one whose memory was handed out again) is refused and touches nothing.
 * An own chunk may be gone (unmapped, its struct freed) by the time a stale
 * handle names it, so such a handle is first looked up among the live
 * chunks.
 *
 * Small classes (stride <= chunk_size / 4) share chunks of chunk_size bytes.
 * A larger buffer gets a chunk of its own. When it is freed the chunk goes
 * back to the system, unless it fits in keep_bytes: then it waits on its
 * class's free list for the next buffer of that class (a server receiving
 * 1 MiB requests would otherwise map, register, fault in and unmap a chunk
 * per request), and goes first when the max_bytes cap needs room.
 */
#define URPC_LOG_MODULE "mem"
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/compiler.h"
#include "../util/log.h"

#define MIN_CLASS_SHIFT 6 /* 64 data bytes */
#define NUM_CLASSES 21	  /* 64 B .. 64 MiB */

struct chunk {
	struct urpc_hp_region region;
	struct urpc_mem_reg reg;
	bool registered;
	bool dedicated; /* one buffer, unmapped when it is freed */
	unsigned cls;	/* the size class its buffers belong to */
	/*
	 * Serial of the allocation each buffer holds, 0 while it is free:
	 * @serials[i] for the i-th buffer of a shared chunk, @serial for an
	 * own chunk's one buffer.
	 */
	uint32_t *serials;
	uint32_t serial;
	struct chunk *prev, *next;
};

/* What a free buffer keeps in its headroom. */
struct free_hdr {
	struct free_hdr *next;
	struct chunk *chunk;
};
static_assert(sizeof(struct free_hdr) <= 64, "free header must fit the minimal headroom");

struct size_class {
	size_t data_size;
	size_t stride; /* headroom + data_size */
	struct free_hdr *free;
	/* never-used buffers of the newest shared chunk: [carve, carve_end) */
	uint8_t *carve, *carve_end;
	struct chunk *carve_chunk;
};

struct urpc_pool {
	struct urpc_pool_opts o;
	size_t kept;	      /* bytes of freed own-chunk buffers waiting for reuse */
	uint32_t next_serial; /* of the next allocation; never 0 */
	struct size_class classes[NUM_CLASSES];
	unsigned nclasses;
	struct chunk *chunks; /* every mapped chunk, doubly linked */
	struct urpc_pool_stats st;
};

void urpc__pool_opts_init(struct urpc_pool_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->headroom = 64;
	o->chunk_size = 2u << 20;
	o->max_bytes = (size_t)1 << 30;
	o->max_buf = (size_t)64 << 20;
}

int urpc__pool_create(const struct urpc_pool_opts *o, struct urpc_pool **out)
{
	struct urpc_pool_opts def;
	struct urpc_pool *p;
	unsigned i;

	if (!o) {
		urpc__pool_opts_init(&def);
		o = &def;
	}
	if (!out || o->headroom < 64 || o->headroom % 64 || o->chunk_size < 4096 || !o->max_buf ||
	    o->max_buf > ((size_t)1 << (MIN_CLASS_SHIFT + NUM_CLASSES - 1)) ||
	    (!o->reg != !o->dereg))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->o = *o;
	for (i = 0; i < NUM_CLASSES; i++) {
		size_t ds = (size_t)1 << (MIN_CLASS_SHIFT + i);

		p->classes[i].data_size = ds;
		p->classes[i].stride = o->headroom + ds;
		p->nclasses = i + 1;
		if (ds >= o->max_buf)
			break;
	}
	p->st.last_backing = URPC_HP_4K;
	p->next_serial = 1;
	*out = p;
	return 0;
}

static void chunk_release(struct urpc_pool *p, struct chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		p->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->registered)
		p->o.dereg(p->o.reg_ctx, &c->reg);
	p->st.bytes_mapped -= c->region.len;
	p->st.chunks--;
	urpc__hp_free(&c->region);
	free(c->serials);
	free(c);
}

void urpc__pool_destroy_all(struct urpc_pool *p)
{
	if (!p)
		return;
	while (p->chunks)
		chunk_release(p, p->chunks);
	free(p);
}

int urpc__pool_destroy(struct urpc_pool *p)
{
	if (p && p->st.bufs_out)
		return -EBUSY;
	urpc__pool_destroy_all(p);
	return 0;
}

/* Map and register a chunk of at least @len bytes. Not the datapath. */
/* Give the kept own-chunk buffers back to the system. */
static void drop_kept(struct urpc_pool *p)
{
	unsigned ci;

	for (ci = 0; ci < p->nclasses && p->kept; ci++) {
		struct size_class *sc = &p->classes[ci];

		if (sc->stride <= p->o.chunk_size / 4)
			continue;
		while (sc->free) {
			struct free_hdr *h = sc->free;

			sc->free = h->next;
			p->kept -= sc->stride;
			chunk_release(p, h->chunk);
		}
	}
}

static int chunk_add(struct urpc_pool *p, size_t len, unsigned cls, bool dedicated,
		     struct chunk **out)
{
	struct chunk *c;
	int ret;

	if (p->kept && (len > p->o.max_bytes || p->st.bytes_mapped > p->o.max_bytes - len))
		drop_kept(p);
	if (len > p->o.max_bytes || p->st.bytes_mapped > p->o.max_bytes - len)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	ret = urpc__hp_alloc(len, p->o.hp_flags, &c->region);
	if (ret)
		goto out_free;
	if (c->region.len > p->o.max_bytes - p->st.bytes_mapped) {
		/* Rounding up to a huge page went over the cap. */
		ret = -ENOMEM;
		goto out_unmap;
	}
	c->cls = cls;
	if (!dedicated) {
		c->serials = calloc(c->region.len / p->classes[cls].stride, sizeof(*c->serials));
		if (!c->serials) {
			ret = -ENOMEM;
			goto out_unmap;
		}
	}
	if (p->o.reg) {
		ret = p->o.reg(p->o.reg_ctx, c->region.addr, c->region.len, &c->reg);
		if (ret)
			goto out_unmap;
		c->registered = true;
	}
	c->dedicated = dedicated;
	c->next = p->chunks;
	if (p->chunks)
		p->chunks->prev = c;
	p->chunks = c;
	p->st.bytes_mapped += c->region.len;
	p->st.chunks++;
	p->st.last_backing = c->region.backing;
	*out = c;
	return 0;

out_unmap:
	free(c->serials);
	urpc__hp_free(&c->region);
out_free:
	free(c);
	return ret;
}

static inline struct free_hdr *buf_hdr(uint8_t *buf_start)
{
	return (struct free_hdr *)(void *)buf_start;
}

/*
 * The next never-used buffer of class @sc: carved from its newest shared
 * chunk, a new chunk when that one is used up. Buffers are carved one at a
 * time, so a chunk's pages are touched only as its buffers are handed out
 * (a fresh Rpc does not fault in megabytes of buffers it may never use).
 * 0 and *@out, or -errno.
 */
static int class_carve(struct urpc_pool *p, struct size_class *sc, struct free_hdr **out)
{
	struct free_hdr *h;

	if (sc->carve == sc->carve_end) {
		struct chunk *c;
		int ret = chunk_add(p, p->o.chunk_size, (unsigned)(sc - p->classes), false, &c);

		if (ret)
			return ret;
		sc->carve = c->region.addr;
		sc->carve_end = sc->carve + c->region.len / sc->stride * sc->stride;
		sc->carve_chunk = c;
	}
	h = buf_hdr(sc->carve);
	h->chunk = sc->carve_chunk;
	sc->carve += sc->stride;
	*out = h;
	return 0;
}

/* Where the serial of the buffer whose headroom starts at @start is kept. */
static inline uint32_t *serial_of(const struct urpc_pool *p, struct chunk *c, const uint8_t *start)
{
	if (c->dedicated)
		return &c->serial;
	return &c->serials[(size_t)(start - (const uint8_t *)c->region.addr) /
			   p->classes[c->cls].stride];
}

static inline unsigned class_of(size_t size)
{
	unsigned bits;

	if (size <= ((size_t)1 << MIN_CLASS_SHIFT))
		return 0;
	bits = (unsigned)(64 - __builtin_clzll((unsigned long long)(size - 1)));
	return bits - MIN_CLASS_SHIFT;
}

int urpc__pool_alloc(struct urpc_pool *p, size_t size, struct urpc_msgbuf *mb)
{
	struct size_class *sc;
	struct free_hdr *h;
	struct chunk *c;
	unsigned ci;
	int ret;

	if (unlikely(!size || size > p->o.max_buf))
		return -EINVAL;
	ci = class_of(size);
	if (unlikely(ci >= p->nclasses))
		return -EINVAL;
	sc = &p->classes[ci];

	if (unlikely(sc->stride > p->o.chunk_size / 4)) {
		if (sc->free) {
			/* A kept own-chunk buffer of this class. */
			h = sc->free;
			sc->free = h->next;
			c = h->chunk;
			p->kept -= sc->stride;
		} else {
			ret = chunk_add(p, sc->stride, ci, true, &c);
			if (ret)
				goto fail;
			h = buf_hdr(c->region.addr);
			h->chunk = c;
		}
	} else {
		if (likely(sc->free)) {
			h = sc->free;
			sc->free = h->next;
		} else {
			ret = class_carve(p, sc, &h);
			if (ret)
				goto fail;
		}
		c = h->chunk;
	}

	mb->buf = (uint8_t *)h + p->o.headroom;
	mb->data_size = size;
	mb->max_data_size = sc->data_size;
	mb->priv_class = c;
	mb->priv_lkey = c->reg.lkey;
	mb->priv_rkey = c->reg.rkey;
	mb->priv_gen = p->next_serial;
	mb->priv_sess = 0;
	*serial_of(p, c, (const uint8_t *)h) = p->next_serial;
	if (unlikely(++p->next_serial == 0))
		p->next_serial = 1;
	p->st.bufs_out++;
	p->st.allocs++;
	return 0;

fail:
	p->st.alloc_failures++;
	return ret;
}

/*
 * Is @c one of the pool's chunks? Cold: walks them all; only a handle of an
 * own-chunk class asks, before anything of its chunk is read.
 */
static bool chunk_is_live(const struct urpc_pool *p, const struct chunk *c)
{
	const struct chunk *it;

	for (it = p->chunks; it; it = it->next)
		if (it == c)
			return true;
	return false;
}

/*
 * The serial word of the buffer @mb names, if @mb is a handle of one of the
 * pool's buffers as it is allocated now; else NULL (nothing read beyond the
 * handle and the pool's own chunks).
 */
static uint32_t *live_serial(const struct urpc_pool *p, const struct urpc_msgbuf *mb)
{
	struct chunk *c = mb->priv_class;
	const uint8_t *start;
	unsigned ci;
	uint32_t *serial;

	if (unlikely(!mb->buf || !c || !mb->priv_gen))
		return NULL;
	ci = class_of(mb->max_data_size);
	if (unlikely(ci >= p->nclasses))
		return NULL;
	if (unlikely(p->classes[ci].stride > p->o.chunk_size / 4 && !chunk_is_live(p, c)))
		return NULL; /* its own chunk went back to the system: freed before */
	start = mb->buf - p->o.headroom;
	if (unlikely(c->cls != ci || start < (const uint8_t *)c->region.addr ||
		     start >= (const uint8_t *)c->region.addr + c->region.len))
		return NULL;
	serial = serial_of(p, c, start);
	/* 0: freed; another serial: freed and handed out again since. */
	return *serial == mb->priv_gen ? serial : NULL;
}

bool urpc__pool_is_out(const struct urpc_pool *p, const struct urpc_msgbuf *mb)
{
	return live_serial(p, mb) != NULL;
}

void urpc__pool_restamp(struct urpc_pool *p, struct urpc_msgbuf *mb)
{
	uint32_t *serial = live_serial(p, mb);

	if (!serial)
		return;
	*serial = mb->priv_gen = p->next_serial;
	if (unlikely(++p->next_serial == 0))
		p->next_serial = 1;
}

int urpc__pool_free(struct urpc_pool *p, struct urpc_msgbuf *mb)
{
	struct chunk *c = mb->priv_class;
	uint32_t *serial = live_serial(p, mb);
	struct size_class *sc;
	struct free_hdr *h;

	if (unlikely(!serial))
		return -EINVAL; /* freed before, or a stale copy of an earlier allocation */
	*serial = 0;
	p->st.bufs_out--;
	p->st.frees++;
	sc = &p->classes[c->cls];

	if (unlikely(c->dedicated)) {
		if (p->kept + sc->stride > p->o.keep_bytes) {
			chunk_release(p, c);
			memset(mb, 0, sizeof(*mb));
			return 0;
		}
		p->kept += sc->stride;
	}
	h = buf_hdr(mb->buf - p->o.headroom);
	h->chunk = c;
	h->next = sc->free;
	sc->free = h;
	memset(mb, 0, sizeof(*mb));
	return 0;
}

int urpc__pool_resize(struct urpc_msgbuf *mb, size_t size)
{
	if (unlikely(size > mb->max_data_size))
		return -EINVAL;
	mb->data_size = size;
	return 0;
}

void urpc__pool_get_stats(const struct urpc_pool *p, struct urpc_pool_stats *s)
{
	*s = p->st;
}

void *urpc__pool_reg_handle(const struct urpc_msgbuf *mb)
{
	const struct chunk *c = mb->priv_class;

	return c && c->registered ? c->reg.handle : NULL;
}
