/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's private types, constants and wire format, the floor
 * of its ladder (each file includes only the headers below it, and calls
 * only down):
 *   udp.c     endpoint create/destroy, peers, idle waiting, the test entry
 *             points of udp.h and the ops table;
 *   udp_io.c  datagrams: tx/rx bursts, the receive ring (udp_io.h);
 *   udp_os.c  the emulated one-sided protocol and the registrations
 *             (udp_os.h), on sw_mr.c;
 *   udp_int.h these types. Only src/transport/udp*.c and xdp*.c include
 *             this header: an xdp endpoint is a udp endpoint whose
 *             datagrams travel through AF_XDP (xdp.c, xdp_io.h), so both
 *             speak this wire format with the same code.
 *
 * One non-blocking IPv4 UDP socket per endpoint.
 *
 * Datagrams are sent with sendmmsg() (a lone small one with sendto() from
 * one contiguous copy) and received with recvmmsg() into a ring of
 * rq_depth buffers allocated at create() (while they come one at a time,
 * with recvfrom(): see udp_rx_vlen()). While all its peers share one
 * address, the socket is connected to it: sends skip the route lookup, and
 * the kernel delivers datagrams from that address only (no other address
 * has business with the endpoint then). A connected socket also hears of
 * the peer's port being closed (ECONNREFUSED on the next call): a lost
 * datagram like any other, said nothing of; the sessions notice the peer. One-sided READ/WRITE are
 * emulated in software: the requester splits an operation into chunks and
 * keeps at most UDP_OS_WINDOW of them in flight; the remote endpoint serves
 * them inside its rx_burst() and poll_completions().
 *
 * Wire format (little-endian). Every datagram starts with struct udp_hdr:
 *
 *   0  u16 magic    UDP_MAGIC
 *   2  u8  version  UDP_VERSION
 *   3  u8  type     enum udp_type
 *   4  u32 op_id    requester's operation: table index | generation << 16
 *   8  u32 chunk    chunk index within the operation
 *  12  u32 status   NAK: the positive errno; RD_REQ: the chunks asked for
 *                   from @chunk on, 2 to UDP_OS_WINDOW (0: one); 0 otherwise
 *
 * DATA:    hdr, then the caller's header and payload.
 * RD_REQ:  hdr, struct udp_ext (the operation: raddr, len, key, the
 *          session's token, chunk size).
 * RD_DATA: hdr, then the chunk's bytes.
 * WR_DATA: hdr, struct udp_ext, then the chunk's bytes.
 * WR_ACK:  hdr.
 * NAK:     hdr with status set; the requester fails the operation.
 *
 * A grant on device memory (URPC_TP_ACCESS_DEVICE) is served with the
 * CUDA driver's copies: WR_DATA straight into the device, RD_DATA through
 * a host staging slot per queued datagram (dev_stage); a failed copy is
 * answered with a NAK (EIO).
 *
 * Every request carries the whole operation's range and the token of the
 * requester's session, so the server checks, on every chunk and keeping no
 * per-operation state, that the key names a live grant for the datagram's
 * source address and that token, and the grant's access and exact bounds
 * (sw_mr.c). A request from the grant's peer that fails access or bounds
 * gets a NAK (EACCES); so does one whose key names no grant of its sender
 * (unknown, revoked, another's) when its source and token are those of
 * one of our peers. Anything else is dropped unanswered (os_dropped).
 * Replies thus only ever go to a peer's registered address.
 *
 * Endpoint bytes (UDP_EP_LEN): kind (URPC_TRANSPORT_UDP), UDP_EP_VERSION,
 * IPv4 address and port (network order), a random nonce, and max_dgram
 * (u32 little-endian): the largest datagram the endpoint receives whole.
 * A requester cuts one-sided chunks so that WR_DATA fits the peer's
 * max_dgram, and RD_DATA (sized by the requester) fits its own ring.
 *
 * Threads: an endpoint belongs to the thread that created it.
 */
#ifndef URPC_TRANSPORT_UDP_INT_H
#define URPC_TRANSPORT_UDP_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../util/compiler.h"
#include "../util/rand.h"
#include "sw_mr.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define UDP_MAGIC 0x7055u /* "Up" on the wire */
#define UDP_VERSION 2
/*
 * 3: a READ request may ask for a group of chunks (udp_os.c), which a
 * version-2 responder would answer with its first chunk only, leaving the
 * rest to retransmission one by one: the versions refuse each other at
 * connect instead (urpc__udp_resolve_peer(), -EPROTO, logged).
 */
#define UDP_EP_VERSION 3
#define UDP_EP_LEN 16		/* kind, version, addr[4], port[2], nonce[4], max_dgram[4] */
#define UDP_MAX_DGRAM 65507u	/* largest IPv4 UDP payload */
#define UDP_DEFAULT_DGRAM 1472u /* Ethernet MTU less IPv4 and UDP headers */
#define UDP_MIN_MTU 64u		/* leaves room for the one-sided headers */
/* smallest max_dgram a peer may advertise: a header and the least mtu */
#define UDP_MIN_DGRAM ((uint32_t)sizeof(struct udp_hdr) + UDP_MIN_MTU)
#define UDP_SOCKBUF (4u << 20)	   /* SO_RCVBUF/SO_SNDBUF asked for */
#define UDP_MAX_DEPTH 65536u	   /* largest rq_depth/sq_depth */
#define UDP_RX_BATCH 64u	   /* datagrams per recvmmsg() */
#define UDP_CTL_BATCH 64u	   /* one-sided datagrams per sendmmsg() */
#define UDP_OS_OPS 64u		   /* one-sided operations outstanding */
#define UDP_OS_WINDOW 32u	   /* chunks in flight per operation; <= 64 */
#define UDP_OS_SLICE 2u		   /* one-sided datagrams per sendmmsg() while DATA comes */
#define UDP_OS_SLICE_BULK 8u	   /* the same once UDP_OS_QUIET went with no DATA between */
#define UDP_OS_QUIET 256u	   /* one-sided datagrams sent before a transfer counts as alone */
#define UDP_OS_HOLDS 4u		   /* drains in a row that hold them back while DATA is pending */
#define UDP_RD_GROUP 8u		   /* chunks an RD_REQ asks for once some are in flight */
#define UDP_RTO_MIN_NS 2000000ull  /* first retransmission after 2 ms */
#define UDP_RTO_MAX_NS 50000000ull /* doubling up to 50 ms */
#define UDP_RX_MAX_PASSES 4	   /* recvmmsg() calls per rx_burst() */
#define UDP_TX_STAGE 2048u	   /* a lone datagram up to this size is sent from one copy */
/* Of each gap between two polls of the one-sided ops, what their timeout counts. */
#define UDP_OS_GAP_NS UDP_RTO_MAX_NS

enum udp_type {
	UDP_T_DATA = 1,
	UDP_T_RD_REQ = 2,
	UDP_T_RD_DATA = 3,
	UDP_T_WR_DATA = 4,
	UDP_T_WR_ACK = 5,
	UDP_T_NAK = 6,
};

struct udp_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint32_t op_id;
	uint32_t chunk;
	uint32_t status;
};
static_assert(sizeof(struct udp_hdr) == 16, "udp_hdr is 16 bytes on the wire");

struct udp_ext {
	uint64_t raddr; /* start of the whole operation at the server */
	uint64_t len;	/* length of the whole operation */
	uint64_t key;	/* the server's grant (or open registration) key */
	uint64_t token; /* the requester's session token (set_peer_token) */
	uint32_t chunk_size;
	uint32_t reserved; /* 0 */
};
static_assert(sizeof(struct udp_ext) == 40, "udp_ext is 40 bytes on the wire");
static_assert(UDP_OS_WINDOW <= 64, "the window fits a 64-bit mask");
static_assert(URPC_IS_POW2(UDP_OS_OPS), "op table size is a power of two");

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the udp transport assumes a little-endian host (the wire format is little-endian)"
#endif

struct urpc_xdp;
struct urpc_xdp_peer;

struct urpc_tp_peer {
	struct sockaddr_in sa;
	/* xdp endpoints: the frame headers to this peer; NULL: the kernel socket carries it */
	struct urpc_xdp_peer *xp;
	uint64_t token; /* the session's, carried by one-sided requests (set_peer_token) */
	uint32_t nonce;
	uint32_t chunk_size; /* one-sided payload per datagram to this peer */
	/*
	 * One-sided window (issue 32): chunks of own operations to this peer
	 * in flight at once, all operations together (set_peer_window; 0:
	 * UDP_OS_WINDOW), those in flight now (sent, not done), and the
	 * operations: each keeps at most its share (window / operations, one
	 * at least) in flight, so that they move on together, as before.
	 */
	uint32_t os_window;
	uint32_t os_inflight;
	uint32_t os_nops; /* own operations to it not done: each gets its share of the window */
	/*
	 * One chunk at a time is timed (never a resent one): its operation's
	 * id + 1 (0: none), its index and when it left; its round trip waits
	 * in os_rtt_ns (0: none) for peer_os_rtt().
	 */
	uint32_t os_timed_op;
	uint32_t os_timed_chunk;
	uint64_t os_timed_ns;
	uint64_t os_rtt_ns;
	struct urpc_tp_peer *next;
	struct urpc_tp_peer *prev;
};

enum udp_op_state {
	UDP_OP_FREE = 0,
	UDP_OP_ACTIVE,
	UDP_OP_DONE, /* finished, completion not reaped yet */
};

/*
 * A one-sided operation. Chunks below @base are done; bit i of @done_mask
 * says chunk base + i is done; chunks in [base, next) have been sent.
 */
struct udp_op {
	enum udp_op_state state;
	enum urpc_tp_op kind;
	int status;
	uint16_t gen;
	struct urpc_tp_peer *peer;
	uint8_t *local;
	uint32_t lkey;
	uint64_t raddr;
	uint64_t rkey;
	uint64_t len;
	uint64_t wr_id;
	uint32_t chunk_size; /* the smaller of ours and what the peer receives whole */
	uint32_t nchunks;
	uint32_t base;
	uint32_t next;
	uint64_t done_mask;
	uint64_t progress_ns; /* last time a chunk was done (or the post) */
	uint64_t rto_ns;
	uint64_t retry_at_ns;
};

/* One queued outgoing one-sided datagram's headers. */
struct udp_ctl_hdrs {
	struct udp_hdr h;
	struct udp_ext e;
};

struct udp_tp {
	struct urpc_tp base;
	int fd;
	struct sockaddr_in local;
	uint32_t nonce;
	uint32_t chunk_size; /* one-sided payload per datagram */

	/* receive ring: rq_depth slots of slot_size bytes */
	uint8_t *ring;
	size_t slot_size;
	struct sockaddr_in *rx_src; /* source of each slot's datagram */
	uint32_t *rx_len;	    /* datagram length of each slot */
	struct iovec *rx_iov;	    /* one per slot */
	uint8_t *held;		    /* slot lent to the caller or pending */
	uint32_t *free_stk;	    /* free slots */
	uint32_t nfree;
	uint32_t *pend; /* received DATA slots not yet handed out (FIFO) */
	uint32_t pend_head;
	uint32_t pend_cnt;
	struct mmsghdr rx_msgs[UDP_RX_BATCH];
	uint32_t rx_slot[UDP_RX_BATCH];
	unsigned rx_armed; /* rx_msgs set up for the top rx_armed free slots; 0: redo */
	unsigned rx_last;  /* datagrams the last recvmmsg() returned */
	bool rx_single;	   /* datagrams come one at a time: ask recvmmsg() for one */

	/* DATA send arrays, sq_depth entries */
	struct mmsghdr *tx_msgs;
	struct iovec *tx_iov; /* 3 per entry */
	struct udp_hdr *tx_hdrs;
	uint8_t *tx_stage; /* UDP_TX_STAGE bytes: a lone datagram, contiguous */

	/* one-sided send batch */
	struct mmsghdr ctl_msgs[UDP_CTL_BATCH];
	struct iovec ctl_iov[UDP_CTL_BATCH][3];
	struct udp_ctl_hdrs ctl_hdrs[UDP_CTL_BATCH];
	struct sockaddr_in ctl_dst[UDP_CTL_BATCH];
	unsigned nctl;	   /* queued */
	unsigned ctl_off;  /* of them, sent (urpc__udp_os_flush_some()) */
	unsigned os_holds; /* times in a row they waited for pending DATA (urpc__udp_os_hold()) */
	unsigned os_quiet; /* one-sided datagrams sent since DATA was found, to UDP_OS_QUIET */

	/* one-sided state */
	struct udp_op ops[UDP_OS_OPS];
	unsigned nops; /* ops not FREE */
	/* When the ops' timers last ran (or the first op was posted). */
	uint64_t os_seen_ns;
	struct urpc_sw_mr_table mrs;
	/*
	 * Device memory (URPC_TP_ACCESS_DEVICE): RD_DATA of a grant on it is
	 * copied by the driver into the slot of @dev_stage of its entry in
	 * the one-sided send batch (UDP_CTL_BATCH slots of UDP_MAX_DGRAM
	 * bytes), allocated while device registrations exist (@ndev).
	 */
	uint8_t *dev_stage;
	uint32_t ndev;

	/* test knob */
	double drop_p;
	struct urpc_rand drop_rng;

	struct urpc_tp_peer *peers;

	/*
	 * While every peer has one address (same_sa), the socket is connected
	 * to it (connected): the kernel then keeps the route, and a send needs
	 * no lookup. Only a socket whose port is its own (port_locked) may be:
	 * undoing connect() would lose an ephemeral port.
	 */
	struct sockaddr_in same_sa;
	uint32_t npeers;
	uint32_t nsame; /* peers whose address is same_sa */
	bool port_locked;
	bool connected;

	/*
	 * An xdp endpoint (xdp.c) is a udp endpoint whose datagrams go through
	 * AF_XDP sockets (xdp_io.h) instead of the kernel socket, which then
	 * only holds the port and carries the peers on this host (kpeers of
	 * them: while there are any, the receive path reads it too). NULL and
	 * 0 on a udp endpoint.
	 */
	struct urpc_xdp *xdp;
	uint32_t kpeers;
};

static inline struct udp_tp *to_udp(struct urpc_tp *tp)
{
	return container_of(tp, struct udp_tp, base);
}

/* How the grant table names a peer's side: its IPv4 address and port. */
static inline uint64_t udp_peer_id(const struct sockaddr_in *sa)
{
	return (uint64_t)sa->sin_addr.s_addr << 16 | sa->sin_port;
}

static inline void udp_hdr_init(struct udp_hdr *h, enum udp_type type, uint32_t op_id,
				uint32_t chunk, uint32_t status)
{
	h->magic = UDP_MAGIC;
	h->version = UDP_VERSION;
	h->type = (uint8_t)type;
	h->op_id = op_id;
	h->chunk = chunk;
	h->status = status;
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_INT_H */
