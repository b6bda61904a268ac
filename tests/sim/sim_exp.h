/* SPDX-License-Identifier: MIT */
/*
 * The congestion experiments' model (sim_exp.c) as the runs (sim_exp_runs.c)
 * see it: sessions as streams of 4 KiB packets over the fabric, with or
 * without src/rpc/cc.c's controller. Test code only.
 */
#ifndef URPC_SIM_EXP_H
#define URPC_SIM_EXP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../src/rpc/cc.h"
#include "sim.h"
#include "sim_fabric.h"

enum { X_INCAST = 1, X_FAIRNESS, X_VICTIM, X_SESSION };
enum { T_SEND = 1, T_PKT, T_ACK, T_RTO, T_TICK };

extern unsigned exp_mtu; /* bytes per packet: 4096, or SIM_MTU */
#define MTU exp_mtu
#define WINDOW (256u * 1024)
#define LINE_BPS 100000000000ull
#define PROP_NS 1000u
#define BUF (1000u * 1000)
#define TARGET_NS 8000u
#define RTO_NS 1000000ull
#define VICTIM_LEN 32u
#define T0 1000000000ull

struct flow {
	unsigned host;
	bool active, victim, send_armed, rto_armed, in_send;
	uint64_t msg;			    /* bytes per message */
	uint64_t snd_una, snd_nxt, msg_end; /* stream offsets */
	uint64_t rcv_nxt;		    /* the server's side */
	uint64_t msg_start, last_progress;
	uint64_t delivered, retx;
	struct urpc_cc own, *cc; /* the session's controller: its own, or shared (X_SESSION) */
	struct urpc_cc_share_peer own_peer, *peer; /* the server's fair share's view of it */
	int first, then; /* X_SESSION: the session's stream sent before this one / after; -1 */
};

struct lat {
	uint64_t *v;
	size_t n, cap;
};

struct exp {
	struct sim_net net;
	struct sim_fabric fab;
	struct urpc_cc_params ccp;
	bool cc_on;
	bool share_on; /* SIM_SHARE=1: the server echoes a fair share (cc.h) */
	struct urpc_cc_share share;
	unsigned nflows, server;
	struct flow *f;
	struct lat msg_lat, vic_lat;
	uint64_t measure_from; /* steady state: latencies, queue and drops from here */
	uint64_t drops_at_measure, retx_at_measure;
	/* fairness: bytes per flow per window */
	uint64_t *win_bytes;
	FILE *csv;
	const char *name;
};

extern unsigned sim_exp_missed;

void exp_lat_add(struct lat *l, uint64_t v);
double exp_lat_pct(struct lat *l, double q);
void exp_push(struct exp *x, unsigned type, unsigned flow, uint64_t at, uint64_t c);
void exp_try_send(struct exp *x, unsigned i);
void exp_next_msg(struct exp *x, unsigned i);
uint64_t exp_drops(struct exp *x);
uint64_t exp_retx(struct exp *x);
/* Flows 0..n-1 on hosts 0..n-1; the server is host n. 0 or -1. */
int exp_init(struct exp *x, unsigned n, bool cc, uint64_t ecn_bytes);
void exp_fini(struct exp *x);
/* (Re)start the server's fair share for its port of @line_bps. */
void exp_share_init(struct exp *x, uint64_t line_bps);
/* Run until @end; T_TICK events go to @tick. */
void exp_loop(struct exp *x, uint64_t end, void (*tick)(struct exp *, uint64_t));
void exp_start_measure(struct exp *x);
void exp_no_tick(struct exp *x, uint64_t c);
/* The victim alone: its idle round trip (us). */
double exp_idle_rtt(void);

#endif /* URPC_SIM_EXP_H */
