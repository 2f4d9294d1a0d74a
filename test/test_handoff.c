/*
 * The unordered hand-off alone (src/handoff.c), without an iterator:
 * credits bound what waits in all lanes together to exactly buffersize,
 * whatever the rings' capacity; the consumer gives credits back in groups
 * of at most a quarter of the buffer and all of them before it sleeps;
 * with buffersize + producers + 1 items a producer holding a credit
 * always finds an empty one, wherever the consumer put it back; every
 * item put is taken once, each lane's in the order it was put; no lane
 * waits behind another for more than a streak; a peek shows the items
 * behind the one taken, in its lane, and takes none; a consumer naps for a
 * run of items only while they come a few microseconds apart, a nap
 * ends by itself, naps stop once items do, and a napping consumer still
 * takes every item once; a run of empty items
 * comes from every ring; items given back together fill their lane's
 * share, then the spares; what the consumer keeps back to put together
 * never starves a credit; a depth set lower bounds
 * what waits to it, and one set higher again gives the credits back,
 * from any thread; the halt word ends every wait.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "handoff.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(handoff, .init = deadline, .timeout = 60);

static void init(struct eachobs__handoff *h, size_t b, size_t nitems,
		 unsigned lanes, const _Atomic size_t *halt, size_t *items)
{
	*h = (struct eachobs__handoff){ 0 };
	cr_assert_eq(eachobs__handoff_init(h, b, nitems, lanes, halt, false), 0);
	for (size_t i = 0; i < nitems; i++)
		eachobs__handoff_put_free(h, &items[i]);
}

Test(handoff, credits_bound_what_waits_in_all_lanes_to_exactly_buffersize)
{
	/* 3 and 4: a lane's ring (4 and 8 entries) could hold more. */
	for (size_t b = 1; b <= 9; b++)
		for (unsigned lanes = 1; lanes <= 3; lanes++) {
			_Atomic size_t halt = SIZE_MAX;
			struct eachobs__handoff h;
			size_t items[32];
			size_t put = 0;

			init(&h, b, b + lanes + 1, lanes, &halt, items);
			while (eachobs__handoff_try_take_credits(&h, 1)) {
				unsigned lane = (unsigned)(put % lanes);
				void *it = eachobs__handoff_try_get_free(&h, lane);
				cr_assert_not_null(it, "b %zu: no free item "
						   "after %zu", b, put);
				eachobs__handoff_publish(&h, lane, &it, 1);
				put++;
			}
			cr_assert_eq(put, b);
			cr_assert_not_null(eachobs__handoff_get_ready(&h));
			cr_assert_eq(h.max_waiting, b);
			eachobs__handoff_fini(&h);
		}
}

Test(handoff, credits_come_back_in_groups_and_all_before_the_consumer_sleeps)
{
	for (size_t b = 1; b <= 256; b *= 2) {
		_Atomic size_t halt = SIZE_MAX;
		struct eachobs__handoff h;
		size_t items[300];
		size_t group = b / 4 < 1 ? 1 : b / 4 > 16 ? 16 : b / 4;

		init(&h, b, b + 2, 1, &halt, items);
		for (size_t i = 0; i < b; i++) {
			void *it = eachobs__handoff_try_get_free(&h, 0);
			cr_assert(eachobs__handoff_try_take_credits(&h, 1));
			eachobs__handoff_publish(&h, 0, &it, 1);
		}
		/* Taking one less than a group gives nothing back yet. */
		for (size_t i = 0; i + 1 < group; i++)
			cr_assert_not_null(eachobs__handoff_get_ready(&h));
		cr_assert_eq(atomic_load(&h.credits), 0, "b %zu", b);
		/* The group's last one gives the whole group back. */
		cr_assert_not_null(eachobs__handoff_get_ready(&h));
		cr_assert_eq(atomic_load(&h.credits), group, "b %zu", b);
		if (group > 1) {
			/* One more is owed; a consumer about to sleep gives
			 * it back (the halt word makes the wait return). */
			cr_assert_not_null(eachobs__handoff_get_ready(&h));
			cr_assert_eq(atomic_load(&h.credits), group);
			atomic_store(&halt, 0);
			eachobs__handoff_wait_ready(&h, NULL, NULL);
			cr_assert_eq(atomic_load(&h.credits), group + 1,
				     "b %zu", b);
		}
		eachobs__handoff_fini(&h);
	}
}

Test(handoff, the_halt_word_wakes_every_sleeper_and_fails_their_puts)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[4];

	init(&h, 1, 3, 2, &halt, items);
	void *a = eachobs__handoff_get_free(&h, 0);
	cr_assert(eachobs__handoff_put_ready(&h, 0, a));
	atomic_store(&halt, 0);
	eachobs__handoff_wake(&h);
	cr_assert(eachobs__handoff_halted(&h));
	/* No credit left: these would sleep forever on a running hand-off. */
	cr_assert_not(eachobs__handoff_put_ready(&h, 1, &items[1]));
	cr_assert_eq(eachobs__handoff_take_credits(&h, 1), 0);
	eachobs__handoff_fini(&h);
}

Test(handoff, a_producer_finds_the_empty_items_the_consumer_put_in_other_lanes)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[80];

	/* All 80 go back to lane 0 (its own 32, then the spares); lane 2
	 * still finds every one of them. */
	init(&h, 64, 80, 3, &halt, items);
	for (size_t i = 0; i < 80; i++)
		cr_assert_not_null(eachobs__handoff_try_get_free(&h, 2),
				   "item %zu", i);
	cr_assert_null(eachobs__handoff_try_get_free(&h, 1));
	eachobs__handoff_fini(&h);
}

Test(handoff, a_run_of_empty_items_comes_from_every_ring_each_item_once)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[80];
	void *run[80];
	bool seen[80] = { false };

	/* 32 in lane 0's ring, 48 spares: lane 2 takes 70 in one call,
	 * then the last 10 in runs of 4, 4 and 2. */
	init(&h, 64, 80, 3, &halt, items);
	cr_assert_eq(eachobs__handoff_get_free_run(&h, 2, run, 70), 70);
	for (size_t k = 70; k < 80; k += 4)
		cr_assert_eq(eachobs__handoff_get_free_run(
				     &h, 2, run + k, k + 4 <= 80 ? 4 : 80 - k),
			     k + 4 <= 80 ? 4 : 80 - k);
	for (size_t k = 0; k < 80; k++) {
		size_t i = (size_t)((size_t *)run[k] - items);
		cr_assert_lt(i, 80);
		cr_assert_not(seen[i], "item %zu taken twice", i);
		seen[i] = true;
	}
	cr_assert_null(eachobs__handoff_try_get_free(&h, 0));
	/* Halted, a run that cannot be filled ends short. */
	atomic_store(&halt, 0);
	cr_assert_eq(eachobs__handoff_get_free_run(&h, 1, run, 4), 0);
	eachobs__handoff_fini(&h);
}

/*
 * Items the consumer kept back go to its lane together, up to the
 * EACHOBS__LANE_FREE that lane keeps, and the rest of the group to the
 * spares: none lost, none twice, the lane never past its share. One lane,
 * 80 items: its producer takes and loads 40; the consumer gives each back
 * once it took the next, as an iterator does, so that groups of up to 15
 * go back at each settle, and the last group, 8, finds room in the lane
 * for one.
 */
Test(handoff, a_group_put_back_together_fills_its_lane_then_the_spares)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[80];
	void *run[80], *prev = NULL;
	bool seen[80] = { false };

	init(&h, 64, 80, 1, &halt, items);
	cr_assert_eq(ck_ring_size(&h.lanes[0].free), EACHOBS__LANE_FREE);
	cr_assert_eq(eachobs__handoff_get_free_run(&h, 0, run, 40), 40);
	cr_assert_eq(eachobs__handoff_take_credits(&h, 40), 40);
	eachobs__handoff_publish(&h, 0, run, 40);
	for (int i = 0; i < 40; i++) {
		void *item = eachobs__handoff_get_ready(&h);
		cr_assert_not_null(item, "item %d", i);
		if (prev)
			eachobs__handoff_put_free(&h, prev);
		prev = item;
	}
	cr_assert_gt(h.nstash, 1, "the last group is kept back");
	atomic_store(&halt, 0);
	eachobs__handoff_wait_ready(&h, NULL, NULL); /* gives it all back */
	atomic_store(&halt, SIZE_MAX);
	cr_assert_eq(h.nstash, 0);
	eachobs__handoff_put_free(&h, prev);
	cr_assert_eq(ck_ring_size(&h.lanes[0].free), EACHOBS__LANE_FREE,
		     "the lane holds %u, keeps %d",
		     ck_ring_size(&h.lanes[0].free), EACHOBS__LANE_FREE);
	cr_assert_eq(ck_ring_size(&h.spare), 80 - EACHOBS__LANE_FREE);
	cr_assert_eq(eachobs__handoff_get_free_run(&h, 0, run, 80), 80);
	for (size_t k = 0; k < 80; k++) {
		size_t i = (size_t)((size_t *)run[k] - items);
		cr_assert_lt(i, 80);
		cr_assert_not(seen[i], "item %zu back twice", i);
		seen[i] = true;
	}
	eachobs__handoff_fini(&h);
}

/*
 * One thread plays every part, in a seeded random order: producers take a
 * credit and an item (each holds at most one while it "loads"), publish
 * it later; the consumer takes items, holds up to `hold` of them, gives
 * them back in any order, and now and then sleeps. With buffersize +
 * producers + hold items, a credit always finds an item, whatever the
 * consumer kept back to put together.
 */
static void keep_back_at(size_t b, unsigned lanes, size_t hold, unsigned seed)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[32];
	void *loading[4] = { NULL }, *held[4];
	size_t nheld = 0;

	init(&h, b, b + lanes + hold, lanes, &halt, items);
	for (int step = 0; step < 4000; step++) {
		unsigned lane = (unsigned)(rand_r(&seed) % lanes);
		switch (rand_r(&seed) % 5) {
		case 0:
			if (loading[lane] ||
			    !eachobs__handoff_try_take_credits(&h, 1))
				break;
			loading[lane] = eachobs__handoff_try_get_free(&h, lane);
			cr_assert_not_null(loading[lane],
					   "b %zu P %u hold %zu step %d: a "
					   "credit found no item",
					   b, lanes, hold, step);
			break;
		case 1:
			if (loading[lane])
				eachobs__handoff_publish(&h, lane,
							 &loading[lane], 1);
			loading[lane] = NULL;
			break;
		case 2:
			if (nheld < hold &&
			    (held[nheld] = eachobs__handoff_get_ready(&h)))
				nheld++;
			break;
		case 3:
			if (nheld) {
				size_t i = rand_r(&seed) % nheld;
				eachobs__handoff_put_free(&h, held[i]);
				held[i] = held[--nheld];
			}
			break;
		default:
			if (rand_r(&seed) % 8)
				break;
			atomic_store(&halt, 0);
			eachobs__handoff_wait_ready(&h, NULL, NULL);
			atomic_store(&halt, SIZE_MAX);
		}
	}
	eachobs__handoff_fini(&h);
}

Test(handoff, empty_items_the_consumer_keeps_back_never_starve_a_credit)
{
	for (size_t b = 1; b <= 20; b += 3)
		for (unsigned lanes = 1; lanes <= 4; lanes++)
			for (size_t hold = 1; hold <= 4; hold++)
				keep_back_at(b, lanes, hold,
					     (unsigned)(b * 131 + lanes * 17 +
							hold));
}

/* ---- producers against a consumer -------------------------------------- */

enum { ITEMS_MAX = 256, LANES_MAX = 16 };

struct run {
	struct eachobs__handoff h;
	_Atomic size_t halt;
	size_t items[ITEMS_MAX];
	size_t b, n;              /* buffersize, units to hand over */
	unsigned loaders;
	_Atomic unsigned next_lane;
	_Atomic size_t next;      /* next unit to load */
	size_t *got;              /* times each unit was taken */
	size_t *lane_of;          /* the lane each unit was put in */
	_Atomic bool starved;     /* a loader with a credit found no item */
	bool runs;                /* loaders move runs of up to 4 */
	bool vary;                /* loader 0 moves the depth around */
	bool paced;               /* loaders put an item every few us, and
				   * the consumer may nap */
};

/* A busy wait of ns: a sleep this short lasts tens of microseconds. */
static void pace(uint64_t ns)
{
	uint64_t t0 = eachobs__now_ns();

	while (eachobs__now_ns() - t0 < ns)
		;
}

static void *loader_main(void *arg)
{
	struct run *r = arg;
	unsigned lane = atomic_fetch_add(&r->next_lane, 1);
	unsigned seed = lane * 7919u + (unsigned)r->b;
	void *run[4];

	for (size_t k = 0;; k++) {
		if (r->vary && lane == 0 && k % 23 == 0)
			eachobs__handoff_set_depth(&r->h,
						   rand_r(&seed) % r->b + 1);
		size_t want = r->runs ? 4 : 1;
		size_t c = eachobs__handoff_take_credits(&r->h, want);
		if (!c)
			return NULL;
		size_t first = atomic_fetch_add(&r->next, c), k = 0;
		if (r->paced)
			pace(3000 * r->loaders);
		for (; k < c && first + k < r->n; k++) {
			/* A look through the rings may miss an item that moves
			 * behind it (handoff.h); a few more find one. */
			run[k] = NULL;
			for (int look = 0; !run[k] && look < 64; look++)
				run[k] = eachobs__handoff_try_get_free(&r->h,
								       lane);
			if (!run[k]) {
				atomic_store(&r->starved, true);
				run[k] = eachobs__handoff_get_free(&r->h, lane);
			}
			*(size_t *)run[k] = first + k;
			r->lane_of[first + k] = lane;
		}
		if (k < c)
			eachobs__handoff_give_credits(&r->h, c - k);
		eachobs__handoff_publish(&r->h, lane, run, k);
		if (k < c)
			return NULL;
	}
}

static void hand_over_at(size_t b, unsigned loaders, size_t n, bool runs,
			 bool vary, bool paced)
{
	/* The hand-off's members are cache-line aligned: so must r be. */
	struct run *r = aligned_alloc(64, (sizeof(*r) + 63) / 64 * 64);
	pthread_t th[LANES_MAX];
	size_t last_in_lane[LANES_MAX];
	/* A run holds up to 4 items: the bound is counted in credits, and
	 * the items a run holds are covered by its credits. */
	size_t nitems = b + loaders + 1;

	memset(r, 0, sizeof(*r));
	atomic_init(&r->halt, SIZE_MAX);
	r->b = b;
	r->n = n;
	r->loaders = loaders;
	r->runs = runs;
	r->vary = vary;
	r->paced = paced;
	r->got = calloc(n, sizeof(size_t));
	r->lane_of = calloc(n, sizeof(size_t));
	for (unsigned j = 0; j < LANES_MAX; j++)
		last_in_lane[j] = SIZE_MAX;
	init(&r->h, b, nitems, loaders, &r->halt, r->items);
	eachobs__handoff_allow_naps(&r->h, paced);
	for (unsigned i = 0; i < loaders; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, loader_main, r), 0);
	for (size_t taken = 0; taken < n;) {
		size_t *it = eachobs__handoff_get_ready(&r->h);
		if (!it) {
			eachobs__handoff_wait_ready(&r->h, NULL, NULL);
			continue;
		}
		cr_assert_lt(*it, n);
		r->got[*it]++;
		/* A lane keeps its producer's order (units rise in it). */
		size_t lane = r->lane_of[*it], prev = last_in_lane[lane];
		cr_assert(prev == SIZE_MAX || prev < *it,
			  "lane %zu: unit %zu after %zu", lane, *it, prev);
		last_in_lane[lane] = *it;
		taken++;
		/* Sometimes the consumer is slow: loaders fill the buffer. */
		if (taken % 97 == 0)
			usleep(100);
		eachobs__handoff_put_free(&r->h, it);
	}
	atomic_store(&r->halt, 0);
	eachobs__handoff_wake(&r->h);
	for (unsigned i = 0; i < loaders; i++)
		pthread_join(th[i], NULL);
	for (size_t u = 0; u < n; u++)
		cr_assert_eq(r->got[u], 1, "b %zu P %u: unit %zu taken %zu times",
			     b, loaders, u, r->got[u]);
	cr_assert_leq(r->h.max_waiting, b, "b %zu P %u: %zu waited", b,
		      loaders, r->h.max_waiting);
	cr_assert_not(atomic_load(&r->starved),
		      "b %zu P %u: a loader holding a credit found no free "
		      "item among b + P + 1",
		      b, loaders);
	eachobs__handoff_fini(&r->h);
	free(r->got);
	free(r->lane_of);
	free(r);
}

static void hand_over(size_t b, unsigned loaders, size_t n, bool runs)
{
	hand_over_at(b, loaders, n, runs, false, false);
}

/* Fill with credits and items, as far as they go: the count put. */
static size_t fill(struct eachobs__handoff *h)
{
	size_t put = 0;

	while (eachobs__handoff_try_take_credits(h, 1)) {
		void *it = eachobs__handoff_try_get_free(h, 0);
		cr_assert_not_null(it);
		eachobs__handoff_publish(h, 0, &it, 1);
		put++;
	}
	return put;
}

/* Put a run of up to want items in lane, as many as there are credits
 * for, each stamped with the lane above bit 32 and its count in the lane
 * (*count, advanced) below: the count put. */
static size_t put_run(struct eachobs__handoff *h, unsigned lane, size_t want,
		      size_t *count)
{
	size_t k = eachobs__handoff_try_take_credits(h, want);
	void *run[16];

	cr_assert_leq(k, 16);
	for (size_t j = 0; j < k; j++) {
		run[j] = eachobs__handoff_try_get_free(h, lane);
		cr_assert_not_null(run[j], "lane %u: no empty item for a "
				   "credit", lane);
		*(size_t *)run[j] = (size_t)lane << 32 | (*count)++;
	}
	eachobs__handoff_publish(h, lane, run, k);
	return k;
}

/* Take everything and give it back, settling what is owed (a consumer
 * about to sleep; the halt word makes the wait return). */
static size_t drain(struct eachobs__handoff *h, _Atomic size_t *halt)
{
	size_t got = 0;
	void *it;

	while ((it = eachobs__handoff_get_ready(h))) {
		eachobs__handoff_put_free(h, it);
		got++;
	}
	atomic_store(halt, 0);
	eachobs__handoff_wait_ready(h, NULL, NULL);
	atomic_store(halt, SIZE_MAX);
	return got;
}

Test(handoff, a_lowered_depth_bounds_what_waits_and_a_raised_one_gives_it_back)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[40];

	init(&h, 32, 35, 2, &halt, items);
	/* Lowered with every credit free: taken out at once. */
	eachobs__handoff_set_depth(&h, 8);
	cr_assert_eq(fill(&h), 8);
	cr_assert_eq(drain(&h, &halt), 8);
	cr_assert_eq(fill(&h), 8, "the depth held over a round");
	drain(&h, &halt);
	/* Raised: the withheld credits come back. */
	eachobs__handoff_set_depth(&h, 24);
	cr_assert_eq(fill(&h), 24);
	/* Lowered while all of them wait: they stay until taken, and what
	 * the consumer gives back is withheld down to the depth. */
	eachobs__handoff_set_depth(&h, 4);
	cr_assert_eq(drain(&h, &halt), 24);
	cr_assert_eq(fill(&h), 4);
	drain(&h, &halt);
	/* Clamped to [1, buffersize]. */
	eachobs__handoff_set_depth(&h, 0);
	cr_assert_eq(fill(&h), 1);
	drain(&h, &halt);
	eachobs__handoff_set_depth(&h, 1000);
	cr_assert_eq(fill(&h), 32);
	eachobs__handoff_fini(&h);
}

Test(handoff, a_depth_that_moves_while_producers_wait_never_stalls)
{
	for (size_t b = 1; b <= 64; b *= 4)
		for (unsigned p = 1; p <= 16; p *= 4) {
			hand_over_at(b, p, 3000, false, true, false);
			hand_over_at(b, p, 3000, true, true, false);
		}
}

/* One thread: runs of 1 to b items published into one lane and taken
 * a few at a time, many times around its ring, so that each side's last
 * look at the other's index goes stale and wraps: every item comes out
 * once, in the order put, and a consumer that finds none has taken all. */
Test(handoff, runs_put_in_a_lane_come_out_in_order_across_its_ring_end)
{
	for (size_t b = 1; b <= 16; b++) {
		_Atomic size_t halt = SIZE_MAX;
		struct eachobs__handoff h;
		size_t items[32];
		size_t next = 0, put = 0, rounds = 0;

		init(&h, b, b + 2, 1, &halt, items);
		for (size_t i = 0; i < b + 2; i++)
			items[i] = SIZE_MAX;
		while (rounds++ < 200) {
			put_run(&h, 0, 1 + rounds % b, &put);
			/* Take some, or all every third round. */
			size_t take = rounds % 3 ? (rounds % b) + 1 : SIZE_MAX;
			size_t *got;
			while (take-- && (got = eachobs__handoff_get_ready(&h))) {
				cr_assert_eq(*got, next, "b %zu: item %zu came "
					     "out where %zu was due", b, *got,
					     next);
				next++;
				eachobs__handoff_put_free(&h, got);
			}
			if (next == put) {
				cr_assert_null(eachobs__handoff_get_ready(&h));
				/* Settle what is owed, as before a sleep. */
				drain(&h, &halt);
			}
		}
		cr_assert_gt(put, 4 * b, "b %zu: %zu put", b, put);
		eachobs__handoff_fini(&h);
	}
}

/* Two lanes, runs of 1..b items in each, taken in streaks: after every
 * take, each peek is the item that many entries behind it in the lane it
 * came from, or NULL, and it takes nothing. */
Test(handoff, a_peek_shows_what_is_behind_the_item_taken_in_its_lane_and_takes_none)
{
	for (size_t b = 1; b <= 8; b++) {
		_Atomic size_t halt = SIZE_MAX;
		struct eachobs__handoff h;
		size_t items[32], put[2] = { 0, 0 }, next[2] = { 0, 0 };
		size_t peeked = 0;

		init(&h, b, b + 3, 2, &halt, items);
		for (size_t rounds = 0; rounds < 300; rounds++) {
			unsigned lane = rounds % 2;
			put_run(&h, lane, 1 + rounds % b, &put[lane]);
			size_t *got;
			while ((got = eachobs__handoff_get_ready(&h))) {
				unsigned l = (unsigned)(*got >> 32);
				size_t c = *got & 0xffffffffu;
				cr_assert_eq(c, next[l], "b %zu lane %u", b, l);
				next[l]++;
				for (unsigned d = 1; d <= b + 1; d++) {
					size_t *ahead =
						eachobs__handoff_peek_ready(&h, d);
					if (!ahead)
						continue;
					cr_assert_eq(*ahead,
						     (size_t)l << 32 | (c + d),
						     "b %zu: %u behind lane %u's "
						     "%zu", b, d, l, c);
					peeked++;
				}
				eachobs__handoff_put_free(&h, got);
			}
			cr_assert_eq(next[0] + next[1], put[0] + put[1],
				     "b %zu: a peek took an item", b);
			drain(&h, &halt);
		}
		/* A run of two or more was there to see. */
		if (b > 1)
			cr_assert_gt(peeked, 100, "b %zu: %zu peeks", b, peeked);
		eachobs__handoff_fini(&h);
	}
}

Test(handoff, every_item_is_taken_once_in_its_lanes_order_and_loaders_never_starve)
{
	for (size_t b = 1; b <= 128; b *= 4)
		for (unsigned p = 1; p <= 16; p *= 2) {
			hand_over(b, p, 3000, false);
			hand_over(b, p, 3000, true);
		}
}

Test(handoff, items_a_few_microseconds_apart_are_each_taken_once_by_a_napping_consumer)
{
	for (size_t b = 8; b <= 64; b *= 8)
		for (unsigned p = 1; p <= 16; p *= 4) {
			hand_over_at(b, p, 2000, false, false, true);
			hand_over_at(b, p, 2000, true, false, true);
		}
}

Test(handoff, a_consumer_naps_for_a_run_only_while_items_come_a_few_microseconds_apart)
{
	/* Spins cover shorter gaps; longer ones are worth a wake-up each. */
	cr_assert_eq(eachobs__handoff_nap_ns(EACHOBS__NAP_GAP_MIN - 1, 256), 0);
	cr_assert_eq(eachobs__handoff_nap_ns(EACHOBS__NAP_GAP_MAX + 1, 256), 0);
	cr_assert_eq(eachobs__handoff_nap_ns(5000, 256),
		     EACHOBS__NAP_RUN * 5000);
	/* A run is at most a quarter of the depth, and at least 2. */
	cr_assert_eq(eachobs__handoff_nap_ns(5000, 8), 2 * 5000);
	cr_assert_eq(eachobs__handoff_nap_ns(5000, 7), 0);
	cr_assert_leq(eachobs__handoff_nap_ns(EACHOBS__NAP_GAP_MAX, 256),
		      EACHOBS__NAP_MAX_NS);
}

struct late_put {
	struct eachobs__handoff *h;
	void *item;
};

static void *put_after_2ms(void *arg)
{
	struct late_put *lp = arg;

	usleep(2000);
	cr_assert(eachobs__handoff_try_take_credits(lp->h, 1));
	eachobs__handoff_publish(lp->h, 0, &lp->item, 1);
	return NULL;
}

Test(handoff, a_nap_ends_by_itself_and_naps_stop_once_items_do)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[8];
	struct late_put lp = { &h, NULL };
	pthread_t th;

	init(&h, 64, 8, 1, &halt, items);
	eachobs__handoff_allow_naps(&h, true);
	/* As if 8000 items had come 5 us apart before this wait. With only
	 * a few, the time this thread lost before the wait (a preemption,
	 * valgrind) weighed so much that the gap it saw was too long for a
	 * nap, and the wait slept for an item that nothing puts. */
	h.naps.gap_ns = 5000;
	h.taken = 8000;
	h.naps.taken_at = 0;
	h.naps.waited_at = eachobs__now_ns() - 8000 * 5000ull;
	eachobs__handoff_wait_ready(&h, NULL, NULL);
	cr_assert_eq(h.naps.count, 1);
	cr_assert_null(eachobs__handoff_get_ready(&h));
	/* Nothing came during the nap: the waits that follow sleep until
	 * the put 2 ms later wakes them, they do not nap on. */
	lp.item = eachobs__handoff_try_get_free(&h, 0);
	cr_assert_eq(pthread_create(&th, NULL, put_after_2ms, &lp), 0);
	void *got;
	while (!(got = eachobs__handoff_get_ready(&h)))
		eachobs__handoff_wait_ready(&h, NULL, NULL);
	pthread_join(th, NULL);
	cr_assert_eq(got, lp.item);
	cr_assert_lt(h.naps.count, 4, "%zu naps in 2 ms without an item",
		     h.naps.count);
	eachobs__handoff_fini(&h);
}

Test(handoff, no_lane_waits_behind_another_for_more_than_a_streak)
{
	_Atomic size_t halt = SIZE_MAX;
	struct eachobs__handoff h;
	size_t items[200];
	size_t b = 128;

	/* Lane 0 holds 100 items, lane 1 one: the consumer, on lane 0,
	 * takes lane 1's within a streak, though lane 0 never ran dry. */
	init(&h, b, 200, 2, &halt, items);
	for (size_t i = 0; i < 101; i++) {
		unsigned lane = i == 100;
		size_t *it = eachobs__handoff_try_get_free(&h, lane);
		*it = i;
		cr_assert(eachobs__handoff_try_take_credits(&h, 1));
		eachobs__handoff_publish(&h, lane, (void **)&it, 1);
	}
	size_t when = SIZE_MAX;
	for (size_t k = 0; k < 101; k++) {
		size_t *it = eachobs__handoff_get_ready(&h);
		cr_assert_not_null(it);
		if (*it == 100)
			when = k;
	}
	cr_assert_leq(when, EACHOBS__LANE_STREAK, "lane 1's item came %zu-th",
		      when);
	eachobs__handoff_fini(&h);
}
