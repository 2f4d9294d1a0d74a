/*
 * The unordered hand-off: items (an iterator's slots; here just pointers)
 * travel between loaders and one consumer through two concurrencykit
 * rings.
 *
 *   free:  empty items. The consumer gives them back; loaders take them.
 *   ready: loaded items. Loaders put them (under a mutex), the consumer
 *          alone takes them.
 *
 * Invariant (credits): a loader takes a credit before it puts an item and
 * the consumer gives it back when it takes one, so at most `buffersize`
 * items wait in `ready`, and with buffersize + loaders + 1 items a loader
 * holding a credit always finds a free one (docs/design.md says why).
 *
 * Nothing blocks in ck_ring, so waiting is done with event counts: the
 * consumer sleeps until an item arrives; loaders without credit sleep
 * until half the buffer is free again (or until one credit is, when half
 * the buffer is less than a credit per loader).
 *
 * Knows nothing of iterators: the owner closes it (every wait returns) and
 * says what else wakes the consumer.
 */
#ifndef EACHOBS_HANDOFF_H
#define EACHOBS_HANDOFF_H

#include "base.h"

#include <ck_ring.h>
#include <pthread.h>

struct eachobs__handoff {
	/* Each ring's heads are on lines of their own (ck pads them); the
	 * rings start on lines of their own too, so that the loaders' claims
	 * on `free` do not share a line with `ready`'s size the consumer
	 * reads. */
	ck_ring_t ready EACHOBS__ALIGNED; /* loaded items; loaders -> consumer */
	ck_ring_t free EACHOBS__ALIGNED;  /* empty items; consumer -> loaders */
	/* Read-mostly: fixed at init, `closed` set once. */
	ck_ring_buffer_t *ready_buf EACHOBS__ALIGNED;
	ck_ring_buffer_t *free_buf;
	size_t buffersize;
	size_t resume_at;                /* credits that wake loaders */
	bool lock_ready;                 /* producer_lock was initialized */
	_Atomic bool closed;
	size_t max_waiting;              /* consumer only: most in `ready` */
	/* Serializes puts to `ready`; written by every put. */
	pthread_mutex_t producer_lock EACHOBS__ALIGNED;
	/* Room left for loaded items: buffersize minus what waits in
	 * `ready` and what loaders hold credits for. */
	_Atomic size_t credits EACHOBS__ALIGNED;
	/* The consumer sleeps on ev_ready (single-waiter protocol). */
	struct eachobs__event ev_ready EACHOBS__ALIGNED;
	struct eachobs__event ev_room EACHOBS__ALIGNED;  /* loaders sleep */
	struct eachobs__event ev_free;                   /* loaders, rarely */
};

/* Room for nitems items, credits for buffersize (>= 1) of them in
 * `ready`, for nloaders loaders; the caller then puts each item with
 * eachobs__handoff_put_free. 0 or -ENOMEM (call fini all the same). */
int eachobs__handoff_init(struct eachobs__handoff *h, size_t buffersize,
			  size_t nitems, unsigned nloaders);
void eachobs__handoff_fini(struct eachobs__handoff *h);
/* Every wait returns from now on (puts fail, gets find nothing); wakes
 * every sleeper. */
void eachobs__handoff_close(struct eachobs__handoff *h);
bool eachobs__handoff_closed(const struct eachobs__handoff *h);

/* Loaders (and a helping consumer): an empty item, or NULL. get_free
 * waits for one (NULL only once closed); the credits a caller holds
 * guarantee it need not. */
void *eachobs__handoff_try_get_free(struct eachobs__handoff *h);
void *eachobs__handoff_get_free(struct eachobs__handoff *h);
/* Consumer: give an item back empty. */
void eachobs__handoff_put_free(struct eachobs__handoff *h, void *item);

/* Loaders: between 1 and want credits, waiting while there are none (0
 * once closed); the same without waiting (0: none now); and giving back
 * credits not used. */
size_t eachobs__handoff_take_credits(struct eachobs__handoff *h, size_t want);
size_t eachobs__handoff_try_take_credits(struct eachobs__handoff *h,
					 size_t want);
void eachobs__handoff_give_credits(struct eachobs__handoff *h, size_t k);
/* Loaders: put k loaded items whose credits the caller holds, with one
 * lock and one wake-up. */
void eachobs__handoff_publish(struct eachobs__handoff *h, void *const *items,
			      size_t k);
/* Loaders: take a credit (waiting for one) and put a loaded item; false
 * once closed (the item is not put). */
bool eachobs__handoff_put_ready(struct eachobs__handoff *h, void *item);

/* Consumer: a loaded item, or NULL when none waits; its credit goes back
 * to the loaders. */
void *eachobs__handoff_get_ready(struct eachobs__handoff *h);
/* Consumer, having found none: sleep until an item is ready, the hand-off
 * is closed, or also(arg) holds (NULL: nothing else). */
void eachobs__handoff_wait_ready(struct eachobs__handoff *h,
				 eachobs__cond_fn also, const void *arg);
/* Wake the consumer if it sleeps, to test its own conditions again. */
void eachobs__handoff_wake_consumer(struct eachobs__handoff *h);

#endif /* EACHOBS_HANDOFF_H */
