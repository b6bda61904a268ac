/* SPDX-License-Identifier: MIT */
/*
 * The default ops of the transport contract (transport.h), for the ops
 * tables of transports that lack a capability, as rdma-core fills its
 * provider tables from dummy_ops.c: the int ones return -ENOTSUP, the void
 * ones do nothing. The floor of src/transport: owns nothing, calls nothing,
 * and includes no header of ours (the types are only named), so every
 * transport, and transport.c, may use it without a circle.
 */
#ifndef URPC_TRANSPORT_TP_DEFAULT_H
#define URPC_TRANSPORT_TP_DEFAULT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct urpc_tp;
struct urpc_tp_mr;
struct urpc_tp_peer;
struct urpc_tp_rx;

int urpc__tp_default_wait_arm(struct urpc_tp *tp);
void urpc__tp_default_wait_ack(struct urpc_tp *tp);
int urpc__tp_default_reg_dmabuf(struct urpc_tp *tp, int fd, uint64_t offset, size_t len,
				uint64_t iova, unsigned access, struct urpc_tp_mr *mr);
int urpc__tp_default_ep_host(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr);
int urpc__tp_default_cancel(struct urpc_tp *tp, uint64_t wr_id, int status);
int urpc__tp_default_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns);
int urpc__tp_default_ctl_pop(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf);
int urpc__tp_default_tx_now(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf,
			    uint32_t len);
int urpc__tp_default_rx_run(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n);
void urpc__tp_default_ctl_push(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			       size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_TP_DEFAULT_H */
