/*
 * Worker stack size: eachobs_options.stack_size, default
 * EACHOBS_DEFAULT_STACK_SIZE, below PTHREAD_STACK_MIN rejected.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "fault.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

struct stackds {
	pthread_t consumer;
	atomic_size_t min_stack; /* smallest stack a worker getobs saw */
	atomic_int failures;
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 64;
}

static size_t my_stack_size(void)
{
	pthread_attr_t attr;
	size_t size = 0;

	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return 0;
	pthread_attr_getstacksize(&attr, &size);
	pthread_attr_destroy(&attr);
	return size;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct stackds *d = ctx;

	*(size_t *)obs = idx;
	if (pthread_equal(pthread_self(), d->consumer))
		return 0;
	size_t s = my_stack_size(), cur = atomic_load(&d->min_stack);
	if (s == 0)
		atomic_fetch_add(&d->failures, 1);
	while (s < cur && !atomic_compare_exchange_weak(&d->min_stack, &cur, s))
		;
	return 0;
}

/* Run to the end; return the smallest worker stack getobs saw. */
static size_t run(size_t stack_size)
{
	struct stackds d = { .consumer = pthread_self() };
	eachobs_dataset data = { &d, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 3, .executor = EACHOBS_BACKGROUND,
			      .stack_size = stack_size };
	eachobs_iter *it;
	const void *obs;
	size_t idx;
	int rc;

	atomic_init(&d.min_stack, SIZE_MAX);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		;
	eachobs_close(it);
	cr_assert_eq(rc, 0);
	cr_assert_eq(atomic_load(&d.failures), 0, "pthread_getattr_np failed");
	return atomic_load(&d.min_stack);
}

Test(stack, default_worker_stack_is_the_documented_default)
{
	size_t s = run(0);

	cr_assert_geq(s, EACHOBS_DEFAULT_STACK_SIZE,
		      "worker stack %zu < default %zu", s,
		      (size_t)EACHOBS_DEFAULT_STACK_SIZE);
	cr_assert_lt(s, 2 * EACHOBS_DEFAULT_STACK_SIZE,
		     "worker stack %zu is not the default %zu", s,
		     (size_t)EACHOBS_DEFAULT_STACK_SIZE);
}

Test(stack, workers_get_the_requested_stack_size)
{
	size_t want = 16u << 20;
	size_t s = run(want);

	cr_assert_geq(s, want, "worker stack %zu < requested %zu", s, want);
}

Test(stack, rejects_stack_below_pthread_stack_min_unless_serial)
{
	struct stackds d = { .consumer = pthread_self() };
	eachobs_dataset data = { &d, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 2,
			      .stack_size = (size_t)PTHREAD_STACK_MIN - 1 };
	eachobs_iter *it = (eachobs_iter *)&d;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	cr_assert_null(it);
	cr_assert_eq(eachobs__alloc_live(), 0);
	/* SERIAL starts no thread and ignores it, as the header says. */
	o.executor = EACHOBS_SERIAL;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	eachobs_close(it);
}
