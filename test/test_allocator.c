/*
 * eachobs_options.allocator: every item buffer comes from the user's
 * allocator and goes back to it once, with its size; every yielded pointer
 * lies in a block it returned; a failing or misaligned allocator fails the
 * start with nothing leaked. Over every executor, ordered and not, single
 * and batched, with hold, on a pool and not.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(allocator, .init = deadline, .timeout = 60);

#define MAX_BLOCKS 64

/* A counting allocator: the blocks it gave out, and what came back. */
struct counting {
	pthread_mutex_t lock;
	void *ptr[MAX_BLOCKS];
	size_t size[MAX_BLOCKS];
	bool freed[MAX_BLOCKS];
	unsigned n, live, calls;
	long fail_at;       /* this call (0-based) returns NULL; -1: none */
	size_t misalign;    /* add this to the pointer returned */
	char err[160];
};

static void *c_alloc(void *ctx, size_t size, size_t align)
{
	struct counting *c = ctx;
	void *p = NULL;

	pthread_mutex_lock(&c->lock);
	if ((long)c->calls++ == c->fail_at || c->n == MAX_BLOCKS ||
	    posix_memalign(&p, align, size + c->misalign) != 0) {
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	p = (char *)p + c->misalign;
	c->ptr[c->n] = p;
	c->size[c->n++] = size;
	c->live++;
	pthread_mutex_unlock(&c->lock);
	return p;
}

static void c_free(void *ctx, void *ptr, size_t size)
{
	struct counting *c = ctx;

	pthread_mutex_lock(&c->lock);
	/* The newest block at ptr: an address comes back once freed. */
	unsigned i = c->n;
	while (i > 0 && c->ptr[i - 1] != ptr)
		i--;
	if (i-- == 0)
		snprintf(c->err, sizeof(c->err), "freed %p, never given", ptr);
	else if (c->freed[i])
		snprintf(c->err, sizeof(c->err), "block %u freed twice", i);
	else if (c->size[i] != size)
		snprintf(c->err, sizeof(c->err), "block %u: size %zu back, %zu "
			 "given", i, size, c->size[i]);
	else {
		c->freed[i] = true;
		c->live--;
		free((char *)ptr - c->misalign);
	}
	pthread_mutex_unlock(&c->lock);
}

static bool inside(struct counting *c, const void *p, size_t len)
{
	for (unsigned i = 0; i < c->n; i++)
		if (!c->freed[i] && (const char *)p >= (char *)c->ptr[i] &&
		    (const char *)p + len <= (char *)c->ptr[i] + c->size[i])
			return true;
	return false;
}

static size_t numobs_500(void *ctx)
{
	(void)ctx;
	return 500;
}

static int getobs_idx(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

static void run(struct counting *c, eachobs_executor ex, bool ordered,
		size_t batchsize, unsigned hold, eachobs_pool *pool)
{
	eachobs_allocator a = { c_alloc, c_free, c };
	eachobs_dataset data = { NULL, numobs_500, getobs_idx, 24 };
	eachobs_options o = { .nthreads = 3, .executor = ex,
			      .ordered = ordered, .batchsize = batchsize,
			      .hold = hold, .pool = pool, .allocator = &a };
	eachobs_iter *it;
	size_t seen = 0;
	const void *held[4];
	unsigned nheld = 0;
	int rc;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(c->live, 1, "%u blocks for one iterator", c->live);
	for (;;) {
		const void *p;
		size_t count = 1;
		if (batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			p = b.data;
			count = b.count;
		} else {
			rc = eachobs_next(it, &p, NULL);
		}
		if (rc == -ENOBUFS) {
			cr_assert_eq(eachobs_release(it, held[--nheld]), 0);
			continue;
		}
		if (rc != 1)
			break;
		cr_assert(inside(c, p, count * 24),
			  "%s: item %p outside every block of the allocator",
			  executor_name(ex), p);
		seen += count;
		if (hold)
			held[nheld++] = p;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(seen, 500);
	eachobs_close(it);
	cr_assert_eq(c->err[0], 0, "%s", c->err);
	cr_assert_eq(c->live, 0, "%u blocks not given back", c->live);
}

ParameterizedTestParameters(allocator,
			    every_item_lives_in_its_blocks_and_every_block_goes_back)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, allocator,
		  every_item_lives_in_its_blocks_and_every_block_goes_back)
{
	eachobs_pool *pool;

	cr_assert_eq(eachobs_pool_create(&pool, 2), 0);
	for (size_t bs = 0; bs <= 8; bs += 8)
		for (unsigned h = 0; h <= 2; h += 2)
			for (int pl = 0; pl < 2; pl++) {
				struct counting c = {
					.lock = PTHREAD_MUTEX_INITIALIZER,
					.fail_at = -1 };
				run(&c, m->executor, m->ordered, bs, h,
				    pl ? pool : NULL);
			}
	eachobs_pool_destroy(pool);
}

/* The user's allocator failing, or the library's own allocations failing
 * one after the other: -ENOMEM, the user's block given back, nothing of
 * the library's left. */
Test(allocator, a_failing_allocation_leaks_nothing)
{
	eachobs_dataset data = { NULL, numobs_500, getobs_idx, 24 };
	struct counting c = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_at = 0 };
	eachobs_allocator a = { c_alloc, c_free, &c };
	eachobs_options o = { .nthreads = 2, .batchsize = 4, .hold = 1,
			      .allocator = &a };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), -ENOMEM);
	cr_assert_null(it);
	cr_assert_eq(c.live, 0);
	cr_assert_eq(eachobs__alloc_live(), 0);
	for (long k = 0;; k++) {
		c.fail_at = -1;
		eachobs__fault_alloc_after(k);
		int rc = eachobs_parallel(&it, &data, &o);
		eachobs__fault_alloc_after(-1);
		if (rc == 0) {
			eachobs_close(it);
			cr_assert_eq(c.live, 0);
			break;
		}
		cr_assert_eq(rc, -ENOMEM, "allocation %ld: %d", k, rc);
		cr_assert_eq(c.live, 0, "allocation %ld failing: the user's "
			     "block was not given back", k);
		cr_assert_eq(eachobs__alloc_live(), 0);
		cr_assert_eq(c.err[0], 0, "%s", c.err);
	}
}

Test(allocator, bad_allocators_are_refused)
{
	eachobs_dataset data = { NULL, numobs_500, getobs_idx, 24 };
	struct counting c = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_at = -1,
			      .misalign = 8 };
	eachobs_allocator a = { c_alloc, c_free, &c };
	eachobs_allocator no_alloc = { NULL, c_free, &c };
	eachobs_allocator no_free = { c_alloc, NULL, &c };
	eachobs_options o = { .nthreads = 2, .allocator = &a };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL,
		     "a misaligned block accepted");
	cr_assert_eq(c.live, 0, "the misaligned block was not given back");
	cr_assert_eq(c.err[0], 0, "%s", c.err);
	o.allocator = &no_alloc;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	o.allocator = &no_free;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EINVAL);
	cr_assert_eq(eachobs__alloc_live(), 0);
}
