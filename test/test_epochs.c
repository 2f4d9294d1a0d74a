/*
 * Samplers through the iterator (indices, shuffle, seed, epoch, shards):
 * what eachobs_parallel accepts, and that what it yields is the sampler's
 * order, bit-identical for every executor and thread count. The sampler's
 * own arithmetic is tested in test_sampler.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(epochs, .init = deadline, .timeout = 60);

/* getobs writes idx and eachobs_seed(seed, epoch, idx): what an augmenting
 * getobs would draw its randomness from. */
struct sd {
	size_t n;
	unsigned long long seed, epoch;
	atomic_long calls;
};

struct rec {
	size_t idx;
	unsigned long long draw;
};

static size_t sd_numobs(void *ctx)
{
	return ((struct sd *)ctx)->n;
}

static int sd_getobs(void *ctx, size_t idx, void *obs)
{
	struct sd *d = ctx;
	struct rec r = { idx, eachobs_seed(d->seed, d->epoch, idx) };

	atomic_fetch_add(&d->calls, 1);
	memcpy(obs, &r, sizeof(r));
	return 0;
}

/* Everything one iteration yields, in yield order; returns the count. */
static size_t collect(size_t n, eachobs_options o, struct rec *out, size_t max)
{
	struct sd d = { .n = n, .seed = o.seed, .epoch = o.epoch };
	eachobs_dataset data = { &d, sd_numobs, sd_getobs, sizeof(struct rec) };
	eachobs_iter *it;
	size_t k = 0;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	if (o.batchsize) {
		eachobs_batch b;
		while ((rc = eachobs_next_batch(it, &b)) == 1)
			for (size_t j = 0; j < b.count && k < max; j++)
				memcpy(&out[k++], (struct rec *)b.data + j,
				       sizeof(struct rec));
	} else {
		const void *obs;
		while ((rc = eachobs_next(it, &obs, NULL)) == 1 && k < max)
			memcpy(&out[k++], obs, sizeof(struct rec));
	}
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	cr_assert_eq(eachobs__alloc_live(), 0);
	return k;
}

static int cmp_rec(const void *a, const void *b)
{
	size_t x = ((const struct rec *)a)->idx, y = ((const struct rec *)b)->idx;

	return (x > y) - (x < y);
}

Test(epochs, indices_out_of_range_are_einval_before_any_getobs)
{
	struct sd d = { .n = 10 };
	eachobs_dataset data = { &d, sd_numobs, sd_getobs, sizeof(struct rec) };
	size_t idx[] = { 0, 3, 10 };
	eachobs_iter *it = (eachobs_iter *)1;
	eachobs_options o = { .indices = idx, .nindices = 3 };

	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	cr_assert_null(it);
	o = (eachobs_options){ .nindices = 3 };
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL, "NULL indices");
	o = (eachobs_options){ .shard_count = 4, .shard_index = 4 };
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL, "shard_index");
	cr_assert_eq(atomic_load(&d.calls), 0);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(epochs, ordered_iteration_follows_the_indices_with_repeats)
{
	size_t idx[] = { 7, 7, 0, 3, 9, 1, 3 };
	struct rec out[16];

	for (int e = 0; e < NEXECUTORS; e++) {
		size_t k = collect(10, (eachobs_options){
			.executor = executors[e], .ordered = true,
			.indices = idx, .nindices = 7, .nthreads = 3 }, out, 16);
		cr_assert_eq(k, 7);
		for (size_t i = 0; i < 7; i++)
			cr_assert_eq(out[i].idx, idx[i], "position %zu", i);
	}
}

/* The same (seed, epoch) gives the same sequence of (idx, draw) in ordered
 * mode for every executor, thread count and batching; unordered, the same
 * multiset. */
Test(epochs, shuffled_output_is_identical_for_every_executor_and_thread_count)
{
	enum { N = 3000 };
	struct rec *ref = calloc(N, sizeof(*ref)), *got = calloc(N, sizeof(*got));
	eachobs_options base = { .shuffle = true, .seed = 99, .epoch = 4,
				 .executor = EACHOBS_SERIAL };

	cr_assert_eq(collect(N, base, ref, N), N);
	for (int e = 0; e < NEXECUTORS; e++) {
		static const unsigned counts[] = { 1, 2, 8, 64 };
		for (size_t ti = 0; ti < 4; ti++) {
			unsigned t = counts[ti];
			for (size_t bs = 0; bs <= 16; bs += 16) {
				eachobs_options o = base;
				o.executor = executors[e];
				o.nthreads = t;
				o.batchsize = bs;
				o.ordered = true;
				cr_assert_eq(collect(N, o, got, N), N);
				cr_assert(memcmp(got, ref, N * sizeof(*ref)) == 0,
					  "%s, %u threads, batchsize %zu differs",
					  executor_name(o.executor), t, bs);
				o.ordered = false;
				cr_assert_eq(collect(N, o, got, N), N);
				qsort(got, N, sizeof(*got), cmp_rec);
				struct rec *sorted = malloc(N * sizeof(*sorted));
				memcpy(sorted, ref, N * sizeof(*ref));
				qsort(sorted, N, sizeof(*sorted), cmp_rec);
				cr_assert(memcmp(got, sorted, N * sizeof(*ref)) == 0,
					  "unordered %s: another multiset",
					  executor_name(o.executor));
				free(sorted);
			}
		}
	}
	free(ref);
	free(got);
}

/* A random crop and flip of a 32 x 32 "image", drawn from
 * eachobs_seed(seed, epoch, idx): what a getobs with augmentation does. */
enum { SIDE = 32, CROP = 16 };

static int crop_getobs(void *ctx, size_t idx, void *obs)
{
	const struct sd *d = ctx;
	unsigned long long r = eachobs_seed(d->seed, d->epoch, idx);
	size_t x0 = r % (SIDE - CROP + 1), y0 = (r >> 8) % (SIDE - CROP + 1);
	bool flip = (r >> 16) & 1;
	unsigned char *out = obs;

	for (size_t y = 0; y < CROP; y++)
		for (size_t x = 0; x < CROP; x++) {
			size_t sx = x0 + (flip ? CROP - 1 - x : x);
			out[y * CROP + x] = (unsigned char)(idx * 31 + (y0 + y) * SIDE + sx);
		}
	return 0;
}

/* Every batch's bytes, in order, for one configuration. */
static unsigned char *crop_batches(unsigned nthreads, eachobs_executor ex,
				   size_t n, size_t *bytes)
{
	struct sd d = { .n = n, .seed = 77, .epoch = 5 };
	eachobs_dataset data = { &d, sd_numobs, crop_getobs, CROP * CROP };
	eachobs_options o = { .nthreads = nthreads, .executor = ex,
			      .ordered = true, .batchsize = 8, .shuffle = true,
			      .seed = 77, .epoch = 5 };
	unsigned char *all = malloc(n * CROP * CROP), *p = all;
	eachobs_iter *it;
	eachobs_batch b;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		memcpy(p, b.data, b.count * CROP * CROP);
		p += b.count * CROP * CROP;
	}
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	*bytes = (size_t)(p - all);
	return all;
}

Test(epochs, seeded_random_crops_give_byte_identical_batches_for_any_thread_count)
{
	size_t n = 1003, ref_bytes, bytes;
	unsigned char *ref = crop_batches(1, EACHOBS_SERIAL, n, &ref_bytes);
	static const unsigned counts[] = { 1, 2, 8 };

	cr_assert_eq(ref_bytes, n * CROP * CROP);
	for (int e = 0; e < NEXECUTORS; e++)
		for (size_t t = 0; t < 3; t++) {
			unsigned char *got = crop_batches(counts[t], executors[e], n, &bytes);
			cr_assert_eq(bytes, ref_bytes);
			cr_assert(memcmp(got, ref, bytes) == 0,
				  "%s with %u threads: other bytes",
				  executor_name(executors[e]), counts[t]);
			free(got);
		}
	free(ref);
}

Test(epochs, each_epoch_visits_every_index_once_in_another_order)
{
	enum { N = 500 };
	struct rec a[N], b[N];

	collect(N, (eachobs_options){ .shuffle = true, .seed = 5, .epoch = 0,
				      .ordered = true }, a, N);
	collect(N, (eachobs_options){ .shuffle = true, .seed = 5, .epoch = 1,
				      .ordered = true }, b, N);
	size_t same = 0;
	for (size_t i = 0; i < N; i++)
		same += a[i].idx == b[i].idx;
	cr_assert_lt(same, 20, "%zu of %d positions equal across epochs", same, N);
	qsort(a, N, sizeof(*a), cmp_rec);
	qsort(b, N, sizeof(*b), cmp_rec);
	for (size_t i = 0; i < N; i++)
		cr_assert(a[i].idx == i && b[i].idx == i, "not a permutation");
	cr_assert_neq(a[1].draw, b[1].draw, "eachobs_seed ignores the epoch");
}

/* Shards of one epoch: with drop_last they partition the truncated order;
 * without, each has ceil(n / count) and together they cover everything. */
Test(epochs, shards_split_the_shuffled_order_like_distributed_sampler)
{
	enum { N = 103, COUNT = 4 };
	for (int drop = 0; drop < 2; drop++) {
		unsigned seen[N] = { 0 };
		size_t total = 0;
		for (unsigned s = 0; s < COUNT; s++) {
			struct rec out[N];
			size_t k = collect(N, (eachobs_options){
				.shuffle = true, .seed = 1, .epoch = 2,
				.shard_index = s, .shard_count = COUNT,
				.drop_last = drop, .nthreads = 2 }, out, N);
			cr_assert_eq(k, drop ? N / COUNT : (N + COUNT - 1) / COUNT,
				     "shard %u has %zu", s, k);
			for (size_t i = 0; i < k; i++)
				seen[out[i].idx]++;
			total += k;
		}
		size_t once = 0;
		for (size_t i = 0; i < N; i++) {
			cr_assert_leq(seen[i], drop ? 1u : 2u);
			once += seen[i] >= 1;
		}
		if (drop)
			cr_assert_eq(once, total, "shards overlap");
		else
			cr_assert_eq(once, N, "padded shards miss an index");
	}
}

Test(epochs, batches_are_cut_from_the_shard_and_drop_last_applies_to_it)
{
	enum { N = 100 };
	struct rec all[N], out[N];
	eachobs_options o = { .shuffle = true, .seed = 3, .shard_index = 1,
			      .shard_count = 3, .drop_last = true,
			      .ordered = true };
	size_t k = collect(N, o, all, N); /* the shard: 33 positions */

	cr_assert_eq(k, 33);
	o.batchsize = 8; /* 4 whole batches; the 33rd position is dropped */
	cr_assert_eq(collect(N, o, out, N), 32);
	cr_assert(memcmp(out, all, 32 * sizeof(*out)) == 0);
}
