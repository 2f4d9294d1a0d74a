/*
 * Persistent pools (eachobs_pool_create, eachobs_options.pool): one test
 * per promise of include/eachobs.h.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(pool, .init = deadline, .timeout = 60);

/* getobs writes idx and records which threads ran it. */
struct pd {
	size_t n;
	pthread_t consumer;
	struct thread_set loaders; /* other than the consumer */
	atomic_uint *calls;
};

static size_t pd_numobs(void *ctx)
{
	return ((struct pd *)ctx)->n;
}

static int pd_getobs(void *ctx, size_t idx, void *obs)
{
	struct pd *d = ctx;

	memcpy(obs, &idx, sizeof(idx));
	atomic_fetch_add(&d->calls[idx], 1);
	if (!pthread_equal(pthread_self(), d->consumer))
		thread_set_add(&d->loaders, pthread_self());
	return 0;
}

static void pd_init(struct pd *d, size_t n)
{
	memset(d, 0, sizeof(*d));
	d->n = n;
	d->consumer = pthread_self();
	thread_set_init(&d->loaders);
	d->calls = calloc(n ? n : 1, sizeof(*d->calls));
}

static void pd_fini(struct pd *d)
{
	thread_set_fini(&d->loaders);
	free(d->calls);
}

static eachobs_dataset pd_dataset(struct pd *d)
{
	return (eachobs_dataset){ d, pd_numobs, pd_getobs, sizeof(size_t) };
}

/* Drain it; every index below n exactly once. */
static void drain_all(eachobs_iter *it, struct pd *d, bool batched)
{
	size_t got = 0;
	int rc;

	if (batched) {
		eachobs_batch b;
		while ((rc = eachobs_next_batch(it, &b)) == 1)
			got += b.count;
	} else {
		while ((rc = eachobs_next(it, NULL, NULL)) == 1)
			got++;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(got, d->n);
	for (size_t i = 0; i < d->n; i++)
		cr_assert_eq(atomic_load(&d->calls[i]), 1, "index %zu", i);
}

Test(pool, create_rejects_bad_arguments)
{
	eachobs_pool *p = (eachobs_pool *)1;

	cr_assert_eq(eachobs_pool_create(NULL, 2), -EINVAL);
	cr_assert_eq(eachobs_pool_create(&p, 0), -EINVAL);
	cr_assert_null(p);
	cr_assert_eq(eachobs_pool_create(&p, EACHOBS_MAX_THREADS + 1), -EINVAL);
	eachobs_pool_destroy(NULL);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(pool, epochs_borrow_the_pools_threads_and_create_none)
{
	eachobs_pool *p;
	struct thread_set seen;

	thread_set_init(&seen);
	cr_assert_eq(eachobs_pool_create(&p, 4), 0);
	int with_pool = threads_now();
	for (int epoch = 0; epoch < 6; epoch++) {
		struct pd d;
		eachobs_iter *it;
		pd_init(&d, 3000);
		eachobs_dataset data = pd_dataset(&d);
		eachobs_options o = { .pool = p, .executor = EACHOBS_BACKGROUND,
				      .ordered = epoch % 2, .batchsize = epoch > 3 ? 7 : 0 };
		cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
		cr_assert_eq(threads_now(), with_pool, "epoch %d created threads", epoch);
		drain_all(it, &d, o.batchsize);
		eachobs_stats st;
		eachobs_get_stats(it, &st);
		cr_assert_eq(st.nworkers, 4, "nthreads 0 means the pool's size");
		eachobs_close(it);
		/* Over all epochs, getobs ran on the pool's 4 threads only. */
		for (unsigned i = 0; i < d.loaders.n; i++)
			thread_set_add(&seen, d.loaders.tids[i]);
		cr_assert_leq(seen.n, 4, "epoch %d: getobs ran on %u threads", epoch,
			      seen.n);
		pd_fini(&d);
	}
	eachobs_pool_destroy(p);
	thread_set_fini(&seen);
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* Training and validation on one pool, the consumer switching between
 * them: the second iterator gets threads of its own instead of waiting for
 * the first one's, which sit on a full buffer. */
Test(pool, two_iterators_on_one_pool_never_wait_for_each_other)
{
	eachobs_pool *p;
	struct pd train, val;
	eachobs_iter *ti, *vi;

	cr_assert_eq(eachobs_pool_create(&p, 2), 0);
	pd_init(&train, 2000);
	pd_init(&val, 500);
	eachobs_dataset td = pd_dataset(&train), vd = pd_dataset(&val);
	eachobs_options o = { .pool = p, .executor = EACHOBS_BACKGROUND,
			      .buffersize = 2 };
	cr_assert_eq(eachobs_parallel(&ti, &td, &o), 0);
	cr_assert_eq(eachobs_next(ti, NULL, NULL), 1);
	cr_assert_eq(eachobs_parallel(&vi, &vd, &o), 0);
	drain_all(vi, &val, false);
	eachobs_close(vi);
	size_t got = 1;
	while (eachobs_next(ti, NULL, NULL) == 1)
		got++;
	cr_assert_eq(got, 2000);
	eachobs_close(ti);
	eachobs_pool_destroy(p);
	pd_fini(&train);
	pd_fini(&val);
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* Reuse over many epochs: no thread and no memory grows. */
Test(pool, a_thousand_epochs_on_one_pool_grow_no_thread_and_no_memory)
{
	eachobs_pool *p;
	struct pd d;

	cr_assert_eq(eachobs_pool_create(&p, 3), 0);
	int with_pool = threads_now();
	long live = eachobs__alloc_live();
	pd_init(&d, 64);
	eachobs_dataset data = pd_dataset(&d);
	for (int epoch = 0; epoch < 1000; epoch++) {
		eachobs_iter *it;
		eachobs_options o = { .pool = p, .shuffle = true, .epoch = epoch,
				      .batchsize = epoch % 2 ? 8 : 0,
				      .ordered = epoch % 3 == 0 };
		memset(d.calls, 0, 64 * sizeof(*d.calls));
		cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
		drain_all(it, &d, o.batchsize);
		eachobs_close(it);
		cr_assert_eq(eachobs__alloc_live(), live, "epoch %d left memory", epoch);
		cr_assert_eq(threads_now(), with_pool, "epoch %d changed the threads", epoch);
	}
	pd_fini(&d);
	eachobs_pool_destroy(p);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

struct destroyer {
	eachobs_pool *p;
	atomic_bool done;
};

static void *destroy_main(void *arg)
{
	struct destroyer *d = arg;

	eachobs_pool_destroy(d->p);
	atomic_store(&d->done, true);
	return NULL;
}

Test(pool, destroy_waits_until_its_iterators_are_closed)
{
	struct destroyer dr = { 0 };
	struct pd d;
	eachobs_iter *it;
	pthread_t t;

	cr_assert_eq(eachobs_pool_create(&dr.p, 3), 0);
	pd_init(&d, 1000);
	eachobs_dataset data = pd_dataset(&d);
	cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){ .pool = dr.p }), 0);
	cr_assert_eq(pthread_create(&t, NULL, destroy_main, &dr), 0);
	drain_all(it, &d, false);
	cr_assert_not(atomic_load(&dr.done), "destroy returned with an open iterator");
	eachobs_close(it);
	for (double t0 = now_s(); !atomic_load(&dr.done);) {
		cr_assert_lt(now_s() - t0, 10.0, "destroy did not return after close");
		sleep_us(200);
	}
	pthread_join(t, NULL);
	pd_fini(&d);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(pool, an_iterator_wanting_more_threads_than_the_pool_creates_the_rest)
{
	eachobs_pool *p;
	struct pd d;
	eachobs_iter *it;

	cr_assert_eq(eachobs_pool_create(&p, 2), 0);
	pd_init(&d, 4000);
	eachobs_dataset data = pd_dataset(&d);
	cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){
		.pool = p, .nthreads = 5, .executor = EACHOBS_BACKGROUND }), 0);
	drain_all(it, &d, false);
	eachobs_stats st;
	eachobs_get_stats(it, &st);
	cr_assert_eq(st.nworkers, 5);
	eachobs_close(it);
	eachobs_pool_destroy(p);
	pd_fini(&d);
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(pool, each_failed_allocation_or_thread_leaves_nothing)
{
	long k;

	for (k = 0; k < 1000; k++) {
		eachobs_pool *p = (eachobs_pool *)1;
		eachobs__fault_alloc_after(k);
		int rc = eachobs_pool_create(&p, 3);
		eachobs__fault_alloc_after(-1);
		if (rc == 0) {
			eachobs_pool_destroy(p);
			break;
		}
		cr_assert_eq(rc, -ENOMEM, "allocation %ld: %d", k, rc);
		cr_assert_null(p);
		cr_assert_eq(eachobs__alloc_live(), 0, "allocation %ld: leak", k);
	}
	cr_assert_geq(k, 3, "only %ld allocations", k);
	for (k = 0; k < 3; k++) {
		eachobs_pool *p;
		eachobs__fault_thread_after(k);
		cr_assert_eq(eachobs_pool_create(&p, 3), -EAGAIN, "thread %ld", k);
		eachobs__fault_thread_after(-1);
		cr_assert_eq(eachobs__alloc_live(), 0, "thread %ld: leak", k);
		cr_assert_eq(threads_settle(threads_base, 2.0), threads_base,
			     "thread %ld: started threads not joined", k);
	}
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* A pool thread whose attributes (glibc's allocation inside thread
 * creation) cannot be allocated: -ENOMEM naming the thread, not -EAGAIN.
 * Its threads are created last, so the last failing step is thread 3's. */
Test(pool, a_thread_whose_attributes_cannot_be_allocated_gives_enomem)
{
	char last[256] = "";
	int last_rc = 0, rc = -1;

	for (long k = 0; rc != 0; k++) {
		eachobs_pool *p;
		cr_assert_lt(k, 1000, "pool creation still failing");
		eachobs__fault_alloc_after(k);
		rc = eachobs_pool_create(&p, 3);
		eachobs__fault_alloc_after(-1);
		if (rc == 0) {
			eachobs_pool_destroy(p);
		} else {
			last_rc = rc;
			snprintf(last, sizeof(last), "%s", eachobs_last_error());
		}
	}
	cr_assert_eq(last_rc, -ENOMEM, "gave %d (%s)", last_rc, last);
	cr_assert_str_eq(last, "eachobs_pool_create: out of memory for the "
			 "attributes of thread 3 of 3 (its signal mask and "
			 "CPUs)");
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(pool, close_mid_epoch_gives_the_threads_back)
{
	eachobs_pool *p;

	cr_assert_eq(eachobs_pool_create(&p, 3), 0);
	for (int e = 0; e < NEXECUTORS; e++) {
		for (int ord = 0; ord < 2; ord++) {
			struct pd d;
			eachobs_iter *it;
			pd_init(&d, 100000);
			eachobs_dataset data = pd_dataset(&d);
			cr_assert_eq(eachobs_parallel(&it, &data, &(eachobs_options){
				.pool = p, .executor = executors[e], .ordered = ord }), 0);
			for (int i = 0; i < 10; i++)
				cr_assert_eq(eachobs_next(it, NULL, NULL), 1);
			eachobs_close(it);
			pd_fini(&d);
		}
	}
	eachobs_pool_destroy(p);
	cr_assert_eq(threads_settle(threads_base, 2.0), threads_base);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* getobs waits until `want` threads are inside at once (or 20 s pass):
 * only then is every worker known to be running. */
struct rendezvous {
	atomic_uint inside;
	unsigned want;
	atomic_uint met; /* calls that saw all `want` inside */
};

static size_t rv_numobs(void *ctx)
{
	(void)ctx;
	return 256;
}

static int rv_getobs(void *ctx, size_t idx, void *obs)
{
	struct rendezvous *r = ctx;
	struct timespec pause = { 0, 100000 };

	memcpy(obs, &idx, sizeof(idx));
	if (atomic_fetch_add(&r->inside, 1) >= r->want)
		return 0; /* after the meeting: nothing to wait for */
	for (int i = 0; i < 200000 && atomic_load(&r->inside) < r->want; i++)
		nanosleep(&pause, NULL);
	if (atomic_load(&r->inside) >= r->want)
		atomic_fetch_add(&r->met, 1);
	return 0;
}

/* The consumer wakes one lent thread and each wakes two more: all of them
 * must end up running, beside any the iterator had to create. */
Test(pool, every_lent_and_created_worker_runs_at_once)
{
	unsigned sizes[][2] = { { 16, 16 }, { 8, 16 }, { 3, 3 }, { 1, 5 } };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_pool *p;
			struct rendezvous r = { .want = sizes[k][1] };
			eachobs_dataset data = { &r, rv_numobs, rv_getobs,
						 sizeof(size_t) };
			eachobs_options o = { .pool = NULL,
					      .executor = EACHOBS_BACKGROUND,
					      .nthreads = sizes[k][1],
					      .basesize = 1,
					      .ordered = ordered };
			eachobs_iter *it;
			eachobs_stats st;
			size_t got = 0;

			cr_assert_eq(eachobs_pool_create(&p, sizes[k][0]), 0);
			o.pool = p;
			cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
			while (eachobs_next(it, NULL, NULL) == 1)
				got++;
			cr_assert_eq(eachobs_get_stats(it, &st), 0);
			eachobs_close(it);
			eachobs_pool_destroy(p);
			cr_assert_eq(got, 256);
			cr_assert_eq(st.nworkers, sizes[k][1]);
			cr_assert_eq(atomic_load(&r.met), sizes[k][1],
				     "pool of %u, %u workers, ordered %d: only %u "
				     "of them were ever inside getobs together",
				     sizes[k][0], sizes[k][1], ordered,
				     atomic_load(&r.met));
		}
	}
}
