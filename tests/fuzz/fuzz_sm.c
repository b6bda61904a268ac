/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the session-management packet parser (src/nexus/sm.c).
 *
 * Each input is used twice:
 *  1. as a received SM datagram: urpc__sm_decode() on an exact-size heap
 *     copy (ASan sees any read past the end). A packet it accepts must
 *     encode back to exactly the same bytes (the layout has no slack: the
 *     window byte is 0 or a power of two, the length is exact), decode again to the
 *     same fields, name a known type, and survive the Rpc's SM queue;
 *  2. as the fields of a packet to send: any packet the encoder may be
 *     given (a known type, a status in range, ep_len <= URPC_TP_EP_MAX)
 *     must encode to at most URPC_SM_PKT_MAX bytes that decode back to it;
 *     its MAC (nexus_auth.h) ignores the MAC field, changes with any other
 *     byte and with the direction of the key.
 *
 * Owns: nothing across inputs. Calls: src/nexus/sm.h, nexus_auth.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "nexus/nexus_auth.h"
#include "nexus/sm.h"

/* Largest status code the wire carries (sm.c's SM_STATUS_MAX). */
#define FZ_SM_STATUS_MAX 4095

static struct urpc_sm_queue *queue;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Cache-aligned like the Rpc's own (rpc.c); lives for the process. */
	queue = aligned_alloc(64, (sizeof(*queue) + 63) & ~(size_t)63);
	FUZZ_CHECK(queue, "out of memory");
	urpc__sm_queue_init(queue);
	return 0;
}

static void check_same(const struct urpc_sm_pkt *a, const struct urpc_sm_pkt *b, const char *what)
{
	FUZZ_CHECK(a->type == b->type, "%s: type %d != %d", what, a->type, b->type);
	FUZZ_CHECK(a->status == b->status, "%s: status %d != %d", what, a->status, b->status);
	FUZZ_CHECK(a->client_rpc_id == b->client_rpc_id, "%s: client_rpc_id", what);
	FUZZ_CHECK(a->server_rpc_id == b->server_rpc_id, "%s: server_rpc_id", what);
	FUZZ_CHECK(a->transport == b->transport, "%s: transport", what);
	FUZZ_CHECK(a->window == b->window, "%s: window", what);
	FUZZ_CHECK(a->client_sess == b->client_sess, "%s: client_sess", what);
	FUZZ_CHECK(a->server_sess == b->server_sess, "%s: server_sess", what);
	FUZZ_CHECK(a->token == b->token, "%s: token", what);
	FUZZ_CHECK(a->seq == b->seq, "%s: seq", what);
	FUZZ_CHECK(a->max_msg == b->max_msg, "%s: max_msg", what);
	FUZZ_CHECK(a->nexus_inc == b->nexus_inc, "%s: nexus_inc", what);
	FUZZ_CHECK(a->nexus_epoch == b->nexus_epoch, "%s: nexus_epoch", what);
	FUZZ_CHECK(a->rpc_inc == b->rpc_inc, "%s: rpc_inc", what);
	FUZZ_CHECK(a->cookie == b->cookie, "%s: cookie", what);
	FUZZ_CHECK(a->nx_nonce == b->nx_nonce, "%s: nx_nonce", what);
	FUZZ_CHECK(a->mac == b->mac, "%s: mac", what);
	FUZZ_CHECK(a->ep_len == b->ep_len, "%s: ep_len %u != %u", what, a->ep_len, b->ep_len);
	FUZZ_CHECK(!memcmp(a->ep, b->ep, a->ep_len), "%s: ep bytes", what);
}

/* What every decoded packet must look like. */
static void check_decoded(const struct urpc_sm_pkt *p)
{
	const char *name = urpc__sm_pkt_type_str(p->type);

	FUZZ_CHECK(strcmp(name, "?") != 0, "decoded an unknown type %d", p->type);
	FUZZ_CHECK(p->status <= 0 && p->status >= -FZ_SM_STATUS_MAX, "status %d", p->status);
	FUZZ_CHECK(p->ep_len <= URPC_TP_EP_MAX, "ep_len %u", p->ep_len);
	FUZZ_CHECK(!(p->window & (p->window - 1)), "window %u is not a power of two", p->window);
	/* Requests go to the server; so does the client's transport control. */
	if (urpc__sm_pkt_is_req(p->type))
		FUZZ_CHECK(urpc__sm_pkt_to_server(p->type), "a request to the client (%s)", name);
	FUZZ_CHECK(p->from.sin_family == 0 && p->from.sin_port == 0, "from not zeroed");
}

/* Stage 1: the input as a received datagram. */
static void as_datagram(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	uint8_t out[URPC_SM_PKT_MAX];
	struct urpc_sm_pkt p, again, popped;
	size_t n;
	int ret;

	FUZZ_CHECK(copy, "out of memory");
	if (size)
		memcpy(copy, data, size);
	ret = urpc__sm_decode(copy, size, &p);
	free(copy);
	FUZZ_CHECK(ret == 0 || ret == -EPROTO, "decode returned %d", ret);
	if (ret)
		return;
	check_decoded(&p);

	n = urpc__sm_encode(&p, out);
	FUZZ_CHECK(n == size, "re-encoded to %zu bytes, received %zu", n, size);
	FUZZ_CHECK(!memcmp(out, data, n), "re-encoded bytes differ from the received ones");
	FUZZ_CHECK(urpc__sm_decode(out, n, &again) == 0, "the re-encoded packet does not decode");
	check_same(&p, &again, "decode(encode(decode(x)))");

	/* The Nexus hands it to an Rpc through the SPSC queue. */
	FUZZ_CHECK(urpc__sm_queue_push(queue, &p) == 0, "push into an empty queue");
	FUZZ_CHECK(urpc__sm_queue_pop(queue, &popped) == 1, "pop after a push");
	FUZZ_CHECK(urpc__sm_queue_pop(queue, &again) == 0, "queue not empty after one pop");
	check_same(&p, &popped, "queue");
}

/*
 * The MAC of encoded packet @out (@n bytes) from nonce @a to nonce @b: the
 * same whatever its MAC field holds, another when byte @at (not in the MAC
 * field) changes, and another for the other direction. A collision is a
 * 2^-64 event: a failure here is a bug.
 */
static void check_mac(uint8_t *out, size_t n, uint64_t a, uint64_t b, uint8_t at)
{
	uint64_t m = urpc__nxa_mac(a, b, out, n);
	size_t i = at % n;

	FUZZ_CHECK(m != 0, "a MAC of 0 reads as unsigned");
	memset(out + URPC_SM_OFF_MAC, 0xa5, 8);
	FUZZ_CHECK(urpc__nxa_mac(a, b, out, n) == m, "the MAC covers its own field");
	if (a != b)
		FUZZ_CHECK(urpc__nxa_mac(b, a, out, n) != m, "both directions share a MAC");
	if (i < URPC_SM_OFF_MAC || i >= URPC_SM_OFF_MAC + 8) {
		out[i] ^= 0x01;
		FUZZ_CHECK(urpc__nxa_mac(a, b, out, n) != m, "byte %zu is not covered", i);
		out[i] ^= 0x01;
	}
}

/* Stage 2: the input as the fields of a packet to send. */
static void as_fields(const uint8_t *data, size_t size)
{
	struct fz_in in = {data, size};
	struct urpc_sm_pkt p, back;
	uint8_t out[URPC_SM_PKT_MAX];
	const uint8_t *ep;
	size_t n, got;
	unsigned w;

	memset(&p, 0, sizeof(p));
	p.type = (enum urpc_sm_pkt_type)(URPC_SM_PKT_CONNECT_REQ +
					 fz_u8(&in) % URPC_SM_PKT_WIRE_MAX);
	p.status = -(int32_t)(fz_u16(&in) % (FZ_SM_STATUS_MAX + 1));
	p.client_rpc_id = fz_u8(&in);
	p.server_rpc_id = fz_u8(&in);
	p.transport = fz_u8(&in);
	p.client_sess = fz_u32(&in);
	p.server_sess = fz_u32(&in);
	p.token = fz_u64(&in);
	p.seq = fz_u64(&in);
	p.max_msg = fz_u32(&in);
	p.nexus_inc = fz_u64(&in);
	p.nexus_epoch = fz_u64(&in);
	p.rpc_inc = fz_u32(&in);
	p.cookie = fz_u64(&in);
	p.nx_nonce = fz_u64(&in);
	p.mac = fz_u64(&in);
	p.ep_len = (uint16_t)(fz_u8(&in) % (URPC_TP_EP_MAX + 1));
	ep = fz_bytes(&in, p.ep_len, &got);
	memcpy(p.ep, ep, got); /* short inputs: the rest stays zero */
	w = fz_u8(&in) % 9u;   /* last: the older corpus keeps its meaning */
	p.window = (uint8_t)(w ? 1u << (w - 1) : 0);

	n = urpc__sm_encode(&p, out);
	FUZZ_CHECK(n <= URPC_SM_PKT_MAX, "encoded %zu bytes", n);
	FUZZ_CHECK(urpc__sm_decode(out, n, &back) == 0, "an encoded %s does not decode",
		   urpc__sm_pkt_type_str(p.type));
	check_same(&p, &back, "decode(encode(p))");
	/* A byte less is never a packet. */
	FUZZ_CHECK(urpc__sm_decode(out, n - 1, &back) == -EPROTO, "a truncated packet decodes");
	check_mac(out, n, p.nx_nonce, p.token, fz_u8(&in));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	as_datagram(data, size);
	as_fields(data, size);
	return 0;
}
