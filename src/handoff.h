/*
 * The unordered hand-off: items (an iterator's slots; here just pointers)
 * travel between producers and one consumer through concurrencykit rings,
 * each ring with one producer, so that no producer waits for another.
 *
 *   lanes: one per producer (each loader, and the consumer when it helps);
 *          lane j's ready ring holds what producer j loaded, in the order
 *          it loaded them, and only j puts there. The consumer gathers
 *          across the lanes: it takes from the lane it is on while it
 *          has items, up to EACHOBS__LANE_STREAK in a row, then moves on.
 *          Each lane also keeps a few empty items for its producer.
 *   spare: empty items beyond what the lanes keep.
 *
 * Invariant (credits): a producer takes a credit before it puts an item
 * and the consumer gives it back once it took the item, so at most
 * `buffersize` items wait in all lanes together, and with
 * buffersize + producers + 1 items a producer holding a credit always
 * finds an empty one somewhere (docs/design.md says why); empty items are
 * looked for in the producer's lane, then among the spares, then in the
 * other lanes. The consumer gives credits back in small groups (at most
 * a quarter of the buffer, and at once before it sleeps), so that it
 * touches the count the producers share once per group, not per item.
 *
 * The depth in use (at most buffersize, all of it at first) may be set
 * lower while it runs: the credits beyond it are withheld, taken from
 * what is free at once and from what the consumer gives back, and given
 * back when the depth rises again.
 *
 * Nothing blocks in ck_ring, so waiting is done with event counts: the
 * consumer sleeps until an item arrives (or, while items come a few
 * microseconds apart, naps for a run of them: one wake-up per run, not
 * per item); producers without credit sleep
 * until half the depth is free again (or until one credit is, when half
 * the depth is less than a credit per producer).
 *
 * Knows nothing of iterators: the owner's halt word ends it (once it is 0
 * every wait returns, puts fail and gets find nothing new), the owner
 * wakes the sleepers, and says what else wakes the consumer.
 */
#ifndef EACHOBS_HANDOFF_H
#define EACHOBS_HANDOFF_H

#include "base.h"

#include <ck_ring.h>

/* Empty items a lane keeps for its producer (the rest are spares); the
 * most credits the consumer gives back at once; the most items it takes
 * from one lane in a row. */
enum {
	EACHOBS__LANE_FREE = 32,
	EACHOBS__FLUSH_MAX = 16,
	EACHOBS__LANE_STREAK = 32
};

struct eachobs__lane {
	ck_ring_t ready EACHOBS__ALIGNED; /* producer -> consumer */
	ck_ring_t free EACHOBS__ALIGNED;  /* consumer -> producer (others may
					   * take from it when theirs is
					   * empty) */
	ck_ring_buffer_t *ready_buf EACHOBS__ALIGNED;
	ck_ring_buffer_t *free_buf;
	/* Each side's last look at the other's end of the ready ring, on a
	 * line of its own: a side reads the other's again only when what it
	 * saw says full (producer) or empty (consumer), not per item. */
	unsigned head_seen EACHOBS__ALIGNED; /* the producer's */
	unsigned tail_seen EACHOBS__ALIGNED; /* the consumer's */
} EACHOBS__ALIGNED;

/* The consumer's naps (wait_ready): allowed at all, when it last found
 * nothing, `taken` then, the time between items then (ns, smoothed), and
 * naps taken (stats, tests). All zero: none allowed, none measured. */
struct eachobs__naps {
	bool allowed;
	uint64_t waited_at;
	size_t taken_at;
	uint64_t gap_ns;
	size_t count;
};

struct eachobs__handoff {
	/* Read-mostly: fixed at init. */
	struct eachobs__lane *lanes EACHOBS__ALIGNED;
	unsigned nlanes;
	size_t buffersize;
	/* Set with the depth, rarely. */
	_Atomic size_t depth;            /* credits in use: buffersize or
					  * fewer */
	_Atomic size_t resume_at;        /* credits that wake producers */
	const _Atomic size_t *halt;      /* the owner's: 0 ends everything */
	bool free_waits;                 /* see eachobs__handoff_init */
	ck_ring_t spare;                 /* empty items beyond the lanes' */
	ck_ring_buffer_t *spare_buf;
	/* The consumer's own. */
	unsigned cursor EACHOBS__ALIGNED; /* the lane it takes from */
	unsigned streak;                  /* items taken from it in a row */
	unsigned spins;                   /* before it sleeps */
	unsigned back;                    /* the lane empty items go back to */
	size_t owed;                      /* credits taken, not given back */
	unsigned nstash;                  /* empty items not yet put back */
	size_t flush_at;                  /* owed that it gives back at once */
	/* Credits kept out of use: buffersize - depth, once the consumer
	 * gave back enough (any thread may lower it, see set_depth). */
	_Atomic size_t withheld;
	size_t taken;                     /* items taken (stats sampling) */
	size_t max_waiting;               /* most that waited (stats) */
	struct eachobs__naps naps;        /* see wait_ready */
	void *stash[EACHOBS__FLUSH_MAX];
	/* Room left for loaded items: buffersize minus what waits in the
	 * lanes, what producers hold credits for, and what the consumer
	 * owes. */
	_Atomic size_t credits EACHOBS__ALIGNED;
	/* The consumer sleeps on ev_ready (single-waiter protocol); while
	 * it naps, a put wakes it no sooner than the nap's end. */
	struct eachobs__event ev_ready EACHOBS__ALIGNED;
	_Atomic bool napping;
	struct eachobs__event ev_room EACHOBS__ALIGNED;  /* producers sleep */
	struct eachobs__event ev_free;                   /* producers, rarely */
};

/* Room for nitems items, credits for buffersize (>= 1) of them in the
 * lanes, for nlanes (>= 1) producers, ended by *halt becoming 0; the
 * caller then puts each item with eachobs__handoff_put_free. free_waits:
 * producers take an item before its credit, so they may wait for one
 * (see put_free). 0 or -ENOMEM (call fini all the same). */
int eachobs__handoff_init(struct eachobs__handoff *h, size_t buffersize,
			  size_t nitems, unsigned nlanes,
			  const _Atomic size_t *halt, bool free_waits);
void eachobs__handoff_fini(struct eachobs__handoff *h);
/* Wake every sleeper to test its conditions again (async-signal-safe;
 * after the owner set the halt word to 0, every wait returns). */
void eachobs__handoff_wake(struct eachobs__handoff *h);
bool eachobs__handoff_halted(const struct eachobs__handoff *h);
/* Any thread: at most d (clamped to [1, buffersize]) items may wait from
 * now on (those waiting beyond it stay until taken); what producers
 * sleep for follows it. */
void eachobs__handoff_set_depth(struct eachobs__handoff *h, size_t d);

/* Producer `lane` (and only it): an empty item, or NULL. try_get_free
 * looks through the rings once, so it may miss an item that the consumer
 * puts back behind it while another producer takes the one ahead; get_free
 * looks again while any ring holds one, and waits only when none does
 * (NULL only once halted). The credits a caller holds guarantee that it
 * need not wait, unless free_waits. */
void *eachobs__handoff_try_get_free(struct eachobs__handoff *h,
				    unsigned lane);
void *eachobs__handoff_get_free(struct eachobs__handoff *h, unsigned lane);
/* Producer `lane`: k empty items into out, as get_free, taken a run at a
 * time from each ring; fewer only once halted. */
size_t eachobs__handoff_get_free_run(struct eachobs__handoff *h,
				     unsigned lane, void **out, size_t k);
/* Consumer, loading into its own `lane`: an item it kept back (below),
 * else as try_get_free. */
void *eachobs__handoff_consumer_get_free(struct eachobs__handoff *h,
					 unsigned lane);
/* Consumer: give an item back empty. It may keep a few back, to put
 * them together, but never more than the credits it owes (so that the
 * items a producer's credits count on are never among them), and none
 * once it gives credits back or sleeps. */
void eachobs__handoff_put_free(struct eachobs__handoff *h, void *item);

/* Producers: between 1 and want credits, waiting while there are none (0
 * once halted); the same without waiting (0: none now); and giving back
 * credits not used. */
size_t eachobs__handoff_take_credits(struct eachobs__handoff *h, size_t want);
size_t eachobs__handoff_try_take_credits(struct eachobs__handoff *h,
					 size_t want);
void eachobs__handoff_give_credits(struct eachobs__handoff *h, size_t k);
/* Producer `lane`: put k loaded items whose credits it holds, with one
 * wake-up. */
void eachobs__handoff_publish(struct eachobs__handoff *h, unsigned lane,
			      void *const *items, size_t k);
/* Producer `lane`: take a credit (waiting for one) and put a loaded
 * item; false once halted (the item is not put). */
bool eachobs__handoff_put_ready(struct eachobs__handoff *h, unsigned lane,
				void *item);

/* Consumer: a loaded item, or NULL when none waits in any lane. */
void *eachobs__handoff_get_ready(struct eachobs__handoff *h);
/* Consumer, right after get_ready returned an item: the item k (>= 1)
 * entries behind it in the same lane, if it has been put there and the
 * consumer has seen it (NULL otherwise); nothing is taken. For
 * prefetching only: until get_ready returns it, the item is its
 * producer's. */
void *eachobs__handoff_peek_ready(const struct eachobs__handoff *h,
				  unsigned k);
/* Consumer, having found none: give back what it owes, and sleep until
 * an item is ready, the hand-off is halted, or also(arg) holds (NULL:
 * nothing else). With naps allowed, when items have come a few
 * microseconds apart it may instead nap for a run of them (at most
 * EACHOBS__NAP_MAX_NS, ended at once by a halt, by also, or by
 * eachobs__handoff_wake) and return with none ready: callers look
 * again. */
void eachobs__handoff_wait_ready(struct eachobs__handoff *h,
				 eachobs__cond_fn also, const void *arg);
/* Consumer, before it first waits: whether it may nap (off at init). */
void eachobs__handoff_allow_naps(struct eachobs__handoff *h, bool on);
/* How long a consumer whose items come gap_ns apart naps for a run of
 * them, with depth credits in use; 0: it sleeps until an item comes. */
uint64_t eachobs__handoff_nap_ns(uint64_t gap_ns, size_t depth);

#endif /* EACHOBS_HANDOFF_H */
