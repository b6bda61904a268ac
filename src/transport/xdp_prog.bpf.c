/* SPDX-License-Identifier: MIT */
/*
 * The xdp transport's XDP program (built with clang -target bpf and embedded
 * in the library; loaded by xdp_bpf.c). It steers only IPv4 UDP datagrams
 * whose destination port is a live urpc endpoint's (urpc_port_slot and
 * urpc_ports: port -> endpoint slot, filled at create, emptied at destroy)
 * to that endpoint's AF_XDP socket for the receiving queue
 * (urpc_xsks[slot * URPC_XDP_MAXQ + queue]). Everything else goes to the kernel (XDP_PASS): ARP, SSH, the
 * Nexus's session management, fragments, other programs' traffic, and a
 * datagram whose endpoint has no socket on that queue (redirect's fallback).
 * Calls nothing of ours.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define URPC_XDP_MAXQ 8	   /* sockets per endpoint: one per receive queue */
#define URPC_XDP_SLOTS 512 /* endpoints per interface */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, URPC_XDP_SLOTS);
	__type(key, __u16);   /* UDP port, network order */
	__type(value, __u32); /* endpoint slot */
} urpc_ports SEC(".maps");

/*
 * The same entries as urpc_ports, indexed by the port (network order) with
 * slot + 1 (0: none): an array's lookup is a few instructions in line where
 * the hash map's is a call that hashes the key (bpf_stats on veth: 108-116
 * ns a run with the hash map alone, 68 with this one, as libxdp's default
 * program's 69-73). The hash map keeps the bookkeeping (its keys are the
 * live ports, walked at create and destroy) and is looked up only for a
 * port the array does not have.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);   /* UDP port, network order */
	__type(value, __u32); /* endpoint slot + 1, 0 when none */
} urpc_port_slot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, URPC_XDP_SLOTS *URPC_XDP_MAXQ);
	__type(key, __u32);
	__type(value, __u32);
} urpc_xsks SEC(".maps");

SEC("xdp")
int urpc_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	__u32 *slot, port, s;
	__u32 q;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5 ||
	    ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	/* fragments (MF set or an offset) are the kernel's to reassemble */
	if (ip->frag_off & bpf_htons(0x3fff))
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	port = udp->dest;
	slot = bpf_map_lookup_elem(&urpc_port_slot, &port);
	if (slot && *slot) {
		s = *slot - 1;
	} else {
		slot = bpf_map_lookup_elem(&urpc_ports, &udp->dest);
		if (!slot)
			return XDP_PASS;
		s = *slot;
	}
	q = ctx->rx_queue_index;
	if (q >= URPC_XDP_MAXQ || s >= URPC_XDP_SLOTS)
		return XDP_PASS;
	return bpf_redirect_map(&urpc_xsks, s * URPC_XDP_MAXQ + q, XDP_PASS);
}

char _license[] SEC("license") = "Dual MIT/GPL";
