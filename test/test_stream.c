/*
 * Streams (include/eachobs_stream.h): every record once, in the promised
 * order, across executors x ordered x batches x hold x pool x shuffle x
 * the shuffle buffer, fast and slow next; one reader per shard; the
 * deterministic interleave; exact resume; ranks; bad input; close and
 * interrupt.
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXSHARDS 64

/* ---- an instrumented stream ---------------------------------------- */

struct ts {
	size_t nshards;
	size_t counts[MAXSHARDS];
	unsigned next_us;     /* every next sleeps this long */
	bool infinite;        /* shards never end */
	size_t fail_open;     /* SIZE_MAX, or the shard whose open fails */
	size_t fail_shard, fail_rec; /* the next that fails (SIZE_MAX: none) */
	int fail_code;
	size_t big_shard, big_rec;   /* a record larger than its slot */
	size_t uniform;       /* 0, or every shard has this many records
			       * (any nshards; no per-shard checks) */
	bool with_count, with_seek;
	atomic_int reading[MAXSHARDS]; /* next calls running per shard */
	atomic_int open_now[MAXSHARDS];
	atomic_long opens, closes, nexts, seeks, violations;
	atomic_long records;  /* next calls that wrote one */
	atomic_bool closed;   /* after eachobs_close: no call may come */
};

struct tstate {
	struct ts *t;
	size_t shard, rec;
};

struct rec {
	uint64_t shard, rec;
};

static void ts_init(struct ts *t, size_t nshards, unsigned seed)
{
	memset(t, 0, sizeof(*t));
	t->nshards = nshards;
	srand(seed);
	for (size_t i = 0; i < nshards && i < MAXSHARDS; i++)
		t->counts[i] = (size_t)(rand() % 23);
	t->fail_open = t->fail_shard = t->big_shard = SIZE_MAX;
	t->with_count = true;
}

static size_t ts_total(const struct ts *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nshards; i++)
		n += t->counts[i];
	return n;
}

static int t_open(void *ctx, size_t shard, void **state)
{
	struct ts *t = ctx;

	if (atomic_load(&t->closed) || shard >= t->nshards)
		atomic_fetch_add(&t->violations, 1);
	if (t->uniform)
		shard %= MAXSHARDS;
	if (shard == t->fail_open)
		return -ENOENT;
	struct tstate *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->t = t;
	st->shard = shard;
	if (!t->uniform && atomic_fetch_add(&t->open_now[shard], 1) != 0)
		atomic_fetch_add(&t->violations, 1);
	atomic_fetch_add(&t->opens, 1);
	*state = st;
	return 0;
}

static int t_next(void *ctx, void *state, void *obs)
{
	struct ts *t = ctx;
	struct tstate *st = state;

	if (atomic_load(&t->closed))
		atomic_fetch_add(&t->violations, 1);
	if (!t->uniform && atomic_fetch_add(&t->reading[st->shard], 1) != 0)
		atomic_fetch_add(&t->violations, 1);
	atomic_fetch_add(&t->nexts, 1);
	if (t->next_us)
		usleep(t->next_us);
	int rc = 1;
	size_t count = t->uniform ? t->uniform : t->counts[st->shard];
	if (!t->infinite && st->rec >= count) {
		rc = 0;
	} else if (st->shard == t->fail_shard && st->rec == t->fail_rec) {
		st->rec++;
		rc = t->fail_code;
	} else {
		struct rec r = { st->shard % MAXSHARDS, st->rec++ };
		atomic_fetch_add(&t->records, 1);
		memcpy(obs, &r, sizeof(r));
		if (r.shard == t->big_shard && r.rec == t->big_rec)
			eachobs_set_length(sizeof(r) + 1);
	}
	if (!t->uniform)
		atomic_fetch_sub(&t->reading[st->shard], 1);
	return rc;
}

static void t_close(void *ctx, void *state)
{
	struct ts *t = ctx;
	struct tstate *st = state;

	if (!t->uniform)
		atomic_fetch_sub(&t->open_now[st->shard], 1);
	atomic_fetch_add(&t->closes, 1);
	free(st);
}

static size_t t_count(void *ctx, size_t shard)
{
	const struct ts *t = ctx;

	return t->uniform ? t->uniform : t->counts[shard];
}

static int t_seek(void *ctx, void *state, size_t record)
{
	struct ts *t = ctx;
	struct tstate *st = state;

	atomic_fetch_add(&t->seeks, 1);
	st->rec = record;
	return 0;
}

static eachobs_stream ts_stream(struct ts *t)
{
	return (eachobs_stream){
		.ctx = t,
		.nshards = t->nshards,
		.obs_size = sizeof(struct rec),
		.open = t_open,
		.next = t_next,
		.close = t_close,
		.count = t->with_count ? t_count : NULL,
		.seek = t->with_seek ? t_seek : NULL,
	};
}

/* ---- a checking consumer ------------------------------------------- */

struct run {
	size_t *idx;        /* every record's idx, in yield order */
	size_t n, cap;
	size_t units;       /* units yielded */
	size_t *unit_len;   /* records of each */
	int rc;             /* how the drain ended */
	size_t err_idx;
	int bad_content;    /* records whose bytes do not match their idx */
};

static void run_add(struct run *r, size_t idx)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 256;
		r->idx = realloc(r->idx, r->cap * sizeof(*r->idx));
		r->unit_len = realloc(r->unit_len, r->cap * sizeof(size_t));
	}
	r->idx[r->n++] = idx;
}

static void run_free(struct run *r)
{
	free(r->idx);
	free(r->unit_len);
	memset(r, 0, sizeof(*r));
}

static void check_content(struct run *r, const void *p, size_t idx)
{
	struct rec rec;

	memcpy(&rec, p, sizeof(rec));
	if (rec.shard != EACHOBS_STREAM_SHARD(idx) % MAXSHARDS ||
	    rec.rec != EACHOBS_STREAM_RECORD(idx))
		r->bad_content++;
}

/* Yield up to max units (SIZE_MAX: all) from it; hold > 0 keeps that
 * many, releasing the oldest. */
static void drain(eachobs_iter *it, const eachobs_options *o, size_t max,
		  struct run *r)
{
	const void *held[64];
	size_t nheld = 0;

	r->rc = 1;
	while (r->units < max) {
		const void *data = NULL;
		if (o->hold && nheld == o->hold) {
			cr_assert_eq(eachobs_release(it, held[0]), 0);
			memmove(held, held + 1, --nheld * sizeof(*held));
		}
		if (o->batchsize) {
			eachobs_batch b;
			r->rc = eachobs_next_batch(it, &b);
			if (r->rc == 1) {
				for (size_t e = 0; e < b.count; e++) {
					check_content(r, (char *)b.data +
								 e * sizeof(struct rec),
						      b.idx[e]);
					run_add(r, b.idx[e]);
				}
				r->unit_len[r->units] = b.count;
				data = b.data;
			} else if (r->rc < 0 && b.idx) {
				r->err_idx = b.idx[0];
			}
		} else {
			size_t idx = 0;
			r->rc = eachobs_next(it, &data, &idx);
			if (r->rc == 1) {
				check_content(r, data, idx);
				run_add(r, idx);
				r->unit_len[r->units] = 1;
			} else if (r->rc < 0) {
				r->err_idx = idx;
			}
		}
		if (r->rc != 1)
			break;
		r->units++;
		if (o->hold)
			held[nheld++] = data;
	}
}

/* Every record of the shards marked in `want` seen once, no other. */
static void expect_each_once(const struct ts *t, const struct run *r,
			     const bool *want, const char *what)
{
	static unsigned char seen[MAXSHARDS][64];
	size_t expected = 0;

	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < r->n; i++) {
		size_t s = EACHOBS_STREAM_SHARD(r->idx[i]);
		size_t k = EACHOBS_STREAM_RECORD(r->idx[i]);
		cr_assert(s < t->nshards && k < t->counts[s] && k < 64,
			  "%s: record %zu of shard %zu does not exist", what, k,
			  s);
		cr_assert(!want || want[s], "%s: shard %zu is not this rank's",
			  what, s);
		cr_assert_eq(seen[s][k]++, 0, "%s: shard %zu record %zu twice",
			     what, s, k);
	}
	for (size_t s = 0; s < t->nshards; s++)
		if (!want || want[s])
			expected += t->counts[s];
	cr_assert_eq(r->n, expected, "%s: %zu records, expected %zu", what,
		     r->n, expected);
	cr_assert_eq(r->bad_content, 0, "%s: %d records with wrong bytes",
		     what, r->bad_content);
}

static void expect_clean(struct ts *t, const char *what)
{
	cr_assert_eq(atomic_load(&t->violations), 0,
		     "%s: a shard read by two threads, or a call after close",
		     what);
	cr_assert_eq(atomic_load(&t->opens), atomic_load(&t->closes),
		     "%s: %ld opens, %ld closes", what, atomic_load(&t->opens),
		     atomic_load(&t->closes));
}

static int start(eachobs_iter **it, struct ts *t, const eachobs_options *o)
{
	eachobs_stream s = ts_stream(t);

	atomic_store(&t->closed, false);
	return eachobs_stream_parallel(it, &s, o);
}

static void finish(eachobs_iter *it, struct ts *t)
{
	eachobs_close(it);
	atomic_store(&t->closed, true);
}

static const char *describe(const eachobs_options *o)
{
	static char buf[256];

	snprintf(buf, sizeof(buf),
		 "executor %d ordered %d batch %zu hold %u pool %d shuffle %d "
		 "buffer %zu nthreads %u",
		 (int)o->executor, o->ordered, o->batchsize, o->hold,
		 o->pool != NULL, o->shuffle, o->shuffle_buffer, o->nthreads);
	return buf;
}

/* ---- every record once ---------------------------------------------- */

static const eachobs_executor executors[] = { EACHOBS_THREADED,
					      EACHOBS_BACKGROUND,
					      EACHOBS_SERIAL };

/* Calls fn for every option set of the matrix. */
static void matrix(eachobs_pool *pool, unsigned nthreads,
		   void (*fn)(eachobs_options *o, void *arg), void *arg)
{
	static const size_t batches[] = { 0, 1, 7 };
	static const size_t buffers[] = { 0, 5 };

	for (int ex = 0; ex < 3; ex++)
		for (int ord = 0; ord < 2; ord++)
			for (int b = 0; b < 3; b++)
				for (unsigned hold = 0; hold <= 2; hold += 2)
					for (int p = 0; p < 2; p++)
						for (int sh = 0; sh < 2; sh++)
							for (int sb = 0; sb < 2; sb++) {
	eachobs_options o = {
		.executor = executors[ex],
		.ordered = ord,
		.batchsize = batches[b],
		.hold = hold,
		.pool = p ? pool : NULL,
		.shuffle = sh,
		.seed = 7,
		.shuffle_buffer = buffers[sb],
		.nthreads = nthreads,
	};
	fn(&o, arg);
							}
}

static void once_case(eachobs_options *o, void *arg)
{
	struct ts *t = arg;
	eachobs_iter *it;
	struct run r = { 0 };

	atomic_store(&t->opens, 0);
	atomic_store(&t->closes, 0);
	cr_assert_eq(start(&it, t, o), 0, "%s: %s", describe(o),
		     eachobs_last_error());
	size_t len = eachobs_length(it);
	drain(it, o, SIZE_MAX, &r);
	cr_assert_eq(r.rc, 0, "%s: ended with %d (%s)", describe(o), r.rc,
		     eachobs_last_error());
	cr_assert_eq(eachobs_next(it, NULL, NULL) == 0 || o->batchsize, true);
	finish(it, t);
	expect_each_once(t, &r, NULL, describe(o));
	expect_clean(t, describe(o));
	if (len != EACHOBS_LENGTH_UNKNOWN)
		cr_assert_eq(len, r.units, "%s: length %zu, yielded %zu units",
			     describe(o), len, r.units);
	else
		cr_assert(o->batchsize && !o->ordered &&
				  o->executor != EACHOBS_SERIAL,
			  "%s: length unknown", describe(o));
	run_free(&r);
}

Test(stream, yields_every_record_once_across_the_option_space)
{
	struct ts t;
	eachobs_pool *pool;

	ts_init(&t, 13, 1);
	cr_assert_eq(eachobs_pool_create(&pool, 3), 0);
	matrix(pool, 3, once_case, &t);
	eachobs_pool_destroy(pool);
}

Test(stream, yields_every_record_once_with_a_slow_next)
{
	struct ts t;

	ts_init(&t, 9, 2);
	t.next_us = 200;
	for (int ex = 0; ex < 3; ex++)
		for (int ord = 0; ord < 2; ord++)
			for (size_t b = 0; b <= 4; b += 4) {
				eachobs_options o = { .executor = executors[ex],
						      .ordered = ord,
						      .batchsize = b,
						      .nthreads = 8,
						      .shuffle_buffer = 3 };
				once_case(&o, &t);
			}
}

Test(stream, more_threads_than_shards_and_empty_shards)
{
	struct ts t;

	ts_init(&t, 5, 3);
	t.counts[0] = 0;
	t.counts[3] = 0;
	for (int ex = 0; ex < 3; ex++)
		for (int ord = 0; ord < 2; ord++) {
			eachobs_options o = { .executor = executors[ex],
					      .ordered = ord,
					      .nthreads = 16,
					      .batchsize = 3 };
			once_case(&o, &t);
		}
}

/* Unordered without a shuffle buffer, each shard's records come in the
 * order read: front to back. */
Test(stream, unordered_yields_each_shard_front_to_back)
{
	struct ts t;
	size_t next[MAXSHARDS];

	ts_init(&t, 17, 4);
	for (int ex = 0; ex < 2; ex++)
		for (size_t b = 0; b <= 5; b += 5) {
			eachobs_options o = { .executor = executors[ex],
					      .batchsize = b,
					      .nthreads = 4 };
			eachobs_iter *it;
			struct run r = { 0 };
			cr_assert_eq(start(&it, &t, &o), 0);
			drain(it, &o, SIZE_MAX, &r);
			finish(it, &t);
			memset(next, 0, sizeof(next));
			for (size_t i = 0; i < r.n; i++) {
				size_t s = EACHOBS_STREAM_SHARD(r.idx[i]);
				cr_assert_eq(EACHOBS_STREAM_RECORD(r.idx[i]),
					     next[s]++, "%s: shard %zu out of "
					     "order", describe(&o), s);
			}
			run_free(&r);
		}
}

/* ---- the deterministic interleave ----------------------------------- */

static void sequence(struct ts *t, eachobs_options *o, struct run *r)
{
	eachobs_iter *it;

	cr_assert_eq(start(&it, t, o), 0, "%s", eachobs_last_error());
	drain(it, o, SIZE_MAX, r);
	cr_assert_eq(r->rc, 0);
	finish(it, t);
}

static void expect_same(const struct run *a, const struct run *b,
			const char *what)
{
	cr_assert_eq(a->n, b->n, "%s: %zu records, then %zu", what, a->n, b->n);
	cr_assert_eq(a->units, b->units, "%s: %zu units, then %zu", what,
		     a->units, b->units);
	for (size_t i = 0; i < a->n; i++)
		cr_assert_eq(a->idx[i], b->idx[i], "%s: record %zu differs",
			     what, i);
	for (size_t u = 0; u < a->units; u++)
		cr_assert_eq(a->unit_len[u], b->unit_len[u],
			     "%s: unit %zu differs", what, u);
}

Test(stream, ordered_sequence_is_the_same_for_every_nthreads_and_executor)
{
	static const unsigned threads[] = { 1, 2, 5, 16 };
	struct ts t;

	ts_init(&t, 21, 5);
	for (size_t b = 0; b <= 6; b += 6)
		for (size_t sb = 0; sb <= 4; sb += 4)
			for (unsigned cyc = 0; cyc <= 3; cyc += 3) {
				eachobs_options o = { .ordered = true,
						      .batchsize = b,
						      .shuffle = true,
						      .seed = 11,
						      .shuffle_buffer = sb,
						      .cycle_length = cyc,
						      .executor = EACHOBS_SERIAL };
				struct run ref = { 0 };
				sequence(&t, &o, &ref);
				for (int ex = 0; ex < 2; ex++)
					for (int k = 0; k < 4; k++) {
						struct run r = { 0 };
						o.executor = executors[ex];
						o.nthreads = threads[k];
						sequence(&t, &o, &r);
						expect_same(&ref, &r, describe(&o));
						run_free(&r);
					}
				o.executor = EACHOBS_SERIAL;
				run_free(&ref);
			}
}

Test(stream, ordered_interleaves_round_robin_over_the_cycle)
{
	struct ts t;
	struct run r = { 0 };

	ts_init(&t, 4, 6);
	for (size_t i = 0; i < 4; i++)
		t.counts[i] = 3;
	t.counts[2] = 1;
	eachobs_options o = { .ordered = true, .cycle_length = 4,
			      .nthreads = 3 };
	sequence(&t, &o, &r);
	/* Places 0..3 hold shards 0..3 (no shuffle): a round takes one from
	 * each, shard 2 leaves after its only record. */
	static const size_t want[][2] = { { 0, 0 }, { 1, 0 }, { 2, 0 },
					  { 3, 0 }, { 0, 1 }, { 1, 1 },
					  { 3, 1 }, { 0, 2 }, { 1, 2 },
					  { 3, 2 } };
	cr_assert_eq(r.n, 10);
	for (size_t i = 0; i < r.n; i++)
		cr_assert_eq(r.idx[i], EACHOBS_STREAM_IDX(want[i][0], want[i][1]),
			     "record %zu", i);
	run_free(&r);
}

Test(stream, shuffle_permutes_the_shard_order_by_seed_and_epoch)
{
	struct ts t;
	struct run a = { 0 }, b = { 0 }, c = { 0 };

	ts_init(&t, 30, 7);
	for (size_t i = 0; i < 30; i++)
		t.counts[i] = 1;
	eachobs_options o = { .ordered = true, .shuffle = true, .seed = 3,
			      .cycle_length = 1 };
	sequence(&t, &o, &a);
	sequence(&t, &o, &b);
	o.epoch = 1;
	sequence(&t, &o, &c);
	expect_same(&a, &b, "same seed and epoch");
	size_t differ = 0, moved = 0;
	for (size_t i = 0; i < 30; i++) {
		differ += a.idx[i] != c.idx[i];
		moved += EACHOBS_STREAM_SHARD(a.idx[i]) != i;
	}
	cr_assert_gt(differ, 0, "another epoch gives another order");
	cr_assert_gt(moved, 0, "the order is shuffled");
	run_free(&a);
	run_free(&b);
	run_free(&c);
}

Test(stream, the_shuffle_buffer_mixes_records_of_one_shard)
{
	struct ts t;
	struct run r = { 0 };

	ts_init(&t, 1, 8);
	t.counts[0] = 60;
	eachobs_options o = { .ordered = true, .shuffle_buffer = 16, .seed = 5 };
	sequence(&t, &o, &r);
	size_t out_of_place = 0;
	for (size_t i = 0; i < r.n; i++)
		out_of_place += EACHOBS_STREAM_RECORD(r.idx[i]) != i;
	cr_assert_gt(out_of_place, 30, "only %zu of 60 moved", out_of_place);
	/* A record is drawn from at most the next 16. */
	for (size_t i = 0; i < r.n; i++)
		cr_assert_lt(EACHOBS_STREAM_RECORD(r.idx[i]), i + 16);
	run_free(&r);
}

/* ---- ranks ------------------------------------------------------------ */

Test(stream, ranks_split_the_shards_and_together_read_each_record_once)
{
	struct ts t;

	ts_init(&t, 19, 9);
	for (int ord = 0; ord < 2; ord++) {
		struct run all = { 0 };
		size_t shards_per_rank[4];
		for (unsigned rank = 0; rank < 4; rank++) {
			eachobs_options o = { .ordered = ord, .shuffle = true,
					      .seed = 2, .shard_index = rank,
					      .shard_count = 4, .nthreads = 3 };
			struct run r = { 0 };
			bool mine[MAXSHARDS] = { 0 };
			sequence(&t, &o, &r);
			for (size_t i = 0; i < r.n; i++) {
				run_add(&all, r.idx[i]);
				mine[EACHOBS_STREAM_SHARD(r.idx[i])] = true;
			}
			shards_per_rank[rank] = 0;
			for (size_t s = 0; s < t.nshards; s++)
				shards_per_rank[rank] += mine[s];
			run_free(&r);
		}
		expect_each_once(&t, &all, NULL, "4 ranks");
		for (unsigned rank = 0; rank < 4; rank++)
			cr_assert_leq(shards_per_rank[rank], 5);
		run_free(&all);
	}
}

Test(stream, length_is_known_with_counts_and_unknown_without)
{
	struct ts t;
	eachobs_iter *it;

	ts_init(&t, 6, 10);
	eachobs_options o = { .nthreads = 2 };
	cr_assert_eq(start(&it, &t, &o), 0);
	cr_assert_eq(eachobs_length(it), ts_total(&t));
	finish(it, &t);
	t.with_count = false;
	cr_assert_eq(start(&it, &t, &o), 0);
	cr_assert_eq(eachobs_length(it), EACHOBS_LENGTH_UNKNOWN);
	finish(it, &t);
}

/* ---- checkpoint and resume ------------------------------------------ */

/* Yield `cut` units, checkpoint, close; resume and yield the rest; the
 * union is every record once. Ordered without a shuffle buffer, the
 * resumed run goes on with the same sequence. */
static void resume_case(struct ts *t, eachobs_options *o, size_t cut)
{
	struct run full = { 0 }, head = { 0 }, tail = { 0 };
	eachobs_iter *it;
	unsigned char buf[4096];
	size_t len = sizeof(buf);

	sequence(t, o, &full);
	cr_assert_eq(start(&it, t, o), 0);
	drain(it, o, cut, &head);
	cr_assert_eq(eachobs_checkpoint(it, buf, &len), 0, "%s: %s",
		     describe(o), eachobs_last_error());
	finish(it, t);
	eachobs_options r = *o;
	r.resume = buf;
	r.resume_len = len;
	atomic_store(&t->seeks, 0);
	cr_assert_eq(start(&it, t, &r), 0, "%s: %s", describe(o),
		     eachobs_last_error());
	drain(it, &r, SIZE_MAX, &tail);
	cr_assert_eq(tail.rc, 0, "%s: %s", describe(o), eachobs_last_error());
	finish(it, t);
	for (size_t i = 0; i < tail.n; i++)
		run_add(&head, tail.idx[i]);
	expect_each_once(t, &head, NULL, describe(o));
	if (o->ordered && !o->shuffle_buffer)
		for (size_t i = 0; i < tail.n; i++)
			cr_assert_eq(tail.idx[i], full.idx[head.n - tail.n + i],
				     "%s: cut %zu, resumed record %zu differs",
				     describe(o), cut, i);
	expect_clean(t, describe(o));
	run_free(&full);
	run_free(&head);
	run_free(&tail);
}

static void resume_cases(eachobs_options *o, void *arg)
{
	struct ts *t = arg;
	size_t cuts[] = { 0, 1, 9, 40 };

	if (o->pool || o->hold)
		return; /* covered by the other cases; keep the suite short */
	for (size_t i = 0; i < 4; i++)
		resume_case(t, o, o->batchsize ? cuts[i] / 4 : cuts[i]);
}

Test(stream, resume_yields_exactly_the_records_not_yielded)
{
	struct ts t;

	ts_init(&t, 11, 12);
	matrix(NULL, 3, resume_cases, &t);
	t.with_seek = true;
	matrix(NULL, 3, resume_cases, &t);
}

Test(stream, resume_with_seek_reads_no_yielded_record_again)
{
	struct ts t;
	eachobs_iter *it;
	unsigned char buf[1024];
	size_t len = sizeof(buf);
	struct run r = { 0 };

	ts_init(&t, 1, 13);
	t.counts[0] = 50;
	t.with_seek = true;
	eachobs_options o = { .ordered = true, .nthreads = 1,
			      .buffersize = 2 };
	cr_assert_eq(start(&it, &t, &o), 0);
	drain(it, &o, 30, &r);
	cr_assert_eq(eachobs_checkpoint(it, buf, &len), 0);
	finish(it, &t);
	run_free(&r);
	o.resume = buf;
	o.resume_len = len;
	atomic_store(&t.nexts, 0);
	cr_assert_eq(start(&it, &t, &o), 0);
	drain(it, &o, SIZE_MAX, &r);
	finish(it, &t);
	cr_assert_eq(r.n, 20);
	cr_assert_eq(r.idx[0], EACHOBS_STREAM_IDX(0, 30));
	cr_assert_eq(atomic_load(&t.seeks), 1);
	cr_assert_eq(atomic_load(&t.nexts), 21, "20 records and the end");
	run_free(&r);
}

Test(stream, a_resumed_run_resumes_again)
{
	struct ts t;
	eachobs_iter *it;
	unsigned char a[1024], b[1024];
	size_t la = sizeof(a), lb = sizeof(b);
	struct run all = { 0 }, r = { 0 };

	ts_init(&t, 12, 14);
	eachobs_options o = { .shuffle = true, .seed = 1, .nthreads = 3,
			      .shuffle_buffer = 6 };
	cr_assert_eq(start(&it, &t, &o), 0);
	drain(it, &o, 20, &all);
	cr_assert_eq(eachobs_checkpoint(it, a, &la), 0);
	finish(it, &t);
	eachobs_options o2 = o;
	o2.resume = a;
	o2.resume_len = la;
	cr_assert_eq(start(&it, &t, &o2), 0);
	drain(it, &o2, 25, &r);
	cr_assert_eq(eachobs_checkpoint(it, b, &lb), 0);
	finish(it, &t);
	for (size_t i = 0; i < r.n; i++)
		run_add(&all, r.idx[i]);
	run_free(&r);
	o2.resume = b;
	o2.resume_len = lb;
	cr_assert_eq(start(&it, &t, &o2), 0);
	drain(it, &o2, SIZE_MAX, &r);
	finish(it, &t);
	for (size_t i = 0; i < r.n; i++)
		run_add(&all, r.idx[i]);
	expect_each_once(&t, &all, NULL, "resumed twice");
	run_free(&r);
	run_free(&all);
}

Test(stream, a_checkpoint_is_small_whatever_the_shards)
{
	static struct ts t;
	eachobs_iter *it;
	unsigned char buf[4096];
	size_t len = sizeof(buf);
	struct run r = { 0 };

	/* 10,000 shards of 40 records, 16 threads, a shuffle buffer of 64:
	 * the record grows with what is in flight only. The shard part of
	 * each record's bytes is the shard modulo the test's table. */
	ts_init(&t, 10000, 15);
	t.uniform = 40;
	eachobs_options o = { .nthreads = 16, .buffersize = 64 + 16,
			      .shuffle_buffer = 64, .shuffle = true };
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(start(&it, &t, &o), 0);
		drain(it, &o, 1000 + 20000 * (size_t)k, &r);
		len = sizeof(buf);
		cr_assert_eq(eachobs_checkpoint(it, buf, &len), 0);
		finish(it, &t);
		cr_assert_lt(len, 1024, "%zu bytes after %zu units", len,
			     r.units);
		run_free(&r);
	}
}

Test(stream, a_checkpoint_of_another_stream_or_a_dataset_is_refused)
{
	struct ts t;
	eachobs_iter *it;
	unsigned char buf[1024];
	size_t len = sizeof(buf);
	struct run r = { 0 };

	ts_init(&t, 8, 16);
	eachobs_options o = { .nthreads = 2 };
	cr_assert_eq(start(&it, &t, &o), 0);
	drain(it, &o, 5, &r);
	cr_assert_eq(eachobs_checkpoint(it, buf, &len), 0);
	finish(it, &t);
	eachobs_options bad = { .resume = buf, .resume_len = len,
				.shuffle = true };
	cr_assert_eq(start(&it, &t, &bad), -EINVAL);
	cr_assert_null(it);
	cr_assert(strstr(eachobs_last_error(), "not a checkpoint of this "
					       "stream"));
	bad.shuffle = false;
	bad.ordered = true;
	cr_assert_eq(start(&it, &t, &bad), -EINVAL);
	buf[len / 2] ^= 1;
	bad.ordered = false;
	cr_assert_eq(start(&it, &t, &bad), -EINVAL, "damaged");
	bad.resume_len = len - 1;
	cr_assert_eq(start(&it, &t, &bad), -EINVAL, "truncated");
	run_free(&r);
}

/* ---- bad input ------------------------------------------------------ */

Test(stream, bad_arguments_are_refused_by_name)
{
	struct ts t;
	eachobs_iter *it = (eachobs_iter *)&t;
	eachobs_stream s;

	ts_init(&t, 4, 17);
	s = ts_stream(&t);
	cr_assert_eq(eachobs_stream_parallel(NULL, &s, NULL), -EINVAL);
	cr_assert_eq(eachobs_stream_parallel(&it, NULL, NULL), -EINVAL);
	cr_assert_null(it);
	s.nshards = 0;
	cr_assert_eq(eachobs_stream_parallel(&it, &s, NULL), -EINVAL);
	cr_assert(strstr(eachobs_last_error(), "nshards 0"));
	s = ts_stream(&t);
	s.next = NULL;
	cr_assert_eq(eachobs_stream_parallel(&it, &s, NULL), -EINVAL);
	cr_assert(strstr(eachobs_last_error(), "s->next is NULL"));
	s = ts_stream(&t);
	eachobs_options o = { .buffersize = 4, .shuffle_buffer = 4 };
	cr_assert_eq(eachobs_stream_parallel(&it, &s, &o), -EINVAL);
	cr_assert(strstr(eachobs_last_error(), "shuffle_buffer"));
	eachobs_options r = { .shard_index = 4, .shard_count = 4 };
	cr_assert_eq(eachobs_stream_parallel(&it, &s, &r), -EINVAL);
	cr_assert(strstr(eachobs_last_error(), "shard_index"));
}

static void failing_case(struct ts *t, eachobs_options *o, int want_rc,
			 size_t want_idx, const char *want_msg)
{
	eachobs_iter *it;
	struct run r = { 0 };

	atomic_store(&t->opens, 0);
	atomic_store(&t->closes, 0);
	cr_assert_eq(start(&it, t, o), 0);
	drain(it, o, SIZE_MAX, &r);
	cr_assert_eq(r.rc, want_rc, "%s: %d (%s)", describe(o), r.rc,
		     eachobs_last_error());
	if (want_rc < 0) {
		cr_assert_eq(r.err_idx, want_idx, "%s", describe(o));
		cr_assert(strstr(eachobs_last_error(), want_msg), "%s: %s",
			  describe(o), eachobs_last_error());
	} else {
		eachobs_failure f[4];
		cr_assert_eq(eachobs_failures(it, f, 4), 1, "%s", describe(o));
		cr_assert_eq(f[0].idx, want_idx, "%s", describe(o));
	}
	finish(it, t);
	expect_clean(t, describe(o));
	run_free(&r);
}

/* Every executor x ordered x batched or not: STOP ends with code at idx
 * and msg in the message, SKIP counts one failure at idx. */
static void failing_matrix(struct ts *t, int code, size_t idx, const char *msg)
{
	for (int ex = 0; ex < 3; ex++)
		for (int ord = 0; ord < 2; ord++)
			for (size_t b = 0; b <= 3; b += 3) {
				eachobs_options o = { .executor = executors[ex],
						      .ordered = ord,
						      .batchsize = b,
						      .nthreads = 2 };
				failing_case(t, &o, code, idx, msg);
				o.on_error = EACHOBS_ON_ERROR_SKIP;
				failing_case(t, &o, 0, idx, "");
			}
}

Test(stream, a_failed_open_stops_or_skips_the_shard_named)
{
	struct ts t;

	ts_init(&t, 6, 18);
	t.counts[2] = 5;
	t.fail_open = 2;
	failing_matrix(&t, -ENOENT, EACHOBS_STREAM_IDX(2, EACHOBS_STREAM_OPEN),
		       "open(shard 2) failed");
}

Test(stream, a_failed_next_stops_or_skips_the_record_named)
{
	struct ts t;

	ts_init(&t, 6, 19);
	t.counts[4] = 9;
	t.fail_shard = 4;
	t.fail_rec = 5;
	t.fail_code = -EIO;
	failing_matrix(&t, -EIO, EACHOBS_STREAM_IDX(4, 5),
		       "next(shard 4, record 5) failed");
}

Test(stream, a_record_larger_than_its_slot_fails_with_emsgsize)
{
	struct ts t;

	ts_init(&t, 3, 20);
	t.counts[1] = 4;
	t.big_shard = 1;
	t.big_rec = 2;
	eachobs_options o = { .nthreads = 2 };
	failing_case(&t, &o, -EMSGSIZE, EACHOBS_STREAM_IDX(1, 2),
		     "record 2 of shard 1 is larger than obs_size");
}

/* ---- close and interrupt -------------------------------------------- */

Test(stream, close_ends_shards_that_never_end_and_closes_every_open_one)
{
	struct ts t;

	ts_init(&t, 8, 21);
	t.infinite = true;
	t.next_us = 1000;
	for (int ex = 0; ex < 3; ex++)
		for (int ord = 0; ord < 2; ord++) {
			eachobs_options o = { .executor = executors[ex],
					      .ordered = ord,
					      .nthreads = 8 };
			eachobs_iter *it;
			struct run r = { 0 };
			atomic_store(&t.opens, 0);
			atomic_store(&t.closes, 0);
			cr_assert_eq(start(&it, &t, &o), 0);
			drain(it, &o, 20, &r);
			finish(it, &t);
			long nexts = atomic_load(&t.nexts);
			usleep(3000);
			cr_assert_eq(atomic_load(&t.nexts), nexts,
				     "%s: next ran after close", describe(&o));
			expect_clean(&t, describe(&o));
			run_free(&r);
		}
}

struct interrupter {
	eachobs_iter *it;
	atomic_bool go;
};

static void *interrupt_later(void *arg)
{
	struct interrupter *in = arg;

	usleep(20000);
	eachobs_interrupt(in->it);
	return NULL;
}

Test(stream, an_interrupt_ends_a_blocked_wait_and_loses_nothing)
{
	struct ts t;

	ts_init(&t, 2, 22);
	t.counts[0] = 3;
	t.counts[1] = 3;
	t.next_us = 60000;
	for (int ex = 0; ex < 2; ex++) {
		eachobs_options o = { .executor = executors[ex], .nthreads = 2 };
		eachobs_iter *it;
		struct interrupter in;
		pthread_t th;
		struct run r = { 0 };
		cr_assert_eq(start(&it, &t, &o), 0);
		in.it = it;
		pthread_create(&th, NULL, interrupt_later, &in);
		int rc = eachobs_next(it, NULL, NULL);
		pthread_join(th, NULL);
		cr_assert(rc == -EINTR || rc == 1);
		drain(it, &o, SIZE_MAX, &r);
		cr_assert_eq(r.n + (rc == 1), 6);
		finish(it, &t);
		run_free(&r);
	}
}

/* ---- memory ----------------------------------------------------------- */

/* Wait until the loaders stop (the records count stays put for 20 ms);
 * a deadline of 5 s, not a sleep as synchronization. */
static long settled_records(struct ts *t)
{
	long last = -1;

	for (int i = 0; i < 1000; i++) {
		long now = atomic_load(&t->records);
		if (now == last && i > 3)
			return now;
		last = now;
		usleep(20000);
	}
	cr_assert_fail("the loaders never stopped");
	return last;
}

Test(stream, loads_at_most_buffersize_units_ahead_of_the_consumer)
{
	struct ts t;

	ts_init(&t, 40, 23);
	for (size_t i = 0; i < 40; i++)
		t.counts[i] = 30;
	for (int ex = 0; ex < 2; ex++)
		for (int ord = 0; ord < 2; ord++)
			for (size_t b = 0; b <= 3; b += 3)
				for (size_t sb = 0; sb <= 2; sb += 2) {
	eachobs_options o = { .executor = executors[ex], .ordered = ord,
			      .batchsize = b, .shuffle_buffer = sb,
			      .nthreads = 4, .buffersize = 9 };
	size_t cap = b ? b : 1;
	/* Unordered: buffersize units, those being filled and the shuffle
	 * buffer's included. Ordered: C places of (9 - S) / C units each,
	 * the shuffle buffer besides (C = 16: one a place). */
	size_t units = ord ? 16 * ((9 - sb) / 16 ? (9 - sb) / 16 : 1) + sb : 9;
	eachobs_iter *it;
	struct run r = { 0 };
	atomic_store(&t.records, 0);
	cr_assert_eq(start(&it, &t, &o), 0);
	drain(it, &o, 1, &r);
	long ahead = settled_records(&t) - (long)r.n;
	/* The THREADED consumer's own loads take credits too. */
	cr_assert_leq(ahead, (long)(units * cap), "%s: %ld records ahead",
		      describe(&o), ahead);
	cr_assert_geq(ahead, (long)cap, "%s: nothing loaded ahead", describe(&o));
	finish(it, &t);
	run_free(&r);
				}
}

/* ---- the allocator and DLPack --------------------------------------- */

struct counting {
	atomic_long allocs, frees;
};

static void *c_alloc(void *ctx, size_t size, size_t align)
{
	void *p = NULL;

	if (posix_memalign(&p, align, size))
		return NULL;
	atomic_fetch_add(&((struct counting *)ctx)->allocs, 1);
	return p;
}

static void c_free(void *ctx, void *p, size_t size)
{
	(void)size;
	atomic_fetch_add(&((struct counting *)ctx)->frees, 1);
	free(p);
}

#if __has_include(<dlpack/dlpack.h>)
#include "eachobs_dlpack.h"

Test(stream, tensors_of_stream_records_outlive_close_and_memory_comes_back)
{
	struct ts t;
	struct counting c = { 0 };
	eachobs_allocator a = { c_alloc, c_free, &c };

	ts_init(&t, 7, 24);
	for (int ord = 0; ord < 2; ord++) {
		eachobs_options o = { .ordered = ord, .hold = 2, .nthreads = 2,
				      .allocator = &a };
		eachobs_iter *it;
		DLManagedTensor *tensor[2];
		const void *obs;
		size_t idx[2];
		int64_t shape[1] = { 2 };
		DLDataType u64 = { kDLUInt, 64, 1 };
		cr_assert_eq(start(&it, &t, &o), 0);
		for (int k = 0; k < 2; k++) {
			cr_assert_eq(eachobs_next(it, &obs, &idx[k]), 1);
			cr_assert_eq(eachobs_dlpack(it, obs, u64, 1, shape,
						    &tensor[k]), 0, "%s",
				     eachobs_last_error());
		}
		finish(it, &t);
		for (int k = 0; k < 2; k++) {
			const uint64_t *v = tensor[k]->dl_tensor.data;
			cr_assert_eq(v[0], EACHOBS_STREAM_SHARD(idx[k]));
			cr_assert_eq(v[1], EACHOBS_STREAM_RECORD(idx[k]));
			cr_assert_neq(atomic_load(&c.allocs),
				      atomic_load(&c.frees),
				      "a tensor keeps the memory");
			tensor[k]->deleter(tensor[k]);
		}
		cr_assert_eq(atomic_load(&c.allocs), atomic_load(&c.frees));
		cr_assert_gt(atomic_load(&c.allocs), 0);
		expect_clean(&t, "tensors");
	}
}
#endif
