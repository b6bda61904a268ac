/* SPDX-License-Identifier: MIT */
/*
 * RDMA device and port discovery (see verbs_dev.h). GIDs are chosen by
 * reading the GID table and its types, never by a fixed index: RoCE v2 with
 * an IPv4-mapped address first, then any RoCE v2, then RoCE v1; on
 * InfiniBand the port's LID addresses it and GID 0 is used.
 */
#define URPC_LOG_MODULE "verbs"
#include "verbs_dev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/compiler.h"
#include "../util/log.h"

bool urpc__verbs_built(void)
{
	return true;
}

static const char *port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	case IBV_PORT_NOP:
		break;
	}
	return "NOP";
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return 128u << (unsigned)m; /* IBV_MTU_256 is 1 */
}

static const char *gid_type_str(enum ibv_gid_type t)
{
	switch (t) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	}
	return "?";
}

/* Rank of a GID for urpc's use; higher is better, 0 unusable. */
static int gid_rank(const struct urpc_verbs_gid *g, bool ib)
{
	if (ib)
		return g->index == 0 ? 1 : 0;
	if (!strcmp(g->type, "RoCE v2"))
		return g->ipv4 ? 3 : 2;
	return 1;
}

static void read_gids(struct ibv_context *ctx, struct urpc_verbs_port *p, int tbl_len)
{
	bool ib = !strcmp(p->link_layer, "InfiniBand");
	int i, best = 0;

	p->gid_index = -1;
	for (i = 0; i < tbl_len && p->ngids < URPC_VERBS_MAX_GIDS; i++) {
		struct urpc_verbs_gid *g = &p->gids[p->ngids];
		static const uint8_t zero[16];
		static const uint8_t v4prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		struct ibv_gid_entry e;
		const uint8_t *raw = e.gid.raw;
		int r;

		/* Empty entries answer ENODATA. */
		if (ibv_query_gid_ex(ctx, p->port, (uint32_t)i, &e, 0) || !memcmp(raw, zero, 16))
			continue;
		g->index = (uint32_t)i;
		snprintf(g->type, sizeof(g->type), "%s",
			 gid_type_str((enum ibv_gid_type)e.gid_type));
		g->ipv4 = !memcmp(raw, v4prefix, 12);
		inet_ntop(AF_INET6, raw, g->text, sizeof(g->text));
		r = gid_rank(g, ib);
		if (r > best) {
			best = r;
			p->gid_index = i;
		}
		p->ngids++;
	}
}

/* The device's sysfs node, resolved ("" for software devices such as rxe). */
static void read_sysfs(const char *dev, char *out, size_t len)
{
	char link[160], full[PATH_MAX];

	out[0] = 0;
	snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", dev);
	if (realpath(link, full) && strlen(full) < len)
		memcpy(out, full, strlen(full) + 1);
}

/* What mlx5 direct verbs offer on this device, for urpc-info. */
static void read_mlx5_caps(struct ibv_context *ctx, char *out, size_t len)
{
	static const struct {
		uint64_t flag;
		const char *name;
	} caps[] = {
		{MLX5DV_CONTEXT_FLAGS_CQE_V1, "cqe-v1"},
		{MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED, "mpw"},
		{MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW, "enhanced-mpw"},
		{MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP, "cqe-128b-comp"},
		{MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD, "cqe-128b-pad"},
		{MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE, "packet-credit"},
	};
	struct mlx5dv_context dv;
	size_t used = 0;
	unsigned i;

	out[0] = 0;
	memset(&dv, 0, sizeof(dv));
	dv.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
	if (mlx5dv_query_device(ctx, &dv))
		return;
	for (i = 0; i < URPC_ARRAY_SIZE(caps); i++) {
		int w;

		if (!(dv.flags & caps[i].flag))
			continue;
		w = snprintf(out + used, len - used, "%s%s", used ? " " : "", caps[i].name);
		if (w < 0 || (size_t)w >= len - used)
			return;
		used += (size_t)w;
	}
	if ((dv.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ) && dv.striding_rq_caps.supported_qpts)
		snprintf(out + used, len - used, "%sstriding-rq", used ? " " : "");
}

static int read_numa(const char *dev)
{
	char path[160];
	FILE *f;
	int n = -1;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", dev);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

int urpc__verbs_list_ports(struct urpc_verbs_port *out, int max)
{
	struct ibv_device **devs;
	int ndev, i, count = 0;

	devs = ibv_get_device_list(&ndev);
	if (!devs)
		return errno == ENOSYS ? 0 : -errno; /* ENOSYS: no RDMA subsystem */
	for (i = 0; i < ndev; i++) {
		struct ibv_device_attr da;
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		bool mlx5 = mlx5dv_is_supported(devs[i]);
		uint8_t port;

		if (!ctx) {
			URPC_WARN(-1, "cannot open RDMA device %s: %s",
				  ibv_get_device_name(devs[i]), strerror(errno));
			continue;
		}
		if (ibv_query_device(ctx, &da)) {
			ibv_close_device(ctx);
			continue;
		}
		for (port = 1; port <= da.phys_port_cnt; port++) {
			struct ibv_port_attr pa;
			struct urpc_verbs_port *p;

			if (ibv_query_port(ctx, port, &pa))
				continue;
			if (count++ >= max)
				continue;
			p = &out[count - 1];
			memset(p, 0, sizeof(*p));
			snprintf(p->dev, sizeof(p->dev), "%s", ibv_get_device_name(devs[i]));
			p->port = port;
			p->active = pa.state == IBV_PORT_ACTIVE;
			p->state = port_state_str(pa.state);
			p->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
										 : "InfiniBand";
			p->active_mtu = mtu_bytes(pa.active_mtu);
			p->lid = pa.lid;
			p->mlx5 = mlx5;
			p->numa_node = read_numa(p->dev);
			read_sysfs(p->dev, p->sysfs, sizeof(p->sysfs));
			if (mlx5)
				read_mlx5_caps(ctx, p->mlx5_caps, sizeof(p->mlx5_caps));
			read_gids(ctx, p, pa.gid_tbl_len);
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	return count;
}

int urpc__verbs_pick_port(const char *name, struct urpc_verbs_port *out)
{
	return urpc__verbs_pick_port_near(name, NULL, -1, out);
}

int urpc__verbs_pick_port_near(const char *name, const char *near_pci, int near_numa,
			       struct urpc_verbs_port *out)
{
	struct urpc_verbs_port ports[32];
	char want[URPC_VERBS_NAME_MAX], names[256] = "";
	char near_path[PATH_MAX];
	long want_port = 0;
	char *colon;
	int n, i;

	if (!name || !*name)
		name = getenv("URPC_DEVICE");
	n = urpc__verbs_list_ports(ports, 32);
	if (n < 0)
		return n;
	if (n > 32)
		n = 32;
	for (i = 0; i < n; i++) {
		size_t l = strlen(names);
		int w = snprintf(names + l, sizeof(names) - l, "%s%s:%u (%s)", l ? ", " : "",
				 ports[i].dev, ports[i].port, ports[i].state);

		if (w < 0 || (size_t)w >= sizeof(names) - l)
			break; /* the list is for a log line: a prefix will do */
	}
	if (name && *name) {
		snprintf(want, sizeof(want), "%s", name);
		colon = strchr(want, ':');
		if (colon) {
			*colon = 0;
			want_port = strtol(colon + 1, NULL, 10);
		}
	}
	if (!(name && *name)) {
		const char *np = NULL;
		int pci_numa = -1;

		if (near_pci && *near_pci) {
			i = urpc__verbs_pci_lookup(near_pci, near_path, sizeof(near_path),
						   &pci_numa);
			if (i < 0) {
				URPC_ERR(-1, "cannot place an RDMA port near PCI device '%s': %s",
					 near_pci,
					 i == -EINVAL ? "not a PCI address" : "no such device");
				return -EINVAL;
			}
			np = near_path;
			if (near_numa < 0)
				near_numa = pci_numa;
		}
		i = urpc__verbs_rank_ports(ports, n, np, near_numa);
		if (i >= 0) {
			if (np || near_numa >= 0)
				URPC_INFO(-1, "RDMA port %s:%u chosen near %s%s (NUMA node %d)",
					  ports[i].dev, ports[i].port, np ? "PCI device " : "",
					  np ? near_pci : "", ports[i].numa_node);
			*out = ports[i];
			return 0;
		}
		/* Nothing active with a GID: say why below. */
	}
	for (i = 0; i < n; i++) {
		struct urpc_verbs_port *p = &ports[i];

		if (name && *name && (strcmp(p->dev, want) || (want_port && p->port != want_port)))
			continue;
		if (!p->active) {
			if (name && *name) {
				URPC_ERR(-1,
					 "RDMA port %s:%u is %s; bring its link up or pick another "
					 "(URPC_DEVICE): %s",
					 p->dev, p->port, p->state, names);
				return -ENODEV;
			}
			continue;
		}
		if (p->gid_index < 0) {
			URPC_ERR(-1,
				 "RDMA port %s:%u has no usable GID (no RoCE address on its "
				 "netdev?)",
				 p->dev, p->port);
			return -ENOENT;
		}
		*out = *p;
		return 0;
	}
	if (name && *name)
		URPC_ERR(-1, "no RDMA device '%s'; devices here: %s", name, n ? names : "none");
	else if (n)
		URPC_INFO(-1, "no active RDMA port among: %s", names);
	return -ENODEV;
}
