/*
 * batches: what in-place collation saves over load-then-copy.
 *
 *   inplace  batchsize 64: every getobs writes its observation straight
 *            into its place in the batch buffer; the consumer reads the
 *            batch where it was loaded.
 *   copy     what PyTorch's collate does: single observations, each
 *            loaded into a slot, then copied by the consumer into a
 *            64-observation batch buffer of its own.
 *   single   single observations read in place with eachobs_next, no
 *            batch at all: what one hand-off per observation costs.
 *
 * Every consumer touches one byte per observation (a stand-in for handing
 * it on), so inplace against copy is the copy, and inplace against single
 * is the hand-off per observation. Observation sizes: 64 B, 4 KiB and
 * 602 KiB (224 x 224 x 3 float32) by default, 1 KiB and 64 KiB on request
 * (--cases); getobs fills its observation with memset, as cheap a "load"
 * as any real one can be, which is the case where the copy weighs most. A
 * last row: no-op getobs on 8-byte observations, the library's own cost
 * per observation.
 *
 * usage: batches [--reps R] [--threads LIST] [--cases LIST] [--quick]
 *                [--csv FILE]
 */
#define _GNU_SOURCE
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define BATCH 64

struct ds {
	size_t n, size;
	bool noop;
};

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->n;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;

	if (d->noop)
		memcpy(obs, &idx, sizeof(idx));
	else
		memset(obs, (int)(idx & 0xff), d->size);
	return 0;
}

static unsigned touch(const unsigned char *p, size_t count, size_t size)
{
	unsigned sum = 0;

	for (size_t j = 0; j < count; j++)
		sum += p[j * size];
	return sum;
}

enum variant { INPLACE, COPY, SINGLE };
#define NVARIANTS 3

/* One run; returns wall ns from start to close. */
static uint64_t run(struct ds *d, unsigned nthreads, enum variant v,
		    unsigned *sink)
{
	bool inplace = v == INPLACE;
	eachobs_dataset data = { d, numobs, getobs, d->size };
	eachobs_options o = { .nthreads = nthreads,
			      .batchsize = inplace ? BATCH : 0 };
	unsigned char *mine = v == COPY ? aligned_alloc(64, BATCH * d->size)
					: NULL;
	eachobs_iter *it;
	size_t got = 0, fill = 0;
	int rc;

	if (v == COPY && !mine)
		die("out of memory");
	uint64_t t0 = now_ns();
	if ((rc = eachobs_parallel(&it, &data, &o)) < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	if (inplace) {
		eachobs_batch b;
		while ((rc = eachobs_next_batch(it, &b)) == 1) {
			*sink += touch(b.data, b.count, d->size);
			got += b.count;
		}
	} else if (v == SINGLE) {
		const void *obs;
		while ((rc = eachobs_next(it, &obs, NULL)) == 1) {
			*sink += *(const unsigned char *)obs;
			got++;
		}
	} else {
		const void *obs;
		while ((rc = eachobs_next(it, &obs, NULL)) == 1) {
			memcpy(mine + fill * d->size, obs, d->size);
			got++;
			if (++fill == BATCH || got == d->n) {
				*sink += touch(mine, fill, d->size);
				fill = 0;
			}
		}
	}
	eachobs_close(it);
	uint64_t t = now_ns() - t0;
	if (rc != 0 || got != d->n)
		die("run ended with %d after %zu of %zu", rc, got, d->n);
	free(mine);
	return t;
}

struct kase {
	const char *name;
	size_t size, n;
	bool noop;
	bool by_default;
};

static const struct kase cases[] = {
	{ "64B", 64, 4000000, false, true },
	{ "1KiB", 1024, 1000000, false, false },
	{ "4KiB", 4096, 400000, false, true },
	{ "64KiB", 65536, 25000, false, false },
	{ "602KiB", 224 * 224 * 3 * 4, 3200, false, true },
	{ "noop8B", 8, 50000000, true, true },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))
/* No run is shorter than this many batches, whatever --quick divides n
 * by: half a batch would measure nothing. */
#define MIN_BATCHES 4

struct options {
	struct bench_args args;
	bool use_case[NCASES];
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--cases LIST] [--quick]\n"
		"          [--csv FILE]\n\n"
		"In-place batch collation (batchsize %d) against load-then-copy\n"
		"and against single observations read in place, for each case:\n"
		"observations of a given size filled with memset, or no-op 8-byte\n"
		"observations.\n\n"
		"  --reps R        repetitions (median; default 5)\n"
		"  --threads LIST  comma-separated thread counts (default 2)\n"
		"  --cases LIST    subset of 64B,1KiB,4KiB,64KiB,602KiB,noop8B\n"
		"                  (default 64B,4KiB,602KiB,noop8B)\n"
		"  --quick         smoke mode: n / 100, but at least %d batches\n"
		"  --csv FILE      also write the results as CSV to FILE\n",
		prog, BATCH, MIN_BATCHES);
}

/* --cases LIST: the named cases only. */
static void parse_cases(struct options *o, const char *arg)
{
	parse_name_list("--cases", arg, &cases[0].name, sizeof(cases[0]), NCASES,
			o->use_case);
}

/* --cases, the one option of our own: a bench_option_fn. */
static void parse_own(int ch, const char *arg, void *ctx)
{
	(void)ch;
	parse_cases(ctx, arg);
}

/* Median of the reps runs of one variant, in M observations/s. */
static double median_rate(uint64_t *t, unsigned reps, size_t n)
{
	return (double)n / ((double)median_u64(t, reps) / 1e3);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "cases", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .args = { .reps = 5, .threads = { 2 },
					.nthread_counts = 1 } };
	unsigned sink = 0;

	bench_set_name("batches", argv[0], usage);
	for (size_t c = 0; c < NCASES; c++)
		o.use_case[c] = cases[c].by_default;
	bench_parse_args(argc, argv, &o.args, own, parse_own, &o);
	FILE *csv = open_csv(o.args.csv_path,
			     "case,obs_bytes,nthreads,n,reps,inplace_mobs_s,"
			     "copy_mobs_s,ratio,single_mobs_s\n");
	unsigned reps = o.args.reps;
	printf("# batches: in-place collation vs load-then-copy vs single, "
	       "batchsize %d, median of %u\n", BATCH, reps);
	printf("%-8s %9s %3s %10s %14s %14s %8s %14s\n", "case", "obs_bytes",
	       "P", "n", "inplace_M/s", "copy_M/s", "ratio", "single_M/s");
	for (size_t t = 0; t < o.args.nthread_counts; t++) {
		unsigned p = o.args.threads[t];

		for (size_t c = 0; c < NCASES; c++) {
			if (!o.use_case[c])
				continue;
			size_t n = cases[c].n / (o.args.quick ? 100 : 1);
			struct ds d = { n < MIN_BATCHES * BATCH
						? MIN_BATCHES * BATCH : n,
					cases[c].size, cases[c].noop };
			static uint64_t times[NVARIANTS][BENCH_MAX_REPS];
			double rate[NVARIANTS];

			/* Untimed: on a fresh VM the first touch of guest memory
			 * faults in the host too (602 KiB case: 1.9 s first, then
			 * 0.2-0.4 s), whichever variant comes first. */
			show_progress("%s P=%u warm-up", cases[c].name, p);
			for (int v = 0; v < NVARIANTS; v++)
				run(&d, p, (enum variant)v, &sink);
			/* Variants interleaved within each repetition, so that
			 * a change in the machine's state hits all three. */
			for (unsigned r = 0; r < reps; r++) {
				show_progress("%s P=%u rep %u/%u",
					      cases[c].name, p, r + 1, reps);
				for (int v = 0; v < NVARIANTS; v++)
					times[v][r] = run(&d, p,
							  (enum variant)v,
							  &sink);
			}
			for (int v = 0; v < NVARIANTS; v++)
				rate[v] = median_rate(times[v], reps, d.n);
			clear_progress();
			printf("%-8s %9zu %3u %10zu %14.3f %14.3f %8.2f %14.3f\n",
			       cases[c].name, d.size, p, d.n, rate[INPLACE],
			       rate[COPY], rate[INPLACE] / rate[COPY],
			       rate[SINGLE]);
			fflush(stdout);
			if (csv)
				fprintf(csv,
					"%s,%zu,%u,%zu,%u,%.4f,%.4f,%.3f,%.4f\n",
					cases[c].name, d.size, p, d.n, reps,
					rate[INPLACE], rate[COPY],
					rate[INPLACE] / rate[COPY],
					rate[SINGLE]);
		}
	}
	printf("# (sink %u)\n", sink);
	close_outputs(csv, o.args.csv_path);
	return 0;
}
