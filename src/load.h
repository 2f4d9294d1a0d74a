/*
 * Running getobs: a unit (one observation, or a batch several threads
 * fill) loaded into a slot, each entry checked against a limit right
 * before its getobs, failures under on_error = STOP kept in one record.
 *
 * Knows nothing of iterators: a loader is told, at start, the dataset,
 * which index each position visits (the sampler, and the map of a resumed
 * iteration's units), the slots batches are filled in, and whom to tell
 * of a failure. Any thread may load; the owner lowers the limit to stop.
 */
#ifndef EACHOBS_LOAD_H
#define EACHOBS_LOAD_H

#include "base.h"
#include "eachobs.h"
#include "layout.h"
#include "resume.h"
#include "sampler.h"
#include "slot.h"

#include <pthread.h>

/* A getobs under EACHOBS__CHEAP_NS is cheap: loaders then move up to
 * EACHOBS__RUN_MAX observations at a time (see unordered.c). */
enum { EACHOBS__RUN_MAX = 16, EACHOBS__CHEAP_NS = 2000 };

/*
 * The lowest failed position under on_error = STOP, for a consumer whose
 * failed unit will never complete (its other entries are not loaded once
 * the failure is known). Written under lock; `set` is stored with release
 * after the fields, so a reader that sees it (acquire) may read them under
 * the lock.
 */
struct eachobs__failrec {
	pthread_mutex_t lock;
	_Atomic bool set;
	size_t pos;
	size_t idx;
	int code;
};

struct eachobs__loader {
	/* Set by eachobs__loader_setup: unique in the process, so that what
	 * a thread learnt of another loader's getobs is never taken for this
	 * one's (load.c). */
	uint64_t gen;
	/* The owner's, set after eachobs__loader_setup and before any
	 * thread loads; read-only from then on. */
	int (*getobs)(void *ctx, size_t idx, void *obs);
	void *ctx;
	size_t obs_size;
	const struct eachobs__layout *layout; /* getobs's obs is field 0 */
	const struct eachobs__sampler *sampler;
	const struct eachobs__remap *remap; /* NULL: units are the original */
	size_t npos;         /* positions iterated */
	size_t cap;          /* observations per unit */
	bool batched;
	bool skip_errors;    /* on_error = SKIP: no failure record */
	bool lowest_first;   /* slow helpers fill the lowest open unit first
			      * (ordered), else the one nearest completion */
	bool halt_from_failed; /* a failure at unit u halts u and the units
				* after it (ordered), else every unit */
	struct eachobs__slot *slots; /* where open batches are found */
	size_t nslots;
	const _Atomic bool *closing; /* eachobs_cancelled's answer */
	/* A getobs failed under STOP at unit u (the record is written and
	 * the limit lowered): on_fail(owner, u) wakes whoever waits for
	 * what will not come. Any loading thread; the owner is opaque
	 * here. */
	void (*on_fail)(eachobs_iter *owner, size_t u);
	eachobs_iter *owner;

	/* The lowest unit no getobs may start for: SIZE_MAX until lowered
	 * (eachobs__loader_halt). Checked right before every getobs. */
	_Atomic size_t limit EACHOBS__ALIGNED;
	/* Batched: units opened whose entries are not all claimed yet, so
	 * that a thread looking for one to help with need not scan every
	 * slot when there is none. */
	_Atomic size_t open_units EACHOBS__ALIGNED;
	struct eachobs__failrec fail EACHOBS__ALIGNED;
};

/* Before anything can fail: no limit, an empty failure record. */
void eachobs__loader_setup(struct eachobs__loader *ld);
/* When no thread loads any more. */
void eachobs__loader_fini(struct eachobs__loader *ld);

/* Lower the limit to u (never raise it): no getobs starts for unit u or a
 * later one. 0 stops every load (close). Any thread. Release: a thread
 * that sees the lowered limit with acquire sees the failure record
 * written before it. */
static inline void eachobs__loader_halt(struct eachobs__loader *ld, size_t u)
{
	eachobs__atomic_lower(&ld->limit, u, memory_order_release);
}

/* Whether the failure record is filled (the consumer may read it). */
static inline bool eachobs__loader_failed(const struct eachobs__loader *ld)
{
	return atomic_load_explicit(&ld->fail.set, memory_order_acquire);
}

/* After eachobs__loader_failed: the lowest failure's code and index. */
void eachobs__loader_failure(struct eachobs__loader *ld, int *code,
			     size_t *idx);

/* Load unit u into slot, which the caller owns; other threads may help
 * with a batch. True when the caller completed the unit and must hand it
 * on; false when a helper will (or the limit stopped it). */
bool eachobs__fill(struct eachobs__loader *ld, struct eachobs__slot *slot,
		   size_t u);
/* Unbatched, untimed: load unit u into slot (the caller checked the limit
 * right before). A run of them is timed once (two clock reads cost more
 * than a cheap getobs) and added to this thread's stats with
 * eachobs__account(t0, t1, count). */
void eachobs__fill_one(struct eachobs__loader *ld, struct eachobs__slot *slot,
		       size_t u);
void eachobs__account(uint64_t t0, uint64_t t1, size_t loaded);
/* Batched: load unclaimed entries of an open batch whose unit is below
 * bound, scanning the slots from hint. 0 when there was none; 1 after
 * loading, with *done the slot when that completed its unit (the caller
 * hands it on), else NULL. */
int eachobs__help(struct eachobs__loader *ld, unsigned hint, size_t bound,
		  struct eachobs__slot **done);
/* Batched, getobs slow: make slot (owned by the caller) open for unit u
 * and leave its entries to eachobs__help, the caller's included. */
void eachobs__open(struct eachobs__loader *ld, struct eachobs__slot *slot,
		   size_t u);
/* SERIAL, batched: load the next claimable entries of slot's open unit;
 * true when that completed the unit. */
bool eachobs__fill_step(struct eachobs__loader *ld, struct eachobs__slot *slot);
/* What one getobs costs on this thread for this loader, in ns, as last
 * measured (see load.c); UINT64_MAX while it has not been measured here. */
uint64_t eachobs__getobs_cost(const struct eachobs__loader *ld);
/* Whether getobs measured cheap on this thread for this loader: runs
 * then, and no help before opening a unit. */
bool eachobs__getobs_cheap(const struct eachobs__loader *ld);

/* Streams: entry e of b is the record next(ctx, state, obs) writes, named
 * idx, run as a getobs is (eachobs_set_length, eachobs_field,
 * eachobs_cancelled work inside it) and counted in this thread's stats.
 * Returns 1 (written), 0 (the shard ended) or a code, also kept in the
 * entry's status: a positive value other than 1 is -ERANGE, -EINTR
 * -ERESTART, and a record eachobs_set_length refused -EMSGSIZE. The
 * caller checked the halt word right before. */
int eachobs__load_record(struct eachobs__loader *ld, struct eachobs__buf *b,
			 size_t e, size_t idx,
			 int (*next)(void *ctx, void *state, void *obs),
			 void *state);
/* Streams: open(ctx, shard, state) and seek(ctx, state, record), run
 * where eachobs_cancelled answers for this loader; 0 or a code (a
 * positive value is -ERANGE, -EINTR -ERESTART). */
int eachobs__load_open(struct eachobs__loader *ld,
		       int (*open)(void *ctx, size_t shard, void **state),
		       size_t shard, void **state);
int eachobs__load_seek(struct eachobs__loader *ld,
		       int (*seek)(void *ctx, void *state, size_t record),
		       void *state, size_t record);

#endif /* EACHOBS_LOAD_H */
