/*
 * The unordered mode's loaders: a worker claims units from the deques
 * (deque.c), loads them (load.c) and puts them through the hand-off
 * (handoff.c); the THREADED consumer helps the same way. Unbatched, cheap
 * observations move in runs; batches may be filled by several threads.
 */
#define _GNU_SOURCE
#include "deque.h"
#include "handoff.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

/* The mode's state (it->ms). */
struct eachobs__unordered {
	struct eachobs__deques deques;
	struct eachobs__handoff handoff; /* lane j: worker j; then the
					  * consumer's */
	unsigned consumer_lane;
	/* THREADED: what the consumer's last help took per observation (0:
	 * not measured yet). */
	uint64_t help_ns;
};

static struct eachobs__unordered *U(const eachobs_iter *it)
{
	return it->ms;
}

/* Every slot starts empty in the hand-off. */
static int init(eachobs_iter *it, unsigned workers)
{
	struct eachobs__unordered *u = eachobs__alloc_aligned(sizeof(*u));

	if (!u)
		return eachobs__fail(-ENOMEM, "out of memory for the "
				     "unordered mode's state");
	memset(u, 0, sizeof(*u));
	it->ms = u;
	u->consumer_lane = workers;
	/* Batched, a loader takes a slot before its credit (worker()). */
	if (eachobs__handoff_init(&u->handoff, it->buffersize, it->nslots,
				  workers + 1, &it->load.limit,
				  it->batchsize > 0) < 0)
		return eachobs__fail(-ENOMEM,
				     "out of memory for the hand-off rings "
				     "(%zu slots, %u lanes)",
				     it->nslots, workers + 1);
	/* Autotune reads the consumer's waits as the loaders' shortfall; a
	 * nap is a wait while items are coming. */
	eachobs__handoff_allow_naps(&u->handoff, it->tuning == NULL);
	for (size_t i = 0; i < it->nslots; i++)
		eachobs__handoff_put_free(&u->handoff, &it->slots[i]);
	if (workers > 0 &&
	    eachobs__deques_init(&u->deques, workers, it->nunits,
				 it->basesize, &it->load.limit) < 0)
		return eachobs__fail(-ENOMEM,
				     "out of memory for %u workers' deques",
				     workers);
	return 0;
}

static void fini(eachobs_iter *it)
{
	struct eachobs__unordered *u = U(it);

	if (!u)
		return;
	eachobs__deques_fini(&u->deques);
	eachobs__handoff_fini(&u->handoff);
	eachobs__free(u);
	it->ms = NULL;
}

/* A failure (STOP) halted everything; nothing more is loaded. */
static bool stopped(const eachobs_iter *it)
{
	return eachobs__halted_at(it, 0);
}

/* Worker self: claim up to max units from the deques (deque.h), with
 * what the claim cost counted in this worker's stats. */
static size_t claim(eachobs_iter *it, unsigned self, size_t max, size_t *first)
{
	struct eachobs__claim_cost cost;
	size_t got = eachobs__deques_claim(&U(it)->deques, self, max, first,
					   &cost);
	struct eachobs__stats *st = eachobs__tls_stats;

	if (st && cost.stole)
		eachobs__stat_add(&st->steals, 1);
	if (st && cost.wait_ns)
		eachobs__stat_add(&st->idle_ns, cost.wait_ns);
	return got;
}

/* Load indices [first, first + k) into free slots run[0..), whose credits
 * the caller holds; stop early on close or a failure (STOP). The number
 * loaded; *per_item_ns what each took, when any was. */
static size_t load_run(eachobs_iter *it, unsigned lane, void **run,
		       size_t first, size_t k, uint64_t *per_item_ns)
{
	uint64_t t0 = eachobs__now_ns();
	size_t n = 0;

	/* The credits cover these slots: a wait is for safety. Fewer only
	 * once halted, when nothing more is loaded. */
	k = eachobs__handoff_get_free_run(&U(it)->handoff, lane, run, k);
	for (; n < k; n++) {
		/* Checked right before getobs: once close has begun, no new
		 * getobs starts. */
		if (stopped(it))
			break;
		eachobs__fill_one(&it->load, run[n], first + n);
	}
	if (n) {
		uint64_t t1 = eachobs__now_ns();
		*per_item_ns = (t1 - t0) / n;
		eachobs__account(t0, t1, n);
	}
	return n;
}

/*
 * Unbatched: move observations in runs when getobs is cheap. Per item,
 * the hand-off costs a deque claim, an empty slot and, when the consumer
 * sleeps, a futex wake: with a no-op getobs that was nearly all the time.
 * A worker that measured its last getobs calls at under EACHOBS__CHEAP_NS
 * each claims up to EACHOBS__RUN_MAX consecutive indices at once, loads
 * them and publishes them together. Slow getobs calls stay one at a
 * time, so that what is not started stays stealable. The credits for the
 * whole run come first, before the claim, so that every slot it holds is
 * one the hand-off's invariant counts (handoff.h).
 */

static void run_unbatched(eachobs_iter *it, unsigned self)
{
	struct eachobs__handoff *h = &U(it)->handoff;
	void *run[EACHOBS__RUN_MAX];
	uint64_t per_item = UINT64_MAX; /* unknown: start one at a time */

	while (eachobs__turn(it, self)) {
		size_t want = per_item < EACHOBS__CHEAP_NS ? EACHOBS__RUN_MAX : 1;
		size_t c = eachobs__handoff_take_credits(h, want);
		size_t first, k = 0, n;
		if (c)
			k = claim(it, self, c, &first);
		if (k < c)
			eachobs__handoff_give_credits(h, c - k);
		if (k == 0) {
			/* No work left: producers asleep for room would
			 * stay parked until close (a give-back of unused
			 * credits crosses no step), keeping a pool's
			 * threads from other iterators; so would parked
			 * ones. */
			eachobs__handoff_wake(h);
			eachobs__tuning_finish(it);
			return;
		}
		n = load_run(it, self, run, first, k, &per_item);
		if (eachobs__closing(it))
			return;
		if (n < k)
			eachobs__handoff_give_credits(h, k - n);
		eachobs__handoff_publish(h, self, run, n);
	}
}

/*
 * The consumer helps like a worker when getobs is cheap: helping one
 * observation at a time cost a deque lock and a free-ring round trip per
 * item, and THREADED ran slower than BACKGROUND. Its run goes through
 * credits and its own lane, so it counts against buffersize like any
 * worker's, and the consumer then takes the observations out in the
 * usual way.
 */
static size_t help_run(eachobs_iter *it, uint64_t *per_item_ns)
{
	struct eachobs__unordered *u = U(it);
	struct eachobs__handoff *h = &u->handoff;
	void *run[EACHOBS__RUN_MAX];
	size_t c = eachobs__handoff_try_take_credits(h, EACHOBS__RUN_MAX);
	size_t first, k = 0, n;

	if (c)
		k = eachobs__deques_take(&u->deques, c, &first);
	if (k < c)
		eachobs__handoff_give_credits(h, c - k);
	n = k ? load_run(it, u->consumer_lane, run, first, k, per_item_ns)
	      : 0;
	if (n < k)
		eachobs__handoff_give_credits(h, k - n);
	eachobs__handoff_publish(h, u->consumer_lane, run, n);
	return n;
}

/* Batched: help fill the open batches while there are entries to claim;
 * false when close began while a completed batch waited for room. */
static bool help_open(eachobs_iter *it, unsigned self)
{
	struct eachobs__slot *done;

	while (eachobs__help(&it->load, self, SIZE_MAX, &done)) {
		if (done &&
		    !eachobs__handoff_put_ready(&U(it)->handoff, self, done))
			return false;
		eachobs__tick(it);
	}
	return true;
}

/*
 * Batched: take units and fill them, then help with the rest. While getobs
 * is slow, a thread opens a unit only when no open one has an entry left
 * to claim, and otherwise loads one entry at a time of the open unit that
 * is nearest completion (load.c), so the threads fill one batch together.
 */
static void worker(eachobs_iter *it, unsigned self)
{
	struct eachobs__slot *slot;
	size_t u;

	if (!it->batchsize) {
		run_unbatched(it, self);
		return;
	}
	while (eachobs__turn(it, self)) {
		bool cheap = eachobs__getobs_cheap(&it->load);
		if (!cheap && !help_open(it, self))
			return;
		if (!claim(it, self, 1, &u)) {
			eachobs__tuning_finish(it);
			break;
		}
		slot = eachobs__handoff_get_free(&U(it)->handoff, self);
		if (!slot || stopped(it))
			break;
		if (!cheap)
			eachobs__open(&it->load, slot, u);
		else if (eachobs__fill(&it->load, slot, u) &&
			 !eachobs__handoff_put_ready(&U(it)->handoff, self,
						     slot))
			return;
	}
	help_open(it, self);
}

/* ---- the consumer --------------------------------------------------- */

/* THREADED consumer: a free slot and an unclaimed unit for it, or NULL
 * (the consumer's own slot: it holds no other while it helps). */
static struct eachobs__slot *take_free_unit(eachobs_iter *it, size_t *u)
{
	struct eachobs__unordered *m = U(it);
	struct eachobs__slot *slot =
		eachobs__handoff_consumer_get_free(&m->handoff,
						   m->consumer_lane);

	if (slot && !eachobs__deques_take(&m->deques, 1, u)) {
		eachobs__handoff_put_free(&m->handoff, slot);
		slot = NULL;
	}
	return slot;
}

/* THREADED consumer, batched, nothing ready: help fill an open batch, or
 * take a unit and fill it. Returns a unit this call completed, if any;
 * *progress says whether it loaded anything. */
static struct eachobs__slot *help_batched(eachobs_iter *it, bool *progress)
{
	struct eachobs__slot *slot;
	size_t u;

	*progress = eachobs__help(&it->load, 0, SIZE_MAX, &slot) == 1;
	if (*progress)
		return slot;
	if (stopped(it) || !(slot = take_free_unit(it, &u)))
		return NULL;
	*progress = true;
	/* Slow getobs: open it to every thread and help it as they do. */
	if (!eachobs__getobs_cheap(&it->load)) {
		eachobs__open(&it->load, slot, u);
		return NULL;
	}
	return eachobs__fill(&it->load, slot, u) ? slot : NULL;
}

/* THREADED consumer with nothing ready: load one pending unit itself. */
static struct eachobs__slot *help_unordered(eachobs_iter *it, bool *progress)
{
	struct eachobs__unordered *m = U(it);
	struct eachobs__slot *slot;
	size_t u;

	if (it->batchsize)
		return help_batched(it, progress);
	*progress = false;
	if (stopped(it))
		return NULL;
	if (m->help_ns && m->help_ns < EACHOBS__CHEAP_NS) {
		*progress = help_run(it, &m->help_ns) > 0;
		return NULL;
	}
	uint64_t t0 = eachobs__now_ns();
	if (!(slot = take_free_unit(it, &u)))
		return NULL;
	*progress = true;
	eachobs__fill(&it->load, slot, u);
	m->help_ns = eachobs__now_ns() - t0;
	return slot;
}

/* What else wakes a consumer waiting for a ready unit: a failure whose
 * unit will not arrive, an interrupt. */
static bool failed_or_interrupted(const void *arg)
{
	const eachobs_iter *it = arg;

	return eachobs__failed(it) || eachobs__interrupted(it);
}

static void wait_ready(eachobs_iter *it)
{
	uint64_t t0 = eachobs__now_ns();

	eachobs__idle_begin(&it->cstats, t0);
	eachobs__handoff_wait_ready(&U(it)->handoff, failed_or_interrupted, it);
	eachobs__idle_end(&it->cstats, t0, eachobs__now_ns());
}

/* What waited in the hand-off comes first; then an interrupt, or a failure
 * whose unit will not arrive, ends the wait. Out of line: the common case,
 * a unit waiting, is take's alone and needs none of this loop's state. */
static __attribute__((noinline)) int take_slow(eachobs_iter *it,
					       struct eachobs__slot **out)
{
	bool progress = false;

	for (;;) {
		if (it->yielded == it->nunits)
			return 0;
		struct eachobs__slot *slot =
			eachobs__handoff_get_ready(&U(it)->handoff);
		if (!slot && eachobs__take_interrupt(it))
			return -EINTR;
		if (!slot && eachobs__failed(it))
			return EACHOBS__TAKE_FAILED;
		if (!slot && it->executor == EACHOBS_THREADED)
			slot = help_unordered(it, &progress);
		if (slot) {
			it->yielded++;
			*out = slot;
			return 1;
		}
		if (!progress)
			wait_ready(it);
	}
}

/* The slot the consumer takes after the next, when its lane has it
 * already: its lines then come while the consumer is busy with this
 * one (slot.h). */
static void prefetch_ahead(const eachobs_iter *it)
{
	const struct eachobs__slot *ahead = eachobs__handoff_peek_ready(
		&U(it)->handoff, EACHOBS__PREFETCH_AHEAD);

	if (ahead)
		eachobs__slot_prefetch(ahead);
}

static int take(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__slot *slot;

	if (it->yielded < it->nunits &&
	    (slot = eachobs__handoff_get_ready(&U(it)->handoff))) {
		prefetch_ahead(it);
		it->yielded++;
		*out = slot;
		return 1;
	}
	return take_slow(it, out);
}

static void give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	eachobs__handoff_put_free(&U(it)->handoff, slot);
}

/* A failure (STOP) halted all loading; the consumer may wait for a unit
 * that will now never arrive, loaders for credits. */
static void fail(eachobs_iter *it, size_t u)
{
	(void)u;
	eachobs__handoff_wake(&U(it)->handoff);
}

static void wake(eachobs_iter *it)
{
	if (U(it))
		eachobs__handoff_wake(&U(it)->handoff);
}

static size_t max_waiting(const eachobs_iter *it)
{
	return U(it)->handoff.max_waiting;
}

static void set_depth(eachobs_iter *it, size_t units, size_t least)
{
	eachobs__handoff_set_depth(&U(it)->handoff,
				   units < least ? least : units);
}

const struct eachobs__mode eachobs__unordered_mode = {
	.init = init,
	.fini = fini,
	.worker = worker,
	.take = take,
	.give_back = give_back,
	.fail = fail,
	.wake = wake,
	.max_waiting = max_waiting,
	.set_depth = set_depth,
};
