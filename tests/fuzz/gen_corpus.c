/* SPDX-License-Identifier: MIT */
/*
 * gen_corpus DIR: write the seed corpus of every fuzz target under
 * DIR/<target>/ (tests/fuzz/corpus/ in the repository): a handful of valid
 * inputs that reach each parser's main paths, and edge cases next to them
 * (one byte short, one past a limit, a wrong field), and regressions
 * (regress_*) of bugs the fuzzers found. Deterministic: running it again
 * rewrites the same files; other files in DIR are left alone.
 *
 * Owns the files it writes. Calls: urpc__sm_encode (src/nexus/sm.h), the
 * header helpers of src/rpc/pkthdr.h and apps/kv/kv_proto.h, libc.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../apps/kv/kv_proto.h"
#include "formats.h"
#include "fuzz.h"
#include "nexus/sm.h"
#include "rpc/pkthdr.h"

static const char *root;

/* A growing input. */
struct buf {
	uint8_t b[16384];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > sizeof(b->b)) {
		fprintf(stderr, "gen_corpus: a seed outgrew its buffer\n");
		exit(1);
	}
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put16(struct buf *b, uint16_t v)
{
	put8(b, (uint8_t)v);
	put8(b, (uint8_t)(v >> 8));
}

static void put32(struct buf *b, uint32_t v)
{
	put16(b, (uint16_t)v);
	put16(b, (uint16_t)(v >> 16));
}

static void put64(struct buf *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b, (uint32_t)(v >> 32));
}

static void fill(struct buf *b, uint8_t v, size_t n)
{
	while (n--)
		put8(b, v);
}

static void mkdirs(const char *target)
{
	char path[4096];

	if (mkdir(root, 0755) && errno != EEXIST) {
		perror(root);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) && errno != EEXIST) {
		perror(path);
		exit(1);
	}
}

static void emit(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* ---- fuzz_sm: SM datagrams ---- */

static size_t sm_pkt(uint8_t *out, enum urpc_sm_pkt_type t, int status, uint16_t ep_len)
{
	struct urpc_sm_pkt p;
	uint16_t i;

	memset(&p, 0, sizeof(p));
	p.type = t;
	p.status = status;
	p.client_rpc_id = 2;
	p.server_rpc_id = 1;
	p.transport = URPC_TRANSPORT_UDP;
	p.client_sess = 3;
	p.server_sess = 5;
	p.nexus_inc = 0x5eed5eed5eed5eedull;
	p.nexus_epoch = 2;
	p.rpc_inc = urpc__sm_pkt_is_req(t) ? 1 : 0;
	p.token = 0x1122334455667788ull;
	p.seq = 1;
	p.max_msg = 1392;
	if (t == URPC_SM_PKT_CONNECT_REQ || t == URPC_SM_PKT_CONNECT_COOKIE)
		p.cookie = 0x0c00c1e0c00c1e01ull;
	/* The sender's half of the pair's secret, and a MAC (nexus_auth.h). */
	p.nx_nonce = 0x0a0b0c0d0e0f1011ull;
	if (t != URPC_SM_PKT_CONNECT_COOKIE)
		p.mac = 0x5151515151515151ull;
	p.ep_len = ep_len;
	for (i = 0; i < ep_len; i++)
		p.ep[i] = (uint8_t)(i + 1);
	return urpc__sm_encode(&p, out);
}

static void gen_sm(void)
{
	static const struct {
		const char *name;
		enum urpc_sm_pkt_type t;
		int status;
		uint16_t ep_len;
	} v[] = {
		{"connect_req", URPC_SM_PKT_CONNECT_REQ, 0, 16},
		{"connect_resp", URPC_SM_PKT_CONNECT_RESP, 0, 16},
		{"connect_resp_enoent", URPC_SM_PKT_CONNECT_RESP, -ENOENT, 0},
		{"disconnect_req", URPC_SM_PKT_DISCONNECT_REQ, 0, 0},
		{"disconnect_resp", URPC_SM_PKT_DISCONNECT_RESP, 0, 0},
		{"ping_req", URPC_SM_PKT_PING_REQ, 0, 0},
		{"ping_resp_reset", URPC_SM_PKT_PING_RESP, -ECONNRESET, 0},
		{"reset", URPC_SM_PKT_RESET, -ECONNRESET, 0},
		{"tp_ctl_c2s_max_ep", URPC_SM_PKT_TP_CTL_C2S, 0, URPC_TP_EP_MAX},
		{"tp_ctl_s2c", URPC_SM_PKT_TP_CTL_S2C, 0, 12},
		{"nx_ping", URPC_SM_PKT_NX_PING, 0, 32},
		{"nx_pong", URPC_SM_PKT_NX_PONG, 0, 32},
		{"connect_cookie", URPC_SM_PKT_CONNECT_COOKIE, 0, 0},
		{"status_max", URPC_SM_PKT_CONNECT_RESP, -4095, 0},
	};
	uint8_t b[URPC_SM_PKT_MAX + 8];
	size_t i, n;

	mkdirs("sm");
	for (i = 0; i < URPC_ARRAY_SIZE(v); i++) {
		n = sm_pkt(b, v[i].t, v[i].status, v[i].ep_len);
		emit("sm", v[i].name, b, n);
	}
	/* Edge cases around a valid CONNECT_REQ. */
	n = sm_pkt(b, URPC_SM_PKT_CONNECT_REQ, 0, 16);
	emit("sm", "edge_one_byte_short", b, n - 1);
	b[n] = 0;
	emit("sm", "edge_one_byte_long", b, n + 1);
	b[11] = 3;
	emit("sm", "edge_window_not_pow2", b, n);
	b[11] = 64;
	emit("sm", "edge_window_64", b, n);
	n = sm_pkt(b, URPC_SM_PKT_PING_REQ, 0, 0);
	b[3] = URPC_SM_PKT_WIRE_MAX + 1; /* NX_NOTICE: the Nexus's own, never on the wire */
	emit("sm", "edge_type_past_wire", b, n);
	n = sm_pkt(b, URPC_SM_PKT_PING_REQ, 0, 0);
	b[4] = 0x00;
	b[5] = 0x10; /* status 4096 */
	emit("sm", "edge_status_4096", b, n);
	n = sm_pkt(b, URPC_SM_PKT_CONNECT_REQ, 0, URPC_TP_EP_MAX);
	b[40] = URPC_TP_EP_MAX + 1;
	b[n] = 0;
	emit("sm", "edge_ep_len_65", b, n + 1);
	emit("sm", "edge_empty", b, 0);
}

/* ---- fuzz_kv_req: type, thread count, thread, payload ---- */

static void kv_single(const char *name, uint8_t type_sel, uint8_t threads_sel, uint8_t id,
		      const char *key, uint16_t key_len, uint32_t val_len, size_t extra)
{
	struct buf b = {.n = 0};
	uint8_t h[8];

	put8(&b, type_sel);
	put8(&b, threads_sel);
	put8(&b, id);
	kv_put_req_hdr(h, key_len, 1, val_len);
	put(&b, h, sizeof(h));
	put(&b, key, strlen(key));
	fill(&b, 'v', val_len + extra);
	emit("kv_req", name, b.b, b.n);
}

/*
 * The first key of @len bytes from number @from on that thread @id out of
 * @n owns, into @key; returns its number.
 */
static unsigned kv_key_of(char *key, size_t len, unsigned id, unsigned n, unsigned from)
{
	unsigned i;

	for (i = from;; i++) {
		snprintf(key, len + 1, "k%0*u", (int)len - 1, i);
		if (kv_key_hash(key, len) % n == id)
			return i;
	}
}

static void gen_kv(void)
{
	char key[KV_MAX_KEY + 1], k2[8];
	struct buf b = {.n = 0};
	uint8_t h[8];
	unsigned i, num;

	mkdirs("kv_req");
	kv_single("get", 0, 0, 0, "foo", 3, 0, 0);
	kv_single("put", 1, 0, 0, "foo", 3, 5, 0);
	kv_single("del", 2, 0, 0, "foo", 3, 0, 0);
	kv_single("edge_put_one_byte_long", 1, 0, 0, "foo", 3, 5, 1);
	kv_single("edge_empty_key", 0, 0, 0, "", 0, 0, 0);
	memset(key, 'x', KV_MAX_KEY);
	key[KV_MAX_KEY] = 0;
	kv_single("put_max_key", 1, 0, 0, key, KV_MAX_KEY, 4, 0);
	kv_single("edge_key_251", 1, 0, 0, key, KV_MAX_KEY + 1, 0, 0);
	kv_key_of(k2, 4, 2, 4, 0);
	kv_single("get_thread_2_of_4", 0, 3, 2, k2, 4, 0, 0);
	kv_single("edge_wrong_thread", 0, 3, 1, k2, 4, 0, 0);
	emit("kv_req", "edge_short", "\x03\x00\x00\x01\x00", 5);

	/* MGET of three keys of thread 1 out of 2. */
	put8(&b, 3);
	put8(&b, 1);
	put8(&b, 1);
	kv_put_req_hdr(h, 0, 3, 0);
	put(&b, h, sizeof(h));
	for (i = 0, num = 0; i < 3; i++) {
		num = kv_key_of(k2, 5, 1, 2, num) + 1;
		put16(&b, 5);
		put(&b, k2, 5);
	}
	emit("kv_req", "mget_3", b.b, b.n);
	put8(&b, 0);
	emit("kv_req", "edge_mget_trailing_byte", b.b, b.n);

	b.n = 0;
	put8(&b, 3);
	put8(&b, 0);
	put8(&b, 0);
	kv_put_req_hdr(h, 0, KV_MAX_MGET_KEYS, 0);
	put(&b, h, sizeof(h));
	for (i = 0; i < KV_MAX_MGET_KEYS; i++) {
		put16(&b, 1);
		put8(&b, (uint8_t)('A' + i % 26));
	}
	emit("kv_req", "mget_64", b.b, b.n);
	b.b[5] = KV_MAX_MGET_KEYS + 1;
	emit("kv_req", "edge_mget_65", b.b, b.n);
}

/* ---- fuzz_udp_os: setup, operations, records ---- */

/* A record: patch, sel, then the datagram (a udp header and an extension). */
static void udp_rec(struct buf *b, uint8_t patch, uint8_t sel, uint8_t type, uint32_t op_id,
		    uint32_t chunk, uint64_t raddr, uint64_t len, uint32_t chunk_size,
		    size_t payload)
{
	put8(b, patch);
	put8(b, sel);
	put16(b, (uint16_t)(40 + payload));
	put16(b, 0x7055);
	put8(b, 1);
	put8(b, type);
	put32(b, op_id);
	put32(b, chunk);
	put32(b, 0);
	put64(b, raddr);
	put64(b, len);
	put32(b, 0);
	put32(b, chunk_size);
	fill(b, 0xee, payload);
}

static void udp_setup(struct buf *b, uint8_t mtu_sel, uint8_t dgram_sel, uint8_t nops)
{
	b->n = 0;
	put8(b, mtu_sel);
	put8(b, dgram_sel);
	put8(b, nops);
	/* READ 100 bytes at 0; WRITE 3000 bytes at 100 */
	if (nops >= 1) {
		put8(b, 0);
		put16(b, 0);
		put16(b, 99);
	}
	if (nops >= 2) {
		put8(b, 1);
		put16(b, 100);
		put16(b, 2999);
	}
}

static void gen_udp(void)
{
	const uint8_t all =
		UDP_P_FROM_PEER | UDP_P_HDR | UDP_P_RKEY | UDP_P_RADDR | UDP_P_RANGE | UDP_P_FIT;
	const uint8_t reply = UDP_P_FROM_PEER | UDP_P_HDR | UDP_P_OP_ID | UDP_P_RANGE | UDP_P_FIT;
	struct buf b;

	mkdirs("udp_os");
	udp_setup(&b, 2, 2, 2);
	emit("udp_os", "setup_only", b.b, b.n);

	udp_setup(&b, 2, 2, 0);
	udp_rec(&b, all, 0, UDP_W_RD_REQ, 1, 0, 0, 64, 32, 0);
	emit("udp_os", "serve_read", b.b, b.n);
	udp_setup(&b, 2, 2, 0);
	udp_rec(&b, all, 0, UDP_W_RD_REQ, 1, 0, 0, 64, 32, 0);
	b.b[3 + 4 + 12] = 8; /* the header's status: a group of 8 chunks (2 exist) */
	emit("udp_os", "serve_read_group", b.b, b.n);
	udp_setup(&b, 2, 2, 0);
	udp_rec(&b, all, 0, UDP_W_WR_DATA, 1, 1, 16, 100, 60, 40);
	emit("udp_os", "serve_write", b.b, b.n);
	udp_setup(&b, 2, 2, 0);
	udp_rec(&b, all, 1, UDP_W_WR_DATA, 1, 0, 0, 10, 10, 10); /* read-only: NAK */
	emit("udp_os", "serve_write_read_only", b.b, b.n);
	udp_setup(&b, 0, 0, 0);
	udp_rec(&b, all & ~UDP_P_RKEY, 0, UDP_W_RD_REQ, 1, 0, 0, 64, 32, 0); /* wrong key */
	emit("udp_os", "serve_read_bad_key", b.b, b.n);
	udp_setup(&b, 2, 2, 0);
	udp_rec(&b, UDP_P_FROM_PEER | UDP_P_HDR, 0, UDP_W_RD_REQ, 1, 0, ~0ull - 8, 64, 32, 0);
	emit("udp_os", "edge_serve_wrapping_range", b.b, b.n);

	udp_setup(&b, 2, 2, 2);
	udp_rec(&b, reply, 0, UDP_W_RD_DATA, 0, 0, 0, 0, 0, 0);
	udp_rec(&b, reply, 0, UDP_W_WR_ACK, 1, 0, 0, 0, 0, 0);
	udp_rec(&b, reply, 0, UDP_W_WR_ACK, 1, 1, 0, 0, 0, 0);
	emit("udp_os", "replies", b.b, b.n);
	udp_setup(&b, 1, 1, 2);
	udp_rec(&b, reply, 0, UDP_W_NAK, 1, 0, 0, 0, 0, 0);
	udp_rec(&b, reply, 0, UDP_W_WR_ACK, 1, 0, 0, 0, 0, 0); /* stale: the op failed */
	emit("udp_os", "nak", b.b, b.n);
	udp_setup(&b, 2, 2, 2);
	udp_rec(&b, reply & ~UDP_P_FIT, 0, UDP_W_NAK, 0, 0, 0, 0, 0, 0);
	emit("udp_os", "edge_nak_long", b.b, b.n);
	udp_setup(&b, 2, 2, 2);
	udp_rec(&b, reply & ~UDP_P_FROM_PEER, 0, UDP_W_RD_DATA, 0, 0, 0, 0, 0, 0);
	emit("udp_os", "edge_reply_from_stranger", b.b, b.n);
	udp_setup(&b, 0, 0, 2);
	udp_rec(&b, UDP_P_HDR, 0, UDP_W_DATA, 0, 0, 0, 0, 0, 8);
	udp_rec(&b, 0, 0, 9, 0, 0, 0, 0, 0, 0);
	emit("udp_os", "data_and_garbage", b.b, b.n);
	udp_setup(&b, 3, 3, 1);
	udp_rec(&b, UDP_P_HDR, 0, UDP_W_DATA, 0, 0, 0, 0, 0, 8100);
	emit("udp_os", "edge_truncated_data", b.b, b.n);
}

/* ---- fuzz_datapath: programs of commands ---- */

static void dp_enqueue(struct buf *b, uint8_t type, uint16_t size, uint16_t resp, uint8_t ms)
{
	put8(b, DP_ENQUEUE);
	put8(b, type);
	put16(b, size);
	put16(b, resp);
	put8(b, ms);
}

static void dp_pump(struct buf *b, uint8_t n)
{
	put8(b, DP_PUMP);
	put8(b, n);
}

/* A datagram: a header with the given fields, then @payload bytes. */
static void dp_pkt(struct buf *b, uint8_t cmd, uint8_t patch, uint8_t sel, uint8_t req_type,
		   uint8_t flags, uint16_t status, size_t payload)
{
	struct urpc_pkthdr h;

	urpc__pkthdr_fill(&h, cmd == DP_SRV_PKT ? URPC_PKT_REQ : URPC_PKT_RESP, req_type, status,
			  (uint32_t)payload, 0, 0, 0);
	h.flags = flags;
	put8(b, cmd);
	put8(b, patch);
	put8(b, sel);
	put16(b, (uint16_t)(sizeof(h) + payload));
	put(b, &h, sizeof(h));
	fill(b, 0x5a, payload);
}

/* A request at the server whose header carries @budget_us, then @payload bytes. */
static void dp_pkt_budget(struct buf *b, uint8_t patch, uint8_t sel, uint8_t req_type,
			  uint32_t budget_us, size_t payload)
{
	struct urpc_pkthdr h;

	urpc__pkthdr_fill(&h, URPC_PKT_REQ, req_type, 0, (uint32_t)payload, 0, 0, 0);
	h.budget_us = htole32(budget_us);
	put8(b, DP_SRV_PKT);
	put8(b, patch);
	put8(b, sel);
	put16(b, (uint16_t)(sizeof(h) + payload));
	put(b, &h, sizeof(h));
	fill(b, 0x5a, payload);
}

/* An SM datagram of the header's length, fields filled by the patches. */
static void dp_sm(struct buf *b, uint8_t patch, enum urpc_sm_pkt_type t)
{
	put8(b, DP_SM);
	put8(b, patch);
	put8(b, (uint8_t)(t - URPC_SM_PKT_CONNECT_REQ));
	put8(b, URPC_SM_HDR_LEN);
	fill(b, 0, URPC_SM_HDR_LEN);
}

static void gen_datapath(void)
{
	const uint8_t req = DP_P_HDR | DP_P_SESS | DP_P_SIZE | DP_P_REQ | DP_P_TYPE;
	const uint8_t sm = DP_S_FROM_NEXUS | DP_S_HDR | DP_S_TYPE | DP_S_IDS | DP_S_LEN;
	struct buf b;
	uint8_t t;

	mkdirs("datapath");
	for (t = 0; t < DP_NTYPES; t++) {
		static const char *names[] = {"rpc_no_handler", "rpc_echo", "rpc_defer",
					      "rpc_large_resp", "rpc_copy"};

		b.n = 0;
		dp_enqueue(&b, t, 32, 30000, 50);
		dp_pump(&b, 7);
		put8(&b, DP_ANSWER);
		put16(&b, 16);
		dp_pump(&b, 7);
		emit("datapath", names[t], b.b, b.n);
	}
	/*
	 * Regression (commit "sessions: a server slot's preallocated response
	 * buffer reports its real capacity"): an empty request makes DP_T_LARGE
	 * answer max_msg + 1 bytes, which the slot's buffer claimed to hold.
	 */
	b.n = 0;
	dp_enqueue(&b, DP_T_LARGE, 0, 30000, 50);
	dp_pump(&b, 7);
	emit("datapath", "regress_resp_msgbuf_capacity", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_ECHO, 9000, 9000, 100); /* large both ways */
	dp_enqueue(&b, DP_T_ECHO, 10, 4, 100);	    /* response too big for its buffer */
	dp_pump(&b, 7);
	dp_pump(&b, 7);
	emit("datapath", "rpc_large_and_small_resp", b.b, b.n);

	/* Requests injected at the server: new, duplicate, stale. */
	b.n = 0;
	dp_pkt(&b, DP_SRV_PKT, req, 3 | 1 << 3, DP_T_ECHO, 0, 0, 16);
	dp_pkt(&b, DP_SRV_PKT, req, 3 | 0 << 3, DP_T_ECHO, 0, 0, 16);
	dp_pkt(&b, DP_SRV_PKT, req, 3 | 2 << 3, DP_T_ECHO, 0, 0, 16);
	dp_pump(&b, 3);
	emit("datapath", "srv_new_dup_stale", b.b, b.n);
	/* A request with the client's time left in budget_us (2 s), deferred then answered. */
	b.n = 0;
	dp_pkt_budget(&b, req, 4 | 1 << 3, DP_T_DEFER, 2000000, 8);
	dp_pump(&b, 3);
	put8(&b, DP_ANSWER);
	put16(&b, 8);
	dp_pump(&b, 3);
	emit("datapath", "srv_req_budget", b.b, b.n);
	b.n = 0;
	dp_pkt(&b, DP_SRV_PKT, req, 5 | 1 << 3, DP_T_DEFER, 0, 0, 0);
	dp_pkt(&b, DP_SRV_PKT, req, 5 | 3 << 3, DP_T_ECHO, 0, 0, 4); /* slot busy in handler */
	put8(&b, DP_ANSWER);
	put16(&b, 5000); /* large answer */
	dp_pump(&b, 7);
	emit("datapath", "srv_deferred_then_large", b.b, b.n);
	b.n = 0;
	dp_pkt(&b, DP_SRV_PKT, req | DP_P_DESC, 2 | 1 << 3, DP_T_DEFER, 0, 0, 24);
	dp_pump(&b, 7);
	dp_pkt(&b, DP_SRV_PKT, req, 2 | 0 << 3, DP_T_DEFER, 0, 0, 0); /* dup: the ack again */
	emit("datapath", "srv_large_req", b.b, b.n);
	b.n = 0;
	dp_pkt(&b, DP_SRV_PKT, 0, 0, DP_T_ECHO, 0, 0, 8); /* no patch: bad session */
	dp_pkt(&b, DP_SRV_PKT, req & ~DP_P_SIZE, 1 << 3, DP_T_ECHO, 0, 0, 8);
	put8(&b, DP_SRV_PKT);
	put8(&b, req);
	put8(&b, 0);
	put16(&b, 39);
	fill(&b, 0x75, 39);
	emit("datapath", "edge_srv_bad", b.b, b.n);

	/* Responses injected at the client, for its requests in flight. */
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 64, 50);
	dp_pump(&b, 1);
	dp_pkt(&b, DP_CLI_PKT, req | DP_P_CLEAR_FLAGS, 0, DP_T_DEFER, 0, 0, 8);
	dp_pkt(&b, DP_CLI_PKT, req | DP_P_CLEAR_FLAGS, 0, DP_T_DEFER, 0, 0, 8); /* dup */
	emit("datapath", "cli_resp", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 64, 50);
	dp_pump(&b, 1);
	dp_pkt(&b, DP_CLI_PKT, req, 0, DP_T_DEFER, 0, ENOENT, 0);
	emit("datapath", "cli_error_status", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 20000, 50);
	dp_pump(&b, 1);
	dp_pkt(&b, DP_CLI_PKT, req | DP_P_DESC, 0, DP_T_DEFER, 0, 0, 24);
	dp_pump(&b, 3);
	emit("datapath", "cli_large_resp", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 12000, 64, 20);
	dp_pump(&b, 2);
	dp_pkt(&b, DP_CLI_PKT, req, 0, DP_T_DEFER, URPC_PKT_F_ACK, 0, 0);
	put8(&b, DP_ADVANCE);
	put8(&b, 30);
	dp_pump(&b, 2);
	emit("datapath", "cli_large_req_ack_deadline", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 64, 200);
	dp_pump(&b, 1);
	put8(&b, DP_ADVANCE);
	put8(&b, 6);
	dp_pump(&b, 2);
	put8(&b, DP_ADVANCE);
	put8(&b, 12);
	dp_pump(&b, 2);
	emit("datapath", "cli_retransmit", b.b, b.n);

	/* Session management. */
	b.n = 0;
	dp_sm(&b, sm, URPC_SM_PKT_PING_REQ);
	dp_sm(&b, sm, URPC_SM_PKT_PING_RESP);
	dp_pump(&b, 1);
	emit("datapath", "sm_ping", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 64, 50);
	dp_pump(&b, 1);
	dp_sm(&b, sm, URPC_SM_PKT_RESET);
	dp_pump(&b, 1);
	emit("datapath", "sm_reset", b.b, b.n);
	b.n = 0;
	dp_sm(&b, sm | DP_S_EP | DP_S_COOKIE, URPC_SM_PKT_CONNECT_REQ);
	dp_sm(&b, sm | DP_S_EP, URPC_SM_PKT_CONNECT_REQ);
	dp_pump(&b, 2);
	emit("datapath", "sm_connect_req", b.b, b.n);
	b.n = 0;
	dp_sm(&b, sm, URPC_SM_PKT_DISCONNECT_REQ);
	dp_pump(&b, 2);
	emit("datapath", "sm_disconnect_req", b.b, b.n);
	b.n = 0;
	dp_sm(&b, sm & ~DP_S_FROM_NEXUS, URPC_SM_PKT_TP_CTL_C2S);
	dp_sm(&b, sm & ~DP_S_HDR, URPC_SM_PKT_CONNECT_RESP);
	emit("datapath", "edge_sm", b.b, b.n);
	b.n = 0;
	dp_enqueue(&b, DP_T_DEFER, 8, 64, 50);
	dp_enqueue(&b, DP_T_ECHO, 9000, 9000, 50);
	dp_pump(&b, 2);
	put8(&b, DP_DISCONNECT);
	dp_pump(&b, 7);
	emit("datapath", "disconnect_in_flight", b.b, b.n);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR   (writes DIR/<target>/<seed>)\n", argv[0]);
		return 2;
	}
	root = argv[1];
	gen_sm();
	gen_kv();
	gen_udp();
	gen_datapath();
	return 0;
}
