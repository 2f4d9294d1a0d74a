/*
 * Waiting promises: eachobs_next in unordered mode yields any observation
 * that is ready, without waiting for slower ones. Checked without timing:
 * one getobs blocks until the consumer has received every other
 * observation, so a library that held ready observations back would never
 * get there (the blocked getobs gives up after a deadline and fails the
 * test with a message instead of hanging the suite).
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#define SLOW_IDX 3
#define N 8

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t received;
	pthread_t consumer;
	bool consumer_ran_slow; /* THREADED: the consumer may load it itself */
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

/* getobs(SLOW_IDX) waits until the consumer has the N - 1 others. */
static int getobs(void *ctx, size_t idx, void *obs)
{
	struct gate *g = ctx;
	struct timespec deadline;
	int rc = 0;

	*(size_t *)obs = idx;
	if (idx != SLOW_IDX)
		return 0;
	if (pthread_equal(pthread_self(), g->consumer)) {
		/* Blocking here would wait for ourselves. */
		g->consumer_ran_slow = true;
		return 0;
	}
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&g->lock);
	while (g->received < N - 1 && rc == 0)
		rc = pthread_cond_timedwait(&g->cond, &g->lock, &deadline);
	pthread_mutex_unlock(&g->lock);
	return rc == 0 ? 0 : -ETIMEDOUT;
}

static void run(eachobs_executor ex)
{
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
			  pthread_self(), false };
	eachobs_dataset data = { &g, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 4, .buffersize = 8, .executor = ex };
	eachobs_iter *it;
	const void *obs;
	size_t idx, last = N;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		pthread_mutex_lock(&g.lock);
		g.received++;
		pthread_cond_broadcast(&g.cond);
		pthread_mutex_unlock(&g.lock);
		last = idx;
	}
	eachobs_close(it);
	cr_assert_eq(rc, 0,
		     "next returned %d (%s): ready observations were held "
		     "back behind the slow one",
		     rc, eachobs_strerror(rc));
	cr_assert_eq(g.received, N);
	if (!g.consumer_ran_slow)
		cr_assert_eq(last, SLOW_IDX,
			     "the slow observation came before others");
}

Test(wait, unordered_background_yields_ready_items_while_one_load_is_slow)
{
	run(EACHOBS_BACKGROUND);
}

Test(wait, unordered_threaded_yields_ready_items_while_one_load_is_slow)
{
	run(EACHOBS_THREADED);
}
