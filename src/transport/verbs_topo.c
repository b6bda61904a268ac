/* SPDX-License-Identifier: MIT */
/*
 * Which RDMA port is nearest to a device (a GPU) or a NUMA node, from the
 * sysfs PCI topology. Plain string and file work: no verbs header, built in
 * every configuration (see verbs_topo.h). Calls nothing above it.
 */
#define URPC_LOG_MODULE "verbs"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_topo.h"

unsigned urpc__verbs_path_affinity(const char *a, const char *b)
{
	unsigned common = 0;

	if (!a || !b || *a != '/' || *b != '/')
		return 0;
	/* Count the leading components both paths share, whole components only. */
	while (*a == '/' && *b == '/') {
		size_t la, lb;

		a++;
		b++;
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		if (!la || la != lb || memcmp(a, b, la))
			break;
		common++;
		a += la;
		b += lb;
	}
	return common;
}

int urpc__verbs_rank_ports(const struct urpc_verbs_port *ports, int n, const char *near_path,
			   int near_numa)
{
	int i, best = -1;
	unsigned best_aff = 0;
	bool best_numa = false;

	for (i = 0; i < n; i++) {
		const struct urpc_verbs_port *p = &ports[i];
		unsigned aff;
		bool numa;

		if (!p->active || p->gid_index < 0)
			continue;
		aff = near_path ? urpc__verbs_path_affinity(near_path, p->sysfs) : 0;
		numa = near_numa >= 0 && p->numa_node == near_numa;
		/* Nearer in the PCI tree first, then on the same node, then the first. */
		if (best < 0 || aff > best_aff || (aff == best_aff && numa && !best_numa)) {
			best = i;
			best_aff = aff;
			best_numa = numa;
		}
	}
	return best;
}

int urpc__verbs_pci_lookup(const char *pci, char *path, size_t len, int *numa)
{
	char norm[32], link[96], *dot;
	unsigned dom, bus, dev, fn;
	FILE *f;

	/* "0000:3b:00.0", or CUDA's "00000000:3B:00.0" */
	if (!pci || sscanf(pci, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || dom > 0xffff ||
	    bus > 0xff || dev > 0x1f || fn > 7)
		return -EINVAL;
	snprintf(norm, sizeof(norm), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", norm);
	if (len < PATH_MAX) {
		char full[PATH_MAX];

		if (!realpath(link, full) || strlen(full) >= len)
			return -ENOENT;
		memcpy(path, full, strlen(full) + 1);
	} else if (!realpath(link, path)) {
		return -ENOENT;
	}
	*numa = -1;
	dot = link + strlen(link);
	snprintf(dot, sizeof(link) - (size_t)(dot - link), "/numa_node");
	f = fopen(link, "re");
	if (f) {
		if (fscanf(f, "%d", numa) != 1)
			*numa = -1;
		fclose(f);
	}
	return 0;
}
