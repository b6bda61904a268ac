/* SPDX-License-Identifier: MIT */
/*
 * Session-management (SM) packets and the queue that carries them from the
 * Nexus's SM thread to an Rpc.
 *
 * SM packets travel between Nexus endpoints over kernel UDP. On the wire they
 * are a fixed little-endian layout (see sm.c) with magic and version; in
 * memory they are the decoded struct urpc_sm_pkt below. Every packet is a
 * request or a response; requests are retried by their sender on a timer,
 * so the queue may drop when full.
 */
#ifndef URPC_NEXUS_SM_H
#define URPC_NEXUS_SM_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../transport/transport.h"
#include "../util/compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wire-visible: explicit values. */
enum urpc_sm_pkt_type {
	URPC_SM_PKT_CONNECT_REQ = 1,
	URPC_SM_PKT_CONNECT_RESP = 2,
	URPC_SM_PKT_DISCONNECT_REQ = 3,
	URPC_SM_PKT_DISCONNECT_RESP = 4,
	URPC_SM_PKT_PING_REQ = 5,
	URPC_SM_PKT_PING_RESP = 6,
	URPC_SM_PKT_RESET = 7, /* one-way: "this session is gone on my side" */
	/*
	 * One-way: the transport's own control bytes in ep[] (verbs: the RC
	 * QP's number and PSN), client to server or server to client. The
	 * transport retries what needs an answer.
	 */
	URPC_SM_PKT_TP_CTL_C2S = 8,
	URPC_SM_PKT_TP_CTL_S2C = 9,
	/*
	 * Nexus to Nexus heartbeats (nexus_peer.h), sent and answered by the
	 * SM thread, never by an Rpc: seq
	 * how many times the sender declared the receiver failed, token the
	 * digest of the sessions it holds with the receiver (the XOR of their
	 * tokens, nexus_peer.h), ep[32] the
	 * bitmap of the sender's attached Rpc ids (as of nexus_epoch). NX_PING is answered with
	 * NX_PONG; both refresh the peer.
	 */
	URPC_SM_PKT_NX_PING = 10,
	URPC_SM_PKT_NX_PONG = 11,
	/*
	 * The server's Nexus answers a CONNECT_REQ without a valid cookie with
	 * this, and allocates nothing (sm_cookie.h): cookie is the one to echo,
	 * the other fields those of the request. Routed to client_rpc_id.
	 */
	URPC_SM_PKT_CONNECT_COOKIE = 12,
	/*
	 * Never on the wire: the Nexus tells its Rpcs that a peer's
	 * generations moved, so that sleeping ones look at once.
	 */
	URPC_SM_PKT_NX_NOTICE = 13,
};
#define URPC_SM_PKT_WIRE_MAX URPC_SM_PKT_CONNECT_COOKIE
const char *urpc__sm_pkt_type_str(enum urpc_sm_pkt_type t);

/* Is @t a request (sent by the client side) or a response? */
static inline int urpc__sm_pkt_is_req(enum urpc_sm_pkt_type t)
{
	return t == URPC_SM_PKT_CONNECT_REQ || t == URPC_SM_PKT_DISCONNECT_REQ ||
	       t == URPC_SM_PKT_PING_REQ;
}

/*
 * A decoded SM packet. Sessions are named from both ends: the client's
 * (rpc id, session number) and the server's. @token is the session's random
 * token, chosen by the client at connect and carried by every datapath
 * packet of the session. @status is 0 or -errno (sent as a positive code).
 */
/* Is @t addressed to the server's Rpc (else to the client's)? */
static inline int urpc__sm_pkt_to_server(enum urpc_sm_pkt_type t)
{
	return urpc__sm_pkt_is_req(t) || t == URPC_SM_PKT_TP_CTL_C2S;
}

struct urpc_sm_pkt {
	enum urpc_sm_pkt_type type;
	int32_t status;
	uint8_t client_rpc_id;
	uint8_t server_rpc_id;
	uint8_t transport; /* enum urpc_transport_kind of the sender's Rpc */
	/*
	 * CONNECT_REQ: the session window the client proposes; CONNECT_RESP:
	 * the one the server agreed (never larger). A power of two; 0 (what
	 * peers before this field sent, and every other packet) means 8.
	 */
	uint8_t window;
	uint32_t client_sess;
	uint32_t server_sess;
	uint64_t token;
	uint64_t seq;	  /* request number chosen by the sender; echoed in the response */
	uint32_t max_msg; /* the sender's largest message data size */
	uint16_t ep_len;  /* transport endpoint bytes of the sender's Rpc (connect only) */
	uint8_t ep[URPC_TP_EP_MAX];
	/* Set by the sending Nexus (nexus_peer.h explains their use): */
	uint64_t nexus_inc;   /* its incarnation */
	uint64_t nexus_epoch; /* its count of Rpc attaches and detaches */
	uint32_t rpc_inc;     /* the sending Rpc's attach number; 0: the Nexus's own */
	/*
	 * CONNECT_REQ: the cookie the server's Nexus gave the sender's
	 * address (0: none yet); CONNECT_COOKIE: the one to use. 0 elsewhere.
	 */
	uint64_t cookie;
	/*
	 * Set by the sending Nexus (nexus_auth.h): its random contribution to
	 * the secret it shares with the receiver (0: it has none yet), and the
	 * packet's MAC under that secret (0: not signed). The receiver checks
	 * the MAC on the wire bytes; here it is only what was read.
	 */
	uint64_t nx_nonce;
	uint64_t mac;
	struct sockaddr_in from; /* filled on receive: the sending Nexus's address */
	/*
	 * Set on receive (not on the wire): an unsigned answer from a peer
	 * whose incarnation is not the one this Nexus knew (a restarted process).
	 */
	bool peer_restarted;
};

/* Largest encoded SM packet, in bytes. */
#define URPC_SM_PKT_MAX 160

/* Bytes of an SM packet without its endpoint: the smallest on the wire. */
#define URPC_SM_HDR_LEN 86

/* Where the MAC lies in an encoded packet (8 bytes, little-endian). */
#define URPC_SM_OFF_MAC 78

/* Encode @p into @buf (at least URPC_SM_PKT_MAX bytes); returns the length. */
size_t urpc__sm_encode(const struct urpc_sm_pkt *p, uint8_t *buf);

/*
 * Decode and validate @len bytes. 0, or -EPROTO (bad magic, version, type,
 * length or ep_len); @p is then unspecified. Never reads past @len.
 */
int urpc__sm_decode(const uint8_t *buf, size_t len, struct urpc_sm_pkt *p);

/*
 * Single-producer single-consumer queue of SM packets: the Nexus's SM thread
 * pushes, the owning Rpc pops in its event loop. Lock-free; the indices live
 * on separate cache lines.
 *
 * Idle waiting: a consumer that wants to sleep announces it with
 * urpc__sm_queue_sleep_begin(), pops once more, and only if that found
 * nothing sleeps in poll() on its wake_fd (an eventfd) with POLLIN; then it
 * calls urpc__sm_queue_sleep_end(). A push signals wake_fd only while a
 * sleep is announced, so a consumer that never sleeps costs the producer no
 * syscall. No wake-up is lost: see urpc__sm_queue_push() in sm.c.
 */
#define URPC_SM_QUEUE_SIZE 256 /* power of two */
static_assert(URPC_IS_POW2(URPC_SM_QUEUE_SIZE), "SM queue size must be a power of two");

struct urpc_sm_queue {
	_Atomic uint32_t head URPC_CACHE_ALIGNED; /* next slot to push; written by the producer */
	_Atomic uint32_t tail URPC_CACHE_ALIGNED; /* next slot to pop; written by the consumer */
	atomic_bool sleeping; /* a sleep is announced; written by the consumer */
	int wake_fd;	      /* eventfd a push signals while @sleeping; -1: none */
	struct urpc_sm_pkt ring[URPC_SM_QUEUE_SIZE] URPC_CACHE_ALIGNED;
};

/* Make @q empty, without a wake_fd. Thread: any, while neither side uses @q. */
void urpc__sm_queue_init(struct urpc_sm_queue *q);

/*
 * Give @q the eventfd @fd (owned by the consumer; -1 for none) that push()
 * signals while the consumer sleeps. Before @q is attached to the Nexus:
 * the attach publishes it to the producer.
 */
void urpc__sm_queue_set_wake_fd(struct urpc_sm_queue *q, int fd);

/*
 * Producer only. 0, or -EAGAIN when full (the packet is dropped; its sender
 * retries). Writes wake_fd when the consumer has announced a sleep.
 */
int urpc__sm_queue_push(struct urpc_sm_queue *q, const struct urpc_sm_pkt *p);

/*
 * Producer only: push() without the wake-up, for a burst of pushes that
 * ends with one urpc__sm_queue_kick(). 0, or -EAGAIN when full.
 */
int urpc__sm_queue_push_quiet(struct urpc_sm_queue *q, const struct urpc_sm_pkt *p);

/*
 * Producer only: wake the consumer if it sleeps, for every push_quiet()
 * before this call (the same ordering as push()).
 */
void urpc__sm_queue_kick(struct urpc_sm_queue *q);

/* Consumer only. 1 and *p filled, or 0 when empty. */
int urpc__sm_queue_pop(struct urpc_sm_queue *q, struct urpc_sm_pkt *p);

/* Consumer only: how many packets a pop would find now; 0: none (the event loop's test). */
uint32_t urpc__sm_queue_waiting(const struct urpc_sm_queue *q);

/*
 * Consumer only, with a wake_fd set: announce a sleep. The consumer must
 * pop (or look at the queue) after this call and before it sleeps.
 */
void urpc__sm_queue_sleep_begin(struct urpc_sm_queue *q);

/*
 * Consumer only: the sleep (or the attempt) is over; pushes stop signalling.
 * @signalled: poll() reported wake_fd readable, so its count is read back to
 * zero here. A signal that comes after this call is consumed by the next
 * sleep, which it ends at once (a spurious wake-up, never a lost one).
 */
void urpc__sm_queue_sleep_end(struct urpc_sm_queue *q, bool signalled);

/* Has the consumer announced a sleep? Thread: any (tests and diagnostics). */
bool urpc__sm_queue_is_sleeping(const struct urpc_sm_queue *q);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_SM_H */
