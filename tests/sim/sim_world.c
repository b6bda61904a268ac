/* SPDX-License-Identifier: MIT */
/*
 * The simulated world: nodes (a Nexus and an Rpc each, on the loop
 * transport, session management through sim_net.c), a random workload,
 * faults, and the invariants checked after every event.
 *
 * Nodes: 0 is the server S; 1 is the middle server M, whose handler makes
 * a nested request to S; 2.. are clients, each with a session to S and one
 * to M. Request types: ECHO (answered at once), DEFER (answered later from
 * an event), NEST (at M: answered from the continuation of a request to S),
 * TINY (under 16 bytes: no header), NONE (no handler: must fail).
 *
 * A request's bytes are a function of its id and length (its first 16
 * bytes carry the id and the response length it asks for), so a handler
 * checks exactly what it was given against the table of requests, and a
 * continuation checks the response the same way: the checksums travel out
 * of band, in that table. Continuations scribble over the request buffer
 * before handing it back to the pool, so a peer that reads it afterwards
 * feeds its handler bytes the client never sent, which the handler sees.
 *
 * Remote memory (cfg.rmem): S answers RBUF with an exposure of a region of
 * its own (urpc_mem_expose on the request's session), and clients run
 * batches of READs and WRITEs against it (urpc_rdma_submit, sometimes with
 * a deadline), while S now and then revokes an exposure with operations
 * in flight. Each batch's continuation must run exactly once, with a
 * status of the contract, with its local buffer let go (freeing it must
 * succeed); urpc__rpc_check counts the batches among the continuations
 * owed.
 *
 * Calls the public API, the seams and the engine's check hook
 * (urpc__rpc_check); owns everything it allocates.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../../src/nexus/nexus.h"
#include "../../src/rpc/rpc.h"
#include "../../src/rpc/session.h"
#include "../../src/transport/loop_hooks.h"
#include "../../src/transport/transport.h"
#include "sim.h"
#include "sim_fabric.h"

enum { T_ECHO = 1, T_NEST = 2, T_DEFER = 3, T_TINY = 5, T_NONE = 9, T_RBUF = 11 };
enum { N_S = 0, N_M = 1, N_C0 = 2 };
#define PEER_TIMEOUT_MS 120
enum { SESS_DOWN = 0, SESS_CONNECTING, SESS_UP };
enum { PH_FAULTS = 0, PH_CALM, PH_DRAIN, PH_PROBE, PH_DONE };

enum {
	FK_LINKS = 1,
	FK_PART,
	FK_HEAL,
	FK_CRASH,
	FK_RESTART,
	FK_RPC,
	FK_RPC_UP,
	FK_DISC,
	FK_FORGET
};
/* No half-open session: a client session CONNECTED while its server has none, at most this long. */
#define HALF_OPEN_MAX_NS (2 * PEER_TIMEOUT_MS * 1000000ull)

#define HDR_LEN 16u
#define NEST_FAIL_MAGIC 0x4c494146545345ull /* "ESTFAIL" */
#define SM_PORT 31850

struct sreq {
	uint64_t id;
	int node;
	uint32_t inc; /* the node's incarnation that issued it */
	int sess;
	uint8_t type;
	uint32_t len, resp_len;
	size_t resp_cap;
	uint64_t req_sum;
	bool view_req, view_resp, small_cap;
	bool on_connecting; /* enqueued while its session was still connecting */
	uint32_t timeout_ms;
	uint64_t issued_ns;
	unsigned conts, handled;
	bool sent;   /* enqueue returned 0 */
	bool voided; /* its process crashed or its Rpc went away */
	bool done;
	bool probe;
	struct urpc_msgbuf req, resp;
	void *req_mem, *resp_mem; /* views' memory */
	bool gpu_req, gpu_resp;	  /* ... and it is device memory (sim_gpu.c) */
	struct sdefer *nest;	  /* NEST inner request: the outer handle */
};

struct sdefer {
	int node;
	uint32_t inc;
	struct urpc_req_handle *h;
	uint64_t id; /* the outer request */
	uint32_t resp_len;
	bool tiny;
	uint8_t tiny_sum[8];
	bool live;
	struct sdefer *next;
};

struct snode {
	int idx;
	char host[INET_ADDRSTRLEN];
	struct sockaddr_in addr;
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	bool up;      /* the process runs */
	bool rpc_up;  /* and its Rpc exists */
	bool tearing; /* its Rpc is being destroyed: continuations only clean up */
	uint32_t inc; /* bumped at each crash and Rpc re-creation */
	uint32_t ep_id;
	uint64_t step_gen; /* the valid EV_STEP carries this */
	uint64_t nx_gen;   /* the valid EV_NX_TICK carries this (a Nexus per start) */
	uint64_t step_at;
	uint64_t owed;	   /* continuations the engine owes this Rpc, by our count */
	uint64_t activity; /* sum of counters at the last step */
	/* rmem: an rbuf of S's region for session sess[0] (a client), while it is up */
	bool have_rb, rb_asked;
	struct urpc_rbuf rb;
	int sess[2]; /* clients: to S, to M; M: [0] to S */
	/* Since when session sess[k] (of token half_tok[k]) is CONNECTED with no server session */
	uint64_t half_since[2], half_tok[2];
	int sstate[2];
	bool connect_queued;
	bool probe_ok;
	unsigned issued;
};

struct world {
	struct sim_cfg cfg;
	struct sim_result *res;
	struct sim_net net;
	struct sim_fabric fab; /* cfg.fabric */
	struct urpc_rand rng;  /* workload */
	unsigned nnodes;
	struct snode nodes[SIM_MAX_NODES];
	struct sreq **reqs;
	size_t nreqs, capreqs;
	struct sdefer *defers;
	int phase;
	uint64_t hot_until;
	uint64_t drain_deadline;
	/* rmem: S's region, and the rbufs of its exposures (oldest revoked first) */
	uint8_t *region;
	struct urpc_rbuf s_rb[16];
	unsigned s_nrb;
	unsigned probes_ok;
	bool failed;
};

static struct world *W; /* callbacks from the engine find the world here */

/* ---- reporting ---------------------------------------------------------- */

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	va_list ap;
	int k;

	if (W->failed)
		return;
	W->failed = true;
	W->res->failed = 1;
	k = snprintf(W->res->what, sizeof(W->res->what), "t=%.6f ms: ", W->net.now / 1e6);
	va_start(ap, fmt);
	vsnprintf(W->res->what + k, sizeof(W->res->what) - (size_t)k, fmt, ap);
	va_end(ap);
}

/* ---- bytes -------------------------------------------------------------- */

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The bytes [@off, @off + @len) of the stream named @key. */
static void fill(uint8_t *p, size_t len, uint64_t key)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = mix(key + i);

		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)mix(key + i);
}

static uint64_t sum(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ len;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v;

		memcpy(&v, p + i, 8);
		h = mix(h ^ v);
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void put_hdr(uint8_t *p, uint64_t id, uint32_t resp_len, uint32_t salt)
{
	memcpy(p, &id, 8);
	memcpy(p + 8, &resp_len, 4);
	memcpy(p + 12, &salt, 4);
}

/* Fill a request of @len >= HDR_LEN bytes. */
static void fill_req(uint8_t *p, uint32_t len, uint64_t id, uint32_t resp_len)
{
	fill(p + HDR_LEN, len - HDR_LEN, id * 0x9e3779b97f4a7c15ull);
	put_hdr(p, id, resp_len, 0x52455131);
}

static void fill_resp(uint8_t *p, uint32_t len, uint64_t id)
{
	if (len < 8) {
		fill(p, len, ~id);
		return;
	}
	memcpy(p, &id, 8);
	fill(p + 8, len - 8, ~id * 0x9e3779b97f4a7c15ull);
}

/* ---- nodes and names ---------------------------------------------------- */

static int node_of_ep(void *arg, uint32_t ep_id)
{
	struct world *w = arg;
	unsigned i;

	for (i = 0; i < w->nnodes; i++)
		if (w->nodes[i].rpc_up && w->nodes[i].ep_id == ep_id)
			return (int)i;
	return -1;
}

static int node_of_addr(void *arg, const struct sockaddr_in *a)
{
	struct world *w = arg;
	unsigned i;

	for (i = 0; i < w->nnodes; i++)
		if (w->nodes[i].addr.sin_addr.s_addr == a->sin_addr.s_addr &&
		    w->nodes[i].addr.sin_port == a->sin_port)
			return (int)i;
	return -1;
}

static bool node_up(void *arg, int node)
{
	return ((struct world *)arg)->nodes[node].up;
}

static struct snode *node_of_rpc(struct urpc_rpc *rpc)
{
	unsigned i;

	for (i = 0; i < W->nnodes; i++)
		if (W->nodes[i].rpc == rpc)
			return &W->nodes[i];
	return NULL;
}

static struct sreq *req_by_id(uint64_t id)
{
	return id >= 1 && id <= W->nreqs ? W->reqs[id - 1] : NULL;
}

/* Step @n at @at unless a step is already due earlier. */
static void wake(struct snode *n, uint64_t at)
{
	struct sim_ev *e;

	if (!n->rpc_up || (n->step_at && n->step_at <= at && n->step_at >= W->net.now))
		return;
	n->step_gen++;
	n->step_at = at;
	e = sim_ev_new(&W->net, EV_STEP, at, n->idx, 0);
	e->c = n->step_gen;
	sim_ev_push(&W->net, e);
}

/* Session management leaves Nexus @from for @to. */
static int sm_send(void *arg, struct urpc_nexus *from, const struct sockaddr_in *to,
		   const uint8_t *buf, size_t len)
{
	struct world *w = arg;
	int src = -1, dst = node_of_addr(w, to);
	uint64_t transit;
	unsigned i;
	bool dup;
	int k;

	for (i = 0; i < w->nnodes; i++)
		if (w->nodes[i].nx == from)
			src = (int)i;
	if (src < 0 || !w->nodes[src].up)
		return 0;
	if (dst < 0)
		return 0; /* nobody there: the datagram vanishes */
	transit = sim_link_transit(&w->net, src, dst, &dup);
	if (transit == UINT64_MAX)
		return 0;
	for (k = 0; k < 1 + dup; k++) {
		struct sim_ev *e = sim_ev_new(&w->net, EV_SM, w->net.now + transit + 2000u * k, dst,
					      (uint32_t)len);

		e->from = w->nodes[src].addr;
		e->a = (uint32_t)src;
		memcpy(e->data, buf, len);
		sim_ev_push(&w->net, e);
	}
	return 0;
}

/* ---- requests: the client side ----------------------------------------- */

static struct sreq *new_req(struct snode *n, uint8_t type)
{
	struct sreq *r = calloc(1, sizeof(*r));

	if (!r)
		abort();
	if (W->nreqs == W->capreqs) {
		W->capreqs = W->capreqs ? 2 * W->capreqs : 256;
		W->reqs = realloc(W->reqs, W->capreqs * sizeof(*W->reqs));
		if (!W->reqs)
			abort();
	}
	W->reqs[W->nreqs++] = r;
	r->id = W->nreqs;
	r->node = n->idx;
	r->inc = n->inc;
	r->type = type;
	return r;
}

static uint32_t pick_size(uint32_t max_small)
{
	uint64_t roll = urpc__rand_below(&W->rng, 100);

	if (roll < 55)
		return (uint32_t)sim_rand_between(&W->rng, HDR_LEN, 600);
	if (roll < 85) /* around the datagram threshold */
		return (uint32_t)sim_rand_between(&W->rng, max_small - 64, max_small + 64);
	return (uint32_t)sim_rand_between(&W->rng, max_small + 1, W->cfg.max_large);
}

/* Give back a request's buffers (scribbled first: nobody may read them now). */
static void release_bufs(struct snode *n, struct sreq *r)
{
	if (r->gpu_req || r->gpu_resp) {
		uint8_t *junk = malloc(SIM_GPU_BUF);

		if (!junk)
			abort();
		memset(junk, 0xee, SIM_GPU_BUF);
		if (r->gpu_req) {
			sim_gpu_write(r->req_mem, junk, r->len);
			if (r->req.buf)
				urpc_msgbuf_unregister(n->rpc, &r->req);
			sim_gpu_put(r->req_mem);
			r->req_mem = NULL;
			r->view_req = false;
		}
		if (r->gpu_resp) {
			if (r->resp.buf)
				urpc_msgbuf_unregister(n->rpc, &r->resp);
			sim_gpu_put(r->resp_mem);
			r->resp_mem = NULL;
			r->view_resp = false;
		}
		free(junk);
		r->gpu_req = r->gpu_resp = false;
	}
	if (r->req.buf && r->len)
		memset(r->req.buf, 0xee, r->len);
	if (r->view_req) {
		if (r->req.buf)
			urpc_msgbuf_unregister(n->rpc, &r->req);
		urpc_mem_forget(n->rpc, r->req_mem, r->len);
		free(r->req_mem);
	} else if (r->req.buf) {
		urpc_msgbuf_free(n->rpc, &r->req);
	}
	if (r->view_resp) {
		if (r->resp.buf)
			urpc_msgbuf_unregister(n->rpc, &r->resp);
		urpc_mem_forget(n->rpc, r->resp_mem, r->resp_cap);
		free(r->resp_mem);
	} else if (r->resp.buf) {
		urpc_msgbuf_free(n->rpc, &r->resp);
	}
	memset(&r->req, 0, sizeof(r->req));
	memset(&r->resp, 0, sizeof(r->resp));
	r->req_mem = r->resp_mem = NULL;
}

static void answer(struct sdefer *d, bool nest_failed);
static void issue(struct snode *n, bool probe);

/* @n bytes of @mb as the application reads them (device memory copied out). */
static uint8_t *bytes_of(const struct urpc_msgbuf *mb, bool gpu, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	if (!p)
		abort();
	if (!gpu)
		memcpy(p, mb->buf, n);
	else if (sim_gpu_read(p, mb->buf, n))
		memset(p, 0, n);
	return p;
}
static void schedule_fault(unsigned kind, uint64_t at, int node, uint32_t b);

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct sreq *r = tag;
	struct snode *n = &W->nodes[r->node];
	bool ok = false;

	(void)rpc;
	r->conts++;
	if (r->conts > 1) {
		violation("request %llu (node %d session %d): continuation ran %u times",
			  (unsigned long long)r->id, r->node, r->sess, r->conts);
		return;
	}
	if (n->owed == 0)
		violation("node %d: a continuation ran for request %llu that the count says "
			  "is not pending",
			  r->node, (unsigned long long)r->id);
	else
		n->owed--;
	r->done = true;
	if (resp != &r->resp)
		violation("request %llu: continuation got a response buffer that is not its own",
			  (unsigned long long)r->id);
	if (r->len >= HDR_LEN && r->req.buf && ({
		    uint8_t *b = bytes_of(&r->req, r->gpu_req, r->len);
		    uint64_t h = sum(b, r->len);

		    free(b);
		    h != r->req_sum;
	    }))
		violation("request %llu (node %d session %d): the engine changed the request "
			  "buffer while it was lent",
			  (unsigned long long)r->id, r->node, r->sess);
	if (status == 0) {
		W->res->reqs_ok++;
		if (r->type == T_NONE)
			violation("request %llu of a type with no handler succeeded",
				  (unsigned long long)r->id);
		if (r->small_cap && !(r->type == T_NEST && resp->data_size == 16)) {
			uint64_t named = 0;

			if (resp->data_size >= 8)
				memcpy(&named, resp->buf, 8);
			violation("request %llu (node %d session %d type %u): status 0 for a "
				  "%u-byte response in a %zu-byte buffer (it holds %zu bytes "
				  "naming request %llu)",
				  (unsigned long long)r->id, r->node, r->sess, r->type, r->resp_len,
				  r->resp.max_data_size, resp->data_size,
				  (unsigned long long)named);
		}
		if (resp->data_size == r->resp_len) {
			uint8_t *want = malloc(r->resp_len ? r->resp_len : 1);

			if (!want)
				abort();
			uint8_t *got = bytes_of(resp, r->gpu_resp, r->resp_len);

			if (r->type == T_TINY)
				fill(want, r->resp_len, r->req_sum);
			else
				fill_resp(want, r->resp_len, r->id);
			ok = !memcmp(want, got, r->resp_len);
			free(want);
			free(got);
		}
		if (!ok && r->type == T_NEST && resp->data_size == 16) {
			uint64_t m, id;

			memcpy(&m, resp->buf, 8);
			memcpy(&id, resp->buf + 8, 8);
			ok = m == NEST_FAIL_MAGIC && id == r->id;
		}
		if (!ok)
			violation("request %llu (node %d session %d type %u, %u bytes): status 0 "
				  "but the response (%zu bytes) is not what the handler answered "
				  "(%u bytes)",
				  (unsigned long long)r->id, r->node, r->sess, r->type, r->len,
				  resp->data_size, r->resp_len);
	} else {
		W->res->reqs_err++;
		switch (status) {
		case -ECONNRESET:
		case -EIO:
		case -ENOMEM:
			break;
		case -ETIMEDOUT:
			if (!r->timeout_ms)
				violation("request %llu without a deadline failed with -ETIMEDOUT",
					  (unsigned long long)r->id);
			break;
		case -EMSGSIZE:
			if (!r->small_cap)
				violation("request %llu: -EMSGSIZE although its %zu-byte buffer "
					  "holds the %u-byte response",
					  (unsigned long long)r->id, r->resp.max_data_size,
					  r->resp_len);
			break;
		case -ENOSYS: /* no handler for its type */
			if (r->type != T_NONE)
				violation("request %llu of type %u (which has a handler) failed "
					  "with -ENOSYS",
					  (unsigned long long)r->id, r->type);
			break;
		case -ENOENT:
			/* A connect that failed fails its queued requests with its status. */
			if (!r->on_connecting)
				violation("request %llu of type %u failed with -ENOENT (no such "
					  "Rpc) outside a connect",
					  (unsigned long long)r->id, r->type);
			break;
		default:
			violation("request %llu (node %d session %d): unexpected status %d (%s)",
				  (unsigned long long)r->id, r->node, r->sess, status,
				  urpc_strerror(status));
		}
	}
	if (r->probe && status == 0 && !n->probe_ok) {
		n->probe_ok = true;
		W->probes_ok++;
	} else if (r->probe && !n->probe_ok && !n->tearing && !n->connect_queued) {
		/* Try again on a fresh session, as an application would. */
		struct sim_ev *e = sim_ev_new(&W->net, EV_CONNECT, W->net.now + 1000000, n->idx, 0);

		if (n->sstate[0] != SESS_DOWN) {
			urpc_session_disconnect(n->rpc, n->sess[0]);
			n->sstate[0] = SESS_DOWN;
			n->sess[0] = -1; /* freed after its DISCONNECTED: forget it */
		}
		n->connect_queued = true;
		e->c = n->inc;
		sim_ev_push(&W->net, e);
	}
	release_bufs(n, r);
	if (r->nest) {
		struct sdefer *d = r->nest;

		r->nest = NULL;
		if (d->live && !n->tearing)
			answer(d, status != 0 || !ok);
		else
			d->live = false;
	}
	/* Reuse in the continuation: the next request goes out from here. */
	if (!n->tearing && W->phase <= PH_CALM && n->idx >= N_C0 && n->issued < W->cfg.reqs &&
	    urpc__rand_below(&W->rng, 3) == 0)
		issue(n, false);
}

static int enqueue(struct snode *n, struct sreq *r)
{
	int ret;

	r->on_connecting = !urpc_session_is_connected(n->rpc, r->sess);
	ret = urpc_req_enqueue(n->rpc, r->sess, r->type, &r->req, &r->resp, cont, r, r->timeout_ms);

	if (ret == 0) {
		r->sent = true;
		n->owed++;
		W->res->reqs_issued++;
		return 0;
	}
	if (ret != -EAGAIN && ret != -ECONNRESET && ret != -EINVAL)
		violation("node %d: urpc_req_enqueue on session %d returned %d (%s)", n->idx,
			  r->sess, ret, urpc_strerror(ret));
	release_bufs(n, r);
	r->done = true;
	return ret;
}

/*
 * A buffer the pool just handed out must not overlap one the engine still
 * holds for a request of the same node (lent, its continuation not run).
 */
static void check_fresh(const struct snode *n, const struct sreq *self,
			const struct urpc_msgbuf *mb, const char *what)
{
	uintptr_t a = (uintptr_t)mb->buf, b = a + (mb->max_data_size ? mb->max_data_size : 1);
	size_t i;

	for (i = W->nreqs; i-- > 0;) {
		const struct sreq *r = W->reqs[i];
		const struct urpc_msgbuf *held[2] = {&r->req, &r->resp};
		unsigned k;

		if (r == self || r->node != n->idx || r->inc != n->inc || !r->sent || r->done)
			continue;
		for (k = 0; k < 2; k++) {
			uintptr_t c = (uintptr_t)held[k]->buf,
				  d = c + (held[k]->max_data_size ? held[k]->max_data_size : 1);

			if (held[k]->buf && a < d && c < b)
				violation("node %d: the pool handed out a %s buffer overlapping "
					  "the %s buffer of request %llu, still lent to the engine",
					  n->idx, what, k ? "response" : "request",
					  (unsigned long long)r->id);
		}
	}
}

/* Allocate @r's buffers for a request of r->len bytes and a r->resp_len answer. */
static int make_bufs(struct snode *n, struct sreq *r)
{
	size_t max_small = urpc_rpc_max_msg_size(n->rpc);
	size_t cap = r->resp_len ? r->resp_len : 1;
	int ret;

	r->view_req = r->len > max_small && urpc__rand_below(&W->rng, 4) == 0;
	if (r->view_req && W->cfg.gpu && r->len >= HDR_LEN && urpc__rand_below(&W->rng, 2) &&
	    (r->req_mem = sim_gpu_get(r->len))) {
		uint8_t *tmp = malloc(r->len);

		if (!tmp)
			abort();
		r->gpu_req = true;
		fill_req(tmp, r->len, r->id, r->resp_len);
		r->req_sum = sum(tmp, r->len);
		ret = sim_gpu_write(r->req_mem, tmp, r->len);
		free(tmp);
		if (!ret)
			ret = urpc_msgbuf_register(n->rpc, r->req_mem, r->len, URPC_MEM_PEER_READS,
						   &r->req);
		if (ret)
			return ret;
		goto resp;
	}
	if (r->view_req) {
		r->req_mem = malloc(r->len);
		if (!r->req_mem)
			return -ENOMEM;
		ret = urpc_msgbuf_register(n->rpc, r->req_mem, r->len, URPC_MEM_PEER_READS,
					   &r->req);
	} else {
		ret = urpc_msgbuf_alloc(n->rpc, r->len ? r->len : 1, &r->req);
		if (!ret) {
			check_fresh(n, r, &r->req, "request");
			ret = urpc_msgbuf_resize(&r->req, r->len);
		}
	}
	if (ret)
		return ret;
	if (r->len >= HDR_LEN) {
		fill_req(r->req.buf, r->len, r->id, r->resp_len);
	} else {
		fill(r->req.buf, r->len, r->id * 31);
	}
	r->req_sum = sum(r->req.buf, r->len);
resp:
	r->small_cap = r->resp_len > 8 && urpc__rand_below(&W->rng, 20) == 0;
	if (r->small_cap)
		cap = r->resp_len / 2;
	r->resp_cap = cap;
	r->view_resp = cap > max_small && urpc__rand_below(&W->rng, 4) == 0;
	if (r->view_resp && W->cfg.gpu && urpc__rand_below(&W->rng, 2) &&
	    (r->resp_mem = sim_gpu_get(cap))) {
		r->gpu_resp = true;
		ret = urpc_msgbuf_register(n->rpc, r->resp_mem, cap, 0, &r->resp);
	} else if (r->view_resp) {
		r->resp_mem = malloc(cap);
		if (!r->resp_mem)
			return -ENOMEM;
		ret = urpc_msgbuf_register(n->rpc, r->resp_mem, cap, 0, &r->resp);
	} else {
		ret = urpc_msgbuf_alloc(n->rpc, cap, &r->resp);
		if (!ret)
			check_fresh(n, r, &r->resp, "response");
	}
	W->res->gpu += r->gpu_req || r->gpu_resp;
	/* What counts is the capacity the engine sees, not the size asked for. */
	r->small_cap = !ret && r->resp.max_data_size < r->resp_len;
	return ret;
}

static bool rm_issue(struct snode *n);

static void issue(struct snode *n, bool probe)
{
	uint64_t roll = urpc__rand_below(&W->rng, 100);
	uint32_t max_small = (uint32_t)urpc_rpc_max_msg_size(n->rpc);
	uint8_t type = roll < 45   ? T_ECHO
		       : roll < 65 ? T_DEFER
		       : roll < 80 ? T_NEST
		       : roll < 95 ? T_TINY
				   : T_NONE;
	int which = type == T_NEST ? 1 : 0;
	struct sreq *r;

	if (probe)
		type = T_ECHO, which = 0;
	else if (rm_issue(n))
		return;
	if (n->sstate[which] == SESS_DOWN)
		return;
	r = new_req(n, type);
	r->sess = n->sess[which];
	r->probe = probe;
	r->issued_ns = W->net.now;
	if (type == T_TINY) {
		r->len = (uint32_t)urpc__rand_below(&W->rng, HDR_LEN);
		r->resp_len = 8;
	} else {
		r->len = pick_size(max_small);
		r->resp_len = type == T_NONE ? 64 : pick_size(max_small);
		if (urpc__rand_below(&W->rng, 8) == 0)
			r->resp_len = (uint32_t)urpc__rand_below(&W->rng, 8);
	}
	if (!probe && urpc__rand_below(&W->rng, 4) == 0)
		r->timeout_ms = (uint32_t)sim_rand_between(&W->rng, 1, 60);
	if (type == T_NEST)
		r->resp_len = URPC_MAX(r->resp_len, 16); /* room for the failure marker */
	if (!probe)
		n->issued++;
	if (make_bufs(n, r)) {
		violation("node %d: cannot allocate buffers for a %u-byte request", n->idx, r->len);
		release_bufs(n, r);
		return;
	}
	if (enqueue(n, r) == 0 && W->phase == PH_FAULTS && (W->cfg.faults & SIM_F_DISC) &&
	    r->len > max_small && urpc__rand_below(&W->rng, 4) == 0)
		/* A disconnect while the server may be reading the payload. */
		schedule_fault(FK_DISC, W->net.now + urpc__rand_below(&W->rng, 80000), n->idx,
			       (uint32_t)which);
}

/* ---- remote memory (cfg.rmem) -------------------------------------------- */

#define RM_REGION 65536u /* S's exposed region */
#define RM_LOCAL 8192u	 /* a batch's local buffer */
#define RM_MAX_OPS 80u	 /* more than the engine's window of 32 */

/* A batch in flight (kept until the world goes, to catch a second continuation). */
struct sbatch {
	struct sbatch *next;
	int node;
	unsigned conts;
	struct urpc_msgbuf buf;
};

/* An RBUF request in flight. */
struct srbuf_call {
	int node;
	uint32_t inc;
	int sess;
	uint64_t token; /* the session's, when asked: the answer is for that session only */
	unsigned conts;
	struct urpc_msgbuf req, resp;
	struct srbuf_call *link;
};

static struct sbatch *rm_batches;
static struct srbuf_call *rm_calls;

/* The engine owes @n one continuation less: it just ran one. */
static void rm_owed_down(struct snode *n, const char *what)
{
	if (n->owed == 0)
		violation("node %d: a continuation ran for %s that the count says is not pending",
			  n->idx, what);
	else
		n->owed--;
}

static void rm_batch_cont(struct urpc_rpc *rpc, void *tag, int status)
{
	struct sbatch *b = tag;
	struct snode *n = &W->nodes[b->node];
	int ret;

	if (++b->conts > 1) {
		violation("node %d: a batch's continuation ran %u times", b->node, b->conts);
		return;
	}
	rm_owed_down(n, "a batch");
	if (status && status != -EACCES && status != -ETIMEDOUT && status != -ECONNRESET)
		violation("node %d: a batch ended with %d (%s), not a status of the contract",
			  b->node, status, urpc_strerror(status));
	if (status == -EACCES)
		n->have_rb = false; /* revoked: ask again */
	W->res->rmem_ok += status == 0;
	/* Every operation has let go of the buffer: it is the application's again. */
	ret = urpc_msgbuf_free(rpc, &b->buf);
	if (ret)
		violation("node %d: freeing a batch's buffer in its continuation: %s", b->node,
			  urpc_strerror(ret));
}

static void rm_rbuf_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct srbuf_call *c = tag;
	struct snode *n = &W->nodes[c->node];
	struct urpc_session_info si;

	if (++c->conts > 1) {
		violation("node %d: an RBUF request's continuation ran %u times", c->node,
			  c->conts);
		return;
	}
	rm_owed_down(n, "an RBUF request");
	if (n->inc == c->inc)
		n->rb_asked = false;
	if (!status && resp->data_size == sizeof(n->rb) && n->inc == c->inc &&
	    n->sess[0] == c->sess && n->sstate[0] == SESS_UP &&
	    !urpc__rpc_session_info(rpc, c->sess, &si) && si.token == c->token) {
		memcpy(&n->rb, resp->buf, sizeof(n->rb));
		n->have_rb = true;
	}
	if (urpc_msgbuf_free(rpc, &c->req) || urpc_msgbuf_free(rpc, &c->resp))
		violation("node %d: an RBUF request's buffers are still held in its continuation",
			  c->node);
}

/* S: expose the region on the request's session and answer with its rbuf. */
static void rm_handler(struct urpc_req_handle *h, void *arg)
{
	struct snode *n = arg;
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);
	struct urpc_rbuf rb;
	int ret;

	W->res->handled++;
	ret = urpc_mem_expose(n->rpc, urpc_req_session(h), W->region, RM_REGION,
			      URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb);
	if (ret) {
		if (ret != -ENOMEM && ret != -EAGAIN)
			violation("node %d: urpc_mem_expose: %s", n->idx, urpc_strerror(ret));
		urpc_msgbuf_resize(r, 0);
		urpc_resp_enqueue(h, r);
		return;
	}
	if (W->s_nrb == sizeof(W->s_rb) / sizeof(W->s_rb[0])) {
		if (urpc_mem_revoke(n->rpc, &W->s_rb[0]))
			violation("node %d: revoking its oldest exposure failed", n->idx);
		memmove(W->s_rb, W->s_rb + 1, (W->s_nrb - 1) * sizeof(W->s_rb[0]));
		W->s_nrb--;
	}
	W->s_rb[W->s_nrb++] = rb;
	memcpy(r->buf, &rb, sizeof(rb));
	urpc_msgbuf_resize(r, sizeof(rb));
	urpc_resp_enqueue(h, r);
}

static void rm_ask(struct snode *n)
{
	struct srbuf_call *c = calloc(1, sizeof(*c));
	struct urpc_session_info si;
	int ret;

	if (!c) {
		violation("out of memory");
		return;
	}
	c->node = n->idx;
	c->inc = n->inc;
	c->sess = n->sess[0];
	c->link = rm_calls;
	rm_calls = c;
	if (urpc_msgbuf_alloc(n->rpc, 8, &c->req) || urpc_msgbuf_alloc(n->rpc, 64, &c->resp)) {
		violation("node %d: cannot allocate an RBUF request", n->idx);
		return;
	}
	memset(c->req.buf, 0, 8);
	if (!urpc__rpc_session_info(n->rpc, c->sess, &si))
		c->token = si.token;
	ret = urpc_req_enqueue(n->rpc, c->sess, T_RBUF, &c->req, &c->resp, rm_rbuf_cont, c, 0);
	if (ret == 0) {
		n->owed++;
		n->rb_asked = true;
		return;
	}
	if (ret != -EAGAIN && ret != -ECONNRESET && ret != -EINVAL)
		violation("node %d: urpc_req_enqueue(RBUF): %s", n->idx, urpc_strerror(ret));
	urpc_msgbuf_free(n->rpc, &c->req);
	urpc_msgbuf_free(n->rpc, &c->resp);
}

/*
 * Client @n's remote-memory move: ask S for an rbuf, or run a batch against
 * the one it has (now and then with a bad operation, which must refuse the
 * whole batch), or have S revoke its newest exposure. False: none was made.
 */
static bool rm_issue(struct snode *n)
{
	struct snode *s = &W->nodes[N_S];
	struct urpc_rdma_op *ops;
	struct sbatch *b;
	unsigned nops, k, bad;
	uint32_t timeout;
	int ret;

	if (!W->cfg.rmem || n->idx < N_C0 || n->sstate[0] != SESS_UP ||
	    urpc__rand_below(&W->rng, 3))
		return false;
	if (s->rpc_up && W->s_nrb && urpc__rand_below(&W->rng, 12) == 0) {
		/* S revokes its newest exposure, perhaps with operations in flight. */
		if (urpc_mem_revoke(s->rpc, &W->s_rb[--W->s_nrb]))
			violation("node %d: revoking an exposure failed", s->idx);
		return true;
	}
	if (!n->have_rb) {
		if (!n->rb_asked)
			rm_ask(n);
		return true;
	}
	nops = 1 + (unsigned)urpc__rand_below(&W->rng, RM_MAX_OPS);
	bad = urpc__rand_below(&W->rng, 16) == 0 ? (unsigned)urpc__rand_below(&W->rng, nops)
						 : UINT32_MAX;
	timeout =
		urpc__rand_below(&W->rng, 3) == 0 ? (uint32_t)sim_rand_between(&W->rng, 1, 30) : 0;
	b = calloc(1, sizeof(*b));
	ops = calloc(nops, sizeof(*ops));
	if (!b || !ops || urpc_msgbuf_alloc(n->rpc, RM_LOCAL, &b->buf)) {
		violation("node %d: cannot allocate a batch", n->idx);
		free(b);
		free(ops);
		return true;
	}
	b->node = n->idx;
	b->next = rm_batches;
	rm_batches = b;
	for (k = 0; k < nops; k++) {
		size_t len = 1 + (size_t)urpc__rand_below(&W->rng, 512);

		ops[k].opcode = urpc__rand_below(&W->rng, 2) ? URPC_RDMA_WRITE : URPC_RDMA_READ;
		ops[k].local = &b->buf;
		ops[k].local_off = (size_t)urpc__rand_below(&W->rng, RM_LOCAL - len + 1);
		ops[k].rbuf = &n->rb;
		ops[k].remote_off = urpc__rand_below(&W->rng, RM_REGION - len + 1);
		ops[k].len = len;
		if (k == bad)
			ops[k].remote_off = RM_REGION - len + 1; /* one byte past the end */
	}
	ret = urpc_rdma_submit(n->rpc, n->sess[0], ops, nops, timeout, rm_batch_cont, b);
	free(ops);
	if (bad != UINT32_MAX && ret != -EINVAL)
		violation("node %d: a batch with a bad operation: %d, not -EINVAL", n->idx, ret);
	if (ret == 0) {
		n->owed++;
		W->res->rmem_batches++;
		return true;
	}
	if (bad == UINT32_MAX && ret != -ENOTCONN && ret != -EAGAIN)
		violation("node %d: urpc_rdma_submit: %s", n->idx, urpc_strerror(ret));
	if (urpc_msgbuf_free(n->rpc, &b->buf))
		violation("node %d: a refused batch holds its buffer", n->idx);
	b->conts = 1; /* never to run */
	return true;
}

static void rm_free(void)
{
	while (rm_batches) {
		struct sbatch *b = rm_batches;

		rm_batches = b->next;
		free(b);
	}
	while (rm_calls) {
		struct srbuf_call *c = rm_calls;

		rm_calls = c->link;
		free(c);
	}
	free(W->region);
}

/* ---- handlers ------------------------------------------------------------ */

/* Respond to handle @h for request @id with @resp_len bytes. */
static void respond(struct snode *n, struct urpc_req_handle *h, uint64_t id, uint32_t resp_len,
		    const uint8_t *tiny_key, bool nest_failed)
{
	size_t max_small = urpc_rpc_max_msg_size(n->rpc);
	struct urpc_msgbuf big, *mb;
	int ret;

	if (nest_failed)
		resp_len = 16;
	if (resp_len <= max_small) {
		mb = urpc_req_resp_msgbuf(h);
		if (urpc_msgbuf_resize(mb, resp_len)) {
			violation(
				"node %d: the response buffer cannot hold %u bytes (capacity %zu)",
				n->idx, resp_len, mb->max_data_size);
			return;
		}
	} else {
		ret = urpc_msgbuf_alloc(n->rpc, resp_len, &big);
		if (ret) {
			violation("node %d: cannot allocate a %u-byte response: %s", n->idx,
				  resp_len, urpc_strerror(ret));
			return;
		}
		mb = &big;
	}
	if (nest_failed) {
		uint64_t m = NEST_FAIL_MAGIC;

		memcpy(mb->buf, &m, 8);
		memcpy(mb->buf + 8, &id, 8);
	} else if (tiny_key) {
		uint64_t k;

		memcpy(&k, tiny_key, 8);
		fill(mb->buf, resp_len, k);
	} else {
		fill_resp(mb->buf, resp_len, id);
	}
	ret = urpc_resp_enqueue(h, mb);
	if (ret) {
		violation("node %d: urpc_resp_enqueue of %u bytes for request %llu: %s", n->idx,
			  resp_len, (unsigned long long)id, urpc_strerror(ret));
		if (mb == &big)
			urpc_msgbuf_free(n->rpc, &big);
	}
}

static void answer(struct sdefer *d, bool nest_failed)
{
	struct snode *n = &W->nodes[d->node];

	d->live = false;
	if (!n->rpc_up || n->inc != d->inc)
		return;
	respond(n, d->h, d->id, d->resp_len, d->tiny ? d->tiny_sum : NULL, nest_failed);
}

static struct sdefer *new_defer(struct snode *n, struct urpc_req_handle *h, uint64_t id,
				uint32_t resp_len)
{
	struct sdefer *d = calloc(1, sizeof(*d));

	if (!d)
		abort();
	d->node = n->idx;
	d->inc = n->inc;
	d->h = h;
	d->id = id;
	d->resp_len = resp_len;
	d->live = true;
	d->next = W->defers;
	W->defers = d;
	return d;
}

/* M's nested request to S on behalf of outer request @d. */
static void nest(struct snode *m, struct sdefer *d)
{
	struct sreq *r;

	if (m->sstate[0] == SESS_DOWN) {
		answer(d, true);
		return;
	}
	r = new_req(m, T_ECHO);
	r->sess = m->sess[0];
	r->len = pick_size((uint32_t)urpc_rpc_max_msg_size(m->rpc));
	r->resp_len = (uint32_t)urpc__rand_below(&W->rng, 2048);
	r->nest = d;
	r->issued_ns = W->net.now;
	if (make_bufs(m, r)) {
		violation("node %d: cannot allocate buffers for a nested request", m->idx);
		release_bufs(m, r);
		answer(d, true);
		return;
	}
	if (enqueue(m, r)) {
		r->nest = NULL;
		answer(d, true);
	}
}

static void handler(struct urpc_req_handle *h, void *arg)
{
	struct snode *n = arg;
	uint8_t type = urpc_req_type(h);
	const uint8_t *data;
	uint64_t id;
	uint32_t resp_len;
	struct sreq *r;
	size_t len;

	data = urpc_req_data(h, &len);
	W->res->handled++;
	if (type == T_TINY) {
		uint8_t key[8];
		uint64_t k = sum(data, len);
		struct sdefer *d;

		memcpy(key, &k, 8);
		if (urpc__rand_below(&W->rng, 3)) {
			respond(n, h, 0, 8, key, false);
			return;
		}
		d = new_defer(n, h, 0, 8);
		d->tiny = true;
		memcpy(d->tiny_sum, key, 8);
		goto later;
	}
	if (len < HDR_LEN) {
		violation("node %d: a %zu-byte request of type %u, shorter than any client sends",
			  n->idx, len, type);
		return;
	}
	memcpy(&id, data, 8);
	memcpy(&resp_len, data + 8, 4);
	r = req_by_id(id);
	if (!r || r->len != len || sum(data, len) != r->req_sum || r->type != type) {
		violation("node %d: handler of type %u fed %zu bytes the client never sent "
			  "(they name request %llu%s)",
			  n->idx, type, len, (unsigned long long)id,
			  r ? "" : ", which does not exist");
		return;
	}
	if (!r->sent)
		violation("node %d: handler ran for request %llu whose enqueue failed", n->idx,
			  (unsigned long long)id);
	if (++r->handled > 1)
		violation("request %llu (node %d session %d): handler ran %u times",
			  (unsigned long long)id, r->node, r->sess, r->handled);
	if (type == T_ECHO) {
		respond(n, h, id, resp_len, NULL, false);
		return;
	}
	if (type == T_NEST) {
		nest(n, new_defer(n, h, id, resp_len));
		return;
	}
	new_defer(n, h, id, resp_len);
later : {
	struct sim_ev *e = sim_ev_new(
		&W->net, EV_DEFER, W->net.now + sim_rand_between(&W->rng, 0, 3000000), n->idx, 0);

	e->ptr = W->defers;
	sim_ev_push(&W->net, e);
}
}

/* ---- sessions ------------------------------------------------------------ */

static void sm_handler(struct urpc_rpc *rpc, int session, enum urpc_sm_event ev, int status,
		       void *arg)
{
	struct snode *n = node_of_rpc(rpc);
	int k;

	(void)arg;
	(void)status;
	if (!n)
		return;
	for (k = 0; k < 2; k++) {
		if (n->sess[k] != session || n->sstate[k] == SESS_DOWN)
			continue;
		if (ev == URPC_SM_CONNECTED) {
			n->sstate[k] = SESS_UP;
		} else {
			/* Every other event ends it: the library frees the number. */
			n->sstate[k] = SESS_DOWN;
			if (k == 0)
				n->have_rb = false;
			n->sess[k] = -1;
			if (!n->tearing && !n->connect_queued && W->phase < PH_DONE) {
				struct sim_ev *e = sim_ev_new(
					&W->net, EV_CONNECT,
					W->net.now + sim_rand_between(&W->rng, 100000, 20000000),
					n->idx, 0);

				n->connect_queued = true;
				e->c = n->inc;
				sim_ev_push(&W->net, e);
			}
		}
	}
}

/* (Re)connect every session of @n that is down. */
static void connect_all(struct snode *n)
{
	int k, nsess = n->idx == N_M ? 1 : n->idx >= N_C0 ? 2 : 0;

	for (k = 0; k < nsess; k++) {
		char hp[64];
		int target = n->idx == N_M || k == 0 ? N_S : N_M;
		int ret;

		if (n->sstate[k] != SESS_DOWN)
			continue;
		snprintf(hp, sizeof(hp), "%s:%u", W->nodes[target].host, SM_PORT);
		ret = urpc_session_connect(n->rpc, hp, 0, &n->sess[k]);
		if (ret) {
			violation("node %d: urpc_session_connect(%s): %s", n->idx, hp,
				  urpc_strerror(ret));
			n->sess[k] = -1;
			continue;
		}
		n->sstate[k] = SESS_CONNECTING;
	}
}

/* ---- node life ----------------------------------------------------------- */

static int rpc_up(struct snode *n)
{
	struct urpc_rpc_opts o;
	int ret;

	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	o.sm_handler = sm_handler;
	o.seed = urpc__rand_next(&W->rng) | 1;
	o.idle_block_us = 0;
	o.rto_us = 2000;
	o.ping_interval_ms = 20;
	o.peer_timeout_ms = PEER_TIMEOUT_MS;
	o.connect_timeout_ms = 400;
	if (W->cfg.fabric) {
		/* the fabric's runs also run the congestion controller and its pacer (2: not) */
		o.cc_algo = W->cfg.fabric == 2 ? URPC_CC_OFF : URPC_CC_SWIFT;
		o.cc_target_us = 20;
		o.cc_line_mbps = 10000;
	}
	o.session_window = W->cfg.window;
	ret = urpc_rpc_create(n->nx, 0, &o, &n->rpc);
	if (ret) {
		violation("node %d: urpc_rpc_create: %s", n->idx, urpc_strerror(ret));
		return ret;
	}
	n->rpc_up = true;
	n->inc++;
	n->ep_id = urpc__loop_ep_id(urpc__rpc_transport(n->rpc));
	if (W->cfg.release_lag) {
		struct urpc_loop_faults f = {.release_polls = W->cfg.release_lag};

		ret = urpc__loop_set_faults(urpc__rpc_transport(n->rpc), &f);
		if (ret) {
			violation("node %d: urpc__loop_set_faults: %s", n->idx, urpc_strerror(ret));
			return ret;
		}
	}
	n->owed = 0;
	n->sess[0] = n->sess[1] = -1;
	n->sstate[0] = n->sstate[1] = SESS_DOWN;
	n->have_rb = n->rb_asked = false;
	n->step_at = 0;
	connect_all(n);
	wake(n, W->net.now + 1000);
	return 0;
}

/* The heartbeat timers of @n's Nexus run at @at, as its SM thread's poll would wake. */
static void nx_tick_at(struct snode *n, uint64_t at)
{
	struct sim_ev *e = sim_ev_new(&W->net, EV_NX_TICK, at, n->idx, 0);

	e->c = n->nx_gen;
	sim_ev_push(&W->net, e);
}

static void nx_tick(struct snode *n, uint64_t gen)
{
	uint64_t due, now = W->net.now;

	if (!n->up || !n->nx || gen != n->nx_gen)
		return;
	due = urpc__nexus_tick(n->nx);
	/* As the SM thread: at least every 50 ms, at most every millisecond. */
	nx_tick_at(n, URPC_MAX(now + 1000000, URPC_MIN(due, now + 50000000)));
	wake(n, now + sim_rand_between(&W->rng, 500, 3000)); /* an NX_NOTICE may wait */
}

static int node_start(struct snode *n)
{
	struct urpc_sm_net sn = {.send = sm_send, .arg = W};
	int ret;

	ret = urpc__nexus_create_sim(n->host, SM_PORT, &sn, &n->nx);
	if (ret) {
		violation("node %d: cannot create its Nexus: %s", n->idx, urpc_strerror(ret));
		return ret;
	}
	if (n->idx <= N_M) {
		urpc_nexus_register_handler(n->nx, T_ECHO, handler, n);
		urpc_nexus_register_handler(n->nx, T_DEFER, handler, n);
		urpc_nexus_register_handler(n->nx, T_TINY, handler, n);
		if (n->idx == N_M)
			urpc_nexus_register_handler(n->nx, T_NEST, handler, n);
		if (n->idx == N_S && W->cfg.rmem)
			urpc_nexus_register_handler(n->nx, T_RBUF, rm_handler, n);
	}
	n->up = true;
	n->nx_gen++;
	nx_tick_at(n, W->net.now + 1000000);
	return rpc_up(n);
}

/* Forget deferred handles of @n's current Rpc (it is going away). */
static void drop_defers(struct snode *n)
{
	struct sdefer *d;

	for (d = W->defers; d; d = d->next)
		if (d->node == n->idx && d->inc == n->inc)
			d->live = false;
}

/* Destroy @n's Rpc; its pending requests complete inside (and count as void). */
static void rpc_down(struct snode *n)
{
	size_t i;
	int ret;

	if (!n->rpc_up)
		return;
	drop_defers(n);
	n->tearing = true;
	for (i = 0; i < W->nreqs; i++) {
		struct sreq *r = W->reqs[i];

		if (r->node == n->idx && r->inc == n->inc && !r->done)
			r->voided = true;
	}
	{
		struct urpc_rpc_stats st;

		urpc_rpc_get_stats(n->rpc, &st);
		W->res->retired_late += st.resps_retiring;
		W->res->answered_late += st.reqs_retiring;
	}
	ret = urpc_rpc_destroy(n->rpc);
	if (ret)
		violation("node %d: urpc_rpc_destroy: %s", n->idx, urpc_strerror(ret));
	if (n->idx == N_S)
		W->s_nrb = 0; /* its exposures went with it */
	if (n->owed)
		violation("node %d: %llu continuations never ran by the end of urpc_rpc_destroy",
			  n->idx, (unsigned long long)n->owed);
	n->tearing = false;
	n->rpc = NULL;
	n->rpc_up = false;
	n->step_gen++;
	n->step_at = 0;
	n->connect_queued = false;
}

static void node_crash(struct snode *n)
{
	n->up = false; /* from now on nothing it sends leaves, nothing reaches it */
	rpc_down(n);
	if (urpc_nexus_destroy(n->nx))
		violation("node %d: urpc_nexus_destroy failed", n->idx);
	n->nx = NULL;
}

/* ---- invariants after a step ---------------------------------------------- */

static uint64_t activity_of(struct snode *n)
{
	struct urpc_rpc_stats st;
	struct urpc_tp *tp = urpc__rpc_transport(n->rpc);

	urpc_rpc_get_stats(n->rpc, &st);
	return st.pkts_tx + st.pkts_rx + st.sm_pkts_rx + st.sm_pkts_tx + tp->stats.os_served +
	       n->rpc->os_busy;
}

/*
 * No half-open session (issue 31): a client session of @n that is CONNECTED
 * while its server (up or not) holds no CONNECTED session of its token is
 * reset within HALF_OPEN_MAX_NS, whatever caused it (a crash or restart of
 * the server, a partition, a server that forgot the session).
 */
static void check_half_open(struct snode *n)
{
	unsigned k;

	for (k = 0; k < 2; k++) {
		const struct snode *srv = &W->nodes[k == 0 || n->idx == N_M ? N_S : N_M];
		const struct urpc_session *cs, *ss = NULL;

		if (n->idx == N_S || (n->idx == N_M && k == 1) || n->sess[k] < 0)
			continue;
		cs = urpc__rpc_session(n->rpc, n->sess[k]);
		if (!cs || cs->role != URPC_ROLE_CLIENT || cs->state != URPC_SESS_CONNECTED) {
			n->half_since[k] = 0;
			continue;
		}
		if (srv->up && srv->rpc_up)
			ss = urpc__rpc_session(srv->rpc, (int)cs->remote_num);
		if (ss && ss->role == URPC_ROLE_SERVER && ss->token == cs->token &&
		    ss->state == URPC_SESS_CONNECTED) {
			n->half_since[k] = 0;
			continue;
		}
		if (!n->half_since[k] || n->half_tok[k] != cs->token) {
			n->half_since[k] = W->net.now;
			n->half_tok[k] = cs->token;
		} else if (W->net.now - n->half_since[k] > HALF_OPEN_MAX_NS) {
			violation(
				"half-open: node %d session %d (token %016llx) CONNECTED for %.1f ms "
				"while node %d holds no session for it",
				n->idx, n->sess[k], (unsigned long long)cs->token,
				(double)(W->net.now - n->half_since[k]) / 1e6, srv->idx);
		}
	}
}

static void check_node(struct snode *n)
{
	char why[256];
	uint64_t owed;

	if (!n->rpc_up)
		return;
	check_half_open(n);
	if (urpc__rpc_check(n->rpc, &owed, why, sizeof(why))) {
		violation("node %d: engine bookkeeping: %s", n->idx, why);
		return;
	}
	if (owed != n->owed)
		violation("node %d: the engine owes %llu continuations, the workload is waiting "
			  "for %llu",
			  n->idx, (unsigned long long)owed, (unsigned long long)n->owed);
	/* Every grant the transport holds belongs to a slot that needs it: none leaks. */
	if (urpc__rpc_grants(n->rpc) != urpc__rpc_transport(n->rpc)->stats.grants_live)
		violation("node %d: %llu grants in the engine's slots, %llu live in the transport",
			  n->idx, (unsigned long long)urpc__rpc_grants(n->rpc),
			  (unsigned long long)urpc__rpc_transport(n->rpc)->stats.grants_live);
}

/* ---- faults -------------------------------------------------------------- */

static void set_links(bool calm)
{
	unsigned i, j;

	for (i = 0; i < W->nnodes; i++) {
		for (j = 0; j < W->nnodes; j++) {
			struct sim_link *l = &W->net.link[i][j];
			unsigned f = W->cfg.faults;

			l->delay_ns = sim_rand_between(&W->rng, 2000, 30000);
			l->jitter_ns = 0;
			l->drop = l->dup = 0;
			if (calm)
				continue;
			if ((f & SIM_F_DELAY) && urpc__rand_below(&W->rng, 2))
				l->jitter_ns = sim_rand_between(&W->rng, 1000, 400000);
			if ((f & SIM_F_DROP) && urpc__rand_below(&W->rng, 2))
				l->drop = 0.2 * urpc__rand_unit(&W->rng);
			if ((f & SIM_F_DUP) && urpc__rand_below(&W->rng, 3) == 0)
				l->dup = 0.1 * urpc__rand_unit(&W->rng);
		}
	}
}

static void schedule_fault(unsigned kind, uint64_t at, int node, uint32_t b)
{
	struct sim_ev *e = sim_ev_new(&W->net, EV_FAULT, at, node, 0);

	e->a = kind;
	e->b = b;
	sim_ev_push(&W->net, e);
}

static void plan_faults(void)
{
	unsigned f = W->cfg.faults, k, nf = (unsigned)sim_rand_between(&W->rng, 2, 10);
	uint64_t end = W->cfg.fault_ns, t0 = W->net.now;

	if (f & (SIM_F_DROP | SIM_F_DUP | SIM_F_DELAY))
		for (k = 0; k < 3; k++)
			schedule_fault(FK_LINKS, t0 + urpc__rand_below(&W->rng, end), -1, 0);
	for (k = 0; k < nf; k++) {
		uint64_t at = t0 + urpc__rand_below(&W->rng, end);
		int node = (int)urpc__rand_below(&W->rng, W->nnodes);
		unsigned pick = (unsigned)urpc__rand_below(&W->rng, 4);

		if (pick == 0 && (f & SIM_F_PART)) {
			uint32_t other =
				(uint32_t)((node + 1 +
					    (int)urpc__rand_below(&W->rng, W->nnodes - 1)) %
					   (int)W->nnodes);

			schedule_fault(FK_PART, at, node, other);
		} else if (pick == 1 && (f & SIM_F_CRASH)) {
			schedule_fault(FK_CRASH, at, node, 0);
		} else if (pick == 2 && (f & SIM_F_RPC)) {
			schedule_fault(FK_RPC, at, node, 0);
		} else if (pick == 3 && (f & SIM_F_DISC)) {
			/* One draw per statement: argument order is the compiler's. */
			int client = (int)(N_C0 + urpc__rand_below(&W->rng, W->cfg.clients));
			uint32_t which = (uint32_t)urpc__rand_below(&W->rng, 2);

			schedule_fault(FK_DISC, at, client, which);
		}
	}
	if (!(f & SIM_F_FORGET))
		return;
	nf = (unsigned)sim_rand_between(&W->rng, 1, 4);
	for (k = 0; k < nf; k++) {
		uint64_t at = t0 + urpc__rand_below(&W->rng, end);
		int node = (int)urpc__rand_below(&W->rng, 2); /* S or M */

		schedule_fault(FK_FORGET, at, node, (uint32_t)urpc__rand_next(&W->rng));
	}
}

/* Server @n frees its (@pick % count)-th connected session and tells nobody. */
static void forget_one(struct snode *n, uint32_t pick)
{
	struct urpc_session *s;
	uint32_t i, count = 0;

	for (i = 0; i < n->rpc->hi_session; i++) {
		s = urpc__rpc_session(n->rpc, (int)i);
		count += s && s->role == URPC_ROLE_SERVER && s->state == URPC_SESS_CONNECTED;
	}
	if (!count)
		return;
	pick %= count;
	for (i = 0; i < n->rpc->hi_session; i++) {
		s = urpc__rpc_session(n->rpc, (int)i);
		if (!s || s->role != URPC_ROLE_SERVER || s->state != URPC_SESS_CONNECTED)
			continue;
		if (pick--)
			continue;
		W->res->forgets++;
		/* As a client's DISCONNECT_REQ frees it, but no client asked. */
		urpc__session_transition(n->rpc, s, URPC_SEV_PEER_CLOSED, 0);
		return;
	}
}

static void do_fault(const struct sim_ev *e)
{
	struct snode *n = e->node >= 0 ? &W->nodes[e->node] : NULL;
	uint64_t later = W->net.now + sim_rand_between(&W->rng, 1000000, 150000000);

	if (W->phase != PH_FAULTS && e->a != FK_HEAL && e->a != FK_RESTART && e->a != FK_RPC_UP)
		return;
	switch (e->a) {
	case FK_LINKS:
		set_links(false);
		break;
	case FK_PART:
		W->net.link[e->node][e->b].cut = W->net.link[e->b][e->node].cut = true;
		W->res->partitions++;
		schedule_fault(FK_HEAL, later, e->node, e->b);
		break;
	case FK_HEAL:
		W->net.link[e->node][e->b].cut = W->net.link[e->b][e->node].cut = false;
		break;
	case FK_CRASH:
		if (!n->up)
			break;
		node_crash(n);
		W->res->crashes++;
		schedule_fault(FK_RESTART, later, e->node, 0);
		break;
	case FK_RESTART:
		if (!n->up)
			node_start(n);
		break;
	case FK_RPC:
		if (!n->rpc_up)
			break;
		rpc_down(n);
		W->res->rpc_restarts++;
		schedule_fault(FK_RPC_UP, later, e->node, 0);
		break;
	case FK_RPC_UP:
		if (n->up && !n->rpc_up)
			rpc_up(n);
		break;
	case FK_FORGET:
		if (n->rpc_up)
			forget_one(n, e->b);
		break;
	case FK_DISC:
		if (!n->rpc_up || n->sstate[e->b] == SESS_DOWN)
			break;
		W->res->disconnects++;
		if (urpc_session_disconnect(n->rpc, n->sess[e->b]) == 0) {
			n->sstate[e->b] = SESS_DOWN;
			if (e->b == 0)
				n->have_rb = false;
			n->sess[e->b] = -1;
			if (!n->connect_queued) {
				struct sim_ev *c =
					sim_ev_new(&W->net, EV_CONNECT, later, n->idx, 0);

				n->connect_queued = true;
				c->c = n->inc;
				sim_ev_push(&W->net, c);
			}
		}
		break;
	}
	for (unsigned i = 0; i < W->nnodes; i++)
		wake(&W->nodes[i], W->net.now + 1000);
}

/* ---- the run --------------------------------------------------------------- */

/* What the engine holds of request @r, for a report. */
static const char *engine_view(const struct sreq *r, char *buf, size_t n)
{
	const struct snode *nd = &W->nodes[r->node];
	const struct urpc_session *s;
	unsigned i;

	if (!nd->rpc_up || nd->inc != r->inc) {
		snprintf(buf, n, "its Rpc is gone");
		return buf;
	}
	s = urpc__rpc_session(nd->rpc, r->sess);
	if (!s) {
		snprintf(buf, n, "session %d is gone", r->sess);
		return buf;
	}
	for (i = 0; i <= s->slot_mask; i++) {
		const struct urpc_cslot *sl = &s->cli.slots[i];

		if (sl->state != URPC_CLI_FREE && sl->tag == r) {
			const struct snode *srv = &W->nodes[r->sess == nd->sess[1] ? N_M : N_S];
			const struct urpc_session *ss =
				srv->rpc_up ? urpc__rpc_session(srv->rpc, (int)s->remote_num)
					    : NULL;
			int k = snprintf(buf, n,
					 "session %s, slot %u: req_num %llu %s large %d "
					 "late %d retries %u deadline %.3f ms",
					 urpc__session_state_str(s->state), i,
					 (unsigned long long)sl->cur_req_num,
					 urpc__cli_state_str(sl->state), sl->large_req,
					 sl->late_status, sl->retries, sl->deadline_ns / 1e6);

			if (ss && ss->role == URPC_ROLE_SERVER && k > 0 && (size_t)k < n)
				snprintf(buf + k, n - (size_t)k,
					 "; server session %u %s, its slot: req_num %llu %s",
					 s->remote_num, urpc__session_state_str(ss->state),
					 (unsigned long long)ss->srv.slots[i].cur_req_num,
					 urpc__srv_state_str(ss->srv.slots[i].state));
			return buf;
		}
	}
	snprintf(buf, n,
		 "session %s holds it in no slot (waiting: %u; free slots 0x%llx; congestion: rate "
		 "%llu b/s%s, %llu decreases, srtt %u ns, next send %.3f ms, on the pacer %d)",
		 urpc__session_state_str(s->state), s->cli.wq_tail - s->cli.wq_head,
		 (unsigned long long)s->cli.free_mask, (unsigned long long)s->cli.cc.cc.rate_bps,
		 s->cli.cc_limited ? " (paced)" : "", (unsigned long long)s->cli.cc.cc.decreases,
		 s->cli.cc.cc.srtt_ns, s->cli.cc.cc.next_tx_ns / 1e6, s->cli.cc.queued);
	return buf;
}

static uint64_t outstanding(void)
{
	uint64_t o = 0;
	unsigned i;

	for (i = 0; i < W->nnodes; i++)
		o += W->nodes[i].owed;
	return o;
}

static void schedule_issue(struct snode *n)
{
	struct sim_ev *e = sim_ev_new(
		&W->net, EV_ISSUE,
		W->net.now + sim_rand_between(&W->rng, 10000, W->cfg.work_ns / (W->cfg.reqs + 1)),
		n->idx, 0);

	sim_ev_push(&W->net, e);
}

static void phase_event(uint32_t ph, uint64_t at)
{
	struct sim_ev *e = sim_ev_new(&W->net, EV_PHASE, at, -1, 0);

	e->a = ph;
	sim_ev_push(&W->net, e);
}

static void enter_phase(uint32_t ph)
{
	unsigned i, j;

	W->phase = (int)ph;
	switch (ph) {
	case PH_CALM:
		/* Faults stop: links heal, every process and Rpc comes back. */
		set_links(true);
		for (i = 0; i < W->nnodes; i++)
			for (j = 0; j < W->nnodes; j++)
				W->net.link[i][j].cut = false;
		for (i = 0; i < W->nnodes; i++) {
			if (!W->nodes[i].up)
				node_start(&W->nodes[i]);
			else if (!W->nodes[i].rpc_up)
				rpc_up(&W->nodes[i]);
		}
		break;
	case PH_DRAIN:
		/*
		 * No new requests. Bound: a request waits at most for its session
		 * to be declared failed (peer timeout) or to connect, plus its
		 * retransmissions at the longest RTO; deferred answers take 3 ms.
		 */
		W->drain_deadline = W->net.now + 2000000000ull;
		break;
	case PH_PROBE:
		for (i = N_C0; i < W->nnodes; i++) {
			struct snode *n = &W->nodes[i];

			if (n->sstate[0] == SESS_DOWN)
				connect_all(n);
			issue(n, true);
		}
		phase_event(PH_DONE, W->net.now + 1000000000ull);
		break;
	case PH_DONE:
		break;
	}
	for (i = 0; i < W->nnodes; i++)
		wake(&W->nodes[i], W->net.now + 1000);
}

static void dispatch_one(struct sim_ev *e, struct snode *n);

static void do_step(struct snode *n)
{
	uint64_t before, after;

	n->step_at = 0;
	before = activity_of(n);
	urpc_rpc_run_event_loop_once(n->rpc);
	if (!n->rpc_up)
		return;
	check_node(n);
	after = activity_of(n);
	if (after != before || n->rpc->os_busy) {
		W->hot_until = W->net.now + 300000;
		wake(n, W->net.now + sim_rand_between(&W->rng, 1000, 8000));
	} else if (W->net.now < W->hot_until) {
		wake(n, W->net.now + sim_rand_between(&W->rng, 3000, 20000));
	} else {
		wake(n, W->net.now + sim_rand_between(&W->rng, 300000, 1500000));
	}
}

static void wake_node(void *arg, int node, uint64_t at)
{
	struct world *w = arg;

	if (node >= 0 && (unsigned)node < w->nnodes)
		wake(&w->nodes[node], at);
}

/*
 * --fabric: every node on a 10 Gb/s port of one switch, or (odd seeds) two
 * ToRs of 4 under a spine, 1 us links, 256 KiB per port, ECN above 64 KiB;
 * one-sided transfers in 64 KiB chunks.
 */
static int fabric_setup(struct world *w)
{
	struct sim_fab_cfg c = {
		.hosts = SIM_MAX_NODES,
		.per_tor = (w->cfg.seed & 1) ? 4 : 0,
		.host_gbps = 10,
		.up_gbps = 10,
		.prop_ns = 1000,
		.buf_bytes = 256 * 1024,
		.ecn_bytes = 64 * 1024,
		.os_chunk = 64 * 1024,
	};

	if (sim_fab_init(&w->fab, &c))
		return -1;
	w->net.fab = &w->fab;
	return 0;
}

/*
 * What the fabric's switch ports saw (issue 32): datagrams dropped, ECN
 * marks, the deepest queue and the busiest port's p99 queue (bytes).
 */
static void fabric_tally(const struct sim_fabric *f, struct sim_result *res)
{
	unsigned i;

	for (i = 0; i < f->cfg.hosts + 2 * f->tors; i++) {
		const struct sim_port *p = i < f->cfg.hosts ? &f->down[i]
					   : i < f->cfg.hosts + f->tors
						   ? &f->up[i - f->cfg.hosts]
						   : &f->spine[i - f->cfg.hosts - f->tors];
		uint64_t q99 = sim_fab_qpct(p, 0.99);

		res->fab_drops += p->drops;
		res->fab_marks += p->marks;
		if (p->qmax > res->fab_qmax)
			res->fab_qmax = p->qmax;
		if (q99 > res->fab_q99)
			res->fab_q99 = q99;
	}
}

static void dispatch(struct sim_ev *e)
{
	struct snode *n = e->node >= 0 ? &W->nodes[e->node] : NULL;

	dispatch_one(e, n);
	if (n && n->rpc_up && e->kind != EV_STEP)
		check_node(n);
}

static void dispatch_one(struct sim_ev *e, struct snode *n)
{
	switch (e->kind) {
	case EV_STEP:
		if (n->rpc_up && e->c == n->step_gen)
			do_step(n);
		break;
	case EV_DP:
		if (n->up && urpc__loop_net_deliver(e->a, e->data, e->len) == 0)
			wake(n, W->net.now + sim_rand_between(&W->rng, 500, 3000));
		break;
	case EV_NX_TICK:
		nx_tick(n, e->c);
		break;
	case EV_OS_CHUNK:
		sim_net_os_chunk(&W->net, e);
		break;
	case EV_HOP: /* taken by sim_run()'s loop */
	case EV_EXP:
		break;
	case EV_SM:
		if (n->up && n->nx) {
			urpc__nexus_sm_input(n->nx, e->data, e->len, &e->from);
			wake(n, W->net.now + sim_rand_between(&W->rng, 500, 3000));
		}
		break;
	case EV_ISSUE:
		if (W->phase <= PH_CALM && n->issued < W->cfg.reqs) {
			if (n->rpc_up)
				issue(n, false);
			else
				n->issued++;
			schedule_issue(n);
			wake(n, W->net.now + 500);
		}
		break;
	case EV_DEFER: {
		struct sdefer *d = e->ptr;

		if (d->live)
			answer(d, false);
		if (n->rpc_up)
			wake(n, W->net.now + 500);
		break;
	}
	case EV_FAULT:
		do_fault(e);
		break;
	case EV_CONNECT:
		n->connect_queued = false;
		if (n->rpc_up && e->c == n->inc && W->phase < PH_DONE) {
			connect_all(n);
			if (W->phase == PH_PROBE && n->idx >= N_C0 && !n->probe_ok)
				issue(n, true);
			wake(n, W->net.now + 500);
		}
		break;
	case EV_PHASE:
		enter_phase(e->a);
		break;
	}
}

static void teardown(void)
{
	unsigned i;

	for (i = 0; i < W->nnodes; i++) {
		struct snode *n = &W->nodes[i];

		if (n->rpc_up)
			rpc_down(n);
		if (n->nx && urpc_nexus_destroy(n->nx))
			violation("node %d: urpc_nexus_destroy failed at teardown", n->idx);
		n->nx = NULL;
	}
}

static void free_world(void)
{
	size_t i;

	for (i = 0; i < W->nreqs; i++) {
		if (!W->reqs[i]->gpu_req)
			free(W->reqs[i]->req_mem);
		if (!W->reqs[i]->gpu_resp)
			free(W->reqs[i]->resp_mem);
		free(W->reqs[i]);
	}
	free(W->reqs);
	while (W->defers) {
		struct sdefer *d = W->defers;

		W->defers = d->next;
		free(d);
	}
	rm_free();
}

int sim_run(const struct sim_cfg *cfg, struct sim_result *res)
{
	struct world w;
	uint64_t max_events = cfg->max_events ? cfg->max_events : 20000000ull;
	struct sim_ev *e;
	unsigned i;
	int ret;

	memset(&w, 0, sizeof(w));
	memset(res, 0, sizeof(*res));
	w.cfg = *cfg;
	w.res = res;
	if (w.cfg.gpu && sim_gpu_init())
		w.cfg.gpu = 0; /* no driver in this process (urpc_sim.c said why) */
	W = &w;
	if (cfg->rmem && !(w.region = calloc(1, RM_REGION))) {
		snprintf(res->what, sizeof(res->what), "no memory for the exposed region");
		res->failed = 1;
		W = NULL;
		return 1;
	}
	urpc__rand_seed(&w.rng, cfg->seed * 0x9e3779b97f4a7c15ull + 7);
	sim_net_init(&w.net, cfg->seed, cfg->trace);
	w.net.node_of_ep = node_of_ep;
	w.net.node_of_addr = node_of_addr;
	w.net.node_up = node_up;
	w.net.wake = wake_node;
	w.net.arg = &w;
	if (cfg->fabric && fabric_setup(&w)) {
		snprintf(res->what, sizeof(res->what), "no memory for the fabric");
		res->failed = 1;
		W = NULL;
		return 1;
	}
	ret = sim_net_install(&w.net);
	if (ret) {
		snprintf(res->what, sizeof(res->what), "cannot install the seams: %s",
			 urpc_strerror(ret));
		res->failed = 1;
		W = NULL;
		return 1;
	}
	w.nnodes = N_C0 + cfg->clients;
	set_links(true);
	for (i = 0; i < w.nnodes; i++) {
		struct snode *n = &w.nodes[i];

		n->idx = (int)i;
		snprintf(n->host, sizeof(n->host), "10.0.0.%u", i + 1);
		n->addr.sin_family = AF_INET;
		n->addr.sin_port = htons(SM_PORT);
		inet_pton(AF_INET, n->host, &n->addr.sin_addr);
		n->sess[0] = n->sess[1] = -1;
	}
	for (i = 0; i < w.nnodes && !w.failed; i++)
		node_start(&w.nodes[i]);
	for (i = N_C0; i < w.nnodes; i++)
		schedule_issue(&w.nodes[i]);
	plan_faults();
	phase_event(PH_CALM, w.net.now + cfg->fault_ns);
	phase_event(PH_DRAIN, w.net.now + cfg->work_ns);

	while (!w.failed && (e = sim_ev_pop(&w.net))) {
		if (e->kind == EV_HOP) {
			sim_fab_hop(&w.fab, &w.net, e); /* takes it */
			continue;
		}
		sim_ev_note(&w.net, e);
		dispatch(e);
		free(e);
		if (w.phase == PH_DRAIN && !outstanding()) {
			enter_phase(PH_PROBE);
		} else if (w.phase == PH_DRAIN && w.net.now > w.drain_deadline) {
			size_t k;

			for (k = 0; k < w.nreqs; k++) {
				struct sreq *r = w.reqs[k];

				if (r->sent && !r->done && !r->voided)
					break;
			}
			char view[256] = "";

			if (k < w.nreqs)
				engine_view(w.reqs[k], view, sizeof(view));
			violation(
				"liveness: %llu requests still pending 2 s after the faults stopped "
				"(request %llu of node %d, session %d, issued at %.3f ms: %s)",
				(unsigned long long)outstanding(),
				k < w.nreqs ? (unsigned long long)w.reqs[k]->id : 0ull,
				k < w.nreqs ? w.reqs[k]->node : -1,
				k < w.nreqs ? w.reqs[k]->sess : -1,
				k < w.nreqs ? w.reqs[k]->issued_ns / 1e6 : 0.0, view);
		} else if (w.phase == PH_PROBE && w.probes_ok == cfg->clients && !outstanding()) {
			break;
		} else if (w.phase == PH_DONE) {
			violation("liveness: %u of %u clients could not complete a request on a "
				  "fresh session within 1 s after the faults stopped",
				  cfg->clients - w.probes_ok, cfg->clients);
		}
		if (w.net.events > max_events)
			violation("no end after %llu events: a livelock",
				  (unsigned long long)w.net.events);
	}
	if (!w.failed && w.phase < PH_PROBE)
		violation("the event queue ran dry in phase %d", w.phase);
	res->events = w.net.events;
	res->vtime_ns = w.net.now;
	if (w.net.fab)
		fabric_tally(&w.fab, res);
	if (w.failed && !cfg->trace) {
		fprintf(stderr, "urpc-sim: seed %llu: %s\n", (unsigned long long)cfg->seed,
			res->what);
		sim_net_dump_last(&w.net, stderr);
	}
	teardown();
	if (!w.failed && sim_gpu_in_use())
		violation("%u GPU buffers were never handed back to the application",
			  sim_gpu_in_use());
	sim_gpu_reset();
	res->trace_hash = w.net.hash;
	sim_net_fini(&w.net);
	if (w.net.fab)
		sim_fab_fini(&w.fab);
	free_world();
	W = NULL;
	return res->failed;
}

/* ---- configuration ---------------------------------------------------------- */

void sim_cfg_from_seed(struct sim_cfg *c, uint64_t seed)
{
	struct urpc_rand r;
	uint64_t h;

	memset(c, 0, sizeof(*c));
	urpc__rand_seed(&r, seed ^ 0xc0ffee);
	c->seed = seed;
	c->clients = 1 + (unsigned)urpc__rand_below(&r, 3);
	c->reqs = 5 + (unsigned)urpc__rand_below(&r, 60);
	c->faults = (unsigned)urpc__rand_below(&r, SIM_F_DRAWN + 1);
	c->max_large = urpc__rand_below(&r, 4) ? 64 * 1024 : 2 * 1024 * 1024;
	c->gpu = urpc__rand_below(&r, 3) == 0;
	c->fault_ns = 50000000ull + urpc__rand_below(&r, 250000000ull);
	c->work_ns = c->fault_ns + 20000000ull + urpc__rand_below(&r, 50000000ull);
	c->rmem = urpc__rand_below(&r, 2); /* drawn last: the fields above are as before */
	/* From the seed itself: the generator's last draws vary little between neighbours. */
	h = (seed + 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	c->release_lag = h & 1 ? 0 : 1 + (unsigned)((h >> 8) % 64);
	if ((h >> 20) & 1)
		c->faults |= SIM_F_FORGET;
	c->window = URPC_SESSION_WINDOW_DEFAULT; /* not drawn: every seed runs as before */
}

static const char *const fault_names[] = {"drop",  "dup", "delay", "part",
					  "crash", "rpc", "disc",  "forget"};

const char *sim_faults_str(unsigned mask, char *buf, size_t n)
{
	size_t k = 0;
	unsigned i;

	buf[0] = '\0';
	for (i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
		if (mask & (1u << i))
			k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s", k ? "," : "",
					      fault_names[i]);
	if (!mask)
		snprintf(buf, n, "none");
	return buf;
}

int sim_faults_parse(const char *s, unsigned *mask)
{
	char tmp[128], *tok, *save = NULL;
	unsigned m = 0, i;

	if (strlen(s) >= sizeof(tmp))
		return -EINVAL;
	strcpy(tmp, s);
	if (!strcmp(s, "none")) {
		*mask = 0;
		return 0;
	}
	if (!strcmp(s, "all")) {
		*mask = SIM_F_ALL;
		return 0;
	}
	for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
			if (!strcmp(tok, fault_names[i]))
				break;
		if (i == sizeof(fault_names) / sizeof(fault_names[0]))
			return -EINVAL;
		m |= 1u << i;
	}
	*mask = m;
	return 0;
}
