/*
 * The default buffersize, as include/eachobs.h describes it
 * (eachobs_options.buffersize), written out again from the header's words
 * for the tests that check the memory bound (buffersize + nthreads +
 * max(1, hold) units): the library's own rule (src/start.c) is what they
 * test, so they must not borrow it. test_stats checks the library against
 * hard-coded values of this rule.
 *
 * Header-only: the Criterion suites, the plain-main stress programs, the
 * libFuzzer target (tools/fuzz.sh) and bench/buffersize, which marks the
 * defaults in its table, all include it.
 */
#ifndef EACHOBS_TEST_BUFFER_RULE_H
#define EACHOBS_TEST_BUFFER_RULE_H

#include "eachobs.h"

#include <stdbool.h>
#include <stddef.h>

/* The bytes of a unit of cap observations of obs_size, as the library
 * lays it out: rounded up to a cache line. */
static inline size_t rule_unit_bytes(size_t cap, size_t obs_size)
{
	return (cap * obs_size + 63) / 64 * 64;
}

/*
 * buffersize 0 resolved for nthreads workers and units of unit_bytes: the
 * largest of the minimum, the per-thread count and the units (each
 * counted as at least 64 bytes) that fit EACHOBS_DEFAULT_BUFFER_BYTES, at
 * most EACHOBS_DEFAULT_BUFFER_MAX, or EACHOBS_DEFAULT_ORDERED_BUFFER_MAX
 * ordered and unbatched. Batched, the minimum and the per-thread count
 * are the batch ones.
 */
static inline size_t rule_default_buffersize(bool batched, bool ordered,
					     size_t nthreads,
					     size_t unit_bytes)
{
	size_t per = batched ? EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD
			     : EACHOBS_DEFAULT_BUFFER_PER_THREAD;
	size_t min = batched ? EACHOBS_DEFAULT_BATCH_BUFFER_MIN
			     : EACHOBS_DEFAULT_BUFFER_MIN;
	size_t b = per * nthreads < min ? min : per * nthreads;
	size_t fit = EACHOBS_DEFAULT_BUFFER_BYTES /
		     (unit_bytes > 64 ? unit_bytes : 64);
	size_t most = ordered && !batched ? EACHOBS_DEFAULT_ORDERED_BUFFER_MAX
					  : EACHOBS_DEFAULT_BUFFER_MAX;

	if (fit > most)
		fit = most;
	return b < fit ? fit : b;
}

#endif
