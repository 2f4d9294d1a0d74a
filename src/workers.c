/*
 * An iterator's worker threads: created, or lent by an eachobs_pool; the
 * start gate that keeps them from loading before eachobs_parallel knows it
 * will succeed; joining them at close. What a worker does once through the
 * gate is its mode's loop (unordered.c, ordered.c).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int eachobs__workers_init(eachobs_iter *it, unsigned nthreads)
{
	struct eachobs__workers *p = &it->workers;

	p->nthreads = nthreads;
	if (nthreads == 0)
		return 0;
	p->list = eachobs__alloc_aligned(nthreads * sizeof(*p->list));
	if (!p->list)
		return eachobs__fail(-ENOMEM, "out of memory for %u workers",
				     nthreads);
	memset(p->list, 0, nthreads * sizeof(*p->list));
	return 0;
}

static bool go_or_closing(const void *arg)
{
	const eachobs_iter *it = arg;

	return atomic_load_explicit(&it->workers.go, memory_order_acquire) ||
	       eachobs__closing(it);
}

/* Run worker w on the calling thread until its iterator is done with it. */
static void worker_run(struct eachobs__worker *w)
{
	eachobs_iter *it = w->it;

	eachobs__tls_stats = &w->stats;
	eachobs__event_wait_timed(&it->workers.ev_go, go_or_closing, it, 0);
	if (!eachobs__closing(it)) {
		it->mode->worker(it, w->self);
	}
	/* A lent thread goes on to other loans. */
	eachobs__tls_stats = NULL;
}

/* The job of lent thread j: worker j. The lender has given the thread
 * the iterator's placement, or the pool's, before this first getobs
 * (the gate may be open already). */
static void lent_worker(void *arg, unsigned j)
{
	eachobs_iter *it = arg;

	worker_run(&it->workers.list[j]);
}

static void *worker_main(void *arg)
{
	struct eachobs__worker *w = arg;

	/* Raising one's own nice value needs no privilege, so this cannot
	 * fail for the values check_args lets through. */
	if (w->it->worker_nice)
		setpriority(PRIO_PROCESS, (id_t)gettid(), w->it->worker_nice);
	worker_run(w);
	return NULL;
}

static int create(eachobs_iter *it, unsigned j)
{
	struct eachobs__worker *w = &it->workers.list[j];
	int err = eachobs__thread_create(&w->thread, it->stack_size,
					 it->pin ? &it->cpus : NULL,
					 worker_main, w);

	if (err != 0) /* the caller closes and joins */
		return eachobs__fail_thread(-EAGAIN, err, "worker", j,
					    it->workers.nthreads, it->stack_size,
					    it->pin ? &it->cpus : NULL);
	w->created = true;
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
static void borrow(eachobs_iter *it)
{
	struct eachobs__workers *p = &it->workers;

	p->loan = (struct eachobs__loan){
		.fn = lent_worker,
		.arg = it,
		.cpus = it->pin ? &it->cpus : NULL,
		.nice = it->worker_nice,
	};
	p->nlent = eachobs__lender_reserve(p->lender, &p->loan, p->nthreads);
}

/*
 * Created threads are started in a loop on the consumer, lent ones in a
 * tree (the lender wakes one, which wakes two, ...): a new thread has to
 * be scheduled before it can create others, and that made a tree of
 * pthread_create calls slower than one loop on the consumer (1.3 against
 * 0.6 ms for P = 16, measured).
 */
int eachobs__workers_start(eachobs_iter *it)
{
	struct eachobs__workers *p = &it->workers;

	for (unsigned j = 0; j < p->nthreads; j++) {
		p->list[j].it = it;
		p->list[j].self = j;
	}
	if (p->lender)
		borrow(it);
	/* worker_cpus the system refuses fail the start on lent threads as
	 * on created ones; asked on one lent thread, the answer holds for
	 * all (lender.c). The lent threads are woken all the same, to see
	 * the close that follows. */
	int rc = 0;
	if (p->nlent > 0)
		rc = eachobs__lender_check_cpus(&p->loan);
	/* Otherwise lent threads cannot fail to start: with no thread to
	 * create they may load as soon as they wake. One that saw its job
	 * before being woken may already wait for go (a notify without
	 * sleepers is two atomic operations). */
	if (rc == 0 && p->nlent == p->nthreads) {
		atomic_store_explicit(&p->go, true, memory_order_release);
		eachobs__event_notify(&p->ev_go, INT_MAX);
	}
	if (p->nlent > 0)
		eachobs__lender_wake(&p->loan);
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

unsigned eachobs__workers_started(const eachobs_iter *it)
{
	unsigned n = it->workers.nlent;

	for (unsigned j = it->workers.nlent; j < it->workers.nthreads; j++)
		n += it->workers.list[j].created;
	return n;
}

void eachobs__workers_wake_all(eachobs_iter *it)
{
	eachobs__event_notify(&it->workers.ev_go, INT_MAX);
}

void eachobs__workers_join(eachobs_iter *it)
{
	struct eachobs__worker *ws = it->workers.list;

	for (unsigned j = 0; ws && j < it->workers.nthreads; j++) {
		if (ws[j].created)
			pthread_join(ws[j].thread, NULL);
		ws[j].created = false;
	}
	if (it->workers.lender)
		eachobs__lender_wait(it->workers.lender, &it->workers.loan);
}

void eachobs__workers_fini(eachobs_iter *it)
{
	struct eachobs__workers *p = &it->workers;

	eachobs__free(p->list);
}
