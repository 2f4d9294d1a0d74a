/*
 * eachobs_checkpoint, eachobs_options.resume and eachobs_length: a resumed
 * iterator yields exactly what the checkpoint had not, for every executor,
 * ordered or not, single or batched (with hold), shuffled, sharded, with
 * skipped failures, resumed under other executors and thread counts, and
 * resumed again; damaged records are refused; a dataset of 2^40
 * observations checkpoints small; eachobs_length is what a run yields.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(resume, .init = deadline, .timeout = 60);

struct rds {
	size_t n;
	size_t fail_a, fail_b; /* indices whose getobs fails (SKIP runs) */
	unsigned sleep_us;
};

static size_t rds_numobs(void *ctx)
{
	return ((struct rds *)ctx)->n;
}

static int rds_getobs(void *ctx, size_t idx, void *obs)
{
	const struct rds *d = ctx;

	if (d->sleep_us && idx % 7 == 0)
		sleep_us(d->sleep_us);
	memcpy(obs, &idx, sizeof(idx));
	return idx == d->fail_a || idx == d->fail_b ? -EIO : 0;
}

static eachobs_iter *open_it(struct rds *d, eachobs_options o)
{
	eachobs_dataset data = { d, rds_numobs, rds_getobs, sizeof(size_t) };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "start: %s",
		     eachobs_strerror(eachobs_parallel(&it, &data, &o)));
	return it;
}

/* Take up to max items (SIZE_MAX: to the end), adding each index's visits
 * to counts and, when seq is set, appending the indices in yield order.
 * Returns the items (calls that returned 1); *ended when it reached 0. */
struct take {
	unsigned *counts;
	size_t *seq, nseq;
	size_t calls;
	bool ended;
};

static void take_items(eachobs_iter *it, const eachobs_options *o, size_t max,
		       struct take *t)
{
	const void *held[8];
	unsigned nheld = 0;

	t->calls = 0;
	t->ended = false;
	while (t->calls < max) {
		const void *data;
		size_t count = 1, one;
		const size_t *idx = &one;
		int rc;
		if (o->batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			data = b.data;
			idx = b.idx;
			count = b.count;
		} else {
			rc = eachobs_next(it, &data, &one);
		}
		if (rc == -ENOBUFS) {
			cr_assert_gt(nheld, 0);
			cr_assert_eq(eachobs_release(it, held[--nheld]), 0);
			continue;
		}
		if (rc == 0) {
			t->ended = true;
			break;
		}
		cr_assert_eq(rc, 1, "next: %d", rc);
		t->calls++;
		for (size_t j = 0; j < count; j++) {
			t->counts[idx[j]]++;
			if (t->seq)
				t->seq[t->nseq++] = idx[j];
		}
		if (o->hold)
			held[nheld++] = data;
		if (nheld == o->hold && nheld)
			cr_assert_eq(eachobs_release(it, held[--nheld]), 0);
	}
	while (nheld)
		cr_assert_eq(eachobs_release(it, held[--nheld]), 0);
}

static void *checkpoint(eachobs_iter *it, size_t *len)
{
	*len = 0;
	cr_assert_eq(eachobs_checkpoint(it, NULL, len), -ENOSPC);
	void *buf = malloc(*len);
	size_t room = *len;
	cr_assert_not_null(buf);
	cr_assert_eq(eachobs_checkpoint(it, buf, &room), 0);
	cr_assert_eq(room, *len);
	return buf;
}

/* One random point of the option space for run a (and b: another
 * executor, thread count, ordering and hold, the same order). */
struct scenario {
	eachobs_options a, b, c;
	bool skip;
	char what[200];
};

static struct scenario draw(uint64_t *rng)
{
	static const size_t batches[] = { 0, 0, 1, 7, 16 };
	static const unsigned threads[] = { 1, 2, 3, 8 };
	struct scenario s;
	eachobs_options o = { 0 };

	memset(&s, 0, sizeof(s));
	o.batchsize = batches[splitmix64(rng) % 5];
	o.drop_last = o.batchsize && splitmix64(rng) % 2;
	o.shuffle = splitmix64(rng) % 2;
	o.seed = splitmix64(rng);
	o.epoch = splitmix64(rng) % 3;
	if (splitmix64(rng) % 3 == 0) {
		o.shard_count = 2 + (unsigned)(splitmix64(rng) % 3);
		o.shard_index = (unsigned)(splitmix64(rng) % o.shard_count);
	}
	s.skip = splitmix64(rng) % 3 == 0;
	o.on_error = s.skip ? EACHOBS_ON_ERROR_SKIP : EACHOBS_ON_ERROR_STOP;
	eachobs_options *r[3] = { &s.a, &s.b, &s.c };
	for (int k = 0; k < 3; k++) {
		*r[k] = o;
		r[k]->executor = executors[splitmix64(rng) % NEXECUTORS];
		r[k]->ordered = splitmix64(rng) % 2;
		r[k]->nthreads = threads[splitmix64(rng) % 4];
		r[k]->hold = (unsigned)(splitmix64(rng) % 3);
		r[k]->buffersize = splitmix64(rng) % 2 ? 0 : 1 + splitmix64(rng) % 8;
	}
	snprintf(s.what, sizeof(s.what),
		 "batch %zu%s shuffle %d shards %u/%u %s; a %s%s P%u hold %u; "
		 "b %s%s P%u hold %u; c %s%s",
		 o.batchsize, o.drop_last ? " drop_last" : "", o.shuffle,
		 o.shard_index, o.shard_count, s.skip ? "skip" : "stop",
		 executor_name(s.a.executor), s.a.ordered ? " ordered" : "",
		 s.a.nthreads, s.a.hold, executor_name(s.b.executor),
		 s.b.ordered ? " ordered" : "", s.b.nthreads, s.b.hold,
		 executor_name(s.c.executor), s.c.ordered ? " ordered" : "");
	return s;
}

/* Whether the indices of seq appear in ref's order (ref is a permutation
 * walk; indices may repeat under shard padding, so match greedily). */
static bool in_order(const size_t *seq, size_t n, const size_t *ref,
		     size_t nref)
{
	size_t r = 0;

	for (size_t i = 0; i < n; i++) {
		while (r < nref && ref[r] != seq[i])
			r++;
		if (r == nref)
			return false;
		r++;
	}
	return true;
}

static void run_scenario(uint64_t seed)
{
	uint64_t rng = seed;
	struct scenario s = draw(&rng);
	struct rds d = { .n = 300 + splitmix64(&rng) % 200 };
	unsigned *ref = calloc(d.n, sizeof(unsigned));
	unsigned *got = calloc(d.n, sizeof(unsigned));
	size_t *order = calloc(4 * d.n, sizeof(size_t));
	size_t *seq = calloc(4 * d.n, sizeof(size_t));

	cr_assert(ref && got && order && seq);
	d.fail_a = d.fail_b = SIZE_MAX;
	if (s.skip) {
		d.fail_a = splitmix64(&rng) % d.n;
		d.fail_b = splitmix64(&rng) % d.n;
	}
	/* The reference: the same order under SERIAL, to its end. */
	eachobs_options ro = s.a;
	ro.executor = EACHOBS_SERIAL;
	ro.hold = 0;
	struct take t = { ref, order, 0, 0, false };
	eachobs_iter *it = open_it(&d, ro);
	size_t length = eachobs_length(it);
	take_items(it, &ro, SIZE_MAX, &t);
	eachobs_close(it);
	size_t nref = t.nseq;
	if (!s.skip)
		cr_assert_eq(t.calls, length, "%s: length %zu, yielded %zu",
			     s.what, length, t.calls);

	/* a: part of the run, then a checkpoint, then a few more items (the
	 * run goes on after a checkpoint; b yields those again, so they are
	 * counted apart); b: resumed from a, part again, a checkpoint of its
	 * own; c: resumed from b, to the end. */
	unsigned *after = calloc(d.n, sizeof(unsigned));
	size_t len_a, len_b;
	cr_assert_not_null(after);
	it = open_it(&d, s.a);
	cr_assert_eq(eachobs_length(it), length);
	t = (struct take){ got, NULL, 0, 0, false };
	take_items(it, &s.a, splitmix64(&rng) % (length + 2), &t);
	void *ck_a = checkpoint(it, &len_a);
	struct take ta = { after, NULL, 0, 0, false };
	take_items(it, &s.a, 3, &ta);
	eachobs_close(it);
	free(after);
	s.b.resume = ck_a;
	s.b.resume_len = len_a;

	it = open_it(&d, s.b);
	size_t left_b = eachobs_length(it);
	struct take tb = { got, seq, 0, 0, false };
	take_items(it, &s.b, splitmix64(&rng) % (left_b + 2), &tb);
	void *ck_b = checkpoint(it, &len_b);
	size_t took_b = tb.calls;
	eachobs_close(it);
	if (s.b.ordered || s.b.executor == EACHOBS_SERIAL)
		cr_assert(in_order(seq, tb.nseq, order, nref),
			  "%s: b out of order", s.what);

	s.c.resume = ck_b;
	s.c.resume_len = len_b;
	it = open_it(&d, s.c);
	size_t left_c = eachobs_length(it);
	struct take tc = { got, NULL, 0, 0, false };
	take_items(it, &s.c, SIZE_MAX, &tc);
	eachobs_close(it);
	cr_assert(tc.ended, "%s: c did not end", s.what);
	if (!s.skip) {
		cr_assert_eq(left_b, length - t.calls, "%s: b's length %zu, "
			     "left %zu", s.what, left_b, length - t.calls);
		cr_assert_eq(left_c, left_b - took_b, "%s: c's length", s.what);
		cr_assert_eq(tc.calls, left_c, "%s: c yielded %zu of %zu",
			     s.what, tc.calls, left_c);
	}
	for (size_t i = 0; i < d.n; i++)
		cr_assert_eq(got[i], ref[i],
			     "%s: index %zu yielded %u times in a+b+c, %u in "
			     "one run (seed %llu)",
			     s.what, i, got[i], ref[i],
			     (unsigned long long)seed);
	free(ck_a);
	free(ck_b);
	free(ref);
	free(got);
	free(order);
	free(seq);
}

Test(resume, yields_exactly_what_the_checkpoint_had_not_in_every_mode)
{
	for (uint64_t k = 0; k < 300; k++)
		run_scenario(0x5eed0000 + k);
}

/* Every option of the order must match; damaged bytes are refused. */
Test(resume, refuses_damaged_records_and_other_orders)
{
	struct rds d = { .n = 1000, .fail_a = SIZE_MAX, .fail_b = SIZE_MAX };
	eachobs_options o = { .nthreads = 3, .batchsize = 4, .shuffle = true,
			      .seed = 7 };
	eachobs_dataset data = { &d, rds_numobs, rds_getobs, sizeof(size_t) };
	unsigned *got = calloc(d.n, sizeof(unsigned));
	struct take t = { got, NULL, 0, 0, false };
	eachobs_iter *it = open_it(&d, o), *bad;
	size_t len;

	take_items(it, &o, 30, &t);
	unsigned char *ck = checkpoint(it, &len);
	eachobs_close(it);

	eachobs_options r = o;
	r.resume = ck;
	r.resume_len = len;
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			ck[i] ^= (unsigned char)(1u << bit);
			cr_assert_eq(eachobs_parallel(&bad, &data, &r), -EINVAL,
				     "byte %zu bit %d flipped: accepted", i,
				     bit);
			cr_assert_null(bad);
			ck[i] ^= (unsigned char)(1u << bit);
		}
	}
	for (size_t cut = 1; cut < len; cut += 5) {
		r.resume_len = cut;
		r.resume = ck;
		cr_assert_eq(eachobs_parallel(&bad, &data, &r), -EINVAL,
			     "truncated to %zu: accepted", cut);
	}
	r.resume = NULL;
	r.resume_len = 8;
	cr_assert_eq(eachobs_parallel(&bad, &data, &r), -EINVAL);
	r.resume = ck;
	r.resume_len = 0;
	cr_assert_eq(eachobs_parallel(&bad, &data, &r), -EINVAL);
	r.resume_len = len;

	eachobs_options other[] = { r, r, r, r, r, r };
	other[0].seed = 8;
	other[1].epoch = 1;
	other[2].batchsize = 5;
	other[3].shuffle = false;
	other[4].shard_count = 2;
	other[5].drop_last = true;
	for (size_t k = 0; k < 6; k++)
		cr_assert_eq(eachobs_parallel(&bad, &data, &other[k]), -EINVAL,
			     "other order %zu accepted", k);
	struct rds d2 = d;
	d2.n = 1001;
	eachobs_dataset data2 = { &d2, rds_numobs, rds_getobs, sizeof(size_t) };
	cr_assert_eq(eachobs_parallel(&bad, &data2, &r), -EINVAL,
		     "another numobs accepted");
	/* What may differ does. */
	eachobs_options same = r;
	same.executor = EACHOBS_BACKGROUND;
	same.nthreads = 8;
	same.ordered = true;
	same.hold = 2;
	same.buffersize = 3;
	cr_assert_eq(eachobs_parallel(&it, &data, &same), 0);
	eachobs_close(it);
	free(ck);
	free(got);
}

Test(resume, checkpoint_arguments)
{
	struct rds d = { .n = 10, .fail_a = SIZE_MAX, .fail_b = SIZE_MAX };
	eachobs_options o = { .nthreads = 2 };
	eachobs_iter *it = open_it(&d, o);
	unsigned char small[8];
	size_t len = sizeof(small);

	cr_assert_eq(eachobs_checkpoint(NULL, small, &len), -EINVAL);
	cr_assert_eq(eachobs_checkpoint(it, small, NULL), -EINVAL);
	len = 4;
	cr_assert_eq(eachobs_checkpoint(it, NULL, &len), -EINVAL);
	len = sizeof(small);
	cr_assert_eq(eachobs_checkpoint(it, small, &len), -ENOSPC);
	cr_assert_gt(len, sizeof(small));
	cr_assert_eq(eachobs_length(NULL), 0);
	eachobs_close(it);
}

/* Before the first item: everything is left. After the end: nothing. */
Test(resume, checkpoints_before_the_start_and_after_the_end)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		struct rds d = { .n = 200, .fail_a = SIZE_MAX,
				 .fail_b = SIZE_MAX };
		eachobs_options o = { .nthreads = 2, .executor = executors[e],
				      .batchsize = 8 };
		unsigned *got = calloc(d.n, sizeof(unsigned));
		struct take t = { got, NULL, 0, 0, false };
		size_t len;
		eachobs_iter *it = open_it(&d, o);
		void *first = checkpoint(it, &len);
		take_items(it, &o, SIZE_MAX, &t);
		size_t len_end;
		void *end = checkpoint(it, &len_end);
		eachobs_close(it);
		o.resume = first;
		o.resume_len = len;
		it = open_it(&d, o);
		cr_assert_eq(eachobs_length(it), 25);
		eachobs_close(it);
		o.resume = end;
		o.resume_len = len_end;
		it = open_it(&d, o);
		cr_assert_eq(eachobs_length(it), 0);
		t = (struct take){ got, NULL, 0, 0, false };
		take_items(it, &o, SIZE_MAX, &t);
		cr_assert(t.ended && t.calls == 0);
		eachobs_close(it);
		free(first);
		free(end);
		free(got);
	}
}

/* A failed item under STOP is not yielded: a resume retries it. */
Test(resume, a_failed_item_under_stop_is_retried)
{
	struct rds d = { .n = 100, .fail_a = 37, .fail_b = SIZE_MAX };
	eachobs_options o = { .nthreads = 2, .ordered = true };
	eachobs_dataset data = { &d, rds_numobs, rds_getobs, sizeof(size_t) };
	eachobs_iter *it;
	const void *obs;
	size_t idx, n = 0, len;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		n++;
	cr_assert_eq(rc, -EIO);
	cr_assert_eq(n, 37);
	void *ck = checkpoint(it, &len);
	eachobs_close(it);
	d.fail_a = SIZE_MAX; /* the file is readable again */
	o.resume = ck;
	o.resume_len = len;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_length(it), 63);
	cr_assert_eq(eachobs_next(it, &obs, &idx), 1);
	cr_assert_eq(idx, 37);
	eachobs_close(it);
	free(ck);
}

static size_t huge_numobs(void *ctx)
{
	(void)ctx;
	return (size_t)1 << 40;
}

static int noop_getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	(void)idx;
	(void)obs;
	return 0;
}

/* The record does not grow with numobs: 2^40 observations, unordered on
 * 4 threads, work stolen, checkpoint after 100000 items. */
Test(resume, a_huge_dataset_checkpoints_small)
{
	eachobs_dataset data = { NULL, huge_numobs, noop_getobs, 0 };
	eachobs_options o = { .nthreads = 4, .executor = EACHOBS_BACKGROUND };
	eachobs_iter *it;
	const void *obs;
	size_t len;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	for (int i = 0; i < 100000; i++)
		cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	void *ck = checkpoint(it, &len);
	eachobs_close(it);
	cr_assert_lt(len, EACHOBS_CHECKPOINT_MAX_DEFAULT, "%zu bytes", len);
	o.resume = ck;
	o.resume_len = len;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_length(it), ((size_t)1 << 40) - 100000);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	eachobs_close(it);
	free(ck);
}
