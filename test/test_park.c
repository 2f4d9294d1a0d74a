/*
 * THREADED with cheap getobs parks the workers beyond CPUs - 1 (the
 * consumer is the last loader). The promise checked here is the way back:
 * once getobs turns dear every worker loads again, ordered or not. On a
 * machine with more CPUs than workers nobody parks, and the test still
 * holds.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "eachobs.h"
#include "helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define N 3000
#define CHEAP_UNTIL 2000
#define WORKERS 4
TestSuite(park, .timeout = 120);

struct pk {
	pthread_t consumer;
	struct thread_set dear; /* threads other than the consumer that
				 * loaded a dear observation */
};

static size_t pk_numobs(void *ctx)
{
	(void)ctx;
	return N;
}

static int pk_getobs(void *ctx, size_t idx, void *obs)
{
	struct pk *p = ctx;

	memcpy(obs, &idx, sizeof(idx));
	if (idx < CHEAP_UNTIL)
		return 0;
	struct timespec t = { 0, 200000 };
	nanosleep(&t, NULL);
	if (!pthread_equal(pthread_self(), p->consumer))
		thread_set_add(&p->dear, pthread_self());
	return 0;
}

static void every_worker_loads_once_getobs_turns_dear(bool ordered)
{
	struct pk p = { .consumer = pthread_self() };
	eachobs_dataset data = { &p, pk_numobs, pk_getobs, sizeof(size_t) };
	/* basesize 1 keeps the dear indices in every worker's deque. */
	eachobs_options o = { .nthreads = WORKERS, .basesize = 1,
			      .ordered = ordered };
	eachobs_iter *it;
	const void *obs;
	size_t idx, got = 0;
	int rc;

	thread_set_init(&p.dear);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		size_t v;
		memcpy(&v, obs, sizeof(v));
		cr_assert_eq(v, idx);
		if (ordered)
			cr_assert_eq(idx, got);
		got++;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(got, N);
	eachobs_close(it);
	thread_set_fini(&p.dear);
	cr_assert_eq(p.dear.n, WORKERS,
		     "ordered %d: %u of %d workers loaded once getobs took "
		     "200 us", ordered, p.dear.n, WORKERS);
}

Test(park, unordered_parked_workers_load_again_when_getobs_turns_dear)
{
	every_worker_loads_once_getobs_turns_dear(false);
}

Test(park, ordered_parked_workers_load_again_when_getobs_turns_dear)
{
	every_worker_loads_once_getobs_turns_dear(true);
}
