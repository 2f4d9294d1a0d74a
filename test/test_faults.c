/*
 * Injected failures: every allocation and every thread creation of
 * eachobs_parallel fails in turn (as zix's tests do), and each failure must
 * leave nothing behind: -ENOMEM or -EAGAIN, *it == NULL, no getobs call,
 * no allocation and no thread left.
 *
 * The fault counters are thread-local to the thread that arms them, which is
 * the thread that calls eachobs_parallel here. Every test disarms (k = -1)
 * before it iterates, and again at the end.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>


TestSuite(faults, .init = deadline, .timeout = 60);

/* No test gets anywhere near this many allocations or threads at start. */
#define MAX_STEPS 100000L

static void disarm(void)
{
	eachobs__fault_alloc_after(-1);
	eachobs__fault_thread_after(-1);
}

static void label_of(char *buf, size_t len, const eachobs_options *o, size_t n)
{
	snprintf(buf, len,
		 "executor=%s ordered=%d n=%zu nthreads=%u buffersize=%zu basesize=%zu",
		 executor_name(o->executor), (int)o->ordered, n, o->nthreads,
		 o->buffersize, o->basesize);
}

/* After a successful start: consume everything and close cleanly. */
static void iterate_fully(eachobs_iter *it, struct td *td, const eachobs_options *o,
			  const char *label)
{
	struct cons c;
	int rc;

	cons_init(&c, it, td, o->ordered || o->executor == EACHOBS_SERIAL);
	while ((rc = cons_next(&c, NULL, NULL)) == 1)
		cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
	cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
	cr_assert_eq(rc, 0, "%s: ended with %d (%s)", label, rc, eachobs_strerror(rc));
	cr_assert(cons_all_seen(&c), "%s: an index was never yielded", label);
	cons_close(&c);
	cr_assert(c.err[0] == 0, "%s: %s", label, c.err);
	cr_assert_null(td_violation(td), "%s: %s", label, td_violation(td));
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: %ld allocations left after close",
		     label, eachobs__alloc_live());
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base,
		     "%s: threads left running after close", label);
	cons_fini(&c);
}

/*
 * Arm a fault with `arm`(k) for k = 0, 1, 2, ... and start; every start
 * must fail with `want` and leave nothing behind until one succeeds, which
 * then iterates normally. Returns the k that succeeded.
 */
static long fail_each_step(void (*arm)(long), int want, size_t n,
			   const eachobs_options *o, const char *what)
{
	char label[200];

	label_of(label, sizeof(label), o, n);
	for (long k = 0; k < MAX_STEPS; k++) {
		eachobs_iter *it = (eachobs_iter *)(uintptr_t)0x1;
		eachobs_dataset data;
		struct td td;
		long getobs_calls, numobs_calls;
		int rc, threads_after;

		td_init(&td, n, 24, n);
		data = td_dataset(&td);
		arm(k);
		rc = eachobs_parallel(&it, &data, o);
		disarm();
		/* The library joined every thread it started before it
		 * returned, so these counts are final. */
		getobs_calls = atomic_load(&td.getobs_calls);
		numobs_calls = atomic_load(&td.numobs_calls);
		cr_assert_leq(numobs_calls, 1, "%s, %s %ld: numobs called %ld times",
			      label, what, k, numobs_calls);
		if (rc == 0) {
			cr_assert_not_null(it, "%s, %s %ld: success without an iterator",
					   label, what, k);
			iterate_fully(it, &td, o, label);
			td_fini(&td);
			return k;
		}
		cr_assert_eq(rc, want, "%s, %s %ld: eachobs_parallel returned %d (%s), "
				       "expected %d", label, what, k, rc,
			     eachobs_strerror(rc), want);
		cr_assert_null(it, "%s, %s %ld: *it not NULL after failure", label, what, k);
		cr_assert_eq(getobs_calls, 0, "%s, %s %ld: %ld getobs calls although "
					      "start failed", label, what, k, getobs_calls);
		cr_assert_eq(atomic_load(&td.in_getobs), 0, "%s, %s %ld: getobs running "
							    "after a failed start",
			     label, what, k);
		cr_assert_eq(eachobs__alloc_live(), 0, "%s, %s %ld: %ld allocations left "
						       "after a failed start",
			     label, what, k, eachobs__alloc_live());
		cr_assert_null(td_violation(&td), "%s: %s", label, td_violation(&td));
		/* Threads joined by an earlier step may take a moment to
		 * leave /proc; a thread left running never does. */
		threads_after = threads_settle(threads_base, 2.0);
		cr_assert_eq(threads_after, threads_base, "%s, %s %ld: %d threads "
							  "before any start, %d after "
							  "this failed one",
			     label, what, k, threads_base, threads_after);
		td_fini(&td);
	}
	cr_assert_fail("%s: start still failing after %ld injected %s faults", label,
		       MAX_STEPS, what);
	return -1;
}

ParameterizedTestParameters(faults,
			    each_failed_allocation_gives_enomem_and_leaves_nothing)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, faults,
		  each_failed_allocation_gives_enomem_and_leaves_nothing)
{
	size_t sizes[] = { 0, 1000 };
	unsigned nthreads[] = { 1, 4 };
	size_t buffersizes[] = { 0, 1 };

	for (size_t s = 0; s < 2; s++) {
		for (size_t t = 0; t < 2; t++) {
			eachobs_options o = { .executor = m->executor,
					      .ordered = m->ordered,
					      .nthreads = nthreads[t],
					      .buffersize = buffersizes[t] };
			long k = fail_each_step(eachobs__fault_alloc_after,
						-ENOMEM, sizes[s], &o,
						"allocation fault");

			/* The iterator itself is allocated through
			 * the hook, so the first step must fail. */
			cr_assert_gt(k, 0, "executor=%s ordered=%d n=%zu: start "
					   "succeeded with the first "
					   "allocation failing",
				     executor_name(o.executor), m->ordered,
				     sizes[s]);
		}
	}
	disarm();
}

ParameterizedTestParameters(faults,
			    each_failed_thread_creation_gives_eagain_and_joins_the_rest)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, faults,
		  each_failed_thread_creation_gives_eagain_and_joins_the_rest)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 4 };
	long k = fail_each_step(eachobs__fault_thread_after, -EAGAIN,
				1000, &o, "thread creation fault");

	if (m->executor == EACHOBS_SERIAL)
		cr_assert_eq(k, 0, "SERIAL ordered=%d: start failed when "
				   "thread creation failed", m->ordered);
	else
		cr_assert_gt(k, 0, "executor=%s ordered=%d: start succeeded "
				   "with every thread creation failing",
			     executor_name(o.executor), m->ordered);
	disarm();
}

Test(faults, serial_starts_no_threads)
{
	for (int ordered = 0; ordered < 2; ordered++) {
		eachobs_options o = { .executor = EACHOBS_SERIAL,
				      .ordered = ordered,
				      .nthreads = 8 };
		eachobs_iter *it = NULL;
		eachobs_dataset data;
		struct td td;
		int rc;

		td_init(&td, 300, 8, 300);
		data = td_dataset(&td);
		eachobs__fault_thread_after(0);
		rc = eachobs_parallel(&it, &data, &o);
		disarm();
		cr_assert_eq(rc, 0, "SERIAL ordered=%d: start returned %d with thread "
				    "creation failing", ordered, rc);
		iterate_fully(it, &td, &o, "SERIAL");
		td_fini(&td);
	}
}

ParameterizedTestParameters(faults, empty_dataset_starts_no_threads)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, faults, empty_dataset_starts_no_threads)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 8 };
	eachobs_iter *it = NULL;
	eachobs_dataset data;
	struct td td;
	char label[200];
	int rc;

	label_of(label, sizeof(label), &o, 0);
	td_init(&td, 0, 8, 0);
	data = td_dataset(&td);
	eachobs__fault_thread_after(0);
	rc = eachobs_parallel(&it, &data, &o);
	disarm();
	cr_assert_eq(rc, 0, "%s: start returned %d with thread creation "
			    "failing", label, rc);
	iterate_fully(it, &td, &o, label);
	td_fini(&td);
}

Test(faults, starts_no_more_threads_than_tasks)
{
	/* n, basesize, tasks = ceil(n / basesize). */
	size_t cases[][2] = { { 1, 1 }, { 2, 1 }, { 3, 1 }, { 25, 10 }, { 5, 100 } };

	for (size_t e = 0; e < 2; e++) {
		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			size_t n = cases[k][0];
			size_t tasks = (n + cases[k][1] - 1) / cases[k][1];
			eachobs_options o = { .executor = executors[e],
					      .nthreads = 8,
					      .basesize = cases[k][1] };
			eachobs_iter *it = NULL;
			eachobs_dataset data;
			struct td td;
			char label[200];
			int rc;

			label_of(label, sizeof(label), &o, n);
			td_init(&td, n, 8, n);
			data = td_dataset(&td);
			/* Creating thread number tasks + 1 would fail. */
			eachobs__fault_thread_after((long)tasks);
			rc = eachobs_parallel(&it, &data, &o);
			disarm();
			cr_assert_eq(rc, 0, "%s: %zu tasks, but start tried to create more "
					    "than %zu threads (returned %d)",
				     label, tasks, tasks, rc);
			iterate_fully(it, &td, &o, label);
			td_fini(&td);
		}
	}
}

ParameterizedTestParameters(faults, iteration_and_close_allocate_nothing)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, faults,
		  iteration_and_close_allocate_nothing)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 3,
			      .buffersize = 2 };
	eachobs_iter *it = NULL;
	eachobs_dataset data;
	struct td td;
	char label[200];
	long live;
	int rc;

	label_of(label, sizeof(label), &o, 500);
	td_init(&td, 500, 8, 500);
	data = td_dataset(&td);
	rc = eachobs_parallel(&it, &data, &o);
	cr_assert_eq(rc, 0, "%s: start returned %d", label, rc);
	live = eachobs__alloc_live();
	/* Memory is fixed at start: any allocation or thread
	 * creation on the consumer's thread from here on fails,
	 * and nothing may notice. */
	eachobs__fault_alloc_after(0);
	eachobs__fault_thread_after(0);
	iterate_fully(it, &td, &o, label);
	disarm();
	cr_assert_gt(live, 0, "%s: no allocation went through the hook", label);
	td_fini(&td);
}

/*
 * Creating a thread allocates too: glibc keeps the attributes' signal
 * mask and CPUs in memory of its own. That allocation failing is -ENOMEM
 * (nothing could be allocated), not -EAGAIN (a thread the system would not
 * start), and the message names the thread. Thread creation is the last
 * thing a start does, so the steps right before the one that succeeds are
 * the workers' attributes, the last worker's last.
 */
ParameterizedTestParameters(faults,
			    a_thread_whose_attributes_cannot_be_allocated_gives_enomem)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, faults,
		  a_thread_whose_attributes_cannot_be_allocated_gives_enomem)
{
	static const unsigned nthreads[] = { 1, 4, 16 };
	static const size_t sizes[] = { 0, 8, 4096 };

	for (size_t t = 0; t < 3; t++) {
		for (size_t s = 0; s < 3; s++) {
			eachobs_options o = { .executor = m->executor,
					      .ordered = m->ordered,
					      .nthreads = nthreads[t] };
			char last[256] = "", want[96];
			int last_rc = 0, rc = -1;

			/* Fail each allocation in turn until the start
			 * succeeds; keep what the last failure said. */
			for (long k = 0; rc != 0; k++) {
				struct td td;
				eachobs_iter *it;

				cr_assert_lt(k, MAX_STEPS);
				td_init(&td, 1000, sizes[s], 0);
				eachobs_dataset data = td_dataset(&td);
				eachobs__fault_alloc_after(k);
				rc = eachobs_parallel(&it, &data, &o);
				disarm();
				if (rc == 0) {
					eachobs_close(it);
				} else {
					last_rc = rc;
					snprintf(last, sizeof(last), "%s",
						 eachobs_last_error());
					cr_assert_eq(atomic_load(
						&td.getobs_calls), 0);
				}
				td_fini(&td);
			}
			snprintf(want, sizeof(want), "out of memory for the "
				 "attributes of worker thread %u of %u",
				 nthreads[t], nthreads[t]);
			cr_assert_eq(last_rc, -ENOMEM, "%s nthreads=%u "
				     "obs_size=%zu: the last worker's attributes "
				     "not allocated gave %d (%s)", mode_name(m),
				     nthreads[t], sizes[s], last_rc, last);
			cr_assert(strstr(last, want), "%s nthreads=%u: \"%s\"",
				  mode_name(m), nthreads[t], last);
			cr_assert_eq(eachobs__alloc_live(), 0);
		}
	}
}
