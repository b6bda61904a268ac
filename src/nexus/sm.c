/* SPDX-License-Identifier: MIT */
/*
 * Session-management packets: the wire layout, its encoder and validating
 * decoder, and the SPSC queue from the Nexus's SM thread to an Rpc.
 *
 * Wire layout, every field little-endian, no padding:
 *
 *   off  size  field
 *     0     2  magic (URPC_SM_MAGIC)
 *     2     1  version (URPC_SM_VERSION)
 *     3     1  type (enum urpc_sm_pkt_type)
 *     4     4  status: 0 or a positive errno code (in memory: -errno)
 *     8     1  client_rpc_id
 *     9     1  server_rpc_id
 *    10     1  transport
 *    11     1  window: 0, or a power of two (CONNECT_REQ/RESP; was reserved, sent as 0)
 *    12     4  client_sess
 *    16     4  server_sess
 *    20     8  token
 *    28     8  seq
 *    36     4  max_msg
 *    40     2  ep_len
 *    42     8  nexus_inc: the sending Nexus's incarnation (version 2)
 *    50     8  nexus_epoch: its attach/detach count when it sent
 *    58     4  rpc_inc: the sending Rpc's attach number; 0: from the Nexus
 *    62     8  cookie: the connect cookie (version 3; sm_cookie.h)
 *    70     8  nx_nonce: the sender's half of the pair's secret (version 4;
 *              nexus_auth.h)
 *    78     8  mac: SipHash-2-4 of the packet (this field as 0) under the
 *              pair's secret; 0: unsigned
 *    86 ep_len ep
 *
 * A packet is exactly SM_HDR_LEN + ep_len bytes long.
 */
#include "sm.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define URPC_SM_MAGIC 0x4d53u /* "SM" once written little-endian */
#define URPC_SM_VERSION 4u

/* Largest status code accepted on the wire (the kernel's MAX_ERRNO). */
#define SM_STATUS_MAX 4095u

enum {
	SM_OFF_MAGIC = 0,
	SM_OFF_VERSION = 2,
	SM_OFF_TYPE = 3,
	SM_OFF_STATUS = 4,
	SM_OFF_CLIENT_RPC = 8,
	SM_OFF_SERVER_RPC = 9,
	SM_OFF_TRANSPORT = 10,
	SM_OFF_WINDOW = 11,
	SM_OFF_CLIENT_SESS = 12,
	SM_OFF_SERVER_SESS = 16,
	SM_OFF_TOKEN = 20,
	SM_OFF_SEQ = 28,
	SM_OFF_MAX_MSG = 36,
	SM_OFF_EP_LEN = 40,
	SM_OFF_NEXUS_INC = 42,
	SM_OFF_NEXUS_EPOCH = 50,
	SM_OFF_RPC_INC = 58,
	SM_OFF_COOKIE = 62,
	SM_OFF_NX_NONCE = 70,
	SM_OFF_MAC = 78,
	SM_HDR_LEN = 86,
};

static_assert(SM_HDR_LEN == URPC_SM_HDR_LEN, "sm.h states the header's length");
static_assert(SM_OFF_MAC == URPC_SM_OFF_MAC, "sm.h states where the MAC lies");

static_assert(SM_HDR_LEN + URPC_TP_EP_MAX <= URPC_SM_PKT_MAX,
	      "the largest SM packet must fit URPC_SM_PKT_MAX");
static_assert(URPC_TP_EP_MAX <= UINT16_MAX, "ep_len travels in 16 bits");

/* Byte-order helpers: explicit little-endian, any alignment. Thread: any. */
static inline void put_le16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void put_le32(uint8_t *b, uint32_t v)
{
	put_le16(b, (uint16_t)v);
	put_le16(b + 2, (uint16_t)(v >> 16));
}

static inline void put_le64(uint8_t *b, uint64_t v)
{
	put_le32(b, (uint32_t)v);
	put_le32(b + 4, (uint32_t)(v >> 32));
}

static inline uint16_t get_le16(const uint8_t *b)
{
	return (uint16_t)(b[0] | (uint16_t)b[1] << 8);
}

static inline uint32_t get_le32(const uint8_t *b)
{
	return get_le16(b) | (uint32_t)get_le16(b + 2) << 16;
}

static inline uint64_t get_le64(const uint8_t *b)
{
	return get_le32(b) | (uint64_t)get_le32(b + 4) << 32;
}

/* Name of a packet type for logs. Thread: any. */
/* Name of an SM event for logs. Thread: any. */
URPC_API const char *urpc_sm_event_str(enum urpc_sm_event ev)
{
	switch (ev) {
	case URPC_SM_CONNECTED:
		return "connected";
	case URPC_SM_CONNECT_FAILED:
		return "connect_failed";
	case URPC_SM_DISCONNECTED:
		return "disconnected";
	case URPC_SM_RESET:
		return "reset";
	}
	return "?";
}

const char *urpc__sm_pkt_type_str(enum urpc_sm_pkt_type t)
{
	switch (t) {
	case URPC_SM_PKT_CONNECT_REQ:
		return "CONNECT_REQ";
	case URPC_SM_PKT_CONNECT_RESP:
		return "CONNECT_RESP";
	case URPC_SM_PKT_DISCONNECT_REQ:
		return "DISCONNECT_REQ";
	case URPC_SM_PKT_DISCONNECT_RESP:
		return "DISCONNECT_RESP";
	case URPC_SM_PKT_PING_REQ:
		return "PING_REQ";
	case URPC_SM_PKT_PING_RESP:
		return "PING_RESP";
	case URPC_SM_PKT_RESET:
		return "RESET";
	case URPC_SM_PKT_TP_CTL_C2S:
		return "TP_CTL_C2S";
	case URPC_SM_PKT_TP_CTL_S2C:
		return "TP_CTL_S2C";
	case URPC_SM_PKT_NX_PING:
		return "NX_PING";
	case URPC_SM_PKT_NX_PONG:
		return "NX_PONG";
	case URPC_SM_PKT_CONNECT_COOKIE:
		return "CONNECT_COOKIE";
	case URPC_SM_PKT_NX_NOTICE:
		return "NX_NOTICE";
	}
	return "?";
}

/*
 * Encode @p into @buf, which has room for URPC_SM_PKT_MAX bytes. @p->status
 * is 0 or -errno; @p->ep_len is at most URPC_TP_EP_MAX (programmer errors
 * otherwise: asserted, and ep_len clamped so @buf is never overrun).
 * Owns nothing. Thread: any.
 */
size_t urpc__sm_encode(const struct urpc_sm_pkt *p, uint8_t *buf)
{
	uint16_t ep_len = (uint16_t)URPC_MIN(p->ep_len, (uint16_t)URPC_TP_EP_MAX);

	assert(p->status <= 0 && p->status >= -(int32_t)SM_STATUS_MAX);
	assert(p->ep_len <= URPC_TP_EP_MAX);

	put_le16(buf + SM_OFF_MAGIC, URPC_SM_MAGIC);
	buf[SM_OFF_VERSION] = URPC_SM_VERSION;
	buf[SM_OFF_TYPE] = (uint8_t)p->type;
	put_le32(buf + SM_OFF_STATUS, (uint32_t)(-(int64_t)p->status));
	buf[SM_OFF_CLIENT_RPC] = p->client_rpc_id;
	buf[SM_OFF_SERVER_RPC] = p->server_rpc_id;
	buf[SM_OFF_TRANSPORT] = p->transport;
	buf[SM_OFF_WINDOW] = p->window;
	put_le32(buf + SM_OFF_CLIENT_SESS, p->client_sess);
	put_le32(buf + SM_OFF_SERVER_SESS, p->server_sess);
	put_le64(buf + SM_OFF_TOKEN, p->token);
	put_le64(buf + SM_OFF_SEQ, p->seq);
	put_le32(buf + SM_OFF_MAX_MSG, p->max_msg);
	put_le64(buf + SM_OFF_NEXUS_INC, p->nexus_inc);
	put_le64(buf + SM_OFF_NEXUS_EPOCH, p->nexus_epoch);
	put_le32(buf + SM_OFF_RPC_INC, p->rpc_inc);
	put_le64(buf + SM_OFF_COOKIE, p->cookie);
	put_le64(buf + SM_OFF_NX_NONCE, p->nx_nonce);
	put_le64(buf + SM_OFF_MAC, p->mac);
	put_le16(buf + SM_OFF_EP_LEN, ep_len);
	memcpy(buf + SM_HDR_LEN, p->ep, ep_len);
	return (size_t)SM_HDR_LEN + ep_len;
}

/*
 * Decode and validate @len bytes of @buf into @p: magic, version, type,
 * window (0 or a power of two), status code, ep_len and the exact length. 0, or -EPROTO.
 * Reads nothing past @len. @p->from is zeroed (the receiver fills it).
 * Owns nothing. Thread: any.
 */
int urpc__sm_decode(const uint8_t *buf, size_t len, struct urpc_sm_pkt *p)
{
	uint32_t code;
	uint16_t ep_len;
	uint8_t type;

	if (len < SM_HDR_LEN)
		return -EPROTO;
	if (get_le16(buf + SM_OFF_MAGIC) != URPC_SM_MAGIC || buf[SM_OFF_VERSION] != URPC_SM_VERSION)
		return -EPROTO;
	type = buf[SM_OFF_TYPE];
	if (type < URPC_SM_PKT_CONNECT_REQ || type > URPC_SM_PKT_WIRE_MAX)
		return -EPROTO;
	if (buf[SM_OFF_WINDOW] & (buf[SM_OFF_WINDOW] - 1))
		return -EPROTO;
	code = get_le32(buf + SM_OFF_STATUS);
	if (code > SM_STATUS_MAX)
		return -EPROTO;
	ep_len = get_le16(buf + SM_OFF_EP_LEN);
	if (ep_len > URPC_TP_EP_MAX || len != (size_t)SM_HDR_LEN + ep_len)
		return -EPROTO;

	memset(p, 0, sizeof(*p));
	p->type = (enum urpc_sm_pkt_type)type;
	p->status = -(int32_t)code;
	p->client_rpc_id = buf[SM_OFF_CLIENT_RPC];
	p->server_rpc_id = buf[SM_OFF_SERVER_RPC];
	p->transport = buf[SM_OFF_TRANSPORT];
	p->window = buf[SM_OFF_WINDOW];
	p->client_sess = get_le32(buf + SM_OFF_CLIENT_SESS);
	p->server_sess = get_le32(buf + SM_OFF_SERVER_SESS);
	p->token = get_le64(buf + SM_OFF_TOKEN);
	p->seq = get_le64(buf + SM_OFF_SEQ);
	p->max_msg = get_le32(buf + SM_OFF_MAX_MSG);
	p->nexus_inc = get_le64(buf + SM_OFF_NEXUS_INC);
	p->nexus_epoch = get_le64(buf + SM_OFF_NEXUS_EPOCH);
	p->rpc_inc = get_le32(buf + SM_OFF_RPC_INC);
	p->cookie = get_le64(buf + SM_OFF_COOKIE);
	p->nx_nonce = get_le64(buf + SM_OFF_NX_NONCE);
	p->mac = get_le64(buf + SM_OFF_MAC);
	p->ep_len = ep_len;
	memcpy(p->ep, buf + SM_HDR_LEN, ep_len);
	return 0;
}

/* ---- SPSC queue -------------------------------------------------------- */

#define SM_QUEUE_MASK (URPC_SM_QUEUE_SIZE - 1u)

/*
 * Make @q empty. The caller owns @q (in practice the Rpc, before it attaches
 * the queue to the Nexus). Thread: any, while neither side uses @q.
 */
void urpc__sm_queue_init(struct urpc_sm_queue *q)
{
	atomic_init(&q->head, 0);
	atomic_init(&q->tail, 0);
	atomic_init(&q->sleeping, false);
	q->wake_fd = -1;
}

/* Before the attach, which publishes it. The consumer owns @fd. */
void urpc__sm_queue_set_wake_fd(struct urpc_sm_queue *q, int fd)
{
	q->wake_fd = fd;
}

/* Wake the sleeping consumer. Producer only; one write(2), never blocks. */
static void sm_queue_signal(struct urpc_sm_queue *q)
{
	const uint64_t one = 1;
	ssize_t n;

	if (q->wake_fd < 0)
		return;
	/*
	 * The eventfd is non-blocking; the only failure, EAGAIN, means its
	 * count is already at the maximum, i.e. readable: nothing is lost.
	 */
	n = write(q->wake_fd, &one, sizeof(one));
	(void)n;
}

/*
 * Copy @p into the next free slot. 0, or -EAGAIN when full (nothing queued).
 * Producer only (the Nexus's SM thread); takes no lock, makes no syscall.
 * The indices run free and wrap at 2^32; head - tail is the fill level.
 */
static int queue_put(struct urpc_sm_queue *q, const struct urpc_sm_pkt *p)
{
	/* Only this thread writes head: a relaxed load reads its own store. */
	uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
	/*
	 * Acquire pairs with the consumer's release store of tail in pop():
	 * the consumer has finished copying out every slot before tail, so
	 * they may be overwritten.
	 */
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);

	if (head - tail >= URPC_SM_QUEUE_SIZE)
		return -EAGAIN;
	q->ring[head & SM_QUEUE_MASK] = *p;
	/*
	 * Release pairs with the consumer's acquire load of head in pop():
	 * the slot written above is visible before the new head.
	 */
	atomic_store_explicit(&q->head, head + 1, memory_order_release);
	return 0;
}

/*
 * Wake the consumer if it has announced a sleep, after one or more pushes.
 * Producer only: a syscall (one eventfd write) only while it sleeps.
 */
void urpc__sm_queue_kick(struct urpc_sm_queue *q)
{
	/*
	 * The lost wake-up: the consumer announces a sleep and then looks at
	 * head; we publish head and then look at sleeping. Each side stores
	 * one variable and loads the other (Dekker), which release/acquire
	 * does not order: both could read the old value, the consumer sleep
	 * with our packet queued, and the packet wait for its timeout. This
	 * seq_cst fence pairs with the one in urpc__sm_queue_sleep_begin();
	 * the two are totally ordered:
	 *  - theirs first: the load below sees sleeping == true (or a later
	 *    false, written once the consumer is awake again, which pops
	 *    before it sleeps another time) and we write the eventfd. Its
	 *    count persists, so a poll() that has not started yet returns
	 *    at once;
	 *  - ours first: the consumer's pop after its fence sees the new
	 *    head, and it does not sleep.
	 * Pushes before one kick are covered alike: their heads were all
	 * published before the fence.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (unlikely(atomic_load_explicit(&q->sleeping, memory_order_relaxed)))
		sm_queue_signal(q);
}

/*
 * queue_put() and the kick: a syscall (one eventfd write) only while the
 * consumer has announced a sleep.
 */
int urpc__sm_queue_push(struct urpc_sm_queue *q, const struct urpc_sm_pkt *p)
{
	int ret = queue_put(q, p);

	if (!ret)
		urpc__sm_queue_kick(q);
	return ret;
}

int urpc__sm_queue_push_quiet(struct urpc_sm_queue *q, const struct urpc_sm_pkt *p)
{
	return queue_put(q, p);
}

/*
 * Copy the oldest packet to @p. 1 when one was taken, 0 when empty.
 * Consumer only (the owning Rpc's thread); takes no lock, makes no syscall.
 */
int urpc__sm_queue_pop(struct urpc_sm_queue *q, struct urpc_sm_pkt *p)
{
	/* Only this thread writes tail: a relaxed load reads its own store. */
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	/*
	 * Acquire pairs with the producer's release store of head in push():
	 * every slot before head is fully written.
	 */
	uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);

	if (head == tail)
		return 0;
	*p = q->ring[tail & SM_QUEUE_MASK];
	/*
	 * Release pairs with the producer's acquire load of tail in push():
	 * the copy above is complete before the slot is handed back.
	 */
	atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
	return 1;
}

uint32_t urpc__sm_queue_waiting(const struct urpc_sm_queue *q)
{
	/* As pop(): a relaxed load of our own tail, an acquire load of head. */
	return atomic_load_explicit(&q->head, memory_order_acquire) -
	       atomic_load_explicit(&q->tail, memory_order_relaxed);
}

/* Consumer only: the announcement, then the fence that push() pairs with. */
void urpc__sm_queue_sleep_begin(struct urpc_sm_queue *q)
{
	atomic_store_explicit(&q->sleeping, true, memory_order_relaxed);
	/*
	 * Pairs with the seq_cst fence in urpc__sm_queue_push(): orders the
	 * store above before the caller's next load of head (see there).
	 */
	atomic_thread_fence(memory_order_seq_cst);
}

/* Consumer only. */
void urpc__sm_queue_sleep_end(struct urpc_sm_queue *q, bool signalled)
{
	uint64_t count;
	ssize_t n;

	/*
	 * Relaxed: a push that still sees true costs one spurious signal,
	 * consumed by the next sleep; the consumer pops before it sleeps
	 * again, so nothing waits on this store becoming visible.
	 */
	atomic_store_explicit(&q->sleeping, false, memory_order_relaxed);
	if (!signalled || q->wake_fd < 0)
		return;
	/* Non-blocking: EAGAIN (already read) is the only failure. */
	n = read(q->wake_fd, &count, sizeof(count));
	(void)n;
}

/* Thread: any. */
bool urpc__sm_queue_is_sleeping(const struct urpc_sm_queue *q)
{
	return atomic_load_explicit(&q->sleeping, memory_order_relaxed);
}
