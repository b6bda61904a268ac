/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport of a build without libxdp, libbpf or clang's BPF
 * target: create() says what is missing and returns -EOPNOTSUPP; the
 * datapath entry points of xdp_io.h exist for the udp files and are never
 * called (no endpoint has u->xdp). urpc-info's clean-up has nothing to do.
 */
#define _GNU_SOURCE /* struct mmsghdr in udp_int.h; must precede every include */
#define URPC_LOG_MODULE "xdp"
#include <errno.h>

#include "../util/log.h"
#include "tp_default.h"
#include "xdp_io.h"
#include "xdp_tool.h"

int urpc__xdp_tx(struct udp_tp *u, const struct urpc_tp_peer *peer, const struct iovec *iov,
		 unsigned niov)
{
	return 0;
}

int urpc__xdp_tx_data(struct udp_tp *u, const struct urpc_tp_peer *peer, const void *a,
		      uint32_t alen, const void *b, uint32_t blen)
{
	return 0;
}

void urpc__xdp_kick(struct udp_tp *u)
{
}

unsigned urpc__xdp_rx(struct udp_tp *u, uint32_t *slots, uint32_t *lens, unsigned max)
{
	return 0;
}

int urpc__xdp_cleanup(const char *ifname)
{
	return -EOPNOTSUPP;
}

int urpc__xdp_query(const char *ifname, unsigned *endpoints, bool *generic)
{
	return -EOPNOTSUPP;
}

static int xdp_none_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	URPC_ERR(cfg->id, "this build has no xdp transport: install libxdp-dev, libbpf-dev and "
			  "clang (scripts/deps.sh), then configure and build again");
	return -EOPNOTSUPP;
}

static const struct urpc_tp_ops xdp_none_ops = {
	.name = "xdp",
	.create = xdp_none_create,
};

const struct urpc_tp_ops *urpc__tp_xdp_ops(void)
{
	return &xdp_none_ops;
}
