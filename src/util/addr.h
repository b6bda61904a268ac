/* SPDX-License-Identifier: MIT */
/* IPv4 "host:port" addresses for session management. */
#ifndef URPC_UTIL_ADDR_H
#define URPC_UTIL_ADDR_H

#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Parse "a.b.c.d:port" (or "host:port" resolved with getaddrinfo, IPv4 only).
 * 0 or -EINVAL. Thread: any. Not for the datapath.
 */
int urpc__parse_host_port(const char *s, struct sockaddr_in *out);

#ifdef __cplusplus
}
#endif

#endif /* URPC_UTIL_ADDR_H */
