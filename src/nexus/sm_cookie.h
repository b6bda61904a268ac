/* SPDX-License-Identifier: MIT */
/*
 * Connect cookies: stateless address validation before a server allocates
 * anything for a CONNECT_REQ, as a SYN cookie does for TCP.
 *
 * A server's Nexus answers a CONNECT_REQ whose cookie is not valid for the
 * datagram's source address with CONNECT_COOKIE, which carries one that is;
 * the client's Rpc echoes it in its next CONNECT_REQ, and only then does the
 * request reach the server Rpc. A sender that cannot receive at the address
 * it claims never gets past the Nexus, and the Nexus keeps no state for it.
 *
 * The cookie is a keyed function of the source address (IPv4 and port) and
 * the time, in slots of URPC_SM_COOKIE_SLOT_NS: ChaCha20's block function
 * (util/csprng.h) under a per-Nexus 256-bit key from urpc__entropy(), with
 * the address and slot as the nonce and counter. It is valid in its slot and
 * the next, so for between one and two slots; never 0 (0: "no cookie").
 * Owns nothing but the caller's key. Calls: util/csprng.h, util/seam.h.
 * Thread: any (the key is read-only once made).
 */
#ifndef URPC_NEXUS_SM_COOKIE_H
#define URPC_NEXUS_SM_COOKIE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A slot of 2^32 ns (about 4.3 s): a cookie lives 4.3 to 8.6 s. */
#define URPC_SM_COOKIE_SLOT_SHIFT 32

struct urpc_sm_cookie_key {
	uint32_t k[8];
};

/* A fresh key from urpc__entropy() (the simulator's seeded source under test). */
void urpc__sm_cookie_key_init(struct urpc_sm_cookie_key *key);

/* The cookie for source @from at @now_ns (urpc__now_ns() time). Never 0. */
uint64_t urpc__sm_cookie_make(const struct urpc_sm_cookie_key *key, const struct sockaddr_in *from,
			      uint64_t now_ns);

/* Is @cookie one that urpc__sm_cookie_make() gave @from in this slot or the last? */
bool urpc__sm_cookie_check(const struct urpc_sm_cookie_key *key, const struct sockaddr_in *from,
			   uint64_t now_ns, uint64_t cookie);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_SM_COOKIE_H */
