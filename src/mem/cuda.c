/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver API through dlopen(): no CUDA header, no link-time
 * dependency. See cuda.h for the contract.
 */
#define _GNU_SOURCE /* secure_getenv; must precede every include */
#define URPC_LOG_MODULE "cuda"
#include "cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/compiler.h"
#include "../util/log.h"

/*
 * The few CUDA types and values used here, declared by hand with the values
 * of NVIDIA's cuda.h, as the CUDA Driver API reference lists them ("Data
 * types used by CUDA driver",
 * https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html).
 * They are part of the driver's stable ABI. The scalar typedefs
 * keep CUDA's names so that each prototype below reads like its
 * documentation (the style's no-typedef rule is for structs and pointers).
 */
typedef int CUresult;			/* enum cudaError_enum */
typedef int CUdevice;			/* CUdevice_v1: a device ordinal handle */
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2: 64 bits on LP64 */
struct CUctx_st;			/* opaque; CUcontext is a pointer to it */

/* enum cudaError_enum (CUresult) */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_DEINITIALIZED 4
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_PERMITTED 800
#define CUDA_ERROR_NOT_SUPPORTED 801

/* enum CUpointer_attribute_enum, for cuPointerGetAttribute() */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2    /* CUmemorytype (unsigned int) */
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8     /* a boolean */
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9 /* int */

/* enum CUmemorytype_enum */
#define CU_MEMORYTYPE_DEVICE 2

/* enum CUdevice_attribute_enum; 124 exists since CUDA 11.7 */
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

/* enum CUmemRangeHandleType_enum, for cuMemGetHandleForAddressRange() */
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

/* cuMemHostAlloc() flags: pinned for every context, not only the current one */
#define CU_MEMHOSTALLOC_PORTABLE 0x01

/* cuDeviceGetPCIBusId() writes "dddd:bb:dd.f" and a NUL (its documentation) */
#define PCI_BUS_ID_MIN 13

/* Primary contexts are cached for this many device ordinals. */
#define MAX_DEVICES 64

/*
 * The entry points, by the names libcuda.so.1 exports. cuda.h maps
 * cuMemcpyDtoH and cuMemcpyHtoD to their _v2 symbols (size_t sizes, 64-bit
 * device pointers); the unversioned symbols are the CUDA 3.1 ABI and are
 * never used. The others have had one version since they appeared.
 */
struct cu_api {
	CUresult (*init)(unsigned int flags);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*device_get_count)(int *count);
	CUresult (*pointer_get_attribute)(void *data, int attribute, CUdeviceptr ptr);
	CUresult (*device_get_attribute)(int *pi, int attrib, CUdevice dev);
	CUresult (*device_get_pci_bus_id)(char *pci_bus_id, int len, CUdevice dev);
	CUresult (*mem_host_alloc)(void **pp, size_t bytesize, unsigned int flags);
	CUresult (*mem_free_host)(void *p);
	CUresult (*memcpy_dtoh)(void *dst_host, CUdeviceptr src_device, size_t byte_count);
	CUresult (*memcpy_htod)(CUdeviceptr dst_device, const void *src_host, size_t byte_count);
	CUresult (*mem_get_handle_for_address_range)(void *handle, CUdeviceptr dptr, size_t size,
						     int handle_type, unsigned long long flags);
	CUresult (*ctx_get_current)(struct CUctx_st **pctx);
	CUresult (*ctx_set_current)(struct CUctx_st *ctx);
	CUresult (*device_primary_ctx_retain)(struct CUctx_st **pctx, CUdevice dev);
	CUresult (*get_error_name)(CUresult error, const char **pstr);
	CUresult (*get_error_string)(CUresult error, const char **pstr);
};

/* dlsym() returns a void *; POSIX guarantees a function pointer has its representation. */
static_assert(sizeof(void *) == sizeof(CUresult(*)(void)), "dlsym needs void * == fn pointer");

struct cu_sym {
	const char *name;
	size_t off;
	bool required; /* without it the library is no usable driver */
};

#define CU_SYM(field, sym, req)                                                                    \
	{                                                                                          \
		sym, offsetof(struct cu_api, field), req                                           \
	}

static const struct cu_sym cu_syms[] = {
	CU_SYM(init, "cuInit", true),
	CU_SYM(device_get, "cuDeviceGet", true),
	CU_SYM(device_get_count, "cuDeviceGetCount", true),
	CU_SYM(pointer_get_attribute, "cuPointerGetAttribute", true),
	CU_SYM(device_get_attribute, "cuDeviceGetAttribute", false),
	CU_SYM(device_get_pci_bus_id, "cuDeviceGetPCIBusId", false),
	CU_SYM(mem_host_alloc, "cuMemHostAlloc", false),
	CU_SYM(mem_free_host, "cuMemFreeHost", false),
	CU_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2", false),
	CU_SYM(memcpy_htod, "cuMemcpyHtoD_v2", false),
	CU_SYM(mem_get_handle_for_address_range, "cuMemGetHandleForAddressRange", false),
	CU_SYM(ctx_get_current, "cuCtxGetCurrent", false),
	CU_SYM(ctx_set_current, "cuCtxSetCurrent", false),
	CU_SYM(device_primary_ctx_retain, "cuDevicePrimaryCtxRetain", false),
	CU_SYM(get_error_name, "cuGetErrorName", false),
	CU_SYM(get_error_string, "cuGetErrorString", false),
};

/*
 * Process-wide state. load_once() writes everything except the atomics
 * before its release store of @done (and of @loaded on success); readers
 * check those with acquire loads first, so they see complete values.
 */
static struct {
	pthread_once_t once;
	atomic_bool done;
	atomic_bool loaded;
	void *handle;
	struct cu_api api;
	char why[256];
	atomic_flag dmabuf_logged;
	pthread_mutex_t primary_lock;
	_Atomic(struct CUctx_st *) primary[MAX_DEVICES]; /* retained once, never released */
} cu = {
	.once = PTHREAD_ONCE_INIT,
	.dmabuf_logged = ATOMIC_FLAG_INIT,
	.primary_lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool ready(void)
{
	return atomic_load_explicit(&cu.loaded, memory_order_acquire);
}

static CUdeviceptr dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* "CUDA_ERROR_NO_DEVICE", or the number where the driver cannot name it. */
static const char *cu_name(CUresult r, char *buf, size_t len)
{
	const char *s = NULL;

	if (cu.api.get_error_name && cu.api.get_error_name(r, &s) == CUDA_SUCCESS && s)
		return s;
	snprintf(buf, len, "CUresult %d", r);
	return buf;
}

static int cu_errno(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_INVALID_VALUE:
		return -EINVAL;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_DEINITIALIZED:
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
		return -ENODEV;
	case CUDA_ERROR_NOT_PERMITTED:
		return -EPERM;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

static void set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cu.why, sizeof(cu.why), fmt, ap);
	va_end(ap);
}

/* Fill cu.api from @h; returns the first required symbol missing, or NULL. */
static const char *resolve_all(void *h)
{
	const char *missing = NULL;
	size_t i;

	for (i = 0; i < URPC_ARRAY_SIZE(cu_syms); i++) {
		void *p = dlsym(h, cu_syms[i].name);

		memcpy((char *)&cu.api + cu_syms[i].off, &p, sizeof(p));
		if (!p && cu_syms[i].required && !missing)
			missing = cu_syms[i].name;
	}
	return missing;
}

static void load_once(void)
{
	const char *path = secure_getenv("URPC_CUDA_LIB");
	const char *missing, *desc = NULL;
	char num[32];
	CUresult r;
	void *h;

	if (!path || !*path)
		path = "libcuda.so.1";
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		set_why("%s", dlerror());
		goto out;
	}
	missing = resolve_all(h);
	if (missing) {
		set_why("%s is not a usable CUDA driver: it has no %s", path, missing);
		goto out_close;
	}
	r = cu.api.init(0);
	if (r != CUDA_SUCCESS) {
		/*
		 * The library stays open: cuInit() may have started driver
		 * threads or registered exit handlers that unloading would
		 * pull out from under them.
		 */
		if (!cu.api.get_error_string || cu.api.get_error_string(r, &desc) != CUDA_SUCCESS)
			desc = NULL;
		if (desc)
			set_why("cuInit failed: %s (%s)", cu_name(r, num, sizeof(num)), desc);
		else
			set_why("cuInit failed: %s", cu_name(r, num, sizeof(num)));
		goto out;
	}
	cu.handle = h;
	cu.why[0] = '\0';
	atomic_store_explicit(&cu.loaded, true, memory_order_release);
	goto out;

out_close:
	memset(&cu.api, 0, sizeof(cu.api));
	dlclose(h);
out:
	atomic_store_explicit(&cu.done, true, memory_order_release);
}

int urpc__cuda_load(void)
{
	pthread_once(&cu.once, load_once);
	return ready() ? 0 : -ENODEV;
}

const char *urpc__cuda_why(void)
{
	if (!atomic_load_explicit(&cu.done, memory_order_acquire))
		return "the CUDA driver was not loaded yet (urpc__cuda_load() has not run)";
	return cu.why;
}

bool urpc__cuda_is_loaded(void)
{
	return ready();
}

int urpc__cuda_device_count(void)
{
	int n = 0;
	CUresult r;

	if (!ready())
		return -ENODEV;
	r = cu.api.device_get_count(&n);
	return r == CUDA_SUCCESS ? n : cu_errno(r);
}

/*
 * Device ordinal of the memory at @p, or 0 when the driver cannot tell (an
 * old driver without the attribute, or not device memory: the operation
 * that follows then reports the error).
 */
static int ptr_ordinal(const void *p)
{
	int ord = 0;

	if (!p || cu.api.pointer_get_attribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					       dptr(p)) != CUDA_SUCCESS)
		return 0;
	return ord;
}

/*
 * Make sure the calling thread has a current context: its own if it has
 * one, else the primary context of the device that holds @dev_ptr (device 0
 * for NULL), retained on first use and kept for the life of the process.
 */
static int use_ctx(const void *dev_ptr)
{
	struct CUctx_st *ctx = NULL;
	CUresult r = CUDA_SUCCESS;
	CUdevice dev;
	int ord;

	if (!cu.api.ctx_get_current || !cu.api.ctx_set_current || !cu.api.device_primary_ctx_retain)
		return -ENOTSUP;
	if (cu.api.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx)
		return 0;
	ord = ptr_ordinal(dev_ptr);
	if (ord < 0 || ord >= MAX_DEVICES)
		return -ENODEV;
	/* Pairs with the release store below, made under the lock. */
	ctx = atomic_load_explicit(&cu.primary[ord], memory_order_acquire);
	if (!ctx) {
		pthread_mutex_lock(&cu.primary_lock);
		ctx = atomic_load_explicit(&cu.primary[ord], memory_order_relaxed);
		if (!ctx) {
			r = cu.api.device_get(&dev, ord);
			if (r == CUDA_SUCCESS)
				r = cu.api.device_primary_ctx_retain(&ctx, dev);
			if (r == CUDA_SUCCESS)
				atomic_store_explicit(&cu.primary[ord], ctx, memory_order_release);
		}
		pthread_mutex_unlock(&cu.primary_lock);
		if (r != CUDA_SUCCESS)
			return cu_errno(r);
	}
	return cu_errno(cu.api.ctx_set_current(ctx));
}

static bool range_wraps(const void *p, size_t len)
{
	return (uintptr_t)p + len < (uintptr_t)p;
}

bool urpc__cuda_is_device_ptr(const void *p)
{
	unsigned long long managed = 0; /* wide enough whatever width the driver writes */
	unsigned int type = 0;

	if (!p || !ready())
		return false;
	/* Plain host memory: CUDA_ERROR_INVALID_VALUE. */
	if (cu.api.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dptr(p)) !=
		    CUDA_SUCCESS ||
	    type != CU_MEMORYTYPE_DEVICE)
		return false;
	/* Managed memory may report DEVICE wherever it lives; the CPU can reach it. */
	if (cu.api.pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dptr(p)) ==
		    CUDA_SUCCESS &&
	    managed)
		return false;
	return true;
}

int urpc__cuda_host_alloc(size_t len, void **out)
{
	void *p = NULL;
	int ret;

	if (!ready())
		return -ENODEV;
	if (!len || !out)
		return -EINVAL;
	if (!cu.api.mem_host_alloc || !cu.api.mem_free_host)
		return -ENOTSUP;
	ret = use_ctx(NULL);
	if (ret)
		return ret;
	ret = cu_errno(cu.api.mem_host_alloc(&p, len, CU_MEMHOSTALLOC_PORTABLE));
	if (ret)
		return ret;
	*out = p;
	return 0;
}

void urpc__cuda_host_free(void *p)
{
	if (!p || !ready() || !cu.api.mem_free_host)
		return;
	/* The pinned memory is portable: any context frees it. */
	if (use_ctx(NULL))
		return;
	cu.api.mem_free_host(p);
}

int urpc__cuda_copy_to_host(void *dst, const void *dev_src, size_t len)
{
	int ret;

	if (!ready())
		return -ENODEV;
	if (!len)
		return 0;
	if (!dst || !dev_src || range_wraps(dev_src, len))
		return -EINVAL;
	if (!cu.api.memcpy_dtoh)
		return -ENOTSUP;
	ret = use_ctx(dev_src);
	if (ret)
		return ret;
	return cu_errno(cu.api.memcpy_dtoh(dst, dptr(dev_src), len));
}

int urpc__cuda_copy_to_device(void *dev_dst, const void *src, size_t len)
{
	int ret;

	if (!ready())
		return -ENODEV;
	if (!len)
		return 0;
	if (!src || !dev_dst || range_wraps(dev_dst, len))
		return -EINVAL;
	if (!cu.api.memcpy_htod)
		return -ENOTSUP;
	ret = use_ctx(dev_dst);
	if (ret)
		return ret;
	return cu_errno(cu.api.memcpy_htod(dptr(dev_dst), src, len));
}

/* Why device @ordinal cannot export dma-bufs, or NULL when it can. */
static const char *dmabuf_missing(int ordinal, char *buf, size_t len)
{
	CUdevice dev;
	CUresult r;
	int v = 0;

	if (!cu.api.mem_get_handle_for_address_range)
		return "the driver has no cuMemGetHandleForAddressRange";
	if (!cu.api.device_get_attribute)
		return "the driver has no cuDeviceGetAttribute";
	r = cu.api.device_get(&dev, ordinal);
	if (r == CUDA_SUCCESS)
		r = cu.api.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
	if (r != CUDA_SUCCESS || !v) {
		snprintf(buf, len, "device %d reports no CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED",
			 ordinal);
		return buf;
	}
	return NULL;
}

bool urpc__cuda_has_dmabuf(int ordinal)
{
	char buf[96];

	return ready() && !dmabuf_missing(ordinal, buf, sizeof(buf));
}

static int dmabuf_unsupported(const char *why)
{
	if (!atomic_flag_test_and_set(&cu.dmabuf_logged))
		URPC_WARN(-1, "dma-buf not supported, staging through pinned host memory (%s)",
			  why);
	return -ENOTSUP;
}

int urpc__cuda_dmabuf_fd(const void *dev_ptr, size_t len, int *fd, uint64_t *offset)
{
	uintptr_t start, end, page = (uintptr_t)sysconf(_SC_PAGESIZE);
	char buf[96], num[32];
	const char *why;
	CUresult r;
	int h = -1, ret;

	if (!ready())
		return -ENODEV;
	if (!dev_ptr || !len || !fd || !offset || range_wraps(dev_ptr, len))
		return -EINVAL;
	if (!urpc__cuda_is_device_ptr(dev_ptr))
		return -EINVAL;
	why = dmabuf_missing(ptr_ordinal(dev_ptr), buf, sizeof(buf));
	if (why)
		return dmabuf_unsupported(why);
	/* The driver takes only ranges whose start and size are host-page aligned. */
	start = (uintptr_t)dev_ptr & ~(page - 1);
	end = (uintptr_t)dev_ptr + len;
	if (end > UINTPTR_MAX - (page - 1))
		return -EINVAL;
	end = URPC_ALIGN_UP(end, page);
	ret = use_ctx(dev_ptr);
	if (ret)
		return ret;
	r = cu.api.mem_get_handle_for_address_range(&h, (CUdeviceptr)start, end - start,
						    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r == CUDA_ERROR_NOT_SUPPORTED) {
		snprintf(buf, sizeof(buf), "cuMemGetHandleForAddressRange: %s",
			 cu_name(r, num, sizeof(num)));
		return dmabuf_unsupported(buf);
	}
	if (r != CUDA_SUCCESS)
		return cu_errno(r);
	*fd = h;
	*offset = (uintptr_t)dev_ptr - start;
	return 0;
}

int urpc__cuda_pci_bus_id(int ordinal, char *buf, size_t len)
{
	CUdevice dev;
	CUresult r;

	if (!ready())
		return -ENODEV;
	if (!buf)
		return -EINVAL;
	if (len < PCI_BUS_ID_MIN)
		return -ERANGE;
	if (!cu.api.device_get_pci_bus_id)
		return -ENOTSUP;
	r = cu.api.device_get(&dev, ordinal);
	if (r == CUDA_SUCCESS)
		r = cu.api.device_get_pci_bus_id(buf, (int)URPC_MIN(len, (size_t)INT_MAX), dev);
	return cu_errno(r);
}
