/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's view of the interface and its neighbours
 * (xdp_sys.h): index, MAC, MTU, receive queues and driver (ioctl, sysfs),
 * its IPv4 addresses (getifaddrs), the route and neighbour of a peer
 * (rtnetlink), a neighbour resolved by a kernel datagram when the table
 * has none. Cold: create and resolve_peer. Calls nothing of ours but the
 * log.
 */
#define _GNU_SOURCE
#define URPC_LOG_MODULE "xdp"
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../util/log.h"
#include "xdp_sys.h"

/*
 * The rtnetlink macros (NLMSG_NEXT, RTA_NEXT, RTM_RTA) step through char
 * pointers; the kernel aligns every message and attribute to 4 bytes
 * (NLMSG_ALIGN, RTA_ALIGN), which clang's -Wcast-align cannot see.
 */
#pragma GCC diagnostic ignored "-Wcast-align"

static int if_ioctl(const char *ifname, unsigned long req, struct ifreq *ifr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", ifname);
	if (ioctl(fd, req, ifr) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Receive queues: the rx-N folders of sysfs, at least 1. */
static unsigned if_rx_queues(const char *ifname)
{
	char path[128];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	d = opendir(path);
	if (!d)
		return 1;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, "rx-", 3);
	closedir(d);
	return n ? n : 1;
}

int urpc__xdp_if_info(struct urpc_xdp *x, uint32_t *mtu, char *driver, size_t driver_len, long id)
{
	struct ethtool_drvinfo di = {.cmd = ETHTOOL_GDRVINFO};
	struct ifreq ifr;
	int ret;

	x->ifindex = (int)if_nametoindex(x->ifname);
	if (!x->ifindex) {
		URPC_ERR(id, "xdp: no interface '%s' here (ip -br link lists them)", x->ifname);
		return -ENODEV;
	}
	memset(&ifr, 0, sizeof(ifr));
	ret = if_ioctl(x->ifname, SIOCGIFHWADDR, &ifr);
	if (ret) {
		URPC_ERR(id, "xdp: the MAC address of %s: %s", x->ifname, strerror(-ret));
		return ret;
	}
	memcpy(x->mac, ifr.ifr_hwaddr.sa_data, 6);
	memset(&ifr, 0, sizeof(ifr));
	ret = if_ioctl(x->ifname, SIOCGIFMTU, &ifr);
	if (ret) {
		URPC_ERR(id, "xdp: the MTU of %s: %s", x->ifname, strerror(-ret));
		return ret;
	}
	*mtu = (uint32_t)ifr.ifr_mtu;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_data = (void *)&di;
	snprintf(driver, driver_len, "%s",
		 if_ioctl(x->ifname, SIOCETHTOOL, &ifr) ? "?" : di.driver);
	x->nq = if_rx_queues(x->ifname);
	if (x->nq > URPC_XDP_MAXQ) {
		URPC_WARN(id,
			  "xdp: %s has %u receive queues; urpc binds the first %d: steer its "
			  "flows there (ethtool -L %s combined %d, or ethtool -N flow rules)",
			  x->ifname, x->nq, URPC_XDP_MAXQ, x->ifname, URPC_XDP_MAXQ);
		x->nq = URPC_XDP_MAXQ;
	}
	return 0;
}

/* The interface that holds the IPv4 address @a, into @name; false if none. */
static bool if_of_addr(uint32_t a, char *name, size_t len)
{
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (getifaddrs(&ifa) < 0)
		return false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr == a) {
			snprintf(name, len, "%s", i->ifa_name);
			found = true;
		}
	}
	freeifaddrs(ifa);
	return found;
}

int urpc__xdp_if_addr(struct urpc_xdp *x, uint32_t want, long id)
{
	struct ifaddrs *ifa, *i;
	uint32_t first = 0;
	bool has_want = false;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		uint32_t a;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    strcmp(i->ifa_name, x->ifname))
			continue;
		a = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
		if (!first)
			first = a;
		has_want |= a == want;
	}
	freeifaddrs(ifa);
	if (!first) {
		URPC_ERR(id, "xdp: %s has no IPv4 address (ip addr add ADDR/LEN dev %s)", x->ifname,
			 x->ifname);
		return -EADDRNOTAVAIL;
	}
	x->addr = has_want ? want : first;
	return 0;
}

/* One rtnetlink request and its answers; @cb sees each message. 0 or -errno. */
static int nl_talk(struct nlmsghdr *req, int (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	char buf[16384] __attribute__((aligned(4)));
	int fd, ret = -EIO, done = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	req->nlmsg_seq = 1;
	if (sendto(fd, req, req->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto out;
	}
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0) {
			ret = -errno;
			goto out;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				ret = e->error;
				goto out;
			}
			ret = cb(h, arg);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				done = 1;
		}
	}
out:
	close(fd);
	return ret;
}

struct route_ans {
	int oif;
	uint32_t gw;
	unsigned char type;
};

static int route_cb(const struct nlmsghdr *h, void *arg)
{
	struct route_ans *a = arg;
	const struct rtmsg *rt = NLMSG_DATA(h);
	const struct rtattr *at;
	int len;

	if (h->nlmsg_type != RTM_NEWROUTE)
		return 0;
	a->type = rt->rtm_type;
	len = (int)RTM_PAYLOAD(h);
	for (at = RTM_RTA(rt); RTA_OK(at, len); at = RTA_NEXT(at, len)) {
		if (at->rta_type == RTA_OIF)
			memcpy(&a->oif, RTA_DATA(at), 4);
		else if (at->rta_type == RTA_GATEWAY)
			memcpy(&a->gw, RTA_DATA(at), 4);
	}
	return 0;
}

struct neigh_ans {
	int ifindex;
	uint32_t ip;
	uint8_t mac[6];
	bool found;
};

static int neigh_cb(const struct nlmsghdr *h, void *arg)
{
	struct neigh_ans *a = arg;
	const struct ndmsg *nd = NLMSG_DATA(h);
	const struct rtattr *at;
	const uint8_t *mac = NULL;
	uint32_t dst = 0;
	int len;

	if (h->nlmsg_type != RTM_NEWNEIGH || nd->ndm_ifindex != a->ifindex ||
	    !(nd->ndm_state &
	      (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP)))
		return 0;
	len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*nd)));
	for (at = (const struct rtattr *)((const char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	     RTA_OK(at, len); at = RTA_NEXT(at, len)) {
		if (at->rta_type == NDA_DST && RTA_PAYLOAD(at) == 4)
			memcpy(&dst, RTA_DATA(at), 4);
		else if (at->rta_type == NDA_LLADDR && RTA_PAYLOAD(at) == 6)
			mac = RTA_DATA(at);
	}
	if (dst == a->ip && mac) {
		memcpy(a->mac, mac, 6);
		a->found = true;
	}
	return 0;
}

static int nl_route(uint32_t dst, struct route_ans *a)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		struct rtattr at;
		uint32_t dst;
	} req;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = RTM_GETROUTE;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.r.rtm_family = AF_INET;
	req.r.rtm_dst_len = 32;
	req.at.rta_type = RTA_DST;
	req.at.rta_len = RTA_LENGTH(4);
	req.dst = dst;
	return nl_talk(&req.h, route_cb, a);
}

static int nl_neigh(struct neigh_ans *a)
{
	struct {
		struct nlmsghdr h;
		struct ndmsg n;
	} req;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = RTM_GETNEIGH;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.n.ndm_family = AF_INET;
	req.n.ndm_ifindex = a->ifindex;
	return nl_talk(&req.h, neigh_cb, a);
}

/* Make the kernel resolve @ip: a datagram to its discard port (9) from @src. */
static void neigh_poke(uint32_t src, uint32_t ip)
{
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr.s_addr = src};
	struct sockaddr_in to = {
		.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = ip};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	(void)bind(fd, (struct sockaddr *)&from, sizeof(from));
	(void)sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
	close(fd);
}

int urpc__xdp_nexthop(struct urpc_xdp *x, uint32_t dst, uint8_t mac[6], long id)
{
	char ip[INET_ADDRSTRLEN], owner[IF_NAMESIZE] = "";
	struct route_ans r = {0};
	struct neigh_ans n = {0};
	struct ifreq ifr;
	int ret, i;

	inet_ntop(AF_INET, &dst, ip, sizeof(ip));
	ret = nl_route(dst, &r);
	if (ret) {
		URPC_ERR(id, "xdp: no route to %s: %s", ip, strerror(-ret));
		return ret == -ENETUNREACH ? ret : -EHOSTUNREACH;
	}
	if (r.type == RTN_LOCAL) {
		/*
		 * On this host. On our own interface a frame sent out would not
		 * come back: the kernel socket carries it. On another interface
		 * (the other end of a veth pair, a NIC cabled to ours) the frame
		 * goes out to that interface's MAC.
		 */
		if (!if_of_addr(dst, owner, sizeof(owner)) || !strcmp(owner, x->ifname))
			return 0;
		/* Nor from the loopback interface (127.0.0.1): no wire leads there. */
		memset(&ifr, 0, sizeof(ifr));
		if (if_ioctl(owner, SIOCGIFFLAGS, &ifr) || (ifr.ifr_flags & IFF_LOOPBACK))
			return 0;
		memset(&ifr, 0, sizeof(ifr));
		ret = if_ioctl(owner, SIOCGIFHWADDR, &ifr);
		if (ret)
			return 0;
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
		return 1;
	}
	if (r.oif != x->ifindex) {
		char via[IF_NAMESIZE] = "?";

		if_indextoname((unsigned)r.oif, via);
		URPC_WARN(id,
			  "xdp: %s is routed through %s, not %s: its datagrams go through the "
			  "kernel socket",
			  ip, via, x->ifname);
		return 0;
	}
	n.ifindex = x->ifindex;
	n.ip = r.gw ? r.gw : dst;
	/* resolve_peer is not the datapath: wait up to a second for the neighbour */
	for (i = 0; i < 100; i++) {
		ret = nl_neigh(&n);
		if (ret || n.found)
			break;
		if (i == 0 || i == 50)
			neigh_poke(x->addr, n.ip);
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	if (!n.found) {
		inet_ntop(AF_INET, &n.ip, ip, sizeof(ip));
		URPC_ERR(id, "xdp: no neighbour answered for %s on %s (ip neigh show dev %s)", ip,
			 x->ifname, x->ifname);
		return -EHOSTUNREACH;
	}
	memcpy(mac, n.mac, 6);
	return 1;
}
