/*
 * Per-worker deques of index ranges with stealing (deque.h).
 *
 * Lock order: a thief holds two deque locks at once, always the one with
 * the lower index first. A taker (deque.h) holds one lock and takes from
 * the back, so an owner's claim never waits for it for long.
 */
#define _GNU_SOURCE
#include "deque.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

static size_t deque_size(struct eachobs__deque *d)
{
	size_t lo = atomic_load_explicit(&d->lo, memory_order_relaxed);
	size_t hi = atomic_load_explicit(&d->hi, memory_order_relaxed);

	/* Read unlocked, the pair may be torn; it only guides the choice of
	 * a victim, which is checked again under the lock. */
	return hi > lo ? hi - lo : 0;
}

static void deque_set(struct eachobs__deque *d, size_t lo, size_t hi)
{
	atomic_store_explicit(&d->lo, lo, memory_order_relaxed);
	atomic_store_explicit(&d->hi, hi, memory_order_relaxed);
}

/* Give worker j the j-th of n nearly equal runs of whole tasks. */
static void spread_tasks(struct eachobs__deques *q, size_t nunits)
{
	size_t bs = q->basesize;
	size_t ntasks = nunits / bs + (nunits % bs != 0);
	size_t per = ntasks / q->n, r = ntasks % q->n;

	for (unsigned j = 0; j < q->n; j++) {
		size_t t0 = j * per + min_size(j, r);
		size_t t1 = t0 + per + (j < r);
		/* t * bs cannot overflow while t < ntasks. */
		size_t lo = t0 < ntasks ? t0 * bs : nunits;
		size_t hi = t1 < ntasks ? t1 * bs : nunits;
		deque_set(&q->d[j], lo, hi);
	}
	atomic_store_explicit(&q->unclaimed, nunits, memory_order_relaxed);
}

int eachobs__deques_init(struct eachobs__deques *q, unsigned n, size_t nunits,
			 size_t basesize, const _Atomic size_t *halt)
{
	q->n = n;
	q->basesize = basesize;
	q->halt = halt;
	q->d = eachobs__alloc_aligned(n * sizeof(*q->d));
	if (!q->d)
		return -ENOMEM;
	for (unsigned j = 0; j < n; j++)
		pthread_mutex_init(&q->d[j].lock, NULL);
	spread_tasks(q, nunits);
	return 0;
}

void eachobs__deques_fini(struct eachobs__deques *q)
{
	if (!q->d)
		return;
	for (unsigned j = 0; j < q->n; j++)
		pthread_mutex_destroy(&q->d[j].lock);
	eachobs__free(q->d);
	q->d = NULL;
}

/* Owner: claim the front run of at most max indices of deque self; the
 * count (0: the deque is empty). */
static size_t pop_front(struct eachobs__deques *q, unsigned self, size_t max,
			size_t *first)
{
	struct eachobs__deque *d = &q->d[self];
	size_t got = 0;

	pthread_mutex_lock(&d->lock);
	size_t l = atomic_load_explicit(&d->lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&d->hi, memory_order_relaxed);
	if (l < h) {
		got = min_size(h - l, max);
		atomic_store_explicit(&d->lo, l + got, memory_order_relaxed);
		atomic_fetch_sub_explicit(&q->unclaimed, got,
					  memory_order_relaxed);
		*first = l;
	}
	pthread_mutex_unlock(&d->lock);
	return got;
}

/* The deque with the most unclaimed indices, other than skip; or -1. */
static int richest(struct eachobs__deques *q, unsigned skip)
{
	int best = -1;
	size_t most = 0;

	for (unsigned j = 0; j < q->n; j++) {
		size_t s = j == skip ? 0 : deque_size(&q->d[j]);
		if (s > most) {
			most = s;
			best = (int)j;
		}
	}
	return best;
}

static void lock_pair(struct eachobs__deque *ds, unsigned a, unsigned b)
{
	pthread_mutex_lock(&ds[a < b ? a : b].lock);
	pthread_mutex_lock(&ds[a < b ? b : a].lock);
}

static void unlock_pair(struct eachobs__deque *ds, unsigned a, unsigned b)
{
	pthread_mutex_unlock(&ds[a].lock);
	pthread_mutex_unlock(&ds[b].lock);
}

/* Indices a thief takes from a deque holding r: the back half, in whole
 * tasks while there are more than two, so that tasks stay contiguous. */
static size_t steal_amount(size_t r, size_t bs)
{
	size_t tasks = r / bs + (r % bs != 0);

	if (tasks > 2)
		return r - (tasks - tasks / 2) * bs;
	return r > 1 ? r / 2 : r;
}

/*
 * Thief self (its own deque is empty): move the back of the richest deque
 * into our own and claim its first index, all under both locks, so that
 * unclaimed indices are never out of every deque at once and what we stole
 * cannot be stolen from under us before we start on it.
 */
static bool steal(struct eachobs__deques *q, unsigned self, size_t *idx)
{
	struct eachobs__deque *ds = q->d;
	int v = richest(q, self);

	if (v < 0)
		return false;
	lock_pair(ds, self, (unsigned)v);
	size_t l = atomic_load_explicit(&ds[v].lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ds[v].hi, memory_order_relaxed);
	bool got = l < h;
	if (got) {
		size_t start = h - steal_amount(h - l, q->basesize);

		atomic_store_explicit(&ds[v].hi, start, memory_order_relaxed);
		deque_set(&ds[self], start + 1, h);
		atomic_fetch_sub_explicit(&q->unclaimed, 1,
					  memory_order_relaxed);
		*idx = start;
	}
	unlock_pair(ds, self, (unsigned)v);
	return got;
}

size_t eachobs__deques_claim(struct eachobs__deques *q, unsigned self,
			     size_t max, size_t *first,
			     struct eachobs__claim_cost *cost)
{
	/* unclaimed > 0 means some deque holds work right now: a failed
	 * steal only means another thread claimed or moved it first, so each
	 * retry follows someone else's progress and the loop ends. If the
	 * thread we follow was preempted inside its critical section, yield
	 * the core to it rather than spin through our time slice. */
	uint64_t t0 = 0;
	size_t got;
	unsigned spins = eachobs__loader_spins();

	cost->stole = false;
	for (unsigned round = 0; !(got = pop_front(q, self, max, first));
	     round++) {
		if (atomic_load_explicit(&q->unclaimed, memory_order_relaxed) ==
			    0 ||
		    atomic_load_explicit(q->halt, memory_order_relaxed) == 0)
			break;
		if (steal(q, self, first)) {
			cost->stole = true;
			got = 1;
			break;
		}
		if (round == 0)
			t0 = eachobs__now_ns();
		if (round < spins)
			eachobs__cpu_relax();
		else
			sched_yield();
	}
	cost->wait_ns = t0 ? eachobs__now_ns() - t0 : 0;
	return got;
}

size_t eachobs__deques_take(struct eachobs__deques *q, size_t max,
			    size_t *first)
{
	struct eachobs__deque *ds = q->d;
	int v = richest(q, UINT_MAX);
	size_t got = 0;

	if (v < 0)
		return 0;
	pthread_mutex_lock(&ds[v].lock);
	size_t l = atomic_load_explicit(&ds[v].lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ds[v].hi, memory_order_relaxed);
	if (l < h) {
		/* From the back: the owner works at the front. */
		got = min_size(h - l, max);
		atomic_store_explicit(&ds[v].hi, h - got, memory_order_relaxed);
		atomic_fetch_sub_explicit(&q->unclaimed, got,
					  memory_order_relaxed);
		*first = h - got;
	}
	pthread_mutex_unlock(&ds[v].lock);
	return got;
}
