/* SPDX-License-Identifier: MIT */
/*
 * The software memory-registration table shared by loop and udp (see
 * sw_mr.h, which also lists the errno of each failure). Calls nothing in
 * src/transport.
 */
#include "sw_mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/compiler.h"

#define SW_MR_ACCESS_ALL (URPC_TP_ACCESS_ALL | URPC_TP_ACCESS_DEVICE)
#define SW_REMOTE (URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)
#define SW_GRANT_MIN 64u	/* entries at the first grant */
#define SW_GRANT_MAX (1u << 24) /* entries at most */
#define SW_NIL UINT32_MAX

/* GRANT_* bits of a registration are the REMOTE_* bits grants on it may give. */
static_assert(URPC_TP_ACCESS_GRANT_READ == URPC_TP_ACCESS_REMOTE_READ << 2 &&
		      URPC_TP_ACCESS_GRANT_WRITE == URPC_TP_ACCESS_REMOTE_WRITE << 2,
	      "grant bits are the remote bits shifted by two");

void urpc__sw_mr_init(struct urpc_sw_mr_table *t, uint64_t key_seed)
{
	memset(t, 0, sizeof(*t));
	urpc__csprng_init(&t->key_gen, key_seed);
	t->gfree = SW_NIL;
}

void urpc__sw_mr_fini(struct urpc_sw_mr_table *t)
{
	free(t->regs);
	free(t->grants);
	free(t->hslots);
	t->regs = NULL;
	t->grants = NULL;
	t->hslots = NULL;
	t->hmask = 0;
	t->cap = t->n = t->gcap = t->ngrants = 0;
	t->gfree = SW_NIL;
}

static void grant_free(struct urpc_sw_mr_table *t, uint32_t i);

/* The live entry with @key, or NULL. */
static const struct urpc_sw_mr *find_key(const struct urpc_sw_mr_table *t, uint32_t key)
{
	uint32_t i;

	for (i = 0; i < t->cap; i++)
		if (t->regs[i].used && t->regs[i].key == key)
			return &t->regs[i];
	return NULL;
}

int urpc__sw_mr_reg(struct urpc_sw_mr_table *t, void *addr, size_t len, unsigned access,
		    struct urpc_tp_mr *mr)
{
	struct urpc_sw_mr *r;
	uint32_t i, key;

	if (!addr || !len || !mr || (access & ~SW_MR_ACCESS_ALL))
		return -EINVAL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -EFAULT;
	for (i = 0; i < t->cap; i++)
		if (!t->regs[i].used)
			break;
	if (i == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 16;
		struct urpc_sw_mr *n = realloc(t->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + t->cap, 0, (cap - t->cap) * sizeof(*n));
		t->regs = n;
		t->cap = cap;
	}
	do
		key = (uint32_t)urpc__csprng_next(&t->key_gen);
	while (!key || find_key(t, key));
	r = &t->regs[i];
	r->addr = (uintptr_t)addr;
	r->len = len;
	r->key = key;
	r->access = access;
	r->used = true;
	t->n++;
	mr->addr = addr;
	mr->len = len;
	mr->lkey = key;
	mr->rkey = key;
	mr->access = access;
	mr->handle = (void *)(uintptr_t)(i + 1);
	return 0;
}

/* The live entry behind @mr, or NULL. */
static const struct urpc_sw_mr *entry_of(const struct urpc_sw_mr_table *t,
					 const struct urpc_tp_mr *mr)
{
	uintptr_t i = mr ? (uintptr_t)mr->handle : 0;

	if (!i || i > t->cap || !t->regs[i - 1].used || t->regs[i - 1].key != mr->lkey)
		return NULL;
	return &t->regs[i - 1];
}

bool urpc__sw_mr_dereg(struct urpc_sw_mr_table *t, struct urpc_tp_mr *mr)
{
	const struct urpc_sw_mr *r = entry_of(t, mr);
	uint32_t i;

	if (!r)
		return false;
	for (i = 0; t->ngrants && i < t->gcap; i++)
		if (t->grants[i].state == URPC_SW_GRANT_LIVE && t->grants[i].mr_key == r->key)
			grant_free(t, i);
	memset(&t->regs[r - t->regs], 0, sizeof(*r));
	t->n--;
	mr->handle = NULL;
	return true;
}

int urpc__sw_mr_check_local(const struct urpc_sw_mr_table *t, const struct urpc_tp_mr *mr,
			    const void *local, size_t len)
{
	const struct urpc_sw_mr *r = entry_of(t, mr);
	uintptr_t l = (uintptr_t)local;

	if (unlikely(!r || !len || l < r->addr || len > r->len || l - r->addr > r->len - len ||
		     (r->access & URPC_TP_ACCESS_DEVICE)))
		return -EINVAL;
	return 0;
}

int urpc__sw_mr_check_remote(const struct urpc_sw_mr_table *t, uint32_t rkey, unsigned need,
			     uint64_t raddr, uint64_t len)
{
	const struct urpc_sw_mr *r = find_key(t, rkey);

	if (unlikely(!r || !(r->access & need) || raddr < r->addr || len > r->len ||
		     raddr - r->addr > r->len - len))
		return -EACCES;
	return 0;
}

/* ---- grants: entries, and their keys' hash -------------------------------- */

/* Slot of @key's probe sequence start: keys are uniform, their low bits do. */
static inline uint32_t hash_home(const struct urpc_sw_mr_table *t, uint64_t key)
{
	return (uint32_t)key & t->hmask;
}

/* The hash slot holding @key, or SW_NIL. */
static inline uint32_t hash_find(const struct urpc_sw_mr_table *t, uint64_t key)
{
	uint32_t h, g;

	if (unlikely(!t->hslots))
		return SW_NIL;
	for (h = hash_home(t, key);; h = (h + 1) & t->hmask) {
		g = t->hslots[h];
		if (g == SW_NIL)
			return SW_NIL;
		if (t->grants[g].key == key)
			return h;
	}
}

/* Put grant @i (its key set) in the hash; there is always a free slot. */
static void hash_add(struct urpc_sw_mr_table *t, uint32_t i)
{
	uint32_t h = hash_home(t, t->grants[i].key);

	while (t->hslots[h] != SW_NIL)
		h = (h + 1) & t->hmask;
	t->hslots[h] = i;
}

/*
 * Empty hash slot @h and move later entries of its run back into the hole
 * (linear probing without tombstones: lookups stay as short as the runs).
 */
static void hash_del(struct urpc_sw_mr_table *t, uint32_t h)
{
	uint32_t j = h, home;

	for (;;) {
		t->hslots[h] = SW_NIL;
		for (;;) {
			j = (j + 1) & t->hmask;
			if (t->hslots[j] == SW_NIL)
				return;
			home = hash_home(t, t->grants[t->hslots[j]].key);
			/* Movable when its home is not cyclically within (h, j]. */
			if (((j - home) & t->hmask) >= ((j - h) & t->hmask))
				break;
		}
		t->hslots[h] = t->hslots[j];
		h = j;
	}
}

/*
 * A fresh key: 64 bits of the table's ChaCha20 generator, drawn again
 * while its upper half is 0 (a registration's 32-bit key) or it equals a
 * live grant's key.
 */
static uint64_t grant_key(struct urpc_sw_mr_table *t)
{
	uint64_t key;

	do
		key = urpc__csprng_next(&t->key_gen);
	while (unlikely(!(key >> 32) || hash_find(t, key) != SW_NIL));
	return key;
}

/* Double the grant table and its hash (or make the first ones). Cold: rare. */
static URPC_COLD int grant_grow(struct urpc_sw_mr_table *t)
{
	uint32_t cap = t->gcap ? 2 * t->gcap : SW_GRANT_MIN, i;
	struct urpc_sw_grant *n;
	uint32_t *hs;

	if (cap > SW_GRANT_MAX)
		return -ENOMEM;
	hs = malloc((size_t)2 * cap * sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	n = realloc(t->grants, (size_t)cap * sizeof(*n));
	if (!n) {
		free(hs);
		return -ENOMEM;
	}
	memset(n + t->gcap, 0, (size_t)(cap - t->gcap) * sizeof(*n));
	for (i = cap; i-- > t->gcap;) {
		n[i].next_free = t->gfree;
		t->gfree = i;
	}
	t->grants = n;
	memset(hs, 0xff, (size_t)2 * cap * sizeof(*hs)); /* every slot SW_NIL */
	free(t->hslots);
	t->hslots = hs;
	t->hmask = 2 * cap - 1;
	for (i = 0; i < t->gcap; i++)
		if (n[i].state == URPC_SW_GRANT_LIVE)
			hash_add(t, i);
	t->gcap = cap;
	return 0;
}

/* Revoke live grant @i: its key leaves the hash, never to name it again. */
static void grant_free(struct urpc_sw_mr_table *t, uint32_t i)
{
	uint32_t h = hash_find(t, t->grants[i].key);

	if (h != SW_NIL)
		hash_del(t, h);
	t->grants[i].state = URPC_SW_GRANT_REVOKED;
	t->grants[i].key = 0;
	t->grants[i].next_free = t->gfree;
	t->gfree = i;
	t->ngrants--;
	if (t->live_stat)
		*t->live_stat = t->ngrants;
}

int urpc__sw_grant(struct urpc_sw_mr_table *t, const void *peer, uint64_t peer_id, uint64_t token,
		   const struct urpc_tp_mr *mr, const void *addr, size_t len, unsigned access,
		   struct urpc_tp_grant *g)
{
	const struct urpc_sw_mr *r = entry_of(t, mr);
	struct urpc_sw_grant *e;
	uintptr_t a = (uintptr_t)addr;
	uint32_t i;
	int ret;

	if (unlikely(!r || !peer || !len || !access || (access & ~SW_REMOTE) ||
		     ((access << 2) & ~r->access) || a < r->addr || len > r->len ||
		     a - r->addr > r->len - len))
		return -EINVAL;
	if (unlikely(t->gfree == SW_NIL)) {
		ret = grant_grow(t);
		if (ret)
			return ret;
	}
	i = t->gfree;
	e = &t->grants[i];
	t->gfree = e->next_free;
	t->ngrants++;
	if (t->live_stat)
		*t->live_stat = t->ngrants;
	e->addr = a;
	e->len = len;
	e->token = token;
	e->peer_id = peer_id;
	e->peer = peer;
	e->key = grant_key(t);
	e->mr_key = r->key;
	e->access = (uint8_t)access;
	e->device = r->access & URPC_TP_ACCESS_DEVICE;
	e->asked_at = 0;
	e->state = URPC_SW_GRANT_LIVE;
	hash_add(t, i);
	g->addr = a;
	g->len = len;
	g->key = e->key;
	g->access = access;
	g->handle = i;
	return 0;
}

void urpc__sw_revoke(struct urpc_sw_mr_table *t, struct urpc_tp_grant *g)
{
	uint32_t i = g->handle;

	/* The handle names the entry; the key says it is still this grant. */
	if (g->key && i < t->gcap && t->grants[i].state == URPC_SW_GRANT_LIVE &&
	    t->grants[i].key == g->key)
		grant_free(t, i);
	g->key = 0;
}

bool urpc__sw_revoke_ready(struct urpc_sw_mr_table *t, const struct urpc_tp_grant *g, uint64_t now,
			   uint64_t lag)
{
	struct urpc_sw_grant *e;

	if (!lag || !g->key || g->handle >= t->gcap)
		return true;
	e = &t->grants[g->handle];
	if (e->state != URPC_SW_GRANT_LIVE || e->key != g->key)
		return true; /* revoked, or ended under it (its peer or registration went) */
	if (!e->asked_at)
		e->asked_at = now + 1; /* 0 means not asked */
	return now + 1 >= e->asked_at + lag;
}

void urpc__sw_revoke_peer(struct urpc_sw_mr_table *t, const void *peer)
{
	uint32_t i;

	for (i = 0; t->ngrants && i < t->gcap; i++)
		if (t->grants[i].state == URPC_SW_GRANT_LIVE && t->grants[i].peer == peer)
			grant_free(t, i);
}

enum urpc_sw_verdict urpc__sw_grant_check(const struct urpc_sw_mr_table *t, uint64_t key,
					  uint64_t token, uint64_t peer_id, unsigned need,
					  uint64_t raddr, uint64_t len)
{
	const struct urpc_sw_grant *e;
	uint32_t h;

	if (unlikely(!(key >> 32))) {
		/* An open registration's key (transport tests), else nothing. */
		const struct urpc_sw_mr *r = find_key(t, (uint32_t)key);

		if (!r || !(r->access & SW_REMOTE))
			return URPC_SW_UNKNOWN;
		if (urpc__sw_mr_check_remote(t, (uint32_t)key, need, raddr, len))
			return URPC_SW_REFUSE;
		return r->access & URPC_TP_ACCESS_DEVICE ? URPC_SW_SERVE_DEVICE : URPC_SW_SERVE;
	}
	h = hash_find(t, key);
	if (unlikely(h == SW_NIL))
		return URPC_SW_UNKNOWN;
	e = &t->grants[t->hslots[h]];
	/* The peer first: another's grant is, to this requester, no grant at all. */
	if (unlikely(e->peer_id != peer_id || e->token != token))
		return URPC_SW_UNKNOWN;
	if (unlikely(!(e->access & need) || raddr < e->addr || len > e->len ||
		     raddr - e->addr > e->len - len))
		return URPC_SW_REFUSE;
	return unlikely(e->device) ? URPC_SW_SERVE_DEVICE : URPC_SW_SERVE;
}
