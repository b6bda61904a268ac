/* SPDX-License-Identifier: MIT */
/*
 * The registration cache: hits, access, LRU caps, invalidation, bounds and
 * errors with recording callbacks; then a user array read by a loop peer.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem/regcache.h"
#include "transport/transport.h"

#define PG 4096u
#define R URPC_REGCACHE_ACCESS_REMOTE_READ
#define W URPC_REGCACHE_ACCESS_REMOTE_WRITE
#define RW (R | W)
#define MAX_LIVE 64

/* The cache never touches the memory, so these tests use made-up addresses. */
#define BASE ((uintptr_t)0x10000000u)
#define AT(off) ((void *)(BASE + (off)))

struct live_reg {
	uintptr_t addr;
	size_t len;
	unsigned access;
	bool used;
};

/* Recording callbacks: every live registration, and what was asked last. */
struct fake {
	int regs, deregs;
	int fail_with; /* error the next @fail_count calls return */
	int fail_count;
	bool allow_dup; /* an invalidated entry may still cover what is asked */
	struct live_reg live[MAX_LIVE];
	unsigned nlive;
	struct live_reg last_reg, last_dereg;
};

static int fake_reg(void *ctx, void *addr, size_t len, unsigned access, struct urpc_mem_reg *out)
{
	struct fake *f = ctx;
	uintptr_t a = (uintptr_t)addr;
	unsigned i, slot = MAX_LIVE;

	if (f->fail_count > 0) {
		f->fail_count--;
		return f->fail_with;
	}
	for (i = 0; i < MAX_LIVE; i++) {
		struct live_reg *l = &f->live[i];

		if (!l->used) {
			if (slot == MAX_LIVE)
				slot = i;
			continue;
		}
		/* A live registration that already grants this was needed, not a new one. */
		cr_assert(f->allow_dup || !(l->addr <= a && a + len <= l->addr + l->len &&
					    (l->access & access) == access),
			  "[%#lx, +%zu) access %u registered twice", (unsigned long)a, len, access);
	}
	cr_assert_lt(slot, MAX_LIVE);
	f->live[slot] = (struct live_reg){.addr = a, .len = len, .access = access, .used = true};
	f->last_reg = f->live[slot];
	f->nlive++;
	f->regs++;
	out->lkey = 100 + slot;
	out->rkey = 200 + slot;
	out->handle = &f->live[slot];
	return 0;
}

static void fake_dereg(void *ctx, struct urpc_mem_reg *reg)
{
	struct fake *f = ctx;
	struct live_reg *l = reg->handle;

	cr_assert_not_null(l);
	cr_assert(l->used, "a registration was deregistered twice");
	f->last_dereg = *l;
	l->used = false;
	f->nlive--;
	f->deregs++;
}

static struct urpc_regcache *make_rc(struct fake *f, uint32_t max_entries, size_t max_unused)
{
	struct urpc_regcache_opts o;
	struct urpc_regcache *rc;

	urpc__regcache_opts_init(&o);
	o.reg = fake_reg;
	o.dereg = fake_dereg;
	o.ctx = f;
	o.align = PG;
	if (max_entries)
		o.max_entries = max_entries;
	if (max_unused != (size_t)-1)
		o.max_unused_bytes = max_unused;
	cr_assert_eq(urpc__regcache_create(&o, &rc), 0);
	return rc;
}

static struct urpc_regcache_stats stats(struct urpc_regcache *rc)
{
	struct urpc_regcache_stats s;

	urpc__regcache_get_stats(rc, &s);
	return s;
}

/* Destroy @rc and check every registration was undone. */
static void close_rc(struct urpc_regcache *rc, struct fake *f)
{
	cr_assert_eq(urpc__regcache_destroy(rc), 0);
	cr_assert_eq(f->nlive, 0, "%u registrations leaked", f->nlive);
	cr_assert_eq(f->regs, f->deregs);
}

static struct urpc_regcache_ent *get_ok(struct urpc_regcache *rc, uintptr_t off, size_t len,
					unsigned access)
{
	struct urpc_regcache_ent *e = NULL;
	int ret = urpc__regcache_get(rc, AT(off), len, access, &e);

	cr_assert_eq(ret, 0, "get(+%#lx, %zu, %u): %d", (unsigned long)off, len, access, ret);
	cr_assert_not_null(e);
	cr_assert_leq((uintptr_t)e->addr, BASE + off);
	cr_assert_geq((uintptr_t)e->addr + e->len, BASE + off + len);
	cr_assert_eq(e->access & access, access);
	return e;
}

Test(regcache, opts_are_checked)
{
	struct urpc_regcache_opts o;
	struct urpc_regcache *rc;

	urpc__regcache_opts_init(&o);
	cr_assert_eq(o.max_entries, 1024);
	cr_assert_eq(o.max_unused_bytes, (size_t)1 << 30);
	cr_assert_eq(urpc__regcache_create(&o, &rc), -EINVAL, "callbacks are required");
	o.reg = fake_reg;
	o.dereg = fake_dereg;
	o.max_entries = 0;
	cr_assert_eq(urpc__regcache_create(&o, &rc), -EINVAL);
	o.max_entries = 4;
	o.align = 3000;
	cr_assert_eq(urpc__regcache_create(&o, &rc), -EINVAL);
	cr_assert_eq(urpc__regcache_create(NULL, &rc), -EINVAL);
	cr_assert_eq(urpc__regcache_destroy(NULL), 0);
}

Test(regcache, hit_for_covered_subranges)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *e[6];
	struct urpc_regcache_stats s;

	e[0] = get_ok(rc, 100, 8000, R);
	cr_assert_eq(f.regs, 1);
	cr_assert_eq(f.last_reg.addr, BASE, "the range is rounded out to pages");
	cr_assert_eq(f.last_reg.len, 2 * PG);
	cr_assert_eq(f.last_reg.access, R, "exactly the access asked for");
	cr_assert_eq(e[0]->addr, AT(0));
	cr_assert_eq(e[0]->len, 2 * PG);
	cr_assert_eq(e[0]->reg.rkey, 200);

	e[1] = get_ok(rc, PG, 100, R);
	e[2] = get_ok(rc, 0, 2 * PG, R);
	e[3] = get_ok(rc, 2 * PG - 1, 1, 0); /* no remote access at all: any entry will do */
	cr_assert_eq(f.regs, 1, "covered sub-ranges are hits");
	cr_assert(e[1] == e[0] && e[2] == e[0] && e[3] == e[0]);

	/* One byte past the entry's last page is a miss for its own page range. */
	e[4] = get_ok(rc, 8000, 1000, R);
	cr_assert_eq(f.regs, 2);
	cr_assert_eq(f.last_reg.addr, BASE + PG);
	cr_assert_eq(f.last_reg.len, 2 * PG);
	e[5] = get_ok(rc, 2 * PG + 10, 10, R);
	cr_assert_eq(e[5], e[4]);

	s = stats(rc);
	cr_assert_eq(s.hits, 4);
	cr_assert_eq(s.misses, 2);
	cr_assert_eq(s.registrations, 2);
	cr_assert_eq(s.deregistrations, 0);
	cr_assert_eq(s.bytes_registered, 4 * PG);
	cr_assert_eq(s.bytes_unused, 0);
	cr_assert_eq(s.entries, 2);
	cr_assert_eq(s.held, 2);
	for (int i = 0; i < 6; i++)
		urpc__regcache_put(rc, e[i]);
	s = stats(rc);
	cr_assert_eq(s.held, 0);
	cr_assert_eq(s.bytes_unused, 4 * PG);
	close_rc(rc, &f);
}

/*
 * Growing access is a miss, and the new entry has exactly the access asked
 * for (no union with the cached entry's: see regcache.h).
 */
Test(regcache, access_growth_is_a_miss_without_union)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *ro, *wo, *rw, *e;

	ro = get_ok(rc, 0, PG, R);
	wo = get_ok(rc, 0, PG, W);
	cr_assert_neq(wo, ro);
	cr_assert_eq(f.regs, 2);
	cr_assert_eq(f.last_reg.access, W, "not widened to the union");
	cr_assert_eq(wo->access, W);
	rw = get_ok(rc, 0, 100, RW);
	cr_assert_eq(f.regs, 3, "neither single-access entry grants both");
	cr_assert_eq(f.last_reg.access, RW);

	/* Now every access is a hit, whichever entry serves it. */
	e = get_ok(rc, 10, 10, W);
	urpc__regcache_put(rc, e);
	e = get_ok(rc, 10, 10, R);
	urpc__regcache_put(rc, e);
	e = get_ok(rc, 10, 10, RW);
	cr_assert_eq(e, rw);
	urpc__regcache_put(rc, e);
	cr_assert_eq(f.regs, 3);
	cr_assert_eq(stats(rc).hits, 3);

	/* With the write entries gone, the held read-only one does not serve a write. */
	urpc__regcache_put(rc, wo);
	urpc__regcache_put(rc, rw);
	urpc__regcache_flush(rc);
	cr_assert_eq(f.deregs, 2);
	e = get_ok(rc, 0, PG, W);
	cr_assert_neq(e, ro);
	cr_assert_eq(f.regs, 4);
	cr_assert_eq(f.last_reg.access, W);
	urpc__regcache_put(rc, e);
	urpc__regcache_put(rc, ro);
	close_rc(rc, &f);
}

Test(regcache, release_keeps_it_cached)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *e, *again;
	struct urpc_regcache_stats s;

	e = get_ok(rc, 0, 3 * PG, RW);
	urpc__regcache_put(rc, e);
	s = stats(rc);
	cr_assert_eq(s.held, 0);
	cr_assert_eq(s.entries, 1);
	cr_assert_eq(s.bytes_unused, 3 * PG);
	cr_assert_eq(s.bytes_registered, 3 * PG);
	cr_assert_eq(f.deregs, 0, "an unused entry stays registered");

	again = get_ok(rc, PG, PG, R);
	cr_assert_eq(again, e);
	cr_assert_eq(f.regs, 1);
	s = stats(rc);
	cr_assert_eq(s.bytes_unused, 0);
	cr_assert_eq(s.held, 1);
	cr_assert_eq(urpc__regcache_destroy(rc), -EBUSY);
	urpc__regcache_put(rc, again);

	urpc__regcache_flush(rc);
	cr_assert_eq(f.deregs, 1);
	cr_assert_eq(stats(rc).entries, 0);
	close_rc(rc, &f);
}

Test(regcache, entry_cap_evicts_the_lru_unused_entry)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 3, (size_t)-1);
	struct urpc_regcache_ent *e;
	unsigned i;

	for (i = 0; i < 3; i++)
		urpc__regcache_put(rc, get_ok(rc, i * 2 * PG, PG, R));
	urpc__regcache_put(rc, get_ok(rc, 0, PG, R)); /* page 0 is used again: page 2 is LRU */
	cr_assert_eq(f.regs, 3);

	e = get_ok(rc, 10 * PG, PG, R);
	cr_assert_eq(f.deregs, 1);
	cr_assert_eq(f.last_dereg.addr, BASE + 2 * PG, "the least recently used went");
	cr_assert_eq(stats(rc).evictions, 1);
	cr_assert_eq(stats(rc).entries, 3);
	urpc__regcache_put(rc, e);

	urpc__regcache_put(rc, get_ok(rc, 0, PG, R));
	cr_assert_eq(f.regs, 4, "page 0 survived");
	urpc__regcache_put(rc, get_ok(rc, 2 * PG, PG, R));
	cr_assert_eq(f.regs, 5, "page 2 is registered again");
	cr_assert_eq(f.last_dereg.addr, BASE + 4 * PG);
	close_rc(rc, &f);
}

Test(regcache, unused_bytes_cap_evicts_lru)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, 3 * PG);
	struct urpc_regcache_ent *big;
	unsigned i;

	for (i = 0; i < 3; i++)
		urpc__regcache_put(rc, get_ok(rc, i * 2 * PG, PG, R));
	cr_assert_eq(f.deregs, 0);
	cr_assert_eq(stats(rc).bytes_unused, 3 * PG);
	urpc__regcache_put(rc, get_ok(rc, 6 * PG, PG, R));
	cr_assert_eq(f.deregs, 1);
	cr_assert_eq(f.last_dereg.addr, BASE);
	cr_assert_eq(stats(rc).bytes_unused, 3 * PG);

	/* Held bytes do not count; an entry bigger than the cap goes at its put. */
	big = get_ok(rc, 100 * PG, 4 * PG, RW);
	cr_assert_eq(stats(rc).bytes_unused, 3 * PG);
	cr_assert_eq(stats(rc).bytes_registered, 7 * PG);
	urpc__regcache_put(rc, big);
	cr_assert_eq(f.last_dereg.addr, BASE + 100 * PG);
	cr_assert_eq(f.deregs, 5, "everything else went first, then the big one");
	cr_assert_eq(stats(rc).bytes_unused, 0);
	cr_assert_eq(stats(rc).evictions, 5);
	close_rc(rc, &f);
}

Test(regcache, held_entries_are_never_evicted)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 2, 0); /* nothing kept while unused */
	struct urpc_regcache_ent *a, *b, *c, *e = NULL;

	a = get_ok(rc, 0, PG, R);
	b = get_ok(rc, PG, PG, R);
	cr_assert_eq(urpc__regcache_get(rc, AT(8 * PG), PG, R, &e), -EAGAIN);
	cr_assert_null(e);
	cr_assert_eq(f.deregs, 0);
	cr_assert_eq(f.regs, 2);
	cr_assert_eq(stats(rc).misses, 3, "the refused get counts as a miss");

	/* A second reference keeps it held when the first one goes. */
	cr_assert_eq(get_ok(rc, 0, 10, R), a);
	urpc__regcache_put(rc, a);
	cr_assert_eq(f.deregs, 0);
	urpc__regcache_put(rc, a);
	cr_assert_eq(f.deregs, 1, "max_unused_bytes 0: deregistered at the last put");
	cr_assert_eq(f.last_dereg.addr, BASE);

	c = get_ok(rc, 8 * PG, PG, R);
	cr_assert_eq(f.deregs, 1, "b is held");
	urpc__regcache_put(rc, b);
	urpc__regcache_put(rc, c);
	close_rc(rc, &f);
}

Test(regcache, invalidate)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *held, *again, *far, *e;

	held = get_ok(rc, 0, 2 * PG, RW);
	urpc__regcache_put(rc, get_ok(rc, 4 * PG, 2 * PG, R)); /* unused */
	urpc__regcache_put(rc, get_ok(rc, 8 * PG, PG, R));     /* unused, not in range */
	far = get_ok(rc, 20 * PG, PG, W);

	/* Ranges that touch no entry: right after one, right before one. */
	cr_assert_eq(urpc__regcache_invalidate(rc, AT(2 * PG), 2 * PG), 0);
	cr_assert_eq(urpc__regcache_invalidate(rc, AT(9 * PG), PG), 0);
	cr_assert_eq(f.deregs, 0);
	cr_assert_eq(stats(rc).entries, 4);

	/* The last byte of the held entry and the first of the unused one. */
	cr_assert_eq(urpc__regcache_invalidate(rc, AT(2 * PG - 1), 2 * PG + 2), 0);
	cr_assert_eq(f.deregs, 1, "the unused entry goes now");
	cr_assert_eq(f.last_dereg.addr, BASE + 4 * PG);
	cr_assert_eq(stats(rc).entries, 2);
	cr_assert_eq(stats(rc).held, 2);
	cr_assert_eq(stats(rc).bytes_registered, 2 * PG + PG + PG);

	/* The held one is no longer found: a new registration replaces it. */
	f.allow_dup = true;
	again = get_ok(rc, 0, PG, RW);
	cr_assert_neq(again, held);
	cr_assert_eq(f.regs, 5);
	f.allow_dup = false;
	e = get_ok(rc, 10, 10, RW);
	cr_assert_eq(e, again, "the new one is cached as usual");
	urpc__regcache_put(rc, e);
	urpc__regcache_put(rc, again);

	cr_assert_eq(urpc__regcache_destroy(rc), -EBUSY, "an invalidated entry is still held");
	urpc__regcache_put(rc, held);
	cr_assert_eq(f.deregs, 2, "deregistered at its last put");
	cr_assert_eq(f.last_dereg.addr, BASE);
	cr_assert_eq(f.last_dereg.len, 2 * PG);
	cr_assert_eq(stats(rc).held, 1);

	e = get_ok(rc, 8 * PG, 1, R);
	cr_assert_eq(f.regs, 5, "the entry outside the range is still cached");
	urpc__regcache_put(rc, e);

	cr_assert_eq(urpc__regcache_invalidate(rc, AT(0), 0), -EINVAL);
	cr_assert_eq(urpc__regcache_invalidate(rc, (void *)(UINTPTR_MAX - 10), 100), -EINVAL);
	/* Everything at once. */
	cr_assert_eq(urpc__regcache_invalidate(rc, AT(0), 64 * PG), 0);
	cr_assert_eq(stats(rc).entries, 0);
	cr_assert_eq(stats(rc).bytes_registered, PG, "far is held");
	urpc__regcache_put(rc, far);
	cr_assert_eq(stats(rc).bytes_registered, 0);
	close_rc(rc, &f);
}

Test(regcache, bounds)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *e = NULL;

	cr_assert_eq(urpc__regcache_get(rc, AT(0), 0, R, &e), -EINVAL);
	cr_assert_eq(urpc__regcache_get(rc, NULL, 10, R, &e), -EINVAL);
	cr_assert_eq(urpc__regcache_get(rc, AT(0), 10, R, NULL), -EINVAL);
	cr_assert_eq(urpc__regcache_get(rc, AT(0), 10, 0x10, &e), -EINVAL);
	cr_assert_eq(urpc__regcache_get(rc, (void *)(UINTPTR_MAX - 10), 100, R, &e), -EINVAL);
	cr_assert_eq(urpc__regcache_get(rc, AT(0), SIZE_MAX, R, &e), -EINVAL);
	/* addr + len fits, but rounding it up to a page would wrap. */
	cr_assert_eq(urpc__regcache_get(rc, (void *)(UINTPTR_MAX - 100), 50, R, &e), -EINVAL);
	cr_assert_null(e);
	cr_assert_eq(f.regs, 0);
	cr_assert_eq(stats(rc).misses, 0);
	close_rc(rc, &f);
}

Test(regcache, destroy_with_held_entries_is_busy)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *e = get_ok(rc, 0, PG, R);

	cr_assert_eq(urpc__regcache_destroy(rc), -EBUSY);
	cr_assert_eq(f.deregs, 0, "a refused destroy deregisters nothing");
	urpc__regcache_put(rc, e);
	close_rc(rc, &f);
}

Test(regcache, registration_failure_propagates)
{
	struct fake f = {.fail_with = -EFAULT, .fail_count = 1};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *e = NULL, *none = NULL;
	struct urpc_regcache_stats s;

	cr_assert_eq(urpc__regcache_get(rc, AT(0), PG, R, &e), -EFAULT);
	cr_assert_null(e);
	s = stats(rc);
	cr_assert_eq(s.entries, 0, "nothing is cached after a failure");
	cr_assert_eq(s.reg_failures, 1);
	cr_assert_eq(s.registrations, 0);
	cr_assert_eq(s.bytes_registered, 0);
	e = get_ok(rc, 0, PG, R);
	urpc__regcache_put(rc, e);

	/* -ENOMEM with unused entries: they are given back and the call retried. */
	f.fail_with = -ENOMEM;
	f.fail_count = 1;
	e = get_ok(rc, 4 * PG, PG, W);
	cr_assert_eq(f.deregs, 1);
	cr_assert_eq(stats(rc).evictions, 1);
	cr_assert_eq(stats(rc).reg_failures, 2);
	/* ... but only once, and never with nothing to give back. */
	f.fail_count = 2;
	cr_assert_eq(urpc__regcache_get(rc, AT(8 * PG), PG, W, &none), -ENOMEM);
	cr_assert_null(none);
	cr_assert_eq(f.fail_count, 1, "no entry was unused: no retry");
	f.fail_count = 0;
	urpc__regcache_put(rc, e);
	close_rc(rc, &f);
}

/* The walk down the sorted array must find a big entry behind small ones. */
Test(regcache, big_entry_behind_small_ones)
{
	struct fake f = {0};
	struct urpc_regcache *rc = make_rc(&f, 0, (size_t)-1);
	struct urpc_regcache_ent *big, *small[10], *e;
	unsigned i;

	big = get_ok(rc, 0, 64 * PG, R);
	for (i = 0; i < 10; i++)
		small[i] = get_ok(rc, (i + 1) * 3 * PG, PG, W);
	cr_assert_eq(f.regs, 11);
	e = get_ok(rc, 40 * PG + 5, 3 * PG, R);
	cr_assert_eq(e, big);
	urpc__regcache_put(rc, e);
	e = get_ok(rc, 3 * PG, 10, RW);
	cr_assert_eq(f.regs, 12, "no entry grants both");
	urpc__regcache_put(rc, e);
	e = get_ok(rc, 63 * PG, PG + 1, R);
	cr_assert_eq(f.regs, 13, "past the big entry's end");
	urpc__regcache_put(rc, e);
	for (i = 0; i < 10; i++)
		urpc__regcache_put(rc, small[i]);
	urpc__regcache_put(rc, big);
	cr_assert_eq(stats(rc).hits, 1);
	close_rc(rc, &f);
}

Test(regcache, align_one_registers_exact_bytes)
{
	struct urpc_regcache_opts o;
	struct urpc_regcache *rc;
	struct fake f = {0};
	struct urpc_regcache_ent *e;
	uintptr_t top = UINTPTR_MAX - 100;

	urpc__regcache_opts_init(&o);
	o.reg = fake_reg;
	o.dereg = fake_dereg;
	o.ctx = &f;
	o.align = 1;
	cr_assert_eq(urpc__regcache_create(&o, &rc), 0);
	e = get_ok(rc, 100, 1000, W);
	cr_assert_eq(f.last_reg.addr, BASE + 100);
	cr_assert_eq(f.last_reg.len, 1000);
	urpc__regcache_put(rc, e);
	cr_assert_eq(urpc__regcache_get(rc, (void *)top, 50, R, &e), 0, "nothing to round");
	urpc__regcache_put(rc, e);
	close_rc(rc, &f);
}

/* ---- over the loop transport ---- */

/* Let @tp serve its peers' one-sided requests. */
static void serve(struct urpc_tp *tp)
{
	struct urpc_tp_rx rx[16];
	int n = tp->ops->rx_burst(tp, rx, 16);

	if (n > 0)
		tp->ops->rx_release(tp, rx, (unsigned)n);
}

/* Poll both endpoints until @a reaps @wr_id; returns its status. */
static int wait_comp(struct urpc_tp *a, struct urpc_tp *b, uint64_t wr_id)
{
	struct urpc_tp_comp c, bc;
	int i;

	for (i = 0; i < 1000; i++) {
		serve(b);
		b->ops->poll_completions(b, &bc, 1);
		serve(a);
		if (a->ops->poll_completions(a, &c, 1) == 1) {
			cr_assert_eq(c.wr_id, wr_id);
			return c.status;
		}
	}
	cr_assert_fail("one-sided operation %lu never completed", (unsigned long)wr_id);
	return -ETIMEDOUT;
}

Test(regcache, loop_peer_reads_user_array_with_least_access)
{
	enum { N = 3 * 4096 + 123, OFF = 40 };
	struct urpc_regcache_opts o;
	struct urpc_regcache *rc;
	struct urpc_regcache_ent *ent, *hit;
	const struct urpc_tp_mr *mr;
	struct urpc_tp_cfg cfg;
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b;
	struct urpc_tp_mr local_mr;
	uint8_t ep[URPC_TP_EP_MAX];
	uint8_t *user, *local;
	uint64_t raddr;
	size_t n, i;

	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_LOOP);
	cfg.hp_flags = URPC_HP_FORCE_4K;
	cr_assert_eq(urpc__tp_create(&cfg, &a), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &b), 0);
	n = b->ops->get_endpoint(b, ep);
	cr_assert_eq(a->ops->resolve_peer(a, ep, n, &a2b), 0);

	/* B's user array, page-aligned so the rounded registration stays inside it. */
	user = aligned_alloc(4096, 4 * 4096);
	cr_assert_not_null(user);
	for (i = 0; i < 4 * 4096; i++)
		user[i] = (uint8_t)(i * 7 + 3);
	local = calloc(1, N);
	cr_assert_not_null(local);
	cr_assert_eq(a->ops->reg_mem(a, local, N, 0, &local_mr), 0);

	urpc__regcache_opts_init(&o);
	o.reg = urpc__tp_regcache_reg;
	o.dereg = urpc__tp_regcache_dereg;
	o.ctx = b;
	cr_assert_eq(urpc__regcache_create(&o, &rc), 0);
	cr_assert_eq(urpc__regcache_get(rc, user + OFF, N, URPC_TP_ACCESS_REMOTE_READ, &ent), 0);
	mr = ent->reg.handle;
	cr_assert_eq(mr->access, URPC_TP_ACCESS_REMOTE_READ, "remote read only");
	cr_assert_eq(mr->rkey, ent->reg.rkey);
	cr_assert_eq(mr->addr, ent->addr);
	cr_assert_eq(mr->len, ent->len);
	cr_assert(mr->len < (size_t)1 << 20, "never the address space");
	cr_assert_eq(
		urpc__regcache_get(rc, user + OFF + 100, 100, URPC_TP_ACCESS_REMOTE_READ, &hit), 0);
	cr_assert_eq(hit, ent);
	urpc__regcache_put(rc, hit);

	/* The peer READs the user's bytes. */
	raddr = (uint64_t)(uintptr_t)(user + OFF);
	cr_assert_eq(a->ops->post_read(a, a2b, local, &local_mr, raddr, ent->reg.rkey, N, 1), 0);
	cr_assert_eq(wait_comp(a, b, 1), 0);
	cr_assert(memcmp(local, user + OFF, N) == 0, "READ through the cache got other bytes");

	/* A WRITE is refused: the entry grants no remote write. */
	memset(local, 0xee, N);
	cr_assert_eq(a->ops->post_write(a, a2b, local, &local_mr, raddr, ent->reg.rkey, 64, 2), 0);
	cr_assert_eq(wait_comp(a, b, 2), -EACCES);
	for (i = 0; i < 4 * 4096; i++)
		cr_assert_eq(user[i], (uint8_t)(i * 7 + 3), "a refused WRITE changed byte %zu", i);

	/* Released, it stays registered; the user frees the array: invalidate. */
	urpc__regcache_put(rc, ent);
	cr_assert_eq(b->ops->destroy(b), -EBUSY, "the cached registration is still live");
	cr_assert_eq(urpc__regcache_invalidate(rc, user, 4 * 4096), 0);
	cr_assert_eq(stats(rc).deregistrations, 1);
	free(user);
	cr_assert_eq(urpc__regcache_destroy(rc), 0);

	a->ops->dereg_mem(a, &local_mr);
	free(local);
	a->ops->release_peer(a, a2b);
	cr_assert_eq(a->ops->destroy(a), 0);
	cr_assert_eq(b->ops->destroy(b), 0);
}
