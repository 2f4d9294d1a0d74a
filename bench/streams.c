/*
 * A stream against bare threads reading the same shards: each next()
 * waits (sleeps) or computes a fixed time per record, shards are read
 * front to back; the bare threads take shards from an atomic counter and
 * read them with no hand-off at all (the most a loader of these shards
 * can do), eachobs reads them through eachobs_stream_parallel(),
 * unordered and ordered, and the consumer counts every record. Rounds
 * alternate between the two; medians of the rounds.
 *
 *   streams [--shards S] [--records R] [--threads P] [--us U]
 *           [--compute] [--rounds K] [--quick]
 */
#define _GNU_SOURCE
#include "support.h"

#include <eachobs.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cfg {
	unsigned shards, records, threads, us, rounds;
	bool compute;
};

static void spend(const struct cfg *c)
{
	if (!c->us)
		return;
	if (!c->compute) {
		usleep(c->us);
		return;
	}
	uint64_t end = now_ns() + (uint64_t)c->us * 1000u;
	while (now_ns() < end)
		;
}

/* ---- bare threads ------------------------------------------------------ */

struct bare {
	const struct cfg *c;
	atomic_uint next_shard;
	atomic_ulong records;
};

static void *bare_thread(void *arg)
{
	struct bare *b = arg;
	unsigned s;
	unsigned long n = 0;

	while ((s = atomic_fetch_add(&b->next_shard, 1)) < b->c->shards)
		for (unsigned r = 0; r < b->c->records; r++) {
			spend(b->c);
			n++;
		}
	atomic_fetch_add(&b->records, n);
	return NULL;
}

static double run_bare(const struct cfg *c)
{
	struct bare b = { .c = c };
	pthread_t t[1024];
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < c->threads; i++)
		if (pthread_create(&t[i], NULL, bare_thread, &b))
			die("pthread_create failed");
	for (unsigned i = 0; i < c->threads; i++)
		pthread_join(t[i], NULL);
	double s = (now_ns() - t0) / 1e9;
	if (atomic_load(&b.records) != (unsigned long)c->shards * c->records)
		die("bare threads read %lu records",
		    (unsigned long)atomic_load(&b.records));
	return atomic_load(&b.records) / s;
}

/* ---- the stream -------------------------------------------------------- */

struct reader {
	unsigned left;
};

static int s_open(void *ctx, size_t shard, void **state)
{
	const struct cfg *c = ctx;
	struct reader *r = malloc(sizeof(*r));

	(void)shard;
	if (!r)
		return -ENOMEM;
	r->left = c->records;
	*state = r;
	return 0;
}

static int s_next(void *ctx, void *state, void *obs)
{
	struct reader *r = state;

	if (!r->left)
		return 0;
	spend(ctx);
	r->left--;
	memcpy(obs, &r->left, sizeof(r->left));
	return 1;
}

static void s_close(void *ctx, void *state)
{
	(void)ctx;
	free(state);
}

static double run_stream(const struct cfg *c, bool ordered,
			 double *cpu_s)
{
	eachobs_stream s = { .ctx = (void *)c, .nshards = c->shards,
			     .obs_size = sizeof(unsigned), .open = s_open,
			     .next = s_next, .close = s_close };
	eachobs_options o = { .nthreads = c->threads,
			      .executor = EACHOBS_BACKGROUND,
			      .ordered = ordered,
			      .cycle_length = ordered ? c->threads : 0 };
	eachobs_iter *it;
	struct timespec c0, c1;
	size_t n = 0;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	uint64_t t0 = now_ns();
	if (eachobs_stream_parallel(&it, &s, &o) < 0)
		die("eachobs_stream_parallel: %s", eachobs_last_error());
	while (eachobs_next(it, NULL, NULL) == 1)
		n++;
	eachobs_close(it);
	double secs = (now_ns() - t0) / 1e9;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	*cpu_s = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9;
	if (n != (size_t)c->shards * c->records)
		die("the stream yielded %zu records", n);
	return n / secs;
}

/* What eachobs_checkpoint costs on a stream of 10,000 shards of 40
 * records, 16 threads and a shuffle buffer of 64, 1000 units in: the
 * median of 1000 calls, and the bytes. */
static void time_checkpoint(void)
{
	struct cfg c = { 10000, 40, 16, 0, 1, false };
	eachobs_stream s = { .ctx = &c, .nshards = c.shards,
			     .obs_size = sizeof(unsigned), .open = s_open,
			     .next = s_next, .close = s_close };
	eachobs_options o = { .nthreads = 16, .shuffle = true,
			      .shuffle_buffer = 64, .buffersize = 64 + 16 };
	eachobs_iter *it;
	unsigned char buf[8192];
	uint64_t ns[1000];
	size_t len = 0;

	if (eachobs_stream_parallel(&it, &s, &o) < 0)
		die("eachobs_stream_parallel: %s", eachobs_last_error());
	for (int k = 0; k < 1000; k++)
		if (eachobs_next(it, NULL, NULL) != 1)
			die("the stream ended early");
	for (int k = 0; k < 1000; k++) {
		len = sizeof(buf);
		uint64_t t0 = now_ns();
		if (eachobs_checkpoint(it, buf, &len) < 0)
			die("eachobs_checkpoint: %s", eachobs_last_error());
		ns[k] = now_ns() - t0;
	}
	eachobs_close(it);
	printf("checkpoint, 10,000 shards, 16 threads, shuffle buffer 64: "
	       "%zu bytes, %.1f us (median of 1000)\n",
	       len, median_u64(ns, 1000) / 1e3);
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--shards S] [--records R] [--threads P] [--us U]\n"
		"          [--compute] [--rounds K] [--quick]\n"
		"A stream of S shards of R records, each next() waiting U us\n"
		"(computing with --compute), read by P threads through\n"
		"eachobs_stream_parallel and by bare threads; records/s,\n"
		"medians of K alternating rounds. Defaults: 64 shards of 20\n"
		"records, 16 threads, 1000 us, 7 rounds.\n",
		prog);
}

int main(int argc, char **argv)
{
	struct cfg c = { 64, 20, 16, 1000, 7, false };
	double bare[64], un[64], ord[64], cpu_un[64], cpu_ord[64];

	bench_set_name("streams", argv[0], usage);
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			help_exit();
		else if (!strcmp(argv[i], "--quick"))
			c.rounds = 3, c.records = 10;
		else if (!strcmp(argv[i], "--compute"))
			c.compute = true;
		else if (!strcmp(argv[i], "--shards") && v && ++i)
			c.shards = (unsigned)parse_option("--shards", v, 1, 1 << 20);
		else if (!strcmp(argv[i], "--records") && v && ++i)
			c.records = (unsigned)parse_option("--records", v, 1, 1 << 20);
		else if (!strcmp(argv[i], "--threads") && v && ++i)
			c.threads = (unsigned)parse_option("--threads", v, 1, 1024);
		else if (!strcmp(argv[i], "--us") && v && ++i)
			c.us = (unsigned)parse_option("--us", v, 0, 1000000);
		else if (!strcmp(argv[i], "--rounds") && v && ++i)
			c.rounds = (unsigned)parse_option("--rounds", v, 1, 64);
		else
			bad_usage("unknown argument '%s'", argv[i]);
	}
	for (unsigned k = 0; k < c.rounds; k++) {
		bare[k] = run_bare(&c);
		un[k] = run_stream(&c, false, &cpu_un[k]);
		ord[k] = run_stream(&c, true, &cpu_ord[k]);
	}
	double b = median_double(bare, c.rounds);
	double u = median_double(un, c.rounds);
	double o = median_double(ord, c.rounds);
	printf("%u shards x %u records, next() %s %u us, %u threads, "
	       "medians of %u rounds\n",
	       c.shards, c.records, c.compute ? "computes" : "waits", c.us,
	       c.threads, c.rounds);
	printf("%-28s %12.0f records/s\n", "bare threads", b);
	printf("%-28s %12.0f records/s  %.3f of bare  cpu %.3f s/epoch\n",
	       "stream, unordered", u, u / b, median_double(cpu_un, c.rounds));
	printf("%-28s %12.0f records/s  %.3f of bare  cpu %.3f s/epoch\n",
	       "stream, ordered (cycle = P)", o, o / b,
	       median_double(cpu_ord, c.rounds));
	time_checkpoint();
	return 0;
}
