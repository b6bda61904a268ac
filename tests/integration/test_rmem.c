/* SPDX-License-Identifier: MIT */
/*
 * Remote memory for users (issue 16, first slice), end to end over the
 * transport RMEM_KIND (loop and udp): a server Rpc and two client Rpcs (A
 * and B) on one Nexus. One side exposes memory to its session
 * (urpc_mem_expose), the other READs and WRITEs it (urpc_rdma_read/_write)
 * at odd offsets and sizes, contents checked byte for byte; access flags,
 * slices, revocation, the wrong session, forged keys, and an Rpc destroyed
 * with exposures and an operation in flight.
 */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "rpc/engine.h"
#include "rpc/rmem.h"
#include "rpc/rpc.h"
#include "util/seam.h"
#include "verbs_skip.h"

#ifndef RMEM_KIND
#error "build with -DRMEM_KIND=URPC_TRANSPORT_<KIND> -DRMEM_NAME=<suite>"
#endif

#define T_SMALL 1
#define WAIT_NS 30000000000ull
#define REGION ((4u << 20) + 13) /* the exposed region: a few MiB, odd */

static struct {
	struct urpc_nexus *nx;
	struct urpc_nexus *nx_b; /* xdp: B's own Nexus, on the third interface's address */
	struct urpc_rpc *srv, *a, *b;
	int sa, sb;   /* client sessions */
	int srv_sa;   /* the server's number of A's session */
	uint8_t *mem; /* the server's region */
} W;

static uint8_t pat(size_t i, unsigned salt)
{
	return (uint8_t)(((i + salt) * 2654435761u) >> 13);
}

static void small_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *r = urpc_req_resp_msgbuf(h);

	(void)arg;
	memset(r->buf, 0x5a, 8);
	urpc_msgbuf_resize(r, 8);
	urpc_resp_enqueue(h, r);
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.srv), 0);
	if (W.a)
		cr_assert_eq(urpc_rpc_run_event_loop_once(W.a), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(W.b), 0);
}

struct op {
	int status;
	int runs;
};

static void op_cont(struct urpc_rpc *rpc, void *tag, int status)
{
	struct op *o = tag;

	(void)rpc;
	o->status = status;
	o->runs++;
}

static bool call_done;

static void call_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	(void)rpc, (void)tag, (void)resp;
	cr_assert_eq(status, 0);
	call_done = true;
}

/* One small request on @rpc's session @sess: the session is up. */
static void call(struct urpc_rpc *rpc, int sess)
{
	struct urpc_msgbuf req, resp;
	uint64_t end = urpc__now_ns() + WAIT_NS;

	cr_assert_eq(urpc_msgbuf_alloc(rpc, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(rpc, 64, &resp), 0);
	call_done = false;
	cr_assert_eq(urpc_req_enqueue(rpc, sess, T_SMALL, &req, &resp, call_cont, NULL, 0), 0);
	while (!call_done) {
		cr_assert_lt(urpc__now_ns(), end, "a request did not complete");
		pump();
	}
	cr_assert_eq(urpc_msgbuf_free(rpc, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(rpc, &resp), 0);
}

static void world_up(void)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	struct urpc_session_info info;
	char hp[64];
	size_t i;

	verbs_skip_without_port(RMEM_KIND);
	/*
	 * xdp: B goes on a third interface, with a Nexus on its address so
	 * that its connect comes from its endpoint's host: two client hosts.
	 * (The endpoints of one process may also share an interface: test_xdp
	 * and test_e2e's nested case do.)
	 */
	if (RMEM_KIND == URPC_TRANSPORT_XDP &&
	    (!getenv("URPC_TEST_DEVICE_C") || !getenv("URPC_TEST_HOST_C")))
		cr_skip_test("xdp: a second client needs URPC_TEST_DEVICE_C and URPC_TEST_HOST_C "
			     "(tests/xdp-stage.sh sets them)");
	memset(&W, 0, sizeof(W));
	urpc_nexus_opts_init(&no);
	no.host = test_host();
	cr_assert_eq(urpc_nexus_create(&no, &W.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(W.nx, T_SMALL, small_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = RMEM_KIND;
	o.idle_block_us = 0;
	o.peer_timeout_ms = 10000;
	o.device = getenv("URPC_TEST_DEVICE_B");
	cr_assert_eq(urpc_rpc_create(W.nx, 1, &o, &W.srv), 0);
	o.device = getenv("URPC_TEST_DEVICE_A");
	cr_assert_eq(urpc_rpc_create(W.nx, 2, &o, &W.a), 0);
	if (RMEM_KIND == URPC_TRANSPORT_XDP) {
		no.host = getenv("URPC_TEST_HOST_C");
		cr_assert_eq(urpc_nexus_create(&no, &W.nx_b), 0);
		o.device = getenv("URPC_TEST_DEVICE_C");
		cr_assert_eq(urpc_rpc_create(W.nx_b, 3, &o, &W.b), 0);
	} else {
		cr_assert_eq(urpc_rpc_create(W.nx, 3, &o, &W.b), 0);
	}
	snprintf(hp, sizeof(hp), "%s:%u", test_host(), urpc_nexus_port(W.nx));
	cr_assert_eq(urpc_session_connect(W.a, hp, 1, &W.sa), 0);
	cr_assert_eq(urpc_session_connect(W.b, hp, 1, &W.sb), 0);
	call(W.a, W.sa);
	call(W.b, W.sb);
	cr_assert_eq(urpc__rpc_session_info(W.a, W.sa, &info), 0);
	W.srv_sa = (int)info.remote_num;
	W.mem = malloc(REGION);
	cr_assert_not_null(W.mem);
	for (i = 0; i < REGION; i++)
		W.mem[i] = pat(i, 0);
}

static void world_down(void)
{
	if (W.a)
		cr_assert_eq(urpc_rpc_destroy(W.a), 0);
	cr_assert_eq(urpc_rpc_destroy(W.b), 0);
	cr_assert_eq(urpc_rpc_destroy(W.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(W.nx), 0);
	if (W.nx_b)
		cr_assert_eq(urpc_nexus_destroy(W.nx_b), 0);
	free(W.mem);
}

TestSuite(RMEM_NAME, .init = world_up, .fini = world_down, .timeout = 120);

/* Wait for @o's continuation; its status. It must run exactly once. */
static int op_wait(struct op *o)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;

	while (!o->runs) {
		cr_assert_lt(urpc__now_ns(), end, "a one-sided operation did not complete");
		pump();
	}
	pump();
	cr_assert_eq(o->runs, 1, "the continuation ran %d times", o->runs);
	return o->status;
}

/* A's READ (or WRITE) of @len bytes at @roff of @rb, into (from) @local at @loff. */
static int a_op(bool write, struct urpc_msgbuf *local, size_t loff, const struct urpc_rbuf *rb,
		uint64_t roff, size_t len)
{
	struct op o = {0};
	int ret = write ? urpc_rdma_write(W.a, W.sa, local, loff, rb, roff, len, op_cont, &o, 0)
			: urpc_rdma_read(W.a, W.sa, local, loff, rb, roff, len, op_cont, &o, 0);

	cr_assert_eq(ret, 0, "post: %s", urpc_strerror(ret));
	return op_wait(&o);
}

static struct urpc_rbuf expose(unsigned access)
{
	struct urpc_rbuf rb;

	cr_assert_eq(urpc_mem_expose(W.srv, W.srv_sa, W.mem, REGION, access, &rb), 0);
	cr_assert_eq(le16toh(rb.version), URPC_RBUF_VERSION);
	cr_assert_eq(le16toh(rb.size), sizeof(rb));
	cr_assert_eq(le64toh(rb.len), REGION);
	cr_assert_eq(le64toh(rb.addr), (uint64_t)(uintptr_t)W.mem);
	return rb;
}

/*
 * Many operations on one long-lived exposure whose owner does nothing but
 * run its event loop: on verbs each successful operation ends with a
 * release notice that uses one of the owner's receives, which must come
 * back (it stalled after 64 before the owner reaped them).
 */
Test(RMEM_NAME, many_operations_on_one_exposure)
{
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	struct urpc_msgbuf local;
	unsigned i;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, 64, &local), 0);
	for (i = 0; i < 300; i++) {
		memset(local.buf, (int)(i & 0xff), 8);
		cr_assert_eq(a_op(true, &local, 0, &rb, 8 * i, 8), 0, "write %u", i);
		cr_assert_eq(a_op(false, &local, 8, &rb, 8 * i, 8), 0, "read %u", i);
		cr_assert_eq(local.buf[8], (uint8_t)i);
		cr_assert_eq(W.mem[8 * i + 7], (uint8_t)i);
	}
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
}

Test(RMEM_NAME, read_write_odd_sizes)
{
	static const struct {
		size_t loff, roff, len;
	} c[] = {
		{0, 0, 1},	   {3, 5, 1},	       {1, 4095, 7},
		{17, 65531, 4097}, {5, 3, 65537},      {11, 1000003, (1u << 20) + 3},
		{0, 0, REGION},	   {7, REGION - 9, 9}, {2, 13, (3u << 20) + 1},
	};
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES);
	struct urpc_msgbuf local;
	size_t k, i;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, REGION + 64, &local), 0);
	for (k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		unsigned salt = (unsigned)k + 1;

		/* WRITE: the bytes land at the owner exactly, nothing around them moves. */
		for (i = 0; i < c[k].len; i++)
			local.buf[c[k].loff + i] = pat(i, salt);
		cr_assert_eq(a_op(true, &local, c[k].loff, &rb, c[k].roff, c[k].len), 0, "case %zu",
			     k);
		for (i = 0; i < c[k].len; i++)
			cr_assert_eq(W.mem[c[k].roff + i], pat(i, salt), "case %zu byte %zu", k, i);
		if (c[k].roff)
			cr_assert_eq(W.mem[c[k].roff - 1], pat(c[k].roff - 1, 0));
		if (c[k].roff + c[k].len < REGION)
			cr_assert_eq(W.mem[c[k].roff + c[k].len], pat(c[k].roff + c[k].len, 0));
		/* READ it back elsewhere in the local buffer. */
		memset(local.buf, 0, REGION + 64);
		cr_assert_eq(a_op(false, &local, c[k].loff + 1, &rb, c[k].roff, c[k].len), 0);
		for (i = 0; i < c[k].len; i++)
			cr_assert_eq(local.buf[c[k].loff + 1 + i], pat(i, salt),
				     "case %zu byte %zu", k, i);
		cr_assert_eq(local.buf[c[k].loff], 0);
		/* Put the owner's bytes back for the next case. */
		for (i = 0; i < c[k].len; i++)
			W.mem[c[k].roff + i] = pat(c[k].roff + i, 0);
	}
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(urpc__rmem_live(W.srv), 0);
}

/* The other way round: a client exposes, the server's side READs it. */
Test(RMEM_NAME, server_reads_client)
{
	static uint8_t cmem[100003];
	struct urpc_msgbuf local;
	struct urpc_rbuf rb;
	struct op o = {0};
	size_t i;

	for (i = 0; i < sizeof(cmem); i++)
		cmem[i] = pat(i, 9);
	cr_assert_eq(urpc_mem_expose(W.a, W.sa, cmem, sizeof(cmem), URPC_MEM_PEER_READS, &rb), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.srv, sizeof(cmem), &local), 0);
	cr_assert_eq(urpc_rdma_read(W.srv, W.srv_sa, &local, 0, &rb, 1, sizeof(cmem) - 1, op_cont,
				    &o, 0),
		     0);
	/* Lent until the continuation runs. */
	cr_assert_eq(urpc_msgbuf_free(W.srv, &local), -EBUSY);
	cr_assert_eq(op_wait(&o), 0);
	for (i = 0; i + 1 < sizeof(cmem); i++)
		cr_assert_eq(local.buf[i], pat(i + 1, 9), "byte %zu", i);
	cr_assert_eq(urpc_msgbuf_free(W.srv, &local), 0);
	cr_assert_eq(urpc_mem_revoke(W.a, &rb), 0);
}

Test(RMEM_NAME, access_enforced)
{
	struct urpc_rbuf ro = expose(URPC_MEM_PEER_READS), wo, forged;
	struct urpc_msgbuf local;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, 4096, &local), 0);
	memset(local.buf, 0xee, 4096);
	cr_assert_eq(a_op(false, &local, 0, &ro, 100, 4096), 0);
	cr_assert_eq(a_op(true, &local, 0, &ro, 100, 10), -EACCES);
	/* Claiming WRITE in the rbuf changes nothing: the owner's grant decides. */
	forged = ro;
	forged.access |= URPC_MEM_PEER_WRITES;
	cr_assert_eq(a_op(true, &local, 0, &forged, 100, 10), -EACCES);
	cr_assert_eq(W.mem[100], pat(100, 0), "a refused WRITE changed the owner's memory");
	cr_assert_eq(urpc_mem_revoke(W.srv, &ro), 0);

	wo = expose(URPC_MEM_PEER_WRITES);
	memset(local.buf, 0xee, 4096);
	cr_assert_eq(a_op(false, &local, 0, &wo, 0, 10), -EACCES);
	cr_assert_eq(a_op(true, &local, 0, &wo, 7, 3), 0);
	cr_assert_eq(W.mem[7], 0xee);
	cr_assert_eq(W.mem[10], pat(10, 0));
	cr_assert_eq(urpc_mem_revoke(W.srv, &wo), 0);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
}

Test(RMEM_NAME, slices)
{
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS), sl, sl2;
	struct urpc_msgbuf local;
	size_t i;

	cr_assert_eq(urpc_rbuf_slice(&rb, 1001, 5003, &sl), 0);
	cr_assert_eq(le64toh(sl.len), 5003);
	cr_assert_eq(urpc_rbuf_slice(&sl, 3, 5000, &sl2), 0);
	cr_assert_eq(urpc_rbuf_slice(&sl, 3, 5001, &sl2), -EINVAL);
	cr_assert_eq(urpc_rbuf_slice(&rb, REGION, 1, &sl2), -EINVAL);
	cr_assert_eq(urpc_rbuf_slice(&rb, 0, 0, &sl2), -EINVAL);
	cr_assert_eq(urpc_rbuf_slice(&rb, UINT64_MAX, 2, &sl2), -EINVAL);
	cr_assert_eq(urpc_msgbuf_alloc(W.a, 8192, &local), 0);
	cr_assert_eq(a_op(false, &local, 0, &sl2, 0, 5000), 0);
	for (i = 0; i < 5000; i++)
		cr_assert_eq(local.buf[i], pat(1004 + i, 0), "byte %zu", i);
	/* Past the slice's end: refused before anything is sent. */
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &sl2, 1, 5000, op_cont, NULL, 0),
		     -EINVAL);
	/* A slice is not an exposure of its own. */
	cr_assert_eq(urpc_mem_revoke(W.srv, &sl), -EINVAL);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(a_op(false, &local, 0, &sl2, 0, 10), -EACCES);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
}

Test(RMEM_NAME, revoke)
{
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES), again;
	struct urpc_msgbuf local;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, 64, &local), 0);
	cr_assert_eq(a_op(false, &local, 0, &rb, 0, 64), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), -EINVAL);
	cr_assert_eq(a_op(false, &local, 0, &rb, 0, 64), -EACCES);
	cr_assert_eq(a_op(true, &local, 0, &rb, 0, 64), -EACCES);
	/* The same memory anew: a new key and generation; the old rbuf stays dead. */
	again = expose(URPC_MEM_PEER_READS);
	cr_assert_neq(le64toh(again.key), le64toh(rb.key));
	cr_assert_gt(le64toh(again.gen), le64toh(rb.gen));
	cr_assert_eq(a_op(false, &local, 0, &rb, 0, 64), -EACCES);
	cr_assert_eq(a_op(false, &local, 0, &again, 0, 64), 0);
	cr_assert_eq(urpc_mem_revoke(W.srv, &again), 0);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
}

Test(RMEM_NAME, bad_input)
{
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS), bad;
	struct urpc_msgbuf local, other;
	struct op o = {0};
	char x;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, 64, &local), 0);
	cr_assert_eq(urpc_msgbuf_alloc(W.b, 64, &other), 0);
	/* B's session is not the one the rbuf was exposed on. */
	cr_assert_eq(urpc_rdma_read(W.b, W.sb, &other, 0, &rb, 0, 8, op_cont, &o, 0), -EINVAL);
	/* A forged owner on A's own session. */
	bad = rb;
	bad.owner_id ^= htole64(1);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &bad, 0, 8, op_cont, &o, 0), -EINVAL);
	bad = rb;
	bad.version = htole16(2);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &bad, 0, 8, op_cont, &o, 0), -EINVAL);
	bad = rb;
	bad.size = htole16(48);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &bad, 0, 8, op_cont, &o, 0), -EINVAL);
	bad = rb;
	bad.access = 0;
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &bad, 0, 8, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &rb, 0, 0, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 60, &rb, 0, 8, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, SIZE_MAX, &rb, 0, 8, op_cont, &o, 0),
		     -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &rb, REGION - 7, 8, op_cont, &o, 0),
		     -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &rb, UINT64_MAX, 8, op_cont, &o, 0),
		     -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &rb, 0, 8, NULL, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, NULL, 0, &rb, 0, 8, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_read(W.a, 999, &local, 0, &rb, 0, 8, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(urpc_rdma_write(W.a, -1, &local, 0, &rb, 0, 8, op_cont, &o, 0), -EINVAL);
	cr_assert_eq(o.runs, 0);
	cr_assert_eq(urpc_mem_expose(W.srv, W.srv_sa, &x, 0, URPC_MEM_PEER_READS, &bad), -EINVAL);
	cr_assert_eq(urpc_mem_expose(W.srv, W.srv_sa, &x, 1, 0, &bad), -EINVAL);
	cr_assert_eq(urpc_mem_expose(W.srv, W.srv_sa, &x, 1, 4, &bad), -EINVAL);
	cr_assert_eq(urpc_mem_expose(W.srv, 12345, &x, 1, URPC_MEM_PEER_READS, &bad), -EINVAL);
	cr_assert_eq(urpc_mem_expose(W.srv, W.srv_sa, NULL, 1, URPC_MEM_PEER_READS, &bad), -EINVAL);
	cr_assert_eq(urpc_mem_revoke(W.a, &rb), -EINVAL, "another Rpc's exposure");
	cr_assert_eq(urpc__rmem_live(W.srv), 1);
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
	cr_assert_eq(urpc_msgbuf_free(W.b, &other), 0);
}

Test(RMEM_NAME, forged_keys)
{
	struct urpc_rbuf rb = expose(URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES), bad;
	struct urpc_msgbuf local;

	cr_assert_eq(urpc_msgbuf_alloc(W.a, 64, &local), 0);
	memset(local.buf, 0xee, 64);
	/*
	 * The key one bit away: refused. On verbs only its low half, the
	 * rkey, reaches the device (the high half names the grant in the
	 * reader's release notice), so the bit is flipped there.
	 */
	bad = rb;
	bad.key ^= htole64(1ull << (RMEM_KIND == URPC_TRANSPORT_VERBS ? 1 : 40));
	cr_assert_eq(a_op(false, &local, 0, &bad, 0, 8), -EACCES);
	cr_assert_eq(a_op(true, &local, 0, &bad, 0, 8), -EACCES);
	/* A key that names nothing this session was granted: refused too. */
	bad = rb;
	bad.key = htole64(0x5eed000012345ull);
	cr_assert_eq(a_op(false, &local, 0, &bad, 0, 8), -EACCES);
	cr_assert_eq(a_op(true, &local, 0, &bad, 0, 8), -EACCES);
	cr_assert_eq(W.mem[0], pat(0, 0));
	/* The right key still works afterwards. */
	cr_assert_eq(a_op(false, &local, 0, &rb, 0, 8), 0);
	cr_assert_eq(local.buf[0], pat(0, 0));
	cr_assert_eq(urpc_mem_revoke(W.srv, &rb), 0);
	cr_assert_eq(urpc_msgbuf_free(W.a, &local), 0);
}

/*
 * An Rpc destroyed with exposures and an operation of its own in flight:
 * the exposures go with it (ASan sees no leak), the continuation runs once.
 */
Test(RMEM_NAME, destroy_with_exposures)
{
	static uint8_t cmem[3][4096];
	struct urpc_rbuf rb[3], srb = expose(URPC_MEM_PEER_READS);
	struct urpc_msgbuf local;
	struct op o = {0};
	int k;

	for (k = 0; k < 3; k++)
		cr_assert_eq(urpc_mem_expose(W.a, W.sa, cmem[k], sizeof(cmem[k]),
					     URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb[k]),
			     0);
	cr_assert_eq(urpc__rmem_live(W.a), 3);
	cr_assert_eq(urpc_msgbuf_alloc(W.a, 1u << 20, &local), 0);
	cr_assert_eq(urpc_rdma_read(W.a, W.sa, &local, 0, &srb, 0, 1u << 20, op_cont, &o, 0), 0);
	/* The local buffer is the library's: destroy takes it back with the Rpc. */
	cr_assert_eq(urpc_rpc_destroy(W.a), 0);
	W.a = NULL;
	cr_assert_eq(o.runs, 1);
	cr_assert(o.status == 0 || o.status == -ECONNRESET, "status %d", o.status);
	cr_assert_eq(urpc_mem_revoke(W.srv, &srb), 0);
}
