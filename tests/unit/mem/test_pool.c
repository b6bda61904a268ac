/* SPDX-License-Identifier: MIT */
/* The message-buffer pool: classes, headroom, resize, exhaustion, registration. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "mem/pool.h"

struct fake_reg {
	int regs, deregs, fail_with;
	uint32_t next_key;
	void *addrs[64];
	size_t lens[64];
};

static int fake_reg_fn(void *ctx, void *addr, size_t len, struct urpc_mem_reg *out)
{
	struct fake_reg *f = ctx;

	if (f->fail_with)
		return f->fail_with;
	cr_assert_lt(f->regs, 64);
	f->addrs[f->regs] = addr;
	f->lens[f->regs] = len;
	f->regs++;
	out->lkey = ++f->next_key;
	out->rkey = f->next_key + 1000;
	out->handle = addr;
	return 0;
}

static void fake_dereg_fn(void *ctx, struct urpc_mem_reg *reg)
{
	struct fake_reg *f = ctx;

	cr_assert_not_null(reg->handle);
	f->deregs++;
}

static struct urpc_pool *make_pool(struct fake_reg *f, size_t max_bytes)
{
	struct urpc_pool_opts o;
	struct urpc_pool *p;

	urpc__pool_opts_init(&o);
	o.hp_flags = URPC_HP_FORCE_4K;
	if (max_bytes)
		o.max_bytes = max_bytes;
	if (f) {
		o.reg = fake_reg_fn;
		o.dereg = fake_dereg_fn;
		o.reg_ctx = f;
	}
	cr_assert_eq(urpc__pool_create(&o, &p), 0);
	return p;
}

Test(pool, size_classes_and_alignment)
{
	static const size_t sizes[] = {1, 63, 64, 65, 4096, 4097, 1 << 20, 16 << 20};
	static const size_t caps[] = {64, 64, 64, 128, 4096, 8192, 1 << 20, 16 << 20};
	struct urpc_pool *p = make_pool(NULL, 0);
	struct urpc_msgbuf mb[8];
	unsigned i;

	for (i = 0; i < 8; i++) {
		cr_assert_eq(urpc__pool_alloc(p, sizes[i], &mb[i]), 0, "size %zu", sizes[i]);
		cr_assert_eq(mb[i].data_size, sizes[i]);
		cr_assert_eq(mb[i].max_data_size, caps[i], "size %zu got class %zu", sizes[i],
			     mb[i].max_data_size);
		cr_assert_eq((uintptr_t)mb[i].buf % 64, 0);
		memset(mb[i].buf, (int)i, mb[i].max_data_size);
		memset(mb[i].buf - 64, 0xee, 64); /* the headroom is ours to write */
	}
	for (i = 0; i < 8; i++) {
		cr_assert_eq(mb[i].buf[0], i);
		cr_assert_eq(mb[i].buf[mb[i].max_data_size - 1], i, "buffers must not overlap");
		urpc__pool_free(p, &mb[i]);
		cr_assert_null(mb[i].buf);
	}
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, bad_sizes_are_refused)
{
	struct urpc_pool *p = make_pool(NULL, 0);
	struct urpc_msgbuf mb = {0};

	cr_assert_eq(urpc__pool_alloc(p, 0, &mb), -EINVAL);
	cr_assert_eq(urpc__pool_alloc(p, (64u << 20) + 1, &mb), -EINVAL);
	cr_assert_null(mb.buf, "a failed alloc leaves the buffer alone");
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, resize_within_capacity)
{
	struct urpc_pool *p = make_pool(NULL, 0);
	struct urpc_msgbuf mb;

	cr_assert_eq(urpc__pool_alloc(p, 100, &mb), 0);
	cr_assert_eq(mb.max_data_size, 128);
	cr_assert_eq(urpc__pool_resize(&mb, 128), 0);
	cr_assert_eq(mb.data_size, 128);
	cr_assert_eq(urpc__pool_resize(&mb, 0), 0);
	cr_assert_eq(urpc__pool_resize(&mb, 129), -EINVAL);
	cr_assert_eq(mb.data_size, 0, "a refused resize changes nothing");
	urpc__pool_free(p, &mb);
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, exhaustion_and_recovery)
{
	struct urpc_pool *p = make_pool(NULL, 4u << 20); /* two 2 MiB chunks */
	struct urpc_pool_stats st;
	static struct urpc_msgbuf mb[4096];
	unsigned n = 0, i;
	int ret;

	while ((ret = urpc__pool_alloc(p, 1024, &mb[n])) == 0)
		cr_assert_lt(++n, 4096);
	cr_assert_eq(ret, -ENOMEM);
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, 4u << 20);
	cr_assert_eq(st.alloc_failures, 1);
	cr_assert_eq(st.bufs_out, n);
	cr_assert_eq(n, 2 * ((2u << 20) / (1024 + 64)));
	cr_assert_eq(urpc__pool_destroy(p), -EBUSY, "destroy must refuse while buffers are out");

	urpc__pool_free(p, &mb[7]);
	cr_assert_eq(urpc__pool_alloc(p, 1000, &mb[7]), 0, "a freed buffer is reused");
	for (i = 0; i < n; i++)
		urpc__pool_free(p, &mb[i]);
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, free_returns_memory)
{
	struct urpc_pool *p = make_pool(NULL, 0);
	struct urpc_pool_stats st;
	struct urpc_msgbuf mb, big;
	size_t mapped;
	int i;

	cr_assert_eq(urpc__pool_alloc(p, 32, &mb), 0);
	urpc__pool_get_stats(p, &st);
	mapped = st.bytes_mapped;
	urpc__pool_free(p, &mb);
	for (i = 0; i < 100000; i++) {
		cr_assert_eq(urpc__pool_alloc(p, 32, &mb), 0);
		urpc__pool_free(p, &mb);
	}
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, mapped, "alloc/free cycles must not grow the pool");

	cr_assert_eq(urpc__pool_alloc(p, 16 << 20, &big), 0);
	urpc__pool_get_stats(p, &st);
	cr_assert_geq(st.bytes_mapped, mapped + (16 << 20));
	urpc__pool_free(p, &big);
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, mapped, "a large buffer goes back to the system");
	cr_assert_eq(st.bufs_out, 0);
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, registration_once_per_chunk)
{
	struct fake_reg f = {0};
	struct urpc_pool *p = make_pool(&f, 0);
	struct urpc_msgbuf a, b, c;
	uint8_t *start;

	cr_assert_eq(urpc__pool_alloc(p, 100, &a), 0);
	cr_assert_eq(urpc__pool_alloc(p, 100, &b), 0);
	cr_assert_eq(f.regs, 1, "two buffers of one chunk: one registration");
	start = f.addrs[0];
	cr_assert(a.buf >= start && a.buf + a.max_data_size <= start + f.lens[0]);
	cr_assert_eq(a.priv_lkey, 1);
	cr_assert_eq(a.priv_rkey, 1001);
	cr_assert_eq(b.priv_lkey, a.priv_lkey);

	cr_assert_eq(urpc__pool_alloc(p, 4 << 20, &c), 0);
	cr_assert_eq(f.regs, 2, "a large buffer registers its own chunk");
	cr_assert_eq(c.priv_lkey, 2);
	urpc__pool_free(p, &c);
	cr_assert_eq(f.deregs, 1, "freeing the large buffer deregisters its chunk");

	urpc__pool_free(p, &a);
	urpc__pool_free(p, &b);
	cr_assert_eq(urpc__pool_destroy(p), 0);
	cr_assert_eq(f.deregs, 2, "destroy deregisters every remaining chunk");
}

Test(pool, failing_registration_fails_the_alloc)
{
	struct fake_reg f = {.fail_with = -EFAULT};
	struct urpc_pool *p = make_pool(&f, 0);
	struct urpc_pool_stats st;
	struct urpc_msgbuf mb = {0};

	cr_assert_eq(urpc__pool_alloc(p, 100, &mb), -EFAULT);
	cr_assert_null(mb.buf);
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, 0, "the unregistered chunk must be unmapped");
	cr_assert_eq(st.alloc_failures, 1);
	f.fail_with = 0;
	cr_assert_eq(urpc__pool_alloc(p, 100, &mb), 0);
	urpc__pool_free(p, &mb);
	cr_assert_eq(urpc__pool_destroy(p), 0);
}

Test(pool, bad_options)
{
	struct urpc_pool_opts o;
	struct urpc_pool *p;

	urpc__pool_opts_init(&o);
	o.headroom = 40;
	cr_assert_eq(urpc__pool_create(&o, &p), -EINVAL);
	urpc__pool_opts_init(&o);
	o.reg = fake_reg_fn; /* reg without dereg */
	cr_assert_eq(urpc__pool_create(&o, &p), -EINVAL);
}

Test(pool, kept_large_buffers_are_reused_and_capped)
{
	struct urpc_pool_opts o;
	struct urpc_pool_stats st;
	struct urpc_msgbuf a, b, c;
	struct urpc_pool *p;
	size_t mapped;
	uint8_t *first;

	urpc__pool_opts_init(&o);
	o.hp_flags = URPC_HP_FORCE_4K;
	o.keep_bytes = 3u << 20; /* room for one freed 2 MiB buffer, not two */
	o.max_bytes = 7u << 20;
	cr_assert_eq(urpc__pool_create(&o, &p), 0);
	cr_assert_eq(urpc__pool_alloc(p, 2u << 20, &a), 0);
	first = a.buf;
	urpc__pool_free(p, &a);
	urpc__pool_get_stats(p, &st);
	mapped = st.bytes_mapped;
	cr_assert_geq(mapped, 2u << 20, "the freed buffer is kept");
	/* The next buffer of that class is the kept one: nothing new is mapped. */
	cr_assert_eq(urpc__pool_alloc(p, (2u << 20) - 100, &a), 0);
	cr_assert_eq(a.buf, first);
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, mapped);
	cr_assert_eq(urpc__pool_alloc(p, 2u << 20, &b), 0);
	/* Two freed: only one fits keep_bytes, the other goes back. */
	urpc__pool_free(p, &a);
	urpc__pool_free(p, &b);
	urpc__pool_get_stats(p, &st);
	cr_assert_eq(st.bytes_mapped, mapped, "keep_bytes caps what is kept");
	/* The cap needs room: kept buffers go first. 4 MiB + the kept one > 7 MiB. */
	cr_assert_eq(urpc__pool_alloc(p, 4u << 20, &c), 0, "kept memory must make room");
	urpc__pool_free(p, &c);
	cr_assert_eq(urpc__pool_destroy(p), 0);
}
