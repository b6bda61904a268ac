/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's batch of outgoing one-sided datagrams (udp_ctl.c):
 * what udp_os.c, udp_serve.c and udp_io.c queue and send through it. Its
 * own header, so that udp_ctl.c depends on nothing above it.
 */
#ifndef URPC_TRANSPORT_UDP_CTL_H
#define URPC_TRANSPORT_UDP_CTL_H

#include "udp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Queue one one-sided datagram to @dst: the header, @ext when not NULL, and
 * @len bytes at @data, read when the batch is sent (udp_ctl.c).
 */
void urpc__udp_ctl_queue(struct udp_tp *u, const struct sockaddr_in *dst, enum udp_type type,
			 uint32_t op_id, uint32_t chunk, uint32_t status, const struct udp_ext *ext,
			 const void *data, size_t len);

/*
 * DATA for the caller is pending: may the queued one-sided datagrams wait
 * until it went up (true, at most UDP_OS_HOLDS times in a row), or must a
 * slice go now (false)? udp_io.c's drain and poll_completions().
 */
bool urpc__udp_os_hold(struct udp_tp *u);

/* Send the queued one-sided datagrams; what does not fit is lost (retried). */
void urpc__udp_os_flush(struct udp_tp *u);
/*
 * Send at most @max of the queued one-sided datagrams, the oldest first;
 * the rest stay queued for the next call (issue 32: udp_io.c's drain).
 */
void urpc__udp_os_flush_some(struct udp_tp *u, unsigned max);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_CTL_H */
