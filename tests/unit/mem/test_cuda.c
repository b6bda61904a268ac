/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver loader: no driver, a fake driver (fake_libcuda.c, built as
 * FAKE_CUDA and, without cuMemGetHandleForAddressRange, as FAKE_CUDA_OLD),
 * and the real libcuda.so.1 where this machine has one. Criterion forks per
 * test, so each test loads a driver afresh, chosen by URPC_CUDA_LIB.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "mem/cuda.h"

/* What a test calls in the driver directly, as an application would. */
struct drv {
	void *h;
	int (*mem_alloc)(unsigned long long *dptr, size_t size);
	int (*mem_free)(unsigned long long dptr);
	int (*primary_retain)(void **pctx, int dev);
	int (*set_current)(void *ctx);
	/* fake_libcuda.c only */
	int (*init_calls)(void);
	int (*live_pinned)(void);
	int (*retains)(int dev);
	void (*last_export)(unsigned long long *start, size_t *size);
};

static void bind(void *h, const char *name, void *slot)
{
	void *p = dlsym(h, name);

	cr_assert_not_null(p, "%s: %s", name, dlerror());
	memcpy(slot, &p, sizeof(p));
}

/* The library urpc loaded from @path (it must be loaded already). */
static void drv_open(struct drv *d, const char *path, bool fake)
{
	memset(d, 0, sizeof(*d));
	d->h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	cr_assert_not_null(d->h, "urpc did not load %s", path);
	bind(d->h, "cuMemAlloc_v2", &d->mem_alloc);
	bind(d->h, "cuMemFree_v2", &d->mem_free);
	bind(d->h, "cuDevicePrimaryCtxRetain", &d->primary_retain);
	bind(d->h, "cuCtxSetCurrent", &d->set_current);
	if (fake) {
		bind(d->h, "fake_cuda_init_calls", &d->init_calls);
		bind(d->h, "fake_cuda_live_pinned", &d->live_pinned);
		bind(d->h, "fake_cuda_retains", &d->retains);
		bind(d->h, "fake_cuda_last_export", &d->last_export);
	}
}

static void drv_close(struct drv *d)
{
	dlclose(d->h); /* drops only the reference drv_open() took */
}

/*
 * Allocate device memory on device 0 as an application would, then leave
 * the thread without a current context: urpc must find one itself.
 */
static void *dev_alloc(struct drv *d, size_t len)
{
	unsigned long long p = 0;
	void *ctx = NULL;

	cr_assert_eq(d->primary_retain(&ctx, 0), 0);
	cr_assert_eq(d->set_current(ctx), 0);
	cr_assert_eq(d->mem_alloc(&p, len), 0);
	cr_assert_eq(d->set_current(NULL), 0);
	return (void *)(uintptr_t)p;
}

static void dev_free(struct drv *d, void *p)
{
	void *ctx = NULL;

	cr_assert_eq(d->primary_retain(&ctx, 0), 0);
	cr_assert_eq(d->set_current(ctx), 0);
	cr_assert_eq(d->mem_free((unsigned long long)(uintptr_t)p), 0);
	cr_assert_eq(d->set_current(NULL), 0);
}

static void load_fake(const char *path, struct drv *d)
{
	cr_assert_eq(setenv("URPC_CUDA_LIB", path, 1), 0);
	cr_assert_eq(urpc__cuda_load(), 0, "load failed: %s", urpc__cuda_why());
	drv_open(d, path, true);
}

struct captured {
	int lines;
	char last[512];
};

static void capture(enum urpc_log_level level, const char *line, void *arg)
{
	struct captured *c = arg;

	if (strstr(line, "dma-buf")) {
		c->lines++;
		snprintf(c->last, sizeof(c->last), "%s", line);
	}
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 31 + seed);
}

/* Host -> device -> host through pinned memory; contents checked. */
static void round_trip(void *dev, size_t len)
{
	unsigned char *pin = NULL, *back = malloc(len);

	cr_assert_not_null(back);
	cr_assert_eq(urpc__cuda_host_alloc(len, (void **)&pin), 0);
	cr_assert_not_null(pin);
	cr_assert_not(urpc__cuda_is_device_ptr(pin), "pinned host memory is not device memory");
	fill(pin, len, 7);
	cr_assert_eq(urpc__cuda_copy_to_device(dev, pin, len), 0);
	memset(back, 0, len);
	cr_assert_eq(urpc__cuda_copy_to_host(back, dev, len), 0);
	cr_assert_eq(memcmp(back, pin, len), 0, "the bytes came back changed");
	/* an interior, odd-sized piece, into plain (pageable) host memory */
	memset(back, 0, len);
	cr_assert_eq(urpc__cuda_copy_to_host(back, (char *)dev + 13, len / 3), 0);
	cr_assert_eq(memcmp(back, pin + 13, len / 3), 0);
	urpc__cuda_host_free(pin);
	free(back);
}

Test(cuda, no_library_enodev_with_reason)
{
	struct urpc_rpc_opts o;
	struct urpc_nexus *nx;
	struct urpc_rpc *rpc;
	char bus[URPC_CUDA_PCI_BUS_ID_LEN];
	uint64_t off;
	void *p = NULL;
	int x = 0, fd;

	cr_assert_eq(setenv("URPC_CUDA_LIB", "/nonexistent/libcuda.so.1", 1), 0);
	cr_assert(strstr(urpc__cuda_why(), "not loaded") != NULL, "%s", urpc__cuda_why());
	cr_assert_eq(urpc__cuda_load(), -ENODEV);
	cr_assert(strstr(urpc__cuda_why(), "cannot open shared object file") != NULL, "%s",
		  urpc__cuda_why());
	cr_assert_eq(urpc__cuda_load(), -ENODEV, "the answer does not change");
	cr_assert_not(urpc__cuda_is_loaded());

	cr_assert_not(urpc__cuda_is_device_ptr(&x));
	cr_assert_eq(urpc__cuda_device_count(), -ENODEV);
	cr_assert_eq(urpc__cuda_host_alloc(4096, &p), -ENODEV);
	cr_assert_null(p);
	urpc__cuda_host_free(&x); /* ignored */
	cr_assert_eq(urpc__cuda_copy_to_host(&x, &x, sizeof(x)), -ENODEV);
	cr_assert_eq(urpc__cuda_copy_to_device(&x, &x, sizeof(x)), -ENODEV);
	cr_assert_eq(urpc__cuda_dmabuf_fd(&x, sizeof(x), &fd, &off), -ENODEV);
	cr_assert_not(urpc__cuda_has_dmabuf(0));
	cr_assert_eq(urpc__cuda_pci_bus_id(0, bus, sizeof(bus)), -ENODEV);

	/* urpc itself is unchanged */
	cr_assert_eq(urpc_nexus_create(NULL, &nx), 0);
	urpc_rpc_opts_init(&o);
	o.transport = URPC_TRANSPORT_LOOP;
	cr_assert_eq(urpc_rpc_create(nx, 1, &o, &rpc), 0);
	cr_assert_eq(urpc_rpc_destroy(rpc), 0);
	cr_assert_eq(urpc_nexus_destroy(nx), 0);
}

Test(cuda, library_without_driver_symbols)
{
	cr_assert_eq(setenv("URPC_CUDA_LIB", "libm.so.6", 1), 0);
	cr_assert_eq(urpc__cuda_load(), -ENODEV);
	cr_assert(strstr(urpc__cuda_why(), "has no cuInit") != NULL, "%s", urpc__cuda_why());
}

Test(cuda, no_device)
{
	cr_assert_eq(setenv("FAKE_CUDA_NO_DEVICE", "1", 1), 0);
	cr_assert_eq(setenv("URPC_CUDA_LIB", FAKE_CUDA, 1), 0);
	cr_assert_eq(urpc__cuda_load(), -ENODEV);
	cr_assert(strstr(urpc__cuda_why(), "cuInit failed: CUDA_ERROR_NO_DEVICE") != NULL, "%s",
		  urpc__cuda_why());
	cr_assert_eq(urpc__cuda_device_count(), -ENODEV);
}

static void *load_thread(void *arg)
{
	return (void *)(intptr_t)urpc__cuda_load();
}

Test(cuda, load_once_from_many_threads)
{
	pthread_t t[4];
	struct drv d;
	void *ret;
	int i;

	cr_assert_eq(setenv("URPC_CUDA_LIB", FAKE_CUDA, 1), 0);
	for (i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, load_thread, NULL), 0);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(pthread_join(t[i], &ret), 0);
		cr_assert_eq((intptr_t)ret, 0, "%s", urpc__cuda_why());
	}
	cr_assert_eq(urpc__cuda_load(), 0);
	cr_assert(urpc__cuda_is_loaded());
	cr_assert_str_empty(urpc__cuda_why());
	drv_open(&d, FAKE_CUDA, true);
	cr_assert_eq(d.init_calls(), 1, "cuInit once per process");
	cr_assert_eq(urpc__cuda_device_count(), 2);
	drv_close(&d);
}

Test(cuda, device_pointer_detection)
{
	void *dev, *pin = NULL, *heap = malloc(64);
	struct drv d;
	int x = 0;

	load_fake(FAKE_CUDA, &d);
	dev = dev_alloc(&d, 1 << 20);
	cr_assert(urpc__cuda_is_device_ptr(dev));
	cr_assert(urpc__cuda_is_device_ptr((char *)dev + 12345), "an interior pointer");
	cr_assert(urpc__cuda_is_device_ptr((char *)dev + (1 << 20) - 1), "the last byte");
	cr_assert_not(urpc__cuda_is_device_ptr(&x), "the stack");
	cr_assert_not(urpc__cuda_is_device_ptr(heap), "the heap");
	cr_assert_not(urpc__cuda_is_device_ptr(NULL));
	cr_assert_eq(urpc__cuda_host_alloc(100, &pin), 0);
	cr_assert_not(urpc__cuda_is_device_ptr(pin), "pinned host memory");
	urpc__cuda_host_free(pin);
	dev_free(&d, dev);
	cr_assert_not(urpc__cuda_is_device_ptr(dev), "freed device memory");
	cr_assert_eq(d.live_pinned(), 0);
	free(heap);
	drv_close(&d);
}

Test(cuda, staging_round_trip)
{
	size_t len = (1 << 20) + 333;
	struct drv d;
	void *dev, *p = NULL;
	int x = 0;

	load_fake(FAKE_CUDA, &d);
	dev = dev_alloc(&d, len);
	round_trip(dev, len);
	cr_assert_eq(d.live_pinned(), 0, "every pinned buffer was freed");
	/* urpc retained the primary context once (the test holds one more) and keeps it */
	cr_assert_eq(d.retains(0), 2);
	round_trip(dev, 4096);
	cr_assert_eq(d.retains(0), 2);

	cr_assert_eq(urpc__cuda_copy_to_host(&x, dev, 0), 0, "nothing to copy");
	cr_assert_eq(urpc__cuda_copy_to_host(&x, &x, sizeof(x)), -EINVAL, "not device memory");
	cr_assert_eq(urpc__cuda_copy_to_device((char *)dev + len - 2, &x, sizeof(x)), -EINVAL,
		     "past the end of the allocation");
	cr_assert_eq(urpc__cuda_copy_to_host(NULL, dev, 1), -EINVAL);
	cr_assert_eq(urpc__cuda_host_alloc(0, &p), -EINVAL);
	urpc__cuda_host_free(NULL);
	dev_free(&d, dev);
	drv_close(&d);
}

struct thread_arg {
	void *dev;
	size_t len;
};

static void *stage_thread(void *arg)
{
	struct thread_arg *a = arg;

	round_trip(a->dev, a->len);
	return NULL;
}

Test(cuda, staging_on_a_thread_without_context)
{
	struct thread_arg a;
	struct drv d;
	pthread_t t;

	load_fake(FAKE_CUDA, &d);
	a.len = 3 * 4096 + 5;
	a.dev = dev_alloc(&d, a.len);
	cr_assert_eq(pthread_create(&t, NULL, stage_thread, &a), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(d.live_pinned(), 0);
	dev_free(&d, a.dev);
	drv_close(&d);
}

/* The exported bytes at @offset must be those at @p; the fd must be a live one. */
static void check_export(int fd, uint64_t offset, size_t export_size, const void *p, size_t len)
{
	struct stat st;
	unsigned char *m;

	cr_assert_geq(fd, 0);
	cr_assert_neq(fcntl(fd, F_GETFD), -1, "the fd is open");
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((size_t)st.st_size, export_size);
	m = mmap(NULL, export_size, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(memcmp(m + offset, p, len), 0, "offset %llu points elsewhere",
		     (unsigned long long)offset);
	munmap(m, export_size);
}

Test(cuda, dmabuf_unaligned_pointer)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = 3 * ps, size;
	unsigned char *dev, *pattern = malloc(len);
	unsigned long long start;
	uint64_t off = 0;
	struct drv d;
	int fd = -1, x = 0;

	load_fake(FAKE_CUDA, &d);
	cr_assert(urpc__cuda_has_dmabuf(0));
	cr_assert_not(urpc__cuda_has_dmabuf(7), "no such device");
	dev = dev_alloc(&d, len);
	fill(pattern, len, 99);
	cr_assert_eq(urpc__cuda_copy_to_device(dev, pattern, len), 0);

	/* 100 bytes in, across a page boundary: two pages from the allocation's start */
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev + 100, ps + 50, &fd, &off), 0);
	d.last_export(&start, &size);
	cr_assert_eq(start, (unsigned long long)(uintptr_t)dev);
	cr_assert_eq(size, 2 * ps);
	cr_assert_eq(off, 100);
	check_export(fd, off, size, pattern + 100, ps + 50);
	close(fd);

	/* one byte in the last page */
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev + 2 * ps + 7, 1, &fd, &off), 0);
	d.last_export(&start, &size);
	cr_assert_eq(start, (unsigned long long)(uintptr_t)(dev + 2 * ps));
	cr_assert_eq(size, ps);
	cr_assert_eq(off, 7);
	check_export(fd, off, size, pattern + 2 * ps + 7, 1);
	close(fd);

	/* already aligned: offset 0 */
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, len, &fd, &off), 0);
	cr_assert_eq(off, 0);
	check_export(fd, off, len, pattern, len);
	close(fd);

	cr_assert_eq(urpc__cuda_dmabuf_fd(&x, sizeof(x), &fd, &off), -EINVAL, "host memory");
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, 0, &fd, &off), -EINVAL);
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, 1, NULL, &off), -EINVAL);
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev + ps, 3 * ps, &fd, &off), -EINVAL,
		     "past the end of the allocation");
	dev_free(&d, dev);
	free(pattern);
	drv_close(&d);
}

Test(cuda, dmabuf_unsupported_device)
{
	struct captured c = {0};
	uint64_t off;
	struct drv d;
	void *dev;
	int fd = -1;

	cr_assert_eq(setenv("FAKE_CUDA_NO_DMABUF", "1", 1), 0);
	urpc_log_set_sink(capture, &c);
	load_fake(FAKE_CUDA, &d);
	dev = dev_alloc(&d, 8192);
	cr_assert_not(urpc__cuda_has_dmabuf(0));
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, 8192, &fd, &off), -ENOTSUP);
	cr_assert_eq(urpc__cuda_dmabuf_fd((char *)dev + 1, 10, &fd, &off), -ENOTSUP);
	cr_assert_eq(fd, -1, "no fd on failure");
	cr_assert_eq(c.lines, 1, "logged once per process");
	cr_assert(strstr(c.last, "dma-buf not supported, staging through pinned host memory"), "%s",
		  c.last);
	cr_assert(strstr(c.last, "DMA_BUF_SUPPORTED"), "the log says why: %s", c.last);
	round_trip(dev, 8192); /* the fallback works */
	urpc_log_set_sink(NULL, NULL);
	dev_free(&d, dev);
	drv_close(&d);
}

Test(cuda, dmabuf_export_refused)
{
	struct captured c = {0};
	uint64_t off;
	struct drv d;
	void *dev;
	int fd = -1;

	cr_assert_eq(setenv("FAKE_CUDA_DMABUF_FAILS", "1", 1), 0);
	urpc_log_set_sink(capture, &c);
	load_fake(FAKE_CUDA, &d);
	dev = dev_alloc(&d, 4096);
	cr_assert(urpc__cuda_has_dmabuf(0), "the device claims support");
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, 4096, &fd, &off), -ENOTSUP);
	cr_assert_eq(c.lines, 1);
	cr_assert(strstr(c.last, "CUDA_ERROR_NOT_SUPPORTED"), "%s", c.last);
	urpc_log_set_sink(NULL, NULL);
	dev_free(&d, dev);
	drv_close(&d);
}

Test(cuda, missing_symbol_disables_only_its_feature)
{
	char bus[URPC_CUDA_PCI_BUS_ID_LEN];
	struct captured c = {0};
	uint64_t off;
	struct drv d;
	void *dev;
	int fd = -1;

	urpc_log_set_sink(capture, &c);
	load_fake(FAKE_CUDA_OLD, &d);
	cr_assert(dlsym(d.h, "cuMemGetHandleForAddressRange") == NULL, "an old driver");
	cr_assert_eq(urpc__cuda_device_count(), 2);
	dev = dev_alloc(&d, 10000);
	cr_assert(urpc__cuda_is_device_ptr(dev));
	round_trip(dev, 10000);
	cr_assert_eq(urpc__cuda_pci_bus_id(0, bus, sizeof(bus)), 0);
	cr_assert_not(urpc__cuda_has_dmabuf(0));
	cr_assert_eq(urpc__cuda_dmabuf_fd(dev, 10000, &fd, &off), -ENOTSUP);
	cr_assert_eq(c.lines, 1);
	cr_assert(strstr(c.last, "no cuMemGetHandleForAddressRange"), "%s", c.last);
	urpc_log_set_sink(NULL, NULL);
	dev_free(&d, dev);
	drv_close(&d);
}

Test(cuda, pci_bus_id)
{
	char bus[URPC_CUDA_PCI_BUS_ID_LEN];
	struct drv d;

	load_fake(FAKE_CUDA, &d);
	cr_assert_eq(urpc__cuda_pci_bus_id(0, bus, sizeof(bus)), 0);
	cr_assert_str_eq(bus, "0000:3B:00.0");
	cr_assert_eq(urpc__cuda_pci_bus_id(1, bus, sizeof(bus)), 0);
	cr_assert_str_eq(bus, "0000:3C:00.0");
	cr_assert_eq(urpc__cuda_pci_bus_id(2, bus, sizeof(bus)), -ENODEV, "two devices");
	cr_assert_eq(urpc__cuda_pci_bus_id(-1, bus, sizeof(bus)), -ENODEV);
	cr_assert_eq(urpc__cuda_pci_bus_id(0, bus, 12), -ERANGE);
	cr_assert_eq(urpc__cuda_pci_bus_id(0, NULL, 16), -EINVAL);
	drv_close(&d);
}

/* The real driver, where this machine has one. */
Test(cuda, real_driver)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = 4 << 20;
	char bus[URPC_CUDA_PCI_BUS_ID_LEN];
	struct thread_arg a;
	uint64_t off = 0;
	struct drv d;
	pthread_t t;
	int n, x = 0, fd = -1, ret;

	unsetenv("URPC_CUDA_LIB");
	if (urpc__cuda_load()) {
		if (strstr(urpc__cuda_why(), "cannot open shared object file"))
			cr_skip_test("no CUDA driver on this machine: libcuda.so.1 not found");
		cr_skip_test("the CUDA driver does not start here: %s", urpc__cuda_why());
	}
	n = urpc__cuda_device_count();
	cr_assert_gt(n, 0);
	cr_assert_eq(urpc__cuda_pci_bus_id(0, bus, sizeof(bus)), 0);
	cr_log_info("%d device(s); device 0 at %s, dma-buf %s", n, bus,
		    urpc__cuda_has_dmabuf(0) ? "yes" : "no");

	drv_open(&d, "libcuda.so.1", false);
	a.len = len;
	a.dev = dev_alloc(&d, len);
	cr_assert(urpc__cuda_is_device_ptr(a.dev));
	cr_assert(urpc__cuda_is_device_ptr((char *)a.dev + 100));
	cr_assert_not(urpc__cuda_is_device_ptr(&x));
	round_trip(a.dev, len);
	cr_assert_eq(pthread_create(&t, NULL, stage_thread, &a), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);

	ret = urpc__cuda_dmabuf_fd((char *)a.dev + 100, ps + 50, &fd, &off);
	if (urpc__cuda_has_dmabuf(0)) {
		cr_assert_eq(ret, 0, "export failed: %d", ret);
		cr_assert_geq(fd, 0);
		cr_assert_eq(off, 100);
		close(fd);
	} else {
		cr_assert_eq(ret, -ENOTSUP);
	}
	dev_free(&d, a.dev);
	drv_close(&d);
}
