/* SPDX-License-Identifier: MIT */
/*
 * The users' one-sided operations (issue 16): batches of READs and WRITEs
 * with one deadline and one continuation, in a table of their own
 * (struct urpc_rop_tab, below), posted to the transport at most
 * URPC_ROP_WINDOW at a time so that large messages keep their share of
 * it. rmem.c checks the arguments and submits; large.c hands the
 * completions over (wr_id with URPC_ROP_WR) and drains at destroy; the
 * event loop's timer scan runs the deadlines; msgbuf.c asks which buffers
 * they hold. Owner thread only.
 */
#ifndef URPC_RPC_ROP_H
#define URPC_RPC_ROP_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The users' one-sided operations (urpc_rdma_*; rop.c), in a table of their
 * own beside os[] so that they cannot crowd out large messages. Every call
 * is a batch (urpc_rdma_read/_write: a batch of one) with one continuation;
 * each of its operations is an entry of the operation table, queued until
 * it is posted (at most URPC_ROP_WINDOW of them are in the transport at
 * once), then posted until the transport lets go of it. The wr_id of a
 * posted one is URPC_ROP_WR | generation << 32 | index.
 */
#define URPC_ROP_WR (1ull << 63)
#define URPC_ROP_WINDOW 32 /* users' operations in the transport at once, per Rpc */
#define URPC_ROP_NIL UINT32_MAX

enum urpc_rop_state {
	URPC_ROP_FREE = 0,
	URPC_ROP_QUEUED = 1, /* waits for the window */
	URPC_ROP_POSTED = 2, /* the transport has it */
};

struct urpc_rop {
	uint8_t state; /* enum urpc_rop_state */
	bool write;
	uint16_t gen;		/* of its wr_id; advances with each post */
	uint32_t batch;		/* its batch's index */
	uint32_t next;		/* the free list, or the queue */
	struct urpc_msgbuf buf; /* the local buffer: lent until the batch's continuation */
	size_t off;		/* into @buf's data */
	uint64_t raddr;
	uint64_t rkey;
	size_t len;
};

struct urpc_rbatch {
	urpc_rdma_cont_fn cont; /* NULL: a free entry */
	void *tag;
	uint64_t deadline_ns; /* Rpc clock */
	uint64_t idle_ns;     /* timeout 0: the deadline moves on with progress (rop.c) */
	uint32_t sess_num;
	uint32_t left;	 /* operations not let go (queued or posted) */
	uint32_t posted; /* ... of which posted */
	int status;	 /* the first real failure; 0: none yet */
	bool expired;	 /* the deadline passed: posted ones were cancelled */
	uint32_t next;	 /* the free list, or the list of batches due */
};

struct urpc_rop_tab {
	struct urpc_rop *op;
	uint32_t cap, free; /* free: head of the free list */
	uint32_t live;	    /* operations queued or posted */
	uint32_t posted;
	uint32_t qhead, qtail; /* queued operations, oldest first */
	struct urpc_rbatch *b;
	uint32_t bcap, bfree;
	uint32_t batches; /* batches whose continuation has not run */
	uint32_t due;	  /* head of the batches due (every operation let go) */
};

/*
 * Queue the @n operations of @ops (checked by the caller: ranges, rbufs,
 * owner, local buffers) on session @s as one batch and post what the
 * window allows. @timeout_ns 0: the batch fails once it has made no
 * progress (an operation completed, or a chunk of a posted one in the
 * transport: os_idle) for the Rpc's one-sided timeout. 0: @cont runs exactly
 * once, later, from the event loop (or the destroy); -EAGAIN (more than
 * URPC_RDMA_MAX_OPS live), -ENOMEM: nothing queued. Cold-ish: may grow the tables.
 */
int urpc__rop_submit(struct urpc_rpc *rpc, struct urpc_session *s, const struct urpc_rdma_op *ops,
		     uint32_t n, uint64_t timeout_ns, urpc_rdma_cont_fn cont, void *tag);

/*
 * A completion whose wr_id has URPC_ROP_WR: the operation lets go of its
 * buffer; a batch that has nothing left runs its continuation. One that
 * names no posted operation is counted (drop_bad_comp) and ignored.
 */
void urpc__rop_comp(struct urpc_rpc *rpc, const struct urpc_tp_comp *c);

/*
 * The timer scan: batches past their deadline fail with -ETIMEDOUT (queued
 * operations dropped, posted ones cancelled in the transport), queued
 * operations are posted where the transport has room again, and the
 * continuations of batches that are over run. Cheap when none is live.
 */
void urpc__rop_timers(struct urpc_rpc *rpc);

/*
 * Session @s goes away (before its peer is released, which completes the
 * posted operations): its batches fail with -ECONNRESET, their queued
 * operations are dropped. Their continuations run from the loop.
 */
void urpc__rop_session_gone(struct urpc_rpc *rpc, const struct urpc_session *s);

/* Run the continuations of the batches that are over (destroy's drain). */
void urpc__rop_run_due(struct urpc_rpc *rpc);

/* Does an operation in flight hold @mb (the same bytes)? Cold: a walk. */
bool urpc__rop_holds(const struct urpc_rpc *rpc, const struct urpc_msgbuf *mb);

/* Add the distinct pool buffers and views that operations hold. Cold. */
void urpc__rop_held(const struct urpc_rpc *rpc, size_t *bufs, size_t *views);

/*
 * Bookkeeping check (urpc__rpc_check): the counters against the tables.
 * 0 and *@batches (live batches: continuations owed), or -EFAULT and @why.
 */
int urpc__rop_check(const struct urpc_rpc *rpc, uint32_t *batches, char *why, size_t n);

/* Free the tables (destroy, after the drain). */
void urpc__rop_fini(struct urpc_rpc *rpc);

/* @fn on the session of every batch with operations posted (cc_sess.c's samples). Cold. */
void urpc__rop_each_session(struct urpc_rpc *rpc,
			    void (*fn)(struct urpc_rpc *rpc, struct urpc_session *s));

#ifdef __cplusplus
}
#endif

#endif /* URPC_RPC_ROP_H */
