/*
 * The ordered hand-off: the W slots (buffersize + workers + 1, or
 * buffersize + workers when the consumer holds swapped-out buffers: see
 * hold.c) form a reorder window, slot i % W holding unit i (an observation,
 * or a batch; "index" below).
 *
 * Work is handed out in index order from one counter (next_claim), a chunk
 * at a time. Index i may be loaded once the consumer has let go of index
 * i - W, which it does when it moves past it. Two facts make this safe and
 * bounded:
 *   - memory: at most W observations exist at once, by construction;
 *   - progress: the index the consumer waits for, m, was claimed before any
 *     higher index, so its loader is at work or about to be, and its slot
 *     is free because m - W < m was let go. So the window never stalls on a
 *     missing index, whatever the speed of the other loaders.
 *
 * Each slot's `turn` says whose move it is (see internal.h), and each slot
 * has its own event count, so a loader waiting for room and the consumer
 * waiting for an index are woken by exactly the change they wait for.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>


void eachobs__order_init(eachobs_iter *it, size_t chunk)
{
	atomic_init(&it->order.next_claim, 0);
	atomic_init(&it->order.limit, it->nunits);
	it->order.chunk = chunk;
	it->order.next = 0;
}

/*
 * Claim [*lo, *hi): at most max indices, all below bound, and, when
 * workers > 0, at most a 1/(2 workers) share of what is left, so that the
 * last claims shrink to single indices and no worker ends a run holding
 * several while the others have nothing (n = 100, t = 100 ms, P = 8 with
 * fixed chunks of 2: one worker loaded 14 where 13 was the ideal).
 */
static bool claim(eachobs_iter *it, size_t max, size_t bound, size_t workers,
		  size_t *lo, size_t *hi)
{
	size_t c = atomic_load_explicit(&it->order.next_claim,
					memory_order_relaxed);

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
		&it->order.next_claim, &c, *hi, memory_order_relaxed,
		memory_order_relaxed));
	*lo = c;
	return true;
}

static struct eachobs__slot *slot_of(eachobs_iter *it, size_t i)
{
	return &it->slots[i % it->nslots];
}

/* The turn at which slot_of(i) is free for index i (see internal.h). */
static uint32_t free_turn(eachobs_iter *it, size_t i)
{
	return (uint32_t)(2 * (i / it->nslots));
}

struct turn_wait {
	eachobs_iter *it;
	struct eachobs__slot *slot;
	uint32_t want;
	size_t unit; /* the consumer's wait: the unit it needs */
};

static bool turn_or_closing(const void *arg)
{
	const struct turn_wait *w = arg;

	return atomic_load_explicit(&w->slot->turn, memory_order_acquire) ==
		       w->want ||
	       eachobs__closing(w->it);
}

/* The slot's turn is at w->want or past it (turns only grow, by at most
 * 2 past a slot's free turn, and are compared modulo 2^32). */
static bool turn_reached_or_closing(const void *arg)
{
	const struct turn_wait *w = arg;
	uint32_t t = atomic_load_explicit(&w->slot->turn, memory_order_acquire);

	return (uint32_t)(t - w->want) < UINT32_C(1) << 31 ||
	       eachobs__closing(w->it);
}

/*
 * A loader whose slot is not free yet (the window is full) waits until
 * half the window is free, not one slot: the consumer lets go of slots in
 * index order, so once index i + W/2's slot is free, so is i's, and the
 * W/2 - 1 after it. Waiting for the one slot made loaders and consumer
 * take turns, a futex wake per observation (no-op, P = 2: 69% of the
 * profile in context switches), as unordered loaders did before their
 * half-buffer rule. The wait cannot stall: index i + W/2 - W is below i,
 * so it was claimed earlier and is loaded or being loaded.
 */
static void wait_for_room(eachobs_iter *it, size_t i)
{
	size_t h = it->nslots / 2;

	if (h > 1 && i + h < it->nunits) {
		struct turn_wait far = { it, slot_of(it, i + h),
					 free_turn(it, i + h), i + h };
		eachobs__event_wait_timed(&far.slot->ev,
					  turn_reached_or_closing, &far,
					  EACHOBS__LOADER_SPINS);
	}
	struct turn_wait w = { it, slot_of(it, i), free_turn(it, i), i };
	eachobs__event_wait_timed(&w.slot->ev, turn_or_closing, &w,
				  EACHOBS__LOADER_SPINS);
}

static size_t limit(eachobs_iter *it)
{
	return atomic_load_explicit(&it->order.limit, memory_order_relaxed);
}

static void publish(eachobs_iter *it, struct eachobs__slot *slot)
{
	size_t u = atomic_load_explicit(&slot->unit, memory_order_relaxed);

	atomic_store_explicit(&slot->turn, free_turn(it, u) + 1,
			      memory_order_release);
	eachobs__event_notify(&slot->ev, INT_MAX);
}

/* Batched: load entries of the open batches below bound; false when
 * there is none. */
static bool help_entry(eachobs_iter *it, unsigned hint, size_t bound)
{
	struct eachobs__slot *done;

	if (!it->batchsize || !eachobs__help(it, hint, bound, &done))
		return false;
	if (done)
		publish(it, done);
	return true;
}

/*
 * Load unit u into its slot, which must be free, and publish it unless a
 * helper completes it (then the helper publishes). A batch whose getobs is
 * slow is opened to every thread and filled lowest unit first (load.c):
 * the caller loads entries of u and of the open units before it until u
 * has none left to claim.
 */
static void load_and_publish(eachobs_iter *it, size_t u)
{
	struct eachobs__slot *slot = slot_of(it, u);

	if (!it->batchsize || eachobs__getobs_cheap(it)) {
		if (eachobs__fill(it, slot, u))
			publish(it, slot);
		return;
	}
	eachobs__open(it, slot, u);
	while (help_entry(it, 0, u + 1))
		;
}

/* Unbatched loads that did not wait, k of them since t0: into the
 * stats. */
static void account_run(uint64_t t0, size_t *k)
{
	if (*k == 0)
		return;
	eachobs__account(t0, eachobs__now_ns(), *k);
	*k = 0;
}

/*
 * Load the claimed [lo, hi) in order, each once its slot is free; false
 * when close began or a failure below hi ended the loading. Unbatched,
 * the loads between two waits are timed together: two clock reads per
 * observation cost more than a cheap getobs.
 */
static bool load_chunk(eachobs_iter *it, size_t lo, size_t hi)
{
	uint64_t t0 = 0;
	size_t k = 0;

	for (size_t i = lo; i < hi; i++) {
		struct turn_wait w = { it, slot_of(it, i), free_turn(it, i), i };
		if (!turn_or_closing(&w)) {
			account_run(t0, &k);
			wait_for_room(it, i);
		}
		/* Claims rise, so once i is past a failure every later index
		 * is too: nobody will ask for them. */
		if (eachobs__closing(it) || i >= limit(it)) {
			account_run(t0, &k);
			return false;
		}
		if (it->batchsize) {
			load_and_publish(it, i);
			continue;
		}
		if (k++ == 0)
			t0 = eachobs__now_ns();
		eachobs__fill_one(it, w.slot, i);
		publish(it, w.slot);
	}
	account_run(t0, &k);
	return true;
}

void eachobs__order_worker(eachobs_iter *it, unsigned self)
{
	size_t lo, hi;

	while (claim(it, it->order.chunk, it->nunits, it->pool.nthreads, &lo,
		     &hi))
		if (!load_chunk(it, lo, hi))
			return;
	while (help_entry(it, self, SIZE_MAX))
		;
}

/* Release: a consumer that sees the new limit sees the failure record
 * (load.c) written before it. The consumer may be asleep on the failed
 * unit's slot, which will now never be published. */
void eachobs__order_fail(eachobs_iter *it, size_t idx)
{
	size_t cur = limit(it);

	while (idx < cur) {
		if (atomic_compare_exchange_weak_explicit(
			    &it->order.limit, &cur, idx, memory_order_release,
			    memory_order_relaxed)) {
			eachobs__event_notify(&slot_of(it, idx)->ev, INT_MAX);
			return;
		}
	}
}

/* The consumer's unit m is at or past the lowest failure (STOP). */
static bool failed_at(const eachobs_iter *it, size_t m)
{
	return m >= atomic_load_explicit(&it->order.limit,
					 memory_order_acquire) &&
	       eachobs__failed(it);
}

/* What wakes the consumer: its unit loaded, or a reason to return without
 * it (an interrupt, a failure at or before it). */
static bool consumer_wakes(const void *arg)
{
	const struct turn_wait *w = arg;

	return turn_or_closing(arg) || eachobs__interrupted(w->it) ||
	       failed_at(w->it, w->unit);
}

/*
 * THREADED consumer: load one more index instead of sleeping. Only indices
 * whose slot the consumer itself already let go are taken, so it never
 * waits for room.
 *
 * Not when getobs is cheap: the index the consumer waits for is then
 * almost always a few hundred nanoseconds away, or held by a worker the
 * consumer's own helping keeps off a core (P = 2 threads and the consumer
 * on 2 cores); each help also takes an index out of the workers' chunks.
 * No-op ordered ran at half BACKGROUND's rate that way. It still helps
 * one wait in 64, to notice getobs growing dear.
 *
 * A slow batch the consumer claims is only opened, and each help loads
 * one entry, so that the consumer looks at its unit and at an interrupt
 * after every getobs it runs. Until nothing it could claim is left, it
 * owes that batch its help: workers may all be waiting for room behind
 * it, so it must not sleep first.
 */
static bool help(eachobs_iter *it)
{
	size_t bound = limit(it), lo, hi;

	if (!it->order.owes && it->help_ns && it->help_ns < EACHOBS__CHEAP_NS &&
	    (++it->order.waits & 63) != 0)
		return false;
	/* next + nslots, saturated: n may be near SIZE_MAX. */
	if (bound - it->order.next > it->nslots)
		bound = it->order.next + it->nslots;
	uint64_t t0 = eachobs__now_ns();
	if (!help_entry(it, 0, SIZE_MAX)) {
		it->order.owes = false;
		if (!claim(it, 1, bound, 0, &lo, &hi))
			return false;
		if (it->batchsize && !eachobs__getobs_cheap(it)) {
			eachobs__open(it, slot_of(it, lo), lo);
			it->order.owes = true;
			return true;
		}
		load_and_publish(it, lo);
	}
	it->help_ns = eachobs__now_ns() - t0;
	return true;
}

int eachobs__order_next(eachobs_iter *it, struct eachobs__slot **out)
{
	size_t m = it->order.next;

	if (m >= it->nunits)
		return 0;
	struct turn_wait w = { it, slot_of(it, m), free_turn(it, m) + 1, m };
	for (;;) {
		if (atomic_load_explicit(&w.slot->turn, memory_order_acquire) ==
		    w.want)
			break;
		if (eachobs__take_interrupt(it))
			return -EINTR;
		if (failed_at(it, m))
			return EACHOBS__TAKE_FAILED;
		if (it->executor == EACHOBS_THREADED && help(it))
			continue;
		eachobs__event_wait_timed(&w.slot->ev, consumer_wakes, &w,
					  EACHOBS__CONSUMER_SPINS);
	}
	/* Claimed indices ahead of the consumer inside the window are loaded
	 * or being loaded; those beyond it wait for room, not for us. */
	size_t ahead = atomic_load_explicit(&it->order.next_claim,
					    memory_order_relaxed) -
		       m - 1;
	if (ahead > it->nslots - 1)
		ahead = it->nslots - 1;
	if (ahead > it->max_waiting)
		it->max_waiting = ahead;
	it->order.next = m + 1;
	*out = w.slot;
	return 1;
}

void eachobs__order_release(eachobs_iter *it, struct eachobs__slot *slot)
{
	size_t u = atomic_load_explicit(&slot->unit, memory_order_relaxed);

	/* From 2k + 1 (loaded) to 2k + 2: free for unit u + W. */
	atomic_store_explicit(&slot->turn, free_turn(it, u) + 2,
			      memory_order_release);
	eachobs__event_notify(&slot->ev, INT_MAX);
}

void eachobs__order_wake_all(eachobs_iter *it)
{
	for (size_t i = 0; i < it->nslots; i++)
		eachobs__event_notify(&it->slots[i].ev, INT_MAX);
}
