/*
 * The loader (src/load.c) on its own, without an iterator: what a thread
 * learns of one loader's getobs is that loader's, not its address's.
 */
#define _GNU_SOURCE
#include "load.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <string.h>

TestSuite(load, .init = deadline, .timeout = 60);

enum { N = 256 };

static int noop(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	(void)idx;
	(void)obs;
	return 0;
}

static struct eachobs__sampler sampler = {
	.order_len = N, .len = N, .shard_count = 1, .identity = true
};
static _Alignas(64) unsigned char data[64];
static size_t idx[1], len[1];
static int status[1];
static struct eachobs__slot slot;
static _Atomic bool closing;
static struct eachobs__layout layout;

/* A loader of single observations over sampler, into slot, at *ld. */
static void setup(struct eachobs__loader *ld)
{
	memset(ld, 0, sizeof(*ld));
	eachobs__loader_setup(ld);
	ld->getobs = noop;
	ld->obs_size = sizeof(data);
	cr_assert_eq(eachobs__layout_init(&layout, sizeof(data), NULL, 0, 1), 0);
	ld->layout = &layout;
	ld->sampler = &sampler;
	ld->npos = N;
	ld->cap = 1;
	ld->skip_errors = true;
	ld->slots = &slot;
	ld->nslots = 1;
	ld->closing = &closing;
	slot.b = (struct eachobs__buf){ data, idx, len, status, 0 };
}

/* A loader set up where a closed one was (an iterator allocated where the
 * last one was freed) starts with no estimate, whatever the other's: not
 * "not cheap", which a slow machine (valgrind) would give anyway, but not
 * measured at all. */
Test(load, a_cost_estimate_belongs_to_its_loader_not_its_address)
{
	struct eachobs__loader ld;

	setup(&ld);
	cr_assert_eq(eachobs__getobs_cost(&ld), UINT64_MAX,
		     "a cost before any getobs");
	for (size_t u = 0; u < N; u++)
		eachobs__fill(&ld, &slot, u);
	uint64_t cost = eachobs__getobs_cost(&ld);
	eachobs__loader_fini(&ld);
	cr_assert_neq(cost, UINT64_MAX, "no cost measured after %d getobs",
		      N);
	setup(&ld);
	cr_assert_eq(eachobs__getobs_cost(&ld), UINT64_MAX,
		     "a loader at the address of one that measured %llu ns "
		     "took its estimate over",
		     (unsigned long long)cost);
	cr_assert_not(eachobs__getobs_cheap(&ld));
	eachobs__loader_fini(&ld);
}
