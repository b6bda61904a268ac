/* SPDX-License-Identifier: MIT */
/*
 * Liveness per remote Nexus (one per peer process, whatever the number of
 * sessions to it): the table of peers this Nexus heartbeats. Sessions take
 * a reference to their peer's entry when they are created and drop it when
 * they are freed; the Nexus's SM thread pings every referenced peer each
 * ping interval and answers its pings, so a process whose threads do not
 * run their event loops for a while keeps its sessions.
 *
 * A peer fails when it is silent for the timeout, comes back with another
 * incarnation (a restarted process), or says that it failed us (so a
 * failure seen on one side only is seen on both). Its fail_gen then
 * advances; an Rpc id it no longer lists advances that id's rpc_gen. An Rpc
 * compares the generations a session recorded at its start with the
 * current ones (lock-free reads) and resets the session when they differ.
 *
 * Each entry also holds this side's half of the secret the pair shares
 * (nexus_auth.h): nonce_local, drawn when the entry is made, and the peer's
 * nonce_remote, learnt in a handshake. Nothing the peer sends changes an
 * entry unless it is signed with that secret.
 *
 * Threads: the table (urpc__nxp_*) is guarded by the Nexus lock, taken by
 * its caller; the generations are atomics any thread may read.
 */
#ifndef URPC_NEXUS_PEER_H
#define URPC_NEXUS_PEER_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/csprng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_NXP_RPCS 256 /* rpc ids are uint8_t */
/* A heartbeat's ep[]: the bitmap of the sender's attached Rpc ids. */
#define URPC_NXP_RPC_BYTES (URPC_NXP_RPCS / 8)

struct urpc_nx_peer {
	struct sockaddr_in addr; /* the peer's Nexus */
	_Atomic uint32_t fail_gen;
	/*
	 * Why it last failed, for its sessions' RESET events: -EHOSTDOWN
	 * (heartbeats stopped, either way) or -ESTALE (it restarted). Written
	 * before fail_gen advances (release), read after (urpc__nxp_fail_status).
	 */
	_Atomic int fail_status;
	_Atomic uint32_t rpc_gen[URPC_NXP_RPCS];
	/*
	 * Advances when the peer attached or detached an Rpc that no heartbeat
	 * and no packet has named to us (an Rpc made again under the same id
	 * between two heartbeats): client sessions to it then ask their server
	 * Rpc, with a session PING_REQ, whether it still knows them.
	 */
	_Atomic uint32_t probe_gen;
	/*
	 * Advances when the peer's host said that nothing listens at its
	 * address (ICMP port unreachable for a packet we sent it, nexus_err.h):
	 * a connect to it fails with -ECONNREFUSED.
	 */
	_Atomic uint32_t refused_gen;
	/*
	 * The connect cookie the peer's Nexus gave this process's address
	 * (sm_cookie.h), echoed by every CONNECT_REQ to it; 0: none yet.
	 * Written by the client Rpcs that receive one, read by all.
	 */
	_Atomic uint64_t cookie;
	/* guarded by the Nexus lock */
	uint32_t refs;
	uint64_t ping_ns, timeout_ns; /* the shortest any reference asked for */
	uint64_t last_heard_ns;	      /* 0: nothing since the last failure */
	uint64_t next_ping_ns;
	uint64_t tomb_until_ns; /* no session left (refs 0): dropped at this time */
	uint64_t incarnation;	/* the peer's, from its pings; 0: not known yet */
	uint64_t failed_it;	/* times we declared this incarnation failed (in our pings) */
	uint64_t it_failed;	/* times it declared us failed, as it last said */
	bool hb_known;		/* ... once a heartbeat of this incarnation said it */
	uint8_t rpcs[URPC_NXP_RPC_BYTES]; /* the Rpc ids it has attached, as it last said */
	uint64_t epoch;			  /* the newest attach/detach count it sent */
	uint32_t rpc_inc[URPC_NXP_RPCS];  /* the newest attach number of each of its Rpcs */
	/*
	 * The set of sessions we hold with it (either role), as the XOR of
	 * their tokens (a session's token is the same on both sides): equal
	 * sets, equal digests; a session one side lost and another only the
	 * other side holds do not cancel, as counts would.
	 */
	uint64_t digest;
	/*
	 * The digest its heartbeats say, against ours: how many heartbeats in
	 * a row disagreed with the same pair of digests (seen_*), and how many
	 * probes that pair made already (the next waits URPC_NXP_MISMATCH <<
	 * probe_backoff heartbeats).
	 */
	uint32_t hb_mismatch;
	uint64_t seen_ours, seen_theirs;
	uint32_t probe_backoff;
	/*
	 * Silent for URPC_NXP_SILENCE_PINGS intervals and probed once for it:
	 * a restarted process (same address, no secret with us yet) drops our
	 * signed pings unanswered, but its Rpcs answer the sessions' probes
	 * (a PING_RESP that echoes the session's token) long before the peer
	 * time-out. Cleared by the next heartbeat heard.
	 */
	bool silence_probed;
	uint64_t nonce_local;  /* our half of the pair's secret, never 0 */
	uint64_t nonce_remote; /* its half, from a handshake; 0: none yet */
	struct urpc_nx_peer *next;
};

/* Entries without a session (tombstones, handshakes not taken yet) at most. */
#define URPC_NXP_IDLE_MAX 4096

struct urpc_nx_peers {
	struct urpc_nx_peer *head;
	unsigned count;
	unsigned idle;		/* entries without a reference */
	struct urpc_csprng rng; /* draws nonce_local; keyed on first use */
	bool rng_ready;
	uint64_t wake_ns; /* when the last tick asked to run next (its due); 0: none */
	bool probed;	  /* a tick advanced some probe_gen (silence): the Rpcs should look */
};

/* The entry of @addr (a tombstone included), or NULL. */
struct urpc_nx_peer *urpc__nxp_find(struct urpc_nx_peers *t, const struct sockaddr_in *addr);

/*
 * A reference to the entry of @addr, made if needed (heard "now" for a
 * start). @ping_ns and @timeout_ns: the caller's heartbeat interval and
 * silence limit; the entry keeps the shortest. NULL: out of memory.
 */
struct urpc_nx_peer *urpc__nxp_get(struct urpc_nx_peers *t, const struct sockaddr_in *addr,
				   uint64_t ping_ns, uint64_t timeout_ns, uint64_t token,
				   uint64_t now);

/*
 * Drop a reference. The entry outlives its last one a while (a few peer
 * time-outs, more when we declared the peer failed; see urpc__nxp_tick()),
 * so that the pair's secret still signs the last packets of a session.
 */
void urpc__nxp_put(struct urpc_nx_peers *t, struct urpc_nx_peer *p, uint64_t token, uint64_t now);

/*
 * Any packet @p (its sender's fields: incarnation, epoch, and the attach
 * number of the Rpc @rpc_id that sent it, or 0) from @addr: the peer is
 * alive; if it restarted it failed; an Rpc id attached anew since its last
 * packet advances that id's generation. True when a generation advanced.
 * Called before the packet is routed, so a session it opens starts after
 * the change, and later news of the old Rpc (an older epoch) is ignored.
 */
bool urpc__nxp_seen(struct urpc_nx_peers *t, const struct sockaddr_in *addr, uint64_t incarnation,
		    uint64_t epoch, uint8_t rpc_id, uint32_t rpc_inc, uint64_t now);

/*
 * A heartbeat from @addr: its @incarnation, how many times it declared us
 * failed (@it_failed), its Rpc ids (@rpcs: URPC_NXP_RPC_BYTES) and the
 * sessions it holds with us (@digest: its digest of them). True when a generation
 * advanced (Rpcs should look now). Unknown peers are ignored.
 *
 * No half-open session: when URPC_NXP_MISMATCH heartbeats in a row say it
 * holds other sessions with us than we hold with it, by the same pair of
 * digests (a disagreement that stays, not sessions coming and going), probe_gen
 * advances (again after twice as many, up to 2^URPC_NXP_BACKOFF_MAX times as
 * many, while the same difference stays), and every client session to it asks
 * its server Rpc whether it still knows it (a session PING_REQ; a server
 * that forgot it answers -ECONNRESET and the session resets).
 */
bool urpc__nxp_heard(struct urpc_nx_peers *t, const struct sockaddr_in *addr, uint64_t incarnation,
		     uint64_t epoch, uint64_t it_failed, const uint8_t *rpcs, uint64_t digest,
		     uint64_t now);

/* Ping intervals without a heartbeat heard before client sessions probe once. */
#define URPC_NXP_SILENCE_PINGS 3u
/* Heartbeats in a row whose session digest disagrees before client sessions probe. */
#define URPC_NXP_MISMATCH 3u
#define URPC_NXP_BACKOFF_MAX 6

/*
 * Timers at @now: peers silent past their timeout fail (*@failed set when
 * one did); for every peer due a ping, @send(arg, peer) is called and the
 * next ping scheduled. Returns the earliest time something is due again
 * (UINT64_MAX with no peer).
 */
uint64_t urpc__nxp_tick(struct urpc_nx_peers *t, uint64_t now, bool *failed,
			void (*send)(void *arg, const struct urpc_nx_peer *p), void *arg);

/*
 * A handshake from @addr proved by a connect cookie (nexus_auth.c): the
 * entry of @addr, made without a reference if needed (it lives
 * @ttl_ns unless a session takes it). NULL when URPC_NXP_IDLE_MAX entries
 * are idle already, or out of memory.
 */
struct urpc_nx_peer *urpc__nxp_hello(struct urpc_nx_peers *t, const struct sockaddr_in *addr,
				     uint64_t ttl_ns, uint64_t now);

/*
 * Nothing listens at @addr, its host said (nexus_err.h): advance its
 * refused_gen. False when no entry has that address. Caller holds the
 * Nexus lock.
 */
bool urpc__nxp_refused(struct urpc_nx_peers *t, const struct sockaddr_in *addr);

/* Free every entry (Nexus destroy; no session holds one any more). */
void urpc__nxp_clear(struct urpc_nx_peers *t);

/* The generations a session records at its start. Thread: any. */
static inline uint32_t urpc__nxp_fail_gen(const struct urpc_nx_peer *p)
{
	return atomic_load_explicit(&p->fail_gen, memory_order_relaxed);
}

/* Why the peer failed, once its fail_gen has moved on. Thread: any. */
static inline int urpc__nxp_fail_status(const struct urpc_nx_peer *p)
{
	atomic_thread_fence(memory_order_acquire); /* pairs with fail()'s release */
	return atomic_load_explicit(&p->fail_status, memory_order_relaxed);
}

static inline uint32_t urpc__nxp_probe_gen(const struct urpc_nx_peer *p)
{
	return atomic_load_explicit(&p->probe_gen, memory_order_relaxed);
}

static inline uint32_t urpc__nxp_refused_gen(const struct urpc_nx_peer *p)
{
	return atomic_load_explicit(&p->refused_gen, memory_order_relaxed);
}

/* The connect cookie to send to this peer, and a new one it gave. Thread: any. */
static inline uint64_t urpc__nxp_cookie(const struct urpc_nx_peer *p)
{
	return atomic_load_explicit(&p->cookie, memory_order_relaxed);
}

static inline void urpc__nxp_set_cookie(struct urpc_nx_peer *p, uint64_t cookie)
{
	atomic_store_explicit(&p->cookie, cookie, memory_order_relaxed);
}

static inline uint32_t urpc__nxp_rpc_gen(const struct urpc_nx_peer *p, uint8_t rpc_id)
{
	return atomic_load_explicit(&p->rpc_gen[rpc_id], memory_order_relaxed);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_PEER_H */
