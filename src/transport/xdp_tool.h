/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's program on an interface, for urpc-info (and xdp.c's
 * neighbours): what is attached, and the clean-up after a crash. Defined
 * in xdp_bpf.c (xdp_none.c in a build without libxdp). Cold.
 */
#ifndef URPC_TRANSPORT_XDP_TOOL_H
#define URPC_TRANSPORT_XDP_TOOL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * urpc's program on @ifname: 0 with *@endpoints (entries of its port map:
 * live endpoints, and dead ones a crash left) and *@generic (skb mode);
 * -ENOENT (no XDP program), -EBUSY (another program), -ENODEV,
 * -EOPNOTSUPP (no xdp in this build), or -errno.
 */
int urpc__xdp_query(const char *ifname, unsigned *endpoints, bool *generic);

/*
 * Detach urpc's program from @ifname whatever its maps hold (what a crash
 * left). 0; -ENOENT (none attached), -EBUSY (another program: left alone),
 * -ENODEV, -EOPNOTSUPP, or -errno. For urpc-info --xdp-cleanup.
 */
int urpc__xdp_cleanup(const char *ifname);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_TOOL_H */
