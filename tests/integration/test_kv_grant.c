/* SPDX-License-Identifier: MIT */
/*
 * urpc-kv-server under the one-sided attacks of issue 11, on udp: the
 * server runs as a process; this test is an ordinary client of it (a
 * session of its own) that keeps the descriptor of a large GET answer and
 * tries it again, past the value's bytes, for writing, and after the
 * request; then sends one-sided datagrams built from the wire format
 * (transport/udp_int.h), on its own session's socket and on a socket of
 * another address. The server must refuse or drop every one of them and
 * keep serving: a large value reads back intact, and urpc-kv-client's
 * verify run with large values finds no mismatch.
 */
#define _GNU_SOURCE /* struct mmsghdr in transport/udp_int.h */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "../apps/kv/kv_proto.h"
#include "rpc/engine.h"
#include "rpc/rpc.h"
#include "transport/transport.h"
#include "transport/udp_int.h"
#include "udp_craft.h"
#include "util/seam.h"

#include "kv_proc.h"

#ifndef KV_SERVER
#error "build with -DKV_SERVER=path -DKV_CLIENT=path"
#endif

#define WAIT_NS 30000000000ull
/*
 * Every side's peer timeout (the server's and the verify client's
 * --peer-timeout, this test's Rpc): at the default 500 ms, a process that
 * a loaded host does not run for about 0.4 s is failed by its peer and
 * the sessions reset; 10 s, as kv_smoke's healthy runs.
 */
#define PEER_TIMEOUT_MS 10000u
#define VAL_LEN 300000u
#define PROBE_WR 4242

static pid_t server;
static char addr[64];

static void server_up(const char *out)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "%s --port 0 --threads 1 --transport udp --peer-timeout %u > %s 2>&1", KV_SERVER,
		 PEER_TIMEOUT_MS, out);
	server = kv_server_spawn(cmd, out, addr, sizeof(addr));
}

static struct {
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	int sess;
	bool busy;
	int status;
} C;

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	C.status = status;
	C.busy = false;
}

/* One KV request: @req_len bytes of @req; the answer lands in @resp. */
static int kv_call(uint8_t type, struct urpc_msgbuf *req, struct urpc_msgbuf *resp)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;

	C.busy = true;
	cr_assert_eq(urpc_req_enqueue(C.rpc, C.sess, type, req, resp, cont, NULL, 0), 0);
	while (C.busy) {
		cr_assert_lt(urpc__now_ns(), end, "a KV request did not complete");
		cr_assert_eq(urpc_rpc_run_event_loop_once(C.rpc), 0);
	}
	return C.status;
}

static uint8_t val(size_t i)
{
	return (uint8_t)((i * 2654435761u) >> 11);
}

static void kv_put_big(void)
{
	struct urpc_msgbuf req, resp;
	struct kv_resp_hdr h;
	size_t i, n = sizeof(struct kv_req_hdr) + 3 + VAL_LEN;

	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, n, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 64, &resp), 0);
	kv_put_req_hdr(req.buf, 3, 1, VAL_LEN);
	memcpy(req.buf + sizeof(struct kv_req_hdr), "big", 3);
	for (i = 0; i < VAL_LEN; i++)
		req.buf[sizeof(struct kv_req_hdr) + 3 + i] = val(i);
	cr_assert_eq(kv_call(KV_REQ_PUT, &req, &resp), 0);
	kv_get_resp_hdr(resp.buf, &h);
	cr_assert_eq(h.status, KV_OK, "PUT: %s", kv_status_str(h.status));
	urpc_msgbuf_free(C.rpc, &req);
	urpc_msgbuf_free(C.rpc, &resp);
}

/* GET "big"; checks the value when @check. */
static void kv_get_big(bool check)
{
	struct urpc_msgbuf req, resp;
	struct kv_resp_hdr h;
	size_t i;
	int st;

	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, 16, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, VAL_LEN + 64, &resp), 0);
	kv_put_req_hdr(req.buf, 3, 1, 0);
	memcpy(req.buf + sizeof(struct kv_req_hdr), "big", 3);
	urpc_msgbuf_resize(&req, sizeof(struct kv_req_hdr) + 3);
	st = kv_call(KV_REQ_GET, &req, &resp);
	cr_assert_eq(st, 0, "GET: %s", urpc_strerror(st));
	kv_get_resp_hdr(resp.buf, &h);
	cr_assert_eq(h.status, KV_OK, "GET: %s", kv_status_str(h.status));
	cr_assert_eq(h.val_len, VAL_LEN);
	for (i = 0; check && i < VAL_LEN; i++)
		cr_assert_eq(resp.buf[sizeof(h) + i], val(i), "value byte %zu", i);
	urpc_msgbuf_free(C.rpc, &req);
	urpc_msgbuf_free(C.rpc, &resp);
}

/* Our transport's one-sided READ (or WRITE) through the session's peer handle. */
static int probe(bool write, uint64_t raddr, uint64_t key, size_t len)
{
	struct urpc_tp *tp = urpc__rpc_transport(C.rpc);
	struct urpc_session *s = urpc__rpc_session(C.rpc, C.sess);
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct urpc_msgbuf local;
	struct urpc_tp_comp c;

	cr_assert_eq(urpc_msgbuf_alloc(C.rpc, len, &local), 0);
	memset(local.buf, 0xee, len);
	tp->one_sided_timeout_ns = 200000000ull;
	cr_assert_eq(write ? tp->ops->post_write(tp, s->peer, local.buf, urpc__mb_mr(&local), raddr,
						 key, len, PROBE_WR)
			   : tp->ops->post_read(tp, s->peer, local.buf, urpc__mb_mr(&local), raddr,
						key, len, PROBE_WR),
		     0);
	while (tp->ops->poll_completions(tp, &c, 1) != 1)
		cr_assert_lt(urpc__now_ns(), end, "a probe never completed");
	urpc_msgbuf_free(C.rpc, &local);
	return c.status;
}

Test(kv_grant, the_server_refuses_kept_and_crafted_one_sided_requests_and_keeps_serving,
     .timeout = 300)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	struct urpc_session *s;
	struct sockaddr_in to;
	const struct udp_op *kept = NULL;
	uint64_t raddr, rlen, rkey;
	char srv_out[64], cli_out[64], cmd[1024];
	unsigned i;
	int fd, st;

	snprintf(srv_out, sizeof(srv_out), "/tmp/kv-grant-server.%d", getpid());
	snprintf(cli_out, sizeof(cli_out), "/tmp/kv-grant-client.%d", getpid());
	server_up(srv_out);
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &C.nx), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_UDP;
	o.idle_block_us = 0;
	o.peer_timeout_ms = PEER_TIMEOUT_MS;
	cr_assert_eq(urpc_rpc_create(C.nx, 0, &o, &C.rpc), 0);
	cr_assert_eq(urpc_session_connect(C.rpc, addr, 0, &C.sess), 0);
	kv_put_big();
	kv_get_big(true);

	/* The descriptor of that answer, as our transport READ it. */
	{
		struct udp_tp *u = to_udp(urpc__rpc_transport(C.rpc));

		for (i = 0; i < UDP_OS_OPS; i++)
			if (u->ops[i].kind == URPC_TP_OP_READ &&
			    u->ops[i].len == sizeof(struct kv_resp_hdr) + VAL_LEN)
				kept = &u->ops[i];
		cr_assert_not_null(kept, "no READ of the answer");
		raddr = kept->raddr;
		rlen = kept->len;
		rkey = kept->rkey;
	}
	cr_assert_eq(probe(false, raddr + rlen, rkey, 1), -EACCES, "one byte past the answer");
	cr_assert_eq(probe(false, raddr - 1, rkey, 1), -EACCES, "one byte before it");
	cr_assert_eq(probe(true, raddr, rkey, 16), -EACCES, "a WRITE into it");
	cr_assert_eq(probe(true, raddr + rlen, rkey, 4096), -EACCES, "a WRITE past it");
	kv_get_big(false); /* the next request on the slot: the old answer is over */
	cr_assert_eq(probe(false, raddr, rkey, rlen), -EACCES, "the kept descriptor, later");

	/* Datagrams by hand: from our own session's socket with its token ... */
	s = urpc__rpc_session(C.rpc, C.sess);
	to = s->peer->sa;
	fd = to_udp(urpc__rpc_transport(C.rpc))->fd;
	for (i = 0; i < 256; i++)
		udp_send_os(fd, &to, 9, true, raddr - 65536 + 512 * i, 16,
			    rkey + ((uint64_t)i << 32), s->token);
	/* ... and from another address, with made-up keys and tokens. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(fd, 0);
	for (i = 0; i < 256; i++) {
		udp_send_os(fd, &to, 9, i & 1, raddr - 65536 + 512 * i, 4096, rkey + i, s->token);
		udp_send_os(fd, &to, 9, true, raddr + 16 * i, 16, (uint64_t)i << 32 | (i & 63), i);
	}
	close(fd);

	/* The server lives and serves: our value is intact, and a verify run passes. */
	kv_get_big(true);
	cr_assert_neq(waitpid(server, &st, WNOHANG), server, "the server died");
	cr_assert_eq(urpc_session_disconnect(C.rpc, C.sess), 0);
	cr_assert_eq(urpc_rpc_run_event_loop(C.rpc, 100), 0);
	cr_assert_eq(urpc_rpc_destroy(C.rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(C.nx), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s --transport udp --server %s --peer-timeout %u --verify -j 1 -D 1 -w A -k 50 "
		 "-v 300000 > %s 2>&1",
		 KV_CLIENT, addr, PEER_TIMEOUT_MS, cli_out);
	st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the verify run failed (see %s)", cli_out);
	{
		char line[1024];
		bool zero = false;
		FILE *f = fopen(cli_out, "r");

		while (f && fgets(line, sizeof(line), f))
			zero |= strstr(line, " 0 mismatches") != NULL;
		if (f)
			fclose(f);
		cr_assert(zero, "no zero-mismatch line (see %s)", cli_out);
	}
	kv_server_stop(server, srv_out);
	unlink(srv_out);
	unlink(cli_out);
}
