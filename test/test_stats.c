/*
 * eachobs_get_stats: counts and times that say where the time went.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"
#include "buffer_rule.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <time.h>

TestSuite(stats, .init = deadline, .timeout = 60);

struct timed {
	size_t n;
	size_t slow_below;  /* getobs(idx < slow_below) sleeps slow_us */
	long slow_us;
};

static size_t numobs(void *ctx)
{
	return ((struct timed *)ctx)->n;
}

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	const struct timed *t = ctx;

	*(size_t *)obs = idx;
	if (idx < t->slow_below)
		nap_us(t->slow_us);
	return 0;
}

/* Iterate to the end, the consumer sleeping consumer_us per item. */
static eachobs_stats run(struct timed *t, eachobs_options o, long consumer_us)
{
	eachobs_dataset data = { t, numobs, getobs, sizeof(size_t) };
	eachobs_iter *it;
	eachobs_stats st;
	const void *obs;
	size_t idx;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		if (consumer_us)
			nap_us(consumer_us);
	cr_assert_eq(rc, 0);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	return st;
}

Test(stats, background_counts_every_load_on_workers_and_their_time)
{
	struct timed t = { 200, 200, 1000 };
	eachobs_stats st = run(&t, (eachobs_options){
		.nthreads = 4, .executor = EACHOBS_BACKGROUND }, 0);

	cr_assert_eq(st.yielded, 200);
	cr_assert_eq(st.loaded, 200);
	cr_assert_eq(st.loaded_by_consumer, 0);
	cr_assert_eq(st.consumer_getobs_ns, 0);
	cr_assert_eq(st.nworkers, 4);
	/* Each getobs sleeps at least 1 ms. */
	cr_assert_geq(st.worker_getobs_ns, 200ull * 1000000,
		      "worker_getobs_ns %llu", st.worker_getobs_ns);
	/* The consumer does nothing, so it waits for most of the run. */
	cr_assert_gt(st.consumer_wait_ns, 200ull * 1000000 / 4 / 2,
		     "consumer_wait_ns %llu", st.consumer_wait_ns);
}

Test(stats, serial_loads_everything_on_the_consumer)
{
	struct timed t = { 50, 50, 1000 };
	eachobs_stats st = run(&t, (eachobs_options){
		.executor = EACHOBS_SERIAL }, 0);

	cr_assert_eq(st.yielded, 50);
	cr_assert_eq(st.loaded, 50);
	cr_assert_eq(st.loaded_by_consumer, 50);
	cr_assert_geq(st.consumer_getobs_ns, 50ull * 1000000);
	cr_assert_eq(st.nworkers, 0);
}

Test(stats, slow_consumer_shows_idle_workers_and_a_full_buffer)
{
	for (int ord = 0; ord <= 1; ord++) {
		struct timed t = { 100, 0, 0 };
		eachobs_stats st = run(&t, (eachobs_options){
			.nthreads = 2, .buffersize = 8,
			.executor = EACHOBS_BACKGROUND, .ordered = ord }, 2000);

		cr_assert_eq(st.yielded, 100);
		/* 100 items at 2 ms each: workers wait most of ~200 ms. */
		cr_assert_gt(st.worker_idle_ns, 100ull * 1000000,
			     "ordered=%d worker_idle_ns %llu", ord,
			     st.worker_idle_ns);
		cr_assert_geq(st.max_waiting, 4, "ordered=%d max_waiting %zu",
			      ord, st.max_waiting);
		cr_assert_leq(st.max_waiting, 8 + 2 + 1);
	}
}

Test(stats, idle_workers_steal_from_a_slow_one)
{
	/* Worker 0 starts with [0, 50), all slow; worker 1 with [50, 100),
	 * all fast: it runs out long before worker 0 and must steal. */
	struct timed t = { 100, 50, 2000 };
	eachobs_stats st = run(&t, (eachobs_options){
		.nthreads = 2, .basesize = 1, .executor = EACHOBS_BACKGROUND },
		0);

	cr_assert_eq(st.yielded, 100);
	cr_assert_gt(st.steals, 0);
}

Test(stats, rejects_null)
{
	struct timed t = { 1, 0, 0 };
	eachobs_dataset data = { &t, numobs, getobs, sizeof(size_t) };
	eachobs_iter *it;

	cr_assert_eq(eachobs_get_stats(NULL, NULL), -EINVAL);
	cr_assert_eq(eachobs_parallel(&it, &data, NULL), 0);
	cr_assert_eq(eachobs_get_stats(it, NULL), -EINVAL);
	eachobs_close(it);
}

static size_t one(void *ctx)
{
	(void)ctx;
	return 1;
}

static int no_load(void *ctx, size_t idx, void *obs)
{
	(void)ctx, (void)idx, (void)obs;
	return 0;
}

/* eachobs_options.buffersize 0, as the header's rule gives it: 4 a
 * thread (at least 16), or as many slots (of at least 64 bytes) as fit
 * 256 KiB, at most 256, or 4096 ordered and unbatched; batched, 2 a
 * thread (at least 2) or as many batches as fit, at most 256. */
static const struct buffer_case {
	unsigned nthreads;
	size_t obs_size;
	bool ordered;
	size_t batchsize;
	size_t want;
} buffer_cases[] = {
	{ 2, 8, false, 0, 256 },       { 2, 8, true, 0, 4096 },
	{ 2, 100, true, 0, 2048 },     { 2, 512, false, 0, 256 },
	{ 2, 512, true, 0, 512 },      { 2, 150528, true, 0, 16 },
	{ 16, 150528, true, 0, 64 },   { 16, 150528, false, 0, 64 },
	{ 2, 8, false, 64, 256 },      { 2, 8, true, 64, 256 },
	{ 2, 65536, true, 64, 4 },     { 1, 65536, false, 64, 2 },
};
#define NBUFFER_CASES (sizeof(buffer_cases) / sizeof(buffer_cases[0]))

Test(stats, the_buffersize_in_force_is_the_default_the_header_gives)
{
	for (size_t c = 0; c < NBUFFER_CASES; c++) {
		const struct buffer_case *k = &buffer_cases[c];
		for (int ex = 0; ex < 2; ex++) {
			eachobs_dataset data = { NULL, one, no_load,
						 k->obs_size };
			eachobs_options o = {
				.nthreads = k->nthreads,
				.ordered = k->ordered,
				.batchsize = k->batchsize,
				.executor = ex ? EACHOBS_BACKGROUND
					       : EACHOBS_THREADED,
			};
			eachobs_iter *it;
			eachobs_stats st;

			cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
			cr_assert_eq(eachobs_get_stats(it, &st), 0);
			eachobs_close(it);
			cr_expect_eq(st.buffersize, k->want,
				     "case %zu (P = %u, obs_size %zu, ordered "
				     "%d, batchsize %zu, %s): buffersize %zu, "
				     "want %zu",
				     c, k->nthreads, k->obs_size, k->ordered,
				     k->batchsize,
				     ex ? "BACKGROUND" : "THREADED",
				     st.buffersize, k->want);
		}
	}
}

/* The bound the memory tests check (buffer_rule.h) is the header's rule:
 * the same cases, through the tests' own copy of it. */
Test(stats, the_tests_copy_of_the_buffer_rule_gives_the_headers_values)
{
	for (size_t c = 0; c < NBUFFER_CASES; c++) {
		const struct buffer_case *k = &buffer_cases[c];
		size_t cap = k->batchsize ? k->batchsize : 1;
		size_t got = rule_default_buffersize(
			k->batchsize != 0, k->ordered, k->nthreads,
			rule_unit_bytes(cap, k->obs_size));

		cr_expect_eq(got, k->want,
			     "case %zu: buffer_rule.h gives %zu, want %zu", c,
			     got, k->want);
	}
}
