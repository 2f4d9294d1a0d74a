/*
 * Autotune's controller: how many of a set of loader threads load, decided
 * from what their owner measures over intervals of a few getobs durations.
 *
 *   - The consumer waits (or loads itself): add loaders while throughput
 *     rises, in long strides while each pays and halving the step between
 *     the last count that paid and the first that did not, up to the
 *     bound; past the usable CPUs, a getobs that computes must raise it
 *     clearly (they only save the hand-off some sleeps), over longer
 *     intervals. After each change, one load's time to settle before the
 *     next interval is judged.
 *   - The consumer does not wait: never add; keep the fewest loaders that
 *     keep it fed, by Little's law (the consumer's rate times the time one
 *     load takes is the loads that must be in flight), with a quarter more
 *     for the variance, giving back at most half of them a step.
 *   - Past the CPUs, a computing getobs's step up stands only when a
 *     second interval confirms it (unless it rose far past the noise),
 *     and a count there is probed downwards: fewer loaders stay when two
 *     intervals find them within a little of the rate.
 *   - A getobs whose cost moves by more than a third for two intervals in a
 *     row (a cache that warms, a second phase) forgets what was learnt.
 *   - How far ahead it loads (the depth: loaded units that may wait for
 *     the consumer) follows the loaders, a few units each, and doubles,
 *     up to its bound, while the consumer waits (not loads) as loaders
 *     wait for room
 *     (ordered: a slow unit holds the window's head).
 *
 * Knows nothing of iterators or threads: loaders read `active` (those with
 * an index at or above it park on ev_park until it rises), the owner feeds
 * decide() with cumulative figures and starts the threads it asks for.
 */
#ifndef EACHOBS_TUNE_H
#define EACHOBS_TUNE_H

#include "base.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the owner measured, each figure a running total since the start. */
struct eachobs__tune_sample {
	uint64_t now_ns;
	uint64_t loaded;        /* getobs calls returned, on any thread */
	uint64_t worker_loaded; /* of those, on the loaders */
	uint64_t getobs_ns;     /* the loaders' time inside getobs */
	uint64_t cpu_ns;        /* the loaders' CPU time, all of it */
	uint64_t starved_ns;    /* the consumer's time waiting or loading */
	uint64_t waited_ns;     /* of that, waiting */
	uint64_t room_ns;       /* the loaders' time waiting for room */
};

/* How far ahead to load, in units: per_loader a loader, at least least,
 * at most bound. */
struct eachobs__tune_depth {
	size_t bound, per_loader, least;
};

struct eachobs__tune {
	/* Read by every loader between units. */
	_Atomic unsigned active EACHOBS__ALIGNED;
	_Atomic bool done;      /* no work left: parked loaders may leave */
	/* For the owner's stats. */
	_Atomic unsigned most;
	_Atomic unsigned reason; /* an eachobs_tune_reason */
	/* One decision at a time, none before next_ns. */
	_Atomic uint64_t next_ns EACHOBS__ALIGNED;
	_Atomic bool deciding;
	struct eachobs__event ev_park EACHOBS__ALIGNED;
	/* Fixed at init. */
	unsigned bound;  /* the most loaders */
	unsigned cpus;   /* the most for a getobs that computes */
	/* The decider's own. */
	struct eachobs__tune_sample last;
	unsigned prev;      /* loaders in the last interval */
	double prev_rate;   /* its throughput */
	bool prev_starved;  /* whether the consumer waited in it */
	bool prev_computes; /* whether its getobs computed */
	unsigned bad;       /* the fewest loaders known not to pay more than
			     * fewer (bound + 1: none known) */
	double g_ref;       /* ns per getobs when `bad` was learnt */
	unsigned drift;     /* intervals in a row the cost strayed from it */
	unsigned at_plateau; /* decisions held below `bad` */
	unsigned fed_streak; /* intervals in a row the consumer was fed */
	bool settling;      /* the count just changed: rebaseline first */
	/* Past the CPUs (a getobs that computes): */
	unsigned lose;      /* the most loaders known to give less than more
			     * (0: none known) */
	unsigned confirm_from; /* a step up from here awaits its second
				* interval (0: none) */
	double confirm_rate;   /* the rate it must still beat */
	bool probing;       /* the last change was a step down to try */
	unsigned down_from; /* a step down from here awaits its second
			     * interval (0: none) */
	double down_rate;   /* the rate it must stay near */
	/* The depth. */
	_Atomic size_t depth; /* in use now (for the owner and its stats) */
	struct eachobs__tune_depth dp;
	size_t deepest;     /* what room waits showed was needed */
	bool from_start;    /* no interval judged yet: the next one holds
			     * the start */
};

/* Between 1 and bound loaders, start of them at first (clamped); the
 * depth between 1 and dp->bound (dp NULL: 1 throughout). */
void eachobs__tune_init(struct eachobs__tune *t, unsigned bound,
			unsigned cpus, unsigned start,
			const struct eachobs__tune_sample *first,
			const struct eachobs__tune_depth *dp);

static inline unsigned eachobs__tune_active(const struct eachobs__tune *t)
{
	return atomic_load_explicit(&t->active, memory_order_relaxed);
}

/* The depth in use: set by decide(), for the owner to apply. */
static inline size_t eachobs__tune_depth(const struct eachobs__tune *t)
{
	return atomic_load_explicit(&t->depth, memory_order_relaxed);
}

/* Any loader: whether a decision is due at now; true hands the caller
 * the ticket, which decide() gives back. */
bool eachobs__tune_due(struct eachobs__tune *t, uint64_t now);
/* The ticket's holder: decide from s and return the loaders wanted
 * (active is set to it once the owner has the threads: see commit); the
 * depth wanted is set at once (eachobs__tune_depth). */
unsigned eachobs__tune_decide(struct eachobs__tune *t,
			      const struct eachobs__tune_sample *s);
/* The ticket's holder: `n` loaders exist for the count decide() wanted
 * (fewer when threads could not be started); set it, wake the parked if
 * it rose, give the ticket back. */
void eachobs__tune_commit(struct eachobs__tune *t, unsigned n);

/* Loader `self`: sleep while it is not among the active ones, unless
 * stop(arg) holds or the work is done; true when it may load. */
bool eachobs__tune_park(struct eachobs__tune *t, unsigned self,
			eachobs__cond_fn stop, const void *arg);
/* Any thread, also a signal handler: parked loaders test again. */
void eachobs__tune_wake(struct eachobs__tune *t);
/* A loader found no work left: every parked one may leave. */
void eachobs__tune_finish(struct eachobs__tune *t);

#endif /* EACHOBS_TUNE_H */
