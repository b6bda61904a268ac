/* SPDX-License-Identifier: MIT */
/*
 * The deterministic simulator's shared declarations (tests/sim).
 *
 * One thread drives several simulated processes ("nodes": a Nexus and an
 * Rpc each) under a virtual clock that jumps from event to event. The
 * clock, entropy, the loop transport's datagrams and session management
 * all go through the seams (src/util/seam.h, urpc__loop_set_net,
 * urpc__nexus_create_sim), so that one seed decides everything and a run
 * replays exactly.
 *
 * sim_net.c owns the virtual clock, the event queue, the simulated links
 * (drop, duplicate, delay, partitions) and the event log; sim_world.c owns
 * the nodes, the workload, the faults and the invariants; urpc_sim.c the
 * command line. They may call the engine's public API and the internal
 * hooks named in the seams, nothing else.
 */
#ifndef URPC_SIM_SIM_H
#define URPC_SIM_SIM_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../src/util/rand.h"

#define SIM_MAX_NODES 8

/* What a run is made of: everything else follows from the seed. */
struct sim_cfg {
	uint64_t seed;
	unsigned clients;     /* client nodes (1..4) */
	unsigned reqs;	      /* requests each client issues */
	unsigned faults;      /* SIM_F_* that may happen */
	unsigned max_large;   /* largest message, bytes */
	uint64_t fault_ns;    /* faults happen before this virtual time */
	uint64_t work_ns;     /* requests are issued before this */
	unsigned gpu;	      /* some payloads live in (fake) GPU memory */
	unsigned rmem;	      /* clients also run batches of one-sided operations on S's memory */
	unsigned release_lag; /* loop release_polls of every Rpc: readers let go of grants late */
	unsigned window;      /* every Rpc's session_window (not drawn: 8 unless given) */
	unsigned trace;	      /* print every event */
	unsigned verbose;     /* print the run's summary */
	uint64_t max_events;  /* give up (a livelock) after this many events; 0: default */
	unsigned fabric;      /* datagrams and one-sided transfers cross sim_fabric.h's switch;
				 1: with congestion control (Swift), 2: without */
};

#define SIM_F_DROP 0x01u
#define SIM_F_DUP 0x02u
#define SIM_F_DELAY 0x04u /* jitter, hence reordering */
#define SIM_F_PART 0x08u  /* partitions between two nodes, healed later */
#define SIM_F_CRASH 0x10u /* a process vanishes and restarts on its address */
#define SIM_F_RPC 0x20u	  /* an Rpc is destroyed and created again */
#define SIM_F_DISC 0x40u  /* a client disconnects a session in mid-transfer */
/* A server frees a session and tells nobody (its client must learn it: no half-open session). */
#define SIM_F_FORGET 0x80u
#define SIM_F_ALL 0xffu
#define SIM_F_DRAWN 0x7fu /* what a seed draws uniformly; forget is drawn apart */

/* Fill @c from @seed alone (the shape of the run). */
void sim_cfg_from_seed(struct sim_cfg *c, uint64_t seed);
/* "drop,dup,..." of @mask into @buf. */
const char *sim_faults_str(unsigned mask, char *buf, size_t n);
int sim_faults_parse(const char *s, unsigned *mask);

/* Outcome of one run. */
struct sim_result {
	int failed;	      /* an invariant broke */
	char what[512];	      /* the first violation */
	uint64_t events;      /* events processed */
	uint64_t vtime_ns;    /* virtual time at the end */
	uint64_t trace_hash;  /* hash of every event: equal for equal runs */
	uint64_t reqs_issued; /* requests enqueued */
	uint64_t reqs_ok;     /* ... answered with status 0 */
	uint64_t reqs_err;    /* ... completed with an error */
	uint64_t handled;     /* handler invocations */
	uint64_t gpu;	      /* requests with a payload or response buffer in GPU memory */
	uint64_t rmem_batches, rmem_ok; /* batches submitted, ... that ended with 0 */
	uint64_t retired_late;	/* large responses kept until their reader let go (release lag) */
	uint64_t answered_late; /* large requests whose continuation waited for the same */
	uint64_t crashes, rpc_restarts, partitions, disconnects, forgets;
	/* --fabric: the switch ports' drops, ECN marks, deepest queue, worst p99 queue (bytes) */
	uint64_t fab_drops, fab_marks, fab_qmax, fab_q99;
};

/* Run one simulation. Returns 0, or 1 with res->failed set. */
int sim_run(const struct sim_cfg *cfg, struct sim_result *res);

/* ---- sim_net.c: clock, events, links ---- */

enum sim_ev_kind {
	EV_STEP = 1, /* one event-loop pass of a node's Rpc */
	EV_DP,	     /* a datapath datagram reaches an endpoint */
	EV_SM,	     /* a session-management datagram reaches an address */
	EV_ISSUE,    /* a client issues a request */
	EV_DEFER,    /* a deferred handler answers */
	EV_FAULT,    /* a fault starts or ends */
	EV_CONNECT,  /* a client (re)connects its sessions */
	EV_PHASE,    /* the run moves to its next phase */
	EV_NX_TICK,  /* a node's Nexus runs its heartbeat timers (its SM thread would) */
	EV_HOP,	     /* a packet reaches a port of the fabric (sim_fabric.h) */
	EV_OS_CHUNK, /* a chunk of a one-sided transfer crossed the fabric */
	EV_EXP,	     /* an experiment's own event (sim_exp.c) */
};

struct sim_ev {
	uint64_t t;
	uint64_t seq;
	enum sim_ev_kind kind;
	int node;
	uint32_t a, b; /* kind-specific */
	uint64_t c;
	void *ptr;
	struct sockaddr_in from; /* EV_SM */
	/* in the fabric (EV_HOP): the kind it takes on arrival, its path and size */
	enum sim_ev_kind fk;
	uint16_t src, dst, hop;
	bool ecn, lossless;
	uint32_t wire;
	uint64_t extra_ns;
	uint32_t len;
	uint8_t data[]; /* EV_DP, EV_SM */
};

struct sim_link {
	double drop, dup;
	uint64_t delay_ns, jitter_ns;
	bool cut; /* partitioned */
};

struct sim_net {
	uint64_t now;
	uint64_t seq;
	struct sim_ev **heap;
	size_t nheap, cap;
	struct urpc_rand rng; /* network faults and delays */
	struct urpc_rand ent; /* the engine's entropy */
	struct sim_link link[SIM_MAX_NODES][SIM_MAX_NODES];
	uint64_t events;
	uint64_t hash;
	unsigned trace;
	/* the last events, for a failure report */
	struct sim_ev_rec {
		uint64_t t;
		enum sim_ev_kind kind;
		int node;
		uint32_t a, b, len;
	} last[48];
	unsigned nlast;
	/* mapping from the engine's names to nodes; filled by sim_world.c */
	int (*node_of_ep)(void *arg, uint32_t ep_id);
	int (*node_of_addr)(void *arg, const struct sockaddr_in *a);
	bool (*node_up)(void *arg, int node);
	void (*wake)(void *arg, int node, uint64_t at); /* run @node's loop at @at */
	void *arg;
	struct sim_fabric *fab; /* the fabric model, or NULL: links as above */
};

void sim_net_init(struct sim_net *n, uint64_t seed, unsigned trace);
/* Install the seams (clock, entropy, loop net); undo with sim_net_fini(). */
int sim_net_install(struct sim_net *n);
void sim_net_fini(struct sim_net *n);

struct sim_ev *sim_ev_new(struct sim_net *n, enum sim_ev_kind kind, uint64_t at, int node,
			  uint32_t len);
void sim_ev_push(struct sim_net *n, struct sim_ev *e);
/* The earliest event (the clock jumps to it), or NULL. The caller frees it. */
struct sim_ev *sim_ev_pop(struct sim_net *n);
/* Record @e in the log and the trace hash. */
void sim_ev_note(struct sim_net *n, const struct sim_ev *e);
void sim_net_dump_last(const struct sim_net *n, FILE *f);
const char *sim_ev_kind_str(enum sim_ev_kind k);

/* Bytes a datagram or chunk takes on the wire besides its own (Ethernet, IP, UDP). */
#define SIM_WIRE_OVERHEAD 64u
/* Fabric: a chunk of a one-sided transfer arrived (EV_OS_CHUNK). */
void sim_net_os_chunk(struct sim_net *n, const struct sim_ev *e);

/* A delay on link @from -> @to, or UINT64_MAX when the datagram is lost. */
uint64_t sim_link_transit(struct sim_net *n, int from, int to, bool *dup);

static inline uint64_t sim_rand_between(struct urpc_rand *r, uint64_t lo, uint64_t hi)
{
	return lo + urpc__rand_below(r, hi - lo + 1);
}

/* ---- sim_exp.c: the congestion experiments (docs/CC.md) ---- */
int sim_exp_parse(const char *name, int *exp);
/* Run experiment @exp with @cc "on", "off" or "both"; CSV to @csv (or NULL). Exit status. */
int sim_exp_run(int exp, const char *cc, const char *csv);

/* ---- sim_gpu.c: device buffers over the fake CUDA driver ---- */
#define SIM_GPU_BUF (256u * 1024)
int sim_gpu_init(void); /* 0, or -1 (sim_gpu_why() says why) */
const char *sim_gpu_why(void);
void *sim_gpu_get(size_t len); /* a free device buffer of SIM_GPU_BUF bytes, or NULL */
void sim_gpu_put(void *dev);
unsigned sim_gpu_in_use(void); /* buffers lent out */
void sim_gpu_reset(void);      /* every buffer free again (a new run) */
int sim_gpu_write(void *dev, const void *src, size_t n);
int sim_gpu_read(void *dst, const void *dev, size_t n);

#endif /* URPC_SIM_SIM_H */
