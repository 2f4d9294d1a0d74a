/*
 * The checkpoint mechanism alone (src/resume.c), without an iterator: the
 * span set of yielded units against a bitmap, for units added in order, in
 * runs, in random order and in interleaved runs; the record written and
 * read back; the remap of what is left.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "resume.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

TestSuite(spans, .init = deadline, .timeout = 60);

/* The set's spans are sorted, disjoint, not touching, and cover exactly
 * the units marked in had[0..n). */
static void check_set(struct eachobs__yielded *y, const unsigned char *had,
		      size_t n)
{
	unsigned char *seen = calloc(n, 1);

	eachobs__yielded_flush(y);
	for (size_t i = 0; i < y->n; i++) {
		cr_assert_lt(y->spans[i].lo, y->spans[i].hi);
		cr_assert_leq(y->spans[i].hi, n);
		if (i)
			cr_assert_gt(y->spans[i].lo, y->spans[i - 1].hi,
				     "spans %zu and %zu touch", i - 1, i);
		for (uint64_t u = y->spans[i].lo; u < y->spans[i].hi; u++)
			seen[u] = 1;
	}
	cr_assert_eq(memcmp(seen, had, n), 0);
	free(seen);
}

Test(spans, hold_exactly_the_units_added_in_any_order)
{
	uint64_t rng = 42;

	for (int round = 0; round < 50; round++) {
		size_t n = 1 + splitmix64(&rng) % 3000;
		size_t *perm = malloc(n * sizeof(*perm));
		unsigned char *had = calloc(n, 1);
		struct eachobs__yielded y;

		cr_assert_eq(eachobs__yielded_init(&y, 4), 0);
		/* Runs of 1..20 units, shuffled: like workers' runs. */
		for (size_t i = 0; i < n; i++)
			perm[i] = i;
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = splitmix64(&rng) % (i + 1), t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
		for (size_t i = 0; i < n; i++) {
			size_t len = 1 + splitmix64(&rng) % 20;
			for (size_t u = perm[i]; u < perm[i] + len && u < n; u++)
				if (!had[u]) {
					had[u] = 1;
					eachobs__yielded_add(&y, u);
				}
			if (splitmix64(&rng) % 64 == 0)
				check_set(&y, had, n);
		}
		check_set(&y, had, n);
		cr_assert_eq(y.n, 1, "all units: one span, not %zu", y.n);
		cr_assert(!y.broken);
		eachobs__yielded_fini(&y);
		free(perm);
		free(had);
	}
}

/* Write a record of some yielded units, read it back: the remap walks
 * exactly the others, in order. Then a record from the resumed side,
 * in virtual units, merges with the first. */
Test(spans, a_record_reads_back_as_the_units_left)
{
	struct eachobs__ckpt_key key = { 1000, 1000, 1000, 0, 77 };
	struct eachobs__yielded y, z;
	struct eachobs__remap m, m2;
	unsigned char had[1000] = { 0 };
	uint64_t rng = 7;

	cr_assert_eq(eachobs__yielded_init(&y, 8), 0);
	for (int i = 0; i < 400; i++) {
		size_t u = splitmix64(&rng) % 1000;
		if (!had[u]) {
			had[u] = 1;
			eachobs__yielded_add(&y, u);
		}
	}
	size_t len = 0;
	cr_assert_eq(eachobs__ckpt_write(&key, &y, NULL, NULL, &len), -ENOSPC);
	void *buf = malloc(len);
	cr_assert_eq(eachobs__ckpt_write(&key, &y, NULL, buf, &len), 0);
	cr_assert_eq(eachobs__ckpt_read(&key, buf, len, &m), 0);
	size_t left = 0;
	for (size_t u = 0; u < 1000; u++)
		left += !had[u];
	cr_assert_eq(m.total, left);
	uint64_t prev = 0;
	for (uint64_t v = 0; v < m.total; v++) {
		uint64_t u = eachobs__remap_unit(&m, v);
		cr_assert(!had[u], "virtual %llu maps to yielded %llu",
			  (unsigned long long)v, (unsigned long long)u);
		cr_assert(v == 0 || u > prev);
		prev = u;
	}
	/* The resumed side yields every other virtual unit; its record is
	 * the union, in original units. */
	cr_assert_eq(eachobs__yielded_init(&z, 8), 0);
	for (uint64_t v = 0; v < m.total; v += 2) {
		eachobs__yielded_add(&z, v);
		had[eachobs__remap_unit(&m, v)] = 1;
	}
	size_t len2 = 0;
	cr_assert_eq(eachobs__ckpt_write(&key, &z, &m, NULL, &len2), -ENOSPC);
	void *buf2 = malloc(len2);
	cr_assert_eq(eachobs__ckpt_write(&key, &z, &m, buf2, &len2), 0);
	cr_assert_eq(eachobs__ckpt_read(&key, buf2, len2, &m2), 0);
	left = 0;
	for (size_t u = 0; u < 1000; u++)
		left += !had[u];
	cr_assert_eq(m2.total, left);
	for (uint64_t v = 0; v < m2.total; v++)
		cr_assert(!had[eachobs__remap_unit(&m2, v)]);
	/* Another key is refused. */
	struct eachobs__remap m3;
	key.config++;
	cr_assert_eq(eachobs__ckpt_read(&key, buf2, len2, &m3), -EINVAL);
	eachobs__remap_fini(&m);
	eachobs__remap_fini(&m2);
	eachobs__yielded_fini(&y);
	eachobs__yielded_fini(&z);
	free(buf);
	free(buf2);
}
