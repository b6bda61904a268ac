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
