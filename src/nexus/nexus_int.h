/* SPDX-License-Identifier: MIT */
/*
 * The Nexus's insides, shared by nexus.c (the SM thread, routing,
 * heartbeats, create/destroy), nexus_table.c (the Rpc and handler
 * tables and the accessors) and nexus_io.c (sending) and nobody else.
 */
#ifndef URPC_NEXUS_INT_H
#define URPC_NEXUS_INT_H

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "nexus_peer.h"
#include "nexus_types.h"
#include "sm.h"
#include "sm_cookie.h"

#define NEXUS_MAX_RPCS 256     /* rpc ids are uint8_t */
#define NEXUS_MAX_HANDLERS 256 /* req types are uint8_t */
#define SM_POLL_MS 50	       /* the SM thread re-checks its stop flag this often */
#define SM_RX_BUDGET 64	       /* datagrams handled per wake-up before re-checking */
#define SM_RX_BATCH 32	       /* datagrams taken per system call (recvmmsg) */
/* A handshake's peer entry waits this long for a session to take it: two cookie slots. */
#define NEXUS_HELLO_TTL_NS (2ull << URPC_SM_COOKIE_SLOT_SHIFT)

struct urpc_nexus {
	struct urpc_sm_net net; /* simulated: send through it; no socket, no thread */
	bool sim;
	int fd;	  /* the SM socket */
	int evfd; /* eventfd that wakes the SM thread for destroy */
	uint16_t port;
	char host[INET_ADDRSTRLEN];
	pthread_t thread;
	atomic_bool stop; /* set by destroy; the SM thread exits when it sees it */
	atomic_bool mute; /* test hook: receive and send nothing, as a hung process */

	pthread_mutex_t lock; /* guards the fields below */
	struct urpc_sm_queue *rpcs[NEXUS_MAX_RPCS];
	unsigned nr_attached;
	bool frozen; /* an Rpc was attached: the handler table is read-only */
	struct urpc_handler handlers[NEXUS_MAX_HANDLERS];
	struct urpc_nx_peers peers;
	uint64_t incarnation; /* random, nonzero: tells a restarted process from this one */
	/* nx->lock is recursive (nexus.c lock_init()): nexus_io.c signs under it. */
	struct urpc_sm_cookie_key cookie_key; /* connect cookies (sm_cookie.h); read-only */
	/* Sent in every SM packet (nexus_peer.h): */
	_Atomic uint64_t epoch;			  /* Rpc attaches and detaches so far */
	_Atomic uint32_t rpc_inc[NEXUS_MAX_RPCS]; /* attaches of each Rpc id so far */
	_Atomic uint32_t notices;		  /* calls of notify_rpcs() (nexus.h) */

	/* Counters: updated with relaxed atomics, read by urpc__nexus_get_stats(). */
	struct urpc_nexus_stats stats;
};

static inline void stat_inc(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

#endif /* URPC_NEXUS_INT_H */
