/* SPDX-License-Identifier: MIT */
/*
 * The simulator's fabric model (issue 32): hosts joined by links with a
 * bandwidth and a propagation delay through one switch, or two tiers (ToR
 * switches under one spine). Every output port (a host's NIC, a switch's
 * port towards a host, a ToR's uplink, the spine's port towards a ToR) is a
 * FIFO that sends one packet at a time at its rate; a switch port holds at
 * most buf_bytes (drop-tail) and marks ECN on packets that find more than
 * ecn_bytes queued. A packet takes its size over the rate on each port, and
 * crosses each link in prop_ns; it moves from port to port as EV_HOP events
 * of struct sim_net, so that ports see arrivals in time order and the queue
 * a packet finds is exact.
 *
 * Used by sim_net.c (the engine's datagrams and one-sided transfers, the
 * seed range's --fabric) and sim_exp.c (the congestion experiments). Calls
 * sim_net's event queue and libc only.
 */
#ifndef URPC_SIM_FABRIC_H
#define URPC_SIM_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

struct sim_net;
struct sim_ev;

struct sim_fab_cfg {
	unsigned hosts;	    /* hosts, numbered 0..hosts-1 */
	unsigned per_tor;   /* 0: one switch; else hosts per ToR (two tiers) */
	double host_gbps;   /* host links (NIC and switch port to the host) */
	double up_gbps;	    /* ToR <-> spine links (two tiers) */
	uint64_t prop_ns;   /* per link */
	uint64_t buf_bytes; /* per switch output port */
	uint64_t ecn_bytes; /* mark above this many queued bytes; 0: never */
	uint32_t os_chunk;  /* one-sided transfers cross as packets of this size */
};

#define SIM_FAB_QBUCKET 1024u /* queue histogram bucket, bytes */
#define SIM_FAB_QBUCKETS 4096u

struct sim_port {
	uint64_t free_ps;     /* the port is busy sending until this time, ps */
	uint64_t ps_per_byte; /* rate */
	uint64_t buf, ecn;    /* bytes; buf UINT64_MAX: a host NIC (no drop) */
	uint64_t pkts, bytes, drops, marks, qmax;
	uint32_t *qhist; /* queue found by each arrival, SIM_FAB_QBUCKET buckets (switch ports) */
};

struct sim_fabric {
	struct sim_fab_cfg cfg;
	unsigned tors;
	struct sim_port *nic;	/* [hosts]: host egress */
	struct sim_port *down;	/* [hosts]: switch (ToR) port towards the host */
	struct sim_port *up;	/* [tors]: ToR uplink */
	struct sim_port *spine; /* [tors]: spine port towards a ToR */
	/* one-sided transfers in flight (sim_net.c's os_admit) */
	struct sim_os {
		uint64_t key;
		uint32_t left; /* chunks not yet delivered */
		bool used, served;
	} os[1024];
};

/* Set up @f for @c (rates and sizes checked by the caller). 0 or -ENOMEM. */
int sim_fab_init(struct sim_fabric *f, const struct sim_fab_cfg *c);
void sim_fab_fini(struct sim_fabric *f);
/*
 * Send @e (a prepared event, its kind the one it takes on arrival) from
 * host @src to host @dst as a packet of @wire bytes; @lossless: never
 * dropped (one-sided chunks, as RDMA over a lossless class). The event
 * reaches @dst with e->ecn set when a port marked it, @extra_ns after the
 * last hop; a dropped one is freed. Takes @e.
 */
void sim_fab_send(struct sim_fabric *f, struct sim_net *n, struct sim_ev *e, unsigned src,
		  unsigned dst, uint32_t wire, uint64_t extra_ns, bool lossless);
/* An EV_HOP event popped from @n: moves it on (or drops it). Takes @e. */
void sim_fab_hop(struct sim_fabric *f, struct sim_net *n, struct sim_ev *e);
/* Bytes queued at @p at time @now_ns. */
uint64_t sim_fab_queued(const struct sim_port *p, uint64_t now_ns);
/* The @q quantile (0..1) of the queue found by arrivals at @p, bytes. */
uint64_t sim_fab_qpct(const struct sim_port *p, double q);
/* Start @p's queue histogram and maximum again (the counters go on). */
void sim_fab_qreset(struct sim_port *p);

#endif /* URPC_SIM_FABRIC_H */
