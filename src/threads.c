/*
 * Persistent threads: an eachobs_pool keeps nthreads threads asleep between
 * iterators and lends them out as workers, so an epoch starts without
 * creating threads (16 pthread_create calls cost 0.4-1 ms here; waking 16
 * sleeping threads costs a few microseconds each).
 *
 * An iterator reserves as many idle threads as it has workers and creates
 * its own for any shortfall; the reserved threads are woken in a tree
 * (pool.c), so the consumer pays one wake-up, not P. Creating rather than
 * waiting is what keeps several iterators on one pool from deadlocking: a
 * validation iterator started while the training iterator holds every pool
 * thread would otherwise wait for threads that are themselves blocked on a
 * full buffer the consumer is not draining.
 *
 * A lent thread runs one worker to its end, then, under the pool's lock,
 * counts itself out of its iterator (pool.borrowed) and goes back to the
 * idle stack. The iterator's close waits under the same lock for that
 * count to reach 0, so no lent thread touches an iterator after close.
 *
 * Placement while lent: a lent thread runs where the iterator it serves
 * asks, its worker_cpus and worker_nice, or where there are none the
 * pool's own CPUs and nice value (those of the thread that created the
 * pool), and takes that placement on itself before it loads. Threads
 * are lent to one iterator at a time, so an iterator's placement is
 * never undone under it by another's.
 *
 * The CPUs are set when a lending needs other CPUs than the thread has,
 * not undone at the end of every lending: an iterator per epoch with the
 * same worker_cpus then costs no system call and no migration per epoch
 * (restoring at each close cost 16 threads pinned to one CPU 50 us more
 * per close here, and a migration back at the next start). Whether the
 * system accepts the CPUs at all is asked once per start, before the
 * gate opens, by setting them on the first lent thread from the consumer
 * (eachobs__lender_check_cpus): the answer depends on the process's
 * cpuset, the same for every thread, so one system call tells, instead
 * of a wait for every lent thread to report.
 *
 * The nice value too is set when a lending needs another, with one
 * exception: lowering a nice value needs CAP_SYS_NICE (or an RLIMIT_NICE
 * that allows it), so a thread left at nice N by one iterator might not
 * be able to go back for the next. The first thread given back at
 * another nice value than the pool's tries to go back at once, and what
 * it finds (can_lower) decides for the pool: with the privilege, threads
 * keep their nice value between lendings like their CPUs; without it, a
 * thread at nice N stays there and is lent only to iterators that ask
 * for N or more (the others create threads of their own for the
 * difference, as when the pool is busy). Setting nice 5 at each start and
 * 0 at each close cost 16 threads on 2 cores 10 us more to the first item
 * and 25-30 us more per close here.
 * The nice value is set before the thread wakes the next ones: woken at a
 * better priority than their waker's new one, they would preempt it, and
 * the first item came 40 us later.
 *
 * Lock order: pool->lock is never held while a worker runs or while any
 * iterator lock is taken.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct lent {
	pthread_t thread;
	eachobs_pool *pool;
	struct eachobs__worker *job; /* under pool->lock */
	pthread_cond_t wake;
	/* Written by the thread itself while it is lent, read by
	 * lender_reserve while it is idle; going idle under the lock orders
	 * the two. */
	int nice;                    /* its nice value now */
	bool moved;                  /* it runs on `cpus`, not the pool's */
	cpu_set_t cpus;
};

struct eachobs_pool {
	pthread_mutex_t lock;
	pthread_cond_t done;   /* a job ended, or a user left */
	unsigned nthreads;     /* started */
	unsigned nidle;
	unsigned users;        /* iterators attached */
	bool exiting;
	struct lent *threads;
	unsigned *idle;        /* stack of indices into threads */
	/* The pool's own placement, which its threads inherited from the
	 * thread that created it and take on again for iterators without
	 * one. Without home_cpus (a kernel with more CPUs than a cpu_set_t
	 * holds) the threads are not lent to iterators with worker_cpus. */
	bool have_home_cpus;
	cpu_set_t home_cpus;
	int home_nice;
	/* Whether a thread may lower its nice value: -1 not known yet, 0 no,
	 * 1 yes; learnt from the first try (see the top of the file). */
	_Atomic int can_lower;
};

/* The calling thread's nice value (threads have their own on Linux). */
static int own_nice(void)
{
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)gettid());
	return errno ? 0 : n;
}

/* Thread t, lent or going back: nice value want, and what that teaches
 * the pool about lowering one. */
static void renice(eachobs_pool *p, struct lent *t, int want)
{
	bool lower = want < t->nice;

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), want) == 0) {
		t->nice = want;
		if (lower)
			atomic_store_explicit(&p->can_lower, 1,
					      memory_order_relaxed);
	} else if (lower) {
		atomic_store_explicit(&p->can_lower, 0, memory_order_relaxed);
	}
}

/* After a lending at another nice value than the pool's: go back while
 * the pool does not know whether it may; knowing, leave it to the next
 * lending (see the top of the file). */
static void nice_home(eachobs_pool *p, struct lent *self)
{
	if (self->nice != p->home_nice &&
	    atomic_load_explicit(&p->can_lower, memory_order_relaxed) < 0)
		renice(p, self, p->home_nice);
}

static void *lent_main(void *arg)
{
	struct lent *self = arg;
	eachobs_pool *p = self->pool;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!self->job && !p->exiting)
			pthread_cond_wait(&self->wake, &p->lock);
		struct eachobs__worker *w = self->job;
		if (!w)
			break;
		pthread_mutex_unlock(&p->lock);
		eachobs__worker_run(w);
		nice_home(p, self);
		pthread_mutex_lock(&p->lock);
		self->job = NULL;
		w->it->pool.borrowed--;
		p->idle[p->nidle++] = (unsigned)(self - p->threads);
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Stop and join the started threads, free everything. */
static void teardown(eachobs_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->exiting = true;
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_cond_signal(&p->threads[i].wake);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i].thread, NULL);
	if (p->threads)
		for (unsigned i = 0; i < p->nthreads; i++)
			pthread_cond_destroy(&p->threads[i].wake);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	eachobs__free(p->idle);
	eachobs__free(p->threads);
	eachobs__free(p);
}

static int start_threads(eachobs_pool *p, unsigned nthreads)
{
	for (unsigned i = 0; i < nthreads; i++) {
		struct lent *t = &p->threads[i];
		t->pool = p;
		t->nice = p->home_nice;
		pthread_cond_init(&t->wake, NULL);
		int err = eachobs__thread_create(&t->thread,
						 EACHOBS_DEFAULT_STACK_SIZE,
						 NULL, lent_main, t);
		if (err != 0) {
			pthread_cond_destroy(&t->wake);
			return eachobs__fail_thread(-EAGAIN, err,
						    "eachobs_pool_create:", i,
						    nthreads,
						    EACHOBS_DEFAULT_STACK_SIZE,
						    NULL);
		}
		p->nthreads++;
		p->idle[p->nidle++] = i;
	}
	return 0;
}

int eachobs_pool_create(eachobs_pool **poolp, unsigned nthreads)
{
	if (!poolp)
		return eachobs__fail(-EINVAL, "eachobs_pool_create: pool is NULL");
	*poolp = NULL;
	if (nthreads == 0 || nthreads > EACHOBS_MAX_THREADS)
		return eachobs__fail(-EINVAL,
				     "eachobs_pool_create: nthreads %u is "
				     "outside 1..EACHOBS_MAX_THREADS (%u)",
				     nthreads, EACHOBS_MAX_THREADS);
	eachobs_pool *p = eachobs__calloc(1, sizeof(*p));
	if (!p)
		return eachobs__fail(-ENOMEM,
				     "eachobs_pool_create: out of memory for "
				     "the pool");
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->done, NULL);
	p->have_home_cpus = pthread_getaffinity_np(pthread_self(),
						   sizeof(p->home_cpus),
						   &p->home_cpus) == 0;
	p->home_nice = own_nice();
	atomic_init(&p->can_lower, -1);
	p->threads = eachobs__calloc(nthreads, sizeof(*p->threads));
	p->idle = eachobs__calloc(nthreads, sizeof(*p->idle));
	int rc = p->threads && p->idle
			 ? start_threads(p, nthreads)
			 : eachobs__fail(-ENOMEM,
					 "eachobs_pool_create: out of memory "
					 "for %u threads",
					 nthreads);
	if (rc < 0) {
		teardown(p);
		return rc;
	}
	*poolp = p;
	return 0;
}

void eachobs_pool_destroy(eachobs_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	while (p->users > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	teardown(p);
}

void eachobs__lender_attach(eachobs_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->users++;
	pthread_mutex_unlock(&p->lock);
}

void eachobs__lender_detach(eachobs_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->users--;
	pthread_cond_broadcast(&p->done);
	pthread_mutex_unlock(&p->lock);
}

unsigned eachobs__lender_size(const eachobs_pool *p)
{
	return p->nthreads;
}

/* Whether idle thread t can take on the iterator's placement: one that
 * need not lower its nice value, or may; one at the pool's nice value
 * may also try to go below it, as a created thread would. Without the
 * pool's CPUs a thread could not go back to them, so it serves no
 * iterator with worker_cpus. */
static bool suits(const eachobs_pool *p, const struct lent *t,
		  const eachobs_iter *it)
{
	int want = it->worker_nice ? it->worker_nice : p->home_nice;

	if (it->pin && !p->have_home_cpus)
		return false;
	return t->nice <= want || t->nice == p->home_nice ||
	       atomic_load_explicit(&p->can_lower, memory_order_relaxed) == 1;
}

void eachobs__lender_reserve(eachobs_pool *p, eachobs_iter *it)
{
	struct eachobs__worker *ws = it->pool.workers;
	unsigned k = 0, n;

	pthread_mutex_lock(&p->lock);
	n = p->nidle;
	/* From the top of the idle stack (the threads idle the shortest
	 * time), skipping those that do not suit, which keep their order.
	 * Mostly every thread suits and this takes the top k. */
	for (unsigned j = n; j-- > 0 && k < it->pool.nthreads;) {
		struct lent *t = &p->threads[p->idle[j]];
		if (!suits(p, t, it))
			continue;
		t->job = &ws[k];
		ws[k].borrowed = true;
		ws[k].lent = t;
		k++;
		p->idle[j] = UINT_MAX;
	}
	p->nidle = 0;
	for (unsigned j = 0; j < n; j++)
		if (p->idle[j] != UINT_MAX)
			p->idle[p->nidle++] = p->idle[j];
	it->pool.borrowed += k;
	it->pool.nlent = k;
	pthread_mutex_unlock(&p->lock);
}

int eachobs__lender_check_cpus(struct eachobs__worker *w,
			       const cpu_set_t *cpus)
{
	struct lent *t = w->lent;

	/* The thread is reserved and may be running already (a fresh one
	 * that saw its job early): it sets the same CPUs on itself all the
	 * same (eachobs__lender_pin), which records them. */
	if (pthread_setaffinity_np(t->thread, sizeof(*cpus), cpus) != 0)
		return -EAGAIN;
	return 0;
}

void eachobs__lender_renice(struct eachobs__worker *w, int nice)
{
	struct lent *t = w->lent;
	int want = nice ? nice : t->pool->home_nice;

	/* Best effort, like a created worker's: raising it needs no
	 * privilege; lender_reserve lends a thread that must lower it only
	 * where the pool found it may (or to try below the pool's). */
	if (t->nice != want)
		renice(t->pool, t, want);
}

void eachobs__lender_pin(struct eachobs__worker *w, const cpu_set_t *cpus)
{
	struct lent *t = w->lent;
	eachobs_pool *p = t->pool;

	if (!cpus) {
		if (t->moved && pthread_setaffinity_np(pthread_self(),
						       sizeof(p->home_cpus),
						       &p->home_cpus) == 0)
			t->moved = false;
		return;
	}
	if (t->moved && CPU_EQUAL(&t->cpus, cpus))
		return;
	/* eachobs__lender_check_cpus found the set acceptable for this
	 * process's cpuset a moment ago. Should the cpuset have shrunk
	 * since, the thread stays where it is, as the kernel moves a
	 * created worker whose CPUs were all taken away: no iterator is
	 * left without its loaders. */
	if (pthread_setaffinity_np(pthread_self(), sizeof(*cpus), cpus) == 0) {
		t->moved = true;
		t->cpus = *cpus;
	}
}

/* Without the lock: the job was set under it, and a thread that has not
 * seen it yet is either inside pthread_cond_wait, which the signal ends,
 * or has not taken the lock since, and will see the job when it does. */
void eachobs__lender_wake(struct eachobs__worker *w)
{
	struct lent *t = w->lent;

	pthread_cond_signal(&t->wake);
}

void eachobs__lender_wait(eachobs_pool *p, eachobs_iter *it)
{
	pthread_mutex_lock(&p->lock);
	while (it->pool.borrowed > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
