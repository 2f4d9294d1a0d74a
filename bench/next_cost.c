/*
 * What the consumer's call costs with a getobs that does nothing: one
 * iterator of n observations per repetition, drained a call at a time
 * (eachobs_next, or eachobs_next_batch with --batch), every index checked;
 * the median ns per observation from eachobs_parallel to eachobs_close.
 *
 * On a shared machine the time moves by tens of percent from one run to
 * the next; an instruction count does not. Under callgrind,
 *   valgrind --tool=callgrind --toggle-collect=eachobs_next \
 *       ./build-release/bench/next_cost --n 200000 --reps 3
 * counts only what runs inside eachobs_next (eachobs_next_batch with
 * --batch), so its total over n x reps is the consumer's instructions per
 * observation (docs/performance.md, "Where the time goes with a cheap
 * getobs"). The THREADED consumer also loads when nothing is ready, and
 * how often depends on the schedule: count BACKGROUND.
 *
 * Usage: next_cost [--n N] [--threads LIST] [--executor E] [--ordered]
 *                  [--batch B] [--reps R] [--quick] [--csv FILE]
 */
#define _GNU_SOURCE

#include "util.h"

#include <stdlib.h>
#include <string.h>

struct opts {
	struct bench_args args;
	size_t n;
	eachobs_executor executor;
	bool ordered;
	size_t batch;
};

static size_t noop_numobs(void *ctx)
{
	return *(const size_t *)ctx;
}

static int noop_getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

static void check(unsigned char *seen, size_t n, bool ordered, size_t pos,
		  size_t idx, const void *obs)
{
	char why[128];
	size_t held;

	if (!check_index(seen, n, ordered, pos, idx, why, sizeof(why)))
		die("%s", why);
	memcpy(&held, obs, sizeof(held));
	if (held != idx)
		die("index %zu yielded with %zu in its slot", idx, held);
}

/* Drain it a call at a time; every index once (in order when ordered).
 * One observation a call is the checking consumer the benchmarks share
 * (consume); batches are checked entry by entry the same way. */
static void drain(eachobs_iter *it, const struct opts *o, size_t n,
		  unsigned char *seen)
{
	size_t pos = 0;
	eachobs_batch b;
	int rc;

	if (o->batch == 0) {
		consume(it, n, o->ordered, seen);
		return;
	}
	while ((rc = eachobs_next_batch(it, &b)) == 1)
		for (size_t j = 0; j < b.count; j++)
			check(seen, n, o->ordered, pos++, b.idx[j],
			      (const unsigned char *)b.data +
				      j * sizeof(size_t));
	if (rc < 0)
		die("eachobs_next_batch: %s", eachobs_strerror(rc));
	if (pos != n)
		die("%zu of %zu observations yielded", pos, n);
}

/* One repetition: ns from start to close. */
static uint64_t run(const struct opts *o, unsigned p, size_t n,
		    unsigned char *seen)
{
	const eachobs_dataset data = { &n, noop_numobs, noop_getobs,
				       sizeof(size_t) };
	const eachobs_options eo = { .nthreads = p,
				     .executor = o->executor,
				     .ordered = o->ordered,
				     .batchsize = o->batch };
	eachobs_iter *it;

	memset(seen, 0, n);
	uint64_t t0 = now_ns();
	int rc = eachobs_parallel(&it, &data, &eo);
	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	drain(it, o, n, seen);
	eachobs_close(it);
	return now_ns() - t0;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--n N] [--threads LIST] [--executor E] [--ordered]\n"
		"          [--batch B] [--reps R] [--quick] [--csv FILE] [--help]\n\n"
		"What eachobs's consumer pays per observation with a getobs\n"
		"that does nothing (obs_size 8): one iterator of N observations\n"
		"(default 2000000) per repetition at each P of LIST (default 2),\n"
		"drained one eachobs_next (or, with --batch B, one\n"
		"eachobs_next_batch of B) at a time, every index checked;\n"
		"prints the median and best ns per observation over R\n"
		"repetitions (default 5), start to close. E: threaded,\n"
		"background (default) or serial. --quick: N / 10, one\n"
		"repetition unless --reps is given.\n\n"
		"For a count free of the machine's noise, run it under\n"
		"  valgrind --tool=callgrind --toggle-collect=eachobs_next\n"
		"(eachobs_next_batch with --batch): the instructions counted,\n"
		"over N x R, are the consumer's per observation.\n",
		prog);
}

static eachobs_executor parse_executor(const char *arg)
{
	static const eachobs_executor all[] = { EACHOBS_THREADED,
						EACHOBS_BACKGROUND,
						EACHOBS_SERIAL };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(arg, executor_name(all[i])) == 0)
			return all[i];
	bad_usage("--executor: '%s' is not threaded, background or serial",
		  arg);
}

static void own_option(int ch, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	if (ch == 'n')
		o->n = parse_option("--n", arg, 1, 1000000000);
	else if (ch == 'e')
		o->executor = parse_executor(arg);
	else if (ch == 'd')
		o->ordered = true;
	else if (ch == 'b')
		o->batch = parse_option("--batch", arg, 1, 1 << 20);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "n", required_argument, NULL, 'n' },
		{ "executor", required_argument, NULL, 'e' },
		{ "ordered", no_argument, NULL, 'd' },
		{ "batch", required_argument, NULL, 'b' },
		{ 0, 0, 0, 0 },
	};
	struct opts o = { .n = 2000000, .executor = EACHOBS_BACKGROUND };
	uint64_t t[BENCH_MAX_REPS];

	bench_set_name("next_cost", argv[0], usage);
	o.args.reps = 5;
	o.args.threads[0] = 2;
	o.args.nthread_counts = 1;
	bench_parse_args(argc, argv, &o.args, own, own_option, &o);
	if (o.args.quick) {
		o.n = o.n / 10 ? o.n / 10 : 1;
		if (!o.args.reps_set)
			o.args.reps = 1;
	}
	unsigned char *seen = malloc(o.n);
	if (!seen)
		die("out of memory for %zu flags", o.n);
	FILE *csv = open_csv(o.args.csv_path,
			     "executor,ordered,batch,P,n,reps,median_ns,"
			     "best_ns\n");

	printf("# next_cost: the consumer's cost per observation, no-op "
	       "getobs (obs_size 8), start to close, median of %u\n",
	       o.args.reps);
	printf("%-10s %7s %5s %4s %10s %9s %9s\n", "executor", "ordered",
	       "batch", "P", "n", "ns/obs", "best_ns");
	for (size_t k = 0; k < o.args.nthread_counts; k++) {
		unsigned p = o.args.threads[k];

		for (unsigned r = 0; r < o.args.reps; r++)
			t[r] = run(&o, p, o.n, seen);
		uint64_t med = median_u64(t, o.args.reps);
		double per = (double)med / (double)o.n;
		double best = (double)t[0] / (double)o.n;
		printf("%-10s %7s %5zu %4u %10zu %9.2f %9.2f\n",
		       executor_name(o.executor), o.ordered ? "yes" : "no",
		       o.batch, p, o.n, per, best);
		if (csv)
			fprintf(csv, "%s,%d,%zu,%u,%zu,%u,%.3f,%.3f\n",
				executor_name(o.executor), o.ordered, o.batch,
				p, o.n, o.args.reps, per, best);
	}
	free(seen);
	close_outputs(csv, o.args.csv_path);
	return 0;
}
