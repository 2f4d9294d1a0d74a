/*
 * A lender of threads: an eachobs_pool keeps nthreads threads asleep
 * between uses and lends them out to run opaque work (lender.h), so that
 * a caller starts k threads' work without creating threads (creating one
 * costs many times what waking a sleeping one does: docs/design.md,
 * Measurements). It knows nothing of its callers: a loan
 * is a function, an argument and a placement.
 *
 * Threads are lent exclusively: a reserved thread leaves the idle stack
 * under the pool's lock and runs only its loan's job until, done, it
 * counts itself out of the loan (running) and goes back, under the same
 * lock. Reserving never waits for a busy thread; the caller makes its own
 * for a shortfall. eachobs__lender_wait waits under the lock for running
 * to reach 0, so no lent thread touches a loan after it.
 *
 * The threads of a loan are woken in a binary tree: the caller wakes
 * thread 0, and thread j wakes 2j + 1 and 2j + 2 before anything else
 * but its nice value (below), so the caller pays one wake-up, not k,
 * spread over every core at depth log2 k.
 *
 * Placement while lent: a lent thread runs where its loan asks, its cpus
 * and nice, or where there are none the pool's own CPUs and nice value
 * (those of the thread that created the pool), and takes that placement
 * on itself before its job. Threads are lent to one loan at a time, so a
 * loan's placement is never undone under it by another's.
 *
 * The CPUs are set when a loan needs other CPUs than the thread has, not
 * undone at the end of every loan: a loan per epoch with the same cpus
 * then costs no system call and no migration per epoch (restoring them
 * at each close would cost a system call per thread at every close and
 * a migration back at the next start). Whether the system
 * accepts the CPUs at all is asked once per loan, before the caller
 * depends on it, by setting them on thread 0 from the caller
 * (eachobs__lender_check_cpus): the answer depends on the process's
 * cpuset, the same for every thread, so one system call tells, instead
 * of a wait for every lent thread to report.
 *
 * The nice value too is set when a loan needs another, with one
 * exception: lowering a nice value needs CAP_SYS_NICE (or an RLIMIT_NICE
 * that allows it), so a thread left at nice N by one loan might not be
 * able to go back for the next. What the pool learns first decides for
 * it (can_lower): the first thread given back at another nice value than
 * the pool's tries to go back at once, and a caller about to ask for less
 * than the pool's asks the kernel beforehand (eachobs__lender_check_nice).
 * With the privilege, threads keep their nice value between loans like
 * their CPUs; without it, a thread above a loan's nice value is not lent
 * to it (the loan gets fewer threads, as when the pool is busy), so a
 * lent thread runs at its loan's value. Going back at every close would
 * cost every start and close (docs/design.md, Pools). The nice value is
 * set before the thread wakes the next ones: woken at a better priority
 * than their waker's new one, they would preempt it.
 *
 * Lock order: pool->lock is never held while a job runs, and no other
 * lock is taken under it.
 */
#define _GNU_SOURCE
#include "lender.h"
#include "base.h"
#include "error.h"
#include "nice.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <unistd.h>

struct eachobs__lent {
	pthread_t thread;
	eachobs_pool *pool;
	pthread_cond_t wake;
	/* Set by lender_reserve and cleared by the thread itself, under
	 * pool->lock; the thread reads j and kids once it has seen loan. */
	struct eachobs__loan *loan;
	unsigned j;                    /* its index in the loan */
	struct eachobs__lent *kids[2]; /* the threads it wakes, or NULL */
	struct eachobs__lent *next;    /* lender_reserve's: thread j + 1 */
	/* Written by the thread itself while it is lent, read by
	 * lender_reserve while it is idle; going idle under the lock orders
	 * the two. */
	int nice;                      /* its nice value now */
	bool moved;                    /* it runs on `cpus`, not the pool's */
	cpu_set_t cpus;
};

struct eachobs_pool {
	pthread_mutex_t lock;
	pthread_cond_t done;   /* a job ended, or a user left */
	unsigned nthreads;     /* started */
	unsigned nidle;
	unsigned users;        /* attached */
	bool exiting;
	struct eachobs__lent *threads;
	unsigned *idle;        /* stack of indices into threads */
	/* The pool's own placement, which its threads inherited from the
	 * thread that created it and take on again for loans without one.
	 * Without home_cpus (a kernel with more CPUs than a cpu_set_t
	 * holds) the threads are not lent to loans with cpus. */
	bool have_home_cpus;
	cpu_set_t home_cpus;
	int home_nice;
	/* Whether a thread may lower its nice value: -1 not known yet, 0 no,
	 * 1 yes; learnt from the first try (see the top of the file). */
	_Atomic int can_lower;
	/* Threads the last autotuned iterator on it ended with (0: none). */
	_Atomic unsigned learned;
};

/* Thread t, lent or going back: nice value want, and what that teaches
 * the pool about lowering one. */
static void renice(eachobs_pool *p, struct eachobs__lent *t, int want)
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

/* The nice value a loan's threads run at. */
static int loan_nice(const eachobs_pool *p, const struct eachobs__loan *loan)
{
	return loan->nice ? loan->nice : p->home_nice;
}

/* After a loan at another nice value than the pool's: go back while the
 * pool does not know whether it may; knowing, leave it to the next loan
 * (see the top of the file). */
static void nice_home(eachobs_pool *p, struct eachobs__lent *self)
{
	if (self->nice != p->home_nice &&
	    atomic_load_explicit(&p->can_lower, memory_order_relaxed) < 0)
		renice(p, self, p->home_nice);
}

/* On lent thread self: run on cpus, or the pool's CPUs for NULL (no
 * system call when it runs there already). */
static void pin(eachobs_pool *p, struct eachobs__lent *self,
		const cpu_set_t *cpus)
{
	if (!cpus) {
		if (self->moved && pthread_setaffinity_np(pthread_self(),
							  sizeof(p->home_cpus),
							  &p->home_cpus) == 0)
			self->moved = false;
		return;
	}
	if (self->moved && CPU_EQUAL(&self->cpus, cpus))
		return;
	/* eachobs__lender_check_cpus found the set acceptable for this
	 * process's cpuset a moment ago, if the caller asked. Should the
	 * cpuset have shrunk since, the thread stays where it is, as the
	 * kernel moves a created thread whose CPUs were all taken away: no
	 * loan is left without its threads. */
	if (pthread_setaffinity_np(pthread_self(), sizeof(*cpus), cpus) == 0) {
		self->moved = true;
		self->cpus = *cpus;
	}
}

/* Without the lock: the loan was set under it, and a thread that has not
 * seen it yet is either inside pthread_cond_wait, which the signal ends,
 * or has not taken the lock since, and will see the loan when it does. */
static void wake(struct eachobs__lent *t)
{
	if (t)
		pthread_cond_signal(&t->wake);
}

/* On lent thread self, before its job: the loan's nice value, then its
 * children in the tree, then its CPUs. Raising the nice value needs no
 * privilege; lender_reserve lent a thread that must lower it only where
 * the pool found it may (or to try below the pool's), and where it may
 * not the thread runs at its own, as a created thread would. */
static void take_placement(eachobs_pool *p, struct eachobs__lent *self,
			   const struct eachobs__loan *loan)
{
	int want = loan_nice(p, loan);

	if (self->nice != want)
		renice(p, self, want);
	wake(self->kids[0]);
	wake(self->kids[1]);
	pin(p, self, loan->cpus);
}

static void *lent_main(void *arg)
{
	struct eachobs__lent *self = arg;
	eachobs_pool *p = self->pool;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!self->loan && !p->exiting)
			pthread_cond_wait(&self->wake, &p->lock);
		struct eachobs__loan *loan = self->loan;
		if (!loan)
			break;
		pthread_mutex_unlock(&p->lock);
		take_placement(p, self, loan);
		loan->fn(loan->arg, self->j);
		nice_home(p, self);
		pthread_mutex_lock(&p->lock);
		/* The last touch of the loan: its caller may free it once
		 * running is 0. */
		self->loan = NULL;
		loan->running--;
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
		struct eachobs__lent *t = &p->threads[i];
		t->pool = p;
		t->nice = p->home_nice;
		pthread_cond_init(&t->wake, NULL);
		int err = eachobs__thread_create(&t->thread,
						 EACHOBS_DEFAULT_STACK_SIZE,
						 NULL, lent_main, t);
		if (err != 0) {
			pthread_cond_destroy(&t->wake);
			return eachobs__fail_thread(err,
						    "eachobs_pool_create",
						    "thread", i, nthreads,
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
	p->home_nice = eachobs__own_nice();
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

unsigned eachobs__lender_learned(const eachobs_pool *p)
{
	return atomic_load_explicit(&p->learned, memory_order_relaxed);
}

void eachobs__lender_learn(eachobs_pool *p, unsigned nthreads)
{
	atomic_store_explicit(&p->learned, nthreads, memory_order_relaxed);
}

/* Whether idle thread t can take on the loan's placement: one that need
 * not lower its nice value, or may; while the pool does not know whether
 * it may, one at the pool's nice value tries (eachobs__lender_check_nice
 * lets callers find out first). Without the pool's CPUs a thread could
 * not go back to them, so it serves no loan with cpus. */
static bool suits(const eachobs_pool *p, const struct eachobs__lent *t,
		  const struct eachobs__loan *loan)
{
	int want = loan_nice(p, loan);
	int can = atomic_load_explicit(&p->can_lower, memory_order_relaxed);

	if (loan->cpus && !p->have_home_cpus)
		return false;
	return t->nice <= want || can == 1 ||
	       (can < 0 && t->nice == p->home_nice);
}

int eachobs__lender_check_nice(eachobs_pool *p, int nice)
{
	if (nice == 0 || nice >= p->home_nice ||
	    atomic_load_explicit(&p->can_lower, memory_order_relaxed) >= 0)
		return 0;
	int may = eachobs__may_lower_nice(nice);
	if (may < 0)
		return may;
	/* A thread given back may have learnt it meanwhile: the same
	 * answer from the same kernel. */
	atomic_store_explicit(&p->can_lower, may, memory_order_relaxed);
	return 0;
}

/* Under the lock: make t thread j of loan. Thread j wakes 2j + 1 and
 * 2j + 2; threads are numbered in the order they are picked, so the
 * parents, in that order, take two children each, and *parent walks the
 * picked threads along `next` (the parent of j is picked before j). */
static void enlist(struct eachobs__loan *loan, struct eachobs__lent *t,
		   unsigned j, struct eachobs__lent **parent,
		   struct eachobs__lent **last)
{
	t->loan = loan;
	t->j = j;
	t->kids[0] = t->kids[1] = NULL;
	t->next = NULL;
	if (j == 0) {
		loan->first = t;
		*parent = t;
	} else {
		(*last)->next = t;
		(*parent)->kids[(j - 1) % 2] = t;
		if (j % 2 == 0)
			*parent = (*parent)->next;
	}
	*last = t;
}

unsigned eachobs__lender_reserve(eachobs_pool *p, struct eachobs__loan *loan,
				 unsigned k_wanted)
{
	struct eachobs__lent *parent = NULL, *last = NULL;
	unsigned k = 0, n;

	pthread_mutex_lock(&p->lock);
	loan->first = NULL;
	n = p->nidle;
	/* From the top of the idle stack (the threads idle the shortest
	 * time), skipping those that do not suit, which keep their order.
	 * Mostly every thread suits and this takes the top k. */
	for (unsigned i = n; i-- > 0 && k < k_wanted;) {
		struct eachobs__lent *t = &p->threads[p->idle[i]];
		if (!suits(p, t, loan))
			continue;
		enlist(loan, t, k++, &parent, &last);
		p->idle[i] = UINT_MAX;
	}
	p->nidle = 0;
	for (unsigned i = 0; i < n; i++)
		if (p->idle[i] != UINT_MAX)
			p->idle[p->nidle++] = p->idle[i];
	loan->running = k;
	pthread_mutex_unlock(&p->lock);
	return k;
}

int eachobs__lender_check_cpus(struct eachobs__loan *loan)
{
	struct eachobs__lent *t = loan->first;

	if (!t || !loan->cpus)
		return 0;
	/* The thread is reserved and may be running already (one that saw
	 * its loan early): it sets the same CPUs on itself all the same
	 * (pin), which records them. */
	if (pthread_setaffinity_np(t->thread, sizeof(*loan->cpus),
				   loan->cpus) != 0)
		return -EAGAIN;
	return 0;
}

void eachobs__lender_wake(struct eachobs__loan *loan)
{
	wake(loan->first);
}

void eachobs__lender_wait(eachobs_pool *p, struct eachobs__loan *loan)
{
	pthread_mutex_lock(&p->lock);
	while (loan->running > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
