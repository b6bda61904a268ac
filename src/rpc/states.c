/* SPDX-License-Identifier: MIT */
/*
 * The state machines' tables (states.h): names generated from the X-macro
 * lists of engine.h, and the legal steps of both slot kinds.
 * May call: the log. Owns rpc->bad_transitions.
 */
#define URPC_LOG_MODULE "rpc"
#include "states.h"

#include <assert.h>

#include "../util/log.h"

#define NAME_CASE(prefix, name, str)                                                               \
	case prefix##name:                                                                         \
		return str;
#define SESS_CASE(name, val, str) NAME_CASE(URPC_SESS_, name, str)
#define SEV_CASE(name, val, str) NAME_CASE(URPC_SEV_, name, str)
#define CLI_CASE(name, val, str) NAME_CASE(URPC_CLI_, name, str)
#define SRV_CASE(name, val, str) NAME_CASE(URPC_SRV_, name, str)

const char *urpc__session_state_str(enum urpc_session_state s)
{
	switch (s) {
		URPC_SESSION_STATES(SESS_CASE)
	}
	return "?";
}

const char *urpc__session_ev_str(enum urpc_session_ev ev)
{
	switch (ev) {
		URPC_SESSION_EVENTS(SEV_CASE)
	}
	return "?";
}

const char *urpc__cli_state_str(enum urpc_cli_state s)
{
	switch (s) {
		URPC_CLI_STATES(CLI_CASE)
	}
	return "?";
}

const char *urpc__srv_state_str(enum urpc_srv_state s)
{
	switch (s) {
		URPC_SRV_STATES(SRV_CASE)
	}
	return "?";
}

/*
 * The steps of URPC_CLI_STEPS and URPC_SRV_STEPS (states.h), in words.
 *
 * Client slot:
 *   FREE    -> SENT     a request takes the slot and is sent
 *   SENT    -> ACKED    the server says it has read the large request
 *   SENT    -> READING  a large response's descriptor: its READ starts
 *   SENT    -> FREE     the response, an error, the deadline, a failure
 *   ACKED   -> READING, FREE   as from SENT
 *   READING -> FREE     the READ completed, or it became an orphan
 *
 * Server slot; a new request (a higher request number) may arrive in IDLE
 * or RESPONDED:
 *   IDLE, RESPONDED -> IN_HANDLER  a small request: its handler runs
 *   IDLE, RESPONDED -> READING     a large request: its READ starts
 *   IDLE, RESPONDED -> RESPONDED   answered with an error at once
 *   READING    -> IN_HANDLER       the READ completed: the handler runs
 *   READING    -> RESPONDED        the READ failed: answered with the error
 *   IN_HANDLER -> RESPONDED        the handler's response was enqueued
 *   IN_HANDLER -> IDLE             the session was reset meanwhile: dropped
 */

URPC_COLD void urpc__bad_transition(struct urpc_rpc *rpc, const char *side, const char *from,
				    const char *to)
{
	rpc->bad_transitions++;
	URPC_ERR_RATELIMIT(rpc->id, "illegal %s slot transition %s -> %s (a bug)", side, from, to);
	assert(!"illegal slot transition");
}
