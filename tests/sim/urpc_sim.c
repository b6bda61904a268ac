/* SPDX-License-Identifier: MIT */
/*
 * urpc-sim: the command line of the deterministic simulator. Runs one seed
 * (a replay), a range of seeds (in several processes), the regression
 * files, a soak until a deadline, or shrinks a failing run. Calls sim_run()
 * and libc; owns the processes it forks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <urpc/urpc.h>

#include "../../src/util/seam.h"
#include "sim.h"

static const char usage[] =
	"Usage: urpc-sim [--seed N | --seeds A-B | --replay PATH | --soak HOURS] [options]\n"
	"\n"
	"Runs urpc's engine (several Nexus/Rpc pairs on the loop transport) in one\n"
	"thread under a virtual clock, with a seeded network and seeded faults, and\n"
	"checks its invariants after every event: every continuation runs exactly\n"
	"once, a handler at most once and on exactly the bytes the client sent, a\n"
	"successful response is exactly what the handler answered, the engine never\n"
	"changes a lent buffer, its bookkeeping agrees with itself and with the\n"
	"workload, and once faults stop every request completes and every client\n"
	"can complete a request again. A seed replays exactly.\n"
	"\n"
	"What to run (one of):\n"
	"  --seed N          one run; on failure prints the violation, the last events\n"
	"                    and the command line that reproduces it\n"
	"  --seeds A-B       every seed from A to B (inclusive)\n"
	"  --replay PATH     the regression cases: a file, or every *.args file in a\n"
	"                    directory; each holds one line of options (# comments)\n"
	"  --soak HOURS      random seeds until HOURS (may be fractional) have passed;\n"
	"                    failures are appended to --out\n"
	"\n"
	"The shape of a run (default: drawn from the seed):\n"
	"  --clients N       client processes, 1-4\n"
	"  --reqs N          requests each client issues\n"
	"  --faults LIST     comma-separated subset of drop,dup,delay,part,crash,rpc,disc,forget,\n"
	"                    or all, or none\n"
	"  --max-large BYTES largest message (default 64 KiB or 2 MiB)\n"
	"  --fault-ms MS     virtual time during which faults happen (up to 6\n"
	"                    decimals: the reproduce line gives it to the ns)\n"
	"  --work-ms MS      virtual time during which requests are issued (> fault-ms)\n"
	"  --gpu 0|1         some payloads in GPU memory, over the tests' fake CUDA\n"
	"                    driver (or the one URPC_CUDA_LIB names)\n"
	"  --rmem 0|1        clients also run batches of one-sided READs and WRITEs\n"
	"                    on the server's exposed memory (a regression case\n"
	"                    without it replays with 0)\n"
	"  --release-lag N   readers let go of grants late: revoking one waits until\n"
	"                    the owner polled N more times (0: never waits; a\n"
	"                    regression case without it replays with 0)\n"
	"  --fabric 0|1|2    datagrams and one-sided transfers cross a switch of\n"
	"                    10 Gb/s ports with 256 KiB buffers (two tiers on odd\n"
	"                    seeds), instead of the plain links, and every Rpc\n"
	"                    runs congestion control (Swift, 20 us); 2: the same\n"
	"                    fabric without it (default 0). --seed prints the\n"
	"                    switch ports' drops, ECN marks and queues\n"
	"\n"
	"Congestion experiments (docs/CC.md), instead of seeds:\n"
	"  --experiment incast|fairness|victim|session\n"
	"                    run one on the fabric model (session: 32 B RPCs\n"
	"                    beside a 64 MiB transfer on one session)\n"
	"  --cc on|off|both  with the congestion controller, without, or both\n"
	"                    (default both)\n"
	"  --csv FILE        also write the experiment's series as CSV\n"
	"                    (apps/bench/plot.sh draws it)\n"
	"  The controller's parameters come from src/rpc/cc.c's defaults unless\n"
	"  SIM_CC_{TARGET,AI_DIV,BETA,MAXMD,RAMP,FS,TO} or SIM_CC_ALGO=timely say\n"
	"  otherwise (docs/CC.md)\n"
	"  --window N        every Rpc's session_window, a power of two 1-64\n"
	"                    (default 8, never drawn from the seed)\n"
	"\n"
	"Other options:\n"
	"  --jobs N          processes for --seeds and --soak (default 1)\n"
	"  --minimize        with --seed: shrink a failing run (fewer clients, requests\n"
	"                    and fault kinds) while it still fails; prints the result\n"
	"  --out FILE        where --soak writes failures (default urpc-sim-failures.txt)\n"
	"  --trace           print every event as it happens (stderr)\n"
	"  --check-replay    run each seed twice and fail if the two event traces differ\n"
	"  --list            one line per run: seed, events, trace hash\n"
	"  --quiet           no progress lines\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 when every run held its invariants, 1 when one failed, 2 for\n"
	"bad usage. Progress goes to stderr every 250 seeds; the summary gives seeds,\n"
	"events, events per second and virtual time.\n";

struct opts {
	uint64_t seed, first, last;
	int mode; /* 's' seed, 'r' range, 'p' replay, 'k' soak */
	const char *replay, *out, *csv, *cc;
	double hours;
	int exp; /* --experiment */
	unsigned jobs;
	bool minimize, check_replay, quiet, list;
	unsigned trace;
	/* overrides; a flag says whether each was given */
	struct sim_cfg over;
	unsigned given;
};

enum {
	G_CLIENTS = 1,
	G_REQS = 2,
	G_FAULTS = 4,
	G_LARGE = 8,
	G_FAULT_MS = 16,
	G_WORK_MS = 32,
	G_GPU = 64,
	G_RMEM = 128,
	G_LAG = 256,
	G_FABRIC = 512,
	G_WINDOW = 1024,
};

static void cfg_for(const struct opts *o, uint64_t seed, struct sim_cfg *c)
{
	sim_cfg_from_seed(c, seed);
	if (o->given & G_CLIENTS)
		c->clients = o->over.clients;
	if (o->given & G_REQS)
		c->reqs = o->over.reqs;
	if (o->given & G_FAULTS)
		c->faults = o->over.faults;
	if (o->given & G_LARGE)
		c->max_large = o->over.max_large;
	if (o->given & G_FAULT_MS)
		c->fault_ns = o->over.fault_ns;
	if (o->given & G_WORK_MS)
		c->work_ns = o->over.work_ns;
	if (o->given & G_GPU)
		c->gpu = o->over.gpu;
	if (o->given & G_RMEM)
		c->rmem = o->over.rmem;
	if (o->given & G_LAG)
		c->release_lag = o->over.release_lag;
	if (o->given & G_FABRIC)
		c->fabric = o->over.fabric;
	if (o->given & G_WINDOW)
		c->window = o->over.window;
	if (c->work_ns <= c->fault_ns)
		c->work_ns = c->fault_ns + 10000000ull;
	c->trace = o->trace;
}

/* @ns as milliseconds, exactly: "229" or "229.123456" (what parse_ms() reads back). */
static const char *ms_str(uint64_t ns, char *buf, size_t n)
{
	if (ns % 1000000)
		snprintf(buf, n, "%" PRIu64 ".%06" PRIu64, ns / 1000000, ns % 1000000);
	else
		snprintf(buf, n, "%" PRIu64, ns / 1000000);
	return buf;
}

/* The options that reproduce @c exactly, whatever the seed's defaults become. */
static void cfg_line(const struct sim_cfg *c, char *buf, size_t n)
{
	char f[96], fm[32], wm[32];

	/* The times to the nanosecond: a seed's are drawn in ns, and rounding them changed the run. */
	snprintf(buf, n,
		 "--seed %" PRIu64 " --clients %u --reqs %u --faults %s --max-large %u "
		 "--fault-ms %s --work-ms %s --gpu %u --rmem %u --release-lag %u --window %u",
		 c->seed, c->clients, c->reqs, sim_faults_str(c->faults, f, sizeof(f)),
		 c->max_large, ms_str(c->fault_ns, fm, sizeof(fm)),
		 ms_str(c->work_ns, wm, sizeof(wm)), c->gpu, c->rmem, c->release_lag, c->window);
	if (c->fabric)
		snprintf(buf + strlen(buf), n - strlen(buf), " --fabric %u", c->fabric);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct tally {
	uint64_t runs, failed, events, vtime_ns;
};

/* One run, reported on failure. Returns 1 when it failed. */
static int run_one(const struct opts *o, const struct sim_cfg *c, struct tally *t, FILE *fail_log)
{
	struct sim_result r, r2;
	char line[256];
	int failed;

	failed = sim_run(c, &r);
	if (!failed && o->check_replay) {
		sim_run(c, &r2);
		if (r2.trace_hash != r.trace_hash || r2.events != r.events) {
			snprintf(r.what, sizeof(r.what),
				 "not deterministic: %" PRIu64 " events (trace %016" PRIx64
				 ") then %" PRIu64 " events (trace %016" PRIx64 ")",
				 r.events, r.trace_hash, r2.events, r2.trace_hash);
			failed = 1;
		}
	}
	t->runs++;
	t->events += r.events;
	t->vtime_ns += r.vtime_ns - 1000000000ull;
	cfg_line(c, line, sizeof(line));
	if (failed) {
		t->failed++;
		fprintf(stderr, "urpc-sim: FAILED seed %" PRIu64 ": %s\n  reproduce: urpc-sim %s\n",
			c->seed, r.what, line);
		if (fail_log) {
			fprintf(fail_log, "# %s\n%s\n", r.what, line);
			fflush(fail_log);
		}
	} else if (o->list) {
		printf("seed %" PRIu64 " events %" PRIu64 " trace %016" PRIx64 "\n", c->seed,
		       r.events, r.trace_hash);
	} else if (o->mode == 's' && !o->quiet) {
		printf("seed %" PRIu64 ": ok, %" PRIu64
		       " events, %.1f ms virtual, trace %016" PRIx64 "\n  %" PRIu64
		       " requests: %" PRIu64 " answered, %" PRIu64 " failed, %" PRIu64
		       " with GPU memory; %" PRIu64 " handler runs; faults: %" PRIu64
		       " crashes, %" PRIu64 " Rpc restarts, %" PRIu64 " partitions, %" PRIu64
		       " disconnects; %" PRIu64 " rmem batches, %" PRIu64 " done; %" PRIu64
		       " large responses retired late, %" PRIu64
		       " large requests completed late\n  (%s)\n",
		       c->seed, r.events, (r.vtime_ns - 1000000000ull) / 1e6, r.trace_hash,
		       r.reqs_issued, r.reqs_ok, r.reqs_err, r.gpu, r.handled, r.crashes,
		       r.rpc_restarts, r.partitions, r.disconnects, r.rmem_batches, r.rmem_ok,
		       r.retired_late, r.answered_late, line);
		if (c->fabric)
			printf("  fabric: %" PRIu64 " datagrams dropped, %" PRIu64
			       " ECN marks, deepest switch queue %" PRIu64
			       " B, worst port's p99 queue %" PRIu64 " B\n",
			       r.fab_drops, r.fab_marks, r.fab_qmax, r.fab_q99);
	}
	return failed;
}

/* Seeds @first + k*@stride .. @last; stops early on a deadline (soak). */
static void run_range(const struct opts *o, uint64_t first, uint64_t last, uint64_t stride,
		      double deadline, struct tally *t, FILE *fail_log, bool progress)
{
	uint64_t s;
	double t0 = now_s();

	for (s = first; s <= last; s += stride) {
		struct sim_cfg c;

		cfg_for(o, s, &c);
		run_one(o, &c, t, fail_log);
		if (progress && !o->quiet && t->runs % 250 == 0)
			fprintf(stderr, "urpc-sim: %" PRIu64 " seeds, %" PRIu64 " failed, %.0f s\n",
				t->runs, t->failed, now_s() - t0);
		if (deadline > 0 && now_s() > deadline)
			break;
		if (s > UINT64_MAX - stride)
			break;
	}
}

/* Fork @jobs workers over the range; sum their tallies. */
static void run_parallel(const struct opts *o, uint64_t first, uint64_t last, double deadline,
			 struct tally *t, FILE *fail_log)
{
	pid_t pids[64];
	int fds[64];
	unsigned j, jobs = o->jobs;

	if (jobs <= 1) {
		run_range(o, first, last, 1, deadline, t, fail_log, true);
		return;
	}
	fflush(NULL);
	for (j = 0; j < jobs; j++) {
		int p[2];

		if (pipe(p) < 0) {
			perror("urpc-sim: pipe");
			exit(2);
		}
		pids[j] = fork();
		if (pids[j] < 0) {
			perror("urpc-sim: fork");
			exit(2);
		}
		if (pids[j] == 0) {
			struct tally mine = {0};

			close(p[0]);
			run_range(o, first + j, last, jobs, deadline, &mine, fail_log, j == 0);
			if (write(p[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
				_exit(3);
			_exit(0);
		}
		close(p[1]);
		fds[j] = p[0];
	}
	for (j = 0; j < jobs; j++) {
		struct tally mine;
		int st;

		if (read(fds[j], &mine, sizeof(mine)) == (ssize_t)sizeof(mine)) {
			t->runs += mine.runs;
			t->failed += mine.failed;
			t->events += mine.events;
			t->vtime_ns += mine.vtime_ns;
		} else {
			fprintf(stderr, "urpc-sim: worker %u died before reporting\n", j);
			t->failed++;
		}
		close(fds[j]);
		waitpid(pids[j], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "urpc-sim: worker %u ended with status %d%s\n", j,
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
				WIFEXITED(st) ? "" : " (signal)");
			t->failed++;
		}
	}
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || end == s || *end || *s == '-' ? -1 : 0;
}

/* Milliseconds, whole or with up to 6 decimals ("229.123456"), into nanoseconds. */
static int parse_ms(const char *s, uint64_t *ns)
{
	const char *dot = strchr(s, '.');
	uint64_t ms, frac = 0;
	char whole[32];
	size_t k, digits;

	if (!dot)
		return parse_u64(s, &ms) || ms > UINT64_MAX / 1000000 ? -1
								      : (*ns = ms * 1000000, 0);
	k = (size_t)(dot - s);
	digits = strlen(dot + 1);
	if (!k || k >= sizeof(whole) || !digits || digits > 6)
		return -1;
	memcpy(whole, s, k);
	whole[k] = 0;
	if (parse_u64(whole, &ms) || ms > UINT64_MAX / 1000000)
		return -1;
	for (k = 0; k < 6; k++) {
		char d = k < digits ? dot[1 + k] : '0';

		if (d < '0' || d > '9')
			return -1;
		frac = frac * 10 + (uint64_t)(d - '0');
	}
	*ns = ms * 1000000 + frac;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o);

/* Run every regression case in @path (a file or a directory of *.args). */
static int replay(const struct opts *base, const char *path, struct tally *t)
{
	char cmd[4096];
	FILE *f;
	int fails = 0;

	snprintf(cmd, sizeof(cmd), "test -d '%s' && ls '%s'/*.args || echo '%s'", path, path, path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(cmd, sizeof(cmd), f)) {
		char line[1024], self[] = "urpc-sim", *argv[64], *tok, *save = NULL;
		struct opts o = *base;
		struct sim_cfg c;
		int argc = 0;
		FILE *cf;

		cmd[strcspn(cmd, "\n")] = '\0';
		cf = fopen(cmd, "r");
		if (!cf) {
			fprintf(stderr, "urpc-sim: cannot open regression case %s: %s\n", cmd,
				strerror(errno));
			fails++;
			continue;
		}
		while (fgets(line, sizeof(line), cf) && (line[0] == '#' || line[0] == '\n'))
			;
		fclose(cf);
		argv[argc++] = self;
		for (tok = strtok_r(line, " \t\n", &save); tok && argc < 63;
		     tok = strtok_r(NULL, " \t\n", &save))
			argv[argc++] = tok;
		argv[argc] = NULL;
		/* Cases written before --rmem or --release-lag existed replay as they were. */
		o.given = G_RMEM | G_LAG;
		o.over.rmem = 0;
		o.over.release_lag = 0;
		o.mode = 0;
		optind = 1;
		if (parse_args(argc, argv, &o) || o.mode != 's') {
			fprintf(stderr, "urpc-sim: %s: bad options\n", cmd);
			fails++;
			continue;
		}
		cfg_for(&o, o.seed, &c);
		if (run_one(&o, &c, t, NULL))
			fails++;
		else if (!base->quiet)
			printf("regression %s: ok\n", cmd);
	}
	pclose(f);
	return fails;
}

/* Shrink a failing configuration while it keeps failing. */
static int minimize(const struct opts *o)
{
	struct sim_cfg c, best;
	struct sim_result r;
	char line[256];
	bool shrunk = true;
	unsigned bit;

	cfg_for(o, o->seed, &c);
	c.trace = 0;
	if (!sim_run(&c, &r)) {
		fprintf(stderr, "urpc-sim: seed %" PRIu64 " does not fail: nothing to minimize\n",
			o->seed);
		return 0;
	}
	best = c;
	while (shrunk) {
		shrunk = false;
		for (bit = 1; bit <= SIM_F_ALL; bit <<= 1) {
			c = best;
			if (!(c.faults & bit))
				continue;
			c.faults &= ~bit;
			if (sim_run(&c, &r)) {
				best = c;
				shrunk = true;
			}
		}
		if (best.clients > 1) {
			c = best;
			c.clients--;
			if (sim_run(&c, &r)) {
				best = c;
				shrunk = true;
			}
		}
		if (best.reqs > 1) {
			c = best;
			c.reqs = best.reqs / 2;
			if (sim_run(&c, &r)) {
				best = c;
				shrunk = true;
			} else {
				c.reqs = best.reqs - 1;
				if (sim_run(&c, &r)) {
					best = c;
					shrunk = true;
				}
			}
		}
		if (best.max_large > 8192) {
			c = best;
			c.max_large = best.max_large / 2;
			if (sim_run(&c, &r)) {
				best = c;
				shrunk = true;
			}
		}
	}
	sim_run(&best, &r);
	cfg_line(&best, line, sizeof(line));
	printf("minimal failing run: %s\n  violation: %s\n  urpc-sim %s\n", r.failed ? "yes" : "no",
	       r.what, line);
	return 1;
}

static int ch_index(const struct option *l, int ch)
{
	int i;

	for (i = 0; l[i].name; i++)
		if (l[i].val == ch)
			return i;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{"seed", required_argument, NULL, 's'},
		{"seeds", required_argument, NULL, 'r'},
		{"replay", required_argument, NULL, 'p'},
		{"soak", required_argument, NULL, 'k'},
		{"clients", required_argument, NULL, 'c'},
		{"reqs", required_argument, NULL, 'n'},
		{"faults", required_argument, NULL, 'f'},
		{"max-large", required_argument, NULL, 'L'},
		{"fault-ms", required_argument, NULL, 'F'},
		{"work-ms", required_argument, NULL, 'W'},
		{"gpu", required_argument, NULL, 'g'},
		{"rmem", required_argument, NULL, 'M'},
		{"release-lag", required_argument, NULL, 'G'},
		{"fabric", required_argument, NULL, 'B'},
		{"experiment", required_argument, NULL, 'X'},
		{"csv", required_argument, NULL, 'V'},
		{"cc", required_argument, NULL, 'C'},
		{"window", required_argument, NULL, 'w'},
		{"jobs", required_argument, NULL, 'j'},
		{"minimize", no_argument, NULL, 'm'},
		{"out", required_argument, NULL, 'o'},
		{"trace", no_argument, NULL, 't'},
		{"check-replay", no_argument, NULL, 'R'},
		{"quiet", no_argument, NULL, 'q'},
		{"list", no_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	uint64_t v;
	char *dash;
	int ch;

	while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (parse_u64(optarg, &o->seed))
				goto bad;
			o->mode = 's';
			break;
		case 'r': {
			char first[32];

			dash = strchr(optarg, '-');
			if (!dash || (size_t)(dash - optarg) >= sizeof(first))
				goto bad;
			memcpy(first, optarg, (size_t)(dash - optarg));
			first[dash - optarg] = '\0';
			if (parse_u64(first, &o->first) || parse_u64(dash + 1, &o->last) ||
			    o->last < o->first)
				goto bad;
			o->mode = 'r';
			break;
		}
		case 'p':
			o->replay = optarg;
			o->mode = 'p';
			break;
		case 'k':
			o->hours = strtod(optarg, NULL);
			if (!(o->hours > 0))
				goto bad;
			o->mode = 'k';
			break;
		case 'c':
			if (parse_u64(optarg, &v) || v < 1 || v > SIM_MAX_NODES - 2)
				goto bad;
			o->over.clients = (unsigned)v;
			o->given |= G_CLIENTS;
			break;
		case 'n':
			if (parse_u64(optarg, &v) || v > 100000)
				goto bad;
			o->over.reqs = (unsigned)v;
			o->given |= G_REQS;
			break;
		case 'f':
			if (sim_faults_parse(optarg, &o->over.faults))
				goto bad;
			o->given |= G_FAULTS;
			break;
		case 'L':
			if (parse_u64(optarg, &v) || v < 4096 || v > URPC_MAX_MSG_SIZE)
				goto bad;
			o->over.max_large = (unsigned)v;
			o->given |= G_LARGE;
			break;
		case 'F':
			if (parse_ms(optarg, &v) || v < 1000000 || v > 3600000 * 1000000ull)
				goto bad;
			o->over.fault_ns = v;
			o->given |= G_FAULT_MS;
			break;
		case 'W':
			if (parse_ms(optarg, &v) || v < 1000000 || v > 3600000 * 1000000ull)
				goto bad;
			o->over.work_ns = v;
			o->given |= G_WORK_MS;
			break;
		case 'g':
			if (parse_u64(optarg, &v) || v > 1)
				goto bad;
			o->over.gpu = (unsigned)v;
			o->given |= G_GPU;
			break;
		case 'M':
			if (parse_u64(optarg, &v) || v > 1)
				goto bad;
			o->over.rmem = (unsigned)v;
			o->given |= G_RMEM;
			break;
		case 'G':
			if (parse_u64(optarg, &v) || v > 1000000)
				goto bad;
			o->over.release_lag = (unsigned)v;
			o->given |= G_LAG;
			break;
		case 'B':
			if (parse_u64(optarg, &v) || v > 2)
				goto bad;
			o->over.fabric = (unsigned)v;
			o->given |= G_FABRIC;
			break;
		case 'X':
			if (sim_exp_parse(optarg, &o->exp))
				goto bad;
			o->mode = 'x';
			break;
		case 'V':
			o->csv = optarg;
			break;
		case 'C':
			if (strcmp(optarg, "on") && strcmp(optarg, "off") && strcmp(optarg, "both"))
				goto bad;
			o->cc = optarg;
			break;
		case 'w':
			if (parse_u64(optarg, &v) || !v || v > URPC_SESSION_WINDOW_MAX ||
			    (v & (v - 1)))
				goto bad;
			o->over.window = (unsigned)v;
			o->given |= G_WINDOW;
			break;
		case 'j':
			if (parse_u64(optarg, &v) || v < 1 || v > 64)
				goto bad;
			o->jobs = (unsigned)v;
			break;
		case 'm':
			o->minimize = true;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 't':
			o->trace = 1;
			break;
		case 'R':
			o->check_replay = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'l':
			o->list = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "urpc-sim: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
bad:
	fprintf(stderr, "urpc-sim: bad value '%s' for --%s (see --help)\n", optarg,
		longs[ch_index(longs, ch)].name);
	return -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct tally t = {0};
	double t0 = now_s(), wall;
	FILE *fail_log = NULL;
	int fails = 0;

	memset(&o, 0, sizeof(o));
	o.jobs = 1;
	o.out = "urpc-sim-failures.txt";
	if (parse_args(argc, argv, &o))
		return 2;
	if (o.mode == 'x')
		return sim_exp_run(o.exp, o.cc ? o.cc : "both", o.csv);
	if (!o.mode) {
		fprintf(stderr, "urpc-sim: say what to run: --seed, --seeds, --replay or --soak "
				"(see --help)\n");
		return 2;
	}
	if (o.minimize && o.mode != 's') {
		fprintf(stderr, "urpc-sim: --minimize needs --seed\n");
		return 2;
	}
	/* The engine's own log lines would drown the report: errors only. */
	if (!getenv("URPC_LOG"))
		urpc_log_set_level(o.trace ? URPC_LOG_INFO : URPC_LOG_ERR);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * The CUDA driver loads once per process, before any run: the engine
	 * caches whether it has one, so loading it in the middle of a range
	 * would make a seed's run depend on the seeds before it.
	 */
	if (sim_gpu_init() && !o.quiet)
		fprintf(stderr, "urpc-sim: no GPU payloads in this process: %s\n", sim_gpu_why());

	switch (o.mode) {
	case 's':
		if (o.minimize)
			return minimize(&o);
		run_parallel(&o, o.seed, o.seed, 0, &t, NULL);
		break;
	case 'r':
		run_parallel(&o, o.first, o.last, 0, &t, NULL);
		break;
	case 'p':
		fails = replay(&o, o.replay, &t);
		if (fails < 0) {
			fprintf(stderr, "urpc-sim: cannot list %s\n", o.replay);
			return 2;
		}
		break;
	case 'k': {
		uint64_t start;

		fail_log = fopen(o.out, "a");
		if (!fail_log) {
			fprintf(stderr, "urpc-sim: cannot open %s: %s\n", o.out, strerror(errno));
			return 2;
		}
		urpc__entropy(&start, sizeof(start));
		start >>= 16; /* room to count up */
		fprintf(stderr, "urpc-sim: soak for %g h from seed %" PRIu64 ", failures to %s\n",
			o.hours, start, o.out);
		run_parallel(&o, start, UINT64_MAX - 1, t0 + o.hours * 3600, &t, fail_log);
		fclose(fail_log);
		break;
	}
	}
	wall = now_s() - t0;
	if (o.mode != 's' || t.failed)
		printf("urpc-sim: %" PRIu64 " runs, %" PRIu64 " failed; %" PRIu64
		       " events in %.1f s (%.0f events/s), %.1f s of virtual time\n",
		       t.runs, t.failed, t.events, wall, wall > 0 ? t.events / wall : 0.0,
		       t.vtime_ns / 1e9);
	return t.failed || fails ? 1 : 0;
}
