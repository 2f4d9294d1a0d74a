/*
 * A busy consumer beside the loader: does loading slow the training
 * thread's own work? (docs/performance.md, "A busy consumer beside the
 * loader".)
 *
 * The consumer does a fixed amount of CPU work per observation (a hash
 * loop calibrated to --work-us when alone). Its rate alone is that work
 * with no loader at all; beside the loader it is the same work, for the
 * same number of observations, through eachobs_next. The ratio alone /
 * with (wall) is its work rate relative to running alone; 1.00 means the
 * loader cost it nothing.
 *
 * Cases:
 *   sleep P=16    getobs sleeps 100 us (TimeDataset-like): the loader
 *                 keeps up using little CPU; the cost is wake-ups.
 *   cpu P=1       getobs burns --getobs-us of CPU on one worker: the
 *                 second core is the loader's.
 *   cpu P=2       two CPU-bound workers and the consumer on 2 cores: the
 *                 loader competes for the consumer's core...
 *   cpu P=2 nice  ...unless worker_nice = 19 lets the consumer win it.
 *   noop-ordered P=16
 *                 getobs does nothing, in order: sixteen workers are far
 *                 ahead of the consumer, and wait for room in the reorder
 *                 window while it works; what their waiting costs it.
 * Each for BACKGROUND and THREADED (whose consumer loads only when it
 * would otherwise wait).
 *
 * Usage: busy [--n N] [--work-us W] [--getobs-us G] [--reps R]
 *             [--csv FILE] [--quick]
 */
#define _GNU_SOURCE

#include "util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct busy_opts {
	struct bench_args args;
	size_t n;
	unsigned work_us, getobs_us;
};

struct dataset {
	size_t n;
	uint64_t sleep_ns;   /* getobs sleeps this, or */
	uint64_t burn_iters; /* burns this many hash rounds */
};

enum getobs_kind { SLEEPS, BURNS, NOTHING };

struct kase {
	const char *name;
	unsigned p;
	enum getobs_kind getobs;
	int nice;
	bool ordered;
};

static volatile uint64_t sink;

static uint64_t burn(uint64_t iters, uint64_t x)
{
	for (uint64_t i = 0; i < iters; i++)
		x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull + i;
	return x;
}

/* Hash rounds that take about us microseconds on this thread. */
static uint64_t calibrate(unsigned us)
{
	uint64_t iters = 1000, t;

	for (;;) {
		uint64_t t0 = now_ns();
		sink = burn(iters, t0);
		t = now_ns() - t0;
		if (t > 20000000)
			break;
		iters *= 2;
	}
	return (uint64_t)((double)iters * us * 1000.0 / (double)t);
}

static size_t ds_numobs(void *ctx)
{
	return ((const struct dataset *)ctx)->n;
}

static int ds_getobs(void *ctx, size_t idx, void *obs)
{
	const struct dataset *d = ctx;

	if (d->sleep_ns)
		sleep_ns(d->sleep_ns);
	else
		sink = burn(d->burn_iters, idx);
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

static uint64_t run_alone(size_t n, uint64_t work)
{
	uint64_t t0 = now_ns(), x = 0;

	for (size_t i = 0; i < n; i++)
		x = burn(work, x + i);
	sink = x;
	return now_ns() - t0;
}

static uint64_t run_with(struct dataset *d, uint64_t work,
			 const struct kase *c, eachobs_executor ex,
			 double *wait_share)
{
	const eachobs_dataset data = { d, ds_numobs, ds_getobs,
				       sizeof(size_t) };
	const eachobs_options o = { .nthreads = c->p, .executor = ex,
				    .worker_nice = c->nice,
				    .ordered = c->ordered };
	eachobs_iter *it;
	eachobs_stats st;
	const void *obs;
	size_t idx, got = 0;
	uint64_t t0 = now_ns(), x = 0, t;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		size_t v;
		memcpy(&v, obs, sizeof(v));
		if (v != idx)
			die("index %zu yielded with slot holding %zu", idx, v);
		x = burn(work, x + idx);
		got++;
	}
	t = now_ns() - t0;
	eachobs_get_stats(it, &st);
	eachobs_close(it);
	if (rc < 0 || got != d->n)
		die("got %zu of %zu (%s)", got, d->n, eachobs_strerror(rc));
	sink = x;
	*wait_share = (double)st.consumer_wait_ns / (double)t;
	return t;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--n N] [--work-us W] [--getobs-us G] [--reps R]\n"
		"          [--csv FILE] [--quick] [--help]\n\n"
		"A consumer doing W us of CPU work per observation (default\n"
		"50), alone and beside the loader; getobs sleeps 100 us (P =\n"
		"16) or burns G us of CPU (default 20; P = 1, 2, and 2 with\n"
		"worker_nice 19), or does nothing, in order (P = 16). Prints\n"
		"the consumer's work rate beside the loader over its rate\n"
		"alone (1.00: the loader cost it nothing, 0.98: it took 2%%),\n"
		"median of R runs (default 5) interleaved with the alone runs.\n",
		prog);
}

static void own_option(int ch, const char *arg, void *ctx)
{
	struct busy_opts *o = ctx;

	if (ch == 'n')
		o->n = parse_option("--n", arg, 1, 100000000);
	else if (ch == 'w')
		o->work_us = (unsigned)parse_option("--work-us", arg, 1,
						    1000000);
	else if (ch == 'g')
		o->getobs_us = (unsigned)parse_option("--getobs-us", arg, 1,
						      1000000);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "n", required_argument, NULL, 'n' },
		{ "work-us", required_argument, NULL, 'w' },
		{ "getobs-us", required_argument, NULL, 'g' },
		{ 0, 0, 0, 0 },
	};
	static const struct kase kases[] = {
		{ "sleep100us", 16, SLEEPS, 0, false },
		{ "sleep-nice19", 16, SLEEPS, 19, false },
		{ "cpu", 1, BURNS, 0, false },
		{ "cpu", 2, BURNS, 0, false },
		{ "cpu-nice19", 2, BURNS, 19, false },
		{ "noop-ordered", 16, NOTHING, 0, true },
	};
	static const eachobs_executor exs[] = { EACHOBS_BACKGROUND,
						EACHOBS_THREADED };
	struct busy_opts o = { .n = 4000, .work_us = 50, .getobs_us = 20 };
	double ratio[BENCH_MAX_REPS], wait[BENCH_MAX_REPS];

	bench_set_name("busy", argv[0], usage);
	o.args.reps = 5;
	bench_parse_args(argc, argv, &o.args, own, own_option, &o);
	if (o.args.quick) {
		o.n /= 20;
		if (!o.args.reps_set)
			o.args.reps = 1;
	}
	FILE *csv = open_csv(o.args.csv_path,
			     "case,executor,P,nice,n,work_us,reps,"
			     "rate_vs_alone,wait_share\n");
	show_progress("calibrating the work loops");
	uint64_t work = calibrate(o.work_us);
	uint64_t gburn = calibrate(o.getobs_us);
	clear_progress();

	printf("# busy consumer: %u us of work per item, n = %zu, median of "
	       "%u; 2 CPUs here\n",
	       o.work_us, o.n, o.args.reps);
	printf("%-12s %-10s %3s %4s %13s %8s\n", "case", "executor", "P",
	       "nice", "rate_vs_alone", "wait");
	for (size_t k = 0; k < sizeof(kases) / sizeof(kases[0]); k++) {
		const struct kase *c = &kases[k];
		struct dataset d = { .n = o.n,
				     .sleep_ns = c->getobs == SLEEPS ? 100000
								     : 0,
				     .burn_iters = c->getobs == BURNS ? gburn
								      : 0 };
		for (size_t e = 0; e < 2; e++) {
			const char *en = executor_name(exs[e]);

			for (unsigned r = 0; r < o.args.reps; r++) {
				show_progress("%s %s P=%u rep %u/%u", c->name,
					      en, c->p, r + 1, o.args.reps);
				/* Alone and beside, back to back, so both see
				 * the same machine. */
				uint64_t alone = run_alone(o.n, work);
				uint64_t with = run_with(&d, work, c, exs[e],
							 &wait[r]);
				ratio[r] = (double)alone / (double)with;
			}
			double m = median_double(ratio, o.args.reps);
			double w = median_double(wait, o.args.reps);
			clear_progress();
			printf("%-12s %-10s %3u %4d %13.3f %7.1f%%\n", c->name,
			       en, c->p, c->nice, m, 100 * w);
			fflush(stdout);
			if (csv)
				fprintf(csv, "%s,%s,%u,%d,%zu,%u,%u,%.4f,%.4f\n",
					c->name, en, c->p, c->nice, o.n,
					o.work_us, o.args.reps, m, w);
		}
	}
	close_outputs(csv, o.args.csv_path);
	return 0;
}
