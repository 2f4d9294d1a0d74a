/*
 * The ordered hand-off: a reorder window of W places, place i % W holding
 * unit i. Units are claimed in order from one counter; unit i may be
 * loaded once the consumer has let go of unit i - W, and the consumer
 * takes units in order. Two facts make this safe and bounded:
 *   - memory: at most W units exist at once, by construction;
 *   - progress: the unit the consumer waits for, m, was claimed before any
 *     higher unit, so its loader is at work or about to be, and its place
 *     is free because m - W < m was let go. So the window never stalls on
 *     a missing unit, whatever the speed of the other loaders.
 *
 * Each place has a word that says which unit it holds loaded (unit + 1;
 * 0: none yet); the words lie side by side, so a loader's run of units
 * fills a cache line together and the consumer reads several with one
 * line. The consumer lets go of units in order, so one counter,
 * `released`, says which places are free: unit i's is once released > i -
 * W. A loader that found no room sleeps until half the window is free
 * (the consumer wakes loaders only when `released` reaches a multiple of
 * half the window, and only those that multiple frees); the consumer
 * sleeps on its own event, woken by the loader that publishes the unit it
 * waits for.
 *
 * The depth in use (places, W at first) may be set lower while it runs:
 * unit i's place is then free once released > i - depth. Safety and
 * progress hold as above for any depth >= 1; loaders are woken when
 * `released` reaches a multiple of the step, which stays at most the
 * least depth ever set, so that a loader's multiple is never past its own
 * unit.
 *
 * The owner's limit ends the loading early: nothing at or above it is
 * loaded or waited for (the owner lowers it to a failed unit, or to 0 to
 * close, then wakes the waiters). Knows nothing of iterators or of what
 * a unit holds.
 */
#ifndef EACHOBS_WINDOW_H
#define EACHOBS_WINDOW_H

#include "base.h"

/* Loaders without room sleep on one of this many events, chosen by the
 * release count that will free their place, so that each wake-up at a
 * multiple of the step reaches the loaders it frees and not the rest. */
enum { EACHOBS__ROOM_EVENTS = 4 };

struct eachobs__window {
	/* Read-mostly: fixed at init. */
	_Atomic size_t *loaded;        /* W words: unit + 1 held loaded */
	size_t w;
	size_t n;                      /* units */
	size_t step;                   /* releases between loader wake-ups */
	size_t least;                  /* the least depth that may be set */
	_Atomic size_t depth;          /* places in use: w, or fewer */
	const _Atomic size_t *limit;   /* the owner's: the lowest unit not to
					* load or wait for */
	_Atomic size_t next_claim EACHOBS__ALIGNED; /* first unclaimed unit */
	/* Written by the consumer. */
	_Atomic size_t released EACHOBS__ALIGNED;   /* units let go of */
	_Atomic size_t want;           /* the unit it sleeps for */
	_Atomic uint64_t pace_ns;      /* ns a release took, over the last
					* step (0: not measured yet) */
	uint64_t mark_ns;              /* when it reached the last multiple
					* of the step */
	struct eachobs__event ev_loaded EACHOBS__ALIGNED; /* the consumer's */
	struct eachobs__event ev_room[EACHOBS__ROOM_EVENTS] EACHOBS__ALIGNED;
						       /* loaders' */
};

/* A window of w >= 1 places over n units, under the owner's *limit. 0 or
 * -ENOMEM (fini all the same). */
int eachobs__window_init(struct eachobs__window *win, size_t w, size_t n,
			 const _Atomic size_t *limit);
void eachobs__window_fini(struct eachobs__window *win);

/* Loaders: claim [*lo, *hi), at most max units, all below bound and below
 * n; when workers > 0, at most a 1/(2 workers) share of what is left, so
 * that the last claims shrink to single units. false when none is left. */
bool eachobs__window_claim(struct eachobs__window *win, size_t max,
			   size_t bound, size_t workers, size_t *lo,
			   size_t *hi);
/* Before any loader runs: depths set later will be at least least (>= 1,
 * at most w); the step falls to half of it. */
void eachobs__window_allow_depth(struct eachobs__window *win, size_t least);
/* Any thread: the places in use from now on, clamped to [least, w]. */
void eachobs__window_set_depth(struct eachobs__window *win, size_t depth);

/* The places in use now. */
static inline size_t eachobs__window_depth(const struct eachobs__window *win)
{
	return atomic_load_explicit(&win->depth, memory_order_relaxed);
}

/* Whether unit i's place is free for it, without waiting. */
bool eachobs__window_room(const struct eachobs__window *win, size_t i);
/* The same for a loader that keeps *seen, what it last read of the
 * consumer's releases (0 at first): read again only when what was seen
 * leaves no room, so that the consumer's line stays with it while there
 * is room (releases only grow, so an old count never finds room that is
 * not there). */
bool eachobs__window_room_seen(const struct eachobs__window *win, size_t i,
			       size_t *seen);
/* Loader: wait until unit i's place is free for it, or i reached the
 * limit. Waits for half the window to be free when it can (see
 * window.c). */
void eachobs__window_wait_room(struct eachobs__window *win, size_t i);
/* Loader: unit i is loaded (its place was free for it); units [lo, hi),
 * all loaded by the caller, with one wake-up. */
void eachobs__window_publish(struct eachobs__window *win, size_t i);
void eachobs__window_publish_run(struct eachobs__window *win, size_t lo,
				 size_t hi);

/* Consumer: whether unit i is loaded; wait until it is, i reached the
 * limit, or also(arg) holds (NULL: nothing else). */
bool eachobs__window_loaded(const struct eachobs__window *win, size_t i);
void eachobs__window_wait_loaded(struct eachobs__window *win, size_t i,
				 eachobs__cond_fn also, const void *arg);
/* Consumer: let go of loaded unit i, the lowest not let go of yet (units
 * are let go of in order); its place is free for i + W. */
void eachobs__window_release(struct eachobs__window *win, size_t i);

/* Units claimed so far. */
size_t eachobs__window_claimed(const struct eachobs__window *win);
/* Wake every waiter to test its conditions again (async-signal-safe;
 * after the owner lowered the limit to 0, every wait returns). */
void eachobs__window_wake(struct eachobs__window *win);

#endif /* EACHOBS_WINDOW_H */
