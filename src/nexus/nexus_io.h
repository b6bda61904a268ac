/* SPDX-License-Identifier: MIT */
/*
 * The sending side of the Nexus's session-management socket: a packet is
 * encoded as this Nexus sends it (its incarnation and epoch, the sending
 * Rpc's attach number) and sent alone (sendto) or in a batch (sendmmsg: an
 * Rpc sends what one event-loop pass produced in one system call), or
 * handed to a simulated network. Thread: any (the socket is shared).
 */
#ifndef URPC_NEXUS_IO_H
#define URPC_NEXUS_IO_H

#include <netinet/in.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "nexus_types.h"
#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Datagrams an Rpc collects before it sends them in one batch. */
#define URPC_SM_OUT_BATCH 32

/* One encoded SM datagram and where it goes. */
struct urpc_sm_dgram {
	struct sockaddr_in to;
	uint16_t len;
	uint8_t type; /* enum urpc_sm_pkt_type, for the log */
	uint8_t buf[URPC_SM_PKT_MAX];
};

/* Encode @p, from this Nexus, for @to into @d. */
void urpc__nexus_sm_pack(struct urpc_nexus *nx, const struct sockaddr_in *to,
			 const struct urpc_sm_pkt *p, struct urpc_sm_dgram *d);

/*
 * Send one SM packet to the Nexus at @to from this Nexus's socket. 0 or
 * -errno (a failed send is not retried here; SM requests are retried by
 * their sender). Not logged: the caller knows the context.
 */
int urpc__nexus_sm_send(struct urpc_nexus *nx, const struct sockaddr_in *to,
			const struct urpc_sm_pkt *p);

/*
 * Send @n packed datagrams, in order, in as few system calls as the
 * socket takes them. A datagram the socket refuses is skipped (its sender
 * retries as after a loss) and logged, rate-limited, under @log_id (an Rpc
 * id, or -1). Returns how many were sent.
 */
unsigned urpc__nexus_sm_send_batch(struct urpc_nexus *nx, const struct urpc_sm_dgram *d, unsigned n,
				   int log_id);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_IO_H */
