/*
 * The ordered mode's loaders and consumer: units claimed in order from the
 * window (window.c), loaded (load.c) into the slot of their place, and
 * taken by the consumer in order. The THREADED consumer helps when that
 * pays.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "window.h"

#include <errno.h>
#include <string.h>

/* The mode's state (it->ms). */
struct eachobs__ordered {
	struct eachobs__window window; /* one place per slot */
	/* The consumer's own. */
	unsigned waits;     /* waits without helping */
	size_t max_waiting; /* most units loaded ahead */
	bool owes;          /* a batch it opened may have entries left to
			     * claim (help) */
	uint64_t help_ns;   /* THREADED: what its last help took per
			     * observation (0: not measured yet) */
	bool depth_set;     /* autotune set the window's least depth */
};

static struct eachobs__ordered *O(const eachobs_iter *it)
{
	return it->ms;
}

static int init(eachobs_iter *it, unsigned workers)
{
	struct eachobs__ordered *o = eachobs__alloc_aligned(sizeof(*o));

	(void)workers;
	if (!o)
		return eachobs__fail(-ENOMEM, "out of memory for the ordered "
				     "mode's state");
	memset(o, 0, sizeof(*o));
	it->ms = o;
	if (eachobs__window_init(&o->window, it->nslots, it->nunits,
				 &it->load.limit) < 0)
		return eachobs__fail(-ENOMEM,
				     "out of memory for the reorder window "
				     "(%zu places)",
				     it->nslots);
	return 0;
}

static void fini(eachobs_iter *it)
{
	struct eachobs__ordered *o = O(it);

	if (!o)
		return;
	eachobs__window_fini(&o->window);
	eachobs__free(o);
	it->ms = NULL;
}

static struct eachobs__slot *slot_of(eachobs_iter *it, size_t i)
{
	return &it->slots[i % it->nslots];
}

static void publish(eachobs_iter *it, struct eachobs__slot *slot)
{
	eachobs__window_publish(&O(it)->window,
				atomic_load_explicit(&slot->unit,
						     memory_order_relaxed));
}

/* Batched: load entries of the open batches below bound; false when
 * there is none. */
static bool help_entry(eachobs_iter *it, unsigned hint, size_t bound)
{
	struct eachobs__slot *done;

	if (!it->batchsize || !eachobs__help(&it->load, hint, bound, &done))
		return false;
	if (done)
		publish(it, done);
	return true;
}

/*
 * Load unit u into its slot, which must be free, and publish it unless a
 * helper completes it (then the helper publishes). A batch whose getobs is
 * slow is opened to every thread and filled lowest unit first (load.c):
 * the caller loads entries of u and of the open units before it until u
 * has none left to claim.
 */
static void load_and_publish(eachobs_iter *it, size_t u)
{
	struct eachobs__slot *slot = slot_of(it, u);

	if (!it->batchsize || eachobs__getobs_cheap(&it->load)) {
		if (eachobs__fill(&it->load, slot, u))
			publish(it, slot);
		return;
	}
	eachobs__open(&it->load, slot, u);
	while (help_entry(it, 0, u + 1))
		eachobs__tick(it);
}

/* Unbatched loads that did not wait, k of them since t0: into the stats,
 * and what each took into *per_item_ns. */
static void account_run(uint64_t t0, size_t *k, uint64_t *per_item_ns)
{
	if (*k == 0)
		return;
	uint64_t t1 = eachobs__now_ns();
	eachobs__account(t0, t1, *k);
	*per_item_ns = (t1 - t0) / *k;
	*k = 0;
}

/* A loader's unbatched units [*from, to), loaded, not published yet. */
static void publish_pending(struct eachobs__window *win, size_t *from,
			    size_t to)
{
	if (*from < to)
		eachobs__window_publish_run(win, *from, to);
	*from = to;
}

/*
 * Load the claimed [lo, hi) in order, each once its slot is free; false
 * when close began or a failure below hi ended the loading. Unbatched,
 * the loads between two waits are timed together: two clock reads per
 * observation cost more than a cheap getobs. A cheap getobs's units are
 * published in runs of EACHOBS__RUN_MAX, with one wake-up: per unit, the
 * wake-up's fence was most of what a no-op load cost. A slow one's are
 * published one by one, as soon as each is loaded. *seen is the
 * worker's count of the consumer's releases (window_room_seen).
 */
static bool load_chunk(eachobs_iter *it, size_t lo, size_t hi,
		       uint64_t *per_item_ns, size_t *seen)
{
	struct eachobs__window *win = &O(it)->window;
	bool cheap = *per_item_ns < EACHOBS__CHEAP_NS;
	uint64_t t0 = 0;
	size_t k = 0, from = lo;

	for (size_t i = lo; i < hi; i++) {
		if (!eachobs__window_room_seen(win, i, seen)) {
			publish_pending(win, &from, i);
			account_run(t0, &k, per_item_ns);
			eachobs__window_wait_room(win, i);
		}
		/* Claims rise, so once i is past a failure every later index
		 * is too: nobody will ask for them. */
		if (eachobs__halted_at(it, i)) {
			publish_pending(win, &from, i);
			account_run(t0, &k, per_item_ns);
			return false;
		}
		if (it->batchsize) {
			load_and_publish(it, i);
			from = i + 1;
			continue;
		}
		if (k++ == 0)
			t0 = eachobs__now_ns();
		eachobs__fill_one(&it->load, slot_of(it, i), i);
		if (!cheap || i + 1 - from >= EACHOBS__RUN_MAX)
			publish_pending(win, &from, i + 1);
	}
	publish_pending(win, &from, hi);
	account_run(t0, &k, per_item_ns);
	return true;
}

/* The most positions a claim takes: basesize, or under autotune the
 * depth's share per worker loading now (start.c says why): claims past
 * the depth would wait for room while open batches below want help. */
static size_t claim_max(const eachobs_iter *it)
{
	size_t share, depth;

	if (!it->tuning)
		return it->basesize;
	depth = eachobs__window_depth(&O(it)->window) -
		(it->nslots - it->buffersize);
	share = depth / (2 * (size_t)eachobs__tuning_loaders(it));
	share = share ? share : 1;
	return share < it->basesize ? share : it->basesize;
}

static void worker(eachobs_iter *it, unsigned self)
{
	uint64_t per_item = UINT64_MAX; /* unknown: publish one by one */
	size_t lo, hi, seen = 0; /* the consumer's releases, as last read */

	for (;;) {
		if (!eachobs__turn(it, self))
			return;
		if (!eachobs__window_claim(&O(it)->window, claim_max(it),
					   it->nunits,
					   eachobs__tuning_loaders(it), &lo,
					   &hi))
			break;
		if (!load_chunk(it, lo, hi, &per_item, &seen))
			return;
	}
	eachobs__tuning_finish(it);
	while (help_entry(it, self, SIZE_MAX))
		eachobs__tick(it);
}

/* The consumer's unit m is at or past the lowest failure (STOP). */
static bool failed_at(const eachobs_iter *it, size_t m)
{
	return eachobs__halted_at(it, m) && eachobs__failed(it);
}

struct consumer_wait {
	const eachobs_iter *it;
	size_t unit;
};

/* What else wakes the consumer waiting for its unit: an interrupt, a
 * failure at or before it. */
static bool interrupted_or_failed(const void *arg)
{
	const struct consumer_wait *w = arg;

	return eachobs__interrupted(w->it) || failed_at(w->it, w->unit);
}

/*
 * THREADED consumer: load one more index instead of sleeping. Only indices
 * whose slot the consumer itself already let go are taken, so it never
 * waits for room.
 *
 * Not when getobs is cheap: the index the consumer waits for is then
 * almost always a few hundred nanoseconds away, or held by a worker the
 * consumer's own helping keeps off a core (P = 2 threads and the consumer
 * on 2 cores); each help also takes an index out of the workers' chunks.
 * No-op ordered ran at half BACKGROUND's rate that way. It still helps
 * one wait in 64, to notice getobs growing dear.
 *
 * A slow batch the consumer claims is only opened, and each help loads
 * one entry, so that the consumer looks at its unit and at an interrupt
 * after every getobs it runs. Until nothing it could claim is left, it
 * owes that batch its help: workers may all be waiting for room behind
 * it, so it must not sleep first.
 */
static bool help(eachobs_iter *it)
{
	struct eachobs__ordered *o = O(it);
	size_t bound = atomic_load_explicit(&it->load.limit,
					    memory_order_relaxed), lo, hi;

	if (!o->owes && o->help_ns && o->help_ns < EACHOBS__CHEAP_NS &&
	    (++o->waits & 63) != 0)
		return false;
	/* next + the places in use, saturated: n may be near SIZE_MAX. */
	size_t places = eachobs__window_depth(&o->window);
	if (bound - it->yielded > places)
		bound = it->yielded + places;
	uint64_t t0 = eachobs__now_ns();
	if (!help_entry(it, 0, SIZE_MAX)) {
		o->owes = false;
		if (!eachobs__window_claim(&o->window, 1, bound, 0, &lo, &hi))
			return false;
		if (it->batchsize && !eachobs__getobs_cheap(&it->load)) {
			eachobs__open(&it->load, slot_of(it, lo), lo);
			o->owes = true;
			return true;
		}
		load_and_publish(it, lo);
	}
	o->help_ns = eachobs__now_ns() - t0;
	return true;
}

static int take(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__ordered *o = O(it);
	size_t m = it->yielded;

	if (m >= it->nunits)
		return 0;
	struct consumer_wait w = { it, m };
	for (;;) {
		if (eachobs__window_loaded(&o->window, m))
			break;
		if (eachobs__take_interrupt(it))
			return -EINTR;
		if (failed_at(it, m))
			return EACHOBS__TAKE_FAILED;
		if (it->executor == EACHOBS_THREADED && help(it))
			continue;
		eachobs__window_wait_loaded(&o->window, m,
					    interrupted_or_failed, &w);
	}
	/* Claimed indices ahead of the consumer inside the window are loaded
	 * or being loaded; those beyond it wait for room, not for us. One
	 * unit in 16 (the stats' sampling, as unordered): the claim counter
	 * is the loaders' line. */
	if ((m & 15) == 0) {
		size_t ahead = eachobs__window_claimed(&o->window) - m - 1;
		if (ahead > it->nslots - 1)
			ahead = it->nslots - 1;
		if (ahead > o->max_waiting)
			o->max_waiting = ahead;
	}
	it->yielded = m + 1;
	*out = slot_of(it, m);
	return 1;
}

static void give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	eachobs__window_release(&O(it)->window,
				atomic_load_explicit(&slot->unit,
						     memory_order_relaxed));
}

/* Nothing at or past u is loaded any more (the halt word); the consumer
 * may wait on u's place, which will now never be published. */
static void fail(eachobs_iter *it, size_t u)
{
	(void)u;
	eachobs__window_wake(&O(it)->window);
}

static void wake(eachobs_iter *it)
{
	/* Zeroed events are valid ones: also after a failed init. */
	if (O(it))
		eachobs__window_wake(&O(it)->window);
}

static size_t max_waiting(const eachobs_iter *it)
{
	return O(it)->max_waiting;
}

/* The window's places beyond buffersize (the workers' and the hold's)
 * stay in use: the depth is what may wait loaded. */
static void set_depth(eachobs_iter *it, size_t units, size_t least)
{
	struct eachobs__window *win = &O(it)->window;
	size_t extra = it->nslots - it->buffersize;

	if (!O(it)->depth_set) {
		eachobs__window_allow_depth(win, least + extra);
		O(it)->depth_set = true;
	}
	eachobs__window_set_depth(win, units + extra);
}

const struct eachobs__mode eachobs__ordered_mode = {
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
