/*
 * A randomized sweep over the options, with a fixed seed.
 *
 * Each Test covers one executor and one value of `ordered`; it runs the
 * configurations that a splitmix64 stream draws from the sets below and
 * checks, for every one: each index yielded exactly once (in index order
 * when ordered or SERIAL), the slot bytes getobs wrote both when yielded and
 * again right before the following eachobs_next, the pointer being the slot
 * getobs wrote, at most buffersize + nthreads + 1 live observations (1 for
 * SERIAL), the ordered window, which threads ran getobs, getobs failures at
 * a random index, and early close after a random number of observations.
 *
 * A failure prints the configuration as a C initializer. To replay it, paste
 * it into `replay_cfg` below and run `test_sweep --filter 'sweep/replay'`
 * after removing `.disabled = true` from that test.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Fixed, so that every run checks the same configurations; build with
 * -DSWEEP_SEED=... to explore others. */
#ifndef SWEEP_SEED
#define SWEEP_SEED 0x5eedf00dcafeULL
#endif
/* Configurations per Test; the valgrind setup builds a lighter copy with
 * -DCONFIGS_PER_TEST=50 (the size-by-threads grid and 25 random ones). */
#ifndef CONFIGS_PER_TEST
#define CONFIGS_PER_TEST 300
#endif

struct cfg {
	size_t n;
	unsigned nthreads;
	size_t buffersize;
	size_t basesize;
	unsigned oversubscription;
	eachobs_executor executor;
	bool ordered;
	size_t obs_size;
	unsigned rand_sleep_us; /* a quarter of the getobs calls sleep 0..this */
	size_t close_after;     /* SIZE_MAX: consume to the end */
	size_t fail_idx;        /* TD_NONE: no failure */
	int fail_code;
	uint64_t seed;          /* slot pattern and sleeps */
};

/* Each sweep test runs 300 configurations: a longer deadline (50 s). */
static void sweep_deadline(void)
{
	deadline_after(50);
}

TestSuite(sweep, .init = sweep_deadline, .timeout = 60);

/* A size_t field as C source: SIZE_MAX spelled out. */
static const char *zu(char *buf, size_t len, size_t v)
{
	if (v == SIZE_MAX)
		snprintf(buf, len, "SIZE_MAX");
	else
		snprintf(buf, len, "%zu", v);
	return buf;
}

static void cfg_str(char *buf, size_t len, const struct cfg *c)
{
	char close_after[24], fail_idx[24];

	snprintf(buf, len,
		 "{ .n = %zu, .nthreads = %u, .buffersize = %zu, .basesize = %zu, "
		 ".oversubscription = %u, .executor = EACHOBS_%s, .ordered = %d, "
		 ".obs_size = %zu, .rand_sleep_us = %u, .close_after = %s, "
		 ".fail_idx = %s, .fail_code = %d, .seed = 0x%" PRIx64 " }",
		 c->n, c->nthreads, c->buffersize, c->basesize, c->oversubscription,
		 executor_name(c->executor), (int)c->ordered, c->obs_size,
		 c->rand_sleep_us, zu(close_after, sizeof(close_after), c->close_after),
		 zu(fail_idx, sizeof(fail_idx), c->fail_idx), c->fail_code, c->seed);
}

static uint64_t pick(uint64_t *rng, uint64_t bound)
{
	return bound ? splitmix64(rng) % bound : 0;
}

/* Configuration i of the stream for one executor and ordering. The first
 * few walk the small sizes deterministically; the rest are random. */
static struct cfg gen_cfg(uint64_t *rng, unsigned i, eachobs_executor ex,
			  bool ordered)
{
	static const size_t sizes[] = { 0, 1, 2, 17, 1000 };
	static const unsigned nthreads[] = { 1, 2, 3, 8, 64 };
	static const size_t buffersizes[] = { 1, 2, 5, 64 };
	static const unsigned oversubs[] = { 0, 1, 3 };
	static const size_t obs_sizes[] = { 0, 1, 8, 4096, 13 };
	struct cfg c = { .executor = ex, .ordered = ordered };
	uint64_t r;

	if (i < 25)
		c.n = sizes[i % 5];
	else if ((r = pick(rng, 4)) < 2)
		c.n = sizes[pick(rng, 5)];
	else
		c.n = (size_t)pick(rng, 5001);
	c.nthreads = nthreads[i < 25 ? i / 5 : pick(rng, 5)];
	/* Now and then the defaults, with the bound computed from them. */
	if (pick(rng, 16) == 0)
		c.nthreads = 0;
	c.buffersize = pick(rng, 16) == 0 ? 0 : buffersizes[pick(rng, 4)];
	switch (pick(rng, 4)) {
	case 0:
		c.basesize = 0;
		break;
	case 1:
		c.basesize = 1;
		break;
	case 2:
		c.basesize = 7;
		break;
	default:
		c.basesize = 1 + (size_t)pick(rng, c.n + 10);
		break;
	}
	c.oversubscription = oversubs[pick(rng, 3)];
	c.obs_size = obs_sizes[pick(rng, 5)];
	if (pick(rng, 4) == 0)
		c.rand_sleep_us = 1 + (unsigned)pick(rng, 200);
	c.close_after = pick(rng, 5) == 0 ? (size_t)pick(rng, c.n + 1) : SIZE_MAX;
	c.fail_idx = TD_NONE;
	if (c.n > 0 && pick(rng, 6) == 0) {
		c.fail_idx = (size_t)pick(rng, c.n);
		c.fail_code = pick(rng, 8) == 0 ? 1 + (int)pick(rng, 100)
						: -1 - (int)pick(rng, 200);
	}
	c.seed = splitmix64(rng);
	return c;
}

static void run_cfg(const struct cfg *cfg)
{
	eachobs_options o = { .nthreads = cfg->nthreads,
			      .buffersize = cfg->buffersize,
			      .basesize = cfg->basesize,
			      .oversubscription = cfg->oversubscription,
			      .executor = cfg->executor,
			      .ordered = cfg->ordered };
	bool ordered = cfg->ordered || cfg->executor == EACHOBS_SERIAL;
	bool failing = cfg->fail_idx != TD_NONE;
	int want = !failing ? 0
		   : cfg->fail_code > 0 ? -ERANGE
		   : cfg->fail_code == -EINTR ? -ERESTART
		   : cfg->fail_code;
	size_t bound = slot_bound(&o, cfg->obs_size);
	eachobs_dataset data;
	eachobs_iter *it = NULL;
	struct td td;
	struct cons c;
	char s[512];
	size_t idx = 0;
	long calls;
	int rc;

	cfg_str(s, sizeof(s), cfg);
	td_init(&td, cfg->n, cfg->obs_size, SIZE_MAX);
	td.seed = cfg->seed;
	td.rand_sleep_us = cfg->rand_sleep_us;
	td.fail_idx = cfg->fail_idx;
	td.fail_code = cfg->fail_code;
	td.check_threads = true;
	if (ordered)
		td.window = bound;
	data = td_dataset(&td);

	rc = eachobs_parallel(&it, &data, &o);
	cr_assert_eq(rc, 0, "%s: eachobs_parallel returned %d (%s)", s, rc,
		     eachobs_strerror(rc));
	cr_assert_eq(atomic_load(&td.numobs_calls), 1, "%s: numobs called %ld times",
		     s, atomic_load(&td.numobs_calls));
	cons_init(&c, it, &td, ordered);

	rc = 1;
	while (c.yielded < cfg->close_after) {
		rc = cons_next(&c, NULL, &idx);
		cr_assert(c.err[0] == 0, "%s: %s", s, c.err);
		if (rc != 1)
			break;
	}

	if (rc == 1) {
		/* Closing early, with an observation held. */
		cr_assert_eq(c.yielded, cfg->close_after, "%s", s);
	} else if (failing) {
		cr_assert_eq(rc, want, "%s: eachobs_next returned %d (%s) after %zu "
				       "observations, expected the failure %d",
			     s, rc, eachobs_strerror(rc), c.yielded, want);
		cr_assert_eq(idx, cfg->fail_idx, "%s: failure reported at idx %zu", s, idx);
		if (ordered)
			cr_assert_eq(c.yielded, cfg->fail_idx,
				     "%s: ordered: %zu observations before the failure",
				     s, c.yielded);
		else
			cr_assert_eq(c.seen[cfg->fail_idx], 0,
				     "%s: the failed index was also yielded", s);
		idx = SIZE_MAX;
		rc = cons_next(&c, NULL, &idx);
		cr_assert(c.err[0] == 0, "%s: %s", s, c.err);
		cr_assert_eq(rc, want, "%s: the call after the failure returned %d", s, rc);
		cr_assert_eq(idx, cfg->fail_idx, "%s: the call after the failure gave "
						 "idx %zu", s, idx);
	} else {
		cr_assert_eq(rc, 0, "%s: eachobs_next returned %d (%s) after %zu "
				    "observations", s, rc, eachobs_strerror(rc), c.yielded);
		cr_assert_eq(c.yielded, cfg->n, "%s: %zu observations yielded", s,
			     c.yielded);
		cr_assert(cons_all_seen(&c), "%s: an index was never yielded", s);
		rc = cons_next(&c, NULL, NULL);
		cr_assert(c.err[0] == 0, "%s: %s", s, c.err);
		cr_assert_eq(rc, 0, "%s: the call after the end returned %d", s, rc);
	}

	cons_close(&c);
	cr_assert(c.err[0] == 0, "%s: %s", s, c.err);
	cr_assert_null(td_violation(&td), "%s: %s", s, td_violation(&td));
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: %ld allocations left after close",
		     s, eachobs__alloc_live());
	calls = atomic_load(&td.getobs_calls);
	cr_assert_leq(calls, (long)cfg->n, "%s: %ld getobs calls", s, calls);
	if (!failing && cfg->close_after >= cfg->n)
		cr_assert_eq(calls, (long)cfg->n, "%s: %ld getobs calls", s, calls);
	cr_assert_leq(atomic_load(&td.max_live), (long)bound,
		      "%s: %ld observations live at once, bound %zu", s,
		      atomic_load(&td.max_live), bound);
	if (cfg->executor == EACHOBS_SERIAL)
		cr_assert_eq(atomic_load(&td.off_consumer), 0,
			     "%s: SERIAL ran %ld getobs calls off the consumer's thread",
			     s, atomic_load(&td.off_consumer));
	if (cfg->executor == EACHOBS_BACKGROUND)
		cr_assert_eq(atomic_load(&td.on_consumer), 0,
			     "%s: BACKGROUND ran %ld getobs calls on the consumer's "
			     "thread", s, atomic_load(&td.on_consumer));
	cr_assert_eq(atomic_load(&td.numobs_calls), 1, "%s", s);
	cons_fini(&c);
	td_fini(&td);
}

static void sweep(eachobs_executor ex, bool ordered)
{
	uint64_t rng = SWEEP_SEED ^ ((uint64_t)ex * 2 + ordered) * 0x1000193ULL;

	for (unsigned i = 0; i < CONFIGS_PER_TEST; i++) {
		struct cfg c = gen_cfg(&rng, i, ex, ordered);

		run_cfg(&c);
	}
}

Test(sweep, threaded_unordered)
{
	sweep(EACHOBS_THREADED, false);
}

Test(sweep, threaded_ordered)
{
	sweep(EACHOBS_THREADED, true);
}

Test(sweep, background_unordered)
{
	sweep(EACHOBS_BACKGROUND, false);
}

Test(sweep, background_ordered)
{
	sweep(EACHOBS_BACKGROUND, true);
}

Test(sweep, serial_unordered)
{
	sweep(EACHOBS_SERIAL, false);
}

Test(sweep, serial_ordered)
{
	sweep(EACHOBS_SERIAL, true);
}

/* Paste a configuration printed by a failure here to run it alone. */
static const struct cfg replay_cfg = { .n = 17, .nthreads = 3, .buffersize = 2,
				       .executor = EACHOBS_THREADED, .ordered = true,
				       .obs_size = 8, .close_after = SIZE_MAX,
				       .fail_idx = TD_NONE, .seed = 1 };

Test(sweep, replay, .disabled = true)
{
	run_cfg(&replay_cfg);
}
