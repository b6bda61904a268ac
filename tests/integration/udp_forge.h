/* SPDX-License-Identifier: MIT */
/*
 * Tests that play an off-path attacker who forges source addresses: UDP
 * datagrams sent through a raw socket, with any source address and port
 * (what a host on a network without anti-spoofing filters can do). Needs
 * CAP_NET_RAW: udp_forge_open() returns -1 without it, and the caller
 * skips with that reason. Header-only, for test files.
 */
#ifndef URPC_TEST_UDP_FORGE_H
#define URPC_TEST_UDP_FORGE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A raw socket that sends UDP datagrams with headers we write, or -1 (no CAP_NET_RAW). */
static inline int udp_forge_open(void)
{
	return socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
}

/*
 * Send @len bytes of @payload on raw socket @fd to @to as if from @from
 * (address and port). The kernel writes the IP header with @from's address
 * (IP_HDRINCL off: the source comes from the route unless we bind, so the
 * header is ours only in UDP; loopback accepts any 127/8 source). The UDP
 * checksum is 0: "none", valid in IPv4.
 */
static inline void udp_forge_send(int fd, const struct sockaddr_in *from,
				  const struct sockaddr_in *to, const void *payload, size_t len)
{
	uint8_t pkt[8 + 2048];
	struct sockaddr_in src = *from;

	cr_assert_leq(len, 2048);
	src.sin_port = 0;
	/* The source address: bind the raw socket to it (any local address is ours to use). */
	cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0 || errno == EINVAL, 1,
		     "bind raw: %s", strerror(errno));
	memcpy(pkt, &from->sin_port, 2);
	memcpy(pkt + 2, &to->sin_port, 2);
	pkt[4] = (uint8_t)((len + 8) >> 8);
	pkt[5] = (uint8_t)(len + 8);
	pkt[6] = pkt[7] = 0;
	memcpy(pkt + 8, payload, len);
	cr_assert_eq(sendto(fd, pkt, len + 8, 0, (const struct sockaddr *)to, sizeof(*to)),
		     (ssize_t)(len + 8), "raw sendto: %s", strerror(errno));
}

#endif /* URPC_TEST_UDP_FORGE_H */
