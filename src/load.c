/*
 * Loading a unit into a slot: one getobs for an observation, or batchsize
 * of them for a batch, written straight into their places in the batch
 * buffer.
 *
 * A batch may be filled by several threads. The thread that took the unit
 * (its owner) opens the slot, then claims entries one at a time from the
 * slot's `claim` word; a thread with no unit of its own left (a helper)
 * scans the slots for an open one and claims entries from it the same way.
 * Whoever loads the last entry (counted by `done`) completes the batch and
 * hands it on, so nobody waits for anybody inside a batch: the owner moves
 * on to its next unit as soon as every entry is claimed.
 *
 * How many entries one claim takes depends on what getobs costs on the
 * claiming thread: up to CLAIM_MAX while it is cheap (one compare-and-swap
 * per entry would cost more than the entry), one at a time otherwise, so
 * that a slow entry is never kept from an idle thread and a batch is
 * spread over every thread that can help. A thread whose getobs is slow
 * (or not measured yet) also helps the open batches before it opens one of
 * its own (ordered: those before its own): the threads then fill one batch
 * together, and the first batch is ready after about batchsize / P getobs
 * durations instead of batchsize.
 *
 * Every entry is checked right before its getobs: once close has begun,
 * or a failure under on_error = STOP has made the unit moot, no getobs
 * starts, also not for the rest of a claimed run. An abandoned batch never
 * completes; the consumer learns of the failure from the iterator's
 * failure record instead (eachobs__loader_failed).
 *
 * Why the slot bound still holds: every unit that is being filled, or is
 * complete and waiting for room, is tied to one thread: its owner while an
 * entry is unclaimed, else a thread still loading one of its entries, else
 * the thread that completed it. A thread is tied to at most one unit at a
 * time (a helper owns no unit), so at most workers + 1 (the consumer) units
 * are in flight, as without batches.
 */
#define _GNU_SOURCE
#include "load.h"
#include "error.h"

#include <errno.h>
#include <stdint.h>

/* What a getobs returned, as the code kept for its entry: a positive
 * value breaks the contract (-ERANGE), and -EINTR, a system call cut short
 * by a signal, becomes -ERESTART, so that it is never taken for the
 * non-sticky -EINTR of eachobs_interrupt. */
static inline int code_of(int rc)
{
	return rc > 0 ? -ERANGE : rc == -EINTR ? -ERESTART : rc;
}

/* The loader whose getobs runs on this thread, for eachobs_cancelled, and
 * where eachobs_set_length writes. Saved and restored around each call,
 * since a getobs may itself iterate another iterator. The entry is
 * loading_len - loading_lens in the unit buffer loading_data, for
 * eachobs_field. */
static EACHOBS__TLS const struct eachobs__loader *loading;
static EACHOBS__TLS size_t *loading_len;
static EACHOBS__TLS size_t *loading_lens;
static EACHOBS__TLS unsigned char *loading_data;
/* Whether eachobs_set_length refused a length during the record being
 * loaded (eachobs__load_record). */
static EACHOBS__TLS bool loading_refused;

/* What a getobs run saves of an enclosing one's. */
struct outer {
	const struct eachobs__loader *ld;
	size_t *len, *lens;
	unsigned char *data;
};

static inline struct outer enter(const struct eachobs__loader *ld,
				 struct eachobs__buf *b)
{
	struct outer o = { loading, loading_len, loading_lens, loading_data };

	loading = ld;
	loading_lens = b->len;
	loading_data = b->data;
	return o;
}

static inline void leave(struct outer o)
{
	loading = o.ld;
	loading_len = o.len;
	loading_lens = o.lens;
	loading_data = o.data;
}

static bool closing(const struct eachobs__loader *ld)
{
	return atomic_load_explicit(ld->closing, memory_order_acquire);
}

bool eachobs_cancelled(void)
{
	return loading && closing(loading);
}

int eachobs_set_length(size_t nbytes)
{
	if (!loading || !loading_len)
		return eachobs__fail(-EINVAL,
				     "eachobs_set_length: not called from "
				     "inside a getobs (or a stream's next) "
				     "that eachobs runs");
	if (nbytes > loading->layout->size[0]) {
		loading_refused = true;
		return eachobs__fail(-EINVAL,
				     "eachobs_set_length: nbytes %zu exceeds "
				     "%s %zu", nbytes,
				     loading->layout->n > 1 ? "fields[0]"
							    : "data->obs_size",
				     loading->layout->size[0]);
	}
	*loading_len = nbytes;
	return 0;
}

void *eachobs_field(size_t k)
{
	if (!loading || !loading_data || k >= loading->layout->n)
		return NULL;
	return eachobs__layout_at(loading->layout, loading_data, k,
				  (size_t)(loading_len - loading_lens));
}

/* Every loader's generation, process-wide: never 0, never repeated. */
static _Atomic uint64_t generations;

void eachobs__loader_setup(struct eachobs__loader *ld)
{
	ld->gen = atomic_fetch_add_explicit(&generations, 1,
					    memory_order_relaxed) + 1;
	atomic_init(&ld->limit, SIZE_MAX);
	pthread_mutex_init(&ld->fail.lock, NULL);
}

void eachobs__loader_fini(struct eachobs__loader *ld)
{
	pthread_mutex_destroy(&ld->fail.lock);
}

void eachobs__loader_failure(struct eachobs__loader *ld, int *code,
			     size_t *idx)
{
	pthread_mutex_lock(&ld->fail.lock);
	*code = ld->fail.code;
	*idx = ld->fail.idx;
	pthread_mutex_unlock(&ld->fail.lock);
}

void eachobs__account(uint64_t t0, uint64_t t1, size_t loaded)
{
	struct eachobs__stats *st = eachobs__tls_stats;

	if (st && loaded) {
		eachobs__stat_add(&st->getobs_ns, t1 - t0);
		eachobs__stat_add(&st->loaded, loaded);
	}
}

/*
 * A failure under on_error = STOP: keep the lowest failed position in the
 * record, then end the loading (unordered: everything; ordered: unit u
 * and those after it) and tell the owner (on_fail), which wakes the
 * consumer, which may be waiting for a batch that will now never
 * complete. The record is written before the stop is published, so
 * whoever sees the stop finds the record filled. Failures are rare: a
 * mutex is simplest.
 */
static __attribute__((cold, noinline)) void
record_failure(struct eachobs__loader *ld, size_t u, size_t pos, size_t idx,
	       int code)
{
	struct eachobs__failrec *f = &ld->fail;

	pthread_mutex_lock(&f->lock);
	if (!atomic_load_explicit(&f->set, memory_order_relaxed) ||
	    pos < f->pos) {
		f->pos = pos;
		f->idx = idx;
		f->code = code;
	}
	atomic_store_explicit(&f->set, true, memory_order_release);
	pthread_mutex_unlock(&f->lock);
	eachobs__loader_halt(ld, ld->halt_from_failed ? u : 0);
	ld->on_fail(ld->owner, u);
}

/* Whether no getobs may start for unit u: close has begun, or a failure
 * (STOP) made u moot. Checked right before every getobs, so it is one
 * load and one compare: the owner lowers the limit on a failure
 * (unordered to 0, ordered to the failed unit) and to 0 on close, after
 * `closing`, which it sets first for the waits and for eachobs_cancelled. */
static inline bool halted(const struct eachobs__loader *ld, size_t u)
{
	return u >= atomic_load_explicit(&ld->limit, memory_order_relaxed);
}

/* What one getobs costs on this thread, per entry of its last timed run
 * for the loader of generation cost_gen (another: not measured yet). A
 * generation, not the loader's address: a new iterator is often allocated
 * where the last one was, and must not inherit its verdict. */
static EACHOBS__TLS uint64_t cost_gen;
static EACHOBS__TLS uint64_t cost_ns;

uint64_t eachobs__getobs_cost(const struct eachobs__loader *ld)
{
	return cost_gen == ld->gen ? cost_ns : UINT64_MAX;
}

bool eachobs__getobs_cheap(const struct eachobs__loader *ld)
{
	return eachobs__getobs_cost(ld) < EACHOBS__CHEAP_NS;
}

/* Time k entries loaded since t0: this thread's cost estimate and stats. */
static void learn(const struct eachobs__loader *ld, uint64_t t0, size_t k)
{
	uint64_t t1 = eachobs__now_ns();

	cost_gen = ld->gen;
	cost_ns = (t1 - t0) / k;
	eachobs__account(t0, t1, k);
}

/* The original unit that unit u stands for: itself, unless resumed. */
static size_t origin(const struct eachobs__loader *ld, size_t u)
{
	return ld->remap ? eachobs__remap_unit(ld->remap, u) : u;
}

/* The first position of unit u. */
static size_t first_pos(const struct eachobs__loader *ld, size_t u)
{
	return origin(ld, u) * ld->cap;
}

/*
 * Load entries [e, e + k) of slot's unit u, stopping at the first that may
 * not start; the number loaded. Each getobs is told its loader and where
 * eachobs_set_length writes (`loading`, saved and restored around the run,
 * since a getobs may itself iterate another iterator), and what it
 * returned is recorded; a failure under STOP goes to the failure record.
 * The loop keeps the dataset and the buffer in locals: with a getobs that
 * does nothing, this loop is the library's whole cost per observation.
 */
static inline __attribute__((always_inline)) size_t
load_entries(struct eachobs__loader *ld, struct eachobs__slot *slot, size_t u,
	     size_t e, size_t k)
{
	struct outer outer = enter(ld, &slot->b);
	unsigned char *data = slot->b.data;
	size_t *idxs = slot->b.idx, *lens = slot->b.len;
	int *status = slot->b.status;
	int (*getobs)(void *, size_t, void *) = ld->getobs;
	void *ctx = ld->ctx;
	const struct eachobs__sampler *sampler = ld->sampler;
	/* Field 0's stride: obs_size without fields. */
	size_t sz = ld->layout->size[0], pos = first_pos(ld, u) + e, i = 0;

	for (; i < k && !halted(ld, u); i++, e++, pos++) {
		size_t idx = eachobs__sampler_index(sampler, pos);
		idxs[e] = idx;
		lens[e] = sz;
		loading_len = &lens[e];
		int rc = getobs(ctx, idx, data + e * sz);
		status[e] = code_of(rc);
		if (rc != 0 && !ld->skip_errors)
			record_failure(ld, u, pos, idx, status[e]);
	}
	leave(outer);
	return i;
}

/* Observations in unit u (the last batch may be short). */
static size_t unit_count(const struct eachobs__loader *ld, size_t u)
{
	size_t left = ld->npos - first_pos(ld, u);

	return left < ld->cap ? left : ld->cap;
}

/*
 * Make slot (owned by the caller) open for unit u. The claim word first
 * moves to a new generation with no claimable entry, so a helper that read
 * the previous generation's word cannot claim against the new count: its
 * compare-and-swap fails on the changed word.
 */
static void open_unit(struct eachobs__loader *ld, struct eachobs__slot *slot,
		      size_t u)
{
	uint64_t gen = (atomic_load_explicit(&slot->claim,
					     memory_order_relaxed) >>
			32) + 1;

	atomic_store_explicit(&slot->claim, gen << 32 | UINT32_MAX,
			      memory_order_relaxed);
	atomic_store_explicit(&slot->unit, u, memory_order_relaxed);
	atomic_store_explicit(&slot->count, unit_count(ld, u),
			      memory_order_relaxed);
	atomic_store_explicit(&slot->done, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&ld->open_units, 1, memory_order_relaxed);
	atomic_store_explicit(&slot->claim, gen << 32, memory_order_release);
}

/*
 * Claim the next entries [*e, *e + *k) of slot's open unit, if that unit is
 * below bound; false when it has none left. While getobs is cheap, a
 * quarter of what is left, at most CLAIM_MAX, at least CLAIM_MIN (or what
 * is left): one compare-and-swap per entry made the claim word the hottest
 * line of a no-op batch run (owner and helpers bounce it), while claiming
 * a run lets the tail of the batch still be shared out. A tail of cheap
 * entries is not worth a claim each: at least CLAIM_MIN keeps the claims
 * from costing as much as the entries. Else one.
 * unit and count are read before the compare-and-swap, which succeeds only
 * if the claim word is still the one they were read under (see open_unit).
 * The acquire on success pairs with open_unit's release.
 */
enum { CLAIM_MIN = 8, CLAIM_MAX = 16 };

static inline __attribute__((always_inline)) bool
claim_entries(struct eachobs__loader *ld, struct eachobs__slot *slot, size_t bound,
	      bool cheap, size_t *u, size_t *e, size_t *k)
{
	uint64_t w = atomic_load_explicit(&slot->claim, memory_order_acquire);

	for (;;) {
		size_t next = (uint32_t)w;
		size_t count = atomic_load_explicit(&slot->count,
						    memory_order_relaxed);
		size_t unit = atomic_load_explicit(&slot->unit,
						   memory_order_relaxed);
		if (next >= count || unit >= bound)
			return false;
		size_t left = count - next, take = 1;
		if (cheap) {
			take = left / 4 < CLAIM_MIN ? CLAIM_MIN : left / 4;
			take = take > CLAIM_MAX ? CLAIM_MAX : take;
			take = take > left ? left : take;
		}
		if (atomic_compare_exchange_weak_explicit(
			    &slot->claim, &w, w + take, memory_order_acquire,
			    memory_order_acquire)) {
			*u = unit;
			*e = next;
			*k = take;
			/* Exactly one claim takes the last entry. */
			if (next + take == count)
				atomic_fetch_sub_explicit(&ld->open_units, 1,
							  memory_order_relaxed);
			return true;
		}
	}
}

/* Count k loaded entries; true for the count that completes the unit.
 * acq_rel: the completing thread must see every other loader's writes. */
static bool entries_done(struct eachobs__slot *slot, size_t k)
{
	size_t count = atomic_load_explicit(&slot->count, memory_order_relaxed);

	return atomic_fetch_add_explicit(&slot->done, k,
					 memory_order_acq_rel) + k == count;
}

/*
 * Owner: load claimed entries of slot until none is left to claim, and
 * count them done at the end, once (the unit cannot complete before its
 * owner's count is in, so the owner never misses being the completer).
 * While getobs is cheap the whole loop is timed once (two clock reads per
 * run would cost more than the entries); else each run, so that the
 * estimate follows.
 */
static bool load_claimed(struct eachobs__loader *ld, struct eachobs__slot *slot)
{
	uint64_t t0 = eachobs__now_ns();
	size_t u, e, run, k = 0, timed = 0;
	bool cheap = eachobs__getobs_cheap(ld);

	while (claim_entries(ld, slot, SIZE_MAX, cheap, &u, &e, &run)) {
		size_t n = load_entries(ld, slot, u, e, run);
		k += n;
		if (n < run) /* halted: the unit will not complete */
			break;
		if (!cheap) {
			learn(ld, t0, k - timed);
			timed = k;
			t0 = eachobs__now_ns();
			cheap = eachobs__getobs_cheap(ld);
		}
	}
	if (k > timed)
		learn(ld, t0, k - timed);
	return k && entries_done(slot, k);
}

void eachobs__fill_one(struct eachobs__loader *ld, struct eachobs__slot *slot,
		       size_t u)
{
	atomic_store_explicit(&slot->unit, u, memory_order_relaxed);
	/* The caller checked for close and failures right before. */
	struct eachobs__buf *b = &slot->b;
	struct outer outer = enter(ld, b);
	size_t pos = first_pos(ld, u);
	size_t idx = eachobs__sampler_index(ld->sampler, pos);

	b->idx[0] = idx;
	b->len[0] = ld->layout->size[0];
	loading_len = &b->len[0];
	int rc = ld->getobs(ld->ctx, idx, b->data);
	leave(outer);
	b->status[0] = code_of(rc);
	if (rc != 0 && !ld->skip_errors)
		record_failure(ld, u, pos, idx, b->status[0]);
}

bool eachobs__fill(struct eachobs__loader *ld, struct eachobs__slot *slot,
		   size_t u)
{
	if (!ld->batched) {
		uint64_t t0 = eachobs__now_ns();
		eachobs__fill_one(ld, slot, u);
		learn(ld, t0, 1);
		return true;
	}
	open_unit(ld, slot, u);
	return load_claimed(ld, slot);
}

void eachobs__open(struct eachobs__loader *ld, struct eachobs__slot *slot,
		   size_t u)
{
	open_unit(ld, slot, u);
}

bool eachobs__fill_step(struct eachobs__loader *ld, struct eachobs__slot *slot)
{
	uint64_t t0 = eachobs__now_ns();
	size_t u, e, run;

	if (!claim_entries(ld, slot, SIZE_MAX, eachobs__getobs_cheap(ld), &u,
			   &e, &run))
		return false;
	size_t n = load_entries(ld, slot, u, e, run);
	if (n)
		learn(ld, t0, n);
	return n == run && entries_done(slot, run);
}

/* Load the claimed entries [e, e + k) of slot's unit u as a helper; 1,
 * with *done the slot when that completed the unit; 0 when halted before
 * any. */
static int load_helped(struct eachobs__loader *ld, struct eachobs__slot *slot,
		       size_t u, size_t e, size_t k,
		       struct eachobs__slot **done)
{
	uint64_t t0 = eachobs__now_ns();
	size_t n = load_entries(ld, slot, u, e, k);

	if (n == 0)
		return 0;
	learn(ld, t0, n);
	/* A halted unit never completes: nobody hands it on. */
	if (n == k && entries_done(slot, k))
		*done = slot;
	return 1;
}

/*
 * The open unit below bound that slow loaders should fill first: ordered,
 * the lowest (the consumer needs it first); unordered, the one with the
 * fewest unclaimed entries, so that threads converge on one batch instead
 * of each keeping to its own. A snapshot: the caller's claim re-checks.
 */
static struct eachobs__slot *best_open(struct eachobs__loader *ld,
				       size_t bound)
{
	struct eachobs__slot *best = NULL;
	size_t best_key = SIZE_MAX;

	for (size_t i = 0; i < ld->nslots; i++) {
		struct eachobs__slot *slot = &ld->slots[i];
		size_t next = (uint32_t)atomic_load_explicit(
			&slot->claim, memory_order_relaxed);
		size_t count = atomic_load_explicit(&slot->count,
						    memory_order_relaxed);
		size_t unit = atomic_load_explicit(&slot->unit,
						   memory_order_relaxed);
		if (next >= count || unit >= bound)
			continue;
		size_t key = ld->lowest_first ? unit : count - next;
		if (key < best_key) {
			best = slot;
			best_key = key;
		}
	}
	return best;
}

static int help_slow(struct eachobs__loader *ld, size_t bound,
		     struct eachobs__slot **done)
{
	struct eachobs__slot *slot;
	size_t u, e, run;

	while (!closing(ld) && (slot = best_open(ld, bound)))
		if (claim_entries(ld, slot, bound, false, &u, &e, &run))
			return load_helped(ld, slot, u, e, run, done);
	return 0;
}

/* Where this thread last found an open unit, plus one: open units are
 * few, and usually where they were. 0: start at the caller's hint. */
static EACHOBS__TLS size_t help_from;

int eachobs__help(struct eachobs__loader *ld, unsigned hint, size_t bound,
		  struct eachobs__slot **done)
{
	size_t u, e, run, from = (help_from ? help_from - 1 : hint) % ld->nslots;

	*done = NULL;
	if (atomic_load_explicit(&ld->open_units, memory_order_relaxed) == 0)
		return 0;
	if (!eachobs__getobs_cheap(ld))
		return help_slow(ld, bound, done);
	for (size_t k = 0; k < ld->nslots && !closing(ld); k++) {
		size_t i = (from + k) % ld->nslots;
		struct eachobs__slot *slot = &ld->slots[i];
		if (!claim_entries(ld, slot, bound, true, &u, &e, &run))
			continue;
		help_from = i + 1;
		return load_helped(ld, slot, u, e, run, done);
	}
	return 0;
}

int eachobs__load_record(struct eachobs__loader *ld, struct eachobs__buf *b,
			 size_t e, size_t idx,
			 int (*next)(void *ctx, void *state, void *obs),
			 void *state)
{
	struct outer outer = enter(ld, b);
	bool refused = loading_refused;
	size_t sz = ld->layout->size[0];
	uint64_t t0 = eachobs__now_ns();

	b->idx[e] = idx;
	b->len[e] = sz;
	loading_len = &b->len[e];
	loading_refused = false;
	int rc = next(ld->ctx, state, b->data + e * sz);
	if (rc == 1 && loading_refused)
		rc = -EMSGSIZE;
	loading_refused = refused;
	leave(outer);
	eachobs__account(t0, eachobs__now_ns(), rc != 0);
	if (rc > 1)
		rc = -ERANGE;
	else if (rc < 0)
		rc = code_of(rc);
	b->status[e] = rc < 0 ? rc : 0;
	return rc;
}

/* Around a stream's open or seek: eachobs_cancelled answers for ld, and
 * there is no record for eachobs_set_length or eachobs_field. */
static struct outer enter_call(const struct eachobs__loader *ld)
{
	struct outer o = { loading, loading_len, loading_lens, loading_data };

	loading = ld;
	loading_len = loading_lens = NULL;
	loading_data = NULL;
	return o;
}

static int call_code(int rc)
{
	return rc < 0 ? code_of(rc) : rc > 0 ? -ERANGE : 0;
}

int eachobs__load_open(struct eachobs__loader *ld,
		       int (*open)(void *ctx, size_t shard, void **state),
		       size_t shard, void **state)
{
	struct outer o = enter_call(ld);

	*state = NULL;
	int rc = open(ld->ctx, shard, state);
	leave(o);
	return call_code(rc);
}

int eachobs__load_seek(struct eachobs__loader *ld,
		       int (*seek)(void *ctx, void *state, size_t record),
		       void *state, size_t record)
{
	struct outer o = enter_call(ld);
	int rc = seek(ld->ctx, state, record);

	leave(o);
	return call_code(rc);
}
