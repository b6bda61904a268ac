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
	bool mlx5;     /* mlx5dv_is_supported() */
	int numa_node; /* -1 when unknown */
	int gid_index; /* the GID urpc would use: RoCE v2 IPv4-mapped first; -1 none */
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

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_VERBS_DEV_H */
