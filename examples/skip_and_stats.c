/*
 * A loader that keeps going past bad samples, keeps the training thread
 * free, and reports where the time went: the options a long training run
 * wants. The "dataset" decodes records, one in 97 of which is corrupt.
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { N = 5000, RECORD = 256 };

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

/* A stand-in for reading and decoding one record: ~50 us of waiting. */
static int getobs(void *ctx, size_t idx, void *obs)
{
	unsigned char *rec = obs;
	struct timespec io = { 0, 50000 };

	(void)ctx;
	nanosleep(&io, NULL);
	if (idx % 97 == 13)
		return -EBADMSG; /* a corrupt record */
	for (size_t i = 0; i < RECORD; i++)
		rec[i] = (unsigned char)(idx + i);
	return 0;
}

/* The training step: ~20 us of work on the consumer's own thread. */
static unsigned train_step(const unsigned char *rec)
{
	struct timespec t0, t;
	unsigned sum = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (size_t i = 0; i < RECORD; i++)
			sum += rec[i];
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L +
			 (t.tv_nsec - t0.tv_nsec) <
		 20000);
	return sum;
}

int main(int argc, char **argv)
{
	if (argc > 1) { /* no arguments but --help */
		int help = strcmp(argv[1], "--help") == 0 ||
			   strcmp(argv[1], "-h") == 0;

		fprintf(help ? stdout : stderr, "usage: %s [--help]\n",
			argv[0]);
		if (help)
			puts("Trains past corrupt records; prints stats.");
		return help ? 0 : 2;
	}

	eachobs_dataset data = { .numobs = numobs, .getobs = getobs,
				 .obs_size = RECORD };
	eachobs_options opts = { .nthreads = 8,
				 .executor = EACHOBS_BACKGROUND,
				 .on_error = EACHOBS_ON_ERROR_SKIP,
				 .worker_nice = 5 };
	eachobs_iter *it;
	const void *obs;
	size_t idx, count = 0;
	unsigned checksum = 0;

	int rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0) {
		fprintf(stderr, "eachobs: %s\n", eachobs_strerror(rc));
		return 1;
	}
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		checksum += train_step(obs);
		count++;
	}

	eachobs_failure bad[4];
	size_t nbad = eachobs_failures(it, bad, 4);
	eachobs_stats st;
	eachobs_get_stats(it, &st);
	eachobs_close(it);

	printf("trained on %zu records, skipped %zu (first: %zu, %s)\n", count,
	       nbad, nbad ? bad[0].idx : 0,
	       nbad ? eachobs_strerror(bad[0].code) : "-");
	printf("consumer waited %.1f ms for data; workers were idle %.0f%% "
	       "of their time\n",
	       (double)st.consumer_wait_ns / 1e6,
	       100.0 * (double)st.worker_idle_ns /
		       (double)(st.worker_idle_ns + st.worker_getobs_ns));
	/* 5000 records, every 97th from index 13 corrupt: 52 skipped. */
	return rc != 0 || nbad != 52 || count != N - 52 || checksum == 0;
}
