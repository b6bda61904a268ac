/* SPDX-License-Identifier: MIT */
/*
 * The authenticated control plane: a secret per pair of Nexuses, and the
 * MAC that signs every SM packet between them.
 *
 * The secret. Each side of a pair contributes 64 bits from its CSPRNG: the
 * entry it keeps for the other (nexus_peer.h) draws nonce_local when it is
 * made, and every packet it sends carries it (nx_nonce). The peer's
 * nonce_remote is learnt only in a handshake that proves it:
 *  - a server's Nexus takes a client's from a CONNECT_REQ whose connect
 *    cookie is valid for its source (sm_cookie.h: only a sender that
 *    receives at that address has one);
 *  - a client's Nexus takes a server's from a CONNECT_RESP signed under the
 *    secret that the nonce makes with its own (which only a receiver of
 *    its CONNECT_REQ knows).
 * A packet from A to B is signed with SipHash-2-4 (util/siphash.h) under
 * the key (A's nonce, B's nonce): each direction has its own key, so a
 * packet sent back to its sender does not verify.
 *
 * The rule. A packet that verifies acts as it always did: it refreshes the
 * peer, and may carry news of a restart (a new incarnation), of Rpcs that
 * came or went, or that the peer declared us failed. A packet that does
 * not changes nothing of the peer and is counted (drop_auth); only answers
 * to a client Rpc (CONNECT_COOKIE, DISCONNECT_RESP, PING_RESP, RESET)
 * that carry no MAC at all still reach it, where they
 * act on one session only, and only with its 64-bit secret token: that is
 * how a server that lost its state (a restart) can still tell a client
 * that a session is gone. A restart is thus learnt from a handshake of the
 * new process (its new nonce makes a new secret), or from the old one's
 * silence, never from a bare claim.
 *
 * May call: nexus_peer.h, util/siphash.h. Callers hold the Nexus lock.
 */
#ifndef URPC_NEXUS_AUTH_H
#define URPC_NEXUS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "nexus_peer.h"
#include "sm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a received packet may do. */
enum urpc_nxa_verdict {
	URPC_NXA_OK,	     /* signed by the peer (or a proved handshake): everything */
	URPC_NXA_ROUTE_ONLY, /* to its Rpc, which checks the session's token; no peer state */
	URPC_NXA_REFUSED,    /* nothing: counted in drop_auth */
};

/*
 * The MAC of @len encoded bytes at @buf (its MAC field read as 0) sent by
 * the side whose nonce is @from_nonce to the side of @to_nonce.
 */
uint64_t urpc__nxa_mac(uint64_t from_nonce, uint64_t to_nonce, const uint8_t *buf, size_t len);

/* Sign the encoded packet @buf of @len bytes for peer @p (which has a secret). */
void urpc__nxa_sign(const struct urpc_nx_peer *p, uint8_t *buf, size_t len);

/*
 * The verdict on decoded packet @pkt, received as @len bytes at @buf, from
 * pkt->from. A CONNECT_REQ must have passed its cookie check. Takes in the
 * peer's nonce when the packet proves it (the handshakes above): may make
 * the peer's entry (without a reference, living @ttl_ns). Caller holds the
 * Nexus lock; @now is urpc__now_ns() time.
 */
enum urpc_nxa_verdict urpc__nxa_check(struct urpc_nx_peers *t, const struct urpc_sm_pkt *pkt,
				      const uint8_t *buf, size_t len, uint64_t ttl_ns,
				      uint64_t now);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_AUTH_H */
