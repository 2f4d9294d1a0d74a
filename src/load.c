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
 * Why the slot bound still holds: every unit that is being filled, or is
 * complete and waiting for room, is tied to one thread: its owner while an
 * entry is unclaimed, else a thread still loading one of its entries, else
 * the thread that completed it. A thread is tied to at most one unit at a
 * time (a helper owns no unit), so at most workers + 1 (the consumer) units
 * are in flight, as without batches.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdint.h>

/* The iterator whose getobs runs on this thread, for eachobs_cancelled, and
 * where eachobs_set_length writes. Saved and restored around each call,
 * since a getobs may itself iterate another iterator. */
static EACHOBS__TLS const eachobs_iter *loading;
static EACHOBS__TLS size_t *loading_len;

bool eachobs_cancelled(void)
{
	return loading && eachobs__closing(loading);
}

int eachobs_set_length(size_t nbytes)
{
	if (!loading || nbytes > loading->data.obs_size)
		return -EINVAL;
	*loading_len = nbytes;
	return 0;
}

/* Run getobs for the entry at position pos into entry e of buf. */
static int call_getobs(eachobs_iter *it, const struct eachobs__buf *b,
		       size_t e, size_t pos)
{
	const eachobs_iter *outer = loading;
	size_t *outer_len = loading_len;
	size_t idx = eachobs__index_at(it, pos);

	b->idx[e] = idx;
	b->len[e] = it->data.obs_size;
	loading = it;
	loading_len = &b->len[e];
	int rc = it->data.getobs(it->data.ctx, idx,
				 b->data + e * it->data.obs_size);
	loading = outer;
	loading_len = outer_len;
	return rc > 0 ? -ERANGE : rc;
}

void eachobs__account(uint64_t t0, uint64_t t1, size_t loaded)
{
	struct eachobs__stats *st = eachobs__tls_stats;

	if (st && loaded) {
		eachobs__stat_add(&st->getobs_ns, t1 - t0);
		eachobs__stat_add(&st->loaded, loaded);
	}
}

/* Add what this thread loaded since t0 to its stats. A batch's run of
 * entries is timed as a whole: two clock reads per observation would cost
 * more than a cheap getobs (no-op batches ran at 7 M/s with them). */
static void account(uint64_t t0, size_t loaded)
{
	if (eachobs__tls_stats && loaded)
		eachobs__account(t0, eachobs__now_ns(), loaded);
}

/* Entry e of the slot for unit u: load it and record what getobs said. A
 * failure under on_error = STOP ends the claiming of units (not of the
 * entries of open batches, which complete so that the failure reaches the
 * consumer). */
static void load_entry(eachobs_iter *it, struct eachobs__slot *slot, size_t u,
		       size_t e)
{
	size_t pos = u * it->cap + e;
	int rc = call_getobs(it, &slot->b, e, pos);

	slot->b.status[e] = rc;
	if (rc == 0 || it->skip_errors)
		return;
	if (it->ordered)
		eachobs__order_fail(it, u);
	else
		atomic_store_explicit(&it->stop, true, memory_order_relaxed);
}

size_t eachobs__unit_count(const eachobs_iter *it, size_t u)
{
	size_t left = it->npos - u * it->cap;

	return left < it->cap ? left : it->cap;
}

/*
 * Make slot (owned by the caller) open for unit u. The claim word first
 * moves to a new generation with no claimable entry, so a helper that read
 * the previous generation's word cannot claim against the new count: its
 * compare-and-swap fails on the changed word.
 */
static void open_unit(eachobs_iter *it, struct eachobs__slot *slot, size_t u)
{
	uint64_t gen = (atomic_load_explicit(&slot->claim,
					     memory_order_relaxed) >>
			32) + 1;

	atomic_store_explicit(&slot->claim, gen << 32 | UINT32_MAX,
			      memory_order_relaxed);
	atomic_store_explicit(&slot->unit, u, memory_order_relaxed);
	atomic_store_explicit(&slot->count, eachobs__unit_count(it, u),
			      memory_order_relaxed);
	atomic_store_explicit(&slot->done, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&it->open_units, 1, memory_order_relaxed);
	atomic_store_explicit(&slot->claim, gen << 32, memory_order_release);
}

/*
 * Claim the next entries [*e, *e + *k) of slot's open unit; false when it
 * has none left. A quarter of what is left, at most CLAIM_MAX, at least 1:
 * one compare-and-swap per entry made the claim word the hottest line of a
 * no-op batch run (owner and helpers bounce it), while claiming a run lets
 * the tail of the batch still be shared out one entry at a time.
 * unit and count are read before the compare-and-swap, which succeeds only
 * if the claim word is still the one they were read under (see open_unit).
 * The acquire on success pairs with open_unit's release.
 */
enum { CLAIM_MAX = 16 };

static bool claim_entries(eachobs_iter *it, struct eachobs__slot *slot,
			  size_t *u, size_t *e, size_t *k)
{
	uint64_t w = atomic_load_explicit(&slot->claim, memory_order_acquire);

	for (;;) {
		size_t next = (uint32_t)w;
		size_t count = atomic_load_explicit(&slot->count,
						    memory_order_relaxed);
		size_t unit = atomic_load_explicit(&slot->unit,
						   memory_order_relaxed);
		if (next >= count)
			return false;
		size_t take = (count - next) / 4;
		take = take < 1 ? 1 : take > CLAIM_MAX ? CLAIM_MAX : take;
		if (atomic_compare_exchange_weak_explicit(
			    &slot->claim, &w, w + take, memory_order_acquire,
			    memory_order_acquire)) {
			*u = unit;
			*e = next;
			*k = take;
			/* Exactly one claim takes the last entry. */
			if (next + take == count)
				atomic_fetch_sub_explicit(&it->open_units, 1,
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

/* Owner: load claimed entries of slot until none is left to claim, and
 * count them done at the end, once (the unit cannot complete before its
 * owner's count is in, so the owner never misses being the completer). */
static bool load_claimed(eachobs_iter *it, struct eachobs__slot *slot)
{
	uint64_t t0 = eachobs__now_ns();
	size_t u, e, run, k = 0;

	while (!eachobs__closing(it) && claim_entries(it, slot, &u, &e, &run)) {
		for (size_t i = 0; i < run; i++)
			load_entry(it, slot, u, e + i);
		k += run;
	}
	account(t0, k);
	return k && entries_done(slot, k);
}

void eachobs__fill_one(eachobs_iter *it, struct eachobs__slot *slot, size_t u)
{
	atomic_store_explicit(&slot->unit, u, memory_order_relaxed);
	load_entry(it, slot, u, 0);
}

bool eachobs__fill(eachobs_iter *it, struct eachobs__slot *slot, size_t u)
{
	if (!it->batchsize) {
		uint64_t t0 = eachobs__now_ns();
		eachobs__fill_one(it, slot, u);
		account(t0, 1);
		return true;
	}
	open_unit(it, slot, u);
	return load_claimed(it, slot);
}

/* Where this thread last found an open unit, plus one: open units are
 * few, and usually where they were. 0: start at the caller's hint. */
static EACHOBS__TLS size_t help_from;

int eachobs__help(eachobs_iter *it, unsigned hint, struct eachobs__slot **done)
{
	size_t u, e, run, from = (help_from ? help_from - 1 : hint) % it->nslots;

	*done = NULL;
	if (atomic_load_explicit(&it->open_units, memory_order_relaxed) == 0)
		return 0;
	for (size_t k = 0; k < it->nslots && !eachobs__closing(it); k++) {
		size_t i = (from + k) % it->nslots;
		struct eachobs__slot *slot = &it->slots[i];
		if (!claim_entries(it, slot, &u, &e, &run))
			continue;
		help_from = i + 1;
		uint64_t t0 = eachobs__now_ns();
		for (size_t j = 0; j < run; j++)
			load_entry(it, slot, u, e + j);
		account(t0, run);
		if (entries_done(slot, run))
			*done = slot;
		return 1;
	}
	return 0;
}
