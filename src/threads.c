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
 * Lock order: pool->lock is never held while a worker runs or while any
 * iterator lock is taken.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <string.h>

struct lent {
	pthread_t thread;
	eachobs_pool *pool;
	struct eachobs__worker *job; /* under pool->lock */
	pthread_cond_t wake;
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
};

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

void eachobs__lender_reserve(eachobs_pool *p, eachobs_iter *it)
{
	struct eachobs__worker *ws = it->pool.workers;
	unsigned k = 0;

	pthread_mutex_lock(&p->lock);
	for (; k < it->pool.nthreads && p->nidle > 0; k++) {
		struct lent *t = &p->threads[p->idle[--p->nidle]];
		t->job = &ws[k];
		ws[k].borrowed = true;
		ws[k].lent = t;
	}
	it->pool.borrowed += k;
	it->pool.nlent = k;
	pthread_mutex_unlock(&p->lock);
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
