/* SPDX-License-Identifier: MIT */
/*
 * The top of src/transport: the registry of transports (urpc__tp_ops()
 * names loop's, udp's, verbs's and xdp's tables), the choice of the default kind,
 * and the registration hooks the pool and the registration cache call
 * (they reach a transport only through its ops table). No transport calls
 * into this file: the default ops they share are in tp_default.c.
 */
#define URPC_LOG_MODULE "transport"
#include "transport.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../mem/regcache.h"
#include "../util/log.h"
#include "verbs_dev.h"

void urpc__tp_cfg_init(struct urpc_tp_cfg *cfg, enum urpc_transport_kind kind)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->kind = kind;
	cfg->rq_depth = 512;
	cfg->sq_depth = 256;
	cfg->host = "127.0.0.1";
	cfg->id = -1;
	cfg->one_sided_timeout_ms = 1000;
	cfg->numa_node = -1;
}

const struct urpc_tp_ops *urpc__tp_ops(enum urpc_transport_kind kind)
{
	switch (kind) {
	case URPC_TRANSPORT_LOOP:
		return &urpc__tp_loop_ops;
	case URPC_TRANSPORT_UDP:
		return &urpc__tp_udp_ops;
	case URPC_TRANSPORT_VERBS:
		return urpc__tp_verbs_ops();
	case URPC_TRANSPORT_XDP:
		return urpc__tp_xdp_ops();
	case URPC_TRANSPORT_DEFAULT:
		break;
	}
	return NULL;
}

/*
 * The kind DEFAULT stands for: URPC_TRANSPORT from the environment when set,
 * else verbs when an RDMA port is active (the one @device, URPC_DEVICE or
 * the first active port names), else udp. Logs the choice and why, once
 * per process. A device named explicitly that cannot be used is an error,
 * not a silent fall-back to udp.
 */
static int resolve_default(const struct urpc_tp_cfg *cfg, enum urpc_transport_kind *out)
{
	static int logged;
	const char *env = getenv("URPC_TRANSPORT");
	struct urpc_verbs_port port;
	const char *device = cfg->device;
	const char *why;
	int ret;

	if (env && *env) {
		if (urpc_transport_parse(env, out) < 0) {
			URPC_ERR(
				-1,
				"URPC_TRANSPORT=%s is not a transport; use loop, udp, verbs or xdp",
				env);
			return -EINVAL;
		}
		if (*out != URPC_TRANSPORT_DEFAULT)
			return 0;
	}
	if (!device || !*device)
		device = getenv("URPC_DEVICE");
	if (!urpc__verbs_built()) {
		why = "this build has no verbs transport";
	} else {
		ret = urpc__verbs_pick_port_near(device, cfg->near_pci, cfg->numa_node, &port);
		if (ret == 0) {
			*out = URPC_TRANSPORT_VERBS;
			if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
				URPC_INFO(-1,
					  "transport: verbs on %s:%u (active RDMA port); "
					  "URPC_TRANSPORT=udp|verbs|loop chooses another",
					  port.dev, port.port);
			return 0;
		}
		if ((device && *device) || ret == -EINVAL)
			return ret; /* a named device or a bad hint: logged */
		why = "no active RDMA port";
	}
	*out = URPC_TRANSPORT_UDP;
	if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		URPC_INFO(-1, "transport: udp (%s); URPC_TRANSPORT=udp|verbs|loop chooses another",
			  why);
	return 0;
}

URPC_API int urpc_transport_resolve(enum urpc_transport_kind kind, enum urpc_transport_kind *out)
{
	struct urpc_tp_cfg cfg;

	if (!out)
		return -EINVAL;
	if (kind != URPC_TRANSPORT_DEFAULT) {
		*out = kind;
		return 0;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.kind = kind;
	cfg.numa_node = -1;
	return resolve_default(&cfg, out);
}

int urpc__tp_create(const struct urpc_tp_cfg *cfg, struct urpc_tp **out)
{
	struct urpc_tp_cfg c = *cfg;
	const struct urpc_tp_ops *ops;
	int ret;

	if (c.kind == URPC_TRANSPORT_DEFAULT) {
		ret = resolve_default(&c, &c.kind);
		if (ret)
			return ret;
	}
	ops = urpc__tp_ops(c.kind);
	if (!ops) {
		URPC_ERR(c.id, "transport %s is not available in this build",
			 urpc_transport_str(c.kind));
		return -ENOTSUP;
	}
	ret = ops->create(&c, out);
	if (!ret && !(*out)->rx_burst)
		(*out)->rx_burst = ops->rx_burst;
	return ret;
}

int urpc__tp_pool_reg(void *ctx, void *addr, size_t len, struct urpc_mem_reg *out)
{
	/*
	 * Not the datapath: the pool calls this once per chunk. No peer may
	 * touch a chunk by itself: the engine grants a peer READ of exactly
	 * one large message's bytes while that message is in flight.
	 */
	return urpc__tp_regcache_reg(ctx, addr, len, URPC_TP_ACCESS_GRANT_READ, out);
}

void urpc__tp_pool_dereg(void *ctx, struct urpc_mem_reg *reg)
{
	struct urpc_tp *tp = ctx;
	struct urpc_tp_mr *mr = reg->handle;

	if (!mr)
		return;
	tp->ops->dereg_mem(tp, mr);
	free(mr);
	reg->handle = NULL;
}

static_assert(URPC_REGCACHE_ACCESS_REMOTE_READ == URPC_TP_ACCESS_REMOTE_READ &&
		      URPC_REGCACHE_ACCESS_REMOTE_WRITE == URPC_TP_ACCESS_REMOTE_WRITE &&
		      URPC_REGCACHE_ACCESS_GRANT_READ == URPC_TP_ACCESS_GRANT_READ &&
		      URPC_REGCACHE_ACCESS_GRANT_WRITE == URPC_TP_ACCESS_GRANT_WRITE &&
		      URPC_REGCACHE_ACCESS_ALL == URPC_TP_ACCESS_ALL,
	      "the cache passes its access bits to reg_mem unchanged");

int urpc__tp_regcache_reg(void *ctx, void *addr, size_t len, unsigned access,
			  struct urpc_mem_reg *out)
{
	struct urpc_tp *tp = ctx;
	struct urpc_tp_mr *mr;
	int ret;

	/* Not the datapath: the cache calls this on a miss, the pool per chunk. */
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	ret = tp->ops->reg_mem(tp, addr, len, access, mr);
	if (ret) {
		free(mr);
		return ret;
	}
	out->lkey = mr->lkey;
	out->rkey = mr->rkey;
	out->handle = mr;
	return 0;
}

void urpc__tp_regcache_dereg(void *ctx, struct urpc_mem_reg *reg)
{
	urpc__tp_pool_dereg(ctx, reg); /* the same undo: dereg_mem, then free the mr */
}
