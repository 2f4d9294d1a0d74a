/*
 * A lender of threads: the persistent threads of an eachobs_pool, lent out
 * to run opaque work (lender.c).
 *
 * A caller borrows threads with a loan: one function, run as fn(arg, j) on
 * thread j of the loan, j in [0, k), where k is what
 * eachobs__lender_reserve found idle. Each thread runs its job once, then
 * goes back to the pool. The lender knows nothing of its callers: what fn
 * does, why it wants k threads, what it does with those it did not get.
 *
 * Lifecycle of a loan, all on the caller's thread:
 *   1. fill fn, arg and the placement (cpus, nice);
 *   2. eachobs__lender_reserve: k threads are the loan's, none other's;
 *   3. optionally eachobs__lender_check_cpus, before anything depends on
 *      the threads;
 *   4. eachobs__lender_wake, once, whenever k > 0, even when the caller
 *      gives up: a reserved thread runs its job only once woken (or once
 *      it sees the job on its own, which it may do at any time after 2),
 *      and eachobs__lender_wait waits for it;
 *   5. eachobs__lender_wait: every fn has returned, and no thread of the
 *      pool will touch the loan or arg again. The loan's memory may then
 *      be reused or freed.
 *
 * Placement: a lent thread takes on the loan's CPUs and nice value on
 * itself before fn runs (lender.c says when it does not need to), and
 * keeps them until a later loan wants others.
 */
#ifndef EACHOBS_LENDER_H
#define EACHOBS_LENDER_H

#include "eachobs.h"

#include <sched.h>

struct eachobs__lent; /* one thread of a pool (lender.c) */

struct eachobs__loan {
	/* The caller's: set before eachobs__lender_reserve, left alone
	 * until eachobs__lender_wait returns. fn runs on lent threads,
	 * possibly several at once. */
	void (*fn)(void *arg, unsigned j);
	void *arg;
	const cpu_set_t *cpus; /* NULL: the pool's own CPUs */
	int nice;              /* 0: the pool's own nice value */

	/* The lender's. Written under the pool's lock in reserve, before any
	 * thread can see its job, so a thread that starts early (before its
	 * wake-up) sees the whole loan. */
	struct eachobs__lent *first; /* thread 0, or NULL when k = 0 */
	unsigned running;            /* threads not done with fn yet */
};

/* Count a user of pool: eachobs_pool_destroy waits until there is none.
 * Any thread; takes the pool's lock. */
void eachobs__lender_attach(eachobs_pool *pool);
void eachobs__lender_detach(eachobs_pool *pool);
/* Threads the pool has (idle or lent). */
unsigned eachobs__lender_size(const eachobs_pool *pool);
/* What autotune learnt on pool: the threads its last autotuned iterator
 * let load at the end (0: none yet), for the next to start from. */
unsigned eachobs__lender_learned(const eachobs_pool *pool);
void eachobs__lender_learn(eachobs_pool *pool, unsigned nthreads);

/*
 * Reserve up to k_wanted idle threads of pool for loan: those that can
 * take on its placement (lender.c: a thread that cannot lower its nice
 * value back serves only loans asking at least as much; without the
 * pool's own CPUs recorded, no loan with cpus). Returns how many, k; the
 * threads run fn(arg, j) for j in [0, k). Never blocks on busy threads:
 * a caller wanting more makes its own. Takes the pool's lock once.
 */
unsigned eachobs__lender_reserve(eachobs_pool *pool, struct eachobs__loan *loan,
				 unsigned k_wanted);

/*
 * Before reserving for a loan at nice value nice (0: the pool's): where
 * that is below the pool's and the pool does not know yet whether its
 * threads may lower their nice value, find out (nice.h), so that reserve
 * lends threads that would have to lower it only where they may. 0, or
 * the negative errno of a failure to find out (eachobs_last_error set).
 */
int eachobs__lender_check_nice(eachobs_pool *pool, int nice);

/*
 * Whether the system accepts loan->cpus for the loan's threads: 0, also
 * when the loan has no cpus or no thread; -EAGAIN when it refuses them
 * (no CPU of the set is one the process may use), as pthread_create does
 * for a thread created on them. Sets them on thread 0 from the calling
 * thread: the answer depends on the process's cpuset, the same for every
 * thread, so one system call tells for all. Call it between reserve and
 * wake; the loan runs all the same, each thread left where it was should
 * the set be refused.
 */
int eachobs__lender_check_cpus(struct eachobs__loan *loan);

/*
 * Start the loan: wake thread 0, which wakes threads 1 and 2 after taking
 * on the nice value and before the CPUs, and so on down a binary tree, so
 * that the caller pays one wake-up, not k. Does not block.
 */
void eachobs__lender_wake(struct eachobs__loan *loan);

/* Block until every thread of the loan has returned from fn and gone back
 * to pool. */
void eachobs__lender_wait(eachobs_pool *pool, struct eachobs__loan *loan);

#endif
