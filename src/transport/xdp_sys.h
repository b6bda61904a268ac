/* SPDX-License-Identifier: MIT */
/*
 * What the xdp transport asks the kernel outside the datapath: the XDP
 * program and its maps (xdp_bpf.c), the interface, routes and neighbours
 * (xdp_nl.c). For xdp.c. Cold: create, resolve, destroy and urpc-info.
 */
#ifndef URPC_TRANSPORT_XDP_SYS_H
#define URPC_TRANSPORT_XDP_SYS_H

#include <stdbool.h>
#include <stdint.h>

#include "xdp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Find urpc's program on x->ifindex, or load and attach it (mode from
 * URPC_XDP_MODE: native, generic, or auto: native, else generic); fills
 * x->prog_fd, ports_fd, xsks_fd, pslot_fd, prog_id, generic. 0, or -errno logged
 * with its cause and fix (another program attached: -EBUSY; no
 * permission: -EPERM).
 */
int urpc__xdp_prog_get(struct urpc_xdp *x, long id);

/*
 * Enter the endpoint's sockets in the maps: a free slot, the sockets at
 * slot * URPC_XDP_MAXQ + queue, then the port. 0 or -errno logged.
 */
int urpc__xdp_maps_add(struct urpc_xdp *x, long id);

/*
 * Serialize creates and destroys on @ifname across threads and processes:
 * an exclusive flock on /run/lock/urpc-xdp.IFNAME.lock (/tmp when /run/lock
 * is not writable), waited for 3 s at most. Returns the fd for
 * urpc__xdp_unlock(), or -1 (no lock could be taken: go on unserialized).
 */
int urpc__xdp_lock(const char *ifname);
void urpc__xdp_unlock(int fd);

/*
 * Undo urpc__xdp_maps_add() and, when no endpoint is left in the port map,
 * detach the program. Closes the map and program fds.
 */
void urpc__xdp_maps_del(struct urpc_xdp *x, long id);

/* The interface: index, MAC, MTU, receive queues, driver. 0 or -errno logged. */
int urpc__xdp_if_info(struct urpc_xdp *x, uint32_t *mtu, char *driver, size_t driver_len, long id);

/*
 * The IPv4 address of x->ifname to use: @want (network order) when the
 * interface has it, else its first. 0 or -EADDRNOTAVAIL logged.
 */
int urpc__xdp_if_addr(struct urpc_xdp *x, uint32_t want, long id);

/*
 * How frames reach @dst (network order): *@mac set and true, or false when
 * the kernel socket must carry them (@dst is on this host's own interface
 * x->ifname, or routed through another interface; logged once). -errno
 * (no route, no neighbour answer) logged.
 */
int urpc__xdp_nexthop(struct urpc_xdp *x, uint32_t dst, uint8_t mac[6], long id);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_XDP_SYS_H */
