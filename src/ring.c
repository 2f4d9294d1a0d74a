/*
 * The unordered hand-off: slots travel between loaders and the consumer
 * through two concurrencykit rings of slot pointers.
 *
 *   free:  empty slots. The consumer is its only producer (it gives back
 *          the slot it held); workers, and the consumer when it helps, take
 *          from it.
 *   ready: loaded slots. Workers produce (one at a time, under a mutex:
 *          see eachobs__ring_put_ready), the consumer alone consumes.
 *
 * Every slot exists from the start, so nothing is allocated per
 * observation, and a slot's bytes are written once by its loader and read in
 * place by the consumer.
 *
 * Why a loader always finds a free slot: there are buffersize + workers + 1
 * slots; credits keep at most buffersize in `ready`, each other worker holds
 * at most one, and the consumer holds at most one. The ev_free wait is there
 * for safety, not because it is expected to sleep.
 *
 * ck_ring never blocks, so waiting is done with event counts: the consumer
 * sleeps on ev_ready when `ready` is empty and is woken by the first slot
 * that arrives; loaders sleep on ev_room when no credit is left and are
 * woken together once half the buffer is free (see resume_at).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>

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
 * Handing a slot through a ring must order everything the sender did with
 * the slot's bytes (a loader's writes, or the consumer's reads) before
 * everything the receiver does with them. ck's enqueue only fences stores
 * against stores, which does not keep the consumer's last reads of a slot
 * ahead of the publication that lets a loader overwrite it on weakly
 * ordered CPUs; these fences do (on x86 they cost nothing). ck's atomics are
 * also inline assembly that TSan cannot see, so the hand-off is annotated.
 */
static void handoff_send(struct eachobs__slot *slot)
{
	atomic_thread_fence(memory_order_release);
#ifdef EACHOBS_TSAN
	__tsan_release(slot);
#else
	(void)slot;
#endif
}

static void handoff_recv(struct eachobs__slot *slot)
{
	atomic_thread_fence(memory_order_acquire);
#ifdef EACHOBS_TSAN
	__tsan_acquire(slot);
#else
	(void)slot;
#endif
}



/* The smallest power of two above n (ck_ring holds size - 1 entries). */
static unsigned ring_size_for(size_t n)
{
	unsigned s = 2;

	while (s <= n)
		s <<= 1;
	return s;
}

int eachobs__ring_init(eachobs_iter *it)
{
	struct eachobs__ring *r = &it->ring;
	unsigned rs = ring_size_for(it->buffersize);
	unsigned fs = ring_size_for(it->nslots);

	r->ready_buf = eachobs__calloc(rs, sizeof(*r->ready_buf));
	r->free_buf = eachobs__calloc(fs, sizeof(*r->free_buf));
	if (!r->ready_buf || !r->free_buf)
		return eachobs__fail(-ENOMEM,
				     "out of memory for the hand-off rings of "
				     "%u and %u entries",
				     rs, fs);
	ck_ring_init(&r->ready, rs);
	pthread_mutex_init(&r->producer_lock, NULL);
	r->lock_ready = true;
	ck_ring_init(&r->free, fs);
	for (size_t i = 0; i < it->nslots; i++)
		ck_ring_enqueue_spmc(&r->free, r->free_buf, &it->slots[i]);
	atomic_init(&r->credits, it->buffersize);
	return 0;
}

void eachobs__ring_fini(eachobs_iter *it)
{
	if (it->ring.lock_ready)
		pthread_mutex_destroy(&it->ring.producer_lock);
	eachobs__free(it->ring.ready_buf);
	eachobs__free(it->ring.free_buf);
}

struct eachobs__slot *eachobs__ring_try_get_free(eachobs_iter *it)
{
	struct eachobs__slot *slot;

	if (!ck_ring_dequeue_spmc(&it->ring.free, it->ring.free_buf, &slot))
		return NULL;
	handoff_recv(slot);
	return slot;
}

static bool free_or_closing(const void *arg)
{
	eachobs_iter *it = (eachobs_iter *)arg;

	return ck_ring_size(&it->ring.free) > 0 || eachobs__closing(it);
}

struct eachobs__slot *eachobs__ring_get_free(eachobs_iter *it)
{
	for (;;) {
		struct eachobs__slot *slot = eachobs__ring_try_get_free(it);
		if (slot || eachobs__closing(it))
			return slot;
		eachobs__event_wait_timed(&it->ring.ev_free, free_or_closing,
					  it, EACHOBS__LOADER_SPINS);
	}
}

void eachobs__ring_put_free(eachobs_iter *it, struct eachobs__slot *slot)
{
	handoff_send(slot);
	/* Cannot fail: the ring holds more entries than there are slots. */
	ck_ring_enqueue_spmc(&it->ring.free, it->ring.free_buf, slot);
	eachobs__event_notify(&it->ring.ev_free, 1);
}

static bool take_credit(struct eachobs__ring *r)
{
	size_t c = atomic_load_explicit(&r->credits, memory_order_relaxed);

	while (c > 0) {
		if (atomic_compare_exchange_weak_explicit(
			    &r->credits, &c, c - 1, memory_order_acquire,
			    memory_order_relaxed))
			return true;
	}
	return false;
}

/*
 * Loaders that found no credit sleep until half the buffer is free again,
 * not until one credit is: waking a loader per returned credit made
 * loaders and consumer take turns, a futex call and a context switch per
 * observation (no-op getobs, P = 2: 1.5 futex calls per item, 0.3 M
 * items/s). Woken together at the half mark, they refill in a burst while
 * the consumer drains without sleeping. The consumer never waits on this,
 * so the hysteresis adds no latency to what it receives.
 *
 * Only while half the buffer is at least one credit per worker: with a
 * smaller buffer, waking every sleeper at the half mark woke loaders that
 * found no credit left and slept again, for every item (buffersize 4,
 * 16 threads: 5-6 context switches per item against 2). Then the rule is
 * one credit, one wake-up.
 */
static size_t resume_at(const eachobs_iter *it)
{
	size_t half = it->buffersize / 2;

	return half >= it->pool.nthreads ? half : 1;
}

/* Return k credits and wake loaders as resume_at says. With hysteresis,
 * only a return that crosses the half mark wakes (everybody); without,
 * each returned credit wakes one sleeper. */
static void give_credits(eachobs_iter *it, size_t k)
{
	size_t before = atomic_fetch_add_explicit(&it->ring.credits, k,
						  memory_order_release);
	size_t resume = resume_at(it);

	if (resume == 1)
		eachobs__event_notify(&it->ring.ev_room, (int)(k < INT_MAX ? k : INT_MAX));
	else if (before < resume && before + k >= resume)
		eachobs__event_notify(&it->ring.ev_room, INT_MAX);
}

static bool room_or_closing(const void *arg)
{
	const eachobs_iter *it = arg;

	return atomic_load_explicit(&it->ring.credits, memory_order_relaxed) >=
		       resume_at(it) ||
	       eachobs__closing(it);
}

static bool ready_or_closing(const void *arg)
{
	eachobs_iter *it = (eachobs_iter *)arg;

	return ck_ring_size(&it->ring.ready) > 0 || eachobs__closing(it);
}

/* What wakes the consumer: a loaded slot, or a reason to return without
 * one (a failure whose unit will not arrive, an interrupt). Loaders notify
 * with ready_or_closing, the part that concerns them. */
static bool consumer_wakes(const void *arg)
{
	const eachobs_iter *it = arg;

	return ready_or_closing(arg) || eachobs__failed(it) ||
	       eachobs__interrupted(it);
}

/* Consumer, with `ready` empty: sleep until a loaded slot arrives. */
void eachobs__ring_wait_ready(eachobs_iter *it)
{
	uint64_t t0 = eachobs__now_ns();

	eachobs__event_wait_single(&it->ring.ev_ready, consumer_wakes, it,
				   EACHOBS__CONSUMER_SPINS);
	eachobs__stat_add(&it->cstats.idle_ns, eachobs__now_ns() - t0);
}

void eachobs__ring_wake_consumer(eachobs_iter *it)
{
	eachobs__event_notify_single(&it->ring.ev_ready, NULL, NULL);
}

bool eachobs__ring_put_ready(eachobs_iter *it, struct eachobs__slot *slot)
{
	struct eachobs__ring *r = &it->ring;

	while (!take_credit(r)) {
		if (eachobs__closing(it))
			return false;
		eachobs__event_wait_timed(&r->ev_room, room_or_closing, it,
					  EACHOBS__LOADER_SPINS);
	}
	handoff_send(slot);
	/* ck's multi-producer enqueue makes each producer spin until every
	 * earlier one has committed; with more threads than cores, a producer
	 * preempted in that window left the others spinning for whole time
	 * slices (63% of all CPU in a 64-thread stress run). A mutex makes
	 * them sleep instead, and the ring is single-producer underneath. */
	pthread_mutex_lock(&r->producer_lock);
	/* Cannot fail: credits keep the ring below its capacity. */
	ck_ring_enqueue_spsc(&r->ready, r->ready_buf, slot);
	pthread_mutex_unlock(&r->producer_lock);
	eachobs__event_notify_single(&r->ev_ready, ready_or_closing, it);
	return true;
}

struct eachobs__slot *eachobs__ring_get_ready(eachobs_iter *it)
{
	struct eachobs__ring *r = &it->ring;
	struct eachobs__slot *slot;

	if (!ck_ring_dequeue_spsc(&r->ready, r->ready_buf, &slot))
		return NULL;
	handoff_recv(slot);
	/* What waited, counting the slot just taken (stats only). */
	size_t waiting = ck_ring_size(&r->ready) + 1;
	if (waiting > it->max_waiting)
		it->max_waiting = waiting;
	give_credits(it, 1);
	return slot;
}

void eachobs__ring_wake_all(eachobs_iter *it)
{
	eachobs__event_notify_single(&it->ring.ev_ready, NULL, NULL);
	eachobs__event_notify(&it->ring.ev_room, INT_MAX);
	eachobs__event_notify(&it->ring.ev_free, INT_MAX);
}

/* Up to want credits if there are any, without waiting. */
static size_t try_take_credits(eachobs_iter *it, size_t want)
{
	size_t c = atomic_load_explicit(&it->ring.credits, memory_order_relaxed);

	while (c > 0) {
		size_t k = c < want ? c : want;
		if (atomic_compare_exchange_weak_explicit(
			    &it->ring.credits, &c, c - k, memory_order_acquire,
			    memory_order_relaxed))
			return k;
	}
	return 0;
}

/* Take between 1 and want credits, sleeping while there are none; 0 once
 * close has begun. */
static size_t take_credits(eachobs_iter *it, size_t want)
{
	for (;;) {
		size_t k = try_take_credits(it, want);
		if (k)
			return k;
		if (eachobs__closing(it))
			return 0;
		eachobs__event_wait_timed(&it->ring.ev_room, room_or_closing,
					  it, EACHOBS__LOADER_SPINS);
	}
}

/* Enqueue a run of loaded slots, whose credits the caller holds, with one
 * lock and one wake-up. */
static void publish_run(eachobs_iter *it, struct eachobs__slot **run,
			size_t k)
{
	struct eachobs__ring *r = &it->ring;

	for (size_t i = 0; i < k; i++)
		handoff_send(run[i]);
	pthread_mutex_lock(&r->producer_lock);
	for (size_t i = 0; i < k; i++)
		ck_ring_enqueue_spsc(&r->ready, r->ready_buf, run[i]);
	pthread_mutex_unlock(&r->producer_lock);
	if (k)
		eachobs__event_notify_single(&r->ev_ready, ready_or_closing, it);
}

/* Worker self: claim up to max units from the deques (deque.h), with
 * what the claim cost counted in this worker's stats. */
static size_t claim(eachobs_iter *it, unsigned self, size_t max, size_t *first)
{
	struct eachobs__claim_cost cost;
	size_t got = eachobs__deques_claim(&it->deques, self, max, first,
					   &cost);
	struct eachobs__stats *st = eachobs__tls_stats;

	if (st && cost.stole)
		eachobs__stat_add(&st->steals, 1);
	if (st && cost.wait_ns)
		eachobs__stat_add(&st->idle_ns, cost.wait_ns);
	return got;
}

/* Load indices [first, first + k) into free slots run[0..), whose credits
 * the caller holds; stop early on close or a failure (STOP). The number
 * loaded; *per_item_ns what each took, when any was. */
static size_t load_run(eachobs_iter *it, struct eachobs__slot **run,
		       size_t first, size_t k, uint64_t *per_item_ns)
{
	uint64_t t0 = eachobs__now_ns();
	size_t n = 0;

	for (; n < k; n++) {
		/* Checked right before getobs: once close has begun, no new
		 * getobs starts. */
		if (eachobs__closing(it) ||
		    atomic_load_explicit(&it->stop, memory_order_relaxed))
			break;
		/* The credits cover these slots: the wait is for safety. */
		run[n] = eachobs__ring_get_free(it);
		if (!run[n])
			break;
		eachobs__fill_one(it, run[n], first + n);
	}
	if (n) {
		uint64_t t1 = eachobs__now_ns();
		*per_item_ns = (t1 - t0) / n;
		eachobs__account(t0, t1, n);
	}
	return n;
}

/*
 * Unbatched: move observations in runs when getobs is cheap. Per item,
 * the hand-off costs a deque lock, a producer lock and, when the consumer
 * sleeps, a futex wake: with a no-op getobs that was nearly all the time
 * (0.3-1.5 M items/s at P = 2). A worker that measured its last getobs
 * calls at under EACHOBS__CHEAP_NS each claims up to EACHOBS__RUN_MAX consecutive
 * indices at once, loads them and publishes them together. Slow getobs
 * calls stay one at a time, so that what is not started stays stealable.
 *
 * Credits come first: a worker reserves room in the buffer for the whole
 * run before it claims or loads, so every slot a worker holds is counted
 * against buffersize, and the free ring always has one for it.
 */

static void run_unbatched(eachobs_iter *it, unsigned self)
{
	struct eachobs__slot *run[EACHOBS__RUN_MAX];
	uint64_t per_item = UINT64_MAX; /* unknown: start one at a time */

	for (;;) {
		size_t c = take_credits(it, per_item < EACHOBS__CHEAP_NS ? EACHOBS__RUN_MAX : 1);
		size_t first, k = 0, n;
		if (c)
			k = claim(it, self, c, &first);
		if (k < c)
			give_credits(it, c - k);
		if (k == 0)
			return;
		n = load_run(it, run, first, k, &per_item);
		if (eachobs__closing(it))
			return;
		if (n < k)
			give_credits(it, k - n);
		publish_run(it, run, n);
	}
}

/*
 * The consumer helps like a worker when getobs is cheap: helping one
 * observation at a time cost a deque lock and a free-ring round trip per
 * item, and THREADED ran slower than BACKGROUND (no-op, P = 2: 4.9 against
 * 6.1 M items/s). Its run goes through credits and the ready ring, so it
 * counts against buffersize like any worker's, and the consumer then takes
 * the observations out in the usual way.
 */
size_t eachobs__ring_help_run(eachobs_iter *it, uint64_t *per_item_ns)
{
	struct eachobs__slot *run[EACHOBS__RUN_MAX];
	size_t c = try_take_credits(it, EACHOBS__RUN_MAX), first, k = 0, n;

	if (c)
		k = eachobs__deques_take(&it->deques, c, &first);
	if (k < c)
		give_credits(it, c - k);
	n = k ? load_run(it, run, first, k, per_item_ns) : 0;
	if (n < k)
		give_credits(it, k - n);
	publish_run(it, run, n);
	return n;
}

/* Batched: help fill the open batches while there are entries to claim;
 * false when close began while a completed batch waited for room. */
static bool help_open(eachobs_iter *it, unsigned self)
{
	struct eachobs__slot *done;

	while (eachobs__help(it, self, SIZE_MAX, &done))
		if (done && !eachobs__ring_put_ready(it, done))
			return false;
	return true;
}

/*
 * Batched: take units and fill them, then help with the rest. While getobs
 * is slow, a thread opens a unit only when no open one has an entry left
 * to claim, and otherwise loads one entry at a time of the open unit that
 * is nearest completion (load.c), so the threads fill one batch together.
 */
void eachobs__ring_worker(eachobs_iter *it, unsigned self)
{
	struct eachobs__slot *slot;
	size_t u;

	if (!it->batchsize) {
		run_unbatched(it, self);
		return;
	}
	for (;;) {
		bool cheap = eachobs__getobs_cheap(it);
		if (!cheap && !help_open(it, self))
			return;
		if (!claim(it, self, 1, &u))
			break;
		slot = eachobs__ring_get_free(it);
		if (!slot || eachobs__closing(it) ||
		    atomic_load_explicit(&it->stop, memory_order_relaxed))
			break;
		if (!cheap)
			eachobs__open(it, slot, u);
		else if (eachobs__fill(it, slot, u) &&
			 !eachobs__ring_put_ready(it, slot))
			return;
	}
	help_open(it, self);
}
