/* SPDX-License-Identifier: MIT */
/*
 * urpc-sessions, the client side (sessions.h): connecting many sessions,
 * traffic round robin over them, closing them, and the worker process
 * that does it on the main process's command. Uses only <urpc/urpc.h>.
 */
#include "sessions.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One client session and its one request. */
struct sess {
	struct urpc_msgbuf req;
	struct urpc_msgbuf resp;
	struct sess_client *c;
	int num;
	bool busy;
	bool used; /* completed an RPC in the measured span */
	bool have_bufs;
};

/* One pass of the client's loop (and of the server's, when it shares the thread). */
static int run(struct sess_client *c)
{
	int ret;

	if (c->sv)
		return bench_run_once(SESS_PROG, c->rpc, c->sv);
	/* Its own process: the loop may sleep while it waits (the default options). */
	ret = urpc_rpc_run_event_loop(c->rpc, 1);
	if (ret)
		fprintf(stderr, SESS_PROG ": event loop: %s\n", urpc_strerror(ret));
	return ret;
}

int sess_client_connect(struct sess_client *c, struct urpc_nexus *nx, struct bench_server *sv,
			enum urpc_transport_kind transport, const char *device,
			unsigned long ping_ms, bool busy_poll, uint16_t port, unsigned long n,
			unsigned long batch)
{
	struct urpc_rpc_opts ro;
	double t_seen;
	unsigned seen = 0;
	char hp[32];
	int ret;

	memset(c, 0, sizeof(*c));
	c->sv = sv;
	c->n = n;
	c->batch = batch;
	if (!nx) {
		ret = bench_nexus_open(SESS_PROG, bench_echo, NULL, &c->nx);
		if (ret)
			return ret;
		c->own_nx = true;
	} else {
		c->nx = nx;
	}
	urpc_rpc_opts_init(&ro);
	ro.transport = transport;
	ro.device = device;
	ro.sm_handler = bench_sm_event;
	ro.sm_arg = &c->sm;
	if (ping_ms)
		ro.ping_interval_ms = (uint32_t)ping_ms;
	if (busy_poll)
		ro.idle_block_us = 0;
	if (ro.peer_timeout_ms <= ro.ping_interval_ms)
		ro.peer_timeout_ms = ro.ping_interval_ms * 5;
	ret = urpc_rpc_create(c->nx, BENCH_CLI_ID, &ro, &c->rpc);
	if (ret) {
		fprintf(stderr, SESS_PROG ": cannot create a client Rpc: %s\n", urpc_strerror(ret));
		return ret;
	}
	c->s = calloc(n, sizeof(*c->s));
	if (!c->s) {
		fprintf(stderr, SESS_PROG ": out of memory for %lu sessions\n", n);
		return -ENOMEM;
	}
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", port);
	t_seen = bench_now_s();
	while (c->sm.connected < n) {
		while (c->started < n && c->started - c->sm.connected < batch) {
			ret = urpc_session_connect(c->rpc, hp, BENCH_SRV_ID, &c->s[c->started].num);
			if (ret) {
				fprintf(stderr, SESS_PROG ": connect of session %lu: %s\n",
					c->started + 1, urpc_strerror(ret));
				return ret;
			}
			c->started++;
		}
		ret = run(c);
		if (ret)
			return ret;
		if (c->sm.failed) {
			fprintf(stderr, SESS_PROG ": %u sessions failed to connect (first: %s)\n",
				c->sm.failed, urpc_strerror(c->sm.status));
			return c->sm.status;
		}
		if (c->sm.connected != seen) {
			seen = c->sm.connected;
			t_seen = bench_now_s();
		} else if (bench_now_s() - t_seen > SESS_STALL_S) {
			fprintf(stderr, SESS_PROG ": no session connected for %.0f s (%u of %lu)\n",
				SESS_STALL_S, c->sm.connected, n);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp);

/* Enqueue a request on the next idle session, round robin; 0, -EAGAIN (none idle), or -errno. */
static int issue(struct sess_client *c)
{
	unsigned long tries;
	int ret;

	for (tries = 0; tries < c->n; tries++) {
		struct sess *s = &c->s[c->next];

		c->next = c->next + 1 == c->n ? 0 : c->next + 1;
		if (s->busy)
			continue;
		s->req.buf[0]++;
		s->busy = true;
		ret = urpc_req_enqueue(c->rpc, s->num, BENCH_REQ_TYPE, &s->req, &s->resp, cont, s,
				       0);
		if (ret) {
			s->busy = false;
			return ret;
		}
		c->outstanding++;
		return 0;
	}
	return -EAGAIN;
}

static void note_error(struct sess_client *c, int status)
{
	if (!c->errors)
		c->first_error = status;
	c->errors++;
}

/* A response: count it and send the next request at once (the window stays full). */
static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct sess *s = tag;
	struct sess_client *c = s->c;
	int ret;

	(void)rpc;
	s->busy = false;
	c->completed++;
	c->outstanding--;
	if (c->measuring && !s->used) {
		s->used = true;
		c->nused++;
	}
	if (!status && (resp->data_size != SESS_MSG_SIZE || resp->buf[0] != s->req.buf[0]))
		status = -EBADMSG;
	if (status)
		note_error(c, status);
	if (!c->stopping && c->outstanding < c->window) {
		ret = issue(c);
		if (ret && ret != -EAGAIN)
			note_error(c, ret);
	}
}

static int alloc_bufs(struct sess_client *c)
{
	unsigned long i;
	int ret;

	for (i = 0; i < c->n; i++) {
		struct sess *s = &c->s[i];

		s->c = c;
		s->used = false;
		if (s->have_bufs)
			continue;
		ret = urpc_msgbuf_alloc(c->rpc, SESS_MSG_SIZE, &s->req);
		if (!ret) {
			ret = urpc_msgbuf_alloc(c->rpc, SESS_MSG_SIZE, &s->resp);
			if (ret)
				urpc_msgbuf_free(c->rpc, &s->req);
		}
		if (ret) {
			fprintf(stderr, SESS_PROG ": cannot allocate buffers for session %lu: %s\n",
				i + 1, urpc_strerror(ret));
			return ret;
		}
		s->have_bufs = true;
		memset(s->req.buf, 0xa5, SESS_MSG_SIZE);
	}
	return 0;
}

/* Stop sending and wait for the requests still out. */
static int drain(struct sess_client *c)
{
	double t0 = bench_now_s();
	int ret;

	c->stopping = true;
	c->measuring = false;
	while (c->outstanding) {
		ret = run(c);
		if (ret)
			return ret;
		if (bench_now_s() - t0 > SESS_STALL_S) {
			fprintf(stderr, SESS_PROG ": %lu requests not answered in %.0f s\n",
				c->outstanding, SESS_STALL_S);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

int sess_client_traffic(struct sess_client *c, unsigned long window, double duration_s,
			struct sess_traffic *t, bool (*more)(void *arg), void *arg)
{
	double now = bench_now_s(), t_start = now + SESS_WARMUP_S, t0 = 0, t_seen = now, cpu0 = 0;
	struct urpc_rpc_stats before, after;
	unsigned long c0 = 0, seen = 0;
	bool measured = false;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = alloc_bufs(c);
	if (ret)
		return ret;
	c->window = window;
	c->completed = c->errors = c->nused = 0;
	c->stopping = false;
	urpc_rpc_get_stats(c->rpc, &before);
	for (;;) {
		/* Continuations refill the window; this covers the start and refusals. */
		while (c->outstanding < c->window && !(ret = issue(c)))
			;
		if (ret && ret != -EAGAIN && ret != -ENOMEM)
			note_error(c, ret);
		ret = run(c);
		if (ret)
			return ret;
		if (c->errors) {
			fprintf(stderr,
				SESS_PROG ": %lu RPCs failed or came back wrong (first: %s)\n",
				c->errors, urpc_strerror(c->first_error));
			drain(c);
			return -EIO;
		}
		now = bench_now_s();
		if (c->completed != seen) {
			seen = c->completed;
			t_seen = now;
		} else if (now - t_seen > SESS_STALL_S) {
			fprintf(stderr, SESS_PROG ": no RPC completed for %.0f s\n", SESS_STALL_S);
			return -ETIMEDOUT;
		}
		if (!measured && !t0 && now >= t_start && c->completed >= c->n + c->window) {
			if (c->on_start)
				c->on_start(c->start_arg);
			t0 = bench_now_s();
			cpu0 = sess_cpu_s();
			c0 = c->completed;
			c->measuring = true;
		} else if (!measured && t0 && now - t0 >= duration_s &&
			   (c->nused == c->n || now - t0 >= duration_s + SESS_STALL_S)) {
			/* Not before every session had its turn: the rate is one over all n. */
			c->measuring = false;
			measured = true;
			urpc_rpc_get_stats(c->rpc, &after);
			t->rpcs = c->completed - c0;
			t->span_s = now - t0;
			t->active = c->nused;
			t->retransmits = after.retransmits - before.retransmits;
			t->cpu_s = sess_cpu_s() - cpu0;
			if (!more)
				break;
		}
		if (measured && !more(arg))
			break;
	}
	return drain(c);
}

int sess_client_down(struct sess_client *c)
{
	unsigned long i, n = 0;
	int status = 0;

	if (c->rpc) {
		double t_seen = bench_now_s();
		unsigned seen = c->sm.disconnected, base = c->sm.disconnected;

		/*
		 * At most c->batch closing at a time, as when connecting: a burst
		 * of tens of thousands would overflow the server's SM queue, and
		 * the dropped ones would close only by their time-out.
		 */
		for (i = 0; i < c->started || c->outstanding || c->sm.disconnected - base < n;) {
			while (i < c->started && n - (c->sm.disconnected - base) < c->batch)
				if (!urpc_session_disconnect(c->rpc, c->s[i++].num))
					n++;
			if (run(c))
				break;
			if (c->sm.disconnected != seen) {
				seen = c->sm.disconnected;
				t_seen = bench_now_s();
			} else if (bench_now_s() - t_seen > SESS_STALL_S) {
				fprintf(stderr, SESS_PROG ": no session closed for %.0f s\n",
					SESS_STALL_S);
				break;
			}
		}
		for (i = 0; c->s && i < c->n; i++) {
			if (!c->s[i].have_bufs || c->s[i].busy)
				continue;
			urpc_msgbuf_free(c->rpc, &c->s[i].req);
			urpc_msgbuf_free(c->rpc, &c->s[i].resp);
		}
		if (urpc_rpc_destroy(c->rpc)) {
			fprintf(stderr, SESS_PROG ": cannot destroy a client Rpc\n");
			status = 1;
		}
		c->rpc = NULL;
	}
	free(c->s);
	c->s = NULL;
	if (c->own_nx && urpc_nexus_destroy(c->nx))
		status = 1;
	c->nx = NULL;
	return status;
}

/* ---- the worker process ---- */

struct worker {
	int cmd_fd, rep_fd;
	struct sess_traffic *t;
	bool replied; /* TRAFFIC answered */
	bool stopped; /* STOP read */
};

static int reply(int fd, const struct sess_reply *r)
{
	return write(fd, r, sizeof(*r)) == (ssize_t)sizeof(*r) ? 0 : -EIO;
}

/* The measured span starts: tell the main process, which times the server from now. */
static void worker_started(void *arg)
{
	struct worker *w = arg;
	struct sess_reply r = {.started = true, .status = 0};

	if (reply(w->rep_fd, &r))
		fprintf(stderr, SESS_PROG ": worker: cannot report the start\n");
}

/* Called once measured: report, then keep going until the main process says STOP. */
static bool worker_more(void *arg)
{
	struct worker *w = arg;
	struct pollfd pfd = {.fd = w->cmd_fd, .events = POLLIN};
	struct sess_cmd cmd;

	if (!w->replied) {
		struct sess_reply r = {.status = 0, .t = *w->t};

		w->replied = true;
		if (reply(w->rep_fd, &r))
			return false;
	}
	if (poll(&pfd, 1, 0) <= 0)
		return true;
	/* STOP (or the main process gone): either way, stop. */
	w->stopped = true;
	if (read(w->cmd_fd, &cmd, sizeof(cmd)) != (ssize_t)sizeof(cmd) || cmd.op != SESS_OP_STOP)
		fprintf(stderr, SESS_PROG ": worker: expected STOP\n");
	return false;
}

int sess_worker_main(int cmd_fd, int rep_fd)
{
	struct sess_client c;
	struct sess_cmd cmd;
	int status = 0;

	memset(&c, 0, sizeof(c));
	while (read(cmd_fd, &cmd, sizeof(cmd)) == (ssize_t)sizeof(cmd)) {
		struct sess_reply r;
		double t0;

		memset(&r, 0, sizeof(r));
		switch (cmd.op) {
		case SESS_OP_CONNECT:
			t0 = bench_now_s();
			r.status = sess_client_connect(
				&c, NULL, NULL, cmd.transport, cmd.device[0] ? cmd.device : NULL,
				cmd.ping_ms, cmd.busy_poll, cmd.port, cmd.n, cmd.batch);
			r.connect_s = bench_now_s() - t0;
			break;
		case SESS_OP_TRAFFIC: {
			struct worker w = {.cmd_fd = cmd_fd, .rep_fd = rep_fd, .t = &r.t};

			c.on_start = worker_started;
			c.start_arg = &w;
			r.status = sess_client_traffic(&c, cmd.window, cmd.duration_s, &r.t,
						       worker_more, &w);
			c.on_start = NULL;
			if (!w.replied) {
				if (!r.status)
					r.status = -EIO;
				break; /* the failure answers TRAFFIC; STOP comes next */
			}
			/* This answers STOP, once it came (traffic may have failed before). */
			if (!w.stopped &&
			    (read(cmd_fd, &cmd, sizeof(cmd)) != (ssize_t)sizeof(cmd) ||
			     cmd.op != SESS_OP_STOP))
				return 1;
			break;
		}
		case SESS_OP_STOP:
			break; /* no traffic running (it failed): nothing to stop */
		case SESS_OP_DOWN:
			r.status = sess_client_down(&c) ? -EIO : 0;
			break;
		case SESS_OP_EXIT:
			return status;
		}
		if (r.status)
			status = 1;
		if (reply(rep_fd, &r))
			return 1;
	}
	sess_client_down(&c);
	return status;
}
