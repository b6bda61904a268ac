/* SPDX-License-Identifier: MIT */
/*
 * The Nexus: one per process. It owns the session-management (SM) UDP
 * socket and the thread that receives on it, the request-handler table and
 * the table of attached Rpcs (rpc id -> SM queue).
 *
 * Threads: the SM thread is the only reader of the socket and the only
 * producer of every attached SM queue. nx->lock guards the Rpc table, the
 * handler table and the frozen flag; the SM thread holds it only while it
 * looks up a queue and pushes one packet, and attach/detach/register hold it
 * briefly. No Rpc datapath ever takes it: an Rpc drains its queue lock-free
 * and reads the handler table, which is frozen (read-only) from the first
 * attach on.
 */
#define _GNU_SOURCE
#define URPC_LOG_MODULE "nexus"
#include "nexus.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
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

#define NEXUS_MAX_RPCS 256     /* rpc ids are uint8_t */
#define NEXUS_MAX_HANDLERS 256 /* req types are uint8_t */
#define SM_POLL_MS 50	       /* the SM thread re-checks its stop flag this often */
#define SM_RX_BUDGET 64	       /* datagrams handled per wake-up before re-checking */

struct urpc_nexus {
	struct urpc_sm_net net; /* simulated: send through it; no socket, no thread */
	bool sim;
	int fd;	  /* the SM socket */
	int evfd; /* eventfd that wakes the SM thread for destroy */
	uint16_t port;
	char host[INET_ADDRSTRLEN];
	pthread_t thread;
	atomic_bool stop; /* set by destroy; the SM thread exits when it sees it */

	pthread_mutex_t lock; /* guards the fields below */
	struct urpc_sm_queue *rpcs[NEXUS_MAX_RPCS];
	unsigned nr_attached;
	bool frozen; /* an Rpc was attached: the handler table is read-only */
	struct urpc_handler handlers[NEXUS_MAX_HANDLERS];

	/* Counters: updated with relaxed atomics, read by urpc__nexus_get_stats(). */
	struct urpc_nexus_stats stats;
};

static inline void stat_inc(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* ---- public API ---------------------------------------------------------- */

/* Fill @o with the defaults. Owns nothing. Thread: any. */
URPC_API void urpc_nexus_opts_init(struct urpc_nexus_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->host = "127.0.0.1";
	o->port = 0;
}

/* Name of an SM event for logs. Thread: any. */
URPC_API const char *urpc_sm_event_str(enum urpc_sm_event ev)
{
	switch (ev) {
	case URPC_SM_CONNECTED:
		return "connected";
	case URPC_SM_CONNECT_FAILED:
		return "connect_failed";
	case URPC_SM_DISCONNECTED:
		return "disconnected";
	case URPC_SM_RESET:
		return "reset";
	}
	return "?";
}

/* The port the SM socket is bound to (fixed at create). Thread: any. */
URPC_API uint16_t urpc_nexus_port(const struct urpc_nexus *nx)
{
	return nx ? nx->port : 0;
}

/*
 * Install @fn for @req_type. The handler table belongs to @nx; @arg stays
 * the caller's. Thread: any, before the first Rpc attaches (takes nx->lock).
 */
URPC_API int urpc_nexus_register_handler(struct urpc_nexus *nx, uint8_t req_type,
					 urpc_req_handler_fn fn, void *arg)
{
	int ret = 0;

	if (!nx || !fn)
		return -EINVAL;
	pthread_mutex_lock(&nx->lock);
	if (nx->frozen)
		ret = -EBUSY;
	else if (nx->handlers[req_type].fn)
		ret = -EEXIST;
	else
		nx->handlers[req_type] = (struct urpc_handler){.fn = fn, .arg = arg};
	pthread_mutex_unlock(&nx->lock);
	return ret;
}

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
 * Hand a decoded packet to the Rpc it is for: requests to server_rpc_id,
 * responses and RESET to client_rpc_id. SM thread only; takes nx->lock
 * around the lookup and the push so that detach can wait the push out. The
 * push also wakes an Rpc that sleeps in its idle event loop (it writes the
 * Rpc's eventfd, see sm.h); inside the lock, so the Rpc may close that fd
 * as soon as detach returns.
 */
static void route(struct urpc_nexus *nx, const struct urpc_sm_pkt *p)
{
	bool is_req = urpc__sm_pkt_is_req(p->type);
	uint8_t id = urpc__sm_pkt_to_server(p->type) ? p->server_rpc_id : p->client_rpc_id;
	struct urpc_sm_queue *q;
	int ret = 0;

	pthread_mutex_lock(&nx->lock);
	q = nx->rpcs[id];
	if (q)
		ret = urpc__sm_queue_push(q, p);
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
 * from @from: decoded and routed, or dropped and counted. SM thread only
 * (in a simulation, the simulator's thread).
 */
static void sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t n,
		     const struct sockaddr_in *from)
{
	struct urpc_sm_pkt pkt;

	stat_inc(&nx->stats.sm_rx);
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
	route(nx, &pkt);
}

/* Receive and route up to SM_RX_BUDGET datagrams. SM thread only. */
static void sm_rx(struct urpc_nexus *nx)
{
	uint8_t buf[URPC_SM_PKT_MAX];
	unsigned i;

	for (i = 0; i < SM_RX_BUDGET; i++) {
		struct sockaddr_in from;
		socklen_t from_len = sizeof(from);
		ssize_t n;

		memset(&from, 0, sizeof(from));
		/* MSG_TRUNC: n is the datagram's real length, so oversized ones are caught. */
		n = recvfrom(nx->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
			     (struct sockaddr *)&from, &from_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				URPC_WARN_RATELIMIT(-1, "recvfrom on the SM socket: %s",
						    urpc_strerror(-errno));
			return;
		}
		if (from_len < sizeof(from) || from.sin_family != AF_INET)
			from.sin_family = AF_UNSPEC;
		sm_input(nx, buf, (size_t)n, &from);
	}
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
		int ret = poll(pfd, URPC_ARRAY_SIZE(pfd), SM_POLL_MS);

		if (ret < 0) {
			if (errno != EINTR)
				URPC_WARN_RATELIMIT(-1, "poll on the SM socket: %s",
						    urpc_strerror(-errno));
			continue;
		}
		if (pfd[1].revents)
			continue; /* woken for stop: the loop condition sees it */
		if (pfd[0].revents)
			sm_rx(nx);
	}
	return NULL;
}

/* ---- create / destroy ---------------------------------------------------- */

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
	ret = pthread_mutex_init(&nx->lock, NULL);
	if (ret) {
		ret = -ret;
		goto out_free;
	}

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
	ret = pthread_mutex_init(&nx->lock, NULL);
	if (ret) {
		free(nx);
		return -ret;
	}
	inet_ntop(AF_INET, &a, nx->host, sizeof(nx->host));
	nx->port = port;
	nx->net = *net;
	nx->sim = true;
	nx->fd = -1;
	nx->evfd = -1;
	atomic_init(&nx->stop, false);
	*out = nx;
	return 0;
}

/* A datagram of @len bytes from @from for simulated Nexus @nx. Thread: the simulator's. */
void urpc__nexus_sm_input(struct urpc_nexus *nx, const uint8_t *buf, size_t len,
			  const struct sockaddr_in *from)
{
	sm_input(nx, buf, len, from);
}

/* ---- internal interface (nexus.h) ---------------------------------------- */

/*
 * Attach Rpc @rpc_id's queue @q (still owned by the Rpc). Freezes the
 * handler table. 0 or -EEXIST. Thread: any (takes nx->lock).
 */
int urpc__nexus_attach_rpc(struct urpc_nexus *nx, uint8_t rpc_id, struct urpc_sm_queue *q)
{
	int ret = 0;

	assert(q);
	pthread_mutex_lock(&nx->lock);
	if (nx->rpcs[rpc_id]) {
		ret = -EEXIST;
	} else {
		nx->rpcs[rpc_id] = q;
		nx->nr_attached++;
		nx->frozen = true;
	}
	pthread_mutex_unlock(&nx->lock);
	return ret;
}

/*
 * Detach Rpc @rpc_id. The SM thread pushes only while holding nx->lock, so
 * once this returns it no longer touches the queue. Thread: any.
 */
void urpc__nexus_detach_rpc(struct urpc_nexus *nx, uint8_t rpc_id)
{
	pthread_mutex_lock(&nx->lock);
	if (nx->rpcs[rpc_id]) {
		nx->rpcs[rpc_id] = NULL;
		nx->nr_attached--;
	}
	pthread_mutex_unlock(&nx->lock);
}

/*
 * Encode @p and send it to @to from the SM socket. 0 or -errno; not logged
 * (the caller knows the context) and not retried. Thread: any.
 */
int urpc__nexus_sm_send(struct urpc_nexus *nx, const struct sockaddr_in *to,
			const struct urpc_sm_pkt *p)
{
	uint8_t buf[URPC_SM_PKT_MAX];
	size_t len = urpc__sm_encode(p, buf);
	ssize_t n;

	if (nx->sim) {
		n = nx->net.send(nx->net.arg, nx, to, buf, len);
		if (n < 0)
			return (int)n;
		stat_inc(&nx->stats.sm_tx);
		return 0;
	}
	do {
		n = sendto(nx->fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	stat_inc(&nx->stats.sm_tx);
	return 0;
}

/* Copy the counters. Thread: any. */
void urpc__nexus_get_stats(const struct urpc_nexus *nx, struct urpc_nexus_stats *st)
{
	st->sm_rx = __atomic_load_n(&nx->stats.sm_rx, __ATOMIC_RELAXED);
	st->sm_tx = __atomic_load_n(&nx->stats.sm_tx, __ATOMIC_RELAXED);
	st->drop_bad_pkt = __atomic_load_n(&nx->stats.drop_bad_pkt, __ATOMIC_RELAXED);
	st->drop_no_rpc = __atomic_load_n(&nx->stats.drop_no_rpc, __ATOMIC_RELAXED);
	st->drop_queue_full = __atomic_load_n(&nx->stats.drop_queue_full, __ATOMIC_RELAXED);
	st->replied_no_rpc = __atomic_load_n(&nx->stats.replied_no_rpc, __ATOMIC_RELAXED);
}

/*
 * The handler table (NEXUS_MAX_HANDLERS entries, indexed by req type). An
 * Rpc reads it without the lock: it is frozen by that Rpc's attach, whose
 * lock/unlock orders every registration before the reads. Thread: any.
 */
const struct urpc_handler *urpc__nexus_handlers(const struct urpc_nexus *nx)
{
	return nx->handlers;
}

/* The IPv4 address the SM socket is bound to, as text. Thread: any. */
const char *urpc__nexus_host(const struct urpc_nexus *nx)
{
	return nx->host;
}

/*
 * A plausible DNS name: letters, digits, '-' and '.', not starting with '-'
 * or '.', and a last label that is not all digits (no top-level domain is;
 * this keeps getaddrinfo from accepting inet_aton forms like "10.1").
 */
static bool is_host_name(const char *h)
{
	bool last_numeric = true;
	const char *c;

	if (!*h || *h == '-' || *h == '.')
		return false;
	for (c = h; *c; c++) {
		if (*c == '.') {
			last_numeric = true;
			continue;
		}
		if (!isalnum((unsigned char)*c) && *c != '-')
			return false;
		if (!isdigit((unsigned char)*c))
			last_numeric = false;
	}
	return !last_numeric;
}

/*
 * Parse "a.b.c.d:port" or "name:port" (IPv4 through getaddrinfo) into @out.
 * The port must be 1..65535 in decimal digits only. 0 or -EINVAL (@out
 * unspecified). Owns nothing. Thread: any; may block in the resolver, so
 * not for the datapath.
 */
int urpc__parse_host_port(const char *s, struct sockaddr_in *out)
{
	struct addrinfo hints, *res = NULL;
	char host[256];
	const char *colon, *c;
	size_t host_len;
	uint32_t port = 0;

	if (!s || !out)
		return -EINVAL;
	colon = strrchr(s, ':');
	if (!colon || colon == s)
		return -EINVAL;
	host_len = (size_t)(colon - s);
	if (host_len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, host_len);
	host[host_len] = '\0';

	if (!colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (c = colon + 1; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		port = port * 10 + (uint32_t)(*c - '0');
	}
	if (port == 0 || port > UINT16_MAX)
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &out->sin_addr) == 1)
		return 0;

	/* Names only; anything else would just make the resolver work for nothing. */
	if (!is_host_name(host))
		return -EINVAL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
		return -EINVAL;
	out->sin_addr = ((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}
