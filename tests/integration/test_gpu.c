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
 * which driver ran.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "mem/cuda.h"
#include "rpc/rpc.h"
#include "transport/verbs_dev.h"
#include "util/log.h"

#ifndef GPU_KIND
#error "build with -DGPU_KIND=URPC_TRANSPORT_<KIND> -DGPU_NAME=<suite> -DFAKE_CUDA=path"
#endif

#define T_ECHO 1
#define T_SINK 2
#define WAIT_NS 60000000000ull

struct drv {
	void *h;
	int (*mem_alloc)(unsigned long long *dptr, size_t size);
	int (*mem_free)(unsigned long long dptr);
	int (*primary_retain)(void **pctx, int dev);
	int (*set_current)(void *ctx);
};

static struct {
	struct drv d;
	struct urpc_nexus *nx;
	struct urpc_rpc *srv, *cli;
	int sess;
	void *sink; /* device memory the T_SINK handler copies requests into */
	size_t sink_len;
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
	struct urpc_verbs_port port;
	char hp[64];

	if (GPU_KIND == URPC_TRANSPORT_VERBS &&
	    (!urpc__verbs_built() || urpc__verbs_pick_port(getenv("URPC_TEST_DEVICE_A"), &port)))
		cr_skip_test("no active RDMA port (run it in tests/vm/rxe-vm.sh for Soft-RoCE)");
	driver_up();
	urpc_nexus_opts_init(&no);
	no.host = "127.0.0.1";
	cr_assert_eq(urpc_nexus_create(&no, &G.nx), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_ECHO, echo_handler, NULL), 0);
	cr_assert_eq(urpc_nexus_register_handler(G.nx, T_SINK, sink_handler, NULL), 0);
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
