/* SPDX-License-Identifier: MIT */
/*
 * RDMA ports as plain values, and which one is nearest to a device (a GPU)
 * or a NUMA node, from the sysfs PCI topology (verbs_topo.c). No verbs
 * header, built in every configuration; the floor under verbs_dev.h: it
 * calls nothing above it.
 *
 * Thread: any. Not for the datapath.
 */
#ifndef URPC_TRANSPORT_VERBS_TOPO_H
#define URPC_TRANSPORT_VERBS_TOPO_H

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

#endif /* URPC_TRANSPORT_VERBS_TOPO_H */
