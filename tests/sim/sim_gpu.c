/* SPDX-License-Identifier: MIT */
/*
 * GPU payloads for the simulator, over the fake CUDA driver of the tests
 * (tests/unit/mem/fake_libcuda.c, loaded through URPC_CUDA_LIB): a few
 * device buffers allocated once per process and lent to requests and
 * responses, and the copies an application makes to fill and check them.
 * The fake's device memory is never reused, so the buffers are kept for
 * the whole process. Calls the engine's CUDA loader (to share its driver)
 * and the driver itself through dlsym().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/mem/cuda.h"
#include "sim.h"

#define GPU_BUFS 8

static struct {
	int state; /* 0 untried, 1 ready, -1 unavailable */
	int (*mem_alloc)(unsigned long long *p, size_t len);
	int (*htod)(unsigned long long dst, const void *src, size_t n);
	int (*dtoh)(void *dst, unsigned long long src, size_t n);
	int (*retain)(void **ctx, int dev);
	int (*set_current)(void *ctx);
	void *bufs[GPU_BUFS];
	bool used[GPU_BUFS];
	const char *why;
} G;

static int sym_bind(void *h, const char *name, void *slot)
{
	void *p = dlsym(h, name);

	if (!p)
		return -1;
	memcpy(slot, &p, sizeof(p));
	return 0;
}

int sim_gpu_init(void)
{
	const char *lib = getenv("URPC_CUDA_LIB");
	void *h, *ctx = NULL;
	unsigned i;

	if (G.state)
		return G.state > 0 ? 0 : -1;
	G.state = -1;
#ifdef SIM_FAKE_CUDA
	if (!lib || !*lib) {
		setenv("URPC_CUDA_LIB", SIM_FAKE_CUDA, 1);
		lib = SIM_FAKE_CUDA;
	}
#endif
	if (!lib || !*lib) {
		G.why = "no CUDA driver named (URPC_CUDA_LIB)";
		return -1;
	}
	if (urpc__cuda_load()) {
		G.why = urpc__cuda_why();
		return -1;
	}
	h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	if (!h || sym_bind(h, "cuMemAlloc_v2", &G.mem_alloc) ||
	    sym_bind(h, "cuMemcpyHtoD_v2", &G.htod) || sym_bind(h, "cuMemcpyDtoH_v2", &G.dtoh) ||
	    sym_bind(h, "cuDevicePrimaryCtxRetain", &G.retain) ||
	    sym_bind(h, "cuCtxSetCurrent", &G.set_current)) {
		G.why = "the driver lacks an entry point the simulator needs";
		return -1;
	}
	if (G.retain(&ctx, 0) || G.set_current(ctx)) {
		G.why = "no CUDA context on device 0";
		return -1;
	}
	for (i = 0; i < GPU_BUFS; i++) {
		unsigned long long p;

		if (G.mem_alloc(&p, SIM_GPU_BUF)) {
			G.why = "cannot allocate device memory";
			return -1;
		}
		G.bufs[i] = (void *)(uintptr_t)p;
	}
	G.state = 1;
	return 0;
}

const char *sim_gpu_why(void)
{
	return G.why ? G.why : "not initialised";
}

void *sim_gpu_get(size_t len)
{
	unsigned i;

	if (G.state <= 0 || len > SIM_GPU_BUF)
		return NULL;
	for (i = 0; i < GPU_BUFS; i++) {
		if (!G.used[i]) {
			G.used[i] = true;
			return G.bufs[i];
		}
	}
	return NULL;
}

void sim_gpu_put(void *dev)
{
	unsigned i;

	for (i = 0; i < GPU_BUFS; i++)
		if (G.bufs[i] == dev)
			G.used[i] = false;
}

unsigned sim_gpu_in_use(void)
{
	unsigned i, n = 0;

	for (i = 0; i < GPU_BUFS; i++)
		n += G.used[i];
	return n;
}

void sim_gpu_reset(void)
{
	memset(G.used, 0, sizeof(G.used));
}

int sim_gpu_write(void *dev, const void *src, size_t n)
{
	return n ? G.htod((unsigned long long)(uintptr_t)dev, src, n) : 0;
}

int sim_gpu_read(void *dst, const void *dev, size_t n)
{
	return n ? G.dtoh(dst, (unsigned long long)(uintptr_t)dev, n) : 0;
}
