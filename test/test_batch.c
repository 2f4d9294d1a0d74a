/*
 * Batches (eachobs_options.batchsize > 0, eachobs_next_batch): one test per
 * promise of include/eachobs.h. The dataset is batch_helpers.h's.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "batch_helpers.h"
#include "fault.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

TestSuite(batch, .init = deadline, .timeout = 60);

static void label_of(char *buf, size_t len, const eachobs_options *o, size_t n)
{
	snprintf(buf, len,
		 "executor=%s ordered=%d n=%zu batchsize=%zu drop_last=%d "
		 "nthreads=%u buffersize=%zu",
		 executor_name(o->executor), (int)o->ordered, n, o->batchsize,
		 (int)o->drop_last, o->nthreads, o->buffersize);
}

/* Check one yielded batch: whole consecutive positions in batch order,
 * each with its pattern and length, seen once; batch k first when ordered. */
static void check_batch(struct bd *d, const eachobs_options *o,
			const eachobs_batch *b, size_t k, unsigned char *seen,
			const char *label)
{
	size_t bs = o->batchsize;

	cr_assert(b->count >= 1 && b->count <= bs, "%s: count %zu", label, b->count);
	cr_assert_eq(b->idx[0] % bs, 0, "%s: batch starts at %zu", label, b->idx[0]);
	if (o->ordered || o->executor == EACHOBS_SERIAL)
		cr_assert_eq(b->idx[0], k * bs, "%s: batch %zu starts at %zu",
			     label, k, b->idx[0]);
	cr_assert_eq((uintptr_t)b->data % 64, 0, "%s: data not 64-aligned", label);
	for (size_t j = 0; j < b->count; j++) {
		size_t idx = b->idx[j];
		const unsigned char *obs = (const unsigned char *)b->data +
					   j * d->obs_size;
		cr_assert_eq(idx, b->idx[0] + j, "%s: entry %zu is %zu", label, j, idx);
		cr_assert(idx < d->n && !seen[idx], "%s: index %zu twice", label, idx);
		seen[idx] = 1;
		cr_assert_eq(b->lengths[j], bd_len_of(d, idx), "%s: length of %zu",
			     label, idx);
		cr_assert(bd_bytes_ok(d, idx, obs, b->lengths[j]),
			  "%s: bytes of %zu", label, idx);
	}
}

/* Drain a batched iterator, checking every batch; returns the final code
 * and the number of batches and observations. */
static int drain(struct bd *d, const eachobs_options *o, eachobs_iter *it,
		 unsigned char *seen, size_t *nbatches, size_t *nobs,
		 const char *label)
{
	eachobs_batch b;
	int rc;

	*nbatches = *nobs = 0;
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		check_batch(d, o, &b, *nbatches, seen, label);
		(*nbatches)++;
		*nobs += b.count;
	}
	return rc;
}

/* Run n observations through batches of bs under o; check everything. */
static void run_all(size_t n, size_t obs_size, eachobs_options o)
{
	char label[200];
	struct bd d;
	eachobs_iter *it;
	size_t nb, nobs, span, bound;

	label_of(label, sizeof(label), &o, n);
	bd_init(&d, n, obs_size);
	eachobs_dataset data = bd_dataset(&d);
	unsigned char *seen = calloc(n ? n : 1, 1);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "%s: start", label);
	int rc = drain(&d, &o, it, seen, &nb, &nobs, label);
	cr_assert_eq(rc, 0, "%s: ended with %d", label, rc);
	size_t want = o.drop_last ? n - n % o.batchsize : n;
	cr_assert_eq(nobs, want, "%s: %zu observations", label, nobs);
	cr_assert_eq(nb, (want + o.batchsize - 1) / o.batchsize, "%s: %zu batches",
		     label, nb);
	cr_assert_eq(eachobs_next_batch(it, &(eachobs_batch){ 0 }), 0,
		     "%s: end is not sticky", label);
	eachobs_close(it);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(atomic_load(&d.calls[i]), i < want ? 1u : 0u,
			     "%s: getobs(%zu) ran %u times", label, i,
			     atomic_load(&d.calls[i]));
	cr_assert(bd_span_ok(&d, &o, &span, &bound),
		  "%s: observations spread over %zu bytes, bound %zu", label,
		  span, bound);
	cr_assert_null(bd_violation(&d), "%s: %s", label, bd_violation(&d));
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: leak", label);
	free(seen);
	bd_fini(&d);
}

Test(batch, yields_whole_batches_in_place_for_every_executor_and_ordering)
{
	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++)
			for (size_t bs = 1; bs <= 64; bs *= 4)
				run_all(1000, 24, (eachobs_options){
					.executor = executors[e], .ordered = ord,
					.batchsize = bs, .nthreads = 3 });
}

Test(batch, yields_a_last_partial_batch_without_drop_last)
{
	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++)
			run_all(130, 8, (eachobs_options){
				.executor = executors[e], .ordered = ord,
				.batchsize = 64, .nthreads = 2 });
}

Test(batch, drop_last_drops_the_partial_batch_and_never_loads_it)
{
	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++)
			run_all(130, 8, (eachobs_options){
				.executor = executors[e], .ordered = ord,
				.batchsize = 64, .drop_last = true,
				.nthreads = 2 });
}

Test(batch, fewer_observations_than_batchsize_give_one_short_batch_or_none)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		run_all(5, 16, (eachobs_options){ .executor = executors[e],
						  .batchsize = 64 });
		run_all(5, 16, (eachobs_options){ .executor = executors[e],
						  .batchsize = 64,
						  .drop_last = true });
	}
}

Test(batch, empty_dataset_yields_no_batch)
{
	for (int e = 0; e < NEXECUTORS; e++)
		run_all(0, 16, (eachobs_options){ .executor = executors[e],
						  .batchsize = 8 });
}

Test(batch, observations_of_zero_bytes_and_odd_sizes_are_packed_obs_size_apart)
{
	run_all(300, 0, (eachobs_options){ .batchsize = 7, .nthreads = 4 });
	run_all(300, 13, (eachobs_options){ .batchsize = 7, .nthreads = 4,
					    .ordered = true });
}

Test(batch, many_threads_fill_few_batches_and_memory_stays_bounded)
{
	for (int ord = 0; ord < 2; ord++)
		run_all(200, 100, (eachobs_options){
			.executor = EACHOBS_BACKGROUND, .ordered = ord,
			.batchsize = 50, .nthreads = 16, .buffersize = 1 });
}

Test(batch, several_threads_fill_one_batch)
{
	struct bd d;
	eachobs_iter *it;
	eachobs_batch b;

	bd_init(&d, 64, 8);
	d.meet = 3; /* getobs waits until three calls overlap (or 5 s) */
	eachobs_dataset data = bd_dataset(&d);
	eachobs_options o = { .executor = EACHOBS_BACKGROUND, .batchsize = 64,
			      .nthreads = 4 };
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_next_batch(it, &b), 1);
	cr_assert_eq(b.count, 64);
	cr_assert_eq(eachobs_next_batch(it, &b), 0);
	eachobs_close(it);
	cr_assert_geq(atomic_load(&d.max_inside), 3,
		      "the one batch was loaded by %d thread(s) at once",
		      atomic_load(&d.max_inside));
	bd_fini(&d);
}

Test(batch, mixing_single_and_batch_calls_is_einval)
{
	struct bd d;
	eachobs_iter *it;
	eachobs_batch b;
	const void *obs = (const void *)1;

	bd_init(&d, 10, 8);
	eachobs_dataset data = bd_dataset(&d);
	cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){ .batchsize = 4 }), 0);
	cr_assert_eq(eachobs_next(it, &obs, NULL), -EINVAL);
	cr_assert_null(obs);
	cr_assert_eq(eachobs_next_batch(it, NULL), -EINVAL);
	cr_assert_eq(eachobs_next_batch(it, &b), 1, "the iterator still works");
	eachobs_close(it);
	cr_assert_eq(eachobs_parallel(&it, &data, NULL), 0);
	cr_assert_eq(eachobs_next_batch(it, &b), -EINVAL);
	cr_assert_eq(eachobs_next(it, &obs, NULL), 1, "the iterator still works");
	eachobs_close(it);
	cr_assert_eq(eachobs_next_batch(NULL, &b), -EINVAL);
	bd_fini(&d);
}

Test(batch, batchsize_above_the_maximum_is_einval)
{
	struct bd d;
	eachobs_iter *it;

	bd_init(&d, 10, 8);
	eachobs_dataset data = bd_dataset(&d);
	eachobs_options o = { .batchsize = EACHOBS_MAX_BATCHSIZE + 1 };
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	o.batchsize = SIZE_MAX / 8; /* bytes of a batch overflow */
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	cr_assert_eq(atomic_load(&d.calls[0]), 0);
	bd_fini(&d);
}

/* A getobs failing at entry j of batch k: the batch fails with its index,
 * sticky; ordered, every earlier batch comes first. */
static void failure_case(eachobs_executor ex, bool ordered, size_t fail_at)
{
	char label[200];
	struct bd d;
	eachobs_iter *it;
	eachobs_batch b;
	eachobs_options o = { .executor = ex, .ordered = ordered,
			      .batchsize = 10, .nthreads = 3 };
	size_t k = 0;
	int rc;

	label_of(label, sizeof(label), &o, 100);
	bd_init(&d, 100, 8);
	d.fail[d.nfail++] = fail_at;
	eachobs_dataset data = bd_dataset(&d);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		cr_assert(fail_at < b.idx[0] || fail_at >= b.idx[0] + b.count,
			  "%s: the failed batch was yielded", label);
		k++;
	}
	cr_assert_eq(rc, -EIO, "%s: fail at %zu gave %d", label, fail_at, rc);
	cr_assert_null(b.data);
	cr_assert_eq(b.count, 0);
	cr_assert_not_null(b.idx);
	cr_assert_eq(b.idx[0], fail_at, "%s: reported %zu", label, b.idx[0]);
	if (ordered || ex == EACHOBS_SERIAL)
		cr_assert_eq(k, fail_at / 10, "%s: %zu batches before", label, k);
	cr_assert_eq(eachobs_next_batch(it, &b), -EIO, "%s: not sticky", label);
	cr_assert_eq(b.idx[0], fail_at);
	eachobs_close(it);
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: leak", label);
	bd_fini(&d);
}

Test(batch, a_failure_in_a_batch_fails_that_batch_after_the_earlier_ones)
{
	for (int e = 0; e < NEXECUTORS; e++)
		for (int ord = 0; ord < 2; ord++) {
			failure_case(executors[e], ord, 0);
			failure_case(executors[e], ord, 55);
			failure_case(executors[e], ord, 99);
		}
}

Test(batch, skip_leaves_failed_observations_out_and_keeps_the_batch_contiguous)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		for (int ord = 0; ord < 2; ord++) {
			struct bd d;
			eachobs_iter *it;
			eachobs_batch b;
			eachobs_failure f[4];
			size_t seen = 0, all_failed_batch = 0;
			int rc;

			bd_init(&d, 200, 12);
			d.vary_len = true; /* lengths must move with the data */
			size_t fails[] = { 10, 11, 57, 120, 121, 122, 123, 124 };
			/* 120..124 is the whole last part of batch 24 */
			memcpy(d.fail, fails, sizeof(fails));
			d.nfail = 8;
			eachobs_dataset data = bd_dataset(&d);
			eachobs_options o = { .executor = executors[e],
					      .ordered = ord, .batchsize = 5,
					      .on_error = EACHOBS_ON_ERROR_SKIP,
					      .nthreads = 3 };
			cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
			while ((rc = eachobs_next_batch(it, &b)) == 1) {
				for (size_t j = 0; j < b.count; j++) {
					const unsigned char *obs =
						(const unsigned char *)b.data + j * 12;
					for (unsigned i = 0; i < d.nfail; i++)
						cr_assert_neq(b.idx[j], d.fail[i]);
					cr_assert_eq(b.lengths[j], bd_len_of(&d, b.idx[j]),
						     "length of %zu after compaction", b.idx[j]);
					cr_assert(bd_bytes_ok(&d, b.idx[j], obs, b.lengths[j]),
						  "bytes of %zu after compaction", b.idx[j]);
				}
				if (b.idx[0] / 5 == 24)
					all_failed_batch++;
				seen += b.count;
			}
			cr_assert_eq(rc, 0);
			cr_assert_eq(seen, 192);
			cr_assert_eq(all_failed_batch, 0, "an all-failed batch was yielded");
			cr_assert_eq(eachobs_failures(it, f, 4), 8);
			if (ord || executors[e] == EACHOBS_SERIAL) {
				cr_assert_eq(f[0].idx, 10);
				cr_assert_eq(f[1].idx, 11);
				cr_assert_eq(f[2].idx, 57);
				cr_assert_eq(f[3].idx, 120);
			}
			cr_assert_eq(f[0].code, -EIO);
			eachobs_close(it);
			bd_fini(&d);
		}
	}
}

Test(batch, lengths_report_what_getobs_set)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		struct bd d;
		eachobs_iter *it;
		size_t nb, nobs;
		eachobs_options o = { .executor = executors[e], .batchsize = 9,
				      .nthreads = 2 };

		bd_init(&d, 100, 20);
		d.vary_len = true;
		unsigned char *seen = calloc(100, 1);
		eachobs_dataset data = bd_dataset(&d);
		cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
		cr_assert_eq(drain(&d, &o, it, seen, &nb, &nobs, "lengths"), 0);
		eachobs_close(it);
		cr_assert_eq(atomic_load(&d.set_len_too_big), -EINVAL,
			     "set_length(obs_size + 1) inside getobs");
		cr_assert_null(bd_violation(&d), "%s", bd_violation(&d));
		free(seen);
		bd_fini(&d);
	}
}

Test(batch, single_observations_report_their_length)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		struct bd d;
		eachobs_iter *it;
		const void *obs;
		size_t idx, len;

		bd_init(&d, 50, 16);
		d.vary_len = true;
		eachobs_dataset data = bd_dataset(&d);
		cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){
			.executor = executors[e], .nthreads = 2 }), 0);
		while (eachobs_next(it, &obs, &idx) == 1) {
			cr_assert_eq(eachobs_obs_length(it, obs, &len), 0);
			cr_assert_eq(len, bd_len_of(&d, idx));
			cr_assert(bd_bytes_ok(&d, idx, obs, len));
		}
		cr_assert_eq(eachobs_obs_length(it, obs, &len), -EINVAL,
			     "no observation is valid at the end");
		eachobs_close(it);
		bd_fini(&d);
	}
}

Test(batch, set_length_outside_getobs_is_einval)
{
	cr_assert_eq(eachobs_set_length(0), -EINVAL);
	cr_assert_eq(eachobs_obs_length(NULL, "x", &(size_t){ 0 }), -EINVAL);
}

Test(batch, close_with_batches_in_flight_leaks_nothing)
{
	for (int e = 0; e < NEXECUTORS; e++) {
		for (int ord = 0; ord < 2; ord++) {
			struct bd d;
			eachobs_iter *it;
			eachobs_batch b;

			bd_init(&d, 5000, 32);
			d.sleep_us = 50;
			eachobs_dataset data = bd_dataset(&d);
			cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){
				.executor = executors[e], .ordered = ord,
				.batchsize = 16, .nthreads = 4 }), 0);
			cr_assert_eq(eachobs_next_batch(it, &b), 1);
			eachobs_close(it);
			cr_assert_eq(eachobs__alloc_live(), 0);
			cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
			bd_fini(&d);
		}
	}
}

Test(batch, each_failed_allocation_gives_enomem_and_leaves_nothing)
{
	for (int ord = 0; ord < 2; ord++) {
		long k;
		for (k = 0; k < 1000; k++) {
			struct bd d;
			eachobs_iter *it;
			eachobs_options o = { .ordered = ord, .batchsize = 8,
					      .hold = 2, .nthreads = 2 };

			bd_init(&d, 100, 8);
			unsigned char *seen = calloc(100, 1);
			eachobs_dataset data = bd_dataset(&d);
			eachobs__fault_alloc_after(k);
			int rc = eachobs_parallel(&it, &data, &o);
			eachobs__fault_alloc_after(-1);
			if (rc == 0) {
				eachobs_batch b;
				cr_assert_eq(eachobs_next_batch(it, &b), 1);
				check_batch(&d, &o, &b, 0, seen, "after faults");
				cr_assert_eq(eachobs_release(it, b.data), 0);
				eachobs_close(it);
				cr_assert_eq(eachobs__alloc_live(), 0);
				free(seen);
				bd_fini(&d);
				break;
			}
			cr_assert_eq(rc, -ENOMEM, "allocation %ld failed: %d", k, rc);
			cr_assert_eq(eachobs__alloc_live(), 0, "allocation %ld: leak", k);
			cr_assert_eq(atomic_load(&d.calls[0]), 0);
			free(seen);
			bd_fini(&d);
		}
		cr_assert_gt(k, 3, "start made only %ld allocations", k);
	}
}
