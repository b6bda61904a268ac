/* SPDX-License-Identifier: MIT */
/*
 * The software memory-registration table of the transports without a NIC
 * (loop, udp): the keys they hand out, and the one set of checks that
 * their emulated one-sided operations apply (sw_mr.c). Calls nothing in
 * src/transport; uses only transport.h's types.
 *
 * A registration gets one random nonzero key, used as both lkey and rkey
 * and unique among the table's live registrations; mr->handle names its
 * table entry, so a struct urpc_tp_mr that was deregistered (or belongs
 * to another endpoint) is recognised as not live.
 *
 * Grants (struct urpc_tp_grant; transport.h has the contract): exact
 * bytes of a registration made with URPC_TP_ACCESS_GRANT_*, for one peer
 * (named by the transport: udp its address and port, loop its endpoint
 * id) and the token its requests carry, until revoked.
 *
 * Keys: a grant's key is 64 bits drawn from the table's ChaCha20
 * generator (keyed with 256 bits of urpc__entropy()), drawn again while
 * its upper half is 0 (so it never equals a registration's 32-bit key) or
 * it equals a live grant's key. It is found through an open-addressing
 * hash of the live grants' keys (linear probing, at most half full,
 * deletion by backward shift: no tombstones), so a check is O(1) and
 * reads nothing but the table. A key says nothing of the entry, the
 * table or the other keys: a peer that knows some keys guesses another
 * live one with probability (live grants) / 2^64 per try. Revoking takes
 * the key out of the hash for good; the entry is reused with a fresh
 * draw, so a revoked key names nothing again, even when the same bytes
 * are granted anew (only a new draw equal to it could, 2^-64 per grant).
 * A registration made with URPC_TP_ACCESS_REMOTE_* is open to any peer
 * with its key (transport tests); the engine registers none.
 *
 * Errors, one for each failure:
 *   -EINVAL  urpc__sw_mr_reg(): @addr NULL, @len 0, @mr NULL, or access
 *            bits other than URPC_TP_ACCESS_* (DEVICE included);
 *            urpc__sw_mr_check_local(): @mr NULL or not a live
 *            registration of the table, @len 0, [local, local + len)
 *            not inside it, or device memory (the caller's mistake:
 *            post_* returns it);
 *   -EFAULT  urpc__sw_mr_reg(): [addr, addr + len) wraps around the end
 *            of the address space;
 *   -ENOMEM  urpc__sw_mr_reg(): the table cannot grow;
 *   -EACCES  urpc__sw_mr_check_remote(): no live registration has @rkey,
 *            it lacks the access asked for, or the range is not inside it
 *            (the peer's mistake: the operation completes with it).
 *
 * Threads: the table belongs to its endpoint's owner thread.
 */
#ifndef URPC_TRANSPORT_SW_MR_H
#define URPC_TRANSPORT_SW_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/csprng.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One grant (see the top). */
enum urpc_sw_grant_state {
	URPC_SW_GRANT_NEVER = 0, /* never used */
	URPC_SW_GRANT_LIVE,
	URPC_SW_GRANT_REVOKED, /* free (its key is 0 and out of the hash) */
};

struct urpc_sw_grant {
	uintptr_t addr;
	uint64_t len;
	uint64_t token;
	uint64_t peer_id;
	const void *peer; /* the peer handle: release_peer() revokes */
	uint64_t key;	  /* 0 unless live */
	uint32_t mr_key;  /* the registration it lies in: dereg_mem() revokes */
	uint32_t next_free;
	uint8_t access;	   /* URPC_TP_ACCESS_REMOTE_* */
	uint8_t state;	   /* enum urpc_sw_grant_state */
	bool device;	   /* on a URPC_TP_ACCESS_DEVICE registration */
	uint64_t asked_at; /* 1 + @now of urpc__sw_revoke_ready()'s first call; 0: not asked */
};

/* One registration; @used is false for a free entry. */
struct urpc_sw_mr {
	uintptr_t addr;
	size_t len;
	uint32_t key; /* lkey and rkey */
	unsigned access;
	bool used;
};

struct urpc_sw_mr_table {
	struct urpc_sw_mr *regs;
	uint32_t cap;
	uint32_t n; /* live registrations */
	struct urpc_csprng key_gen;
	struct urpc_sw_grant *grants;
	uint32_t gcap;
	uint32_t gfree;	  /* free list of grants[]; UINT32_MAX: empty */
	uint32_t ngrants; /* live */
	/* Open addressing: grants[] index of each live key, SW_NIL when empty. */
	uint32_t *hslots; /* 2 * gcap entries */
	uint32_t hmask;	  /* 2 * gcap - 1 */
	/* The endpoint's grants_live counter, kept equal to ngrants; may be NULL. */
	uint64_t *live_stat;
};

/* What urpc__sw_grant_check() says about a peer's request. */
enum urpc_sw_verdict {
	URPC_SW_SERVE = 0,    /* granted: serve it */
	URPC_SW_SERVE_DEVICE, /* granted, in device memory: serve it with the driver's copies */
	URPC_SW_REFUSE,	      /* from the grant's peer, but not granted: answer -EACCES */
	/*
	 * No live grant of the requester has the key (none has it, or
	 * another peer's does): the transport refuses it (-EACCES) when the
	 * request comes from one of its peers with that peer's token, and
	 * drops it (counted, unanswered on udp) otherwise.
	 */
	URPC_SW_UNKNOWN,
};

/*
 * An empty table whose keys are drawn from a ChaCha20 generator keyed
 * with 256 bits of urpc__entropy() (@key_seed 0: what the transports
 * pass), or from @key_seed (repeatable: tests only).
 */
void urpc__sw_mr_init(struct urpc_sw_mr_table *t, uint64_t key_seed);

/* Free the table's memory (whatever is still registered). */
void urpc__sw_mr_fini(struct urpc_sw_mr_table *t);

/*
 * Register [addr, addr + len) for local use and the remote @access; fills
 * @mr. 0, -EINVAL, -EFAULT or -ENOMEM (see the top). Not the datapath:
 * the table may grow.
 */
int urpc__sw_mr_reg(struct urpc_sw_mr_table *t, void *addr, size_t len, unsigned access,
		    struct urpc_tp_mr *mr);

/*
 * Undo urpc__sw_mr_reg(): @mr->handle becomes NULL. Returns false (and
 * does nothing) when @mr is NULL or not a live registration of @t.
 */
bool urpc__sw_mr_dereg(struct urpc_sw_mr_table *t, struct urpc_tp_mr *mr);

/*
 * 0 when @mr is a live registration of @t, not of device memory, holding
 * [local, local + len), else -EINVAL.
 */
int urpc__sw_mr_check_local(const struct urpc_sw_mr_table *t, const struct urpc_tp_mr *mr,
			    const void *local, size_t len);

/*
 * 0 when a live registration of @t has @rkey, grants @need
 * (URPC_TP_ACCESS_*) and holds [raddr, raddr + len), else -EACCES.
 * Linear in the registrations (a handful per endpoint). Datapath.
 */
int urpc__sw_mr_check_remote(const struct urpc_sw_mr_table *t, uint32_t rkey, unsigned need,
			     uint64_t raddr, uint64_t len);

/*
 * Grant @peer (named @peer_id by the transport; its requests carry @token)
 * @access (URPC_TP_ACCESS_REMOTE_*) to [addr, addr + len), which must lie
 * inside the live registration @mr made with the matching GRANT_* bits.
 * 0 and @g filled, -EINVAL, or -ENOMEM (the table could not grow).
 * Datapath; allocates only when every entry is live (the table doubles).
 */
int urpc__sw_grant(struct urpc_sw_mr_table *t, const void *peer, uint64_t peer_id, uint64_t token,
		   const struct urpc_tp_mr *mr, const void *addr, size_t len, unsigned access,
		   struct urpc_tp_grant *g);

/* Revoke @g (no-op when @g is no live grant of @t); clears g->key. */
void urpc__sw_revoke(struct urpc_sw_mr_table *t, struct urpc_tp_grant *g);

/*
 * A revoke_ready() (transport.h) that models a reader slow to let go: true
 * when @lag is 0 or @g is no live grant of @t; otherwise false until @now
 * (any counter that advances, the caller's) reaches @lag past the first
 * call on this grant (the @lag of each call: a new one applies at once).
 */
bool urpc__sw_revoke_ready(struct urpc_sw_mr_table *t, const struct urpc_tp_grant *g, uint64_t now,
			   uint64_t lag);

/* Revoke every grant for @peer (release_peer). Cold. */
void urpc__sw_revoke_peer(struct urpc_sw_mr_table *t, const void *peer);

/*
 * May a request from @peer_id carrying @token and @key have @need
 * (URPC_TP_ACCESS_REMOTE_*) on [raddr, raddr + len)? A grant key: SERVE
 * when live, from its peer with its token, the access granted and the
 * range inside its bytes; REFUSE when from its peer with its token but
 * not granted that; UNKNOWN when no live grant has it or it is another
 * peer's (a revoked key is unknown). A 32-bit key: an open registration's
 * (SERVE or REFUSE as urpc__sw_mr_check_remote()), or UNKNOWN. SERVE is
 * SERVE_DEVICE for a grant or registration of device memory
 * (URPC_TP_ACCESS_DEVICE). A hash probe and a few compares. Datapath.
 */
enum urpc_sw_verdict urpc__sw_grant_check(const struct urpc_sw_mr_table *t, uint64_t key,
					  uint64_t token, uint64_t peer_id, unsigned need,
					  uint64_t raddr, uint64_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_SW_MR_H */
