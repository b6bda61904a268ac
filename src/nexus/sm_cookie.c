/* SPDX-License-Identifier: MIT */
/*
 * Connect cookies (sm_cookie.h). Owns nothing. Calls: util/csprng.h (the
 * ChaCha20 block function), util/seam.h (entropy for the key).
 */
#include "sm_cookie.h"

#include <string.h>

#include "../util/csprng.h"
#include "../util/seam.h"

void urpc__sm_cookie_key_init(struct urpc_sm_cookie_key *key)
{
	urpc__entropy(key->k, sizeof(key->k));
}

/* The cookie of @from in time slot @slot. */
static uint64_t cookie_of(const struct urpc_sm_cookie_key *key, const struct sockaddr_in *from,
			  uint64_t slot)
{
	uint32_t nonce[3], out[16];
	uint64_t c;

	/* The address as it travels (network order), the slot's high half. */
	nonce[0] = from->sin_addr.s_addr;
	nonce[1] = from->sin_port;
	nonce[2] = (uint32_t)(slot >> 32);
	urpc__chacha20_block(key->k, (uint32_t)slot, nonce, out);
	c = (uint64_t)out[0] | (uint64_t)out[1] << 32;
	return c ? c : 1;
}

uint64_t urpc__sm_cookie_make(const struct urpc_sm_cookie_key *key, const struct sockaddr_in *from,
			      uint64_t now_ns)
{
	return cookie_of(key, from, now_ns >> URPC_SM_COOKIE_SLOT_SHIFT);
}

bool urpc__sm_cookie_check(const struct urpc_sm_cookie_key *key, const struct sockaddr_in *from,
			   uint64_t now_ns, uint64_t cookie)
{
	uint64_t slot = now_ns >> URPC_SM_COOKIE_SLOT_SHIFT;

	if (!cookie)
		return false;
	if (cookie == cookie_of(key, from, slot))
		return true;
	return slot && cookie == cookie_of(key, from, slot - 1);
}
