/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's own cases, on a veth pair (tests/xdp-stage.sh sets
 * URPC_TEST_DEVICE_A/_B; elsewhere they skip): frames written straight onto
 * the wire with an AF_PACKET socket reach an xdp endpoint's parser, a bad
 * one is dropped and counted without touching the receive slots, and a
 * flood of bad frames many times the ring's size leaves the endpoint
 * receiving (every frame went back to the fill ring); several endpoints of
 * one process share an interface, from one thread and from two at once
 * (the shared UMEM's fill and completion rings). The contract suite
 * (test_contract_xdp) covers what xdp shares with the other transports.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/transport.h"
#include "transport/xdp_frame.h"
#include "util/compiler.h"
#include "util/seam.h"
#include "verbs_skip.h"

#define RQ 64u
#define WAIT_NS 3000000000ull

struct wire {
	int fd; /* AF_PACKET on device A */
	uint8_t mac_a[6], mac_b[6];
	uint32_t saddr, daddr; /* network order */
	uint16_t dport;	       /* network order: the endpoint on B */
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

	b->ops->get_endpoint(b, ep);
	w->saddr = htonl(0x0a4d00fe); /* 10.77.0.254: any source */
	memcpy(&w->daddr, ep + 2, 4);
	memcpy(&w->dport, ep + 6, 2);
	mac_of(a_if, w->mac_a);
	mac_of(b_if, w->mac_b);
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
	/* one flow per tag: the NIC's hash spreads them over the queues */
	uint16_t sport = htons((uint16_t)(40000 + (tag & 1023)));
	struct urpc_xdp_peer tmpl;
	uint32_t len;

	urpc__xdp_frame_tmpl(&tmpl, w->mac_a, w->mac_b, w->saddr, w->daddr, sport, w->dport);
	memcpy(f, tmpl.hdr, URPC_XDP_HDR_LEN);
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
	 * A UDP length that disagrees with the IP length. (Bad checksums are
	 * the parser's too, test_xdp_frame.c; on veth, whose frames never
	 * cross a wire, neither checksum is verified, and across the stage's
	 * bridge br_netfilter drops a bad IP header first, counting
	 * IpInHdrErrors.)
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
	/*
	 * 64 flows. Across tests/xdp-stage.sh's bridge every AF_PACKET frame
	 * lands on queue 0 (the URPC_XDP_QUEUES case below shows it): queue
	 * 1's socket is reached only where the sender spreads its flows.
	 */
	for (tag = 1; tag <= 64; tag++) {
		wire_send(&w, tag, 0);
		cr_assert(wait_tag(b, tag), "flow %u was not received", tag);
	}
	close(w.fd);
	cr_assert_eq(b->ops->destroy(b), 0);
}

/* How many descriptors epoll set @epfd watches (its /proc fdinfo's "tfd:" lines). */
static int epoll_watched(int epfd)
{
	char path[64], line[256];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		n += !strncmp(line, "tfd:", 4);
	fclose(f);
	return n;
}

static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/*
 * Idle waiting: the AF_XDP sockets are on the descriptor wait_arm() returns
 * only until wait_ack() (while busy none has a sleeper for the kernel to
 * wake at each frame), and a frame then makes it readable, also one that
 * came before the arm.
 */
Test(xdp, sockets_are_on_the_idle_descriptor_only_from_arm_to_ack)
{
	struct urpc_tp *b = open_on("URPC_TEST_DEVICE_B");
	const struct urpc_tp_ops *ops = b->ops;
	struct wire w;
	int fd, busy;

	wire_open(&w, b);
	fd = ops->wait_arm(b);
	cr_assert_geq(fd, 0, "wait_arm: %s", urpc_strerror(fd));
	busy = epoll_watched(fd);
	cr_assert_geq(busy, 1, "armed: the sockets are watched");
	cr_assert_not(readable_within(fd, 0), "nothing came yet");
	wire_send(&w, 7, 0);
	cr_assert(readable_within(fd, 3000), "a frame wakes the armed descriptor");
	ops->wait_ack(b);
	cr_assert_eq(epoll_watched(fd), 0, "acknowledged: no socket is watched");
	cr_assert(wait_tag(b, 7), "the frame is received");

	/*
	 * A frame sent before the arm (on veth the sender's send() delivers it
	 * into the ring before it returns, as a rule): no wake-up is lost.
	 */
	wire_send(&w, 8, 0);
	cr_assert_eq(ops->wait_arm(b), fd);
	cr_assert_eq(epoll_watched(fd), busy);
	cr_assert(readable_within(fd, 3000), "a frame sent before the arm makes it readable");
	ops->wait_ack(b);
	cr_assert(wait_tag(b, 8));
	cr_assert_eq(epoll_watched(fd), 0);

	/* A peer on this host: the kernel socket is watched too, as long as it has one. */
	{
		struct urpc_tp_cfg cfg;
		struct urpc_tp *k;
		struct urpc_tp_peer *kp;
		uint8_t ep[URPC_TP_EP_MAX];
		size_t n;

		urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_UDP);
		cr_assert_eq(urpc__tp_create(&cfg, &k), 0);
		n = k->ops->get_endpoint(k, ep);
		cr_assert_eq(ops->resolve_peer(b, ep, n, &kp), 0);
		cr_assert_eq(ops->wait_arm(b), fd);
		cr_assert_eq(epoll_watched(fd), busy + 1,
			     "the kernel socket joins while it has a peer");
		ops->wait_ack(b);
		cr_assert_eq(epoll_watched(fd), 0);
		ops->release_peer(b, kp);
		cr_assert_eq(ops->wait_arm(b), fd);
		cr_assert_eq(epoll_watched(fd), busy, "and not once it has none");
		ops->wait_ack(b);
		cr_assert_eq(k->ops->destroy(k), 0);
	}
	close(w.fd);
	cr_assert_eq(ops->destroy(b), 0);
}

/* Frames to the endpoint on device B with the wire's template aimed at @b's port. */
static void wire_aim(struct wire *w, struct urpc_tp *b)
{
	uint8_t ep[URPC_TP_EP_MAX];

	b->ops->get_endpoint(b, ep);
	memcpy(&w->dport, ep + 6, 2);
}

Test(xdp, endpoints_of_one_process_share_an_interface)
{
	struct urpc_tp *b1 = open_on("URPC_TEST_DEVICE_B");
	struct urpc_tp *b2 = open_on("URPC_TEST_DEVICE_B");
	struct urpc_tp *b3;
	struct wire w;
	uint32_t tag;

	/* before the shared UMEM, the second create failed: -EBUSY, the queue was b1's */
	wire_open(&w, b1);
	for (tag = 1; tag <= 32; tag++) {
		wire_aim(&w, tag & 1 ? b1 : b2);
		wire_send(&w, tag, 0);
		cr_assert(wait_tag(tag & 1 ? b1 : b2, tag), "flow %u to endpoint %u", tag,
			  tag & 1 ? 1 : 2);
	}
	/* a frame for one is never the other's */
	wire_aim(&w, b2);
	wire_send(&w, 100, 0);
	cr_assert(wait_tag(b2, 100));
	{
		struct urpc_tp_rx rx[32];

		cr_assert_eq(b1->ops->rx_burst(b1, rx, 32), 0, "b1 received b2's frame");
	}
	/* b1 leaves; b2 keeps receiving; b3 takes b1's share of the UMEM */
	cr_assert_eq(b1->ops->destroy(b1), 0);
	for (tag = 200; tag < 216; tag++) {
		wire_send(&w, tag, 0);
		cr_assert(wait_tag(b2, tag), "flow %u after the first endpoint left", tag);
	}
	b3 = open_on("URPC_TEST_DEVICE_B");
	wire_aim(&w, b3);
	for (tag = 300; tag < 316; tag++) {
		wire_send(&w, tag, 0);
		cr_assert(wait_tag(b3, tag), "flow %u to the endpoint that joined last", tag);
	}
	close(w.fd);
	cr_assert_eq(b2->ops->destroy(b2), 0);
	cr_assert_eq(b3->ops->destroy(b3), 0);
}

Test(xdp, the_umem_has_room_for_the_endpoints_asked)
{
	struct urpc_tp_cfg cfg;
	struct urpc_tp *b1, *b2, *b3;

	verbs_skip_without_port(URPC_TRANSPORT_XDP);
	urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_XDP);
	cfg.device = getenv("URPC_TEST_DEVICE_B");
	cfg.rq_depth = RQ;
	/* bad values are refused (each test runs in a process of its own: no UMEM yet) */
	cr_assert_eq(setenv("URPC_XDP_ENDPOINTS", "0", 1), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &b1), -EINVAL);
	cr_assert_eq(setenv("URPC_XDP_ENDPOINTS", "33", 1), 0);
	cr_assert_eq(urpc__tp_create(&cfg, &b1), -EINVAL);
	cr_assert_eq(setenv("URPC_XDP_ENDPOINTS", "2", 1), 0);
	b1 = open_on("URPC_TEST_DEVICE_B");
	b2 = open_on("URPC_TEST_DEVICE_B");
	cr_assert_eq(urpc__tp_create(&cfg, &b3), -ENOSPC, "a third endpoint in a UMEM for two");
	cr_assert_eq(b1->ops->destroy(b1), 0);
	b3 = open_on("URPC_TEST_DEVICE_B"); /* b1's share */
	cr_assert_eq(b2->ops->destroy(b2), 0);
	cr_assert_eq(b3->ops->destroy(b3), 0);
	unsetenv("URPC_XDP_ENDPOINTS");
}

/*
 * URPC_XDP_QUEUES: an endpoint on queue 0 only and one on queue 1 only (as
 * two processes on one interface would bind) each receive all 64 flows:
 * those on its own queue by AF_XDP, the others by its kernel socket (the
 * program passes them to the kernel). However the flows spread over the
 * queues, each lands on one of them: both paths are taken.
 */
Test(xdp, endpoints_on_some_queues_get_the_other_queues_flows_by_their_socket)
{
	static const char *const queues[2] = {"0", "1"};
	uint64_t by_kernel[2];
	struct urpc_tp *b;
	struct wire w;
	uint32_t tag;
	unsigned i;

	for (i = 0; i < 2; i++) {
		cr_assert_eq(setenv("URPC_XDP_QUEUES", queues[i], 1), 0);
		b = open_on("URPC_TEST_DEVICE_B");
		unsetenv("URPC_XDP_QUEUES");
		wire_open(&w, b);
		for (tag = 1; tag <= 64; tag++) {
			wire_send(&w, tag, 0);
			cr_assert(wait_tag(b, tag), "queue %s only: flow %u was not received",
				  queues[i], tag);
		}
		by_kernel[i] = b->stats.sys_rx - b->stats.sys_rx_empty;
		close(w.fd);
		cr_assert_eq(b->ops->destroy(b), 0);
	}
	cr_assert_gt(by_kernel[0] + by_kernel[1], 0, "no flow came by a kernel socket");
	cr_assert_lt(by_kernel[0] + by_kernel[1], 128, "no flow came by AF_XDP");
	/* a queue beyond the interface's is refused */
	cr_assert_eq(setenv("URPC_XDP_QUEUES", "1-2", 1), 0);
	{
		struct urpc_tp_cfg cfg;

		urpc__tp_cfg_init(&cfg, URPC_TRANSPORT_XDP);
		cfg.device = getenv("URPC_TEST_DEVICE_B");
		cr_assert_eq(urpc__tp_create(&cfg, &b), -EINVAL);
	}
	unsetenv("URPC_XDP_QUEUES");
}

#define FLOW_N 4000u
#define FLOW_WIN 16u

/* One thread's flow: its endpoint on A sends FLOW_N numbered datagrams to its endpoint on B. */
struct flow {
	struct urpc_tp *a, *b;
	struct urpc_tp_peer *a2b;
	uint32_t id;
	pthread_t th;
	unsigned got, dup, foreign;
	bool timed_out;
	uint8_t seen[FLOW_N];
};

static void *flow_run(void *arg)
{
	struct flow *f = arg;
	struct urpc_tp_rx rx[32];
	uint32_t sent = 0, msg[2];
	struct urpc_tp_tx tx = {.peer = f->a2b, .hdr = msg, .hdr_len = sizeof(msg)};

	msg[0] = f->id;
	while (f->got < FLOW_N && !f->timed_out) {
		uint64_t end = urpc__now_ns() + WAIT_NS;
		uint32_t want = URPC_MIN(sent + FLOW_WIN, FLOW_N);

		while (sent < want) {
			msg[1] = sent;
			if (f->a->ops->tx_burst(f->a, &tx, 1) == 1)
				sent++;
		}
		while (f->got < want) {
			int n = f->b->ops->rx_burst(f->b, rx, 32), i;

			for (i = 0; i < n; i++) {
				uint32_t m[2];

				memcpy(m, rx[i].buf, sizeof(m));
				if (rx[i].len != sizeof(m) || m[0] != f->id || m[1] >= FLOW_N)
					f->foreign++;
				else if (f->seen[m[1]]++)
					f->dup++;
				else
					f->got++;
			}
			if (n > 0)
				f->b->ops->rx_release(f->b, rx, (unsigned)n);
			if (urpc__now_ns() > end) {
				f->timed_out = true;
				break;
			}
		}
	}
	return NULL;
}

Test(xdp, endpoints_on_one_interface_in_two_threads)
{
	struct flow *f = calloc(2, sizeof(*f));
	uint8_t ep[URPC_TP_EP_MAX];
	unsigned i;
	size_t n;

	cr_assert_not_null(f);
	for (i = 0; i < 2; i++) {
		f[i].a = open_on("URPC_TEST_DEVICE_A");
		f[i].b = open_on("URPC_TEST_DEVICE_B");
		f[i].id = 0xf10u + i;
		n = f[i].b->ops->get_endpoint(f[i].b, ep);
		cr_assert_eq(f[i].a->ops->resolve_peer(f[i].a, ep, n, &f[i].a2b), 0);
	}
	/*
	 * Both threads at once: the send frames of A's endpoints complete
	 * through one completion ring and B's receive frames return through
	 * one fill ring; many times the send frames go round.
	 */
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&f[i].th, NULL, flow_run, &f[i]), 0);
	for (i = 0; i < 2; i++)
		pthread_join(f[i].th, NULL);
	for (i = 0; i < 2; i++) {
		cr_assert_not(f[i].timed_out, "flow %u: %u of %u arrived", i, f[i].got, FLOW_N);
		cr_assert_eq(f[i].got, FLOW_N);
		cr_assert_eq(f[i].dup, 0, "flow %u: %u duplicates", i, f[i].dup);
		cr_assert_eq(f[i].foreign, 0, "flow %u: %u datagrams of the other flow", i,
			     f[i].foreign);
	}
	for (i = 0; i < 2; i++) {
		f[i].a->ops->release_peer(f[i].a, f[i].a2b);
		cr_assert_eq(f[i].a->ops->destroy(f[i].a), 0);
		cr_assert_eq(f[i].b->ops->destroy(f[i].b), 0);
	}
	free(f);
}
