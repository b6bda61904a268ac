/* SPDX-License-Identifier: MIT */
/*
 * urpc-info: what urpc finds on this machine: RDMA devices, ports, GIDs,
 * hugepages, the CUDA driver, and the transport the default would pick;
 * the xdp transport's program on an interface, and its clean-up.
 * A diagnostic tool: it reads the library's internal device layer.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "mem/cuda.h"
#include "mem/hugepage.h"
#include "transport/verbs_dev.h"
#include "transport/xdp_tool.h"

#define MAX_PORTS 64

static void usage(FILE *f)
{
	fprintf(f, "Usage: urpc-info [OPTIONS]\n"
		   "\n"
		   "Print what urpc finds on this machine: RDMA devices and ports (state,\n"
		   "link layer, active MTU, LID, GID table with types, mlx5 direct-verbs\n"
		   "support, NUMA node), hugepages, whether the CUDA driver loads, and the\n"
		   "transport an Rpc with the default choice would use, and why.\n"
		   "\n"
		   "Options:\n"
		   "  -d, --device NAME   report which port urpc would pick for NAME[:PORT]\n"
		   "                      (default: URPC_DEVICE, else the first active port)\n"
		   "  -p, --near-pci ADDR report the active port nearest, in the PCI tree, to\n"
		   "                      the device at ADDR (a GPU: \"0000:3b:00.0\", or as\n"
		   "                      nvidia-smi and CUDA print it, \"00000000:3B:00.0\")\n"
		   "  -n, --numa NODE     report the active port on NUMA node NODE\n"
		   "  -x, --xdp IFACE     report urpc's XDP program on IFACE (xdp transport):\n"
		   "                      attached or not, mode, endpoints in its port map\n"
		   "      --xdp-cleanup IFACE\n"
		   "                      detach urpc's XDP program from IFACE, whatever a\n"
		   "                      crashed process left in its maps (needs root or\n"
		   "                      CAP_NET_ADMIN + CAP_BPF); other programs are left\n"
		   "                      alone. Exit 0 when detached or none was there\n"
		   "  -h, --help          show this help\n"
		   "\n"
		   "The choice follows what an Rpc does: a named device wins; else the port\n"
		   "nearest to --near-pci (ties: the NUMA node), else on --numa, else the\n"
		   "first active port with a usable GID.\n"
		   "\n"
		   "Exit status: 0; 1 when a named device or --near-pci cannot be used; 2 on\n"
		   "bad usage.\n");
}

static void print_ports(const struct urpc_verbs_port *ports, int n)
{
	int i;
	unsigned g;

	for (i = 0; i < n; i++) {
		const struct urpc_verbs_port *p = &ports[i];

		printf("  %s port %u: %s, %s, active MTU %u, LID %u, mlx5dv %s, NUMA node %d\n",
		       p->dev, p->port, p->state, p->link_layer, p->active_mtu, p->lid,
		       p->mlx5 ? "yes" : "no", p->numa_node);
		if (p->mlx5)
			printf("    mlx5dv: %s\n",
			       p->mlx5_caps[0] ? p->mlx5_caps : "no optional features");
		printf("    sysfs: %s\n", p->sysfs[0] ? p->sysfs : "none (a software device)");
		for (g = 0; g < p->ngids; g++)
			printf("    GID %2u  %-8s %s%s\n", p->gids[g].index, p->gids[g].type,
			       p->gids[g].text,
			       (int)p->gids[g].index == p->gid_index ? "   <- urpc uses this" : "");
		if (!p->ngids)
			printf("    no GID entries\n");
	}
}

static void print_hugepages(void)
{
	size_t hps = urpc__hp_page_size();
	long total = -1, free_pages = -1;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "HugePages_Total: %ld", &total);
			sscanf(line, "HugePages_Free: %ld", &free_pages);
		}
		fclose(f);
	}
	if (!hps) {
		printf("hugepages: not supported by this kernel; 4 KiB pages are used\n");
		return;
	}
	printf("hugepages: %zu KiB pages, %ld reserved, %ld free%s\n", hps / 1024, total,
	       free_pages,
	       total > 0 ? ""
			 : " (4 KiB pages are used; reserve some: echo 512 > "
			   "/proc/sys/vm/nr_hugepages)");
}

static void print_cuda(void)
{
	char bus[URPC_CUDA_PCI_BUS_ID_LEN];
	int n, i;

	if (urpc__cuda_load()) {
		printf("CUDA driver: not available (%s); GPU payloads are not possible here\n",
		       urpc__cuda_why());
		return;
	}
	n = urpc__cuda_device_count();
	if (n < 0) {
		printf("CUDA driver: loads, but counting its devices failed: %s\n",
		       urpc_strerror(n));
		return;
	}
	printf("CUDA driver: loads, %d device%s\n", n, n == 1 ? "" : "s");
	for (i = 0; i < n; i++) {
		if (urpc__cuda_pci_bus_id(i, bus, sizeof(bus)))
			snprintf(bus, sizeof(bus), "unknown");
		printf("  GPU %d: PCI %s, dma-buf %s\n", i, bus,
		       urpc__cuda_has_dmabuf(i) ? "yes"
						: "no (staging through pinned host memory)");
	}
}

/* --xdp IFACE: urpc's program there. Exit status 0, or 1 when the query failed. */
static int print_xdp(const char *ifname)
{
	unsigned n = 0;
	bool generic = false;
	int ret = urpc__xdp_query(ifname, &n, &generic);

	if (ret == -ENOENT) {
		printf("xdp: no XDP program on %s\n", ifname);
		return 0;
	}
	if (ret == -EBUSY) {
		printf("xdp: %s runs another XDP program (not urpc's): the xdp transport cannot "
		       "use it until it is detached\n",
		       ifname);
		return 0;
	}
	if (ret) {
		printf("xdp: cannot query %s: %s\n", ifname,
		       ret == -EOPNOTSUPP ? "this build has no xdp transport" : urpc_strerror(ret));
		return 1;
	}
	printf("xdp: urpc's program on %s, %s mode, %u endpoint%s in its port map (a crashed "
	       "process's stay until the next create on its port or --xdp-cleanup)\n",
	       ifname, generic ? "generic" : "native", n, n == 1 ? "" : "s");
	return 0;
}

/* --xdp-cleanup IFACE. Exit status 0 (detached, or nothing to do), 1 otherwise. */
static int xdp_cleanup(const char *ifname)
{
	int ret = urpc__xdp_cleanup(ifname);

	if (ret == -ENOENT) {
		printf("xdp: no XDP program on %s: nothing to clean up\n", ifname);
		return 0;
	}
	if (ret == -EBUSY) {
		printf("xdp: %s runs another XDP program, not urpc's: left alone\n", ifname);
		return 1;
	}
	if (ret) {
		printf("xdp: cleaning up %s failed: %s\n", ifname,
		       ret == -EOPNOTSUPP ? "this build has no xdp transport" : urpc_strerror(ret));
		return 1;
	}
	printf("xdp: detached urpc's XDP program from %s\n", ifname);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {{"device", required_argument, NULL, 'd'},
					      {"near-pci", required_argument, NULL, 'p'},
					      {"numa", required_argument, NULL, 'n'},
					      {"xdp", required_argument, NULL, 'x'},
					      {"xdp-cleanup", required_argument, NULL, 'X'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	static struct urpc_verbs_port ports[MAX_PORTS];
	struct urpc_verbs_port pick;
	const char *device = NULL, *near_pci = NULL, *env = getenv("URPC_TRANSPORT");
	int c, n, active = 0, i, numa = -1, ret;
	char *end;
	long v;

	while ((c = getopt_long(argc, argv, "d:p:n:x:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'x':
			return print_xdp(optarg);
		case 'X':
			return xdp_cleanup(optarg);
		case 'd':
			device = optarg;
			break;
		case 'p':
			near_pci = optarg;
			break;
		case 'n':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 0 || v > 4095) {
				fprintf(stderr, "urpc-info: --numa wants a node number, not '%s'\n",
					optarg);
				return 2;
			}
			numa = (int)v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "urpc-info: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}

	printf("urpc %s\n", urpc_version());
	if (!urpc__verbs_built()) {
		printf("RDMA: this build has no verbs support (libibverbs was not found at build "
		       "time)\n");
		n = 0;
	} else {
		n = urpc__verbs_list_ports(ports, MAX_PORTS);
		if (n < 0) {
			printf("RDMA: listing devices failed: %s\n", urpc_strerror(n));
			n = 0;
		} else if (n == 0) {
			printf("RDMA: no devices (no RDMA NIC, and no Soft-RoCE rxe device "
			       "configured)\n");
		} else {
			printf("RDMA: %d port%s\n", n, n == 1 ? "" : "s");
			if (n > MAX_PORTS)
				n = MAX_PORTS;
			print_ports(ports, n);
		}
	}
	for (i = 0; i < n; i++)
		active += ports[i].active;
	print_hugepages();
	print_cuda();

	if (env && *env) {
		printf("transport: %s (from URPC_TRANSPORT)\n", env);
		return 0;
	}
	ret = urpc__verbs_built() ? urpc__verbs_pick_port_near(device, near_pci, numa, &pick)
				  : -ENODEV;
	if (ret == 0) {
		printf("transport: verbs on %s:%u (GID %d, MTU %u: an active RDMA port)\n",
		       pick.dev, pick.port, pick.gid_index, pick.active_mtu);
	} else if ((device && *device) || ret == -EINVAL) {
		/* the reason was logged above */
		printf("transport: none for the %s asked for\n", device ? "device" : "PCI device");
		return 1;
	} else {
		printf("transport: udp (%s)\n", !urpc__verbs_built()
							? "this build has no verbs transport"
						: active ? "no active port has a usable GID"
							 : "no active RDMA port");
	}
	return 0;
}
