/* SPDX-License-Identifier: MIT */
/*
 * IPv4 "host:port" addresses (addr.h). Owns nothing; calls only libc (the
 * resolver, which may block: not for the datapath).
 */
#include "addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/*
 * A plausible DNS name: letters, digits, '-' and '.', not starting with '-'
 * or '.', and a last label that is not all digits (no top-level domain is;
 * this keeps getaddrinfo from accepting inet_aton forms like "10.1").
 */
static bool is_host_name(const char *h)
{
	bool last_numeric = true;
	const char *c;

	if (!*h || *h == '-' || *h == '.')
		return false;
	for (c = h; *c; c++) {
		if (*c == '.') {
			last_numeric = true;
			continue;
		}
		if (!isalnum((unsigned char)*c) && *c != '-')
			return false;
		if (!isdigit((unsigned char)*c))
			last_numeric = false;
	}
	return !last_numeric;
}

/*
 * Parse "a.b.c.d:port" or "name:port" (IPv4 through getaddrinfo) into @out.
 * The port must be 1..65535 in decimal digits only. 0 or -EINVAL (@out
 * unspecified). Owns nothing. Thread: any; may block in the resolver, so
 * not for the datapath.
 */
int urpc__parse_host_port(const char *s, struct sockaddr_in *out)
{
	struct addrinfo hints, *res = NULL;
	char host[256];
	const char *colon, *c;
	size_t host_len;
	uint32_t port = 0;

	if (!s || !out)
		return -EINVAL;
	colon = strrchr(s, ':');
	if (!colon || colon == s)
		return -EINVAL;
	host_len = (size_t)(colon - s);
	if (host_len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, host_len);
	host[host_len] = '\0';

	if (!colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (c = colon + 1; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		port = port * 10 + (uint32_t)(*c - '0');
	}
	if (port == 0 || port > UINT16_MAX)
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &out->sin_addr) == 1)
		return 0;

	/* Names only; anything else would just make the resolver work for nothing. */
	if (!is_host_name(host))
		return -EINVAL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
		return -EINVAL;
	out->sin_addr = ((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}
