/* SPDX-License-Identifier: MIT */
/* SM packets: wire encoding and validation; the SPSC queue to the Rpc. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nexus/sm.h"
#include "nexus/sm_cookie.h"
#include "util/log.h"
#include "util/rand.h"

#define SM_HDR_LEN 86 /* the fixed part of the layout documented in sm.c */

static const enum urpc_sm_pkt_type all_types[] = {
	URPC_SM_PKT_CONNECT_REQ,     URPC_SM_PKT_CONNECT_RESP, URPC_SM_PKT_DISCONNECT_REQ,
	URPC_SM_PKT_DISCONNECT_RESP, URPC_SM_PKT_PING_REQ,     URPC_SM_PKT_PING_RESP,
	URPC_SM_PKT_RESET,	     URPC_SM_PKT_TP_CTL_C2S,   URPC_SM_PKT_TP_CTL_S2C,
	URPC_SM_PKT_NX_PING,	     URPC_SM_PKT_NX_PONG,      URPC_SM_PKT_CONNECT_COOKIE,
};

/* A packet with every field set to a distinct, recognisable value. */
static void fill_pkt(struct urpc_sm_pkt *p, enum urpc_sm_pkt_type t, uint16_t ep_len)
{
	uint16_t i;

	memset(p, 0, sizeof(*p));
	p->type = t;
	p->status = -ECONNREFUSED;
	p->client_rpc_id = 0xa1;
	p->server_rpc_id = 0xb2;
	p->transport = URPC_TRANSPORT_UDP;
	p->client_sess = 0xc3c4c5c6u;
	p->server_sess = 0xd7d8d9dau;
	p->token = 0x0102030405060708ull;
	p->seq = 0xf1f2f3f4f5f6f7f8ull;
	p->max_msg = 0x00123456u;
	p->nexus_inc = 0x1112131415161718ull;
	p->nexus_epoch = 0x2122232425262728ull;
	p->rpc_inc = 0x31323334u;
	p->cookie = 0x4142434445464748ull;
	p->nx_nonce = 0x5152535455565758ull;
	p->mac = 0x6162636465666768ull;
	p->ep_len = ep_len;
	for (i = 0; i < ep_len; i++)
		p->ep[i] = (uint8_t)(0x40 + i);
}

static void assert_pkt_eq(const struct urpc_sm_pkt *a, const struct urpc_sm_pkt *b)
{
	cr_assert_eq(a->type, b->type);
	cr_assert_eq(a->status, b->status);
	cr_assert_eq(a->client_rpc_id, b->client_rpc_id);
	cr_assert_eq(a->server_rpc_id, b->server_rpc_id);
	cr_assert_eq(a->transport, b->transport);
	cr_assert_eq(a->client_sess, b->client_sess);
	cr_assert_eq(a->server_sess, b->server_sess);
	cr_assert_eq(a->token, b->token);
	cr_assert_eq(a->seq, b->seq);
	cr_assert_eq(a->max_msg, b->max_msg);
	cr_assert_eq(a->nexus_inc, b->nexus_inc);
	cr_assert_eq(a->nexus_epoch, b->nexus_epoch);
	cr_assert_eq(a->rpc_inc, b->rpc_inc);
	cr_assert_eq(a->cookie, b->cookie);
	cr_assert_eq(a->nx_nonce, b->nx_nonce);
	cr_assert_eq(a->mac, b->mac);
	cr_assert_eq(a->ep_len, b->ep_len);
	cr_assert_arr_eq(a->ep, b->ep, a->ep_len);
}

/* Decode from a heap copy of exactly @len bytes, so ASan sees any overread. */
static int decode_exact(const uint8_t *buf, size_t len, struct urpc_sm_pkt *p)
{
	uint8_t *copy = malloc(len ? len : 1);
	int ret;

	cr_assert_not_null(copy);
	memcpy(copy, buf, len);
	ret = urpc__sm_decode(copy, len, p);
	free(copy);
	return ret;
}

Test(sm, round_trip_every_type)
{
	static const uint16_t ep_lens[] = {0, 1, 17, URPC_TP_EP_MAX};
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt in, out;
	size_t t, e, len;

	for (t = 0; t < URPC_ARRAY_SIZE(all_types); t++) {
		for (e = 0; e < URPC_ARRAY_SIZE(ep_lens); e++) {
			fill_pkt(&in, all_types[t], ep_lens[e]);
			len = urpc__sm_encode(&in, buf);
			cr_assert_eq(len, SM_HDR_LEN + ep_lens[e]);
			cr_assert_leq(len, URPC_SM_PKT_MAX);
			memset(&out, 0xee, sizeof(out));
			cr_assert_eq(decode_exact(buf, len, &out), 0, "type %s ep_len %u",
				     urpc__sm_pkt_type_str(all_types[t]), ep_lens[e]);
			assert_pkt_eq(&in, &out);
			cr_assert_eq(out.from.sin_family, 0, "decode leaves from for the receiver");
		}
	}
}

Test(sm, status_zero_and_extremes_round_trip)
{
	static const int32_t statuses[] = {0, -1, -ENOENT, -ECONNRESET, -4095};
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt in, out;
	size_t i, len;

	for (i = 0; i < URPC_ARRAY_SIZE(statuses); i++) {
		fill_pkt(&in, URPC_SM_PKT_CONNECT_RESP, 3);
		in.status = statuses[i];
		len = urpc__sm_encode(&in, buf);
		cr_assert_eq(decode_exact(buf, len, &out), 0);
		cr_assert_eq(out.status, statuses[i]);
	}
}

Test(sm, wire_layout_is_fixed_little_endian)
{
	/* The bytes a peer of another build must see; any layout change breaks this. */
	static const uint8_t want[SM_HDR_LEN + 2] = {
		0x53, 0x4d, 0x04, 0x02, /* magic "SM", version 4, CONNECT_RESP */
		0x6f, 0x00, 0x00, 0x00, /* status: ECONNREFUSED (111) */
		0xa1, 0xb2, 0x02, 0x00, /* rpc ids, transport udp, window 0 (8) */
		0xc6, 0xc5, 0xc4, 0xc3, /* client_sess */
		0xda, 0xd9, 0xd8, 0xd7, /* server_sess */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* token */
		0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, /* seq */
		0x56, 0x34, 0x12, 0x00,				/* max_msg */
		0x02, 0x00,					/* ep_len */
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* nexus_inc */
		0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, /* nexus_epoch */
		0x34, 0x33, 0x32, 0x31,				/* rpc_inc */
		0x48, 0x47, 0x46, 0x45, 0x44, 0x43, 0x42, 0x41, /* cookie */
		0x58, 0x57, 0x56, 0x55, 0x54, 0x53, 0x52, 0x51, /* nx_nonce */
		0x68, 0x67, 0x66, 0x65, 0x64, 0x63, 0x62, 0x61, /* mac */
		0x40, 0x41,					/* ep */
	};
	uint8_t buf[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt in;
	size_t len;

	cr_assert_eq(ECONNREFUSED, 111, "the golden bytes assume Linux errno values");
	fill_pkt(&in, URPC_SM_PKT_CONNECT_RESP, 2);
	len = urpc__sm_encode(&in, buf);
	cr_assert_eq(len, sizeof(want));
	cr_assert_arr_eq(buf, want, sizeof(want));
}

Test(sm, truncated_or_padded_buffers_rejected)
{
	uint8_t buf[URPC_SM_PKT_MAX + 8];
	struct urpc_sm_pkt in, out;
	size_t len, l;

	fill_pkt(&in, URPC_SM_PKT_CONNECT_REQ, URPC_TP_EP_MAX);
	len = urpc__sm_encode(&in, buf);
	for (l = 0; l < len; l++)
		cr_assert_eq(decode_exact(buf, l, &out), -EPROTO, "length %zu of %zu accepted", l,
			     len);
	memset(buf + len, 0, sizeof(buf) - len);
	for (l = len + 1; l <= sizeof(buf); l++)
		cr_assert_eq(decode_exact(buf, l, &out), -EPROTO, "length %zu of %zu accepted", l,
			     len);
	cr_assert_eq(decode_exact(buf, len, &out), 0);
}

/* Encode a valid packet, let @mutate damage it, and expect -EPROTO. */
static void expect_rejected(void (*mutate)(uint8_t *buf, size_t *len), const char *what)
{
	uint8_t buf[URPC_SM_PKT_MAX + 64];
	struct urpc_sm_pkt in, out;
	size_t len;

	memset(buf, 0, sizeof(buf));
	fill_pkt(&in, URPC_SM_PKT_PING_REQ, 8);
	len = urpc__sm_encode(&in, buf);
	mutate(buf, &len);
	cr_assert_eq(decode_exact(buf, len, &out), -EPROTO, "%s accepted", what);
}

static void bad_magic_lo(uint8_t *b, size_t *len)
{
	b[0] ^= 0x01;
}

static void bad_magic_hi(uint8_t *b, size_t *len)
{
	b[1] = 0;
}

static void bad_version(uint8_t *b, size_t *len)
{
	b[2] = 2; /* the layout before the cookie */
}

static void type_zero(uint8_t *b, size_t *len)
{
	b[3] = 0;
}

static void type_notice(uint8_t *b, size_t *len)
{
	b[3] = URPC_SM_PKT_NX_NOTICE; /* the Nexus's own, never on the wire */
}

static void type_max(uint8_t *b, size_t *len)
{
	b[3] = 0xff;
}

static void status_too_big(uint8_t *b, size_t *len)
{
	b[4] = 0x00;
	b[5] = 0x10; /* 4096 */
}

static void status_negative(uint8_t *b, size_t *len)
{
	b[7] = 0x80;
}

static void window_not_pow2(uint8_t *b, size_t *len)
{
	b[11] = 3;
}

static void ep_len_too_big(uint8_t *b, size_t *len)
{
	/* A consistent length for ep_len 65: only the ep_len bound rejects it. */
	b[40] = URPC_TP_EP_MAX + 1;
	b[41] = 0;
	*len = SM_HDR_LEN + URPC_TP_EP_MAX + 1;
}

static void ep_len_huge(uint8_t *b, size_t *len)
{
	b[40] = 0xff;
	b[41] = 0xff;
}

static void ep_len_longer_than_data(uint8_t *b, size_t *len)
{
	b[40] = 9;
}

static void ep_len_shorter_than_data(uint8_t *b, size_t *len)
{
	b[40] = 7;
}

Test(sm, bad_fields_rejected)
{
	expect_rejected(bad_magic_lo, "bad magic (low byte)");
	expect_rejected(bad_magic_hi, "bad magic (high byte)");
	expect_rejected(bad_version, "version 2");
	expect_rejected(type_zero, "type 0");
	expect_rejected(type_notice, "NX_NOTICE (local only)");
	expect_rejected(type_max, "type 255");
	expect_rejected(status_too_big, "status code 4096");
	expect_rejected(status_negative, "status code with the top bit set");
	expect_rejected(window_not_pow2, "a window that is not a power of two");
	expect_rejected(ep_len_too_big, "ep_len above URPC_TP_EP_MAX");
	expect_rejected(ep_len_huge, "ep_len 65535");
	expect_rejected(ep_len_longer_than_data, "ep_len past the datagram");
	expect_rejected(ep_len_shorter_than_data, "ep_len short of the datagram");
}

Test(sm, fuzzed_bytes_never_crash)
{
	uint8_t valid[URPC_SM_PKT_MAX], buf[URPC_SM_PKT_MAX + 32];
	struct urpc_sm_pkt in, out;
	struct urpc_rand r;
	size_t valid_len, len, j;
	unsigned i, accepted = 0;

	urpc__rand_seed(&r, 20240601);
	fill_pkt(&in, URPC_SM_PKT_CONNECT_REQ, 20);
	valid_len = urpc__sm_encode(&in, valid);

	for (i = 0; i < 200000; i++) {
		if (i & 1) {
			/* Pure noise of any length. */
			len = (size_t)urpc__rand_below(&r, sizeof(buf) + 1);
			for (j = 0; j < len; j++)
				buf[j] = (uint8_t)urpc__rand_next(&r);
		} else {
			/* A valid packet with a few bytes flipped and maybe cut or padded. */
			memcpy(buf, valid, valid_len);
			memset(buf + valid_len, 0, sizeof(buf) - valid_len);
			for (j = 0; j < 1 + urpc__rand_below(&r, 3); j++)
				buf[urpc__rand_below(&r, valid_len)] ^=
					(uint8_t)(1 + urpc__rand_below(&r, 255));
			len = valid_len;
			if (urpc__rand_below(&r, 4) == 0)
				len = (size_t)urpc__rand_below(&r, sizeof(buf) + 1);
		}
		if (decode_exact(buf, len, &out) == 0) {
			accepted++;
			cr_assert_leq(out.ep_len, URPC_TP_EP_MAX);
			cr_assert_eq(len, SM_HDR_LEN + (size_t)out.ep_len);
			cr_assert(out.type >= URPC_SM_PKT_CONNECT_REQ &&
				  out.type <= URPC_SM_PKT_WIRE_MAX);
			cr_assert(out.status <= 0 && out.status >= -4095);
		}
	}
	/* Flips in fields without constraints (ids, token, ep bytes) stay valid. */
	cr_assert_gt(accepted, 0);
}

Test(sm, type_names)
{
	size_t t;

	for (t = 0; t < URPC_ARRAY_SIZE(all_types); t++)
		cr_assert_str_neq(urpc__sm_pkt_type_str(all_types[t]), "?");
	cr_assert_str_eq(urpc__sm_pkt_type_str(URPC_SM_PKT_RESET), "RESET");
	cr_assert_str_eq(urpc__sm_pkt_type_str(URPC_SM_PKT_CONNECT_COOKIE), "CONNECT_COOKIE");
	/* The cookie answers a request: it goes to the client. */
	cr_assert(!urpc__sm_pkt_is_req(URPC_SM_PKT_CONNECT_COOKIE));
	cr_assert(!urpc__sm_pkt_to_server(URPC_SM_PKT_CONNECT_COOKIE));
	cr_assert_str_eq(urpc__sm_pkt_type_str((enum urpc_sm_pkt_type)99), "?");
	cr_assert(urpc__sm_pkt_is_req(URPC_SM_PKT_PING_REQ));
	cr_assert(!urpc__sm_pkt_is_req(URPC_SM_PKT_RESET));
	/* Transport control: one-way, routed by direction. */
	cr_assert(!urpc__sm_pkt_is_req(URPC_SM_PKT_TP_CTL_C2S));
	cr_assert(urpc__sm_pkt_to_server(URPC_SM_PKT_TP_CTL_C2S));
	cr_assert(!urpc__sm_pkt_to_server(URPC_SM_PKT_TP_CTL_S2C));
	cr_assert(urpc__sm_pkt_to_server(URPC_SM_PKT_CONNECT_REQ));
	cr_assert(!urpc__sm_pkt_to_server(URPC_SM_PKT_RESET));
}

/* ---- connect cookies ----------------------------------------------------- */

static struct sockaddr_in sa(uint32_t ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(ip);
	a.sin_port = htons(port);
	return a;
}

Test(sm, cookie_is_bound_to_the_address_and_the_time)
{
	const uint64_t slot = 1ull << URPC_SM_COOKIE_SLOT_SHIFT, t = 1000 * slot + 12345;
	struct urpc_sm_cookie_key k, k2;
	struct sockaddr_in a = sa(0x7f000001u, 31850);
	struct sockaddr_in other_port = sa(0x7f000001u, 31851), other_ip = sa(0x7f000002u, 31850);
	uint64_t c;

	urpc__sm_cookie_key_init(&k);
	urpc__sm_cookie_key_init(&k2);
	c = urpc__sm_cookie_make(&k, &a, t);
	cr_assert_neq(c, 0, "0 means no cookie");
	cr_assert_eq(urpc__sm_cookie_make(&k, &a, t + 1000), c, "the same within a slot");
	cr_assert(urpc__sm_cookie_check(&k, &a, t, c));
	cr_assert(urpc__sm_cookie_check(&k, &a, t + slot, c), "valid in the next slot");
	cr_assert(!urpc__sm_cookie_check(&k, &a, t + 2 * slot, c), "expired two slots on");
	cr_assert(!urpc__sm_cookie_check(&k, &a, t - slot, c), "not valid before its slot");
	cr_assert(!urpc__sm_cookie_check(&k, &other_port, t, c), "bound to the port");
	cr_assert(!urpc__sm_cookie_check(&k, &other_ip, t, c), "bound to the IP");
	cr_assert(!urpc__sm_cookie_check(&k2, &a, t, c), "bound to the Nexus's key");
	cr_assert(!urpc__sm_cookie_check(&k, &a, t, 0));
	cr_assert(!urpc__sm_cookie_check(&k, &a, t, c ^ 1));
	/* Slot 0 has no previous slot to look at. */
	c = urpc__sm_cookie_make(&k, &a, 5);
	cr_assert(urpc__sm_cookie_check(&k, &a, 5, c));
}

Test(sm, cookies_of_neighbouring_sources_look_unrelated)
{
	struct urpc_sm_cookie_key k;
	struct sockaddr_in a;
	uint64_t c[64], ones = 0;
	unsigned i, j;

	urpc__sm_cookie_key_init(&k);
	for (i = 0; i < 64; i++) {
		a = sa(0x0a000000u + i, 4000);
		c[i] = urpc__sm_cookie_make(&k, &a, 77);
		for (j = 0; j < i; j++)
			cr_assert_neq(c[i], c[j]);
		ones += (uint64_t)__builtin_popcountll(c[i]);
	}
	/* 4096 bits, about half of them set: 3 sigma is 96. */
	cr_assert(ones > 2048 - 200 && ones < 2048 + 200, "%llu bits of 4096 set",
		  (unsigned long long)ones);
}

/* ---- SPSC queue ---------------------------------------------------------- */

static struct urpc_sm_queue *queue_new(void)
{
	struct urpc_sm_queue *q = aligned_alloc(URPC_CACHELINE, sizeof(*q));

	cr_assert_not_null(q);
	urpc__sm_queue_init(q);
	return q;
}

Test(sm, queue_layout)
{
	cr_assert_geq(offsetof(struct urpc_sm_queue, tail) - offsetof(struct urpc_sm_queue, head),
		      URPC_CACHELINE, "producer and consumer indices must not share a line");
}

Test(sm, queue_fifo_and_full)
{
	struct urpc_sm_queue *q = queue_new();
	struct urpc_sm_pkt p, out;
	unsigned i;

	cr_assert_eq(urpc__sm_queue_pop(q, &out), 0, "a new queue is empty");
	fill_pkt(&p, URPC_SM_PKT_PING_REQ, 4);
	for (i = 0; i < URPC_SM_QUEUE_SIZE; i++) {
		p.seq = i;
		cr_assert_eq(urpc__sm_queue_push(q, &p), 0, "push %u", i);
	}
	p.seq = 9999;
	cr_assert_eq(urpc__sm_queue_push(q, &p), -EAGAIN);
	cr_assert_eq(urpc__sm_queue_push(q, &p), -EAGAIN);

	/* One pop makes room for exactly one push. */
	cr_assert_eq(urpc__sm_queue_pop(q, &out), 1);
	cr_assert_eq(out.seq, 0);
	p.seq = URPC_SM_QUEUE_SIZE;
	cr_assert_eq(urpc__sm_queue_push(q, &p), 0);
	cr_assert_eq(urpc__sm_queue_push(q, &p), -EAGAIN);

	for (i = 1; i <= URPC_SM_QUEUE_SIZE; i++) {
		cr_assert_eq(urpc__sm_queue_pop(q, &out), 1);
		cr_assert_eq(out.seq, i, "FIFO order");
		cr_assert_eq(out.token, p.token);
		cr_assert_arr_eq(out.ep, p.ep, 4);
	}
	cr_assert_eq(urpc__sm_queue_pop(q, &out), 0);
	free(q);
}

Test(sm, queue_indices_wrap)
{
	struct urpc_sm_queue *q = queue_new();
	struct urpc_sm_pkt p, out;
	unsigned i;

	/* Start just below 2^32 so head and tail wrap during the test. */
	atomic_store(&q->head, UINT32_MAX - 10);
	atomic_store(&q->tail, UINT32_MAX - 10);
	memset(&p, 0, sizeof(p));
	for (i = 0; i < URPC_SM_QUEUE_SIZE; i++) {
		p.seq = i;
		cr_assert_eq(urpc__sm_queue_push(q, &p), 0);
	}
	cr_assert_eq(urpc__sm_queue_push(q, &p), -EAGAIN, "full across the wrap");
	for (i = 0; i < URPC_SM_QUEUE_SIZE; i++) {
		cr_assert_eq(urpc__sm_queue_pop(q, &out), 1);
		cr_assert_eq(out.seq, i);
	}
	cr_assert_eq(urpc__sm_queue_pop(q, &out), 0);
	free(q);
}

#define SPSC_COUNT 1000000u
#define SPSC_DEADLINE_NS (60ull * 1000000000ull)

struct spsc_ctx {
	struct urpc_sm_queue *q;
	uint64_t deadline;
	atomic_bool give_up;
	uint64_t pushed;
};

static void *producer(void *arg)
{
	struct spsc_ctx *c = arg;
	struct urpc_sm_pkt p;
	uint64_t i;

	memset(&p, 0, sizeof(p));
	for (i = 0; i < SPSC_COUNT; i++) {
		p.seq = i;
		p.token = ~i;
		p.client_sess = (uint32_t)(i * 2654435761u);
		while (urpc__sm_queue_push(c->q, &p) == -EAGAIN) {
			if (atomic_load(&c->give_up) || urpc__now_ns() > c->deadline)
				goto out;
			sched_yield();
		}
	}
out:
	c->pushed = i;
	return NULL;
}

Test(sm, queue_two_threads_lose_nothing, .timeout = 120)
{
	struct spsc_ctx c = {.q = queue_new()};
	struct urpc_sm_pkt p;
	pthread_t th;
	uint64_t want = 0;

	memset(&p, 0, sizeof(p));
	c.deadline = urpc__now_ns() + SPSC_DEADLINE_NS;
	atomic_init(&c.give_up, false);
	cr_assert_eq(pthread_create(&th, NULL, producer, &c), 0);
	while (want < SPSC_COUNT && urpc__now_ns() <= c.deadline) {
		if (!urpc__sm_queue_pop(c.q, &p)) {
			sched_yield();
			continue;
		}
		if (p.seq != want || p.token != ~want ||
		    p.client_sess != (uint32_t)(want * 2654435761u))
			break;
		want++;
	}
	atomic_store(&c.give_up, true);
	pthread_join(th, NULL);
	cr_assert_eq(want, SPSC_COUNT, "stopped at %llu (got seq %llu, producer pushed %llu)",
		     (unsigned long long)want, (unsigned long long)p.seq,
		     (unsigned long long)c.pushed);
	cr_assert_eq(urpc__sm_queue_pop(c.q, &p), 0, "nothing beyond the last packet");
	free(c.q);
}
