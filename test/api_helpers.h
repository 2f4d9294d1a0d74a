/*
 * Helpers shared by the suites that check eachobs.h promise by promise
 * (test_api.c, test_lifecycle.c): start an iterator, drain it through the
 * checking consumer of helpers.h, close and check, expect -EINVAL, join a
 * thread with a deadline. Static inline so each suite takes what it uses.
 */
#ifndef EACHOBS_TEST_API_HELPERS_H
#define EACHOBS_TEST_API_HELPERS_H

#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- helpers -------------------------------------------------------- */

static inline void label_of(char *buf, size_t len, const eachobs_options *o, size_t n)
{
	snprintf(buf, len,
		 "executor=%s ordered=%d n=%zu nthreads=%u buffersize=%zu "
		 "basesize=%zu oversubscription=%u",
		 executor_name(o->executor), (int)o->ordered, n, o->nthreads,
		 o->buffersize, o->basesize, o->oversubscription);
}

static inline eachobs_iter *start(struct td *td, const eachobs_options *o,
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
static inline int drain(struct cons *c, size_t limit, const char *label)
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
static inline void finish(struct cons *c, const char *label)
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
static inline void full_iteration(struct td *td, const eachobs_options *o,
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
	cr_assert_leq(atomic_load(&td->max_live), (long)slot_bound(o, td->obs_size),
		      "%s: %ld observations live at once, more than %zu slots", label,
		      atomic_load(&td->max_live), slot_bound(o, td->obs_size));
}

static inline void expect_einval(const eachobs_dataset *data, const eachobs_options *o,
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
static inline void join_within(pthread_t t, double seconds, const char *what)
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


#endif
