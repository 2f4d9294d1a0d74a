/*
 * The ordered hand-off's reorder window (window.h).
 */
#define _GNU_SOURCE
#include "window.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>

/*
 * Broken variants, for test/meson.build only: each one breaks one promise
 * of window.h, and the unit suite must catch it (EACHOBS__BREAK unset:
 * the real window).
 *   1: a release at a multiple of the step wakes every loader asleep for
 *      room, not only those it frees
 *   2: a loader asleep for room keeps the multiple it chose first when
 *      the depth changes
 */
#ifndef EACHOBS__BREAK
#define EACHOBS__BREAK 0
#endif

int eachobs__window_init(struct eachobs__window *win, size_t w, size_t n,
			 const _Atomic size_t *limit)
{
	win->w = w;
	win->n = n;
	win->step = w / 2 ? w / 2 : 1;
	win->least = w;
	atomic_init(&win->depth, w);
	win->limit = limit;
	atomic_init(&win->next_claim, 0);
	atomic_init(&win->released, 0);
	atomic_init(&win->pace_ns, 0);
	win->mark_ns = 0;
	atomic_init(&win->want, 0);
	eachobs__event_init(&win->ev_loaded);
	for (unsigned k = 0; k < EACHOBS__ROOM_EVENTS; k++)
		eachobs__event_init(&win->ev_room[k]);
	win->loaded = eachobs__alloc_aligned(w * sizeof(*win->loaded));
	if (!win->loaded)
		return -ENOMEM;
	for (size_t i = 0; i < w; i++)
		atomic_init(&win->loaded[i], 0);
	return 0;
}

void eachobs__window_fini(struct eachobs__window *win)
{
	eachobs__free(win->loaded);
	win->loaded = NULL;
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

/* Nobody loads unit i or waits for it any more. */
static bool moot(const struct eachobs__window *win, size_t i)
{
	return i >= atomic_load_explicit(win->limit, memory_order_acquire);
}

/* Every loader asleep for room tests its place again. */
static void notify_room_all(struct eachobs__window *win)
{
	for (unsigned k = 0; k < EACHOBS__ROOM_EVENTS; k++)
		eachobs__event_notify(&win->ev_room[k], INT_MAX);
}

/* The event of the loaders whose place the release count `mark` (a
 * multiple of the step) frees. */
static struct eachobs__event *room_event(struct eachobs__window *win,
					 size_t mark)
{
	return &win->ev_room[(mark / win->step) % EACHOBS__ROOM_EVENTS];
}

void eachobs__window_allow_depth(struct eachobs__window *win, size_t least)
{
	least = least < 1 ? 1 : least > win->w ? win->w : least;
	win->least = least;
	win->step = least / 2 ? least / 2 : 1;
}

void eachobs__window_set_depth(struct eachobs__window *win, size_t depth)
{
	depth = depth < win->least ? win->least : depth > win->w ? win->w
								   : depth;
	atomic_store_explicit(&win->depth, depth, memory_order_relaxed);
	/* Deeper: loaders asleep for room may have it now; shallower: the
	 * multiple each waits for moved. */
	notify_room_all(win);
}

/* Units below `released` were let go of: i's place is free once i -
 * depth is among them. (i < depth: free from the start.) */
static bool room_below(const struct eachobs__window *win, size_t i,
		       size_t released)
{
	/* Not i < released + depth: n may be near SIZE_MAX. */
	return i < released ||
	       i - released < atomic_load_explicit(&win->depth,
						   memory_order_relaxed);
}

bool eachobs__window_room(const struct eachobs__window *win, size_t i)
{
	return room_below(win, i, atomic_load_explicit(&win->released,
						       memory_order_acquire));
}

bool eachobs__window_room_seen(const struct eachobs__window *win, size_t i,
			       size_t *seen)
{
	if (room_below(win, i, *seen))
		return true;
	/* Acquire, as in window_room: the consumer read the place's last
	 * unit before it let go of it. What a loader does after an earlier
	 * such load is ordered after that unit's release too. */
	*seen = atomic_load_explicit(&win->released, memory_order_acquire);
	return room_below(win, i, *seen);
}

struct room_wait {
	const struct eachobs__window *win;
	size_t unit;
	size_t depth; /* the depth its multiple was chosen for */
};

static bool room_or_moot(const void *arg)
{
	const struct room_wait *w = arg;

	return eachobs__window_room(w->win, w->unit) || moot(w->win, w->unit);
}

/* What ends a sleep for room: room, the limit, or a new depth (which may
 * move the multiple to wait for onto another event). */
static bool room_moot_or_new_depth(const void *arg)
{
	const struct room_wait *w = arg;

	if (EACHOBS__BREAK == 2)
		return room_or_moot(w);
	return room_or_moot(w) || eachobs__window_depth(w->win) != w->depth;
}

/* The releases after which unit i's place is free with depth places in
 * use (room_below), without wrapping. */
static size_t releases_needed(size_t i, size_t depth)
{
	return i >= depth ? i - depth + 1 : 0;
}

/* The first multiple of the step at which unit i's place is free with
 * depth places in use. */
static size_t room_mark(const struct eachobs__window *win, size_t i,
			size_t depth)
{
	size_t need = releases_needed(i, depth);

	return (need + win->step - 1) / win->step * win->step;
}

/* Sleep until unit i's place is free or moot, on the event of the
 * multiple that frees it (chosen again whenever the depth changes). */
static void sleep_for_room(struct eachobs__window *win, size_t i)
{
	struct room_wait w = { win, i, 0 };

	for (;;) {
		w.depth = eachobs__window_depth(win);
		if (room_or_moot(&w))
			return;
		eachobs__event_wait_room(room_event(win,
						    room_mark(win, i, w.depth)),
					 room_moot_or_new_depth, &w, 0);
	}
}

/* Whether unit i's place is so far from free, at the consumer's pace,
 * that a spin would end in a sleep anyway (pace unknown: no). */
static bool room_is_far(const struct eachobs__window *win, size_t i)
{
	size_t need = releases_needed(i, eachobs__window_depth(win));
	size_t r = atomic_load_explicit(&win->released, memory_order_relaxed);
	uint64_t pace = atomic_load_explicit(&win->pace_ns,
					     memory_order_relaxed);

	/* Their time compared without overflow. */
	if (pace == 0 || need <= r)
		return false;
	return need - r > EACHOBS__ROOM_FAR_NS / pace;
}

/*
 * A loader whose place is not free yet (the window is full) spins a few
 * microseconds for it (base.h, the room budget), then sleeps until
 * half the window is free, not one place: the consumer lets go of units
 * in order, so it wakes loaders only when `released` reaches a multiple
 * of the step (half the window, or of the least depth), and a loader
 * sleeps until the first such multiple at which its place is free.
 * Waiting for the one place made loaders and consumer take turns, a
 * futex wake per observation with a cheap getobs. The wait cannot stall:
 * the multiple is below i - depth + step <= i, and every unit below i was
 * claimed earlier and is loaded or being loaded. Each multiple has its
 * event (one of EACHOBS__ROOM_EVENTS, in turn), so that the wake-up at one
 * multiple does not rouse the loaders that wait for the next: with P
 * loaders' chunks ahead of a full window, most of them woke only to sleep
 * again.
 *
 * The spin gives its CPU away now and then: the unit the consumer waits
 * for is one particular loader's, and when loaders outnumber the cores
 * that loader may be runnable behind this one, which spinning without
 * yielding kept off the core for the whole spin (P = 2 loaders beside the
 * consumer on 2 cores: the consumer slept every 80 units, and ordered ran
 * at half unordered's rate).
 *
 * A loader whose place the consumer, at the pace it kept over the last
 * step, frees only after EACHOBS__ROOM_FAR_NS does not spin at all: its
 * spin would end in a sleep, and with many loaders ahead of a slow
 * consumer (sixteen, a consumer of 1 us an observation) their spins and
 * yields took the cores from the consumer. A fast consumer's window
 * holds no place that far (50 ns a release: 400 places).
 */
void eachobs__window_wait_room(struct eachobs__window *win, size_t i)
{
	/* Once, before the spin: the consumer's pace changes once a step,
	 * and while it spins the distance only shrinks. */
	unsigned spins = room_is_far(win, i) ? 0 : eachobs__room_spins();
	/* As many yields however the budget was scaled (base.h). */
	unsigned every = spins / (EACHOBS__ROOM_SPINS / EACHOBS__ROOM_YIELD);

	every = every ? every : 1;
	for (unsigned k = 0; k < spins; k++) {
		if (eachobs__window_room(win, i) || moot(win, i))
			return;
		if (k % every == every - 1)
			sched_yield();
		else
			eachobs__cpu_relax();
	}
	sleep_for_room(win, i);
}

/* Whether the unit the consumer sleeps for is loaded now. */
static bool wanted_loaded(const void *arg)
{
	const struct eachobs__window *win = arg;
	size_t m = atomic_load_explicit(&win->want, memory_order_relaxed);

	return eachobs__window_loaded(win, m);
}

void eachobs__window_publish_run(struct eachobs__window *win, size_t lo,
				 size_t hi)
{
	for (size_t i = lo; i < hi; i++)
		atomic_store_explicit(&win->loaded[i % win->w], i + 1,
				      memory_order_release);
	eachobs__event_notify_single(&win->ev_loaded, wanted_loaded, win);
}

void eachobs__window_publish(struct eachobs__window *win, size_t i)
{
	eachobs__window_publish_run(win, i, i + 1);
}

bool eachobs__window_loaded(const struct eachobs__window *win, size_t i)
{
	return atomic_load_explicit(&win->loaded[i % win->w],
				    memory_order_acquire) == i + 1;
}

struct loaded_wait {
	const struct eachobs__window *win;
	size_t unit;
	eachobs__cond_fn also;
	const void *arg;
};

static bool loaded_or_woken(const void *arg)
{
	const struct loaded_wait *w = arg;

	return eachobs__window_loaded(w->win, w->unit) ||
	       moot(w->win, w->unit) || (w->also && w->also(w->arg));
}

void eachobs__window_wait_loaded(struct eachobs__window *win, size_t i,
				 eachobs__cond_fn also, const void *arg)
{
	struct loaded_wait w = { win, i, also, arg };
	struct eachobs__stats *st = eachobs__tls_stats;

	if (loaded_or_woken(&w))
		return;
	/* Before the sleep flag is set (a sequentially consistent RMW), so a
	 * loader that sees the flag sees which unit it is for. */
	atomic_store_explicit(&win->want, i, memory_order_relaxed);
	uint64_t t0 = st ? eachobs__now_ns() : 0;
	if (st)
		eachobs__idle_begin(st, t0);
	eachobs__event_wait_single(&win->ev_loaded, loaded_or_woken, &w,
				   eachobs__consumer_spins());
	if (st)
		eachobs__idle_end(st, t0, eachobs__now_ns());
}

/* The consumer, at each multiple of the step: what a release took on
 * average since the last one. */
static void note_pace(struct eachobs__window *win)
{
	uint64_t now = eachobs__now_ns();

	if (win->mark_ns)
		atomic_store_explicit(&win->pace_ns,
				      (now - win->mark_ns) / win->step,
				      memory_order_relaxed);
	win->mark_ns = now;
}

/* Loaders wait for a multiple of the step (eachobs__window_wait_room):
 * only a release that reaches one wakes, and only the loaders that
 * multiple frees (those of another multiple on the same event test their
 * place and sleep again); the last wakes every loader still asleep, as
 * nothing is let go of after it. */
void eachobs__window_release(struct eachobs__window *win, size_t i)
{
	size_t r = i + 1;
	bool at_mark = r % win->step == 0;

	atomic_store_explicit(&win->released, r, memory_order_release);
	if (at_mark)
		note_pace(win);
	if (r == win->n || (EACHOBS__BREAK == 1 && at_mark))
		notify_room_all(win);
	else if (at_mark)
		eachobs__event_notify(room_event(win, r), INT_MAX);
}

void eachobs__window_wake(struct eachobs__window *win)
{
	eachobs__event_notify_single(&win->ev_loaded, NULL, NULL);
	notify_room_all(win);
}
