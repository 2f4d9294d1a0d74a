/*
 * One test per promise of include/eachobs.h, continued from test_api.c:
 * getobs failures, close, eachobs_strerror, which threads run getobs, and
 * the memory bound while iterating.
 *
 * Every test runs in its own process (Criterion forks) under a watchdog.
 */
#define _GNU_SOURCE
#include "api_helpers.h"

#include <criterion/parameterized.h>
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

TestSuite(errors, .init = deadline, .timeout = 60);
TestSuite(close, .init = deadline, .timeout = 60);
TestSuite(strerror, .init = deadline, .timeout = 60);
TestSuite(threads, .init = deadline, .timeout = 60);
TestSuite(memory, .init = deadline, .timeout = 60);

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

/* Over n observations, getobs(fail_idx) returns code; expect want. */
static void fail_one(const eachobs_options *o, size_t n, size_t fail_idx,
		     int code, int want)
{
	struct td td;
	char label[200];

	label_of(label, sizeof(label), o, n);
	snprintf(label + strlen(label), sizeof(label) - strlen(label),
		 " getobs(%zu) returns %d", fail_idx, code);
	td_init(&td, n, 8, n);
	td.fail_idx = fail_idx;
	td.fail_code = code;
	expect_failure(&td, o, want, label);
	td_fini(&td);
}

ParameterizedTestParameters(errors,
			    getobs_failure_is_reported_with_its_index_and_sticks)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, errors,
		  getobs_failure_is_reported_with_its_index_and_sticks)
{
	const size_t n = 60;
	size_t where[] = { 0, n / 2, n - 1 };

	for (size_t w = 0; w < 3; w++) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
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

ParameterizedTestParameters(errors,
			    positive_getobs_return_is_reported_as_erange)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, errors,
		  positive_getobs_return_is_reported_as_erange)
{
	int positives[] = { 1, 42, INT_MAX };

	for (size_t p = 0; p < 3; p++) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
				      .nthreads = 2 };

		fail_one(&o, 30, 7, positives[p], -ERANGE);
	}
}

/* -EINTR from getobs (a system call a signal cut short) is -ERESTART:
 * the -EINTR of eachobs_next is eachobs_interrupt's alone. */
ParameterizedTestParameters(errors, getobs_eintr_is_reported_as_erestart)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, errors,
		  getobs_eintr_is_reported_as_erestart)
{
	eachobs_options o = { .executor = m->executor, .ordered = m->ordered,
			      .nthreads = 2 };

	fail_one(&o, 30, 7, -EINTR, -ERESTART);
}

Test(errors, getobs_codes_pass_through_unchanged)
{
	int codes[] = { -1, -EIO, -ENOMEM, -EAGAIN, -EINVAL, -ERANGE, -123456, INT_MIN };

	for (size_t e = 0; e < NEXECUTORS; e++) {
		for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++) {
			eachobs_options o = { .executor = executors[e],
					      .ordered = k % 2,
					      .nthreads = 2 };

			fail_one(&o, 10, 3, codes[k], codes[k]);
		}
	}
}

/* ---- eachobs_close -------------------------------------------------- */

/* Set once eachobs_close(NULL) has returned; see close_must_return. */
static bool close_returned;

/*
 * Criterion counts a test process that exits with status 0 as a pass, so
 * a close that ended the process instead of returning would pass unseen.
 * Registered with atexit, this fails such a test.
 */
static void close_must_return(void)
{
	if (!close_returned) {
		fputs("eachobs_close(NULL) ended the process instead of "
		      "returning\n", stderr);
		_exit(1);
	}
}

/* "it, or NULL (then nothing happens)": the call returns, and leaves
 * errno, the last error message, the library's memory and the process's
 * threads as they were. */
Test(close, accepts_null)
{
	char before[256];

	/* A failing call first, so that there is a message to keep. */
	cr_assert_eq(eachobs_interrupt(NULL), -EINVAL);
	snprintf(before, sizeof(before), "%s", eachobs_last_error());
	cr_assert(before[0] != '\0', "eachobs_interrupt(NULL) left no message");
	int threads = threads_now();
	cr_assert_eq(atexit(close_must_return), 0);

	errno = EXDEV;
	eachobs_close(NULL);
	int saved = errno;
	close_returned = true;

	cr_assert_eq(saved, EXDEV, "eachobs_close(NULL) changed errno to %d",
		     saved);
	cr_assert_str_eq(eachobs_last_error(), before,
			 "eachobs_close(NULL) replaced the last error message");
	cr_assert_eq(eachobs__alloc_live(), 0,
		     "eachobs_close(NULL) left %ld library allocations",
		     eachobs__alloc_live());
	cr_assert_eq(threads_now(), threads,
		     "eachobs_close(NULL) changed the thread count");
}

/* Start in mode m, consume `k` observations (or up to the end), close. */
static void close_after(const struct mode *m, size_t n, size_t k,
			size_t fail_idx)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
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

ParameterizedTestParameters(close, works_before_anything_was_consumed)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, close,
		  works_before_anything_was_consumed)
{
	close_after(m, 1000, 0, TD_NONE);
}

ParameterizedTestParameters(close, works_mid_way)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, close, works_mid_way)
{
	close_after(m, 1000, 10, TD_NONE);
}

ParameterizedTestParameters(close, works_after_the_end)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, close, works_after_the_end)
{
	close_after(m, 100, SIZE_MAX, TD_NONE);
}

ParameterizedTestParameters(close, works_after_an_error)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, close, works_after_an_error)
{
	close_after(m, 100, SIZE_MAX, 42);
}

ParameterizedTestParameters(close, returns_within_about_one_getobs_duration)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, close,
		  returns_within_about_one_getobs_duration)
{
	/* getobs takes 50 ms; loading what is left would take seconds. */
	for (size_t k = 0; k < 3; k += 2) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
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
		/* Loading the rest would take 12.5 s; 5 s
		 * leaves room for valgrind on a busy machine. */
		cr_assert_lt(took, 5.0, "%s: eachobs_close took %.3f s",
			     label, took);
		td_fini(&td);
	}
}

ParameterizedTestParameters(close, starts_no_getobs_once_begun)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, close, starts_no_getobs_once_begun)
{
	/* With a large buffer there is room for many more observations when
	 * close begins. A worker may have passed its last check right before
	 * close began, so each may start one getobs late; no more. */
	for (size_t k = 0; k < 6; k += 5) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
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

Test(strerror, describes_plain_errno_codes_from_getobs)
{
	const char *generic = eachobs_strerror(-123456);
	int codes[] = { -EBADMSG, -EACCES, -ETIMEDOUT, -EPIPE };

	for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++) {
		expect_readable(codes[k]);
		cr_assert_str_neq(eachobs_strerror(codes[k]), generic,
				  "errno %d got the generic message", -codes[k]);
	}
	cr_assert_str_eq(eachobs_strerror(-EBADMSG), "Bad message");
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
	else if (atomic_load(&s->td.max_live) > (long)slot_bound(&s->o, s->td.obs_size))
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

ParameterizedTestParameters(threads, consumer_may_move_between_threads)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, threads,
		  consumer_may_move_between_threads)
{
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered,
			      .nthreads = 3,
			      .buffersize = 4 };
	struct td td;
	struct cons c;
	char label[160];
	size_t stops[] = { 10, 150, SIZE_MAX };

	label_of(label, sizeof(label), &o, 300);
	td_init(&td, 300, 24, 300);
	cons_init(&c, start(&td, &o, label), &td,
		  m->ordered || m->executor == EACHOBS_SERIAL);
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

/* ---- memory bound --------------------------------------------------- */

ParameterizedTestParameters(memory,
			    live_observations_stay_within_buffersize_plus_nthreads_plus_one)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, memory,
		  live_observations_stay_within_buffersize_plus_nthreads_plus_one)
{
	unsigned nthreads[] = { 1, 3, 8 };
	size_t buffersizes[] = { 1, 4, 16 };

	for (size_t k = 0; k < 3; k++) {
		eachobs_options o = { .executor = m->executor,
				      .ordered = m->ordered,
				      .nthreads = nthreads[k],
				      .buffersize = buffersizes[2 - k] };
		struct td td;
		struct cons c;
		char label[160];
		int rc;

		label_of(label, sizeof(label), &o, 2000);
		td_init(&td, 2000, 64, 2000);
		td.rand_sleep_us = 50;
		if (m->ordered)
			td.window = slot_bound(&o, td.obs_size);
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
		cr_assert_leq(atomic_load(&td.max_live), (long)slot_bound(&o, td.obs_size),
			      "%s: %ld observations live at once, bound %zu",
			      label, atomic_load(&td.max_live),
			      slot_bound(&o, td.obs_size));
		td_fini(&td);
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
			td.window = slot_bound(&o, td.obs_size);
			full_iteration(&td, &o, label);
			td_fini(&td);
		}
	}
}
