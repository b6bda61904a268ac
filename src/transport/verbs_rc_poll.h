/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's poll_completions and os_idle (verbs_rc_poll.c):
 * what the engine collects of its one-sided operations. For verbs.c.
 */
#ifndef URPC_TRANSPORT_VERBS_RC_POLL_H
#define URPC_TRANSPORT_VERBS_RC_POLL_H

#include "verbs_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ops table's poll_completions (transport.h). */
int urpc__verbs_rc_poll_completions(struct urpc_tp *tp, struct urpc_tp_comp *comps, unsigned n);

/* The ops table's os_idle (transport.h): as scan_deadlines() counts. Cold. */
int urpc__verbs_rc_os_idle(struct urpc_tp *tp, uint64_t wr_id, uint64_t *idle_ns);

#ifdef __cplusplus
}
#endif

#endif
