/*
 * ring: the machine's own limit for handing items between threads, beside
 * what eachobs costs per item, in one run, so that a report can say how far
 * the library is from it.
 *
 * The limit is concurrencykit's ck_ring passing pointer-sized entries
 * between busy threads, with no loader around it:
 *
 *   ck spsc   one producer thread, one consumer (ck_ring_enqueue_spsc /
 *             ck_ring_dequeue_spsc): the cheapest cross-thread hand-off.
 *   ck mpmc   P producers and C consumers (ck_ring_enqueue_mpmc /
 *             ck_ring_dequeue_mpmc); producer k sends k, k + P, ...
 *
 * Each entry is an index, carried in the pointer itself. A consumer that
 * finds the ring empty polls again, and a producer that finds it full
 * retries; after RING_SPINS failed tries in a row either yields its core
 * (sched_yield), so that with more threads than cores the thread it waits
 * for gets to run. The ring has RING_SIZE entries, about eachobs's default
 * buffer of small observations.
 *
 * Beside it, eachobs with P workers and a dataset whose getobs does
 * nothing (obs_size 8): THREADED and BACKGROUND, unordered and ordered,
 * one observation per eachobs_next, and THREADED unordered in batches of
 * BATCH through eachobs_next_batch.
 *
 * Every row is timed alike: from before its threads start (pthread_create,
 * eachobs_parallel) to after they are joined (eachobs_close), and its
 * consumer makes the same check of every index (check_index: below n, not
 * seen before, in order for spsc and ordered), so a wrong result is a
 * failure, not a number. The consumer is the main thread, as it is for
 * eachobs; a second mpmc consumer is a thread of its own. Each repetition
 * runs every row once, after one untimed round at n / 10, so that all rows
 * share the machine's state; the table has the median over repetitions,
 * ns per item and M items/s, x_spsc, the row's median ns per item over
 * ck spsc's, and x_round, the median over repetitions of the row's time
 * over ck spsc's in the same repetition: on a shared machine whose speed
 * drifts during a run, the ratio of two medians may pair a slow round of
 * one row with a fast one of the other, the ratio within a round does
 * not.
 *
 * Usage: ring [--n N] [--threads LIST] [--consumers LIST] [--reps R]
 *             [--quick] [--csv FILE] [--help]
 */
#define _GNU_SOURCE

#include "util.h"

#include <ck_pr.h>
#include <ck_ring.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_N 2000000ull
#define DEFAULT_REPS 5u
#define DEFAULT_P 2u
#define QUICK_DIVISOR 10
#define QUICK_REPS 3u
#define MAX_N (1ull << 32)
#define MAX_CONSUMERS 64u
#define MAX_CONSUMER_COUNTS 8

/* A power of two, as ck_ring requires; it holds RING_SIZE - 1 entries. */
#define RING_SIZE 256u
#define RING_SPINS 1024u
#define BATCH 64u

/* After every producer's last entry, one per consumer: not an index. */
#define RING_END ((void *)UINTPTR_MAX)

struct options {
	struct bench_args args; /* --reps, --threads, --quick, --csv */
	size_t n;		/* --n */
	unsigned consumers[MAX_CONSUMER_COUNTS]; /* --consumers */
	size_t nconsumer_counts;
};

enum kind { CK_SPSC, CK_MPMC, EACHOBS };

/* One row of the table, timed once per repetition. */
struct row {
	enum kind kind;
	eachobs_executor ex; /* EACHOBS only */
	bool ordered;	     /* EACHOBS only */
	size_t batch;	     /* EACHOBS only; 0: one item per eachobs_next */
	unsigned p, c;	     /* producers or workers; consumers */
	uint64_t wall[BENCH_MAX_REPS];
	double x_round; /* the median of wall[rep] / ck spsc's wall[rep] */
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--n N] [--threads LIST] [--consumers LIST]\n"
		"          [--reps R] [--quick] [--csv FILE] [--help]\n"
		"\n"
		"The machine's own limit for handing items between threads,\n"
		"concurrencykit's ck_ring (one producer and one consumer, then P\n"
		"producers and C consumers), beside eachobs's cost per item with\n"
		"a getobs that does nothing (THREADED and BACKGROUND, unordered\n"
		"and ordered, and batches of %u), in one run: ns per item,\n"
		"M items/s and each row over the single-producer ring: the\n"
		"ratio of the medians (x_spsc) and the median of the ratios\n"
		"within each round (x_round).\n"
		"\n"
		"  --n N             items per run (default %llu)\n"
		"  --threads LIST    comma-separated P: ring producers and eachobs\n"
		"                    workers (default %u)\n"
		"  --consumers LIST  consumers of the P-producer ring, each 1..%u\n"
		"                    (default 1,2)\n"
		"  --reps R          repetitions, every row once in each (1..%d,\n"
		"                    default %u); the median is shown\n"
		"  --quick           n / %d and %u repetitions unless --reps is\n"
		"                    given: a few seconds\n"
		"  --csv FILE        also write the results as CSV to FILE\n"
		"  --help            print this and exit\n",
		prog, BATCH, DEFAULT_N, DEFAULT_P, MAX_CONSUMERS,
		BENCH_MAX_REPS, DEFAULT_REPS, QUICK_DIVISOR, QUICK_REPS);
}

/* --n and --consumers: a bench_option_fn. */
static void own_option(int ch, const char *arg, void *ctx)
{
	struct options *o = ctx;

	if (ch == 'n')
		o->n = (size_t)parse_option("--n", arg, 1, MAX_N);
	else if (ch == 'c')
		o->nconsumer_counts = parse_list("--consumers", arg, 1,
						 MAX_CONSUMERS, o->consumers,
						 MAX_CONSUMER_COUNTS);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option own[] = {
		{ "n", required_argument, NULL, 'n' },
		{ "consumers", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};

	*o = (struct options){ .args = { .reps = DEFAULT_REPS,
					 .threads = { DEFAULT_P },
					 .nthread_counts = 1 },
			       .n = DEFAULT_N,
			       .consumers = { 1, 2 },
			       .nconsumer_counts = 2 };
	bench_parse_args(argc, argv, &o->args, own, own_option, o);
	if (o->args.quick) {
		o->n = o->n / QUICK_DIVISOR ? o->n / QUICK_DIVISOR : 1;
		if (!o->args.reps_set)
			o->args.reps = QUICK_REPS;
	}
}

/* ---- the ring ------------------------------------------------------ */

/* One ring run's shared state. The ring's heads sit on cache lines of
 * their own (ck pads them); the buffer and the producers' counter follow
 * on lines of theirs, so that no two threads' hot words share one. */
struct ring_run {
	alignas(64) ck_ring_t ring;
	alignas(64) ck_ring_buffer_t buf[RING_SIZE];
	alignas(64) atomic_uint producers_left;
	size_t n;
	unsigned p, c;
	bool spsc;
	unsigned char *seen; /* n flags, zeroed; the consumers' check */
};

/* One thread's part: producer k, or a consumer (its count is its result). */
struct ring_thread {
	struct ring_run *run;
	unsigned k;
	size_t count;
	pthread_t tid;
};

/* A failed try at a full or empty ring: poll again at once, but after
 * RING_SPINS failures in a row give the core up, so that the thread this
 * one waits for can run where threads outnumber cores. */
static void ring_wait(unsigned *fails)
{
	if (++*fails < RING_SPINS) {
		ck_pr_stall();
		return;
	}
	*fails = 0;
	sched_yield();
}

static void ring_put(struct ring_run *r, void *entry)
{
	unsigned fails = 0;

	if (r->spsc) {
		while (!ck_ring_enqueue_spsc(&r->ring, r->buf, entry))
			ring_wait(&fails);
	} else {
		while (!ck_ring_enqueue_mpmc(&r->ring, r->buf, entry))
			ring_wait(&fails);
	}
}

static void *ring_get(struct ring_run *r)
{
	unsigned fails = 0;
	void *entry;

	if (r->spsc) {
		while (!ck_ring_dequeue_spsc(&r->ring, r->buf, &entry))
			ring_wait(&fails);
	} else {
		while (!ck_ring_dequeue_mpmc(&r->ring, r->buf, &entry))
			ring_wait(&fails);
	}
	return entry;
}

static void *producer(void *arg)
{
	struct ring_thread *t = arg;
	struct ring_run *r = t->run;

	for (size_t i = t->k; i < r->n; i += r->p)
		ring_put(r, (void *)(uintptr_t)i);
	/* The last producer to finish ends the stream: its fetch_sub comes
	 * after every other producer's last enqueue, so the ring (FIFO)
	 * holds every index before the first RING_END. */
	if (!r->spsc && atomic_fetch_sub(&r->producers_left, 1) == 1)
		for (unsigned j = 0; j < r->c; j++)
			ring_put(r, RING_END);
	return NULL;
}

/* Take entries until the n-th (spsc: one consumer, every entry in order)
 * or until RING_END, checking each index. The count stays in a local
 * until the end: the threads' structs share cache lines. */
static void *consumer(void *arg)
{
	struct ring_thread *t = arg;
	struct ring_run *r = t->run;
	size_t count = 0;
	char why[128];

	while (!r->spsc || count < r->n) {
		void *entry = ring_get(r);

		if (entry == RING_END)
			break;
		if (!check_index(r->seen, r->n, r->spsc, count,
				 (size_t)(uintptr_t)entry, why, sizeof(why)))
			die("ck %s: %s", r->spsc ? "spsc" : "mpmc", why);
		count++;
	}
	t->count = count;
	return NULL;
}

static void start_thread(struct ring_thread *t, void *(*fn)(void *))
{
	int rc = pthread_create(&t->tid, NULL, fn, t);

	if (rc != 0)
		die("pthread_create: %s", strerror(rc));
}

/* One timed ring run: r->p producer threads, r->c consumers, the first of
 * them this thread. */
static uint64_t ring_once(struct ring_run *r)
{
	struct ring_thread *th = calloc(r->p + r->c, sizeof(*th));
	size_t taken = 0;
	uint64_t t0, t;

	if (th == NULL)
		die("out of memory for %u threads", r->p + r->c);
	ck_ring_init(&r->ring, RING_SIZE);
	atomic_init(&r->producers_left, r->p);
	memset(r->seen, 0, r->n);
	for (unsigned i = 0; i < r->p + r->c; i++)
		th[i] = (struct ring_thread){ .run = r, .k = i };
	t0 = now_ns();
	for (unsigned i = 0; i < r->p; i++)
		start_thread(&th[i], producer);
	for (unsigned i = 1; i < r->c; i++)
		start_thread(&th[r->p + i], consumer);
	consumer(&th[r->p]);
	for (unsigned i = 0; i < r->p + r->c; i++)
		if (i != r->p)
			pthread_join(th[i].tid, NULL);
	t = now_ns() - t0;
	for (unsigned i = 0; i < r->c; i++)
		taken += th[r->p + i].count;
	free(th);
	/* No index twice and each below n (check_index): n of them are all. */
	if (taken != r->n)
		die("ck %s: %zu of %zu indices taken", r->spsc ? "spsc" : "mpmc",
		    taken, r->n);
	return t;
}

static uint64_t run_ring(const struct row *row, size_t n, unsigned char *seen)
{
	struct ring_run *r = aligned_alloc(alignof(struct ring_run),
					   sizeof(struct ring_run));
	uint64_t t;

	if (r == NULL)
		die("out of memory for a ring");
	r->n = n;
	r->p = row->p;
	r->c = row->c;
	r->spsc = row->kind == CK_SPSC;
	r->seen = seen;
	t = ring_once(r);
	free(r);
	return t;
}

/* ---- eachobs ------------------------------------------------------- */

static size_t noop_numobs(void *ctx)
{
	return *(const size_t *)ctx;
}

static int noop_getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	(void)idx;
	(void)obs;
	return 0;
}

static void check(unsigned char *seen, size_t n, bool ordered, size_t pos,
		  size_t idx, const void *obs)
{
	char why[128];

	if (!check_index(seen, n, ordered, pos, idx, why, sizeof(why)))
		die("eachobs: %s", why);
	if (obs == NULL)
		die("eachobs: index %zu yielded with a NULL slot", idx);
}

/* Drain it one item at a time; returns the items yielded. */
static size_t drain_items(eachobs_iter *it, size_t n, bool ordered,
			  unsigned char *seen)
{
	const void *obs;
	size_t idx = SIZE_MAX, count = 0;
	int rc;

	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		check(seen, n, ordered, count++, idx, obs);
	if (rc < 0)
		die("eachobs_next (index %zu): %s", idx, eachobs_strerror(rc));
	return count;
}

/* The same a batch at a time. */
static size_t drain_batches(eachobs_iter *it, size_t n, bool ordered,
			    unsigned char *seen)
{
	eachobs_batch b;
	size_t count = 0;
	int rc;

	while ((rc = eachobs_next_batch(it, &b)) == 1)
		for (size_t j = 0; j < b.count; j++)
			check(seen, n, ordered, count++, b.idx[j], b.data);
	if (rc < 0)
		die("eachobs_next_batch: %s", eachobs_strerror(rc));
	return count;
}

static uint64_t run_eachobs(const struct row *row, size_t n,
			    unsigned char *seen)
{
	const eachobs_dataset data = { .ctx = &n,
				       .numobs = noop_numobs,
				       .getobs = noop_getobs,
				       .obs_size = 8 };
	const eachobs_options opts = { .nthreads = row->p,
				       .executor = row->ex,
				       .ordered = row->ordered,
				       .batchsize = row->batch };
	eachobs_iter *it;
	size_t got;
	uint64_t t0, t;
	int rc;

	memset(seen, 0, n);
	t0 = now_ns();
	rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0)
		die("eachobs_parallel (P=%u, %s): %s", row->p,
		    executor_name(row->ex), eachobs_strerror(rc));
	got = row->batch ? drain_batches(it, n, row->ordered, seen)
			 : drain_items(it, n, row->ordered, seen);
	eachobs_close(it);
	t = now_ns() - t0;
	if (got != n)
		die("eachobs: %zu of %zu observations yielded", got, n);
	return t;
}

/* ---- the table ----------------------------------------------------- */

static uint64_t run_row(const struct row *row, size_t n, unsigned char *seen)
{
	return row->kind == EACHOBS ? run_eachobs(row, n, seen)
				    : run_ring(row, n, seen);
}

/* "ck spsc", "eachobs threaded", ... */
static const char *row_name(const struct row *r)
{
	switch (r->kind) {
	case CK_SPSC: return "ck spsc";
	case CK_MPMC: return "ck mpmc";
	case EACHOBS: break;
	}
	return r->ex == EACHOBS_THREADED ? "eachobs threaded"
					 : "eachobs background";
}

static const char *row_ordered(const struct row *r)
{
	if (r->kind == CK_SPSC)
		return "yes"; /* one producer: FIFO is the order */
	if (r->kind == CK_MPMC)
		return "no";
	return r->ordered ? "yes" : "no";
}

/* Every row, in the table's order: ck spsc, then for each P the mpmc
 * rings and eachobs's. Returns how many; *rows is the caller's to free. */
static size_t make_rows(const struct options *o, struct row **rows)
{
	static const struct {
		eachobs_executor ex;
		bool ordered;
		size_t batch;
	} lib[] = {
		{ EACHOBS_THREADED, false, 0 },	  { EACHOBS_BACKGROUND, false, 0 },
		{ EACHOBS_BACKGROUND, true, 0 },  { EACHOBS_THREADED, true, 0 },
		{ EACHOBS_THREADED, false, BATCH },
	};
	size_t nlib = sizeof(lib) / sizeof(lib[0]), k = 0;
	size_t cap = 1 + o->args.nthread_counts * (o->nconsumer_counts + nlib);
	struct row *r = calloc(cap, sizeof(*r));

	if (r == NULL)
		die("out of memory for %zu rows", cap);
	r[k++] = (struct row){ .kind = CK_SPSC, .p = 1, .c = 1 };
	for (size_t i = 0; i < o->args.nthread_counts; i++) {
		unsigned p = o->args.threads[i];

		for (size_t j = 0; j < o->nconsumer_counts; j++)
			r[k++] = (struct row){ .kind = CK_MPMC,
					       .p = p,
					       .c = o->consumers[j] };
		for (size_t j = 0; j < nlib; j++)
			r[k++] = (struct row){ .kind = EACHOBS,
					       .ex = lib[j].ex,
					       .ordered = lib[j].ordered,
					       .batch = lib[j].batch,
					       .p = p,
					       .c = 1 };
	}
	*rows = r;
	return k;
}

/* The first "model name" of /proc/cpuinfo into buf; "unknown" without. */
static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		colon += strspn(colon + 1, " \t") + 1;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

static void print_header(const struct options *o)
{
	char model[128], load[64] = "?";
	FILE *f = fopen("/proc/loadavg", "r");
	cpu_set_t set;
	int usable = -1;

	cpu_model(model, sizeof(model));
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		usable = CPU_COUNT(&set);
	if (f) {
		if (fgets(load, sizeof(load), f))
			load[strcspn(load, " ")] = '\0';
		fclose(f);
	}
	printf("# ring: the machine's hand-off limit (ck_ring, %u entries, "
	       "pointers passed, busy polling) beside eachobs's no-op cost "
	       "per item (obs_size 8), one run\n",
	       RING_SIZE);
	printf("# CPU: %s; %ld online CPUs, %d usable; load average %s at "
	       "the start\n",
	       model, sysconf(_SC_NPROCESSORS_ONLN), usable, load);
	printf("# n = %zu, median of %u interleaved rounds after one at "
	       "n / 10; start to join or close, every index checked; "
	       "x_spsc: ns/item over ck spsc's; x_round: the median of that "
	       "ratio within each round%s\n",
	       o->n, o->args.reps, o->args.quick ? "; quick mode" : "");
	printf("%-20s %-3s %5s %4s %3s %10s %10s %10s %9s %7s %7s\n", "row",
	       "ord", "batch", "P", "C", "n", "ns/item", "best_ns", "Mitem/s",
	       "x_spsc", "x_round");
}

/* The median over repetitions of r's time over base's in the same one. */
static double round_ratio(const struct row *r, const struct row *base,
			  unsigned reps)
{
	double ratio[BENCH_MAX_REPS];

	for (unsigned k = 0; k < reps; k++)
		ratio[k] = (double)r->wall[k] / (double)base->wall[k];
	return median_double(ratio, reps);
}

static void emit(FILE *csv, struct row *r, size_t n, unsigned reps,
		 double spsc_ns)
{
	/* Sorts wall: wall[0] is then the best. */
	uint64_t med = median_u64(r->wall, reps);
	double ns = (double)med / (double)n;
	double best = (double)r->wall[0] / (double)n;
	double rate = 1e3 / ns;
	unsigned batch = r->kind == EACHOBS && r->batch ? (unsigned)r->batch
							 : 1;

	printf("%-20s %-3s %5u %4u %3u %10zu %10.2f %10.2f %9.2f %7.2f "
	       "%7.2f\n",
	       row_name(r), row_ordered(r), batch, r->p, r->c, n, ns, best,
	       rate, ns / spsc_ns, r->x_round);
	if (csv)
		fprintf(csv, "%s,%s,%u,%u,%u,%zu,%u,%.4f,%.4f,%.4f,%.4f,%.4f\n",
			row_name(r), row_ordered(r), batch, r->p, r->c, n, reps,
			ns, best, rate, ns / spsc_ns, r->x_round);
}

int main(int argc, char **argv)
{
	struct options o;
	struct row *rows;
	unsigned char *seen;
	size_t nrows, warm;
	FILE *csv;
	double spsc_ns;
	uint64_t t0;

	bench_set_name("ring", argv[0], usage);
	t0 = now_ns();
	parse_args(argc, argv, &o);
	csv = open_csv(o.args.csv_path,
		       "row,ordered,batch,producers,consumers,n,reps,"
		       "ns_per_item,best_ns_per_item,mitems_per_s,x_spsc,"
		       "x_round\n");
	nrows = make_rows(&o, &rows);
	seen = malloc(o.n);
	if (seen == NULL)
		die("out of memory for %zu seen flags", o.n);
	print_header(&o);
	fflush(stdout);
	/* A round at n / 10 first: thread stacks, the seen array and the
	 * library's code are then resident for every timed round alike. */
	warm = o.n / 10 ? o.n / 10 : 1;
	for (size_t i = 0; i < nrows; i++) {
		show_progress("warm-up: %s P=%u", row_name(&rows[i]), rows[i].p);
		run_row(&rows[i], warm, seen);
	}
	for (unsigned rep = 0; rep < o.args.reps; rep++)
		for (size_t i = 0; i < nrows; i++) {
			show_progress("rep %u/%u: %s P=%u", rep + 1, o.args.reps,
				      row_name(&rows[i]), rows[i].p);
			rows[i].wall[rep] = run_row(&rows[i], o.n, seen);
		}
	clear_progress();
	/* Before emit, which sorts each row's times. */
	for (size_t i = 0; i < nrows; i++)
		rows[i].x_round = round_ratio(&rows[i], &rows[0], o.args.reps);
	spsc_ns = (double)median_u64(rows[0].wall, o.args.reps) /
		  (double)o.n;
	for (size_t i = 0; i < nrows; i++)
		emit(csv, &rows[i], o.n, o.args.reps, spsc_ns);
	printf("# total runtime %.1f s\n", (double)(now_ns() - t0) / 1e9);
	free(seen);
	free(rows);
	close_outputs(csv, o.args.csv_path);
	return 0;
}
