/* SPDX-License-Identifier: MIT */
/*
 * RDMA devices and ports, as the verbs transport and urpc-info see them.
 * This header includes no verbs header: the types here are plain values.
 * In a build without libibverbs every call reports that no device exists.
 *
 * Thread: any. Not for the datapath (each call opens devices).
 */
#ifndef URPC_TRANSPORT_VERBS_DEV_H
#define URPC_TRANSPORT_VERBS_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define URPC_VERBS_NAME_MAX 64
#define URPC_VERBS_MAX_GIDS 16

struct urpc_verbs_gid {
	uint32_t index;
	char type[12]; /* "IB", "RoCE v1", "RoCE v2" */
	char text[48]; /* e.g. "::ffff:10.0.0.1" or "fe80::..." */
	bool ipv4;     /* an IPv4-mapped address */
};

struct urpc_verbs_port {
	char dev[URPC_VERBS_NAME_MAX];
	uint8_t port;
	bool active;
	const char *state;	/* "ACTIVE", "DOWN", ... */
	const char *link_layer; /* "InfiniBand" or "Ethernet" */
	uint32_t active_mtu;	/* bytes */
	uint16_t lid;
	bool mlx5;	     /* mlx5dv_is_supported() */
	char mlx5_caps[160]; /* mlx5dv_query_device() flags, space-separated; "" if not mlx5 */
	int numa_node;	     /* -1 when unknown */
	char sysfs[192];     /* the device's sysfs node (PCI path); "" for software devices */
	int gid_index;	     /* the GID urpc would use: RoCE v2 IPv4-mapped first; -1 none */
	unsigned ngids;
	struct urpc_verbs_gid gids[URPC_VERBS_MAX_GIDS];
};

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

/* ---- topology helpers (verbs_topo.c; no verbs needed) ---- */

/*
 * How near two sysfs device paths are: the number of leading path
 * components they share (devices under one PCIe switch share more than
 * devices under different root complexes). 0 when either is not absolute.
 */
unsigned urpc__verbs_path_affinity(const char *a, const char *b);

/*
 * Index of the port to use among @ports[0..n): active with a usable GID,
 * sharing the most path components with @near_path (may be NULL), then on
 * NUMA node @near_numa (-1: any), then the first. -1 when none qualifies.
 */
int urpc__verbs_rank_ports(const struct urpc_verbs_port *ports, int n, const char *near_path,
			   int near_numa);

/*
 * Resolve a PCI address to its sysfs path and NUMA node (-1 unknown).
 * 0, -EINVAL (not an address), -ENOENT (no such device here).
 */
int urpc__verbs_pci_lookup(const char *pci, char *path, size_t len, int *numa);

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_DEV_H */
