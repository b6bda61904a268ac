/* SPDX-License-Identifier: MIT */
/*
 * nx_pair.h - a server and a client Rpc on udp, each with its own Nexus on
 * 127.0.0.1, shared by the control-plane tests: test_nx_auth.c (forged
 * packets, half-open sessions, the datapath's "no such session") and
 * test_nx_quota.c (a server's shares and the one-sided time-out).
 * nx_pair.c owns the two sides, the handlers the server registers, the
 * session events each side counts and the waits the cases share; every
 * wait is bounded by WAIT_NS. Options a case sets before side_up() are
 * the opt_ variables (0 / -1 keep the library's defaults).
 */
#ifndef URPC_TEST_NX_PAIR_H
#define URPC_TEST_NX_PAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urpc/urpc.h>

#define HOST "127.0.0.1"
#define SRV_ID 1
#define CLI_ID 2
#define T_ECHO 1
#define T_BIG 2
#define T_SINK 3
#define T_LATE 4
#define PUT_LEN (1u << 20)
#define BIG_LEN (4u << 20)
#define PING_MS 20
#define TIMEOUT_MS 200	       /* the peer time-out of a case that measures liveness */
#define WAIT_NS 10000000000ull /* any single wait; far beyond what it waits for */
/*
 * The peer time-out of every other case: a peer declared failed there is a
 * false verdict (both processes live), so it needs a silence as long as the
 * longest wait. At load 12 on 2 cores a 20 ms poll() overslept by up to
 * 298 ms (2 of 709 above 180 ms), and 200 ms reset sessions mid-case.
 */
#define QUIET_TIMEOUT_MS ((uint32_t)(WAIT_NS / 1000000))

struct side {
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	unsigned connected, resets;
	enum urpc_sm_event last_ev; /* of the last reset or failure, for messages */
	int last_status;
};

extern struct side S, C;

/* T_BIG answers with big_len bytes (BIG_LEN unless a case says). */
extern size_t big_len;
/* T_LATE keeps its request here, for the case to answer. */
extern struct urpc_req_handle *late_h;

extern uint32_t opt_os_timeout_ms;
extern int opt_per_source;
extern uint32_t opt_peer_timeout_ms;

/* echo_cont() counts its completions in echo_done and keeps the last status. */
extern unsigned echo_done;
extern int echo_status;

void side_up(struct side *sd, bool server);
void side_up_at(struct side *sd, bool server, const char *host);
void side_down(struct side *sd);
/* One pass of the server's loop, then one of the client's. */
void pump(void);
void echo_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);
int echo_once(int sess);
int connect_one(void);

#endif /* URPC_TEST_NX_PAIR_H */
