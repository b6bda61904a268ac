/* SPDX-License-Identifier: MIT */
/*
 * RDMA device discovery. Without a device (a plain machine) the listing is
 * empty and the cases that need a port skip with the reason; inside
 * tests/vm/rxe-vm.sh they run against the two Soft-RoCE devices.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs_dev.h"

static struct urpc_verbs_port ports[32];

static int list_or_skip(void)
{
	int n = urpc__verbs_list_ports(ports, 32);

	cr_assert_geq(n, 0, "listing RDMA devices failed: %d", n);
	if (n == 0)
		cr_skip_test("no RDMA device (run the suite in tests/vm/rxe-vm.sh for Soft-RoCE)");
	return n > 32 ? 32 : n;
}

Test(verbs_dev, unknown_device_is_refused)
{
	struct urpc_verbs_port p;

	cr_assert_eq(urpc__verbs_pick_port("no-such-rdma-device", &p), -ENODEV);
}

Test(verbs_dev, every_port_is_described)
{
	int n = list_or_skip(), i;

	for (i = 0; i < n; i++) {
		cr_assert_gt(strlen(ports[i].dev), 0);
		cr_assert_geq(ports[i].port, 1);
		cr_assert_not_null(ports[i].state);
		cr_assert_not_null(ports[i].link_layer);
		if (ports[i].active)
			cr_assert(ports[i].active_mtu >= 256 && ports[i].active_mtu <= 4096);
	}
}

Test(verbs_dev, roce_prefers_v2_ipv4_gid)
{
	int n = list_or_skip(), i, checked = 0;
	unsigned g;

	for (i = 0; i < n; i++) {
		const struct urpc_verbs_port *p = &ports[i];
		bool has_v2_ipv4 = false;

		if (!p->active || strcmp(p->link_layer, "Ethernet"))
			continue;
		for (g = 0; g < p->ngids; g++)
			has_v2_ipv4 |= p->gids[g].ipv4 && !strcmp(p->gids[g].type, "RoCE v2");
		if (!has_v2_ipv4)
			continue;
		cr_assert_geq(p->gid_index, 0);
		for (g = 0; g < p->ngids; g++) {
			if ((int)p->gids[g].index != p->gid_index)
				continue;
			cr_assert_str_eq(p->gids[g].type, "RoCE v2");
			cr_assert(p->gids[g].ipv4, "%s:%u chose %s over an IPv4 RoCE v2 GID",
				  p->dev, p->port, p->gids[g].text);
		}
		checked++;
	}
	if (!checked)
		cr_skip_test("no active RoCE port with an IPv4 RoCE v2 GID");
}

Test(verbs_dev, default_and_named_choice)
{
	struct urpc_verbs_port p;
	char name[80];
	int n = list_or_skip(), i, active = -1;

	for (i = 0; i < n && active < 0; i++)
		if (ports[i].active && ports[i].gid_index >= 0)
			active = i;
	if (active < 0)
		cr_skip_test("no active RDMA port");
	unsetenv("URPC_DEVICE");
	cr_assert_eq(urpc__verbs_pick_port(NULL, &p), 0);
	cr_assert(p.active);
	snprintf(name, sizeof(name), "%s:%u", ports[n - 1].dev, ports[n - 1].port);
	if (ports[n - 1].active) {
		cr_assert_eq(urpc__verbs_pick_port(name, &p), 0);
		cr_assert_str_eq(p.dev, ports[n - 1].dev);
	}
	setenv("URPC_DEVICE", ports[active].dev, 1);
	cr_assert_eq(urpc__verbs_pick_port(NULL, &p), 0);
	cr_assert_str_eq(p.dev, ports[active].dev, "URPC_DEVICE must name the port");
	unsetenv("URPC_DEVICE");
}

/* ---- choosing the nearest port (pure functions: run on every machine) ---- */

Test(verbs_dev, path_affinity_counts_shared_components)
{
	const char *gpu =
		"/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/0000:3c:08.0/0000:3d:00.0";
	const char *nic_same_switch =
		"/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/0000:3c:10.0/0000:3e:00.0";
	const char *nic_same_root = "/sys/devices/pci0000:3a/0000:3a:02.0/0000:40:00.0";
	const char *nic_other_socket = "/sys/devices/pci0000:d7/0000:d7:00.0/0000:d8:00.0";

	cr_assert_eq(urpc__verbs_path_affinity(gpu, nic_same_switch), 5);
	cr_assert_eq(urpc__verbs_path_affinity(gpu, nic_same_root), 3);
	cr_assert_eq(urpc__verbs_path_affinity(gpu, nic_other_socket), 2);
	/* whole components only: 0000:3a:00.0 is not a prefix match of 0000:3a:00.01 */
	cr_assert_eq(urpc__verbs_path_affinity("/a/0000:3a:00.0", "/a/0000:3a:00.01"), 1);
	cr_assert_eq(urpc__verbs_path_affinity(gpu, ""), 0, "a software device is near nothing");
	cr_assert_eq(urpc__verbs_path_affinity(NULL, gpu), 0);
	cr_assert_eq(urpc__verbs_path_affinity("relative/x", "relative/x"), 0);
}

static void fake_port(struct urpc_verbs_port *p, const char *dev, bool active, int gid, int numa,
		      const char *sysfs)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->dev, sizeof(p->dev), "%s", dev);
	p->port = 1;
	p->active = active;
	p->gid_index = gid;
	p->numa_node = numa;
	snprintf(p->sysfs, sizeof(p->sysfs), "%s", sysfs);
}

Test(verbs_dev, nearest_port_by_pci_tree_then_numa)
{
	const char *gpu = "/sys/devices/pci0000:d7/0000:d7:00.0/0000:d8:00.0/0000:d9:00.0";
	struct urpc_verbs_port p[5];

	fake_port(&p[0], "mlx5_0", true, 3, 0, "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0");
	fake_port(&p[1], "mlx5_1", false, 3, 1,
		  "/sys/devices/pci0000:d7/0000:d7:00.0/0000:d8:00.0/0000:da:00.0");
	fake_port(&p[2], "mlx5_2", true, -1, 1,
		  "/sys/devices/pci0000:d7/0000:d7:00.0/0000:d8:00.0/0000:db:00.0");
	fake_port(&p[3], "mlx5_3", true, 3, 1, "/sys/devices/pci0000:d7/0000:d7:02.0/0000:dc:00.0");
	fake_port(&p[4], "mlx5_4", true, 3, 1,
		  "/sys/devices/pci0000:d7/0000:d7:00.0/0000:d8:00.0/0000:dd:00.0");

	/* Down (1) and GID-less (2) ports never win, however near. */
	cr_assert_eq(urpc__verbs_rank_ports(p, 5, gpu, -1), 4);
	cr_assert_eq(urpc__verbs_rank_ports(p, 4, gpu, -1), 3,
		     "same root complex beats another socket");
	/* No hint: the first usable port. A NUMA node alone: the first there. */
	cr_assert_eq(urpc__verbs_rank_ports(p, 5, NULL, -1), 0);
	cr_assert_eq(urpc__verbs_rank_ports(p, 5, NULL, 1), 3);
	cr_assert_eq(urpc__verbs_rank_ports(p, 5, NULL, 7), 0, "no port on node 7: the first");
	/* Equal PCI distance (none: software devices): NUMA breaks the tie. */
	fake_port(&p[0], "rxe0", true, 1, 0, "");
	fake_port(&p[1], "rxe1", true, 1, 1, "");
	cr_assert_eq(urpc__verbs_rank_ports(p, 2, gpu, 1), 1);
	cr_assert_eq(urpc__verbs_rank_ports(p, 2, gpu, -1), 0);
	fake_port(&p[0], "x", false, 1, 0, "");
	cr_assert_eq(urpc__verbs_rank_ports(p, 1, NULL, -1), -1, "nothing usable");
}

Test(verbs_dev, pci_addresses_are_parsed_and_looked_up)
{
	char path[4096];
	int numa = 42;

	cr_assert_eq(urpc__verbs_pci_lookup("not-an-address", path, sizeof(path), &numa), -EINVAL);
	cr_assert_eq(urpc__verbs_pci_lookup("0000:3b:00.9", path, sizeof(path), &numa), -EINVAL,
		     "function 9 does not exist");
	cr_assert_eq(urpc__verbs_pci_lookup("0000:ff:1f.7", path, sizeof(path), &numa), -ENOENT,
		     "no such device here");
	/* A device this machine has, in CUDA's spelling (8-digit domain, capitals). */
	if (urpc__verbs_pci_lookup("00000000:00:00.0", path, sizeof(path), &numa) == -ENOENT)
		cr_skip_test("this machine has no PCI device 0000:00:00.0");
	cr_assert(strncmp(path, "/sys/devices/", 13) == 0, "resolved to %s", path);
	cr_assert(strstr(path, "0000:00:00.0") != NULL, "resolved to %s", path);
	cr_assert_geq(numa, -1);
}
