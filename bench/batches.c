/*
 * batches: what in-place collation saves over load-then-copy.
 *
 *   inplace  batchsize 64: every getobs writes its observation straight
 *            into its place in the batch buffer; the consumer reads the
 *            batch where it was loaded.
 *   copy     what PyTorch's collate does: single observations, each
 *            loaded into a slot, then copied by the consumer into a
 *            64-observation batch buffer of its own.
 *
 * Both consumers touch one byte per observation of each batch (a stand-in
 * for handing it on), so the difference is the copy. Observation sizes:
 * 64 B, 4 KiB and 602 KiB (224 x 224 x 3 float32); getobs fills its
 * observation with memset, as cheap a "load" as any real one can be, which
 * is the case where the copy weighs most. A last row: no-op getobs on
 * 8-byte observations in batches of 64, the library's own cost per
 * observation.
 *
 * usage: batches [--reps R] [--threads LIST] [--quick] [--csv FILE]
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

/* One run; returns wall ns from start to close. */
static uint64_t run(struct ds *d, unsigned nthreads, bool inplace,
		    unsigned *sink)
{
	eachobs_dataset data = { d, numobs, getobs, d->size };
	eachobs_options o = { .nthreads = nthreads,
			      .batchsize = inplace ? BATCH : 0 };
	unsigned char *mine = inplace ? NULL : aligned_alloc(64, BATCH * d->size);
	eachobs_iter *it;
	size_t got = 0, fill = 0;
	int rc;

	if (!inplace && !mine)
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

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--quick] [--csv FILE]\n\n"
		"In-place batch collation against load-then-copy, batchsize %d,\n"
		"observations of 64 B, 4 KiB and 602 KiB; then no-op 8-byte\n"
		"observations in batches. Default: 5 reps, 2 threads.\n",
		prog, BATCH);
}

struct kase {
	const char *name;
	size_t size, n;
	bool noop;
};

int main(int argc, char **argv)
{
	static const struct kase cases[] = {
		{ "64B", 64, 4000000, false },
		{ "4KiB", 4096, 400000, false },
		{ "602KiB", 224 * 224 * 3 * 4, 3200, false },
		{ "noop8B", 8, 50000000, true },
	};
	struct bench_args a = { .reps = 5, .threads = { 2 }, .nthread_counts = 1 };
	unsigned sink = 0;

	bench_set_name("batches", argv[0], usage);
	bench_parse_args(argc, argv, &a, NULL, NULL, NULL);
	FILE *csv = open_csv(a.csv_path, "case,obs_bytes,nthreads,n,reps,"
					 "inplace_mobs_s,copy_mobs_s,ratio\n");
	printf("# batches: in-place collation vs load-then-copy, batchsize %d,"
	       " median of %u\n", BATCH, a.reps);
	printf("%-8s %9s %3s %10s %14s %14s %8s\n", "case", "obs_bytes", "P",
	       "n", "inplace_M/s", "copy_M/s", "ratio");
	for (size_t t = 0; t < a.nthread_counts; t++) {
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			struct ds d = { cases[c].n / (a.quick ? 100 : 1),
					cases[c].size, cases[c].noop };
			uint64_t in[BENCH_MAX_REPS], cp[BENCH_MAX_REPS];
			/* Untimed: on a fresh VM the first touch of guest memory
			 * faults in the host too (602 KiB case: 1.9 s first, then
			 * 0.2-0.4 s), whichever variant comes first. */
			show_progress("%s P=%u warm-up", cases[c].name,
				      a.threads[t]);
			run(&d, a.threads[t], true, &sink);
			run(&d, a.threads[t], false, &sink);
			for (unsigned r = 0; r < a.reps; r++) {
				show_progress("%s P=%u rep %u/%u",
					      cases[c].name, a.threads[t],
					      r + 1, a.reps);
				in[r] = run(&d, a.threads[t], true, &sink);
				cp[r] = run(&d, a.threads[t], false, &sink);
			}
			qsort(in, a.reps, sizeof(in[0]), cmp_u64);
			qsort(cp, a.reps, sizeof(cp[0]), cmp_u64);
			double ri = (double)d.n / ((double)in[a.reps / 2] / 1e3);
			double rc = (double)d.n / ((double)cp[a.reps / 2] / 1e3);
			clear_progress();
			printf("%-8s %9zu %3u %10zu %14.3f %14.3f %8.2f\n",
			       cases[c].name, d.size, a.threads[t], d.n, ri, rc,
			       ri / rc);
			fflush(stdout);
			if (csv)
				fprintf(csv, "%s,%zu,%u,%zu,%u,%.4f,%.4f,%.3f\n",
					cases[c].name, d.size, a.threads[t], d.n,
					a.reps, ri, rc, ri / rc);
		}
	}
	printf("# (sink %u)\n", sink);
	close_outputs(csv, a.csv_path);
	return 0;
}
