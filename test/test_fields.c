/*
 * Observations made of fields (eachobs_options.fields): each field of a
 * unit is one contiguous, 64-byte aligned array, field k of entry j at
 * eachobs_field_data(it, data, k) + j * fields[k]; getobs's obs is field
 * 0 and eachobs_field(k) the others; skipped observations move down in
 * every field; bad fields are refused. Over every executor, ordered and
 * not, single and batched (1, 7, 64), hold 0 and 2, on a pool and not,
 * with a fast and a slow getobs.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

TestSuite(fields, .init = deadline, .timeout = 60);

#define N 300
/* Five floats of pixels, an int64 label, a one-byte flag. */
static const size_t sizes[] = { 5 * sizeof(float), sizeof(int64_t), 1 };
#define NF 3
#define OBS_SIZE (5 * sizeof(float) + sizeof(int64_t) + 1)

struct ds {
	unsigned slow_us; /* every 17th getobs sleeps this long */
	size_t fail_every; /* 0, or: getobs(idx) fails when idx % it == 0 */
	atomic_int bad;    /* a getobs found its fields misplaced */
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;
	float *px = obs;
	int64_t *label = eachobs_field(1);
	unsigned char *flag = eachobs_field(2);

	if (eachobs_field(0) != obs || !label || !flag || eachobs_field(NF))
		atomic_store(&d->bad, 1);
	if (d->slow_us && idx % 17 == 0)
		sleep_us(d->slow_us);
	if (d->fail_every && idx % d->fail_every == 0)
		return -EIO;
	for (int i = 0; i < 5; i++)
		px[i] = (float)idx + 0.5f * (float)i;
	memcpy(label, &(int64_t){ (int64_t)idx * 3 }, sizeof(int64_t));
	*flag = (unsigned char)(idx % 251);
	return 0;
}

static eachobs_iter *start(const struct point *p, eachobs_pool *pool,
			   struct ds *d, eachobs_on_error on_error)
{
	eachobs_dataset data = { d, numobs, getobs, OBS_SIZE };
	eachobs_options o = { .nthreads = 3, .executor = p->ex,
			      .ordered = p->ordered, .batchsize = p->batchsize,
			      .hold = p->hold, .pool = p->pool ? pool : NULL,
			      .on_error = on_error, .fields = sizes,
			      .nfields = NF };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "%s",
		     eachobs_last_error());
	return it;
}

/* Check count entries of the item at data, field by field, and mark their
 * indices seen. */
static void check_item(eachobs_iter *it, const void *data, const size_t *idx,
		       size_t count, unsigned char *seen, const char *name)
{
	const unsigned char *f[NF];

	for (size_t k = 0; k < NF; k++) {
		f[k] = eachobs_field_data(it, data, k);
		cr_assert(f[k], "%s: no field %zu", name, k);
		cr_assert_eq((uintptr_t)f[k] % 64, 0,
			     "%s: field %zu's array is not 64-byte aligned",
			     name, k);
	}
	cr_assert_eq(f[0], data, "%s: field 0 is not the item's data", name);
	cr_assert_null(eachobs_field_data(it, data, NF));
	for (size_t j = 0; j < count; j++) {
		size_t i = idx[j];
		float px[5];
		int64_t label;
		memcpy(px, f[0] + j * sizes[0], sizeof(px));
		memcpy(&label, f[1] + j * sizes[1], sizeof(label));
		cr_assert_lt(i, N, "%s: index %zu", name, i);
		cr_assert_eq(seen[i]++, 0, "%s: index %zu twice", name, i);
		for (int e = 0; e < 5; e++)
			cr_assert_eq(px[e], (float)i + 0.5f * (float)e,
				     "%s: pixel %d of %zu", name, e, i);
		cr_assert_eq(label, (int64_t)i * 3, "%s: label of %zu", name,
			     i);
		cr_assert_eq(f[2][j], i % 251, "%s: flag of %zu", name, i);
	}
}

/* Take every item, releasing each as the next comes (hold), and check
 * it; the number of observations seen. */
static size_t drain(eachobs_iter *it, const struct point *p,
		    unsigned char *seen, const char *name)
{
	size_t total = 0;
	const void *prev = NULL;
	int rc;

	for (;;) {
		const void *data;
		size_t one, count = 1;
		const size_t *idx = &one;
		if (p->batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			data = b.data;
			idx = b.idx;
			count = b.count;
		} else {
			rc = eachobs_next(it, &data, &one);
		}
		if (rc != 1)
			break;
		check_item(it, data, idx, count, seen, name);
		total += count;
		if (p->hold && prev)
			cr_assert_eq(eachobs_release(it, prev), 0, "%s: %s",
				     name, eachobs_last_error());
		prev = data;
	}
	cr_assert_eq(rc, 0, "%s: ended with %d (%s)", name, rc,
		     eachobs_last_error());
	return total;
}

static unsigned slow_us;

static void each_field_point(const struct point *p, eachobs_pool *pool)
{
	struct ds d = { .slow_us = slow_us };
	unsigned char seen[N] = { 0 };
	char name[128];

	point_name(p, name, sizeof(name));
	eachobs_iter *it = start(p, pool, &d, EACHOBS_ON_ERROR_STOP);
	size_t total = drain(it, p, seen, name);
	eachobs_close(it);
	cr_assert_eq(total, N, "%s: %zu observations", name, total);
	cr_assert_eq(atomic_load(&d.bad), 0,
		     "%s: eachobs_field gave a wrong place in getobs", name);
}

static const size_t batch_sizes[] = { 0, 1, 7, 64 };

ParameterizedTestParameters(fields,
			    each_field_is_one_contiguous_array_in_every_mode)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, fields,
		  each_field_is_one_contiguous_array_in_every_mode)
{
	slow_us = 0;
	cr_assert_eq(points_of_mode(m, batch_sizes, 4, 2, each_field_point),
		     0);
	slow_us = 300;
	cr_assert_eq(points_of_mode(m, batch_sizes, 4, 2, each_field_point),
		     0);
}

static void skip_point(const struct point *p, eachobs_pool *pool)
{
	struct ds d = { .fail_every = 13 };
	unsigned char seen[N] = { 0 };
	char name[128];

	point_name(p, name, sizeof(name));
	eachobs_iter *it = start(p, pool, &d, EACHOBS_ON_ERROR_SKIP);
	size_t total = drain(it, p, seen, name);
	eachobs_close(it);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(seen[i], i % 13 != 0, "%s: index %zu seen %d",
			     name, i, seen[i]);
	cr_assert_eq(total, N - (N + 12) / 13, "%s", name);
}

ParameterizedTestParameters(fields,
			    skipped_observations_move_down_in_every_field)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, fields,
		  skipped_observations_move_down_in_every_field)
{
	cr_assert_eq(points_of_mode(m, batch_sizes, 4, 2, skip_point), 0);
}

static int length_getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	memset(obs, (int)(idx & 0x7f), sizes[0]);
	if (eachobs_set_length(sizes[0] + 1) != -EINVAL)
		return -EPROTO;
	return eachobs_set_length(idx % (sizes[0] + 1));
}

Test(fields, lengths_count_the_bytes_of_field_zero)
{
	eachobs_dataset data = { NULL, numobs, length_getobs, OBS_SIZE };
	eachobs_options o = { .nthreads = 2, .batchsize = 8, .fields = sizes,
			      .nfields = NF };
	eachobs_iter *it;
	eachobs_batch b;
	size_t total = 0;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next_batch(it, &b)) == 1)
		for (size_t j = 0; j < b.count; j++, total++)
			cr_assert_eq(b.lengths[j], b.idx[j] % (sizes[0] + 1));
	cr_assert_eq(rc, 0, "%d: %s", rc, eachobs_last_error());
	cr_assert_eq(total, N);
	eachobs_close(it);
}

Test(fields, eachobs_field_is_null_outside_getobs)
{
	cr_assert_null(eachobs_field(0));
	cr_assert_null(eachobs_field(1));
	cr_assert_null(eachobs_field_data(NULL, sizes, 0));
}

static int plain_getobs(void *ctx, size_t idx, void *obs)
{
	int *bad = ctx;

	if (eachobs_field(0) != obs || eachobs_field(1))
		*bad = 1;
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

Test(fields, without_fields_the_observation_is_field_zero)
{
	int bad = 0;
	eachobs_dataset data = { &bad, numobs, plain_getobs, sizeof(size_t) };
	eachobs_options o = { .executor = EACHOBS_SERIAL, .batchsize = 4 };
	eachobs_iter *it;
	eachobs_batch b;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_next_batch(it, &b), 1);
	cr_assert_eq(eachobs_field_data(it, b.data, 0), b.data);
	cr_assert_null(eachobs_field_data(it, b.data, 1));
	cr_assert_eq(((size_t *)b.data)[3], 3);
	eachobs_close(it);
	cr_assert_eq(bad, 0, "eachobs_field(0) is not obs without fields");
}

/* -EINVAL with a message naming fields, and nothing left running. */
static void refused(const eachobs_options *o, size_t obs_size,
		    const char *words)
{
	eachobs_dataset data = { NULL, numobs, getobs, obs_size };
	eachobs_iter *it = (eachobs_iter *)&data;

	cr_assert_eq(eachobs_parallel(&it, &data, o), -EINVAL);
	cr_assert_null(it);
	cr_assert(strstr(eachobs_last_error(), words), "message \"%s\"",
		  eachobs_last_error());
}

Test(fields, bad_fields_are_refused_with_a_message)
{
	size_t many[EACHOBS_MAX_FIELDS + 1] = { 0 };

	many[0] = OBS_SIZE;
	refused(&(eachobs_options){ .nfields = 2 }, OBS_SIZE,
		"fields is NULL with nfields 2");
	refused(&(eachobs_options){ .fields = many,
				    .nfields = EACHOBS_MAX_FIELDS + 1 },
		OBS_SIZE, "exceeds EACHOBS_MAX_FIELDS");
	refused(&(eachobs_options){ .fields = sizes, .nfields = NF },
		OBS_SIZE + 1, "fields sum to 29 bytes, data->obs_size is 30");
	size_t huge[] = { SIZE_MAX, 2 };
	refused(&(eachobs_options){ .fields = huge, .nfields = 2 }, 1,
		"overflow");
	size_t big[] = { SIZE_MAX / 4, SIZE_MAX / 4 };
	refused(&(eachobs_options){ .fields = big, .nfields = 2,
				    .batchsize = 2 },
		SIZE_MAX / 4 * 2, "overflows size_t");
	/* Sixty-four fields are allowed, empty ones too. */
	eachobs_dataset data = { NULL, numobs, plain_getobs, OBS_SIZE };
	eachobs_iter *it;
	int bad = 0;
	data.ctx = &bad;
	many[0] = sizeof(size_t);
	many[1] = OBS_SIZE - sizeof(size_t);
	cr_assert_eq(eachobs_parallel(&it, &data,
				      &(eachobs_options){
					      .fields = many,
					      .nfields = EACHOBS_MAX_FIELDS,
					      .batchsize = 3 }),
		     0, "%s", eachobs_last_error());
	eachobs_close(it);
}
