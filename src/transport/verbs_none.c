/* SPDX-License-Identifier: MIT */
/* The device layer of a build without libibverbs: no device exists. */
#include <errno.h>

#include "transport.h"
#include "verbs_dev.h"

bool urpc__verbs_built(void)
{
	return false;
}

int urpc__verbs_list_ports(struct urpc_verbs_port *out, int max)
{
	return 0;
}

int urpc__verbs_pick_port(const char *name, struct urpc_verbs_port *out)
{
	return -ENODEV;
}

int urpc__verbs_pick_port_near(const char *name, const char *near_pci, int near_numa,
			       struct urpc_verbs_port *out)
{
	return -ENODEV;
}

const struct urpc_tp_ops *urpc__tp_verbs_ops(void)
{
	return NULL;
}
