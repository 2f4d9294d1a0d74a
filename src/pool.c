/*
 * The worker threads and how unordered work is shared among them.
 *
 * The units to load (observations, or batches), [0, nunits), are cut into
 * tasks of basesize units (called indices below), and each
 * worker starts with a contiguous run of tasks in its own deque. A deque is
 * just the range [lo, hi) of indices nobody has claimed yet: the owner
 * claims indices one by one from the front, an idle worker steals half of
 * the richest deque's tasks from the back. Because a deque is a range, not
 * a list, the pool's memory does not grow with n.
 *
 * Lock order: a thief holds two deque locks at once, always the one with the
 * lower index first. The consumer takes single indices from the back of a
 * deque (EACHOBS_THREADED), so a worker's claim never waits for it for long.
 *
 * Ordered mode uses the threads but not the deques: see order.c.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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

/* Give worker j the j-th of nthreads nearly equal runs of whole tasks. */
static void spread_tasks(eachobs_iter *it)
{
	struct eachobs__pool *p = &it->pool;
	size_t bs = it->basesize;
	size_t ntasks = it->nunits / bs + (it->nunits % bs != 0);
	size_t q = ntasks / p->nthreads, r = ntasks % p->nthreads;

	for (unsigned j = 0; j < p->nthreads; j++) {
		size_t t0 = j * q + min_size(j, r);
		size_t t1 = t0 + q + (j < r);
		/* t * bs cannot overflow while t < ntasks. */
		size_t lo = t0 < ntasks ? t0 * bs : it->nunits;
		size_t hi = t1 < ntasks ? t1 * bs : it->nunits;
		deque_set(&p->deques[j], lo, hi);
	}
	atomic_store_explicit(&p->unclaimed, it->nunits, memory_order_relaxed);
}

int eachobs__pool_init(eachobs_iter *it, unsigned nthreads)
{
	struct eachobs__pool *p = &it->pool;

	p->nthreads = nthreads;
	if (nthreads == 0)
		return 0;
	p->workers = eachobs__alloc_aligned(nthreads * sizeof(*p->workers));
	if (!p->workers)
		return eachobs__fail(-ENOMEM, "out of memory for %u workers",
				     nthreads);
	memset(p->workers, 0, nthreads * sizeof(*p->workers));
	if (it->ordered)
		return 0;
	p->deques = eachobs__alloc_aligned(nthreads * sizeof(*p->deques));
	if (!p->deques)
		return eachobs__fail(-ENOMEM,
				     "out of memory for %u workers' deques",
				     nthreads);
	for (unsigned j = 0; j < nthreads; j++)
		pthread_mutex_init(&p->deques[j].lock, NULL);
	spread_tasks(it);
	return 0;
}

/* Owner: claim the front run of at most max indices of deque self; the
 * count (0: the deque is empty). max is 1 unless getobs is cheap (see
 * ring.c): with whole tasks claimed privately, a worker could end holding
 * a task's worth of sleeps while the others idled (n = 10000, t = 1 ms,
 * P = 16 lost 20-30 ms that way), so every index not yet started stays
 * stealable unless loading it costs next to nothing. */
static size_t pop_front(eachobs_iter *it, unsigned self, size_t max,
			size_t *first)
{
	struct eachobs__deque *d = &it->pool.deques[self];
	size_t got = 0;

	pthread_mutex_lock(&d->lock);
	size_t l = atomic_load_explicit(&d->lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&d->hi, memory_order_relaxed);
	if (l < h) {
		got = h - l < max ? h - l : max;
		atomic_store_explicit(&d->lo, l + got, memory_order_relaxed);
		atomic_fetch_sub_explicit(&it->pool.unclaimed, got,
					  memory_order_relaxed);
		*first = l;
	}
	pthread_mutex_unlock(&d->lock);
	return got;
}

/* The deque with the most unclaimed indices, other than skip; or -1. */
static int richest(eachobs_iter *it, unsigned skip)
{
	int best = -1;
	size_t most = 0;

	for (unsigned j = 0; j < it->pool.nthreads; j++) {
		size_t s = j == skip ? 0 : deque_size(&it->pool.deques[j]);
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
static bool steal(eachobs_iter *it, unsigned self, size_t *idx)
{
	struct eachobs__deque *ds = it->pool.deques;
	int v = richest(it, self);

	if (v < 0)
		return false;
	lock_pair(ds, self, (unsigned)v);
	size_t l = atomic_load_explicit(&ds[v].lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ds[v].hi, memory_order_relaxed);
	bool got = l < h;
	if (got) {
		size_t start = h - steal_amount(h - l, it->basesize);

		atomic_store_explicit(&ds[v].hi, start, memory_order_relaxed);
		deque_set(&ds[self], start + 1, h);
		atomic_fetch_sub_explicit(&it->pool.unclaimed, 1,
					  memory_order_relaxed);
		*idx = start;
	}
	unlock_pair(ds, self, (unsigned)v);
	return got;
}

size_t eachobs__pool_claim_run(eachobs_iter *it, unsigned self, size_t max,
			       size_t *first)
{
	/* unclaimed > 0 means some deque holds work right now: a failed
	 * steal only means another thread claimed or moved it first, so each
	 * retry follows someone else's progress and the loop ends. If the
	 * thread we follow was preempted inside its critical section, yield
	 * the core to it rather than spin through our time slice. */
	uint64_t t0 = 0;
	size_t got;

	for (unsigned round = 0; !(got = pop_front(it, self, max, first));
	     round++) {
		if (atomic_load_explicit(&it->pool.unclaimed,
					 memory_order_relaxed) == 0 ||
		    eachobs__closing(it) ||
		    atomic_load_explicit(&it->stop, memory_order_relaxed))
			break;
		if (steal(it, self, first)) {
			eachobs__stat_add(&it->pool.workers[self].stats.steals, 1);
			got = 1;
			break;
		}
		if (round == 0)
			t0 = eachobs__now_ns();
		if (round < EACHOBS__LOADER_SPINS)
			eachobs__cpu_relax();
		else
			sched_yield();
	}
	if (t0)
		eachobs__stat_add(&it->pool.workers[self].stats.idle_ns,
				  eachobs__now_ns() - t0);
	return got;
}

bool eachobs__pool_claim(eachobs_iter *it, unsigned self, size_t *idx)
{
	return eachobs__pool_claim_run(it, self, 1, idx) == 1;
}

size_t eachobs__pool_take_run(eachobs_iter *it, size_t max, size_t *first)
{
	struct eachobs__deque *ds = it->pool.deques;
	int v = richest(it, UINT_MAX);
	size_t got = 0;

	if (v < 0)
		return 0;
	pthread_mutex_lock(&ds[v].lock);
	size_t l = atomic_load_explicit(&ds[v].lo, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ds[v].hi, memory_order_relaxed);
	if (l < h) {
		/* From the back: the owner works at the front. */
		got = h - l < max ? h - l : max;
		atomic_store_explicit(&ds[v].hi, h - got, memory_order_relaxed);
		atomic_fetch_sub_explicit(&it->pool.unclaimed, got,
					  memory_order_relaxed);
		*first = h - got;
	}
	pthread_mutex_unlock(&ds[v].lock);
	return got;
}

bool eachobs__pool_take_one(eachobs_iter *it, size_t *idx)
{
	return eachobs__pool_take_run(it, 1, idx) == 1;
}

static bool go_or_closing(const void *arg)
{
	const eachobs_iter *it = arg;

	return atomic_load_explicit(&it->pool.go, memory_order_acquire) ||
	       eachobs__closing(it);
}

/*
 * Waking P lent threads costs the waker a futex wake each (3-5 us here).
 * So the consumer wakes only worker 0, and every lent worker wakes its two
 * children (2j + 1, 2j + 2) before anything else: depth log2 P, spread
 * over every core. Created threads are not started that way: a new thread
 * has to be scheduled before it can create others, and that made a tree of
 * pthread_create calls slower than one loop on the consumer (1.3 against
 * 0.6 ms for P = 16, measured).
 */

static void wake_children(eachobs_iter *it, unsigned j)
{
	struct eachobs__pool *p = &it->pool;

	for (unsigned c = 2 * j + 1; c <= 2 * j + 2 && c < p->nlent; c++)
		eachobs__lender_wake(&p->workers[c]);
}

void eachobs__worker_run(struct eachobs__worker *w)
{
	eachobs_iter *it = w->it;

	/* A lent thread takes on the iterator's placement, or the pool's,
	 * before its first getobs (the gate may be open already). */
	if (w->borrowed) {
		eachobs__lender_renice(w, it->worker_nice);
		wake_children(it, w->self);
		eachobs__lender_pin(w, it->pin ? &it->cpus : NULL);
	}
	eachobs__tls_stats = &w->stats;
	eachobs__event_wait_timed(&it->pool.ev_go, go_or_closing, it, 0);
	if (!eachobs__closing(it)) {
		if (it->ordered)
			eachobs__order_worker(it, w->self);
		else
			eachobs__ring_worker(it, w->self);
	}
	/* A lent thread goes on to other iterators. */
	eachobs__tls_stats = NULL;
}

static void *worker_main(void *arg)
{
	struct eachobs__worker *w = arg;

	/* Raising one's own nice value needs no privilege, so this cannot
	 * fail for the values check_args lets through. */
	if (w->it->worker_nice)
		setpriority(PRIO_PROCESS, (id_t)gettid(), w->it->worker_nice);
	eachobs__worker_run(w);
	return NULL;
}

static int create(eachobs_iter *it, unsigned j)
{
	struct eachobs__worker *w = &it->pool.workers[j];
	int err = eachobs__thread_create(&w->thread, it->stack_size,
					 it->pin ? &it->cpus : NULL,
					 worker_main, w);

	if (err != 0) /* the caller closes and joins */
		return eachobs__fail_thread(-EAGAIN, err, "worker", j,
					    it->pool.nthreads, it->stack_size,
					    it->pin ? &it->cpus : NULL);
	w->created = true;
	return 0;
}

int eachobs__pool_start(eachobs_iter *it)
{
	struct eachobs__pool *p = &it->pool;

	for (unsigned j = 0; j < p->nthreads; j++) {
		p->workers[j].it = it;
		p->workers[j].self = j;
	}
	if (p->lender)
		eachobs__lender_reserve(p->lender, it);
	/* worker_cpus the system refuses fail the start on lent threads as
	 * on created ones; asked on one lent thread, the answer holds for
	 * all (threads.c). The lent threads are woken all the same, to see
	 * the close that follows. */
	int rc = 0;
	if (p->nlent > 0 && it->pin)
		rc = eachobs__lender_check_cpus(&p->workers[0], &it->cpus);
	/* Otherwise lent threads cannot fail to start: with no thread to
	 * create they may load as soon as they wake. One that saw its job
	 * before being woken may already wait for go (a notify without
	 * sleepers is two atomic operations). */
	if (rc == 0 && p->nlent == p->nthreads) {
		atomic_store_explicit(&p->go, true, memory_order_release);
		eachobs__event_notify(&p->ev_go, INT_MAX);
	}
	if (p->nlent > 0)
		eachobs__lender_wake(&p->workers[0]);
	if (rc < 0)
		return rc; /* the caller closes; nothing loaded */
	for (unsigned j = p->nlent; j < p->nthreads; j++) {
		rc = create(it, j);
		if (rc < 0)
			return rc;
	}
	atomic_store_explicit(&p->go, true, memory_order_release);
	eachobs__event_notify(&p->ev_go, INT_MAX);
	return 0;
}

unsigned eachobs__pool_started(const eachobs_iter *it)
{
	unsigned n = it->pool.nlent;

	for (unsigned j = it->pool.nlent; j < it->pool.nthreads; j++)
		n += it->pool.workers[j].created;
	return n;
}

void eachobs__pool_wake_all(eachobs_iter *it)
{
	eachobs__event_notify(&it->pool.ev_go, INT_MAX);
}

void eachobs__pool_join(eachobs_iter *it)
{
	struct eachobs__worker *ws = it->pool.workers;

	for (unsigned j = 0; ws && j < it->pool.nthreads; j++) {
		if (ws[j].created)
			pthread_join(ws[j].thread, NULL);
		ws[j].created = false;
	}
	if (it->pool.lender)
		eachobs__lender_wait(it->pool.lender, it);
}

void eachobs__pool_fini(eachobs_iter *it)
{
	struct eachobs__pool *p = &it->pool;

	if (p->deques) {
		for (unsigned j = 0; j < p->nthreads; j++)
			pthread_mutex_destroy(&p->deques[j].lock);
		eachobs__free(p->deques);
	}
	eachobs__free(p->workers);
}
