/*
 * Hold mode (eachobs_options.hold = K, eachobs_release): one test per
 * promise of include/eachobs.h, for single observations and batches, every
 * executor and ordering. The dataset is batch_helpers.h's.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "batch_helpers.h"
#include "fault.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

TestSuite(hold, .init = deadline, .timeout = 60);

/* What the consumer holds: the yielded pointer and what it must still
 * contain. */
struct item {
	const void *data;
	size_t first, count;
};

struct run {
	struct bd d;
	eachobs_options o;
	eachobs_iter *it;
	unsigned char *seen;
	struct item *held;
	unsigned nheld;
	size_t nobs;
	char label[200];
};

static void run_start(struct run *r, size_t n, size_t obs_size,
		      eachobs_options o)
{
	memset(r, 0, sizeof(*r));
	r->o = o;
	snprintf(r->label, sizeof(r->label),
		 "executor=%s ordered=%d batchsize=%zu hold=%u n=%zu",
		 executor_name(o.executor), (int)o.ordered, o.batchsize, o.hold, n);
	bd_init(&r->d, n, obs_size);
	r->seen = calloc(n ? n : 1, 1);
	r->held = calloc(o.hold ? o.hold : 1, sizeof(*r->held));
	eachobs_dataset data = bd_dataset(&r->d);
	cr_assert_eq(eachobs_parallel(&r->it, &data, &r->o), 0, "%s", r->label);
}

/* Every held item still holds what getobs wrote. */
static void check_held(struct run *r)
{
	for (unsigned i = 0; i < r->nheld; i++) {
		const struct item *h = &r->held[i];
		for (size_t j = 0; j < h->count; j++) {
			const unsigned char *p = (const unsigned char *)h->data +
						 j * r->d.obs_size;
			cr_assert(bd_bytes_ok(&r->d, h->first + j, p, r->d.obs_size),
				  "%s: held observation %zu changed", r->label,
				  h->first + j);
		}
	}
}

/* Take the next item into the held list: 1, 0 at the end, or < 0. */
static int run_next(struct run *r)
{
	struct item h;
	int rc;

	if (r->o.batchsize) {
		eachobs_batch b;
		rc = eachobs_next_batch(r->it, &b);
		h = (struct item){ b.data, b.count ? b.idx[0] : 0, b.count };
	} else {
		size_t idx = 0;
		rc = eachobs_next(r->it, &h.data, &idx);
		h.first = idx;
		h.count = 1;
	}
	if (rc != 1)
		return rc;
	for (size_t j = 0; j < h.count; j++) {
		cr_assert(!r->seen[h.first + j], "%s: %zu twice", r->label, h.first + j);
		r->seen[h.first + j] = 1;
	}
	r->nobs += h.count;
	r->held[r->nheld++] = h;
	return 1;
}

static void run_release(struct run *r, unsigned i)
{
	cr_assert_eq(eachobs_release(r->it, r->held[i].data), 0, "%s: release",
		     r->label);
	r->held[i] = r->held[--r->nheld];
}

static void run_finish(struct run *r)
{
	size_t span, bound;

	eachobs_close(r->it);
	cr_assert(bd_span_ok(&r->d, &r->o, &span, &bound),
		  "%s: observations spread over %zu bytes, bound %zu", r->label,
		  span, bound);
	cr_assert_null(bd_violation(&r->d), "%s: %s", r->label, bd_violation(&r->d));
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: leak", r->label);
	free(r->seen);
	free(r->held);
	bd_fini(&r->d);
}

/* Hold up to K, release a random one whenever full, check all the while. */
static void random_releases(eachobs_options o, size_t n, uint64_t seed)
{
	struct run r;
	int rc;

	run_start(&r, n, 16, o);
	for (;;) {
		rc = run_next(&r);
		if (rc == -ENOBUFS) {
			cr_assert_eq(r.nheld, o.hold, "%s: -ENOBUFS with %u held",
				     r.label, r.nheld);
			check_held(&r);
			run_release(&r, (unsigned)(splitmix64(&seed) % r.nheld));
			continue;
		}
		if (rc != 1)
			break;
		if (r.nheld < o.hold && splitmix64(&seed) % 3 == 0)
			run_release(&r, (unsigned)(splitmix64(&seed) % r.nheld));
	}
	cr_assert_eq(rc, 0, "%s: ended with %d", r.label, rc);
	cr_assert_eq(r.nobs, n, "%s: %zu observations", r.label, r.nobs);
	check_held(&r);
	run_finish(&r);
}

Test(hold, items_stay_valid_until_released_in_any_order)
{
	uint64_t seed = 11;

	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++)
			for (size_t bs = 0; bs <= 8; bs += 8)
				for (unsigned k = 1; k <= 5; k += 2)
					random_releases((eachobs_options){
						.executor = executors[e],
						.ordered = ord, .batchsize = bs,
						.hold = k, .nthreads = 3,
						.buffersize = 2 }, 500,
						splitmix64(&seed));
}

Test(hold, next_with_k_held_is_enobufs_and_not_sticky)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		struct run r;

		run_start(&r, 20, 8, (eachobs_options){ .executor = executors[e],
							.hold = 3, .nthreads = 2 });
		for (int i = 0; i < 3; i++)
			cr_assert_eq(run_next(&r), 1);
		cr_assert_eq(run_next(&r), -ENOBUFS, "%s", r.label);
		cr_assert_eq(run_next(&r), -ENOBUFS, "%s: again", r.label);
		run_release(&r, 1);
		cr_assert_eq(run_next(&r), 1, "%s: after a release", r.label);
		check_held(&r);
		run_finish(&r);
	}
}

Test(hold, end_with_items_held_returns_zero)
{
	struct run r;

	run_start(&r, 3, 8, (eachobs_options){ .hold = 3, .nthreads = 2 });
	for (int i = 0; i < 3; i++)
		cr_assert_eq(run_next(&r), 1);
	cr_assert_eq(run_next(&r), 0);
	check_held(&r);
	run_finish(&r);
}

Test(hold, releasing_an_unknown_pointer_is_einval)
{
	struct run r;

	run_start(&r, 10, 8, (eachobs_options){ .hold = 2, .nthreads = 2 });
	cr_assert_eq(run_next(&r), 1);
	const void *p = r.held[0].data;
	cr_assert_eq(eachobs_release(r.it, "not yielded"), -EINVAL);
	cr_assert_eq(eachobs_release(r.it, NULL), -EINVAL);
	cr_assert_eq(eachobs_release(NULL, p), -EINVAL);
	run_release(&r, 0);
	cr_assert_eq(eachobs_release(r.it, p), -EINVAL, "released twice");
	run_finish(&r);
}

Test(hold, release_without_hold_is_einval)
{
	struct run r;

	run_start(&r, 10, 8, (eachobs_options){ .nthreads = 2 });
	cr_assert_eq(run_next(&r), 1);
	cr_assert_eq(eachobs_release(r.it, r.held[0].data), -EINVAL);
	run_finish(&r);
}

/* Ordered: an item held from the start must not stall the reorder window
 * (it is swapped out, not kept in the window). */
Test(hold, an_item_held_forever_does_not_stall_ordered_output)
{
	for (int e = 0; e < 2; e++) {
		for (size_t bs = 0; bs <= 4; bs += 4) {
			struct run r;
			int rc;

			run_start(&r, 2000, 8, (eachobs_options){
				.executor = executors[e], .ordered = true,
				.batchsize = bs, .hold = 2, .buffersize = 1,
				.nthreads = 2 });
			cr_assert_eq(run_next(&r), 1);
			while ((rc = run_next(&r)) == 1) {
				check_held(&r);
				run_release(&r, 1); /* keep the first one */
			}
			cr_assert_eq(rc, 0, "%s: %d", r.label, rc);
			cr_assert_eq(r.nobs, 2000);
			check_held(&r);
			run_finish(&r);
		}
	}
}

Test(hold, close_with_items_held_leaks_nothing)
{
	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++) {
			struct run r;

			run_start(&r, 1000, 8, (eachobs_options){
				.executor = executors[e], .ordered = ord,
				.batchsize = 4, .hold = 3, .nthreads = 3 });
			for (int i = 0; i < 3; i++)
				cr_assert_eq(run_next(&r), 1);
			run_finish(&r);
			cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
		}
}

Test(hold, hold_above_the_maximum_is_einval)
{
	struct bd d;
	eachobs_iter *it;

	bd_init(&d, 10, 8);
	eachobs_dataset data = bd_dataset(&d);
	eachobs_options o = { .hold = EACHOBS_MAX_SLOTS + 1u };
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	bd_fini(&d);
}

/* Empty observations still have one pointer each, so that releasing one
 * gives back that one (found by the fuzzer: with a shared pointer the
 * first held batch was released instead, and its idx array reused). */
Test(hold, empty_observations_are_released_one_by_one)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		struct bd d;
		eachobs_iter *it;
		eachobs_batch a, b, c;

		bd_init(&d, 8, 0);
		eachobs_dataset data = bd_dataset(&d);
		cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){
			.executor = executors[e], .ordered = true,
			.batchsize = 2, .hold = 2, .nthreads = 2 }), 0);
		cr_assert_eq(eachobs_next_batch(it, &a), 1);
		cr_assert_eq(eachobs_next_batch(it, &b), 1);
		cr_assert_neq(a.data, b.data, "%s: one pointer for two items",
			      executor_name(executors[e]));
		cr_assert_eq(eachobs_release(it, b.data), 0);
		cr_assert_eq(eachobs_next_batch(it, &c), 1);
		cr_assert_eq(a.idx[0], 0, "%s: the held batch changed under us",
			     executor_name(executors[e]));
		cr_assert_eq(c.idx[0], 4);
		eachobs_close(it);
		bd_fini(&d);
	}
}
