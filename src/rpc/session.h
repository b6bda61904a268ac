/* SPDX-License-Identifier: MIT */
/*
 * Sessions: the public urpc_session_* calls, session-management packets,
 * their timers, and the session state machine.
 */
#ifndef URPC_RPC_SESSION_H
#define URPC_RPC_SESSION_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Timers: SM retries, pings, peer timeouts. Called from the loop's scan. */
void urpc__session_timers(struct urpc_rpc *rpc, struct urpc_session *s);

/*
 * The earliest time (Rpc clock) urpc__session_timers() acts on @s, or
 * UINT64_MAX when it never will. The idle sleep ends there.
 */
uint64_t urpc__session_next_timer(const struct urpc_rpc *rpc, const struct urpc_session *s);

/*
 * Has the Nexus noticed something of a peer since the last call (a peer
 * failed, an Rpc of it went or came)? Then check every established
 * session against its peer's generations. Each timer scan calls it, and
 * the NX_NOTICE packet that wakes the Rpc sooner.
 */
void urpc__session_notices(struct urpc_rpc *rpc);

/* Raise pending sm_handler events and the failures deferred to the loop. */
void urpc__session_run_pending(struct urpc_rpc *rpc);

/*
 * The session state machine: the only writer of a session's state. Fails
 * its requests and raises sm_handler events as the transition says.
 */
void urpc__session_transition(struct urpc_rpc *rpc, struct urpc_session *s, enum urpc_session_ev ev,
			      int status);

/* Send the transport's control messages over session management. */
void urpc__session_tp_ctl(struct urpc_rpc *rpc);

/*
 * A session-management round trip of @rtt_ns was measured: update the
 * smoothed estimate and the one-sided timeout derived from it. Cold.
 */
void urpc__session_rtt_sample(struct urpc_rpc *rpc, uint64_t rtt_ns);

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_SESSION_H */
