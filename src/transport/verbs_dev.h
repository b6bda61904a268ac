/* SPDX-License-Identifier: MIT */
/*
 * RDMA devices and ports, as the verbs transport and urpc-info see them.
 * This header includes no verbs header: the types here are plain values.
 * In a build without libibverbs every call reports that no device exists.
 * verbs_dev.c calls verbs_topo.c (below it) to rank ports; never the
 * other way.
 *
 * Thread: any. Not for the datapath (each call opens devices).
 */
#ifndef URPC_TRANSPORT_VERBS_DEV_H
#define URPC_TRANSPORT_VERBS_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs_topo.h" /* struct urpc_verbs_port, and the ranking this layer uses */

#ifdef __cplusplus
extern "C" {
#endif

/* True when this build has the verbs transport's device layer. */
bool urpc__verbs_built(void);

/*
 * Fill up to @max ports of every RDMA device. Returns the number of ports
 * found (possibly more than @max: only @max are filled), or -errno.
 */
int urpc__verbs_list_ports(struct urpc_verbs_port *out, int max);

/*
 * Choose a port: @name (a device name, optionally "dev:port"), else the
 * URPC_DEVICE environment variable, else the first active port. 0 and *out
 * filled; -ENODEV (no such device, or nothing active) with an error logged
 * that names the devices there are; -ENOENT when the port has no usable GID.
 */
int urpc__verbs_pick_port(const char *name, struct urpc_verbs_port *out);

/*
 * Choose a port near something: @name first (as urpc__verbs_pick_port()),
 * then URPC_DEVICE; else the active port nearest, in the sysfs PCI tree, to
 * the PCI device @near_pci (a GPU's address, e.g. "0000:3b:00.0" or CUDA's
 * "00000000:3B:00.0"; NULL for none), ties broken by NUMA node @near_numa
 * (or that of @near_pci; -1 for none); else the first active port. An
 * @near_pci that does not exist is -EINVAL, logged.
 */
int urpc__verbs_pick_port_near(const char *name, const char *near_pci, int near_numa,
			       struct urpc_verbs_port *out);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_DEV_H */
