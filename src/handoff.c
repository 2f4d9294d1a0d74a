/*
 * The unordered hand-off (handoff.h): two ck_rings of item pointers,
 * credits, and the event counts loaders and the consumer sleep on.
 */
#define _GNU_SOURCE
#include "handoff.h"

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

/* The smallest power of two above n (ck_ring holds size - 1 entries). */
static unsigned ring_size_for(size_t n)
{
	unsigned s = 2;

	while (s <= n)
		s <<= 1;
	return s;
}

/*
 * Loaders that found no credit sleep until half the buffer is free again,
 * not until one credit is: waking a loader per returned credit made
 * loaders and consumer take turns, a futex call and a context switch per
 * item. Woken together at the half mark, they refill in a burst while the
 * consumer drains without sleeping. The consumer never waits on this, so
 * the hysteresis adds no latency to what it receives.
 *
 * Only while half the buffer is at least one credit per loader: with a
 * smaller buffer, waking every sleeper at the half mark woke loaders that
 * found no credit left and slept again, for every item. Then the rule is
 * one credit, one wake-up.
 */
static size_t resume_at(size_t buffersize, unsigned nloaders)
{
	size_t half = buffersize / 2;

	return half >= nloaders ? half : 1;
}

int eachobs__handoff_init(struct eachobs__handoff *h, size_t buffersize,
			  size_t nitems, unsigned nloaders)
{
	unsigned rs = ring_size_for(buffersize), fs = ring_size_for(nitems);

	eachobs__event_init(&h->ev_ready);
	eachobs__event_init(&h->ev_room);
	eachobs__event_init(&h->ev_free);
	h->buffersize = buffersize;
	h->resume_at = resume_at(buffersize, nloaders);
	h->ready_buf = eachobs__calloc(rs, sizeof(*h->ready_buf));
	h->free_buf = eachobs__calloc(fs, sizeof(*h->free_buf));
	if (!h->ready_buf || !h->free_buf)
		return -ENOMEM;
	ck_ring_init(&h->ready, rs);
	pthread_mutex_init(&h->producer_lock, NULL);
	h->lock_ready = true;
	ck_ring_init(&h->free, fs);
	atomic_init(&h->credits, buffersize);
	return 0;
}

void eachobs__handoff_fini(struct eachobs__handoff *h)
{
	if (h->lock_ready)
		pthread_mutex_destroy(&h->producer_lock);
	eachobs__free(h->ready_buf);
	eachobs__free(h->free_buf);
	h->lock_ready = false;
	h->ready_buf = h->free_buf = NULL;
}

bool eachobs__handoff_closed(const struct eachobs__handoff *h)
{
	return atomic_load_explicit(&h->closed, memory_order_acquire);
}

void eachobs__handoff_close(struct eachobs__handoff *h)
{
	atomic_store_explicit(&h->closed, true, memory_order_release);
	eachobs__event_notify_single(&h->ev_ready, NULL, NULL);
	eachobs__event_notify(&h->ev_room, INT_MAX);
	eachobs__event_notify(&h->ev_free, INT_MAX);
}

/* ---- free items ------------------------------------------------------- */

void *eachobs__handoff_try_get_free(struct eachobs__handoff *h)
{
	void *item;

	if (!ck_ring_dequeue_spmc(&h->free, h->free_buf, &item))
		return NULL;
	return take_over(item);
}

static bool free_or_closed(const void *arg)
{
	struct eachobs__handoff *h = (struct eachobs__handoff *)arg;

	return ck_ring_size(&h->free) > 0 || eachobs__handoff_closed(h);
}

void *eachobs__handoff_get_free(struct eachobs__handoff *h)
{
	for (;;) {
		void *item = eachobs__handoff_try_get_free(h);
		if (item || eachobs__handoff_closed(h))
			return item;
		eachobs__event_wait_timed(&h->ev_free, free_or_closed, h,
					  EACHOBS__LOADER_SPINS);
	}
}

void eachobs__handoff_put_free(struct eachobs__handoff *h, void *item)
{
	hand_over(item);
	/* Cannot fail: the ring holds more entries than there are items. */
	ck_ring_enqueue_spmc(&h->free, h->free_buf, item);
	eachobs__event_notify(&h->ev_free, 1);
}

/* ---- credits ------------------------------------------------------- */

size_t eachobs__handoff_try_take_credits(struct eachobs__handoff *h,
					 size_t want)
{
	size_t c = atomic_load_explicit(&h->credits, memory_order_relaxed);

	while (c > 0) {
		size_t k = c < want ? c : want;
		if (atomic_compare_exchange_weak_explicit(
			    &h->credits, &c, c - k, memory_order_acquire,
			    memory_order_relaxed))
			return k;
	}
	return 0;
}

static bool room_or_closed(const void *arg)
{
	const struct eachobs__handoff *h = arg;

	return atomic_load_explicit(&h->credits, memory_order_relaxed) >=
		       h->resume_at ||
	       eachobs__handoff_closed(h);
}

size_t eachobs__handoff_take_credits(struct eachobs__handoff *h, size_t want)
{
	for (;;) {
		size_t k = eachobs__handoff_try_take_credits(h, want);
		if (k)
			return k;
		if (eachobs__handoff_closed(h))
			return 0;
		eachobs__event_wait_timed(&h->ev_room, room_or_closed, h,
					  EACHOBS__LOADER_SPINS);
	}
}

/* With hysteresis, only a return that crosses the half mark wakes
 * (everybody); without, each returned credit wakes one sleeper. */
void eachobs__handoff_give_credits(struct eachobs__handoff *h, size_t k)
{
	size_t before = atomic_fetch_add_explicit(&h->credits, k,
						  memory_order_release);

	if (h->resume_at == 1)
		eachobs__event_notify(&h->ev_room,
				      (int)(k < INT_MAX ? k : INT_MAX));
	else if (before < h->resume_at && before + k >= h->resume_at)
		eachobs__event_notify(&h->ev_room, INT_MAX);
}

/* ---- ready items ---------------------------------------------------- */

static bool ready_or_closed(const void *arg)
{
	struct eachobs__handoff *h = (struct eachobs__handoff *)arg;

	return ck_ring_size(&h->ready) > 0 || eachobs__handoff_closed(h);
}

/*
 * ck's multi-producer enqueue makes each producer spin until every earlier
 * one has committed; with more threads than cores, a producer preempted in
 * that window left the others spinning for whole time slices. A mutex
 * makes them sleep instead, and the ring is single-producer underneath.
 */
void eachobs__handoff_publish(struct eachobs__handoff *h, void *const *items,
			      size_t k)
{
	if (k == 0)
		return;
	for (size_t i = 0; i < k; i++)
		hand_over(items[i]);
	pthread_mutex_lock(&h->producer_lock);
	/* Cannot fail: credits keep the ring below its capacity. */
	for (size_t i = 0; i < k; i++)
		ck_ring_enqueue_spsc(&h->ready, h->ready_buf, items[i]);
	pthread_mutex_unlock(&h->producer_lock);
	eachobs__event_notify_single(&h->ev_ready, ready_or_closed, h);
}

bool eachobs__handoff_put_ready(struct eachobs__handoff *h, void *item)
{
	while (!eachobs__handoff_try_take_credits(h, 1)) {
		if (eachobs__handoff_closed(h))
			return false;
		eachobs__event_wait_timed(&h->ev_room, room_or_closed, h,
					  EACHOBS__LOADER_SPINS);
	}
	eachobs__handoff_publish(h, &item, 1);
	return true;
}

void *eachobs__handoff_get_ready(struct eachobs__handoff *h)
{
	void *item;

	if (!ck_ring_dequeue_spsc(&h->ready, h->ready_buf, &item))
		return NULL;
	take_over(item);
	/* What waited, counting the item just taken (stats only). */
	size_t waiting = ck_ring_size(&h->ready) + 1;
	if (waiting > h->max_waiting)
		h->max_waiting = waiting;
	eachobs__handoff_give_credits(h, 1);
	return item;
}

struct wake_test {
	struct eachobs__handoff *h;
	eachobs__cond_fn also;
	const void *arg;
};

static bool consumer_wakes(const void *arg)
{
	const struct wake_test *w = arg;

	return ready_or_closed(w->h) || (w->also && w->also(w->arg));
}

void eachobs__handoff_wait_ready(struct eachobs__handoff *h,
				 eachobs__cond_fn also, const void *arg)
{
	struct wake_test w = { h, also, arg };

	eachobs__event_wait_single(&h->ev_ready, consumer_wakes, &w,
				   EACHOBS__CONSUMER_SPINS);
}

void eachobs__handoff_wake_consumer(struct eachobs__handoff *h)
{
	eachobs__event_notify_single(&h->ev_ready, NULL, NULL);
}
