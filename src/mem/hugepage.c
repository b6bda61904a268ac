/* SPDX-License-Identifier: MIT */
/*
 * Hugepage-backed regions: libhugetlbfs, then MAP_HUGETLB, then 4 KiB pages.
 * See hugepage.h for the contract.
 */
#define URPC_LOG_MODULE "mem"
#include "hugepage.h"

#include <errno.h>
#include <hugetlbfs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../util/compiler.h"
#include "../util/log.h"

#define SMALL_PAGE 4096ul

const char *urpc__hp_backing_str(enum urpc_hp_backing b)
{
	switch (b) {
	case URPC_HP_LIBHUGETLBFS:
		return "libhugetlbfs";
	case URPC_HP_MMAP_HUGETLB:
		return "mmap-hugetlb";
	case URPC_HP_4K:
		return "4k";
	}
	return "?";
}

/* Default huge page size from /proc/meminfo ("Hugepagesize: 2048 kB"). */
size_t urpc__hp_page_size(void)
{
	static atomic_size_t cached = SIZE_MAX;
	size_t sz = atomic_load_explicit(&cached, memory_order_relaxed);
	char line[128];
	FILE *f;

	if (sz != SIZE_MAX)
		return sz;
	sz = 0;
	f = fopen("/proc/meminfo", "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			unsigned long kb;

			if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1) {
				sz = (size_t)kb * 1024;
				break;
			}
		}
		fclose(f);
	}
	atomic_store_explicit(&cached, sz, memory_order_relaxed);
	return sz;
}

/*
 * libhugetlbfs prints a warning to stderr whenever no hugetlbfs is mounted;
 * that is an expected condition here, so keep it quiet unless the user asked
 * for its messages.
 */
static void quiet_libhugetlbfs(void)
{
	static atomic_flag done = ATOMIC_FLAG_INIT;

	if (!atomic_flag_test_and_set(&done))
		setenv("HUGETLB_VERBOSE", "0", 0);
}

/*
 * Free hugepages of @hps bytes right now, or -1 when unknown. libhugetlbfs
 * reads its verbosity before we can quiet it and warns on every failed
 * mapping, so a request that cannot fit is not made at all.
 */
static long free_hugepages(long hps)
{
	char path[96];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%ldkB/free_hugepages",
		 hps / 1024);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

/* Surplus hugepages the kernel may create on demand (0 when none). */
static bool overcommit_hugepages(void)
{
	FILE *f = fopen("/proc/sys/vm/nr_overcommit_hugepages", "re");
	long n = 0;

	if (!f)
		return false;
	if (fscanf(f, "%ld", &n) != 1)
		n = 0;
	fclose(f);
	return n > 0;
}

/* libhugetlbfs only when a hugetlbfs is mounted: it otherwise warns and fails. */
static int try_libhugetlbfs(size_t len, struct urpc_hp_region *out)
{
	long hps, nfree;
	size_t rounded;
	void *p;

	quiet_libhugetlbfs();
	if (!hugetlbfs_find_path())
		return -ENOENT;
	hps = gethugepagesize();
	if (hps <= 0)
		return -ENOENT;
	rounded = URPC_ALIGN_UP(len, (size_t)hps);
	nfree = free_hugepages(hps);
	if (nfree >= 0 && (size_t)nfree < rounded / (size_t)hps && !overcommit_hugepages())
		return -ENOMEM;
	p = get_huge_pages(rounded, GHP_DEFAULT);
	if (!p)
		return -ENOMEM;
	out->addr = p;
	out->len = rounded;
	out->backing = URPC_HP_LIBHUGETLBFS;
	return 0;
}

static int try_mmap(size_t len, size_t page, int extra, enum urpc_hp_backing b,
		    struct urpc_hp_region *out)
{
	size_t rounded = URPC_ALIGN_UP(len, page);
	void *p;

	if (rounded < len)
		return -ENOMEM;
	p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	out->addr = p;
	out->len = rounded;
	out->backing = b;
	return 0;
}

int urpc__hp_alloc(size_t len, unsigned flags, struct urpc_hp_region *out)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;
	size_t hps = urpc__hp_page_size();
	int ret;

	if (!len || !out)
		return -EINVAL;
	if (hps && !(flags & URPC_HP_NO_LIBHUGETLBFS) && !try_libhugetlbfs(len, out))
		return 0;
	if (hps && !(flags & URPC_HP_NO_HUGETLB) &&
	    !try_mmap(len, hps, MAP_HUGETLB, URPC_HP_MMAP_HUGETLB, out))
		return 0;
	if (flags & URPC_HP_NO_FALLBACK)
		return -ENOMEM;
	ret = try_mmap(len, SMALL_PAGE, 0, URPC_HP_4K, out);
	if (ret)
		return -ENOMEM;
	if ((~flags & URPC_HP_FORCE_4K) && !atomic_flag_test_and_set(&warned))
		URPC_INFO(-1, "no hugepages reserved: message buffers use 4 KiB pages (slower); "
			      "to reserve 2 MiB pages: echo 512 > /proc/sys/vm/nr_hugepages");
	return 0;
}

void urpc__hp_free(struct urpc_hp_region *r)
{
	if (!r || !r->addr)
		return;
	if (r->backing == URPC_HP_LIBHUGETLBFS)
		free_huge_pages(r->addr);
	else
		munmap(r->addr, r->len);
	memset(r, 0, sizeof(*r));
}
