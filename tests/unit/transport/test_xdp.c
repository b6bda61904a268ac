/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's own cases, on a veth pair (tests/xdp-stage.sh sets
 * URPC_TEST_DEVICE_A/_B; elsewhere they skip): frames written straight onto
 * the wire with an AF_PACKET socket reach an xdp endpoint's parser, a bad
 * one is dropped and counted without touching the receive slots, and a
 * flood of bad frames many times the ring's size leaves the endpoint
 * receiving (every frame went back to the fill ring). The contract suite
 * (test_contract_xdp) covers what xdp shares with the other transports.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/transport.h"
#include "transport/xdp_frame.h"
#include "util/seam.h"
#include "verbs_skip.h"

#define RQ 64u
#define WAIT_NS 3000000000ull

struct wire {
	int fd; /* AF_PACKET on device A */
	uint8_t mac_a[6], mac_b[6];
	struct urpc_xdp_peer tmpl; /* A -> the endpoint on B */
};

static struct urpc_tp *open_on(const char *env)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *tp;
	int ret;

	verbs_skip_without_port(URPC_TRANSPORT_XDP);
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_XDP);
	cfg.device = getenv(env);
	cfg.rq_depth = RQ;
	ret = urpc__tp_create(&cfg, &tp);
	cr_assert_eq(ret, 0, "create: %s", urpc_strerror(ret));
	return tp;
}

static void mac_of(const char *ifname, uint8_t mac[6])
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	cr_assert(fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0, "MAC of %s", ifname);
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
}

/* The wire from device A to the endpoint @b (its address and port from its endpoint bytes). */
static void wire_open(struct wire *w, struct urpc_tp *b)
{
	const char *a_if = getenv("URPC_TEST_DEVICE_A"), *b_if = getenv("URPC_TEST_DEVICE_B");
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	uint8_t ep[URPC_TP_EP_MAX];
	uint32_t daddr, saddr = htonl(0x0a4d00fe); /* 10.77.0.254: any source */
	uint16_t dport;

	b->ops->get_endpoint(b, ep);
	memcpy(&daddr, ep + 2, 4);
	memcpy(&dport, ep + 6, 2);
	mac_of(a_if, w->mac_a);
	mac_of(b_if, w->mac_b);
	urpc__xdp_frame_tmpl(&w->tmpl, w->mac_a, w->mac_b, saddr, daddr, htons(40000), dport);
	w->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	cr_assert_geq(w->fd, 0, "AF_PACKET: %s", strerror(errno));
	sll.sll_ifindex = (int)if_nametoindex(a_if);
	cr_assert_eq(bind(w->fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
}

/*
 * Write a DATA datagram carrying @tag onto the wire; @spoil then damages
 * the finished frame: 0 none, 1 the IP header checksum, 2 the UDP length.
 */
static void wire_send(struct wire *w, uint32_t tag, int spoil)
{
	uint8_t f[URPC_XDP_HDR_LEN + 16 + 4];
	uint16_t sport = htons((uint16_t)(40000 + (tag & 1023)));
	uint32_t len;

	memcpy(f, w->tmpl.hdr, URPC_XDP_HDR_LEN);
	memcpy(f + 34, &sport,
	       2); /* one flow per tag: the NIC's hash spreads them over the queues */
	memset(f + URPC_XDP_HDR_LEN, 0, 16);
	f[URPC_XDP_HDR_LEN + 0] = 0x55; /* udp_hdr: magic 0x7055 little-endian, version 2, DATA */
	f[URPC_XDP_HDR_LEN + 1] = 0x70;
	f[URPC_XDP_HDR_LEN + 2] = 2;
	f[URPC_XDP_HDR_LEN + 3] = 1;
	memcpy(f + URPC_XDP_HDR_LEN + 16, &tag, 4);
	len = urpc__xdp_frame_finish(f, 20, (uint16_t)tag);
	if (spoil == 1)
		f[14 + 10] ^= 0x5a;
	else if (spoil == 2)
		f[34 + 5] += 2; /* UDP length 2 more than the IP length says */
	cr_assert_eq(send(w->fd, f, len, 0), (ssize_t)len, "AF_PACKET send: %s", strerror(errno));
}

/* Receive until @tag comes (true) or the wait ends; other datagrams are released. */
static bool wait_tag(struct urpc_tp *tp, uint32_t tag)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_tp_rx rx[32];
	bool got = false;
	int n, i;

	while (!got && urpc__now_ns() < end) {
		n = tp->ops->rx_burst(tp, rx, 32);
		for (i = 0; i < n; i++) {
			uint32_t t;

			if (rx[i].len == 4) {
				memcpy(&t, rx[i].buf, 4);
				got |= t == tag;
			}
		}
		if (n > 0)
			tp->ops->rx_release(tp, rx, (unsigned)n);
	}
	return got;
}

Test(xdp, bad_frames_are_dropped_and_counted)
{
	struct urpc_tp *b = open_on("URPC_TEST_DEVICE_B");
	struct wire w;
	uint64_t bad0;

	wire_open(&w, b);
	wire_send(&w, 1, 0);
	cr_assert(wait_tag(b, 1), "a well-formed frame from the wire is received");
	bad0 = b->stats.rx_drop_bad;
	/*
	 * A UDP length that disagrees with the IP length. (A bad IP header
	 * checksum is the parser's too, test_xdp_frame.c, and reaches it on a
	 * plain veth pair; across the stage's bridge, br_netfilter drops such
	 * frames first, counting IpInHdrErrors.)
	 */
	wire_send(&w, 2, 2);
	wire_send(&w, 3, 2);
	wire_send(&w, 4, 0);
	cr_assert(wait_tag(b, 4));
	cr_assert_eq(b->stats.rx_drop_bad - bad0, 2, "two bad UDP lengths: %lu dropped",
		     (unsigned long)(b->stats.rx_drop_bad - bad0));
	close(w.fd);
	cr_assert_eq(b->ops->destroy(b), 0);
}

Test(xdp, a_flood_of_bad_frames_leaves_the_endpoint_receiving)
{
	struct urpc_tp *b = open_on("URPC_TEST_DEVICE_B");
	struct wire w;
	unsigned i, round;

	wire_open(&w, b);
	/* 16 times the receive frames, in rounds that fit the RX ring, each drained */
	for (round = 0; round < 32; round++) {
		for (i = 0; i < RQ / 2; i++)
			wire_send(&w, 1000 + i, 2);
		wire_send(&w, 100 + round, 0);
		cr_assert(wait_tag(b, 100 + round), "round %u: the good frame after %u bad ones",
			  round, RQ);
	}
	cr_assert_eq(b->stats.rx_drop_bad, 16 * RQ, "%lu bad frames counted",
		     (unsigned long)b->stats.rx_drop_bad);
	close(w.fd);
	cr_assert_eq(b->ops->destroy(b), 0);
}

Test(xdp, frames_on_every_receive_queue_are_received)
{
	struct urpc_tp *b = open_on("URPC_TEST_DEVICE_B");
	struct wire w;
	uint32_t tag;

	wire_open(&w, b);
	/* 64 flows: the hash puts some on each of the veth's queues */
	for (tag = 1; tag <= 64; tag++) {
		wire_send(&w, tag, 0);
		cr_assert(wait_tag(b, tag), "flow %u was not received", tag);
	}
	close(w.fd);
	cr_assert_eq(b->ops->destroy(b), 0);
}
