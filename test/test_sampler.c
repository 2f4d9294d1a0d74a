/*
 * The sampler module (src/sampler.h) on its own, one test per promise:
 * shuffling is a well-mixed bijection that depends only on (order, seed,
 * epoch) and needs no table; shards deal the order out like PyTorch's
 * DistributedSampler; bad options give -EINVAL; eachobs_seed is a pure,
 * well-mixed hash. The iterator's use of the sampler is tested with the
 * iterator.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "sampler.h"
#include "fault.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(sampler, .init = deadline, .timeout = 60);
TestSuite(seed, .init = deadline, .timeout = 60);

static struct eachobs__sampler make(size_t n, const eachobs_options *o)
{
	struct eachobs__sampler s;
	int rc = eachobs__sampler_init(&s, n, o);

	cr_assert_eq(rc, 0, "sampler_init(n = %zu) returned %d", n, rc);
	return s;
}

/* Every index the sampler visits, in order; the caller frees it. */
static size_t *visit_all(const struct eachobs__sampler *s)
{
	size_t len = eachobs__sampler_len(s);
	size_t *v = malloc((len ? len : 1) * sizeof(*v));

	cr_assert_not_null(v);
	for (size_t i = 0; i < len; i++)
		v[i] = eachobs__sampler_index(s, i);
	return v;
}

static size_t *shuffled(size_t n, unsigned long long seed,
			unsigned long long epoch)
{
	eachobs_options o = { .shuffle = true, .seed = seed, .epoch = epoch };
	struct eachobs__sampler s = make(n, &o);

	cr_assert_eq(eachobs__sampler_len(&s), n);
	return visit_all(&s);
}

static void assert_permutation(const size_t *v, size_t n, const char *what)
{
	unsigned char *seen = calloc(n ? n : 1, 1);

	cr_assert_not_null(seen);
	for (size_t i = 0; i < n; i++) {
		cr_assert_lt(v[i], n, "%s: position %zu gives %zu, not below %zu",
			     what, i, v[i], n);
		cr_assert_not(seen[v[i]], "%s: %zu appears twice", what, v[i]);
		seen[v[i]] = 1;
	}
	free(seen);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

static int cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a;
	unsigned long long y = *(const unsigned long long *)b;

	return (x > y) - (x < y);
}

static size_t agreements(const size_t *a, const size_t *b, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += a[i] == b[i];
	return k;
}

/* ---- the default sampler -------------------------------------------- */

Test(sampler, default_options_visit_every_index_in_order)
{
	eachobs_options zero = { 0 };
	const eachobs_options *opts[] = { NULL, &zero };

	for (size_t k = 0; k < 2; k++) {
		struct eachobs__sampler s = make(1000, opts[k]);

		cr_assert(s.identity, "the default sampler misses the fast path");
		cr_assert_eq(eachobs__sampler_len(&s), 1000);
		for (size_t i = 0; i < 1000; i++)
			cr_assert_eq(eachobs__sampler_index(&s, i), i);
	}
}

Test(sampler, no_shuffle_ignores_seed_and_epoch)
{
	eachobs_options o = { .seed = 7, .epoch = 9 };
	struct eachobs__sampler s = make(100, &o);

	cr_assert(s.identity);
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq(eachobs__sampler_index(&s, i), i);
}

/* ---- shuffle -------------------------------------------------------- */

Test(sampler, shuffle_is_a_bijection_for_many_lengths)
{
	size_t lengths[16] = { 0, 1, 2, 3, 5, 7, 8, 100, 1000, 4097,
			       ((size_t)1 << 20) + 7 };
	uint64_t rng = 0x5eed;
	char what[96];

	for (size_t k = 11; k < 16; k++)
		lengths[k] = 1 + splitmix64(&rng) % 50000;
	for (size_t k = 0; k < 16; k++)
		for (unsigned long long e = 0; e < 3; e++) {
			size_t *v = shuffled(lengths[k], 11 + e, e);

			snprintf(what, sizeof(what), "L = %zu, epoch %llu",
				 lengths[k], e);
			assert_permutation(v, lengths[k], what);
			free(v);
		}
}

Test(sampler, shuffle_depends_only_on_seed_and_epoch)
{
	/* Options the iterator reads for itself must not change the order:
	 * the permutation is the same for every nthreads and executor. */
	eachobs_options a = { .shuffle = true, .seed = 5, .epoch = 2 };
	eachobs_options b = { .shuffle = true, .seed = 5, .epoch = 2,
			      .nthreads = 13, .ordered = true,
			      .executor = EACHOBS_SERIAL, .buffersize = 3 };
	struct eachobs__sampler sa = make(777, &a), sb = make(777, &b);

	for (size_t i = 0; i < 777; i++)
		cr_assert_eq(eachobs__sampler_index(&sa, i),
			     eachobs__sampler_index(&sb, i));
}

Test(sampler, shuffle_differs_across_epochs_and_seeds)
{
	/* Two random permutations of 1000 agree in about one position. */
	size_t *v[6];

	for (unsigned k = 0; k < 4; k++)
		v[k] = shuffled(1000, 42, k);
	v[4] = shuffled(1000, 43, 0);
	v[5] = shuffled(1000, 0, 0);
	for (unsigned i = 0; i < 6; i++)
		for (unsigned j = i + 1; j < 6; j++)
			cr_assert_lt(agreements(v[i], v[j], 1000), 20,
				     "permutations %u and %u agree in %zu "
				     "positions", i, j,
				     agreements(v[i], v[j], 1000));
	for (unsigned k = 0; k < 6; k++)
		free(v[k]);
}

Test(sampler, shuffle_matches_its_regression_vector)
{
	/* A regression vector, computed once from this implementation: it
	 * is not special, but a change to the permutation changes every
	 * shuffled run ever recorded, so it must be deliberate (update the
	 * vector and say so in the release notes). */
	static const size_t want[16] = { 366, 666, 125, 194, 8,   912,
					 803, 620, 299, 833, 174, 186,
					 127, 951, 532, 281 };
	size_t *v = shuffled(1000, 42, 3);

	for (size_t i = 0; i < 16; i++)
		cr_assert_eq(v[i], want[i], "position %zu: %zu, was %zu", i,
			     v[i], want[i]);
	free(v);
}

Test(sampler, shuffle_of_2_to_the_40_needs_no_table_and_stays_in_range)
{
	const size_t nsample = 100000;
	eachobs_options o = { .shuffle = true, .seed = 1, .epoch = 1 };
	struct eachobs__sampler s;
	size_t *v, n;

	if ((uint64_t)SIZE_MAX < (1ULL << 40))
		cr_skip_test("size_t cannot hold 2^40");
	n = (size_t)1 << 40;
	/* The sampler is a fixed-size struct: nothing to allocate for n. */
	s = make(n, &o);
	cr_assert_eq(eachobs__sampler_len(&s), n);
	v = malloc(nsample * sizeof(*v));
	cr_assert_not_null(v);
	for (size_t k = 0; k < nsample; k++) {
		/* Both ends and a spread of positions in between. */
		size_t pos = k < nsample / 2 ? k : n - 1 - (k - nsample / 2) *
							       (n / nsample);

		v[k] = eachobs__sampler_index(&s, pos);
		cr_assert_lt(v[k], n);
	}
	/* No timing assertion (this machine is shared, and valgrind runs
	 * this suite): that 2^40 positions map without a table is what the
	 * fixed-size struct above and the library's allocation count show. */
	cr_assert_eq(eachobs__alloc_live(), 0, "the sampler allocated");
	qsort(v, nsample, sizeof(*v), cmp_size);
	for (size_t k = 1; k < nsample; k++)
		cr_assert_neq(v[k], v[k - 1], "%zu appears twice", v[k]);
	free(v);
}

Test(sampler, shuffle_is_well_mixed)
{
	const size_t n = 10000;

	for (unsigned long long e = 0; e < 4; e++) {
		size_t *v = shuffled(n, 2024, e);
		double mean = (double)(n - 1) / 2, sxy = 0, sxx = 0, r;
		size_t fixed = 0, near = 0, steps = 0;

		for (size_t i = 0; i < n; i++) {
			double dx = (double)i - mean, dy = (double)v[i] - mean;

			sxy += dx * dy;
			sxx += dx * dx; /* the same for y: a permutation */
			fixed += v[i] == i;
			near += (v[i] > i ? v[i] - i : i - v[i]) < 10;
			if (i && v[i] == v[i - 1] + 1)
				steps++;
		}
		r = sxy / sxx;
		/* A random permutation: |r| about 1/sqrt(n) = 0.01, about
		 * one fixed point, 19 of n within distance 9, about one
		 * successor pair. A rotation or a stride would fail all. */
		cr_assert_lt(fabs(r), 0.05, "epoch %llu: correlation %.3f", e,
			     r);
		cr_assert_lt(fixed, 10, "epoch %llu: %zu fixed points", e,
			     fixed);
		cr_assert_lt(near, 60, "epoch %llu: %zu moved less than 10", e,
			     near);
		cr_assert_lt(steps, 10, "epoch %llu: %zu runs of successors",
			     e, steps);
		free(v);
	}
}

Test(sampler, shuffle_handles_lengths_0_1_and_2)
{
	unsigned swapped = 0;
	size_t *v;

	v = shuffled(0, 1, 1);
	free(v);
	v = shuffled(1, 1, 1);
	cr_assert_eq(v[0], 0);
	free(v);
	/* Both orders of two must occur, about equally often. */
	for (unsigned long long e = 0; e < 200; e++) {
		v = shuffled(2, 99, e);
		assert_permutation(v, 2, "L = 2");
		swapped += v[0] == 1;
		free(v);
	}
	cr_assert(swapped > 60 && swapped < 140, "swapped %u times of 200",
		  swapped);
}

/* ---- indices -------------------------------------------------------- */

Test(sampler, indices_are_visited_in_the_given_order)
{
	static const size_t idx[] = { 9, 0, 4, 4, 7 };
	eachobs_options o = { .indices = idx, .nindices = 5 };
	struct eachobs__sampler s = make(10, &o);

	cr_assert_not(s.identity);
	cr_assert_eq(eachobs__sampler_len(&s), 5);
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(eachobs__sampler_index(&s, i), idx[i]);
}

Test(sampler, empty_indices_give_an_empty_order)
{
	static const size_t idx[] = { 3 };
	eachobs_options o = { .indices = idx, .nindices = 0, .shuffle = true,
			      .shard_count = 3, .shard_index = 2 };
	struct eachobs__sampler s = make(10, &o);

	cr_assert_eq(eachobs__sampler_len(&s), 0);
}

Test(sampler, shuffled_indices_are_a_permutation_of_the_given_multiset)
{
	size_t idx[300], *v, sorted[300];
	uint64_t rng = 77;

	for (size_t i = 0; i < 300; i++)
		idx[i] = splitmix64(&rng) % 50; /* many repeats */
	for (unsigned long long e = 0; e < 3; e++) {
		eachobs_options o = { .indices = idx, .nindices = 300,
				      .shuffle = true, .seed = 3, .epoch = e };
		struct eachobs__sampler s = make(50, &o);

		v = visit_all(&s);
		cr_assert_lt(agreements(v, idx, 300), 300 / 4,
			     "epoch %llu: barely shuffled", e);
		memcpy(sorted, idx, sizeof(idx));
		qsort(sorted, 300, sizeof(size_t), cmp_size);
		qsort(v, 300, sizeof(size_t), cmp_size);
		cr_assert_arr_eq(v, sorted, sizeof(sorted));
		free(v);
	}
}

/* ---- shards --------------------------------------------------------- */

static const unsigned counts[] = { 2, 3, 4, 7 };
static const size_t shard_lengths[] = { 0, 1, 5, 10, 11, 100 };

/* Check every shard of an order of L against the unsharded order `full`
 * under the same shuffle: shard s, position p is full[(s + p*c) mod L];
 * every shard has the promised length; drop_last leaves no index in two
 * shards, padding leaves none out. */
static void check_shards(size_t order_len, unsigned count, bool drop_last,
			 bool shuffle)
{
	eachobs_options o = { .shuffle = shuffle, .seed = 8, .epoch = 1,
			      .drop_last = drop_last };
	struct eachobs__sampler whole = make(order_len, &o);
	size_t per = drop_last ? order_len / count
			       : (order_len + count - 1) / count;
	size_t *full = visit_all(&whole);
	size_t *hits = calloc(order_len ? order_len : 1, sizeof(size_t));
	size_t total = 0;

	cr_assert_not_null(hits);
	o.shard_count = count;
	for (unsigned si = 0; si < count; si++) {
		struct eachobs__sampler s;

		o.shard_index = si;
		s = make(order_len, &o);
		cr_assert_eq(eachobs__sampler_len(&s), per,
			     "L %zu, shard %u of %u: length %zu, not %zu",
			     order_len, si, count, eachobs__sampler_len(&s),
			     per);
		for (size_t p = 0; p < per; p++) {
			size_t got = eachobs__sampler_index(&s, p);
			size_t want = full[(si + p * count) % order_len];

			cr_assert_eq(got, want, "L %zu, shard %u of %u, pos %zu",
				     order_len, si, count, p);
			hits[got]++;
			total++;
		}
	}
	cr_assert_eq(total, per * count);
	for (size_t i = 0; i < order_len; i++) {
		if (drop_last)
			cr_assert_leq(hits[i], 1, "L %zu: %zu in two shards",
				      order_len, i);
		else
			cr_assert_geq(hits[i], 1, "L %zu: %zu in no shard",
				      order_len, i);
		if (order_len % count == 0)
			cr_assert_eq(hits[i], 1);
	}
	free(hits);
	free(full);
}

Test(sampler, shards_with_drop_last_are_disjoint_and_equally_long)
{
	for (size_t k = 0; k < 4; k++)
		for (size_t l = 0; l < 6; l++) {
			check_shards(shard_lengths[l], counts[k], true, false);
			check_shards(shard_lengths[l], counts[k], true, true);
		}
}

Test(sampler, shards_without_drop_last_pad_by_wrapping_around)
{
	for (size_t k = 0; k < 4; k++)
		for (size_t l = 0; l < 6; l++) {
			check_shards(shard_lengths[l], counts[k], false, false);
			check_shards(shard_lengths[l], counts[k], false, true);
		}
}

Test(sampler, shards_follow_the_shuffle_from_epoch_to_epoch)
{
	eachobs_options o = { .shuffle = true, .seed = 4, .shard_count = 4,
			      .shard_index = 1 };
	struct eachobs__sampler s0, s1;
	size_t *v0, *v1;

	s0 = make(100, &o);
	o.epoch = 1;
	s1 = make(100, &o);
	v0 = visit_all(&s0);
	v1 = visit_all(&s1);
	cr_assert_lt(agreements(v0, v1, 25), 5, "shard 1 barely changed");
	free(v0);
	free(v1);
}

Test(sampler, shards_of_an_index_list_take_its_entries)
{
	static const size_t idx[] = { 8, 6, 4, 2, 0 };
	eachobs_options o = { .indices = idx, .nindices = 5,
			      .shard_count = 2, .shard_index = 1 };
	struct eachobs__sampler s = make(9, &o);

	/* Padded to 6: 8 6 4 2 0 8; shard 1 takes positions 1, 3, 5. */
	cr_assert_eq(eachobs__sampler_len(&s), 3);
	cr_assert_eq(eachobs__sampler_index(&s, 0), 6);
	cr_assert_eq(eachobs__sampler_index(&s, 1), 2);
	cr_assert_eq(eachobs__sampler_index(&s, 2), 8);
}

Test(sampler, padding_repeats_the_start_when_shorter_than_the_count)
{
	eachobs_options o = { .shard_count = 7 };

	/* L = 3 over 7 shards: 0 1 2 0 1 2 0, one each. */
	for (unsigned si = 0; si < 7; si++) {
		struct eachobs__sampler s;

		o.shard_index = si;
		s = make(3, &o);
		cr_assert_eq(eachobs__sampler_len(&s), 1);
		cr_assert_eq(eachobs__sampler_index(&s, 0), si % 3);
	}
}

Test(sampler, shards_of_huge_orders_do_not_overflow)
{
	/* SIZE_MAX over 7 shards pads by 6, so the last shard's last
	 * position is (6 + (per - 1) * 7) mod L = (SIZE_MAX + 5) mod L: a
	 * naive sum overflows before it wraps around to the start. */
	eachobs_options o = { .shard_count = 7, .shard_index = 6 };
	size_t n = SIZE_MAX, per = n / 7 + (n % 7 != 0);
	struct eachobs__sampler s = make(n, &o);
	size_t last = eachobs__sampler_index(&s, per - 1);
	unsigned __int128 want = ((unsigned __int128)(per - 1) * 7 + 6) % n;

	cr_assert_eq(eachobs__sampler_len(&s), per);
	cr_assert_eq(last, (size_t)want, "got %zu, want %zu", last,
		     (size_t)want);
}

Test(sampler, shard_count_0_or_1_means_no_sharding)
{
	for (unsigned c = 0; c < 2; c++) {
		eachobs_options o = { .shard_count = c, .shard_index = 5 };
		struct eachobs__sampler s = make(10, &o);

		cr_assert(s.identity);
		cr_assert_eq(eachobs__sampler_len(&s), 10);
		cr_assert_eq(eachobs__sampler_index(&s, 3), 3);
	}
}

/* ---- validation ----------------------------------------------------- */

/* sampler_init must fail with -EINVAL and leave *s as it was. */
static void expect_einval(size_t n, const eachobs_options *o, const char *what)
{
	struct eachobs__sampler s, before;
	int rc;

	memset(&s, 0xa5, sizeof(s));
	before = s;
	rc = eachobs__sampler_init(&s, n, o);
	cr_assert_eq(rc, -EINVAL, "%s: returned %d", what, rc);
	cr_assert(memcmp(&s, &before, sizeof(s)) == 0, "%s: *s changed", what);
}

Test(sampler, rejects_shard_index_not_below_shard_count)
{
	expect_einval(10, &(eachobs_options){ .shard_count = 2,
					      .shard_index = 2 },
		      "shard 2 of 2");
	expect_einval(10, &(eachobs_options){ .shard_count = 7,
					      .shard_index = 100 },
		      "shard 100 of 7");
	expect_einval(10, &(eachobs_options){ .shard_count = UINT_MAX,
					      .shard_index = UINT_MAX },
		      "shard UINT_MAX of UINT_MAX");
}

Test(sampler, rejects_indices_out_of_range)
{
	static const size_t bad_last[] = { 0, 3, 10 };
	static const size_t huge[] = { SIZE_MAX };
	static const size_t zero[] = { 0 };

	expect_einval(10, &(eachobs_options){ .indices = bad_last,
					      .nindices = 3 },
		      "index 10 of 10");
	expect_einval(10, &(eachobs_options){ .indices = huge,
					      .nindices = 1 },
		      "index SIZE_MAX");
	expect_einval(0, &(eachobs_options){ .indices = zero,
					     .nindices = 1 },
		      "any index of an empty dataset");
	/* Only the first nindices entries are checked. */
	make(10, &(eachobs_options){ .indices = bad_last, .nindices = 2 });
}

Test(sampler, rejects_null_indices_with_a_count)
{
	expect_einval(10, &(eachobs_options){ .nindices = 1 },
		      "indices NULL, nindices 1");
}

/* ---- eachobs_seed --------------------------------------------------- */

Test(seed, is_a_pure_function_and_matches_its_regression_vector)
{
	/* A regression vector, computed once from this implementation:
	 * getobs augmentations seeded from eachobs_seed change if it does. */
	static const unsigned long long want[4] = {
		0x4d23c43a8d1120a4ULL, 0xbe44c9b7d1095cb9ULL,
		0x8a7ccc2d82d45ad0ULL, 0x156d1b87a3941a16ULL,
	};

	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(eachobs_seed(42, 3, i), want[i], "idx %zu", i);
		cr_assert_eq(eachobs_seed(42, 3, i), eachobs_seed(42, 3, i));
	}
}

Test(seed, differs_across_seeds_epochs_and_indices)
{
	const size_t nidx = 1000, nepoch = 8, nseed = 3;
	size_t total = nidx * nepoch * nseed, k = 0;
	unsigned long long *v = malloc(total * sizeof(*v));

	cr_assert_not_null(v);
	for (unsigned long long s = 0; s < nseed; s++)
		for (unsigned long long e = 0; e < nepoch; e++)
			for (size_t i = 0; i < nidx; i++)
				v[k++] = eachobs_seed(s, e, i);
	qsort(v, total, sizeof(*v), cmp_ull);
	for (k = 1; k < total; k++)
		cr_assert_neq(v[k], v[k - 1], "two inputs share a seed");
	free(v);
}

Test(seed, output_bits_are_balanced)
{
	/* 4096 consecutive indices: each bit set with frequency 1/2, whose
	 * standard deviation here is 0.8%; 5% is six of them. */
	const unsigned n = 4096;
	unsigned ones[64] = { 0 };

	for (size_t i = 0; i < n; i++) {
		unsigned long long h = eachobs_seed(1, 0, i);

		for (unsigned b = 0; b < 64; b++)
			ones[b] += (h >> b) & 1;
	}
	for (unsigned b = 0; b < 64; b++)
		cr_assert(fabs(ones[b] / (double)n - 0.5) < 0.05,
			  "bit %u set in %u of %u", b, ones[b], n);
}

static unsigned long long seed_flipped(unsigned long long seed,
				       unsigned long long epoch, size_t idx,
				       unsigned which, unsigned bit)
{
	if (which == 0)
		seed ^= 1ULL << bit;
	else if (which == 1)
		epoch ^= 1ULL << bit;
	else
		idx ^= (size_t)1 << bit;
	return eachobs_seed(seed, epoch, idx);
}

Test(seed, flipping_one_input_bit_flips_each_output_bit_half_the_time)
{
	/* Strict avalanche over 2000 random inputs for every (input bit,
	 * output bit) pair: standard deviation 1.1%, 8% is seven of them. */
	const unsigned n = 2000, in_bits = sizeof(size_t) * 8;
	static unsigned flips[3][64][64];
	uint64_t rng = 1234;

	for (unsigned k = 0; k < n; k++) {
		unsigned long long s = splitmix64(&rng), e = splitmix64(&rng);
		size_t i = (size_t)splitmix64(&rng);
		unsigned long long h = eachobs_seed(s, e, i);

		for (unsigned w = 0; w < 3; w++)
			for (unsigned b = 0; b < (w == 2 ? in_bits : 64); b++) {
				unsigned long long d =
					h ^ seed_flipped(s, e, i, w, b);

				for (unsigned o = 0; o < 64; o++)
					flips[w][b][o] += (d >> o) & 1;
			}
	}
	for (unsigned w = 0; w < 3; w++)
		for (unsigned b = 0; b < (w == 2 ? in_bits : 64); b++)
			for (unsigned o = 0; o < 64; o++)
				cr_assert(fabs(flips[w][b][o] / (double)n - 0.5) <
						  0.08,
					  "input %u bit %u flips output bit %u "
					  "%u times of %u",
					  w, b, o, flips[w][b][o], n);
}
