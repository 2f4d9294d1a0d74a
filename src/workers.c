/*
 * A set of worker threads: created, or lent by an eachobs_pool; the start
 * gate that keeps them from running their job before the owner knows the
 * start will succeed; joining them. What a worker does once through the
 * gate is the job's function (for an iterator: its mode's loop,
 * unordered.c or ordered.c).
 */
#define _GNU_SOURCE
#include "workers.h"
#include "error.h"
#include "nice.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void eachobs__workers_setup(struct eachobs__workers *ws, eachobs_pool *pool)
{
	eachobs__event_init(&ws->ev_go);
	pthread_mutex_init(&ws->grow_lock, NULL);
	ws->lender = pool;
	if (pool)
		eachobs__lender_attach(pool);
}

int eachobs__workers_init(struct eachobs__workers *ws, unsigned nthreads,
			  const struct eachobs__job *job)
{
	ws->nthreads = nthreads;
	ws->job = *job;
	if (nthreads == 0)
		return 0;
	ws->list = eachobs__alloc_aligned(nthreads * sizeof(*ws->list));
	if (!ws->list)
		return eachobs__fail(-ENOMEM, "out of memory for %u workers",
				     nthreads);
	memset(ws->list, 0, nthreads * sizeof(*ws->list));
	for (unsigned j = 0; j < nthreads; j++) {
		ws->list[j].set = ws;
		ws->list[j].self = j;
	}
	return 0;
}

static bool closed(const struct eachobs__workers *ws)
{
	return atomic_load_explicit(ws->job.closed, memory_order_acquire);
}

static bool go_or_closed(const void *arg)
{
	const struct eachobs__workers *ws = arg;

	return atomic_load_explicit(&ws->go, memory_order_acquire) ||
	       closed(ws);
}

/* Run worker w on the calling thread until its job is done. */
static void worker_run(struct eachobs__worker *w)
{
	struct eachobs__workers *ws = w->set;

	eachobs__tls_stats = &w->stats;
	eachobs__event_wait_timed(&ws->ev_go, go_or_closed, ws, 0);
	if (!closed(ws))
		ws->job.fn(ws->job.arg, w->self);
	/* A lent thread goes on to other loans. */
	eachobs__tls_stats = NULL;
}

/* The job of lent thread j: worker j. The lender has given the thread
 * the job's placement, or the pool's, before this first call (the gate
 * may be open already). */
static void lent_worker(void *arg, unsigned j)
{
	struct eachobs__workers *ws = arg;

	worker_run(&ws->list[j]);
}

static void *worker_main(void *arg)
{
	struct eachobs__worker *w = arg;

	/* Raising one's own nice value needs no privilege, and lowering it
	 * was found allowed before the thread was created (check_nice). */
	if (w->set->job.nice)
		setpriority(PRIO_PROCESS, (id_t)gettid(), w->set->job.nice);
	worker_run(w);
	return NULL;
}

static int create(struct eachobs__workers *ws, unsigned j)
{
	struct eachobs__worker *w = &ws->list[j];
	int err = eachobs__thread_create(&w->thread, ws->job.stack_size,
					 ws->job.cpus, worker_main, w);

	if (err != 0) /* the caller closes and joins */
		return eachobs__fail_thread(err, NULL, "worker thread", j,
					    ws->nthreads, ws->job.stack_size,
					    ws->job.cpus);
	w->created = true;
	atomic_fetch_add_explicit(&ws->ncreated, 1, memory_order_relaxed);
	return 0;
}

/*
 * Borrow what idle threads the pool has for workers [0, nlent). The rest
 * get threads of their own rather than waiting for busy pool threads:
 * that keeps several iterators on one pool from deadlocking, as a
 * validation iterator started while the training iterator holds every
 * pool thread would otherwise wait for threads that are themselves
 * blocked on a full buffer the consumer is not draining.
 */
static void borrow(struct eachobs__workers *ws)
{
	ws->loan = (struct eachobs__loan){
		.fn = lent_worker,
		.arg = ws,
		.cpus = ws->job.cpus,
		.nice = ws->job.nice,
	};
	ws->nlent = eachobs__lender_reserve(ws->lender, &ws->loan,
					    ws->nthreads);
}

static void open_gate(struct eachobs__workers *ws)
{
	atomic_store_explicit(&ws->go, true, memory_order_release);
	eachobs__event_notify(&ws->ev_go, INT_MAX);
}

/*
 * Workers start at the owner's nice value (lent ones at the pool's): one
 * they may not lower to the job's would run at its own instead, so such a
 * job is refused (-EACCES) for created threads, and the pool lends only
 * threads that may (lender.c). Asked only when the job's value is below,
 * so an unprivileged process pays nothing for the usual raise.
 */
static int check_nice(struct eachobs__workers *ws)
{
	int want = ws->job.nice, own;

	if (want == 0 || ws->nthreads == 0)
		return 0;
	own = eachobs__own_nice();
	if (want < own) {
		int may = eachobs__may_lower_nice(want);
		if (may < 0)
			return may;
		if (!may)
			return eachobs__fail(-EACCES,
					     "worker_nice %d is below the "
					     "calling thread's nice value %d, "
					     "which this process may not lower "
					     "(without CAP_SYS_NICE, RLIMIT_NICE "
					     "must be at least %d)",
					     want, own, 20 - want);
	}
	return ws->lender ? eachobs__lender_check_nice(ws->lender, want) : 0;
}

/*
 * Created threads are started in a loop on the owner, lent ones in a tree
 * (the lender wakes one, which wakes two, ...): a new thread has to be
 * scheduled before it can create others, and that made a tree of
 * pthread_create calls slower than one loop on the owner.
 */
int eachobs__workers_start(struct eachobs__workers *ws)
{
	int rc = check_nice(ws);

	if (rc < 0)
		return rc; /* nothing started */
	if (ws->lender)
		borrow(ws);
	/* Before the gate can open: with every worker lent it opens below,
	 * before the loop, and a lent worker's autotune may then grow the
	 * set at once (eachobs__workers_grow reads `next` under grow_lock,
	 * which this thread does not hold). */
	ws->next = ws->nlent;
	/* cpus the system refuses fail the start on lent threads as on
	 * created ones; asked on one lent thread, the answer holds for all
	 * (lender.c). The lent threads are woken all the same, to see the
	 * close that follows. */
	if (ws->nlent > 0)
		rc = eachobs__lender_check_cpus(&ws->loan);
	/* Otherwise lent threads cannot fail to start: with no thread to
	 * create they may run as soon as they wake. One that saw its job
	 * before being woken may already wait for go (a notify without
	 * sleepers is two atomic operations). */
	if (rc == 0 && ws->nlent == ws->nthreads)
		open_gate(ws);
	if (ws->nlent > 0)
		eachobs__lender_wake(&ws->loan);
	if (rc < 0)
		return rc; /* the caller closes; nothing ran */
	unsigned upto = ws->nstart && ws->nstart < ws->nthreads ? ws->nstart
							       : ws->nthreads;
	/* The gate is still closed here whenever this loop runs (some
	 * worker is not lent): no worker runs, nobody else reads `next`. */
	for (; ws->next < upto; ws->next++) {
		rc = create(ws, ws->next);
		if (rc < 0)
			return rc;
	}
	open_gate(ws);
	return 0;
}

unsigned eachobs__workers_grow(struct eachobs__workers *ws, unsigned upto)
{
	unsigned have;

	if (upto > ws->nthreads)
		upto = ws->nthreads;
	pthread_mutex_lock(&ws->grow_lock);
	/* The gate is open: a new thread runs its job at once. */
	while (!ws->sealed && ws->next < upto && create(ws, ws->next) == 0)
		ws->next++;
	have = ws->next;
	pthread_mutex_unlock(&ws->grow_lock);
	return have;
}

unsigned eachobs__workers_started(const struct eachobs__workers *ws)
{
	return ws->nlent +
	       atomic_load_explicit(&ws->ncreated, memory_order_relaxed);
}

void eachobs__workers_totals(const struct eachobs__workers *ws,
			     struct eachobs__worker_totals *t)
{
	*t = (struct eachobs__worker_totals){ 0 };
	for (unsigned j = 0; j < ws->nthreads; j++) {
		const struct eachobs__stats *w = &ws->list[j].stats;
		t->loaded += eachobs__stat_read(&w->loaded);
		t->getobs_ns += eachobs__stat_read(&w->getobs_ns);
		t->idle_ns += eachobs__stat_read(&w->idle_ns);
		t->steals += eachobs__stat_read(&w->steals);
		t->room_ns += eachobs__stat_read(&w->room_ns);
	}
}

void eachobs__workers_wake_all(struct eachobs__workers *ws)
{
	eachobs__event_notify(&ws->ev_go, INT_MAX);
}

void eachobs__workers_join(struct eachobs__workers *ws)
{
	/* No thread is created from now on; those that were are seen. */
	pthread_mutex_lock(&ws->grow_lock);
	ws->sealed = true;
	pthread_mutex_unlock(&ws->grow_lock);
	for (unsigned j = 0; ws->list && j < ws->nthreads; j++) {
		if (ws->list[j].created)
			pthread_join(ws->list[j].thread, NULL);
		ws->list[j].created = false;
	}
	if (ws->lender)
		eachobs__lender_wait(ws->lender, &ws->loan);
}

void eachobs__workers_fini(struct eachobs__workers *ws)
{
	if (ws->lender)
		eachobs__lender_detach(ws->lender);
	pthread_mutex_destroy(&ws->grow_lock);
	eachobs__free(ws->list);
}
