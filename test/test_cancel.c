/*
 * eachobs_cancelled: a long getobs that polls it lets eachobs_close return
 * promptly; outside getobs, and inside the getobs of an iterator that is
 * not closing, it is false; nested iterators answer for the innermost.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

TestSuite(cancel, .init = deadline, .timeout = 60);

struct slow {
	atomic_int saw_cancel;   /* getobs calls that returned early */
	atomic_int never_cancel; /* getobs calls that saw false throughout */
	atomic_int started;      /* long getobs calls that began */
};

static size_t numobs_1000(void *ctx)
{
	(void)ctx;
	return 1000;
}

/* Index 0 is quick; every other getobs "takes" 20 s unless cancelled. */
static int long_getobs(void *ctx, size_t idx, void *obs)
{
	struct slow *s = ctx;
	struct timespec ms = { 0, 1000000 };

	*(size_t *)obs = idx;
	if (idx == 0)
		return 0;
	atomic_fetch_add(&s->started, 1);
	for (int i = 0; i < 20000; i++) {
		if (eachobs_cancelled()) {
			atomic_fetch_add(&s->saw_cancel, 1);
			return -ECANCELED;
		}
		nanosleep(&ms, NULL);
	}
	atomic_fetch_add(&s->never_cancel, 1);
	return 0;
}

Test(cancel, close_returns_promptly_when_long_getobs_polls_cancelled)
{
	struct slow s = { 0 };
	eachobs_dataset data = { &s, numobs_1000, long_getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 4, .executor = EACHOBS_BACKGROUND,
			      .ordered = true };
	eachobs_iter *it;
	const void *obs;
	size_t idx;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_next(it, &obs, &idx), 1);
	cr_assert_eq(idx, 0);
	cr_assert_not(eachobs_cancelled(), "true outside getobs");
	/* Close only once a long getobs runs: that is the case under test
	 * (a worker that has not reached getobs yet never calls it). */
	for (double t = now_s(); atomic_load(&s.started) == 0;) {
		cr_assert_lt(now_s() - t, 10.0, "no long getobs started in 10 s");
		sleep_us(100);
	}
	double t0 = now_s();
	eachobs_close(it);
	double took = now_s() - t0;
	cr_assert_lt(took, 5.0, "close took %.2f s with getobs polling", took);
	cr_assert_gt(atomic_load(&s.saw_cancel), 0,
		     "no running getobs saw eachobs_cancelled() turn true");
	cr_assert_eq(atomic_load(&s.never_cancel), 0);
}

static int check_not_cancelled(void *ctx, size_t idx, void *obs)
{
	struct slow *s = ctx;

	*(size_t *)obs = idx;
	if (eachobs_cancelled())
		atomic_fetch_add(&s->saw_cancel, 1);
	return 0;
}

Test(cancel, is_false_inside_getobs_of_a_running_iterator)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		struct slow s = { 0 };
		eachobs_dataset data = { &s, numobs_1000, check_not_cancelled,
					 sizeof(size_t) };
		eachobs_options o = { .nthreads = 2, .executor = executors[e] };
		eachobs_iter *it;
		const void *obs;
		size_t idx;
		int rc;

		cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
		while ((rc = eachobs_next(it, &obs, &idx)) == 1)
			;
		eachobs_close(it);
		cr_assert_eq(rc, 0);
		cr_assert_eq(atomic_load(&s.saw_cancel), 0,
			     "%s: cancelled inside a running iterator",
			     executor_name(executors[e]));
	}
}

/* The outer getobs closes an inner iterator mid-way, then checks that the
 * answer is its own iterator's again. */
struct nest {
	atomic_int inner_saw_running; /* inner getobs saw false */
	atomic_int outer_wrong;       /* outer saw true after inner close */
};

static size_t numobs_4(void *ctx)
{
	(void)ctx;
	return 4;
}

static int inner_getobs(void *ctx, size_t idx, void *obs)
{
	struct nest *n = ctx;

	*(size_t *)obs = idx;
	if (!eachobs_cancelled())
		atomic_fetch_add(&n->inner_saw_running, 1);
	return 0;
}

static int outer_getobs(void *ctx, size_t idx, void *obs)
{
	struct nest *n = ctx;
	eachobs_dataset data = { n, numobs_4, inner_getobs, sizeof(size_t) };
	eachobs_options o = { .executor = EACHOBS_SERIAL };
	eachobs_iter *it;
	const void *inner_obs;
	size_t inner_idx;

	*(size_t *)obs = idx;
	if (eachobs_parallel(&it, &data, &o) != 0)
		return -ENOMEM;
	(void)eachobs_next(it, &inner_obs, &inner_idx);
	eachobs_close(it);
	if (eachobs_cancelled())
		atomic_fetch_add(&n->outer_wrong, 1);
	return 0;
}

Test(cancel, nested_iterators_answer_for_their_own_getobs)
{
	struct nest n = { 0 };
	eachobs_dataset data = { &n, numobs_4, outer_getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 2, .executor = EACHOBS_BACKGROUND };
	eachobs_iter *it;
	const void *obs;
	size_t idx, count = 0;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		count++;
	eachobs_close(it);
	cr_assert_eq(rc, 0);
	cr_assert_eq(count, 4);
	cr_assert_eq(atomic_load(&n.inner_saw_running), 4);
	cr_assert_eq(atomic_load(&n.outer_wrong), 0);
}
