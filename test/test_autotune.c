/*
 * eachobs_options.autotune on an iterator: its bounds (threads loading,
 * items alive), what it yields, the direction it moves in, its stats.
 * Counted, never timed: where a test needs the loader to have measured,
 * it runs long enough for many decisions and checks only a direction.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"
#include "cpus.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

TestSuite(autotune, .init = deadline, .timeout = 60);

#define BOUND 8u
#define BUFFER 4u
#define MAX_UNITS 64

struct ad {
	size_t n;
	unsigned sleep_us;      /* every getobs */
	unsigned compute_us;    /* every getobs below switch_at spins */
	size_t switch_at;       /* getobs calls after this many sleep
				 * switch_us */
	unsigned switch_us;
	unsigned before_us;     /* below switch_at, getobs sleeps this */
	size_t tail_every;      /* index multiples of it also sleep */
	unsigned tail_us;
	pthread_t consumer;
	atomic_long ncalls;     /* getobs calls begun */
	atomic_long inflight;   /* getobs on worker threads now */
	atomic_long max_inflight;
	atomic_uint *calls;
};

static size_t ad_numobs(void *ctx)
{
	return ((struct ad *)ctx)->n;
}

static void nap_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int ad_getobs(void *ctx, size_t idx, void *obs)
{
	struct ad *d = ctx;
	bool worker = !pthread_equal(pthread_self(), d->consumer);
	long now = worker ? atomic_fetch_add(&d->inflight, 1) + 1 : 0;
	long max = atomic_load(&d->max_inflight);

	while (now > max &&
	       !atomic_compare_exchange_weak(&d->max_inflight, &max, now))
		;
	atomic_fetch_add(&d->calls[idx], 1);
	*(size_t *)obs = idx;
	/* By calls, not by index: unordered, idle workers steal from
	 * anywhere in the range. */
	if ((size_t)atomic_fetch_add(&d->ncalls, 1) >= d->switch_at) {
		nap_us(d->switch_us);
	} else if (d->before_us) {
		nap_us(d->before_us);
	} else if (d->compute_us) {
		uint64_t t0 = thread_ns();
		while (thread_ns() - t0 < d->compute_us * 1000ull)
			;
	}
	if (d->sleep_us)
		nap_us(d->sleep_us);
	if (d->tail_every && idx % d->tail_every == 0)
		nap_us(d->tail_us);
	if (worker)
		atomic_fetch_sub(&d->inflight, 1);
	return 0;
}

static void ad_init(struct ad *d, size_t n)
{
	memset(d, 0, sizeof(*d));
	d->n = n;
	d->switch_at = SIZE_MAX;
	d->consumer = pthread_self();
	d->calls = calloc(n ? n : 1, sizeof(*d->calls));
	cr_assert_not_null(d->calls);
}

/* An iterator over d with o (which must start). */
static eachobs_iter *ad_start(struct ad *d, const eachobs_options *o)
{
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &(eachobs_dataset){ d, ad_numobs,
				ad_getobs, sizeof(size_t) }, o), 0,
		     "%s", eachobs_last_error());
	return it;
}

/* What one run saw, beside what the checks below assert on the way. */
struct seen {
	size_t yielded;
	size_t units;            /* distinct unit buffers yielded */
	const void *unit[MAX_UNITS];
	eachobs_stats st;
};

static void note_unit(struct seen *s, const void *p, const char *name)
{
	for (size_t i = 0; i < s->units; i++)
		if (s->unit[i] == p)
			return;
	cr_assert_lt(s->units, MAX_UNITS, "%s: more unit buffers than any "
		     "bound", name);
	s->unit[s->units++] = p;
}

/* Iterate to the end through `it`, releasing held items in turn, and
 * check every index once (in order when ordered). */
static void drain(eachobs_iter *it, const struct point *p, struct ad *d,
		  struct seen *s, const char *name)
{
	const void *held[8];
	unsigned nheld = 0;
	size_t next = 0;
	int rc;

	for (;;) {
		size_t idx[1024], count = 1;
		const void *unit;
		if (p->hold && nheld == p->hold) {
			cr_assert_eq(eachobs_release(it, held[0]), 0, "%s", name);
			memmove(held, held + 1, --nheld * sizeof(held[0]));
		}
		if (p->batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			if (rc != 1)
				break;
			unit = b.data;
			count = b.count;
			memcpy(idx, b.idx, count * sizeof(idx[0]));
		} else {
			rc = eachobs_next(it, &unit, &idx[0]);
			if (rc != 1)
				break;
		}
		note_unit(s, unit, name);
		if (p->hold)
			held[nheld++] = unit;
		for (size_t k = 0; k < count; k++) {
			cr_assert_lt(idx[k], d->n, "%s", name);
			if (p->ordered)
				cr_assert_eq(idx[k], next, "%s: out of order",
					     name);
			next++;
		}
		s->yielded += count;
	}
	cr_assert_eq(rc, 0, "%s: %d (%s)", name, rc, eachobs_strerror(rc));
	cr_assert_eq(eachobs_get_stats(it, &s->st), 0);
}

static void check_bounds(const struct point *p, eachobs_pool *pool,
			 unsigned sleep, unsigned compute)
{
	char name[128];
	struct ad d;
	struct seen s = { 0 };
	eachobs_iter *it;
	size_t n = p->batchsize ? 300 : 400;
	eachobs_options o = { .executor = p->ex, .ordered = p->ordered,
			      .batchsize = p->batchsize, .hold = p->hold,
			      .pool = p->pool ? pool : NULL,
			      .nthreads = p->pool ? 0 : BOUND,
			      .buffersize = BUFFER, .autotune = true };
	unsigned bound = p->pool ? 6 : BOUND; /* the pool's size */

	point_name(p, name, sizeof(name));
	ad_init(&d, n);
	d.sleep_us = sleep;
	d.compute_us = compute;
	cr_assert_eq(eachobs_parallel(&it, &(eachobs_dataset){ &d, ad_numobs,
				ad_getobs, sizeof(size_t) }, &o), 0,
		     "%s: %s", name, eachobs_last_error());
	drain(it, p, &d, &s, name);
	eachobs_close(it);
	cr_assert_eq(s.yielded, n, "%s: %zu yielded", name, s.yielded);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(atomic_load(&d.calls[i]), 1, "%s: getobs(%zu) "
			     "ran %u times", name, i, atomic_load(&d.calls[i]));
	cr_assert_leq(atomic_load(&d.max_inflight), bound,
		      "%s: %ld getobs on workers at once, bound %u", name,
		      atomic_load(&d.max_inflight), bound);
	cr_assert_leq(s.st.nworkers, bound, "%s", name);
	cr_assert_leq(s.st.max_loading, bound, "%s", name);
	cr_assert_leq(s.st.nloading, s.st.max_loading, "%s", name);
	size_t units = BUFFER + bound + (p->hold ? p->hold : 1);
	cr_assert_leq(s.units, units, "%s: %zu unit buffers, bound %zu",
		      name, s.units, units);
	if (p->ex != EACHOBS_SERIAL)
		cr_assert_neq(s.st.tune_reason, EACHOBS_TUNE_OFF, "%s", name);
	free(d.calls);
}

static void bounds_slow(const struct point *p, eachobs_pool *pool)
{
	check_bounds(p, pool, 300, 0);
}

static void bounds_fast(const struct point *p, eachobs_pool *pool)
{
	check_bounds(p, pool, 0, 0);
}

static void bounds_computing(const struct point *p, eachobs_pool *pool)
{
	check_bounds(p, pool, 0, 50);
}

ParameterizedTestParameters(autotune, never_exceeds_its_bounds)
{
	return mode_params();
}

/* Every executor and order, single and in batches of 1, 7 and 64, hold 0
 * and 2, with and without a pool; a getobs that waits, one that computes
 * and one that does nothing. */
ParameterizedTest(const struct mode *m, autotune, never_exceeds_its_bounds)
{
	static const size_t sizes[] = { 0, 1, 7, 64 };

	cr_assert_eq(points_of_mode(m, sizes, 4, 6, bounds_slow), 0);
	cr_assert_eq(points_of_mode(m, sizes, 4, 6, bounds_computing), 0);
	cr_assert_eq(points_of_mode(m, sizes, 4, 6, bounds_fast), 0);
}

/* Run with o and return the indices in yield order (eachobs_length of
 * them). */
static size_t *sequence(struct ad *d, eachobs_options o)
{
	eachobs_iter *it;
	size_t *seq = calloc(d->n, sizeof(*seq)), k = 0, idx;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &(eachobs_dataset){ d, ad_numobs,
				ad_getobs, sizeof(size_t) }, &o), 0);
	size_t len = eachobs_length(it);
	while ((rc = eachobs_next(it, NULL, &idx)) == 1) {
		cr_assert_lt(k, len);
		seq[k++] = idx;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(k, len);
	eachobs_close(it);
	return seq;
}

Test(autotune, yields_what_the_same_run_without_it_yields)
{
	struct ad d;

	ad_init(&d, 3000);
	d.sleep_us = 20;
	for (int e = 0; e < 2; e++) {
		eachobs_options o = { .executor = executors[e], .ordered = true,
				      .shuffle = true, .seed = 7, .epoch = 3,
				      .shard_index = 1, .shard_count = 3,
				      .nthreads = 16 };
		size_t *plain = sequence(&d, o);
		o.autotune = true;
		size_t *tuned = sequence(&d, o);
		cr_assert_arr_eq(plain, tuned, 1000 * sizeof(size_t),
				 "%s: autotune changed what is yielded",
				 executor_name(executors[e]));
		free(plain);
		free(tuned);
	}
	free(d.calls);
}

/* The threads loading, sampled every 20 items: the fewest and the most
 * late in the first part (items 200-380, settled, before the switch), and
 * in the second. A range, not one sample: a stall at one sample on a
 * loaded machine moves the tuner for a while, and the promise is where it
 * goes, not where it is at one instant. */
struct parts {
	unsigned first_fewest, first_most, fewest, most;
};

static void sample_into(unsigned n, unsigned *fewest, unsigned *most)
{
	*fewest = n < *fewest ? n : *fewest;
	*most = n > *most ? n : *most;
}

/*
 * A consumer that takes 0.5 ms an item, 2,000 a second, and a getobs whose
 * cost changes at switch_at: waiting 50 us, one thread feeds it (Little's
 * law: 0.1 of a thread); waiting 5 ms, it takes 10.
 */
static void two_parts(const struct mode *m, unsigned before_us,
		      unsigned after_us, struct parts *p)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;
	size_t k = 0;
	int rc;

	ad_init(&d, 400 + 1000);
	d.sleep_us = 0;
	d.switch_at = 400;
	d.compute_us = 0;
	d.switch_us = after_us;
	d.before_us = before_us;
	eachobs_options o = { .executor = m->executor, .ordered = m->ordered,
			      .nthreads = 64, .buffersize = 8,
			      .autotune = true };
	it = ad_start(&d, &o);
	*p = (struct parts){ UINT_MAX, 0, UINT_MAX, 0 };
	while ((rc = eachobs_next(it, NULL, NULL)) == 1) {
		nap_us(500);
		if (++k % 20)
			continue;
		cr_assert_eq(eachobs_get_stats(it, &st), 0);
		if (k >= 200 && k <= 380)
			sample_into(st.nloading, &p->first_fewest,
				    &p->first_most);
		if (k > 400 + 8 * 20) /* past what was loaded before */
			sample_into(st.nloading, &p->fewest, &p->most);
	}
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	free(d.calls);
}

ParameterizedTestParameters(autotune, a_getobs_that_starts_waiting_gets_more_threads)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, autotune,
		  a_getobs_that_starts_waiting_gets_more_threads)
{
	struct parts p;

	two_parts(m, 50, 5000, &p);
	if (test_under_memcheck()) /* 50 us is not cheap under valgrind */
		return;
	cr_assert_gt(p.most, p.first_fewest, "%s: %u threads while getobs "
		     "took 50 us, at most %u once it took 5 ms", mode_name(m),
		     p.first_fewest, p.most);
	cr_assert_geq(p.most, 4, "%s: %u threads for 10 threads' worth of "
		      "waiting", mode_name(m), p.most);
}

ParameterizedTestParameters(autotune, a_getobs_that_gets_cheaper_gets_fewer_threads)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, autotune,
		  a_getobs_that_gets_cheaper_gets_fewer_threads)
{
	struct parts p;

	two_parts(m, 5000, 50, &p);
	if (test_under_memcheck())
		return;
	cr_assert_lt(p.fewest, p.first_most, "%s: %u threads while getobs "
		     "took 5 ms, still at least %u once it took 50 us",
		     mode_name(m), p.first_most, p.fewest);
}

ParameterizedTestParameters(autotune, a_consumer_that_never_waits_gets_fewer_threads)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, autotune,
		  a_consumer_that_never_waits_gets_fewer_threads)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;
	int rc;

	ad_init(&d, 400);
	d.sleep_us = 200;
	/* A small buffer: loading cannot run far ahead and end early. */
	eachobs_options o = { .executor = m->executor, .ordered = m->ordered,
			      .nthreads = 16, .buffersize = 4,
			      .autotune = true, .autotune_start = 8 };
	it = ad_start(&d, &o);
	unsigned fewest = UINT_MAX; /* while the verdict was CONSUMER_BOUND */
	while ((rc = eachobs_next(it, NULL, NULL)) == 1) {
		nap_us(2000); /* 500 items a second; one thread loads 5000 */
		cr_assert_eq(eachobs_get_stats(it, &st), 0);
		if (st.tune_reason == EACHOBS_TUNE_CONSUMER_BOUND &&
		    st.nloading < fewest)
			fewest = st.nloading;
	}
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	free(d.calls);
	/* Whether the consumer never waited depends on the machine (a
	 * loaded one may keep the loaders off a core for a while, and then
	 * more threads are right): test_tune checks that a fed consumer
	 * never gets more; here, that it got fewer, judged fed, at some
	 * point, not at the instant it ended (one late wake-up in the last
	 * interval judged changes that). */
	if (test_under_memcheck())
		return;
	cr_assert_lt(fewest, 8, "%s: never fewer than 8 threads, judged "
		     "consumer-bound, for a consumer one could feed (%u)",
		     mode_name(m), fewest);
}

ParameterizedTestParameters(autotune, a_consumer_that_never_waits_loads_less_far_ahead)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, autotune,
		  a_consumer_that_never_waits_loads_less_far_ahead)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;
	size_t k = 0, shallowest = SIZE_MAX;
	int rc;

	ad_init(&d, 600);
	d.sleep_us = 200;
	eachobs_options o = { .executor = m->executor, .ordered = m->ordered,
			      .nthreads = 16, .buffersize = 128,
			      .autotune = true, .autotune_start = 8 };
	it = ad_start(&d, &o);
	/* What may have begun ahead of the consumer: the depth, the threads'
	 * getobs in flight and the one taken, as of any item so far, less
	 * the items taken since (a depth that fell leaves what was begun
	 * under the old one until the consumer takes it). */
	size_t allowed = 0, before = 0;
	while ((rc = eachobs_next(it, NULL, NULL)) == 1) {
		nap_us(2000);
		size_t begun = (size_t)atomic_load(&d.ncalls);
		cr_assert_eq(eachobs_get_stats(it, &st), 0);
		cr_assert_leq(st.buffer_depth, st.buffersize);
		/* The depth read last time may have held until just before
		 * this read: what it allowed is not taken down yet. */
		size_t now = st.buffer_depth + o.nthreads + 1;
		allowed = allowed > 0 ? allowed - 1 : 0;
		allowed = allowed > before ? allowed : before;
		allowed = allowed > now ? allowed : now;
		before = now;
		if (++k <= 400) /* the last third: the depth has fallen */
			continue;
		if (st.buffer_depth < shallowest)
			shallowest = st.buffer_depth;
		if (test_under_memcheck())
			continue;
		cr_assert_leq(begun - k, allowed, "%s: %zu getobs begun ahead "
			      "of the consumer, depth %zu", mode_name(m),
			      begun - k, st.buffer_depth);
	}
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	free(d.calls);
	cr_assert_eq(st.buffersize, 128);
	if (test_under_memcheck())
		return;
	/* One or two threads feed it: the least depth, 16, under the 32 it
	 * started with for 8 (a starved interval on a loaded machine may
	 * deepen it for good, so at some point, not at the end). */
	size_t start = EACHOBS_DEFAULT_BUFFER_PER_THREAD * o.autotune_start;
	cr_assert_lt(shallowest, start, "%s: never a depth under the %zu it "
		     "started with, for a consumer that never waits (%zu)",
		     mode_name(m), start, shallowest);
}

ParameterizedTestParameters(autotune, loaders_that_wait_for_room_behind_a_slow_unit_get_depth)
{
	static struct mode ordered[] = {
		{ EACHOBS_THREADED, true },
		{ EACHOBS_BACKGROUND, true },
	};

	return cr_make_param_array(struct mode, ordered, 2);
}

/* Ordered, every 64th unit takes 20 ms and the rest 100 us: loaders fill
 * the window behind it and wait for room while the consumer waits. */
ParameterizedTest(const struct mode *m, autotune,
		  loaders_that_wait_for_room_behind_a_slow_unit_get_depth)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;
	int rc;

	ad_init(&d, 3000);
	d.sleep_us = 100;
	d.tail_every = 64;
	d.tail_us = 20000;
	eachobs_options o = { .executor = m->executor, .ordered = true,
			      .nthreads = 8, .buffersize = 64,
			      .autotune = true, .autotune_start = 2 };
	it = ad_start(&d, &o);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	size_t first = st.buffer_depth;
	while ((rc = eachobs_next(it, NULL, NULL)) == 1)
		;
	cr_assert_eq(rc, 0);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	free(d.calls);
	cr_assert_eq(first, 16, "%s: the least depth for 2 threads",
		     mode_name(m));
	if (test_under_memcheck())
		return;
	cr_assert_eq(st.buffer_depth, 64, "%s: a depth of %zu behind slow "
		     "units (%s)", mode_name(m), st.buffer_depth,
		     eachobs_tune_reason_string(st.tune_reason));
}

Test(autotune, threads_past_those_loading_are_not_started)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;

	ad_init(&d, 50);
	eachobs_options o = { .nthreads = 64, .autotune = true,
			      .autotune_start = 2,
			      .executor = EACHOBS_BACKGROUND };
	it = ad_start(&d, &o);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	/* No decision yet: the consumer has not waited. */
	cr_assert_eq(st.nworkers, 2, "%u threads started for 2 loading",
		     st.nworkers);
	while (eachobs_next(it, NULL, NULL) == 1)
		;
	eachobs_close(it);
	free(d.calls);
}

Test(autotune, serial_ignores_it)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;

	ad_init(&d, 10);
	eachobs_options o = { .executor = EACHOBS_SERIAL, .autotune = true };
	it = ad_start(&d, &o);
	while (eachobs_next(it, NULL, NULL) == 1)
		;
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	cr_assert_eq(st.nworkers, 0);
	cr_assert_eq(st.tune_reason, EACHOBS_TUNE_OFF);
	free(d.calls);
}

Test(autotune, a_bound_past_the_limit_is_refused_by_name)
{
	struct ad d;
	eachobs_iter *it;

	ad_init(&d, 10);
	eachobs_options o = { .nthreads = EACHOBS_MAX_THREADS + 1,
			      .autotune = true };
	cr_assert_eq(eachobs_parallel(&it, &(eachobs_dataset){ &d, ad_numobs,
				ad_getobs, sizeof(size_t) }, &o), -EINVAL);
	cr_assert_null(it);
	cr_assert(strstr(eachobs_last_error(), "nthreads"), "%s",
		  eachobs_last_error());
	free(d.calls);
}

Test(autotune, its_default_bound_lets_a_waiting_getobs_scale)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;

	ad_init(&d, 10);
	eachobs_options o = { .autotune = true, .autotune_start = 1 };
	it = ad_start(&d, &o);
	while (eachobs_next(it, NULL, NULL) == 1)
		;
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	/* The default buffer of 64 threads: 4 a thread. */
	cr_assert_leq(st.buffer_depth, st.buffersize);
	cr_assert_geq(st.buffersize,
		      (size_t)EACHOBS_DEFAULT_BUFFER_PER_THREAD *
			      EACHOBS_AUTOTUNE_THREADS);
	free(d.calls);
}

Test(autotune, without_it_the_stats_say_every_thread_loads)
{
	struct ad d;
	eachobs_iter *it;
	eachobs_stats st;

	ad_init(&d, 100);
	eachobs_options o = { .nthreads = 3, .buffersize = 5 };
	it = ad_start(&d, &o);
	while (eachobs_next(it, NULL, NULL) == 1)
		;
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	free(d.calls);
	if (test_autotuned()) /* the suite run both ways */
		return;
	cr_assert_eq(st.nloading, st.nworkers);
	cr_assert_eq(st.max_loading, st.nworkers);
	cr_assert_eq(st.buffer_depth, 5);
	cr_assert_eq(st.tune_reason, EACHOBS_TUNE_OFF);
}

/* The next autotuned iterator on a pool starts where the last ended. */
Test(autotune, a_pool_remembers_what_the_last_iterator_learnt)
{
	struct ad d;
	eachobs_pool *pool;
	eachobs_iter *it;
	eachobs_stats st;

	cr_assert_eq(eachobs_pool_create(&pool, 8), 0);
	ad_init(&d, 300);
	d.sleep_us = 200;
	eachobs_options o = { .pool = pool, .autotune = true,
			      .autotune_start = 8, .buffersize = 4,
			      .executor = EACHOBS_BACKGROUND };
	it = ad_start(&d, &o);
	unsigned fewest = UINT_MAX;
	while (eachobs_next(it, NULL, NULL) == 1) {
		nap_us(2000);
		cr_assert_eq(eachobs_get_stats(it, &st), 0);
		fewest = st.nloading < fewest ? st.nloading : fewest;
	}
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	unsigned learnt = st.nloading;
	/* It learnt something (went below its start at some point); where
	 * it ended, whatever a late interval made of it, is what the next
	 * one must start from. */
	if (!test_under_memcheck())
		cr_assert_lt(fewest, 8);

	o.autotune_start = 0;
	it = ad_start(&d, &o);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	/* Unless a decision came first (a slow machine), it starts there. */
	if (st.tune_reason == EACHOBS_TUNE_STARTING)
		cr_assert_eq(st.nloading, learnt);
	eachobs_close(it);
	eachobs_pool_destroy(pool);
	free(d.calls);
}
