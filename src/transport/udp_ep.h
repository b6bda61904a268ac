/* SPDX-License-Identifier: MIT */
/*
 * The udp transport's endpoint functions (udp.c), for xdp.c, whose
 * endpoints are udp endpoints with an AF_XDP datapath (udp_int.h): it
 * creates, describes, resolves and frees them with the same code, so both
 * transports share the endpoint bytes and the wire format.
 */
#ifndef URPC_TRANSPORT_UDP_EP_H
#define URPC_TRANSPORT_UDP_EP_H

#include "udp_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Set up @u (zeroed by the caller) from @cfg: the rings, the arrays and the
 * socket bound to cfg->host:cfg->port, with @ops and @kind in its base.
 * 0, or -errno logged; on failure the caller frees @u with
 * urpc__udp_ep_free(). Not for the datapath.
 */
int urpc__udp_ep_init(struct udp_tp *u, const struct urpc_tp_cfg *cfg,
		      const struct urpc_tp_ops *ops, enum urpc_transport_kind kind);
/* Free everything of @u (peers included) and @u itself. */
void urpc__udp_ep_free(struct udp_tp *u);

/* The ops of transport.h, as udp's table has them. */
size_t urpc__udp_get_endpoint(struct urpc_tp *tp, uint8_t *buf);
/* Whether received entry @rx came from exactly @peer's address and port (rx_src). */
bool urpc__udp_rx_is_from(struct urpc_tp *tp, const struct urpc_tp_rx *rx,
			  const struct urpc_tp_peer *peer);
int urpc__udp_ep_host(struct urpc_tp *tp, const uint8_t *ep, size_t len, uint32_t *addr);
int urpc__udp_resolve_peer(struct urpc_tp *tp, const uint8_t *ep, size_t len,
			   struct urpc_tp_peer **out);
void urpc__udp_release_peer(struct urpc_tp *tp, struct urpc_tp_peer *peer);
int urpc__udp_wait_arm(struct urpc_tp *tp);
void urpc__udp_wait_ack(struct urpc_tp *tp);

/* Is @tp a struct udp_tp: a udp endpoint, or an xdp one? */
static inline bool urpc__udp_is_udp_tp(const struct urpc_tp *tp)
{
	return tp && (tp->ops == &urpc__tp_udp_ops || tp->kind == URPC_TRANSPORT_XDP);
}

#ifdef __cplusplus
}
#endif

#endif /* URPC_TRANSPORT_UDP_EP_H */
