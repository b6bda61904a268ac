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

#define SW_MR_ACCESS_ALL (URPC_TP_ACCESS_REMOTE_READ | URPC_TP_ACCESS_REMOTE_WRITE)

void urpc__sw_mr_init(struct urpc_sw_mr_table *t, uint64_t key_seed)
{
	memset(t, 0, sizeof(*t));
	urpc__csprng_init(&t->key_gen, key_seed);
}

void urpc__sw_mr_fini(struct urpc_sw_mr_table *t)
{
	free(t->regs);
	t->regs = NULL;
	t->cap = t->n = 0;
}

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

	if (!r)
		return false;
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

	if (unlikely(!r || !len || l < r->addr || len > r->len || l - r->addr > r->len - len))
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
