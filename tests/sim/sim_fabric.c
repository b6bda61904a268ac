/* SPDX-License-Identifier: MIT */
/*
 * The fabric model (sim_fabric.h): ports as FIFOs with a rate, switch
 * buffers with drop-tail and ECN marking, and the path of a packet from
 * host to host through one switch or two tiers. Owns the ports; calls
 * sim_net's event queue and libc only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_fabric.h"

static void port_init(struct sim_port *p, double gbps, uint64_t buf, uint64_t ecn)
{
	memset(p, 0, sizeof(*p));
	p->ps_per_byte = (uint64_t)(8000.0 / gbps + 0.5);
	if (!p->ps_per_byte)
		p->ps_per_byte = 1;
	p->buf = buf;
	p->ecn = ecn;
}

static int ports_new(struct sim_port **ps, unsigned n, double gbps, uint64_t buf, uint64_t ecn,
		     bool hist)
{
	unsigned i;

	*ps = calloc(n ? n : 1, sizeof(**ps));
	if (!*ps)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		port_init(&(*ps)[i], gbps, buf, ecn);
		if (hist && !((*ps)[i].qhist = calloc(SIM_FAB_QBUCKETS, sizeof(uint32_t))))
			return -ENOMEM;
	}
	return 0;
}

static void ports_free(struct sim_port *ps, unsigned n)
{
	unsigned i;

	if (!ps)
		return;
	for (i = 0; i < n; i++)
		free(ps[i].qhist);
	free(ps);
}

int sim_fab_init(struct sim_fabric *f, const struct sim_fab_cfg *c)
{
	memset(f, 0, sizeof(*f));
	f->cfg = *c;
	f->tors = c->per_tor ? (c->hosts + c->per_tor - 1) / c->per_tor : 0;
	if (ports_new(&f->nic, c->hosts, c->host_gbps, UINT64_MAX, 0, false) ||
	    ports_new(&f->down, c->hosts, c->host_gbps, c->buf_bytes, c->ecn_bytes, true) ||
	    ports_new(&f->up, f->tors, c->up_gbps, c->buf_bytes, c->ecn_bytes, true) ||
	    ports_new(&f->spine, f->tors, c->up_gbps, c->buf_bytes, c->ecn_bytes, true)) {
		sim_fab_fini(f);
		return -ENOMEM;
	}
	return 0;
}

void sim_fab_fini(struct sim_fabric *f)
{
	ports_free(f->nic, f->cfg.hosts);
	ports_free(f->down, f->cfg.hosts);
	ports_free(f->up, f->tors);
	ports_free(f->spine, f->tors);
	f->nic = f->down = f->up = f->spine = NULL;
}

/* The @hop-th port on the way from @src to @dst, or NULL past the last. */
static struct sim_port *port_at(struct sim_fabric *f, unsigned src, unsigned dst, unsigned hop)
{
	unsigned ts, td;

	if (hop == 0)
		return &f->nic[src];
	if (!f->tors || (ts = src / f->cfg.per_tor) == (td = dst / f->cfg.per_tor))
		return hop == 1 ? &f->down[dst] : NULL;
	switch (hop) {
	case 1:
		return &f->up[ts];
	case 2:
		return &f->spine[td];
	case 3:
		return &f->down[dst];
	}
	return NULL;
}

uint64_t sim_fab_queued(const struct sim_port *p, uint64_t now_ns)
{
	uint64_t now_ps = now_ns * 1000;

	return p->free_ps > now_ps ? (p->free_ps - now_ps) / p->ps_per_byte : 0;
}

void sim_fab_send(struct sim_fabric *f, struct sim_net *n, struct sim_ev *e, unsigned src,
		  unsigned dst, uint32_t wire, uint64_t extra_ns, bool lossless)
{
	e->fk = e->kind;
	e->kind = EV_HOP;
	e->src = (uint16_t)src;
	e->dst = (uint16_t)dst;
	e->hop = 0;
	e->wire = wire ? wire : 1;
	e->extra_ns = extra_ns;
	e->lossless = lossless;
	e->ecn = false;
	e->t = n->now;
	sim_ev_push(n, e);
}

void sim_fab_hop(struct sim_fabric *f, struct sim_net *n, struct sim_ev *e)
{
	struct sim_port *p = port_at(f, e->src, e->dst, e->hop), *next;
	uint64_t q = sim_fab_queued(p, n->now), start;

	if (p->qhist) {
		uint64_t b = q / SIM_FAB_QBUCKET;

		p->qhist[b < SIM_FAB_QBUCKETS ? b : SIM_FAB_QBUCKETS - 1]++;
		if (q > p->qmax)
			p->qmax = q;
	}
	if (!e->lossless && p->buf != UINT64_MAX && q + e->wire > p->buf) {
		p->drops++;
		free(e);
		return;
	}
	if (p->ecn && q > p->ecn) {
		p->marks++;
		e->ecn = true;
	}
	start = p->free_ps > n->now * 1000 ? p->free_ps : n->now * 1000;
	p->free_ps = start + (uint64_t)e->wire * p->ps_per_byte;
	p->pkts++;
	p->bytes += e->wire;
	/* store and forward: the next port sees it once it is all across the link */
	e->t = (p->free_ps + 999) / 1000 + f->cfg.prop_ns;
	next = port_at(f, e->src, e->dst, ++e->hop);
	if (!next) {
		e->kind = e->fk;
		e->t += e->extra_ns;
	}
	sim_ev_push(n, e);
}

uint64_t sim_fab_qpct(const struct sim_port *p, double q)
{
	uint64_t total = 0, acc = 0;
	unsigned i;

	if (!p->qhist)
		return 0;
	for (i = 0; i < SIM_FAB_QBUCKETS; i++)
		total += p->qhist[i];
	if (!total)
		return 0;
	for (i = 0; i < SIM_FAB_QBUCKETS; i++) {
		acc += p->qhist[i];
		if ((double)acc >= q * (double)total)
			return (uint64_t)(i + 1) * SIM_FAB_QBUCKET;
	}
	return (uint64_t)SIM_FAB_QBUCKETS * SIM_FAB_QBUCKET;
}

void sim_fab_qreset(struct sim_port *p)
{
	if (p->qhist)
		memset(p->qhist, 0, SIM_FAB_QBUCKETS * sizeof(uint32_t));
	p->qmax = 0;
}
