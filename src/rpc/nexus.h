/* SPDX-License-Identifier: MIT */
/*
 * What the Nexus offers its Rpcs (internal). The public half is in
 * include/urpc/urpc.h.
 *
 * The Nexus owns one kernel UDP socket (session management) and a thread
 * that receives on it. Only clients initiate: CONNECT_REQ, DISCONNECT_REQ
 * and PING_REQ go client -> server and are pushed into the queue of Rpc
 * server_rpc_id; their responses and RESET (server -> client, e.g. when the
 * server Rpc is destroyed) go into the queue of Rpc client_rpc_id. A server
 * notices a dead client by the absence of its pings.
 *
 * A CONNECT_REQ, DISCONNECT_REQ or PING_REQ for an Rpc id that does not
 * exist is answered by the SM thread itself, with status -ENOENT (connect)
 * or -ECONNRESET (others), so a client learns at once that the peer is gone.
 * Packets for an unknown client Rpc are dropped.
 */
#ifndef URPC_RPC_NEXUS_H
#define URPC_RPC_NEXUS_H

#include <netinet/in.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_handler {
	urpc_req_handler_fn fn; /* NULL: no handler for this type */
	void *arg;
};

/*
 * Attach Rpc @rpc_id with its SM queue @q (owned by the Rpc; must stay valid
 * until detach). Freezes the handler table. 0 or -EEXIST. Thread: any.
 */
int urpc__nexus_attach_rpc(struct urpc_nexus *nx, uint8_t rpc_id, struct urpc_sm_queue *q);

/*
 * Detach Rpc @rpc_id. When it returns, the SM thread no longer touches the
 * queue. Thread: any.
 */
void urpc__nexus_detach_rpc(struct urpc_nexus *nx, uint8_t rpc_id);

/*
 * Send one SM packet to the Nexus at @to from this Nexus's socket. 0 or
 * -errno (a failed send is not retried here; SM requests are retried by
 * their sender). Thread: any (one sendto on a shared socket).
 */
int urpc__nexus_sm_send(struct urpc_nexus *nx, const struct sockaddr_in *to,
			const struct urpc_sm_pkt *p);

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
int urpc__nexus_create_sim(const char *host, uint16_t port, const struct urpc_sm_net *net,
			   struct urpc_nexus **out);
void urpc__nexus_sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from);

/* Counters of the SM thread; every field always exists. */
struct urpc_nexus_stats {
	uint64_t sm_rx;		  /* datagrams received on the SM socket */
	uint64_t sm_tx;		  /* SM packets sent (urpc__nexus_sm_send and own replies) */
	uint64_t drop_bad_pkt;	  /* datagrams that failed urpc__sm_decode() */
	uint64_t drop_no_rpc;	  /* responses/RESET for an Rpc id that is not attached */
	uint64_t drop_queue_full; /* packets lost because the Rpc's SM queue was full */
	uint64_t replied_no_rpc;  /* requests for a missing Rpc answered by the SM thread */
};

/* Copy the counters (each read atomically). Thread: any. */
void urpc__nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st);

/* The handler table, read-only once an Rpc is attached. Thread: any. */
const struct urpc_handler *urpc__nexus_handlers(const struct urpc_nexus *nx);

/* The host the Nexus is bound to (used as the default transport host). */
const char *urpc__nexus_host(const struct urpc_nexus *nx);

/*
 * Parse "a.b.c.d:port" (or "host:port" resolved with getaddrinfo, IPv4 only).
 * 0 or -EINVAL. Thread: any. Not for the datapath.
 */
int urpc__parse_host_port(const char *s, struct sockaddr_in *out);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_NEXUS_H */
