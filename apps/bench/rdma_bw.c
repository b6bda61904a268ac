/* SPDX-License-Identifier: MIT */
/*
 * urpc-rdma-bw: bandwidth and operation rate of users' one-sided READs and
 * WRITEs (urpc_rdma_read, urpc_rdma_write) against memory a peer exposed
 * (urpc_mem_expose), next to a baseline measured in the same run: a memcpy
 * of the same sizes at the same offsets on loop and udp, perftest's
 * ib_read_bw / ib_write_bw on verbs.
 *
 * A server Rpc and a client Rpc live in this one process, connected by one
 * session over the chosen transport. The server's handler exposes a region
 * to the client's session and answers with its struct urpc_rbuf; the client
 * keeps WINDOW operations of SIZE bytes in flight against it. urpc and its
 * baseline are measured in turn, PAIRS times per size and operation, and
 * the median of the per-pair ratios is printed with its spread.
 *
 * Threads: on loop both Rpcs share the main thread (its endpoints must). On
 * udp and verbs the server Rpc runs its event loop in a thread of its own
 * by default (on udp the owner's event loop serves the peer's operations),
 * paused while a baseline runs; --threads 1 drives both from the main
 * thread there too.
 *
 * Uses only <urpc/urpc.h>.
 */
#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urpc/urpc.h>

#include "../common/cli.h"
#include "bench_common.h"

#define PROG "urpc-rdma-bw"

#define MAX_SIZES 32
#define MAX_WINDOW 256 /* operations in flight (the library posts 32 at a time) */
#define MAX_BATCH 256
#define STALL_S 60.0 /* no completion for this long: give up */
#define DEFAULT_SIZES "8,64,512,4K,64K,1M,16M"
#define PERFTEST_PORT 18900

struct opts {
	struct bench_cli cli; /* --transport, --duration, devices, --no-baseline, --csv */
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
	unsigned long window;
	unsigned long batch; /* operations per urpc_rdma_submit(); 1: urpc_rdma_read/_write */
	unsigned long pairs;
	bool ops[2]; /* [0] read, [1] write: --ops */
	unsigned threads;
	unsigned long perftest_mib;
};

/* The owner of the region: the server's handler exposes it. */
struct owner {
	uint8_t *mem;
	size_t len;
	atomic_int expose_ret;
};

struct bw;

/* One batch of the window (one operation when --batch is 1). */
struct slot {
	struct bw *b;
	struct urpc_rdma_op *ops; /* its --batch operations (their offsets) */
	bool busy;
};

/* The client, and the state of the run being measured. */
struct bw {
	const struct opts *o;
	struct bench_server *sv;
	struct owner *own;
	struct urpc_rpc *rpc;
	int session;
	struct bench_sm sm;
	struct urpc_rbuf rb;
	struct urpc_msgbuf local; /* as long as the region */
	struct slot slots[MAX_WINDOW];
	struct urpc_rdma_op ops[MAX_WINDOW];
	unsigned nslots, batch; /* of the run: window / batch batches of batch */
	size_t size;
	bool write;
	unsigned long completed, errors, warm, c0, n;
	int first_error;
	bool measuring, done;
	double t0, t_end, t_last;
	bool got_rbuf; /* the request for the rbuf came back ... */
	int rbuf_status;
};

/* One (size, operation) row: every pair's figures. */
struct row {
	double umb[BENCH_MAX_PAIRS], uops[BENCH_MAX_PAIRS];
	double bmb[BENCH_MAX_PAIRS], bops[BENCH_MAX_PAIRS];
	double ratio[BENCH_MAX_PAIRS];
	unsigned n, nbase;
};

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-rdma-bw - one-sided READ and WRITE bandwidth of urpc next to a baseline\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-rdma-bw [--transport loop|udp|verbs] [--sizes LIST] [--window W]\n"
		"                 [--batch B]\n"
		"                 [--ops read,write] [--duration SEC] [--pairs N] [--threads 1|2]\n"
		"                 [--device DEV] [--server-device DEV] [--perftest-server IP]\n"
		"                 [--perftest-mib MIB] [--no-baseline] [--csv FILE]\n"
		"    urpc-rdma-bw --help\n"
		"\n"
		"DESCRIPTION\n"
		"    Runs a server Rpc and a client Rpc in this process, connected by one\n"
		"    session over the chosen transport. The server exposes a region as long\n"
		"    as the largest size (urpc_mem_expose, READ and WRITE) and answers a\n"
		"    request with its struct urpc_rbuf. For each size and operation the\n"
		"    client keeps W operations of SIZE bytes in flight against it\n"
		"    (urpc_rdma_read into, or urpc_rdma_write from, a message buffer as long\n"
		"    as the region); operation i of the window uses offset i x SIZE on both\n"
		"    sides while that fits, else 0. W operations complete first (warm-up);\n"
		"    the measurement runs from then to the first completion after SEC\n"
		"    seconds and at least 2 x W operations: bytes and operations completed\n"
		"    over that time.\n"
		"\n"
		"    The baseline, measured right after each urpc run (the server Rpc's\n"
		"    thread paused), PAIRS times in turn:\n"
		"      loop, udp  memcpy() of SIZE bytes between the same two buffers at the\n"
		"                 same offsets, one thread, for SEC seconds: the bound of a\n"
		"                 transport that copies once on one core;\n"
		"      verbs      perftest's ib_read_bw / ib_write_bw, server on the server\n"
		"                 device, client on the client device, -t W (and -o W, at\n"
		"                 most 128, for READ), -F, about MIB MiB per run (at least 2 x W and at\n"
		"                 most 20000 operations). perftest prints MiB/s: converted\n"
		"                 to MB/s here. A perftest run is killed when it has not\n"
		"                 finished after 30 s plus 1 s per MB it moves; that pair\n"
		"                 then has no baseline (stderr says so).\n"
		"    Each row prints the medians over the pairs and the median of the per-\n"
		"    pair ratios urpc/baseline, with their interquartile range and range (a\n"
		"    pair whose baseline measured nothing has no ratio; stderr says so).\n"
		"    Before measuring, the largest size is written and read back once and\n"
		"    compared, so the figures are of operations that move the right bytes.\n"
		"\n"
		"OPTIONS\n"
		"    -t, --transport loop|udp|verbs\n"
		"        Transport of both Rpcs (default: the library's, URPC_TRANSPORT, else\n"
		"        verbs on an active RDMA port, else udp). verbs needs an active RDMA\n"
		"        port (Soft-RoCE: apps/bench/rdma_bw_vm.sh runs this in the VM).\n"
		"    -s, --sizes LIST\n"
		"        Comma-separated operation sizes in bytes, with an optional K or M\n"
		"        suffix (KiB, MiB), each from 1 to 64M (default " DEFAULT_SIZES ").\n"
		"    -w, --window W\n"
		"        Operations in flight, 1 to %d (default 16). The library posts at\n"
		"        most 32 of an Rpc's operations at a time to the transport and\n"
		"        queues the rest.\n"
		"    -b, --batch B\n"
		"        1 (default): each operation is one urpc_rdma_read() or\n"
		"        urpc_rdma_write() with a continuation of its own. 2 to %d: the\n"
		"        window's operations go out B at a time, each batch with one\n"
		"        urpc_rdma_submit() and one continuation (W/B batches in flight; W\n"
		"        must be a multiple of B). Operation i of a batch keeps the offset\n"
		"        of its place in the window.\n"
		"    -o, --ops LIST\n"
		"        read, write or read,write (default): which operations to measure.\n"
		"    -d, --duration SEC\n"
		"        Seconds per measurement (urpc, and memcpy), 0.01 to 3600\n"
		"        (default 0.3).\n"
		"    -T, --threads 1|2\n"
		"        1: both Rpcs in the main thread, one event-loop pass each in turn;\n"
		"        2: the server Rpc in a thread of its own, busy-polling, as a server\n"
		"        process would. Default 1 on loop (the only choice there), 2\n"
		"        otherwise. On a host with more busy threads than cores, two\n"
		"        busy-polling threads wait for each other's time slices: 1 holds up\n"
		"        better there.\n"
		"    -p, --pairs N\n"
		"        urpc and baseline measurements in turn per size and operation, 1 to\n"
		"        %d (default %d).\n"
		"    --device DEV\n"
		"        verbs: the client's RDMA device (\"rxe1\", \"mlx5_0:1\"); default\n"
		"        URPC_DEVICE, else the first active port. Also perftest's client.\n"
		"    --server-device DEV\n"
		"        verbs: the server's device; default as --device.\n"
		"    --perftest-server IP\n"
		"        verbs: the address perftest's client connects to (default\n"
		"        URPC_RXE_SERVER_IP, else 127.0.0.1).\n"
		"    --perftest-mib MIB\n"
		"        verbs: MiB each perftest run moves, 1 to 4096 (default 64).\n"
		"    --no-baseline\n"
		"        urpc only.\n"
		"    --csv FILE\n"
		"        Also write one row per size and operation to FILE (overwritten).\n"
		"    -h, --help\n"
		"        Show this help.\n"
		"\n"
		"OUTPUT\n"
		"    A line naming the run, then a markdown table on stdout: size,\n"
		"    operation, urpc MB/s and operations/s (MB = 10^6 bytes), the\n"
		"    baseline's name, MB/s and operations/s, urpc/baseline (median), its\n"
		"    interquartile range and its range. A progress line per pair goes to\n"
		"    stderr. CSV columns: transport, op, size, window, batch, pairs,\n"
		"    urpc_mb_per_s, urpc_ops_per_s, baseline, base_mb_per_s,\n"
		"    base_ops_per_s, ratio, ratio_q1, ratio_q3, ratio_min, ratio_max.\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a setup step fails, an operation fails, the bytes\n"
		"    read back differ, nothing completes for %.0f s, or a baseline cannot\n"
		"    run; 2 on bad usage.\n"
		"\n"
		"EXAMPLES\n"
		"    urpc-rdma-bw --transport loop --sizes 64K,1M --pairs 7\n"
		"    urpc-rdma-bw --transport udp --ops write --window 8 --csv udp.csv\n"
		"    urpc-rdma-bw --transport loop --sizes 64 --window 256 --batch 64\n"
		"    urpc-rdma-bw --transport verbs --device rxe1 --server-device rxe0\n",
		MAX_WINDOW, MAX_BATCH, BENCH_MAX_PAIRS, BENCH_DEFAULT_PAIRS, STALL_S);
}

/* ---- option parsing -------------------------------------------------------- */

static int parse_sizes(const char *prog, const char *list, void *dst)
{
	struct opts *o = dst;

	return bench_parse_sizes(prog, list, 1, o->sizes, MAX_SIZES, &o->nsizes);
}

static int parse_ops(const char *prog, const char *val, void *dst)
{
	bool *ops = dst;

	if (!strcmp(val, "read,write") || !strcmp(val, "write,read")) {
		ops[0] = ops[1] = true;
	} else if (!strcmp(val, "read") || !strcmp(val, "write")) {
		ops[0] = !strcmp(val, "read");
		ops[1] = !ops[0];
	} else {
		fprintf(stderr, "%s: --ops must be read, write or read,write, got '%s'\n", prog,
			val);
		return -EINVAL;
	}
	return 0;
}

static int parse_threads(const char *prog, const char *val, void *dst)
{
	unsigned long v;

	if (urpc_app_parse_ulong(prog, val, "--threads", 1, 2, &v))
		return -EINVAL;
	*(unsigned *)dst = (unsigned)v;
	return 0;
}

/* 0: run; 1: --help printed; 2: bad usage (reported). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	const struct urpc_app_opt own[] = {
		{URPC_APP_FN("sizes", 's', o, parse_sizes)},
		{URPC_APP_ULONG("window", 'w', &o->window, 1, MAX_WINDOW)},
		{URPC_APP_ULONG("batch", 'b', &o->batch, 1, MAX_BATCH)},
		{URPC_APP_FN("ops", 'o', o->ops, parse_ops)},
		{URPC_APP_ULONG("pairs", 'p', &o->pairs, 1, BENCH_MAX_PAIRS)},
		{URPC_APP_ULONG("perftest-mib", 0, &o->perftest_mib, 1, 4096)},
		{URPC_APP_FN("threads", 'T', &o->threads, parse_threads)},
	};
	int ret;

	memset(o, 0, sizeof(*o));
	bench_cli_init(&o->cli);
	o->cli.duration = 0.3;
	o->window = 16;
	o->batch = 1;
	o->pairs = BENCH_DEFAULT_PAIRS;
	o->ops[0] = o->ops[1] = true;
	o->perftest_mib = 64;
	if (parse_sizes(PROG, DEFAULT_SIZES, o))
		return 2;
	ret = bench_parse_args(PROG, argc, argv, &o->cli, BENCH_CLI_ALL, own, URPC_APP_NOPTS(own),
			       usage);
	if (ret)
		return ret;
	if (o->cli.transport == URPC_TRANSPORT_LOOP && o->threads == 2) {
		fprintf(stderr, PROG ": --threads 2 needs udp or verbs: the loop transport's "
				     "endpoints must share one thread\n");
		return 2;
	}
	if (o->window % o->batch) {
		fprintf(stderr, PROG ": --window (%lu) must be a multiple of --batch (%lu)\n",
			o->window, o->batch);
		return 2;
	}
	if (!o->threads)
		o->threads = o->cli.transport == URPC_TRANSPORT_LOOP ? 1 : 2;
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

/* "64 KiB", "16 MiB", or bytes when neither divides. */
static const char *size_str(size_t size, char *buf, size_t len)
{
	if (size >= (1u << 20) && !(size % (1u << 20)))
		snprintf(buf, len, "%zu MiB", size >> 20);
	else if (size >= (1u << 10) && !(size % (1u << 10)))
		snprintf(buf, len, "%zu KiB", size >> 10);
	else
		snprintf(buf, len, "%zu B", size);
	return buf;
}

/* Offset of window slot @i for @size in a region of @len: i x size while it fits. */
static size_t slot_off(unsigned i, size_t size, size_t len)
{
	return (size_t)i * size <= len - size ? (size_t)i * size : 0;
}

static void rpc_opts(const struct opts *o, struct urpc_rpc_opts *ro)
{
	bench_rpc_opts(ro, o->cli.transport);
	/*
	 * The server pauses while a baseline runs (perftest takes seconds under
	 * emulation), a 16 MiB operation on Soft-RoCE takes half a second, and
	 * a vCPU of the TCG VM can stall for longer than the one-sided timeout's
	 * 1 s floor on a loaded host (seen: an RC connection failed for "no
	 * progress" at load 8): keep the failure detectors far off.
	 */
	ro->peer_timeout_ms = 120000;
	ro->one_sided_timeout_ms = 30000;
}

/* ---- the owner's handler ---------------------------------------------------- */

/* Expose the region to the session the request came on; answer its rbuf. */
static void handler(struct urpc_req_handle *h, void *arg)
{
	struct owner *own = arg;
	struct urpc_msgbuf *resp = urpc_req_resp_msgbuf(h);
	struct urpc_rbuf rb;
	int ret;

	ret = urpc_mem_expose(urpc_req_rpc(h), urpc_req_session(h), own->mem, own->len,
			      URPC_MEM_PEER_READS | URPC_MEM_PEER_WRITES, &rb);
	atomic_store(&own->expose_ret, ret);
	memcpy(resp->buf, &rb, sizeof(rb));
	urpc_msgbuf_resize(resp, ret ? 0 : sizeof(rb));
	urpc_resp_enqueue(h, resp);
}

/* ---- the client ------------------------------------------------------------- */

static void rbuf_cont(struct urpc_rpc *rpc, void *tag, int status, struct urpc_msgbuf *resp)
{
	struct bw *b = tag;

	b->got_rbuf = true;
	b->rbuf_status = status;
	if (!status && resp->data_size == sizeof(b->rb))
		memcpy(&b->rb, resp->buf, sizeof(b->rb));
	else if (!status)
		b->rbuf_status = -EIO;
}

/* Ask the server for its region's rbuf; 0 or -errno (reported). */
static int get_rbuf(struct bw *b)
{
	struct urpc_msgbuf req = {0}, resp = {0};
	double end = bench_now_s() + BENCH_SETUP_S;
	int ret;

	ret = urpc_msgbuf_alloc(b->rpc, 0, &req);
	if (!ret)
		ret = urpc_msgbuf_alloc(b->rpc, sizeof(b->rb), &resp);
	if (!ret)
		ret = urpc_req_enqueue(b->rpc, b->session, BENCH_REQ_TYPE, &req, &resp, rbuf_cont,
				       b, (uint32_t)(BENCH_SETUP_S * 1000));
	while (!ret && !b->got_rbuf && bench_now_s() < end)
		ret = bench_run_once(PROG, b->rpc, b->sv);
	if (!ret)
		ret = b->got_rbuf ? b->rbuf_status : -ETIMEDOUT;
	if (ret == -EIO && atomic_load(&b->own->expose_ret))
		ret = atomic_load(&b->own->expose_ret);
	if (ret)
		fprintf(stderr, PROG ": no rbuf of the server's %zu bytes: %s\n", b->own->len,
			urpc_strerror(ret));
	if (b->got_rbuf || !req.buf) {
		urpc_msgbuf_free(b->rpc, &req);
		urpc_msgbuf_free(b->rpc, &resp);
	}
	return ret;
}

static void op_cont(struct urpc_rpc *rpc, void *tag, int status)
{
	struct slot *s = tag;
	struct bw *b = s->b;
	double t = bench_now_s();

	s->busy = false;
	b->completed += b->batch;
	b->t_last = t;
	if (status) {
		if (!b->errors)
			b->first_error = status;
		b->errors++;
	}
	if (b->done)
		return;
	if (!b->measuring) {
		if (b->completed >= b->warm) {
			b->measuring = true;
			b->t0 = t;
			b->c0 = b->completed;
		}
		return;
	}
	/* At least 2 W operations: W large ones complete close together, in bursts. */
	if (t - b->t0 >= b->o->cli.duration && b->completed - b->c0 >= 2 * b->o->window) {
		b->done = true;
		b->t_end = t;
		b->n = b->completed - b->c0;
	}
}

static bool any_busy(const void *arg)
{
	const struct bw *b = arg;
	unsigned i;

	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].busy)
			return true;
	return false;
}

/* Post slot @s: one operation, or its batch with one urpc_rdma_submit(). */
static int post(struct bw *b, struct slot *s)
{
	const struct urpc_rdma_op *op = s->ops;
	int ret;

	if (b->batch > 1)
		ret = urpc_rdma_submit(b->rpc, b->session, s->ops, b->batch, 0, op_cont, s);
	else if (b->write)
		ret = urpc_rdma_write(b->rpc, b->session, &b->local, op->local_off, &b->rb,
				      op->remote_off, op->len, op_cont, s, 0);
	else
		ret = urpc_rdma_read(b->rpc, b->session, &b->local, op->local_off, &b->rb,
				     op->remote_off, op->len, op_cont, s, 0);
	s->busy = !ret;
	return ret;
}

/*
 * Keep the window full until @single completions (warm-up and measurement
 * off) or the measurement is done, then drain it; 0 or -errno (reported).
 */
static int run_ops(struct bw *b, size_t size, bool write, unsigned long single)
{
	unsigned long seen = 0, issued = 0;
	double t_seen = bench_now_s();
	unsigned i, w = single ? 1 : (unsigned)b->o->window;
	char sz[32];
	int ret;

	b->size = size;
	b->write = write;
	b->completed = b->errors = b->n = 0;
	b->first_error = 0;
	b->warm = w;
	b->measuring = false;
	b->done = false;
	b->batch = single ? 1 : (unsigned)b->o->batch;
	b->nslots = w / b->batch;
	for (i = 0; i < w; i++) {
		size_t off = slot_off(i, size, b->own->len);

		b->ops[i] =
			(struct urpc_rdma_op){.opcode = write ? URPC_RDMA_WRITE : URPC_RDMA_READ,
					      .local = &b->local,
					      .local_off = off,
					      .rbuf = &b->rb,
					      .remote_off = off,
					      .len = size};
	}
	for (i = 0; i < b->nslots; i++) {
		b->slots[i].b = b;
		b->slots[i].ops = &b->ops[i * b->batch];
	}
	while (any_busy(b) || (!b->done && !b->errors && (!single || issued < single))) {
		for (i = 0; i < b->nslots && !b->done && !b->errors && (!single || issued < single);
		     i++) {
			if (b->slots[i].busy)
				continue;
			ret = post(b, &b->slots[i]);
			if (ret == -EAGAIN)
				break; /* the Rpc's operations are all in use: poll, then retry */
			if (ret) {
				fprintf(stderr, PROG ": urpc_rdma_%s of %s: %s\n",
					b->batch > 1 ? "submit"
					: write	     ? "write"
						     : "read",
					size_str(size, sz, sizeof(sz)), urpc_strerror(ret));
				return ret;
			}
			issued++;
		}
		ret = bench_run_once(PROG, b->rpc, b->sv);
		if (ret)
			return ret;
		if (b->completed != seen) {
			seen = b->completed;
			t_seen = b->t_last;
		} else if (bench_now_s() - t_seen > STALL_S) {
			fprintf(stderr, PROG ": %s %s: no operation completed for %.0f s\n",
				write ? "write" : "read", size_str(size, sz, sizeof(sz)), STALL_S);
			return -ETIMEDOUT;
		}
	}
	if (b->errors) {
		fprintf(stderr, PROG ": %s %s: %lu of %lu operations failed (first: %s)\n",
			write ? "write" : "read", size_str(size, sz, sizeof(sz)), b->errors,
			b->completed, urpc_strerror(b->first_error));
		return -EIO;
	}
	return 0;
}

/* WRITE the whole region from a pattern, READ it back over zeros, compare. */
static int check_bytes(struct bw *b)
{
	size_t len = b->own->len, i;
	int ret;

	for (i = 0; i < len; i++)
		b->local.buf[i] = (uint8_t)(i * 7 + (i >> 10));
	memset(b->own->mem, 0, len);
	ret = run_ops(b, len, true, 1);
	for (i = 0; !ret && i < len; i++)
		if (b->own->mem[i] != (uint8_t)(i * 7 + (i >> 10)))
			break;
	if (!ret && i < len) {
		fprintf(stderr, PROG ": byte %zu written is not in the server's memory\n", i);
		return -EIO;
	}
	memset(b->local.buf, 0, len);
	if (!ret)
		ret = run_ops(b, len, false, 1);
	for (i = 0; !ret && i < len; i++)
		if (b->local.buf[i] != (uint8_t)(i * 7 + (i >> 10)))
			break;
	if (!ret && i < len) {
		fprintf(stderr, PROG ": byte %zu read back differs\n", i);
		return -EIO;
	}
	return ret;
}

/* ---- the baselines ------------------------------------------------------------ */

/*
 * memcpy() of @size bytes from @src to @dst at the window slots' offsets
 * in turn for @secs: MB/s into *@mb, operations/s into *@ops.
 */
static void memcpy_bound(uint8_t *dst, const uint8_t *src, size_t len, size_t size, unsigned window,
			 double secs, double *mb, double *ops)
{
	unsigned long iters = 0, every = size >= 65536 ? 1 : 65536 / size;
	double t0, t;
	unsigned i = 0;

	t0 = bench_now_s();
	do {
		for (unsigned long k = 0; k < every; k++) {
			size_t off = slot_off(i, size, len);

			memcpy(dst + off, src + off, size);
			__asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");
			i = i + 1 == window ? 0 : i + 1;
		}
		iters += every;
		t = bench_now_s();
	} while (t - t0 < secs || iters < 3);
	*ops = (double)iters / (t - t0);
	*mb = *ops * (double)size / 1e6;
}

/* perftest's ib_read_bw or ib_write_bw for @size: MB/s and operations/s; 0 or -errno. */
static int perftest_bw(const struct opts *o, bool write, size_t size, unsigned port, double *mb,
		       double *ops)
{
	unsigned long n = (unsigned long)(o->perftest_mib << 20) / size;
	unsigned limit;
	char args[96];
	double v[4];
	int k;

	if (n < 2 * o->window)
		n = 2 * o->window;
	if (n > 20000)
		n = 20000;
	if (write)
		snprintf(args, sizeof(args), "-F -n %lu -t %lu", n, o->window);
	else /* READs outstanding: at most 128, rxe's limit */
		snprintf(args, sizeof(args), "-F -n %lu -t %lu -o %lu", n, o->window,
			 o->window < 128 ? o->window : 128);
	/* generous: 30 s to start, then at least 1 MB/s (Soft-RoCE under TCG: 5-70) */
	limit = 30 + (unsigned)((double)n * (double)size / 1e6);
	k = bench_perftest(PROG, write ? "ib_write_bw" : "ib_read_bw", args,
			   o->cli.server_device ? o->cli.server_device : "rxe0",
			   o->cli.device ? o->cli.device : "rxe0", o->cli.perftest_ip, size, port,
			   limit, v, 4);
	if (k < 4)
		return k < 0 ? k : -EIO;
	/* iterations, BW peak, BW average (MiB/s), message rate (Mpps) */
	*mb = v[2] * 1.048576;
	*ops = v[3] * 1e6;
	return 0;
}

static const char *baseline_name(const struct opts *o, bool write)
{
	if (!o->cli.baseline)
		return "none";
	if (o->cli.transport != URPC_TRANSPORT_VERBS)
		return "memcpy";
	return write ? "ib_write_bw" : "ib_read_bw";
}

/* ---- the table ------------------------------------------------------------------ */

static void print_header(const struct bw *b)
{
	const struct opts *o = b->o;
	char sz[32];

	printf("%s: transport %s, window %lu, batch %lu, %u thread%s, %lu pair%s of %g s "
	       "measurements per size and operation, region %s; baseline: %s\n",
	       PROG, urpc_transport_str(o->cli.transport), o->window, o->batch, o->threads,
	       o->threads > 1 ? "s" : "", o->pairs, o->pairs > 1 ? "s" : "", o->cli.duration,
	       size_str(b->own->len, sz, sizeof(sz)),
	       !o->cli.baseline ? "none"
	       : o->cli.transport == URPC_TRANSPORT_VERBS
		       ? "perftest ib_read_bw / ib_write_bw, same window, same boot"
		       : "memcpy of the same sizes at the same offsets, one thread");
	printf("\n| size | op | urpc MB/s | urpc ops/s | baseline | baseline MB/s | baseline ops/s "
	       "| urpc/baseline | IQR | min-max |\n");
	printf("|---:|---|---:|---:|---|---:|---:|---:|---|---|\n");
	fflush(stdout);
}

static void print_row(const struct opts *o, FILE *csv, size_t size, bool write, struct row *r)
{
	struct bench_spread umb = bench_spread_of(r->umb, r->n);
	struct bench_spread uops = bench_spread_of(r->uops, r->n);
	struct bench_spread bmb = bench_spread_of(r->bmb, r->nbase);
	struct bench_spread bops = bench_spread_of(r->bops, r->nbase);
	struct bench_spread ra = bench_spread_of(r->ratio, r->nbase);
	const char *base = baseline_name(o, write), *op = write ? "write" : "read";
	char sz[32];

	if (r->nbase)
		printf("| %s | %s | %.1f | %.*f | %s | %.1f | %.*f | %.2f | %.2f-%.2f | %.2f-%.2f "
		       "|\n",
		       size_str(size, sz, sizeof(sz)), op, umb.med, uops.med < 100 ? 1 : 0,
		       uops.med, base, bmb.med, bops.med < 100 ? 1 : 0, bops.med, ra.med, ra.q1,
		       ra.q3, ra.min, ra.max);
	else
		printf("| %s | %s | %.1f | %.*f | %s | - | - | - | - | - |\n",
		       size_str(size, sz, sizeof(sz)), op, umb.med, uops.med < 100 ? 1 : 0,
		       uops.med, base);
	fflush(stdout);
	if (csv) {
		fprintf(csv,
			"%s,%s,%zu,%lu,%lu,%u,%.3f,%.1f,%s,%.3f,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
			urpc_transport_str(o->cli.transport), op, size, o->window, o->batch, r->n,
			umb.med, uops.med, base, bmb.med, bops.med, ra.med, ra.q1, ra.q3, ra.min,
			ra.max);
		fflush(csv);
	}
}

/* One size and operation: PAIRS x (urpc, baseline); 0 or -errno (reported). */
static int measure_row(struct bw *b, size_t size, bool write, unsigned *port, FILE *csv)
{
	const struct opts *o = b->o;
	const char *base = baseline_name(o, write);
	struct row r;
	char sz[32];
	unsigned k;
	int ret;

	memset(&r, 0, sizeof(r));
	for (k = 0; k < o->pairs; k++) {
		double mb = 0, ops = 0;

		ret = run_ops(b, size, write, 0);
		if (ret)
			return ret;
		r.uops[r.n] = b->t_end > b->t0 ? (double)b->n / (b->t_end - b->t0) : 0;
		r.umb[r.n] = r.uops[r.n] * (double)size / 1e6;
		if (o->cli.baseline) {
			bench_server_pause(b->sv, true);
			if (o->cli.transport == URPC_TRANSPORT_VERBS) {
				ret = perftest_bw(o, write, size, *port, &mb, &ops);
				*port += 10; /* bench_perftest's retries take the next ports */
			} else if (write) {
				memcpy_bound(b->own->mem, b->local.buf, b->own->len, size,
					     (unsigned)o->window, o->cli.duration, &mb, &ops);
			} else {
				memcpy_bound(b->local.buf, b->own->mem, b->own->len, size,
					     (unsigned)o->window, o->cli.duration, &mb, &ops);
			}
			bench_server_pause(b->sv, false);
			if (ret && ret != -ETIMEDOUT) /* a timed-out run: no baseline */
				return ret;
			if (mb > 0) {
				r.bmb[r.nbase] = mb;
				r.bops[r.nbase] = ops;
				r.ratio[r.nbase++] = r.umb[r.n] / mb;
			} else { /* seen: perftest's average 0.00 after a stalled run, or killed */
				fprintf(stderr,
					PROG ": %s %s, pair %u: the baseline measured nothing; "
					     "this pair has no ratio\n",
					write ? "write" : "read", size_str(size, sz, sizeof(sz)),
					k + 1);
			}
		}
		fprintf(stderr,
			PROG ": %s %s, pair %u of %lu: urpc %.1f MB/s (%lu ops), %s %.1f MB/s\n",
			write ? "write" : "read", size_str(size, sz, sizeof(sz)), k + 1, o->pairs,
			r.umb[r.n], b->n, base, mb);
		r.n++;
	}
	print_row(o, csv, size, write, &r);
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct bw b;
	struct bench_server bsv;
	struct urpc_rpc_opts ro;
	struct urpc_nexus *nx;
	struct owner own;
	FILE *csv = NULL;
	char srv_what[96], cli_what[96];
	unsigned port = PERFTEST_PORT, i, w;
	struct opts o;
	int ret, status = 1;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	memset(&own, 0, sizeof(own));
	for (i = 0; i < o.nsizes; i++)
		own.len = o.sizes[i] > own.len ? o.sizes[i] : own.len;
	own.mem = aligned_alloc(4096, (own.len + 4095) / 4096 * 4096);
	if (!own.mem) {
		fprintf(stderr, PROG ": cannot allocate the %zu-byte region\n", own.len);
		return 1;
	}
	memset(own.mem, 0, own.len);
	if (bench_file_open(
		    PROG, "--csv", o.cli.csv,
		    "transport,op,size,window,batch,pairs,urpc_mb_per_s,urpc_ops_per_s,baseline,"
		    "base_mb_per_s,base_ops_per_s,ratio,ratio_q1,ratio_q3,ratio_min,"
		    "ratio_max\n",
		    &csv))
		goto out_mem;

	memset(&bsv, 0, sizeof(bsv));
	b.o = &o;
	b.sv = &bsv;
	b.own = &own;
	if (bench_nexus_open(PROG, handler, &own, &nx))
		goto out_csv;
	bsv.nx = nx;
	rpc_opts(&o, &bsv.ro);
	bsv.ro.device = o.cli.server_device;
	bsv.threaded = o.threads == 2;
	rpc_opts(&o, &ro);
	snprintf(srv_what, sizeof(srv_what), "%s%s%s", urpc_transport_str(o.cli.transport),
		 o.cli.server_device ? ", device " : "",
		 o.cli.server_device ? o.cli.server_device : "");
	snprintf(cli_what, sizeof(cli_what), "%s%s%s", urpc_transport_str(o.cli.transport),
		 o.cli.device ? ", device " : "", o.cli.device ? o.cli.device : "");
	if (bench_rpcs_create(PROG, &bsv, &ro, o.cli.device, &b.sm, srv_what, cli_what, &b.rpc))
		goto out_nexus;
	ret = bench_connect(PROG, b.rpc, &bsv, &b.sm, &b.session, 1);
	if (ret) {
		fprintf(stderr, PROG ": cannot connect the client to the server: %s\n",
			urpc_strerror(ret));
		goto out_cli;
	}
	if (get_rbuf(&b))
		goto out_disconnect;
	ret = urpc_msgbuf_alloc(b.rpc, own.len, &b.local);
	if (ret) {
		fprintf(stderr, PROG ": cannot allocate a %zu-byte buffer: %s\n", own.len,
			urpc_strerror(ret));
		goto out_disconnect;
	}
	if (check_bytes(&b))
		goto out_disconnect;

	print_header(&b);
	ret = 0;
	for (i = 0; i < o.nsizes && !ret; i++)
		for (w = 0; w < 2 && !ret; w++)
			if (o.ops[w])
				ret = measure_row(&b, o.sizes[i], w == 1, &port, csv);
	if (!ret)
		status = 0;

out_disconnect:
	/* Close the session; operations in flight fail and give the buffer back. */
	if (!urpc_session_disconnect(b.rpc, b.session))
		bench_drain(PROG, b.rpc, &bsv, &b.sm, 1, any_busy, &b);
	if (b.local.buf && urpc_msgbuf_free(b.rpc, &b.local))
		status = 1;
out_cli:
	if (urpc_rpc_destroy(b.rpc)) {
		fprintf(stderr, PROG ": cannot destroy the client Rpc\n");
		status = 1;
	}
	if (bench_server_stop(PROG, &bsv))
		status = 1;
out_nexus:
	if (urpc_nexus_destroy(nx))
		status = 1;
out_csv:
	if (bench_file_close(PROG, "--csv", o.cli.csv, csv))
		status = 1;
out_mem:
	free(own.mem);
	return status;
}
