/*
 * Unordered work sharing alone (src/deque.c), without an iterator: how the
 * units are spread at first, what a steal and a take move, that a claim
 * gives up once stopped, and that under contention from owners, thieves
 * and takers every index is claimed exactly once.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "deque.h"
#include "internal.h"

#include <limits.h>

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

TestSuite(deque, .init = deadline, .timeout = 60);

static size_t lo_of(struct eachobs__deques *q, unsigned j)
{
	return atomic_load(&q->d[j].lo);
}

static size_t hi_of(struct eachobs__deques *q, unsigned j)
{
	return atomic_load(&q->d[j].hi);
}

Test(deque, starts_with_nearly_equal_runs_of_whole_tasks)
{
	static const size_t ns[] = { 0, 1, 9, 10, 11, 99, 1000, 100003 };
	static const size_t bss[] = { 1, 3, 10, 64 };
	_Atomic size_t halt = SIZE_MAX;

	for (unsigned w = 1; w <= 9; w += 4)
		for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
			for (size_t b = 0; b < sizeof(bss) / sizeof(bss[0]); b++) {
				struct eachobs__deques q;
				size_t n = ns[a], bs = bss[b], ntasks = (n + bs - 1) / bs;
				cr_assert_eq(eachobs__deques_init(&q, w, n, bs, &halt), 0);
				size_t next = 0;
				for (unsigned j = 0; j < w; j++) {
					size_t tasks = (hi_of(&q, j) - lo_of(&q, j) + bs - 1) / bs;
					cr_assert_eq(lo_of(&q, j), next);
					cr_assert(lo_of(&q, j) % bs == 0 || lo_of(&q, j) == n);
					cr_assert(tasks == ntasks / w || tasks == ntasks / w + 1,
						  "n %zu bs %zu w %u: deque %u has %zu tasks",
						  n, bs, w, j, tasks);
					next = hi_of(&q, j);
				}
				cr_assert_eq(next, n);
				cr_assert_eq(atomic_load(&q.unclaimed), n);
				eachobs__deques_fini(&q);
			}
}

Test(deque, an_owner_claims_from_the_front_and_a_thief_takes_the_back_half)
{
	struct eachobs__deques q;
	struct eachobs__claim_cost cost;
	_Atomic size_t halt = SIZE_MAX;
	size_t first;

	/* 100 units in tasks of 10: [0, 50) and [50, 100). */
	cr_assert_eq(eachobs__deques_init(&q, 2, 100, 10, &halt), 0);
	cr_assert_eq(eachobs__deques_claim(&q, 1, 7, &first, &cost), 7);
	cr_assert_eq(first, 50);
	cr_assert_not(cost.stole);
	cr_assert_eq(eachobs__deques_claim(&q, 1, 100, &first, &cost), 43);
	cr_assert_eq(first, 57);
	/* Deque 1 is empty: steal from deque 0's 5 tasks the back 2 (whole
	 * tasks), claim the first of them, keep the rest. */
	cr_assert_eq(eachobs__deques_claim(&q, 1, 100, &first, &cost), 1);
	cr_assert(cost.stole);
	cr_assert_eq(first, 30);
	cr_assert_eq(lo_of(&q, 0), 0);
	cr_assert_eq(hi_of(&q, 0), 30);
	cr_assert_eq(lo_of(&q, 1), 31);
	cr_assert_eq(hi_of(&q, 1), 50);
	cr_assert_eq(atomic_load(&q.unclaimed), 49);
	/* A taker takes from the back of the richest deque. */
	cr_assert_eq(eachobs__deques_take(&q, 4, &first), 4);
	cr_assert_eq(first, 26);
	cr_assert_eq(hi_of(&q, 0), 26);
	cr_assert_eq(atomic_load(&q.unclaimed), 45);
	eachobs__deques_fini(&q);
}

Test(deque, a_claim_gives_up_once_stopped_or_when_nothing_is_left)
{
	struct eachobs__deques q;
	struct eachobs__claim_cost cost;
	_Atomic size_t halt = SIZE_MAX;
	size_t first;

	cr_assert_eq(eachobs__deques_init(&q, 2, 20, 1, &halt), 0);
	cr_assert_eq(eachobs__deques_claim(&q, 0, 10, &first, &cost), 10);
	atomic_store(&halt, 0);
	/* Its own deque is empty and the work is stopped: no steal. */
	cr_assert_eq(eachobs__deques_claim(&q, 0, 10, &first, &cost), 0);
	cr_assert_eq(atomic_load(&q.unclaimed), 10);
	atomic_store(&halt, SIZE_MAX);
	cr_assert_eq(eachobs__deques_claim(&q, 1, 10, &first, &cost), 10);
	cr_assert_eq(eachobs__deques_claim(&q, 0, 10, &first, &cost), 0);
	cr_assert_eq(eachobs__deques_claim(&q, 1, 10, &first, &cost), 0);
	cr_assert_eq(eachobs__deques_take(&q, 10, &first), 0);
	eachobs__deques_fini(&q);
}

/* ---- contention ----------------------------------------------------- */

struct race {
	struct eachobs__deques q;
	_Atomic unsigned char *times; /* claims of each index */
	size_t max;                   /* run length asked for */
	_Atomic unsigned ready;
	unsigned nthreads;
};

struct racer {
	struct race *r;
	unsigned self; /* a worker's deque, or UINT_MAX for a taker */
	size_t claimed;
};

static void mark(struct racer *me, size_t first, size_t k)
{
	for (size_t i = 0; i < k; i++)
		atomic_fetch_add(&me->r->times[first + i], 1);
	me->claimed += k;
}

static void *race_main(void *arg)
{
	struct racer *me = arg;
	struct race *r = me->r;
	struct eachobs__claim_cost cost;
	size_t first, k;

	/* Start together, so that claims overlap from the first. */
	atomic_fetch_add(&r->ready, 1);
	while (atomic_load(&r->ready) < r->nthreads)
		sched_yield();
	if (me->self == UINT_MAX) {
		while (atomic_load(&r->q.unclaimed) > 0)
			if ((k = eachobs__deques_take(&r->q, r->max, &first)))
				mark(me, first, k);
		return NULL;
	}
	while ((k = eachobs__deques_claim(&r->q, me->self, r->max, &first,
					  &cost)))
		mark(me, first, k);
	return NULL;
}

/* w workers (owners and thieves) and t takers over n units. */
static void race(unsigned w, unsigned t, size_t n, size_t bs, size_t max)
{
	struct race r = { .max = max, .nthreads = w + t };
	struct racer *who = calloc(w + t, sizeof(*who));
	pthread_t *th = calloc(w + t, sizeof(*th));
	_Atomic size_t halt = SIZE_MAX;

	r.times = calloc(n, 1);
	cr_assert_eq(eachobs__deques_init(&r.q, w, n, bs, &halt), 0);
	for (unsigned i = 0; i < w + t; i++) {
		who[i] = (struct racer){ &r, i < w ? i : UINT_MAX, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, race_main, &who[i]), 0);
	}
	size_t total = 0;
	for (unsigned i = 0; i < w + t; i++) {
		pthread_join(th[i], NULL);
		total += who[i].claimed;
	}
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(r.times[i], 1,
			     "w %u t %u n %zu bs %zu max %zu: index %zu "
			     "claimed %u times",
			     w, t, n, bs, max, i, (unsigned)r.times[i]);
	cr_assert_eq(total, n);
	cr_assert_eq(atomic_load(&r.q.unclaimed), 0);
	eachobs__deques_fini(&r.q);
	free((void *)r.times);
	free(who);
	free(th);
}

Test(deque, every_index_is_claimed_once_under_contention)
{
	/* Few units per deque, so that most claims end in steals. */
	for (unsigned rep = 0; rep < 20; rep++) {
		race(8, 0, 997, 1, 1);
		race(8, 2, 997, 1, 1);
		race(4, 1, 5003, 7, 16);
		race(16, 2, 20011, 64, 3);
		race(3, 3, 100, 100, 1);
	}
}
