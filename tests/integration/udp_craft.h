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
