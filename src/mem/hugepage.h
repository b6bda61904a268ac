/* SPDX-License-Identifier: MIT */
/*
 * Hugepage-backed memory regions.
 *
 * urpc__hp_alloc() tries, in order: libhugetlbfs (get_huge_pages), an
 * anonymous mmap(MAP_HUGETLB), and plain 4 KiB pages (with one warning per
 * process). It reports which backing it got. Regions are zero-filled and
 * aligned to at least 4 KiB (2 MiB for hugepage backings).
 *
 * Thread: any. Not for the datapath: each call is a syscall.
 */
#ifndef URPC_MEM_HUGEPAGE_H
#define URPC_MEM_HUGEPAGE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum urpc_hp_backing {
	URPC_HP_LIBHUGETLBFS = 0,
	URPC_HP_MMAP_HUGETLB = 1,
	URPC_HP_4K = 2,
};

/* Flags for urpc__hp_alloc(). */
#define URPC_HP_NO_LIBHUGETLBFS 0x1u /* skip the libhugetlbfs attempt */
#define URPC_HP_NO_HUGETLB 0x2u	     /* skip the MAP_HUGETLB attempt */
#define URPC_HP_FORCE_4K (URPC_HP_NO_LIBHUGETLBFS | URPC_HP_NO_HUGETLB)
#define URPC_HP_NO_FALLBACK 0x4u /* fail with -ENOMEM instead of using 4 KiB pages */

struct urpc_hp_region {
	void *addr;
	size_t len; /* the mapped length: the request rounded up to the page size */
	enum urpc_hp_backing backing;
};

/* Human-readable name of a backing ("libhugetlbfs", "mmap-hugetlb", "4k"). */
const char *urpc__hp_backing_str(enum urpc_hp_backing b);

/*
 * Map at least @len bytes. Returns 0 and fills @out, or -EINVAL (len 0),
 * -ENOMEM (nothing could be mapped). The caller owns the region until
 * urpc__hp_free().
 */
int urpc__hp_alloc(size_t len, unsigned flags, struct urpc_hp_region *out);

/* Unmap a region from urpc__hp_alloc(); a zeroed region is ignored. */
void urpc__hp_free(struct urpc_hp_region *r);

/* Size of the default huge page in bytes, or 0 when the system has none. */
size_t urpc__hp_page_size(void);

#ifdef __cplusplus
}
#endif

#endif /* URPC_MEM_HUGEPAGE_H */
