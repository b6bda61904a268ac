/* SPDX-License-Identifier: MIT */
/*
 * GPU memory payloads end to end: a client sends a request from GPU memory
 * and receives the response into GPU memory; a handler copies a request
 * into GPU memory. Built once per transport (GPU_KIND / GPU_NAME).
 *
 * The driver is the one URPC_CUDA_LIB names: on a machine with an NVIDIA
 * GPU run it with URPC_CUDA_LIB=libcuda.so.1 for the real thing; otherwise
 * the test sets it to the fake driver (tests/unit/mem/fake_libcuda.c, whose
 * "device memory" is host memory it tracks), which exercises every staging
 * step and, on verbs, the dma-buf attempt and its fall-back. The test says
 * which driver ran. The fake can also fail copies on demand
 * (fake_cuda_fail_copies()): the cases that need it skip on a real driver.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "mem/cuda.h"
#include "rpc/rpc.h"
#include "transport/verbs_dev.h"
#include "util/log.h"
#include "verbs_skip.h"

#ifndef GPU_KIND
#error "build with -DGPU_KIND=URPC_TRANSPORT_<KIND> -DGPU_NAME=<suite> -DFAKE_CUDA=path"
#endif

#define T_ECHO 1
#define T_SINK 2
#define T_GPU_RESP 3 /* answers with a view of device memory (G.resp_dev) */
#define RESP_DEV_LEN 300000
#define WAIT_NS 60000000000ull

struct drv {
	void *h;
	int (*mem_alloc)(unsigned long long *dptr, size_t size);
	int (*mem_free)(unsigned long long dptr);
	int (*primary_retain)(void **pctx, int dev);
	int (*set_current)(void *ctx);
	/* The fake driver's switches; NULL on a real one. */
	void (*fail_copies)(int dtoh, int htod);
	int (*copy_failures)(void);
	int (*live_pinned)(void);
};

static struct {
	struct drv d;
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	void *sink; /* device memory the T_SINK handler copies requests into */
	size_t sink_len;
	void *resp_dev; /* device memory T_GPU_RESP answers with */
	int pinned0;	/* the fake's pinned allocations before the test's */
	unsigned handler_errors;
} G;

static void sym(void *h, const char *name, void *slot)
{
	void *p = dlsym(h, name);

	cr_assert_not_null(p, "%s: %s", name, dlerror());
	memcpy(slot, &p, sizeof(p));
}

/* Load the driver through urpc, then reach it as an application would. */
static void driver_up(void)
{
	const char *lib = getenv("URPC_CUDA_LIB");
	int ret;

	if (!lib || !*lib) {
		lib = FAKE_CUDA;
		cr_assert_eq(setenv("URPC_CUDA_LIB", lib, 1), 0);
	}
	ret = urpc__cuda_load();
	if (ret)
		cr_skip_test("no CUDA driver: %s", urpc__cuda_why());
	cr_log_info("CUDA driver: %s", lib);
	G.d.h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	cr_assert_not_null(G.d.h);
	sym(G.d.h, "cuMemAlloc_v2", &G.d.mem_alloc);
	sym(G.d.h, "cuMemFree_v2", &G.d.mem_free);
	sym(G.d.h, "cuDevicePrimaryCtxRetain", &G.d.primary_retain);
	sym(G.d.h, "cuCtxSetCurrent", &G.d.set_current);
	G.d.fail_copies = NULL;
	if (dlsym(G.d.h, "fake_cuda_fail_copies")) {
		sym(G.d.h, "fake_cuda_fail_copies", &G.d.fail_copies);
		sym(G.d.h, "fake_cuda_copy_failures", &G.d.copy_failures);
		sym(G.d.h, "fake_cuda_live_pinned", &G.d.live_pinned);
	}
}

static void *dev_alloc(size_t len)
{
	unsigned long long p = 0;
	void *ctx = NULL;

	cr_assert_eq(G.d.primary_retain(&ctx, 0), 0);
	cr_assert_eq(G.d.set_current(ctx), 0);
	cr_assert_eq(G.d.mem_alloc(&p, len), 0);
	return (void *)(uintptr_t)p;
}

static void dev_free(void *p)
{
	cr_assert_eq(G.d.mem_free((unsigned long long)(uintptr_t)p), 0);
}

static uint8_t pat(size_t i, unsigned seed)
{
	return (uint8_t)((i * 2654435761u + seed) >> 9);
}

static void echo_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_rpc *rpc = urpc_req_rpc(h);
	struct urpc_msgbuf own, *resp;
	const uint8_t *d;
	size_t len, i;

	d = urpc_req_data(h, &len);
	if (len <= urpc_rpc_max_msg_size(rpc)) {
		resp = urpc_req_resp_msgbuf(h);
	} else if (urpc_msgbuf_alloc(rpc, len, &own)) {
		G.handler_errors++;
		return;
	} else {
		resp = &own;
	}
	for (i = 0; i < len; i++)
		resp->buf[i] = d[i] ^ 0x5a;
	urpc_msgbuf_resize(resp, len);
	if (urpc_resp_enqueue(h, resp))
		G.handler_errors++;
}

/* Receives into GPU memory, answers with the byte count. */
static void sink_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	int n = urpc_req_copy_data(h, G.sink, G.sink_len);

	if (n < 0)
		G.handler_errors++;
	memcpy(resp->buf, &n, sizeof(n));
	urpc_msgbuf_resize(resp, sizeof(n));
	if (urpc_resp_enqueue(h, resp))
		G.handler_errors++;
}

/*
 * Answers with a view of G.resp_dev, as long as the request (8 bytes) says.
 * A view always goes back whole: copied into the slot's buffer when it fits
 * a datagram, else read by the client (from a staging copy off verbs).
 */
static void gpu_resp_handler(struct urpc_req_handle *h, void *arg)
{
	struct urpc_msgbuf view;
	const uint8_t *d;
	uint64_t len;
	size_t n;

	d = urpc_req_data(h, &n);
	cr_assert_eq(n, sizeof(len));
	memcpy(&len, d, sizeof(len));
	cr_assert_eq(urpc_msgbuf_register(urpc_req_rpc(h), G.resp_dev, (size_t)len,
					  URPC_MEM_PEER_READS, &view),
		     0);
	cr_assert_not_null(urpc__mb_gpu(&view), "device memory was not detected");
	if (urpc_resp_enqueue(h, &view) || view.buf)
		G.handler_errors++; /* the library takes the view, whatever the copy did */
}

static void pump(void)
{
	cr_assert_eq(urpc_rpc_run_event_loop_once(G.srv), 0);
	cr_assert_eq(urpc_rpc_run_event_loop_once(G.cli), 0);
}

struct call {
	int status;
	unsigned runs;
};

static void cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct call *c = tag;

	c->status = status;
	c->runs++;
}

static int run(uint8_t type, struct urpc_msgbuf *req, struct urpc_msgbuf *resp)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct call c = {0};

	cr_assert_eq(urpc_req_enqueue(G.cli, G.sess, type, req, resp, cont, &c, 0), 0);
	while (!c.runs) {
		cr_assert_lt(urpc__now_ns(), end, "request did not complete");
		pump();
	}
	cr_assert_eq(c.runs, 1);
	return c.status;
}

static void world_up(void)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	char hp[64];

	verbs_skip_without_port(GPU_KIND);
	driver_up();
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &G.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_ECHO, echo_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_SINK, sink_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_GPU_RESP, gpu_resp_handler, NULL), 0);
	urpc_rpc_opts_init(&o);
	o.transport = GPU_KIND;
	o.device = getenv("URPC_TEST_DEVICE_B");
	cr_assert_eq(urpc_rpc_create(G.nx, 1, &o, &G.srv), 0);
	o.device = getenv("URPC_TEST_DEVICE_A");
	cr_assert_eq(urpc_rpc_create(G.nx, 2, &o, &G.cli), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", urpc_nexus_port(G.nx));
	cr_assert_eq(urpc_session_connect(G.cli, hp, 1, &G.sess), 0);
}

static void world_down(void)
{
	cr_assert_eq(urpc_rpc_destroy(G.cli), 0);
	cr_assert_eq(urpc_rpc_destroy(G.srv), 0);
	cr_assert_eq(urpc_nexus_destroy(G.nx), 0);
	cr_assert_eq(G.handler_errors, 0);
}

/* GPU -> urpc -> GPU, large and small, contents checked on the host. */
static void gpu_echo(size_t len)
{
	uint8_t *host = malloc(len), *back = malloc(len);
	void *din = dev_alloc(len), *dout = dev_alloc(len);
	struct urpc_msgbuf req, resp;
	size_t i;

	cr_assert(host && back);
	for (i = 0; i < len; i++)
		host[i] = pat(i, (unsigned)len);
	cr_assert_eq(urpc__cuda_copy_to_device(din, host, len), 0);
	cr_assert_eq(urpc__cuda_copy_to_device(dout, back, 0), 0);
	cr_assert_eq(urpc_msgbuf_register(G.cli, din, len, URPC_MEM_PEER_READS, &req), 0);
	cr_assert_eq(urpc_msgbuf_register(G.cli, dout, len, 0, &resp), 0);
	cr_assert_not_null(urpc__mb_gpu(&req), "device memory was not detected");
	cr_assert_eq(run(T_ECHO, &req, &resp), 0);
	cr_assert_eq(resp.data_size, len);
	memset(back, 0, len);
	cr_assert_eq(urpc__cuda_copy_to_host(back, dout, len), 0);
	for (i = 0; i < len; i++)
		cr_assert_eq(back[i], (uint8_t)(host[i] ^ 0x5a), "%zu bytes: byte %zu", len, i);
	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &resp), 0);
	dev_free(din);
	dev_free(dout);
	free(host);
	free(back);
}

Test(GPU_NAME, request_and_response_in_gpu_memory, .timeout = 240)
{
	world_up();
	gpu_echo(100);
	gpu_echo(urpc_rpc_max_msg_size(G.cli) + 1);
	gpu_echo((2u << 20) + 13);
	world_down();
}

Test(GPU_NAME, handler_receives_into_gpu_memory, .timeout = 240)
{
	const size_t len = 300000;
	struct urpc_msgbuf req, resp;
	uint8_t *back = malloc(len);
	size_t i;
	int n;

	cr_assert_not_null(back);
	world_up();
	G.sink_len = len;
	G.sink = dev_alloc(len);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, len, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, 64, &resp), 0);
	for (i = 0; i < len; i++)
		req.buf[i] = pat(i, 3);
	cr_assert_eq(run(T_SINK, &req, &resp), 0);
	memcpy(&n, resp.buf, sizeof(n));
	cr_assert_eq(n, (int)len, "the handler copied %d bytes", n);
	cr_assert_eq(urpc__cuda_copy_to_host(back, G.sink, len), 0);
	cr_assert(memcmp(back, req.buf, len) == 0, "the GPU copy differs");
	cr_assert_eq(urpc_msgbuf_free(G.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &resp), 0);
	world_down();
	dev_free(G.sink);
	free(back);
}

struct viewed {
	unsigned runs;
	int status;
	size_t len;
	uint8_t first, last;
	bool null;
};

static void view_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct viewed *v = tag;

	v->runs++;
	v->status = status;
	v->len = resp->data_size;
	v->null = !resp->buf;
	if (resp->buf && resp->data_size) {
		v->first = resp->buf[0]; /* host memory: read directly */
		v->last = resp->buf[resp->data_size - 1];
	}
}

/*
 * A request from GPU memory whose response is read in place
 * (urpc_req_enqueue_view): the view is host memory; a response too large
 * for a datagram cannot be viewed (-EMSGSIZE, once).
 */
static void gpu_view(size_t len, int want)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	uint8_t *host = malloc(len);
	void *din = dev_alloc(len);
	struct viewed v = {0};
	struct urpc_msgbuf req;
	size_t i;

	cr_assert_not_null(host);
	for (i = 0; i < len; i++)
		host[i] = pat(i, 7);
	cr_assert_eq(urpc__cuda_copy_to_device(din, host, len), 0);
	cr_assert_eq(urpc_msgbuf_register(G.cli, din, len, URPC_MEM_PEER_READS, &req), 0);
	cr_assert_eq(urpc_req_enqueue_view(G.cli, G.sess, T_ECHO, &req, view_cont, &v, 0), 0);
	while (!v.runs) {
		cr_assert_lt(urpc__now_ns(), end, "request did not complete");
		pump();
	}
	cr_assert_eq(v.runs, 1);
	cr_assert_eq(v.status, want, "%zu bytes: %s", len, urpc_strerror(v.status));
	if (want) {
		cr_assert(v.null && !v.len, "an error's view points at bytes");
	} else {
		cr_assert_eq(v.len, len);
		cr_assert_eq(v.first, (uint8_t)(host[0] ^ 0x5a));
		cr_assert_eq(v.last, (uint8_t)(host[len - 1] ^ 0x5a));
	}
	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &req), 0);
	dev_free(din);
	free(host);
}

Test(GPU_NAME, a_gpu_request_s_response_is_read_in_place, .timeout = 240)
{
	world_up();
	gpu_view(100, 0);
	gpu_view(urpc_rpc_max_msg_size(G.cli), 0);
	gpu_view(urpc_rpc_max_msg_size(G.cli) + 1, -EMSGSIZE);
	world_down();
}

/* opts.cuda_device: the GPU's PCI address, read through the driver, places the port. */
Test(GPU_NAME, cuda_device_names_the_port_to_be_near)
{
	struct urpc_nexus_opts no;
	struct urpc_rpc_opts o;
	struct urpc_rpc *rpc;
	char pci[32], path[4096];
	int numa;

	if (GPU_KIND != URPC_TRANSPORT_LOOP)
		cr_skip_test("transport-independent: runs once, in gpu_loop");
	if (!urpc__verbs_built())
		cr_skip_test("this build has no verbs transport: the hint is never read");
	driver_up();
	unsetenv("URPC_TRANSPORT");
	unsetenv("URPC_DEVICE");
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &G.nx), 0);
	urpc_rpc_opts_init(&o);
	cr_assert_eq(o.cuda_device, -1, "no GPU preference by default");
	o.cuda_device = 1000; /* no such GPU */
	cr_assert_eq(urpc_rpc_create(G.nx, 1, &o, &rpc), -EINVAL);
	o.cuda_device = 0;
	cr_assert_eq(urpc__cuda_pci_bus_id(0, pci, sizeof(pci)), 0);
	if (urpc__verbs_pci_lookup(pci, path, sizeof(path), &numa) == 0) {
		cr_log_info("GPU 0 at %s exists here: the port choice ranks by it", pci);
		cr_assert_eq(urpc_rpc_create(G.nx, 1, &o, &rpc), 0);
		cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	} else {
		/* The fake GPU's address is no device on this machine: refused, not ignored. */
		cr_assert_eq(urpc_rpc_create(G.nx, 1, &o, &rpc), -EINVAL);
	}
	o.transport = URPC_TRANSPORT_UDP; /* no RDMA port to place: the hint is not used */
	cr_assert_eq(urpc_rpc_create(G.nx, 1, &o, &rpc), 0);
	cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(G.nx), 0);
}

static void need_failing_copies(void)
{
	if (!G.d.fail_copies)
		cr_skip_test("the driver cannot fail copies on demand (only the fake can)");
}

/*
 * The server's answer of @len bytes from GPU memory, whose copy out of the
 * GPU fails: the client gets -EIO, never status 0 with bytes the GPU did
 * not hold. The staging memory goes at once, and the slot is clean: the
 * next request on it gets the right bytes. The verdicts on the failed copy
 * are expectations, so that every size reports.
 */
static void gpu_resp_copy_fails(size_t len)
{
	static uint8_t want[RESP_DEV_LEN];
	struct urpc_msgbuf req, resp;
	uint64_t n = len;
	int failed, st;
	size_t i;

	cr_assert_leq(len, sizeof(want));
	for (i = 0; i < len; i++)
		want[i] = pat(i, 7);
	cr_assert_eq(urpc__cuda_copy_to_device(G.resp_dev, want, len), 0);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, sizeof(n), &req), 0);
	memcpy(req.buf, &n, sizeof(n));
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, len, &resp), 0);
	memset(resp.buf, 0xee, len);

	failed = G.d.copy_failures();
	G.d.fail_copies(1, 0); /* the server's copy out of the GPU: the only one */
	st = run(T_GPU_RESP, &req, &resp);
	G.d.fail_copies(0, 0);
	if (G.d.copy_failures() == failed) {
		/* dma-buf: the NIC reads the GPU itself, there was no copy to fail */
		cr_assert_eq(GPU_KIND, URPC_TRANSPORT_VERBS, "%zu bytes: no copy was tried", len);
		cr_assert_eq(st, 0);
	} else {
		cr_assert_eq(G.d.copy_failures(), failed + 1);
		cr_expect_eq(st, -EIO,
			     "%zu bytes: a failed copy out of GPU memory was answered with "
			     "status %d (%s)%s",
			     len, st, urpc_strerror(st),
			     !st && memcmp(resp.buf, want, len) ? ", with bytes the GPU never held"
								: "");
	}
	/* The slot's previous answer went with this request; this one is gone too. */
	cr_expect_eq(G.srv->views, 0, "%zu bytes: the server kept the failed response's view", len);
	cr_expect_eq(G.d.live_pinned(), G.pinned0, "%zu bytes: the staging copy was kept", len);

	/* The same slot again (slot 0: the lowest free one), and nothing fails. */
	memset(resp.buf, 0, len);
	cr_assert_eq(run(T_GPU_RESP, &req, &resp), 0, "%zu bytes: the slot is not clean", len);
	cr_assert_eq(resp.data_size, len);
	for (i = 0; i < len; i++)
		cr_assert_eq(resp.buf[i], want[i], "%zu bytes: byte %zu", len, i);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &resp), 0);
}

Test(GPU_NAME, failed_copy_of_a_gpu_response_is_an_error, .timeout = 240)
{
	world_up();
	need_failing_copies();
	G.pinned0 = G.d.live_pinned();
	G.resp_dev = dev_alloc(RESP_DEV_LEN);
	gpu_resp_copy_fails(100);			       /* copied into the slot's buffer */
	gpu_resp_copy_fails(urpc_rpc_max_msg_size(G.srv) + 1); /* staged, then read */
	gpu_resp_copy_fails(RESP_DEV_LEN);
	world_down();
	cr_assert_eq(G.d.live_pinned(), G.pinned0, "staging memory outlived the Rpcs");
	dev_free(G.resp_dev);
}

/*
 * The client's own copies fail: out of GPU memory at enqueue (the request
 * is refused with -EIO and its continuation never runs) and into GPU memory
 * with the answer (the continuation runs once, with -EIO). Then the same
 * buffers go through.
 */
static void client_copies_fail(size_t len)
{
	void *din = dev_alloc(len), *dout = dev_alloc(len);
	struct urpc_msgbuf req, resp;
	struct call c = {0};
	int failed, i;

	cr_assert_eq(urpc_msgbuf_register(G.cli, din, len, URPC_MEM_PEER_READS, &req), 0);
	cr_assert_eq(urpc_msgbuf_register(G.cli, dout, len, 0, &resp), 0);
	cr_assert_not_null(urpc__mb_gpu(&req), "device memory was not detected");

	if (urpc__mb_gpu(&req)->host) {
		failed = G.d.copy_failures();
		G.d.fail_copies(1, 0);
		cr_assert_eq(urpc_req_enqueue(G.cli, G.sess, T_ECHO, &req, &resp, cont, &c, 0),
			     -EIO, "%zu bytes: the request's staging copy failed", len);
		G.d.fail_copies(0, 0);
		cr_assert_eq(G.d.copy_failures(), failed + 1);
		for (i = 0; i < 100; i++)
			pump();
		cr_assert_eq(c.runs, 0, "a refused request's continuation ran");
	}

	failed = G.d.copy_failures();
	G.d.fail_copies(0, 1);
	c.status = run(T_ECHO, &req, &resp);
	G.d.fail_copies(0, 0);
	if (G.d.copy_failures() == failed)
		cr_assert_eq(c.status, 0, "%zu bytes: no copy, no error", len); /* dma-buf */
	else
		cr_assert_eq(c.status, -EIO,
			     "%zu bytes: a failed copy into GPU memory completed with %d", len,
			     c.status);

	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &resp), 0);
	dev_free(din);
	dev_free(dout);
	gpu_echo(len); /* and the next one works */
}

Test(GPU_NAME, failed_copy_on_the_client_is_an_error, .timeout = 240)
{
	world_up();
	need_failing_copies();
	G.pinned0 = G.d.live_pinned();
	client_copies_fail(100);
	client_copies_fail(urpc_rpc_max_msg_size(G.cli) + 1);
	world_down();
	cr_assert_eq(G.d.live_pinned(), G.pinned0, "staging memory outlived the Rpcs");
}

/* ---- exposed GPU memory (urpc_mem_expose, issue 16) ---- */

struct rop {
	int status;
	unsigned runs;
};

static void rop_cont(struct urpc_rpc *rpc, void *tag, int status)
{
	struct rop *o = tag;

	o->status = status;
	o->runs++;
}

/* Run a READ (@write false) or WRITE by the client against @rb; its status. */
static int rop_run(bool write, struct urpc_msgbuf *local, size_t loff, const struct urpc_rbuf *rb,
		   uint64_t roff, size_t len)
{
	uint64_t end = urpc__now_ns() + WAIT_NS;
	struct rop o = {0};
	int ret;

	ret = write ? urpc_rdma_write(G.cli, G.sess, local, loff, rb, roff, len, rop_cont, &o, 0)
		    : urpc_rdma_read(G.cli, G.sess, local, loff, rb, roff, len, rop_cont, &o, 0);
	cr_assert_eq(ret, 0, "%s: %s", write ? "urpc_rdma_write" : "urpc_rdma_read",
		     urpc_strerror(ret));
	while (!o.runs) {
		cr_assert_lt(urpc__now_ns(), end, "a one-sided operation did not complete");
		pump();
	}
	cr_assert_eq(o.runs, 1);
	return o.status;
}

/* The server's number of the client's session, once a request went both ways. */
static int srv_session(void)
{
	struct urpc_session_info info;
	struct urpc_msgbuf req, resp;

	cr_assert_eq(urpc_msgbuf_alloc(G.cli, 8, &req), 0);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, 8, &resp), 0);
	memset(req.buf, 1, 8);
	cr_assert_eq(run(T_ECHO, &req, &resp), 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &req), 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &resp), 0);

	cr_assert_eq(urpc__rpc_session_info(G.cli, G.sess, &info), 0);
	return (int)info.remote_num;
}

/*
 * The server exposes GPU memory (an odd range of a larger allocation); the
 * client READs it whole and WRITEs into it one-sided, every byte checked
 * on the device, the bytes around the exposure untouched. On verbs the
 * exposure needs dma-buf: where it cannot have it, -ENOTSUP.
 */
Test(GPU_NAME, exposed_gpu_memory_is_read_and_written_one_sided, .timeout = 240)
{
	const size_t len = (1u << 20) + 77, pad = 4096, all = len + 2 * pad;
	struct urpc_msgbuf local;
	struct urpc_rbuf rb;
	uint8_t *host = malloc(all), *back = malloc(all);
	uint8_t *dev;
	size_t i;
	int ret;

	cr_assert(host && back);
	world_up();
	dev = dev_alloc(all);
	for (i = 0; i < all; i++)
		host[i] = pat(i, 3);
	cr_assert_eq(urpc__cuda_copy_to_device(dev, host, all), 0);
	ret = urpc_mem_expose(G.srv, srv_session(), dev + pad, len,
			      URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb);
	if (GPU_KIND == URPC_TRANSPORT_VERBS && ret == -ENOTSUP) {
		cr_log_info("verbs: GPU memory is not exposed without dma-buf (-ENOTSUP)");
		dev_free(dev);
		world_down();
		free(host);
		free(back);
		return;
	}
	cr_assert_eq(ret, 0, "urpc_mem_expose of GPU memory: %s", urpc_strerror(ret));
	cr_assert_eq(le64toh(rb.addr), (uint64_t)(uintptr_t)(dev + pad));
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, len + 1, &local), 0);
	/* READ the whole exposure into host memory at an odd offset. */
	memset(local.buf, 0, len + 1);
	cr_assert_eq(rop_run(false, &local, 1, &rb, 0, len), 0);
	for (i = 0; i < len; i++)
		cr_assert_eq(local.buf[1 + i], host[pad + i], "READ: byte %zu", i);
	/* WRITE into it at an odd offset; the device holds exactly that. */
	for (i = 0; i < len; i++)
		local.buf[i] = pat(i, 11);
	cr_assert_eq(rop_run(true, &local, 0, &rb, 5, len - 10), 0);
	cr_assert_eq(urpc__cuda_copy_to_host(back, dev, all), 0);
	for (i = 0; i < all; i++) {
		bool in = i >= pad + 5 && i < pad + len - 5;

		cr_assert_eq(back[i], in ? pat(i - pad - 5, 11) : host[i], "device byte %zd",
			     (ssize_t)i - (ssize_t)pad);
	}
	/* Out of bounds: refused by the checks before anything moves. */
	cr_assert_eq(urpc_rdma_read(G.cli, G.sess, &local, 0, &rb, 1, len, rop_cont, NULL, 0),
		     -EINVAL);
	cr_assert_eq(urpc_mem_revoke(G.srv, &rb), 0);
	cr_assert_eq(rop_run(false, &local, 0, &rb, 0, 16), -EACCES, "revoked");
	cr_assert_eq(urpc_msgbuf_free(G.cli, &local), 0);
	dev_free(dev);
	world_down();
	free(host);
	free(back);
}

/*
 * The owner's side goes through the driver: a copy it fails ends the
 * peer's operation with an error (not a CPU copy that would have worked
 * on the fake's host-backed memory), and the next one succeeds.
 */
Test(GPU_NAME, exposed_gpu_memory_is_reached_through_the_driver, .timeout = 240)
{
	const size_t len = 70000;
	struct urpc_msgbuf local;
	struct urpc_rbuf rb;
	uint8_t *dev;
	int before, st;

	if (GPU_KIND == URPC_TRANSPORT_VERBS)
		cr_skip_test("verbs moves GPU memory by dma-buf: no driver copy to fail");
	world_up();
	need_failing_copies();
	dev = dev_alloc(len);
	cr_assert_eq(urpc_mem_expose(G.srv, srv_session(), dev, len,
				     URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb),
		     0);
	cr_assert_eq(urpc_msgbuf_alloc(G.cli, len, &local), 0);
	before = G.d.copy_failures();
	G.d.fail_copies(1, 0);
	st = rop_run(false, &local, 0, &rb, 0, len);
	cr_assert_neq(st, 0, "a READ whose device copy failed succeeded");
	cr_assert_eq(G.d.copy_failures(), before + 1, "the READ did not go through the driver");
	G.d.fail_copies(0, 1);
	st = rop_run(true, &local, 0, &rb, 0, len);
	cr_assert_neq(st, 0, "a WRITE whose device copy failed succeeded");
	cr_assert_eq(G.d.copy_failures(), before + 2, "the WRITE did not go through the driver");
	G.d.fail_copies(0, 0);
	memset(local.buf, 0x3c, len);
	cr_assert_eq(rop_run(true, &local, 0, &rb, 0, len), 0);
	memset(local.buf, 0, len);
	cr_assert_eq(rop_run(false, &local, 0, &rb, 0, len), 0);
	cr_assert(local.buf[0] == 0x3c && local.buf[len - 1] == 0x3c);
	cr_assert_eq(urpc_mem_revoke(G.srv, &rb), 0);
	cr_assert_eq(urpc_msgbuf_free(G.cli, &local), 0);
	dev_free(dev);
	world_down();
}

/*
 * GPU to GPU: the server's exposed GPU memory READ into a view of the
 * client's GPU memory, and WRITTEN from it, every byte checked on the
 * devices. On loop and udp the view is staged through pinned host memory
 * (the fake can fail those copies: the operation ends with -EIO); with
 * dma-buf on verbs the NIC moves the bytes.
 */
Test(GPU_NAME, exposed_gpu_memory_is_read_into_gpu_memory, .timeout = 240)
{
	const size_t len = (2u << 20) + 13, pad = 32, all = len + 2 * pad;
	uint8_t *host = malloc(all), *back = malloc(all);
	struct urpc_msgbuf view;
	struct urpc_rbuf rb;
	uint8_t *src, *dst;
	size_t i;
	int ret;

	cr_assert(host && back);
	world_up();
	src = dev_alloc(len);
	dst = dev_alloc(all);
	for (i = 0; i < len; i++)
		host[i] = pat(i, 5);
	cr_assert_eq(urpc__cuda_copy_to_device(src, host, len), 0);
	memset(back, 0, all);
	cr_assert_eq(urpc__cuda_copy_to_device(dst, back, all), 0);
	ret = urpc_mem_expose(G.srv, srv_session(), src, len,
			      URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb);
	if (GPU_KIND == URPC_TRANSPORT_VERBS && ret == -ENOTSUP) {
		cr_log_info("verbs: GPU memory is not exposed without dma-buf (-ENOTSUP)");
		goto out;
	}
	cr_assert_eq(ret, 0, "urpc_mem_expose of GPU memory: %s", urpc_strerror(ret));
	cr_assert_eq(urpc_msgbuf_register(G.cli, dst, all, 0, &view), 0);
	cr_assert_not_null(urpc__mb_gpu(&view), "device memory was not detected");
	/* READ: GPU -> GPU, at an odd offset of the view. */
	cr_assert_eq(rop_run(false, &view, pad + 1, &rb, 0, len - 1), 0);
	cr_assert_eq(urpc__cuda_copy_to_host(back, dst, all), 0);
	for (i = 0; i < all; i++) {
		bool in = i >= pad + 1 && i < pad + len;

		cr_assert_eq(back[i], in ? host[i - pad - 1] : 0, "view byte %zu", i);
	}
	/* WRITE: GPU -> GPU, from another part of the view. */
	for (i = 0; i < all; i++)
		back[i] = pat(i, 9);
	cr_assert_eq(urpc__cuda_copy_to_device(dst, back, all), 0);
	cr_assert_eq(rop_run(true, &view, 3, &rb, 7, len - 7), 0);
	cr_assert_eq(urpc__cuda_copy_to_host(host, src, len), 0);
	for (i = 0; i < len; i++)
		cr_assert_eq(host[i], i < 7 ? pat(i, 5) : back[3 + i - 7], "exposed byte %zu", i);
	if (G.d.fail_copies && GPU_KIND != URPC_TRANSPORT_VERBS) {
		int before = G.d.copy_failures();

		/* The view's staging copy fails: -EIO, never 0 with bytes the GPU lacks. */
		G.d.fail_copies(1, 0);
		cr_assert_eq(rop_run(true, &view, 0, &rb, 0, 4096), -EIO, "staging out failed");
		G.d.fail_copies(0, 1);
		cr_assert_eq(rop_run(false, &view, 0, &rb, 0, 4096), -EIO, "staging in failed");
		G.d.fail_copies(0, 0);
		cr_assert_eq(G.d.copy_failures(), before + 2);
		cr_assert_eq(rop_run(false, &view, 0, &rb, 0, 4096), 0, "and then it works");
	}
	cr_assert_eq(urpc_msgbuf_unregister(G.cli, &view), 0);
	cr_assert_eq(urpc_mem_revoke(G.srv, &rb), 0);
out:
	dev_free(src);
	dev_free(dst);
	world_down();
	free(host);
	free(back);
}
