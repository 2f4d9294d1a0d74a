/*
 * overhead: what eachobs itself costs, with getobs doing (almost) nothing.
 *
 * Five measurements, printed as one table (one row per number):
 *
 *   1. noop_rate / noop_cost: throughput when getobs only stores its index
 *      in an 8-byte slot; items/s and ns/item, per executor, ordered or
 *      not, per thread count. The wall time runs from before
 *      eachobs_parallel to after eachobs_close and includes the consumer's
 *      own checks (a byte array store and two compares per item). A
 *      pilot run of 100000 items comes first; when it shows that the
 *      repetitions at full n would take more than 6 s, that configuration
 *      runs a smaller n (shown in the n column, with a note), so that one
 *      slow hand-off cannot stretch the run to many minutes.
 *   2. first_item / close_busy: time from before eachobs_parallel to the
 *      return of the first eachobs_next, and the time of an eachobs_close
 *      called right after it, while the workers are still busy.
 *   3. close_sleep: eachobs_close right after the first item while every
 *      worker is inside a getobs that sleeps 20 ms; the header promises
 *      about one getobs duration. It is also checked: no getobs may be
 *      running when close returns, nor start in the 25 ms after it.
 *   4. pause_cpu: process CPU time (user + sys) spent while the consumer
 *      takes one item and then sleeps without calling eachobs_next. The
 *      workers should fill the buffer and sleep, so this should be near 0.
 *   5. rss_first / rss_settled / rss_second: resident memory added by one
 *      iterator (and by a second one opened beside it, which finds code
 *      pages and malloc's arena already resident; rss_fixed: a third
 *      with buffersize 1, nearly only fixed memory) with
 *      obs_size 0 (slots, queues, thread stacks as far as touched), read
 *      from /proc/self/statm. Each is measured in a child forked before
 *      anything else runs, so freed heap and glibc's cache of thread
 *      stacks from earlier runs do not hide pages.
 *
 * The consumer checks what it gets: every index exactly once, in order
 * when ordered, and each slot holding its index. A wrong result is a
 * failure (exit status 1), not a number in the table.
 *
 * Usage: overhead [--n N] [--reps R] [--threads LIST] [--quick]
 *                 [--csv FILE] [--help]
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_PER_MS 1000000ull
#define MAX_N (1ull << 34)
#define QUICK_DIVISOR 100

/* Defaults of the five parts; --quick divides the n's by QUICK_DIVISOR
 * and sets every repetition count to 1. */
#define RATE_N 10000000ull
#define RATE_REPS 5u
#define RATE_PILOT_N 100000ull
#define RATE_BUDGET_NS (6 * NS_PER_S) /* per configuration, all reps */
#define START_N 1000000ull
#define START_REPS 21u
#define START_EXTRA_P 16u /* part 2 always includes this thread count */
#define SLEEP_GETOBS_NS (20 * NS_PER_MS)
#define SLEEP_P 4u
#define SLEEP_N 1000ull
#define SLEEP_REPS 5u
#define PAUSE_P 16u
#define PAUSE_NS (500 * NS_PER_MS)
#define PAUSE_NS_QUICK (100 * NS_PER_MS)
#define RSS_N (1ull << 20)
#define RSS_SETTLE_NS (20 * NS_PER_MS)

static const unsigned rss_threads[] = { 2, 16, 64 };
#define NRSS (sizeof(rss_threads) / sizeof(rss_threads[0]))

struct options {
	struct bench_args args; /* --reps, --threads, --quick, --csv */
	size_t n;		/* --n */
};

/* The dataset's ctx: read-only once the iterator starts. */
struct noop {
	size_t n;
	uint64_t sleep_ns; /* 0: getobs returns at once */
	bool no_slot;	   /* obs_size is 0: store nothing */
	/* getobs calls in progress, counted only when sleeping (part 3):
	 * close promises that none runs once it has returned. */
	atomic_uint inflight;
	atomic_size_t calls;
};

/* One line of the table. "best" is the minimum for a time and the
 * maximum for a rate; NAN when there is only one measurement that means
 * anything. */
struct row {
	const char *test;
	const char *executor; /* "-" when not applicable */
	const char *ordered;  /* "yes", "no" or "-" */
	unsigned p;	      /* 0: not applicable */
	size_t n;
	unsigned reps;
	double median, best;
	const char *unit;
	char note[64];
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--n N] [--reps R] [--threads LIST] [--quick]\n"
		"          [--csv FILE] [--help]\n"
		"\n"
		"The library's own costs with a getobs that does nothing:\n"
		"throughput, time to the first item, close latency (workers busy,\n"
		"and workers inside a 20 ms getobs), CPU burned while the consumer\n"
		"pauses, and resident memory added by one iterator.\n"
		"\n"
		"  --n N           items of the throughput runs (default %llu);\n"
		"                  a configuration whose reps would take more\n"
		"                  than %llu s runs fewer (noted in the table)\n"
		"  --reps R        repetitions (1..%d); default %u for throughput\n"
		"                  and close_sleep, %u for the start latency\n"
		"  --threads LIST  comma-separated thread counts (default 1,2);\n"
		"                  the start latency uses LIST plus %u (default\n"
		"                  2,%u)\n"
		"  --quick         smoke mode: every n divided by %d, reps 1 unless\n"
		"                  --reps is given, a shorter pause\n"
		"  --csv FILE      also write the results as CSV to FILE\n"
		"  --help          print this and exit\n",
		prog, RATE_N, RATE_BUDGET_NS / NS_PER_S, BENCH_MAX_REPS, RATE_REPS, START_REPS, START_EXTRA_P,
		START_EXTRA_P, QUICK_DIVISOR);
}

/* --n, the one option of our own: a bench_option_fn. */
static void parse_n(int ch, const char *arg, void *ctx)
{
	struct options *o = ctx;

	(void)ch;
	o->n = (size_t)parse_option("--n", arg, 1, MAX_N);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option own[] = {
		{ "n", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};

	*o = (struct options){ .args = { .reps = RATE_REPS,
					 .threads = { 1, 2 },
					 .nthread_counts = 2 },
			       .n = RATE_N };
	bench_parse_args(argc, argv, &o->args, own, parse_n, o);
	if (o->args.quick) {
		o->n = o->n / QUICK_DIVISOR ? o->n / QUICK_DIVISOR : 1;
		if (!o->args.reps_set)
			o->args.reps = 1;
	}
}

/* Voluntary plus involuntary context switches of every thread of the
 * process so far (RUSAGE_SELF sums the threads, joined ones included). */
static uint64_t ctx_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		die("getrusage: %s", strerror(errno));
	return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static size_t noop_numobs(void *ctx)
{
	return ((const struct noop *)ctx)->n;
}

static int noop_getobs(void *ctx, size_t idx, void *obs)
{
	struct noop *d = ctx;

	if (d->sleep_ns) {
		int rc;

		atomic_fetch_add(&d->calls, 1);
		atomic_fetch_add(&d->inflight, 1);
		rc = sleep_ns(d->sleep_ns);
		atomic_fetch_sub(&d->inflight, 1);
		if (rc < 0)
			return rc;
	}
	if (!d->no_slot)
		memcpy(obs, &idx, sizeof(idx));
	return 0;
}

static eachobs_iter *start_buf(struct noop *d, size_t obs_size, unsigned p,
			       eachobs_executor ex, bool ordered,
			       size_t buffersize)
{
	const eachobs_dataset data = { .ctx = d,
				       .numobs = noop_numobs,
				       .getobs = noop_getobs,
				       .obs_size = obs_size };
	const eachobs_options opts = { .nthreads = p,
				       .executor = ex,
				       .ordered = ordered,
				       .buffersize = buffersize };
	eachobs_iter *it;
	int rc;

	/* Before the start: getobs reads it from then on. */
	d->no_slot = obs_size == 0;
	rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0)
		die("eachobs_parallel (P=%u, %s): %s", p, executor_name(ex),
		    eachobs_strerror(rc));
	return it;
}

static eachobs_iter *start(struct noop *d, size_t obs_size, unsigned p,
			   eachobs_executor ex, bool ordered)
{
	return start_buf(d, obs_size, p, ex, ordered, 0);
}

/* Take one item and check it; the part-2..5 iterators use this. */
static void take_one(eachobs_iter *it, size_t n, bool check_slot)
{
	const void *obs = NULL;
	size_t idx = SIZE_MAX, stored;
	int rc = eachobs_next(it, &obs, &idx);

	if (rc != 1)
		die("first eachobs_next returned %d (%s)", rc,
		    eachobs_strerror(rc));
	if (idx >= n)
		die("index %zu yielded, but n is %zu", idx, n);
	if (obs == NULL)
		die("index %zu yielded with a NULL slot", idx);
	if (check_slot) {
		memcpy(&stored, obs, sizeof(stored));
		if (stored != idx)
			die("index %zu yielded, but its slot holds %zu", idx,
			    stored);
	}
}

static void progress(const char *what, unsigned p, const char *ex,
		     unsigned rep, unsigned reps)
{
	show_progress("%s P=%u %s rep %u/%u", what, p, ex, rep + 1, reps);
}

/* Output: a fixed-width table on stdout and the same rows as CSV. */
struct out {
	FILE *csv;
	const char *csv_path;
};

static void print_table_head(void)
{
	printf("%-12s %-10s %-3s %3s %9s %4s %12s %12s  %-9s %s\n", "test",
	       "executor", "ord", "P", "n", "reps", "median", "best", "unit",
	       "note");
}

static void emit(const struct out *out, const struct row *r)
{
	char p[16] = "-", best[32] = "-";

	if (r->p)
		snprintf(p, sizeof(p), "%u", r->p);
	if (r->best == r->best) /* not NaN */
		snprintf(best, sizeof(best), "%.3f", r->best);
	clear_progress();
	printf("%-12s %-10s %-3s %3s %9zu %4u %12.3f %12s  %-9s %s\n", r->test,
	       r->executor, r->ordered, p, r->n, r->reps, r->median, best,
	       r->unit, r->note);
	fflush(stdout);
	if (out->csv)
		fprintf(out->csv, "%s,%s,%s,%u,%zu,%u,%.6g,%s,%s,\"%s\"\n",
			r->test, r->executor, r->ordered, r->p, r->n, r->reps,
			r->median, r->best == r->best ? best : "", r->unit,
			r->note);
}

static void section(const char *fmt, ...)
{
	va_list ap;

	clear_progress();
	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

/* One timed drain of n no-op items: from before eachobs_parallel to after
 * eachobs_close. */
static uint64_t rate_once(size_t n, unsigned p, eachobs_executor ex,
			  bool ordered, unsigned char *seen)
{
	struct noop d = { .n = n };
	eachobs_iter *it;
	uint64_t t0;

	memset(seen, 0, n);
	t0 = now_ns();
	it = start(&d, sizeof(size_t), p, ex, ordered);
	consume(it, n, ordered, seen);
	eachobs_close(it);
	return now_ns() - t0;
}

/* The n to time: o->n, unless a pilot run shows that the repetitions would
 * take more than RATE_BUDGET_NS; then the largest 1-2-5 number that fits
 * (at least RATE_PILOT_N), so that one slow configuration cannot stretch
 * the run to many minutes. The pilot doubles as a warm-up. */
static size_t rate_n(const struct options *o, unsigned p, eachobs_executor ex,
		     bool ordered, unsigned char *seen)
{
	size_t pilot = o->n < RATE_PILOT_N ? o->n : RATE_PILOT_N;
	double per_item, fit;
	size_t n = RATE_PILOT_N;

	progress("throughput pilot", p, executor_name(ex), 0, 1);
	per_item = (double)rate_once(pilot, p, ex, ordered, seen) /
		   (double)pilot;
	if (per_item * (double)o->n * o->args.reps <= (double)RATE_BUDGET_NS)
		return o->n;
	fit = (double)RATE_BUDGET_NS / (per_item * o->args.reps);
	for (size_t dec = RATE_PILOT_N; (double)dec <= fit; dec *= 10)
		for (size_t m = 1; m <= 5; m += m == 1 ? 1 : 3)
			if ((double)dec * m <= fit && dec * m <= o->n)
				n = dec * m;
	return n;
}

/* Part 1: no-op throughput of one configuration. */
static void rate_config(const struct out *out, const struct options *o,
			unsigned p, eachobs_executor ex, bool ordered,
			unsigned char *seen)
{
	size_t n = o->args.quick ? o->n : rate_n(o, p, ex, ordered, seen);
	uint64_t wall[BENCH_MAX_REPS];
	struct row r = { .executor = executor_name(ex),
			 .ordered = ex == EACHOBS_SERIAL ? "-"
				    : ordered	  ? "yes"
						  : "no",
			 .p = ex == EACHOBS_SERIAL ? 0 : p,
			 .n = n,
			 .reps = o->args.reps };
	uint64_t med;

	uint64_t csw = ctx_switches();
	double csw_per_item;

	for (unsigned i = 0; i < o->args.reps; i++) {
		progress("throughput", p, r.executor, i, o->args.reps);
		wall[i] = rate_once(n, p, ex, ordered, seen);
	}
	csw_per_item = (double)(ctx_switches() - csw) /
		       ((double)n * o->args.reps);
	med = median_u64(wall, o->args.reps);
	if (n < o->n)
		snprintf(r.note, sizeof(r.note), "n cut from %zu: slow", o->n);
	r.test = "noop_rate";
	r.unit = "Mitem/s";
	r.median = (double)n / (double)med * 1e3;
	r.best = (double)n / (double)wall[0] * 1e3;
	emit(out, &r);
	/* Context switches show whether the hand-off sleeps per item. */
	snprintf(r.note, sizeof(r.note), "%.3f ctx switches/item",
		 csw_per_item);
	r.test = "noop_cost";
	r.unit = "ns/item";
	r.median = (double)med / (double)n;
	r.best = (double)wall[0] / (double)n;
	emit(out, &r);
}

static void part_rate(const struct out *out, const struct options *o)
{
	unsigned char *seen = malloc(o->n);

	if (seen == NULL)
		die("out of memory for %zu seen flags", o->n);
	section("1. no-op throughput: getobs stores idx (8-byte slot); wall "
		"from before eachobs_parallel to after close, consumer checks "
		"included");
	for (size_t i = 0; i < o->args.nthread_counts; i++) {
		for (int e = EACHOBS_THREADED; e <= EACHOBS_BACKGROUND; e++)
			for (int ord = 0; ord <= 1; ord++)
				rate_config(out, o, o->args.threads[i],
					    (eachobs_executor)e, ord, seen);
	}
	rate_config(out, o, 1, EACHOBS_SERIAL, false, seen);
	free(seen);
}

/* The repetitions of a part whose own default is dflt: --reps when given,
 * else 1 in quick mode. */
static unsigned part_reps(const struct options *o, unsigned dflt)
{
	if (o->args.reps_set)
		return o->args.reps;
	return o->args.quick ? 1 : dflt;
}

/* Part 2: start to first item, then close with the workers busy. */
static void start_config(const struct out *out, unsigned p,
			 eachobs_executor ex, size_t n, unsigned reps)
{
	struct noop d = { .n = n };
	uint64_t first[BENCH_MAX_REPS], close[BENCH_MAX_REPS];
	struct row r = { .executor = executor_name(ex),
			 .ordered = ex == EACHOBS_SERIAL ? "-" : "no",
			 .p = ex == EACHOBS_SERIAL ? 0 : p,
			 .n = n,
			 .reps = reps,
			 .unit = "us" };

	for (unsigned i = 0; i < reps; i++) {
		eachobs_iter *it;
		uint64_t t0, t1, t2;

		progress("start", p, r.executor, i, reps);
		t0 = now_ns();
		it = start(&d, sizeof(size_t), p, ex, false);
		take_one(it, n, true);
		t1 = now_ns();
		eachobs_close(it);
		t2 = now_ns();
		first[i] = t1 - t0;
		close[i] = t2 - t1;
	}
	r.test = "first_item";
	r.median = (double)median_u64(first, reps) / 1e3;
	r.best = (double)first[0] / 1e3;
	emit(out, &r);
	r.test = "close_busy";
	r.median = (double)median_u64(close, reps) / 1e3;
	r.best = (double)close[0] / 1e3;
	emit(out, &r);
}

static void part_start(const struct out *out, const struct options *o)
{
	unsigned ps[BENCH_MAX_THREAD_COUNTS + 1];
	size_t np = 0, n = START_N / (o->args.quick ? QUICK_DIVISOR : 1);
	unsigned reps = part_reps(o, START_REPS);
	bool have_extra = false;

	if (o->args.threads_set) {
		for (size_t i = 0; i < o->args.nthread_counts; i++) {
			ps[np++] = o->args.threads[i];
			have_extra |= o->args.threads[i] == START_EXTRA_P;
		}
	} else {
		ps[np++] = 2;
	}
	if (!have_extra)
		ps[np++] = START_EXTRA_P;
	section("2. start to first item (before eachobs_parallel to the "
		"return of the first next), then close with workers busy");
	for (int e = EACHOBS_THREADED; e <= EACHOBS_BACKGROUND; e++)
		for (size_t i = 0; i < np; i++)
			start_config(out, ps[i], (eachobs_executor)e, n, reps);
	start_config(out, 1, EACHOBS_SERIAL, n, reps);
}

/* Part 3: close while every worker sleeps inside getobs. */
static void part_close_sleep(const struct out *out, const struct options *o)
{
	unsigned reps = part_reps(o, SLEEP_REPS);
	struct noop d = { .n = SLEEP_N, .sleep_ns = SLEEP_GETOBS_NS };

	section("3. close latency right after the first item while getobs "
		"sleeps %" PRIu64 " ms (promise: about one getobs)",
		SLEEP_GETOBS_NS / NS_PER_MS);
	for (int e = EACHOBS_THREADED; e <= EACHOBS_BACKGROUND; e++) {
		uint64_t close[BENCH_MAX_REPS];
		size_t calls;
		struct row r = { .test = "close_sleep",
				 .executor = executor_name((eachobs_executor)e),
				 .ordered = "no",
				 .p = SLEEP_P,
				 .n = d.n,
				 .reps = reps,
				 .unit = "ms" };

		for (unsigned i = 0; i < reps; i++) {
			eachobs_iter *it;
			uint64_t t0;

			progress("close_sleep", SLEEP_P, r.executor, i, reps);
			it = start(&d, sizeof(size_t), SLEEP_P,
				   (eachobs_executor)e, false);
			take_one(it, d.n, true);
			t0 = now_ns();
			eachobs_close(it);
			close[i] = now_ns() - t0;
			if (atomic_load(&d.inflight) != 0)
				die("%s: %u getobs still running after "
				    "eachobs_close returned",
				    r.executor, atomic_load(&d.inflight));
		}
		/* A worker left behind would start another getobs soon. */
		calls = atomic_load(&d.calls);
		if (sleep_ns(SLEEP_GETOBS_NS + SLEEP_GETOBS_NS / 4) < 0)
			die("clock_nanosleep failed");
		if (atomic_load(&d.calls) != calls)
			die("%s: getobs called after eachobs_close returned",
			    r.executor);
		r.median = (double)median_u64(close, reps) / NS_PER_MS;
		r.best = (double)close[0] / NS_PER_MS;
		/* Close may wait for a getobs that started just before it,
		 * plus wake-up latency; twice the sleep is clearly more. */
		if (r.median > 2.0 * (double)SLEEP_GETOBS_NS / NS_PER_MS)
			snprintf(r.note, sizeof(r.note),
				 "SLOW: > 2 getobs durations");
		emit(out, &r);
	}
}

/* Part 4: CPU burned while the consumer holds one item and sleeps. */
static void part_pause(const struct out *out, const struct options *o)
{
	uint64_t pause = o->args.quick ? PAUSE_NS_QUICK : PAUSE_NS;
	struct noop d = { .n = START_N };

	section("4. process CPU (user+sys) while the consumer sleeps %" PRIu64
		" ms after one item; workers should sleep once the buffer is "
		"full",
		pause / NS_PER_MS);
	for (int ord = 0; ord <= 1; ord++) {
		struct row r = { .executor = "background",
				 .ordered = ord ? "yes" : "no",
				 .p = PAUSE_P,
				 .n = d.n,
				 .reps = 1,
				 .best = NAN };
		eachobs_iter *it;
		uint64_t c0, c1, w0, w1;
		double pct;
		int rc;

		progress("pause", PAUSE_P, r.executor, 0, 1);
		it = start(&d, sizeof(size_t), PAUSE_P, EACHOBS_BACKGROUND,
			   ord);
		take_one(it, d.n, true);
		c0 = cpu_ns();
		w0 = now_ns();
		if ((rc = sleep_ns(pause)) < 0)
			die("clock_nanosleep: %s", strerror(-rc));
		c1 = cpu_ns();
		w1 = now_ns();
		eachobs_close(it);
		pct = 100.0 * (double)(c1 - c0) / (double)(w1 - w0);
		r.test = "pause_cpu";
		r.unit = "ms";
		r.median = (double)(c1 - c0) / NS_PER_MS;
		if (pct > 5.0)
			snprintf(r.note, sizeof(r.note),
				 "BUSY: workers did not sleep");
		emit(out, &r);
		r.test = "pause_cpu%";
		r.unit = "%core";
		r.median = pct;
		r.note[0] = '\0';
		emit(out, &r);
	}
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, resident;
	int got;

	if (f == NULL)
		die("/proc/self/statm: %s", strerror(errno));
	got = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	if (got != 2)
		die("/proc/self/statm: unexpected format");
	return (long)(resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
}

/* Part 5, in a child: the RSS added by one iterator after its first item
 * and after the workers have had time to fill the buffer and sleep. */
struct rss_result {
	long first_kib, settled_kib, second_kib, fixed_kib;
};

/* Open an iterator over d, take one item and return the RSS it added
 * once its workers had time to fill the buffer and sleep; *first (if not
 * NULL) gets the RSS added right after the first item. */
static long rss_open(struct noop *d, unsigned p, size_t buffersize,
		     eachobs_iter **it, long *first)
{
	long before = rss_kib();

	*it = start_buf(d, 0, p, EACHOBS_BACKGROUND, false, buffersize);
	take_one(*it, d->n, false);
	if (first)
		*first = rss_kib() - before;
	if (sleep_ns(RSS_SETTLE_NS) < 0)
		die("clock_nanosleep failed");
	return rss_kib() - before;
}

static struct rss_result rss_child(unsigned p)
{
	struct noop d[3] = { { .n = RSS_N }, { .n = RSS_N }, { .n = RSS_N } };
	struct rss_result res;
	eachobs_iter *it[3];

	res.settled_kib = rss_open(&d[0], p, 0, &it[0], &res.first_kib);
	/* A second iterator beside the first finds the code and malloc's
	 * arena already resident: what it adds is what each iterator costs. */
	res.second_kib = rss_open(&d[1], p, 0, &it[1], NULL);
	/* And one with a single buffered slot: next to nothing but the
	 * iterator's fixed memory (struct, rings, threads' stacks). */
	res.fixed_kib = rss_open(&d[2], p, 1, &it[2], NULL);
	for (int i = 2; i >= 0; i--)
		eachobs_close(it[i]);
	return res;
}

/* Run before any other part, while the process has started no thread and
 * freed nothing, so that a child's new iterator cannot reuse resident
 * pages from earlier runs. */
static void rss_in_child(void *ctx, void *out)
{
	*(struct rss_result *)out = rss_child(*(const unsigned *)ctx);
}

static void measure_rss(struct rss_result *res)
{
	for (size_t i = 0; i < NRSS; i++)
		if (!run_in_child(rss_in_child, (void *)&rss_threads[i], &res[i],
				  sizeof(res[i])))
			die("RSS child for P=%u failed", rss_threads[i]);
}

static void part_rss(const struct out *out, const struct rss_result *res)
{
	section("5. resident memory added by one iterator (BACKGROUND, "
		"obs_size 0, n = 2^20), from /proc/self/statm in a fresh child");
	section("   caveat: page-granular; counts touched thread-stack pages "
		"and glibc bookkeeping, not only the library's own allocations");
	for (size_t i = 0; i < NRSS; i++) {
		struct row r = { .test = "rss_first",
				 .executor = "background",
				 .ordered = "no",
				 .p = rss_threads[i],
				 .n = RSS_N,
				 .reps = 1,
				 .median = (double)res[i].first_kib,
				 .best = NAN,
				 .unit = "KiB" };

		emit(out, &r);
		r.test = "rss_settled";
		r.median = (double)res[i].settled_kib;
		/* The first count pays for first-use pages (library code,
		 * malloc arenas); the difference per added thread does not. */
		if (i == 0)
			snprintf(r.note, sizeof(r.note),
				 "incl. first-use code/heap pages");
		else
			snprintf(r.note, sizeof(r.note),
				 "+%.1f KiB per thread over P=%u",
				 (double)(res[i].settled_kib -
					  res[0].settled_kib) /
					 (rss_threads[i] - rss_threads[0]),
				 rss_threads[0]);
		emit(out, &r);
		r.test = "rss_second";
		r.median = (double)res[i].second_kib;
		snprintf(r.note, sizeof(r.note),
			 "a second iterator beside the first");
		emit(out, &r);
		r.test = "rss_fixed";
		r.median = (double)res[i].fixed_kib;
		snprintf(r.note, sizeof(r.note),
			 "a third, buffersize 1: fixed memory");
		emit(out, &r);
	}
}

static void print_header(const struct options *o)
{
	printf("# eachobs overhead benchmark: the library's own costs, getobs "
	       "does nothing\n");
	printf("# online CPUs %ld: CPU-bound throughput cannot scale past "
	       "that many threads\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("# median over reps; best = min for times, max for rates%s\n",
	       o->args.quick ? "; quick mode: n / 100, reps 1" : "");
}

int main(int argc, char **argv)
{
	struct options o;
	struct out out;
	struct rss_result rss[NRSS];
	uint64_t t0;

	bench_set_name("overhead", argv[0], usage);
	t0 = now_ns();
	parse_args(argc, argv, &o);
	out = (struct out){ .csv = open_csv(o.args.csv_path,
					    "test,executor,ordered,nthreads,n,"
					    "reps,median,best,unit,note\n"),
			    .csv_path = o.args.csv_path };
	show_progress("measuring RSS in child processes");
	measure_rss(rss);
	clear_progress();
	print_header(&o);
	print_table_head();
	part_rate(&out, &o);
	part_start(&out, &o);
	part_close_sleep(&out, &o);
	part_pause(&out, &o);
	part_rss(&out, rss);
	clear_progress();
	printf("# total runtime %.1f s\n", (double)(now_ns() - t0) / 1e9);
	close_outputs(out.csv, out.csv_path);
	return 0;
}
