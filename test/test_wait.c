/*
 * Waiting promises: eachobs_next in unordered mode yields any observation
 * that is ready, without waiting for slower ones. Checked without timing:
 * one getobs, on a worker thread, blocks until the consumer has received
 * every other observation, so a library that held ready observations back
 * would never get there (the blocked getobs gives up after a deadline and
 * fails the test with a message instead of hanging the suite).
 *
 * Under EACHOBS_THREADED the consumer loads an unclaimed observation
 * itself whenever nothing is ready. Had it taken the slow one, it would
 * have loaded it at once (a getobs on the consumer cannot wait for the
 * consumer), nothing would have been slow while it consumed, and the test
 * would have checked nothing. So the consumer makes its first eachobs_next
 * call only once a worker has begun the slow getobs: the workers start
 * loading at eachobs_parallel, the buffer has room for every observation,
 * and an observation a worker has begun is no longer there to take.
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
#define DEADLINE_S 10

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t received;	/* observations the consumer has had */
	bool slow_started;	/* a worker has begun getobs(SLOW_IDX) */
	pthread_t consumer;
	bool consumer_ran_slow; /* must stay false (see the top) */
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

static struct timespec deadline_from_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += DEADLINE_S;
	return t;
}

/* getobs(SLOW_IDX) waits until the consumer has the N - 1 others. */
static int getobs(void *ctx, size_t idx, void *obs)
{
	struct gate *g = ctx;
	struct timespec deadline = deadline_from_now();
	int rc = 0;

	*(size_t *)obs = idx;
	if (idx != SLOW_IDX)
		return 0;
	pthread_mutex_lock(&g->lock);
	if (pthread_equal(pthread_self(), g->consumer)) {
		/* Blocking here would wait for ourselves. */
		g->consumer_ran_slow = true;
		pthread_mutex_unlock(&g->lock);
		return 0;
	}
	g->slow_started = true;
	pthread_cond_broadcast(&g->cond);
	while (g->received < N - 1 && rc == 0)
		rc = pthread_cond_timedwait(&g->cond, &g->lock, &deadline);
	pthread_mutex_unlock(&g->lock);
	return rc == 0 ? 0 : -ETIMEDOUT;
}

/* Wait until a worker has begun getobs(SLOW_IDX); false after the
 * deadline. */
static bool wait_slow_started(struct gate *g)
{
	struct timespec deadline = deadline_from_now();
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	while (!g->slow_started && rc == 0)
		rc = pthread_cond_timedwait(&g->cond, &g->lock, &deadline);
	bool started = g->slow_started;
	pthread_mutex_unlock(&g->lock);
	return started;
}

static void run(eachobs_executor ex)
{
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
			  false, pthread_self(), false };
	eachobs_dataset data = { &g, numobs, getobs, sizeof(size_t) };
	/* buffersize N: the workers load every observation without the
	 * consumer, so one of them reaches SLOW_IDX before it calls next. */
	eachobs_options o = { .nthreads = 4, .buffersize = N, .executor = ex };
	eachobs_iter *it;
	const void *obs;
	size_t idx, last = N;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	if (!wait_slow_started(&g)) {
		eachobs_close(it);
		cr_assert_fail("no worker began getobs(%d) within %d s",
			       SLOW_IDX, DEADLINE_S);
	}
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		pthread_mutex_lock(&g.lock);
		g.received++;
		pthread_cond_broadcast(&g.cond);
		pthread_mutex_unlock(&g.lock);
		last = idx;
	}
	eachobs_close(it);
	cr_assert(!g.consumer_ran_slow,
		  "the consumer loaded the slow observation itself");
	cr_assert_eq(rc, 0,
		     "next returned %d (%s): ready observations were held "
		     "back behind the slow one",
		     rc, eachobs_strerror(rc));
	cr_assert_eq(g.received, N);
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
