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
#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>


TestSuite(start, .init = deadline, .timeout = 60);
TestSuite(next, .init = deadline, .timeout = 60);
TestSuite(errors, .init = deadline, .timeout = 60);
TestSuite(close, .init = deadline, .timeout = 60);
TestSuite(strerror, .init = deadline, .timeout = 60);
TestSuite(threads, .init = deadline, .timeout = 60);
TestSuite(memory, .init = deadline, .timeout = 60);

/* ---- helpers -------------------------------------------------------- */

static void label_of(char *buf, size_t len, const eachobs_options *o, size_t n)
{
	snprintf(buf, len,
		 "executor=%s ordered=%d n=%zu nthreads=%u buffersize=%zu "
		 "basesize=%zu oversubscription=%u",
		 executor_name(o->executor), (int)o->ordered, n, o->nthreads,
		 o->buffersize, o->basesize, o->oversubscription);
}

static eachobs_iter *start(struct td *td, const eachobs_options *o,
			   const char *label)
{
	eachobs_dataset data = td_dataset(td);
	eachobs_iter *it = NULL;
	int rc = eachobs_parallel(&it, &data, o);

	cr_assert_eq(rc, 0, "%s: eachobs_parallel returned %d (%s)", label, rc,
		     eachobs_strerror(rc));
	cr_assert_not_null(it, "%s: eachobs_parallel returned 0 and no iterator",
			   label);
	return it;
}

/* Call cons_next until it returns something other than 1 or `limit`
 * observations were yielded; assert that nothing broke on the way. */
static int drain(struct cons *c, size_t limit, const char *label)
{
	int rc = 1;

	while (c->yielded < limit) {
		rc = cons_next(c, NULL, NULL);
		cr_assert(c->err[0] == 0, "%s: %s", label, c->err);
		if (rc != 1)
			break;
	}
	cr_assert(rc <= 1, "%s: eachobs_next returned %d", label, rc);
	return rc;
}

/* Close and check that close freed everything, stopped every getobs and
 * that no callback broke a rule. */
static void finish(struct cons *c, const char *label)
{
	cons_close(c);
	cr_assert(c->err[0] == 0, "%s: %s", label, c->err);
	cr_assert_null(td_violation(c->td), "%s: %s", label, td_violation(c->td));
	cr_assert_eq(eachobs__alloc_live(), 0,
		     "%s: %ld library allocations left after eachobs_close", label,
		     eachobs__alloc_live());
	cons_fini(c);
}

/* Start, consume everything, close, and check every promise of a full
 * iteration: each index once, in order when ordered (always under SERIAL),
 * getobs once per index, numobs once, memory within the slot bound. */
static void full_iteration(struct td *td, const eachobs_options *o,
			   const char *label)
{
	bool ordered = o->ordered || o->executor == EACHOBS_SERIAL;
	eachobs_iter *it = start(td, o, label);
	struct cons c;
	int rc;

	cons_init(&c, it, td, ordered);
	rc = drain(&c, SIZE_MAX, label);
	cr_assert_eq(rc, 0, "%s: eachobs_next returned %d (%s) after %zu "
			    "observations", label, rc, eachobs_strerror(rc), c.yielded);
	cr_assert_eq(c.yielded, td->n, "%s: %zu observations yielded, n = %zu",
		     label, c.yielded, td->n);
	cr_assert(cons_all_seen(&c), "%s: an index was never yielded", label);
	finish(&c, label);
	cr_assert_eq(atomic_load(&td->getobs_calls), (long)td->n,
		     "%s: %ld getobs calls for n = %zu", label,
		     atomic_load(&td->getobs_calls), td->n);
	cr_assert_eq(atomic_load(&td->numobs_calls), 1, "%s: numobs called %ld times",
		     label, atomic_load(&td->numobs_calls));
	cr_assert_leq(atomic_load(&td->max_live), (long)slot_bound(o),
		      "%s: %ld observations live at once, more than %zu slots", label,
		      atomic_load(&td->max_live), slot_bound(o));
}

static void expect_einval(const eachobs_dataset *data, const eachobs_options *o,
			  struct td *td, const char *what)
{
	eachobs_iter *it = (eachobs_iter *)(uintptr_t)0x1;
	int rc = eachobs_parallel(&it, data, o);

	cr_assert_eq(rc, -EINVAL, "%s: eachobs_parallel returned %d (%s), not -EINVAL",
		     what, rc, eachobs_strerror(rc));
	cr_assert_null(it, "%s: *it not set to NULL on failure", what);
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: %ld allocations left", what,
		     eachobs__alloc_live());
	if (td)
		cr_assert_eq(atomic_load(&td->getobs_calls), 0,
			     "%s: getobs ran although start failed", what);
}

/* Join t by `seconds` from now or fail the test with a message. */
static void join_within(pthread_t t, double seconds, const char *what)
{
	struct timespec ts;
	long ns;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns = ts.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
	ts.tv_sec += (time_t)seconds + ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	rc = pthread_timedjoin_np(t, NULL, &ts);
	cr_assert_eq(rc, 0, "%s: thread not done within %.0f s (%s)", what, seconds,
		     rc == ETIMEDOUT ? "deadlock or lost wake-up?" : strerror(rc));
}

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
	cr_assert_leq(atomic_load(&td.max_live), (long)slot_bound(&defaults),
		      "opts = NULL: %ld live observations, default slots are %zu",
		      atomic_load(&td.max_live), slot_bound(&defaults));
	cr_assert_eq(atomic_load(&td.getobs_calls), 3000);
	td_fini(&td);

	td_init(&td, 3000, 24, 3000);
	full_iteration(&td, &defaults, "opts = { 0 }");
	td_fini(&td);
}

Test(start, calls_numobs_once_on_the_calling_thread)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
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
	}
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
		cr_assert_leq(atomic_load(&td.getobs_calls), (long)(few + slot_bound(o)),
			      "%s: %ld getobs calls for %zu yielded", label,
			      atomic_load(&td.getobs_calls), few);
	t0 = now_s();
	finish(&c, label);
	t_close = now_s() - t0;
	cr_assert_lt(t_start, 1.0, "%s: eachobs_parallel took %.3f s", label, t_start);
	cr_assert_lt(t_close, 1.0, "%s: eachobs_close took %.3f s", label, t_close);
	td_fini(&td);
	return live;
}

Test(memory, starts_over_2_pow_40_observations_in_constant_memory)
{
	size_t basesizes[] = { 0, 1, 1000 };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t b = 0; b < 3; b++) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = 4,
						      .buffersize = 8,
						      .basesize = basesizes[b] };
				long small = few_of_many(1000, &o, 50);
				long big = few_of_many((size_t)1 << 40, &o, 50);

				cr_assert_leq(big, small + 8,
					      "executor=%s ordered=%d basesize=%zu: "
					      "%ld allocations for n = 2^40, %ld for n = 1000",
					      executor_name(o.executor), ordered,
					      o.basesize, big, small);
			}
		}
	}
}

Test(memory, starts_over_size_max_observations)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
					      .nthreads = 4,
					      .buffersize = 8 };

			few_of_many(SIZE_MAX, &o, 50);
			o.basesize = 1;
			few_of_many(SIZE_MAX, &o, 50);
		}
	}
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

Test(next, empty_dataset_ends_at_once_and_again)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
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
	}
}

Test(next, calls_getobs_exactly_once_per_index)
{
	size_t sizes[] = { 1, 2, 5, 999 };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t s = 0; s < 4; s++) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
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

Test(next, returns_end_again_after_the_end)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
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
	}
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

Test(next, yields_the_slot_getobs_wrote_without_a_copy)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
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
					cr_assert_lt(ndistinct, slot_bound(&o),
						     "%s: more than %zu distinct slots", label,
						     slot_bound(&o));
					distinct[ndistinct++] = obs;
				}
			}
			cr_assert_eq(rc, 0, "%s: ended with %d; %s", label, rc, c.err);
			if (executors[e] == EACHOBS_SERIAL)
				cr_assert_eq(ndistinct, 1, "%s: SERIAL used %zu slots",
					     label, ndistinct);
			finish(&c, label);
			td_fini(&td);
		}
	}
}

Test(next, keeps_the_held_observation_unchanged_until_the_next_call)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
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
	}
}

/* ---- getobs failures ------------------------------------------------ */

/* Consume until the failure, check it and that it sticks. */
static void expect_failure(struct td *td, const eachobs_options *o, int want,
			   const char *label)
{
	bool ordered = o->ordered || o->executor == EACHOBS_SERIAL;
	struct cons c;
	size_t idx = 0;
	int rc;

	cons_init(&c, start(td, o, label), td, ordered);
	while ((rc = cons_next(&c, NULL, &idx)) == 1)
		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
	cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
	cr_assert_eq(rc, want, "%s: eachobs_next returned %d (%s) after %zu "
			       "observations, expected %d (%s)", label, rc,
		     eachobs_strerror(rc), c.yielded, want, eachobs_strerror(want));
	cr_assert_eq(idx, td->fail_idx, "%s: failure reported at idx %zu, getobs "
					"failed at %zu", label, idx, td->fail_idx);
	if (ordered)
		cr_assert_eq(c.yielded, td->fail_idx,
			     "%s: ordered: %zu observations before the failure at %zu",
			     label, c.yielded, td->fail_idx);
	else
		cr_assert_eq(c.seen[td->fail_idx], 0, "%s: the failed index was yielded",
			     label);
	for (int i = 0; i < 3; i++) {
		idx = SIZE_MAX;
		rc = cons_next(&c, NULL, &idx);
		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
		cr_assert_eq(rc, want, "%s: call %d after the failure returned %d", label,
			     i, rc);
		cr_assert_eq(idx, td->fail_idx, "%s: call %d after the failure gave "
						"idx %zu", label, i, idx);
	}
	finish(&c, label);
}

Test(errors, getobs_failure_is_reported_with_its_index_and_sticks)
{
	const size_t n = 60;
	size_t where[] = { 0, n / 2, n - 1 };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t w = 0; w < 3; w++) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = 4,
						      .buffersize = 4 };
				struct td td;
				char label[200];

				label_of(label, sizeof(label), &o, n);
				snprintf(label + strlen(label), sizeof(label) - strlen(label),
					 " fail_idx=%zu", where[w]);
				td_init(&td, n, 16, n);
				td.fail_idx = where[w];
				td.fail_code = -EIO;
				td.rand_sleep_us = 100;
				expect_failure(&td, &o, -EIO, label);
				td_fini(&td);
			}
		}
	}
}

Test(errors, ordered_failure_comes_after_every_lower_index)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		eachobs_options o = { .executor = executors[e],
				      .ordered = true,
				      .nthreads = 4,
				      .buffersize = 32 };
		struct td td;
		char label[160];

		label_of(label, sizeof(label), &o, 100);
		/* Index 20 fails at once while the lower ones take a while:
		 * the failure must still wait for 0..19. */
		td_init(&td, 100, 8, 100);
		td.fail_idx = 20;
		td.fail_code = -EBADMSG;
		td.sleep_us = 1000;
		td.sleep_below = 20;
		expect_failure(&td, &o, -EBADMSG, label);
		td_fini(&td);
	}
}

Test(errors, positive_getobs_return_is_reported_as_erange)
{
	int positives[] = { 1, 42, INT_MAX };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t p = 0; p < 3; p++) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = 2 };
				struct td td;
				char label[200];

				label_of(label, sizeof(label), &o, 30);
				snprintf(label + strlen(label), sizeof(label) - strlen(label),
					 " getobs(7) returns %d", positives[p]);
				td_init(&td, 30, 8, 30);
				td.fail_idx = 7;
				td.fail_code = positives[p];
				expect_failure(&td, &o, -ERANGE, label);
				td_fini(&td);
			}
		}
	}
}

Test(errors, getobs_codes_pass_through_unchanged)
{
	int codes[] = { -1, -EIO, -ENOMEM, -EAGAIN, -EINVAL, -ERANGE, -123456, INT_MIN };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = k % 2,
					      .nthreads = 2 };
			struct td td;
			char label[200];

			label_of(label, sizeof(label), &o, 10);
			snprintf(label + strlen(label), sizeof(label) - strlen(label),
				 " getobs(3) returns %d", codes[k]);
			td_init(&td, 10, 8, 10);
			td.fail_idx = 3;
			td.fail_code = codes[k];
			expect_failure(&td, &o, codes[k], label);
			td_fini(&td);
		}
	}
}

/* ---- eachobs_close -------------------------------------------------- */

Test(close, accepts_null)
{
	eachobs_close(NULL);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* Start, consume `k` observations (or up to the end), close. */
static void close_after(size_t n, size_t k, size_t fail_idx)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
					      .nthreads = 4,
					      .buffersize = 3 };
			struct td td;
			struct cons c;
			char label[200];
			int rc = 1, threads_after;

			label_of(label, sizeof(label), &o, n);
			snprintf(label + strlen(label), sizeof(label) - strlen(label),
				 " close after %zu", k);
			td_init(&td, n, 32, n);
			td.fail_idx = fail_idx;
			td.fail_code = -EIO;
			cons_init(&c, start(&td, &o, label), &td, false);
			while (c.yielded < k && (rc = cons_next(&c, NULL, NULL)) == 1)
				cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
			if (fail_idx != TD_NONE)
				cr_assert_eq(rc, -EIO, "%s: expected the failure, got %d",
					     label, rc);
			finish(&c, label);
			cr_assert_leq(atomic_load(&td.getobs_calls), (long)n, "%s", label);
			/* close joined every worker; joined threads may take a
			 * moment to leave /proc, running ones never do. */
			threads_after = threads_settle(threads_base, 2.0);
			cr_assert_eq(threads_after, threads_base,
				     "%s: %d threads before any start, %d after close",
				     label, threads_base, threads_after);
			td_fini(&td);
		}
	}
}

Test(close, works_before_anything_was_consumed)
{
	close_after(1000, 0, TD_NONE);
}

Test(close, works_mid_way)
{
	close_after(1000, 10, TD_NONE);
}

Test(close, works_after_the_end)
{
	close_after(100, SIZE_MAX, TD_NONE);
}

Test(close, works_after_an_error)
{
	close_after(100, SIZE_MAX, 42);
}

Test(close, returns_within_about_one_getobs_duration)
{
	/* getobs takes 50 ms; loading what is left would take seconds. */
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t k = 0; k < 3; k += 2) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = 4,
						      .buffersize = 4 };
				struct td td;
				struct cons c;
				char label[200];
				double t0, took;

				label_of(label, sizeof(label), &o, 1000);
				snprintf(label + strlen(label), sizeof(label) - strlen(label),
					 " getobs 50 ms, close after %zu", k);
				td_init(&td, 1000, 8, 1000);
				td.sleep_us = 50000;
				cons_init(&c, start(&td, &o, label), &td, false);
				cr_assert_eq(drain(&c, k, label), 1, "%s", label);
				t0 = now_s();
				finish(&c, label);
				took = now_s() - t0;
				cr_assert_lt(took, 1.0, "%s: eachobs_close took %.3f s",
					     label, took);
				td_fini(&td);
			}
		}
	}
}

Test(close, starts_no_getobs_once_begun)
{
	/* With a large buffer there is room for many more observations when
	 * close begins. A worker may have passed its last check right before
	 * close began, so each may start one getobs late; no more. */
	for (size_t e = 0; e < 2; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t k = 0; k < 6; k += 5) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = 4,
						      .buffersize = 64 };
				struct td td;
				struct cons c;
				char label[200];
				long late;

				label_of(label, sizeof(label), &o, 10000);
				snprintf(label + strlen(label), sizeof(label) - strlen(label),
					 " getobs 5 ms, close after %zu", k);
				td_init(&td, 10000, 8, 10000);
				td.sleep_us = 5000;
				cons_init(&c, start(&td, &o, label), &td, false);
				cr_assert_eq(drain(&c, k, label), 1, "%s", label);
				finish(&c, label);
				late = atomic_load(&td.after_closing);
				cr_assert_leq(late, (long)o.nthreads,
					      "%s: %ld getobs calls started after "
					      "eachobs_close began", label, late);
				td_fini(&td);
			}
		}
	}
}

/* ---- eachobs_strerror ----------------------------------------------- */

static void expect_readable(int code)
{
	const char *s = eachobs_strerror(code);

	cr_assert_not_null(s, "eachobs_strerror(%d) returned NULL", code);
	cr_assert_geq(strlen(s), 4, "eachobs_strerror(%d) = \"%s\" is too short",
		      code, s);
	for (const char *p = s; *p; p++)
		cr_assert(isprint((unsigned char)*p),
			  "eachobs_strerror(%d) has an unprintable byte 0x%02x", code,
			  (unsigned char)*p);
}

Test(strerror, never_returns_null)
{
	int extremes[] = { INT_MIN, INT_MIN + 1, -123456, 2, 100, INT_MAX };

	for (int code = -300; code <= 5; code++)
		expect_readable(code);
	for (size_t k = 0; k < sizeof(extremes) / sizeof(extremes[0]); k++)
		expect_readable(extremes[k]);
}

Test(strerror, names_library_codes_distinctly)
{
	int codes[] = { -EINVAL, -ENOMEM, -EAGAIN, -ERANGE, 0, 1 };
	const size_t ncodes = sizeof(codes) / sizeof(codes[0]);
	const char *generic = eachobs_strerror(-123456);

	for (size_t i = 0; i < ncodes; i++) {
		expect_readable(codes[i]);
		cr_assert_str_neq(eachobs_strerror(codes[i]), generic,
				  "eachobs_strerror(%d) is the generic message \"%s\"",
				  codes[i], generic);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(eachobs_strerror(codes[i]),
					  eachobs_strerror(codes[j]),
					  "codes %d and %d share the message \"%s\"",
					  codes[i], codes[j], eachobs_strerror(codes[i]));
	}
}

Test(strerror, has_generic_text_for_unknown_codes)
{
	int unknown[] = { -123456, -99999, 77, INT_MIN };

	for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++)
		expect_readable(unknown[k]);
	cr_assert_str_eq(eachobs_strerror(-123456), eachobs_strerror(-99999),
			 "two unknown codes give different texts: \"%s\", \"%s\"",
			 eachobs_strerror(-123456), eachobs_strerror(-99999));
}

Test(strerror, gives_readable_text_for_codes_passed_through_from_getobs)
{
	/* Codes getobs may return: not the library's own, but each still gets
	 * a readable message (the generic one is allowed). */
	int codes[] = { -EIO, -ENOENT, -EBADMSG, -EINTR, -1, -4095 };

	for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++)
		expect_readable(codes[k]);
}

/* ---- which threads run getobs --------------------------------------- */

Test(threads, serial_runs_getobs_on_the_consumer_inside_next)
{
	eachobs_options o = { .executor = EACHOBS_SERIAL, .nthreads = 8,
			      .buffersize = 8 };
	struct td td;
	struct cons c;
	int rc;

	td_init(&td, 200, 8, 200);
	td.check_threads = true;
	cons_init(&c, start(&td, &o, "SERIAL"), &td, true);
	cr_assert_eq(atomic_load(&td.getobs_calls), 0,
		     "SERIAL: getobs ran inside eachobs_parallel");
	while ((rc = cons_next(&c, NULL, NULL)) == 1) {
		cr_assert(c.err[0] == 0, "SERIAL: %s", c.err);
		/* Every call loads exactly the one it yields. */
		cr_assert_eq(atomic_load(&td.getobs_calls), (long)c.yielded,
			     "SERIAL: %ld getobs calls after %zu eachobs_next calls",
			     atomic_load(&td.getobs_calls), c.yielded);
	}
	cr_assert_eq(rc, 0, "SERIAL: ended with %d", rc);
	finish(&c, "SERIAL");
	cr_assert_eq(atomic_load(&td.on_consumer), 200);
	cr_assert_eq(atomic_load(&td.off_consumer), 0,
		     "SERIAL: %ld getobs calls on another thread",
		     atomic_load(&td.off_consumer));
	cr_assert_leq(atomic_load(&td.max_live), 1, "SERIAL: %ld live observations",
		      atomic_load(&td.max_live));
	td_fini(&td);
}

Test(threads, background_never_runs_getobs_on_the_consumer)
{
	/* Slow getobs keeps the consumer waiting, fast getobs keeps it busy:
	 * neither may tempt it to load. */
	unsigned sleeps[] = { 1000, 0 };
	size_t sizes[] = { 50, 3000 };

	for (int ordered = 0; ordered < 2; ordered++) {
		for (size_t k = 0; k < 2; k++) {
			eachobs_options o = { .executor = EACHOBS_BACKGROUND,
					      .ordered = ordered,
					      .nthreads = k ? 2 : 1 };
			struct td td;
			char label[200];

			label_of(label, sizeof(label), &o, sizes[k]);
			td_init(&td, sizes[k], 8, sizes[k]);
			td.check_threads = true;
			td.sleep_us = sleeps[k];
			full_iteration(&td, &o, label);
			cr_assert_eq(atomic_load(&td.on_consumer), 0,
				     "%s: %ld getobs calls on the consumer's thread",
				     label, atomic_load(&td.on_consumer));
			td_fini(&td);
		}
	}
}

Test(threads, threaded_consumer_helps_while_waiting)
{
	eachobs_options o = { .executor = EACHOBS_THREADED, .nthreads = 1 };
	struct td td;

	td_init(&td, 50, 8, 50);
	td.check_threads = true;
	td.sleep_us = 2000;
	full_iteration(&td, &o, "THREADED nthreads=1 n=50 getobs 2 ms");
	cr_assert_geq(atomic_load(&td.on_consumer), 1,
		      "THREADED: the waiting consumer ran no getobs (%ld on workers)",
		      atomic_load(&td.off_consumer));
	td_fini(&td);
}

struct side {
	eachobs_options o;
	struct td td;
	pthread_barrier_t *all_started;
	char err[400];
};

/* One iterator on its own thread: start, wait until every other iterator
 * exists too, consume everything, close. Records instead of asserting. */
static void *side_run(void *arg)
{
	struct side *s = arg;
	bool ordered = s->o.ordered || s->o.executor == EACHOBS_SERIAL;
	eachobs_dataset data;
	eachobs_iter *it = NULL;
	struct cons c;
	int rc;

	s->td.creator = pthread_self();
	s->td.consumer = pthread_self();
	s->td.check_threads = true;
	data = td_dataset(&s->td);
	rc = eachobs_parallel(&it, &data, &s->o);
	pthread_barrier_wait(s->all_started);
	if (rc != 0) {
		snprintf(s->err, sizeof(s->err), "start failed with %d", rc);
		return NULL;
	}
	cons_init(&c, it, &s->td, ordered);
	while ((rc = cons_next(&c, NULL, NULL)) == 1 && !c.err[0])
		;
	if (!c.err[0] && rc != 0)
		snprintf(c.err, sizeof(c.err), "ended with %d", rc);
	if (!c.err[0] && !cons_all_seen(&c))
		snprintf(c.err, sizeof(c.err), "an index was never yielded");
	cons_close(&c);
	if (c.err[0])
		snprintf(s->err, sizeof(s->err), "%s", c.err);
	else if (td_violation(&s->td))
		snprintf(s->err, sizeof(s->err), "%s", td_violation(&s->td));
	else if (atomic_load(&s->td.max_live) > (long)slot_bound(&s->o))
		snprintf(s->err, sizeof(s->err), "%ld live observations",
			 atomic_load(&s->td.max_live));
	else if (s->o.executor == EACHOBS_SERIAL && atomic_load(&s->td.off_consumer))
		snprintf(s->err, sizeof(s->err), "SERIAL ran getobs off the consumer");
	else if (s->o.executor == EACHOBS_BACKGROUND && atomic_load(&s->td.on_consumer))
		snprintf(s->err, sizeof(s->err), "BACKGROUND ran getobs on the consumer");
	cons_fini(&c);
	return NULL;
}

Test(threads, several_iterators_live_at_once_on_different_threads)
{
	enum { NSIDES = 6 };
	static struct side sides[NSIDES];
	pthread_t threads[NSIDES];
	pthread_barrier_t barrier;

	pthread_barrier_init(&barrier, NULL, NSIDES);
	for (int i = 0; i < NSIDES; i++) {
		sides[i].o = (eachobs_options){ .executor = executors[i % 3],
						.ordered = i / 3,
						.nthreads = 1 + (unsigned)i,
						.buffersize = 2 + (size_t)i };
		td_init(&sides[i].td, 2000 + 100 * (size_t)i, 48, SIZE_MAX);
		sides[i].td.seed = (uint64_t)i;
		sides[i].all_started = &barrier;
		sides[i].err[0] = 0;
		cr_assert_eq(pthread_create(&threads[i], NULL, side_run, &sides[i]), 0);
	}
	for (int i = 0; i < NSIDES; i++)
		join_within(threads[i], 30.0, "an iterator's consumer");
	for (int i = 0; i < NSIDES; i++) {
		char label[160];

		label_of(label, sizeof(label), &sides[i].o, sides[i].td.n);
		cr_assert(sides[i].err[0] == 0, "%s: %s", label, sides[i].err);
		cr_assert_eq(atomic_load(&sides[i].td.numobs_off_creator), 0, "%s", label);
		td_fini(&sides[i].td);
	}
	pthread_barrier_destroy(&barrier);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

struct handover {
	struct cons *c;
	size_t until;
	int rc;
};

static void *consume_some(void *arg)
{
	struct handover *h = arg;

	h->rc = 1;
	while (h->c->yielded < h->until && (h->rc = cons_next(h->c, NULL, NULL)) == 1 &&
	       !h->c->err[0])
		;
	return NULL;
}

Test(threads, consumer_may_move_between_threads)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = ordered,
					      .nthreads = 3,
					      .buffersize = 4 };
			struct td td;
			struct cons c;
			char label[160];
			size_t stops[] = { 10, 150, SIZE_MAX };

			label_of(label, sizeof(label), &o, 300);
			td_init(&td, 300, 24, 300);
			cons_init(&c, start(&td, &o, label), &td,
				  ordered || executors[e] == EACHOBS_SERIAL);
			/* Three threads take turns as the one consumer; joining
			 * one before starting the next orders their calls. */
			for (int k = 0; k < 3; k++) {
				struct handover h = { .c = &c, .until = stops[k] };
				pthread_t t;

				cr_assert_eq(pthread_create(&t, NULL, consume_some, &h), 0);
				join_within(t, 30.0, label);
				cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
				cr_assert_eq(h.rc, k < 2 ? 1 : 0, "%s: turn %d ended with %d",
					     label, k, h.rc);
			}
			cr_assert(cons_all_seen(&c), "%s: an index was never yielded", label);
			finish(&c, label);
			td_fini(&td);
		}
	}
}

/* ---- memory bound --------------------------------------------------- */

Test(memory, live_observations_stay_within_buffersize_plus_nthreads_plus_one)
{
	unsigned nthreads[] = { 1, 3, 8 };
	size_t buffersizes[] = { 1, 4, 16 };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			for (size_t k = 0; k < 3; k++) {
				eachobs_options o = { .executor = executors[e],
						      .ordered = ordered,
						      .nthreads = nthreads[k],
						      .buffersize = buffersizes[2 - k] };
				struct td td;
				struct cons c;
				char label[160];
				int rc;

				label_of(label, sizeof(label), &o, 2000);
				td_init(&td, 2000, 64, 2000);
				td.rand_sleep_us = 50;
				if (ordered)
					td.window = slot_bound(&o);
				cons_init(&c, start(&td, &o, label), &td, false);
				/* The consumer pauses now and then so that the
				 * workers fill every slot they may use. */
				while ((rc = cons_next(&c, NULL, NULL)) == 1) {
					cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
					if (c.yielded % 16 == 0)
						sleep_us(300);
				}
				cr_assert_eq(rc, 0, "%s: ended with %d; %s", label, rc, c.err);
				finish(&c, label);
				cr_assert_leq(atomic_load(&td.max_live), (long)slot_bound(&o),
					      "%s: %ld observations live at once, bound %zu",
					      label, atomic_load(&td.max_live),
					      slot_bound(&o));
				td_fini(&td);
			}
		}
	}
}

Test(memory, ordered_window_bounds_memory_behind_a_slow_index)
{
	for (size_t e = 0; e < 2; e++) {
		for (size_t slow = 0; slow < 200; slow += 97) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = true,
					      .nthreads = 4,
					      .buffersize = 4 };
			struct td td;
			char label[200];

			label_of(label, sizeof(label), &o, 400);
			snprintf(label + strlen(label), sizeof(label) - strlen(label),
				 " getobs(%zu) takes 30 ms", slow);
			/* While index `slow` loads, the others are fast: only the
			 * window keeps the workers from racing ahead. */
			td_init(&td, 400, 32, 400);
			td.slow_idx = slow;
			td.slow_us = 30000;
			td.window = slot_bound(&o);
			full_iteration(&td, &o, label);
			td_fini(&td);
		}
	}
}
