/*
 * checkpoint: what eachobs_checkpoint costs while an iteration runs.
 *
 * P worker threads (16 by default) load a dataset unordered under
 * BACKGROUND, with the default buffer, so work stealing leaves the
 * yielded items in many runs; the consumer takes a checkpoint every
 * --every items (size query and write, into a buffer it reuses) and
 * reports the median and largest time of one checkpoint and its size.
 * Two datasets: getobs sleeping 100 us (a realistic rate), and no-op
 * getobs (the most runs of yielded items per second).
 *
 * usage: checkpoint [--reps R] [--threads LIST] [--quick] [--csv FILE]
 *                   [--every K]
 */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
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
	return d->t_ns ? sleep_ns(d->t_ns) : 0;
}

static size_t every = 1000;

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--quick] [--csv FILE]\n"
		"          [--every K]\n\n"
		"The cost of eachobs_checkpoint during an unordered BACKGROUND\n"
		"run with the default buffer, one every K items (default 1000),\n"
		"with getobs sleeping 100 us and with a no-op getobs. Default:\n"
		"16 threads, 3 reps.\n",
		prog);
}

enum { OPT_EVERY = 1000 };

static void own_option(int ch, const char *arg, void *ctx)
{
	(void)ctx;
	if (ch == OPT_EVERY)
		every = parse_option("--every", arg, 1, 1000000000);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{ "every", required_argument, NULL, OPT_EVERY },
		{ 0 },
	};
	struct bench_args a = { .reps = 3, .threads = { 16 },
				.nthread_counts = 1 };

	bench_set_name("checkpoint", argv[0], usage);
	bench_parse_args(argc, argv, &a, own, own_option, NULL);
	FILE *csv = open_csv(a.csv_path, "getobs_us,nthreads,checkpoints,"
					 "median_us,max_us,max_bytes\n");
	printf("# checkpoint: one every %zu items, unordered BACKGROUND, "
	       "default buffer, %u reps\n", every, a.reps);
	printf("%-9s %3s %11s %10s %9s %9s\n", "getobs", "P", "checkpoints",
	       "median_us", "max_us", "max_bytes");
	for (size_t t = 0; t < a.nthread_counts; t++) {
		for (int c = 0; c < 2; c++) {
			struct ds d = { c ? 2000000 : 200000, c ? 0 : 100000 };
			if (a.quick)
				d.n /= 20;
			size_t cap = (size_t)1 << 20, most = 0, k = 0;
			uint64_t *ns = calloc(a.reps * (d.n / every + 1),
					      sizeof(*ns)), worst = 0;
			unsigned char *buf = malloc(cap);
			if (!ns || !buf)
				die("out of memory");
			for (unsigned r = 0; r < a.reps; r++) {
				eachobs_dataset data = { &d, numobs, getobs,
							 sizeof(size_t) };
				eachobs_options o = {
					.nthreads = a.threads[t],
					.executor = EACHOBS_BACKGROUND };
				eachobs_iter *it;
				const void *obs;
				size_t got = 0;
				int rc = eachobs_parallel(&it, &data, &o);
				if (rc < 0)
					die("start: %s", eachobs_strerror(rc));
				while ((rc = eachobs_next(it, &obs, NULL)) == 1) {
					if (++got % every)
						continue;
					size_t len = cap;
					uint64_t t0 = now_ns();
					rc = eachobs_checkpoint(it, buf, &len);
					ns[k] = now_ns() - t0;
					if (rc < 0)
						die("checkpoint: %s",
						    eachobs_strerror(rc));
					worst = ns[k] > worst ? ns[k] : worst;
					most = len > most ? len : most;
					k++;
				}
				eachobs_close(it);
				if (rc != 0 || got != d.n)
					die("run ended with %d after %zu", rc, got);
			}
			double med = (double)median_u64(ns, k) / 1e3;
			printf("%-9s %3u %11zu %10.2f %9.2f %9zu\n",
			       c ? "no-op" : "100us", a.threads[t], k, med,
			       (double)worst / 1e3, most);
			if (csv)
				fprintf(csv, "%d,%u,%zu,%.3f,%.3f,%zu\n",
					c ? 0 : 100, a.threads[t], k, med,
					(double)worst / 1e3, most);
			free(ns);
			free(buf);
		}
	}
	close_outputs(csv, a.csv_path);
	return 0;
}
