/* SPDX-License-Identifier: MIT */
/* The hugepage allocator: each backing, flags, fallback. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem/hugepage.h"

static long read_nr_hugepages(void)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "r");
	long n = -1;

	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

static int write_nr_hugepages(long n)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	int ok;

	if (!f)
		return -errno;
	ok = fprintf(f, "%ld\n", n) > 0;
	ok &= fclose(f) == 0;
	return ok ? 0 : -EIO;
}

/*
 * nr_hugepages is one setting for the whole machine, and another build's
 * test_hugepage may run at the same time: if it saves the setting before
 * this one restores it, it puts back a stale value (pages stay reserved for
 * good, or go from under a case that just reserved them). A case that
 * writes the setting takes this lock first; it holds it until its process
 * ends (Criterion forks one per case), the lock's file going with it.
 */
static void lock_nr_hugepages(void)
{
	int fd = open("/tmp/urpc-test-nr_hugepages.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "cannot open the nr_hugepages lock: %s", strerror(errno));
	cr_assert_eq(flock(fd, LOCK_EX), 0, "cannot take the nr_hugepages lock: %s",
		     strerror(errno));
}

/*
 * Reserve @want free hugepages for this test; returns the old setting or
 * skips. Other test binaries run at the same time (ctest -j) and take
 * hugepages for their rings and pools while the reservation lasts, so
 * reserve a generous margin beyond what the test itself maps.
 */
static long reserve_or_skip(long want)
{
	long old;

	want += 64;
	if (geteuid() != 0)
		cr_skip_test("not root: cannot reserve hugepages in /proc/sys/vm/nr_hugepages");
	lock_nr_hugepages();
	old = read_nr_hugepages();
	if (old < 0 || urpc__hp_page_size() == 0)
		cr_skip_test("this kernel has no hugepage support");
	if (write_nr_hugepages(old + want) || read_nr_hugepages() < old + want) {
		write_nr_hugepages(old);
		cr_skip_test("the kernel could not reserve %ld more hugepages", want);
	}
	return old;
}

static void check_usable(const struct urpc_hp_region *r, size_t len)
{
	const unsigned char *p = r->addr;
	size_t i;

	cr_assert_not_null(r->addr);
	cr_assert_geq(r->len, len);
	cr_assert_eq((uintptr_t)r->addr % 4096, 0);
	for (i = 0; i < r->len; i += 4096)
		cr_assert_eq(p[i], 0, "memory must come zeroed");
	memset(r->addr, 0xab, len);
}

Test(hugepage, forced_4k_always_works)
{
	struct urpc_hp_region r;

	cr_assert_eq(urpc__hp_alloc(10000, URPC_HP_FORCE_4K, &r), 0);
	cr_assert_eq(r.backing, URPC_HP_4K);
	cr_assert_eq(r.len, 12288);
	check_usable(&r, 10000);
	urpc__hp_free(&r);
	cr_assert_null(r.addr);
	urpc__hp_free(&r); /* freeing a zeroed region is a no-op */
}

Test(hugepage, bad_arguments)
{
	struct urpc_hp_region r;

	cr_assert_eq(urpc__hp_alloc(0, 0, &r), -EINVAL);
	cr_assert_eq(urpc__hp_alloc(4096, 0, NULL), -EINVAL);
	cr_assert_str_eq(urpc__hp_backing_str(URPC_HP_MMAP_HUGETLB), "mmap-hugetlb");
}

Test(hugepage, no_fallback_without_hugepages_fails)
{
	struct urpc_hp_region r;
	long old;
	int ret;

	if (geteuid() != 0)
		cr_skip_test("needs root to set nr_hugepages to 0 for this case");
	lock_nr_hugepages();
	old = read_nr_hugepages();
	if (old < 0)
		cr_skip_test("this kernel has no hugepage support");
	if (write_nr_hugepages(0))
		cr_skip_test("cannot write /proc/sys/vm/nr_hugepages");
	ret = urpc__hp_alloc(1 << 20, URPC_HP_NO_LIBHUGETLBFS | URPC_HP_NO_FALLBACK, &r);
	write_nr_hugepages(old);
	if (read_nr_hugepages() == 0 && ret == 0)
		cr_skip_test("hugepages available through overcommit; cannot force a failure");
	cr_assert_eq(ret, -ENOMEM);
}

Test(hugepage, mmap_hugetlb_backing)
{
	struct urpc_hp_region r;
	size_t hps = urpc__hp_page_size();
	long old = reserve_or_skip(4);
	int ret;

	ret = urpc__hp_alloc(hps + 1, URPC_HP_NO_LIBHUGETLBFS | URPC_HP_NO_FALLBACK, &r);
	cr_assert_eq(ret, 0, "MAP_HUGETLB failed with hugepages reserved: %d", ret);
	cr_assert_eq(r.backing, URPC_HP_MMAP_HUGETLB);
	cr_assert_eq(r.len, 2 * hps);
	cr_assert_eq((uintptr_t)r.addr % hps, 0);
	check_usable(&r, hps + 1);
	urpc__hp_free(&r);
	write_nr_hugepages(old);
}

Test(hugepage, libhugetlbfs_backing)
{
	char dir[64], cmd[128], out[128] = "";
	FILE *f;
	long old;
	int mounted = 0;

	old = reserve_or_skip(4);
	if (system("grep -q ' hugetlbfs ' /proc/mounts") != 0) {
		snprintf(dir, sizeof(dir), "/tmp/urpc-hugetlbfs-%d", (int)getpid());
		mkdir(dir, 0700);
		if (mount("none", dir, "hugetlbfs", 0, NULL) != 0) {
			rmdir(dir);
			write_nr_hugepages(old);
			cr_skip_test("cannot mount a hugetlbfs: %s", strerror(errno));
		}
		mounted = 1;
	}
	/* libhugetlbfs reads the mount table at process start: ask a fresh one. */
	snprintf(cmd, sizeof(cmd), "%s", HP_PROBE);
	f = popen(cmd, "r");
	if (f) {
		if (!fgets(out, sizeof(out), f))
			out[0] = 0;
		pclose(f);
	}
	if (mounted) {
		umount(dir);
		rmdir(dir);
	}
	write_nr_hugepages(old);
	cr_assert(strncmp(out, "libhugetlbfs 2097152", 20) == 0 ||
			  strncmp(out, "libhugetlbfs ", 13) == 0,
		  "hp_probe printed '%s'", out);
}

Test(hugepage, default_order_prefers_hugepages_when_reserved)
{
	struct urpc_hp_region r;
	long old = reserve_or_skip(2);

	cr_assert_eq(urpc__hp_alloc(4096, URPC_HP_NO_LIBHUGETLBFS, &r), 0);
	cr_expect_eq(r.backing, URPC_HP_MMAP_HUGETLB);
	urpc__hp_free(&r);
	write_nr_hugepages(old);
}
