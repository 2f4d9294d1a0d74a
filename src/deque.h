/*
 * Unordered work sharing: the units [0, nunits) cut into tasks of
 * `basesize` units (called indices below), one deque of tasks per worker,
 * stealing. A deque is just the range [lo, hi) of indices nobody has
 * claimed yet: its owner claims from the front, an idle worker steals half
 * of the richest deque's tasks from the back, and any other thread (the
 * THREADED consumer) may take from the back. Because a deque is a range,
 * not a list, memory does not grow with nunits.
 *
 * Every index is claimed exactly once, by whichever thread gets it first.
 * Knows nothing of iterators: its callers say when to give up (`halt`).
 */
#ifndef EACHOBS_DEQUE_H
#define EACHOBS_DEQUE_H

#include "base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The indices [lo, hi) of one worker not yet claimed, under `lock`. lo and
 * hi are atomics only so that thieves may read them unlocked to pick a
 * victim. */
struct eachobs__deque {
	pthread_mutex_t lock;
	_Atomic size_t lo;
	_Atomic size_t hi;
} EACHOBS__ALIGNED;

struct eachobs__deques {
	struct eachobs__deque *d;  /* one per worker */
	unsigned n;
	size_t basesize;           /* indices per task */
	/* Indices still in some deque; claims give up once it is 0. */
	_Atomic size_t unclaimed EACHOBS__ALIGNED;
	/* The owner's halt word, lowered to 0 when nothing more may be
	 * claimed (a close, a failure): a claim waiting for a busy victim
	 * gives up. */
	const _Atomic size_t *halt;
};

/* What one claim cost its thread: whether it stole, and the time it spent
 * waiting for a victim held by another thread (ns). */
struct eachobs__claim_cost {
	bool stole;
	uint64_t wait_ns;
};

/* n deques sharing [0, nunits) in tasks of basesize (>= 1): worker j gets
 * the j-th of n nearly equal runs of whole tasks. 0 or -ENOMEM. */
int eachobs__deques_init(struct eachobs__deques *q, unsigned n, size_t nunits,
			 size_t basesize, const _Atomic size_t *halt);
void eachobs__deques_fini(struct eachobs__deques *q);

/*
 * Worker self: claim a run of up to max consecutive indices from the front
 * of its own deque, or one index stolen from the richest other deque (the
 * back half of its tasks moves into self's deque). The count claimed and
 * the first in *first; 0 when no index is left or *halt is 0. A steal
 * that lost a race retries while indices are unclaimed (yielding the CPU
 * after a few spins: the thread it follows may be preempted).
 */
size_t eachobs__deques_claim(struct eachobs__deques *q, unsigned self,
			     size_t max, size_t *first,
			     struct eachobs__claim_cost *cost);
/* Any thread that owns no deque: take up to max indices from the back of
 * the richest deque; the count (0: none found on this look). */
size_t eachobs__deques_take(struct eachobs__deques *q, size_t max,
			    size_t *first);

#endif /* EACHOBS_DEQUE_H */
