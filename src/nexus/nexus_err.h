/* SPDX-License-Identifier: MIT */
/*
 * The error queue of the Nexus's SM socket (IP_RECVERR, ip(7)): the ICMP
 * errors the kernel reports for datagrams the socket sent, read back with
 * the address each was sent to. Thread: the SM thread.
 */
#ifndef URPC_NEXUS_ERR_H
#define URPC_NEXUS_ERR_H

#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ask the kernel to queue ICMP errors on @fd. 0, or -errno (then none are seen). */
int urpc__sm_err_enable(int fd);

/*
 * Pop one error of @fd's queue: 1 with *@to set when it says that nothing
 * listens where a datagram went (ICMP port unreachable), 0 for any other
 * error, -EAGAIN when the queue is empty. Never blocks.
 */
int urpc__sm_err_pop(int fd, struct sockaddr_in *to);

#ifdef __cplusplus
}
#endif

#endif /* URPC_NEXUS_ERR_H */
