/*
 * A set of worker threads that each run one job once: created, or lent by
 * an eachobs_pool; a start gate that keeps them from running it before the
 * owner knows the start will succeed; joining them. Knows nothing of
 * iterators: what a worker does once through the gate is the job's
 * function, told the worker's index.
 */
#ifndef EACHOBS_WORKERS_H
#define EACHOBS_WORKERS_H

#include "base.h"
#include "lender.h"

#include <pthread.h>
#include <sched.h>

/* What every worker runs, and where. Set before eachobs__workers_start,
 * left alone until eachobs__workers_join returns. */
struct eachobs__job {
	/* Runs once on each worker, possibly on several at once, after the
	 * gate opened; not at all when *closed was set first. */
	void (*fn)(void *arg, unsigned self);
	void *arg;
	const _Atomic bool *closed;
	size_t stack_size;     /* of each created thread */
	const cpu_set_t *cpus; /* NULL: wherever the system likes */
	int nice;              /* 0: the process's own */
};

struct eachobs__worker {
	struct eachobs__stats stats; /* first: it is cache-line aligned */
	struct eachobs__workers *set;
	unsigned self;
	bool created;                /* thread is ours to join */
	pthread_t thread;            /* when created */
};

struct eachobs__workers {
	struct eachobs__worker *list;  /* nthreads */
	unsigned nthreads;             /* workers to start */
	struct eachobs__job job;
	/* The eachobs_pool lending threads, or NULL, and the loan of its
	 * threads to workers [0, nlent) (lender.h). */
	eachobs_pool *lender;
	struct eachobs__loan loan;
	/* Workers wait on `ev_go` for `go`. */
	_Atomic bool go;
	struct eachobs__event ev_go;
	/* Workers [0, nlent) run on lent threads, [nlent, nthreads) on
	 * threads of their own. */
	unsigned nlent;
	/* Workers with a thread: [0, nstart) from the start (0: all), more
	 * through eachobs__workers_grow, up to `next`; under grow_lock,
	 * which join takes to seal the set. ncreated counts the created. */
	unsigned nstart;
	unsigned next;
	bool sealed;
	pthread_mutex_t grow_lock;
	_Atomic unsigned ncreated;
};

/* Before anything else, and before anything can fail: lend from pool
 * (NULL: create every thread), which counts this set as its user until
 * eachobs__workers_fini. */
void eachobs__workers_setup(struct eachobs__workers *ws, eachobs_pool *pool);
/* Room for nthreads workers (0: none); 0 or -ENOMEM. */
int eachobs__workers_init(struct eachobs__workers *ws, unsigned nthreads,
			  const struct eachobs__job *job);
/* Start the workers (those below nstart when it is set) and open the
 * gate: 0, or a negative errno (a thread
 * could not be created, the system refuses the job's cpus, or its nice
 * value is one the workers could not reach: -EACCES) with the gate
 * closed. Either way the caller sets *job.closed, wakes and joins. */
int eachobs__workers_start(struct eachobs__workers *ws);
/* Any thread but the owner's, while the set runs: give workers
 * [0, upto) a thread each (no more once join began; a thread that cannot
 * be created ends the growth). The workers that have one now. */
unsigned eachobs__workers_grow(struct eachobs__workers *ws, unsigned upto);
/* Workers running (after a successful start): lent or created. */
unsigned eachobs__workers_started(const struct eachobs__workers *ws);
/* Every worker's statistics summed (their threads write them while they
 * run, so a getobs in progress may be missing). */
struct eachobs__worker_totals {
	uint64_t loaded, getobs_ns, idle_ns, steals, room_ns;
};
void eachobs__workers_totals(const struct eachobs__workers *ws,
			     struct eachobs__worker_totals *t);
/* After *job.closed was set: workers waiting at the gate see it. */
void eachobs__workers_wake_all(struct eachobs__workers *ws);
/* Wait until every worker is done with the job. */
void eachobs__workers_join(struct eachobs__workers *ws);
/* After join (or with nothing started): free, and stop using the pool. */
void eachobs__workers_fini(struct eachobs__workers *ws);

#endif /* EACHOBS_WORKERS_H */
