/* SPDX-License-Identifier: MIT */
/*
 * Tests that play an attacker on the udp transport: one-sided datagrams
 * built from the wire format (transport/udp_int.h) and sent from any
 * socket. Header-only, for test files.
 */
#ifndef URPC_TEST_UDP_CRAFT_H
#define URPC_TEST_UDP_CRAFT_H

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/udp_int.h"

/* A one-sided request as a malicious peer may write it: every field its own. */
struct udp_craft {
	enum udp_type type; /* UDP_T_RD_REQ or UDP_T_WR_DATA (or anything else) */
	uint32_t op_id;
	uint32_t chunk;
	struct udp_ext e;
	const void *payload; /* WR_DATA: the chunk's bytes */
	size_t plen;
	size_t cut; /* bytes left off the end of the datagram (a truncated one) */
};

/* Send @c on @fd to @to, exactly as described. */
static inline void udp_send_craft(int fd, const struct sockaddr_in *to, const struct udp_craft *c)
{
	uint8_t pkt[sizeof(struct udp_hdr) + sizeof(struct udp_ext) + 2048];
	struct udp_hdr h;
	size_t n = sizeof(h) + sizeof(c->e) + c->plen;

	cr_assert_leq(c->plen, 2048);
	cr_assert_leq(c->cut, n);
	udp_hdr_init(&h, c->type, c->op_id, c->chunk, 0);
	memcpy(pkt, &h, sizeof(h));
	memcpy(pkt + sizeof(h), &c->e, sizeof(c->e));
	if (c->plen)
		memcpy(pkt + sizeof(h) + sizeof(c->e), c->payload, c->plen);
	n -= c->cut;
	cr_assert_eq(sendto(fd, pkt, n, 0, (const struct sockaddr *)to, sizeof(*to)), (ssize_t)n);
}

/*
 * Send on @fd to @to an RD_REQ for [raddr, raddr + len), or with @write a
 * WR_DATA of 16 bytes of 0xee at @raddr, naming @key and @token; @op is the
 * operation id the sender would match answers with.
 */
static inline void udp_send_os(int fd, const struct sockaddr_in *to, uint32_t op, bool write,
			       uint64_t raddr, uint64_t len, uint64_t key, uint64_t token)
{
	uint8_t pkt[sizeof(struct udp_hdr) + sizeof(struct udp_ext) + 16];
	struct udp_hdr h;
	struct udp_ext e = {
		.raddr = raddr,
		.len = write ? 16 : len,
		.key = key,
		.token = token,
		.chunk_size = 16,
		.reserved = 0,
	};
	size_t n = sizeof(h) + sizeof(e) + (write ? 16 : 0);

	udp_hdr_init(&h, write ? UDP_T_WR_DATA : UDP_T_RD_REQ, op, 0, 0);
	memcpy(pkt, &h, sizeof(h));
	memcpy(pkt + sizeof(h), &e, sizeof(e));
	memset(pkt + sizeof(h) + sizeof(e), 0xee, 16);
	cr_assert_eq(sendto(fd, pkt, n, 0, (const struct sockaddr *)to, sizeof(*to)), (ssize_t)n);
}

#endif /* URPC_TEST_UDP_CRAFT_H */
