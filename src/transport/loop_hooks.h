/* SPDX-License-Identifier: MIT */
/*
 * The loop transport's test hooks (loop.c, loop_dgram.c, loop_os.c): the
 * fault switches of an endpoint and the simulated network of tests/sim.
 * Split from transport.h, which every layer includes; only the loop
 * transport and the tests include this. Types and declarations only.
 *
 * May include: transport.h.
 */
#ifndef URPC_TRANSPORT_LOOP_HOOKS_H
#define URPC_TRANSPORT_LOOP_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- loop only: fault switches (deterministic for a seed) ---- */
struct urpc_loop_faults {
	double drop;	      /* probability that a datagram is lost */
	double dup;	      /* probability that a datagram is delivered twice */
	uint32_t reorder;     /* datagrams held and released in shuffled order; 0: off */
	uint32_t delay_polls; /* deliver after the receiver's rx_burst ran this many times */
	/*
	 * Not a datagram's: revoke_ready() of a grant of this endpoint says
	 * false until its rx_burst ran this many times after the first ask (a
	 * reader slow to let go, as a verbs peer whose release notice comes
	 * late); 0: the loop's revoke never waits, revoke_ready() says true.
	 */
	uint32_t release_polls;
};

/*
 * Set the switches applied to datagrams @tp sends. @tp must be a loop
 * endpoint. Thread: @tp's owner; the switches work across threads too (the
 * delay counts the receiver's rx_burst() calls, wherever it runs).
 */
int urpc__loop_set_faults(struct urpc_tp *tp, const struct urpc_loop_faults *f);

/*
 * ---- loop only: a simulated network (tests/sim) ----
 * While installed, every datagram a loop endpoint sends goes to send()
 * (endpoints named by urpc__loop_ep_id()), which keeps a copy and later
 * hands it to urpc__loop_net_deliver(), or drops it; the fault switches are
 * bypassed. A peer's one-sided requests are served only while reachable()
 * says so. Install and remove only while no loop endpoint exists (-EBUSY).
 * Thread: one thread drives every endpoint, calls urpc__loop_net_deliver()
 * and receives the callbacks (the simulator's); nothing here is for
 * endpoints on several threads.
 */
struct urpc_loop_net {
	void (*send)(void *arg, uint32_t from_id, uint32_t to_id, const void *hdr, uint32_t hdr_len,
		     const void *data, uint32_t data_len);
	bool (*reachable)(void *arg, uint32_t from_id, uint32_t to_id);
	/*
	 * Optional (NULL: served at once): whether a one-sided operation's
	 * bytes have crossed the network yet. Asked each time the target would
	 * serve the operation @key (unique while it is queued) of @len bytes;
	 * false holds it (and those queued behind it) until asked again.
	 */
	bool (*os_admit)(void *arg, uint32_t from_id, uint32_t to_id, bool read, size_t len,
			 uint64_t key);
	void *arg;
};
int urpc__loop_set_net(const struct urpc_loop_net *net);
int urpc__loop_net_deliver(uint32_t to_id, const void *buf, uint32_t len);
uint32_t urpc__loop_ep_id(const struct urpc_tp *tp);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_LOOP_HOOKS_H */
