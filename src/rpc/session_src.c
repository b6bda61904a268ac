/* SPDX-License-Identifier: MIT */
/*
 * Admission of server sessions (session_src.h). Owns rpc->src_count (and
 * allocates rpc->src_bytes, which quota.c keeps) and
 * each server session's srv.src_bucket and, for server sessions, rx_token
 * (the endpoint's proof), and the "no such session" answers a server
 * sends (nosess_*). May call: the transport's ep_host, rx_is_from and
 * tx_reply, the Rpc's secret generator (the hash key, the mask), the log.
 */
#define URPC_LOG_MODULE "session"
#include "session_src.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "../util/log.h"

static_assert(URPC_IS_POW2(URPC_SRC_BUCKETS), "the bucket count is a power of two");

uint32_t urpc__src_default_max_sessions(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
	uint64_t n;

	if (pages <= 0 || page <= 0)
		return URPC_RPC_DEFAULT_MAX_SESSIONS;
	n = (uint64_t)pages * (uint64_t)page / URPC_SRC_MEM_SHARE / URPC_SRC_SESSION_BYTES;
	return (uint32_t)URPC_MAX(URPC_MIN(n, (uint64_t)URPC_RPC_DEFAULT_MAX_SESSIONS),
				  (uint64_t)URPC_SRC_MIN_SESSIONS);
}

int urpc__src_init(struct urpc_rpc *rpc, uint32_t limit)
{
	rpc->src_limit = limit < rpc->max_sessions ? limit : 0;
	rpc->src_count = NULL;
	if (!rpc->src_limit)
		return 0;
	rpc->src_count = calloc(URPC_SRC_BUCKETS, sizeof(*rpc->src_count));
	rpc->src_bytes = calloc(2 * URPC_SRC_BUCKETS, sizeof(*rpc->src_bytes));
	rpc->src_bytes_max = 128ull << 20; /* quota.h's URPC_QUOTA_SRC_BYTES */
	if (!rpc->src_count || !rpc->src_bytes) {
		urpc__src_fini(rpc);
		return -ENOMEM;
	}
	rpc->src_key = urpc__csprng_next(&rpc->secrets);
	return 0;
}

void urpc__src_fini(struct urpc_rpc *rpc)
{
	free(rpc->src_count);
	free(rpc->src_bytes);
	rpc->src_count = NULL;
	rpc->src_bytes = NULL;
}

/* The bucket of @ip: MurmurHash3's finaliser of the address under the key. */
static uint32_t bucket_of(const struct urpc_rpc *rpc, uint32_t ip)
{
	uint64_t x = (uint64_t)ip ^ rpc->src_key;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x & (URPC_SRC_BUCKETS - 1);
}

uint32_t urpc__src_count(const struct urpc_rpc *rpc, uint32_t ip)
{
	return rpc->src_count ? rpc->src_count[bucket_of(rpc, ip)] : 0;
}

int urpc__src_admit(struct urpc_rpc *rpc, const struct urpc_sm_pkt *p)
{
	char ep[INET_ADDRSTRLEN] = "?", from[INET_ADDRSTRLEN] = "?";
	uint32_t ip = p->from.sin_addr.s_addr, host, n;

	/* Malformed endpoints pass here: resolve_peer refuses them. */
	if (!rpc->tp->ops->ep_host(rpc->tp, p->ep, p->ep_len, &host) && host != ip) {
		inet_ntop(AF_INET, &host, ep, sizeof(ep));
		inet_ntop(AF_INET, &p->from.sin_addr, from, sizeof(from));
		URPC_WARN_RATELIMIT(rpc->id,
				    "refusing a session: its %s endpoint is on %s, but its connect "
				    "came from %s (a session's datapath must be on the host that "
				    "connects)",
				    urpc_transport_str(rpc->tp->kind), ep, from);
		return -EADDRNOTAVAIL;
	}
	n = urpc__src_count(rpc, ip);
	if (rpc->src_count && n >= rpc->src_limit) {
		inet_ntop(AF_INET, &p->from.sin_addr, from, sizeof(from));
		URPC_WARN_RATELIMIT(rpc->id,
				    "refusing a session from %s: clients there hold %u sessions of "
				    "this Rpc, its limit per source address (raise "
				    "urpc_rpc_opts.max_sessions_per_source; 0: no limit)",
				    from, n);
		return -ENOSPC;
	}
	return 0;
}

const char *urpc__src_refusal_str(int status)
{
	switch (status) {
	case -ENOSPC:
		return "it is at a session limit (its urpc_rpc_opts.max_sessions, or "
		       "max_sessions_per_source for this address; its log says which)";
	case -EADDRNOTAVAIL:
		return "our endpoint is not on the address our connect came from (bind the "
		       "Nexus, whose address the transport uses, to the one that reaches it)";
	case -ENOMEM:
		return "it has no memory for another session";
	}
	return NULL;
}

void urpc__src_bind(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_sm_pkt *p)
{
	uint32_t host;

	s->rx_token = s->token;
	if (!rpc->tp->ops->rx_is_from || rpc->tp->ops->ep_host(rpc->tp, p->ep, p->ep_len, &host))
		return;
	/* Odd: never equal to the token itself. A guess hits it with 2^-63. */
	s->rx_token = s->token ^ (urpc__csprng_next(&rpc->secrets) | 1u);
}

bool urpc__src_prove(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_tp_rx *e)
{
	if (e && s->peer && rpc->tp->ops->rx_is_from(rpc->tp, e, s->peer)) {
		s->rx_token = s->token;
		return true;
	}
	rpc->st.drop_unproven++;
	URPC_WARN_RATELIMIT(rpc->id,
			    "dropping a datagram of server session %u: it carries the session's "
			    "token but not from the endpoint the session named, which has not "
			    "proven itself yet (nothing is sent there until a datagram comes "
			    "from it)",
			    s->local_num);
	return false;
}

void urpc__src_notice_tx(struct urpc_rpc *rpc, const struct urpc_pkthdr *h,
			 const struct urpc_tp_rx *e)
{
	struct urpc_pkthdr n;

	if (!rpc->tp->ops->tx_reply)
		return;
	if (rpc->now - rpc->nosess_ns >= URPC_NOSESS_WINDOW_NS) {
		rpc->nosess_ns = rpc->now;
		rpc->nosess_n = 0;
	}
	if (rpc->nosess_n >= URPC_NOSESS_MAX)
		return;
	rpc->nosess_n++;
	/* The header alone: no larger than @h's datagram, which holds at least a header. */
	urpc__pkthdr_fill(&n, URPC_PKT_NOSESS, h->req_type, 0, 0, le32toh(h->src_session),
			  le64toh(h->req_num), le64toh(h->token));
	n.src_session = h->dest_session;
	if (!rpc->tp->ops->tx_reply(rpc->tp, e, &n, (uint32_t)sizeof(n)))
		rpc->st.nosess_tx++;
}

void urpc__src_take(struct urpc_rpc *rpc, struct urpc_session *s, uint32_t ip)
{
	uint32_t b;

	if (!rpc->src_count)
		return;
	b = bucket_of(rpc, ip);
	rpc->src_count[b]++;
	s->srv.src_bucket = b + 1;
}

void urpc__src_put(struct urpc_rpc *rpc, struct urpc_session *s)
{
	if (s->role != URPC_ROLE_SERVER || !s->srv.src_bucket || !rpc->src_count)
		return;
	rpc->src_count[s->srv.src_bucket - 1]--;
	s->srv.src_bucket = 0;
}
