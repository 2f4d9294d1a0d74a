/*
 * dlpack: what eachobs_dlpack and the tensor's deleter cost per batch.
 *
 * Batches of 64 no-op observations (8 floats each) under BACKGROUND with
 * hold = 2; every batch becomes a DLPack tensor that is deleted right away
 * (the deleter gives the batch back; the consumer takes it in at its next
 * call). Times only the two calls, and the same run without them for the
 * loop's own rate.
 *
 * usage: dlpack [--reps R] [--threads LIST] [--quick] [--csv FILE]
 */
#define _GNU_SOURCE
#include "util.h"

#include <eachobs_dlpack.h>
#include <stdlib.h>

static size_t numobs(void *ctx)
{
	return *(size_t *)ctx;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	(void)idx;
	(void)obs;
	return 0;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--quick] [--csv FILE]\n\n"
		"The cost of eachobs_dlpack plus the tensor's deleter per batch\n"
		"of 64, and the batch rate with and without them. Default: 2\n"
		"threads, 5 reps.\n",
		prog);
}

/* One run: batches per second; *pair_ns the median dlpack + deleter. */
static double run(size_t n, unsigned p, bool tensors, double *pair_ns)
{
	eachobs_dataset data = { &n, numobs, getobs, 8 * sizeof(float) };
	eachobs_options o = { .nthreads = p, .executor = EACHOBS_BACKGROUND,
			      .batchsize = 64, .hold = 2 };
	static const int64_t shape[] = { 8 };
	size_t nb = n / 64, k = 0;
	uint64_t *ns = calloc(nb + 1, sizeof(*ns));
	eachobs_iter *it;
	eachobs_batch b;
	int rc;

	if (!ns || eachobs_parallel(&it, &data, &o) < 0)
		die("start");
	uint64_t t0 = now_ns();
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		if (!tensors) {
			eachobs_release(it, b.data);
			continue;
		}
		DLManagedTensor *t;
		uint64_t a = now_ns();
		if (eachobs_dlpack(it, b.data, (DLDataType){ kDLFloat, 32, 1 },
				   1, shape, &t) < 0)
			die("eachobs_dlpack: %s", eachobs_last_error());
		t->deleter(t);
		ns[k++] = now_ns() - a;
	}
	double rate = (double)nb / ((double)(now_ns() - t0) / 1e9);
	eachobs_close(it);
	if (rc != 0)
		die("run ended with %d", rc);
	*pair_ns = (double)median_u64(ns, k);
	free(ns);
	return rate;
}

int main(int argc, char **argv)
{
	struct bench_args a = { .reps = 5, .threads = { 2 }, .nthread_counts = 1 };

	bench_set_name("dlpack", argv[0], usage);
	bench_parse_args(argc, argv, &a, NULL, NULL, NULL);
	size_t n = a.quick ? 64 * 2000 : 64 * 100000;
	FILE *csv = open_csv(a.csv_path, "nthreads,batches,pair_ns,"
					 "batches_s_with,batches_s_without\n");
	printf("# dlpack: batches of 64, hold 2, BACKGROUND, median of %u\n",
	       a.reps);
	printf("%3s %9s %12s %16s %19s\n", "P", "batches", "dlpack+del_ns",
	       "batches/s with", "batches/s without");
	for (size_t t = 0; t < a.nthread_counts; t++) {
		double pair[BENCH_MAX_REPS], with[BENCH_MAX_REPS],
			without[BENCH_MAX_REPS], unused;
		for (unsigned r = 0; r < a.reps; r++) {
			with[r] = run(n, a.threads[t], true, &pair[r]);
			without[r] = run(n, a.threads[t], false, &unused);
		}
		unsigned long long pp = (unsigned long long)median_double(
					   pair, a.reps),
				   ww = (unsigned long long)median_double(
					   with, a.reps),
				   oo = (unsigned long long)median_double(
					   without, a.reps);
		printf("%3u %9zu %12llu %16llu %19llu\n", a.threads[t], n / 64,
		       pp, ww, oo);
		if (csv)
			fprintf(csv, "%u,%zu,%llu,%llu,%llu\n", a.threads[t],
				n / 64, pp, ww, oo);
	}
	close_outputs(csv, a.csv_path);
	return 0;
}
