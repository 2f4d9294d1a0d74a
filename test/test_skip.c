/*
 * on_error = EACHOBS_ON_ERROR_SKIP: failed observations are left out, every
 * other one is yielded exactly once (in order when ordered), the iteration
 * ends normally, and eachobs_failures() counts the skipped ones and keeps
 * the first EACHOBS_FAILURES_KEPT with their codes.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

TestSuite(skip, .init = deadline, .timeout = 60);

struct faulty {
	size_t n;
	const unsigned char *fails; /* per index: 1 = getobs fails */
};

static size_t numobs(void *ctx)
{
	return ((struct faulty *)ctx)->n;
}

/* Fails with -(1000 + idx) so the code says which index it came from;
 * index 1 returns a positive value, which must be reported as -ERANGE. */
static int getobs(void *ctx, size_t idx, void *obs)
{
	const struct faulty *f = ctx;

	*(size_t *)obs = idx;
	if (!f->fails[idx])
		return 0;
	return idx == 1 ? 7 : -(int)(1000 + idx);
}

static int expected_code(size_t idx)
{
	return idx == 1 ? -ERANGE : -(int)(1000 + idx);
}

static void run(eachobs_executor ex, bool ordered, size_t n,
		const unsigned char *fails)
{
	struct faulty f = { n, fails };
	eachobs_dataset data = { &f, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 3, .buffersize = 4, .executor = ex,
			      .ordered = ordered,
			      .on_error = EACHOBS_ON_ERROR_SKIP };
	unsigned char *seen = calloc(n, 1);
	eachobs_failure got[EACHOBS_FAILURES_KEPT + 4];
	size_t nfail = 0, idx = 0, prev = 0, count = 0;
	const void *obs;
	eachobs_iter *it;
	int rc;

	for (size_t i = 0; i < n; i++)
		nfail += fails[i];
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		cr_assert_lt(idx, n);
		cr_assert_not(fails[idx], "%s: failed index %zu yielded",
			      executor_name(ex), idx);
		cr_assert_not(seen[idx], "index %zu twice", idx);
		cr_assert_eq(*(const size_t *)obs, idx);
		if ((ordered || ex == EACHOBS_SERIAL) && count)
			cr_assert_gt(idx, prev, "%s ordered: %zu after %zu",
				     executor_name(ex), idx, prev);
		seen[idx] = 1;
		prev = idx;
		count++;
	}
	cr_assert_eq(rc, 0, "%s ordered=%d: ended with %d (%s)",
		     executor_name(ex), ordered, rc, eachobs_strerror(rc));
	cr_assert_eq(eachobs_next(it, &obs, &idx), 0, "end is not sticky");
	cr_assert_eq(count, n - nfail);
	size_t total = eachobs_failures(it, got, sizeof(got) / sizeof(got[0]));
	cr_assert_eq(total, nfail, "%zu failures counted, %zu happened", total,
		     nfail);
	size_t kept = nfail < EACHOBS_FAILURES_KEPT ? nfail
						    : EACHOBS_FAILURES_KEPT;
	for (size_t i = 0; i < kept; i++) {
		cr_assert_lt(got[i].idx, n);
		cr_assert(fails[got[i].idx], "failure at %zu did not fail",
			  got[i].idx);
		cr_assert_eq(got[i].code, expected_code(got[i].idx));
		if (ordered || ex == EACHOBS_SERIAL)
			cr_assert(i == 0 || got[i].idx > got[i - 1].idx,
				  "ordered failures out of order");
	}
	eachobs_close(it);
	free(seen);
}

Test(skip, skips_failures_at_first_middle_and_last_index)
{
	enum { N = 500 };
	unsigned char fails[N] = { 0 };

	fails[0] = fails[1] = fails[N / 2] = fails[N - 1] = 1;
	for (size_t e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord <= 1; ord++)
			run(executors[e], ord, N, fails);
}

Test(skip, keeps_the_first_failures_and_counts_them_all)
{
	enum { N = 300 };
	unsigned char fails[N] = { 0 };

	/* Every third index fails: 100 failures, more than are kept. */
	for (size_t i = 0; i < N; i += 3)
		fails[i] = 1;
	for (size_t e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord <= 1; ord++)
			run(executors[e], ord, N, fails);
}

Test(skip, every_observation_failing_ends_with_nothing_yielded)
{
	enum { N = 64 };
	unsigned char fails[N];

	memset(fails, 1, sizeof(fails));
	for (size_t e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord <= 1; ord++)
			run(executors[e], ord, N, fails);
}

Test(skip, failures_are_zero_when_stopping_and_for_null)
{
	cr_assert_eq(eachobs_failures(NULL, NULL, 0), 0);
}

Test(skip, rejects_on_error_out_of_range)
{
	unsigned char fails[4] = { 0 };
	struct faulty f = { 4, fails };
	eachobs_dataset data = { &f, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .on_error = (eachobs_on_error)2 };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	cr_assert_null(it);
	cr_assert_eq(eachobs__alloc_live(), 0);
}
