/*
 * Streams under random configurations, as a plain program so that it also
 * runs under ThreadSanitizer: executors x ordered x batches x hold x pool x
 * the shuffle buffer, nthreads 1..9, shards of 0..40 records, some next
 * calls slow; each configuration yields the epoch in up to three runs,
 * checkpointing and resuming between them, or closes early. Checks every
 * record once (in a finished epoch), the bytes of each, one reader per
 * shard, and no call after close.
 *
 *   stress_stream [ITERATIONS [SEED]]
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXSHARDS 32
#define MAXREC 40

struct ts {
	size_t nshards;
	size_t counts[MAXSHARDS];
	unsigned slow_every; /* 0, or every this many records sleeps 100 us */
	atomic_int reading[MAXSHARDS];
	atomic_long violations, opens, closes, records;
	atomic_bool closed;
};

struct st {
	size_t shard, rec;
};

static int t_open(void *ctx, size_t shard, void **state)
{
	struct ts *t = ctx;
	struct st *s = calloc(1, sizeof(*s));

	if (atomic_load(&t->closed))
		atomic_fetch_add(&t->violations, 1);
	if (!s)
		return -ENOMEM;
	s->shard = shard;
	atomic_fetch_add(&t->opens, 1);
	*state = s;
	return 0;
}

static int t_next(void *ctx, void *state, void *obs)
{
	struct ts *t = ctx;
	struct st *s = state;
	int rc = 0;

	if (atomic_load(&t->closed) ||
	    atomic_fetch_add(&t->reading[s->shard], 1) != 0)
		atomic_fetch_add(&t->violations, 1);
	if (s->rec < t->counts[s->shard]) {
		uint64_t v[2] = { s->shard, s->rec++ };
		memcpy(obs, v, sizeof(v));
		if (t->slow_every && atomic_fetch_add(&t->records, 1) %
						     t->slow_every == 0)
			usleep(100);
		rc = 1;
	}
	atomic_fetch_sub(&t->reading[s->shard], 1);
	return rc;
}

static void t_close(void *ctx, void *state)
{
	struct ts *t = ctx;

	atomic_fetch_add(&t->closes, 1);
	free(state);
}

static int t_seek(void *ctx, void *state, size_t record)
{
	(void)ctx;
	((struct st *)state)->rec = record;
	return 0;
}

static uint64_t rng;

static unsigned draw(unsigned n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((rng >> 33) % n);
}

static int fail(const char *what, uint64_t seed)
{
	fprintf(stderr, "stress_stream: %s (configuration seed %llu): %s\n",
		what, (unsigned long long)seed, eachobs_last_error());
	return 1;
}

/* Yield up to max units; 1 per record into seen; -1 on a bad byte. */
static int drain(eachobs_iter *it, const eachobs_options *o, size_t max,
		 unsigned char seen[MAXSHARDS][MAXREC], int *end)
{
	const void *held[8];
	unsigned nheld = 0;

	*end = 1;
	for (size_t u = 0; u < max; u++) {
		const void *data;
		const size_t *idx;
		size_t count, one;
		eachobs_batch b;
		if (o->hold && nheld == o->hold) {
			eachobs_release(it, held[0]);
			memmove(held, held + 1, --nheld * sizeof(*held));
		}
		int rc = o->batchsize ? eachobs_next_batch(it, &b)
				      : eachobs_next(it, &data, &one);
		if (rc != 1) {
			*end = rc;
			return 0;
		}
		if (o->batchsize) {
			data = b.data;
			idx = b.idx;
			count = b.count;
		} else {
			idx = &one;
			count = 1;
		}
		for (size_t e = 0; e < count; e++) {
			uint64_t v[2];
			memcpy(v, (const char *)data + e * 16, 16);
			size_t s = EACHOBS_STREAM_SHARD(idx[e]);
			size_t r = EACHOBS_STREAM_RECORD(idx[e]);
			if (v[0] != s || v[1] != r || s >= MAXSHARDS ||
			    r >= MAXREC)
				return -1;
			seen[s][r]++;
		}
		if (o->hold)
			held[nheld++] = data;
	}
	return 0;
}

static int one_config(eachobs_pool *pool, uint64_t seed)
{
	static struct ts t;
	static const size_t batches[] = { 0, 1, 4, 9 };
	unsigned char seen[MAXSHARDS][MAXREC];
	unsigned char ckpt[8192];
	eachobs_iter *it;

	rng = seed;
	memset(&t, 0, sizeof(t));
	memset(seen, 0, sizeof(seen));
	t.nshards = 1 + draw(MAXSHARDS);
	for (size_t i = 0; i < t.nshards; i++)
		t.counts[i] = draw(MAXREC + 1);
	t.slow_every = draw(3) ? 0 : 1 + draw(20);
	eachobs_stream s = { .ctx = &t, .nshards = t.nshards, .obs_size = 16,
			     .open = t_open, .next = t_next, .close = t_close,
			     .seek = draw(2) ? t_seek : NULL };
	eachobs_options o = { .executor = (eachobs_executor)draw(3),
			      .ordered = draw(2), .batchsize = batches[draw(4)],
			      .hold = draw(3), .pool = draw(3) ? NULL : pool,
			      .nthreads = 1 + draw(9), .shuffle = draw(2),
			      .seed = seed, .shuffle_buffer = draw(2) * draw(6),
			      .cycle_length = draw(4) };
	size_t ckpt_len = 0;
	int end = 1;
	bool early = draw(6) == 0;
	for (int run = 0; run < 3 && end == 1; run++) {
		o.resume = ckpt_len ? ckpt : NULL;
		o.resume_len = ckpt_len;
		atomic_store(&t.closed, false);
		if (eachobs_stream_parallel(&it, &s, &o) < 0)
			return fail("start", seed);
		size_t max = run == 2 ? SIZE_MAX : draw(30);
		if (drain(it, &o, max, seen, &end) < 0)
			return fail("a record's bytes do not match its idx",
				    seed);
		ckpt_len = sizeof(ckpt);
		if (end == 1 && eachobs_checkpoint(it, ckpt, &ckpt_len) < 0)
			return fail("checkpoint", seed);
		eachobs_close(it);
		atomic_store(&t.closed, true);
		if (early)
			return atomic_load(&t.violations) ? fail("violation", seed)
							  : 0;
	}
	if (end != 0)
		return fail("the epoch did not end", seed);
	for (size_t i = 0; i < t.nshards; i++)
		for (size_t r = 0; r < MAXREC; r++)
			if (seen[i][r] != (r < t.counts[i]))
				return fail("a record not yielded exactly once",
					    seed);
	if (atomic_load(&t.violations) ||
	    atomic_load(&t.opens) != atomic_load(&t.closes))
		return fail("a shard read by two threads, a call after close, "
			    "or an open not closed",
			    seed);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: stress_stream [ITERATIONS [SEED]]\n"
		       "Random stream configurations, resumed and closed "
		       "early; every record once.\n");
		return 0;
	}
	for (int i = 1; i < argc; i++)
		if (strspn(argv[i], "0123456789") != strlen(argv[i]) ||
		    i > 2) {
			fprintf(stderr, "usage: stress_stream [ITERATIONS "
					"[SEED]] (try --help)\n");
			return 2;
		}
	long iterations = argc > 1 ? atol(argv[1]) : 300;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	eachobs_pool *pool;

	if (eachobs_pool_create(&pool, 4) < 0)
		return fail("pool", 0);
	for (long i = 0; i < iterations; i++)
		if (one_config(pool, seed * 1000003u + (uint64_t)i)) {
			eachobs_pool_destroy(pool);
			return 1;
		}
	eachobs_pool_destroy(pool);
	printf("stress_stream: %ld configurations, every record once\n",
	       iterations);
	return 0;
}
