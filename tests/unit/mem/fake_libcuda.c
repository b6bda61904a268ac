/* SPDX-License-Identifier: MIT */
/*
 * A fake CUDA driver for test_cuda: the entry points src/mem/cuda.c loads,
 * working over host memory, with the rules of the real driver that urpc
 * depends on, so that its logic runs here for real:
 *  - "device memory" comes from a region of host memory this library
 *    tracks: cuPointerGetAttribute() says CU_MEMORYTYPE_DEVICE inside a live
 *    allocation, CU_MEMORYTYPE_HOST for pinned memory from cuMemHostAlloc(),
 *    and CUDA_ERROR_INVALID_VALUE for anything else, as the driver does for
 *    plain host memory;
 *  - allocations, copies and exports need a current context
 *    (CUDA_ERROR_INVALID_CONTEXT otherwise);
 *  - cuMemGetHandleForAddressRange() takes only host-page-aligned ranges
 *    inside one allocation, and exports a memfd holding a snapshot of the
 *    range (offset 0 = the range's start), as a dma-buf would map it.
 *
 * Environment, read by cuInit():
 *   FAKE_CUDA_NO_DEVICE=1     cuInit() fails with CUDA_ERROR_NO_DEVICE
 *   FAKE_CUDA_DEVICES=N       number of devices (default 2)
 *   FAKE_CUDA_NO_DMABUF=1     devices report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0
 *   FAKE_CUDA_DMABUF_FAILS=1  the attribute says yes, the export says
 *                             CUDA_ERROR_NOT_SUPPORTED (no kernel support)
 *
 * Built twice: with FAKE_CUDA_OLD it is a driver older than CUDA 11.7, with
 * no cuMemGetHandleForAddressRange and no attribute 124. dlsym() finds every
 * exported symbol, so no environment switch could hide one.
 *
 * fake_cuda_*() are for the test itself: counters, the last export, and
 * copies that fail on demand (fake_cuda_fail_copies(): the next N copies out
 * of or into device memory return CUDA_ERROR_ILLEGAL_ADDRESS and copy
 * nothing, as a copy from a faulted context would).
 */
#define _GNU_SOURCE /* memfd_create */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Values from NVIDIA's cuda.h, as in src/mem/cuda.c. */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_NOT_SUPPORTED 801
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

#define VRAM_SIZE (32ul << 20)
#define MAX_DEV 8
#define MAX_ALLOCS 64

struct fake_ctx {
	int dev;
};

struct fake_alloc {
	uintptr_t start;
	size_t len;
	int dev;
	bool pinned; /* host memory from cuMemHostAlloc */
};

static struct {
	pthread_mutex_t lock;
	bool initialized;
	int init_calls;
	int ndev;
	bool dmabuf, dmabuf_fails;
	unsigned char *vram;
	size_t used;
	struct fake_alloc allocs[MAX_ALLOCS];
	int live_pinned;
	struct fake_ctx ctxs[MAX_DEV];
	int retains[MAX_DEV];
	unsigned long long export_start;
	size_t export_size;
	int fail_dtoh, fail_htod; /* copies still to fail, per direction */
	int copy_failures;	  /* copies failed so far */
} fk = {.lock = PTHREAD_MUTEX_INITIALIZER};

static __thread struct fake_ctx *current;

/* The driver's entry points (no header declares them here). */
int cuInit(unsigned int flags);
int cuDeviceGet(int *dev, int ordinal);
int cuDeviceGetCount(int *count);
int cuDeviceGetAttribute(int *pi, int attrib, int dev);
int cuDeviceGetPCIBusId(char *buf, int len, int dev);
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);
int cuMemAlloc_v2(unsigned long long *dptr, size_t size);
int cuMemFree_v2(unsigned long long dptr);
int cuMemHostAlloc(void **pp, size_t size, unsigned int flags);
int cuMemFreeHost(void *p);
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n);
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);
int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags);
int cuCtxGetCurrent(struct fake_ctx **pctx);
int cuCtxSetCurrent(struct fake_ctx *ctx);
int cuDevicePrimaryCtxRetain(struct fake_ctx **pctx, int dev);
int cuGetErrorName(int error, const char **pstr);
int cuGetErrorString(int error, const char **pstr);
/* For the test. */
int fake_cuda_init_calls(void);
int fake_cuda_live_pinned(void);
int fake_cuda_retains(int dev);
void fake_cuda_last_export(unsigned long long *start, size_t *size);
void fake_cuda_fail_copies(int dtoh, int htod);
int fake_cuda_copy_failures(void);

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static bool env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

/* The allocation that holds [p, p+n), or NULL. Caller holds fk.lock. */
static struct fake_alloc *find(uintptr_t p, size_t n, bool pinned)
{
	int i;

	for (i = 0; i < MAX_ALLOCS; i++) {
		struct fake_alloc *a = &fk.allocs[i];

		if (a->len && a->pinned == pinned && p >= a->start && p < a->start + a->len &&
		    n <= a->start + a->len - p)
			return a;
	}
	return NULL;
}

static struct fake_alloc *slot(void)
{
	int i;

	for (i = 0; i < MAX_ALLOCS; i++)
		if (!fk.allocs[i].len)
			return &fk.allocs[i];
	return NULL;
}

int cuInit(unsigned int flags)
{
	const char *n = getenv("FAKE_CUDA_DEVICES");
	int ret = CUDA_SUCCESS;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fk.lock);
	fk.init_calls++;
	if (env_set("FAKE_CUDA_NO_DEVICE")) {
		ret = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (fk.initialized)
		goto out;
	fk.ndev = n && *n ? atoi(n) : 2;
	if (fk.ndev < 0 || fk.ndev > MAX_DEV)
		fk.ndev = MAX_DEV;
	fk.dmabuf = !env_set("FAKE_CUDA_NO_DMABUF");
	fk.dmabuf_fails = env_set("FAKE_CUDA_DMABUF_FAILS");
	fk.vram = mmap(NULL, VRAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fk.vram == MAP_FAILED) {
		fk.vram = NULL;
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	fk.initialized = true;
out:
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuDeviceGetCount(int *count)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	*count = fk.ndev;
	return CUDA_SUCCESS;
}

int cuDeviceGet(int *dev, int ordinal)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= fk.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

int cuDeviceGetAttribute(int *pi, int attrib, int dev)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fk.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
#ifndef FAKE_CUDA_OLD
	if (attrib == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) {
		*pi = fk.dmabuf;
		return CUDA_SUCCESS;
	}
#endif
	return CUDA_ERROR_INVALID_VALUE;
}

int cuDeviceGetPCIBusId(char *buf, int len, int dev)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fk.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!buf || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(buf, (size_t)len, "0000:%02X:00.0", 0x3b + dev);
	return CUDA_SUCCESS;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&fk.lock);
	a = find((uintptr_t)ptr, 1, false);
	if (!a)
		a = find((uintptr_t)ptr, 1, true);
	if (!a) {
		ret = CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know */
		goto out;
	}
	switch (attribute) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = a->pinned ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(bool *)data = false;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->dev;
		break;
	default:
		ret = CUDA_ERROR_INVALID_VALUE;
	}
out:
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuMemAlloc_v2(unsigned long long *dptr, size_t size)
{
	size_t len = (size + page_size() - 1) & ~(page_size() - 1);
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fk.lock);
	a = slot();
	if (!a || len > VRAM_SIZE - fk.used) {
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->start = (uintptr_t)fk.vram + fk.used;
	a->len = size;
	a->dev = current->dev;
	a->pinned = false;
	fk.used += len; /* page-aligned allocations, never reused */
	*dptr = a->start;
out:
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuMemFree_v2(unsigned long long dptr)
{
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&fk.lock);
	a = find((uintptr_t)dptr, 1, false);
	if (!a || a->start != dptr)
		ret = CUDA_ERROR_INVALID_VALUE;
	else
		a->len = 0;
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS;
	void *p;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!size || (flags & ~0x7u))
		return CUDA_ERROR_INVALID_VALUE;
	p = aligned_alloc(page_size(), (size + page_size() - 1) & ~(page_size() - 1));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&fk.lock);
	a = slot();
	if (!a) {
		free(p);
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	a->start = (uintptr_t)p;
	a->len = size;
	a->dev = current->dev;
	a->pinned = true;
	fk.live_pinned++;
	*pp = p;
out:
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuMemFreeHost(void *p)
{
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&fk.lock);
	a = find((uintptr_t)p, 1, true);
	if (!a || a->start != (uintptr_t)p) {
		ret = CUDA_ERROR_INVALID_VALUE;
	} else {
		a->len = 0;
		fk.live_pinned--;
		free(p);
	}
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

/* Copy @n bytes between device memory at @dev and host memory at @host. */
static int copy(uintptr_t dev, void *host, size_t n, bool to_host)
{
	int ret = CUDA_SUCCESS;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&fk.lock);
	if (!find(dev, n, false))
		ret = CUDA_ERROR_INVALID_VALUE;
	else if (to_host ? fk.fail_dtoh > 0 : fk.fail_htod > 0)
		ret = CUDA_ERROR_ILLEGAL_ADDRESS;
	else if (to_host)
		memcpy(host, (void *)dev, n);
	else
		memcpy((void *)dev, host, n);
	if (ret == CUDA_ERROR_ILLEGAL_ADDRESS) {
		fk.fail_dtoh -= to_host;
		fk.fail_htod -= !to_host;
		fk.copy_failures++;
	}
	pthread_mutex_unlock(&fk.lock);
	return ret;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
	return copy((uintptr_t)src, dst, n, true);
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
	return copy((uintptr_t)dst, (void *)(uintptr_t)src, n, false);
}

#ifndef FAKE_CUDA_OLD
int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags)
{
	size_t ps = page_size(), done = 0;
	struct fake_alloc *a;
	int ret = CUDA_SUCCESS, fd = -1;

	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags)
		return CUDA_ERROR_INVALID_VALUE;
	/* "Users must ensure the dptr and size are aligned to the host page size." */
	if (!size || dptr % ps || size % ps)
		return CUDA_ERROR_INVALID_VALUE;
	if (fk.dmabuf_fails)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&fk.lock);
	a = find((uintptr_t)dptr, 1, false);
	/* Allocations own whole pages here, as on the GPU. */
	if (!a || size > ((a->len + ps - 1) & ~(ps - 1)) - (dptr - a->start)) {
		ret = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	fd = memfd_create("fake-cuda-dmabuf", MFD_CLOEXEC);
	if (fd < 0) {
		ret = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	while (done < size) {
		ssize_t w =
			pwrite(fd, (const char *)(uintptr_t)dptr + done, size - done, (off_t)done);

		if (w <= 0) {
			close(fd);
			ret = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		done += (size_t)w;
	}
	*(int *)handle = fd;
	fk.export_start = dptr;
	fk.export_size = size;
out:
	pthread_mutex_unlock(&fk.lock);
	return ret;
}
#endif

int cuCtxGetCurrent(struct fake_ctx **pctx)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	*pctx = current;
	return CUDA_SUCCESS;
}

int cuCtxSetCurrent(struct fake_ctx *ctx)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	current = ctx;
	return CUDA_SUCCESS;
}

int cuDevicePrimaryCtxRetain(struct fake_ctx **pctx, int dev)
{
	if (!fk.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fk.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fk.lock);
	fk.ctxs[dev].dev = dev;
	fk.retains[dev]++;
	pthread_mutex_unlock(&fk.lock);
	*pctx = &fk.ctxs[dev];
	return CUDA_SUCCESS;
}

static const struct {
	int code;
	const char *name, *text;
} errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
	 "an illegal memory access was encountered"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

static int error_entry(int error, const char **pstr, bool name)
{
	size_t i;

	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].code == error) {
			*pstr = name ? errors[i].name : errors[i].text;
			return CUDA_SUCCESS;
		}
	}
	*pstr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

int cuGetErrorName(int error, const char **pstr)
{
	return error_entry(error, pstr, true);
}

int cuGetErrorString(int error, const char **pstr)
{
	return error_entry(error, pstr, false);
}

int fake_cuda_init_calls(void)
{
	return fk.init_calls;
}

int fake_cuda_live_pinned(void)
{
	return fk.live_pinned;
}

int fake_cuda_retains(int dev)
{
	return dev >= 0 && dev < MAX_DEV ? fk.retains[dev] : -1;
}

void fake_cuda_last_export(unsigned long long *start, size_t *size)
{
	*start = fk.export_start;
	*size = fk.export_size;
}

/* The next @dtoh copies to the host and @htod copies to the device fail; 0, 0 disarms. */
void fake_cuda_fail_copies(int dtoh, int htod)
{
	pthread_mutex_lock(&fk.lock);
	fk.fail_dtoh = dtoh;
	fk.fail_htod = htod;
	pthread_mutex_unlock(&fk.lock);
}

int fake_cuda_copy_failures(void)
{
	return fk.copy_failures;
}
