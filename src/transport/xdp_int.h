/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's private types (xdp.c, xdp_io.c, xdp_bpf.c,
 * xdp_nl.c, xdp_umem.c): one AF_XDP socket per receive queue of the
 * interface, each with its own RX / TX rings on the process's UMEM of that
 * queue, and the program's maps. Only the libxdp build's xdp*.c include this header.
 *
 * An xdp endpoint is a struct udp_tp (udp_int.h) with u->xdp pointing
 * here: the udp files keep the wire format, the receive slots, the
 * one-sided protocol and the peers; this state carries the frames.
 *
 * A queue's UMEM belongs to the process, shared by its endpoints there
 * (struct xdp_grp, xdp_umem.c). Its receive frames are always either in
 * the fill ring, in the kernel, or in an RX ring until urpc__xdp_rx() puts
 * them back; an endpoint's send frames (queue 0 only) are on its free
 * stack, in its TX ring, awaiting their completion, or on its share's
 * return stack.
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
/* the receive queues other than the one that last had frames: polled every Nth call (xdp_io.c) */
#define URPC_XDP_COLD_EVERY 8u
#define URPC_XDP_PROG_NAME "urpc_xdp"

#define URPC_XDP_SHARES_MAX 32u /* endpoints one process's UMEM of a queue can hold */

/*
 * One UMEM of this process for one queue of an interface, shared by its
 * endpoints there (xdp_umem.c): the kernel gives a queue one fill ring and
 * one completion ring, which the lock guards. Frames: share s (one per
 * endpoint) holds nrx receive frames, then ntx send frames, from
 * s * share_bytes; every receive frame is in one pool.
 */
struct xdp_grp {
	struct xsk_ring_prod fill; /* lock */
	struct xsk_ring_cons comp; /* lock */
	int lock;
	uint8_t *area;
	uint64_t share_bytes;
	uint32_t nshares, ntx;
	uint64_t *ret;			    /* lock: nshares x ntx send frames back home */
	uint32_t nret[URPC_XDP_SHARES_MAX]; /* lock */
	/* cold, under xdp_umem.c's registry mutex */
	struct xdp_grp *next;
	struct xsk_umem *umem;
	size_t area_len;
	uint64_t netns;
	int ifindex;
	unsigned qid;
	uint32_t frame_size, nrx;
	uint32_t used; /* shares taken */
	unsigned members;
	bool huge, zerocopy;
};

static inline void urpc__xdp_grp_lock(struct xdp_grp *g)
{
	while (__atomic_exchange_n(&g->lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&g->lock, __ATOMIC_RELAXED))
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#else
			;
#endif
}

static inline void urpc__xdp_grp_unlock(struct xdp_grp *g)
{
	__atomic_store_n(&g->lock, 0, __ATOMIC_RELEASE);
}

/* An endpoint's socket on one queue, its own RX and TX rings, in a group. */
struct xdp_q {
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
	struct xdp_grp *g;
	struct xsk_socket *xsk;
	int fd;
	uint32_t share;
	uint8_t *area;	   /* g->area */
	uint64_t *tx_free; /* free send frames of this share (UMEM offsets) */
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
	unsigned q0; /* q[i] is receive queue q0 + i; q[0] sends */
	/* URPC_XDP_QUEUES binds some queues only: the kernel socket is read too */
	bool partial;
	struct xdp_q q[URPC_XDP_MAXQ];
	unsigned hot;	    /* the queue that last had frames: polled first (xdp_io.c) */
	unsigned cold_skip; /* receive calls that skipped the other queues */
	uint32_t frame_size;
	uint32_t nrx, ntx; /* receive frames per queue, send frames (queue 0 only) */
	bool huge;	   /* UMEMs in hugepage memory */
	bool zerocopy;
	bool generic; /* the program runs in generic (skb) mode */
	/*
	 * veth: frames never crossed a wire, so neither the IP header nor the
	 * UDP checksum is verified on receive (a kernel sender's UDP one is
	 * partial there anyway)
	 */
	bool csum_trusted;
	int ports_fd, xsks_fd, prog_fd;
	int pslot_fd; /* urpc_port_slot: the program's fast lookup (xdp_prog.bpf.c) */
	uint32_t prog_id;
	uint32_t slot; /* this endpoint's slot in the maps */
	bool slot_set;
	/*
	 * Idle waiting: the AF_XDP sockets are in epfd only from wait_arm() to
	 * wait_ack() (in_ep). A socket in an epoll set has a sleeper on
	 * its wait queue, and every frame the kernel delivers to it, and every
	 * sent frame it frees, then takes that queue's lock with interrupts
	 * off to wake it: 11.5% of a busy endpoint's CPU time on the veth
	 * pair (perf, urpc-small-tput at window 8). The kernel socket, read
	 * while it has peers on this host (kpeers), likewise.
	 */
	int epfd;
	unsigned in_ep; /* descriptors in epfd now: 0, or nq (+1 while kpeers) */
	uint16_t ip_id;
	/* URPC_XDP_BUSY_POLL=1: sockets busy-poll the driver (SO_PREFER_BUSY_POLL) when idle */
	bool busy_poll;
	uint64_t drops[URPC_XDP_DROP_MAX];
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_INT_H */
