/*
 * The ordered hand-off's reorder window (window.h).
 */
#define _GNU_SOURCE
#include "window.h"

#include <errno.h>
#include <limits.h>

int eachobs__window_init(struct eachobs__window *win, size_t w, size_t n,
			 const _Atomic size_t *limit)
{
	win->w = w;
	win->n = n;
	win->limit = limit;
	atomic_init(&win->next_claim, 0);
	win->places = eachobs__alloc_aligned(w * sizeof(*win->places));
	if (!win->places)
		return -ENOMEM;
	for (size_t i = 0; i < w; i++) {
		atomic_init(&win->places[i].turn, 0);
		eachobs__event_init(&win->places[i].ev);
	}
	return 0;
}

void eachobs__window_fini(struct eachobs__window *win)
{
	eachobs__free(win->places);
	win->places = NULL;
}

bool eachobs__window_claim(struct eachobs__window *win, size_t max,
			   size_t bound, size_t workers, size_t *lo,
			   size_t *hi)
{
	size_t c = atomic_load_explicit(&win->next_claim, memory_order_relaxed);

	if (bound > win->n)
		bound = win->n;
	/* A CAS, not fetch_add, so the counter never passes n (no wrap
	 * when n is near SIZE_MAX). */
	do {
		if (c >= bound)
			return false;
		size_t left = bound - c, take = left < max ? left : max;
		if (workers && left / (2 * workers) < take)
			take = left / (2 * workers) ? left / (2 * workers) : 1;
		*hi = c + take;
	} while (!atomic_compare_exchange_weak_explicit(
		&win->next_claim, &c, *hi, memory_order_relaxed,
		memory_order_relaxed));
	*lo = c;
	return true;
}

size_t eachobs__window_claimed(const struct eachobs__window *win)
{
	return atomic_load_explicit(&win->next_claim, memory_order_relaxed);
}

static struct eachobs__place *place_of(const struct eachobs__window *win,
				       size_t i)
{
	return &win->places[i % win->w];
}

/* The turn at which unit i's place is free for it. */
static uint32_t free_turn(const struct eachobs__window *win, size_t i)
{
	return (uint32_t)(2 * (i / win->w));
}

/* Nobody loads unit i or waits for it any more. */
static bool moot(const struct eachobs__window *win, size_t i)
{
	return i >= atomic_load_explicit(win->limit, memory_order_acquire);
}

struct turn_wait {
	const struct eachobs__window *win;
	size_t unit;                   /* the unit the wait is for */
	struct eachobs__place *place;
	uint32_t want;
	eachobs__cond_fn also;
	const void *arg;
};

static bool turn_is(const struct turn_wait *w)
{
	return atomic_load_explicit(&w->place->turn, memory_order_acquire) ==
	       w->want;
}

static bool turn_or_moot(const void *arg)
{
	const struct turn_wait *w = arg;

	return turn_is(w) || moot(w->win, w->unit);
}

/* The place's turn is at w->want or past it (turns only grow, by at most
 * 2 past a place's free turn, and are compared modulo 2^32). */
static bool turn_reached_or_moot(const void *arg)
{
	const struct turn_wait *w = arg;
	uint32_t t = atomic_load_explicit(&w->place->turn, memory_order_acquire);

	return (uint32_t)(t - w->want) < UINT32_C(1) << 31 ||
	       moot(w->win, w->unit);
}

bool eachobs__window_room(const struct eachobs__window *win, size_t i)
{
	return atomic_load_explicit(&place_of(win, i)->turn,
				    memory_order_acquire) == free_turn(win, i);
}

/*
 * A loader whose place is not free yet (the window is full) waits until
 * half the window is free, not one place: the consumer lets go of units in
 * order, so once unit i + W/2's place is free, so is i's, and the W/2 - 1
 * after it. Waiting for the one place made loaders and consumer take
 * turns, a futex wake per observation with a cheap getobs. The wait cannot
 * stall: unit i + W/2 - W is below i, so it was claimed earlier and is
 * loaded or being loaded.
 */
void eachobs__window_wait_room(struct eachobs__window *win, size_t i)
{
	size_t h = win->w / 2;

	/* First a few microseconds for unit i's own place (base.h,
	 * EACHOBS__ROOM_SPINS). */
	for (unsigned k = 0; k < EACHOBS__ROOM_SPINS; k++) {
		if (eachobs__window_room(win, i) || moot(win, i))
			return;
		eachobs__cpu_relax();
	}

	if (h > 1 && i + h < win->n) {
		struct turn_wait far = { win, i, place_of(win, i + h),
					 free_turn(win, i + h), NULL, NULL };
		eachobs__event_wait_timed(&far.place->ev,
					  turn_reached_or_moot, &far,
					  EACHOBS__LOADER_SPINS);
	}
	struct turn_wait w = { win, i, place_of(win, i), free_turn(win, i),
			       NULL, NULL };
	eachobs__event_wait_timed(&w.place->ev, turn_or_moot, &w,
				  EACHOBS__LOADER_SPINS);
}

static void set_turn(struct eachobs__window *win, size_t i, uint32_t turn)
{
	struct eachobs__place *p = place_of(win, i);

	atomic_store_explicit(&p->turn, turn, memory_order_release);
	eachobs__event_notify(&p->ev, INT_MAX);
}

void eachobs__window_publish(struct eachobs__window *win, size_t i)
{
	set_turn(win, i, free_turn(win, i) + 1);
}

bool eachobs__window_loaded(const struct eachobs__window *win, size_t i)
{
	return atomic_load_explicit(&place_of(win, i)->turn,
				    memory_order_acquire) ==
	       free_turn(win, i) + 1;
}

static bool loaded_or_woken(const void *arg)
{
	const struct turn_wait *w = arg;

	return turn_or_moot(arg) || (w->also && w->also(w->arg));
}

void eachobs__window_wait_loaded(struct eachobs__window *win, size_t i,
				 eachobs__cond_fn also, const void *arg)
{
	struct turn_wait w = { win, i, place_of(win, i), free_turn(win, i) + 1,
			       also, arg };

	eachobs__event_wait_timed(&w.place->ev, loaded_or_woken, &w,
				  EACHOBS__CONSUMER_SPINS);
}

void eachobs__window_release(struct eachobs__window *win, size_t i)
{
	/* From 2k + 1 (loaded) to 2k + 2: free for unit i + W. */
	set_turn(win, i, free_turn(win, i) + 2);
}

void eachobs__window_wake_at(struct eachobs__window *win, size_t i)
{
	eachobs__event_notify(&place_of(win, i)->ev, INT_MAX);
}

void eachobs__window_wake(struct eachobs__window *win)
{
	for (size_t i = 0; win->places && i < win->w; i++)
		eachobs__event_notify(&win->places[i].ev, INT_MAX);
}
