/*
 * autotune: how close eachobs_options.autotune comes to the best setting
 * a grid search over nthreads x buffersize finds, workload by workload.
 *
 *   A  getobs computes 1 ms          D  95 % wait 100 us, 5 % wait 20 ms
 *   B  getobs waits 5 ms             E  the consumer computes 1 ms per
 *   C  getobs computes 10 us            item, getobs waits 0.5 ms
 *                                    F  batches of 64 of B
 *
 * "Computes" is a fixed amount of arithmetic, calibrated at start to take
 * that long on one thread alone; "waits" sleeps. Each grid point runs for
 * --window seconds (the items it yielded in that time, start included,
 * over the time), each autotuned run a whole epoch of as many items as
 * the grid's best setting yields in --epoch seconds, so autotune's ramp-up
 * counts against it; the default (nthreads 0, buffersize 0, no autotune)
 * runs the same window as the grid. Every figure is the median of --reps
 * rounds, all in this one process; each round runs every point once, so
 * that a machine whose speed drifts moves them all alike.
 *
 * Per workload it prints the best grid throughput and its setting, the
 * fewest threads within 98 % of it, the default's throughput, autotune's,
 * the threads it let load at the end and at most, its buffer and its
 * reason, and autotune / best.
 *
 * Usage: autotune [--workloads LIST] [--executor E] [--epoch S]
 *                 [--window S] [--reps R] [--quick] [--csv FILE]
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NWORKLOADS 6
static const unsigned grid_threads[] = { 1, 2, 4, 8, 16, 32, 64 };
static const size_t grid_buffers[] = { 2, 8, 32, 128 };
#define NT (sizeof(grid_threads) / sizeof(grid_threads[0]))
#define NB (sizeof(grid_buffers) / sizeof(grid_buffers[0]))

struct workload {
	const char *name, *what;
	uint64_t compute_ns; /* getobs computes this long */
	uint64_t wait_ns;    /* or waits this long */
	uint64_t tail_ns;    /* 1 in 20 waits this long instead */
	uint64_t consume_ns; /* the consumer computes this long per item */
	size_t batchsize;
};

static const struct workload workloads[NWORKLOADS] = {
	{ "A", "getobs computes 1 ms", 1000000, 0, 0, 0, 0 },
	{ "B", "getobs waits 5 ms", 0, 5000000, 0, 0, 0 },
	{ "C", "getobs computes 10 us", 10000, 0, 0, 0, 0 },
	{ "D", "95% wait 100 us, 5% wait 20 ms", 0, 100000, 20000000, 0, 0 },
	{ "E", "consumer computes 1 ms, getobs waits 0.5 ms", 0, 500000, 0,
	  1000000, 0 },
	{ "F", "batches of 64, getobs waits 5 ms", 0, 5000000, 0, 0, 64 },
};

struct options {
	struct bench_args args;
	bool use[NWORKLOADS];
	eachobs_executor executor;
	double epoch_s, window_s;
};

/* Arithmetic iterations per microsecond on one thread (calibrated). */
static double iters_per_us;

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--workloads LIST] [--executor E] [--epoch S]\n"
		"          [--window S] [--reps R] [--quick] [--csv FILE]\n"
		"\n"
		"Autotune beside a grid search over nthreads {1,2,4,...,64} x\n"
		"buffersize {2,8,32,128}, per workload:\n"
		"  A getobs computes 1 ms     D 95%% wait 100 us, 5%% wait 20 ms\n"
		"  B getobs waits 5 ms        E consumer computes 1 ms per item,\n"
		"  C getobs computes 10 us      getobs waits 0.5 ms\n"
		"                             F batches of 64 of B\n"
		"Each grid point and the default (no autotune) run for the window;\n"
		"autotune runs a whole epoch of what the best point yields in S\n"
		"seconds, its ramp-up included. Medians of R runs.\n"
		"\n"
		"  --workloads LIST  letters, comma-separated (default all)\n"
		"  --executor E      threaded or background (default background)\n"
		"  --epoch S         autotune's epoch in seconds of the best\n"
		"                    rate (default 2)\n"
		"  --window S        seconds per grid point (default 0.5)\n"
		"  --reps R          runs per figure, median (default 3)\n"
		"  --quick           smoke mode: epoch 1, window 0.2, one run\n"
		"  --csv FILE        also write the results as CSV to FILE\n"
		"  --help            print this and exit\n",
		prog);
}

static double parse_seconds(const char *name, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	if (*arg == '\0' || *end != '\0' || !(v >= 0.05 && v <= 600))
		bad_usage("%s: '%s' is not a number of seconds in "
			  "[0.05, 600]", name, arg);
	return v;
}

static void parse_own(int ch, const char *arg, void *ctx)
{
	struct options *o = ctx;
	static const char *const names[NWORKLOADS] = { "A", "B", "C",
						       "D", "E", "F" };

	switch (ch) {
	case 'w':
		parse_name_list("--workloads", arg, names, sizeof(names[0]),
				NWORKLOADS, o->use);
		break;
	case 'x':
		if (strcmp(arg, "threaded") == 0)
			o->executor = EACHOBS_THREADED;
		else if (strcmp(arg, "background") == 0)
			o->executor = EACHOBS_BACKGROUND;
		else
			bad_usage("--executor: '%s' is not threaded or "
				  "background", arg);
		break;
	case 'e':
		o->epoch_s = parse_seconds("--epoch", arg);
		break;
	default: /* 'W' */
		o->window_s = parse_seconds("--window", arg);
		break;
	}
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option own[] = {
		{ "workloads", required_argument, NULL, 'w' },
		{ "executor", required_argument, NULL, 'x' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "window", required_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	bool any = false;

	*o = (struct options){ .args = { .reps = 3 },
			       .executor = EACHOBS_BACKGROUND,
			       .epoch_s = 2,
			       .window_s = 0.5 };
	bench_parse_args(argc, argv, &o->args, own, parse_own, o);
	if (o->args.threads_set)
		bad_usage("--threads: the grid sets the threads");
	for (int w = 0; w < NWORKLOADS; w++)
		any = any || o->use[w];
	for (int w = 0; !any && w < NWORKLOADS; w++)
		o->use[w] = true;
	if (o->args.quick) {
		o->epoch_s = 1;
		o->window_s = 0.2;
		if (!o->args.reps_set)
			o->args.reps = 1;
	}
}

/* ---- the work ------------------------------------------------------ */

static volatile uint64_t sink;

static void compute(uint64_t ns)
{
	uint64_t k = (uint64_t)(iters_per_us * (double)ns / 1000);
	uint64_t x = 0x9E3779B97F4A7C15ull;

	for (uint64_t i = 0; i < k; i++)
		x = x * 6364136223846793005ull + i;
	sink = x;
}

/* Iterations that take 1 us of this thread's CPU: the fastest of a few
 * tries, so that a busy machine does not make every compute shorter. */
static void calibrate(void)
{
	const uint64_t k = 2000000;
	double best = 0;

	iters_per_us = 1000; /* compute(ns) runs k iterations below */
	for (int t = 0; t < 5; t++) {
		uint64_t t0 = now_ns();
		compute(k);
		double us = (double)(now_ns() - t0) / 1000;
		double rate = (double)k / us;
		if (rate > best)
			best = rate;
	}
	iters_per_us = best;
}

struct data {
	const struct workload *w;
	size_t n;
};

static size_t data_numobs(void *ctx)
{
	return ((const struct data *)ctx)->n;
}

static int data_getobs(void *ctx, size_t idx, void *obs)
{
	const struct workload *w = ((const struct data *)ctx)->w;
	uint64_t wait = w->wait_ns;

	(void)obs;
	if (w->tail_ns && eachobs_seed(7, 0, idx) % 20 == 0)
		wait = w->tail_ns;
	if (w->compute_ns)
		compute(w->compute_ns);
	return wait ? sleep_ns(wait) : 0;
}

/* ---- one run --------------------------------------------------------- */

struct result {
	double rate;     /* observations per second */
	eachobs_stats st;
};

/* Consume until the end or for window_ns (0: to the end); observations per
 * second from before the start to after the close. */
static struct result run(const struct workload *w, size_t n,
			 const eachobs_options *opts, uint64_t window_ns)
{
	struct data d = { w, n };
	eachobs_dataset ds = { &d, data_numobs, data_getobs, 8 };
	struct result r = { 0 };
	eachobs_iter *it;
	size_t got = 0;
	uint64_t t0 = now_ns();
	int rc = eachobs_parallel(&it, &ds, opts);

	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_last_error());
	for (;;) {
		if (w->batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			got += rc == 1 ? b.count : 0;
		} else {
			rc = eachobs_next(it, NULL, NULL);
			got += rc == 1;
		}
		if (rc != 1)
			break;
		if (w->consume_ns)
			compute(w->consume_ns * (w->batchsize ? w->batchsize
							       : 1));
		if (window_ns && now_ns() - t0 >= window_ns)
			break;
	}
	if (rc < 0)
		die("eachobs_next: %s", eachobs_last_error());
	eachobs_get_stats(it, &r.st);
	eachobs_close(it);
	r.rate = (double)got * 1e9 / (double)(now_ns() - t0);
	return r;
}

/* Enough observations that no window runs out of them. */
static size_t window_items(const struct workload *w, double window_s)
{
	double per_s = 64e9 / (double)(w->compute_ns + w->wait_ns + 1000);

	return (size_t)(per_s * window_s * 2) + 1000;
}

/* Every run of one workload: rate[rep][point], the grid's NT * NB points,
 * then the default, then autotune. */
#define NPOINTS (NT * NB + 2)
#define DEFAULT_POINT (NT * NB)
#define TUNED_POINT (NT * NB + 1)

struct row {
	double best, dflt, tuned;
	unsigned best_t, fewest_t, tuned_now, tuned_most;
	size_t best_b, tuned_depth;
	unsigned reason;
};

static eachobs_options point_options(const struct options *o,
				     const struct workload *w, size_t p)
{
	eachobs_options opts = { .executor = o->executor,
				 .batchsize = w->batchsize };

	if (p < NT * NB) {
		opts.nthreads = grid_threads[p / NB];
		opts.buffersize = grid_buffers[p % NB];
	}
	opts.autotune = p == TUNED_POINT;
	return opts;
}

/* One round: every point once, autotune last, over an epoch of what the
 * first round's best point yielded in --epoch seconds. */
static void round_of(const struct options *o, const struct workload *w,
		     unsigned rep, double *rates, size_t *epoch,
		     struct row *row)
{
	uint64_t window_ns = (uint64_t)(o->window_s * 1e9);
	size_t n = window_items(w, o->window_s);

	for (size_t p = 0; p < NPOINTS; p++) {
		eachobs_options opts = point_options(o, w, p);
		bool tuned = p == TUNED_POINT;
		if (tuned && *epoch == 0) {
			double best = 0;
			for (size_t q = 0; q < NT * NB; q++)
				best = rates[q] > best ? rates[q] : best;
			*epoch = (size_t)(best * o->epoch_s) + 1;
			if (w->batchsize)
				*epoch = (*epoch / w->batchsize + 1) *
					 w->batchsize;
		}
		show_progress("%s round %u/%u: %s", w->name, rep + 1,
			      o->args.reps,
			      tuned ? "autotune"
			      : p == DEFAULT_POINT ? "default"
						   : "grid");
		struct result r = run(w, tuned ? *epoch : n, &opts,
				      tuned ? 0 : window_ns);
		rates[p] = r.rate;
		if (tuned) {
			row->tuned_now = r.st.nloading;
			row->tuned_most = r.st.max_loading;
			row->tuned_depth = r.st.buffer_depth;
			row->reason = r.st.tune_reason;
		}
	}
}

/* Rounds alternate every point, so that a machine that changes speed
 * over the run moves them all alike; each point's median over rounds. */
static void measure(const struct options *o, const struct workload *w,
		    struct row *row)
{
	static double rates[BENCH_MAX_REPS][NPOINTS];
	double med[NPOINTS], v[BENCH_MAX_REPS], by_t[NT] = { 0 };
	size_t epoch = 0;

	for (unsigned r = 0; r < o->args.reps; r++)
		round_of(o, w, r, rates[r], &epoch, row);
	for (size_t p = 0; p < NPOINTS; p++) {
		for (unsigned r = 0; r < o->args.reps; r++)
			v[r] = rates[r][p];
		med[p] = median_double(v, o->args.reps);
	}
	for (size_t p = 0; p < NT * NB; p++) {
		if (med[p] > by_t[p / NB])
			by_t[p / NB] = med[p];
		if (med[p] > row->best) {
			row->best = med[p];
			row->best_t = grid_threads[p / NB];
			row->best_b = grid_buffers[p % NB];
		}
	}
	for (size_t i = NT; i-- > 0;)
		if (by_t[i] >= 0.98 * row->best)
			row->fewest_t = grid_threads[i];
	row->dflt = med[DEFAULT_POINT];
	row->tuned = med[TUNED_POINT];
}

int main(int argc, char **argv)
{
	struct options o;
	struct row rows[NWORKLOADS] = { { 0 } };

	bench_set_name("autotune", argv[0], usage);
	parse_args(argc, argv, &o);
	calibrate();
	FILE *csv = open_csv(o.args.csv_path,
			     "workload,best_per_s,best_threads,best_buffer,"
			     "fewest_threads_98,default_per_s,autotune_per_s,"
			     "autotune_threads,autotune_most,autotune_buffer,"
			     "reason,autotune_over_best\n");
	printf("autotune: executor %s, epoch %.2g s of the best rate, "
	       "grid window %.2g s, median of %u\n",
	       executor_name(o.executor), o.epoch_s, o.window_s, o.args.reps);
	for (int k = 0; k < NWORKLOADS; k++) {
		if (!o.use[k])
			continue;
		measure(&o, &workloads[k], &rows[k]);
	}
	clear_progress();
	printf("\n%-3s %-44s %10s %7s %6s %10s %10s %11s %7s %7s\n", "", "",
	       "best/s", "(P,buf)", "P98%", "default/s", "autotune/s",
	       "P now/most", "buffer", "/best");
	for (int k = 0; k < NWORKLOADS; k++) {
		const struct row *r = &rows[k];
		if (!o.use[k])
			continue;
		char setting[32], threads[32];
		snprintf(setting, sizeof(setting), "%u,%zu", r->best_t,
			 r->best_b);
		snprintf(threads, sizeof(threads), "%u/%u", r->tuned_now,
			 r->tuned_most);
		printf("%-3s %-44s %10.0f %7s %6u %10.0f %10.0f %11s %7zu "
		       "%7.3f\n",
		       workloads[k].name, workloads[k].what, r->best, setting,
		       r->fewest_t, r->dflt, r->tuned, threads, r->tuned_depth,
		       r->tuned / r->best);
		if (csv)
			fprintf(csv, "%s,%.0f,%u,%zu,%u,%.0f,%.0f,%u,%u,%zu,\"%s\","
				"%.4f\n",
				workloads[k].name, r->best, r->best_t, r->best_b,
				r->fewest_t, r->dflt, r->tuned, r->tuned_now,
				r->tuned_most, r->tuned_depth,
				eachobs_tune_reason_string(r->reason),
				r->tuned / r->best);
	}
	printf("\nautotune's reasons at the end:\n");
	for (int k = 0; k < NWORKLOADS; k++)
		if (o.use[k])
			printf("  %s: %s\n", workloads[k].name,
			       eachobs_tune_reason_string(rows[k].reason));
	close_outputs(csv, o.args.csv_path);
	return 0;
}
