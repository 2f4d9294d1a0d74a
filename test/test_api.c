/*
 * One test per promise of include/eachobs.h.
 *
 * Every test runs in its own process (Criterion forks), so
 * eachobs__alloc_live() starts at 0 and must be 0 again after every close.
 * Every test runs under a watchdog (a deadline that fails it with a
 * message), and the ones that wait on threads of their own join them with a
 * deadline too.
 */
#define _GNU_SOURCE
#include "api_helpers.h"

#include <criterion/parameterized.h>
#include <ctype.h>
#include <limits.h>

TestSuite(start, .init = deadline, .timeout = 60);
TestSuite(next, .init = deadline, .timeout = 60);
TestSuite(memory, .init = deadline, .timeout = 60);

/* ---- eachobs_parallel: validation ----------------------------------- */

Test(start, rejects_null_iterator_pointer)
{
	struct td td;
	eachobs_dataset data;
	int rc;

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	rc = eachobs_parallel(NULL, &data, NULL);
	cr_assert_eq(rc, -EINVAL, "eachobs_parallel(NULL, ...) returned %d", rc);
	cr_assert_eq(eachobs__alloc_live(), 0);
	cr_assert_eq(atomic_load(&td.getobs_calls), 0);
	td_fini(&td);
}

Test(start, rejects_null_dataset)
{
	expect_einval(NULL, NULL, NULL, "data = NULL");
}

Test(start, rejects_null_numobs)
{
	struct td td;
	eachobs_dataset data;

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	data.numobs = NULL;
	expect_einval(&data, NULL, &td, "numobs = NULL");
	td_fini(&td);
}

Test(start, rejects_null_getobs)
{
	struct td td;
	eachobs_dataset data;

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	data.getobs = NULL;
	expect_einval(&data, NULL, &td, "getobs = NULL");
	cr_assert_eq(eachobs__alloc_live(), 0);
	td_fini(&td);
}

Test(start, rejects_executor_out_of_range)
{
	struct td td;
	eachobs_dataset data;
	eachobs_options o = { .executor = (eachobs_executor)(EACHOBS_SERIAL + 1) };

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	expect_einval(&data, &o, &td, "executor = EACHOBS_SERIAL + 1");
	o.executor = (eachobs_executor)-1;
	expect_einval(&data, &o, &td, "executor = -1");
	o.executor = (eachobs_executor)1000;
	expect_einval(&data, &o, &td, "executor = 1000");
	td_fini(&td);
}

Test(start, rejects_more_than_max_threads)
{
	struct td td;
	eachobs_dataset data;
	eachobs_options o = { .nthreads = EACHOBS_MAX_THREADS + 1 };

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	expect_einval(&data, &o, &td, "nthreads = EACHOBS_MAX_THREADS + 1");
	o.nthreads = UINT_MAX;
	o.executor = EACHOBS_BACKGROUND;
	expect_einval(&data, &o, &td, "nthreads = UINT_MAX, BACKGROUND");
	td_fini(&td);
}

Test(start, rejects_slot_count_over_max)
{
	struct td td;
	eachobs_dataset data;
	/* buffersize + nthreads + 1 = EACHOBS_MAX_SLOTS + 1. */
	eachobs_options o = { .nthreads = 1, .buffersize = EACHOBS_MAX_SLOTS - 1 };

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	expect_einval(&data, &o, &td, "buffersize + nthreads + 1 = MAX_SLOTS + 1");
	o.ordered = true;
	expect_einval(&data, &o, &td, "ordered, buffersize + nthreads + 1 = MAX_SLOTS + 1");
	o = (eachobs_options){ .buffersize = EACHOBS_MAX_SLOTS };
	expect_einval(&data, &o, &td, "default nthreads, buffersize = MAX_SLOTS");
	td_fini(&td);
}

Test(start, rejects_slot_count_that_wraps_around)
{
	struct td td;
	eachobs_dataset data;
	/* SIZE_MAX - 2 + 4 + 1 wraps to 2: a small, wrong slot count. */
	eachobs_options o = { .nthreads = 4, .buffersize = SIZE_MAX - 2 };

	td_init(&td, 10, 8, 10);
	data = td_dataset(&td);
	expect_einval(&data, &o, &td, "buffersize = SIZE_MAX - 2, nthreads = 4");
	o.buffersize = SIZE_MAX;
	o.executor = EACHOBS_BACKGROUND;
	o.ordered = true;
	expect_einval(&data, &o, &td, "buffersize = SIZE_MAX, BACKGROUND ordered");
	td_fini(&td);
}

Test(start, rejects_slot_memory_that_overflows)
{
	struct td td;
	eachobs_dataset data;
	eachobs_options o = { .nthreads = 1, .buffersize = 16 };

	td_init(&td, 10, 0, 10);
	data = td_dataset(&td);
	/* 18 slots of SIZE_MAX / 8 bytes overflow size_t. */
	data.obs_size = SIZE_MAX / 8;
	expect_einval(&data, &o, &td, "obs_size = SIZE_MAX / 8, 18 slots");
	/* Rounding SIZE_MAX up to 64 bytes overflows by itself. */
	data.obs_size = SIZE_MAX;
	expect_einval(&data, &o, &td, "obs_size = SIZE_MAX");
	data.obs_size = SIZE_MAX - 62;
	o.ordered = true;
	expect_einval(&data, &o, &td, "obs_size = SIZE_MAX - 62, ordered");
	td_fini(&td);
}

/* ---- eachobs_parallel: defaults and numobs -------------------------- */

Test(start, null_options_mean_defaults)
{
	struct td td;
	eachobs_options defaults = { 0 };

	td_init(&td, 3000, 24, 3000);
	td.check_threads = true;
	{
		eachobs_iter *it = start(&td, NULL, "opts = NULL");
		struct cons c;
		int rc;

		cons_init(&c, it, &td, false);
		rc = drain(&c, SIZE_MAX, "opts = NULL");
		cr_assert_eq(rc, 0, "opts = NULL: ended with %d", rc);
		cr_assert(cons_all_seen(&c), "opts = NULL: an index was never yielded");
		finish(&c, "opts = NULL");
	}
	/* The defaults: THREADED, online CPUs, buffersize max(16, 4 * CPUs). */
	cr_assert_leq(atomic_load(&td.max_live), (long)slot_bound(&defaults, td.obs_size),
		      "opts = NULL: %ld live observations, default slots are %zu",
		      atomic_load(&td.max_live), slot_bound(&defaults, td.obs_size));
	cr_assert_eq(atomic_load(&td.getobs_calls), 3000);
	td_fini(&td);

	td_init(&td, 3000, 24, 3000);
	full_iteration(&td, &defaults, "opts = { 0 }");
	td_fini(&td);
}

ParameterizedTestParameters(start, calls_numobs_once_on_the_calling_thread)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, start,
		  calls_numobs_once_on_the_calling_thread)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 3 };
	struct td td;
	struct cons c;
	char label[160];

	label_of(label, sizeof(label), &o, 200);
	td_init(&td, 200, 8, 200);
	cons_init(&c, start(&td, &o, label), &td, false);
	cr_assert_eq(atomic_load(&td.numobs_calls), 1,
		     "%s: numobs called %ld times by eachobs_parallel",
		     label, atomic_load(&td.numobs_calls));
	cr_assert_eq(atomic_load(&td.numobs_off_creator), 0,
		     "%s: numobs ran on another thread", label);
	drain(&c, SIZE_MAX, label);
	finish(&c, label);
	cr_assert_eq(atomic_load(&td.numobs_calls), 1,
		     "%s: numobs called %ld times in all", label,
		     atomic_load(&td.numobs_calls));
	td_fini(&td);
}

static int trap_getobs(void *ctx, size_t idx, void *obs)
{
	(void)obs;
	td_violate(ctx, "getobs(%zu) went through the caller's dataset struct, "
			"which was overwritten after eachobs_parallel", idx);
	return -EIO;
}

static size_t trap_numobs(void *ctx)
{
	td_violate(ctx, "numobs went through the caller's overwritten dataset struct");
	return 0;
}

Test(start, copies_the_dataset)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		eachobs_options o = { .executor = executors[e], .nthreads = 2 };
		eachobs_dataset data;
		eachobs_iter *it = NULL;
		struct td td;
		struct cons c;
		char label[160];
		int rc;

		label_of(label, sizeof(label), &o, 300);
		td_init(&td, 300, 40, 300);
		data = td_dataset(&td);
		rc = eachobs_parallel(&it, &data, &o);
		cr_assert_eq(rc, 0, "%s: start failed with %d", label, rc);
		/* The library copied *data: scribbling over it changes nothing. */
		data.getobs = trap_getobs;
		data.numobs = trap_numobs;
		data.obs_size = 1;
		cons_init(&c, it, &td, executors[e] == EACHOBS_SERIAL);
		rc = drain(&c, SIZE_MAX, label);
		cr_assert_eq(rc, 0, "%s: ended with %d after the dataset struct was "
				    "overwritten", label, rc);
		cr_assert_eq(c.yielded, 300, "%s", label);
		finish(&c, label);
		td_fini(&td);
	}
}

/* ---- eachobs_parallel: constant start-up cost ----------------------- */

/* Start over n observations, yield a few, close; return the allocations
 * live while the iterator ran and check the time taken by start and close. */
static long few_of_many(size_t n, const eachobs_options *o, size_t few)
{
	bool ordered = o->ordered || o->executor == EACHOBS_SERIAL;
	struct td td;
	struct cons c;
	eachobs_iter *it;
	char label[200];
	double t0, t_start, t_close;
	long live;
	int rc;

	label_of(label, sizeof(label), o, n);
	td_init(&td, n, sizeof(size_t), 0);
	td.fill = false;
	td.write_idx = true;
	t0 = now_s();
	it = start(&td, o, label);
	t_start = now_s() - t0;
	live = eachobs__alloc_live();
	cons_init(&c, it, &td, ordered);
	rc = drain(&c, few, label);
	cr_assert_eq(rc, 1, "%s: ended with %d after %zu observations", label, rc,
		     c.yielded);
	cr_assert_eq(c.yielded, few, "%s", label);
	if (!ordered)
		cr_assert_leq(atomic_load(&td.getobs_calls), (long)(few + slot_bound(o, td.obs_size)),
			      "%s: %ld getobs calls for %zu yielded", label,
			      atomic_load(&td.getobs_calls), few);
	t0 = now_s();
	finish(&c, label);
	t_close = now_s() - t0;
	/* Not a speed check: anything proportional to n (2^40 or SIZE_MAX)
	 * would take hours. 30 s leaves room for valgrind on a busy machine
	 * (1.6 s was seen there against 1 s allowed before). */
	cr_assert_lt(t_start, 30.0, "%s: eachobs_parallel took %.3f s", label, t_start);
	cr_assert_lt(t_close, 30.0, "%s: eachobs_close took %.3f s", label, t_close);
	td_fini(&td);
	return live;
}

ParameterizedTestParameters(memory,
			    starts_over_2_pow_40_observations_in_constant_memory)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, memory,
		  starts_over_2_pow_40_observations_in_constant_memory)
{
	size_t basesizes[] = { 0, 1, 1000 };

	for (size_t b = 0; b < 3; b++) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
				      .nthreads = 4,
				      .buffersize = 8,
				      .basesize = basesizes[b] };
		long small = few_of_many(1000, &o, 50);
		long big = few_of_many((size_t)1 << 40, &o, 50);

		cr_assert_leq(big, small + 8,
			      "executor=%s ordered=%d basesize=%zu: "
			      "%ld allocations for n = 2^40, %ld for n = 1000",
			      executor_name(o.executor), m->ordered,
			      o.basesize, big, small);
	}
}

ParameterizedTestParameters(memory, starts_over_size_max_observations)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, memory,
		  starts_over_size_max_observations)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 4,
			      .buffersize = 8 };

	few_of_many(SIZE_MAX, &o, 50);
	o.basesize = 1;
	few_of_many(SIZE_MAX, &o, 50);
}

/* ---- eachobs_next --------------------------------------------------- */

Test(next, rejects_null_iterator)
{
	const void *obs = &obs;
	size_t idx = 7;
	int rc = eachobs_next(NULL, &obs, &idx);

	cr_assert_eq(rc, -EINVAL, "eachobs_next(NULL) returned %d", rc);
	rc = eachobs_next(NULL, NULL, NULL);
	cr_assert_eq(rc, -EINVAL, "eachobs_next(NULL, NULL, NULL) returned %d", rc);
}

ParameterizedTestParameters(next, empty_dataset_ends_at_once_and_again)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, next,
		  empty_dataset_ends_at_once_and_again)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 4 };
	struct td td;
	struct cons c;
	char label[160];

	label_of(label, sizeof(label), &o, 0);
	td_init(&td, 0, 16, 0);
	cons_init(&c, start(&td, &o, label), &td, true);
	for (int i = 0; i < 3; i++) {
		int rc = cons_next(&c, NULL, NULL);

		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
		cr_assert_eq(rc, 0, "%s: call %d returned %d", label, i, rc);
	}
	finish(&c, label);
	cr_assert_eq(atomic_load(&td.getobs_calls), 0, "%s: getobs ran", label);
	cr_assert_eq(atomic_load(&td.numobs_calls), 1, "%s", label);
	td_fini(&td);
}

ParameterizedTestParameters(next, calls_getobs_exactly_once_per_index)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, next,
		  calls_getobs_exactly_once_per_index)
{
	size_t sizes[] = { 1, 2, 5, 999 };

	for (size_t s = 0; s < 4; s++) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
				      .nthreads = 3,
				      .buffersize = 4 };
		struct td td;
		char label[160];

		label_of(label, sizeof(label), &o, sizes[s]);
		td_init(&td, sizes[s], 72, sizes[s]);
		full_iteration(&td, &o, label);
		td_fini(&td);
	}
}

Test(next, yields_indices_in_order_with_one_slot)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		eachobs_options o = { .executor = executors[e],
				      .ordered = true,
				      .nthreads = 4,
				      .buffersize = 1 };
		struct td td;
		char label[160];

		label_of(label, sizeof(label), &o, 2000);
		td_init(&td, 2000, 8, 2000);
		td.rand_sleep_us = 20;
		full_iteration(&td, &o, label);
		td_fini(&td);
	}
}

Test(next, serial_yields_in_index_order_even_when_unordered)
{
	eachobs_options o = { .executor = EACHOBS_SERIAL, .ordered = false };
	struct td td;

	td_init(&td, 500, 8, 500);
	full_iteration(&td, &o, "SERIAL, ordered = false");
	td_fini(&td);
}

ParameterizedTestParameters(next, returns_end_again_after_the_end)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, next, returns_end_again_after_the_end)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 2 };
	struct td td;
	struct cons c;
	char label[160];

	label_of(label, sizeof(label), &o, 100);
	td_init(&td, 100, 8, 100);
	cons_init(&c, start(&td, &o, label), &td, false);
	cr_assert_eq(drain(&c, SIZE_MAX, label), 0, "%s", label);
	for (int i = 0; i < 5; i++) {
		int rc = cons_next(&c, NULL, NULL);

		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
		cr_assert_eq(rc, 0, "%s: call %d after the end returned %d",
			     label, i, rc);
	}
	cr_assert_eq(atomic_load(&td.getobs_calls), 100, "%s", label);
	finish(&c, label);
	td_fini(&td);
}

Test(next, accepts_null_outputs)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		eachobs_options o = { .executor = executors[e], .nthreads = 2 };
		eachobs_iter *it;
		struct td td;
		char label[160];
		size_t got = 0;
		int rc;

		label_of(label, sizeof(label), &o, 50);
		td_init(&td, 50, 8, 50);
		it = start(&td, &o, label);
		while ((rc = eachobs_next(it, NULL, NULL)) == 1)
			got++;
		cr_assert_eq(rc, 0, "%s: ended with %d", label, rc);
		cr_assert_eq(got, 50, "%s: %zu observations", label, got);
		cr_assert_eq(eachobs_next(it, NULL, NULL), 0, "%s", label);
		eachobs_close(it);
		cr_assert_eq(eachobs__alloc_live(), 0, "%s", label);
		td_fini(&td);
	}
}

ParameterizedTestParameters(next, yields_the_slot_getobs_wrote_without_a_copy)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, next,
		  yields_the_slot_getobs_wrote_without_a_copy)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 3,
			      .buffersize = 5 };
	const void *distinct[64];
	size_t ndistinct = 0;
	struct td td;
	struct cons c;
	char label[160];
	const void *obs;
	int rc;

	label_of(label, sizeof(label), &o, 1000);
	td_init(&td, 1000, 100, 1000);
	cons_init(&c, start(&td, &o, label), &td, false);
	/* cons_next checks that each yielded pointer is the one
	 * getobs wrote; here also count the distinct slots. */
	while ((rc = cons_next(&c, &obs, NULL)) == 1) {
		size_t k;

		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
		for (k = 0; k < ndistinct && distinct[k] != obs; k++)
			;
		if (k == ndistinct) {
			cr_assert_lt(ndistinct, slot_bound(&o, td.obs_size),
				     "%s: more than %zu distinct slots", label,
				     slot_bound(&o, td.obs_size));
			distinct[ndistinct++] = obs;
		}
	}
	cr_assert_eq(rc, 0, "%s: ended with %d; %s", label, rc, c.err);
	if (m->executor == EACHOBS_SERIAL)
		cr_assert_eq(ndistinct, 1, "%s: SERIAL used %zu slots",
			     label, ndistinct);
	finish(&c, label);
	td_fini(&td);
}

ParameterizedTestParameters(next,
			    keeps_the_held_observation_unchanged_until_the_next_call)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, next,
		  keeps_the_held_observation_unchanged_until_the_next_call)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 4,
			      .buffersize = 2 };
	struct td td;
	struct cons c;
	char label[160];
	int rc;

	label_of(label, sizeof(label), &o, 300);
	td_init(&td, 300, 256, 300);
	cons_init(&c, start(&td, &o, label), &td, false);
	/* A slow consumer gives the workers every chance to
	 * write into the held slot; cons_next compares its bytes
	 * with the pattern again before letting go of it. */
	while ((rc = cons_next(&c, NULL, NULL)) == 1) {
		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
		sleep_us(200);
	}
	cr_assert_eq(rc, 0, "%s: ended with %d; %s", label, rc, c.err);
	finish(&c, label);
	td_fini(&td);
}

