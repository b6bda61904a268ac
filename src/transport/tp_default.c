/* SPDX-License-Identifier: MIT */
/* The default ops (tp_default.h): owns nothing, calls nothing. */
#include "tp_default.h"

#include <errno.h>

int urpc__tp_default_wait_arm(struct urpc_tp *tp)
{
	return -ENOTSUP;
}

void urpc__tp_default_wait_ack(struct urpc_tp *tp)
{
}

int urpc__tp_default_reg_dmabuf(struct urpc_tp *tp, int fd, uint64_t offset, size_t len,
				uint64_t iova, unsigned access, struct urpc_tp_mr *mr)
{
	return -ENOTSUP;
}

int urpc__tp_default_ep_host(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr)
{
	return -ENOTSUP;
}

int urpc__tp_default_cancel(struct urpc_tp *tp, uint64_t wr_id, int status)
{
	return -ENOTSUP;
}

int urpc__tp_default_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns)
{
	return -ENOTSUP;
}

int urpc__tp_default_ctl_pop(struct urpc_tp *tp, struct urpc_tp_peer **peer, uint8_t *buf)
{
	return -ENOTSUP;
}

int urpc__tp_default_tx_now(struct urpc_tp *tp, struct urpc_tp_peer *peer, const void *buf,
			    uint32_t len)
{
	return -ENOTSUP;
}

int urpc__tp_default_rx_run(struct urpc_tp *tp, const struct urpc_tp_rx **rx, unsigned n)
{
	return -ENOTSUP;
}

void urpc__tp_default_ctl_push(struct urpc_tp *tp, struct urpc_tp_peer *peer, const uint8_t *buf,
			       size_t len)
{
}
