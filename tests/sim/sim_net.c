/* SPDX-License-Identifier: MIT */
/*
 * The simulated world's physics: the virtual clock, the event queue (a
 * binary heap ordered by time, then by insertion), the links between nodes
 * and the event log. It installs the engine's seams: urpc__now_ns() reads
 * the virtual clock, urpc__entropy() draws from the seed, and every loop
 * datagram becomes an EV_DP event on its link. Calls the seams' install
 * functions and libc only; knows nodes only through the mapping callbacks
 * sim_world.c fills in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/transport/loop_hooks.h"
#include "../../src/transport/transport.h"
#include "../../src/util/seam.h"
#include "sim.h"
#include "sim_fabric.h"

static struct sim_net *the_net; /* the seams' callbacks find it here */

static uint64_t sim_clock(void *arg)
{
	return ((struct sim_net *)arg)->now;
}

static void sim_entropy(void *arg, void *buf, size_t len)
{
	struct sim_net *n = arg;
	uint8_t *p = buf;

	while (len) {
		uint64_t v = urpc__rand_next(&n->ent);
		size_t k = len < sizeof(v) ? len : sizeof(v);

		memcpy(p, &v, k);
		p += k;
		len -= k;
	}
}

const char *sim_ev_kind_str(enum sim_ev_kind k)
{
	switch (k) {
	case EV_STEP:
		return "step";
	case EV_DP:
		return "datagram";
	case EV_SM:
		return "sm";
	case EV_ISSUE:
		return "issue";
	case EV_DEFER:
		return "deferred";
	case EV_FAULT:
		return "fault";
	case EV_CONNECT:
		return "connect";
	case EV_PHASE:
		return "phase";
	case EV_NX_TICK:
		return "nexus-tick";
	case EV_HOP:
		return "hop";
	case EV_OS_CHUNK:
		return "os-chunk";
	case EV_EXP:
		return "exp";
	}
	return "?";
}

static bool ev_before(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

struct sim_ev *sim_ev_new(struct sim_net *n, enum sim_ev_kind kind, uint64_t at, int node,
			  uint32_t len)
{
	struct sim_ev *e = calloc(1, sizeof(*e) + len);

	if (!e) {
		fprintf(stderr, "urpc-sim: out of memory for an event\n");
		abort();
	}
	e->t = at < n->now ? n->now : at;
	e->kind = kind;
	e->node = node;
	e->len = len;
	return e;
}

void sim_ev_push(struct sim_net *n, struct sim_ev *e)
{
	size_t i;

	if (n->nheap == n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 1024;
		struct sim_ev **h = realloc(n->heap, cap * sizeof(*h));

		if (!h) {
			fprintf(stderr, "urpc-sim: out of memory for the event queue\n");
			abort();
		}
		n->heap = h;
		n->cap = cap;
	}
	e->seq = n->seq++;
	i = n->nheap++;
	while (i && ev_before(e, n->heap[(i - 1) / 2])) {
		n->heap[i] = n->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	n->heap[i] = e;
}

struct sim_ev *sim_ev_pop(struct sim_net *n)
{
	struct sim_ev *top, *last;
	size_t i = 0;

	if (!n->nheap)
		return NULL;
	top = n->heap[0];
	last = n->heap[--n->nheap];
	while (2 * i + 1 < n->nheap) {
		size_t c = 2 * i + 1;

		if (c + 1 < n->nheap && ev_before(n->heap[c + 1], n->heap[c]))
			c++;
		if (!ev_before(n->heap[c], last))
			break;
		n->heap[i] = n->heap[c];
		i = c;
	}
	if (n->nheap)
		n->heap[i] = last;
	if (top->t > n->now)
		n->now = top->t;
	return top;
}

/* FNV-1a over the fields that make an event what it is. */
static uint64_t fnv(uint64_t h, uint64_t v)
{
	unsigned i;

	for (i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 0x100000001b3ull;
	}
	return h;
}

void sim_ev_note(struct sim_net *n, const struct sim_ev *e)
{
	struct sim_ev_rec *r = &n->last[n->nlast++ % (sizeof(n->last) / sizeof(n->last[0]))];

	r->t = e->t;
	r->kind = e->kind;
	r->node = e->node;
	r->a = e->a;
	r->b = e->b;
	r->len = e->len;
	n->events++;
	/* Endpoint ids (EV_DP) count up across the runs of a process: not hashed. */
	n->hash = fnv(fnv(fnv(n->hash, e->t), ((uint64_t)e->kind << 32) | (uint32_t)e->node),
		      e->kind == EV_DP ? (uint64_t)e->len << 48
				       : ((uint64_t)e->a << 32 | e->b) ^ ((uint64_t)e->len << 48));
	if (n->trace)
		fprintf(stderr, "[%10.6f ms] %-8s node %d a=%u b=%u len=%u\n", e->t / 1e6,
			sim_ev_kind_str(e->kind), e->node, e->a, e->b, e->len);
}

void sim_net_dump_last(const struct sim_net *n, FILE *f)
{
	const unsigned cap = sizeof(n->last) / sizeof(n->last[0]);
	unsigned i = n->nlast > cap ? n->nlast - cap : 0;

	fprintf(f, "the last %u events:\n", n->nlast - i);
	for (; i < n->nlast; i++) {
		const struct sim_ev_rec *r = &n->last[i % cap];

		fprintf(f, "  [%10.6f ms] %-8s node %d a=%u b=%u len=%u\n", r->t / 1e6,
			sim_ev_kind_str(r->kind), r->node, r->a, r->b, r->len);
	}
}

uint64_t sim_link_transit(struct sim_net *n, int from, int to, bool *dup)
{
	const struct sim_link *l = &n->link[from][to];

	*dup = false;
	if (l->cut || (l->drop > 0 && urpc__rand_unit(&n->rng) < l->drop))
		return UINT64_MAX;
	if (l->dup > 0 && urpc__rand_unit(&n->rng) < l->dup)
		*dup = true;
	return l->delay_ns + (l->jitter_ns ? urpc__rand_below(&n->rng, l->jitter_ns + 1) : 0);
}

/* A loop datagram leaves endpoint @from_id: it becomes an EV_DP event, or is lost. */
static void net_send(void *arg, uint32_t from_id, uint32_t to_id, const void *hdr, uint32_t hdr_len,
		     const void *data, uint32_t data_len)
{
	struct sim_net *n = arg;
	int from = n->node_of_ep(n->arg, from_id), to = n->node_of_ep(n->arg, to_id);
	uint64_t transit;
	bool dup;
	int k;

	if (from < 0 || to < 0 || !n->node_up(n->arg, from))
		return; /* a dead process sends nothing */
	transit = sim_link_transit(n, from, to, &dup);
	if (transit == UINT64_MAX)
		return;
	if (n->fab) {
		/* the link's faults stay; its delay is the fabric's, its jitter on top */
		transit -= n->link[from][to].delay_ns;
	}
	for (k = 0; k < 1 + dup; k++) {
		struct sim_ev *e = sim_ev_new(n, EV_DP, n->now + transit + (uint64_t)k * 1000, to,
					      hdr_len + data_len);

		e->a = to_id;
		e->b = from_id;
		memcpy(e->data, hdr, hdr_len);
		if (data_len)
			memcpy(e->data + hdr_len, data, data_len);
		if (n->fab)
			sim_fab_send(n->fab, n, e, (unsigned)from, (unsigned)to,
				     hdr_len + data_len + SIM_WIRE_OVERHEAD, transit + k * 1000ull,
				     false);
		else
			sim_ev_push(n, e);
	}
}

/*
 * The entry of @key, or with @add a new one: a free entry, else one whose
 * operation was served, else one whose bytes all arrived (its operation
 * failed before it was served). Entries are never emptied again, so a
 * lookup probes until a never-used one.
 */
static struct sim_os *os_find(struct sim_fabric *f, uint64_t key, bool add)
{
	const unsigned cap = sizeof(f->os) / sizeof(f->os[0]);
	unsigned i, h = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 54) % cap;
	struct sim_os *served = NULL, *arrived = NULL, *o = NULL;

	for (i = 0; i < cap; i++) {
		o = &f->os[(h + i) % cap];
		if (!o->used)
			break;
		if (o->key == key && !o->served)
			return o;
		if (!served && o->served)
			served = o;
		if (!arrived && !o->left)
			arrived = o;
		o = NULL;
	}
	if (!add)
		return NULL;
	o = o ? o : served ? served : arrived;
	if (o) {
		o->used = true;
		o->served = false;
		o->key = key;
		o->left = 0;
	}
	return o;
}

/*
 * Fabric: a one-sided operation is served once its bytes crossed, as chunks
 * on the lossless class, from the side that holds the data to the other.
 */
static bool net_os_admit(void *arg, uint32_t from_id, uint32_t to_id, bool read, size_t len,
			 uint64_t key)
{
	struct sim_net *n = arg;
	struct sim_fabric *f = n->fab;
	int from = n->node_of_ep(n->arg, from_id), to = n->node_of_ep(n->arg, to_id);
	struct sim_os *o;
	size_t off;

	if (!f || from < 0 || to < 0)
		return true;
	o = os_find(f, key, false);
	if (o) {
		if (o->left)
			return false;
		o->served = true;
		return true;
	}
	o = os_find(f, key, true);
	if (!o)
		return true; /* table full: not modelled */
	for (off = 0; off < len || off == 0; off += f->cfg.os_chunk) {
		uint32_t c = len - off < f->cfg.os_chunk ? (uint32_t)(len - off) : f->cfg.os_chunk;
		struct sim_ev *e = sim_ev_new(n, EV_OS_CHUNK, n->now, to, 0);

		e->c = key;
		o->left++;
		sim_fab_send(f, n, e, (unsigned)(read ? to : from), (unsigned)(read ? from : to),
			     c + SIM_WIRE_OVERHEAD, 0, true);
		if (!len)
			break;
	}
	return false;
}

void sim_net_os_chunk(struct sim_net *n, const struct sim_ev *e)
{
	struct sim_os *o = n->fab ? os_find(n->fab, e->c, false) : NULL;

	if (o && o->left && !--o->left && n->wake)
		n->wake(n->arg, e->node, n->now);
}

/* One-sided requests cross a link only while neither side is cut off or down. */
static bool net_reachable(void *arg, uint32_t from_id, uint32_t to_id)
{
	struct sim_net *n = arg;
	int from = n->node_of_ep(n->arg, from_id), to = n->node_of_ep(n->arg, to_id);

	if (from < 0 || to < 0)
		return false;
	return !n->link[from][to].cut && !n->link[to][from].cut && n->node_up(n->arg, from) &&
	       n->node_up(n->arg, to);
}

void sim_net_init(struct sim_net *n, uint64_t seed, unsigned trace)
{
	memset(n, 0, sizeof(*n));
	urpc__rand_seed(&n->rng, seed);
	urpc__rand_seed(&n->ent, seed ^ 0x5eed5eed5eedull);
	n->now = 1000000000ull; /* virtual time starts at 1 s: 0 means "none" in places */
	n->hash = 0xcbf29ce484222325ull;
	n->trace = trace;
}

int sim_net_install(struct sim_net *n)
{
	struct urpc_seams s = {
		.clock = sim_clock,
		.clock_arg = n,
		.entropy = sim_entropy,
		.entropy_arg = n,
	};
	struct urpc_loop_net ln = {
		.send = net_send,
		.reachable = net_reachable,
		.os_admit = n->fab ? net_os_admit : NULL,
		.arg = n,
	};
	int ret;

	the_net = n;
	urpc__seams_set(&s);
	ret = urpc__loop_set_net(&ln);
	if (ret) {
		urpc__seams_set(NULL);
		the_net = NULL;
	}
	return ret;
}

void sim_net_fini(struct sim_net *n)
{
	struct sim_ev *e;

	while ((e = sim_ev_pop(n)))
		free(e);
	free(n->heap);
	n->heap = NULL;
	n->cap = 0;
	urpc__loop_set_net(NULL);
	urpc__seams_set(NULL);
	the_net = NULL;
}
