/* SPDX-License-Identifier: MIT */
/*
 * The memory-registration cache. See regcache.h for the contract.
 *
 * Lookup structure: one array of entry pointers sorted by start address,
 * plus max_len, an upper bound on every entry's length. An entry covering
 * [start, end) starts at or below @start, so the lookup binary-searches the
 * last entry starting at or below @start and walks down from there; it
 * stops at the first entry whose start lies more than max_len below @end,
 * because neither it nor any lower entry can reach @end.
 *
 * Why that is enough: the array holds at most max_entries (1024 by default)
 * pointers, so the search is about ten comparisons on one cache-friendly
 * array, and a hit allocates nothing. Entries rarely overlap (only when
 * access had to grow, or for overlapping buffers), so the walk is usually
 * one or two steps; its worst case is bounded by the array. The call is
 * made once per large message, whose transfer costs far more. Inserting or
 * removing moves at most max_entries pointers, and happens only next to a
 * registration or deregistration, which costs a system call anyway. An
 * interval tree would only pay off with many overlapping entries.
 *
 * Unused entries (no references, still findable) sit on a doubly linked
 * LRU list whose sentinel is rc->lru: lru.lru_next is the most recently
 * released, lru.lru_prev the next to evict.
 */
#include "regcache.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/compiler.h"

struct urpc_regcache {
	struct urpc_regcache_opts o;
	struct urpc_regcache_ent **ents; /* sorted by addr; room for o.max_entries */
	uint32_t n;
	size_t max_len;		      /* >= the len of every entry in ents[] */
	struct urpc_regcache_ent lru; /* sentinel of the unused entries */
	struct urpc_regcache_stats st;
};

static size_t page_size(void)
{
	long pg = sysconf(_SC_PAGESIZE);

	return pg > 0 ? (size_t)pg : 4096;
}

void urpc__regcache_opts_init(struct urpc_regcache_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_unused_bytes = (size_t)1 << 30;
	o->max_entries = 1024;
	o->align = page_size();
}

int urpc__regcache_create(const struct urpc_regcache_opts *o, struct urpc_regcache **out)
{
	struct urpc_regcache *rc;

	if (!o || !out || !o->reg || !o->dereg || !o->max_entries ||
	    (o->align && !URPC_IS_POW2(o->align)))
		return -EINVAL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->o = *o;
	if (!rc->o.align)
		rc->o.align = page_size();
	rc->ents = calloc(o->max_entries, sizeof(*rc->ents));
	if (!rc->ents)
		goto out_free_rc;
	rc->lru.lru_next = &rc->lru;
	rc->lru.lru_prev = &rc->lru;
	*out = rc;
	return 0;

out_free_rc:
	free(rc);
	return -ENOMEM;
}

/* Index of the first entry that starts above @a (n when none does). */
static uint32_t upper_bound(const struct urpc_regcache *rc, uintptr_t a)
{
	uint32_t lo = 0, hi = rc->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)rc->ents[mid]->addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* An entry covering [start, end) with every bit of @access, or NULL. */
static struct urpc_regcache_ent *lookup(const struct urpc_regcache *rc, uintptr_t start,
					uintptr_t end, unsigned access)
{
	uint32_t i = upper_bound(rc, start);

	while (i-- > 0) {
		struct urpc_regcache_ent *e = rc->ents[i];
		uintptr_t es = (uintptr_t)e->addr;

		if (end - es > rc->max_len)
			break; /* neither this entry nor a lower one reaches @end */
		if (end - es <= e->len && (e->access & access) == access)
			return e;
	}
	return NULL;
}

/* Insert @e into ents[]. Precondition: rc->n < max_entries. */
static void insert(struct urpc_regcache *rc, struct urpc_regcache_ent *e)
{
	uint32_t i = upper_bound(rc, (uintptr_t)e->addr);

	memmove(&rc->ents[i + 1], &rc->ents[i], (rc->n - i) * sizeof(*rc->ents));
	rc->ents[i] = e;
	rc->n++;
	rc->max_len = URPC_MAX(rc->max_len, e->len);
}

/* Remove ents[@i], keeping max_len a bound (exact when it shrinks). */
static void remove_at(struct urpc_regcache *rc, uint32_t i)
{
	size_t len = rc->ents[i]->len;
	uint32_t j;

	rc->n--;
	memmove(&rc->ents[i], &rc->ents[i + 1], (rc->n - i) * sizeof(*rc->ents));
	if (len < rc->max_len)
		return;
	rc->max_len = 0;
	for (j = 0; j < rc->n; j++)
		rc->max_len = URPC_MAX(rc->max_len, rc->ents[j]->len);
}

/* Remove @e, which is in ents[], from it. */
static void remove_ent(struct urpc_regcache *rc, struct urpc_regcache_ent *e)
{
	uint32_t i = upper_bound(rc, (uintptr_t)e->addr);

	/* Entries that start at the same address sit just below @i. */
	while (i-- > 0 && rc->ents[i] != e)
		assert((uintptr_t)rc->ents[i]->addr == (uintptr_t)e->addr);
	assert(i < rc->n); /* found */
	remove_at(rc, i);
}

static void lru_del(struct urpc_regcache_ent *e)
{
	e->lru_prev->lru_next = e->lru_next;
	e->lru_next->lru_prev = e->lru_prev;
	e->lru_prev = NULL;
	e->lru_next = NULL;
}

/* Make @e the most recently used unused entry. Pairs with lru_del(). */
static void lru_push(struct urpc_regcache *rc, struct urpc_regcache_ent *e)
{
	e->lru_prev = &rc->lru;
	e->lru_next = rc->lru.lru_next;
	rc->lru.lru_next->lru_prev = e;
	rc->lru.lru_next = e;
}

/* The least recently used unused entry, or NULL. */
static struct urpc_regcache_ent *lru_tail(struct urpc_regcache *rc)
{
	return rc->lru.lru_prev == &rc->lru ? NULL : rc->lru.lru_prev;
}

/* Deregister and free @e, which no lookup finds any more and nobody holds. */
static void release(struct urpc_regcache *rc, struct urpc_regcache_ent *e)
{
	rc->o.dereg(rc->o.ctx, &e->reg);
	rc->st.deregistrations++;
	rc->st.bytes_registered -= e->len;
	free(e);
}

/* Take the unused entry @e off the LRU list and out of ents[], and release it. */
static void drop_unused(struct urpc_regcache *rc, struct urpc_regcache_ent *e)
{
	lru_del(e);
	rc->st.bytes_unused -= e->len;
	remove_ent(rc, e);
	release(rc, e);
}

/* Release every unused entry; returns how many there were. */
static uint64_t drop_all_unused(struct urpc_regcache *rc)
{
	struct urpc_regcache_ent *e;
	uint64_t n = 0;

	while ((e = lru_tail(rc))) {
		drop_unused(rc, e);
		n++;
	}
	return n;
}

void urpc__regcache_flush(struct urpc_regcache *rc)
{
	drop_all_unused(rc);
}

int urpc__regcache_destroy(struct urpc_regcache *rc)
{
	if (!rc)
		return 0;
	if (rc->st.held)
		return -EBUSY;
	drop_all_unused(rc); /* nothing is held: every entry is on the LRU list */
	assert(rc->n == 0 && rc->st.bytes_registered == 0);
	free(rc->ents);
	free(rc);
	return 0;
}

void urpc__regcache_destroy_all(struct urpc_regcache *rc)
{
	uint32_t i;

	if (!rc)
		return;
	for (i = 0; i < rc->n; i++) {
		struct urpc_regcache_ent *e = rc->ents[i];

		if (!e->refs)
			lru_del(e);
		release(rc, e);
	}
	/* Held entries invalidated earlier are in no table: their holders keep them. */
	free(rc->ents);
	free(rc);
}

/* The miss path: register [start, end) rounded out to o.align. */
static int get_miss(struct urpc_regcache *rc, uintptr_t start, uintptr_t end, unsigned access,
		    struct urpc_regcache_ent **out)
{
	uintptr_t mask = (uintptr_t)rc->o.align - 1;
	uintptr_t astart = start & ~mask;
	uintptr_t aend = (end + mask) & ~mask; /* cannot wrap: the caller checked */
	struct urpc_regcache_ent *e, *victim;
	int ret;

	if (rc->n == rc->o.max_entries) {
		victim = lru_tail(rc);
		if (!victim)
			return -EAGAIN;
		drop_unused(rc, victim);
		rc->st.evictions++;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	ret = rc->o.reg(rc->o.ctx, (void *)astart, aend - astart, access, &e->reg);
	if (ret == -ENOMEM && lru_tail(rc)) {
		/* Perhaps a pinning limit: give back what nobody uses and retry once. */
		rc->st.reg_failures++;
		rc->st.evictions += drop_all_unused(rc);
		memset(&e->reg, 0, sizeof(e->reg));
		ret = rc->o.reg(rc->o.ctx, (void *)astart, aend - astart, access, &e->reg);
	}
	if (ret) {
		rc->st.reg_failures++;
		free(e);
		return ret;
	}
	e->addr = (void *)astart;
	e->len = aend - astart;
	e->access = access;
	e->refs = 1;
	insert(rc, e);
	rc->st.registrations++;
	rc->st.bytes_registered += e->len;
	rc->st.held++;
	*out = e;
	return 0;
}

int urpc__regcache_get(struct urpc_regcache *rc, void *addr, size_t len, unsigned access,
		       struct urpc_regcache_ent **out)
{
	uintptr_t start = (uintptr_t)addr;
	struct urpc_regcache_ent *e;

	if (!rc || !addr || !out || !len || (access & ~URPC_REGCACHE_ACCESS_ALL))
		return -EINVAL;
	/* addr + len, and addr + len rounded up to o.align, must not wrap. */
	if (len > UINTPTR_MAX - start || start + len > UINTPTR_MAX - (rc->o.align - 1))
		return -EINVAL;
	e = lookup(rc, start, start + len, access);
	if (!e) {
		rc->st.misses++;
		return get_miss(rc, start, start + len, access, out);
	}
	rc->st.hits++;
	if (e->refs++ == 0) {
		lru_del(e);
		rc->st.bytes_unused -= e->len;
		rc->st.held++;
	}
	*out = e;
	return 0;
}

void urpc__regcache_put(struct urpc_regcache *rc, struct urpc_regcache_ent *ent)
{
	struct urpc_regcache_ent *victim;

	assert(ent->refs > 0);
	if (--ent->refs)
		return;
	rc->st.held--;
	if (ent->invalid) {
		release(rc, ent); /* already out of ents[] */
		return;
	}
	lru_push(rc, ent);
	rc->st.bytes_unused += ent->len;
	while (rc->st.bytes_unused > rc->o.max_unused_bytes) {
		victim = lru_tail(rc);
		drop_unused(rc, victim);
		rc->st.evictions++;
	}
}

int urpc__regcache_invalidate(struct urpc_regcache *rc, void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end, es;
	struct urpc_regcache_ent *e;
	uint32_t i;

	if (!rc || !len || len > UINTPTR_MAX - start)
		return -EINVAL;
	end = start + len;
	/* Overlapping entries start below @end and no more than max_len below @start. */
	i = upper_bound(rc, end - 1);
	while (i-- > 0) {
		e = rc->ents[i];
		es = (uintptr_t)e->addr;
		if (es < start && start - es >= rc->max_len)
			break; /* neither this entry nor a lower one reaches past @start */
		if (es < start && start - es >= e->len)
			continue; /* ends at or before @start */
		if (e->refs) {
			remove_at(rc, i);
			e->invalid = true;
		} else {
			lru_del(e);
			rc->st.bytes_unused -= e->len;
			remove_at(rc, i);
			release(rc, e);
		}
	}
	return 0;
}

void urpc__regcache_get_stats(const struct urpc_regcache *rc, struct urpc_regcache_stats *s)
{
	*s = rc->st;
	s->entries = rc->n;
}
