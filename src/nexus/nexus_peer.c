/* SPDX-License-Identifier: MIT */
/*
 * The table of remote Nexuses (nexus_peer.h). Owns the entries and their
 * generations. Calls nothing of the engine: nexus.c sends the pings it asks
 * for and tells the Rpcs when a generation moved. Cold: sessions come and
 * go, heartbeats are a few per interval per peer process.
 */
#define URPC_LOG_MODULE "nexus"
#include "nexus_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/compiler.h"
#include "../util/log.h"

/* How long, in peer time-outs, a failed peer's entry outlives its sessions. */
#define TOMB_TIMEOUTS 16
/* ... and any other entry (its secret signs the last packets of a session). */
#define IDLE_TIMEOUTS 2
/* A tick later than asked by more than this is a stall of ours (urpc__nxp_tick). */
#define NXP_STALL_NS 50000000ull

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

struct urpc_nx_peer *urpc__nxp_find(struct urpc_nx_peers *t, const struct sockaddr_in *addr)
{
	struct urpc_nx_peer *p;

	for (p = t->head; p; p = p->next)
		if (same_addr(&p->addr, addr))
			return p;
	return NULL;
}

/* A new entry for @addr, without a reference (counted idle). NULL: out of memory. */
static struct urpc_nx_peer *make(struct urpc_nx_peers *t, const struct sockaddr_in *addr)
{
	struct urpc_nx_peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (!t->rng_ready) {
		urpc__csprng_init(&t->rng, 0);
		t->rng_ready = true;
	}
	do
		p->nonce_local = urpc__csprng_next(&t->rng);
	while (!p->nonce_local);
	p->addr = *addr;
	p->ping_ns = UINT64_MAX;
	p->timeout_ns = UINT64_MAX;
	p->next = t->head;
	t->head = p;
	t->count++;
	t->idle++;
	return p;
}

struct urpc_nx_peer *urpc__nxp_get(struct urpc_nx_peers *t, const struct sockaddr_in *addr,
				   uint64_t ping_ns, uint64_t timeout_ns, uint64_t token,
				   uint64_t now)
{
	struct urpc_nx_peer *p = urpc__nxp_find(t, addr);

	if (!p) {
		p = make(t, addr);
		if (!p)
			return NULL;
	}
	if (!p->refs) {
		/* Its first session, or the first after a while without: a fresh start. */
		t->idle--;
		p->ping_ns = ping_ns;
		p->timeout_ns = timeout_ns;
		p->last_heard_ns = now;
		p->next_ping_ns = now; /* the first heartbeat leaves at once */
	}
	p->ping_ns = URPC_MIN(p->ping_ns, ping_ns);
	p->timeout_ns = URPC_MIN(p->timeout_ns, timeout_ns);
	if (!p->last_heard_ns)
		p->last_heard_ns = now; /* a new session after a failure: a fresh start */
	p->refs++;
	p->digest ^= token;
	p->probe_backoff = 0; /* sessions moved: a disagreement now is news */
	return p;
}

struct urpc_nx_peer *urpc__nxp_hello(struct urpc_nx_peers *t, const struct sockaddr_in *addr,
				     uint64_t ttl_ns, uint64_t now)
{
	struct urpc_nx_peer *p = urpc__nxp_find(t, addr);

	if (p)
		return p;
	if (t->idle >= URPC_NXP_IDLE_MAX)
		return NULL;
	p = make(t, addr);
	if (p)
		p->tomb_until_ns = now + ttl_ns;
	return p;
}

/* Unlink and free @p. */
static void drop(struct urpc_nx_peers *t, struct urpc_nx_peer *p)
{
	struct urpc_nx_peer **pp;

	for (pp = &t->head; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			t->count--;
			if (!p->refs)
				t->idle--;
			free(p);
			return;
		}
	}
}

void urpc__nxp_put(struct urpc_nx_peers *t, struct urpc_nx_peer *p, uint64_t token, uint64_t now)
{
	p->digest ^= token;
	p->probe_backoff = 0;
	if (--p->refs)
		return;
	t->idle++;
	/*
	 * A peer we declared failed keeps its entry a while without sessions,
	 * so that our answers to its pings still say so (it then fails us
	 * too) when its side never noticed: a partition that healed. Any
	 * other keeps it a little while: the answers to a session's last
	 * packets (a DISCONNECT_RESP) are signed with its secret.
	 */
	if (p->failed_it) {
		p->tomb_until_ns = now + TOMB_TIMEOUTS * p->timeout_ns;
		return;
	}
	if (t->idle > URPC_NXP_IDLE_MAX) {
		drop(t, p);
		return;
	}
	p->tomb_until_ns = now + IDLE_TIMEOUTS * p->timeout_ns;
}

/* @p failed (@why for the log, @status for its sessions): every session to it goes. */
static void fail(struct urpc_nx_peer *p, const char *why, int status)
{
	char a[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &p->addr.sin_addr, a, sizeof(a));
	URPC_INFO(-1, "peer Nexus %s:%u failed: %s", a, ntohs(p->addr.sin_port), why);
	atomic_store_explicit(&p->fail_status, status, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->fail_gen, 1, memory_order_release);
	p->failed_it++;
	p->last_heard_ns = 0;
	memset(p->rpcs, 0, sizeof(p->rpcs));
}

/* Any packet from @p, of @incarnation: a restart fails it. */
static bool seen(struct urpc_nx_peer *p, uint64_t incarnation, uint64_t now)
{
	bool moved = false;

	if (p->incarnation && incarnation != p->incarnation) {
		fail(p, "it restarted", -ESTALE);
		/*
		 * Both counts are about one incarnation: the new process has
		 * declared nothing yet, and what we declared of the old one is
		 * no news to it (telling it would fail its fresh sessions).
		 */
		p->failed_it = 0;
		p->hb_known = false;
		p->epoch = 0;
		memset(p->rpc_inc, 0, sizeof(p->rpc_inc));
		moved = true;
	}
	p->incarnation = incarnation;
	p->last_heard_ns = now;
	p->silence_probed = false;
	return moved;
}

bool urpc__nxp_seen(struct urpc_nx_peers *t, const struct sockaddr_in *addr, uint64_t incarnation,
		    uint64_t epoch, uint8_t rpc_id, uint32_t rpc_inc, uint64_t now)
{
	struct urpc_nx_peer *p = urpc__nxp_find(t, addr);
	bool moved;

	if (!p)
		return false;
	moved = seen(p, incarnation, now);
	if (epoch > p->epoch && p->epoch) {
		atomic_fetch_add_explicit(&p->probe_gen, 1, memory_order_relaxed);
		moved = true;
	}
	p->epoch = URPC_MAX(p->epoch, epoch);
	if (rpc_inc > p->rpc_inc[rpc_id]) {
		/* Made again under the same id: the old one's sessions go. */
		if (p->rpc_inc[rpc_id]) {
			atomic_fetch_add_explicit(&p->rpc_gen[rpc_id], 1, memory_order_relaxed);
			moved = true;
		}
		p->rpc_inc[rpc_id] = rpc_inc;
	}
	return moved;
}

/*
 * The session digest of a heartbeat (nexus_peer.h): probe when it keeps
 * disagreeing with ours by the same pair; again, backing off, while they still do
 * (a server that holds sessions its clients forgot keeps a difference no
 * probe ends).
 */
static bool count_check(struct urpc_nx_peer *p, uint64_t digest)
{
	if (digest == p->digest) {
		p->hb_mismatch = 0;
		p->probe_backoff = 0;
		return false;
	}
	if (p->seen_ours != p->digest || p->seen_theirs != digest) {
		p->seen_ours = p->digest;
		p->seen_theirs = digest;
		p->hb_mismatch = 0;
		p->probe_backoff = 0;
	}
	if (++p->hb_mismatch < URPC_NXP_MISMATCH << p->probe_backoff)
		return false;
	p->hb_mismatch = 0;
	if (p->probe_backoff < URPC_NXP_BACKOFF_MAX)
		p->probe_backoff++;
	atomic_fetch_add_explicit(&p->probe_gen, 1, memory_order_relaxed);
	return true;
}

bool urpc__nxp_heard(struct urpc_nx_peers *t, const struct sockaddr_in *addr, uint64_t incarnation,
		     uint64_t epoch, uint64_t it_failed, const uint8_t *rpcs, uint64_t digest,
		     uint64_t now)
{
	struct urpc_nx_peer *p = urpc__nxp_find(t, addr);
	bool moved;
	unsigned i;

	if (!p)
		return false;
	moved = seen(p, incarnation, now);
	/* Its first heartbeat sets the count; only a later rise is news. */
	if (p->hb_known && it_failed > p->it_failed) {
		fail(p, "it heard no heartbeat from this process", -EHOSTDOWN);
		moved = true;
	}
	p->it_failed = it_failed;
	p->hb_known = true;
	if (count_check(p, digest))
		moved = true;
	/* Older than what a packet already showed (reordered): its list is stale. */
	if (epoch < p->epoch)
		return moved;
	if (epoch > p->epoch && p->epoch) {
		atomic_fetch_add_explicit(&p->probe_gen, 1, memory_order_relaxed);
		moved = true;
	}
	p->epoch = epoch;
	/* Rpc ids it listed before and no longer does: their sessions go. */
	for (i = 0; i < URPC_NXP_RPCS; i++) {
		uint8_t bit = (uint8_t)(1u << (i & 7));

		if ((p->rpcs[i / 8] & bit) && !(rpcs[i / 8] & bit)) {
			atomic_fetch_add_explicit(&p->rpc_gen[i], 1, memory_order_relaxed);
			moved = true;
		}
	}
	memcpy(p->rpcs, rpcs, sizeof(p->rpcs));
	return moved;
}

uint64_t urpc__nxp_tick(struct urpc_nx_peers *t, uint64_t now, bool *failed,
			void (*send)(void *arg, const struct urpc_nx_peer *p), void *arg)
{
	uint64_t due = UINT64_MAX, late = 0, quiet;
	struct urpc_nx_peer *p, *next;

	/*
	 * Our own stall is not the peers' silence: when this tick runs long
	 * after the time the last one asked for (the SM thread, or the whole
	 * process, was descheduled or stopped), their heartbeats may sit unread
	 * in our socket, or were never answered because we did not run. The
	 * time we were late is credited to every peer before it is judged.
	 */
	if (t->wake_ns && now > t->wake_ns + NXP_STALL_NS)
		late = now - t->wake_ns;
	*failed = false;
	for (p = t->head; p; p = next) {
		next = p->next;
		if (!p->refs) {
			/* A tombstone: answers pings until it expires; pings nobody. */
			if (now >= p->tomb_until_ns)
				drop(t, p);
			else
				due = URPC_MIN(due, p->tomb_until_ns);
			continue;
		}
		if (late && p->last_heard_ns)
			p->last_heard_ns = URPC_MIN(p->last_heard_ns + late, now);
		/*
		 * A peer never heard from is not failed: only connects wait on
		 * it, and they end at their own time-out (or at once when its
		 * host refuses), never as a heartbeat lost.
		 */
		/* A stamp after @now (made while the caller waited) is no silence. */
		quiet = now > p->last_heard_ns ? now - p->last_heard_ns : 0;
		if (p->incarnation && p->last_heard_ns && quiet > p->timeout_ns) {
			fail(p, "no heartbeat", -EHOSTDOWN);
			*failed = true;
		} else if (p->incarnation && p->last_heard_ns && !p->silence_probed &&
			   quiet > URPC_NXP_SILENCE_PINGS * p->ping_ns) {
			/* Silent a while: have its sessions ask (a restart shows at once). */
			p->silence_probed = true;
			atomic_fetch_add_explicit(&p->probe_gen, 1, memory_order_relaxed);
			t->probed = true;
		}
		if (now >= p->next_ping_ns) {
			send(arg, p);
			p->next_ping_ns = now + p->ping_ns;
		}
		due = URPC_MIN(due, p->next_ping_ns);
		if (p->incarnation && p->last_heard_ns)
			due = URPC_MIN(due, p->last_heard_ns + p->timeout_ns + 1);
		if (p->incarnation && p->last_heard_ns && !p->silence_probed)
			due = URPC_MIN(due,
				       p->last_heard_ns + URPC_NXP_SILENCE_PINGS * p->ping_ns + 1);
	}
	t->wake_ns = due == UINT64_MAX ? 0 : due;
	return due;
}

bool urpc__nxp_refused(struct urpc_nx_peers *t, const struct sockaddr_in *addr)
{
	struct urpc_nx_peer *p = urpc__nxp_find(t, addr);

	if (!p || !p->refs)
		return false;
	atomic_fetch_add_explicit(&p->refused_gen, 1, memory_order_relaxed);
	return true;
}

void urpc__nxp_clear(struct urpc_nx_peers *t)
{
	while (t->head) {
		struct urpc_nx_peer *p = t->head;

		t->head = p->next;
		free(p);
	}
	t->count = 0;
	t->idle = 0;
}
