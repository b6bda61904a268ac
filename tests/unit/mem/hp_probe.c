/* SPDX-License-Identifier: MIT */
/*
 * Helper of test_hugepage: libhugetlbfs looks for hugetlbfs mounts once, when
 * the process starts, so the libhugetlbfs case runs in a fresh process after
 * the test mounted one. Prints the backing it got, or the error.
 */
#include <stdio.h>

#include "mem/hugepage.h"

int main(void)
{
	struct urpc_hp_region r;
	int ret = urpc__hp_alloc(4096, URPC_HP_NO_HUGETLB | URPC_HP_NO_FALLBACK, &r);

	if (ret) {
		printf("error %d\n", ret);
		return 1;
	}
	((volatile char *)r.addr)[0] = 1;
	printf("%s %zu\n", urpc__hp_backing_str(r.backing), r.len);
	urpc__hp_free(&r);
	return 0;
}
