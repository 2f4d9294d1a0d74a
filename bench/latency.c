/*
 * latency: how soon an iteration starts and stops, with a slow getobs.
 *
 * For single observations and batches of 16 and 64 (--batches), with 2
 * and 8 threads (--threads),
 * under THREADED and BACKGROUND, unordered and ordered, getobs sleeping
 * --getobs-ms (50 by default, like a network filesystem or a heavy
 * decode) for n = 4 * batchsize * P observations:
 *
 *   first   eachobs_parallel until the first eachobs_next /
 *           eachobs_next_batch returned. Ideal: ceil(batchsize / P)
 *           getobs durations (one for single observations).
 *   close   how long eachobs_close takes when called --close-at-ms
 *           (120) after the start, the consumer having taken nothing.
 *           Ideal: what is left of the getobs calls in progress, at most
 *           one getobs duration.
 *   intr    from eachobs_interrupt, called by another thread while the
 *           consumer is blocked waiting for its first item, until that
 *           call returned -EINTR (BACKGROUND: the consumer runs no
 *           getobs; THREADED: it may be inside one it runs itself).
 *
 * Each figure is the median of --reps runs, in milliseconds.
 *
 * usage: latency [--reps R] [--threads LIST] [--quick] [--csv FILE]
 *                [--getobs-ms T] [--close-at-ms C] [--batches LIST]
 */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ds {
	size_t n;
	uint64_t t_ns;
};

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->n;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;

	memcpy(obs, &idx, sizeof(idx));
	return sleep_ns(d->t_ns);
}

struct config {
	size_t batchsize; /* 0: single observations */
	unsigned nthreads;
	eachobs_executor executor;
	bool ordered;
};

static eachobs_iter *start(struct ds *d, const struct config *c)
{
	eachobs_dataset data = { d, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = c->nthreads,
			      .executor = c->executor,
			      .ordered = c->ordered,
			      .batchsize = c->batchsize };
	eachobs_iter *it;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	return it;
}

static int next_item(eachobs_iter *it, const struct config *c)
{
	if (c->batchsize) {
		eachobs_batch b;
		return eachobs_next_batch(it, &b);
	}
	return eachobs_next(it, NULL, NULL);
}

static uint64_t first_ns(struct ds *d, const struct config *c)
{
	uint64_t t0 = now_ns();
	eachobs_iter *it = start(d, c);
	int rc = next_item(it, c);
	uint64_t t = now_ns() - t0;

	if (rc != 1)
		die("first item: %s", eachobs_strerror(rc));
	eachobs_close(it);
	return t;
}

static uint64_t close_ns(struct ds *d, const struct config *c,
			 uint64_t close_at_ns)
{
	uint64_t t0 = now_ns();
	eachobs_iter *it = start(d, c);

	sleep_ns(close_at_ns - (now_ns() - t0));
	uint64_t t1 = now_ns();
	eachobs_close(it);
	return now_ns() - t1;
}

struct interrupter {
	eachobs_iter *it;
	uint64_t delay_ns;
	uint64_t sent_ns;
};

static void *interrupt_later(void *arg)
{
	struct interrupter *x = arg;

	sleep_ns(x->delay_ns);
	x->sent_ns = now_ns();
	eachobs_interrupt(x->it);
	return NULL;
}

/* The consumer blocks on its first item; another thread interrupts it a
 * third of a getobs duration in, while every loader is inside getobs. */
static uint64_t interrupt_ns(struct ds *d, const struct config *c)
{
	struct interrupter x = { start(d, c), d->t_ns / 3, 0 };
	pthread_t t;

	if (pthread_create(&t, NULL, interrupt_later, &x) != 0)
		die("pthread_create failed");
	int rc = next_item(x.it, c);
	uint64_t got = now_ns();
	pthread_join(t, NULL);
	eachobs_close(x.it);
	if (rc != -EINTR)
		die("interrupted call returned %d, not -EINTR", rc);
	return got - x.sent_ns;
}

static double median_ms(uint64_t *v, unsigned n)
{
	return (double)median_u64(v, n) / 1e6;
}

static uint64_t getobs_ms = 50, close_at_ms = 120;
#define MAX_SIZES 8
static size_t sizes[MAX_SIZES] = { 0, 16, 64 };
static size_t nsizes = 3;

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--quick] [--csv FILE]\n"
		"          [--getobs-ms T] [--close-at-ms C] [--batches LIST]\n\n"
		"How soon an iteration starts and stops with a slow getobs:\n"
		"time to the first item, eachobs_close called C ms after the\n"
		"start, and eachobs_interrupt of a blocked consumer, for single\n"
		"observations and batches of 16 and 64, THREADED and BACKGROUND,\n"
		"unordered and ordered. getobs sleeps T ms (default 50); C is\n"
		"120 by default. --batches: batch sizes, 0 for single\n"
		"observations (default 0,16,64). Default: 3 reps, threads 2,8.\n"
		"--quick: batches of 16 only, 1 rep, 10 ms getobs.\n",
		prog);
}

enum { OPT_GETOBS = 1000, OPT_CLOSE_AT, OPT_BATCHES };

/* A comma-separated list of batch sizes, each 0 .. 65536. */
static void parse_sizes(const char *arg)
{
	unsigned v[MAX_SIZES];

	nsizes = parse_list("--batches", arg, 0, 65536, v, MAX_SIZES);
	for (size_t i = 0; i < nsizes; i++)
		sizes[i] = v[i];
}

static void own_option(int ch, const char *arg, void *ctx)
{
	(void)ctx;
	if (ch == OPT_GETOBS)
		getobs_ms = parse_option("--getobs-ms", arg, 1, 10000);
	else if (ch == OPT_CLOSE_AT)
		close_at_ms = parse_option("--close-at-ms", arg, 0, 100000);
	else if (ch == OPT_BATCHES)
		parse_sizes(arg);
}

static void measure(struct ds *d, const struct config *c, unsigned reps,
		    FILE *csv)
{
	uint64_t f[BENCH_MAX_REPS], cl[BENCH_MAX_REPS], in[BENCH_MAX_REPS];

	for (unsigned r = 0; r < reps; r++) {
		f[r] = first_ns(d, c);
		cl[r] = close_ns(d, c, close_at_ms * 1000000);
		in[r] = interrupt_ns(d, c);
	}
	size_t bs = c->batchsize ? c->batchsize : 1;
	double ideal = (double)((bs + c->nthreads - 1) / c->nthreads) *
		       (double)getobs_ms;
	double mf = median_ms(f, reps), mc = median_ms(cl, reps),
	       mi = median_ms(in, reps);
	char batch[24] = "single";

	if (c->batchsize)
		snprintf(batch, sizeof(batch), "%zu", c->batchsize);
	printf("%-7s %3u %-10s %-7s %9.1f %9.1f %9.1f %9.2f\n", batch,
	       c->nthreads, executor_name(c->executor),
	       c->ordered ? "ordered" : "-", ideal, mf, mc, mi);
	if (csv)
		fprintf(csv, "%zu,%u,%s,%d,%llu,%.1f,%.3f,%.3f,%.3f\n",
			c->batchsize, c->nthreads, executor_name(c->executor),
			c->ordered,
			(unsigned long long)getobs_ms, ideal, mf, mc, mi);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "getobs-ms", required_argument, NULL, OPT_GETOBS },
		{ "close-at-ms", required_argument, NULL, OPT_CLOSE_AT },
		{ "batches", required_argument, NULL, OPT_BATCHES },
		{ 0 },
	};
	struct bench_args a = { .reps = 3, .threads = { 2, 8 },
				.nthread_counts = 2 };

	bench_set_name("latency", argv[0], usage);
	bench_parse_args(argc, argv, &a, own, own_option, NULL);
	if (a.quick) {
		a.reps = a.reps_set ? a.reps : 1;
		getobs_ms = 10;
	}
	FILE *csv = open_csv(a.csv_path, "batchsize,nthreads,executor,ordered,"
					 "getobs_ms,ideal_first_ms,first_ms,"
					 "close_ms,interrupt_ms\n");
	printf("# latency: getobs %llu ms, close %llu ms after the start, "
	       "median of %u; milliseconds\n",
	       (unsigned long long)getobs_ms, (unsigned long long)close_at_ms,
	       a.reps);
	printf("%-7s %3s %-10s %-7s %9s %9s %9s %9s\n", "batch", "P",
	       "executor", "order", "ideal", "first", "close", "intr");
	if (a.quick) {
		sizes[0] = 16;
		nsizes = 1;
	}
	for (size_t s = 0; s < nsizes; s++) {
		for (size_t t = 0; t < a.nthread_counts; t++)
			for (int e = 0; e < 2; e++)
				for (int o = 0; o < 2; o++) {
					struct config c = { sizes[s],
							    a.threads[t],
							    (eachobs_executor)e,
							    o };
					size_t bs = sizes[s] ? sizes[s] : 1;
					struct ds d = { 4 * bs * a.threads[t],
							getobs_ms * 1000000 };
					measure(&d, &c, a.reps, csv);
				}
	}
	close_outputs(csv, a.csv_path);
	return 0;
}
