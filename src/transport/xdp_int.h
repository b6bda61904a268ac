/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's private types (xdp.c, xdp_io.c, xdp_bpf.c,
 * xdp_nl.c): one AF_XDP socket per receive queue of the interface, each
 * with its own UMEM and fill / completion / RX / TX rings, and the
 * program's maps. Only the libxdp build's xdp*.c include this header.
 *
 * An xdp endpoint is a struct udp_tp (udp_int.h) with u->xdp pointing
 * here: the udp files keep the wire format, the receive slots, the
 * one-sided protocol and the peers; this state carries the frames.
 *
 * Frames of a queue's UMEM: the first nrx are the receive frames (always
 * either in the fill ring, in the kernel, or in the RX ring until
 * urpc__xdp_rx() puts them back); queue 0's next ntx the send frames (on the
 * free stack, in the TX ring, or awaiting their completion).
 */
#ifndef URPC_TRANSPORT_XDP_INT_H
#define URPC_TRANSPORT_XDP_INT_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <xdp/xsk.h>

#include "udp_int.h"
#include "xdp_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_XDP_MAXQ 8	   /* sockets per endpoint; as in xdp_prog.bpf.c */
#define URPC_XDP_SLOTS 512 /* endpoints per interface; as in xdp_prog.bpf.c */
#define URPC_XDP_RX_BATCH 64u
#define URPC_XDP_PROG_NAME "urpc_xdp"

struct xdp_q {
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	int fd;
	uint8_t *area;
	size_t area_len;
	uint64_t *tx_free; /* free send frames (UMEM offsets) */
	uint32_t ntx_free;
	uint32_t tx_pending; /* queued since the last kick */
};

struct urpc_xdp {
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint8_t mac[6];
	uint32_t addr; /* network order */
	uint16_t port; /* network order */
	unsigned nq;
	struct xdp_q q[URPC_XDP_MAXQ];
	uint32_t frame_size;
	uint32_t nrx, ntx; /* receive frames per queue, send frames (queue 0 only) */
	bool huge;	   /* UMEMs in hugepage memory */
	bool zerocopy;
	bool generic; /* the program runs in generic (skb) mode */
	/* veth: frames never crossed a wire, and a kernel sender's UDP checksum is partial */
	bool csum_trusted;
	int ports_fd, xsks_fd, prog_fd;
	uint32_t prog_id;
	uint32_t slot; /* this endpoint's slot in the maps */
	bool slot_set;
	int epfd;	 /* the sockets, for idle waiting */
	bool ep_has_kfd; /* the kernel socket is in epfd (kpeers) */
	uint16_t ip_id;
	/* URPC_XDP_BUSY_POLL=1: sockets busy-poll the driver (SO_PREFER_BUSY_POLL) when idle */
	bool busy_poll;
	uint64_t drops[URPC_XDP_DROP_MAX];
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_INT_H */
