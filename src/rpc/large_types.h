/* SPDX-License-Identifier: MIT */
/*
 * The types of large messages (docs/ENGINE.md, "Large messages"): the
 * descriptor a datagram carries, an entry of the Rpc's table of one-sided
 * operations, a server's large stored response and a client's large
 * request kept until its grant may go. Types only; large.c owns them.
 *
 * May include: mem/, transport/, util/, pkthdr.h.
 */
#ifndef URPC_RPC_LARGE_TYPES_H
#define URPC_RPC_LARGE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h>

#include "../transport/transport.h"
#include "../util/compiler.h"
#include "pkthdr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The datagram of a large message (struct urpc_large_pkt) is in pkthdr.h. */

enum urpc_os_kind {
	URPC_OS_SRV_REQ = 1,  /* server reads a large request's payload */
	URPC_OS_CLI_RESP = 2, /* client reads a large response into its buffer */
};

/*
 * A one-sided operation of a large message, indexed by the wr_id given to
 * the transport. While @orphan is false its session and slot are alive and
 * wait for it; an orphan's session is gone: it only cleans up (frees the
 * server's buffer, or runs the client's continuation with @status once the
 * transport no longer writes into the response buffer).
 */
struct urpc_os_op {
	enum urpc_os_kind kind;
	bool busy;
	bool orphan;
	uint32_t sess_num;
	uint32_t slot;
	uint64_t req_num;
	size_t len;		/* bytes read */
	uint8_t req_type;	/* SRV_REQ */
	uint64_t deadline_ns;	/* SRV_REQ: the client's deadline (Rpc clock); 0: none */
	struct urpc_msgbuf buf; /* SRV_REQ: the server's copy of the request */
	/* orphan CLI_RESP: what the continuation gets */
	urpc_cont_fn cont;
	void *tag;
	struct urpc_msgbuf *req;
	struct urpc_msgbuf *resp;
	int status;
	uint16_t next_free;
	uint16_t src_bucket; /* SRV_REQ: its session's source (quota.h); 0: none */
	uint64_t raddr,
		rkey;	   /* the descriptor read (posted again after a time-out, quota.c cuts) */
	uint64_t start_ns; /* SRV_REQ: its first post; 0 once cut (quota.c) */
	uint64_t post_ns;  /* its latest post (server.c, retx.c: read_again()) */
};

/*
 * A server slot's large stored response (large.c): the application's
 * buffer the client READs, and its grant. Cold, so it is not carried by
 * every slot: it lives in a pool buffer of its own, whose handle it keeps
 * (@self) to be freed with.
 */
struct urpc_sslot; /* engine.h */

struct urpc_srv_large {
	struct urpc_msgbuf self;
	struct urpc_msgbuf resp;     /* the response, the library's while it is stored */
	struct urpc_tp_grant grant;  /* ... granted to the client while it is stored */
	struct urpc_srv_large *next; /* on rpc->retiring, once its slot moved on */
	uint32_t sess_num;	     /* ... from this session's slot */
	/* While stored in @slot: on rpc->grants_live, revoked at @expires_ns (quota.c). */
	struct urpc_srv_large *lprev, *lnext;
	struct urpc_sslot *slot;
	uint64_t expires_ns;
	uint32_t src_bucket; /* its session's (session_src.h), whose share it counts in */
};

/*
 * A large request answered while the server had not let go of its grant
 * yet (verbs: its release notice had not come): the grant and the
 * request's continuation, kept on rpc->cli_retiring until the transport
 * may revoke without waiting (large.c); the request's slot is free.
 */
struct urpc_cli_retiring {
	struct urpc_msgbuf self;
	struct urpc_tp_grant grant;
	struct urpc_cli_retiring *next;
	urpc_cont_fn cont;
	void *tag;
	struct urpc_msgbuf *req, *resp; /* lent to the library until the continuation */
	int status;
	uint32_t sess_num;
};

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_LARGE_TYPES_H */
