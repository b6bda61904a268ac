/* SPDX-License-Identifier: MIT */
/*
 * Tests of the verbs and xdp transports (the contract suite, the integration tests
 * built once per transport, the verbs-only ones): skip the running case
 * when the transport under test is verbs and nothing here can run it.
 * Header-only, for test files (tests/ is on their include path).
 */
#ifndef URPC_TEST_VERBS_SKIP_H
#define URPC_TEST_VERBS_SKIP_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include <urpc/urpc.h>

#include "transport/verbs_dev.h"

/*
 * The host tests bind session management to and connect to: URPC_TEST_HOST
 * (tests/xdp-stage.sh: the address of URPC_TEST_DEVICE_A, so a client's
 * xdp endpoint is on the host its connect comes from), else 127.0.0.1.
 */
static inline const char *test_host(void)
{
	const char *h = getenv("URPC_TEST_HOST");

	return h && *h ? h : "127.0.0.1";
}

/*
 * No-op unless @kind is URPC_TRANSPORT_VERBS (the device is
 * URPC_TEST_DEVICE_A's) or URPC_TRANSPORT_XDP (interfaces in
 * URPC_TEST_DEVICE_A/_B, which tests/xdp-stage.sh sets up).
 */
static inline void verbs_skip_without_port(int kind)
{
	struct urpc_verbs_port port;

	if (kind == URPC_TRANSPORT_XDP && !URPC_HAVE_XDP)
		cr_skip_test("this build has no xdp transport (libxdp-dev, libbpf-dev or clang "
			     "missing at build time)");
	if (kind == URPC_TRANSPORT_XDP && !getenv("URPC_TEST_DEVICE_A"))
		cr_skip_test("xdp: no interface (URPC_TEST_DEVICE_A/_B unset: tests/xdp-stage.sh "
			     "runs it on a veth pair, as root)");
	if (kind != URPC_TRANSPORT_VERBS)
		return;
	if (!urpc__verbs_built())
		cr_skip_test("this build has no verbs transport (libibverbs not found)");
	if (urpc__verbs_pick_port(getenv("URPC_TEST_DEVICE_A"), &port) < 0)
		cr_skip_test("no active RDMA port (tests/vm/verbs-stage.sh runs it on Soft-RoCE)");
}

#endif /* URPC_TEST_VERBS_SKIP_H */
