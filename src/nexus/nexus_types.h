/* SPDX-License-Identifier: MIT */
/*
 * Types of the Nexus's interface (nexus.h) that its insides (nexus_int.h)
 * share: a handler entry, the simulated network, the counters. Types only.
 */
#ifndef URPC_NEXUS_TYPES_H
#define URPC_NEXUS_TYPES_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h>

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_nexus;

struct urpc_handler {
	urpc_req_handler_fn fn; /* NULL: no handler for this type */
	void *arg;
};

/*
 * Session management through a simulated network instead of the kernel
 * (tests/sim): send() carries one encoded SM datagram from @from to @to
 * (0 or -errno); the simulator delivers it later with urpc__nexus_sm_input()
 * to the Nexus bound at @to, or drops it. The interface a transport would
 * have, cut down to what session management needs.
 */
struct urpc_sm_net {
	int (*send)(void *arg, struct urpc_nexus *from, const struct sockaddr_in *to,
		    const uint8_t *buf, size_t len);
	void *arg;
};

/* struct urpc_nexus_stats, the SM thread's counters, is public (urpc.h). */

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_TYPES_H */
