/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver API, loaded at run time.
 *
 * urpc has no build-time CUDA dependency: urpc__cuda_load() dlopen()s
 * libcuda.so.1 (or the library URPC_CUDA_LIB names, for tests) once per
 * process and resolves the few entry points urpc uses. Where no driver
 * exists, the load fails with -ENODEV and a reason (urpc__cuda_why()), and
 * everything else here answers "no" (-ENODEV, or false): urpc works as
 * before, without GPU payloads.
 *
 * A driver too old for some entry point loads anyway; only the feature that
 * needs it is missing (-ENOTSUP): no cuMemGetHandleForAddressRange means no
 * dma-buf, no cuMemHostAlloc or cuMemcpy*_v2 means no staging, and so on.
 *
 * GPU memory reaches the wire in one of two ways:
 *  - verbs: urpc__cuda_dmabuf_fd() exports the buffer as a dma-buf, which
 *    ibv_reg_dmabuf_mr() registers with the NIC (GPUDirect RDMA);
 *  - otherwise (udp, loop, or no dma-buf): the payload is staged through
 *    pinned host memory with urpc__cuda_copy_to_host/_to_device().
 *
 * Contexts: the copies, pinned allocations and dma-buf exports use the
 * calling thread's current CUDA context when it has one. Otherwise they make
 * the primary context of the buffer's device (device 0 for host allocations)
 * current on the calling thread, as the CUDA runtime does; that context is
 * retained once and kept for the life of the process.
 *
 * Thread: any, for every function. None is for the hot path except
 * urpc__cuda_is_device_ptr() and the copies, which call into the driver.
 */
#ifndef URPC_MEM_CUDA_H
#define URPC_MEM_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for a PCI bus id as the driver prints it ("0000:3B:00.0" and a NUL). */
#define URPC_CUDA_PCI_BUS_ID_LEN 16

/*
 * Load the driver: dlopen() it, resolve its entry points and cuInit(0).
 * Only the first call does the work; every later one returns its result.
 *
 * @return 0, or -ENODEV: no library, not a CUDA driver, or cuInit() failed;
 *         urpc__cuda_why() says which. Not logged: having no GPU is normal.
 */
int urpc__cuda_load(void);

/*
 * Why the load failed: "libcuda.so.1: cannot open shared object file: ...",
 * "cuInit failed: CUDA_ERROR_NO_DEVICE", ... An empty string once the driver
 * has loaded; a note saying so before urpc__cuda_load() has run. Never NULL.
 */
const char *urpc__cuda_why(void);

/* True once urpc__cuda_load() has succeeded. */
bool urpc__cuda_is_loaded(void);

/* Number of CUDA devices (>= 0), or -ENODEV when the driver is not loaded. */
int urpc__cuda_device_count(void);

/*
 * True when @p is device memory (CU_MEMORYTYPE_DEVICE) and not managed
 * memory (managed memory is CPU-addressable: the host paths handle it).
 * False for host memory, pinned host memory, NULL, or without a driver.
 */
bool urpc__cuda_is_device_ptr(const void *p);

/*
 * Pinned (page-locked) host memory for staging, usable from every context.
 * @return 0 and *@out, or -EINVAL (len 0), -ENOMEM, -ENOTSUP (the driver
 *         lacks cuMemHostAlloc), -ENODEV (not loaded), -EIO.
 * Ownership: the caller frees it with urpc__cuda_host_free().
 */
int urpc__cuda_host_alloc(size_t len, void **out);

/* Free memory from urpc__cuda_host_alloc(); NULL is ignored. */
void urpc__cuda_host_free(void *p);

/*
 * Synchronous copies between device memory and host memory (pinned memory
 * from urpc__cuda_host_alloc() is fastest; any host memory works). A zero
 * @len copies nothing and returns 0.
 * @return 0, -EINVAL (not a device range), -ENOTSUP (the driver lacks
 *         cuMemcpyDtoH_v2/cuMemcpyHtoD_v2 or context calls), -ENODEV, -EIO.
 */
int urpc__cuda_copy_to_host(void *dst, const void *dev_src, size_t len);
int urpc__cuda_copy_to_device(void *dev_dst, const void *src, size_t len);

/* True when device @ordinal can export dma-bufs (and the driver can too). */
bool urpc__cuda_has_dmabuf(int ordinal);

/*
 * Export [@dev_ptr, @dev_ptr + @len) as a dma-buf, for ibv_reg_dmabuf_mr().
 * The driver takes only ranges aligned to the host page size, so the
 * exported range is the enclosing page-aligned one, and @dev_ptr lies
 * *@offset bytes into it. Register it with
 *	ibv_reg_dmabuf_mr(pd, *offset, len, (uintptr_t)dev_ptr, *fd, access)
 * and close(*fd) afterwards (the MR holds its own reference).
 *
 * @return 0; -ENOTSUP when the driver or the device has no dma-buf support
 *         (logged once per process: the caller stages instead); -EINVAL
 *         (not device memory, len 0, or the range wraps); -ENODEV; -EIO.
 * Ownership: the caller owns *@fd.
 */
int urpc__cuda_dmabuf_fd(const void *dev_ptr, size_t len, int *fd, uint64_t *offset);

/*
 * PCI address of device @ordinal ("0000:3B:00.0"), for placing the RDMA
 * port near the GPU (struct urpc_rpc_opts.near_pci takes it as is).
 * @return 0; -ERANGE (@len below 13); -ENODEV (no such device, or not
 *         loaded); -ENOTSUP (the driver lacks cuDeviceGetPCIBusId); -EIO.
 */
int urpc__cuda_pci_bus_id(int ordinal, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* URPC_MEM_CUDA_H */
