/* SPDX-License-Identifier: MIT */
/*
 * urpc-xdp-pingpong: the raw AF_XDP baseline of apps/bench/xdp_bench.sh. Two
 * threads of this process, each with one AF_XDP socket (libxdp's default
 * program, which hands every frame of queue 0 to the socket) on one end of
 * a veth pair: the client sends one Ethernet/IPv4/UDP frame of SIZE bytes
 * of payload, busy-polls its RX ring for the echo and records the round
 * trip; the server busy-polls, swaps the addresses in place (the checksums
 * stay valid) and sends the frame back. Both kick the kernel only when the
 * TX ring asks (XDP_USE_NEED_WAKEUP), as the xdp transport does, and count
 * their kicks. No urpc code: this is the floor the transport is measured
 * against. Uses libxdp, libbpf and libc only.
 *
 * Its modes, arguments and output: usage() (--help). The ping-pong gives the
 * round trip's floor, --window W the echo's rate with W frames in flight
 * (the server sends each received burst back in place: the received frame
 * goes back out, its completion returns it to the fill ring), --count N the
 * instructions of N round trips in one thread (xdp_cpu_cost.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xdp/xsk.h>

#define NFRAMES 256u
#define FRAME 2048u
#define MAX_SAMPLES (1u << 22)
#define BURST 64u /* frames taken from a ring at once by the echo's two ends */
#define MAX_WINDOW 128u
#define ECHO_CLIENT_PORT 0x9c40 /* the request's source port, 40000 */
#define ECHO_SERVER_PORT 0x9c41

struct end {
	const char *ifname;
	uint8_t mac[6];
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	uint8_t *area;
	uint64_t kicks;
};

static atomic_int stop;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int end_open(struct end *e)
{
	struct xsk_socket_config sc = {.rx_size = NFRAMES,
				       .tx_size = NFRAMES,
				       .xdp_flags = XDP_FLAGS_DRV_MODE,
				       .bind_flags = XDP_USE_NEED_WAKEUP | XDP_COPY};
	struct xsk_umem_config uc = {
		.fill_size = 2 * NFRAMES, .comp_size = NFRAMES, .frame_size = FRAME};
	struct ifreq ifr;
	uint32_t idx = 0, i;
	int fd, ret;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", e->ifname);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		fprintf(stderr, "urpc-xdp-pingpong: %s: %s\n", e->ifname, strerror(errno));
		return -1;
	}
	close(fd);
	memcpy(e->mac, ifr.ifr_hwaddr.sa_data, 6);
	e->area = mmap(NULL, 2 * NFRAMES * FRAME, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->area == MAP_FAILED)
		return -1;
	/*
	 * -EBUSY (from the UMEM's registration or the bind): the queue still
	 * has the socket of a run that just ended, which the kernel releases
	 * a while after its close (under a second here): up to 3 s of tries.
	 */
	for (i = 0;; i++) {
		ret = xsk_umem__create(&e->umem, e->area, 2 * NFRAMES * FRAME, &e->fill, &e->comp,
				       &uc);
		if (!ret) {
			ret = xsk_socket__create(&e->xsk, e->ifname, 0, e->umem, &e->rx, &e->tx,
						 &sc);
			if (ret)
				xsk_umem__delete(e->umem);
		}
		if (ret != -EBUSY || i == 300)
			break;
		usleep(10000);
	}
	if (ret) {
		fprintf(stderr, "urpc-xdp-pingpong: AF_XDP on %s: %s\n", e->ifname, strerror(-ret));
		return -1;
	}
	/* frames 0..NFRAMES-1 receive, the rest send */
	xsk_ring_prod__reserve(&e->fill, NFRAMES, &idx);
	for (i = 0; i < NFRAMES; i++)
		*xsk_ring_prod__fill_addr(&e->fill, idx + i) = (uint64_t)i * FRAME;
	xsk_ring_prod__submit(&e->fill, NFRAMES);
	return 0;
}

/* Send the @len bytes at frame @addr (a send frame), kicking when asked. */
static void end_send(struct end *e, uint64_t addr, uint32_t len)
{
	uint32_t idx = 0, n;

	/* reclaim completions: the send frame is reused */
	n = xsk_ring_cons__peek(&e->comp, NFRAMES, &idx);
	xsk_ring_cons__release(&e->comp, n);
	while (xsk_ring_prod__reserve(&e->tx, 1, &idx) != 1)
		;
	xsk_ring_prod__tx_desc(&e->tx, idx)->addr = addr;
	xsk_ring_prod__tx_desc(&e->tx, idx)->len = len;
	xsk_ring_prod__submit(&e->tx, 1);
	if (xsk_ring_prod__needs_wakeup(&e->tx)) {
		sendto(xsk_socket__fd(e->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
		e->kicks++;
	}
}

/* Busy-poll for one frame: its UMEM address and length, the frame returned to fill. */
static int end_recv(struct end *e, uint8_t *copy, uint32_t *len)
{
	uint32_t idx, fidx = 0;
	const struct xdp_desc *d;

	while (!xsk_ring_cons__peek(&e->rx, 1, &idx))
		if (atomic_load_explicit(&stop, memory_order_relaxed))
			return -1;
	d = xsk_ring_cons__rx_desc(&e->rx, idx);
	*len = d->len;
	memcpy(copy, xsk_umem__get_data(e->area, d->addr), d->len);
	xsk_ring_prod__reserve(&e->fill, 1, &fidx);
	*xsk_ring_prod__fill_addr(&e->fill, fidx) = xsk_umem__extract_addr(d->addr);
	xsk_ring_prod__submit(&e->fill, 1);
	xsk_ring_cons__release(&e->rx, 1);
	return 0;
}

/* Swap the MACs, IPv4 addresses and UDP ports of frame @f: the checksums stay valid. */
static void swap_addrs(uint8_t *f)
{
	uint8_t tmp[6];

	memcpy(tmp, f, 6);
	memcpy(f, f + 6, 6);
	memcpy(f + 6, tmp, 6);
	memcpy(tmp, f + 26, 4);
	memcpy(f + 26, f + 30, 4);
	memcpy(f + 30, tmp, 4);
	memcpy(tmp, f + 34, 2);
	memcpy(f + 34, f + 36, 2);
	memcpy(f + 36, tmp, 2);
}

/* The server's part of a round trip: receive a frame, echo it. -1 once stopped. */
static int serve_one(struct end *e)
{
	uint64_t out = (uint64_t)NFRAMES * FRAME;
	uint8_t *f = xsk_umem__get_data(e->area, out);
	uint32_t len;

	if (end_recv(e, f, &len))
		return -1;
	if (len < 42)
		return 0;
	swap_addrs(f);
	end_send(e, out, len);
	return 0;
}

static void *server(void *arg)
{
	while (!serve_one(arg))
		;
	return NULL;
}

/*
 * --count: @n round trips with both ends in this thread, for callgrind
 * (xdp_cpu_cost.sh counts the instructions inside this function, as
 * cpu_cost_callgrind.sh does inside urpc-cpu-cost's run()).
 */
__attribute__((noinline)) static int rounds(struct end *c, struct end *s, uint64_t out,
					    uint32_t flen, unsigned long n)
{
	uint8_t in[FRAME];
	uint32_t len;
	unsigned long i;

	for (i = 0; i < n; i++) {
		end_send(c, out, flen);
		if (serve_one(s) || end_recv(c, in, &len))
			return -1;
	}
	return 0;
}

/*
 * Its own checksum, on purpose: the baseline links nothing of urpc's, and
 * computes it once per run (the server swaps addresses, which keeps the
 * checksums valid), where urpc's xdp transport computes one per frame.
 */
static uint16_t csum(const uint8_t *p, size_t n, uint32_t s)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/*
 * Whether frame @f of @len bytes is the echo's, sent to UDP port @port:
 * libxdp's default program hands the socket every frame of its queue (the
 * kernel's IPv6 neighbour discovery on the veth among them).
 */
static bool echo_frame(const uint8_t *f, uint32_t len, uint16_t port)
{
	return len >= 42 && f[12] == 0x08 && f[13] == 0 && f[23] == 17 &&
	       (uint16_t)(f[36] << 8 | f[37]) == port;
}

/* Frame address @addr back to @e's fill ring (it has room for every frame). */
static void fill_one(struct end *e, uint64_t addr)
{
	uint32_t fidx = 0;

	xsk_ring_prod__reserve(&e->fill, 1, &fidx);
	*xsk_ring_prod__fill_addr(&e->fill, fidx) = xsk_umem__extract_addr(addr);
	xsk_ring_prod__submit(&e->fill, 1);
}

/*
 * --window: the server echoes the frames of every burst in place (the
 * received frame goes back out; its completion returns it to the fill
 * ring), one kick per burst when the TX ring asks; other frames go back
 * to the fill ring at once.
 */
static void *echo_server(void *arg)
{
	struct end *e = arg;
	struct xdp_desc ours[BURST];
	uint32_t idx = 0, tidx = 0, n, i, k;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		n = xsk_ring_cons__peek(&e->comp, BURST, &idx);
		for (i = 0; i < n; i++)
			fill_one(e, *xsk_ring_cons__comp_addr(&e->comp, idx + i));
		xsk_ring_cons__release(&e->comp, n);
		n = xsk_ring_cons__peek(&e->rx, BURST, &idx);
		for (i = k = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&e->rx, idx + i);
			uint8_t *f = xsk_umem__get_data(e->area, d->addr);

			if (!echo_frame(f, d->len, ECHO_SERVER_PORT)) {
				fill_one(e, d->addr);
				continue;
			}
			swap_addrs(f);
			ours[k++] = *d;
		}
		xsk_ring_cons__release(&e->rx, n);
		if (!k)
			continue;
		while (xsk_ring_prod__reserve(&e->tx, k, &tidx) != k)
			if (atomic_load_explicit(&stop, memory_order_relaxed))
				return NULL;
		for (i = 0; i < k; i++)
			*xsk_ring_prod__tx_desc(&e->tx, tidx + i) = ours[i];
		xsk_ring_prod__submit(&e->tx, k);
		if (xsk_ring_prod__needs_wakeup(&e->tx)) {
			sendto(xsk_socket__fd(e->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
			e->kicks++;
		}
	}
	return NULL;
}

/*
 * --window: the client's side for @secs, @w frames of @flen bytes in
 * flight, sent from the send frames (each a copy of the request, made by
 * the caller); returns the echoes received in that time, *@took the time
 * (s) from the start to the poll that saw it pass (not the drain after it).
 */
static uint64_t echo_client(struct end *c, unsigned w, uint32_t flen, double secs, double *took)
{
	uint64_t free_tx[NFRAMES], echoes = 0, echoes_end = 0;
	uint32_t idx = 0, n, i, nfree = 0, inflight = 0, want;
	double t0 = now_us(), end = t0 + secs * 1e6, tnow;
	unsigned polls = 0;
	bool draining = false;

	for (i = 0; i < NFRAMES; i++)
		free_tx[nfree++] = (uint64_t)(NFRAMES + i) * FRAME;
	for (;;) {
		n = xsk_ring_cons__peek(&c->comp, BURST, &idx);
		for (i = 0; i < n; i++)
			free_tx[nfree++] = *xsk_ring_cons__comp_addr(&c->comp, idx + i);
		xsk_ring_cons__release(&c->comp, n);
		want = draining ? 0 : w - inflight < nfree ? w - inflight : nfree;
		if (want && xsk_ring_prod__reserve(&c->tx, want, &idx) == want) {
			for (i = 0; i < want; i++) {
				struct xdp_desc *t = xsk_ring_prod__tx_desc(&c->tx, idx + i);

				t->addr = free_tx[--nfree];
				t->len = flen;
			}
			xsk_ring_prod__submit(&c->tx, want);
			inflight += want;
			if (xsk_ring_prod__needs_wakeup(&c->tx)) {
				sendto(xsk_socket__fd(c->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
				c->kicks++;
			}
		}
		n = xsk_ring_cons__peek(&c->rx, BURST, &idx);
		for (i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&c->rx, idx + i);

			if (echo_frame(xsk_umem__get_data(c->area, d->addr), d->len,
				       ECHO_CLIENT_PORT)) {
				inflight--;
				echoes++;
			}
			fill_one(c, d->addr);
		}
		xsk_ring_cons__release(&c->rx, n);
		/*
		 * The clock every 256 polls (a read costs more than a poll). At
		 * the end the frames in flight come back first, within 100 ms:
		 * a socket whose frames are still in the kernel outlives its
		 * close, and the next run's bind to the queue would fail.
		 */
		if (!(++polls & 255) && (tnow = now_us()) > end) {
			if (!draining) {
				echoes_end = echoes;
				*took = (tnow - t0) / 1e6;
			}
			draining = true;
			if (!inflight || tnow > end + 1e5)
				return echoes_end;
		}
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
	fprintf(f,
		"NAME\n"
		"    urpc-xdp-pingpong - the raw AF_XDP floor that xdp_bench.sh measures urpc's\n"
		"    xdp transport against\n"
		"\n"
		"SYNOPSIS\n"
		"    urpc-xdp-pingpong CLIENT_IF SERVER_IF [SECONDS [SIZE]]\n"
		"    urpc-xdp-pingpong CLIENT_IF SERVER_IF --window W [SECONDS [SIZE]]\n"
		"    urpc-xdp-pingpong CLIENT_IF SERVER_IF --count N [SIZE]\n"
		"\n"
		"DESCRIPTION\n"
		"    Two threads, each with an AF_XDP socket (copy mode, libxdp's default\n"
		"    program, queue 0) on one end of a veth pair, exchange Ethernet/IPv4/UDP\n"
		"    frames of SIZE bytes of payload (default 32, at most 1400) for SECONDS\n"
		"    (default 2). Both busy-poll and kick the kernel only when the TX ring\n"
		"    asks. No urpc code runs: no checksum, parse or copy beyond the frame's.\n"
		"\n"
		"    default      a ping-pong: one frame in flight; prints the round trip's\n"
		"                 p50 and p99 and the kicks per round trip of each side.\n"
		"    --window W   an echo with W frames in flight (1 to %u): the server sends\n"
		"                 every received burst back in place; prints echoes per second\n"
		"                 and the kicks per echo of each side.\n"
		"    --count N    N round trips with both ends in this thread, untimed, for\n"
		"                 xdp_cpu_cost.sh's instruction count.\n"
		"\n"
		"    Needs root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF) and two interfaces\n"
		"    that reach each other, e.g. a veth pair (apps/bench/xdp_bench.sh makes one\n"
		"    in a namespace of its own).\n"
		"\n"
		"EXIT STATUS\n"
		"    0 on success; 1 when a socket cannot be opened or nothing came back; 2 for\n"
		"    a usage error.\n",
		MAX_WINDOW);
}

/* A whole decimal number in [@lo, @hi] from @s, or false. */
static bool parse_num(const char *s, double lo, double hi, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return !errno && end != s && !*end && *v >= lo && *v <= hi;
}

/* The request: Ethernet from @c to @s, IPv4 10.79.0.1 -> .2, UDP 40000 -> 40001, at @f. */
static void build_request(const struct end *c, const struct end *s, uint8_t *f, uint32_t size)
{
	uint32_t ulen = 8 + size;
	uint16_t k;

	memset(f, 0, 42 + size);
	memcpy(f, s->mac, 6);
	memcpy(f + 6, c->mac, 6);
	f[12] = 0x08;
	f[14] = 0x45;
	k = (uint16_t)(28 + size);
	f[16] = (uint8_t)(k >> 8);
	f[17] = (uint8_t)k;
	f[22] = 64;
	f[23] = 17;
	memcpy(f + 26, "\x0a\x4f\x00\x01\x0a\x4f\x00\x02", 8);
	k = csum(f + 14, 20, 0);
	f[24] = (uint8_t)(k >> 8);
	f[25] = (uint8_t)k;
	memcpy(f + 34, "\x9c\x40\x9c\x41", 4);
	f[38] = (uint8_t)(ulen >> 8);
	f[39] = (uint8_t)ulen;
	k = csum(f + 34, ulen, (uint32_t)(csum(f + 26, 8, 0) ^ 0xffff) + 17 + ulen);
	f[40] = (uint8_t)(k >> 8);
	f[41] = (uint8_t)k;
}

/* --window: @w frames in flight for @secs; prints the rate. 0, or -1 when nothing came back. */
static int run_echo(struct end *c, struct end *s, uint64_t out, uint32_t size, unsigned long w,
		    double secs)
{
	const uint8_t *f = xsk_umem__get_data(c->area, out);
	uint64_t echoes;
	pthread_t th;
	double took = 0;
	uint32_t i;

	for (i = 1; i < NFRAMES; i++) /* every send frame carries the request */
		memcpy(xsk_umem__get_data(c->area, out + (uint64_t)i * FRAME), f, 42 + size);
	pthread_create(&th, NULL, echo_server, s);
	echoes = echo_client(c, (unsigned)w, 42 + size, secs, &took);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	if (!echoes) {
		fprintf(stderr, "urpc-xdp-pingpong: no echo\n");
		return -1;
	}
	printf("xdp-echo size %u window %lu: %lu echoes in %.2f s, %.0f per second, kicks per echo "
	       "client %.2f server %.2f\n",
	       size, w, (unsigned long)echoes, took, (double)echoes / took,
	       (double)c->kicks / (double)echoes, (double)s->kicks / (double)echoes);
	return 0;
}

/* The ping-pong for @secs; prints p50, p99 and the kicks. 0, or -1 when nothing came back. */
static int run_pingpong(struct end *c, struct end *s, uint64_t out, uint32_t size, double secs)
{
	double *lat = malloc(MAX_SAMPLES * sizeof(*lat)), end;
	uint8_t in[FRAME];
	uint32_t len, n = 0;
	pthread_t th;

	if (!lat)
		return -1;
	pthread_create(&th, NULL, server, s);
	end = now_us() + secs * 1e6;
	while (n < MAX_SAMPLES) {
		double t = now_us();

		if (t > end)
			break;
		end_send(c, out, 42 + size);
		if (end_recv(c, in, &len))
			break;
		lat[n++] = now_us() - t;
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	qsort(lat, n, sizeof(*lat), cmp_d);
	if (n)
		printf("xdp-pingpong size %u: %u round trips, p50 %.2f us, p99 %.2f us, kicks per "
		       "round trip client %.2f server %.2f\n",
		       size, n, lat[n / 2], lat[(size_t)(n * 0.99)], (double)c->kicks / n,
		       (double)s->kicks / n);
	else
		fprintf(stderr, "urpc-xdp-pingpong: no round trip\n");
	free(lat);
	return n ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct end c = {0}, s = {0};
	bool count = argc > 4 && !strcmp(argv[3], "--count");
	bool window = argc > 4 && !strcmp(argv[3], "--window");
	int a = count ? 5 : window ? 6 : 4; /* SIZE: after SECONDS, or after --count N */
	double secs = 2.0, nrounds = 0, w = 0, size = 32;
	uint64_t out = (uint64_t)NFRAMES * FRAME; /* the first send frame */
	int ret;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 3 || argc > a + 1 || (count && !parse_num(argv[4], 1, 1e12, &nrounds)) ||
	    (window && !parse_num(argv[4], 1, MAX_WINDOW, &w)) ||
	    (!count && argc > a - 1 && !parse_num(argv[a - 1], 0.001, 86400, &secs)) ||
	    (argc > a && !parse_num(argv[a], 0, 1400, &size))) {
		fprintf(stderr, "urpc-xdp-pingpong: bad arguments (see --help)\n");
		usage(stderr);
		return 2;
	}
	c.ifname = argv[1];
	s.ifname = argv[2];
	if (end_open(&c) || end_open(&s))
		return 1;
	build_request(&c, &s, xsk_umem__get_data(c.area, out), (uint32_t)size);
	if (count) {
		ret = rounds(&c, &s, out, 42 + (uint32_t)size, (unsigned long)nrounds);
		if (!ret)
			printf("xdp-pingpong size %u: %lu round trips in one thread, kicks per round "
			       "trip client %.2f server %.2f\n",
			       (uint32_t)size, (unsigned long)nrounds, (double)c.kicks / nrounds,
			       (double)s.kicks / nrounds);
	} else if (window) {
		ret = run_echo(&c, &s, out, (uint32_t)size, (unsigned long)w, secs);
	} else {
		ret = run_pingpong(&c, &s, out, (uint32_t)size, secs);
	}
	xsk_socket__delete(c.xsk);
	xsk_socket__delete(s.xsk);
	xsk_umem__delete(c.umem);
	xsk_umem__delete(s.umem);
	return ret ? 1 : 0;
}
