/* SPDX-License-Identifier: MIT */
/*
 * The request state machines of both slot kinds (the states are in
 * engine.h, the tables in docs/ENGINE.md): one transition function per
 * side, which checks that the step is legal, and the names of every state
 * and event for logs; and the setter of a session's state (with its
 * rx_word). An illegal step is a bug: it asserts in debug builds
 * and is counted in rpc->bad_transitions (checked by urpc__rpc_check()) in
 * release builds, where the step is still taken.
 */
#ifndef URPC_RPC_STATES_H
#define URPC_RPC_STATES_H

#include "engine.h"

static_assert(URPC_CLI_READING < 4 && URPC_SRV_RESPONDED < 4, "slot states fit 2 bits");

#ifdef __cplusplus
extern "C" {
#endif

const char *urpc__session_state_str(enum urpc_session_state s);
const char *urpc__session_ev_str(enum urpc_session_ev ev);
const char *urpc__cli_state_str(enum urpc_cli_state s);
const char *urpc__srv_state_str(enum urpc_srv_state s);

/* An illegal step of a slot of @side: logged, counted, asserted. Cold. */
void urpc__bad_transition(struct urpc_rpc *rpc, const char *side, const char *from, const char *to);

/*
 * The legal steps, as constants: bit (from * 4 + to) is set when a slot may
 * go from state @from to state @to (states.c and docs/ENGINE.md explain each
 * step). A constant keeps the check to a bit test on the fast path.
 */
#define URPC__STEP(from, to) (1u << ((from)*4 + (to)))
#define URPC_CLI_STEPS                                                                             \
	(URPC__STEP(URPC_CLI_FREE, URPC_CLI_SENT) | URPC__STEP(URPC_CLI_SENT, URPC_CLI_ACKED) |    \
	 URPC__STEP(URPC_CLI_SENT, URPC_CLI_READING) | URPC__STEP(URPC_CLI_SENT, URPC_CLI_FREE) |  \
	 URPC__STEP(URPC_CLI_ACKED, URPC_CLI_READING) |                                            \
	 URPC__STEP(URPC_CLI_ACKED, URPC_CLI_FREE) | URPC__STEP(URPC_CLI_READING, URPC_CLI_FREE))
#define URPC_SRV_STEPS                                                                             \
	(URPC__STEP(URPC_SRV_IDLE, URPC_SRV_IN_HANDLER) |                                          \
	 URPC__STEP(URPC_SRV_IDLE, URPC_SRV_READING) |                                             \
	 URPC__STEP(URPC_SRV_IDLE, URPC_SRV_RESPONDED) |                                           \
	 URPC__STEP(URPC_SRV_READING, URPC_SRV_IN_HANDLER) |                                       \
	 URPC__STEP(URPC_SRV_READING, URPC_SRV_RESPONDED) |                                        \
	 URPC__STEP(URPC_SRV_IN_HANDLER, URPC_SRV_RESPONDED) |                                     \
	 URPC__STEP(URPC_SRV_IN_HANDLER, URPC_SRV_IDLE) |                                          \
	 URPC__STEP(URPC_SRV_RESPONDED, URPC_SRV_IN_HANDLER) |                                     \
	 URPC__STEP(URPC_SRV_RESPONDED, URPC_SRV_READING) |                                        \
	 URPC__STEP(URPC_SRV_RESPONDED, URPC_SRV_RESPONDED))

/*
 * The states a slot may come from into state @to, as a 4-bit mask; with
 * @to a constant at every call the compiler folds it, and the check is a
 * bit test of the current state.
 */
#define URPC__INTO(steps, to)                                                                      \
	((((steps) >> (to)) & 1u) | ((((steps) >> (4 + (to))) & 1u) << 1) |                        \
	 ((((steps) >> (8 + (to))) & 1u) << 2) | ((((steps) >> (12 + (to))) & 1u) << 3))

static inline bool urpc__cli_step_ok(enum urpc_cli_state from, enum urpc_cli_state to)
{
	return (URPC__INTO(URPC_CLI_STEPS, (unsigned)to) >> from) & 1u;
}

static inline bool urpc__srv_step_ok(enum urpc_srv_state from, enum urpc_srv_state to)
{
	unsigned into = URPC__INTO(URPC_SRV_STEPS, (unsigned)to);

	/* Folded where every state may step into @to: only a state out of range is wrong. */
	return into == 0xfu ? (unsigned)from < 4 : (into >> from) & 1u;
}

/*
 * Session @s goes to state @to; only urpc__session_transition() (session.c)
 * calls it. rx_word is the first word of the datagrams @s takes while
 * CONNECTED, and 0 (which no datagram starts with) in every other state:
 * the receive path's one compare of that word checks the state too.
 */
static inline void urpc__sess_set_state(struct urpc_session *s, enum urpc_session_state to)
{
	s->state = to;
	s->rx_word =
		to != URPC_SESS_CONNECTED
			? 0
			: URPC_PKT_WORD(s->role == URPC_ROLE_CLIENT ? URPC_PKT_RESP : URPC_PKT_REQ);
}

/*
 * Client slot @sl, in state @from (as its caller knows it: no second load,
 * and a check the caller's tests settle folds away), goes to state @to.
 */
static inline void urpc__cli_step(struct urpc_rpc *rpc, struct urpc_cslot *sl,
				  enum urpc_cli_state from, enum urpc_cli_state to)
{
	if (unlikely(!urpc__cli_step_ok(from, to)))
		urpc__bad_transition(rpc, "client", urpc__cli_state_str(from),
				     urpc__cli_state_str(to));
	sl->state = to;
}

/*
 * Client slot @sl goes to state @to: with urpc__cli_step(), the only
 * writers of a client slot's state.
 */
static inline void urpc__cli_set(struct urpc_rpc *rpc, struct urpc_cslot *sl,
				 enum urpc_cli_state to)
{
	urpc__cli_step(rpc, sl, sl->state, to);
}

/*
 * Server slot @sl, in state @from (as its caller just read it: no second
 * load), goes to state @to: the only writer of a server slot's state.
 */
static inline void urpc__srv_step(struct urpc_rpc *rpc, struct urpc_sslot *sl,
				  enum urpc_srv_state from, enum urpc_srv_state to)
{
	if (unlikely(!urpc__srv_step_ok(from, to)))
		urpc__bad_transition(rpc, "server", urpc__srv_state_str(from),
				     urpc__srv_state_str(to));
	sl->state = to;
}

static inline void urpc__srv_set(struct urpc_rpc *rpc, struct urpc_sslot *sl,
				 enum urpc_srv_state to)
{
	urpc__srv_step(rpc, sl, sl->state, to);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_STATES_H */
