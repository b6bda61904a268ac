/* SPDX-License-Identifier: MIT */
/*
 * Who may open a server session, checked before one is allocated for a
 * CONNECT_REQ (which the Nexus let through with a valid cookie, so its
 * source address is proven, sm_cookie.h):
 *
 * - its datapath endpoint must be on the host it came from (the
 *   transport's ep_host; loop and verbs endpoints are not IP hosts and
 *   pass), so no session sends to a third address;
 * - the per-source limit (urpc_rpc_opts.max_sessions_per_source):
 *   how many of its server sessions one source IPv4 address may hold, so
 *   that one host cannot take every session number.
 *
 * The limit is bounded in memory whatever the number of sources: the counts live in
 * URPC_SRC_BUCKETS buckets chosen by a keyed hash of the address (a secret
 * per Rpc, so a client cannot aim at another's bucket). Sources that share
 * a bucket share its limit; with the limit off (0, the default) nothing is
 * allocated or counted. Cold: connect and teardown only.
 */
#ifndef URPC_RPC_SESSION_SRC_H
#define URPC_RPC_SESSION_SRC_H

#include <stdbool.h>
#include <stdint.h>

#include "../nexus/sm.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_SRC_BUCKETS 4096u /* 16 KiB of counts per Rpc with a limit */

/*
 * Fair shares by default (issue 31): max_sessions is sized so that the
 * sessions of one Rpc take at most 1/URPC_SRC_MEM_SHARE of the host's
 * memory at URPC_SRC_SESSION_BYTES each (measured: 1,256 B a session), at
 * least URPC_SRC_MIN_SESSIONS and at most URPC_RPC_DEFAULT_MAX_SESSIONS;
 * one source address may hold 1/URPC_SRC_SOURCE_SHARE of them.
 */
#define URPC_SRC_MEM_SHARE 16u
#define URPC_SRC_SESSION_BYTES 1280u
#define URPC_SRC_MIN_SESSIONS 4096u
#define URPC_SRC_SOURCE_SHARE 8u

/* The default of urpc_rpc_opts.max_sessions on this host. Thread: any. */
uint32_t urpc__src_default_max_sessions(void);

/* Set up @rpc's counts for a limit of @limit (0 or >= max_sessions: off). 0 or -ENOMEM. */
int urpc__src_init(struct urpc_rpc *rpc, uint32_t limit);
void urpc__src_fini(struct urpc_rpc *rpc);

/* Sessions @ip (network order) holds, as far as the buckets tell. */
uint32_t urpc__src_count(const struct urpc_rpc *rpc, uint32_t ip);

/*
 * May CONNECT_REQ @p open a server session? 0; -EADDRNOTAVAIL (its endpoint is
 * on another host) or -ENOSPC (its source is at the limit), each logged
 * with what to change.
 */
int urpc__src_admit(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p);

/*
 * Why a server refused our connect with @status, for the client's log
 * line: the limits and what to change; NULL for other statuses.
 */
const char *urpc__src_refusal_str(int status);

/*
 * Server session @s of CONNECT_REQ @p has its peer: where its endpoint is
 * an IP host and the transport tells a datagram's source (udp), it is
 * unproven until a datagram carrying its token comes from that endpoint's
 * address and port (urpc__src_prove); until then the server sends it
 * nothing, so a session that names another process's port (on the
 * client's host, as admit() lets it) sends there no READ, answer or
 * acknowledgement. Elsewhere, and for client sessions, rx_token = token.
 */
void urpc__src_bind(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_sm_pkt *p);

/*
 * A datagram of unproven server session @s, its header and token valid,
 * came in transport entry @e (NULL: unknown): true, and @s proven, when
 * it came from the session's endpoint; else false, counted in
 * drop_unproven. Cold: once per session, and per forged datagram.
 */
bool urpc__src_prove(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_tp_rx *e);

/*
 * "No such session" (URPC_PKT_NOSESS). A request datagram (its header
 * valid) for a session this Rpc does not have, or not with its token, in
 * transport entry @e: answer its source, where the transport can
 * (tx_reply), with the header alone (never larger than the request), at
 * most URPC_NOSESS_MAX per URPC_NOSESS_WINDOW_NS; counted in nosess_tx.
 * The client's side is in evloop.c (notice_rx()).
 */
#define URPC_NOSESS_MAX 256u
#define URPC_NOSESS_WINDOW_NS 100000000ull
void urpc__src_notice_tx(struct urpc_rpc *rpc, const struct urpc_pkthdr *h,
			 const struct urpc_tp_rx *e);

/* Count server session @s, admitted by urpc__src_admit(), against @ip. */
void urpc__src_take(struct urpc_rpc *rpc, struct urpc_session *s, uint32_t ip);

/* Uncount @s (session_table.c, when it is freed); nothing for others. */
void urpc__src_put(struct urpc_rpc *rpc, struct urpc_session *s);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_SRC_H */
