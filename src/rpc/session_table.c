/* SPDX-License-Identifier: MIT */
/*
 * The session table (session_table.h). Owns rpc->sessions, rpc->hi_session,
 * the allocation of sm_map (its bits are session.c's and evloop.c's), the
 * number set (rpc->nums), the index of server sessions (srv_index and
 * each server session's srv.hnext), the list of client sessions with work
 * for the next pass (pend_head/tail, cli.on_pend and its links), and the
 * memory of every session.
 * May call: large.h (orphan a session's operations), rmem.h (its
 * exposures' grants are gone), tx.h, the pool, the
 * transport's release_peer and tx_flush, the Nexus (a session's heartbeat
 * reference), util/idset.h, session_src.h (a server session's source
 * count goes with it).
 */
#define URPC_LOG_MODULE "session"
#include "session_table.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "cc_sess.h"
#include "large.h"
#include "rmem.h"
#include "session_src.h"
#include "tx.h"

#define INDEX_MIN_BUCKETS 64u

/* ---- the index of server sessions ---- */

/* The bucket of a CONNECT_REQ's key (splitmix64's finalizer over the fields). */
static uint32_t index_bucket(const struct urpc_rpc *rpc, uint64_t token, uint32_t client_sess,
			     uint8_t client_rpc, const struct sockaddr_in *nexus)
{
	uint64_t x = token ^ rpc->srv_index_salt;

	x ^= ((uint64_t)client_sess << 8 | client_rpc) * 0x9e3779b97f4a7c15ull;
	x ^= ((uint64_t)nexus->sin_addr.s_addr << 16 | nexus->sin_port) * 0xc2b2ae3d27d4eb4full;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint32_t)x & rpc->srv_index_mask;
}

static uint32_t index_bucket_of(const struct urpc_rpc *rpc, const struct urpc_session *s)
{
	return index_bucket(rpc, s->token, s->remote_num, s->remote_rpc_id, &s->peer_nexus);
}

/* Twice the buckets once there are more sessions than buckets; kept as is without memory. */
static void index_grow(struct urpc_rpc *rpc)
{
	uint32_t old_n = rpc->srv_index_mask + 1, i, num;
	uint32_t *old = rpc->srv_index, *b;

	if (old_n >= (1u << 31) / sizeof(*b))
		return;
	b = calloc((size_t)old_n * 2, sizeof(*b));
	if (!b)
		return;
	rpc->srv_index = b;
	rpc->srv_index_mask = old_n * 2 - 1;
	for (i = 0; i < old_n; i++) {
		for (num = old[i]; num;) {
			struct urpc_session *s = rpc->sessions[num - 1];
			uint32_t k = index_bucket_of(rpc, s);

			num = s->srv.hnext;
			s->srv.hnext = b[k];
			b[k] = s->local_num + 1;
		}
	}
	free(old);
}

void urpc__sess_index(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t k;

	if (rpc->srv_sessions >= rpc->srv_index_mask + 1)
		index_grow(rpc);
	k = index_bucket_of(rpc, s);
	s->srv.hnext = rpc->srv_index[k];
	rpc->srv_index[k] = s->local_num + 1;
	rpc->srv_sessions++;
}

/* Take @s out of the index, if it is there (a refused session never was). */
static void index_remove(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t *link = &rpc->srv_index[index_bucket_of(rpc, s)];

	while (*link && *link != s->local_num + 1)
		link = &rpc->sessions[*link - 1]->srv.hnext;
	if (!*link)
		return;
	*link = s->srv.hnext;
	rpc->srv_sessions--;
}

struct urpc_session *urpc__sess_find_server(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p)
{
	uint32_t num = rpc->srv_index[index_bucket(rpc, p->token, p->client_sess, p->client_rpc_id,
						   &p->from)];

	while (num) {
		struct urpc_session *s = rpc->sessions[num - 1];

		if (s->token == p->token && s->remote_num == p->client_sess &&
		    s->remote_rpc_id == p->client_rpc_id &&
		    s->peer_nexus.sin_addr.s_addr == p->from.sin_addr.s_addr &&
		    s->peer_nexus.sin_port == p->from.sin_port)
			return s;
		num = s->srv.hnext;
	}
	return NULL;
}

/* ---- client sessions with work for the next pass ---- */

static struct urpc_session *by_link(struct urpc_rpc *rpc, uint32_t link)
{
	return rpc->sessions[link - 1];
}

static void pend_unlink(struct urpc_rpc *rpc, struct urpc_session *s)
{
	if (!s->cli.on_pend)
		return;
	if (s->cli.pend_prev)
		by_link(rpc, s->cli.pend_prev)->cli.pend_next = s->cli.pend_next;
	else
		rpc->pend_head = s->cli.pend_next;
	if (s->cli.pend_next)
		by_link(rpc, s->cli.pend_next)->cli.pend_prev = s->cli.pend_prev;
	else
		rpc->pend_tail = s->cli.pend_prev;
	s->cli.on_pend = false;
	s->cli.pend_prev = s->cli.pend_next = 0;
}

void urpc__sess_pend(struct urpc_rpc *rpc, struct urpc_session *s)
{
	rpc->have_pending = true;
	if (s->cli.on_pend)
		return;
	s->cli.on_pend = true;
	s->cli.pend_prev = rpc->pend_tail;
	s->cli.pend_next = 0;
	if (rpc->pend_tail)
		by_link(rpc, rpc->pend_tail)->cli.pend_next = s->local_num + 1;
	else
		rpc->pend_head = s->local_num + 1;
	rpc->pend_tail = s->local_num + 1;
}

struct urpc_session *urpc__sess_pend_pop(struct urpc_rpc *rpc)
{
	struct urpc_session *s;

	if (!rpc->pend_head)
		return NULL;
	s = by_link(rpc, rpc->pend_head);
	pend_unlink(rpc, s);
	return s;
}

/* ---- sessions ---- */

/*
 * The free entries' placeholder (engine.h): a client session, zeroed, with
 * room for one slot (slot_mask 0). Its rx_word and token (0) are those of
 * a session that is not CONNECTED, so no datagram of a real peer reaches
 * it; one forged to match (first word 0, token 0) is taken as a response
 * and dropped by its slot, which is FREE: nothing ever writes it.
 */
union urpc_sess_placeholder urpc__sess_placeholder = {.s = {.role = URPC_ROLE_CLIENT}};

size_t urpc__sess_size(enum urpc_session_role role, unsigned window)
{
	if (role == URPC_ROLE_CLIENT)
		return offsetof(struct urpc_session, cli.slots) +
		       (size_t)window * sizeof(struct urpc_cslot);
	return offsetof(struct urpc_session, srv.slots) +
	       (size_t)window * sizeof(struct urpc_sslot);
}

int urpc__sess_table_init(struct urpc_rpc *rpc)
{
	int ret = urpc__idset_init(&rpc->nums, rpc->max_sessions);

	if (ret)
		return ret;
	rpc->sessions = calloc(rpc->max_sessions, sizeof(*rpc->sessions));
	rpc->sm_map = calloc((rpc->max_sessions + 63) / 64, sizeof(*rpc->sm_map));
	rpc->srv_index = calloc(INDEX_MIN_BUCKETS, sizeof(*rpc->srv_index));
	if (!rpc->sessions || !rpc->sm_map || !rpc->srv_index) {
		urpc__sess_table_fini(rpc);
		return -ENOMEM;
	}
	rpc->srv_index_mask = INDEX_MIN_BUCKETS - 1;
	/* Secret: a client that picks its tokens cannot aim them at one chain. */
	rpc->srv_index_salt = urpc__csprng_next(&rpc->secrets);
	return 0;
}

void urpc__sess_table_fini(struct urpc_rpc *rpc)
{
	urpc__idset_fini(&rpc->nums);
	free(rpc->sessions);
	free(rpc->sm_map);
	free(rpc->srv_index);
	rpc->sm_map = NULL;
	rpc->sessions = NULL;
	rpc->srv_index = NULL;
}

int urpc__sess_alloc(struct urpc_rpc *rpc, enum urpc_session_role role, unsigned window,
		     struct urpc_session **out)
{
	struct urpc_session *s;
	uint32_t i, num;
	int64_t id;

	assert(URPC_IS_POW2(window) && window <= URPC_SESSION_WINDOW_MAX);
	s = calloc(1, urpc__sess_size(role, window));
	if (!s)
		return -ENOMEM;
	id = urpc__idset_take(&rpc->nums);
	if (id < 0) {
		free(s);
		return -ENOSPC;
	}
	num = (uint32_t)id;
	s->role = role;
	s->local_num = num;
	s->slot_mask = window - 1;
	/* rx_word 0: it takes no datagram until CONNECTED (session.c). */
	if (role == URPC_ROLE_CLIENT) {
		urpc__cli_set_window(s, window);
		for (i = 0; i < window; i++) {
			s->cli.slots[i].cur_req_num = i;
			s->cli.slots[i].idx = i;
		}
		urpc__cc_sess_init(rpc, s);
	} else {
		for (i = 0; i < window; i++) {
			s->srv.slots[i].cur_req_num = i;
			s->srv.slots[i].idx = i;
		}
	}
	rpc->sessions[num] = s;
	if (num >= rpc->hi_session)
		rpc->hi_session = num + 1;
	rpc->st.sessions++;
	*out = s;
	return 0;
}

const char *urpc__sess_limit_str(int err)
{
	if (err == -ENOSPC)
		return "all session numbers are in use (raise urpc_rpc_opts.max_sessions, "
		       "up to 2^24)";
	if (err == -ENOMEM)
		return "no memory for a session (malloc failed)";
	return urpc_strerror(err);
}

void urpc__sess_free(struct urpc_rpc *rpc, struct urpc_session *s)
{
	uint32_t i;

	/* Before the peer goes: the transport then completes what used it. */
	urpc__os_session_gone(rpc, s);
	urpc__rmem_session_gone(rpc, s); /* its exposures' grants go with the peer */
	if (s->peer) {
		/*
		 * Datagrams to this peer (stored responses among them) may still
		 * sit in the TX batch: send them, and forget what the transport
		 * did not take, before the peer and the buffers go.
		 */
		urpc__tx_flush(rpc);
		urpc__tx_forget(rpc, NULL, s->peer);
		rpc->tp->ops->tx_flush(rpc->tp);
		rpc->tp->ops->release_peer(rpc->tp, s->peer);
	}
	for (i = 0; s->role == URPC_ROLE_SERVER && i <= s->slot_mask; i++) {
		if (s->srv.slots[i].h.priv_resp.buf) {
			(void)urpc__pool_free(rpc->pool, &s->srv.slots[i].h.priv_resp);
			rpc->st.resp_bufs--;
		}
	}
	if (s->nxp)
		urpc__nexus_peer_put(rpc->nx, s->nxp, s->token);
	urpc__src_put(rpc, s);
	if (s->role == URPC_ROLE_SERVER) {
		index_remove(rpc, s);
	} else {
		pend_unlink(rpc, s);
		urpc__cc_sess_forget(rpc, s); /* off the pacer */
	}
	rpc->sessions[s->local_num] = &urpc__sess_none;
	urpc__idset_put(&rpc->nums, s->local_num);
	rpc->hi_session = urpc__idset_end(&rpc->nums);
	rpc->st.sessions--;
	free(s);
}
