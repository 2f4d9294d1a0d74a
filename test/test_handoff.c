/*
 * The unordered hand-off alone (src/handoff.c), without an iterator:
 * credits bound what waits to exactly buffersize, whatever the ring's
 * capacity; with buffersize + loaders + 1 items a loader holding a credit
 * always finds a free item; every item put is taken once; close wakes
 * every sleeper.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "handoff.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(handoff, .init = deadline, .timeout = 60);

static void init(struct eachobs__handoff *h, size_t b, size_t nitems,
		 unsigned loaders, size_t *items)
{
	*h = (struct eachobs__handoff){ 0 };
	cr_assert_eq(eachobs__handoff_init(h, b, nitems, loaders), 0);
	for (size_t i = 0; i < nitems; i++)
		eachobs__handoff_put_free(h, &items[i]);
}

Test(handoff, credits_bound_what_waits_to_exactly_buffersize)
{
	/* 3 and 4: the ready ring (4 and 8 entries) could hold more. */
	for (size_t b = 1; b <= 9; b++) {
		struct eachobs__handoff h;
		size_t items[32];
		size_t put = 0;

		init(&h, b, b + 2, 1, items);
		for (;;) {
			size_t c = eachobs__handoff_try_take_credits(&h, 1);
			if (!c)
				break;
			void *it = eachobs__handoff_try_get_free(&h);
			cr_assert_not_null(it, "b %zu: no free item after %zu",
					   b, put);
			eachobs__handoff_publish(&h, &it, 1);
			put++;
		}
		cr_assert_eq(put, b);
		/* Taking one gives one credit back, no more. */
		cr_assert_not_null(eachobs__handoff_get_ready(&h));
		cr_assert_eq(eachobs__handoff_try_take_credits(&h, 5), 1);
		cr_assert_eq(h.max_waiting, b);
		eachobs__handoff_fini(&h);
	}
}

Test(handoff, close_wakes_every_sleeper_and_fails_their_puts)
{
	struct eachobs__handoff h;
	size_t items[4];

	init(&h, 1, 3, 2, items);
	void *a = eachobs__handoff_get_free(&h);
	cr_assert(eachobs__handoff_put_ready(&h, a));
	eachobs__handoff_close(&h);
	cr_assert(eachobs__handoff_closed(&h));
	/* No credit left: these would sleep forever on an open hand-off. */
	cr_assert_not(eachobs__handoff_put_ready(&h, &items[1]));
	cr_assert_eq(eachobs__handoff_take_credits(&h, 1), 0);
	eachobs__handoff_fini(&h);
}

/* ---- loaders against a consumer --------------------------------------- */

enum { ITEMS_MAX = 256 };

struct run {
	struct eachobs__handoff h;
	size_t items[ITEMS_MAX];
	size_t b, n;              /* buffersize, units to hand over */
	unsigned loaders;
	_Atomic size_t next;      /* next unit to load */
	_Atomic size_t holding;   /* items loaders hold, at most `loaders` */
	size_t *got;              /* times each unit was taken */
	_Atomic bool starved;     /* a loader with a credit found no item */
	bool runs;                /* loaders move runs of up to 4 */
};

static void *loader_main(void *arg)
{
	struct run *r = arg;
	void *run[4];

	for (;;) {
		size_t want = r->runs ? 4 : 1;
		size_t c = eachobs__handoff_take_credits(&r->h, want);
		if (!c)
			return NULL;
		size_t first = atomic_fetch_add(&r->next, c), k = 0;
		for (; k < c && first + k < r->n; k++) {
			run[k] = eachobs__handoff_try_get_free(&r->h);
			if (!run[k]) {
				atomic_store(&r->starved, true);
				run[k] = eachobs__handoff_get_free(&r->h);
			}
			*(size_t *)run[k] = first + k;
		}
		if (k < c)
			eachobs__handoff_give_credits(&r->h, c - k);
		eachobs__handoff_publish(&r->h, run, k);
		if (k < c)
			return NULL;
	}
}

static void hand_over(size_t b, unsigned loaders, size_t n, bool runs)
{
	/* The hand-off's members are cache-line aligned: so must r be. */
	struct run *r = aligned_alloc(64, (sizeof(*r) + 63) / 64 * 64);
	pthread_t th[16];
	/* A run holds up to 4 items: the bound is counted in credits, and
	 * the items a run holds are covered by its credits. */
	size_t nitems = b + loaders + 1;

	memset(r, 0, sizeof(*r));
	r->b = b;
	r->n = n;
	r->loaders = loaders;
	r->runs = runs;
	r->got = calloc(n, sizeof(size_t));
	init(&r->h, b, nitems, loaders, r->items);
	for (unsigned i = 0; i < loaders; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, loader_main, r), 0);
	for (size_t taken = 0; taken < n;) {
		size_t *it = eachobs__handoff_get_ready(&r->h);
		if (!it) {
			eachobs__handoff_wait_ready(&r->h, NULL, NULL);
			continue;
		}
		cr_assert_lt(*it, n);
		r->got[*it]++;
		taken++;
		/* Sometimes the consumer is slow: loaders fill the buffer. */
		if (taken % 97 == 0)
			usleep(100);
		eachobs__handoff_put_free(&r->h, it);
	}
	eachobs__handoff_close(&r->h);
	for (unsigned i = 0; i < loaders; i++)
		pthread_join(th[i], NULL);
	for (size_t u = 0; u < n; u++)
		cr_assert_eq(r->got[u], 1, "b %zu P %u: unit %zu taken %zu times",
			     b, loaders, u, r->got[u]);
	cr_assert_leq(r->h.max_waiting, b, "b %zu P %u: %zu waited", b,
		      loaders, r->h.max_waiting);
	cr_assert_not(atomic_load(&r->starved),
		      "b %zu P %u: a loader holding a credit found no free "
		      "item among b + P + 1",
		      b, loaders);
	eachobs__handoff_fini(&r->h);
	free(r->got);
	free(r);
}

Test(handoff, every_item_is_taken_once_and_loaders_never_starve)
{
	for (size_t b = 1; b <= 8; b *= 2)
		for (unsigned p = 1; p <= 8; p *= 2) {
			hand_over(b, p, 3000, false);
			hand_over(b, p, 3000, true);
		}
}
