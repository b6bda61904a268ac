/* SPDX-License-Identifier: MIT */
/*
 * The Nexus: one per process. It owns the session-management (SM) UDP
 * socket and the thread that receives on it, the request-handler table and
 * the table of attached Rpcs (rpc id -> SM queue), and the heartbeats
 * between this process and the peer processes its sessions reach
 * (nexus_peer.h: one per remote Nexus, sent and answered by the SM thread).
 *
 * Connect cookies (sm_cookie.h): a CONNECT_REQ reaches an Rpc only with a
 * cookie valid for its source address; the SM thread answers any other
 * with CONNECT_COOKIE and keeps nothing. No answer to a packet that has not
 * proved its source is larger than the packet (reflection ratio <= 1).
 *
 * Threads: the SM thread is the only reader of the socket and the only
 * producer of every attached SM queue. nx->lock guards the Rpc table, the
 * handler table, the frozen flag and the peer table; the SM thread holds it only while it
 * looks up a queue and pushes one packet, and attach/detach/register hold it
 * briefly. No Rpc datapath ever takes it: an Rpc drains its queue lock-free
 * and reads the handler table, which is frozen (read-only) from the first
 * attach on.
 *
 * Floor: src/nexus/ (this file, its tables, peers, SM packets and cookies)
 * stands below src/rpc/ and never includes or calls it; an Rpc reaches the
 * Nexus through nexus.h and the SM queue (sm.h). May call: src/nexus/,
 * transport.h (the SM queue's types), util/, libc and pthreads.
 */
#define _GNU_SOURCE
#define URPC_LOG_MODULE "nexus"
#include "nexus.h"
#include "nexus_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/seam.h"
#include "nexus_auth.h"
#include "nexus_err.h"
#include "nexus_hb.h"
#include "nexus_io.h"
#include "nexus_peer.h"

/* ---- public API ---------------------------------------------------------- */

/* ---- the SM thread ------------------------------------------------------- */

/* The response type that answers request type @t. */
static enum urpc_sm_pkt_type resp_type_of(enum urpc_sm_pkt_type t)
{
	switch (t) {
	case URPC_SM_PKT_CONNECT_REQ:
		return URPC_SM_PKT_CONNECT_RESP;
	case URPC_SM_PKT_DISCONNECT_REQ:
		return URPC_SM_PKT_DISCONNECT_RESP;
	case URPC_SM_PKT_PING_REQ:
	default:
		return URPC_SM_PKT_PING_RESP;
	}
}

/*
 * Answer request @req, addressed to an Rpc id that is not attached: the
 * client learns at once that its peer is gone. SM thread only.
 */
static void reply_no_rpc(struct urpc_nexus *nx, const struct urpc_sm_pkt *req)
{
	struct urpc_sm_pkt resp;
	int ret;

	memset(&resp, 0, sizeof(resp));
	resp.type = resp_type_of(req->type);
	resp.status = req->type == URPC_SM_PKT_CONNECT_REQ ? -ENOENT : -ECONNRESET;
	resp.client_rpc_id = req->client_rpc_id;
	resp.server_rpc_id = req->server_rpc_id;
	resp.client_sess = req->client_sess;
	resp.server_sess = req->server_sess;
	resp.token = req->token;
	resp.seq = req->seq;
	ret = urpc__nexus_sm_send(nx, &req->from, &resp);
	if (ret < 0) {
		URPC_WARN_RATELIMIT(-1, "cannot answer %s for missing rpc %u: %s",
				    urpc__sm_pkt_type_str(req->type), req->server_rpc_id,
				    urpc_strerror(ret));
		return;
	}
	stat_inc(&nx->stats.replied_no_rpc);
}

/*
 * Answer CONNECT_REQ @req, whose cookie is not valid for its source, with
 * the cookie that is; nothing is kept. The answer is the header alone, no
 * larger than the request (which the decoder held to at least that).
 * SM thread only.
 */
static void reply_cookie(struct urpc_nexus *nx, const struct urpc_sm_pkt *req)
{
	struct urpc_sm_pkt resp;

	memset(&resp, 0, sizeof(resp));
	resp.type = URPC_SM_PKT_CONNECT_COOKIE;
	resp.client_rpc_id = req->client_rpc_id;
	resp.server_rpc_id = req->server_rpc_id;
	resp.transport = req->transport;
	resp.client_sess = req->client_sess;
	resp.token = req->token;
	resp.seq = req->seq;
	resp.cookie = urpc__sm_cookie_make(&nx->cookie_key, &req->from, urpc__now_ns());
	if (urpc__nexus_sm_send(nx, &req->from, &resp) == 0)
		stat_inc(&nx->stats.cookies_tx);
}

/*
 * The Rpcs a batch of received datagrams was pushed to: they are woken
 * once, when the batch has been routed (kick_rpcs()), not once a packet.
 */
struct rx_batch {
	uint64_t pushed[NEXUS_MAX_RPCS / 64]; /* bit per Rpc id */
};

/*
 * Wake the Rpcs of @b that sleep, and forget them. SM thread only; under
 * nx->lock, as route()'s push: the Rpc may close its eventfd as soon as
 * detach returns. An id whose Rpc went meanwhile wakes nothing (or the
 * Rpc attached in its place, needlessly).
 */
static void kick_rpcs(struct urpc_nexus *nx, struct rx_batch *b)
{
	unsigned w;

	pthread_mutex_lock(&nx->lock);
	for (w = 0; w < URPC_ARRAY_SIZE(b->pushed); w++) {
		while (b->pushed[w]) {
			unsigned id = w * 64 + (unsigned)__builtin_ctzll(b->pushed[w]);

			b->pushed[w] &= b->pushed[w] - 1;
			if (nx->rpcs[id])
				urpc__sm_queue_kick(nx->rpcs[id]);
		}
	}
	pthread_mutex_unlock(&nx->lock);
}

/*
 * Hand a decoded packet to the Rpc it is for: requests to server_rpc_id,
 * responses and RESET to client_rpc_id. SM thread only; takes nx->lock
 * around the lookup and the push so that detach can wait the push out. The
 * push also wakes an Rpc that sleeps in its idle event loop (it writes the
 * Rpc's eventfd, see sm.h); inside the lock, so the Rpc may close that fd
 * as soon as detach returns. Within batch @b (not NULL), the wake-up waits
 * for kick_rpcs() at the end of the batch.
 */
static void route(struct urpc_nexus *nx, const struct urpc_sm_pkt *p, struct rx_batch *b)
{
	bool is_req = urpc__sm_pkt_is_req(p->type);
	uint8_t id = urpc__sm_pkt_to_server(p->type) ? p->server_rpc_id : p->client_rpc_id;
	struct urpc_sm_queue *q;
	int ret = 0;

	pthread_mutex_lock(&nx->lock);
	q = nx->rpcs[id];
	if (q && b) {
		ret = urpc__sm_queue_push_quiet(q, p);
		b->pushed[id / 64] |= 1ull << (id % 64);
	} else if (q) {
		ret = urpc__sm_queue_push(q, p);
	}
	pthread_mutex_unlock(&nx->lock);

	if (q) {
		/* Full: drop; SM requests are retried by their sender. */
		if (ret < 0)
			stat_inc(&nx->stats.drop_queue_full);
		return;
	}
	if (is_req)
		reply_no_rpc(nx, p);
	else
		stat_inc(&nx->stats.drop_no_rpc);
}

/*
 * One datagram of @n bytes (its real length, perhaps more than @buf holds)
 * from @from: decoded and routed (within batch @b, or alone: NULL), or
 * dropped and counted. SM thread only (in a simulation, the simulator's
 * thread).
 */
static void sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t n,
		     const struct sockaddr_in *from, struct rx_batch *b)
{
	enum urpc_nxa_verdict verdict;
	struct urpc_sm_pkt pkt;

	stat_inc(&nx->stats.sm_rx);
	if (atomic_load_explicit(&nx->mute, memory_order_relaxed))
		return;
	if (n > URPC_SM_PKT_MAX || urpc__sm_decode(buf, n, &pkt) < 0 ||
	    from->sin_family != AF_INET) {
		char addr[INET_ADDRSTRLEN] = "?";

		stat_inc(&nx->stats.drop_bad_pkt);
		inet_ntop(AF_INET, &from->sin_addr, addr, sizeof(addr));
		URPC_WARN_RATELIMIT(-1, "dropped a malformed SM datagram of %zu bytes from %s:%u",
				    n, addr, ntohs(from->sin_port));
		return;
	}
	pkt.from = *from;
	pkt.peer_restarted = false;
	if (pkt.type == URPC_SM_PKT_CONNECT_REQ &&
	    !urpc__sm_cookie_check(&nx->cookie_key, from, urpc__now_ns(), pkt.cookie)) {
		/* Its source is not proven: it changes nothing here. */
		reply_cookie(nx, &pkt);
		return;
	}
	/* Every heartbeat lists the Rpc ids; a shorter one would get a longer PONG. */
	if ((pkt.type == URPC_SM_PKT_NX_PING || pkt.type == URPC_SM_PKT_NX_PONG) &&
	    pkt.ep_len != URPC_NXP_RPC_BYTES) {
		stat_inc(&nx->stats.drop_bad_pkt);
		return;
	}
	/* Signed by the peer, or it changes nothing of it (nexus_auth.h). */
	pthread_mutex_lock(&nx->lock);
	verdict = urpc__nxa_check(&nx->peers, &pkt, buf, n, NEXUS_HELLO_TTL_NS, urpc__now_ns());
	if (verdict == URPC_NXA_REFUSED) {
		const struct urpc_nx_peer *pe = urpc__nxp_find(&nx->peers, from);
		bool stranger = !pe || !pe->nonce_remote;

		pthread_mutex_unlock(&nx->lock);
		/*
		 * A session's probe from a peer we share no secret with (we
		 * restarted; it did not know): no session of ours can be its, so
		 * the Nexus says so itself, a bare header that echoes its token
		 * (never larger than the probe, never routed): the peer learns of
		 * our restart before its time-out. Anything else unsigned: nothing.
		 */
		if (stranger && pkt.type == URPC_SM_PKT_PING_REQ && n >= URPC_SM_HDR_LEN) {
			reply_no_rpc(nx, &pkt);
			return;
		}
		stat_inc(&nx->stats.drop_auth);
		return;
	}
	if (verdict != URPC_NXA_OK && pkt.type == URPC_SM_PKT_PING_RESP) {
		const struct urpc_nx_peer *pe = urpc__nxp_find(&nx->peers, from);

		pkt.peer_restarted = pe && pe->incarnation && pkt.nexus_inc != pe->incarnation;
	}
	if (pkt.type == URPC_SM_PKT_NX_PING || pkt.type == URPC_SM_PKT_NX_PONG) {
		pthread_mutex_unlock(&nx->lock);
		urpc__nexus_heartbeat_rx(nx, &pkt);
		return;
	}
	/* A restarted peer fails before what it sends now opens a session. */
	if (verdict == URPC_NXA_OK &&
	    urpc__nxp_seen(&nx->peers, from, pkt.nexus_inc, pkt.nexus_epoch,
			   urpc__sm_pkt_to_server(pkt.type) ? pkt.client_rpc_id : pkt.server_rpc_id,
			   pkt.rpc_inc, urpc__now_ns()))
		urpc__nexus_notify_rpcs(nx);
	pthread_mutex_unlock(&nx->lock);
	route(nx, &pkt, b);
}

/*
 * Receive up to SM_RX_BATCH datagrams in one system call and route them;
 * the Rpcs they went to are woken once, at the end. Returns how many came
 * (0: none waiting, or the socket failed). SM thread only.
 */
static unsigned sm_rx_batch(struct urpc_nexus *nx)
{
	uint8_t buf[SM_RX_BATCH][URPC_SM_PKT_MAX];
	struct sockaddr_in from[SM_RX_BATCH];
	struct mmsghdr m[SM_RX_BATCH];
	struct iovec iov[SM_RX_BATCH];
	struct rx_batch b;
	unsigned i;
	int n;

	memset(m, 0, sizeof(m));
	memset(from, 0, sizeof(from));
	for (i = 0; i < SM_RX_BATCH; i++) {
		iov[i].iov_base = buf[i];
		iov[i].iov_len = sizeof(buf[i]);
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_name = &from[i];
		m[i].msg_hdr.msg_namelen = sizeof(from[i]);
	}
	/* MSG_TRUNC: msg_len is each datagram's real length, so oversized ones are caught. */
	do
		n = recvmmsg(nx->fd, m, SM_RX_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		/* A queued ICMP error is reported once here too (IP_RECVERR): sm_errors() reads it. */
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED &&
		    errno != EHOSTUNREACH)
			URPC_WARN_RATELIMIT(-1, "recvmmsg on the SM socket: %s",
					    urpc_strerror(-errno));
		return 0;
	}
	memset(&b, 0, sizeof(b));
	for (i = 0; i < (unsigned)n; i++) {
		if (m[i].msg_hdr.msg_namelen < sizeof(from[i]) || from[i].sin_family != AF_INET)
			from[i].sin_family = AF_UNSPEC;
		sm_input(nx, buf[i], m[i].msg_len, &from[i], &b);
	}
	kick_rpcs(nx, &b);
	return (unsigned)n;
}

/*
 * The SM socket's error queue (nexus_err.h): a peer whose host says that
 * nothing listens on its port has its connects refused. SM thread only.
 */
static void sm_errors(struct urpc_nexus *nx)
{
	struct sockaddr_in to;
	unsigned n;
	int ret;

	for (n = 0; n < SM_RX_BUDGET && (ret = urpc__sm_err_pop(nx->fd, &to)) != -EAGAIN; n++) {
		if (ret <= 0)
			continue;
		pthread_mutex_lock(&nx->lock);
		if (urpc__nxp_refused(&nx->peers, &to))
			urpc__nexus_notify_rpcs(nx);
		pthread_mutex_unlock(&nx->lock);
	}
}

/* Receive and route up to SM_RX_BUDGET datagrams. SM thread only. */
static void sm_rx(struct urpc_nexus *nx)
{
	unsigned got = 0, n;

	do {
		n = sm_rx_batch(nx);
		got += n;
	} while (n == SM_RX_BATCH && got < SM_RX_BUDGET);
}

/*
 * The SM thread: waits on the socket and the wake-up eventfd, with a
 * SM_POLL_MS timeout as a backstop, until destroy sets nx->stop.
 */
static void *sm_thread(void *arg)
{
	struct urpc_nexus *nx = arg;
	struct pollfd pfd[2] = {
		{.fd = nx->fd, .events = POLLIN},
		{.fd = nx->evfd, .events = POLLIN},
	};

	/* Acquire pairs with the release store of stop in urpc_nexus_destroy(). */
	while (!atomic_load_explicit(&nx->stop, memory_order_acquire)) {
		uint64_t due = urpc__nexus_tick(nx), now = urpc__now_ns();
		int wait_ms = SM_POLL_MS, ret;

		if (due <= now)
			wait_ms = 1;
		else if (due - now < (uint64_t)SM_POLL_MS * 1000000)
			wait_ms = (int)((due - now + 999999) / 1000000);
		ret = poll(pfd, URPC_ARRAY_SIZE(pfd), wait_ms);

		if (ret < 0) {
			if (errno != EINTR)
				URPC_WARN_RATELIMIT(-1, "poll on the SM socket: %s",
						    urpc_strerror(-errno));
			continue;
		}
		if (pfd[1].revents)
			continue; /* woken for stop: the loop condition sees it */
		if (pfd[0].revents & POLLERR)
			sm_errors(nx);
		if (pfd[0].revents)
			sm_rx(nx);
	}
	return NULL;
}

/* ---- create / destroy ---------------------------------------------------- */

/*
 * nx->lock, recursive: an SM send signs its packet under it (nexus_io.c),
 * and heartbeats are sent with it held. 0 or -errno.
 */
static int lock_init(struct urpc_nexus *nx)
{
	pthread_mutexattr_t a;
	int ret;

	ret = pthread_mutexattr_init(&a);
	if (!ret)
		ret = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	if (!ret)
		ret = pthread_mutex_init(&nx->lock, &a);
	pthread_mutexattr_destroy(&a);
	return -ret;
}

/*
 * Bind the SM socket at @host:@port, start the SM thread. The caller owns
 * *@out until urpc_nexus_destroy(). Thread: any.
 */
URPC_API int urpc_nexus_create(const struct urpc_nexus_opts *o, struct urpc_nexus **out)
{
	struct urpc_nexus_opts opts;
	struct sockaddr_in addr;
	socklen_t addr_len = sizeof(addr);
	struct urpc_nexus *nx;
	int ret;

	if (!out)
		return -EINVAL;
	if (o)
		opts = *o;
	else
		urpc_nexus_opts_init(&opts);
	if (!opts.host)
		opts.host = "127.0.0.1";

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons(opts.port);
	if (inet_pton(AF_INET, opts.host, &addr.sin_addr) != 1) {
		URPC_ERR(-1, "nexus host '%s' is not an IPv4 address", opts.host);
		return -EINVAL;
	}

	nx = calloc(1, sizeof(*nx));
	if (!nx)
		return -ENOMEM;
	inet_ntop(AF_INET, &addr.sin_addr, nx->host, sizeof(nx->host));
	atomic_init(&nx->stop, false);
	nx->incarnation = urpc__entropy64() | 1;
	urpc__sm_cookie_key_init(&nx->cookie_key);
	ret = lock_init(nx);
	if (ret)
		goto out_free;

	nx->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (nx->fd < 0) {
		ret = -errno;
		URPC_ERR(-1, "cannot create the SM socket: %s", urpc_strerror(ret));
		goto out_destroy_lock;
	}
	if (bind(nx->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		ret = -errno;
		URPC_ERR(-1, "cannot bind session management to %s:%u: %s", nx->host, opts.port,
			 urpc_strerror(ret));
		goto out_close_fd;
	}
	if (getsockname(nx->fd, (struct sockaddr *)&addr, &addr_len) < 0) {
		ret = -errno;
		URPC_ERR(-1, "getsockname on the SM socket: %s", urpc_strerror(ret));
		goto out_close_fd;
	}
	nx->port = ntohs(addr.sin_port);
	/* Without it a connect to a port where nothing listens waits for its time-out. */
	ret = urpc__sm_err_enable(nx->fd);
	if (ret)
		URPC_DBG(-1, "IP_RECVERR on the SM socket: %s", urpc_strerror(ret));

	nx->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (nx->evfd < 0) {
		ret = -errno;
		URPC_ERR(-1, "cannot create the SM wake-up eventfd: %s", urpc_strerror(ret));
		goto out_close_fd;
	}

	ret = pthread_create(&nx->thread, NULL, sm_thread, nx);
	if (ret) {
		ret = -ret;
		URPC_ERR(-1, "cannot start the SM thread: %s", urpc_strerror(ret));
		goto out_close_evfd;
	}
	pthread_setname_np(nx->thread, "urpc-sm");
	*out = nx;
	return 0;

out_close_evfd:
	close(nx->evfd);
out_close_fd:
	close(nx->fd);
out_destroy_lock:
	urpc__nxp_clear(&nx->peers);
	pthread_mutex_destroy(&nx->lock);
out_free:
	free(nx);
	return ret;
}

/*
 * Stop and join the SM thread, close the socket, free @nx. -EBUSY (nothing
 * freed) while an Rpc is attached. Thread: any, not concurrently with other
 * calls on @nx.
 */
URPC_API int urpc_nexus_destroy(struct urpc_nexus *nx)
{
	const uint64_t one = 1;
	unsigned attached;

	if (!nx)
		return -EINVAL;
	pthread_mutex_lock(&nx->lock);
	attached = nx->nr_attached;
	pthread_mutex_unlock(&nx->lock);
	if (attached) {
		URPC_ERR(-1, "nexus on %s:%u still has %u Rpc(s); destroy them first", nx->host,
			 nx->port, attached);
		return -EBUSY;
	}

	if (nx->sim)
		goto out_free;
	/* Release pairs with the SM thread's acquire load of stop. */
	atomic_store_explicit(&nx->stop, true, memory_order_release);
	/* A failed write only delays the exit until the poll timeout. */
	if (write(nx->evfd, &one, sizeof(one)) < 0)
		URPC_DBG(-1, "eventfd write failed; the SM thread stops on its poll timeout");
	pthread_join(nx->thread, NULL);

	close(nx->evfd);
	close(nx->fd);
out_free:
	urpc__nxp_clear(&nx->peers);
	pthread_mutex_destroy(&nx->lock);
	free(nx);
	return 0;
}

/*
 * A Nexus whose session management travels through @net (tests/sim): no
 * socket and no thread; the simulator hands it datagrams with
 * urpc__nexus_sm_input(). Destroyed with urpc_nexus_destroy(). Thread: any.
 */
int urpc__nexus_create_sim(const char *host, uint16_t port, const struct urpc_sm_net *net,
			   struct urpc_nexus **out)
{
	struct in_addr a;
	struct urpc_nexus *nx;
	int ret;

	if (!host || !port || !net || !net->send || !out || inet_pton(AF_INET, host, &a) != 1)
		return -EINVAL;
	nx = calloc(1, sizeof(*nx));
	if (!nx)
		return -ENOMEM;
	ret = lock_init(nx);
	if (ret) {
		free(nx);
		return ret;
	}
	inet_ntop(AF_INET, &a, nx->host, sizeof(nx->host));
	nx->port = port;
	nx->net = *net;
	nx->sim = true;
	nx->fd = -1;
	nx->evfd = -1;
	atomic_init(&nx->stop, false);
	nx->incarnation = urpc__entropy64() | 1;
	urpc__sm_cookie_key_init(&nx->cookie_key);
	*out = nx;
	return 0;
}

uint64_t urpc__nexus_cookie(struct urpc_nexus *nx, const struct sockaddr_in *from)
{
	return urpc__sm_cookie_make(&nx->cookie_key, from, urpc__now_ns());
}

/* A datagram of @len bytes from @from for simulated Nexus @nx. Thread: the simulator's. */
void urpc__nexus_sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	sm_input(nx, buf, len, from, NULL);
}
