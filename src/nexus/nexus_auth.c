/* SPDX-License-Identifier: MIT */
/*
 * The authenticated control plane (nexus_auth.h): the MAC of an SM packet
 * and the verdict on a received one. Owns nothing (the nonces live in the
 * peer entries). May call: nexus_peer.h, util/siphash.h, libc. Cold: a few
 * packets per peer process and heartbeat interval, and one per SM exchange.
 */
#include "nexus_auth.h"

#include <string.h>

#include "../util/siphash.h"

uint64_t urpc__nxa_mac(uint64_t from_nonce, uint64_t to_nonce, const uint8_t *buf, size_t len)
{
	const uint64_t k[2] = {from_nonce, to_nonce};
	uint8_t copy[URPC_SM_PKT_MAX];

	if (len > sizeof(copy) || len < URPC_SM_OFF_MAC + 8)
		return 0; /* never a valid MAC of a packet (the decoder refuses these) */
	memcpy(copy, buf, len);
	memset(copy + URPC_SM_OFF_MAC, 0, 8);
	return urpc__siphash24(k, copy, len) | 1; /* never 0, which means "unsigned" */
}

static uint64_t get_mac(const uint8_t *buf)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)buf[URPC_SM_OFF_MAC + i] << (8 * i);
	return v;
}

void urpc__nxa_sign(const struct urpc_nx_peer *p, uint8_t *buf, size_t len)
{
	uint64_t mac = urpc__nxa_mac(p->nonce_local, p->nonce_remote, buf, len);
	unsigned i;

	for (i = 0; i < 8; i++)
		buf[URPC_SM_OFF_MAC + i] = (uint8_t)(mac >> (8 * i));
}

/* Did the side of nonce @remote sign @buf for us, of nonce @local? */
static bool signed_by(uint64_t remote, uint64_t local, const uint8_t *buf, size_t len)
{
	uint64_t mac = get_mac(buf);

	return remote && mac && mac == urpc__nxa_mac(remote, local, buf, len);
}

/* May an unsigned packet of type @t still reach its (client) Rpc? */
static bool token_checked(enum urpc_sm_pkt_type t)
{
	switch (t) {
	case URPC_SM_PKT_CONNECT_COOKIE:
	case URPC_SM_PKT_DISCONNECT_RESP:
	case URPC_SM_PKT_PING_RESP:
	case URPC_SM_PKT_RESET:
		return true;
	default:
		return false;
	}
}

enum urpc_nxa_verdict urpc__nxa_check(struct urpc_nx_peers *t, const struct urpc_sm_pkt *pkt,
				      const uint8_t *buf, size_t len, uint64_t ttl_ns, uint64_t now)
{
	struct urpc_nx_peer *p;

	if (pkt->type == URPC_SM_PKT_CONNECT_REQ) {
		/* Its cookie proved the source: a handshake (a new secret, perhaps a restart). */
		if (!pkt->nx_nonce)
			return URPC_NXA_REFUSED;
		p = urpc__nxp_hello(t, &pkt->from, ttl_ns, now);
		if (!p)
			return URPC_NXA_REFUSED;
		p->nonce_remote = pkt->nx_nonce;
		return URPC_NXA_OK;
	}
	if (pkt->type == URPC_SM_PKT_CONNECT_COOKIE)
		return URPC_NXA_ROUTE_ONLY; /* it holds no news of the peer */
	p = urpc__nxp_find(t, &pkt->from);
	if (p && signed_by(p->nonce_remote, p->nonce_local, buf, len))
		return URPC_NXA_OK;
	/* The server's answer to our CONNECT_REQ, under the secret its nonce makes with ours. */
	if (p && pkt->type == URPC_SM_PKT_CONNECT_RESP && pkt->nx_nonce &&
	    signed_by(pkt->nx_nonce, p->nonce_local, buf, len)) {
		p->nonce_remote = pkt->nx_nonce;
		return URPC_NXA_OK;
	}
	if (!pkt->mac && token_checked(pkt->type))
		return URPC_NXA_ROUTE_ONLY;
	return URPC_NXA_REFUSED;
}
