/*
 * A dataset for the batch and hold tests (test_batch.c, test_hold.c).
 *
 * getobs writes a pattern of its index into the observation's bytes (only
 * the first len_of(idx) of them when lengths vary), counts calls per index,
 * and records the span of addresses it was given: every observation the
 * iterator can ever hold lies in one allocation, so the span bounds the
 * memory in use (the tests compare it with the documented bound). Like the
 * td dataset of helpers.h, it only records on library threads; the first
 * broken rule is kept as a message the test asserts on.
 */
#ifndef EACHOBS_TEST_BATCH_HELPERS_H
#define EACHOBS_TEST_BATCH_HELPERS_H

#include "eachobs.h"
#include "helpers.h"
#include "buffer_rule.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BD_MAX_FAILS 8

struct bd {
	size_t n, obs_size;
	size_t fail[BD_MAX_FAILS]; /* indices whose getobs fails */
	unsigned nfail;
	int fail_code;
	unsigned sleep_us;        /* every getobs sleeps this long */
	bool vary_len;            /* getobs sets its length to len_of(idx) */
	int meet;                 /* > 0: getobs waits (up to 5 s) until this
				   * many calls ran at once */

	atomic_uint *calls;
	atomic_uintptr_t lo, hi;  /* span of observation memory written */
	atomic_int inside, max_inside;
	atomic_int set_len_too_big; /* what set_length(obs_size + 1) gave */
	atomic_int violated;
	char violation[256];
};

static inline size_t bd_len_of(const struct bd *d, size_t idx)
{
	return d->vary_len ? idx % (d->obs_size + 1) : d->obs_size;
}

static inline unsigned char bd_byte(size_t idx, size_t b)
{
	return (unsigned char)(idx * 131 + b * 7 + 1);
}

static inline void bd_violate(struct bd *d, const char *fmt, ...)
{
	if (atomic_exchange(&d->violated, 1))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->violation, sizeof(d->violation), fmt, ap);
	va_end(ap);
}

static inline size_t bd_numobs(void *ctx)
{
	return ((struct bd *)ctx)->n;
}

static inline void bd_span(struct bd *d, const void *obs)
{
	uintptr_t a = (uintptr_t)obs, cur = atomic_load(&d->lo);

	while ((cur == 0 || a < cur) &&
	       !atomic_compare_exchange_weak(&d->lo, &cur, a))
		;
	a += d->obs_size;
	cur = atomic_load(&d->hi);
	while (a > cur && !atomic_compare_exchange_weak(&d->hi, &cur, a))
		;
}

static inline void bd_meet(struct bd *d)
{
	int now = atomic_fetch_add(&d->inside, 1) + 1;
	int max = atomic_load(&d->max_inside);

	while (now > max && !atomic_compare_exchange_weak(&d->max_inside, &max, now))
		;
	for (double t0 = now_s(); d->meet > 0 &&
	     atomic_load(&d->max_inside) < d->meet && now_s() - t0 < 5;)
		sleep_us(100);
}

static inline int bd_getobs(void *ctx, size_t idx, void *obs)
{
	struct bd *d = ctx;
	unsigned char *p = obs;

	if (idx >= d->n) {
		bd_violate(d, "getobs(%zu) with n = %zu", idx, d->n);
		return -EINVAL;
	}
	if (atomic_fetch_add(&d->calls[idx], 1) != 0)
		bd_violate(d, "getobs(%zu) called twice", idx);
	bd_span(d, obs);
	bd_meet(d);
	if (d->sleep_us)
		sleep_us(d->sleep_us);
	atomic_fetch_sub(&d->inside, 1);
	for (unsigned i = 0; i < d->nfail; i++)
		if (d->fail[i] == idx)
			return d->fail_code;
	for (size_t b = 0; b < bd_len_of(d, idx); b++)
		p[b] = bd_byte(idx, b);
	if (d->vary_len) {
		atomic_store(&d->set_len_too_big,
			     eachobs_set_length(d->obs_size + 1));
		if (eachobs_set_length(bd_len_of(d, idx)) != 0)
			bd_violate(d, "set_length(%zu) failed", bd_len_of(d, idx));
	}
	return 0;
}

static inline void bd_init(struct bd *d, size_t n, size_t obs_size)
{
	memset(d, 0, sizeof(*d));
	d->n = n;
	d->obs_size = obs_size;
	d->fail_code = -EIO;
	d->calls = calloc(n ? n : 1, sizeof(*d->calls));
	atomic_store(&d->set_len_too_big, 1);
}

static inline void bd_fini(struct bd *d)
{
	free(d->calls);
}

static inline eachobs_dataset bd_dataset(struct bd *d)
{
	return (eachobs_dataset){ .ctx = d, .numobs = bd_numobs,
				  .getobs = bd_getobs,
				  .obs_size = d->obs_size };
}

static inline const char *bd_violation(struct bd *d)
{
	return atomic_load(&d->violated) ? d->violation : NULL;
}

/* Whether entry idx's bytes (its first len) hold its pattern. */
static inline bool bd_bytes_ok(const struct bd *d, size_t idx, const void *obs,
			       size_t len)
{
	const unsigned char *p = obs;

	(void)d;
	for (size_t b = 0; b < len; b++)
		if (p[b] != bd_byte(idx, b))
			return false;
	return true;
}

/* Bytes of one unit as the library lays it out: count observations,
 * rounded up to a cache line (one line for empty ones). */
static inline size_t bd_unit_bytes(size_t cap, size_t obs_size)
{
	size_t b = (cap * obs_size + 63) & ~(size_t)63;

	return b ? b : 64; /* empty units still get a line each */
}

/* The documented memory bound, in units: buffersize + nthreads +
 * max(1, hold) (SERIAL: max(1, hold)). */
static inline size_t bd_unit_bound(const eachobs_options *o, size_t obs_size)
{
	size_t hold = o->hold ? o->hold : 1;
	size_t nt = o->nthreads ? o->nthreads : default_nthreads();
	size_t bs = o->buffersize;

	if (o->executor == EACHOBS_SERIAL)
		return hold;
	if (!bs)
		bs = rule_default_buffersize(
			o->batchsize != 0, o->ordered, nt,
			bd_unit_bytes(o->batchsize ? o->batchsize : 1, obs_size));
	return bs + nt + hold;
}

/* The span of memory getobs wrote stays within the bound. */
static inline bool bd_span_ok(struct bd *d, const eachobs_options *o,
			      size_t *span, size_t *bound)
{
	size_t cap = o->batchsize ? o->batchsize : 1;
	size_t unit = o->batchsize ? bd_unit_bytes(cap, d->obs_size)
				   : bd_unit_bytes(1, d->obs_size);

	*span = atomic_load(&d->hi) - atomic_load(&d->lo);
	*bound = bd_unit_bound(o, d->obs_size) * unit;
	return atomic_load(&d->lo) == 0 || *span <= *bound;
}

#endif
