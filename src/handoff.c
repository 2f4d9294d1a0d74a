/*
 * The unordered hand-off (handoff.h): a pair of ck_rings of item pointers
 * per producer, spare empty items, credits, and the event counts
 * producers and the consumer sleep on.
 */
#define _GNU_SOURCE
#include "handoff.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#if defined(__SANITIZE_THREAD__)
#define EACHOBS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EACHOBS_TSAN 1
#endif
#endif

#ifdef EACHOBS_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/*
 * Handing an item through a ring must order everything the sender did with
 * its bytes (a loader's writes, or the consumer's reads) before everything
 * the receiver does with them. ck's enqueue only fences stores against
 * stores, which does not keep the consumer's last reads of an item ahead
 * of the publication that lets a loader overwrite it on weakly ordered
 * CPUs; these fences do (on x86 they cost nothing). ck's atomics are also
 * inline assembly that TSan cannot see, so the hand-off is annotated.
 */
static void hand_over(void *item)
{
	atomic_thread_fence(memory_order_release);
#ifdef EACHOBS_TSAN
	__tsan_release(item);
#else
	(void)item;
#endif
}

static void *take_over(void *item)
{
	atomic_thread_fence(memory_order_acquire);
#ifdef EACHOBS_TSAN
	__tsan_acquire(item);
#endif
	return item;
}

/*
 * Broken variants, for test/meson.build only: each one breaks one promise
 * of handoff.h, and the unit suite must catch it (EACHOBS__BREAK unset:
 * the real hand-off).
 *   1: credits are not counted (a producer gets what it asks for)
 *   2: a producer looks for empty items in its own lane and the spares
 *      only
 *   3: the consumer stays on a lane as long as it has items
 *   4: the consumer gives credits back only a buffer's worth at a time,
 *      and not before it sleeps
 *   5: a depth that rises again gives back no withheld credit
 *   6: the consumer keeps empty items back beyond the credits it owes
 *   7: a peek shows the item one entry further behind than asked
 *   8: empty items given back together all go to the lane, past its
 *      share (while its ring has room)
 */
#ifndef EACHOBS__BREAK
#define EACHOBS__BREAK 0
#endif

/* The smallest power of two above n (ck_ring holds size - 1 entries). */
static unsigned ring_size_for(size_t n)
{
	unsigned s = 2;

	while (s <= n)
		s <<= 1;
	return s;
}

/*
 * Producers that found no credit sleep until half the buffer is free
 * again, not until one credit is: waking a producer per returned credit
 * made producers and consumer take turns, a futex call and a context
 * switch per item. Woken together at the half mark, they refill in a
 * burst while the consumer drains without sleeping. The consumer never
 * waits on this, so the hysteresis adds no latency to what it receives.
 *
 * Only while half the buffer is at least one credit per producer: with a
 * smaller buffer, waking every sleeper at the half mark woke producers
 * that found no credit left and slept again, for every item. Then the
 * rule is one credit, one wake-up.
 */
static size_t resume_at(size_t depth, unsigned nlanes)
{
	size_t half = depth / 2;

	return half >= nlanes ? half : 1;
}

/* What the consumer gives back at once: a quarter of the depth, at most
 * EACHOBS__FLUSH_MAX, at least one. */
static size_t flush_at(size_t depth)
{
	size_t q = depth / 4;

	if (EACHOBS__BREAK == 4)
		return depth;
	return q < 1 ? 1 : q > EACHOBS__FLUSH_MAX ? EACHOBS__FLUSH_MAX : q;
}

static int init_lane(struct eachobs__lane *l, unsigned rs, unsigned fs)
{
	l->ready_buf = eachobs__calloc(rs, sizeof(*l->ready_buf));
	l->free_buf = eachobs__calloc(fs, sizeof(*l->free_buf));
	if (!l->ready_buf || !l->free_buf)
		return -ENOMEM;
	ck_ring_init(&l->ready, rs);
	ck_ring_init(&l->free, fs);
	return 0;
}

int eachobs__handoff_init(struct eachobs__handoff *h, size_t buffersize,
			  size_t nitems, unsigned nlanes,
			  const _Atomic size_t *halt, bool free_waits)
{
	/* A lane's ready ring may hold every credit (the power of two above
	 * buffersize: room to spare, so that its producer rarely looks at
	 * the consumer's head, enqueue_ready); its free ring keeps a few
	 * items, the spare ring all of them. */
	unsigned rs = ring_size_for(buffersize);
	unsigned fs = ring_size_for(EACHOBS__LANE_FREE);

	eachobs__event_init(&h->ev_ready);
	eachobs__event_init(&h->ev_room);
	eachobs__event_init(&h->ev_free);
	h->halt = halt;
	h->free_waits = free_waits;
	h->buffersize = buffersize;
	atomic_init(&h->depth, buffersize);
	atomic_init(&h->resume_at, resume_at(buffersize, nlanes));
	atomic_init(&h->withheld, 0);
	h->flush_at = flush_at(buffersize);
	h->spins = eachobs__consumer_spins();
	h->nstash = 0;
	h->naps = (struct eachobs__naps){ 0 };
	atomic_init(&h->napping, false);
	atomic_init(&h->credits, buffersize);
	h->spare_buf = eachobs__calloc(ring_size_for(nitems),
				       sizeof(*h->spare_buf));
	h->lanes = eachobs__alloc_aligned(nlanes * sizeof(*h->lanes));
	if (!h->spare_buf || !h->lanes)
		return -ENOMEM;
	ck_ring_init(&h->spare, ring_size_for(nitems));
	memset(h->lanes, 0, nlanes * sizeof(*h->lanes));
	h->nlanes = nlanes;
	for (unsigned j = 0; j < nlanes; j++)
		if (init_lane(&h->lanes[j], rs, fs) < 0)
			return -ENOMEM;
	return 0;
}

void eachobs__handoff_fini(struct eachobs__handoff *h)
{
	for (unsigned j = 0; h->lanes && j < h->nlanes; j++) {
		eachobs__free(h->lanes[j].ready_buf);
		eachobs__free(h->lanes[j].free_buf);
	}
	eachobs__free(h->lanes);
	eachobs__free(h->spare_buf);
	h->lanes = NULL;
	h->spare_buf = NULL;
	h->nlanes = 0;
}

bool eachobs__handoff_halted(const struct eachobs__handoff *h)
{
	return atomic_load_explicit(h->halt, memory_order_acquire) == 0;
}

void eachobs__handoff_wake(struct eachobs__handoff *h)
{
	eachobs__event_notify_single(&h->ev_ready, NULL, NULL);
	eachobs__event_notify(&h->ev_room, INT_MAX);
	eachobs__event_notify(&h->ev_free, INT_MAX);
}

/* ---- empty items ------------------------------------------------------ */

/*
 * Up to k entries of a ring several threads take from, with one
 * compare-and-swap: what ck_ring_dequeue_spmc does for one entry (the
 * same loads, fences and head), for a run. A producer taking its run's
 * items one at a time paid a locked instruction and a look at the
 * consumer's tail per item, the dearest part of its hand-off.
 */
static unsigned dequeue_free_run(ck_ring_t *r, ck_ring_buffer_t *buf,
				 void **out, unsigned k)
{
	unsigned c = ck_pr_load_uint(&r->c_head), n;

	do {
		ck_pr_fence_load();
		n = ck_pr_load_uint(&r->p_tail) - c;
		if (n == 0)
			return 0;
		if (n > k)
			n = k;
		ck_pr_fence_load();
		for (unsigned i = 0; i < n; i++)
			out[i] = buf[(c + i) & r->mask].value;
		ck_pr_fence_store_atomic();
	} while (!ck_pr_cas_uint_value(&r->c_head, c, c + n, &c));
	for (unsigned i = 0; i < n; i++)
		take_over(out[i]);
	return n;
}

/* Its own lane first: nobody else takes from there unless it ran dry, so
 * its line stays with the producer. */
static size_t try_get_free_run(struct eachobs__handoff *h, unsigned lane,
			       void **out, size_t k)
{
	unsigned want = k < UINT_MAX ? (unsigned)k : UINT_MAX;
	unsigned got = dequeue_free_run(&h->lanes[lane].free,
					h->lanes[lane].free_buf, out, want);

	if (got < want)
		got += dequeue_free_run(&h->spare, h->spare_buf, out + got,
					want - got);
	for (unsigned j = 1; EACHOBS__BREAK != 2 && got < want && j < h->nlanes;
	     j++) {
		struct eachobs__lane *l = &h->lanes[(lane + j) % h->nlanes];
		got += dequeue_free_run(&l->free, l->free_buf, out + got,
					want - got);
	}
	return got;
}

void *eachobs__handoff_try_get_free(struct eachobs__handoff *h, unsigned lane)
{
	void *item;

	return try_get_free_run(h, lane, &item, 1) ? item : NULL;
}

void *eachobs__handoff_consumer_get_free(struct eachobs__handoff *h,
					 unsigned lane)
{
	if (h->nstash > 0)
		return h->stash[--h->nstash];
	return eachobs__handoff_try_get_free(h, lane);
}

static bool any_free_or_halted(const void *arg)
{
	const struct eachobs__handoff *h = arg;

	if (ck_ring_size(&h->spare) > 0 || eachobs__handoff_halted(h))
		return true;
	for (unsigned j = 0; j < h->nlanes; j++)
		if (ck_ring_size(&h->lanes[j].free) > 0)
			return true;
	return false;
}

/* Without free_waits, not expected to wait (the caller's credits
 * guarantee an empty item): the wait is a safety net, in 1 ms slices so
 * that put_free need not fence (event.c). With free_waits, a wait that
 * put_free's notify never misses. */
static void wait_free(struct eachobs__handoff *h)
{
	if (h->free_waits)
		eachobs__event_wait_timed(&h->ev_free, any_free_or_halted, h,
					  eachobs__loader_spins());
	else
		eachobs__event_wait_sliced(&h->ev_free, any_free_or_halted, h,
					   eachobs__loader_spins(), 1000000);
}

void *eachobs__handoff_get_free(struct eachobs__handoff *h, unsigned lane)
{
	void *item;

	return eachobs__handoff_get_free_run(h, lane, &item, 1) ? item : NULL;
}

size_t eachobs__handoff_get_free_run(struct eachobs__handoff *h,
				     unsigned lane, void **out, size_t k)
{
	size_t got = 0;

	while (got < k) {
		size_t n = try_get_free_run(h, lane, out + got, k - got);
		got += n;
		if (got == k || eachobs__handoff_halted(h))
			break;
		if (n == 0)
			wait_free(h);
	}
	return got;
}

/* A ring's one producer, with room for them: items[0..k) at its tail t,
 * then, fenced after the entries, the tail past them; how every enqueue
 * here ends, as ck_ring's do. */
static void put_run(ck_ring_t *r, ck_ring_buffer_t *buf, unsigned t,
		    void *const *items, unsigned k)
{
	for (unsigned i = 0; i < k; i++)
		buf[(t + i) & r->mask].value = items[i];
	ck_pr_fence_store();
	ck_pr_store_uint(&r->p_tail, t + k);
}

/*
 * Up to k items onto a ring only the consumer puts on, while it holds
 * fewer than `keep` entries: what ck_ring_enqueue_spmc does for one entry
 * (the same loads and stores), for a run, so that the head others move is
 * read once per run, not per item. The number put; with none, the tail's
 * line, which the takers read, is not written.
 */
static unsigned enqueue_free_run(ck_ring_t *r, ck_ring_buffer_t *buf,
				 void *const *items, unsigned k,
				 unsigned keep)
{
	unsigned t = r->p_tail;
	unsigned held = t - ck_pr_load_uint(&r->c_head);
	unsigned n = held >= keep ? 0 : keep - held;

	/* The takers read the entries below their head before they moved it
	 * (dequeue_free_run); those are rewritten after. */
	atomic_thread_fence(memory_order_acquire);
	if (n > k)
		n = k;
	if (n == 0)
		return 0;
	put_run(r, buf, t, items, n);
	return n;
}

/* Empty items back to the lane the consumer last took from, up to what it
 * keeps for its producer, the rest to the spares. Cannot fail: the spare
 * ring holds more entries than there are items. */
static void put_back(struct eachobs__handoff *h, void *const *items,
		     unsigned k)
{
	struct eachobs__lane *l = &h->lanes[h->back];
	unsigned n = enqueue_free_run(&l->free, l->free_buf, items, k,
				      EACHOBS__BREAK == 8 ? l->free.mask
							  : EACHOBS__LANE_FREE);

	if (n < k)
		enqueue_free_run(&h->spare, h->spare_buf, items + n, k - n,
				 h->spare.mask);
}

/* The fence of a notify that is never missed, per item, was the dearest
 * part of giving one back; it is paid only where producers may wait
 * (batches, whose cost it shares). */
static void notify_free(struct eachobs__handoff *h, int k)
{
	if (h->free_waits)
		eachobs__event_notify(&h->ev_free, k);
	else
		eachobs__event_notify_lazy(&h->ev_free, k);
}

/* Kept items go back together: one item at a time, every put pulled the
 * lane's line from the producer taking from it and back, a cache miss on
 * both sides per item. */
static void flush_stash(struct eachobs__handoff *h)
{
	unsigned n = h->nstash;

	if (n == 0)
		return;
	for (unsigned i = 0; i < n; i++)
		hand_over(h->stash[i]);
	put_back(h, h->stash, n);
	h->nstash = 0;
	notify_free(h, (int)n);
}

/* Out of line: put_free's common case, keeping the item, then saves no
 * registers. */
static __attribute__((noinline)) void put_now(struct eachobs__handoff *h,
					      void *item)
{
	flush_stash(h);
	hand_over(item);
	put_back(h, &item, 1);
	notify_free(h, 1);
}

void eachobs__handoff_put_free(struct eachobs__handoff *h, void *item)
{
	/* Only as many as the credits owed: a producer's credit then always
	 * finds an item outside the stash (handoff.h). */
	if ((h->nstash < h->owed || EACHOBS__BREAK == 6) &&
	    h->nstash < EACHOBS__FLUSH_MAX) {
		h->stash[h->nstash++] = item;
		return;
	}
	put_now(h, item);
}

/* ---- credits ------------------------------------------------------- */

size_t eachobs__handoff_try_take_credits(struct eachobs__handoff *h,
					 size_t want)
{
	size_t c = atomic_load_explicit(&h->credits, memory_order_relaxed);

	if (EACHOBS__BREAK == 1)
		return want;
	while (c > 0) {
		size_t k = c < want ? c : want;
		if (atomic_compare_exchange_weak_explicit(
			    &h->credits, &c, c - k, memory_order_acquire,
			    memory_order_relaxed))
			return k;
	}
	return 0;
}

static size_t resume_now(const struct eachobs__handoff *h)
{
	return atomic_load_explicit(&h->resume_at, memory_order_relaxed);
}

static bool room_or_halted(const void *arg)
{
	const struct eachobs__handoff *h = arg;

	return atomic_load_explicit(&h->credits, memory_order_relaxed) >=
		       resume_now(h) ||
	       eachobs__handoff_halted(h);
}

/* A producer out of credits first waits a few microseconds for any
 * credit (the room budget, base.h; the consumer gives them back in
 * groups), then sleeps until half the buffer is free. */
size_t eachobs__handoff_take_credits(struct eachobs__handoff *h, size_t want)
{
	unsigned spins = eachobs__room_spins();

	for (unsigned i = 0;; i++) {
		size_t k = eachobs__handoff_try_take_credits(h, want);
		if (k)
			return k;
		if (eachobs__handoff_halted(h))
			return 0;
		if (i < spins)
			eachobs__cpu_relax();
		else
			eachobs__event_wait_room(&h->ev_room, room_or_halted,
						 h, 0);
	}
}

/*
 * With hysteresis, a return that crosses the half mark wakes one
 * sleeper, and each further step of (buffersize - half) / producers one
 * more: waking them all at once (a herd) sent every producer to refill a
 * buffer that one of them could keep full, and all of them back to sleep
 * together, a context switch each per half buffer. A producer that
 * cannot keep up lets the credits climb to the next step, which wakes
 * the next. Without hysteresis, each returned credit wakes one sleeper.
 */
static size_t steps_crossed(const struct eachobs__handoff *h, size_t resume,
			    size_t before, size_t after)
{
	size_t depth = atomic_load_explicit(&h->depth, memory_order_relaxed);
	size_t step = depth > resume ? (depth - resume) / h->nlanes : 0;

	if (step == 0)
		step = 1;
	if (after < resume)
		return 0;
	size_t hi = (after - resume) / step + 1;
	size_t lo = before < resume ? 0 : (before - resume) / step + 1;
	return hi - lo;
}

void eachobs__handoff_give_credits(struct eachobs__handoff *h, size_t k)
{
	size_t before = atomic_fetch_add_explicit(&h->credits, k,
						  memory_order_release);
	size_t resume = resume_now(h);
	size_t wake = resume == 1 ? k
				  : steps_crossed(h, resume, before, before + k);

	if (wake)
		eachobs__event_notify(&h->ev_room,
				      (int)(wake < INT_MAX ? wake : INT_MAX));
}

/* ---- ready items ---------------------------------------------------- */

static bool any_ready(const struct eachobs__handoff *h)
{
	for (unsigned j = 0; j < h->nlanes; j++)
		if (ck_ring_size(&h->lanes[j].ready) > 0)
			return true;
	return false;
}

static bool ready_or_halted(const void *arg)
{
	const struct eachobs__handoff *h = arg;

	return any_ready(h) || eachobs__handoff_halted(h);
}

/* What a producer that put an item wakes the consumer for: the item,
 * unless the consumer naps for a run of them. */
static bool put_wakes(const void *arg)
{
	const struct eachobs__handoff *h = arg;

	return eachobs__handoff_halted(h) ||
	       (!atomic_load_explicit(&h->napping, memory_order_relaxed) &&
		any_ready(h));
}

/*
 * The lane's producer: items[0..k) into its ready ring, with one store of
 * the tail; what ck_ring_enqueue_spsc does for one entry (the same check,
 * entry stores, fence and tail), for a run, and with the consumer's head
 * as last seen (l->head_seen): read again only when that leaves no room.
 * A look at the head per item took its line from the consumer each time.
 * Never full: credits keep a lane's items at most buffersize, below the
 * ring's capacity; the room beyond them (buffersize for a power of two)
 * is what spares the look.
 */
static void enqueue_ready(struct eachobs__lane *l, void *const *items,
			  size_t k)
{
	ck_ring_t *r = &l->ready;
	unsigned t = r->p_tail;

	if (t + (unsigned)k - l->head_seen > r->mask) {
		l->head_seen = ck_pr_load_uint(&r->c_head);
		/* The consumer read the entries below its head before it
		 * stored it (dequeue_ready); they are rewritten after. */
		atomic_thread_fence(memory_order_acquire);
		assert(t + (unsigned)k - l->head_seen <= r->mask);
	}
	put_run(r, l->ready_buf, t, items, (unsigned)k);
}

/*
 * The consumer: the oldest entry of lane l's ready ring, if any; what
 * ck_ring_dequeue_spsc does, with the producer's tail as last seen
 * (l->tail_seen), read again only once the entries below it are taken.
 */
static bool dequeue_ready(struct eachobs__lane *l, void **item)
{
	ck_ring_t *r = &l->ready;
	unsigned c = r->c_head;

	if (c == l->tail_seen) {
		l->tail_seen = ck_pr_load_uint(&r->p_tail);
		if (c == l->tail_seen)
			return false;
		ck_pr_fence_load();
	}
	*item = l->ready_buf[c & r->mask].value;
	/* The entry is read before the head says it may be rewritten. */
	atomic_thread_fence(memory_order_release);
	ck_pr_store_uint(&r->c_head, c + 1);
	return true;
}

/* One producer per lane: no lock, no spinning on another producer. */
void eachobs__handoff_publish(struct eachobs__handoff *h, unsigned lane,
			      void *const *items, size_t k)
{
	if (k == 0)
		return;
	for (size_t i = 0; i < k; i++)
		hand_over(items[i]);
	enqueue_ready(&h->lanes[lane], items, k);
	eachobs__event_notify_single(&h->ev_ready, put_wakes, h);
}

bool eachobs__handoff_put_ready(struct eachobs__handoff *h, unsigned lane,
				void *item)
{
	if (!eachobs__handoff_take_credits(h, 1))
		return false;
	eachobs__handoff_publish(h, lane, &item, 1);
	return true;
}

/* ---- the depth ------------------------------------------------------ */

/* Withheld credits beyond buffersize - d go back into use; what was
 * withheld, lowered by someone else meanwhile, is left to them. */
static void release_withheld(struct eachobs__handoff *h, size_t d)
{
	size_t keep = h->buffersize - d;
	size_t w = atomic_load(&h->withheld);

	if (EACHOBS__BREAK == 5)
		return;
	while (w > keep)
		if (atomic_compare_exchange_weak(&h->withheld, &w, keep)) {
			eachobs__handoff_give_credits(h, w - keep);
			return;
		}
}

/* Withhold up to k more credits, never past keep (a CAS: the consumer
 * and the thread setting the depth both withhold); the count withheld. */
static size_t withhold_up_to(struct eachobs__handoff *h, size_t keep,
			     size_t k)
{
	size_t w = atomic_load(&h->withheld);

	for (;;) {
		if (w >= keep || k == 0)
			return 0;
		size_t add = keep - w < k ? keep - w : k;
		if (atomic_compare_exchange_weak(&h->withheld, &w, w + add))
			return add;
	}
}

void eachobs__handoff_set_depth(struct eachobs__handoff *h, size_t d)
{
	size_t w, keep;

	d = d < 1 ? 1 : d > h->buffersize ? h->buffersize : d;
	atomic_store(&h->depth, d);
	atomic_store(&h->resume_at, resume_at(d, h->nlanes));
	release_withheld(h, d);
	/* Lower: take out of use what is free now; the consumer withholds
	 * the rest as it gives credits back. */
	keep = h->buffersize - d;
	w = atomic_load(&h->withheld);
	if (w < keep) {
		size_t k = eachobs__handoff_try_take_credits(h, keep - w);
		size_t kept = withhold_up_to(h, keep, k);
		if (k > kept)
			eachobs__handoff_give_credits(h, k - kept);
	}
	/* What producers sleep for changed. */
	eachobs__event_notify(&h->ev_room, INT_MAX);
}

/* Consumer: give back what it owes, less what a lowered depth withholds
 * (and more, when the depth rose). Reads the depth once per group. */
static void settle(struct eachobs__handoff *h)
{
	size_t d, give = h->owed;

	flush_stash(h);
	d = atomic_load(&h->depth);
	h->flush_at = flush_at(d);
	give -= withhold_up_to(h, h->buffersize - d, give);
	if (give)
		eachobs__handoff_give_credits(h, give);
	h->owed = 0;
	/* What is withheld past the depth goes back: withheld by a race, or
	 * by this very call when a depth raised since d was read found
	 * nothing to give back (set_depth stores the depth before it reads
	 * what is withheld, this withheld before it reads the depth again,
	 * so one of the two sees the other), and a consumer about to sleep
	 * must not keep it. */
	release_withheld(h, atomic_load(&h->depth));
}

/* What waits in every lane, now and then (stats only: the sum reads
 * every lane's line). */
static void sample_waiting(struct eachobs__handoff *h)
{
	size_t waiting = 1; /* the item just taken */

	for (unsigned j = 0; j < h->nlanes; j++)
		waiting += ck_ring_size(&h->lanes[j].ready);
	if (waiting > h->max_waiting)
		h->max_waiting = waiting;
}

/* The lane it is on while it has items (a producer's run comes out
 * together), but no more than EACHOBS__LANE_STREAK in a row while
 * another lane has some, so that a fast producer cannot keep the others'
 * items waiting; then the next lane that has any. */
static void next_lane(struct eachobs__handoff *h)
{
	h->cursor = h->cursor + 1 < h->nlanes ? h->cursor + 1 : 0;
	h->streak = 0;
}

void *eachobs__handoff_get_ready(struct eachobs__handoff *h)
{
	void *item;

	if (h->streak >= EACHOBS__LANE_STREAK && EACHOBS__BREAK != 3)
		next_lane(h);
	for (unsigned k = 0; k < h->nlanes; k++) {
		struct eachobs__lane *l = &h->lanes[h->cursor];
		if (dequeue_ready(l, &item)) {
			take_over(item);
			h->back = h->cursor;
			h->streak++;
			if ((h->taken++ & 15) == 0)
				sample_waiting(h);
			if (++h->owed >= h->flush_at)
				settle(h);
			return item;
		}
		next_lane(h);
	}
	return NULL;
}

/* Entries below the tail it last saw are published (dequeue_ready's
 * fence followed that look), so they may be read; the tail is not read
 * again, a peek takes no line from the producer. */
void *eachobs__handoff_peek_ready(const struct eachobs__handoff *h,
				  unsigned k)
{
	const struct eachobs__lane *l = &h->lanes[h->cursor];
	unsigned c = l->ready.c_head;

	if (EACHOBS__BREAK == 7)
		k++;
	if (l->tail_seen - c < k)
		return NULL;
	return l->ready_buf[(c + k - 1) & l->ready.mask].value;
}

struct wake_test {
	struct eachobs__handoff *h;
	eachobs__cond_fn also;
	const void *arg;
};

static bool consumer_wakes(const void *arg)
{
	const struct wake_test *w = arg;

	return ready_or_halted(w->h) || (w->also && w->also(w->arg));
}

void eachobs__handoff_allow_naps(struct eachobs__handoff *h, bool on)
{
	h->naps.allowed = on;
}

uint64_t eachobs__handoff_nap_ns(uint64_t gap_ns, size_t depth)
{
	uint64_t run = EACHOBS__NAP_RUN, ns;

	/* A run that would hold up more than a quarter of the credits
	 * would keep producers waiting for room. */
	if (run > depth / 4)
		run = depth / 4;
	if (run < 2 || gap_ns < EACHOBS__NAP_GAP_MIN ||
	    gap_ns > EACHOBS__NAP_GAP_MAX)
		return 0;
	ns = run * gap_ns;
	return ns < EACHOBS__NAP_MAX_NS ? ns : EACHOBS__NAP_MAX_NS;
}

/* The time between items since the last wait, smoothed; a wait that
 * follows no item (a nap that found none, items that slowed down)
 * counts at once, so that naps stop as soon as items do not come. */
static uint64_t gap_since_last_wait(struct eachobs__handoff *h)
{
	struct eachobs__naps *z = &h->naps;
	uint64_t now = eachobs__now_ns(), dt = now - z->waited_at;
	size_t n = h->taken - z->taken_at;

	if (z->waited_at == 0)
		z->gap_ns = 0;
	else if (n == 0)
		z->gap_ns = dt;
	else
		z->gap_ns = (3 * z->gap_ns + dt / n) / 4;
	z->waited_at = now;
	z->taken_at = h->taken;
	return z->gap_ns;
}

static bool also_or_halted(const void *arg)
{
	const struct wake_test *w = arg;

	return eachobs__handoff_halted(w->h) || (w->also && w->also(w->arg));
}

/*
 * Items that come a few microseconds apart from many slow producers
 * (P = 16 sleeping 100 us) woke the consumer for nearly every one: a
 * futex wake on the producer's side, a sleep and a wake-up on the
 * consumer's, about 0.3 of a core more than the producers alone used.
 * Napping for a run of them, no spin first, it wakes once per run; the
 * run waits at most its nap, and a buffer of depth holds four runs.
 */
static bool nap(struct eachobs__handoff *h, struct wake_test *w)
{
	uint64_t ns;

	if (!h->naps.allowed)
		return false;
	ns = eachobs__handoff_nap_ns(gap_since_last_wait(h),
				     atomic_load_explicit(&h->depth,
							  memory_order_relaxed));
	if (ns == 0)
		return false;
	atomic_store_explicit(&h->napping, true, memory_order_relaxed);
	eachobs__event_nap_single(&h->ev_ready, also_or_halted, w, ns);
	atomic_store_explicit(&h->napping, false, memory_order_relaxed);
	h->naps.count++;
	return true;
}

void eachobs__handoff_wait_ready(struct eachobs__handoff *h,
				 eachobs__cond_fn also, const void *arg)
{
	struct wake_test w = { h, also, arg };

	/* What it owes may be what the producers wait for; and with nothing
	 * ready, every producer that sleeps should be loading. */
	if (EACHOBS__BREAK != 4)
		settle(h);
	if (atomic_load_explicit(&h->credits, memory_order_relaxed) >=
	    resume_now(h))
		eachobs__event_notify(&h->ev_room, INT_MAX);
	if (nap(h, &w))
		return;
	/* Spins that keep ending in sleep only cost a core (items that come
	 * every few microseconds from many slow loaders): each wait whose
	 * spins were spent halves the next one's, each that they served
	 * doubles it, between the loaders' budget and the consumer's
	 * (base.h). */
	unsigned least = eachobs__loader_spins();
	unsigned most = eachobs__consumer_spins();

	if (eachobs__event_wait_single(&h->ev_ready, consumer_wakes, &w,
				       h->spins))
		h->spins = h->spins / 2 > least ? h->spins / 2 : least;
	else
		h->spins = h->spins * 2 < most ? h->spins * 2 : most;
}
