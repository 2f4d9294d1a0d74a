/*
 * The reorder window alone (src/window.c), without an iterator: whose turn
 * each place is, the shrinking claims, that loaders never hold more than W
 * units and the consumer always gets the next unit whatever the loaders'
 * speeds (the no-stall argument), and that the owner's limit, lowered to
 * a failed unit or to 0, ends the waits it makes moot.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "window.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

TestSuite(window, .init = deadline, .timeout = 60);

/* The owner's limit, for the tests that never lower it. */
static _Atomic size_t no_limit = SIZE_MAX;

Test(window, a_place_serves_units_w_apart_in_turn)
{
	struct eachobs__window win;
	size_t w = 3, n = 3000;

	cr_assert_eq(eachobs__window_init(&win, w, n, &no_limit), 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert(eachobs__window_room(&win, i), "unit %zu", i);
		if (i + w < n)
			cr_assert_not(eachobs__window_room(&win, i + w));
		cr_assert_not(eachobs__window_loaded(&win, i));
		eachobs__window_publish(&win, i);
		cr_assert(eachobs__window_loaded(&win, i));
		/* The place holds unit i until it is let go of. */
		if (i + w < n) {
			cr_assert_not(eachobs__window_room(&win, i + w));
			cr_assert_not(eachobs__window_loaded(&win, i + w));
		}
		eachobs__window_release(&win, i);
		if (i + w < n)
			cr_assert(eachobs__window_room(&win, i + w));
	}
	eachobs__window_fini(&win);
}

Test(window, a_run_is_published_together_and_each_unit_only_once_loaded)
{
	struct eachobs__window win;

	cr_assert_eq(eachobs__window_init(&win, 8, 100, &no_limit), 0);
	eachobs__window_publish_run(&win, 0, 5);
	for (size_t i = 0; i < 8; i++)
		cr_assert_eq(eachobs__window_loaded(&win, i), i < 5, "unit %zu",
			     i);
	/* Place 0 holds unit 0, not unit 8. */
	cr_assert_not(eachobs__window_loaded(&win, 8));
	eachobs__window_fini(&win);
}

Test(window, claims_rise_shrink_to_single_units_and_stop_at_the_bound)
{
	struct eachobs__window win;
	size_t lo, hi, next = 0, last = SIZE_MAX;

	cr_assert_eq(eachobs__window_init(&win, 8, 1000, &no_limit), 0);
	while (eachobs__window_claim(&win, 16, SIZE_MAX, 4, &lo, &hi)) {
		cr_assert_eq(lo, next);
		cr_assert_gt(hi, lo);
		cr_assert_leq(hi - lo, 16);
		cr_assert_leq(hi - lo, last, "claims only shrink");
		last = hi - lo;
		next = hi;
	}
	cr_assert_eq(next, 1000);
	cr_assert_eq(last, 1);
	cr_assert_eq(eachobs__window_claimed(&win), 1000);
	eachobs__window_fini(&win);

	cr_assert_eq(eachobs__window_init(&win, 8, 100, &no_limit), 0);
	cr_assert(eachobs__window_claim(&win, 50, 10, 0, &lo, &hi));
	cr_assert_eq(hi, 10);
	cr_assert_not(eachobs__window_claim(&win, 50, 10, 0, &lo, &hi));
	eachobs__window_fini(&win);
}

/* ---- loaders against a consumer ---------------------------------------- */

struct run {
	struct eachobs__window win;
	_Atomic size_t limit;     /* the owner's */
	size_t *place_holds;      /* the unit each place holds now */
	size_t n;
	unsigned loaders;
	size_t chunk;
	_Atomic size_t in_flight; /* loaded or being loaded, not released */
	_Atomic size_t most;
	unsigned seed;
	size_t depth;             /* 0: w throughout */
	bool vary;                /* loader 0 moves the depth around it */
};

static void note_most(struct run *r, size_t now)
{
	size_t m = atomic_load(&r->most);

	while (now > m && !atomic_compare_exchange_weak(&r->most, &m, now))
		;
}

static void *loader_main(void *arg)
{
	struct run *r = arg;
	unsigned seed = r->seed ^ (unsigned)(uintptr_t)pthread_self();
	size_t lo, hi, k = 0;

	while (eachobs__window_claim(&r->win, r->chunk, SIZE_MAX, r->loaders,
				     &lo, &hi)) {
		for (size_t i = lo; i < hi; i++) {
			/* Any thread may set the depth, while others wait. */
			if (r->vary && ++k % 37 == 0)
				eachobs__window_set_depth(&r->win,
							  rand_r(&seed) % r->win.w + 1);
			if (!eachobs__window_room(&r->win, i))
				eachobs__window_wait_room(&r->win, i);
			if (i >= atomic_load(&r->limit))
				return NULL;
			note_most(r, atomic_fetch_add(&r->in_flight, 1) + 1);
			/* Loaders of different speeds: some units are slow. */
			if (rand_r(&seed) % 64 == 0)
				usleep(rand_r(&seed) % 200);
			r->place_holds[i % r->win.w] = i;
			eachobs__window_publish(&r->win, i);
		}
	}
	return NULL;
}

static void run_window_at(size_t w, unsigned loaders, size_t chunk, size_t n,
			  size_t depth, bool vary)
{
	struct run r = { .n = n, .loaders = loaders, .chunk = chunk,
			 .seed = (unsigned)(w * 131 + loaders * 7 + chunk),
			 .depth = depth, .vary = vary };
	pthread_t th[16];
	size_t bound = depth && !vary ? depth : w;

	atomic_init(&r.limit, SIZE_MAX);
	cr_assert_eq(eachobs__window_init(&r.win, w, n, &r.limit), 0);
	if (depth) {
		eachobs__window_allow_depth(&r.win, vary ? 1 : depth);
		eachobs__window_set_depth(&r.win, depth);
	}
	r.place_holds = calloc(w, sizeof(size_t));
	for (unsigned i = 0; i < loaders; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, loader_main, &r), 0);
	for (size_t m = 0; m < n; m++) {
		if (!eachobs__window_loaded(&r.win, m))
			eachobs__window_wait_loaded(&r.win, m, NULL, NULL);
		cr_assert(eachobs__window_loaded(&r.win, m));
		cr_assert_eq(r.place_holds[m % w], m,
			     "W %zu P %u chunk %zu: place of unit %zu holds %zu",
			     w, loaders, chunk, m, r.place_holds[m % w]);
		atomic_fetch_sub(&r.in_flight, 1);
		eachobs__window_release(&r.win, m);
	}
	for (unsigned i = 0; i < loaders; i++)
		pthread_join(th[i], NULL);
	cr_assert_leq(atomic_load(&r.most), bound,
		      "W %zu depth %zu P %u: %zu units at once", w, depth,
		      loaders, atomic_load(&r.most));
	eachobs__window_fini(&r.win);
	free(r.place_holds);
}

static void run_window(size_t w, unsigned loaders, size_t chunk, size_t n)
{
	run_window_at(w, loaders, chunk, n, 0, false);
}

Test(window, loaders_hold_at_most_w_units_and_the_consumer_never_stalls)
{
	static const size_t ws[] = { 1, 2, 3, 8, 33 };

	for (size_t a = 0; a < sizeof(ws) / sizeof(ws[0]); a++)
		for (unsigned p = 1; p <= 8; p *= 2)
			for (size_t chunk = 1; chunk <= 4; chunk *= 4)
				run_window(ws[a], p, chunk, 2000);
}

Test(window, a_lowered_depth_bounds_the_units_loaded_ahead_and_never_stalls)
{
	static const size_t depths[] = { 1, 2, 5, 16 };

	for (size_t a = 0; a < sizeof(depths) / sizeof(depths[0]); a++)
		for (unsigned p = 1; p <= 8; p *= 2)
			for (size_t chunk = 1; chunk <= 4; chunk *= 4)
				run_window_at(33, p, chunk, 2000, depths[a],
					      false);
}

Test(window, a_depth_that_moves_while_loaders_wait_never_stalls)
{
	for (unsigned p = 1; p <= 8; p *= 2)
		for (size_t chunk = 1; chunk <= 4; chunk *= 4)
			run_window_at(33, p, chunk, 3000, 33, true);
}

Test(window, a_raised_depth_frees_places_at_once)
{
	struct eachobs__window win;

	cr_assert_eq(eachobs__window_init(&win, 8, 100, &no_limit), 0);
	eachobs__window_allow_depth(&win, 2);
	eachobs__window_set_depth(&win, 3);
	cr_assert(eachobs__window_room(&win, 2));
	cr_assert_not(eachobs__window_room(&win, 3), "past the depth");
	eachobs__window_set_depth(&win, 1); /* below the least: 2 */
	cr_assert(eachobs__window_room(&win, 1));
	cr_assert_not(eachobs__window_room(&win, 2));
	eachobs__window_set_depth(&win, 100); /* past w: w */
	cr_assert(eachobs__window_room(&win, 7));
	cr_assert_not(eachobs__window_room(&win, 8));
	eachobs__window_fini(&win);
}

/* ---- failure and close ------------------------------------------------ */

static bool past_limit(const void *arg)
{
	const struct run *r = arg;

	return 5 >= atomic_load(&r->limit);
}

/* What an owner does on a failure at unit 5: lower, then wake. */
static void *fail_soon(void *arg)
{
	struct run *r = arg;

	usleep(20000);
	atomic_store(&r->limit, 5);
	eachobs__window_wake(&r->win);
	return NULL;
}

Test(window, a_failure_wakes_a_consumer_waiting_for_a_unit_past_it)
{
	struct run r = { 0 };
	pthread_t th;

	atomic_init(&r.limit, SIZE_MAX);
	cr_assert_eq(eachobs__window_init(&r.win, 4, 100, &r.limit), 0);
	cr_assert_eq(pthread_create(&th, NULL, fail_soon, &r), 0);
	/* Unit 5 is never loaded: only the failure ends this wait (also
	 * without the caller's own test: 5 is at the limit). */
	eachobs__window_wait_loaded(&r.win, 5, NULL, NULL);
	cr_assert(past_limit(&r));
	cr_assert_not(eachobs__window_loaded(&r.win, 5));
	pthread_join(th, NULL);
	/* Below the limit, a wait still waits for its unit. */
	eachobs__window_publish(&r.win, 4);
	eachobs__window_wait_loaded(&r.win, 4, past_limit, &r);
	cr_assert(eachobs__window_loaded(&r.win, 4));
	eachobs__window_fini(&r.win);
}

struct room_wait {
	struct eachobs__window win;
	_Atomic size_t limit;
};

static void *wait_room_of_4(void *arg)
{
	struct room_wait *w = arg;

	eachobs__window_wait_room(&w->win, 4); /* unit 0 is never released */
	return NULL;
}

Test(window, a_limit_of_0_wakes_a_loader_waiting_for_room)
{
	struct room_wait w;
	pthread_t th;

	atomic_init(&w.limit, SIZE_MAX);
	cr_assert_eq(eachobs__window_init(&w.win, 4, 100, &w.limit), 0);
	eachobs__window_publish(&w.win, 0);
	cr_assert_eq(pthread_create(&th, NULL, wait_room_of_4, &w), 0);
	usleep(20000);
	atomic_store(&w.limit, 0);
	eachobs__window_wake(&w.win);
	pthread_join(th, NULL);
	cr_assert_not(eachobs__window_room(&w.win, 4));
	eachobs__window_fini(&w.win);
}

struct half_wait {
	struct eachobs__window win;
	_Atomic bool returned;
};

static void *wait_room_of_11(void *arg)
{
	struct half_wait *w = arg;

	eachobs__window_wait_room(&w->win, 11);
	atomic_store(&w->returned, true);
	return NULL;
}

Test(window, a_loader_without_room_sleeps_until_half_the_window_is_free)
{
	struct half_wait w = { .returned = false };
	pthread_t th;

	/* Unit 11's place frees when unit 3 is let go of; the loader waits
	 * for the half mark, 4 units, which that release reaches. */
	cr_assert_eq(eachobs__window_init(&w.win, 8, 100, &no_limit), 0);
	eachobs__window_publish_run(&w.win, 0, 8);
	cr_assert_eq(pthread_create(&th, NULL, wait_room_of_11, &w), 0);
	for (size_t i = 0; i < 3; i++)
		eachobs__window_release(&w.win, i);
	usleep(20000);
	cr_assert_not(atomic_load(&w.returned), "returned before its place "
		      "was free");
	eachobs__window_release(&w.win, 3);
	pthread_join(th, NULL);
	cr_assert(eachobs__window_room(&w.win, 11));
	eachobs__window_fini(&w.win);
}

/* A loader asleep for room on a thread of its own. */
struct sleeper {
	struct eachobs__window *win;
	size_t unit;
	_Atomic bool returned;
	pthread_t th;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;

	eachobs__window_wait_room(s->win, s->unit);
	atomic_store(&s->returned, true);
	return NULL;
}

static unsigned room_sleepers(struct eachobs__window *win)
{
	unsigned n = 0;

	for (unsigned k = 0; k < EACHOBS__ROOM_EVENTS; k++)
		n += atomic_load(&win->ev_room[k].waiters);
	return n;
}

/* Whether cond(arg) came true within about ms milliseconds: what another
 * thread does is seen from outside only by looking again, once a
 * millisecond (a sleep, not a spin). */
static bool within_ms(bool (*cond)(const void *), const void *arg, int ms)
{
	for (int t = 0; t < ms && !cond(arg); t++)
		usleep(1000);
	return cond(arg);
}

struct sleepers_at_least {
	struct eachobs__window *win;
	unsigned n;
};

static bool enough_asleep(const void *arg)
{
	const struct sleepers_at_least *a = arg;

	return room_sleepers(a->win) >= a->n;
}

/* Start s, and return once `asleep` loaders sleep for room in all (5 s at
 * most). */
static void start_sleeper(struct sleeper *s, struct eachobs__window *win,
			  size_t unit, unsigned asleep)
{
	struct sleepers_at_least a = { win, asleep };

	s->win = win;
	s->unit = unit;
	atomic_init(&s->returned, false);
	cr_assert_eq(pthread_create(&s->th, NULL, sleeper_main, s), 0);
	within_ms(enough_asleep, &a, 5000);
	cr_assert_eq(room_sleepers(win), asleep, "loader for unit %zu is not "
		     "asleep", unit);
}

static bool has_returned(const void *arg)
{
	const struct sleeper *s = arg;

	return atomic_load(&s->returned);
}

/* Whether s returned within about a second. */
static bool returns(struct sleeper *s)
{
	return within_ms(has_returned, s, 1000);
}

static bool has_waiter(const void *arg)
{
	return atomic_load(&((const struct eachobs__event *)arg)->waiters) > 0;
}

Test(window, a_release_at_a_multiple_wakes_only_the_loaders_it_frees)
{
	struct eachobs__window win;
	struct sleeper a, b;
	uint32_t epoch[EACHOBS__ROOM_EVENTS];

	/* W = 8, step 4: unit 8's place frees at 4 releases, unit 12's at 8. */
	cr_assert_eq(eachobs__window_init(&win, 8, 100, &no_limit), 0);
	start_sleeper(&a, &win, 8, 1);
	start_sleeper(&b, &win, 12, 2);
	for (unsigned k = 0; k < EACHOBS__ROOM_EVENTS; k++)
		epoch[k] = atomic_load(&win.ev_room[k].epoch);
	for (size_t i = 0; i < 4; i++)
		eachobs__window_release(&win, i);
	cr_assert(returns(&a), "the loader whose place was freed slept on");
	pthread_join(a.th, NULL);
	cr_assert_not(atomic_load(&b.returned));
	for (unsigned k = 0; k < EACHOBS__ROOM_EVENTS; k++)
		if (atomic_load(&win.ev_room[k].waiters))
			cr_expect_eq(atomic_load(&win.ev_room[k].epoch),
				     epoch[k], "the release that freed unit "
				     "8's place also woke the loader of 12");
	for (size_t i = 4; i < 8; i++)
		eachobs__window_release(&win, i);
	cr_assert(returns(&b));
	pthread_join(b.th, NULL);
	eachobs__window_fini(&win);
}

Test(window, a_loader_asleep_for_room_follows_a_change_of_depth)
{
	_Atomic size_t limit = SIZE_MAX;
	struct eachobs__window win;
	struct sleeper s;

	/* W = 8, least depth 4, step 2. Unit 9's place frees at 2 releases
	 * with 8 places in use, at 6 with 4. */
	cr_assert_eq(eachobs__window_init(&win, 8, 100, &limit), 0);
	eachobs__window_allow_depth(&win, 4);
	start_sleeper(&s, &win, 9, 1);
	eachobs__window_set_depth(&win, 4);
	/* It moves to the event of its new multiple, 6 (a loader that kept
	 * its old one could still be woken at 2 and find room late). */
	struct eachobs__event *ev =
		&win.ev_room[(6 / win.step) % EACHOBS__ROOM_EVENTS];
	within_ms(has_waiter, ev, 5000);
	bool moved = atomic_load(&ev->waiters) == 1;
	for (size_t i = 0; i < 5; i++)
		eachobs__window_release(&win, i);
	usleep(20000);
	cr_assert_not(atomic_load(&s.returned), "returned before its place "
		      "was free");
	eachobs__window_release(&win, 5);
	bool woke = returns(&s);
	/* Unblock it either way, so that a failure does not hang. */
	atomic_store(&limit, 0);
	eachobs__window_wake(&win);
	pthread_join(s.th, NULL);
	cr_assert(moved, "the loader did not move to its new multiple");
	cr_assert(woke, "the release that freed its place with the new depth "
		  "did not wake it");
	eachobs__window_fini(&win);
}

Test(window, a_place_near_size_max_is_free_once_its_unit_minus_w_is_let_go)
{
	struct eachobs__window win;

	/* n near SIZE_MAX, where released + W wraps past it. */
	cr_assert_eq(eachobs__window_init(&win, 4, SIZE_MAX, &no_limit), 0);
	eachobs__window_release(&win, SIZE_MAX - 6); /* released: MAX - 5 */
	cr_assert(eachobs__window_room(&win, SIZE_MAX - 2));
	cr_assert_not(eachobs__window_room(&win, SIZE_MAX - 1));
	eachobs__window_release(&win, SIZE_MAX - 4); /* released: MAX - 3 */
	cr_assert(eachobs__window_room(&win, SIZE_MAX - 1));
	eachobs__window_fini(&win);
}
