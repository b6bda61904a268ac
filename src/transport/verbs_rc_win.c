/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's set_peer_window and peer_os_rtt (verbs_rc_win.h
 * says what they keep and why). verbs.c puts them in its ops table; this
 * file calls nothing.
 */
#include "verbs_rc_win.h"

/*
 * A window narrowed takes effect as chunks come back; one widened, at the
 * next completion on the connection (there is one: an operation waits
 * only while others are out).
 */
void urpc__verbs_rc_set_window(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t bytes)
{
	(void)tp;
	if (peer && peer->conn)
		peer->conn->os_window = bytes;
}

uint64_t urpc__verbs_rc_os_rtt(struct urpc_tp *tp, struct urpc_tp_peer *peer, uint64_t *bytes)
{
	struct verbs_conn *p = peer ? peer->conn : NULL;
	uint64_t rtt = p ? p->os_rtt_ns : 0;

	(void)tp;
	if (rtt) {
		p->os_rtt_ns = 0;
		*bytes = p->os_rtt_bytes;
	}
	return rtt;
}
